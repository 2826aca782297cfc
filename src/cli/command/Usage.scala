package asyncpipe.cli.command

/** The forms of the command line, and the tokens that ask for help or for the version (the help
  * texts themselves are the verbs' and [[asyncpipe.cli.Help]]'s).
  */
object Usage:
  /** The command line's forms, for usage errors that concern no one verb. */
  val topSynopsis: String = "asyncpipe FROM [TO] | asyncpipe 'A | STAGE | B' | asyncpipe VERB [OPTIONS] [ARGS]"

  /** True when `args` ask for help before any `--` (after it, the tokens belong to a command).
    */
  def asksForHelp(args: Seq[String]): Boolean =
    val it = args.iterator
    while it.hasNext do
      val token = it.next()
      if token == "--" then return false
      if isHelpFlag(token) then return true
    false

  def isHelpFlag(token: String): Boolean = token == "--help" || token == "-h"
  def isVersionFlag(token: String): Boolean = token == "--version" || token == "-V"
