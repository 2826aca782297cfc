package asyncpipe.async

import java.util.concurrent.CancellationException
import scala.concurrent.duration.{Duration, FiniteDuration, MILLISECONDS}
import scala.util.{Failure, Random, Success, Try}

/** A template for a runnable future: `run` starts a new future of `body` each time it is called,
  * and `schedule` gives a task whose one run repeats `body` by a [[TaskSchedule]].
  */
class Task[+T](val body: Async ?=> T):
  def run(using Async): Future[T] = Future(body)
  def schedule(s: TaskSchedule, scheduling: Scheduling = Scheduling()): Task[T] =
    Task(TaskSchedule.repeat(s, body, scheduling))

/** How a delay is spread out at random, to keep many clients from retrying in step. Each
  * jittered delay takes one draw from the `Random` (none for `Off`, nor for a delay of 0).
  */
enum Jitter:
  /** The computed delay, exactly: no jitter. */
  case Off
  /** Uniform in [0, delay]. */
  case Full
  /** Uniform in [delay/2, delay]. */
  case Equal
  /** Uniform in [delay * (1 - p/100), delay * (1 + p/100)], for 0 <= p <= 100. */
  case Percent(p: Double)
  /** Uniform in [delay - millis, delay + millis], and never below 0. */
  case Spread(millis: Long)

  this match
    case Percent(p) => check(p >= 0 && p <= 100, s"jitter percentage was $p, must be between 0 and 100")
    case Spread(m)  => check(m >= 0, s"jitter spread was $m ms, must be >= 0")
    case _          => ()

  /** `apply` in whole milliseconds (`delay` rounded up): `Jitter.Full(2.seconds, random)`. */
  def apply(delay: FiniteDuration, random: Random): FiniteDuration =
    FiniteDuration(apply(millisOf(delay, "delay"), random), MILLISECONDS)

  def apply(delayMillis: Long, random: Random): Long =
    if delayMillis <= 0 then 0
    else
      this match
        case Off        => delayMillis
        case Full       => (random.nextDouble() * delayMillis).round
        case Equal      => delayMillis / 2 + (random.nextDouble() * (delayMillis - delayMillis / 2)).round
        case Percent(p) => spread(delayMillis, delayMillis * p / 100, random)
        case Spread(m)  => spread(delayMillis, m.toDouble, random)

  private def spread(delayMillis: Long, by: Double, random: Random): Long =
    (delayMillis - by + random.nextDouble() * 2 * by).round.max(0)

object Jitter:
  extension (spread: Jitter.Spread.type)
    /** `Spread` by a duration, rounded up to whole milliseconds: `Jitter.Spread(250.millis)`. */
    def apply(by: FiniteDuration): Jitter = Jitter.Spread(millisOf(by, "jitter spread"))

/** `require`, inline: the message is built only on failure. The CLI uses it too. */
private[asyncpipe] inline def check(inline condition: Boolean, inline message: String): Unit =
  if !condition then throw IllegalArgumentException(s"requirement failed: $message")

/** What a fixed-rate schedule does about the slots that passed while a run overran its period. */
enum Overrun:
  /** Skips them: the next run starts at the first slot after the overrunning run ended. */
  case Skip
  /** Runs once as soon as the overrunning run ends (late, for the latest slot it missed),
    * skipping the other missed slots; then back on the grid. Never a burst.
    */
  case RunLate

/** The wait a schedule chose after a run: `millis` before the next run, which takes grid slot
  * `slot` (fixed rate; otherwise the run count), `skipped` slots having passed unused.
  */
final case class Pause(millis: Long, skipped: Long, slot: Long)

/** When a scheduled task runs its body again. `maxRepetitions = 0` means no limit; `n > 0` means
  * at most `n` runs of the body, for every schedule.
  *
  * Every case also takes its delays as durations (rounded up to whole milliseconds; a maximum
  * delay of `Duration.Inf` is no cap), through an `apply` on its companion:
  * {{{
  * Async.blocking:
  *   val poll = Task(checkHealth()).schedule(TaskSchedule.Every(10.seconds, maxRepetitions = 6))
  *   val upload = Task(send()).schedule(TaskSchedule.RepeatUntilSuccess(100.millis, maxRepetitions = 8, factor = 2, maxDelay = 5.seconds))
  *   poll.run.value
  * }}}
  */
