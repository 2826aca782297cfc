package asyncpipe.async

import java.util.concurrent.ConcurrentHashMap

/** Something that can be told to stop: a future, a timer, a group. Cancelling is idempotent and
  * never blocks; a completed value stands.
  */
trait Cancellable:
  def cancel(): Unit

/** A member whose end can be awaited (a runnable future's thread, a nested group). */
private[async] trait Ends:
  /** Blocks until the member has ended, ignoring interrupts (and restoring the flag after). */
  def awaitEnd(): Unit

private[async] object Ends:
  /** Waits until `t` (if any, and not the current thread) has ended, ignoring interrupts and
    * restoring the flag after: how a member that runs on a thread of its own awaits its end.
    */
  def join(t: Thread | Null): Unit =
    if t != null && (t ne Thread.currentThread) then
      var interrupted = false
      while t.isAlive do
        try t.join()
        catch case _: InterruptedException => interrupted = true
      if interrupted then Thread.currentThread.interrupt()

/** The members of one scope: futures, timers and nested groups started inside it.
  *
  * `cancel()` marks the group cancelled and cancels every member; a member added later is
  * cancelled as it joins. `cancelAndAwait()` is how a scope ends: cancel, then wait until every
  * member that runs a thread has ended, so that nothing started inside outlives the scope.
  */
final class CompletionGroup extends Cancellable with Ends:
  private val members = ConcurrentHashMap.newKeySet[Cancellable]()
  @volatile private var cancelled: Boolean = compiletime.uninitialized // false (see OneShot)

  def isCancelled: Boolean = cancelled

  /** Members not yet removed (for tests and diagnostics). */
  def size: Int = members.size

  /** Adds `member`; returns false (and cancels it) if this group is already cancelled. */
  def add(member: Cancellable): Boolean =
    members.add(member)
    if cancelled then // checked after adding: a concurrent cancel either saw the member or is seen here
      members.remove(member)
      member.cancel()
      false
    else true

  def remove(member: Cancellable): Unit = members.remove(member)

  // Loops rather than `members.forEach(...)`: Scala makes a Consumer[Cancellable] lambda with a
  // bridge, which the build's rewrite of lambdas leaves alone and the JDK AOT cache cannot hold
  // (doc/adr/0012).
  def cancel(): Unit =
    cancelled = true
    val it = members.iterator()
    while it.hasNext do it.next().cancel()

  def awaitEnd(): Unit =
    while !members.isEmpty do
      val it = members.iterator()
      while it.hasNext do
        it.next() match
          case member: Ends => member.awaitEnd(); members.remove(member)
          case member       => members.remove(member) // timers and the like: cancelling them ended them

  private[async] def cancelAndAwait(): Unit =
    cancel()
    awaitEnd()
