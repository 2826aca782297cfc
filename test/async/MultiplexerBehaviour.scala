package asyncpipe.async

import java.util.concurrent.TimeoutException
import java.util.concurrent.atomic.{AtomicInteger, AtomicReference}
import scala.util.{Failure, Success, Try}
import munit.Location
import Support.*
import ChannelMultiplexer.OnFull

/** The channel multiplexer: fan-in from publishers, fan-out to subscribers, per-publisher order,
  * live changes of both sets, close, and the two policies for a slow subscriber.
  *
  * Synchronisation: a rendezvous publisher's `send` returns only once the multiplexer's loop has
  * taken the value, and the loop hands out one value completely before it reads the next; the
  * tests use that (and bounded reads) instead of waiting for time to pass.
  */
abstract class MultiplexerBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  /** Multiplies the sizes of the stress test (ASYNCPIPE_STRESS, default 1). */
  private val stress: Int = sys.env.get("ASYNCPIPE_STRESS").flatMap(_.toIntOption).filter(_ >= 1).getOrElse(1)

  private def ok[T](vs: T*): List[Try[T]] = vs.toList.map(Success(_))

  /** A multiplexer with one unbounded subscriber: nothing is dropped or blocked on its side. */
  private def subscribed()(using Async): (ChannelMultiplexer[Int], UnboundedChannel[Try[Int]]) =
    val m = ChannelMultiplexer[Int]()
    val sub = UnboundedChannel[Try[Int]]()
    m.addSubscriber(sub)
    (m, sub)

  /** The next element of `c`, failing the test (rather than hanging) if none comes in time. */
  private def next[T](c: ReadableChannel[T], what: String)(using Async, Location): T =
    val r =
      try withTimeout(Patience)(c.read())
      catch case _: TimeoutException => fail(s"$what: nothing arrived within $Patience ms")
    r match
      case Success(v) => v
      case Failure(e) => fail(s"$what: the channel itself failed with $e")

  private def nextN[T](c: ReadableChannel[T], n: Int, what: String)(using Async, Location): List[T] =
    List.tabulate(n)(i => next(c, s"$what, element ${i + 1} of $n"))

  /** Asserts that the next element a subscriber receives is the multiplexer's closing failure. */
  private def assertClosedNext(c: ReadableChannel[Try[?]], what: String)(using Async, Location): Unit =
    failureOf[ChannelClosedException](next(c, what))

  /** `resultWithin` with a bound of its own (the stress test's size scales with ASYNCPIPE_STRESS). */
  private def resultWithinMillis[T](f: Future[T], millis: Long, what: String)(using Location): Try[T] =
    val done = java.util.concurrent.CountDownLatch(1)
    f.onComplete(Listener[Try[T]] { _ => done.countDown(); true })
    assert(done.await(millis, java.util.concurrent.TimeUnit.MILLISECONDS), s"timed out after $millis ms waiting for $what")
    f.poll().get

  private def dumpOf(c: Channel[?]): String = c match
    case sc: SegmentChannel[?] => sc.dump
    case other                 => other.toString

  /** Listeners registered on `c`'s `canRead`. */
  private def registrations(c: Channel[?])(using Location): Int = c match
    case sc: SegmentChannel[?] => sc.registeredListeners
    case other                 => fail(s"not a SegmentChannel: $other")

  private def parkedSenders(c: Channel[?])(using Location): Int = c match
    case sc: SegmentChannel[?] => sc.parkedSenders
    case other                 => fail(s"not a SegmentChannel: $other")

  /** A future that sends 1 to `total` into `pub` and counts the sends that returned. */
  private final class CountingSender(pub: SendableChannel[Int], total: Int)(using Async):
    private val sent = AtomicInteger(0)
    private val thread = AtomicReference[Thread]()
    val future: Future[Unit] = Future:
      thread.set(Thread.currentThread)
      for i <- 1 to total do
        pub.send(i)
        sent.incrementAndGet()

    /** Waits until the sender is blocked after at least `atLeast` sends; how many it made. */
    def stalled(atLeast: Int)(using Location): Int =
      eventually(s"the sender to stall (sent ${sent.get})") {
        val t = thread.get
        sent.get >= atLeast && t != null && isBlocked(t)
      }
      sent.get

  private def isBlocked(t: Thread): Boolean =
    val s = t.getState
    s == Thread.State.WAITING || s == Thread.State.TIMED_WAITING || s == Thread.State.BLOCKED

  // ---------------------------------------------------------------------------------------------
  // Fan-out, fan-in, order

  test("one publisher, three subscribers: each receives exactly 1, 2, 3, 4 in order"):
    Async.blocking:
      val m = ChannelMultiplexer[Int]()
      val pub = SyncChannel[Int]()
      val subs = Vector.fill(3)(UnboundedChannel[Try[Int]]())
      subs.foreach(m.addSubscriber)
      m.addPublisher(pub)
      (1 to 4).foreach(pub.send)
      for (s, i) <- subs.zipWithIndex do
        assertEquals(nextN(s, 4, s"subscriber $i"), ok(1, 2, 3, 4), s"subscriber $i")
      m.close()
      for (s, i) <- subs.zipWithIndex do assertClosedNext(s, s"subscriber $i after close (nothing extra)")

  test("3 publishers x 4 messages to 3 subscribers: every subscriber gets all 12, each publisher's in order"):
    Async.blocking:
      val m = ChannelMultiplexer[(Int, Int)]()
      val subs = Vector.fill(3)(UnboundedChannel[Try[(Int, Int)]]())
      subs.foreach(m.addSubscriber)
      val pubs = Vector.fill(3)(SyncChannel[(Int, Int)]())
      pubs.foreach(m.addPublisher)
      val senders = pubs.zipWithIndex.map((p, id) => Future((0 until 4).foreach(i => p.send((id, i)))))
      for (s, si) <- subs.zipWithIndex do
        val got = nextN(s, 12, s"subscriber $si").map(_.get)
        assertEquals(got.map(_._2).sum, 3 * (0 + 1 + 2 + 3), s"subscriber $si: sum of $got")
        for id <- 0 until 3 do
          assertEquals(got.filter(_._1 == id).map(_._2), List(0, 1, 2, 3), s"subscriber $si, publisher $id, in $got")
      senders.foreach(f => assert(resultWithin(f, "a sender").isSuccess))
      m.close()

  test("stress: publishers added while running, small buffers: nothing lost, per-publisher order"):
    val publishers = 4
    val messages = 200 * stress
    val subscribers = 3
    Async.blocking:
      val m = ChannelMultiplexer[(Int, Int)](buffer = 2)
      val subs = Vector.fill(subscribers)(BufferedChannel[Try[(Int, Int)]](1))
      subs.foreach(m.addSubscriber)
      val readers = subs.map(s => Future(List.fill(publishers * messages)(s.read().get.get)))
      val senders = (0 until publishers).map { id =>
        val p = if id % 2 == 0 then SyncChannel[(Int, Int)]() else BufferedChannel[(Int, Int)](3)
        m.addPublisher(p) // while the loop is running and the others are sending
        Future((0 until messages).foreach(i => p.send((id, i))))
      }
      for (r, si) <- readers.zipWithIndex do
        val got = resultWithinMillis(r, Patience * 2 * stress, s"reader $si").get
        for id <- 0 until publishers do
          val mine = got.filter(_._1 == id).map(_._2)
          assertEquals(mine.size, messages, s"subscriber $si, publisher $id: count")
          assertEquals(mine, (0 until messages).toList, s"subscriber $si, publisher $id: order")
      senders.foreach(f => assert(resultWithinMillis(f, Patience * 2 * stress, "a sender").isSuccess))
      m.close()
      for (s, si) <- subs.zipWithIndex do assertClosedNext(s, s"subscriber $si after close")

  test("a subscriber that keeps up now and then: values handed straight to it never overtake queued ones"):
    // The loop sends straight to a subscriber's channel only while nothing of that subscriber's
    // is queued or in delivery; a reader that pauses now and then makes the loop switch between
    // the two ways many times.
    val messages = 20_000 * stress
    Async.blocking:
      val m = ChannelMultiplexer[Int](buffer = 4)
      val sub = BufferedChannel[Try[Int]](1)
      m.addSubscriber(sub)
      val reader = Future {
        val random = scala.util.Random(7)
        List.fill(messages) {
          if random.nextInt(8) == 0 then Thread.`yield`()
          sub.read().get.get
        }
      }
      val pub = BufferedChannel[Int](64)
      m.addPublisher(pub)
      val sender = Future((0 until messages).foreach(pub.send))
      val got = resultWithinMillis(reader, Patience * 2 * stress, "the reader").get
      val firstWrong = got.zipWithIndex.find((v, i) => v != i)
      assertEquals(firstWrong, None, s"values out of order (value, position); ${got.size} received")
      assert(resultWithin(sender, "the sender").isSuccess)
      m.close()

  // ---------------------------------------------------------------------------------------------
  // One publisher, one subscriber: the relay tap (a send hands its value on in its own thread)

  test("one to one, a subscriber that reads in bursts: every value once and in order, through many stalls"):
    // The tap hands values on with trySend; a full subscriber stops it and the loop relays what
    // waits in the publisher, then taps again. Two senders, so hand-overs also overlap.
    val each = 3_000 * stress
    for pub <- List(SyncChannel[(Int, Int)](), BufferedChannel[(Int, Int)](16), UnboundedChannel[(Int, Int)]()) do
      Async.blocking:
        val m = ChannelMultiplexer[(Int, Int)](buffer = 4)
        val sub = BufferedChannel[Try[(Int, Int)]](2)
        m.addSubscriber(sub)
        m.addPublisher(pub)
        val reader = Future {
          val random = scala.util.Random(11)
          List.fill(2 * each) {
            if random.nextInt(16) == 0 then (0 until random.nextInt(50)).foreach(_ => Thread.`yield`())
            sub.read().get.get
          }
        }
        val senders = (0 until 2).map(id => Future((0 until each).foreach(i => pub.send((id, i)))))
        val got = resultWithinMillis(reader, Patience * 2 * stress, s"the reader ($pub)").get
        for id <- 0 until 2 do
          assertEquals(got.filter(_._1 == id).map(_._2), (0 until each).toList, s"sender $id through $pub")
        senders.foreach(f => assert(resultWithin(f, "a sender").isSuccess))
        m.close()
        assertClosedNext(sub, s"the subscriber after close ($pub)")

  /** Values 0, 1, 2, ... up to `limit` sent into `pub` until stopped; `next` is the next one to be sent. */
  private final class Flow(pub: SendableChannel[Int], limit: Int)(using Async):
    val next = AtomicInteger(0)
    private val stopped = java.util.concurrent.atomic.AtomicBoolean(false)
    val future: Future[Unit] = Future:
      while !stopped.get && next.get < limit do
        pub.send(next.get)
        next.incrementAndGet()
    def stop()(using Location): Unit =
      stopped.set(true)
      assert(resultWithin(future, "the sender").isSuccess)

  test("one to one, while values flow: removeSubscriber returns once nothing more reaches it"):
    Async.blocking:
      val m = ChannelMultiplexer[Int]()
      val sub = BufferedChannel[Try[Int]](64) // room mostly: the tap hands values on as they come
      m.addSubscriber(sub)
      val pub = BufferedChannel[Int](16)
      m.addPublisher(pub)
      val flow = Flow(pub, Int.MaxValue) // paced by the reads below until the removal
      assertEquals(nextN(sub, 1000, "sub, before the removal"), (0 until 1000).toList.map(Success(_)))
      m.removeSubscriber(sub)
      val after = flow.next.get + 1 // sent (or being sent) at the removal: at most up to here
      eventually("more values to flow") { flow.next.get > after + 1000 }
      flow.stop()
      m.close()
      val rest = Iterator.continually(sub.tryRead()).takeWhile(_.isDefined).map(_.get.get).toList
      assert(rest.forall(_.get < after), s"the removed subscriber received values sent after the removal: ${rest.filter(_.get >= after).take(5)}")
      assertEquals(rest.map(_.get), (1000 until 1000 + rest.size).toList, "what it received before, in order")

  test("one to one, while values flow: a subscriber added receives every value sent after the call"):
    Async.blocking:
      val m = ChannelMultiplexer[Int]()
      val first = UnboundedChannel[Try[Int]]()
      m.addSubscriber(first)
      val pub = SyncChannel[Int]() // a send returns once the multiplexer took the value
      m.addPublisher(pub)
      val flow = Flow(pub, Int.MaxValue) // until stopped, so that values are sent after the call
      eventually("values to flow") { flow.next.get >= 1000 }
      val second = UnboundedChannel[Try[Int]]()
      m.addSubscriber(second)
      // `from` may be in a send that began before the call returned; every later one began after
      val from = flow.next.get
      eventually("values to flow after the call") { flow.next.get > from + 1000 }
      flow.stop()
      val total = flow.next.get
      m.close() // each subscriber then gets what it was handed, and the closing failure
      def upToClose(c: ReadableChannel[Try[Int]], what: String): List[Int] =
        try withTimeout(Patience)(Iterator.continually(c.read().get).takeWhile(_.isSuccess).map(_.get).toList)
        catch case _: TimeoutException => fail(s"$what: the closing failure did not come within $Patience ms")
      assertEquals(upToClose(first, "first"), (0 until total).toList)
      val got = upToClose(second, "second")
      assert(got.nonEmpty && got.head <= from + 1,
        s"second missed values sent after it was added: it starts at ${got.headOption}, the call ended at $from")
      assertEquals(got, (got.head until total).toList, "second: a run up to the last value")

  // ---------------------------------------------------------------------------------------------
  // Changing the sets while running

  test("a removed publisher: values sent to it afterwards are not forwarded and stay in it"):
    Async.blocking:
      val (m, sub) = subscribed()
      val a = BufferedChannel[Int](4)
      val b = BufferedChannel[Int](4)
      m.addPublisher(a)
      m.addPublisher(b)
      a.send(1)
      assertEquals(next(sub, "the value of a before removal"), Success(1))
      m.removePublisher(a)
      a.send(2)
      b.send(3)
      assertEquals(next(sub, "the value of b"), Success(3), "the value sent to a after its removal was forwarded")
      assertEquals(next(a, "a plain read of the removed publisher"), 2, "the removed publisher lost its value")
      b.send(4)
      assertEquals(next(sub, "b keeps flowing"), Success(4))
      m.removePublisher(a) // removing again: a no-op
      m.close()
      assertClosedNext(sub, "after close")
      assert(!a.isClosed && !b.isClosed, "the multiplexer closed a publisher")

  test("a publisher with thousands of values ready, removed mid-stream: each value either forwarded or left in it, once, in order"):
    Async.blocking:
      val n = 5000
      val (m, sub) = subscribed()
      val a = UnboundedChannel[Int]()
      (0 until n).foreach(a.send)
      m.addPublisher(a) // everything is ready at once: the loop takes most values without racing
      val early = nextN(sub, 1000, "the first thousand values")
      m.removePublisher(a)
      (n until n + 100).foreach(a.send) // sent after the removal returned: none may be taken
      m.close()
      val forwarded = early ++ Iterator.continually(next(sub, "up to the close")).takeWhile(_.isSuccess).toList
      val left = Iterator.continually(a.tryRead()).takeWhile(_.isDefined).map(_.get.get).toList
      assertEquals(forwarded.map(_.get) ++ left, (0 until n + 100).toList, s"forwarded ${forwarded.size}, left ${left.size}")

  test("two publishers with values ready are served in turns: neither waits for the other to empty"):
    Async.blocking:
      val n = 3000
      // Small buffers: until both publishers are added, a's values can run at most ~40 ahead
      // (with an unbounded subscriber a busy machine let a's first 1,000 through before b came)
      val m = ChannelMultiplexer[Int](buffer = 16)
      val sub = BufferedChannel[Try[Int]](16)
      m.addSubscriber(sub)
      val a = UnboundedChannel[Int]()
      val b = UnboundedChannel[Int]()
      (0 until n).foreach(a.send)
      (0 until n).foreach(i => b.send(n + i))
      m.addPublisher(a)
      m.addPublisher(b)
      val first = nextN(sub, 1000, "the first thousand values").map(_.get)
      assert(first.exists(_ < n) && first.exists(_ >= n), s"one publisher had the first 1,000 values to itself: ${first.take(5)}...")
      val rest = nextN(sub, 2 * n - 1000, "the remaining values").map(_.get)
      val all = first ++ rest
      assertEquals(all.filter(_ < n), (0 until n).toList, "a's values out of order or lost")
      assertEquals(all.filter(_ >= n), (n until 2 * n).toList, "b's values out of order or lost")
      m.close()

  test("the loop leaves no registrations behind: an idle publisher and the control side stay clean"):
    val values = 200
    Async.blocking:
      val (m, sub) = subscribed()
      val busy = SyncChannel[Int]()
      val idle = SyncChannel[Int]()
      m.addPublisher(busy)
      m.addPublisher(idle)
      (1 to values).foreach(busy.send) // each read is a race that idle loses
      assertEquals(nextN(sub, values, "sub"), ok((1 to values)*))
      // Now the loop waits in one race: at most its one registration is on idle.
      val left = registrations(idle)
      assert(left <= 1, s"$left registrations left on the idle publisher after $values lost races: ${dumpOf(idle)}")
      val control = m match
        case impl: ChannelMultiplexer.Impl[?] => impl.control
        case other                            => fail(s"not the implementation under test: $other")
      val onControl = registrations(control)
      assert(onControl <= 1, s"$onControl registrations left on the control channel after $values lost races: ${dumpOf(control)}")
      idle.send(-1) // and the live registration still reads
      assertEquals(next(sub, "the idle publisher's value"), Success(-1))
      m.close()

  test("a subscriber added later receives only the values read after it was added"):
    Async.blocking:
      val m = ChannelMultiplexer[Int]()
      val pub = SyncChannel[Int]()
      val early = UnboundedChannel[Try[Int]]()
      val late = UnboundedChannel[Try[Int]]()
      m.addSubscriber(early)
      m.addPublisher(pub)
      pub.send(1)
      pub.send(2) // returned: the loop has read 2
      m.addSubscriber(late)
      pub.send(3)
      pub.send(4)
      assertEquals(nextN(early, 4, "early"), ok(1, 2, 3, 4))
      assertEquals(nextN(late, 2, "late"), ok(3, 4), "the late subscriber got values read before it was added")
      m.close()
      assertClosedNext(early, "early after close")
      assertClosedNext(late, "late after close")

  test("removeSubscriber: what was queued is still delivered, nothing read afterwards is"):
    Async.blocking:
      val m = ChannelMultiplexer[Int]()
      val pub = SyncChannel[Int]()
      val leaving = SyncChannel[Try[Int]]() // not read until after its removal: values wait in its queue
      val staying = UnboundedChannel[Try[Int]]()
      m.addSubscriber(leaving)
      m.addSubscriber(staying)
      m.addPublisher(pub)
      (1 to 4).foreach(pub.send) // send(4) returned: the loop had handed out 1, 2, 3 entirely
      m.removeSubscriber(leaving)
      pub.send(5)
      pub.send(6)
      assertEquals(nextN(staying, 6, "staying"), ok(1, 2, 3, 4, 5, 6))
      m.close()
      assertClosedNext(staying, "staying after close")
      assertEquals(nextN(leaving, 3, "leaving, its queued values"), ok(1, 2, 3))
      // 4 was read before the removal too and may have been queued; 5, 6 and the close never are.
      leaving.tryRead() match
        case None | Some(Success(Success(4))) => ()
        case Some(other)                      => fail(s"the removed subscriber received $other after 1, 2, 3")
      m.removeSubscriber(leaving) // after close: a no-op

  test("a subscriber whose channel is closed is removed; the others are not disturbed"):
    Async.blocking:
      val m = ChannelMultiplexer[Int](buffer = 2)
      val pub = SyncChannel[Int]()
      val closedSub = BufferedChannel[Try[Int]](1)
      val a = UnboundedChannel[Try[Int]]()
      val b = UnboundedChannel[Try[Int]]()
      m.addSubscriber(a)
      m.addSubscriber(closedSub)
      m.addSubscriber(b)
      m.addPublisher(pub)
      closedSub.close()
      (1 to 10).foreach(pub.send) // more than its queue: with Block, a stuck subscriber would stall these
      assertEquals(nextN(a, 10, "a"), ok((1 to 10)*))
      assertEquals(nextN(b, 10, "b"), ok((1 to 10)*))
      m.close()
      assertClosedNext(a, "a after close")
      assertClosedNext(b, "b after close")

  test("a closed publisher is removed, its close is not forwarded, and the others keep flowing"):
    Async.blocking:
      val (m, sub) = subscribed()
      val a = BufferedChannel[Int](4)
      val b = SyncChannel[Int]()
      m.addPublisher(a)
      m.addPublisher(b)
      a.send(1)
      a.close()
      b.send(2)
      assertEquals(nextN(sub, 2, "the values of a and b").toSet, ok(1, 2).toSet)
      b.send(3)
      assertEquals(next(sub, "b after a closed"), Success(3), "a's close reached the subscriber")
      b.send(4)
      assertEquals(next(sub, "b still flowing"), Success(4))
      m.removePublisher(a) // already removed: a no-op
      m.close()
      assertClosedNext(sub, "after close")

  // ---------------------------------------------------------------------------------------------
  // Close

  test("close: every subscriber gets its values, then Failure(ChannelClosedException); no channel is closed"):
    Async.blocking:
      val m = ChannelMultiplexer[Int]()
      val pub = SyncChannel[Int]()
      val quiet = BufferedChannel[Int](2) // a publisher with nothing to send
      val s1 = UnboundedChannel[Try[Int]]()
      val s2 = BufferedChannel[Try[Int]](8)
      m.addSubscriber(s1)
      m.addSubscriber(s2)
      m.addPublisher(pub)
      m.addPublisher(quiet)
      (1 to 3).foreach(pub.send)
      m.close()
      m.close() // idempotent
      for (s, name) <- List(s1 -> "s1", s2 -> "s2") do
        assertEquals(nextN(s, 3, name), ok(1, 2, 3), s"$name: the values before close")
        assertClosedNext(s, s"$name: after its values")
        assert(!s.isClosed, s"$name: the multiplexer closed a subscriber's channel")
        s.send(Success(99))
        assertEquals(next(s, s"$name: a value sent to it after close"), Success(99))
      assert(!pub.isClosed && !quiet.isClosed, "the multiplexer closed a publisher")
      // The publishers are no longer read: what is sent to them stays for a plain reader.
      quiet.send(7)
      assertEquals(next(quiet, "the quiet publisher after close"), 7)
      val late = Future(pub.send(8))
      assertEquals(next(pub, "the rendezvous publisher after close"), 8)
      assert(resultWithin(late, "the send after close").isSuccess)
      for (s, name) <- List(s1 -> "s1", s2 -> "s2") do
        assertEquals(s.tryRead(), None, s"$name received something after the closing failure")
      intercept[ChannelClosedException](m.addPublisher(SyncChannel[Int]()))
      intercept[ChannelClosedException](m.addSubscriber(UnboundedChannel[Try[Int]]()))
      m.removePublisher(pub) // no-ops after close
      m.removeSubscriber(s1)

  // ---------------------------------------------------------------------------------------------
  // A slow subscriber

  test("Block: a subscriber that never reads stalls the loop once its queue is full; nothing is lost"):
    val buffer = 4
    val total = 20
    Async.blocking:
      val m = ChannelMultiplexer[Int](buffer = buffer, onFull = OnFull.Block)
      val slow = SyncChannel[Try[Int]]()
      val fast = UnboundedChannel[Try[Int]]()
      m.addSubscriber(slow)
      m.addSubscriber(fast)
      val pub = SyncChannel[Int]()
      m.addPublisher(pub)
      val sender = CountingSender(pub, total)
      assertEquals(nextN(fast, buffer, "fast, before the slow one's queue fills"), ok((1 to buffer)*))
      // Stalled: slow's delivery holds 1, its queue 2..5, the loop holds 6 and waits for room.
      val stall = buffer + 2
      assertEquals(sender.stalled(stall), stall, s"the loop did not stop at a full queue of $buffer (Block)")
      assert(!sender.future.isCompleted, "every value went through although a subscriber never read")
      // Reading the slow subscriber lets everything through, in order, to both.
      assertEquals(nextN(slow, total, "slow, once read"), ok((1 to total)*))
      assertEquals(nextN(fast, total - buffer, "fast, the rest"), ok((buffer + 1 to total)*))
      assert(resultWithin(sender.future, "the sender").isSuccess)
      assertEquals(m.dropped(slow), 0L, "dropped under Block")
      m.close()
      assertClosedNext(fast, "fast after close")
      assertClosedNext(slow, "slow after close")

  test("Block, one subscriber that never reads: the loop waits in its send; one added then is served at once"):
    val buffer = 4
    val total = 12
    Async.blocking:
      val m = ChannelMultiplexer[Int](buffer = buffer, onFull = OnFull.Block)
      val slow = SyncChannel[Try[Int]]()
      m.addSubscriber(slow)
      val pub = SyncChannel[Int]()
      m.addPublisher(pub)
      val sender = CountingSender(pub, total)
      // The loop took 1 and waits in slow's own send: nothing is queued, so the sender stalls at 1.
      assertEquals(sender.stalled(1), 1, "the loop did not wait in the only subscriber's send")
      // (The sender may stall before the loop, still spinning in slow's send, has parked there.)
      eventually("the loop to wait in slow's send with 1") { parkedSenders(slow) == 1 }
      // A new subscriber interrupts that wait: 1 goes to slow's queue, and the loop reads on, so
      // the new one gets 2, 3, 4, 5 while slow's queue fills (its delivery holds 1, the queue 2-5).
      val fast = UnboundedChannel[Try[Int]]()
      m.addSubscriber(fast)
      assertEquals(nextN(fast, buffer, "fast, added while the loop waited for slow"), ok((2 to buffer + 1)*))
      assertEquals(nextN(slow, total, "slow, once read"), ok((1 to total)*))
      assertEquals(nextN(fast, total - buffer - 1, "fast, the rest"), ok((buffer + 2 to total)*))
      assert(resultWithin(sender.future, "the sender").isSuccess)
      m.close()
      assertClosedNext(fast, "fast after close")
      assertClosedNext(slow, "slow after close")

  test("Block, one subscriber: removing it while the loop waits in its send lets the loop go on"):
    Async.blocking:
      val m = ChannelMultiplexer[Int](buffer = 2, onFull = OnFull.Block)
      val gone = SyncChannel[Try[Int]]()
      m.addSubscriber(gone)
      val pub = SyncChannel[Int]()
      m.addPublisher(pub)
      pub.send(1)
      eventually("the loop to wait in gone's send with 1") { parkedSenders(gone) == 1 }
      m.removeSubscriber(gone)
      // The loop reads on: with no subscriber left, values are read and go nowhere.
      pub.send(2)
      pub.send(3)
      val staying = UnboundedChannel[Try[Int]]()
      m.addSubscriber(staying)
      pub.send(4) // handed straight to staying: the loop waits in nothing
      pub.send(5)
      assertEquals(nextN(staying, 2, "staying"), ok(4, 5))
      m.close()
      assertClosedNext(staying, "staying after close")
      // 1 was read before the removal: gone's queue may deliver it; 2-5 and the close never.
      gone.tryRead() match
        case None | Some(Success(Success(1))) => ()
        case Some(other)                      => fail(s"the removed subscriber received $other")

  test("Block: close while the loop waits for a full queue stops it at once; what was queued still arrives"):
    val buffer = 2
    Async.blocking:
      val m = ChannelMultiplexer[Int](buffer = buffer, onFull = OnFull.Block)
      val slow = SyncChannel[Try[Int]]()
      val fast = UnboundedChannel[Try[Int]]()
      m.addSubscriber(slow) // first: the loop hands a value to subscribers in the order they were added
      m.addSubscriber(fast)
      val pub = SyncChannel[Int]()
      m.addPublisher(pub)
      val sender = CountingSender(pub, 10)
      // slow's delivery holds 1, its queue 2 and 3; the loop holds 4 and waits for room.
      val stall = buffer + 2
      assertEquals(sender.stalled(stall), stall, "the loop did not wait at the full queue")
      m.close()
      // The value in hand skips the full queue only; fast, which had room, still gets it.
      assertEquals(nextN(fast, stall, "fast"), ok((1 to stall)*))
      assertClosedNext(fast, "fast after its values")
      assertEquals(nextN(slow, buffer + 1, "slow"), ok((1 to buffer + 1)*))
      assertClosedNext(slow, "slow after its values")
      assertEquals(next(pub, "a plain read of the publisher after close"), stall + 1, "the loop still reads after close")

  test("Drop: a subscriber that never reads delays nobody; dropped counts exactly what it missed"):
    val buffer = 4
    val total = 20
    Async.blocking:
      val m = ChannelMultiplexer[Int](buffer = buffer, onFull = OnFull.Drop)
      val slow = SyncChannel[Try[Int]]()
      val fast = UnboundedChannel[Try[Int]]()
      m.addSubscriber(slow)
      m.addSubscriber(fast)
      val pub = SyncChannel[Int]()
      m.addPublisher(pub)
      // Paced by the fast subscriber: its queue never holds more than one value, so only the
      // slow one can be full (under Drop, a subscriber whose delivery lags drops too).
      for i <- 1 to total do
        pub.send(i)
        assertEquals(next(fast, s"fast, value $i"), Success(i), "the fast subscriber missed values")
      assertEquals(m.dropped(fast), 0L, "dropped for the fast subscriber")
      m.close() // after every value was handed out: the close failure ends what slow holds
      val received = Iterator.continually(next(slow, "slow, draining")).takeWhile(_.isSuccess).map(_.get).toList
      assert(received.size >= buffer && received.size <= buffer + 1,
        s"slow holds its queue of $buffer plus at most the one in delivery, got $received")
      assertEquals(received, received.sorted, "slow's values out of order")
      assertEquals(received.take(buffer), (1 to buffer).toList, "the first values fit the queue")
      assertEquals(m.dropped(slow), (total - received.size).toLong, s"dropped for slow, which received $received")
      assertClosedNext(fast, "fast after close")

class MultiplexerOnVirtualThreads extends MultiplexerBehaviour(Runtime.VirtualThreads)
class MultiplexerOnPlatformThreads extends MultiplexerBehaviour(Runtime.PlatformThreads)
