package asyncpipe.cli

/** The texts of `asyncpipe --help` and `--version`, built from the verb table and address forms. */
object Help:
  val topSynopsis: String = "asyncpipe FROM [TO] | asyncpipe 'A | STAGE | B' | asyncpipe VERB [OPTIONS] [ARGS]"

  /** The address forms (design section 4); the address parser of the pipeline stages owns the rules. */
  val addressForms: Seq[(String, String)] = Seq(
    "-" -> "standard input as a source, standard output as a sink",
    "file:PATH[,append][,follow][,fsync]" -> "a file: read as a source, written (or appended) as a sink; '\\,' is a comma in PATH",
    "udp:PORT[,rcvbuf=SIZE]" -> "receive datagrams on PORT (0: a free port, told on stderr), all interfaces (a source)",
    "udp:HOST:PORT[,rcvbuf=SIZE]" -> "receive bound to HOST as a source; send to HOST:PORT as a sink; [IPv6]",
    "tick:DURATION[,count=N]" -> "a timer source: one frame every DURATION"
  )

  /** The schemes of the address forms above (`file`, `udp`, `tick`); lazy: --version needs none
    * of its closures.
    */
  lazy val addressSchemes: Set[String] = addressForms.map(_._1).collect { case f if f.contains(':') => f.takeWhile(_ != ':') }.toSet

  def version: String = s"asyncpipe ${BuildInfo.version}\n"

  def top(verbs: Seq[Verb]): String =
    val later = " (not in this version yet)"
    def table(rows: Seq[(String, String)]): String =
      val width = rows.map(_._1.length).max
      rows.map((left, right) => s"  ${left.padTo(width, ' ')}  $right").mkString("\n")
    s"""asyncpipe ${BuildInfo.version}: shell pipeline stages on a direct-style async library (JDK virtual threads)
       |
       |Usage:
       |  asyncpipe [OPTIONS] FROM [TO]    copy frames between two addresses (one: its role from the streams)
       |  asyncpipe 'A | STAGE | B'        a whole pipeline in one JVM, as 'asyncpipe run'
       |  asyncpipe VERB [OPTIONS] [ARGS]  run a verb; 'asyncpipe VERB --help' describes it
       |  asyncpipe --help | --version
       |
       |Verbs:
       |${table(verbs.map(v => v.name -> (v.summary + (if v.available then "" else later))))}
       |
       |Addresses:
       |${table(addressForms)}
       |
       |Exit status: 0 done, 1 runtime error, 2 usage error, 124 a run timed out, 126/127 a command cannot
       |run / was not found, 129 SIGHUP, 130 SIGINT, 141 downstream closed, 143 SIGTERM.
       |""".stripMargin

/** The tokens that ask for help or for the version. Not in [[Help]], whose tables a verb's start-up
  * has no use for (they are built with closures, each spun at run time: doc/adr/0008-task-runner.md,
  * "Start-up").
  */
object HelpFlags:
  /** True when `args` ask for help before any `--` (after it, the tokens belong to a command). A
    * loop, for the same reason.
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
