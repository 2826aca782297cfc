package asyncpipe.cli.tasks

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*

import asyncpipe.async.{Async, Cancellable, Future, Pause, ScheduleObserver, Scheduling, TaskSchedule}
import java.io.IOException
import java.util.concurrent.{CancellationException, ConcurrentLinkedQueue}
import java.util.concurrent.atomic.AtomicReference
import scala.util.{Failure, Random, Success, Try}

/** The one place a run is stopped from outside the schedule: records the first [[StopReason]],
  * forwards its signal (SIGTERM for an error) to every running command's session and cancels what
  * runs the schedule.
  */
final class RunControl(live: LiveGroups):
  private val reason = AtomicReference[StopReason | Null](null)
  private val watched = ConcurrentLinkedQueue[Cancellable]()

  def halted: Option[StopReason] = Option(reason.get)

  /** Cancels `c` on a halt (at once if one came already). */
  def watch(c: Cancellable): Unit =
    watched.add(c)
    if reason.get != null then c.cancel()

  def halt(h: StopReason): Unit =
    if reason.compareAndSet(null, h) then
      live.stop(h match
        case StopReason.Signalled(stop) => stop.signalName
        case _                          => "TERM")
      watched.forEach(_.cancel())

/** An attempt that the schedule is told failed: `retry` and `repeat --until-success` go on,
  * `repeat --until-failure` ends with it.
  */
final class Unsuccessful(val exit: Exit) extends RuntimeException(s"exit ${exit.status}", null, false, false)

/** What the runs came to: the last one's exit, and for `every` the failures and skipped ticks. */
final class RunTally:
  private var runs = 0L
  private var failed = 0L
  private var skippedTicks = 0L
  private var lastExit: Option[Exit] = None
  private var lastFailure: Option[Exit] = None

  def ended(exit: Exit): Unit = synchronized {
    runs += 1
    lastExit = Some(exit)
    if exit.status != 0 then
      failed += 1
      lastFailure = Some(exit)
  }
  def skipped(n: Long): Unit = synchronized { skippedTicks += n }

  /** The status of the whole run: the last run's, or with `failuresStick` (every) the last failed
    * run's (0 when none failed: a later success does not hide a failure).
    */
  def status(failuresStick: Boolean): Int = synchronized {
    (if failuresStick then lastFailure else lastExit) match
      case Some(exit) => exit.status
      case None       => ExitCode.Ok
  }

  def summary(noun: String): String = synchronized {
    val skips = if skippedTicks > 0 then s", ${plural(skippedTicks, "tick")} skipped" else ""
    s"${plural(runs, noun)}, $failed failed$skips"
  }

  private def plural(n: Long, word: String) = if n == 1 then s"1 $word" else s"$n ${word}s"

/** The attempt log on stderr (with `--verbose`; a quiet run prints nothing of its own) and the
  * dry run's lines on stdout share these texts, so that their delays can be compared.
  */
object AttemptLog:
  def started(noun: String, n: Long, pause: Option[Pause]): String =
    pause match
      case None => s"$noun $n"
      case Some(p) =>
        val skips = if p.skipped == 0 then "" else s" (${if p.skipped == 1 then "1 tick" else s"${p.skipped} ticks"} skipped)"
        s"$noun $n after ${Durations.renderMillis(p.millis)}$skips"

  def ended(exit: Exit, timeoutMillis: Option[Long]): String =
    val why = if exit.timedOut then timeoutMillis.fold("")(t => s" (timed out after ${Durations.renderMillis(t)})") else ""
    s"exit ${exit.status}$why in ${exit.millis}ms"

  def pastDeadline(noun: String, n: Long, pause: Pause): String =
    s"$noun $n not started: it would begin after the deadline (in ${Durations.renderMillis(pause.millis)})"

/** Runs a task verb's schedule with real commands: [[TaskSchedule]] decides when, [[Attempt]] runs
  * each, [[Records]] passes their output on, and [[Signals]] and [[RunControl]] stop it all.
  */
