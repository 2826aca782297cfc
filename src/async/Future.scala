package asyncpipe.async

import java.util.concurrent.CancellationException
import java.util.concurrent.atomic.AtomicInteger
import java.lang.invoke.{MethodHandles, VarHandle}
import scala.util.{Failure, Success, Try}
import scala.util.control.NonFatal

/** A value that arrives later: a source of one `Try[T]` that is never consumed, so every listener
  * and every awaiter sees the same result.
  *
  *   - Runnable: `Future { body }` runs `body` on a new thread of the scope's runtime (a virtual
  *     thread by default) and completes with its result; an exception becomes a `Failure`.
  *   - Completable: a [[Promise]] is completed by whoever holds it.
  *   - `cancel()` completes a pending future with `Failure(CancellationException)` at once and
  *     interrupts a runnable future's thread (deferred inside `uninterruptible`); a completed
  *     value stands. Before it completes the value it decides the wait the body is in, so a
  *     value sent after the cancel never reaches the cancelled body (see `cancel`).
  *   - `result` awaits the `Try`; `value` awaits and rethrows the failure itself.
  */
trait Future[+T] extends Async.OriginalSource[Try[T]], Cancellable:
  def isCompleted: Boolean
  /** Completes a pending future with `Failure(CancellationException)`; a completed value stands.
    * Never blocks.
    *
    * For a runnable future (`Future { body }`) outside `uninterruptible`, the cancel first decides
    * the wait the body is in (doc/adr/0006-channel-close-and-interruption.md), then completes the
    * value, then interrupts the body's thread. A body waits when it is parked in a channel's
    * `read()` or `send` (a rendezvous reader also while it spins on its cell before it parks), or
    * in an `Async.await` of any source (a channel's `canRead`, a race, a future, a timer). Once
    * `cancel()` has returned, and so for whoever sees the future cancelled:
    *   - if no partner had completed that wait, the cancel won it, and no partner can complete it
    *     any more: a value sent later goes to another reader, never to this body; a parked send's
    *     value is taken by no reader that comes later. The operation throws
    *     `CancellationException`, having taken or sent nothing. (One exception: a listener read
    *     that was already deciding on a parked sender's value, such as a `canRead` race, may
    *     still take it; the send then returns normally.)
    *   - if a partner completed it first (handed the value over, took the sent value or made
    *     room for it), the operation returns normally: the read returns its value, the send has
    *     delivered it; the cancel takes effect at the body's next await or channel operation,
    *     which throws `CancellationException`. The value is the body's: nothing was dropped.
    * An operation that has not begun to wait (it takes a value that is there, hands its value to
    * a waiting partner, meets a partner that is writing its cell, or is a rendezvous send
    * spinning with its value in the cell before it parks) completes as if just before the cancel;
    * one that would begin to wait after the cancel throws instead. Inside `uninterruptible` the
    * cancel decides nothing: the operation completes, and the block's end throws.
    */
  def cancel(): Unit
  def result(using Async): Try[T] = Async.await(this)
  def value(using Async): T = result.get
  /** A future of `f` applied to this one's value; a failure passes through, and a throwing `f`
    * fails it. (`map`, inherited from [[Async.Source]], maps the `Try` into a plain source.)
    */
  def mapValue[U](f: T => U): Future[U]
  /** A future of `f` applied to this one's result, `f` choosing success or failure itself. */
  def transform[U](f: Try[T] => Try[U]): Future[U]