enum TaskSchedule:
  /** Fixed rate: run k starts at about `start + k * millis` (slot k of the grid), moved from its
    * slot by `jitter(millis) - millis` when jittered (±spread around the slot; Full and Equal only
    * earlier). A run that overruns its period skips the slots it missed, or runs once late
    * ([[Overrun]]); never a burst to catch up. Ends when the body throws, or after
    * `maxRepetitions` runs with the last value.
    */
  case Every(millis: Long, maxRepetitions: Long = 0, jitter: Jitter = Jitter.Off, overrun: Overrun = Overrun.Skip)
  /** Waits `millis * factor^(k-1)` (at most `maxDelayMillis`, then jittered) after run k. Ends when
    * the body throws, or after `maxRepetitions` runs with the last value.
    */
  case ExponentialBackoff(
      millis: Long,
      factor: Double = 2,
      maxRepetitions: Long = 0,
      maxDelayMillis: Long = Long.MaxValue,
      jitter: Jitter = Jitter.Off
  )
  /** Repeats until the body throws (the task fails with that); after `maxRepetitions` successful
    * runs it ends with the last value. Waits `millis` after each run, or with a `factor` above 1
    * a growing delay as [[ExponentialBackoff]] does.
    */
  case RepeatUntilFailure(
      millis: Long = 0,
      maxRepetitions: Long = 0,
      factor: Double = 1,
      maxDelayMillis: Long = Long.MaxValue,
      jitter: Jitter = Jitter.Off
  )
  /** Repeats until the body returns normally (the task ends with that value); after
    * `maxRepetitions` failed runs it fails with the last failure. Delays as [[RepeatUntilFailure]].
    */
  case RepeatUntilSuccess(
      millis: Long = 0,
      maxRepetitions: Long = 0,
      factor: Double = 1,
      maxDelayMillis: Long = Long.MaxValue,
      jitter: Jitter = Jitter.Off
  )

  def maxRepetitions: Long
  check(maxRepetitions >= 0, s"maxRepetitions was $maxRepetitions, must be >= 0 (0 = no limit)")
  this match
    case Every(period, _, _, _) => check(period > 0, s"period was $period ms, must be > 0")
    case ExponentialBackoff(millis, factor, _, maxDelay, _) => TaskSchedule.checkBackoff(millis, factor, maxDelay)
    case RepeatUntilFailure(millis, _, factor, maxDelay, _) => TaskSchedule.checkBackoff(millis, factor, maxDelay)
    case RepeatUntilSuccess(millis, _, factor, maxDelay, _) => TaskSchedule.checkBackoff(millis, factor, maxDelay)

  /** Whether a run that ended with `result` is the last one. */
  def stopsAfter(result: Try[?]): Boolean = this match
    case _: RepeatUntilSuccess => result.isSuccess
    case _                     => result.isFailure

  /** The pause after run `run` (1-based), which took grid slot `slot` and ended `sinceStartMillis`
    * after the first run started.
    */
  def pauseAfter(run: Long, slot: Long, sinceStartMillis: Long, random: Random): Pause = this match
    case Every(period, _, jitter, overrun) =>
      val due = slot + 1
      val passed = sinceStartMillis / period // the latest slot whose time has come
      def at(next: Long) =
        val target = next * period + (jitter(period, random) - period) // moved from the slot by the jitter
        Pause((target - sinceStartMillis).max(0), next - due, next)
      if passed < due then at(due)
      else
        overrun match
          case Overrun.Skip    => at(passed + 1)
          case Overrun.RunLate => Pause(0, passed - due, passed)
    case ExponentialBackoff(millis, factor, _, maxDelay, jitter) => TaskSchedule.backoff(run, millis, factor, maxDelay, jitter, random)
    case RepeatUntilFailure(millis, _, factor, maxDelay, jitter) => TaskSchedule.backoff(run, millis, factor, maxDelay, jitter, random)
    case RepeatUntilSuccess(millis, _, factor, maxDelay, jitter) => TaskSchedule.backoff(run, millis, factor, maxDelay, jitter, random)

/** What a scheduled task reports as it goes, on the task's own thread, before it acts on it: the
  * numbers a log or a dry run shows are the ones the loop uses.
  */
trait ScheduleObserver:
  /** Run `run` ended and the schedule goes on: the loop now waits `pause.millis`. */
  def waiting(run: Long, pause: Pause): Unit = ()
  /** Run `run` was the last: the next would have begun `pause.millis` later, after the deadline. */
  def pastDeadline(run: Long, pause: Pause): Unit = ()

object ScheduleObserver:
  val Silent: ScheduleObserver = new ScheduleObserver {}

/** The time a schedule loop reads and waits on. */
trait Clock:
  def nanoTime(): Long
  def sleep(millis: Long)(using Async): Unit
  /** `sleep` for `d`, rounded up to whole milliseconds. */
  final def sleep(d: FiniteDuration)(using Async): Unit = sleep(millisOf(d, "sleep duration"))

