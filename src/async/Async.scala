package asyncpipe.async

import java.util.concurrent.CancellationException
import java.util.concurrent.atomic.AtomicInteger

/** The capability to wait: a body that holds an `Async` may suspend (park its thread) until a
  * [[Async.Source]] has a value for it, and may start futures that belong to its scope.
  *
  *   - `await(src)` takes one value from `src`, blocking this thread until there is one. It first
  *     checks cancellation: in a cancelled future it throws `CancellationException` instead of
  *     waiting (outside `uninterruptible`). An interrupt while waiting is a cancel too.
  *   - `group` is the completion group that futures started with this `Async` join; when the
  *     scope ends (`Async.blocking`, `Async.group`, or a future's own body) the group is
  *     cancelled and then awaited, so no thread outlives the scope that started it.
  *   - `runtime` starts, parks and interrupts threads ([[Runtime]]).
  */
trait Async:
  def await[T](src: Async.Source[T]): T = Async.awaitWith(this, src)
  def group: CompletionGroup
  def runtime: Runtime
  /** True once the scope or future running with this `Async` has been cancelled. */
  def isCancelled: Boolean
  /** The runnable future whose body holds this `Async`, or null at the root of a scope. */
  private[async] def owner: RunnableFuture[?] | Null
  /** True inside `uninterruptible`: a cancel waits for the end of the block. */
  private[async] def cancellationDeferred: Boolean =
    val o = owner
    o != null && o.deferringCancel