object Future:
  /** Starts `body` now, on a new thread of the scope's runtime, as a member of the scope (in an
    * `Async.supervised` body, a daemon child: see [[Async.supervised]]).
    */
  def apply[T](body: Async ?=> T)(using async: Async): Future[T] = async match
    case scope: Supervised => Supervision.start(scope, body, user = false)
    case _                 => RunnableFuture.start(body)

  /** Starts `body` now as a '''user''' child of the enclosing [[Async.supervised]] scope: the
    * scope returns only once it has completed; if it fails, the scope fails. Call it in the
    * supervised body itself: in a nested scope (an `Async.group`, a child's body) it throws
    * `IllegalStateException` (a compile error outside any supervised scope).
    * {{{
    * Async.supervised:
    *   Future.user(upload(file)) // the scope returns after the upload, or throws its failure
    *   "queued"
    * }}}
    */
  def user[T](body: Async ?=> T)(using scope: Supervised, here: Async): Future[T] =
    if here ne scope then
      throw IllegalStateException("Future.user was called in a scope nested in the supervised one (an Async.group, a future's body); call it in the Async.supervised body itself, or open Async.supervised in the nested scope")
    Supervision.start(scope, body, user = true)

  /** Starts `body` now, on a new thread of the calling scope's runtime, as a member of '''no'''
    * scope: the one way for a future to outlive the scope that started it. Nothing cancels it
    * or waits for it but its holder (`cancel()`, `result`); its failure reaches only those who
    * await it; its own futures end with its body, as for every future.
    * {{{
    * val flusher = Future.detached(flushForever(log)) // keeps running after this scope ends
    * ...
    * flusher.cancel()                                // its holder's job
    * }}}
    */
  def detached[T](body: Async ?=> T)(using async: Async): Future[T] = Supervision.detached(body, async.runtime)

  /** A future that is already complete. */
  def now[T](result: Try[T]): Future[T] = CoreFuture[T](result)

  /** The first success of `futures`, or the last failure if every one fails. */
  def alt[T](futures: Future[T]*): Future[T] = AltFuture(futures, cancelLosers = false)

  /** `alt` that cancels every other future once one succeeds. */
  def altC[T](futures: Future[T]*): Future[T] = AltFuture(futures, cancelLosers = true)

  /** The values of all `futures`, in their order, once every one has succeeded.
    *
    * The first failure (the first future to complete with one, a `CancellationException`
    * included) cancels every other future, and is rethrown, the same exception object, once they
    * have ended: a future that runs a thread (`Future { }`, a [[Worker]]) once that thread has
    * ended, so that its clean-up is over; any other future at once, as its cancel completes it.
    * The futures stay members of the scopes that started them: a cancel of the caller ends the wait
    * with `CancellationException` and leaves them to their scopes (which cancel them at their end).
    *
    * {{{
    * Async.blocking:
    *   val pages = Future.awaitAll(urls.map(url => Future(fetch(url)))) // in the order of urls
    * }}}
    */
  def awaitAll[T](futures: Seq[Future[T]])(using Async): Seq[T] =
    val all = futures.toIndexedSeq
    if all.isEmpty then return Vector.empty
    val settled = AllSettled(all)
    val outcome =
      try Async.await(settled)
      catch
        case e: CancellationException =>
          settled.detach()
          throw e
    outcome match
      case Failure(first) =>
        all.foreach(_.cancel()) // the failed one is complete: a no-op there
        all.foreach:
          case f: Ends => f.awaitEnd()
          case _       => () // complete once cancelled
        throw first
      case _ => all.map(_.poll().get.get) // every one succeeded

  extension [T](f1: Future[T])
    /** Both values, or the first failure (without waiting for the other side). */
    def zip[U](f2: Future[U]): Future[(T, U)] = ZipFuture(f1, f2)
    def alt(f2: Future[T]): Future[T] = Future.alt(f1, f2)
    def altC(f2: Future[T]): Future[T] = Future.altC(f1, f2)
    /** Prepends this future's value to a future tuple: `f1 *: f2 *: f3.zip(f4)`. */
    def *:[U <: Tuple](f2: Future[U]): Future[T *: U] =
      ZipFuture(f1, f2).transform(_.map((t, u) => t *: u))

/** The owner's side of a completable future: `complete` it, hand out `future`. One object is both. */
class Promise[T] extends CoreFuture[T](null):
  def future: Future[T] = this
  /** Sets the result; false if the future was already complete (or cancelled). */
  def complete(result: Try[T]): Boolean = completeWith(result)

