package asyncpipe.async

import scala.util.Success

import java.util.concurrent.{CancellationException, ScheduledFuture, ScheduledThreadPoolExecutor, TimeUnit, TimeoutException}

/** The value of a timer: true when it rang, false when it was cancelled first. */
type TimerRang = Boolean

/** A one-shot timer that starts counting when `start()` is called. As a source it delivers `true`
  * once `millis` have passed, or `false` to its waiters if it is cancelled first.
  *
  * Every timer shares one scheduler thread ([[Timers]]): a pending timer is an entry in a heap, not
  * a sleeping thread, and a cancelled timer leaves the heap at once. Listeners run on the scheduler
  * thread when the timer rings, so they must be quick (waking an awaiting thread is).
  */
class StartableTimer(val millis: Long) extends OneShot[TimerRang](null) with Async.OriginalSource[TimerRang] with Cancellable with Runnable:
  require(millis >= 0, s"timer delay was $millis ms, must be >= 0")
  @volatile private var scheduled: ScheduledFuture[?] | Null = null

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

/** A timer that is already counting. */
class Timer(millis: Long) extends StartableTimer(millis):
  start()

/** The one scheduler thread behind every timer. */
private[async] object Timers:
  private lazy val executor: ScheduledThreadPoolExecutor =
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

/** Runs `body` as a future of the current scope and returns its value, or, if it has not finished
  * within `millis`, cancels it, waits for its thread to end, and throws `TimeoutException`.
  */
def withTimeout[T](millis: Long)(body: Async ?=> T)(using Async): T =
  val work = RunnableFuture.start(body)
  val timer = Timer(millis)
  def stop(): Unit =
    work.cancel()
    work.awaitEnd() // the body's clean-up finishes before we go on
  try
    Async.await(Async.either(work, timer)) match
      case Left(result) => result.get
      case Right(_) =>
        stop()
        work.poll() match
          case Some(Success(value)) => value // the body finished as the timer rang: its value stands
          case _                    => throw TimeoutException(s"timed out after $millis ms")
  catch
    case e: CancellationException =>
      stop()
      throw e
  finally timer.cancel()
