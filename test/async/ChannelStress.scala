package asyncpipe.async

import java.lang.management.ManagementFactory
import java.util.concurrent.{CancellationException, ConcurrentLinkedQueue, CountDownLatch, TimeUnit}
import java.util.concurrent.atomic.{AtomicIntegerArray, AtomicLong, AtomicLongArray, AtomicReferenceArray}
import java.util.concurrent.locks.LockSupport
import scala.collection.mutable
import scala.jdk.CollectionConverters.*
import scala.concurrent.duration.*
import scala.util.{Failure, Random, Success, Try}
import munit.{Assertions, Location}
import Support.*

/** Channel stress under random cancellation, and the memory a cancelled waiter leaves behind.
  *
  * ==Exactly-once under cancellation==
  * For each kind (rendezvous, buffered 1, 2, `SegmentSize` - 1 and + 1 (one short of a segment
  * and one past it), and unbounded) and each way of reading, `N` senders each send an increasing
  * sequence of tagged values `(sender, seq)` while `M` readers read, and a canceller cancels the senders'
  * and readers' futures at random, mostly while they are blocked in the channel. A cancelled
  * actor carries on in a new future. When every sender has decided every value, the channels
  * are closed and drained. Then:
  *   - every value read was sent by a send that returned normally, and was read once only;
  *   - every send that returned normally was read (close + drain loses nothing);
  *   - a send that threw `CancellationException` was read by nobody;
  *   - each reader saw each sender's values in increasing order (per-sender FIFO);
  *   - each channel passes `checkInvariants()` once quiescent.
  * Ways of reading: `read()`; a mix of `read()`, `canRead.await`, a filtered `canRead` and
  * `tryRead()` (senders mixing `trySend` and `send`); and `Async.race` over three channels'
  * `canRead` (Go's `select`), plain and nested.
  * Send branches: on rendezvous, buffered(1), buffered(16) and unbounded channels, senders send
  * each value through an `Async.select` of `canSend` branches on two channels, sometimes raced
  * against a timer (`Async.after`) or a read of one of the channels, nested in a race, or polled
  * (`selectNow`); a select that sent nothing (its timer or read won, or nothing was ready) sends
  * the value again. Readers read by `read()`, `canRead`, `tryRead` and selects. Half of the
  * canceller's strokes there are interrupts of the thread rather than cancels of the future.
  * Checked as above, with the channel each value went to being the one its select chose, order
  * per sender and channel, every value a select read instead of sending read once too, and the
  * selects' own timers gone from the scheduler at the end.
  *
  * ==No garbage from cancelled waiters==
  * Reads blocked on an empty rendezvous channel, and sends blocked on a full buffered(16) one,
  * are ended by the hundred thousand (interrupts of the thread, and cancels of the future); then
  * at most 3 segments are reachable (`segmentCount`: cancelled cells are unlinked), the heap
  * retained after full collections has grown by less than 1 MiB, a `trySend` finds no reader
  * left behind (rendezvous) or the buffer holds exactly its 16 values (buffered), and a send and
  * a read still pair. The same for a million `canRead` listeners registered and dropped, for
  * 100,000 values taken by listener reads (`tryRead`, `canRead.poll`) alone, and for 100,000 send
  * branches (fewer on platform threads) registered and dropped on a rendezvous and a full
  * buffered(16) channel: selects that lose to a read, or (one in a thousand) time out.
  *
  * Sizes scale with the environment variable `ASYNCPIPE_STRESS` (a multiplier, default 1: about
  * 10 s per runtime; 100 for the long on-demand run, which also prints a line of statistics
  * per run, as does `ASYNCPIPE_STATS=1`). The random choices come from a seed printed in every
  * failure; `ASYNCPIPE_SEED` replays the choices (not the thread schedule, which no seed
  * controls).
  */