/** A future completed through `completeWith`: the state lives in [[OneShot]]'s single word. */
private[async] class CoreFuture[T](initial: AnyRef | Null) extends OneShot[Try[T]](initial) with Future[T]:
  def isCompleted: Boolean = hasValue
  def cancel(): Unit = // no exception made for a future that is complete: a scope's end cancels those too
    if !isCompleted then completeWith(Failure(CancellationException("future cancelled")))
  def mapValue[U](f: T => U): Future[U] =
    val m = MapValueFuture(f)
    onComplete(m)
    m
  def transform[U](f: Try[T] => Try[U]): Future[U] =
    val m = TransformFuture(f)
    onComplete(m)
    m

/** The future of a `mapValue`, and the listener that completes it: one allocation per call. */
private final class MapValueFuture[T, U](f: T => U) extends CoreFuture[U](null) with Listener[Try[T]]:
  def apply(t: Try[T]): Boolean =
    completeWith(t match // a type test, not `Success(v)`: its extractor would allocate an Option
      case s: Success[T] => try Success(f(s.value)) catch case NonFatal(e) => Failure(e)
      case failure       => failure.asInstanceOf[Try[U]]
    )
    true

private final class TransformFuture[T, U](f: Try[T] => Try[U]) extends CoreFuture[U](null) with Listener[Try[T]]:
  def apply(t: Try[T]): Boolean =
    completeWith(try f(t) catch case NonFatal(e) => Failure(e))
    true

private final class ZipFuture[A, B](fa: Future[A], fb: Future[B]) extends CoreFuture[(A, B)](null):
  @volatile private var left: Try[A] | Null = compiletime.uninitialized // null until fa ends (see OneShot)
  @volatile private var right: Try[B] | Null = compiletime.uninitialized // null until fb ends
  private def settle(): Unit =
    (left, right) match
      case (Failure(e), _)                   => completeWith(Failure(e))
      case (_, Failure(e))                   => completeWith(Failure(e))
      case (Success(a), Success(b))          => completeWith(Success((a, b)))
      case _                                 => () // the other side is still pending
  fa.onComplete(Listener { (t: Try[A]) => left = t; settle(); true })
  fb.onComplete(Listener { (t: Try[B]) => right = t; settle(); true })

/** The future of `awaitAll`: `Success(())` once every one of `futures` has succeeded, or the first
  * failure, at once. One listener on all of them.
  */
private final class AllSettled[T](futures: IndexedSeq[Future[T]]) extends CoreFuture[Unit](null) with Listener[Try[T]]:
  private val pending = AtomicInteger(futures.size)
  def apply(t: Try[T]): Boolean =
    t match
      case Failure(e) => completeWith(Failure(e))
      case _          => if pending.decrementAndGet() == 0 then completeWith(Success(()))
    true
  override def isDone: Boolean = isCompleted
  /** Leaves the futures still pending (a cancelled `awaitAll`). */
  def detach(): Unit = futures.foreach(_.dropListener(this))
  futures.foreach(_.onComplete(this))

private final class AltFuture[T](futures: Seq[Future[T]], cancelLosers: Boolean)
    extends CoreFuture[T](null) with Listener[Try[T]]:
  require(futures.nonEmpty, "alt of no futures: give at least one")
  private val pending = AtomicInteger(futures.size)
  def apply(t: Try[T]): Boolean =
    t match
      case Success(_) =>
        if completeWith(t) && cancelLosers then futures.foreach(_.cancel()) // the winner is complete: a no-op
      case Failure(_) =>
        if pending.decrementAndGet() == 0 then completeWith(t) // the last failure
    true
  futures.foreach(_.onComplete(this))

/** A future that runs its body on a thread of its own, and is the body's `Async`.
  *
  * Cancellation state lives in `ctl`: bit CANCEL (cancel requested), bits INTERRUPTING and
  * INTERRUPTED (an interrupt is being / has been delivered), and above them the depth of nested
  * `uninterruptible` blocks. A cancel at depth 0 interrupts the thread; at depth > 0 it only sets
  * CANCEL, and leaving the outermost block throws `CancellationException`.
  */
