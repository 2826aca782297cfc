package asyncpipe.async

import java.util.concurrent.CancellationException
import scala.util.{Failure, Try}
import scala.util.control.NonFatal

/** A future completed by a worker thread that blocks outside the library (in a system call, a
  * selector): the way to wrap blocking IO as a future of the current scope.
  *
  * The future is a member of the caller's scope, so a cancel of either the future or the scope
  * cancels it; a cancel completes it with `CancellationException` and then interrupts the worker.
  * The worker completes it with `offer`, a compare-and-set that tells it whether its value was
  * taken or came after a cancel (then the value is still the worker's, to keep for later). The
  * scope waits for the worker thread to end, as for any future.
  *
  * {{{
  * Worker.start[Int]("read", onPlatformThread = false) { w => w.offer(Success(blockingRead())) }
  * }}}
  */
final class Worker[T] private (what: String, group: CompletionGroup) extends CoreFuture[T](null) with Ends:
  @volatile private var thread: Thread | Null = null
  @volatile private var cancelled = false

  /** Completes the future with `result` unless it is complete (cancelled): whether it was taken. */
  def offer(result: Try[T]): Boolean = completeWith(result)

  override def cancel(): Unit =
    if completeWith(Failure(CancellationException(s"$what cancelled"))) then
      cancelled = true
      val t = thread
      if t != null && (t ne Thread.currentThread) then t.interrupt()

  def awaitEnd(): Unit = Ends.join(thread)

  private def run(body: Worker[T] => Unit): Unit =
    try body(this)
    catch case e: Throwable if NonFatal(e) || e.isInstanceOf[InterruptedException] => offer(Failure(e))
    finally
      offer(Failure(IllegalStateException(s"$what: the worker ended without a result"))) // a no-op when done
      group.remove(this)

object Worker:
  /** Starts `body` on a new thread of the scope's runtime, or (`onPlatformThread`) on its
    * `startForSystemCall` thread: one that a blocking system call may hold without holding a
    * carrier, and that a signal can wake. In a cancelled scope the future is cancelled and `body`
    * never runs.
    */
  def start[T](what: String, onPlatformThread: Boolean = false)(body: Worker[T] => Unit)(using async: Async): Worker[T] =
    val w = Worker[T](what, async.group)
    if async.group.add(w) then
      val task: Runnable = () => w.run(body)
      val t = if onPlatformThread then async.runtime.startForSystemCall(task) else async.runtime.start(task)
      w.thread = t
      if w.cancelled then t.interrupt() // a cancel that came before the thread was known
    w
