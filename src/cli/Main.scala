package asyncpipe.cli

/** The `asyncpipe` command: dispatches on the first token, renders every error in one place and
  * maps it to an exit status.
  */
object Main:
  val verbs: Seq[Verb] = Seq(
    MuxVerb,
    RunVerb,
    TaskVerbs.every,
    TaskVerbs.retry,
    TaskVerbs.repeat,
    BenchVerb
  )

  private val addressScheme = "^([A-Za-z][A-Za-z0-9+.-]*):.*".r

  def main(args: Array[String]): Unit =
    Runtime.getRuntime.halt(launch(args)) // no shutdown hooks to wait for: `run` flushed already

  /** Everything `main` does but exiting: runs `args` on the process's standard streams. */
  def launch(args: Array[String]): Int =
    val io = Io(OwnedOutput.stdout, System.err)
    Runtime.getRuntime.addShutdownHook(Thread(() => io.out.flushQuietly())) // for SIGINT/SIGTERM
    val status = run(args.toSeq, io)
    System.err.flush()
    status

  /** Runs one command line and returns its exit status; everything it prints goes through `io`. */
  def run(args: Seq[String], io: Io): Int =
    val outcome =
      try dispatch(args, io).flatMap(status => { io.out.flush(); Right(status) })
      catch
        case e: CliError.Failed => Left(e.error)
        case _: DownstreamGone  => Left(CliError.DownstreamGone)
    outcome match
      case Right(status) => status
      case Left(error) =>
        val text = error.render
        if text.nonEmpty then io.err.println(text)
        error.exitCode

  private def dispatch(args: Seq[String], io: Io): Either[CliError, Int] =
    args match
      case Seq() =>
        Left(CliError.Missing(None, "a verb or an address", Help.topSynopsis))
      case Seq(flag, _*) if HelpFlags.isHelpFlag(flag) || flag == "help" =>
        io.out.write(Help.top(verbs))
        Right(ExitCode.Ok)
      case Seq(flag) if HelpFlags.isVersionFlag(flag) =>
        io.out.write(Help.version)
        Right(ExitCode.Ok)
      case Seq(head, rest*) =>
        verbNamed(head) match
          case Some(verb) if HelpFlags.asksForHelp(rest) =>
            io.out.write(verb.help)
            Right(ExitCode.Ok)
          case Some(verb) => verb.run(rest, io)
          case None       => notAVerb(head, args, io)

  /** The verb called `name`: a loop, not `verbs.find`, whose closure would be spun at run time
    * (doc/adr/0008-task-runner.md, "Start-up").
    */
  private def verbNamed(name: String): Option[Verb] =
    val it = verbs.iterator
    while it.hasNext do
      val verb = it.next()
      if verb.name == name then return Some(verb)
    None

  private def notAVerb(head: String, args: Seq[String], io: Io): Either[CliError, Int] =
    // `asyncpipe [OPTIONS] FROM TO` and `asyncpipe [OPTIONS] 'A | B'`: stage options may come first;
    // the stage parser then judges them (and suggests the option meant).
    def isPipeline(a: String) = a.contains(" | ")
    def isAddress(a: String) = a == "-" || addressScheme.matches(a)
    if head.startsWith("-") && head != "-" then
      if args.exists(isPipeline) then RunVerb.run(args, io)
      else if args.tail.exists(isAddress) then StageCommands.addresses(args, io)
      else Left(CliError.UnknownOption(None, head, "asyncpipe --help | asyncpipe --version | " + Help.topSynopsis))
    else if isPipeline(head) then RunVerb.run(args, io)
    else
      head match
        case "-" | addressScheme(_) => StageCommands.addresses(args, io)
        case _ =>
          Left(CliError.UnknownVerb(head, CliError.suggest(head, verbs.map(_.name))))