private[async] final class RunnableFuture[T](body: Async ?=> T, parent: Async)
    extends CoreFuture[T](null) with Runnable with Async with Ends:
  import RunnableFuture.*

  // null, 0, null, null at first: left unwritten (see OneShot)
  @volatile private var thread: Thread | Null = compiletime.uninitialized
  @volatile private var ctl: Int = compiletime.uninitialized
  @volatile private var children: CompletionGroup | Null = compiletime.uninitialized
  /** The wait the body is in, if any, for `cancel` to decide (see [[beginWait]]). */
  @volatile private var waiting: CancellableWait | Null = compiletime.uninitialized
  private var ended = false // guarded by `synchronized`, with the making of `children`

  def runtime: Runtime = parent.runtime
  def isCancelled: Boolean = (ctl & Cancel) != 0
  private[async] def owner: RunnableFuture[?] | Null = this
  private[async] def deferringCancel: Boolean = (ctl >>> DepthShift) > 0

  /** The body's own scope, made when it first starts a future; once the body has ended, a
    * cancelled group, so a future started with a leaked `Async` never runs.
    */
  def group: CompletionGroup =
    val g = children
    if g != null then g
    else
      synchronized {
        if children == null then
          val made = CompletionGroup()
          if isCancelled || ended then made.cancel() // a cancel or an end that came before the group
          children = made
        children.nn
      }

  /** Marks the body ended and returns its group, if it made one (then cancelled by the caller). */
  private def end(): CompletionGroup | Null = synchronized {
    ended = true
    children
  }

  private[async] def start(): Unit =
    val t = runtime.start(this)
    if thread == null then thread = t

  def run(): Unit =
    thread = Thread.currentThread
    val result: Try[T] =
      if isCancelled then Failure(CancellationException("cancelled before it started"))
      else
        try Success(body(using this))
        catch case e: Throwable if NonFatal(e) || e.isInstanceOf[InterruptedException] => Failure(e)
    val g = end()
    if g != null then g.cancelAndAwait() // the body's own futures end with it
    // A cancel sets Cancel before it decides the body's wait and then completes the value itself:
    // a body that ends once Cancel is set (it may have seen the cancel) leaves the value to it,
    // so a future pending when the cancel came ends cancelled, whatever its body returned
    if !isCancelled then completeWith(result) // a no-op if the cancel completed it: that value stands
    parent.group.remove(this)

  /** Decides the body's wait, then completes the value, then interrupts (see [[Future.cancel]]).
    *   - The wait before the value: whoever sees the value cancelled may count on the wait being
    *     decided. A wait is registered only at depth 0 and only before Cancel is set (after it,
    *     [[beginWait]] refuses), so a registered wait is always one to decide. A second
    *     `cancel()` racing the first decides it too (a no-op if decided): neither returns before.
    *   - The value before the interrupt, so the value is the cancel's, not the failure that the
    *     interrupt makes (an `InterruptedException` of `Thread.sleep`, say).
    *   - Interrupting is set just before the interrupt, once listeners have run (completing the
    *     value runs them; `enterUninterruptible` spins from Interrupting to Interrupted), and only
    *     if the body is not inside `uninterruptible` then: there, the block's end throws instead.
    */
  override def cancel(): Unit =
    var c = ctl
    var first = false // whether this call set Cancel
    while (c & Cancel) == 0 do
      if Ctl.compareAndSet(this, c, c | Cancel) then
        c = c | Cancel
        first = true
      else c = ctl // a block began or ended meanwhile, retry
    val w = waiting
    if w != null then w.cancelWait()
    super.cancel()
    if first then
      var done = false
      while !done do
        c = ctl
        if (c >>> DepthShift) > 0 then done = true // deferred to the end of the block
        else if Ctl.compareAndSet(this, c, c | Interrupting) then
          val t = thread
          if t != null && (t ne Thread.currentThread) then runtime.interrupt(t)
          setBits(Interrupted)
          done = true
        // else: CAS failed (a block began meanwhile), retry
      val g = children
      if g != null then g.cancel()

  /** Registers `w`, a wait the body is about to publish to partners (a parked waiter, a rendezvous
    * reader's mark), for `cancel` to decide; true if the body may go on to wait in it, false if
    * the future is cancelled already: then the caller makes `w` cancelled before a partner can
    * see it. Inside `uninterruptible` nothing is registered (a cancel waits for the operation).
    * Called on the body's thread, which waits in one place at a time; [[endWait]] undoes it.
    *
    * The write of `waiting` and then the read of `ctl` here, against `cancel`'s write of `ctl`
    * and then read of `waiting` (all volatile), make sure that at least one side sees the other:
    * the cancel decides `w`, or the body sees the cancel before `w` is published.
    */
  private[async] def beginWait(w: CancellableWait): Boolean =
    (ctl >>> DepthShift) > 0 || {
      waiting = w
      (ctl & Cancel) == 0
    }

  /** The body no longer waits in what it registered. A stale registration would only pin its
    * waiter (a cancel of a decided wait is a no-op), so a release store suffices.
    */
  private[async] def endWait(): Unit = Waiting.setRelease(this, null)

  def awaitEnd(): Unit = Ends.join(thread)

  /** Begins an `uninterruptible` block (on this future's own thread): from now on a cancel is
    * deferred to the end of the outermost block.
    */
  private[async] def enterUninterruptible(): Unit =
    val before = addDepth(+1)
    if (before & Interrupting) != 0 && (before >>> DepthShift) == 0 then
      while (ctl & Interrupted) == 0 do Thread.onSpinWait() // let the interrupt land, then clear it
      Thread.interrupted()

  /** Ends the block begun by [[enterUninterruptible]]; `normal` if it returned (rather than
    * threw). Leaving the outermost block normally after a cancel came throws the cancel.
    */
  private[async] def leaveUninterruptible(normal: Boolean): Unit =
    val after = addDepth(-1)
    if normal && (after >>> DepthShift) == 1 && (after & Cancel) != 0 then
      throw CancellationException("cancelled during an uninterruptible block")

  private def addDepth(delta: Int): Int =
    var c = ctl
    while !Ctl.compareAndSet(this, c, c + (delta << DepthShift)) do c = ctl
    c

  private def setBits(bits: Int): Unit =
    var c = ctl
    while !Ctl.compareAndSet(this, c, c | bits) do c = ctl

