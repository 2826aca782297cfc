package asyncpipe.async

import scala.concurrent.duration.FiniteDuration
import scala.util.Success

import java.util.concurrent.{CancellationException, ScheduledFuture, ScheduledThreadPoolExecutor, TimeUnit, TimeoutException}

/** The value of a timer: true when it rang, false when it was cancelled first. */
type TimerRang = Boolean

/** A one-shot timer that starts counting when `start()` is called. As a source it delivers `true`
  * once `millis` have passed, or `false` to its waiters if it is cancelled first.
  *
  * Every entry that takes milliseconds also takes a `FiniteDuration` (`StartableTimer(2.seconds)`),
  * rounded up to whole milliseconds ([[millisOf]]).
  *
  * Every timer shares one scheduler thread ([[Timers]]): a pending timer is an entry in a heap, not
  * a sleeping thread, and a cancelled timer leaves the heap at once. Listeners run on the scheduler
  * thread when the timer rings, so they must be quick (waking an awaiting thread is).
  */
class StartableTimer(val millis: Long) extends OneShot[TimerRang](null) with Async.OriginalSource[TimerRang] with Cancellable with Runnable:
  require(millis >= 0, s"timer delay was $millis ms, must be >= 0")
  @volatile private var scheduled: ScheduledFuture[?] | Null = compiletime.uninitialized // null (see OneShot)

  /** A timer of `delay`, rounded up to whole milliseconds. */
  def this(delay: FiniteDuration) = this(millisOf(delay, "timer delay"))

  /** Starts counting; a second call does nothing. */
  def start(): Unit = synchronized {
    if scheduled == null && !hasValue then scheduled = Timers.schedule(this, millis)
  }

  /** Rings: the scheduler calls this when the time is up. */
  def run(): Unit = completeWith(true)

  def cancel(): Unit =
    if completeWith(false) then
      val s = synchronized(scheduled)
      if s != null then s.cancel(false)

/** A timer that is already counting.
  *
  * {{{
  * Async.blocking:
  *   Async.await(Async.either(Timer(500.millis), reply)) match
  *     case Left(_)      => println("no reply within 500 ms")
  *     case Right(value) => println(value)
  * }}}
  */
class Timer(millis: Long) extends StartableTimer(millis):
  /** A timer of `delay`, rounded up to whole milliseconds, already counting. */
  def this(delay: FiniteDuration) = this(millisOf(delay, "timer delay"))
  start()

/** The whole milliseconds of `d`, rounded up, so that a timer of `d` never rings before `d` has
  * passed (`1500.micros` is 2 ms; `Long.MaxValue.nanos` fits). `what` names the value in the
  * error a negative `d` gets.
  * @throws IllegalArgumentException if `d` is negative
  */
private[async] def millisOf(d: FiniteDuration, what: String): Long =
  check(d.length >= 0, s"$what was $d, must be >= 0")
  Math.ceilDiv(d.toNanos, 1_000_000L)

/** The one scheduler thread behind every timer. */
private[async] object Timers:
  // Not a lazy val: threads that meet a Scala 3 lazy val being initialised wait on a latch that an
  // interrupt ends, so a cancelled `sleep` among the first timers of the JVM threw
  // InterruptedException instead of CancellationException (found by SemaphoreStress). The object's
  // own initialisation, on its first use, is the JVM's, which no interrupt ends.
  private val executor: ScheduledThreadPoolExecutor =
    val e = ScheduledThreadPoolExecutor(1, (r: Runnable) => Thread.ofPlatform().daemon().name("asyncpipe-timers").unstarted(r))
    e.setRemoveOnCancelPolicy(true) // a cancelled timer leaves the heap now, not when it would have rung
    e
  def schedule(task: Runnable, millis: Long): ScheduledFuture[?] = executor.schedule(task, millis, TimeUnit.MILLISECONDS)
  /** Timers waiting to ring (for tests and diagnostics). */
  def pending: Int = executor.getQueue.size

/** Suspends the current body for `millis` milliseconds; a cancel ends the wait at once. */
def sleep(millis: Long)(using Async): Unit =
  val timer = Timer(millis)
  try Async.await(timer)
  catch
    case e: CancellationException =>
      timer.cancel()
      throw e

/** `sleep` for `d`, rounded up to whole milliseconds: `sleep(250.millis)`.
  * @throws IllegalArgumentException if `d` is negative
  */
def sleep(d: FiniteDuration)(using Async): Unit = sleep(millisOf(d, "sleep duration"))

/** Runs `body` as a future of the current scope and returns its value, or, if it has not finished
  * within `millis`, cancels it, waits for its thread to end, and throws `TimeoutException`.
  */
def withTimeout[T](millis: Long)(body: Async ?=> T)(using Async): T =
  timed(millis, body).getOrElse(throw TimeoutException(s"timed out after $millis ms"))

/** `withTimeout` for `d`, rounded up to whole milliseconds:
  * {{{
  * Async.blocking:
  *   val page = withTimeout(2.seconds)(fetch(url)) // TimeoutException after 2 s
  * }}}
  * @throws IllegalArgumentException if `d` is negative
  */
def withTimeout[T](d: FiniteDuration)(body: Async ?=> T)(using Async): T =
  timed(millisOf(d, "timeout"), body).getOrElse(throw TimeoutException(s"timed out after $d"))

/** `withTimeout` that returns `None` rather than throwing when `body` has not finished within
  * `millis`; the same otherwise: `Some` of the body's value, the body's own exception rethrown,
  * and on a timeout the body cancelled and its thread ended before `None` is returned.
  */
def withTimeoutOption[T](millis: Long)(body: Async ?=> T)(using Async): Option[T] = timed(millis, body)

/** `withTimeoutOption` for `d`, rounded up to whole milliseconds:
  * {{{
  * Async.blocking:
  *   withTimeoutOption(500.millis)(replies.read()) match
  *     case Some(reply) => handle(reply)
  *     case None        => println("no reply within 500 ms") // the read was cancelled: it took nothing
  * }}}
  * @throws IllegalArgumentException if `d` is negative
  */
def withTimeoutOption[T](d: FiniteDuration)(body: Async ?=> T)(using Async): Option[T] =
  timed(millisOf(d, "timeout"), body)

/** The one implementation behind `withTimeout` and `withTimeoutOption`: `Some` of the body's
  * value, or `None` once the timer rang first and the cancelled body's thread has ended.
  */
private def timed[T](millis: Long, body: Async ?=> T)(using Async): Option[T] =
  val work = RunnableFuture.start(body)
  val timer = Timer(millis)
  def stop(): Unit =
    work.cancel()
    work.awaitEnd() // the body's clean-up finishes before we go on
  try
    Async.await(Async.either(work, timer)) match
      case Left(result) => Some(result.get)
      case Right(_) =>
        stop()
        work.poll() match
          case Some(Success(value)) => Some(value) // the body finished as the timer rang: its value stands
          case _                    => None
  catch
    case e: CancellationException =>
      stop()
      throw e
  finally timer.cancel()
