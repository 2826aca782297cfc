package asyncpipe.cli

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*
import asyncpipe.cli.stages.*
import asyncpipe.cli.tasks.*

/** The `asyncpipe` command: dispatches on the first token, renders every error in one place and
  * maps it to an exit status.
  */
object Main:
  /** Lazy: `--version` builds none of them, and [[launch]] starts a task verb's preparation
    * ([[ProcessGroup.prepare]]) before it builds them.
    */
  lazy val verbs: Seq[Verb] = Seq(
    StageVerb,
    MuxVerb,
    RunVerb,
    TaskVerbs.every,
    TaskVerbs.retry,
    TaskVerbs.repeat,
    Verb.above("bench", "asyncpipe.bench.BenchVerb"),
    CompletionsVerb(verbs),
    ManPageVerb(verbs)
  )

  def main(args: Array[String]): Unit =
    // Never the end of `main` by an exception: the JVM's exit would wait in Signals' hook for it.
    val status = try launch(args) catch case e: Throwable => { e.printStackTrace(); ExitCode.Runtime }
    Signals.end(status)

  /** Everything `main` does but exiting: runs `args` on the process's standard streams. */
  def launch(args: Array[String]): Int =
    // First: a signal must never meet the JVM's own handler (see Signals). Here, not in `main`, so
    // that the AOT cache's training run (which calls this) holds their classes.
    Signals.install()
    Signals.hookJvmExit()
    FdReserve.take()
    if args.length > 0 && startsCommands(args(0)) then ProcessGroup.prepare() // alongside all set-up
    val io = Io(OwnedOutput.stdout, System.err)
    val status = run(listOf(args), io)
    System.err.flush()
    status

  /** `args` as a List. */
  private def listOf(args: Array[String]): List[String] =
    var list: List[String] = Nil
    var i = args.length - 1
    while i >= 0 do
      list = args(i) :: list
      i -= 1
    list

  /** Whether verb `name` runs commands: the task verbs. */
  private def startsCommands(name: String): Boolean =
    val kinds = TaskOptions.Kind.values
    var i = 0
    while i < kinds.length && kinds(i).verb != name do i += 1
    i < kinds.length

  /** Runs one command line and returns its exit status; everything it prints goes through `io`. */
  def run(args: Seq[String], io: Io): Int =
    val outcome =
      try
        dispatch(args, io) match
          case Right(status) => { finalFlush(io, status); Right(status) }
          case failed        => failed
      catch
        case e: CliError.Failed => Left(e.error)
        case _: DownstreamGone  => Left(CliError.DownstreamGone)
    outcome match
      case Right(status) => status
      case Left(error) =>
        val text = error.render
        if text.nonEmpty then io.err.println(text)
        error.exitCode

  /** Writes out what is left on stdout. A reader gone (EPIPE) makes a command that ended well end
    * with 141; one that ended otherwise (a signal's status, an error's) keeps its status: what it
    * had to say is said, and the closed pipe is most often that signal's doing.
    */
  private def finalFlush(io: Io, status: Int): Unit =
    try io.out.flush()
    catch case e: DownstreamGone => if status == ExitCode.Ok then throw e

  private def dispatch(args: Seq[String], io: Io): Either[CliError, Int] =
    args match
      case Seq() =>
        Left(CliError.Missing(None, "a verb or an address", Usage.topSynopsis))
      case Seq("help", topic) =>
        verbs.find(_.name == topic).orElse(verbs.find(_.claims(Seq(topic)))) match
          case Some(verb) => { io.out.write(verb.help); Right(ExitCode.Ok) }
          case None       => Left(CliError.UnknownVerb(topic, CliError.suggest(topic, verbs.filter(_.listed).map(_.name))))
      case Seq(flag, _*) if Usage.isHelpFlag(flag) || flag == "help" =>
        io.out.write(Help.top(verbs))
        Right(ExitCode.Ok)
      case Seq(flag) if Usage.isVersionFlag(flag) =>
        io.out.write(Help.version)
        Right(ExitCode.Ok)
      case Seq(head, rest*) =>
        val named = verbNamed(head)
        val verb = if named.isDefined then named else claimant(args)
        verb match
          case Some(v) if Usage.asksForHelp(if named.isDefined then rest else args) =>
            io.out.write(v.help)
            Right(ExitCode.Ok)
          case Some(v) => v.run(if named.isDefined then rest else args, io)
          case None if Options.isOption(head) =>
            Left(CliError.UnknownOption(None, head, "asyncpipe --help | asyncpipe --version | " + Usage.topSynopsis))
          case None => Left(CliError.UnknownVerb(head, CliError.suggest(head, verbs.filter(_.listed).map(_.name))))

  /** The verb typed by `name` (not one without a name to type). */
  private def verbNamed(name: String): Option[Verb] =
    val it = verbs.iterator
    while it.hasNext do
      val verb = it.next()
      if verb.listed && verb.name == name then return Some(verb)
    None

  /** The verb that takes a command line starting with no verb's name: a pipeline text (`run`)
    * before an address (`FROM TO`).
    */
  private def claimant(args: Seq[String]): Option[Verb] =
    if RunVerb.claims(args) then Some(RunVerb)
    else if StageVerb.claims(args) then Some(StageVerb)
    else None