private[async] object RunnableFuture:
  /** Starts `body` now as a member of the current scope; never started if the scope is cancelled. */
  def start[T](body: Async ?=> T)(using async: Async): RunnableFuture[T] =
    val f = RunnableFuture(body, async)
    if async.group.add(f) then f.start()
    f

  final val Cancel = 1
  final val Interrupting = 2
  final val Interrupted = 4
  final val DepthShift = 3
  private val Ctl: VarHandle =
    MethodHandles.privateLookupIn(classOf[RunnableFuture[?]], MethodHandles.lookup())
      .findVarHandle(classOf[RunnableFuture[?]], "ctl", Integer.TYPE)
  private val Waiting: VarHandle =
    MethodHandles.privateLookupIn(classOf[RunnableFuture[?]], MethodHandles.lookup())
      .findVarHandle(classOf[RunnableFuture[?]], "waiting", classOf[CancellableWait])

/** A wait of a runnable future's body that the future's `cancel()` decides (doc/adr/0006): a
  * parked channel waiter, a rendezvous reader's mark, the waiter of an `Async.await`. The body
  * registers it with [[RunnableFuture.beginWait]] before a partner can see it.
  */
private[async] trait CancellableWait:
  /** Wins the wait for the cancel with the compare-and-set a partner would use to complete it,
    * unless a partner has completed it already; after it, no partner can. A no-op on a wait that
    * is decided. Quick and non-blocking: it runs inside `cancel()`, on any thread.
    */
  def cancelWait(): Unit

/** Runs `body` so that a cancel of the enclosing future waits for its end; then, if a cancel
  * came, throws `CancellationException`. Outside a runnable future it just runs `body`. Inline,
  * so that `body` is no closure: it wraps every operation on a regular file (`File`), and a
  * closure would be allocated at each.
  */
inline def uninterruptible[T](inline body: => T)(using async: Async): T =
  val owner = async.owner
  if owner != null then owner.enterUninterruptible()
  var normal = false
  try
    val r = body
    normal = true
    r
  finally if owner != null then owner.leaveUninterruptible(normal)

extension [T](src: Async.Source[T])
  /** `Async.await(src)`. */
  def await(using Async): T = Async.await(src)
