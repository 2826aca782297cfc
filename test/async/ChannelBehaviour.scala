package asyncpipe.async

import java.util.concurrent.{CancellationException, CountDownLatch}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicInteger, AtomicReference}
import scala.util.{Failure, Success, Try}
import munit.Location
import Support.*
import ChannelBehaviour.*
import ChannelKind.*

/** Channels, deterministically: every behaviour of the facade (`Channel.scala`) on every kind of
  * channel, around the segment boundary (`SegmentSize` cells) too: order, blocking per kind,
  * trySend / tryRead, close, cancellation and interrupts, `uninterruptible`, `canRead` as a source
  * (poll, await, races, `either`, nested races, filters), and small many-senders / many-readers runs.
  * Each test orders its threads with latches, joins and "parked in the channel" checks, never
  * with sleeps; every wait is bounded. Heavy concurrency lives in the stress suite.
  */
abstract class ChannelBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  // ---------------------------------------------------------------------------------------------
  // Helpers

  /** A body running on a thread of its own (a future's, or a bare thread): its thread, what it
    * threw, and its result.
    */
  private final class Op[T](val what: String):
    val started = CountDownLatch(1)
    private[ChannelBehaviour] val threadRef = AtomicReference[Thread]()
    /** What the body threw, if it threw. */
    val thrown = AtomicReference[Throwable]()
    private[ChannelBehaviour] var future: Future[T] | Null = null
    private[ChannelBehaviour] val outcome = AtomicReference[Try[T]]() // bare threads only
    def thread: Thread =
      awaitLatch(started, s"$what to start")
      threadRef.get
    def isDone: Boolean =
      val f = future
      if f != null then f.isCompleted else outcome.get != null
    /** The body's result, waited for (bounded). */
    def result(using Location): Try[T] =
      val f = future
      if f != null then resultWithin(f, what)
      else
        join()
        outcome.get
    /** Waits until the body is parked inside a channel operation (or an await). */
    def awaitParked()(using Location): Unit = awaitParkedIn(thread, what)
    def join()(using Location): Unit = Support.join(thread, what)
    def cancel(): Unit = future.nn.cancel()
    /** Asserts the body ended (joined) by throwing a CancellationException. */
    def assertEndedCancelled()(using Location): Unit =
      join()
      assert(thrown.get.isInstanceOf[CancellationException], s"$what ended with ${thrown.get}, not a CancellationException")

  /** Starts `body` in a future of the current scope. */
  private def start[T](what: String)(body: Async ?=> T)(using Async): Op[T] =
    val op = Op[T](what)
    op.future = Future:
      op.threadRef.set(Thread.currentThread())
      op.started.countDown()
      try body
      catch
        case e: Throwable =>
          op.thrown.set(e)
          throw e
    op

  /** Starts `body` in a future and waits until it is parked in the channel. */
  /** Starts a `read()` of the empty rendezvous channel `ch` with a spin budget far above any
    * test's length, and waits until it spins on its mark in its cell (it never parks).
    */
  private def spinningReader(ch: Channel[Int])(using Async, Location): Op[Try[Int]] =
    seg(ch).setSpinBudget(Int.MaxValue >> 4) // about 3.5 s of Thread.onSpinWait here
    val reader = start("the spinning reader")(ch.read())
    eventually("the reader to spin on its cell")(cellCodes(ch).contains('w'))
    reader

  private def blocked[T](what: String)(body: Async ?=> T)(using Async, Location): Op[T] =
    val op = start(what)(body)
    op.awaitParked()
    op

  /** Starts `n` futures (`body(i)`) at once, then waits until every one is parked in the channel;
    * for tests where the order in which they parked does not matter.
    */
  private def allBlocked[T](n: Int, what: Int => String)(body: Int => Async ?=> T)(using Async, Location): Vector[Op[T]] =
    val ops = Vector.tabulate(n)(i => start(what(i))(body(i)))
    ops.foreach(_.awaitParked())
    ops

  /** Runs `Async.blocking(body)` on a bare thread of the runtime (no future to cancel). */
  private def onBareThread[T](what: String)(body: Async ?=> T): Op[T] =
    val op = Op[T](what)
    runtime.start { () =>
      op.threadRef.set(Thread.currentThread())
      op.started.countDown()
      op.outcome.set(Try(Async.blocking(body)) match
        case f @ Failure(e) =>
          op.thrown.set(e)
          f
        case s => s
      )
    }
    op

  /** Runs `body` in a future and returns its result, bounded by `Patience`: for calls on the
    * test's own thread that might block (a broken channel then fails the test, not the build).
    */
  private def attempt[T](what: String)(body: Async ?=> T)(using Async, Location): Try[T] =
    resultWithin(Future(body), what)

  private def within[T](what: String)(body: Async ?=> T)(using Async, Location): T = attempt(what)(body) match
    case Success(v) => v
    case Failure(e) => fail(s"$what failed with $e", e)

  /** Makes `v` wait in `ch`: buffered if there is room, else held by a sender parked in `send`.
    * Returns that sender, which completes once `v` is buffered or taken.
    */
  private def pending[T](ch: Channel[T], v: T)(using Async, Location): Op[Unit] =
    val op = start(s"the sender of $v")(ch.send(v))
    eventually(s"$v to wait in the channel: buffered, or its sender parked")(op.isDone || parkedInChannel(op.thread))
    op

  /** Sends `values` where they must all fit in the buffer: the sends must complete. */
  private def fill[T](ch: Channel[T], values: Seq[T])(using Async, Location): Unit =
    assertEquals(attempt(s"sending ${values.size} values into free buffer room")(values.foreach(ch.send(_))), Success(()),
      dumpOf(ch))

  /** A value sent now reaches the next reader: one send and one read pair up. */
  private def assertRoundTrip[T](ch: Channel[T], v: T)(using Async, Location): Unit =
    val sender = start(s"the sender of $v")(ch.send(v))
    assertEquals(within(s"reading $v")(ch.read()), Success(v), dumpOf(ch))
    assertEquals(sender.result, Success(()))

  /** Takes what `tryRead` gives until it gives nothing or a failure. */
  private def drained[T](ch: Channel[T]): List[Try[T]] =
    val out = List.newBuilder[Try[T]]
    var next = ch.tryRead()
    var n = 0
    while next.isDefined && n < 100_000 do
      out += next.get
      n += 1
      next = if next.get.isFailure then None else ch.tryRead()
    out.result()

  private def assertEmptyNow(ch: Channel[?])(using Location): Unit =
    assertEquals(ch.tryRead(), None, s"a value is left in the channel: ${dumpOf(ch)}")

  private def assertClosedRead(t: Try[?], what: String)(using Location): Unit = t match
    case Failure(_: ChannelClosedException) => ()
    case other                              => fail(s"$what: expected Failure(ChannelClosedException), got $other")

  private def checked(chs: Channel[?]*)(using Location): Unit = chs.foreach(ch => seg(ch).checkInvariants())

  private val kinds = ChannelKind.all

  // ---------------------------------------------------------------------------------------------
  // Kinds

  for kind <- kinds do
    test(s"$kind: capacity is ${kind.capacity}; the views are the same channel"):
      val ch = kind.make[Int]()
      assertEquals(ch.capacity, kind.capacity)
      Async.blocking:
        val sender = start("a send through asSendable")(ch.asSendable().send(1))
        assertEquals(within("a read through asReadable")(ch.asReadable().read()), Success(1))
        assertEquals(sender.result, Success(()))
      assert(!ch.isClosed)
      ch.asCloseable().close()
      assert(ch.isClosed, "close through asCloseable did not close the channel")
      checked(ch)

  // ---------------------------------------------------------------------------------------------
  // Order (behaviour 1)

  for kind <- kinds do
    val n = 2 * SegmentChannel.SegmentSize + 5 // three segments
    test(s"$kind: $n values from one sender are read in the order sent, across segments"):
      val ch = kind.make[Int]()
      Async.blocking:
        val sender = start(s"the sender of 0..${n - 1}")((0 until n).foreach(ch.send(_)))
        val reader = start("the reader")(Vector.fill(n)(ch.read()))
        assertEquals(reader.result, Success((0 until n).toVector.map(Success(_))), dumpOf(ch))
        assertEquals(sender.result, Success(()))
        assertEmptyNow(ch)
      checked(ch)

  for kind <- kinds if kind.capacity != 0 do
    val batch = kind.room.min(100)
    test(s"$kind: filled with $batch values and drained, 4 times over: every value in order"):
      val ch = kind.make[Int]()
      Async.blocking:
        for round <- 0 until 4 do
          val values = (0 until batch).map(_ + round * batch)
          fill(ch, values)
          assertEquals(drained(ch), values.toList.map(Success(_)), s"round $round: ${dumpOf(ch)}")
          checked(ch)

  // ---------------------------------------------------------------------------------------------
  // Blocking, per kind (behaviours 2, 3)

  for kind <- kinds if kind == Rendezvous do
    test(s"$kind: send blocks until a reader takes the value"):
      val ch = kind.make[Int]()
      Async.blocking:
        val sender = blocked("the sender of 1")(ch.send(1))
        assert(!sender.isDone, "a rendezvous send returned with no reader")
        assertEquals(within("the read")(ch.read()), Success(1))
        assertEquals(sender.result, Success(()))
      checked(ch)

    test(s"$kind: two blocked senders, one reader: each read releases exactly the sender it took from"):
      val ch = kind.make[Int]()
      Async.blocking:
        val s1 = blocked("the sender of 1")(ch.send(1))
        val s2 = blocked("the sender of 2")(ch.send(2))
        val first = within("the first read")(ch.read())
        val (taken, other) = first match
          case Success(1) => (s1, s2)
          case Success(2) => (s2, s1)
          case r          => fail(s"the first read gave $r, expected 1 or 2")
        assertEquals(taken.result, Success(()), s"${taken.what} did not return after its value was read")
        assert(!other.isDone, s"${other.what} returned before its value was read")
        val second = within("the second read")(ch.read())
        assertEquals(other.result, Success(()))
        assertEquals(Set(first, second), Set[Try[Int]](Success(1), Success(2)))
        assertEmptyNow(ch)
      checked(ch)

  for kind <- kinds do
    kind match
      case Buffered(n) =>
        test(s"$kind: the first $n sends return at once; the next blocks until a read, and again after it"):
          val ch = kind.make[Int]()
          Async.blocking:
            fill(ch, 0 until n)
            val s1 = blocked(s"the sender of $n")(ch.send(n))
            assert(!s1.isDone, s"send $n returned with $n values buffered: ${dumpOf(ch)}")
            assertEquals(within("the first read")(ch.read()), Success(0))
            assertEquals(s1.result, Success(()), "the blocked send did not return after a read made room")
            val s2 = blocked(s"the sender of ${n + 1}")(ch.send(n + 1))
            assert(!s2.isDone, s"send ${n + 1} returned with the buffer full again: ${dumpOf(ch)}")
            assertEquals(within("the second read")(ch.read()), Success(1))
            assertEquals(s2.result, Success(()))
            assertEquals(drained(ch), (2 to n + 1).toList.map(Success(_)))
          checked(ch)
      case _ => ()

  for kind <- kinds if kind == Unbounded do
    test(s"$kind: 1000 sends never block; sendImmediately needs no Async and throws once closed"):
      val ch = UnboundedChannel[Int]()
      Async.blocking:
        assertEquals(attempt("1000 sends with no reader")((0 until 1000).foreach(ch.send(_))), Success(()))
      (1000 until 1011).foreach(ch.sendImmediately)
      assertEquals(drained(ch), (0 until 1011).toList.map(Success(_)))
      ch.sendImmediately(7)
      ch.close()
      intercept[ChannelClosedException](ch.sendImmediately(8))
      assertEquals(ch.tryRead(), Some(Success(7)), "the value sent before the close was lost")
      assertClosedRead(ch.tryRead().get, "tryRead on the closed, drained channel")
      checked(ch)

  for kind <- kinds if kind.sendCanBlock do
    test(s"$kind: blocked senders are served in the order they blocked"):
      val ch = kind.make[Int]()
      val fills = (0 until kind.capacity).map(_ + 100)
      Async.blocking:
        fill(ch, fills)
        val senders = (0 until 5).map(i => blocked(s"the sender of $i")(ch.send(i)))
        val reader = start("the reader")(Vector.fill(fills.size + 5)(ch.read()))
        assertEquals(reader.result, Success((fills ++ (0 until 5)).toVector.map(Success(_))), dumpOf(ch))
        senders.foreach(s => assertEquals(s.result, Success(())))
      checked(ch)

  for kind <- kinds do
    test(s"$kind: read on an empty channel blocks until a send arrives"):
      val ch = kind.make[Int]()
      Async.blocking:
        val reader = blocked("the reader")(ch.read())
        assert(!reader.isDone, "read returned on an empty channel")
        val sender = start("the sender of 5")(ch.send(5))
        assertEquals(reader.result, Success(Success(5)))
        assertEquals(sender.result, Success(()))
        assertEmptyNow(ch)
      checked(ch)

    test(s"$kind: blocked readers are served in the order they blocked"):
      val ch = kind.make[Int]()
      Async.blocking:
        val readers = (0 until 5).map(i => blocked(s"reader $i")(ch.read()))
        val sender = start("the sender of 0..4")((0 until 5).foreach(ch.send(_)))
        readers.zipWithIndex.foreach((r, i) => assertEquals(r.result, Success(Success(i)), s"${r.what}: ${dumpOf(ch)}"))
        assertEquals(sender.result, Success(()))
      checked(ch)

  // ---------------------------------------------------------------------------------------------
  // trySend and tryRead (behaviour 4)

  for kind <- kinds do
    test(s"$kind: tryRead on an empty channel is None, and takes nothing from a later send"):
      val ch = kind.make[Int]()
      assertEquals(ch.tryRead(), None)
      assertEquals(ch.tryRead(), None)
      Async.blocking(assertRoundTrip(ch, 1))
      checked(ch)

    test(s"$kind: trySend to a reader parked in read() hands the value over"):
      val ch = kind.make[Int]()
      Async.blocking:
        val reader = blocked("the reader")(ch.read())
        assert(ch.trySend(1), s"trySend refused with a reader waiting: ${dumpOf(ch)}")
        assertEquals(reader.result, Success(Success(1)))
        assertEmptyNow(ch)
      checked(ch)

    test(s"$kind: trySend after close throws ChannelClosedException"):
      val ch = kind.make[Int]()
      ch.close()
      intercept[ChannelClosedException](ch.trySend(1))
      assertClosedRead(ch.tryRead().getOrElse(fail("tryRead on a closed channel gave None")), "tryRead after close")
      checked(ch)

  for kind <- kinds if kind.sendCanBlock do
    test(s"$kind: trySend on a full channel is false at once, and that value is never delivered"):
      val ch = kind.make[Int]()
      (0 until kind.capacity).foreach(i => assert(ch.trySend(i), s"trySend $i refused with room in the buffer: ${dumpOf(ch)}"))
      assert(!ch.trySend(-1), s"trySend accepted a value with the channel full: ${dumpOf(ch)}")
      assert(!ch.trySend(-2), s"trySend accepted a value with the channel full: ${dumpOf(ch)}")
      assertEquals(drained(ch), (0 until kind.capacity).toList.map(Success(_)))
      Async.blocking:
        val reader = blocked("a reader after the refused trySends")(ch.read())
        val sender = start("the sender of 7")(ch.send(7))
        assertEquals(reader.result, Success(Success(7)), "a refused trySend's value was delivered")
        assertEquals(sender.result, Success(()))
      assertEmptyNow(ch)
      checked(ch)

  for kind <- kinds if kind == Rendezvous do
    test(s"$kind: trySend succeeds only while a reader is parked in read()"):
      val ch = kind.make[Int]()
      assert(!ch.trySend(0), "trySend succeeded with no reader")
      Async.blocking:
        val reader = blocked("the reader")(ch.read())
        assert(ch.trySend(1), s"trySend failed with a reader parked: ${dumpOf(ch)}")
        assertEquals(reader.result, Success(Success(1)))
        assert(!ch.trySend(2), "trySend succeeded after the only reader was served")
        assertEmptyNow(ch)
        assertRoundTrip(ch, 3) // and neither 0 nor 2 comes out later
      checked(ch)

    test(s"$kind: tryRead succeeds only while a sender is parked in send()"):
      val ch = kind.make[Int]()
      assertEquals(ch.tryRead(), None)
      Async.blocking:
        val sender = blocked("the sender of 1")(ch.send(1))
        assertEquals(ch.tryRead(), Some(Success(1)), dumpOf(ch))
        assertEquals(sender.result, Success(()), "the sender did not return after tryRead took its value")
        assertEquals(ch.tryRead(), None)
      checked(ch)

    // A reader that comes to its cell first spins on a mark there (SPINNING_READER, "w" in the
    // dump) before it parks; each test holds it spinning long and meets it with one operation.
    test(s"$kind: a send to a reader spinning in read() hands the value over"):
      val ch = kind.make[Int]()
      Async.blocking:
        val reader = spinningReader(ch)
        ch.send(1)
        assertEquals(reader.result, Success(Success(1)), dumpOf(ch))
        assertEmptyNow(ch)
      checked(ch)

    test(s"$kind: trySend to a reader spinning in read() hands the value over"):
      val ch = kind.make[Int]()
      Async.blocking:
        val reader = spinningReader(ch)
        assert(ch.trySend(1), s"trySend refused with a reader spinning: ${dumpOf(ch)}")
        assertEquals(reader.result, Success(Success(1)), dumpOf(ch))
        assert(!ch.trySend(2), "trySend succeeded after the only reader was served")
      checked(ch)

    test(s"$kind: close ends a reader spinning in read() with the closed failure"):
      val ch = kind.make[Int]()
      Async.blocking:
        val reader = spinningReader(ch)
        ch.close()
        reader.result match
          case Success(r) => assertClosedRead(r, "the spinning reader's read")
          case Failure(e) => fail(s"the reader failed: $e")
      checked(ch)

    test(s"$kind: a tryRead that reads the head while a reader spins there takes nothing from it"):
      val ch = kind.make[Int]()
      Async.blocking:
        val reader = spinningReader(ch)
        assertEquals(ch.tryRead(), None, s"tryRead took something from a spinning reader's cell: ${dumpOf(ch)}")
        ch.send(1)
        assertEquals(reader.result, Success(Success(1)), dumpOf(ch))
      checked(ch)

    // A sender slow between taking its index and writing its cell: its reader stops waiting and
    // poisons the cell (BROKEN, "X"). The send deposits with a swap, which then finds BROKEN: it
    // must write that back and retry with a new index. No test thread can stop a real sender
    // there, so the test takes index 0 for it (S to 1), lets the reader poison cell 0 and park in
    // cell 1, and gives index 0 back (S to 0) for the real send to take, as the slow sender would.
    test(s"$kind: a send whose cell its reader poisoned meanwhile retries: the value reaches that reader"):
      val ch = kind.make[Int]()
      Async.blocking:
        seg(ch).setSpinBudget(0) // the reader goes straight to the general path: patience, poison, park
        val senders = sendCounter(ch)
        senders.getAndAdd(1L) // a sender has taken index 0 and not yet written
        val reader = start("the reader")(ch.read())
        eventually("the reader to poison cell 0 and park in cell 1")(cellCodes(ch).startsWith("Xr"))
        assert(senders.compareAndSet(1L, 0L), dumpOf(ch))
        ch.send(1)
        assertEquals(reader.result, Success(Success(1)), dumpOf(ch))
        assert(cellCodes(ch).startsWith("XD"), s"cell 0 should stay poisoned and cell 1 be done: ${dumpOf(ch)}")
      checked(ch)

  for kind <- kinds do
    kind match
      case Buffered(n) =>
        test(s"$kind: tryRead on a full channel takes the head and lets the parked sender in"):
          val ch = kind.make[Int]()
          Async.blocking:
            fill(ch, 0 until n)
            val sender = blocked(s"the sender of $n")(ch.send(n))
            assertEquals(ch.tryRead(), Some(Success(0)), dumpOf(ch))
            assertEquals(sender.result, Success(()))
            assertEquals(drained(ch), (1 to n).toList.map(Success(_)))
          checked(ch)
      case _ => ()

  for kind <- kinds if kind.capacity != 0 do
    val k = kind.room.min(40)
    test(s"$kind: after close, tryRead returns the $k buffered values, then the closed failure"):
      val ch = kind.make[Int]()
      Async.blocking(fill(ch, 0 until k))
      ch.close()
      assertEquals(drained(ch).take(k), (0 until k).toList.map(Success(_)), dumpOf(ch))
      assertClosedRead(ch.tryRead().getOrElse(fail("tryRead on a closed, drained channel gave None")), "tryRead after the drain")
      assertClosedRead(ch.tryRead().get, "tryRead again")
      checked(ch)

  // ---------------------------------------------------------------------------------------------
  // Close (behaviour 5)

  for kind <- kinds do
    test(s"$kind: send after close throws ChannelClosedException and sends nothing"):
      val ch = kind.make[Int]()
      ch.close()
      Async.blocking:
        failureOf[ChannelClosedException](attempt("a send after close")(ch.send(1)))
        failureOf[ChannelClosedException](attempt("another send after close")(ch.send(2)))
        assertClosedRead(within("the read")(ch.read()), "read after the refused sends")
      checked(ch)

    test(s"$kind: a closed, empty channel reads as Failure(ChannelClosedException), every time, by every means"):
      val ch = kind.make[Int]()
      ch.close()
      Async.blocking:
        for i <- 1 to 3 do assertClosedRead(within(s"read $i")(ch.read()), s"read $i")
        assertClosedRead(ch.tryRead().getOrElse(fail("tryRead gave None")), "tryRead")
        assertClosedRead(ch.canRead.poll().getOrElse(fail("canRead.poll() gave None")), "canRead.poll()")
        assertClosedRead(within("await canRead")(Async.await(ch.canRead)), "await canRead")
        assertClosedRead(within("read again")(ch.read()), "the last read")
      checked(ch)

    test(s"$kind: close is idempotent, and isClosed tells"):
      val ch = kind.make[Int]()
      assert(!ch.isClosed)
      Async.blocking:
        val sender = pending(ch, 1)
        ch.close()
        assert(ch.isClosed)
        ch.close()
        ch.close()
        assert(ch.isClosed)
        assertEquals(within("the read")(ch.read()), Success(1), "a second close lost the value sent before it")
        assertEquals(sender.result, Success(()))
        assertClosedRead(within("the read after")(ch.read()), "the read after the drain")
      checked(ch)

    test(s"$kind: readers parked on an empty channel wake with the closed failure"):
      val ch = kind.make[Int]()
      Async.blocking:
        val readers = (0 until 3).map(i => blocked(s"reader $i")(ch.read()))
        val racer = blocked("a reader awaiting canRead")(Async.await(ch.canRead))
        ch.close()
        readers.foreach(r => assertClosedRead(r.result.get, r.what))
        assertClosedRead(racer.result.get, racer.what)
      checked(ch)

  for kind <- kinds if kind.capacity != 0 do
    val k = kind.room.min(40)
    test(s"$kind: after close, readers drain the $k buffered values in order, then read the failure"):
      val ch = kind.make[Int]()
      Async.blocking:
        fill(ch, 0 until k)
        ch.close()
        failureOf[ChannelClosedException](attempt("a send after close")(ch.send(-1)))
        val reader = start("the reader")(Vector.fill(k + 2)(ch.read()))
        val got = reader.result.get
        assertEquals(got.take(k), (0 until k).toVector.map(Success(_)), dumpOf(ch))
        got.drop(k).foreach(assertClosedRead(_, "a read after the drain"))
      checked(ch)

  for kind <- kinds if kind.sendCanBlock do
    test(s"$kind: the values of senders parked at close are read, in order, before the failure; the senders succeed"):
      val ch = kind.make[Int]()
      val fills = (0 until kind.capacity).map(_ + 100)
      Async.blocking:
        fill(ch, fills)
        val senders = (0 until 3).map(i => blocked(s"the sender of $i")(ch.send(i)))
        ch.close()
        assert(ch.isClosed)
        failureOf[ChannelClosedException](attempt("a send after close")(ch.send(-1)))
        val reader = start("the reader")(Vector.fill(fills.size + 4)(ch.read()))
        val got = reader.result.get
        assertEquals(got.take(fills.size + 3), (fills ++ (0 until 3)).toVector.map(Success(_)), dumpOf(ch))
        assertClosedRead(got.last, "the read after the drain")
        senders.foreach(s => assertEquals(s.result, Success(()), s"${s.what}"))
      checked(ch)

    test(s"$kind: a sender parked at close returns only once its value is read, not at the close"):
      // The facade: senders parked at the close complete as they would have without it, once a
      // reader takes their value (rendezvous) or makes room for it (buffered). Each sender records
      // how many values the reader had taken when its send returned; sender i is released by the
      // (i + 1)-th read either way, so it must see at least i taken (the reader counts a value
      // after its read returns, the sender may return just before that).
      val ch = kind.make[Int]()
      val fills = (0 until kind.capacity).map(_ + 100)
      val taken = AtomicInteger(0)
      val takenAtReturn = Vector.fill(3)(AtomicInteger(-1))
      Async.blocking:
        fill(ch, fills)
        val senders = (0 until 3).map: i =>
          blocked(s"the sender of $i"):
            ch.send(i)
            takenAtReturn(i).set(taken.get)
        ch.close()
        senders.foreach(s => assert(!s.isDone, s"${s.what} returned at the close, before its value was read: ${dumpOf(ch)}"))
        val reader = start("the reader"):
          Vector.fill(fills.size + 3):
            val v = ch.read()
            taken.incrementAndGet()
            v
        assertEquals(reader.result.map(_.map(_.get)), Success((fills ++ (0 until 3)).toVector))
        senders.foreach(s => assertEquals(s.result, Success(()), s"${s.what}"))
        for i <- 0 until 3 do
          val seen = takenAtReturn(i).get
          assert(seen >= i,
            s"the sender of $i returned when only $seen values had been read (it is released by read ${i + 1}): " +
              "it was released at the close, before its value was taken")
      checked(ch)

    test(s"$kind: tryRead takes the value of a sender parked at close"):
      val ch = kind.make[Int]()
      val fills = (0 until kind.capacity).map(_ + 100)
      Async.blocking:
        fill(ch, fills)
        val sender = blocked("the sender of 1")(ch.send(1))
        ch.close()
        assertEquals(drained(ch).take(fills.size + 1), (fills :+ 1).toList.map(Success(_)), dumpOf(ch))
        assertEquals(sender.result, Success(()))
        assertClosedRead(ch.tryRead().getOrElse(fail("tryRead gave None on a closed, drained channel")), "tryRead")
      checked(ch)

  // ---------------------------------------------------------------------------------------------
  // Cancellation and interrupts (behaviour 6)

  for kind <- kinds if kind.sendCanBlock do
    test(s"$kind: a cancelled parked send sends nothing: the next value read is the one sent after"):
      val ch = kind.make[String]()
      val fills = (0 until kind.capacity).map(i => s"f$i")
      Async.blocking:
        fill(ch, fills)
        val x = blocked("the sender of x")(ch.send("x"))
        x.cancel()
        assertCancelled(x.result)
        x.assertEndedCancelled()
        val y = start("the sender of y")(ch.send("y"))
        val reader = start("the reader")(Vector.fill(fills.size + 1)(ch.read()))
        assertEquals(reader.result, Success((fills :+ "y").toVector.map(Success(_))), dumpOf(ch))
        assertEquals(y.result, Success(()))
        assertEmptyNow(ch)
      checked(ch)

  for kind <- kinds do
    test(s"$kind: a cancelled parked read takes nothing: the next reader gets the next value"):
      val ch = kind.make[String]()
      Async.blocking:
        val r = blocked("the reader")(ch.read())
        r.cancel()
        assertCancelled(r.result)
        r.assertEndedCancelled()
        assertRoundTrip(ch, "a")
        assertEmptyNow(ch)
      checked(ch)

    test(s"$kind: 100 cancelled parked readers lose no value: 10 values sent after all reach a fresh reader"):
      val ch = kind.make[Int]()
      Async.blocking:
        val readers = allBlocked(100, i => s"reader $i")(_ => ch.read())
        readers.foreach(_.cancel())
        readers.foreach(_.assertEndedCancelled())
        checked(ch)
        val sender = start("the sender of 0..9")((0 until 10).foreach(ch.send(_)))
        val fresh = start("the fresh reader")(Vector.fill(10)(ch.read()))
        assertEquals(fresh.result, Success((0 until 10).toVector.map(Success(_))), dumpOf(ch))
        assertEquals(sender.result, Success(()))
        assertEmptyNow(ch)
      checked(ch)

    test(s"$kind: 100 parked readers, every other one cancelled: the survivors and a fresh reader get each value once"):
      val ch = kind.make[Int]()
      Async.blocking:
        val readers = allBlocked(100, i => s"reader $i")(_ => ch.read())
        val (cancelled, survivors) = readers.zipWithIndex.partition(_._2 % 2 == 1) match
          case (c, s) => (c.map(_._1), s.map(_._1))
        cancelled.foreach(_.cancel())
        cancelled.foreach(_.assertEndedCancelled())
        val sender = start("the sender of 0..99")((0 until 100).foreach(ch.send(_)))
        val byFresh = start("the fresh reader")(Vector.fill(50)(ch.read()))
        val bySurvivors = survivors.map(s => s.result.get)
        val fresh = byFresh.result.get
        assertEquals(sender.result, Success(()))
        val all = (bySurvivors ++ fresh).map(_.get)
        assertEquals(all.sorted, (0 until 100).toVector, s"values lost or duplicated: ${dumpOf(ch)}")
        assertEquals(fresh.map(_.get), fresh.map(_.get).sorted, "the fresh reader got values out of order")
        assertEmptyNow(ch)
      checked(ch)

    test(s"$kind: interrupting a thread parked in read (Async.blocking) acts as a cancel"):
      val ch = kind.make[Int]()
      val reader = onBareThread("the reader on a bare thread")(ch.read())
      reader.awaitParked()
      reader.thread.interrupt()
      reader.assertEndedCancelled()
      Async.blocking:
        assertRoundTrip(ch, 1)
        assertEmptyNow(ch)
      checked(ch)

  for kind <- kinds if kind.sendCanBlock do
    test(s"$kind: 100 cancelled senders parked on a full channel send nothing; later values flow"):
      val ch = kind.make[Int]()
      val fills = (0 until kind.capacity).map(_ + 10_000)
      Async.blocking:
        fill(ch, fills)
        val senders = allBlocked(100, i => s"the sender of ${1000 + i}")(i => ch.send(1000 + i))
        senders.foreach(_.cancel())
        senders.foreach(_.assertEndedCancelled())
        checked(ch)
        val sender = start("the sender of 0..9")((0 until 10).foreach(ch.send(_)))
        val reader = start("the reader")(Vector.fill(fills.size + 10)(ch.read()))
        assertEquals(reader.result, Success((fills ++ (0 until 10)).toVector.map(Success(_))), dumpOf(ch))
        assertEquals(sender.result, Success(()))
        assertEmptyNow(ch)
      checked(ch)

    test(s"$kind: 100 parked senders, every other one cancelled: exactly the survivors' values arrive"):
      val ch = kind.make[Int]()
      val fills = (0 until kind.capacity).map(_ + 10_000)
      Async.blocking:
        fill(ch, fills)
        val senders = allBlocked(100, i => s"the sender of ${1000 + i}")(i => ch.send(1000 + i))
        val (cancelled, survivors) = senders.zipWithIndex.partition(_._2 % 2 == 1) match
          case (c, s) => (c.map(_._1), s.map(_._1))
        cancelled.foreach(_.cancel())
        cancelled.foreach(_.assertEndedCancelled())
        val late = start("the sender of 0..9")((0 until 10).foreach(ch.send(_)))
        val reader = start("the reader")(Vector.fill(fills.size + 60)(ch.read()))
        val got = reader.result.get.map(_.get)
        val expected = fills ++ (0 until 100 by 2).map(_ + 1000) ++ (0 until 10)
        assertEquals(got.sorted, expected.toVector.sorted, s"values lost, duplicated, or sent by cancelled senders: ${dumpOf(ch)}")
        assertEquals(got.filter(_ >= 10_000), fills.toVector, "the buffered values came out of order")
        assertEquals(got.filter(_ < 10), (0 until 10).toVector, "the late sender's values came out of order")
        survivors.foreach(s => assertEquals(s.result, Success(()), s.what))
        assertEquals(late.result, Success(()))
        assertEmptyNow(ch)
      checked(ch)

    test(s"$kind: interrupting a thread parked in send (Async.blocking) acts as a cancel: nothing sent"):
      val ch = kind.make[Int]()
      val fills = (0 until kind.capacity).map(_ + 100)
      Async.blocking(fill(ch, fills))
      val sender = onBareThread("the sender of -1 on a bare thread")(ch.send(-1))
      sender.awaitParked()
      sender.thread.interrupt()
      sender.assertEndedCancelled()
      assertEquals(drained(ch), fills.toList.map(Success(_)), s"the interrupted send delivered its value: ${dumpOf(ch)}")
      Async.blocking:
        assertRoundTrip(ch, 1)
        assertEmptyNow(ch)
      checked(ch)

  // ---------------------------------------------------------------------------------------------
  // A cancel decides a waiting operation (issue 35, item 9; doc/adr/0006): once `cancel()` has
  // returned, no value reaches the cancelled future's waiting read or leaves its waiting send;
  // a value handed over before the cancel is returned by the read (or the send has delivered it)

  /** Where a cancelled reader waits: in `read()`, in an await of `canRead`, or in a race of two
    * channels' `canRead` (Go's `select`), whose other channel stays empty.
    */
  private enum WaitIn:
    case Read, CanRead, Race
    def read(ch: Channel[Int], spare: Channel[Int])(using Async): Try[Int] = this match
      case Read    => ch.read()
      case CanRead => Async.await(ch.canRead)
      case Race    => Async.await(Async.race(ch.canRead, spare.canRead))
    override def toString: String = this match
      case Read    => "read()"
      case CanRead => "an await of canRead"
      case Race    => "a race of two channels' canRead"

  /** The kinds of these tests: every kind, with 4 as well (the issue's channel). */
  private val cancelKinds = List(Rendezvous, Buffered(1), Buffered(2), Buffered(4), Buffered(SegmentChannel.SegmentSize - 1), Buffered(SegmentChannel.SegmentSize + 1), Unbounded)
  private val CancelRounds = 4
  private val CancelledWaiters = 300

  for kind <- cancelKinds; waitIn <- WaitIn.values do
    test(s"$kind: $CancelledWaiters readers parked in $waitIn, all cancelled, each seen cancelled: a value sent then goes to the fresh reader behind them, never to a cancelled one"):
      var lost = List.empty[String]
      for round <- 0 until CancelRounds do
        val ch = kind.make[Int]()
        val spare = kind.make[Int]()
        Async.blocking:
          val took = java.util.concurrent.ConcurrentLinkedQueue[String]()
          val readers = allBlocked(CancelledWaiters, i => s"reader $i")(i =>
            val got = waitIn.read(ch, spare)
            took.add(s"reader $i read $got")
            got
          )
          val fresh = blocked("the fresh reader")(waitIn.read(ch, spare)) // behind every cancelled one
          readers.foreach(_.cancel())
          readers.foreach(r => assertCancelledNow(r.future.nn))
          // sent at once, from a running thread, while the cancelled readers are still waking:
          // it returns once a reader has the value (there is one, the fresh reader), or it is buffered
          ch.send(5)
          readers.foreach(_.join()) // every cancelled body has ended: each read threw, or took the value
          if !took.isEmpty then lost ::= s"round $round: ${took.peek()} after its cancel() had returned"
          else
            assertEquals(fresh.result, Success(Success(5)), s"round $round: ${dumpOf(ch)}")
            readers.foreach(_.assertEndedCancelled())
            assertEmptyNow(ch)
        checked(ch, spare)
      assert(lost.isEmpty, s"in ${lost.size} of $CancelRounds rounds the value went to a cancelled reader and was lost: ${lost.reverse.mkString("; ")}")

  for kind <- cancelKinds if kind.sendCanBlock do
    test(s"$kind: $CancelledWaiters senders parked on a full channel, all cancelled, each seen cancelled: reads then get the value of the sender behind them, never a cancelled one's"):
      var delivered = List.empty[String]
      for round <- 0 until CancelRounds do
        val ch = kind.make[Int]()
        val fills = (0 until kind.capacity).map(_ + 10_000)
        Async.blocking:
          fill(ch, fills)
          val returned = java.util.concurrent.ConcurrentLinkedQueue[String]()
          val senders = allBlocked(CancelledWaiters, i => s"the sender of ${1000 + i}")(i =>
            ch.send(1000 + i)
            returned.add(s"the send of ${1000 + i} returned")
          )
          val late = blocked("the sender of -1")(ch.send(-1)) // behind every cancelled one
          senders.foreach(_.cancel())
          senders.foreach(s => assertCancelledNow(s.future.nn))
          // read at once, on a running thread, while the cancelled senders are still waking
          val got = Vector.fill(fills.size + 1)(ch.read().get)
          senders.foreach(_.join())
          val stolen = got.filter(v => v >= 1000 && v < 10_000)
          if stolen.nonEmpty || !returned.isEmpty then
            delivered ::= s"round $round: read ${stolen.mkString(", ")}; ${returned.toArray.mkString(", ")}"
          else
            assertEquals(got, (fills :+ -1).toVector, s"round $round: ${dumpOf(ch)}")
            assertEquals(late.result, Success(()))
            senders.foreach(_.assertEndedCancelled())
            assertEmptyNow(ch)
        checked(ch)
      assert(delivered.isEmpty,
        s"in ${delivered.size} of $CancelRounds rounds a cancelled sender's value was delivered after its cancel() had returned: ${delivered.reverse.mkString("; ")}")

  for kind <- cancelKinds; waitIn <- List(WaitIn.Read, WaitIn.CanRead) do
    test(s"$kind: a value handed to a reader parked in $waitIn before its cancel is returned by the read; the next read throws the cancel"):
      val ch = kind.make[Int]()
      val first = AtomicReference[Try[Int]]()
      Async.blocking:
        val reader = blocked("the reader"):
          first.set(waitIn.read(ch, ch))
          ch.read() // the cancel takes effect here
        val sender = start("the sender of 5")(ch.send(5))
        assertEquals(sender.result, Success(())) // returns once the reader has the value: handed over, or taken by its listener
        reader.cancel()
        reader.assertEndedCancelled()
        assertEquals(first.get, Success(5), s"the value handed over before the cancel was dropped: ${dumpOf(ch)}")
        assertEmptyNow(ch)
      checked(ch)

  for kind <- cancelKinds if kind.sendCanBlock do
    test(s"$kind: a parked send whose value was taken before its cancel returns as sent; the body's next await throws the cancel"):
      val ch = kind.make[Int]()
      val fills = (0 until kind.capacity).map(_ + 100)
      val sent = AtomicBoolean(false)
      Async.blocking:
        fill(ch, fills)
        val sender = blocked("the sender of 7"):
          ch.send(7)
          sent.set(true)
          Async.await(Promise[Unit]().future) // never completed: the cancel takes effect here
        assertEquals(within("reading the buffered values and 7")(Vector.fill(fills.size + 1)(ch.read())),
          (fills :+ 7).toVector.map(Success(_)), dumpOf(ch))
        sender.cancel()
        sender.assertEndedCancelled()
        assert(sent.get, "the send whose value was read before the cancel did not return normally")
        assertEmptyNow(ch)
      checked(ch)

  for kind <- cancelKinds if kind == Rendezvous do
    test(s"$kind: a reader cancelled while it spins on its cell takes nothing sent after: the cancel claims the cell"):
      val ch = kind.make[Int]()
      Async.blocking:
        val reader = spinningReader(ch) // it spins for seconds, and does not look at interrupts meanwhile
        reader.cancel()
        assertCancelledNow(reader.future.nn)
        // the parties to come need not spin for seconds (on one carrier, that would keep the other off it)
        seg(ch).setSpinBudget(16)
        val sender = start("the sender of 5")(ch.send(5))
        assertEquals(within("a fresh read")(ch.read()), Success(5), s"the value went to the cancelled reader: ${dumpOf(ch)}")
        assertEquals(sender.result, Success(()))
        reader.assertEndedCancelled()
        assertEmptyNow(ch)
      checked(ch)

    for accept <- List(false, true) do
      test(s"$kind: a listener deciding on a parked sender's value when the sender is cancelled: ${if accept then "its acceptance makes the send return as sent" else "its refusal cancels the send, and the value goes to no one"}"):
        val ch = kind.make[Int]()
        val deciding = CountDownLatch(1)
        val decide = CountDownLatch(1)
        val offered = java.util.concurrent.ConcurrentLinkedQueue[Try[Int]]()
        val k = Listener[Try[Int]] { v =>
          offered.add(v)
          if offered.size == 1 then
            deciding.countDown()
            awaitLatch(decide, "the test to let the listener decide")
            accept
          else false // later offers: refused, they are for the plain reader
        }
        val sent = AtomicBoolean(false)
        Async.blocking:
          val sender = blocked("the sender of 7"):
            ch.send(7)
            sent.set(true)
            Async.await(Promise[Unit]().future) // never completed: a cancel ends it
          // registers and is offered the head on this thread, where the listener then decides
          val registering = Thread.ofPlatform().start(() => ch.canRead.onComplete(k))
          awaitLatch(deciding, "the listener to be offered 7")
          sender.cancel()
          assertCancelledNow(sender.future.nn)
          decide.countDown()
          Support.join(registering, "the registering thread")
          sender.assertEndedCancelled()
          assertEquals(sent.get, accept, if accept then "the taken send did not return" else "the refused send returned as sent")
          ch.canRead.dropListener(k)
          val late = start("the sender of 8")(ch.send(8))
          assertEquals(within("a fresh read")(ch.read()), Success(8), s"a cancelled send's value was delivered: ${dumpOf(ch)}")
          assertEquals(late.result, Success(()))
          assertEquals(offered.toArray.toList.take(1), List(Success(7)))
          assertEmptyNow(ch)
        checked(ch)

  // ---------------------------------------------------------------------------------------------
  // uninterruptible (behaviour 7)

  for kind <- kinds do
    test(s"$kind: a reader cancelled inside uninterruptible takes one value and leaves the next"):
      val ch = kind.make[Int]()
      val got = AtomicReference[Try[Int]]()
      val after = AtomicBoolean(false)
      Async.blocking:
        val reader = blocked("the uninterruptible reader"):
          uninterruptible(got.set(ch.read()))
          after.set(true)
        reader.cancel()
        assertCancelledNow(reader.future.nn)
        assertEquals(got.get, null, "the read returned a value before anything was sent")
        val sender = start("the sender of 1 and 2") { ch.send(1); ch.send(2) }
        reader.join()
        assertEquals(got.get, Success(1), s"the cancel cut the uninterruptible read short: ${reader.thrown.get}")
        assert(!after.get, "the statement after the uninterruptible block ran in a cancelled future")
        assert(reader.thrown.get.isInstanceOf[CancellationException], s"the reader ended with ${reader.thrown.get}")
        assertEquals(within("reading the second value")(ch.read()), Success(2), dumpOf(ch))
        assertEquals(sender.result, Success(()))
        assertEmptyNow(ch)
      checked(ch)

  // ---------------------------------------------------------------------------------------------
  // canRead as a source: poll, await, races, either (behaviour 8)

  for kind <- kinds do
    test(s"$kind: canRead.poll() is tryRead: None when empty, each value once, the failure when closed"):
      val ch = kind.make[Int]()
      assertEquals(ch.canRead.poll(), None)
      Async.blocking:
        val s1 = pending(ch, 1)
        assertEquals(ch.canRead.poll(), Some(Success(1)), dumpOf(ch))
        assertEquals(s1.result, Success(()))
        assertEquals(ch.canRead.poll(), None, "canRead.poll() gave a value twice")
        val s2 = pending(ch, 2)
        ch.close()
        assertEquals(ch.canRead.poll(), Some(Success(2)), "the value sent before the close")
        assertEquals(s2.result, Success(()))
        assertClosedRead(ch.canRead.poll().getOrElse(fail("canRead.poll() gave None when closed")), "canRead.poll()")
      checked(ch)

    test(s"$kind: Async.await(ch.canRead) takes a waiting value, or waits for the next one"):
      val ch = kind.make[Int]()
      Async.blocking:
        val s1 = pending(ch, 1)
        assertEquals(within("await canRead")(Async.await(ch.canRead)), Success(1))
        assertEquals(s1.result, Success(()))
        val reader = blocked("a reader awaiting canRead")(ch.canRead.await)
        val s2 = start("the sender of 2")(ch.send(2))
        assertEquals(reader.result, Success(Success(2)))
        assertEquals(s2.result, Success(()))
        assertEmptyNow(ch)
      checked(ch)

    test(s"$kind: a race of an empty and a holding channel takes the held value; the empty one keeps later values"):
      val a = kind.make[String]()
      val b = kind.make[String]()
      Async.blocking:
        val sb = pending(b, "b")
        assertEquals(within("the race")(Async.await(Async.race(a.canRead, b.canRead))), Success("b"))
        assertEquals(sb.result, Success(()))
        assertEmptyNow(b)
        val sa = pending(a, "a")
        assertEquals(within("a plain read of a")(a.read()), Success("a"), s"a: ${dumpOf(a)}")
        assertEquals(sa.result, Success(()))
        assertEmptyNow(a)
      checked(a, b)

    test(s"$kind: a race of two holding channels takes exactly one value; the other channel keeps its own"):
      val a = kind.make[String]()
      val b = kind.make[String]()
      Async.blocking:
        val sa = pending(a, "a")
        val sb = pending(b, "b")
        val won = within("the race")(Async.await(Async.race(a.canRead, b.canRead)))
        val (winner, loser, loserValue, loserSender) = won match
          case Success("a") => (a, b, "b", sb)
          case Success("b") => (b, a, "a", sa)
          case other        => fail(s"the race gave $other")
        assertEmptyNow(winner)
        assertEquals(loser.tryRead(), Some(Success(loserValue)), s"the losing channel lost its value: ${dumpOf(loser)}")
        assertEquals(sa.result, Success(()))
        assertEquals(sb.result, Success(()))
        assert(loserSender.isDone)
      checked(a, b)

    test(s"$kind: a waiting race takes the first value sent; its lost registration steals nothing later"):
      val a = kind.make[String]()
      val b = kind.make[String]()
      Async.blocking:
        val racer = blocked("the race")(Async.await(Async.race(a.canRead, b.canRead)))
        val sb = start("the sender of b")(b.send("b"))
        assertEquals(racer.result, Success(Success("b")))
        assertEquals(sb.result, Success(()))
        for i <- 1 to 3 do
          assertRoundTrip(a, s"a$i") // a plain read of the loser gets every later value
          assertRoundTrip(b, s"b$i")
        assertEmptyNow(a)
        assertEmptyNow(b)
      checked(a, b)

    test(s"$kind: Async.either tells which channel the value came from"):
      val a = kind.make[String]()
      val b = kind.make[Int]()
      Async.blocking:
        val sb = pending(b, 2)
        assertEquals(within("either")(Async.await(Async.either(a.canRead, b.canRead))), Right(Success(2)))
        assertEquals(sb.result, Success(()))
        val sa = pending(a, "a")
        assertEquals(within("either")(Async.await(Async.either(a.canRead, b.canRead))), Left(Success("a")))
        assertEquals(sa.result, Success(()))
        val racer = blocked("a waiting either")(Async.await(Async.either(a.canRead, b.canRead)))
        val sb2 = start("the sender of 3")(b.send(3))
        assertEquals(racer.result, Success(Right(Success(3))))
        assertEquals(sb2.result, Success(()))
        assertEmptyNow(a)
        assertEmptyNow(b)
      checked(a, b)

    test(s"$kind: nested races take one value; every other channel keeps its later values"):
      val chs = Vector.fill(4)(kind.make[Int]())
      def nested = Async.race(Async.race(chs(0).canRead, chs(1).canRead), Async.race(chs(2).canRead, chs(3).canRead))
      Async.blocking:
        val s2 = pending(chs(2), 2)
        assertEquals(within("the nested race")(Async.await(nested)), Success(2))
        assertEquals(s2.result, Success(()))
        val racer = blocked("a waiting nested race")(Async.await(nested))
        val s3 = start("the sender of 3")(chs(3).send(3))
        assertEquals(racer.result, Success(Success(3)))
        assertEquals(s3.result, Success(()))
        for (ch, i) <- chs.zipWithIndex do assertRoundTrip(ch, 10 + i)
        chs.foreach(assertEmptyNow)
      checked(chs*)

    test(s"$kind: a race with a closed channel returns its failure; a waiting race wakes at the close"):
      val a = kind.make[Int]()
      val b = kind.make[Int]()
      Async.blocking:
        val racer = blocked("a waiting race")(Async.await(Async.race(a.canRead, b.canRead)))
        a.close()
        assertClosedRead(racer.result.get, "the waiting race")
        assertClosedRead(within("a race after close")(Async.await(Async.race(a.canRead, b.canRead))), "a race after the close")
        assertRoundTrip(b, 1)
      checked(a, b)

  // ---------------------------------------------------------------------------------------------
  // Filters (behaviour 9)

  for kind <- kinds do
    test(s"$kind: a filter refusing the head leaves it first for a plain reader, then takes the matching next value"):
      val ch = kind.make[String]()
      Async.blocking:
        val sender = start("the sender of other, wanted") { ch.send("other"); ch.send("wanted") }
        eventually("other to wait in the channel")(sender.isDone || parkedInChannel(sender.thread))
        val filtered = blocked("the filtered reader")(Async.await(ch.canRead.filter(_ == Success("wanted"))))
        assert(!filtered.isDone, "the filter accepted the value it refuses")
        assertEquals(within("the plain read")(ch.read()), Success("other"), s"the refused head: ${dumpOf(ch)}")
        assertEquals(filtered.result, Success(Success("wanted")), s"the filter did not get the next value: ${dumpOf(ch)}")
        assertEquals(sender.result, Success(()))
        assertEmptyNow(ch)
      checked(ch)

    test(s"$kind: a value refused by a waiting filter goes to the plain reader waiting behind it"):
      val ch = kind.make[String]()
      Async.blocking:
        val filtered = blocked("the filtered reader")(Async.await(ch.canRead.filter(_ == Success("wanted"))))
        val plain = blocked("the plain reader")(ch.read())
        val s1 = start("the sender of other")(ch.send("other"))
        assertEquals(plain.result, Success(Success("other")), s"the refused value: ${dumpOf(ch)}")
        assertEquals(s1.result, Success(()))
        assert(!filtered.isDone, "the filter accepted a value it refuses")
        val s2 = start("the sender of wanted")(ch.send("wanted"))
        assertEquals(filtered.result, Success(Success("wanted")), dumpOf(ch))
        assertEquals(s2.result, Success(()))
        assertEmptyNow(ch)
      checked(ch)

  // ---------------------------------------------------------------------------------------------
  // Many channels through nested races (behaviour 10)

  for kind <- kinds do
    val n = 200 * stress
    test(s"$kind: $n channels holding one value each, drained through nested races of 10: each value once"):
      val chs = Vector.fill(n)(kind.make[Int]())
      val got = Vector.newBuilder[Int]
      Async.blocking:
        val senders = chs.zipWithIndex.map((ch, i) => start(s"the sender of $i")(ch.send(i)))
        for group <- chs.grouped(10) do
          val (left, right) = group.splitAt(5)
          val race = Async.race(Async.race(left.map(_.canRead)*), Async.race(right.map(_.canRead)*))
          got ++= within("10 awaits of a nested race")(Vector.fill(group.size)(Async.await(race))).map(_.get)
        senders.foreach(s => assertEquals(s.result, Success(()), s.what))
        chs.foreach(assertEmptyNow)
      val values = got.result()
      assertEquals(values.sum, (0 until n).sum)
      assertEquals(values.sorted, (0 until n).toVector, "a value was lost or delivered twice")
      checked(chs*)

  // ---------------------------------------------------------------------------------------------
  // Several senders and readers (behaviour 11)

  for kind <- kinds do
    val senders = 4
    val perSender = 250 * stress
    test(s"$kind: $senders senders, 4 readers, then close: each value exactly once, in per-sender order"):
      val ch = kind.make[Int]()
      Async.blocking:
        val ss = (0 until senders).map(s => start(s"sender $s")((0 until perSender).foreach(i => ch.send(s * perSender + i))))
        val rs = (0 until 4).map(r => start(s"reader $r")(Iterator.continually(ch.read()).takeWhile(_.isSuccess).map(_.get).toVector))
        ss.foreach(s => assertEquals(s.result, Success(()), s.what))
        ch.close()
        val lists = rs.map(_.result.get)
        assertEquals(lists.flatten.sorted, (0 until senders * perSender).toVector, s"a value was lost or delivered twice: ${dumpOf(ch)}")
        for (list, r) <- lists.zipWithIndex; s <- 0 until senders do
          val fromS = list.filter(_ / perSender == s)
          assertEquals(fromS, fromS.sorted, s"reader $r saw sender $s's values out of order")
      checked(ch)

    test(s"$kind: 4 readers racing two channels, a sender on each: each value exactly once, in per-sender order"):
      val a = kind.make[Int]()
      val b = kind.make[Int]()
      val perSender = 200 * stress
      val total = 2 * perSender
      val claimed = AtomicInteger(0)
      Async.blocking:
        val sa = start("the sender on a")((0 until perSender).foreach(a.send(_)))
        val sb = start("the sender on b")((0 until perSender).foreach(i => b.send(perSender + i)))
        val rs = (0 until 4).map: r =>
          start(s"reader $r"):
            val out = Vector.newBuilder[Int]
            while claimed.incrementAndGet() <= total do out += Async.await(Async.race(a.canRead, b.canRead)).get
            out.result()
        val lists = rs.map(_.result.get)
        assertEquals(sa.result, Success(()))
        assertEquals(sb.result, Success(()))
        assertEquals(lists.flatten.sorted, (0 until total).toVector, s"a: ${dumpOf(a)} b: ${dumpOf(b)}")
        for (list, r) <- lists.zipWithIndex do
          val fromA = list.filter(_ < perSender)
          val fromB = list.filter(_ >= perSender)
          assertEquals(fromA, fromA.sorted, s"reader $r saw a's values out of order")
          assertEquals(fromB, fromB.sorted, s"reader $r saw b's values out of order")
        assertEmptyNow(a)
        assertEmptyNow(b)
      checked(a, b)

