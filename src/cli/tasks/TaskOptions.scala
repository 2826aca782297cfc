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
    verbose: Boolean = false
):
  def verb: String = kind.verb

object TaskOptions:
  val DefaultKillAfterMillis: Long = 2000

  /** One option of a task verb: its name, the form of its value (None for a flag), and its help. */
  final case class Spec(name: String, value: Option[String], help: String, short: Option[String] = None):
    def form: String = value.fold(name)(v => s"$name $v")

  /** The options every task verb takes (before [[Kind]], whose cases read it as they are made). */
  private val commonSpecs: Seq[Spec] = Seq(
    Spec("--timeout", Some("D"), "stop a run after D: SIGTERM to its session, then SIGKILL (status 124)"),
    Spec("--kill-after", Some("D"), "the grace between SIGTERM and SIGKILL to a run's session (default 2s)"),
    Spec("--jitter", Some("J"), "spread each delay at random: none (default), full, equal, P% (+-P %), D (+-D)"),
    Spec("--seed", Some("N"), "seed the jitter's random numbers (the same seed, the same delays)"),
    Spec("--deadline", Some("D"), "start no run that could not begin within D of the first one's start"),
    Spec("--dry-run", None, "print the delays it would use (runs taking no time); run nothing"),
    Spec("--verbose", None, "log each run on stderr: number, delay, exit status, duration", Some("-v"))
  )

  /** The three verbs: their options, forms and defaults. */
  enum Kind(val verb: String, val synopsis: String, val summary: String, val specs: Seq[Spec]):
    case Every extends Kind(
      "every",
      "asyncpipe every (DURATION | --spacing D) [OPTIONS] -- CMD [ARGS...]",
      "run a command on a fixed schedule",
      Seq(
        Spec("--spacing", Some("D"), "instead of a fixed rate: wait D after each run ends"),
        Spec("--count", Some("N"), "stop after N runs (default: run until stopped)"),
        Spec("--overlap", Some("skip|wait|allow"), "a tick during a run: skip it (default), run when it ends, run alongside")
      ) ++ commonSpecs
    )
    case Retry extends Kind(
      "retry",
      "asyncpipe retry [OPTIONS] -- CMD [ARGS...]",
      "run a command until it succeeds, with backoff",
      Seq(
        Spec("--max-attempts", Some("N"), "run the command at most N times in all (default: no limit)"),
        Spec("--backoff", Some("D"), "the delay after the first failed attempt (default 1s)"),
        Spec("--factor", Some("F"), "multiply the delay by F after each failed attempt (default 2)"),
        Spec("--max-delay", Some("D"), "never wait longer than D between attempts (default 1m)"),
        Spec("--retry-on", Some("CODES"), "retry only these exit statuses, e.g. 1,75-78 (default: any but 0)"),
        Spec("--stop-on", Some("CODES"), "never retry these exit statuses")
      ) ++ commonSpecs
    )
    case Repeat extends Kind(
      "repeat",
      "asyncpipe repeat (--until-failure | --until-success) [OPTIONS] -- CMD [ARGS...]",
      "run a command repeatedly until it fails or succeeds",
      Seq(
        Spec("--until-failure", None, "repeat while the command succeeds; end with the first failure"),
        Spec("--until-success", None, "repeat while the command fails; end with the first success"),
        Spec("--count", Some("N"), "stop after N runs (default: no limit)"),
        Spec("--backoff", Some("D"), "the delay after the first run (default 0: none)"),
        Spec("--factor", Some("F"), "multiply the delay by F after each run (default 1: a fixed delay)"),
        Spec("--max-delay", Some("D"), "never wait longer than D between runs")
      ) ++ commonSpecs
    )

    /** What the log and the dry run call one run of the command. */
    def noun: String = if this == Retry then "attempt" else "run"

  /** Reads a task verb's arguments (those after the verb's name). Inside, a failure is thrown as
    * [[CliError.Failed]] where it is found and comes back here as the value: the reading is
    * straight-line code, which also keeps the tool's start-up short (no closure per step).
    */
  def parse(kind: Kind, args: Seq[String]): Either[CliError, TaskOptions] =
    try
      val cut = indexOfEnd(args)
      val before = if cut < 0 then args else args.take(cut)
      val r = Reader(kind)
      val positionals = r.scan(before)
      val command = commandOf(kind, if cut < 0 then None else Some(args.drop(cut + 1)), positionals)
      Right(build(r, positionals, command))
    catch case e: CliError.Failed => Left(e.error)

  private def fail(error: CliError): Nothing = throw CliError.Failed(error)

  /** Where `--` is in `args`, or -1 (`args.indexOf("--")` would spin a closure). */
  private def indexOfEnd(args: Seq[String]): Int =
    val it = args.iterator
    var i = 0
    while it.hasNext do
      if it.next() == "--" then return i
      i += 1
    -1

  /** `o.getOrElse(default)` without a closure for `default` (see [[asyncpipe.async.check]]). */
  private inline def or[A](o: Option[A], inline default: A): A = if o.isDefined then o.get else default

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

  private def build(r: Reader, positionals: Vector[String], command: Seq[String]): TaskOptions =
    val timeout = r.duration("--timeout")
    val killAfter = r.duration("--kill-after", allowZero = true)
    val jitter = r.jitter("--jitter")
    val seed = r.long("--seed")
    val deadline = r.duration("--deadline")
    val (schedule, failing, overlap) = r.kind match
      case Kind.Every  => every(r, positionals.headOption, jitter)
      case Kind.Retry  => retry(r, jitter)
      case Kind.Repeat => repeat(r, jitter)
    TaskOptions(
      r.kind, command, schedule, failing, overlap, timeout, or(killAfter, DefaultKillAfterMillis),
      seed, deadline, r.flag("--dry-run"), r.flag("--verbose")
    )

  private type Scheduled = (TaskSchedule, Failing, Overlap)

  private def every(r: Reader, period: Option[String], jitter: Jitter): Scheduled =
    val count = or(r.positive("--count"), 0L)
    val spacing = r.duration("--spacing")
    val overlap = r.overlap("--overlap")
    val synopsis = r.kind.synopsis
    val schedule = (period, spacing, overlap) match
      case (Some(p), Some(_), _) =>
        fail(CliError.BadToken(Some("every"), p, "give either DURATION (a fixed rate) or --spacing D (a fixed delay after each run), not both", synopsis))
      case (None, None, _) => fail(CliError.Missing(Some("every"), "DURATION (or --spacing D)", synopsis))
      case (None, Some(_), Some(_)) =>
        fail(CliError.BadToken(Some("every"), r.raw("--overlap"), "--overlap is for a fixed rate: with --spacing a run never overlaps the last one", synopsis))
      case (None, Some(s), None) => TaskSchedule.RepeatUntilFailure(s, count, jitter = jitter)
      case (Some(p), None, o) =>
        val overrun = if o.contains(Overlap.Wait) then Overrun.RunLate else Overrun.Skip
        TaskSchedule.Every(r.durationOf(p, "DURATION", synopsis, allowZero = false), count, jitter, overrun)
    (schedule, Failing.Never, or(overlap, Overlap.Skip))

  private def retry(r: Reader, jitter: Jitter): Scheduled =
    val max = or(r.positive("--max-attempts"), 0L)
    val (millis, factor, maxDelay) = backoff(r, defaultMillis = 1000, defaultFactor = 2, defaultMaxDelay = 60_000)
    val retryOn = r.codes("--retry-on")
    val stopOn = r.codes("--stop-on")
    val both = retryOn.intersect(stopOn)
    if both.nonEmpty then
      fail(CliError.BadToken(Some("retry"), r.raw("--stop-on"), s"exit status ${both.min} is in both --retry-on and --stop-on", "--stop-on CODES"))
    (TaskSchedule.RepeatUntilSuccess(millis, max, factor, maxDelay, jitter), Failing.Retryable(retryOn, stopOn), Overlap.Skip)

  private def repeat(r: Reader, jitter: Jitter): Scheduled =
    val count = or(r.positive("--count"), 0L)
    val (millis, factor, maxDelay) = backoff(r, defaultMillis = 0, defaultFactor = 1, defaultMaxDelay = Long.MaxValue)
    val schedule = (r.flag("--until-failure"), r.flag("--until-success")) match
      case (true, true) =>
        fail(CliError.BadToken(Some("repeat"), "--until-success", "give one of --until-failure and --until-success, not both", r.kind.synopsis))
      case (false, false) => fail(CliError.Missing(Some("repeat"), "--until-failure or --until-success", r.kind.synopsis))
      case (true, false)  => TaskSchedule.RepeatUntilFailure(millis, count, factor, maxDelay, jitter)
      case (false, true)  => TaskSchedule.RepeatUntilSuccess(millis, count, factor, maxDelay, jitter)
    (schedule, Failing.NonZero, Overlap.Skip)

  private def backoff(r: Reader, defaultMillis: Long, defaultFactor: Double, defaultMaxDelay: Long): (Long, Double, Long) =
    (or(r.duration("--backoff", allowZero = true), defaultMillis),
      or(r.factor("--factor"), defaultFactor),
      or(r.duration("--max-delay", allowZero = true), defaultMaxDelay))

  /** The options of one command line: `scan` collects them, then each typed read gives the value
    * of an option if it was given, or throws the usage error naming the value and the option's form.
    */
  private final class Reader(val kind: Kind):
    private var values = Map.empty[String, String] // name -> value ("" for a flag)

    /** Collects the options in `tokens`; returns the other tokens, in order. */
    def scan(tokens: Seq[String]): Vector[String] =
      val positionals = Vector.newBuilder[String]
      var i = 0
      while i < tokens.length do
        val token = tokens(i)
        if token.startsWith("-") && token.length > 1 then
          val at = token.indexOf('=')
          val name = if at < 0 then token else token.substring(0, at)
          val spec = specNamed(name)
          val value = spec.value match
            case None =>
              if at >= 0 then fail(CliError.BadToken(Some(kind.verb), token, s"${spec.name} takes no value", spec.form))
              ""
            case Some(_) if at >= 0 => token.substring(at + 1)
            case Some(_) =>
              if i + 1 >= tokens.length then fail(CliError.Missing(Some(kind.verb), s"a value after ${spec.name}", spec.form))
              i += 1
              tokens(i)
          if values.contains(spec.name) then
            fail(CliError.BadToken(Some(kind.verb), token, s"${spec.name} is given more than once", spec.form))
          values = values.updated(spec.name, value)
        else positionals += token
        i += 1
      positionals.result()

    private def specNamed(name: String): Spec =
      var i = 0
      while i < kind.specs.length do
        val s = kind.specs(i)
        if s.name == name || s.short.contains(name) then return s
        i += 1
      fail(unknown(kind, name))

    def flag(name: String): Boolean = values.contains(name)
    def raw(name: String): String = or(values.get(name), "")

    private def bad(name: String, token: String, rule: String): Nothing =
      fail(CliError.BadToken(Some(kind.verb), token, rule, specNamed(name).form))

    def duration(name: String, allowZero: Boolean = false): Option[Long] = values.get(name) match
      case None    => None
      case Some(v) => Some(durationOf(v, name, specNamed(name).form, allowZero))

    def durationOf(text: String, what: String, expected: String, allowZero: Boolean): Long =
      Durations.parseMillis(text, allowZero) match
        case Right(millis) => millis
        case Left(rule)    => fail(CliError.BadToken(Some(kind.verb), text, s"$what: $rule", expected))

    def long(name: String): Option[Long] = values.get(name) match
      case None => None
      case Some(v) =>
        val n = TaskOptions.wholeNumber(v)
        if n.isEmpty then bad(name, v, s"$name must be a whole number between ${Long.MinValue} and ${Long.MaxValue}")
        n

    def positive(name: String): Option[Long] = values.get(name) match
      case None => None
      case Some(v) =>
        if !TaskOptions.isDigits(v) then bad(name, v, s"$name must be a positive whole number")
        val n = TaskOptions.wholeNumber(v)
        if n.isEmpty then bad(name, v, s"$name is too large (at most ${Long.MaxValue})")
        if n.contains(0L) then bad(name, v, s"$name must be a positive whole number")
        n

    def factor(name: String): Option[Double] = values.get(name) match
      case None => None
      case Some(v) =>
        val n = if Durations.isDecimal(v) then v.toDouble else 0.0
        if n < 1 || n.isInfinite then bad(name, v, s"$name must be a number of at least 1 (1 keeps the delay fixed, 2 doubles it)")
        Some(n)

    def overlap(name: String): Option[Overlap] = values.get(name) match
      case None => None
      case Some(v) =>
        Some(Overlap.values.find(_.token == v).getOrElse(
          bad(name, v, s"$name is one of ${Overlap.values.map(_.token).mkString(", ")}")))

    /** none, full, equal, P% (also +-P% and ±P%), or a duration. */
    def jitter(name: String): Jitter = values.get(name) match
      case None         => Jitter.None
      case Some("none")  => Jitter.None
      case Some("full")  => Jitter.Full
      case Some("equal") => Jitter.Equal
      case Some(v) if v.endsWith("%") =>
        val p = v.stripPrefix("+-").stripPrefix("±").stripSuffix("%")
        if !Durations.isDecimal(p) then bad(name, v, s"$name: '$v' is not a percentage, e.g. 10%")
        if p.toDouble > 100 then bad(name, v, "a jitter percentage is at most 100%")
        Jitter.Percent(p.toDouble)
      case Some(v) if v.nonEmpty && v.head.isDigit => Jitter.Spread(durationOf(v, name, specNamed(name).form, allowZero = true))
      case Some(v) => bad(name, v, s"$name is none, full, equal, a percentage (10%, meaning +-10%) or a duration (1s, meaning +-1s)")

    /** Exit statuses, "1,2,75-78", each 1-255. */
    def codes(name: String): Set[Int] = values.get(name) match
      case None => Set.empty
      case Some(v) =>
        var got = Set.empty[Int]
        for part <- v.split(",", -1) do
          val dash = part.indexOf('-', 1)
          val (a, b) = if dash < 0 then (part, part) else (part.substring(0, dash), part.substring(dash + 1))
          def status(s: String): Int =
            if s.length > 3 || !TaskOptions.isDigits(s) then
              bad(name, v, s"'$part' is not an exit status: give numbers 1-255 and ranges joined by ',', e.g. 1,75-78")
            val n = s.toInt
            if n < 1 || n > 255 then bad(name, v, s"'$part': an exit status to list is 1-255 (0 is success, never retried)")
            n
          val (from, to) = (status(a), status(b))
          if from > to then bad(name, v, s"the range '$part' runs backwards")
          got = got ++ (from to to)
        got

  /** Whether `text` is one or more decimal digits. */
  private def isDigits(text: String): Boolean =
    var i = 0
    while i < text.length && text(i) >= '0' && text(i) <= '9' do i += 1
    text.nonEmpty && i == text.length

  /** `text` as a Long if it is one in decimal (digits after an optional '-'), not too large. */
  private def wholeNumber(text: String): Option[Long] =
    if !isDigits(if text.startsWith("-") then text.substring(1) else text) then None
    else
      try Some(java.lang.Long.parseLong(text))
      catch case _: NumberFormatException => None

  /** An unknown option, with the options it is a typo of or a prefix of (`--max` in `retry`). */
  private def unknown(kind: Kind, name: String): CliError =
    val names = kind.specs.map(_.name)
    val near = CliError.suggest(name, names).toSeq
    val suggestions = if near.nonEmpty then near else names.filter(n => name.length > 2 && n.startsWith(name))
    CliError.UnknownOption(Some(kind.verb), name, kind.synopsis, suggestions)