object Async:
  /** Something that delivers values to listeners: a future's result, a channel's next element, a
    * timer's tick. See [[Listener]] for the accept/refuse contract.
    */
  trait Source[+T]:
    /** If a value is ready now, offers it to `k` and returns whether `k` took it; never blocks. */
    def poll(k: Listener[T]): Boolean
    /** Registers `k` to be offered values until it takes one; if one is ready, offers it at once. */
    def onComplete(k: Listener[T]): Unit
    /** Removes a registration of `k` (or of a listener equal to it); a no-op if there is none. */
    def dropListener(k: Listener[T]): Unit

    /** The ready value, if any, taken by an accepting listener (on a channel this reads). */
    def poll(): Option[T] =
      val k = Listener.Taker[T]()
      if poll(k) then Some(k.value) else None

    /** A source of `f` applied to this one's values; it registers through, consuming nothing itself. */
    def map[U](f: T => U): Source[U] = MappedSource(this, f)

    /** A source of the values satisfying `p`; a refused value stays with this source for others. */
    def filter(p: T => Boolean): Source[T] = FilteredSource(this, p)

  /** A source that holds its own listeners (rather than deriving from another source). */
  trait OriginalSource[+T] extends Source[T]

  /** Runs `body` as the root of a scope on the current thread. On exit, every future started
    * inside is cancelled, and the block returns only when their threads have ended. (A timer is
    * not a member of the scope: `sleep` and `withTimeout` cancel theirs; cancel your own.)
    */
  def blocking[T](body: Async ?=> T)(using runtime: Runtime = Runtime.default): T =
    val scope = BlockingAsync(runtime, CompletionGroup())
    try body(using scope)
    finally scope.group.cancelAndAwait()

  /** Runs `body` in a nested scope whose futures are cancelled and awaited when it returns; a
    * cancel of the enclosing scope reaches them too.
    */
  def group[T](body: Async ?=> T)(using outer: Async): T =
    val inner = CompletionGroup()
    outer.group.add(inner)
    val scope = GroupAsync(outer, inner)
    try body(using scope)
    finally
      inner.cancelAndAwait()
      outer.group.remove(inner)

  /** Runs `body` in a nested '''supervised''' scope: the first of its futures to fail cancels the
    * others and the body, and the scope rethrows that failure once all have ended.
    *
    *   - `Future { ... }` in `body` starts a '''daemon''' child: cancelled (and awaited) when the
    *     body and every user child have completed, as in `Async.group`.
    *   - `Future.user { ... }` starts a '''user''' child: the scope returns only once it has
    *     completed, as the body must.
    *   - A child (either kind) or the body that ends with an exception of its own fails the scope:
    *     the body and every other child are cancelled, and once every one has ended the scope
    *     throws that first failure, with the failures that came after it attached as suppressed.
    *     A future ended by its `cancel()`, and a cancellation that the scope's own cancel caused,
    *     are not failures. Once the body and every user child have completed, a daemon's failure
    *     no longer counts: the daemons are being cancelled.
    *   - A cancel of the enclosing scope cancels everything inside; the scope then throws
    *     `CancellationException` (or a failure that came first).
    *   - Supervision is the scope's: a future started inside a child's body or an inner
    *     `Async.group` belongs to that scope, unsupervised; open `Async.supervised` there.
    *     Futures that library code starts with the scope's `Async` (`Task.run`) are children too;
    *     start futures whose failures you handle yourself in an inner `Async.group`.
    *
    * The body runs on a new thread of the runtime, as a future of the scope, while the calling
    * thread waits (so the supervisor can cancel it as it cancels any child); its thread-locals
    * are not the caller's. The only way for a future to outlive its scope is `Future.detached`.
    *
    * {{{
    * Async.blocking:
    *   val page = Async.supervised:
    *     Future(heartbeat())                    // daemon: cancelled when the scope ends
    *     val audit = Future.user(writeAudit())  // user: awaited before the scope returns
    *     val a = Future(fetch("a"))             // if this fails, everything is cancelled
    *     val b = Future(fetch("b"))
    *     a.value ++ b.value                     // and the scope throws a's failure
    * }}}
    * See [[Supervised]] and `doc/adr/0027-supervised-scopes.md`.
    */
  def supervised[T](body: Supervised ?=> T)(using outer: Async): T = Supervision.run(body)

  def await[T](src: Source[T])(using async: Async): T = async.await(src)

  def current(using async: Async): Async = async

  /** The first value any of `sources` delivers; the other sources keep theirs, and the losing
    * registrations are dropped as soon as a winner is taken.
    */
  def race[T](sources: Source[T]*): Source[T] = RaceSource(sources.toIndexedSeq)

  /** `race` that tells which side won. */
  def either[A, B](a: Source[A], b: Source[B]): Source[Either[A, B]] = race(a.map(Left(_)), b.map(Right(_)))

  /** Waits for the first branch whose source delivers, takes that one value (exactly once: a
    * losing branch took nothing, as in `race`) and returns what its handler (`source.handle(f)`)
    * returns, run on this thread. A timer of `Async.after` in a losing branch is cancelled: it
    * leaves nothing behind (a `Timer` is the caller's to cancel: a deadline may serve many selects).
    * {{{
    * Async.blocking:
    *   val said = Async.select(
    *     replies.canRead.handle(r => s"reply ${r.get}"),
    *     Async.after(1.second).handle(_ => "no reply within a second")
    *   )
    * }}}
    */
  def select[R](branches: SelectCase[R]*)(using Async): R = Select.select(branches)

  /** `select` of two branches: the same, without the `Seq` of branches (40 bytes a call) that a
    * loop of two-way selects would otherwise make for every call. Inline, and passing on only
    * the branches' parts, so that the JIT sees both `SelectCase`s made and taken apart in the
    * caller, and need not make them (32 bytes more a call).
    */
  inline def select[R](a: SelectCase[R], b: SelectCase[R])(using Async): R =
    Select.select2(a.source, a.handler, b.source, b.handler)

  /** A timer of `delay` for one select: as a branch (`Async.after(d).handle(...)`), it is cancelled
    * when another branch wins.
    */
  def after(delay: scala.concurrent.duration.FiniteDuration): Timer = SelectTimer(millisOf(delay, "after"))

  /** `select` that does not wait (Go's `default`): the handler of a branch that has a value now
    * (the first ready one, in the order given), else `otherwise`. Nothing is taken from a source
    * that is not ready.
    * {{{
    * val next = Async.selectNow(jobs.canRead.handle(_.get))(otherwise = idleJob)
    * }}}
    */
  def selectNow[R](branches: SelectCase[R]*)(otherwise: => R): R = Select.selectNow(branches, otherwise)

  /** `select` within `limit`: `Some` of the winning branch's result, or `None` if no branch
    * delivered in time (then nothing was taken from any source); its timer is cancelled either way.
    * {{{
    * Async.selectWithin(200.millis)(acks.canRead.handle(_.get)) // None: no ack within 200 ms
    * }}}
    */
  def selectWithin[R](limit: scala.concurrent.duration.FiniteDuration)(branches: SelectCase[R]*)(using Async): Option[R] =
    Select.selectWithin(limit, branches)

  // ---------------------------------------------------------------------------------------------
  // Waiting

  /** The waiting end of `await`: the listener whose compare-and-set decides every race.
    * States: 0 waiting, 1 claimed by an offer (value being written), 2 value ready, 3 abandoned
    * (by the waiting thread when interrupted, or by its future's `cancel()`, with the same
    * compare-and-set from 0 that an offer uses: whichever comes first decides).
    */
  private final class Awaiter[T](thread: Thread, runtime: Runtime) extends AtomicInteger() with Listener[T] with CancellableWait: // 0 (see OneShot)
    var value: T = null.asInstanceOf[T]
    def apply(v: T): Boolean =
      if compareAndSet(0, 1) then
        value = v
        set(2)
        // an offer in the waiting thread itself (its poll, or its registration finding a value)
        // comes before the thread looks at the state: it is not parked, and a permit left for it
        // would only make its next park return at once
        if thread ne Thread.currentThread then runtime.unpark(thread)
        true
      else false // taken by another offer, or abandoned by a cancel
    override def isDone: Boolean = get != 0
    def cancelWait(): Unit = compareAndSet(0, 3) // every later offer is refused; the value stays with its source

  /** Throws `CancellationException` if `async`'s scope is cancelled and not inside
    * `uninterruptible`: every blocking operation checks this before it waits.
    */
  private[async] def checkCancelled(async: Async, what: String): Unit =
    if async.isCancelled && !async.cancellationDeferred then
      throw CancellationException(s"$what in a cancelled scope")

  /** `pollFirst = false`: the caller polled `src`'s sources just now; its registration looks at
    * them again (a source offers a ready value to a listener it registers).
    */
  private[async] def awaitWith[T](async: Async, src: Source[T], pollFirst: Boolean = true): T =
    checkCancelled(async, "awaiting")
    src match // a completed future (an IO operation that did not wait, say): no waiter to make
      case done: OneShot[?] if done.hasValue => return done.valueNow.asInstanceOf[T]
      case _                                 => ()
    val waiter = Awaiter[T](Thread.currentThread, async.runtime)
    var heldInterrupt = false // an interrupt that came inside `uninterruptible`: restored on return
    if !pollFirst || !src.poll(waiter) then
      // nothing ready: wait, registered with our future, whose cancel then decides the wait
      val owner = async.owner
      if owner != null && !owner.beginWait(waiter) then
        owner.endWait()
        throw CancellationException("cancelled while awaiting") // before any source saw the waiter
      try
        src.onComplete(waiter)
        var state = waiter.get
        while state < 2 do
          if state == 0 then async.runtime.park(waiter)
          state = waiter.get
          if state == 0 then
            if async.cancellationDeferred then
              // park returns at once while the flag is set: hold it until we return
              if Thread.interrupted() then heldInterrupt = true
            else if Thread.interrupted() || async.isCancelled then
              if waiter.compareAndSet(0, 3) then state = 3 // abandoned before any offer: nothing was taken
              else state = waiter.get
          // else: an offer claimed the value first; it is ours, wait for it to be written
          if state == 1 then
            Thread.onSpinWait()
            state = waiter.get
        if state == 3 then // abandoned, by us or by our future's cancel: no offer was taken
          src.dropListener(waiter)
          Thread.interrupted() // the cancel's interrupt, if it has landed: this is its exception
          throw CancellationException("cancelled while awaiting")
      finally if owner != null then owner.endWait()
    if heldInterrupt then Thread.currentThread.interrupt()
    waiter.value

  // ---------------------------------------------------------------------------------------------
  // Scopes

  private final class BlockingAsync(val runtime: Runtime, val group: CompletionGroup) extends Async:
    def isCancelled: Boolean = group.isCancelled
    private[async] def owner: RunnableFuture[?] | Null = null

  private final class GroupAsync(outer: Async, val group: CompletionGroup) extends Async:
    def runtime: Runtime = outer.runtime
    def isCancelled: Boolean = group.isCancelled || outer.isCancelled
    private[async] def owner: RunnableFuture[?] | Null = outer.owner

  // ---------------------------------------------------------------------------------------------
  // Derived sources

  private final val Open = 0
  private final val Deciding = 1
  private final val Won = 2

  /** A forwarder to `k` that lets at most one offer through to acceptance, whatever `k` does
    * (an accept-all callback included): its word goes Open → Deciding (one offer at a time asks
    * `k`) → Won, or back to Open if `k` refused. An offer that meets Deciding is refused at once
    * if `k` is already done (the usual case: the awaiting thread took the value and was woken
    * while the winner is still on its way out of `k`), and otherwise waits for the answer, which
    * is quick by the listener contract; nested races take these words inner before outer, so
    * waiting cannot go round in a circle. `won()` runs once, in the accepting offer.
    */
  private[async] abstract class OnceForwarder[T](k: Listener[T], source: AnyRef) extends Listener.Forwarder[T, T](k, source):
    private val state = AtomicInteger(Open)
    protected def won(): Unit = ()
    def apply(v: T): Boolean =
      while true do
        state.get match
          case Won => return false
          case _ if k.isDone => return false // satisfied or abandoned below us: no need to wait
          case Open =>
            if state.compareAndSet(Open, Deciding) then
              val took =
                try k(v)
                catch case e: Throwable => { state.set(Open); throw e }
              state.set(if took then Won else Open)
              if took then won()
              return took
          // else: another offer claimed the word first; look again
          case _ => SegmentChannel.spinWait() // Deciding: another offer is asking k right now; its answer is quick
      false
    override def isDone: Boolean = state.get == Won || k.isDone

  private final class MappedSource[T, U](base: Source[T], f: T => U) extends Source[U]:
    private final class Forward(k: Listener[U]) extends Listener.Forwarder[T, U](k, MappedSource.this):
      def apply(v: T): Boolean = k(f(v))
    def poll(k: Listener[U]): Boolean = base.poll(Forward(k))
    def onComplete(k: Listener[U]): Unit = base.onComplete(Forward(k))
    def dropListener(k: Listener[U]): Unit = base.dropListener(Forward(k))

  private final class FilteredSource[T](base: Source[T], p: T => Boolean) extends Source[T]:
    private final class Forward(k: Listener[T]) extends Listener.Forwarder[T, T](k, FilteredSource.this):
      def apply(v: T): Boolean = p(v) && k(v)
    def poll(k: Listener[T]): Boolean = base.poll(Forward(k))
    def onComplete(k: Listener[T]): Unit = base.onComplete(Forward(k))
    def dropListener(k: Listener[T]): Unit = base.dropListener(Forward(k))

  private final class RaceSource[T](sources: IndexedSeq[Source[T]]) extends Source[T]:
    /** One per `onComplete`: forwards each source's offer to `k` and, once `k` takes one, drops
      * the registrations on every other source. Forwarders of the same `k` are equal, so one
      * `dropListener(Forward(k))` per source finds what was registered there.
      */
    private final class Forward(k: Listener[T]) extends OnceForwarder[T](k, RaceSource.this):
      override protected def won(): Unit = sources.foreach(_.dropListener(this)) // the winner forgot us already

    def poll(k: Listener[T]): Boolean = sources.exists(_.poll(k))

    def onComplete(k: Listener[T]): Unit =
      val forward = Forward(k)
      var i = 0
      while i < sources.length && !forward.isDone do
        sources(i).onComplete(forward)
        if forward.isDone then sources(i).dropListener(forward) // a winner came while registering
        i += 1

    def dropListener(k: Listener[T]): Unit = sources.foreach(_.dropListener(Forward(k)))
