package asyncpipe.cli.tasks

import asyncpipe.cli.command.*

import asyncpipe.async.{Jitter, Overrun, TaskSchedule}

/** `every --overlap`: what happens at a tick while the previous run still goes on. */
enum Overlap(val token: String):
  /** Skip the tick (counted); the next run is at the first tick after the run ends. The default. */
  case Skip extends Overlap("skip")
  /** Run once as soon as the running one ends (late), skipping any further ticks it overran. */
  case Wait extends Overlap("wait")
  /** Start the run at its tick anyway, alongside the one still running. */
  case Allow extends Overlap("allow")

/** `--output`: which runs' output is passed on. */
enum OutputOf(val token: String):
  /** Every run's, as it comes. */
  case All extends OutputOf("all")
  /** Only a run that exits 0: each run's output is held (at most [[TaskOptions.MaxHeldBytes]])
    * until it ends, then passed on or dropped.
    */
  case Success extends OutputOf("success")

/** `--stdin`: what each run reads on its stdin. */
enum StdinOf(val token: String):
  /** Nothing: /dev/null (runs of a schedule cannot share one input). */
  case None extends StdinOf("none")
  /** asyncpipe's stdin, read to its end before the first run (at most
    * [[TaskOptions.MaxHeldBytes]]) and given whole to every run, as Debian's `retry` does.
    */
  case Replay extends StdinOf("replay")

/** Which exit statuses of an attempt the schedule is told are failures. A failure goes on for
  * `retry` and `repeat --until-success` and ends `repeat --until-failure`; `every` goes on whatever
  * the status.
  */
enum Failing:
  /** No status is a failure to the schedule (`every`). */
  case Never
  /** Any status but 0 (`repeat`). */
  case NonZero
  /** A non-zero status that may be retried: in `retryOn` (when given) and not in `stopOn` (`retry`). */
  case Retryable(retryOn: Set[Int], stopOn: Set[Int])

  def apply(status: Int): Boolean = this match
    case Never                       => false
    case NonZero                     => status != 0
    case Retryable(retryOn, stopOn) => status != 0 && (retryOn.isEmpty || retryOn(status)) && !stopOn(status)

/** A task verb's command line, read: the command, its schedule, and how each attempt is run. */
final case class TaskOptions(
    kind: TaskOptions.Kind,
    command: Seq[String],
    schedule: TaskSchedule,
    failing: Failing,
    overlap: Overlap = Overlap.Skip,
    timeoutMillis: Option[Long] = None,
    killAfterMillis: Long = TaskOptions.DefaultKillAfterMillis,
    seed: Option[Long] = None,
    deadlineMillis: Option[Long] = None,
    dryRun: Boolean = false,
    verbose: Boolean = false,
    output: OutputOf = OutputOf.All,
    stdin: StdinOf = StdinOf.None
):
  def verb: String = kind.verb

