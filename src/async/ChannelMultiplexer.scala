package asyncpipe.async

import java.util.concurrent.CancellationException
import java.util.concurrent.atomic.{AtomicBoolean, AtomicInteger, AtomicLong, AtomicReference}
import scala.util.{Failure, Success, Try}
import scala.util.control.NonFatal

/** Fans values in from many publisher channels and out to many subscriber channels: every value
  * read from any publisher is handed to every current subscriber.
  *
  * ==Design==
  * One loop, a [[Future]] started in the scope of the caller of `ChannelMultiplexer(...)` (so the
  * multiplexer never outlives that scope), awaits a race of every current publisher's `canRead`
  * and of an internal control channel. `addPublisher` / `removePublisher` / `close` change the
  * shared state and then wake the loop through the control channel; the loop rebuilds its race
  * whenever the set of publishers has changed, so a change takes effect at once, even while the
  * loop is waiting. The race starts at a different publisher on each turn, so that one busy
  * publisher cannot starve the others. A publisher is read through
  * `canRead.filter(still active).map(...)`: a read that reaches a removed publisher refuses the
  * value, which stays in that channel.
  *
  * Every subscriber has its own queue, a `BufferedChannel` of `buffer` values, and its own
  * delivery future (also in the caller's scope) that moves values from the queue to the
  * subscriber's channel. The loop never waits on a subscriber's channel: it hands a value
  * straight to it only when that takes no waiting (`trySend`) and nothing of that subscriber's is
  * queued or being delivered (so the value cannot overtake one), and otherwise puts it in the
  * queue. A subscriber that keeps up thus costs one hop per value, not two. Under `Block`, when
  * the multiplexer has one subscriber and nothing of it is queued, the loop sends the value into
  * that subscriber's channel itself, waiting there if it must (a `Block` loop would wait for that
  * subscriber anyway, and there is no other to delay): the queue and its delivery future are then
  * a hop saved. With one publisher as well, no thread of the multiplexer's runs per value while
  * the subscriber has room: the loop taps the publisher (`SegmentChannel.tap`, [[RelayTap]]), and
  * each value is handed on with the subscriber's `trySend` in the thread that made it ready; a
  * send into the empty publisher hands its value over before it reaches a cell (doc/adr/0018). When the subscriber is full, the tap
  * stops and the loop relays: it reads the publisher with a plain `read()` and sends each value on
  * itself, waiting for room, until the publisher has nothing ready; then it taps again. (A
  * publisher that is not one of this library's channels is always relayed.) `addSubscriber`,
  * `removeSubscriber`, publisher changes and `close` stop the tap or interrupt the relay's wait,
  * and all but `addPublisher` wait until the loop has let go (at once, or after the hand-off,
  * read or send it was in), so that each change holds for every value read after it returned; a
  * value taken but not yet sent then goes to the queue as usual. A slow subscriber
  * delays the others only once its own queue is full; what happens then is `onFull`:
  *   - [[ChannelMultiplexer.OnFull.Block]]: the loop waits until that queue has room (it waits on
  *     a promise that the delivery future completes after each value it takes out), and so stops
  *     reading publishers meanwhile: back-pressure, nothing lost.
  *   - [[ChannelMultiplexer.OnFull.Drop]]: the value is dropped for that subscriber only, and
  *     counted (`dropped`). The loop never waits for a subscriber. "Full" is a matter of
  *     timing: a subscriber that reads promptly can still drop values if its delivery future
  *     falls `buffer` values behind a burst.
  * Whether a queue is full is decided by a counter (values put in by the loop, minus values
  * taken out by the delivery future), not by `trySend`, which may fail spuriously: the drop
  * count is exact. A subscriber holds at most `buffer` values in its queue plus the one its
  * delivery future is sending (plus whatever its own channel buffers).
  *
  * ==Semantics==
  *   - Order: values of one publisher reach every subscriber in the order they were read (one
  *     loop reads, FIFO queues deliver). Values of different publishers interleave freely.
  *   - Publishers and subscribers are identified by reference; adding one twice is a no-op,
  *     removing an unknown one is a no-op.
  *   - `addPublisher`: its values are raced from then on. `removePublisher`: once it returns, no
  *     further value is taken from that channel (the loop's reads of it refuse the value, which
  *     stays in the channel for other readers). A publisher that reads
  *     `Failure(ChannelClosedException)` (closed and drained) is removed; that failure is not
  *     forwarded, unless the channel ended with an error ([[Channel.error]]: the exception has a
  *     cause): then it is forwarded to the subscribers like a value, after that publisher's
  *     last values, and the publisher is removed. Any other `Failure` a publisher reads is
  *     forwarded to the subscribers as it is.
  *   - The subscribers of a value are those there were at the moment it was read (the set is
  *     read while the value is being taken from its publisher). The loop puts a value in their
  *     queues in the order they were added, and reads the next value only once it is done.
  *   - `addSubscriber`: it receives every value the loop reads after the call returned, and none
  *     read before it began. `removeSubscriber`: it receives nothing read after the call; values
  *     already in its queue ARE still delivered (its delivery future drains the queue, then ends
  *     without sending anything else). A value the loop read just before the removal may or may
  *     not be among them.
  *   - A subscriber whose channel is closed (its `send` throws `ChannelClosedException`) is
  *     removed, with whatever its queue still held; the others are not disturbed.
  *   - `close()` (idempotent; returns at once, or once the loop has let go of its relay): the
  *     loop stops taking values as soon as `close` returns (a value it had already taken is
  *     still handed out, except, under `Block`, to subscribers whose queue was full at that
  *     moment). Every subscriber then receives, after
  *     everything already queued for it, one `Failure(ChannelClosedException())`. Neither the
  *     publishers nor the subscribers' channels are closed. After `close`, `addPublisher` and
  *     `addSubscriber` throw `ChannelClosedException` (a value source or sink added to a closed
  *     multiplexer would silently never be served); `removePublisher` and `removeSubscriber`
  *     are no-ops (removal is typically cleanup), and `dropped` keeps answering with the final
  *     counts.
  *   - `dropped(c)`: values dropped for subscriber `c` because its queue was full (`Drop` only;
  *     always 0 under `Block`, and 0 for a channel that is not, or no longer, a subscriber).
  *   - When the caller's scope ends, the loop and every delivery future are cancelled with it; a
  *     delivery future blocked on a subscriber that never reads lives until then.
  */