abstract class ChannelStress(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime
  import ChannelStress.*

  // Long on-demand runs need more than the default 30 s per test (munit's own timeout too).
  override def watchdog = scala.concurrent.duration.Duration(30L * Factor, TimeUnit.SECONDS)
  override def munitTimeout = watchdog + scala.concurrent.duration.Duration(10, TimeUnit.SECONDS)

  // ---------------------------------------------------------------------------------------------
  // Exactly-once under cancellation

  private val Kinds = Seq(0, 1, 2, SegmentChannel.SegmentSize - 1, SegmentChannel.SegmentSize + 1, SegmentChannel.Unbounded)

  for (mode, plan) <- Seq(
      ReadMode.Read -> Plan(senders = 3, readers = 2, perSender = 4000 * Factor, channels = 1),
      ReadMode.Mixed -> Plan(senders = 3, readers = 3, perSender = 2500 * Factor, channels = 1),
      ReadMode.Race -> Plan(senders = 3, readers = 2, perSender = 2500 * Factor, channels = 3)
    )
  do
    test(s"exactly once under random cancels: ${plan.senders} senders, ${plan.readers} readers, ${mode.describe}, every kind"):
      val seed = seedFrom(s"$mode")
      var cancels = 0L
      for cap <- Kinds do
        cancels += runExactlyOnce(cap, mode, plan, seed + cap)
      assert(cancels > 0, s"the canceller cancelled nothing (seed $seed): the test did not test cancellation")

  // Send branches: senders send each value through a select of `canSend` branches on two
  // channels, raced against a timer, a read, or nested in a race, or polled (selectNow)
  private val SendSelectKinds = Seq(0, 1, 16, SegmentChannel.Unbounded)
  private val SendSelectPlan = Plan(senders = 3, readers = 2, perSender = 1500 * Factor, channels = 2)

  test(s"exactly once under random cancels and interrupts: ${SendSelectPlan.senders} senders, ${SendSelectPlan.readers} readers, ${ReadMode.SendSelect.describe}; rendezvous, buffered(1), buffered(16), unbounded"):
    val seed = seedFrom("send branches")
    var cancels = 0L
    for cap <- SendSelectKinds do
      cancels += runExactlyOnce(cap, ReadMode.SendSelect, SendSelectPlan, seed + cap)
    assert(cancels > 0, s"the canceller cancelled nothing (seed $seed): the test did not test cancellation")

  /** One run; returns the number of cancels that landed on a pending future. */
  private def runExactlyOnce(cap: Int, mode: ReadMode, plan: Plan, seed: Long)(using Location): Long =
    val channels = Vector.fill(plan.channels)(make[Long](cap))
    val run = Run(cap, mode, plan, seed, channels)
    val started = System.nanoTime()
    Async.blocking:
      val senders = (0 until plan.senders).map(s => run.supervise(s, run.Sender(s)))
      val readers = (0 until plan.readers).map(r => run.supervise(plan.senders + r, run.Reader(r)))
      run.cancelWhile(!senders.forall(_.isCompleted))
      channels.foreach(_.close())
      run.cancelWhile(!readers.forall(_.isCompleted))
      (senders ++ readers).foreach(f => resultWithin(f, s"${run.where}: an actor") match
        case Failure(e) => Assertions.fail(s"${run.where}: an actor failed: $e", e)
        case _          => ())
    val stats = run.verify()
    val ran = millisSince(started)
    if mode == ReadMode.SendSelect then run.checkTimers()
    if Factor > 1 || sys.env.contains("ASYNCPIPE_STATS") then
      println(s"${getClass.getSimpleName}: ${run.where}: $stats; $ran ms, ${millisSince(started) - ran} ms more for the timers")
    run.cancels.get

  /** The state of one exactly-once run: actors, their records, the canceller. */
  private final class Run(cap: Int, mode: ReadMode, plan: Plan, seed: Long, channels: Vector[Channel[Long]]):
    val where = s"${kindName(cap)}, ${mode.describe}, seed $seed"
    private val actors = plan.senders + plan.readers
    /** What each send ended as: Unknown, Sent (returned normally), Cancelled, or Closed. */
    private val outcome = Vector.fill(plan.senders)(AtomicIntegerArray(plan.perSender))
    /** Where each sent value went: 1 + the channel's index (SendSelect: the select's choice). */
    private val sentTo = Vector.fill(plan.senders)(AtomicIntegerArray(plan.perSender))
    /** The streams of values read: one per reader, and (SendSelect) one per sender, whose
      * selects may read instead of sending.
      */
    private val streams = plan.readers + (if mode == ReadMode.SendSelect then plan.senders else 0)
    /** Per stream: (channel index, value), in the order read. */
    private val received = Vector.fill(streams)(ConcurrentLinkedQueue[(Int, Long)]())
    /** SendSelect: selects whose timer rang first, that read a value instead, that found nothing
      * ready (selectNow), and interrupts of actors' threads (besides cancels of their futures).
      */
    private val timeouts, readInstead, notReady, interrupts = AtomicLong()
    private val timersBefore = Timers.pending
    private val errors = ConcurrentLinkedQueue[String]()
    /** The running epoch of each actor, for the canceller. */
    private val epochs = AtomicReferenceArray[Epoch](actors)
    private val progress = AtomicLong()
    val cancels = AtomicLong()

    /** Runs `actor` in a fresh future, epoch after epoch, until it reports that it is finished;
      * a cancel ends only the current epoch. The next epoch starts once the previous body has
      * ended, so an actor's operations never overlap.
      */
    def supervise(slot: Int, actor: Actor)(using Async): Future[Unit] = Future:
      var finished = false
      while !finished do
        val epoch = Epoch()
        epoch.future = Future:
          try
            epoch.thread = Thread.currentThread // from here on, the canceller may cancel it
            epoch.done = actor.epoch()
          catch
            case e: Throwable =>
              errors.add(s"actor $slot died: $e")
              epoch.done = true
          finally epoch.ended.countDown()
        epochs.set(slot, epoch)
        if !epoch.ended.await(Patience * 4, TimeUnit.MILLISECONDS) then
          errors.add(s"actor $slot: an epoch did not end")
          finished = true
        else finished = epoch.done
      epochs.set(slot, null)

    private def channelOf(sender: Int): Int = sender % plan.channels

    /** Sends this sender's values from where the last epoch stopped. */
    final class Sender(s: Int) extends Actor:
      private val rnd = Random(seed * 31 + s)
      private var next = 0 // carried from epoch to epoch (the supervisor's latch orders them)
      def epoch()(using Async): Boolean =
        val ch = channels(channelOf(s))
        var cancelled = false
        while !cancelled && next < plan.perSender do
          val v = tag(s, next)
          val result =
            try
              if mode == ReadMode.SendSelect then selectSend(s, next, v, rnd)
              else if mode == ReadMode.Mixed && rnd.nextInt(3) == 0 && ch.trySend(v) then Sent
              else
                ch.send(v)
                Sent
            catch
              case _: CancellationException  => cancelled = true; Cancelled
              case _: ChannelClosedException => Closed
          if result != Unknown then // Unknown: nothing sent (a timer or a read won): the value again
            if result == Sent && mode != ReadMode.SendSelect then sentTo(s).set(next, 1 + channelOf(s))
            outcome(s).set(next, result)
            next += 1
          progress.incrementAndGet()
        !cancelled

    /** Offers `v` (sender `s`'s `q`th value) to both channels through a select of two send
      * branches, in a random order, sometimes raced against a short timer (`Async.after`) or a
      * read of one of the channels, or nested in a race, or polled (`selectNow`). Sent (and
      * where to in `sentTo`), or Unknown if nothing was sent (the timer or the read won, or
      * nothing was ready); a cancel or an interrupt throws `CancellationException`.
      */
    private def selectSend(s: Int, q: Int, v: Long, rnd: Random)(using Async): Int =
      def sent(i: Int)(r: Try[Unit]): Int = r match
        case Success(_) =>
          sentTo(s).set(q, i + 1)
          Sent
        case Failure(e) =>
          errors.add(s"sender $s: the send branch of seq $q to channel $i failed: $e")
          Closed
      val sends = Seq(channels(0).canSend(v).handle(sent(0)), channels(1).canSend(v).handle(sent(1)))
      val branches = if rnd.nextBoolean() then sends else sends.reverse
      rnd.nextInt(8) match
        case 0 =>
          Async.select(branches :+ Async.after(rnd.nextInt(3).toLong.millis).handle(_ => { timeouts.incrementAndGet(); Unknown })*)
        case 1 =>
          val i = rnd.nextInt(2)
          val read = channels(i).canRead.handle { t =>
            t match
              case Success(w) => received(plan.readers + s).add((i, w))
              case Failure(e) => errors.add(s"sender $s: its select read $t from channel $i")
            readInstead.incrementAndGet()
            Unknown
          }
          Async.select((if rnd.nextBoolean() then branches :+ read else read +: branches)*)
        case 2 =>
          val race = Async.race(channels(0).canSend(v).map(r => (0, r)), channels(1).canSend(v).map(r => (1, r)))
          Async.select(race.handle((i, r) => sent(i)(r)))
        case 3 => Async.selectNow(branches*)(otherwise = { notReady.incrementAndGet(); Unknown })
        case _ => Async.select(branches*)

    /** Reads until every channel it reads is closed and drained. */
    final class Reader(r: Int) extends Actor:
      private val rnd = Random(seed * 37 + 1000 + r)
      private val open = mutable.BitSet((0 until plan.channels)*)
      private val mine = received(r)
      def epoch()(using Async): Boolean =
        try
          while open.nonEmpty do
            val (i, t) = mode match
              case ReadMode.Read       => (0, channels(0).read())
              case ReadMode.Mixed      => (0, mixedRead(channels(0), rnd))
              case ReadMode.Race       => raceRead(open.toIndexedSeq, rnd)
              case ReadMode.SendSelect => selectRead(open.toIndexedSeq, rnd)
            t match
              case Success(v)                         => mine.add((i, v)); progress.incrementAndGet()
              case Failure(_: ChannelClosedException) => open -= i
              case Failure(e)                         => errors.add(s"reader $r read $t"); open.clear()
          true
        catch case _: CancellationException => false

    private def mixedRead(ch: Channel[Long], rnd: Random)(using Async): Try[Long] = rnd.nextInt(4) match
      case 0 => ch.read()
      case 1 => ch.canRead.await
      case 2 => // only values of even sequence numbers, and the end: the others stay for other readers
        ch.canRead.filter { case Success(v) => seqOf(v) % 2 == 0; case _ => true }.await
      case _ => ch.tryRead() match
        case Some(t) => t
        case None    => ch.read()

    /** A read of one of the open channels: read(), canRead.await, tryRead, or a select over
      * both, plain or with a race nested in it.
      */
    private def selectRead(open: IndexedSeq[Int], rnd: Random)(using Async): (Int, Try[Long]) =
      val i = open(rnd.nextInt(open.size))
      rnd.nextInt(5) match
        case 0 => (i, channels(i).read())
        case 1 => (i, channels(i).canRead.await)
        case 2 => (i, channels(i).tryRead().getOrElse(channels(i).read()))
        case 3 if open.size > 1 =>
          Async.select(Async.race(open.map(j => channels(j).canRead.map(t => (j, t)))*).handle(identity))
        case _ => Async.select(open.map(j => channels(j).canRead.handle(t => (j, t)))*)

    private def raceRead(open: IndexedSeq[Int], rnd: Random)(using Async): (Int, Try[Long]) =
      val sources = open.map(i => channels(i).canRead.map(t => (i, t)))
      val race =
        if sources.size >= 3 && rnd.nextBoolean() then Async.race(Async.race(sources(0), sources(1)) +: sources.drop(2)*)
        else Async.race(sources*)
      race.await

    /** Cancels random epochs while `cond` holds: mostly ones blocked in the channel, sometimes
      * any. Pacing by a short random park is not synchronisation: it only spreads the cancels.
      */
    def cancelWhile(cond: => Boolean)(using Location): Unit =
      val rnd = Random(seed)
      var lastProgress = progress.get
      var lastChange = System.nanoTime()
      while cond do
        val slot = rnd.nextInt(actors)
        val epoch = epochs.get(slot)
        val t = if epoch == null then null else epoch.thread
        // only an epoch whose body runs: one cancelled before it starts never runs its body
        if t != null && !epoch.future.isCompleted then
          val blocked = t.getState == Thread.State.WAITING
          if blocked || rnd.nextInt(8) == 0 then
            // SendSelect: half of them an interrupt of the thread, which a blocked select takes for
            // a cancel (one that lands while the body runs is seen at its next wait)
            if mode == ReadMode.SendSelect && rnd.nextBoolean() then
              t.interrupt()
              interrupts.incrementAndGet()
            else epoch.future.cancel()
            cancels.incrementAndGet()
        LockSupport.parkNanos(rnd.between(5_000, 100_000))
        val p = progress.get
        if p != lastProgress then
          lastProgress = p
          lastChange = System.nanoTime()
        else if millisSince(lastChange) > Patience then
          val stacks = (0 until actors).flatMap { i =>
            val e = epochs.get(i)
            val t = if e == null then null else e.thread
            Option(t).map(t => s"actor $i (${if i < plan.senders then "sender" else "reader"}), ${t.getState}:\n    " +
              t.getStackTrace.take(16).mkString("\n    "))
          }
          val message = s"$where: no progress for $Patience ms\n${summary()}\n${stacks.mkString("\n")}"
          // printed now too: if an actor spins without end, the scope's exit waits for it forever
          System.err.println(message)
          Assertions.fail(message)

    private def summary(): String =
      val decided = outcome.map(a => (0 until a.length).count(a.get(_) != Unknown))
      s"senders decided ${decided.mkString("/")} of ${plan.perSender}; read ${received.map(_.size).mkString("/")}; " +
        s"cancels ${cancels.get}\n" + channels.zipWithIndex.map((c, i) => s"channel $i: ${safeDump(c)}").mkString("\n")

    /** Checks the run; returns a line of statistics. */
    def verify()(using Location): String =
      val problems = mutable.ArrayBuffer.from(errors.asScala)
      val times = mutable.HashMap.empty[Long, Int]
      for r <- 0 until streams do
        val reader = if r < plan.readers then s"reader $r" else s"sender ${r - plan.readers}'s select"
        val last = mutable.HashMap.empty[(Int, Int), Int] // per sender and channel: FIFO holds per channel
        for (i, v) <- received(r).asScala do
          times(v) = times.getOrElse(v, 0) + 1
          val (s, q) = (senderOf(v), seqOf(v))
          if s < 0 || s >= plan.senders || q < 0 || q >= plan.perSender then problems += s"$reader read $v, never sent"
          else
            outcome(s).get(q) match
              case Sent =>
                val to = sentTo(s).get(q) - 1
                if i != to then problems += s"$reader read (sender $s, seq $q) from channel $i, sent to $to"
              case Cancelled => problems += s"$reader read (sender $s, seq $q), whose send was cancelled"
              case o         => problems += s"$reader read (sender $s, seq $q), whose send ended as ${OutcomeName(o)}"
            last.get((s, i)) match
              case Some(p) if p >= q => problems += s"$reader read sender $s's seq $q after its seq $p from channel $i"
              case _                 => ()
            last((s, i)) = q
      for (v, n) <- times if n > 1 do problems += s"(sender ${senderOf(v)}, seq ${seqOf(v)}) read $n times"
      var sent, cancelled = 0
      for s <- 0 until plan.senders; q <- 0 until plan.perSender do
        outcome(s).get(q) match
          case Sent =>
            sent += 1
            if !times.contains(tag(s, q)) then problems += s"(sender $s, seq $q) was sent (send returned) but never read"
          case Cancelled => cancelled += 1
          case o         => problems += s"(sender $s, seq $q): its send ended as ${OutcomeName(o)}"
      for (c, i) <- channels.zipWithIndex do
        try segment(c).checkInvariants()
        catch case e: AssertionError => problems += s"channel $i: ${e.getMessage}"
      if problems.nonEmpty then
        Assertions.fail(
          s"$where: ${problems.size} problems (sent $sent, cancelled sends $cancelled, cancels ${cancels.get}); first ones:\n  " +
            problems.take(20).mkString("\n  ") + "\n" + summary())
      val read = received.map(_.size).sum
      val more =
        if mode != ReadMode.SendSelect then ""
        else s" (${interrupts.get} of them interrupts); ${timeouts.get} timers won, ${readInstead.get} reads won over the sends, ${notReady.get} selectNows found nothing ready"
      s"$sent sent, $cancelled sends cancelled, $read read, ${cancels.get} cancels$more"

    /** The selects' own timers (`Async.after`), lost or cancelled with their select, are gone. */
    def checkTimers()(using Location): Unit =
      eventually(s"$where: the selects' timers to leave the scheduler (${Timers.pending} pending, $timersBefore before the run)")(
        Timers.pending <= timersBefore)

  // ---------------------------------------------------------------------------------------------
  // A cancel decides a parked operation (issue 35, item 9; doc/adr/0006)

  private val DecidedKinds = Seq(0, 1, 2, 4, SegmentChannel.SegmentSize - 1, SegmentChannel.SegmentSize + 1, SegmentChannel.Unbounded)
  private val DecidedRounds = 6 * Factor
  private val DecidedParties = 64

  for how <- Seq("read()", "canRead", "race") do
    test(s"parked readers ($how) cancelled while values are sent: none takes a value whose send began after its cancel returned; each value read once; every kind"):
      val seed = seedFrom(s"decided readers $how")
      val rnd = Random(seed)
      val problems = mutable.ArrayBuffer.empty[String]
      var late = 0
      var rounds = 0
      for cap <- DecidedKinds; round <- 0 until DecidedRounds do
        val where = s"${kindName(cap)}, round $round, seed $seed"
        val ch = make[Int](cap)
        val spare = make[Int](cap)
        val clock = AtomicLong()
        val n = DecidedParties
        val values = n / 2
        val threads = AtomicReferenceArray[Thread](n)
        val took = AtomicReferenceArray[Try[Int]](n)
        val cancelledAt = AtomicLongArray(n)
        val sendBegan = AtomicLongArray(values)
        Async.blocking:
          val readers = Vector.tabulate(n) { i =>
            Future:
              threads.set(i, Thread.currentThread)
              val got = how match
                case "read()"  => ch.read()
                case "canRead" => ch.canRead.await
                case _         => Async.race(ch.canRead, spare.canRead).await
              took.set(i, got)
          }
          for i <- 0 until n do
            eventually(s"$where: reader $i to park")(ChannelBehaviour.parkedInChannel(threads.get(i)))
          val pacing = Random(rnd.nextLong())
          val sender = Future:
            for v <- 0 until values do
              if pacing.nextInt(4) == 0 then pause()
              sendBegan.set(v, clock.incrementAndGet())
              ch.send(v)
          for i <- Random(rnd.nextLong()).shuffle((0 until n).toVector) do
            readers(i).cancel()
            cancelledAt.set(i, clock.incrementAndGet())
            if rnd.nextInt(8) == 0 then pause()
          for i <- 0 until n do join(threads.get(i), s"$where: cancelled reader $i")
          val byReaders = (0 until n).flatMap(i => Option(took.get(i)).map(i -> _))
          for (i, t) <- byReaders do
            t match
              case Success(v) if sendBegan.get(v) > cancelledAt.get(i) =>
                late += 1
                problems += s"$where: reader $i took $v, whose send began after the reader's cancel() had returned"
              case Success(_) => ()
              case other      => problems += s"$where: reader $i read $other"
          val rest = values - byReaders.size
          val fresh = Future(Vector.fill(rest)(ch.read()))
          resultWithin(fresh, s"$where: the fresh reader of the $rest values left") match
            case Success(got) =>
              val all = (byReaders.map(_._2) ++ got).collect { case Success(v) => v }.sorted
              if all != (0 until values) then problems += s"$where: values read ${all.mkString(",")}, sent 0 until $values"
            case Failure(e) => problems += s"$where: the fresh reader failed: $e"
          resultWithin(sender, s"$where: the sender") match
            case Failure(e) => problems += s"$where: the sender failed: $e"
            case _          => ()
        try
          segment(ch).checkInvariants()
          segment(spare).checkInvariants()
        catch case e: AssertionError => problems += s"$where: ${e.getMessage}"
        rounds += 1
      if Factor > 1 || sys.env.contains("ASYNCPIPE_STATS") then
        println(s"${getClass.getSimpleName}: readers in $how: $late values taken after the cancel, in $rounds rounds")
      assert(problems.isEmpty, s"${problems.size} problems in $rounds rounds ($late values taken by a reader after its cancel() had returned); first ones:\n  " +
        problems.take(20).mkString("\n  "))

  test(s"parked senders cancelled while a reader reads: no read that began after a sender's cancel returned ends its wait; a send returns iff its value is read; every kind"):
    val seed = seedFrom("decided senders")
    val rnd = Random(seed)
    val problems = mutable.ArrayBuffer.empty[String]
    var late = 0
    var rounds = 0
    for cap <- DecidedKinds if cap != SegmentChannel.Unbounded; round <- 0 until DecidedRounds do
      val where = s"${kindName(cap)}, round $round, seed $seed"
      val ch = make[Int](cap)
      val n = DecidedParties
      val clock = AtomicLong()
      val threads = AtomicReferenceArray[Thread](n)
      val returned = AtomicIntegerArray(n) // 1: the send returned, 2: it threw CancellationException
      val cancelledAt = AtomicLongArray(n)
      val reads = ConcurrentLinkedQueue[(Int, Long)]() // (value, tick at the read's start)
      Async.blocking:
        for f <- 0 until cap do ch.send(-1 - f)
        val senders = Vector.tabulate(n) { i =>
          Future:
            threads.set(i, Thread.currentThread)
            try
              ch.send(i)
              returned.set(i, 1)
            catch
              case e: CancellationException =>
                returned.set(i, 2)
                throw e
        }
        for i <- 0 until n do
          eventually(s"$where: sender $i to park")(ChannelBehaviour.parkedInChannel(threads.get(i)))
        val pacing = Random(rnd.nextLong())
        val reader = Future:
          var open = true
          while open do
            if pacing.nextInt(4) == 0 then pause()
            val began = clock.incrementAndGet()
            val got = pacing.nextInt(3) match
              case 0 => ch.read()
              case 1 => ch.canRead.await
              case _ => ch.tryRead().getOrElse(ch.read())
            got match
              case Success(v) => reads.add((v, began))
              case _          => open = false
        for i <- Random(rnd.nextLong()).shuffle((0 until n).toVector) do
          senders(i).cancel()
          cancelledAt.set(i, clock.incrementAndGet())
          if rnd.nextInt(8) == 0 then pause()
        for i <- 0 until n do join(threads.get(i), s"$where: cancelled sender $i")
        ch.close()
        resultWithin(reader, s"$where: the reader") match
          case Failure(e) => problems += s"$where: the reader failed: $e"
          case _          => ()
      val got = reads.asScala.toVector
      val counts = got.groupMapReduce(_._1)(_ => 1)(_ + _)
      for (v, k) <- counts if k > 1 do problems += s"$where: $v read $k times"
      for f <- 0 until cap if !counts.contains(-1 - f) do problems += s"$where: the buffered value ${-1 - f} was not read"
      for ((v, _), m) <- got.zipWithIndex if v >= 0 do
        // A parked sender's wait ends when a read takes its value (rendezvous: that very read) or
        // makes room for it in the buffer: one of the `cap` reads before the one that takes it, as
        // the buffer holds at most `cap` values. If even the earliest of those began after the
        // cancel returned, the wait ended after the cancel.
        val decidedBy = if cap == 0 then m else math.max(0, m - cap)
        if got(decidedBy)._2 > cancelledAt.get(v) then
          late += 1
          problems += s"$where: sender $v's value was read (read $m), though every read that could have ended its wait began after its cancel() had returned"
        if returned.get(v) != 1 then problems += s"$where: sender $v's value was read, but its send threw"
      for i <- 0 until n do
        if returned.get(i) == 1 && !counts.contains(i) then problems += s"$where: sender $i's send returned, but its value was never read"
        if returned.get(i) == 0 then problems += s"$where: sender $i ended without its send returning or throwing"
      try segment(ch).checkInvariants()
      catch case e: AssertionError => problems += s"$where: ${e.getMessage}"
      rounds += 1
    if Factor > 1 || sys.env.contains("ASYNCPIPE_STATS") then
      println(s"${getClass.getSimpleName}: senders: $late values taken after the cancel, in $rounds rounds")
    assert(problems.isEmpty, s"${problems.size} problems in $rounds rounds ($late values of senders taken after their cancel() had returned); first ones:\n  " +
      problems.take(20).mkString("\n  "))

  // ---------------------------------------------------------------------------------------------
  // No garbage from cancelled waiters

  /** Cancelled waits per leak test: 1,000,000 on long runs; by default 100,000 on virtual threads,
    * and fewer on platform threads, where one costs about 0.2 ms on two cores (a park, an unpark
    * and a thread switch each way).
    */
  private val LeakWaiters =
    if Factor >= 10 then 1_000_000 else if isVirtual(runtime) then 100_000 else 20_000
  /** Dropping a listener costs no thread switch: a million by default. */
  private val LeakListeners = if Factor >= 10 then 10_000_000 else 1_000_000

  test(s"$LeakWaiters reads cancelled while blocked on a rendezvous channel leave no garbage"):
    val ch = SyncChannel[Long]()
    checkNoGarbage(ch, LeakWaiters, "blocked reads")((_, async) => ch.read()(using async))
    assert(!ch.trySend(1L), s"a trySend found a reader after every reader was cancelled: ${safeDump(ch)}")
    assertPairs(ch)

  test(s"${LeakWaiters / 2} reads cancelled while blocked on an emptied buffered(16) channel leave no garbage"):
    // Values first, so that the segments they passed through are kept (a buffered value is never
    // interrupted) while the later ones, holding only cancelled readers, must still be unlinked.
    val ch = BufferedChannel[Long](16)
    for i <- 0 until 3 * SegmentChannel.SegmentSize do
      assert(ch.trySend(i.toLong), s"buffered(16) refused value $i on an empty channel: ${safeDump(ch)}")
      assertEquals(ch.tryRead(), Some(Success(i.toLong)), safeDump(ch))
    checkNoGarbage(ch, LeakWaiters / 2, "blocked reads")((_, async) => ch.read()(using async))
    assert(ch.tryRead().isEmpty, s"a value appeared after the cancelled reads: ${safeDump(ch)}")
    assertPairs(ch)

  test(s"${LeakWaiters / 2} sends cancelled while blocked on a full buffered(16) channel leave no garbage"):
    val ch = BufferedChannel[Long](16)
    for i <- 0 until 16 do assert(ch.trySend(i.toLong), s"buffered(16) refused value $i of 16: ${safeDump(ch)}")
    checkNoGarbage(ch, LeakWaiters / 2, "blocked sends")((i, async) => ch.send(1_000_000L + i)(using async))
    val drained = Iterator.continually(ch.tryRead()).takeWhile(_.isDefined).flatten.toList
    assertEquals(drained, (0 until 16).map(i => Success(i.toLong)).toList,
      s"after the cancelled senders, the channel held other values than the 16 buffered: ${safeDump(ch)}")
    assertPairs(ch)

  test(s"$LeakListeners canRead listeners registered and dropped on a rendezvous channel leave no garbage"):
    val ch = SyncChannel[Long]()
    val k = Listener[Try[Long]](_ => true)
    def cycle(n: Int): Unit =
      for _ <- 0 until n do
        ch.canRead.onComplete(k)
        ch.canRead.dropListener(k)
    cycle(LeakListeners / 10) // warm-up
    val before = retainedHeap()
    cycle(LeakListeners)
    val after = retainedHeap()
    assertBounded(before, after, LeakListeners, "dropped listeners", ch)
    assert(!ch.trySend(1L), s"a trySend found a reader after every listener was dropped: ${safeDump(ch)}")
    assertPairs(ch)

  /** Send branches per leak test: each a select that parks and is woken, as a cancelled waiter. */
  private val LeakBranches = LeakWaiters
  /** One in this many is a selectWithin that times out (1 ms each); the rest lose to a read. */
  private val TimeoutEvery = 1000

  for cap <- Seq(0, 16) do
    test(s"$LeakBranches send branches registered and dropped on a ${if cap == 0 then "rendezvous" else "full buffered(16)"} channel (selects lost to a read, selectWithin timeouts) leave no garbage"):
      val ch = make[Long](cap)
      for i <- 0 until cap do assert(ch.trySend(i.toLong), s"buffered(16) refused value $i of 16: ${safeDump(ch)}")
      val timers = Timers.pending
      cycleSendBranches(ch, 2000) // warm-up
      val before = retainedHeap()
      val registered = cycleSendBranches(ch, LeakBranches)
      val after = retainedHeap()
      assertBounded(before, after, registered, "send branches dropped", ch)
      // (the last select's losing branch is withdrawn by the partner's or the timer's thread)
      eventually(s"the dropped send branches to be withdrawn: ${safeDump(ch)}")(segment(ch).parkedSenders == 0)
      eventually(s"the selectWithin timers to leave the scheduler (${Timers.pending} pending, $timers before)")(Timers.pending <= timers)
      if cap == 0 then assert(!ch.trySend(1L), s"a trySend found a reader, or a dropped branch's value was read: ${safeDump(ch)}")
      else
        val drained = Iterator.continually(ch.tryRead()).takeWhile(_.isDefined).flatten.toList
        assertEquals(drained, (0 until cap).map(i => Success(i.toLong)).toList,
          s"after the dropped send branches, the channel held other values than the $cap buffered: ${safeDump(ch)}")
      assertPairs(ch)

  /** Runs `total` selects with a send branch on `ch`, where the send must wait (`ch` is a
    * rendezvous channel with no reader, or full), in a future of the runtime: most race it
    * against a read of another channel that a partner future makes ready only once the select
    * has registered both branches (the read's source lets the partner go when it registers,
    * after the send branch), so the send branch was parked, and is dropped when the read wins;
    * one in `TimeoutEvery` is a `selectWithin(1.millis)`, whose timer wins. Returns how many send
    * branches were registered (counted by `ch`'s send counter: each takes a cell), and checks
    * that at least the ones that lost to a read were.
    */
  private def cycleSendBranches(ch: Channel[Long], total: Int)(using Location): Int =
    val in = SyncChannel[Long]()
    val registeredRead = java.util.concurrent.Semaphore(0)
    val read = new Async.Source[Try[Long]]:
      def poll(k: Listener[Try[Long]]): Boolean = in.canRead.poll(k)
      def onComplete(k: Listener[Try[Long]]): Unit =
        in.canRead.onComplete(k)
        registeredRead.release()
      def dropListener(k: Listener[Try[Long]]): Unit = in.canRead.dropListener(k)
    val s0 = ChannelBehaviour.sendCounter(ch).get
    val problems = ConcurrentLinkedQueue[String]()
    val lostToRead = Async.blocking:
      val partner = Future:
        var v = 0L
        while true do
          registeredRead.acquire() // an interrupt (the cancel at the end) ends the future
          if !in.trySend(v) then problems.add(s"the partner's trySend($v) found no read registered")
          v += 1
      val selects = Future:
        var lost = 0
        var i = 0
        while i < total && problems.isEmpty do
          if i % TimeoutEvery == TimeoutEvery - 1 then
            val r = Async.selectWithin(1.millis)(ch.canSend(-1L - i).handle(_ => "sent"))
            if r.nonEmpty then problems.add(s"select $i: a send branch on a channel with no room sent")
          else
            val r = Async.select(ch.canSend(-1L - i).handle(_ => "sent"), read.handle(_ => "read"))
            if r != "read" then problems.add(s"select $i: $r, expected the read to win")
            lost += 1
          i += 1
        lost
      val lost = resultWithin(selects, "the selects").get
      partner.cancel()
      lost
    if !problems.isEmpty then Assertions.fail(s"${problems.asScala.take(5).mkString("; ")}\n${safeDump(ch)}")
    val registered = (ChannelBehaviour.sendCounter(ch).get - s0).toInt
    assert(registered >= lostToRead, s"only $registered of $total send branches were registered ($lostToRead lost to a read)")
    registered

  // A million values: a segment costs about 6 bytes a value, so a channel that kept every
  // segment it used (it once did, through a field holding segment 0) grows by 6 MB, far over
  // LeakSlack; 100,000 values (600 KB) did not show it.
  private val LeakValues = if Factor >= 10 then 10_000_000 else 1_000_000

  test(s"$LeakValues values sent and taken (tryRead, canRead.poll, read) leave no segments behind"):
    for cap <- Seq(1, 16, SegmentChannel.Unbounded) do
      val ch = make[Long](cap)
      val before = retainedHeap()
      var i = 0L
      Async.blocking:
        while i < LeakValues do
          if !ch.trySend(i) then Assertions.fail(s"${kindName(cap)}: trySend($i) refused on an empty channel\n${safeDump(ch)}")
          val got = (i % 3) match
            case 0 => ch.tryRead()
            case 1 => ch.canRead.poll()
            case _ => Some(ch.read())
          if got != Some(Success(i)) then Assertions.fail(s"${kindName(cap)}: read $got after sending $i\n${safeDump(ch)}")
          i += 1
      val after = retainedHeap()
      val segments = segment(ch).segmentCount
      if Factor > 1 || sys.env.contains("ASYNCPIPE_STATS") then
        println(s"${getClass.getSimpleName}: ${kindName(cap)}: $i values sent and taken: heap ${before / 1024} KiB before, ${after / 1024} KiB after; $segments segments")
      assert(segments <= 3 && after - before < LeakSlack,
        s"${kindName(cap)}: after $i values sent and taken, $segments segments are reachable and the heap " +
          s"grew by ${(after - before) / 1024} KiB (are used segments never released?)\n${safeDump(ch, 600)}")
      assertPairs(ch)

  /** Makes `total` waiters of `op` on `ch`, each cancelled once blocked, and checks that the heap
    * retained afterwards does not grow with `total`.
    *
    * A pool of futures (128 on virtual threads, 64 on platform threads) runs `op` in a loop. Each
    * round waits until every future is blocked in its next `op`, then ends every wait: most by
    * interrupting the thread (the future catches the `CancellationException` and goes on to its
    * next `op`), one in eight by cancelling the future (it ends; a new one takes its place).
    * Rounds repeat until `total` waits were cancelled.
    */
  private def checkNoGarbage(ch: Channel[Long], total: Int, what: String)(op: (Long, Async) => Any)(using Location): Unit =
    val seed = seedFrom(what)
    cancelWaiters(ch, 2000, what, seed)(op) // warm-up: classes loaded, first segments made
    val before = retainedHeap()
    val (interrupted, cancelled) = cancelWaiters(ch, total, what, seed)(op)
    val after = retainedHeap()
    assert(interrupted > 0 && cancelled > 0, s"seed $seed: $interrupted waits ended by interrupts, $cancelled by cancels; expected both")
    assertBounded(before, after, total, s"$what (seed $seed)", ch)

  /** The rounds of `checkNoGarbage`; returns how many waits ended by an interrupt, by a cancel. */
  private def cancelWaiters(ch: Channel[Long], total: Int, what: String, seed: Long)(op: (Long, Async) => Any)(using Location): (Int, Int) =
    val rnd = Random(seed)
    val slots = if isVirtual(runtime) then 128 else 64
    val begun = AtomicIntegerArray(slots) // operations begun by the futures of slot i
    val ended = AtomicIntegerArray(slots) // ... and ended (by a CancellationException, or wrongly)
    val problems = ConcurrentLinkedQueue[String]()
    val ids = AtomicLong()
    var interrupts, cancels = 0
    final class Slot(i: Int)(using Async):
      @volatile var thread: Thread = null
      val finished = CountDownLatch(1)
      val future = Future:
        thread = Thread.currentThread
        try
          while !summon[Async].isCancelled do
            begun.incrementAndGet(i)
            try
              op(ids.getAndIncrement(), summon[Async])
              problems.add(s"a waiter's $what operation completed")
            catch
              case _: CancellationException => Thread.interrupted() // the interrupt was the cancel
              case e: Throwable             => problems.add(s"a waiter's $what operation threw $e")
            finally ended.incrementAndGet(i)
        finally finished.countDown()
    def within(what: => String)(cond: => Boolean): Unit =
      val deadline = System.nanoTime() + Patience * 1_000_000
      var spins = 0
      while !cond do
        if System.nanoTime() > deadline then Assertions.fail(s"timed out after $Patience ms waiting for $what\n${safeDump(ch)}")
        spins += 1
        if spins < 200 then Thread.onSpinWait() else if spins < 400 then Thread.`yield`() else LockSupport.parkNanos(50_000)
    Async.blocking:
      val pool = Array.tabulate(slots)(Slot(_))
      var done = 0
      while done < total do
        for i <- 0 until slots do
          within(s"waiter $i to block in its ${begun.get(i)}th $what operation") {
            val t = pool(i).thread
            begun.get(i) == ended.get(i) + 1 && t != null && t.getState == Thread.State.WAITING
          }
        val replace = Array.fill(slots)(rnd.nextInt(8) == 0)
        val target = Array.tabulate(slots)(begun.get) // the operation each waiter is blocked in
        for i <- 0 until slots do
          if replace(i) then { pool(i).future.cancel(); cancels += 1 }
          else { pool(i).thread.interrupt(); interrupts += 1 }
        for i <- 0 until slots do
          // an interrupted waiter goes straight on to its next operation: wait for this one's end only
          within(s"waiter $i's ${target(i)}th $what operation to end (its thread: ${pool(i).thread.getState})")(ended.get(i) >= target(i))
          if replace(i) then
            awaitLatch(pool(i).finished, s"the cancelled future of waiter $i to end")
            pool(i) = Slot(i)
        done += slots
        if !problems.isEmpty then
          Assertions.fail(s"seed $seed: ${problems.asScala.take(5).mkString("; ")}\n${safeDump(ch)}")
      pool.foreach(_.future.cancel()) // the last waits: cancelled too, before the scope ends
    (interrupts, cancels)

  private def assertBounded(before: Long, after: Long, n: Int, what: String, ch: Channel[?])(using Location): Unit =
    val grown = after - before
    val segments = segment(ch).segmentCount
    if Factor > 1 || sys.env.contains("ASYNCPIPE_STATS") then
      println(s"${getClass.getSimpleName}: $n cancelled $what: heap ${before / 1024} KiB before, ${after / 1024} KiB after; $segments segments")
    assert(segments <= 3, s"$segments segments reachable after $n cancelled $what: cancelled cells are not unlinked\n${safeDump(ch, 2000)}")
    assert(grown < LeakSlack,
      s"the heap retained ${grown / 1024} KiB more after $n cancelled $what (${grown.toDouble / n} bytes each; " +
        s"before ${before / 1024} KiB, after ${after / 1024} KiB): a cancelled waiter leaves garbage in the channel\n${safeDump(ch, 2000)}")

  /** A send and a read still pair up on `ch`. */
  private def assertPairs(ch: Channel[Long])(using Location): Unit =
    val got = Async.blocking:
      val reader = Future:
        ch.read()
      ch.send(42L)
      resultWithin(reader, "the read after the cancellations")
    assertEquals(got, Success(Success(42L)), safeDump(ch))
    segment(ch).checkInvariants()

object ChannelStress:
  /** The stress multiplier: `ASYNCPIPE_STRESS`, default 1. */
  val Factor: Int = sys.env.get("ASYNCPIPE_STRESS").flatMap(_.trim.toIntOption).filter(_ >= 1).getOrElse(1)

  /** The seed of a test's random choices: `ASYNCPIPE_SEED` if set, else a fresh one. */
  def seedFrom(salt: String): Long =
    sys.env.get("ASYNCPIPE_SEED").flatMap(_.trim.toLongOption).getOrElse(System.nanoTime() ^ salt.hashCode.toLong)

  def make[T](cap: Int): Channel[T] = cap match
    case 0                        => SyncChannel[T]()
    case SegmentChannel.Unbounded => UnboundedChannel[T]()
    case n                        => BufferedChannel[T](n)

  def kindName(cap: Int): String = cap match
    case 0                        => "rendezvous"
    case SegmentChannel.Unbounded => "unbounded"
    case n                        => s"buffered($n)"

  def segment(ch: Channel[?]): SegmentChannel[?] = ch.asInstanceOf[SegmentChannel[?]]

  /** The channel's dump, cut to `limit` characters (a long channel dumps every segment). */
  def safeDump(ch: Channel[?], limit: Int = 4000): String =
    val d =
      try segment(ch).dump
      catch case e: Throwable => s"<dump failed: $e>"
    if d.length <= limit then d else d.take(limit) + s"... (${d.length - limit} more characters)"


  def tag(sender: Int, seq: Int): Long = (sender.toLong << 32) | (seq.toLong & 0xffffffffL)
  def senderOf(v: Long): Int = (v >>> 32).toInt
  def seqOf(v: Long): Int = v.toInt

  enum ReadMode:
    case Read, Mixed, Race, SendSelect
    def describe: String = this match
      case Read       => "read()"
      case Mixed      => "read/canRead/filter/tryRead, send/trySend"
      case Race       => "Async.race over 3 channels"
      case SendSelect => "sends through selects of send branches on 2 channels (with a timer, a read, nested in a race, selectNow), reads by read/canRead/tryRead/select"

  final case class Plan(senders: Int, readers: Int, perSender: Int, channels: Int)

  /** One future of an actor: `thread` is set once its body runs, `done` when it ends. */
  final class Epoch:
    @volatile var future: Future[Unit] = null
    @volatile var thread: Thread = null
    @volatile var done = false
    val ended = CountDownLatch(1)

  /** A sender or reader of a stress run: `epoch` runs in one future until cancelled (false) or
    * done (true).
    */
  trait Actor:
    def epoch()(using Async): Boolean

  final val Unknown = 0
  final val Sent = 1
  final val Cancelled = 2
  final val Closed = 3
  val OutcomeName = Vector("undecided", "sent", "cancelled", "closed")

  /** Heap growth allowed across a leak test: GC noise, not proportional to the waiters. */
  val LeakSlack: Long = 1L * 1024 * 1024

  /** The heap in use after full collections, once it has stopped shrinking. */
  def retainedHeap(): Long =
    val memory = ManagementFactory.getMemoryMXBean
    var last = Long.MaxValue
    var now = 0L
    var rounds = 0
    while
      System.gc()
      now = memory.getHeapMemoryUsage.getUsed
      rounds += 1
      val shrinking = now < last - 64 * 1024
      last = now
      shrinking && rounds < 8
    do ()
    now

class ChannelStressOnVirtualThreads extends ChannelStress(Runtime.VirtualThreads)
class ChannelStressOnPlatformThreads extends ChannelStress(Runtime.PlatformThreads)