final class TaskRunner(options: TaskOptions, io: Io):
  import options.*
  private val noun = kind.noun
  /** Inline: a quiet run does not even build the line. */
  private inline def log(inline line: String): Unit = if verbose then io.err.println(s"${TaskRunner.clock()} asyncpipe $verb: $line")

  def run(): Either[CliError, Int] =
    CommandPath.resolve(command.head) match
      case Left((reason, status)) if dryRun =>
        // The plan is the point of a dry run, often written before the command exists.
        io.err.println(s"asyncpipe $verb: note: ${command.head}: $reason${TaskRunner.shellHint(command)} (a real run would exit $status)")
        Right(plan())
      case Left((reason, status)) => Left(CliError.CannotRun(verb, command.head, reason + TaskRunner.shellHint(command), status))
      case Right(_) =>
        if dryRun then Right(plan())
        else
          GroupTools.find() match
            case Left(reason) => Left(CliError.Runtime(verb, reason))
            case Right(tools) => execute(tools)

  private def random: Random = if seed.isDefined then Random(seed.get) else Random()

  /** `--dry-run`: the delays the schedule would use, with runs taking no time, on stdout. */
  private def plan(): Int =
    val shown = 10L
    var at = 0L
    var stoppedByDeadline = false
    io.out.write(AttemptLog.started(noun, 1, None) + " at 0ms\n")
    val observer = new ScheduleObserver:
      override def waiting(run: Long, pause: Pause): Unit =
        at += pause.millis
        io.out.write(s"${AttemptLog.started(noun, run + 1, Some(pause))} (at ${Durations.renderMillis(at)})\n")
      override def pastDeadline(run: Long, pause: Pause): Unit =
        stoppedByDeadline = true
        io.out.write(AttemptLog.pastDeadline(noun, run + 1, pause) + "\n")
    val runs = TaskSchedule.plan(schedule, shown, Scheduling(random, observer, deadlineMillis))
    if schedule.maxRepetitions == 0 && runs == shown && !stoppedByDeadline then
      io.out.write(s"... and so on without limit (the first $shown shown)\n")
    ExitCode.Ok

  private def execute(tools: GroupTools): Either[CliError, Int] =
    replayed() match
      case Left(error)  => Left(error)
      case Right(input) => execute(tools, input)

  /** With `--stdin replay`, asyncpipe's stdin to its end (before any run starts: a signal meanwhile
    * ends the process at once, nothing having begun); otherwise null.
    */
  private def replayed(): Either[CliError, Array[Byte] | Null] =
    if stdin == StdinOf.None then Right(null)
    else
      try
        val bytes = io.in.readNBytes(Math.toIntExact(TaskOptions.MaxHeldBytes + 1))
        if bytes.length > TaskOptions.MaxHeldBytes then
          Left(CliError.Runtime(verb, s"its stdin is more than ${TaskOptions.MaxHeldBytes >> 20} MiB, the most '--stdin replay' holds for every run"))
        else Right(bytes)
      catch case e: IOException => Left(CliError.Runtime(verb, s"cannot read stdin for '--stdin replay': ${e.getMessage}"))

  private def execute(tools: GroupTools, input: Array[Byte] | Null): Either[CliError, Int] =
    val live = LiveGroups()
    val control = RunControl(live)
    val tally = RunTally()
    val records = Records(io.out, control)
    val attempt = Attempt(command, tools, timeoutMillis, killAfterMillis, records, live, input)
    Signals.onStop(
      stop => { log(s"SIG${stop.signalName}: stopping"); control.halt(StopReason.Signalled(stop)) },
      status => { live.killAll(); Signals.endNow(status) }
    )
    val watch = records.watchReader() // a thread that sleeps until the output is idle
    val result: Try[Unit] =
      try Bodies.blocking(Execution(attempt, control, tally))
      finally if watch != null then watch.stop()
    // A signal decides the status, also when the pipe closed first (one signal to a pipeline
    // stops the reader too); it is the first signal's ([[Signals.received]]).
    val pipe = control.halted.contains(StopReason.PipeClosed)
    val signal = if pipe then Signals.receivedWithin(Signals.PipeGraceMillis) else Signals.received
    signal.map(StopReason.Signalled(_)).orElse(control.halted) match
      case Some(StopReason.Signalled(stop)) => Right(stop.exitCode)
      case Some(StopReason.Failed(error))   => Left(error)
      case Some(StopReason.PipeClosed)      => Left(CliError.DownstreamGone)
      case None =>
        result match
          case Success(_) | Failure(_: Unsuccessful) =>
            val status = tally.status(failuresStick = failing == Failing.Never)
            log(s"${tally.summary(noun)}; exit $status")
            Right(status)
          case Failure(e) => Left(CliError.Runtime(verb, s"internal error: $e"))

  // The bodies of an execution's scope, of the future that runs its schedule and of each run are
  // classes, not closures ([[Bodies]]): these three are on the path of every start.

  /** The execution's scope: runs the schedule in a future of its own (which a halt cancels with
    * the scope), then waits for it and for any runs still going alongside.
    */
  private final class Execution(attempt: Attempt, control: RunControl, tally: RunTally) extends (Async => Try[Unit]):
    def apply(scope: Async): Try[Unit] =
      given Async = scope
      control.watch(scope.group)
      val runs = Runs(attempt, control, tally, scope)
      val scheduled = Bodies.future(runs.schedule)
      try
        val last = scheduled.result
        runs.awaitAlongside()
        last
      catch case e: CancellationException => Failure(e)

  /** The runs of one execution, as the schedule's body and observer: their numbers, the pause
    * before each (as the schedule chose it), each one's log line and tally, and what the schedule
    * is told of each (a failure is thrown). `scope`: the execution's, where `--overlap allow`
    * starts its runs.
    */
  private final class Runs(attempt: Attempt, control: RunControl, tally: RunTally, scope: Async)
      extends ScheduleObserver, (Async => Unit):
    private var count = 0L
    private var pause: Option[Pause] = None
    private val alongside = ConcurrentLinkedQueue[Future[Unit]]() // --overlap allow: runs still going

    /** The body of the future that runs the schedule, with this as its body and observer. */
    val schedule: Async => Unit = new (Async => Unit):
      def apply(async: Async): Unit =
        Bodies.repeat(options.schedule, Runs.this, Scheduling(random, Runs.this, deadlineMillis))(using async)

    override def waiting(run: Long, p: Pause): Unit =
      pause = Some(p)
      tally.skipped(p.skipped)
      // A long wait says what it waits for (a short one is told with the run it came before).
      if p.millis >= TaskRunner.LongWaitMillis then
        log(s"waiting ${Durations.renderMillis(p.millis)} before $noun ${run + 1} (until ${TaskRunner.clock(p.millis)})")

    override def pastDeadline(run: Long, p: Pause): Unit = log(AttemptLog.pastDeadline(noun, run + 1, p))

    /** The schedule's body: the next run, or with `--overlap allow` its start as a future of `scope`. */
    def apply(async: Async): Unit =
      given Async = async
      count += 1
      val (n, before) = (count, pause) // read now: the future's body runs after the loop moved on
      if overlap == Overlap.Allow then
        alongside.removeIf(_.isCompleted)
        alongside.add(Future(once(n, before))(using scope))
      else once(n, before)

    /** Waits for the runs started alongside that are still going. */
    def awaitAlongside()(using Async): Unit =
      while !alongside.isEmpty do alongside.poll().result

    private def once(n: Long, pause: Option[Pause])(using Async): Unit =
      val held = if options.output == OutputOf.Success then Records.Held() else null
      val exit =
        try attempt.run(held)
        catch
          case e: IOException =>
            FdReserve.release(e)
            control.halt(StopReason.Failed(CliError.Runtime(verb, s"cannot start ${command.head}: ${e.getMessage}")))
            throw CancellationException("halted")
      tally.ended(exit)
      if held != null && exit.status == 0 then attempt.records.release(held)
      log(s"${AttemptLog.started(noun, n, pause)}: ${AttemptLog.ended(exit, timeoutMillis)}")
      if failing(exit.status) then throw Unsuccessful(exit)