trait ChannelMultiplexer[T] extends java.io.Closeable:
  def addPublisher(c: ReadableChannel[T]): Unit
  def removePublisher(c: ReadableChannel[T]): Unit
  def addSubscriber(c: SendableChannel[Try[T]]): Unit
  def removeSubscriber(c: SendableChannel[Try[T]]): Unit
  def close(): Unit
  /** Values dropped for subscriber `c` because its queue was full (policy `Drop`); 0 otherwise. */
  def dropped(c: SendableChannel[Try[T]]): Long

object ChannelMultiplexer:
  /** What the loop does with a value for a subscriber whose queue is full. */
  enum OnFull:
    /** Wait for room: a slow subscriber slows everyone down, nothing is lost. */
    case Block
    /** Drop the value for that subscriber (and count it); the others are not delayed. */
    case Drop

  /** A running multiplexer whose loop is a future of the current scope.
    * @param buffer how many values wait in each subscriber's queue (at least 1)
    */
  def apply[T](buffer: Int = 16, onFull: OnFull = OnFull.Block)(using async: Async): ChannelMultiplexer[T] =
    require(buffer >= 1, s"a multiplexer needs a buffer of at least 1 per subscriber, got $buffer")
    val m = Impl[T](buffer, onFull, async)
    Future(m.loop())
    m

  // States of the loop's direct path (Impl.direct)
  private inline val Idle = 0
  private inline val Direct = 1
  private inline val Interrupting = 2
  private inline val Interrupted = 3

  // States of a relay tap (Impl.RelayTap.state)
  private inline val TapOff = 0
  private inline val TapOn = 1
  private inline val TapBusy = 2

  // Why a relay tap stopped itself (Impl.RelayTap.stop); 0 while it runs
  private inline val Stalled = 1
  private inline val PublisherEnded = 2
  private inline val SubscriberClosed = 3

  /** The most `trySend` retries a relay tap makes, 16 spins apart and giving up the carrier at
    * every second one, before it stops; the multiplexer's budget adapts below it
    * (`Impl.retryAllowance`). 1,024 rather than fewer: a subscriber whose reader's vCPU the host
    * took away for a while makes room again within the longer wait more often, and each stop
    * saved saves the loop's wake-up and relay (doc/adr/0018).
    */
  private val RetryMax = 1024

  /** How many ready values the loop takes from one publisher before it races them all again. */
  private val DrainLimit = 64

  private[async] final class Impl[T](buffer: Int, onFull: OnFull, scope: Async) extends ChannelMultiplexer[T]:

    private final class Pub(val channel: ReadableChannel[T]):
      /** False once removed: the loop's pending reads of this channel refuse its values. */
      @volatile var active = true
      /** The loop's listener for values ready now (`canRead.poll`): it takes a value while this
        * publisher is active and the multiplexer open, with the subscribers there are as it does.
        * Only the loop uses it, one poll at a time, so one serves every poll.
        */
      val ready: Ready = Ready(this)

    private final class Ready(p: Pub) extends Listener[Try[T]]:
      var value: Try[T] | Null = null
      var targets: Vector[Sub] = Vector.empty
      def apply(v: Try[T]): Boolean =
        if !p.active || closed then false
        else
          value = v
          targets = subs
          true

    private final class Sub(val out: SendableChannel[Try[T]]):
      val queue: BufferedChannel[Try[T]] = BufferedChannel[Try[T]](buffer)
      /** Values the loop has put (or is putting) in `queue` and the delivery has not taken out. */
      val queued = AtomicInteger(0)
      /** Values the loop has put in `queue` whose delivery's `send` has not yet returned: while
        * it is above 0, the loop may not hand a value straight to `out` (it would overtake them).
        */
      val unsent = AtomicInteger(0)
      val dropped = AtomicLong(0)
      /** The promise the loop waits on for room (policy Block), if it is waiting. */
      val roomWaiter = AtomicReference[Promise[Unit]](null)
      /** Removed, detached or closed: the loop puts nothing more in `queue`. */
      @volatile var gone = false
      /** The multiplexer was closed: the delivery ends with a `Failure(ChannelClosedException)`. */
      @volatile var terminal = false

      /** Wakes the loop if it waits for room here; call after changing `queued`, `gone` or `closed`. */
      def wake(): Unit =
        if roomWaiter.get != null then // a read first: the delivery calls this for every value
          val p = roomWaiter.getAndSet(null)
          if p != null then p.complete(Success(()))

    private sealed trait Event
    private case object Wake extends Event
    /** A value read from `pub`, with the subscribers there were when it was read. */
    private final class Got(val pub: Pub, val value: Try[T], val targets: Vector[Sub]) extends Event

    /** A source over `base` that offers `tag(value)` on, and refuses (leaving the value in
      * `base`) whenever `accept()` is false. The loop reads publishers and the control channel
      * through it.
      *
      * It keeps the forwarder it registered for each listener, so that `dropListener` hands
      * `base` that very object. A race drops its losing registrations with
      * `dropListener(k)`, and a channel finds a registration by its listener's identity: a new
      * forwarder of the same `k` (which is what `map`/`filter` pass down) is not found, and the
      * losing registration stays on the channel until its next value. The loop loses a race on
      * every idle publisher and on the control channel at every value, so those would pile up.
      */
    private val lock = Object()
    // Immutable snapshots, replaced under `lock`, read by the loop without it.
    @volatile private var pubs = Vector.empty[Pub]
    @volatile private var subs = Vector.empty[Sub]
    @volatile private var closed = false

    private[async] val control = UnboundedChannel[Unit]()
    private val wakes = control.canRead.map[Event](_ => Wake)
    private val wakePending = AtomicBoolean(false)

    /** Makes the loop look at the shared state again (at most one wake-up in flight). */
    private def signal(): Unit =
      if wakePending.compareAndSet(false, true) then control.sendImmediately(())

    // The loop's direct path (`relay`, `sentDirectly`): Idle, or Direct (the loop reads its one
    // publisher or sends into its one subscriber's channel itself, and may wait there),
    // Interrupting (a change is interrupting the loop's thread), Interrupted (the interrupt has
    // landed, for the loop to clear).
    private val direct = AtomicInteger(Idle)
    @volatile private var loopThread: Thread | Null = null

    /** How many times a tap may retry a `trySend` that found no room (see `RelayTap.retried`);
      * kept here, across taps, so that it stays low where retrying does not pay. Plain fields: a
      * racy update only nudges the budget. The same scheme as a channel's rendezvous spin budget
      * (`SegmentChannel.spinBudget`), kept apart: a trait shared with the channel was followed by
      * lower rendezvous figures that could not be told from noise, on the channel's hottest path.
      */
    private var retryBudget = RetryMax
    private var stallsWithoutRetry = 0

    /** The retry budget now; at 0, one retry every 64th time, to notice when retrying pays again. */
    private def retryAllowance(): Int =
      val b = retryBudget
      if b > 0 then b
      else
        stallsWithoutRetry += 1
        if (stallsWithoutRetry & 63) == 0 then 1 else 0

    /** The loop's tap on its one publisher while it relays through one (see `tapped`). */
    @volatile private var currentTap: RelayTap | Null = null

    /** The loop's standing listener on its one publisher's channel while it relays to its one
      * subscriber `s` (see `tapped`): the channel offers it each value in the thread that made the
      * value ready, and it hands the value on with `s`'s `trySend`, so no thread of the
      * multiplexer runs per value. When that would wait (`s` has no room), when `s`'s channel is
      * closed or when the publisher ends, it refuses the value (which stays in the publisher),
      * stops itself (`stop`), and wakes the loop. `off()` stops it from outside.
      * States: TapOff, TapOn, TapBusy (an offer is being handed on; any other waits for it).
      */
    private final class RelayTap(s: Sub) extends SegmentChannel.Tap[T]:
      val state = AtomicInteger(TapOff)
      /** Why the tap stopped itself: Stalled, PublisherEnded, SubscriberClosed; 0 while it runs. */
      @volatile var stop = 0

      /** The thread handing a value on (TapBusy), to refuse an offer it makes to itself. A plain
        * field: a thread only needs to recognise its own write, which it always sees.
        */
      private var owner: Thread | Null = null

      def apply(v: Try[T]): Boolean =
        // Offers come one at a time from the channel's head, but a send that finds the channel
        // empty offers its value directly (`SegmentChannel.forward`), so an offer may meet
        // another under way: it waits for it, as that one is quick (a `trySend`). A thread that
        // meets its own offer (channels relayed in a circle) is refused instead.
        while !state.compareAndSet(TapOn, TapBusy) do
          if state.get == TapOff || (owner eq Thread.currentThread) then return false // the value stays
          SegmentChannel.spinWait()
        owner = Thread.currentThread
        var took = false
        try
          v match
            case Failure(e: ChannelClosedException) =>
              // An error is forwarded by the loop, which takes the failure again from the channel.
              stop = if e.getCause == null then PublisherEnded else Stalled
            case _ => if s.out.trySend(v) || retried(v) then took = true else stop = Stalled
        catch
          case _: ChannelClosedException => stop = SubscriberClosed
          // any other failure of the subscriber's channel: the loop's own send meets it again,
          // in the loop's thread rather than in a publisher's sender
          case NonFatal(_) => stop = Stalled
        finally
          owner = null
          state.setRelease(if stop == 0 then TapOn else TapOff) // the next offer's CAS acquires
        if stop != 0 then signal()
        took

      /** The subscriber had no room: retries `trySend` for a little while before the tap stops
        * (a stop wakes the loop, which then relays until the publisher is empty: tens of
        * microseconds). The reader of a full subscriber on another core makes room within a
        * fraction of a microsecond. But it may be queued behind this very thread: a virtual
        * thread unparked by another (here, the reader, by the `trySend` that found it parked on
        * an empty subscriber) goes to the waker's carrier's own queue, and runs there only when
        * that carrier is free, unless the other carrier steals it first. So a virtual sender
        * gives up its carrier every second retry (about 1 µs of spinning apart). Where the
        * reader cannot run at all meanwhile (a carrier whose other work runs long), the budget
        * (`retryBudget`) halves whenever the retries ran out, and grows back when they paid off.
        */
      private def retried(v: Try[T]): Boolean =
        val budget = retryAllowance()
        val virtual = Thread.currentThread.isVirtual
        var tries = 0
        while tries < budget do
          tries += 1
          var i = 0
          while i < 16 do { Thread.onSpinWait(); i += 1 }
          if virtual && (tries & 1) == 0 then Thread.`yield`() // let a reader queued behind us run
          if s.out.trySend(v) then
            if budget < RetryMax then retryBudget = math.min(RetryMax, budget * 2 + 1)
            return true
        retryBudget = budget >> 1
        false

      /** Stops the tap and waits until no offer is being handed on: nothing is taken after it returns. */
      def off(): Unit =
        while
          val st = state.get
          st == TapBusy || (st == TapOn && !state.compareAndSet(TapOn, TapOff))
        do SegmentChannel.spinWait()

    /** Called by a change after it changed the shared state: stops the loop's tap, if it taps
      * (waiting for a hand-off under way), and wakes it; interrupts the loop's wait on its
      * direct path, if it is on it. With `settle`, also waits until the loop has left that path
      * (it does so at once, or after the read or send it is in), so that every value the loop
      * reads after the change returns is handled with the change in effect. A direct path entered
      * after the change sees the change (see `relay`), so it is left alone.
      */
    private def endDirect(settle: Boolean): Unit =
      val tap = currentTap
      if tap != null then
        tap.off()
        signal() // the loop waits for a wake while it taps
      if direct.get == Direct && direct.compareAndSet(Direct, Interrupting) then
        val t = loopThread
        if t != null then t.interrupt()
        direct.set(Interrupted)
      if settle && (Thread.currentThread ne loopThread) then
        while { val d = direct.get; d == Interrupting || d == Interrupted } do SegmentChannel.spinWait()

    // ---------------------------------------------------------------------------------------------
    // The public operations (any thread, no Async needed)

    def addPublisher(c: ReadableChannel[T]): Unit =
      val added = lock.synchronized {
        if closed then throw ChannelClosedException()
        if pubs.exists(_.channel eq c) then false
        else
          pubs = pubs :+ Pub(c)
          true
      }
      if added then
        signal()
        endDirect(settle = false) // its values are raced once the loop has left its relay

    def removePublisher(c: ReadableChannel[T]): Unit =
      val removed = lock.synchronized {
        if closed then false
        else
          pubs.find(_.channel eq c) match
            case Some(p) =>
              p.active = false // before returning: from now on the loop refuses this channel's values
              pubs = pubs.filterNot(_ eq p)
              true
            case None => false
      }
      if removed then
        signal() // so the loop drops its registration on the channel now
        endDirect(settle = true) // and no longer reads it

    def addSubscriber(c: SendableChannel[Try[T]]): Unit =
      val added = lock.synchronized {
        if closed then throw ChannelClosedException()
        if subs.exists(_.out eq c) then null
        else
          val s = Sub(c)
          subs = subs :+ s
          s
      }
      if added != null then
        Future(deliver(added))(using scope)
        endDirect(settle = true) // the loop must not keep serving the old subscriber alone

    def removeSubscriber(c: SendableChannel[Try[T]]): Unit =
      val removed = lock.synchronized {
        if closed then null
        else
          subs.find(_.out eq c) match
            case Some(s) =>
              subs = subs.filterNot(_ eq s)
              s.gone = true
              s
            case None => null
      }
      if removed != null then
        removed.queue.close() // the delivery drains what is queued, then ends
        removed.wake()
        endDirect(settle = true)

    def close(): Unit =
      val first = lock.synchronized {
        val was = closed
        closed = true
        !was
      }
      if first then
        subs.foreach(_.wake()) // a loop waiting for room gives up
        signal()
        endDirect(settle = true)

    def dropped(c: SendableChannel[Try[T]]): Long =
      if onFull != OnFull.Drop then 0L
      else subs.find(_.out eq c).fold(0L)(_.dropped.get)

    // ---------------------------------------------------------------------------------------------
    // The loop

    private[ChannelMultiplexer] def loop()(using Async): Unit =
      val wakeSource: Async.Source[Event] = wakes
      var seen: Vector[Pub] = null
      var reads: Vector[Async.Source[Event]] = Vector.empty
      var turn = 0
      loopThread = Thread.currentThread
      try
        while !closed do
          val now = pubs
          if now ne seen then
            seen = now
            // A removed publisher's values, or any offered after close, are refused and stay in
            // the channel; a taken one carries the subscribers there are as it is taken.
            reads = now.map(p => p.channel.canRead.filter(_ => p.active && !closed).map[Event](r => Got(p, r, subs)))
          val targets = subs
          if now.length == 1 && targets.length == 1 && onFull == OnFull.Block && targets.head.unsent.get == 0 &&
            !wakePending.get && !closed
          then
            now.head.channel match
              case ch: SegmentChannel[T @unchecked] => tapped(now.head, targets.head, now, targets, ch)
              case _                                => relay(now.head, targets.head, now, targets, whileReady = false)
          else
            val sources =
              if reads.isEmpty then Vector(wakeSource)
              else
                val k = turn % reads.length
                turn += 1
                (wakeSource +: reads.drop(k)) ++ reads.take(k)
            Async.await(Async.race(sources*)) match
              case Wake => wakePending.set(false) // then the state is read again
              case got: Got =>
                got.value match
                  case end @ Failure(_: ChannelClosedException) =>
                    if erred(end) then handOut(end, got.targets)
                    dropPublisher(got.pub)
                  case value =>
                    handOut(value, got.targets)
                    drain(got.pub)
      finally shutdown()

    /** The loop's path while it has one publisher `p` and one subscriber `s`, under `Block`, with
      * nothing of `s`'s queued: it reads `p` with `read()` and sends each value into `s`'s own
      * channel itself, waiting at either end as it must, until a change (`endDirect`) or the end
      * of `p` stops it. No race, no listener, no queue: a relay costs what a thread that reads one
      * channel and sends into another costs. A value read when a change stopped the send goes on
      * to `handOut`, with the subscriber it was read for. `now` and `targets` are the publishers and
      * subscribers the loop saw: the path is not entered if they changed since (a change writes
      * the state, then reads `direct`; the loop writes `direct`, then reads the state).
      */
    private def relay(p: Pub, s: Sub, now: Vector[Pub], targets: Vector[Sub], whileReady: Boolean)(using
        async: Async
    ): Unit =
      if !enterDirect(s, (pubs eq now) && (subs eq targets)) then return
      var pending: Try[T] | Null = null
      try
        while direct.get == Direct do
          val value =
            if !whileReady then p.channel.read()
            else
              p.channel.tryRead() match
                case Some(v) => v
                case None    => return
          value match
            case Failure(_: ChannelClosedException) =>
              dropPublisher(p) // first: a change that stops the send below leaves the error to handOut
              if erred(value) then
                pending = value
                s.out.send(value)
                pending = null
              return
            case _ =>
              pending = value
              s.out.send(value)
              pending = null
      catch
        case _: CancellationException if !async.isCancelled => () // a change stopped the relay
        case _: ChannelClosedException =>
          detach(s) // the subscriber's own channel is closed
          pending = null
      finally finishDirect()
      if pending != null then handOut(pending.nn, targets)

    /** The loop's path while it has one publisher `p`, whose channel is one of this library's, and
      * one subscriber `s`, under `Block`, with nothing of `s`'s queued: it taps `p`'s channel (see
      * [[RelayTap]]) and sleeps until the tap stops or a change wakes it. A tap that stopped
      * because `s` had no room hands over to `relay`, which sends the values `p` has ready itself,
      * waiting for room; the next turn of the loop taps again. Entering follows `relay`'s rule: the
      * tap is on before the state is checked, and a change reads `currentTap` after writing the
      * state, then stops the tap and waits for an offer under way (`endDirect`).
      */
    private def tapped(p: Pub, s: Sub, now: Vector[Pub], targets: Vector[Sub], ch: SegmentChannel[T])(using
        Async
    ): Unit =
      val tap = RelayTap(s)
      currentTap = tap
      tap.state.set(TapOn)
      if wakePending.get || closed || s.gone || (pubs ne now) || (subs ne targets) then
        tap.off()
        currentTap = null
        return
      if !ch.tap(tap) then // another multiplexer taps this channel: read it with `read()`
        tap.off()
        currentTap = null
        relay(p, s, now, targets, whileReady = false)
        return
      try
        Async.await(wakes) // the tap stopped itself, or a change came
        wakePending.set(false)
      finally
        tap.off()
        ch.untap(tap)
        currentTap = null
      tap.stop match
        case PublisherEnded   => dropPublisher(p)
        case SubscriberClosed => detach(s)
        case Stalled          => relay(p, s, now, targets, whileReady = true)
        case _                => () // a change: the loop reads the state again

    /** After a value from `p`, takes the values `p` has ready now, up to `DrainLimit`, without a
      * race: a busy publisher costs one poll per value instead of a race built, registered and
      * dropped per value. The limit keeps the other publishers and the control channel served.
      */
    private def drain(p: Pub)(using Async): Unit =
      val ready = p.ready
      var n = 0
      while n < DrainLimit && p.channel.canRead.poll(ready) do
        val value = ready.value.nn
        val targets = ready.targets
        ready.value = null
        value match
          case Failure(_: ChannelClosedException) =>
            if erred(value) then handOut(value, targets)
            dropPublisher(p)
            n = DrainLimit
          case _ =>
            handOut(value, targets)
            n += 1

    /** A publisher's end that carries its error (forwarded), not a plain close (not). */
    private def erred(end: Try[T]): Boolean = end match
      case Failure(e: ChannelClosedException) => e.getCause != null
      case _                                  => false

    private def dropPublisher(p: Pub): Unit = lock.synchronized {
      p.active = false
      pubs = pubs.filterNot(_ eq p)
    }

    /** Puts `value` in the queue of every subscriber in `targets`, in the order they were added. */
    private def handOut(value: Try[T], targets: Vector[Sub])(using Async): Unit =
      var i = 0
      while i < targets.length do
        offer(targets(i), value, targets.length == 1)
        i += 1

    private def offer(s: Sub, value: Try[T], alone: Boolean)(using Async): Unit =
      if !s.gone && !(alone && sentDirectly(s, value)) && !handedStraight(s, value) then
        val room =
          if s.queued.get < buffer then true
          else
            onFull match
              case OnFull.Drop =>
                s.dropped.incrementAndGet()
                false
              case OnFull.Block => awaitRoom(s)
        if room then
          s.unsent.incrementAndGet() // only the loop increments either counter
          s.queued.incrementAndGet() // the queue has room: send won't block
          try s.queue.send(value)
          catch case _: ChannelClosedException => () // removed meanwhile: it gets nothing more

    /** Sends `value` to `s`'s own channel if nothing of `s`'s is queued or in delivery and the
      * channel takes it without waiting. True if the value was dealt with (sent, or `s` found
      * closed and detached).
      */
    private def handedStraight(s: Sub, value: Try[T]): Boolean =
      s.unsent.get == 0 && (
        try s.out.trySend(value)
        catch
          case _: ChannelClosedException =>
            detach(s)
            true
      )

    /** Under `Block`, with `s` the one subscriber and nothing of it queued: sends `value` with
      * `s`'s own `send`, which waits if the channel has no room, until it takes `value` (true) or
      * a change of subscribers, publishers or `close` interrupts the wait (false: the value was not
      * sent, and goes on to the queue). False at once if the conditions do not hold. A cancel of
      * the loop itself is rethrown. The interrupt's hand-shake is Future's: whoever moved `direct`
      * off Direct delivers the interrupt, and the loop clears it once it has landed.
      */
    private def sentDirectly(s: Sub, value: Try[T])(using async: Async): Boolean =
      if onFull != OnFull.Block || s.unsent.get != 0 || !enterDirect(s, subs.length == 1) then return false
      try
        s.out.send(value)
        true
      catch
        case _: CancellationException if !async.isCancelled => false // a change interrupted the wait
        case _: ChannelClosedException =>
          detach(s)
          true // dealt with: `s` is gone
      finally finishDirect()

    /** Enters the Direct state for subscriber `s`, and stays in it if, looked at after that, no
      * change is pending, the multiplexer is open, `s` is there and `unchanged` (the caller's own
      * condition, evaluated after the state was written) holds; else leaves it again (false). A
      * change made before the state was written is seen here; one made after interrupts the loop.
      */
    private inline def enterDirect(s: Sub, inline unchanged: Boolean): Boolean =
      direct.set(Direct)
      val stay = !wakePending.get && !closed && !s.gone && unchanged
      if !stay then finishDirect()
      stay

    /** Leaves the Direct state; clears an interrupt that `endDirect` delivered. */
    private def finishDirect(): Unit =
      if !direct.compareAndSet(Direct, Idle) then
        while direct.get != Interrupted do Thread.onSpinWait() // let the interrupt land
        Thread.interrupted()
        direct.set(Idle)

    /** Waits until `s`'s queue has room; false if `s` went away or the multiplexer was closed. */
    private def awaitRoom(s: Sub)(using Async): Boolean =
      while s.queued.get >= buffer do
        if s.gone || closed then return false
        val p = Promise[Unit]()
        s.roomWaiter.set(p)
        // Checked again after publishing `p`: whoever changes the state then wakes `p`.
        if s.queued.get >= buffer && !s.gone && !closed then Async.await(p)
        s.roomWaiter.compareAndSet(p, null)
      true

    /** The loop's end (close, cancel or failure): every subscriber's queue closes for good. */
    private def shutdown(): Unit =
      val last = lock.synchronized {
        closed = true
        subs
      }
      last.foreach { s =>
        s.terminal = true
        s.gone = true
        s.queue.close()
        s.wake()
      }

    // ---------------------------------------------------------------------------------------------
    // Delivery, one future per subscriber

    private def deliver(s: Sub)(using Async): Unit =
      try
        var open = true
        while open do
          s.queue.read() match
            case Success(v) =>
              s.queued.decrementAndGet()
              s.wake()
              s.out.send(v)
              s.unsent.decrementAndGet() // after the send: the loop may now pass it by
            case Failure(_) => // closed and drained
              open = false
              if s.terminal then s.out.send(Failure(ChannelClosedException()))
      catch case _: ChannelClosedException => detach(s) // the subscriber's own channel is closed

    private def detach(s: Sub): Unit =
      lock.synchronized {
        if !closed then subs = subs.filterNot(_ eq s) // after close the set stays, for `dropped`
        s.gone = true
      }
      s.queue.close()
      s.wake()