object TaskOptions:
  val DefaultKillAfterMillis: Long = 2000
  /** The most of one run's output `--output success` holds until the run ends, and the most of
    * the input `--stdin replay` holds for every run: 64 MiB.
    */
  val MaxHeldBytes: Long = 64L << 20

  // The options every task verb takes (before [[Kind]], whose cases read them as they are made).
  val timeout: Opt[Long] = Opt("--timeout", Reader.millis(), "stop a run after D: SIGTERM to its session, then SIGKILL (status 124)")
  val killAfter: Opt[Long] = Opt("--kill-after", Reader.millis(allowZero = true),
    "the grace between SIGTERM and SIGKILL to a run's session (default 2s)")
  val jitter: Opt[Jitter] = Opt("--jitter", JitterReader,
    "spread each delay at random: none (default), full, equal, P% (+-P %), D (+-D)")
  val seed: Opt[Long] = Opt("--seed", Reader.wholeNumber(Long.MinValue, Long.MaxValue),
    "seed the jitter's random numbers (the same seed, the same delays)")
  val deadline: Opt[Long] = Opt("--deadline", Reader.millis(), "start no run that could not begin within D of the first one's start")
  val dryRun: Opt[Unit] = Opt.flag("--dry-run", "print the delays it would use (runs taking no time); run nothing")
  val verbose: Opt[Unit] = Opt.flag("--verbose", "log each run on stderr: number, delay, exit status, duration", short = Some("-v"))
  val output: Opt[OutputOf] = Opt("--output", Reader.choice(OutputOf.values.toSeq)(_.token),
    "whose output goes on: every run's as it comes (all, the default), or only a run that exits 0, held until it ends, at most 64 MiB (success)")
  val stdin: Opt[StdinOf] = Opt("--stdin", Reader.choice(StdinOf.values.toSeq)(_.token),
    "what each run reads: nothing, /dev/null (none, the default), or asyncpipe's stdin, read to its end first, at most 64 MiB, and given whole to every run (replay)")
  private val common: Seq[Opt[?]] = Seq(output, stdin, timeout, killAfter, jitter, seed, deadline, dryRun, verbose)

  // every
  val spacing: Opt[Long] = Opt("--spacing", Reader.millis(), "instead of a fixed rate: wait D after each run ends")
  val everyCount: Opt[Long] = Opt("--count", Reader.positive, "stop after N runs (default: run until stopped)")
  val overlap: Opt[Overlap] = Opt("--overlap", Reader.choice(Overlap.values.toSeq)(_.token),
    "a tick during a run: skip it (default), run when it ends, run alongside")
  // retry
  val maxAttempts: Opt[Long] = Opt("--max-attempts", Reader.positive, "run the command at most N times in all (default: no limit)")
  val retryBackoff: Opt[Long] = Opt("--backoff", Reader.millis(allowZero = true), "the delay after the first failed attempt (default 1s)")
  val retryFactor: Opt[Double] = Opt("--factor", factorReader, "multiply the delay by F after each failed attempt (default 2)")
  val retryMaxDelay: Opt[Long] = Opt("--max-delay", Reader.millis(allowZero = true), "never wait longer than D between attempts (default 1m)")
  val retryOn: Opt[Set[Int]] = Opt("--retry-on", ExitStatuses, "retry only these exit statuses, e.g. 1,75-78 (default: any but 0)")
  val stopOn: Opt[Set[Int]] = Opt("--stop-on", ExitStatuses, "never retry these exit statuses")
  // repeat
  val untilFailure: Opt[Unit] = Opt.flag("--until-failure", "repeat while the command succeeds; end with the first failure")
  val untilSuccess: Opt[Unit] = Opt.flag("--until-success", "repeat while the command fails; end with the first success")
  val repeatCount: Opt[Long] = Opt("--count", Reader.positive, "stop after N runs (default: no limit)")
  val repeatBackoff: Opt[Long] = Opt("--backoff", Reader.millis(allowZero = true), "the delay after the first run (default 0: none)")
  val repeatFactor: Opt[Double] = Opt("--factor", factorReader, "multiply the delay by F after each run (default 1: a fixed delay)")
  val repeatMaxDelay: Opt[Long] = Opt("--max-delay", Reader.millis(allowZero = true), "never wait longer than D between runs")

  private def factorReader: Reader[Double] =
    Reader.decimal(1, "a number of at least 1 (1 keeps the delay fixed, 2 doubles it)")

  /** The three verbs: their options, forms and defaults. */
  enum Kind(val verb: String, val synopsis: String, val summary: String, val opts: Seq[Opt[?]]):
    case Every extends Kind(
      "every",
      "asyncpipe every (DURATION | --spacing D) [OPTIONS] -- CMD [ARGS...]",
      "run a command on a fixed schedule",
      Seq(spacing, everyCount, overlap) ++ common
    )
    case Retry extends Kind(
      "retry",
      "asyncpipe retry [OPTIONS] -- CMD [ARGS...]",
      "run a command until it succeeds, with backoff",
      Seq(maxAttempts, retryBackoff, retryFactor, retryMaxDelay, retryOn, stopOn) ++ common
    )
    case Repeat extends Kind(
      "repeat",
      "asyncpipe repeat (--until-failure | --until-success) [OPTIONS] -- CMD [ARGS...]",
      "run a command repeatedly until it fails or succeeds",
      Seq(untilFailure, untilSuccess, repeatCount, repeatBackoff, repeatFactor, repeatMaxDelay) ++ common
    )

    /** What the log and the dry run call one run of the command. */
    def noun: String = if this == Retry then "attempt" else "run"

  /** Reads a task verb's arguments (those after the verb's name). Inside, a failure is thrown as
    * [[CliError.Failed]] where it is found and comes back here as the value.
    */
  def parse(kind: Kind, args: Seq[String]): Either[CliError, TaskOptions] =
    try
      val p = Options.parse(args, kind.opts, Some(kind.verb), kind.synopsis, Options.Operands.UntilDoubleDash) match
        case Right(p) => p
        case Left(e)  => fail(e)
      val command = commandOf(kind, p.command, p.operands)
      Right(build(kind, p, command))
    catch case e: CliError.Failed => Left(e.error)

  private def fail(error: CliError): Nothing = throw CliError.Failed(error)

  private def commandOf(kind: Kind, after: Option[Seq[String]], positionals: Vector[String]): Seq[String] =
    val allowed = if kind == Kind.Every then 1 else 0
    if positionals.length > allowed then
      val extra = positionals(allowed)
      fail(CliError.BadToken(Some(kind.verb), extra, s"unexpected argument: the command goes after '--' (${kind.verb} ... -- $extra ...)", kind.synopsis))
    after match
      case None                      => fail(CliError.Missing(Some(kind.verb), "'--' and the command to run after it", kind.synopsis))
      case Some(c) if c.isEmpty      => fail(CliError.Missing(Some(kind.verb), "the command to run after '--'", kind.synopsis))
      case Some(c) if c.head.isEmpty => fail(CliError.BadToken(Some(kind.verb), "", "the command name is empty", kind.synopsis))
      case Some(c)                   => c

  private def build(kind: Kind, p: Parsed, command: Seq[String]): TaskOptions =
    val jittered = p.get(jitter).getOrElse(Jitter.Off)
    val (schedule, failing, overlapping) = kind match
      case Kind.Every  => every(kind, p, p.operands.headOption, jittered)
      case Kind.Retry  => retry(p, jittered)
      case Kind.Repeat => repeat(kind, p, jittered)
    TaskOptions(
      kind, command, schedule, failing, overlapping, p.get(timeout), p.get(killAfter).getOrElse(DefaultKillAfterMillis),
      p.get(seed), p.get(deadline), p.has(dryRun), p.has(verbose), p.get(output).getOrElse(OutputOf.All),
      p.get(stdin).getOrElse(StdinOf.None)
    )

  private type Scheduled = (TaskSchedule, Failing, Overlap)

  private def every(kind: Kind, p: Parsed, period: Option[String], jitter: Jitter): Scheduled =
    val count = p.get(everyCount).getOrElse(0L)
    val synopsis = kind.synopsis
    val schedule = (period, p.get(spacing), p.get(overlap)) match
      case (Some(text), Some(_), _) =>
        fail(CliError.BadToken(Some("every"), text, "give either DURATION (a fixed rate) or --spacing D (a fixed delay after each run), not both", synopsis))
      case (None, None, _) => fail(CliError.Missing(Some("every"), "DURATION (or --spacing D)", synopsis))
      case (None, Some(_), Some(_)) =>
        fail(CliError.BadToken(Some("every"), p.raw(overlap), "--overlap is for a fixed rate: with --spacing a run never overlaps the last one", synopsis))
      case (None, Some(s), None) => TaskSchedule.RepeatUntilFailure(s, count, jitter = jitter)
      case (Some(text), None, o) =>
        val overrun = if o.contains(Overlap.Wait) then Overrun.RunLate else Overrun.Skip
        val millis = Reader.millis().read(text) match
          case Right(m)   => m
          case Left(rule) => fail(CliError.BadToken(Some("every"), text, s"DURATION: $rule", synopsis))
        TaskSchedule.Every(millis, count, jitter, overrun)
    (schedule, Failing.Never, p.get(overlap).getOrElse(Overlap.Skip))

  private def retry(p: Parsed, jitter: Jitter): Scheduled =
    val max = p.get(maxAttempts).getOrElse(0L)
    val on = p.get(retryOn).getOrElse(Set.empty)
    val off = p.get(stopOn).getOrElse(Set.empty)
    val both = on.intersect(off)
    if both.nonEmpty then
      fail(CliError.BadToken(Some("retry"), p.raw(stopOn), s"exit status ${both.min} is in both --retry-on and --stop-on", stopOn.form))
    val schedule = TaskSchedule.RepeatUntilSuccess(p.get(retryBackoff).getOrElse(1000L), max, p.get(retryFactor).getOrElse(2.0),
      p.get(retryMaxDelay).getOrElse(60_000L), jitter)
    (schedule, Failing.Retryable(on, off), Overlap.Skip)

  private def repeat(kind: Kind, p: Parsed, jitter: Jitter): Scheduled =
    val count = p.get(repeatCount).getOrElse(0L)
    val (millis, factor, maxDelay) =
      (p.get(repeatBackoff).getOrElse(0L), p.get(repeatFactor).getOrElse(1.0), p.get(repeatMaxDelay).getOrElse(Long.MaxValue))
    val schedule = (p.has(untilFailure), p.has(untilSuccess)) match
      case (true, true) =>
        fail(CliError.BadToken(Some("repeat"), "--until-success", "give one of --until-failure and --until-success, not both", kind.synopsis))
      case (false, false) => fail(CliError.Missing(Some("repeat"), "--until-failure or --until-success", kind.synopsis))
      case (true, false)  => TaskSchedule.RepeatUntilFailure(millis, count, factor, maxDelay, jitter)
      case (false, true)  => TaskSchedule.RepeatUntilSuccess(millis, count, factor, maxDelay, jitter)
    (schedule, Failing.NonZero, Overlap.Skip)

  /** `--jitter`: none, full, equal, P% (also +-P% and ±P%), or a duration (+-D). */
  private object JitterReader extends Reader[Jitter]:
    def form: String = "J"
    override def words: Seq[String] = Seq("none", "full", "equal")
    def read(text: String): Either[String, Jitter] = text match
      case "none"  => Right(Jitter.Off)
      case "full"  => Right(Jitter.Full)
      case "equal" => Right(Jitter.Equal)
      case v if v.endsWith("%") =>
        val p = v.stripPrefix("+-").stripPrefix("±").stripSuffix("%")
        if !Durations.isDecimal(p) then Left(s"'$v' is not a percentage, e.g. 10%")
        else if p.toDouble > 100 then Left("a jitter percentage is at most 100%")
        else Right(Jitter.Percent(p.toDouble))
      case v if v.nonEmpty && v.head.isDigit => Reader.millis(allowZero = true).read(v).map(Jitter.Spread(_))
      case v => Left(s"'$v' is none, full, equal, a percentage (10%, meaning +-10%) or a duration (1s, meaning +-1s)")

  /** Exit statuses, "1,2,75-78", each 1-255. */
  private object ExitStatuses extends Reader[Set[Int]]:
    def form: String = "CODES"
    def read(v: String): Either[String, Set[Int]] =
      val parts = v.split(",", -1)
      var got: Either[String, Set[Int]] = Right(Set.empty)
      var i = 0
      while i < parts.length && got.isRight do
        got = range(parts(i)).flatMap(r => got.map(_ ++ r))
        i += 1
      got

    private def range(part: String): Either[String, Range] =
      val dash = part.indexOf('-', 1)
      val (a, b) = if dash < 0 then (part, part) else (part.substring(0, dash), part.substring(dash + 1))
      for
        from <- status(a, part)
        to <- status(b, part)
        _ <- if from > to then Left(s"the range '$part' runs backwards") else Right(())
      yield from to to

    private def status(s: String, part: String): Either[String, Int] =
      if s.length > 3 || !Reader.isDigits(s) then
        Left(s"'$part' is not an exit status: give numbers 1-255 and ranges joined by ',', e.g. 1,75-78")
      else if s.toInt < 1 || s.toInt > 255 then Left(s"'$part': an exit status to list is 1-255 (0 is success, never retried)")
      else Right(s.toInt)
