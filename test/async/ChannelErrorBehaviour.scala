package asyncpipe.async

import java.util.concurrent.{CountDownLatch, CyclicBarrier, TimeUnit}
import scala.util.{Failure, Success, Try}
import munit.Location
import ChannelBehaviour.{ChannelKind, stress}

/** `Channel.error(cause)`: a channel that ends with a failure. Over every channel kind: readers
  * drain what was sent before it (buffered values, senders blocked at that moment), then read
  * the failure with its cause, by every means; sends after it fail with the cause; the first of
  * `close` and `error` decides, also when they race; the multiplexer forwards a publisher's error
  * (and only an error) to its subscribers after that publisher's values.
  */
abstract class ChannelErrorBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  private val boom = IllegalStateException("boom")

  /** `t` is the error's failure: a ChannelClosedException caused by `cause`. */
  private def assertErrorRead(t: Try[?], cause: Throwable, what: String)(using Location): Unit = t match
    case Failure(e: ChannelClosedException) => assert(e.getCause eq cause, s"$what: the cause was ${e.getCause}, not $cause")
    case other                              => fail(s"$what: $other, not the channel's error")

  private def assertPlainClosed(t: Try[?], what: String)(using Location): Unit = t match
    case Failure(e: ChannelClosedException) => assertEquals(e.getCause, null, s"$what: a plain close read as an error")
    case other                              => fail(s"$what: $other, not the closed failure")

  /** Runs `body` on a thread of the scope; the latch counts down once it has started. */
  private def started[T](body: Async ?=> T)(using Async): (Future[T], CountDownLatch) =
    val latch = CountDownLatch(1)
    (Future { latch.countDown(); body }, latch)

  for kind <- ChannelKind.all do
    test(s"$kind: after error, readers drain what was sent, then read the failure with its cause, by every means; sends fail with it"):
      val ch = kind.make[Int]()
      val k = kind.room.min(5)
      Async.blocking {
        for i <- 0 until k do ch.send(i)
        assertEquals(ch.closeCause, None)
        ch.error(boom)
        assert(ch.isClosed)
        assertEquals(ch.closeCause, Some(boom))
        assertEquals((0 until k).map(_ => ch.read()), (0 until k).map(Success(_)))
        assertErrorRead(ch.read(), boom, "read")
        assertErrorRead(ch.tryRead().getOrElse(fail("tryRead gave None")), boom, "tryRead")
        assertErrorRead(ch.canRead.poll().getOrElse(fail("canRead.poll() gave None")), boom, "canRead.poll()")
        assertErrorRead(Async.await(ch.canRead), boom, "await canRead")
        assertEquals(ch.readOrClosed(), ChannelClosed)
        assertErrorRead(Try(ch.send(9)), boom, "a send after the error")
        assertErrorRead(Try(ch.trySend(9)), boom, "a trySend after the error")
      }

    test(s"$kind: readers parked on an empty channel wake with the error"):
      val ch = kind.make[Int]()
      Async.blocking {
        val (reader, readerStarted) = started(ch.read())
        val (racer, racerStarted) = started(Async.await(ch.canRead))
        readerStarted.await()
        racerStarted.await()
        ch.error(boom)
        assertErrorRead(reader.await.flatten, boom, "a parked read")
        assertErrorRead(racer.await.flatten, boom, "a parked canRead")
      }

    test(s"$kind: the first of close and error decides; later calls change nothing"):
      val closedFirst = kind.make[Int]()
      closedFirst.close()
      closedFirst.error(boom)
      assertEquals(closedFirst.closeCause, None)
      Async.blocking(assertPlainClosed(closedFirst.read(), "close, then error"))
      val erredFirst = kind.make[Int]()
      erredFirst.error(boom)
      erredFirst.close()
      erredFirst.error(IllegalArgumentException("second"))
      assertEquals(erredFirst.closeCause, Some(boom))
      Async.blocking(assertErrorRead(erredFirst.read(), boom, "error, then close and another error"))
      intercept[NullPointerException](kind.make[Int]().error(null))

  for kind <- ChannelKind.all if kind.sendCanBlock do
    test(s"$kind: senders blocked at the error are delivered, then readers read the error"):
      val ch = kind.make[Int]()
      Async.blocking {
        for i <- 0 until kind.room do ch.send(i) // full (nothing for rendezvous)
        val sent = java.util.concurrent.atomic.AtomicReference[Try[Unit]]()
        val sender = Thread.ofPlatform().start(() => sent.set(Try(Async.blocking(ch.send(100)))))
        Support.awaitBlocked(sender)
        ch.error(boom)
        val got = Iterator.continually(ch.read()).takeWhile(_.isSuccess).map(_.get).toList
        assertEquals(got, (0 until kind.room).toList :+ 100)
        assert(sender.join(java.time.Duration.ofMillis(Support.Patience)), "the blocked sender did not return")
        assertEquals(sent.get, Success(()))
        assertErrorRead(ch.read(), boom, "after the drain")
      }

  for kind <- ChannelKind.all do
    test(s"$kind: close and error racing: every reader sees the same ending, and closeCause agrees (${200 * stress} rounds)"):
      for round <- 1 to 200 * stress do
        val ch = kind.make[Int]()
        val barrier = CyclicBarrier(2)
        val closer = Thread.ofPlatform().start(() => { barrier.await(); ch.close() })
        barrier.await()
        ch.error(boom)
        closer.join()
        Async.blocking {
          val reads = (1 to 3).map(_ => ch.read())
          ch.closeCause match
            case Some(c) => reads.foreach(assertErrorRead(_, c, s"round $round"))
            case None    => reads.foreach(assertPlainClosed(_, s"round $round"))
        }

  for kind <- ChannelKind.all do
    test(s"$kind: cancel drops what was not read: readers read the cancel at once, sends after it fail, parked readers wake"):
      val ch = kind.make[Int]()
      Async.blocking {
        for i <- 0 until kind.room.min(5) do ch.send(i)
        ch.cancel()
        assert(ch.isClosed)
        ch.closeCause match
          case Some(c: ChannelCancelledException) => assertErrorRead(ch.read(), c, "the read after the cancel")
          case other                              => fail(s"closeCause after cancel: $other")
        assertErrorRead(Try(ch.send(9)), ch.closeCause.get, "a send after the cancel")
        val parked = kind.make[Int]()
        val (reader, readerStarted) = started(parked.read())
        readerStarted.await()
        parked.cancel()
        assert(reader.await.flatten.isFailure, "a parked reader did not wake with the cancel")
        val closed = kind.make[Int]()
        if kind.room > 0 then closed.send(1)
        closed.close()
        closed.cancel() // after a close: drops the rest, the ending stays a plain close
        assertEquals(closed.closeCause, None)
        assertPlainClosed(closed.read(), "cancel after close")
      }

  for kind <- ChannelKind.all if kind.sendCanBlock do
    test(s"$kind: senders blocked at a cancel return; their values are dropped"):
      val ch = kind.make[Int]()
      Async.blocking {
        for i <- 0 until kind.room do ch.send(i)
        val sent = java.util.concurrent.atomic.AtomicReference[Try[Unit]]()
        val sender = Thread.ofPlatform().start(() => sent.set(Try(Async.blocking(ch.send(100)))))
        Support.awaitBlocked(sender)
        ch.cancel()
        assert(sender.join(java.time.Duration.ofMillis(Support.Patience)), "the blocked sender did not return")
        assertEquals(sent.get, Success(()))
        assert(ch.read().isFailure, "a value was left after the cancel")
      }

  for kind <- ChannelKind.all do
    test(s"$kind: a cancel while senders and a reader run: every value read once at most, every thread ends (${100 * stress} rounds)"):
      for round <- 1 to 100 * stress do
        val ch = kind.make[Int]()
        val read = java.util.concurrent.ConcurrentLinkedQueue[Int]()
        val senders = (0 until 2).map { k =>
          Thread.ofPlatform().start(() =>
            try Async.blocking(for i <- 0 until 200 do ch.send(k * 1000 + i))
            catch case _: ChannelClosedException => ())
        }
        val reader = Thread.ofPlatform().start(() =>
          Async.blocking(Iterator.continually(ch.read()).takeWhile(_.isSuccess).foreach(v => read.add(v.get))))
        java.util.concurrent.locks.LockSupport.parkNanos(java.util.concurrent.ThreadLocalRandom.current().nextLong(200_000))
        ch.cancel()
        for t <- senders :+ reader do assert(t.join(java.time.Duration.ofMillis(Support.Patience)), s"round $round: $t did not end after the cancel")
        val got = scala.jdk.CollectionConverters.IteratorHasAsScala(read.iterator()).asScala.toSeq
        assertEquals(got.distinct.size, got.size, s"round $round: a value was read twice")
        for k <- 0 until 2 do
          val mine = got.filter(_ / 1000 == k)
          assertEquals(mine, mine.sorted, s"round $round: sender $k's values out of order")

  test("multiplexer: a publisher's error reaches every subscriber after its values; other publishers go on; a plain close is not forwarded"):
    Async.blocking {
      val m = ChannelMultiplexer[Int]()
      val a = UnboundedChannel[Try[Int]]()
      val b = UnboundedChannel[Try[Int]]()
      m.addSubscriber(a)
      m.addSubscriber(b)
      val failing = SyncChannel[Int]()
      val closing = SyncChannel[Int]()
      val going = SyncChannel[Int]()
      Seq(failing, closing, going).foreach(m.addPublisher)
      failing.send(1)
      failing.send(2)
      failing.error(boom)
      closing.send(10)
      closing.close()
      going.send(20)
      // Publishers are raced: only each one's own order is kept.
      for (sub, name) <- Seq(a -> "a", b -> "b") do
        val got = (1 to 5).map(_ => sub.read().get)
        val failures = got.filter(_.isFailure)
        assertEquals(failures.size, 1, s"$name: $got")
        assertErrorRead(failures.head, boom, s"subscriber $name")
        assertEquals(got.takeWhile(_.isSuccess).filter(v => v == Success(1) || v == Success(2)).toList, List[Try[Int]](Success(1), Success(2)), s"$name: $got")
        assertEquals(got.collect { case Success(v) => v }.toSet, Set(1, 2, 10, 20), s"$name: $got")
        assertEquals(sub.tryRead(), None, s"$name: more than the five, such as the plain close")
      m.close()
    }

class ChannelErrorOnVirtualThreads extends ChannelErrorBehaviour(Runtime.VirtualThreads)
class ChannelErrorOnPlatformThreads extends ChannelErrorBehaviour(Runtime.PlatformThreads)