class ChannelOnVirtualThreads extends ChannelBehaviour(Runtime.VirtualThreads)
class ChannelOnPlatformThreads extends ChannelBehaviour(Runtime.PlatformThreads)

object ChannelBehaviour:
  /** The channel kinds every behaviour is run on; the buffered sizes sit around one segment. */
  enum ChannelKind:
    case Rendezvous
    case Buffered(size: Int)
    case Unbounded

    /** What `Channel.capacity` reports: 0, n, or -1. */
    def capacity: Int = this match
      case Rendezvous  => 0
      case Buffered(n) => n
      case Unbounded   => SegmentChannel.Unbounded

    /** How many values wait in the channel with no reader. */
    def room: Int = this match
      case Unbounded => Int.MaxValue
      case _         => capacity

    def sendCanBlock: Boolean = this != Unbounded

    def make[T](): Channel[T] = this match
      case Rendezvous  => SyncChannel[T]()
      case Buffered(n) => BufferedChannel[T](n)
      case Unbounded   => UnboundedChannel[T]()

    override def toString: String = this match
      case Rendezvous  => "rendezvous"
      case Buffered(n) => s"buffered($n)"
      case Unbounded   => "unbounded"

  object ChannelKind:
    val all: List[ChannelKind] = List(
      Rendezvous,
      Buffered(1),
      Buffered(2),
      Buffered(SegmentChannel.SegmentSize - 1),
      Buffered(SegmentChannel.SegmentSize + 1),
      Unbounded
    )

  /** Multiplies the sizes of the bigger runs (`ASYNCPIPE_STRESS`, default 1). */
  val stress: Int = sys.env.get("ASYNCPIPE_STRESS").flatMap(_.toIntOption).filter(_ > 0).getOrElse(1)

  def seg(ch: Channel[?]): SegmentChannel[?] = ch.asInstanceOf[SegmentChannel[?]]

  /** The channel's S counter, read through reflection: for a test that stands in for a sender
    * between its FAA and its write.
    */
  def sendCounter(ch: Channel[?]): PaddedCounter =
    val field = classOf[SegmentChannel[?]].getDeclaredFields.find(_.getName.endsWith("sCounter"))
      .getOrElse(throw AssertionError("SegmentChannel has no sCounter field"))
    field.setAccessible(true)
    field.get(seg(ch)).asInstanceOf[PaddedCounter]

  /** The cells of the channel's dump, one letter each (see `SegmentChannel.cellCode`). */
  def cellCodes(ch: Channel[?]): String = seg(ch).dump.linesIterator.drop(1).map(_.trim.split("\\s+").last).mkString

  /** The channel's dump for a failure message; never throws. */
  def dumpOf(ch: Channel[?]): String =
    try seg(ch).dump
    catch case e: Throwable => s"(no dump: $e)"

  /** Whether `t` is parked inside a channel operation or an await (not merely about to enter one). */
  def parkedInChannel(t: Thread | Null): Boolean =
    t != null && {
      val s = t.getState
      (s == Thread.State.WAITING || s == Thread.State.TIMED_WAITING) &&
      t.getStackTrace.exists { f =>
        val c = f.getClassName
        (c.startsWith("asyncpipe.async.") && c.contains("Channel") && !c.contains("ChannelBehaviour")) ||
        (c.startsWith("asyncpipe.async.Async") && f.getMethodName == "awaitWith")
      }
    }

  def awaitParkedIn(t: Thread, what: String)(using Location): Unit =
    eventually(s"$what to park in a channel operation")(parkedInChannel(t))