object Clock:
  /** `System.nanoTime` and [[asyncpipe.async.sleep]] (a cancel ends the wait at once). */
  val System: Clock = new Clock:
    def nanoTime(): Long = java.lang.System.nanoTime()
    def sleep(millis: Long)(using Async): Unit = asyncpipe.async.sleep(millis)

  /** A clock that starts at 0 and moves only when slept on: runs take no time. For dry runs. */
  final class Virtual extends Clock:
    private var now = 0L
    def nanoTime(): Long = now
    def sleep(millis: Long)(using Async): Unit = now += millis * 1_000_000

/** Everything a scheduled run needs besides its schedule: where the random numbers of jitter come
  * from (seed it to repeat a run), who is told of each pause, a deadline (no run begins more than
  * `deadlineMillis` after the first one began; None: no deadline), and the clock.
  */
final case class Scheduling(
    random: Random = Random(),
    observer: ScheduleObserver = ScheduleObserver.Silent,
    deadlineMillis: Option[Long] = None,
    clock: Clock = Clock.System
):
  check(deadlineMillis.isEmpty || deadlineMillis.get >= 0, s"deadline was ${deadlineMillis.get} ms, must be >= 0")

  /** This scheduling with a deadline of `d`, rounded up to whole milliseconds:
    * `Scheduling(random = Random(7)).withDeadline(1.minute)`.
    */
  def withDeadline(d: FiniteDuration): Scheduling = copy(deadlineMillis = Some(millisOf(d, "deadline")))