/** `Async.blocking`, `Future` and `TaskSchedule.repeat` for a body that is an object of a class of
  * ours rather than a closure: the JDK AOT cache holds such a class, but spins a closure at run
  * time (doc/adr/0008-task-runner.md, "Start-up"). Scala 3 erases a context function `Async ?=> T`
  * to `Async => T`, so the object can be passed as one; cast from a parameter, as here, it is
  * passed as it is, not wrapped in a closure again.
  */
object TaskRunner:
  /** A wait between runs this long or longer is logged (with `-v`) as it begins. */
  val LongWaitMillis: Long = 1000

  /** The wall-clock time, `afterMillis` from now, as `HH:MM:SS.mmm` (local time): how `-v` lines begin. */
  def clock(afterMillis: Long = 0): String =
    java.time.LocalTime.now().plusNanos(afterMillis * 1_000_000).truncatedTo(java.time.temporal.ChronoUnit.MILLIS)
      .format(java.time.format.DateTimeFormatter.ofPattern("HH:mm:ss.SSS"))

  /** For a command not found whose name is a shell command line (`retry -- 'curl x | jq .'`): how
    * to run it through a shell. Commands are run as they are, without a shell.
    */
  def shellHint(command: Seq[String]): String =
    val name = command.head
    if command.size == 1 && name.exists(c => c == ' ' || "|&;<>$`*?".contains(c)) then
      s"; commands run without a shell: for a shell command line, sh -c '${name.replace("'", "'\\''")}'"
    else ""

private object Bodies:
  def blocking[T](body: Async => T): T = Async.blocking(body.asInstanceOf[Async ?=> T])

  def future[T](body: Async => T)(using Async): Future[T] = Future(body.asInstanceOf[Async ?=> T])

  def repeat[T](schedule: TaskSchedule, body: Async => T, scheduling: Scheduling)(using Async): T =
    TaskSchedule.repeat(schedule, body.asInstanceOf[Async ?=> T], scheduling)
