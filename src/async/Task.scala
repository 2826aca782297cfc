package asyncpipe.async

import java.util.concurrent.CancellationException
import scala.util.{Failure, Random, Success, Try}

/** A template for a runnable future: `run` starts a new future of `body` each time it is called,
  * and `schedule` gives a task whose one run repeats `body` by a [[TaskSchedule]].
  */
class Task[+T](val body: Async ?=> T):
  def run(using Async): Future[T] = Future(body)
  def schedule(s: TaskSchedule): Task[T] = Task(TaskSchedule.repeat(s, body))

/** How a delay is spread out at random, to keep many clients from retrying in step. */
enum Jitter:
  /** The computed delay, exactly. */
  case None
  /** Uniform in [0, delay]. */
  case Full
  /** Uniform in [delay/2, delay]. */
  case Equal
  /** Uniform in [delay * (1 - p/100), delay * (1 + p/100)], for 0 <= p <= 100. */
  case Percent(p: Double)

  def apply(delayMillis: Long, random: Random): Long =
    if delayMillis <= 0 then 0
    else
      this match
        case None       => delayMillis
        case Full       => (random.nextDouble() * delayMillis).round
        case Equal      => delayMillis / 2 + (random.nextDouble() * (delayMillis - delayMillis / 2)).round
        case Percent(p) =>
          require(p >= 0 && p <= 100, s"jitter percentage was $p, must be between 0 and 100")
          val spread = delayMillis * p / 100
          (delayMillis - spread + random.nextDouble() * 2 * spread).round.max(0)

/** When a scheduled task runs its body again. `maxRepetitions = 0` means no limit; `n > 0` means
  * at most `n` runs of the body, for every schedule.
  */
enum TaskSchedule:
  /** Fixed rate: run k starts at about `start + k * millis`. A run that overruns its period skips
    * the slots it missed (no burst to catch up). Ends when the body throws, or after
    * `maxRepetitions` runs with the last value.
    */
  case Every(millis: Long, maxRepetitions: Long = 0)
  /** Waits `millis * factor^(k-1)` (at most `maxDelayMillis`, then jittered) after run k. Ends when
    * the body throws, or after `maxRepetitions` runs with the last value.
    */
  case ExponentialBackoff(
      millis: Long,
      factor: Double = 2,
      maxRepetitions: Long = 0,
      maxDelayMillis: Long = Long.MaxValue,
      jitter: Jitter = Jitter.None
  )
  /** Repeats, `millis` apart, until the body throws (the task fails with that); after
    * `maxRepetitions` successful runs it ends with the last value.
    */
  case RepeatUntilFailure(millis: Long = 0, maxRepetitions: Long = 0)
  /** Repeats, `millis` apart, until the body returns normally (the task ends with that value);
    * after `maxRepetitions` failed runs it fails with the last failure.
    */
  case RepeatUntilSuccess(millis: Long = 0, maxRepetitions: Long = 0)

  def maxRepetitions: Long
  require(maxRepetitions >= 0, s"maxRepetitions was $maxRepetitions, must be >= 0 (0 = no limit)")

  /** Whether a run that ended with `result` is the last one. */
  def stopsAfter(result: Try[?]): Boolean = this match
    case _: RepeatUntilSuccess => result.isSuccess
    case _                     => result.isFailure

  /** The pause before run `run + 1`, given run `run` (1-based) started `elapsedMillis` ago. */
  def delayAfter(run: Long, elapsedMillis: Long, random: Random): Long = this match
    case Every(period, _) =>
      require(period > 0, s"period was $period ms, must be > 0")
      period - elapsedMillis % period // the next slot on the grid, skipping any that passed
    case ExponentialBackoff(millis, factor, _, maxDelay, jitter) =>
      require(factor >= 1, s"backoff factor was $factor, must be >= 1")
      val raw = millis * math.pow(factor, (run - 1).toDouble)
      jitter(if raw >= maxDelay then maxDelay else raw.round, random)
    case RepeatUntilFailure(millis, _) => millis
    case RepeatUntilSuccess(millis, _) => millis

object TaskSchedule:
  /** The one loop behind every schedule: run, decide, wait, repeat. */
  private[async] def repeat[T](schedule: TaskSchedule, body: Async ?=> T, random: Random = Random())(using Async): T =
    var run = 0L
    val gridStart = System.nanoTime()
    while true do
      run += 1
      val startedAt = System.nanoTime()
      val result = try Success(body) catch
        case e: CancellationException => throw e
        case e: Throwable if scala.util.control.NonFatal(e) || e.isInstanceOf[InterruptedException] => Failure(e)
      if schedule.stopsAfter(result) || run == schedule.maxRepetitions then return result.get
      val elapsed = (System.nanoTime() - (schedule match { case _: Every => gridStart; case _ => startedAt })) / 1_000_000
      val delay = schedule.delayAfter(run, elapsed, random)
      if delay > 0 then sleep(delay)
    throw IllegalStateException("unreachable")