object TaskSchedule:
  // The schedules with durations: an `apply` on each case's companion, found where the case's own
  // `apply(millis: Long, ...)` does not fit the arguments; pattern matches see milliseconds. Each
  // lives in a given of its own, as extensions of one object would be overloads of one `apply`,
  // of which only one may have default arguments.

  /** `TaskSchedule.Every(period: FiniteDuration, ...)`. */
  object EveryOfDuration:
    extension (every: TaskSchedule.Every.type)
      /** `Every` with a period of `period`: `TaskSchedule.Every(10.seconds, jitter = Jitter.Full)`.
        * @throws IllegalArgumentException if `period` is not above zero
        */
      def apply(period: FiniteDuration, maxRepetitions: Long = 0, jitter: Jitter = Jitter.Off, overrun: Overrun = Overrun.Skip): TaskSchedule =
        check(period.length > 0, s"period was $period, must be > 0")
        TaskSchedule.Every(millisOf(period, "period"), maxRepetitions, jitter, overrun)
  given EveryOfDuration.type = EveryOfDuration

  /** `TaskSchedule.ExponentialBackoff(delay: FiniteDuration, ...)`. */
  object BackoffOfDuration:
    extension (backoff: TaskSchedule.ExponentialBackoff.type)
      /** `ExponentialBackoff` from `delay`, capped by `maxDelay` (`Duration.Inf`: no cap):
        * `TaskSchedule.ExponentialBackoff(100.millis, maxDelay = 10.seconds)`.
        */
      def apply(delay: FiniteDuration, factor: Double = 2, maxRepetitions: Long = 0, maxDelay: Duration = Duration.Inf, jitter: Jitter = Jitter.Off): TaskSchedule =
        TaskSchedule.ExponentialBackoff(millisOf(delay, "delay"), factor, maxRepetitions, capMillis(maxDelay), jitter)
  given BackoffOfDuration.type = BackoffOfDuration

  /** `TaskSchedule.RepeatUntilFailure(delay: FiniteDuration, ...)`. */
  object UntilFailureOfDuration:
    extension (untilFailure: TaskSchedule.RepeatUntilFailure.type)
      /** `RepeatUntilFailure` waiting `delay` after each run (growing by `factor`, capped by
        * `maxDelay`): `TaskSchedule.RepeatUntilFailure(1.second, maxRepetitions = 10)`.
        */
      def apply(delay: FiniteDuration, maxRepetitions: Long = 0, factor: Double = 1, maxDelay: Duration = Duration.Inf, jitter: Jitter = Jitter.Off): TaskSchedule =
        TaskSchedule.RepeatUntilFailure(millisOf(delay, "delay"), maxRepetitions, factor, capMillis(maxDelay), jitter)
  given UntilFailureOfDuration.type = UntilFailureOfDuration

  /** `TaskSchedule.RepeatUntilSuccess(delay: FiniteDuration, ...)`. */
  object UntilSuccessOfDuration:
    extension (untilSuccess: TaskSchedule.RepeatUntilSuccess.type)
      /** `RepeatUntilSuccess` waiting `delay` after each failed run (growing by `factor`, capped
        * by `maxDelay`): `TaskSchedule.RepeatUntilSuccess(100.millis, maxRepetitions = 8, factor = 2)`.
        */
      def apply(delay: FiniteDuration, maxRepetitions: Long = 0, factor: Double = 1, maxDelay: Duration = Duration.Inf, jitter: Jitter = Jitter.Off): TaskSchedule =
        TaskSchedule.RepeatUntilSuccess(millisOf(delay, "delay"), maxRepetitions, factor, capMillis(maxDelay), jitter)
  given UntilSuccessOfDuration.type = UntilSuccessOfDuration

  /** A maximum delay in milliseconds: `Duration.Inf` is no cap (`Long.MaxValue`). */
  private def capMillis(maxDelay: Duration): Long = maxDelay match
    case d: FiniteDuration => millisOf(d, "maxDelay")
    case Duration.Inf      => Long.MaxValue
    case other             => throw IllegalArgumentException(s"requirement failed: maxDelay was $other, must be finite or Duration.Inf")

  private def checkBackoff(millis: Long, factor: Double, maxDelay: Long): Unit =
    check(millis >= 0, s"delay was $millis ms, must be >= 0")
    check(factor >= 1 && !factor.isInfinite, s"backoff factor was $factor, must be >= 1")
    check(maxDelay >= 0, s"maxDelayMillis was $maxDelay, must be >= 0")

  /** `millis * factor^(run-1)`, capped by `maxDelay`, then jittered. */
  private def backoff(run: Long, millis: Long, factor: Double, maxDelay: Long, jitter: Jitter, random: Random): Pause =
    val raw = millis * math.pow(factor, (run - 1).toDouble)
    Pause(jitter(if raw >= maxDelay then maxDelay else raw.round, random), 0, run)

  /** The one loop behind every schedule: run, decide, wait, repeat. `limit` (> 0) caps the runs
    * where the schedule has no cap of its own. What the run of `Task(body).schedule(s, scheduling)`
    * does; the CLI's task runner calls it itself.
    */
  private[asyncpipe] def repeat[T](schedule: TaskSchedule, body: Async ?=> T, scheduling: Scheduling, limit: Long = 0)(using Async): T =
    import scheduling.{clock, observer, random}
    val maxRuns = if schedule.maxRepetitions == 0 then limit else schedule.maxRepetitions
    val gridStart = clock.nanoTime()
    val deadline = scheduling.deadlineMillis match // in the clock's nanoseconds
      case Some(d) => gridStart + d * 1_000_000
      case None    => Long.MaxValue
    var run = 0L
    var slot = 0L
    while true do
      run += 1
      val result = try Success(body) catch
        case e: CancellationException => throw e
        case e: Throwable if scala.util.control.NonFatal(e) || e.isInstanceOf[InterruptedException] => Failure(e)
      if schedule.stopsAfter(result) || run == maxRuns then return result.get
      val now = clock.nanoTime()
      val pause = schedule.pauseAfter(run, slot, (now - gridStart) / 1_000_000, random)
      if deadline != Long.MaxValue && now + pause.millis * 1_000_000 - deadline > 0 then
        observer.pastDeadline(run, pause)
        return result.get
      observer.waiting(run, pause)
      slot = pause.slot
      if pause.millis > 0 then clock.sleep(pause.millis)
    throw IllegalStateException("unreachable")

  /** A dry run: tells `scheduling.observer` every pause the loop would make over at most `runs`
    * runs (or the schedule's own cap) if each run took no time and none ended the schedule, on a
    * virtual clock. With the same seeded `Random`, a real run whose pauses do not depend on how
    * long its runs take (every schedule but `Every`) makes the same pauses, until it ends.
    * Returns the number of runs it would make.
    */
  def plan(schedule: TaskSchedule, runs: Long, scheduling: Scheduling): Long =
    check(runs > 0, s"runs was $runs, must be > 0")
    var count = 0L
    val goesOn: Try[Unit] = if schedule.stopsAfter(Success(())) then Failure(PlannedRun) else Success(())
    Async.blocking:
      try repeat(schedule, { count += 1; goesOn.get }, scheduling.copy(clock = Clock.Virtual()), runs)
      catch case PlannedRun => ()
    count

  /** The failure a planned run of `RepeatUntilSuccess` "ends" with, so that the plan goes on. */
  private object PlannedRun extends RuntimeException("a planned run", null, false, false)
