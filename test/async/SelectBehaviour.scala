package asyncpipe.async

import java.util.concurrent.CountDownLatch
import scala.concurrent.duration.*
import scala.util.{Success, Try}
import ChannelBehaviour.stress

/** `Async.select`, `selectNow` and `selectWithin` over channel reads, futures and timers: the
  * winner's handler runs with its value, a losing branch takes nothing, a losing timer is
  * cancelled, a select that does not wait takes nothing that was not ready.
  */
abstract class SelectBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  test("select: the ready channel's value goes to its handler; the other channel keeps its own"):
    Async.blocking {
      val a = BufferedChannel[Int](1)
      val b = BufferedChannel[String](1)
      b.send("b1")
      val got = Async.select(a.canRead.handle(v => s"a ${v.get}"), b.canRead.handle(v => s"b ${v.get}"))
      assertEquals(got, "b b1")
      a.send(1)
      b.send("b2")
      assertEquals(Async.select(a.canRead.handle(v => s"a ${v.get}")), "a 1")
      assertEquals(b.tryRead(), Some(Success("b2")), "a select that did not choose b took from it")
    }

  test("select waits for a future or a parked sender, whichever comes first; a losing timer is cancelled at once"):
    Async.blocking {
      val before = Timers.pending
      val ch = SyncChannel[Int]()
      val started = CountDownLatch(1)
      val sender = Future { started.countDown(); ch.send(7) }
      started.await()
      val never = Promise[String]()
      val own = Async.after(1.hour)
      val deadline = Timer(1.hour) // the caller's: it may serve the next select too
      val got = Async.select(
        ch.canRead.handle(v => v.get * 6),
        never.future.handle(_ => -1),
        own.handle(_ => -2),
        deadline.handle(_ => -3)
      )
      assertEquals(got, 42)
      assertEquals(sender.await, Success(()))
      assertEquals(own.poll(), Some(false), "the select's losing timer was not cancelled (false: cancelled, not rung)")
      assertEquals(deadline.poll(), None, "the caller's timer was cancelled by the select")
      assertEquals(Timers.pending, before + 1, "the select's own timer is still scheduled, or the caller's is not")
      deadline.cancel()
    }

  test("selectNow: nothing ready runs `otherwise` and takes nothing; then a ready value is taken"):
    Async.blocking {
      val ch = BufferedChannel[Int](2)
      val before = Timers.pending
      assertEquals(Async.selectNow(ch.canRead.handle(_.get), Async.after(1.hour).handle(_ => -1))(otherwise = 0), 0)
      assertEquals(Timers.pending, before, "a timer of a selectNow outlived it")
      ch.send(5)
      assertEquals(Async.selectNow(ch.canRead.handle(_.get))(otherwise = 0), 5)
      assertEquals(ch.tryRead(), None)
    }

  test("selectWithin: None once the time is up, with nothing taken; Some when a branch delivers first; its timer leaves"):
    Async.blocking {
      val before = Timers.pending
      val ch = BufferedChannel[Int](1)
      assertEquals(Async.selectWithin(20.millis)(ch.canRead.handle(_.get)), None)
      ch.send(3)
      assertEquals(ch.tryRead(), Some(Success(3)), "the value sent after the timeout was taken by the select")
      ch.send(4)
      assertEquals(Async.selectWithin(1.hour)(ch.canRead.handle(_.get)), Some(4))
      assertEquals(Timers.pending, before, "a selectWithin's timer is still pending")
    }

  test(s"exactly once: two senders race into two channels, selects take every value once (${500 * stress} rounds)"):
    Async.blocking {
      for round <- 1 to 500 * stress do
        val a = SyncChannel[Int]()
        val b = BufferedChannel[Int](1)
        val sa = Future(a.send(1))
        val sb = Future(b.send(2))
        val first = Async.select(a.canRead.handle(_.get), b.canRead.handle(_.get))
        val second = Async.select(a.canRead.handle(_.get), b.canRead.handle(_.get))
        assertEquals(Set(first, second), Set(1, 2), s"round $round")
        sa.await.get
        sb.await.get
        assertEquals((a.tryRead(), b.tryRead()), (None, None), s"round $round: a value was left or duplicated")
    }

  // ---------------------------------------------------------------------------------------------
  // Send branches: ch.canSend(v)

  test("send branch: a buffered channel with room takes the value at once; a full one lets the read branch win, sending nothing"):
    Async.blocking {
      val out = BufferedChannel[Int](1)
      val in = BufferedChannel[String](1)
      assertEquals(Async.select(out.canSend(1).handle(r => s"sent $r"), in.canRead.handle(v => s"read ${v.get}")), "sent Success(())")
      in.send("x")
      assertEquals(Async.select(out.canSend(2).handle(_ => "sent"), in.canRead.handle(v => s"read ${v.get}")), "read x")
      assertEquals(out.tryRead(), Some(Success(1)))
      assertEquals(out.tryRead(), None, "the losing send branch sent its value")
      assertEquals(out.asInstanceOf[SegmentChannel[Int]].parkedSenders, 0)
    }

  test("send branch: waits for a reader of a rendezvous channel; a read that comes later takes the value"):
    Async.blocking {
      val out = SyncChannel[Int]()
      val never = BufferedChannel[Int](1)
      val reader = Future { Thread.sleep(20); out.read() }
      val got = Async.select(out.canSend(42).handle(_ => "sent"), never.canRead.handle(_ => "read"))
      assertEquals(got, "sent")
      assertEquals(reader.await, Success(Success(42)))
    }

  test("send branch: a reader parked first is handed the value"):
    Async.blocking {
      val out = SyncChannel[Int]()
      val reader = Future(out.read())
      Support.eventually("the reader to park") { out.asInstanceOf[SegmentChannel[Int]].dump.contains("r") }
      assertEquals(Async.select(out.canSend(5).handle(_ => "sent")), "sent")
      assertEquals(reader.await, Success(Success(5)))
    }

  test("send branch that loses to a later read leaves nothing behind: no parked sender, no value"):
    Async.blocking {
      val out = SyncChannel[Int]()
      val in = SyncChannel[Int]()
      val sender = Future { Thread.sleep(20); in.send(9) }
      assertEquals(Async.select(out.canSend(1).handle(_ => -1), in.canRead.handle(_.get)), 9)
      sender.await.get
      val ch = out.asInstanceOf[SegmentChannel[Int]]
      assertEquals(ch.parkedSenders, 0, ch.dump)
      assertEquals(out.tryRead(), None)
      val reader = Future(out.read())
      out.send(2)
      assertEquals(reader.await, Success(Success(2)), "the read found the withdrawn send's value")
    }

  test("selectNow with a send branch: no room runs `otherwise`; room sends"):
    Async.blocking {
      val out = BufferedChannel[Int](1)
      out.send(0)
      assertEquals(Async.selectNow(out.canSend(1).handle(_ => "sent"))(otherwise = "full"), "full")
      assertEquals(out.read(), Success(0))
      assertEquals(Async.selectNow(out.canSend(2).handle(_ => "sent"))(otherwise = "full"), "sent")
      assertEquals(out.tryRead(), Some(Success(2)))
      assertEquals(out.tryRead(), None)
    }

  test("selectWithin with a send branch to a full channel: None, and the channel holds only what it held"):
    Async.blocking {
      val out = BufferedChannel[Int](1)
      out.send(0)
      assertEquals(Async.selectWithin(20.millis)(out.canSend(1).handle(_ => "sent")), None)
      assertEquals(out.tryRead(), Some(Success(0)))
      assertEquals(out.tryRead(), None)
    }

  test("send branch on a closed channel: Failure(ChannelClosedException) with the channel's cause"):
    Async.blocking {
      val out = BufferedChannel[Int](1)
      out.error(IllegalStateException("gone"))
      val got = Async.select(out.canSend(1).handle(identity))
      got match
        case scala.util.Failure(e: ChannelClosedException) => assertEquals(e.getCause.getMessage, "gone")
        case other                                        => fail(s"got $other")
    }

  test("a select never reads its own send on a channel: it reads another sender's value, and its own send is not made"):
    Async.blocking {
      val ch = SyncChannel[Int]()
      val other = Future { Thread.sleep(20); ch.send(2) }
      val got = Async.select(ch.canRead.handle(v => s"read ${v.get}"), ch.canSend(1).handle(_ => "sent"))
      assertEquals(got, "read 2")
      other.await.get
      assertEquals(ch.asInstanceOf[SegmentChannel[Int]].parkedSenders, 0)
      assertEquals(ch.tryRead(), None)
    }

  test(s"exactly once: selects sending into two channels against readers of both, every value once (${300 * stress} rounds)"):
    Async.blocking {
      for round <- 1 to 300 * stress do
        val a = SyncChannel[Int]()
        val b = SyncChannel[Int]()
        val ra = Future(a.read())
        val rb = Future(b.read())
        // two selects, each sending one value to whichever channel takes it first
        val s1 = Future(Async.select(a.canSend(1).handle(_ => 'a'), b.canSend(1).handle(_ => 'b')))
        val s2 = Future(Async.select(a.canSend(2).handle(_ => 'a'), b.canSend(2).handle(_ => 'b')))
        val sent = Set(s1.await.get, s2.await.get)
        assertEquals(sent, Set('a', 'b'), s"round $round: both selects sent into the same channel")
        val got = Set(ra.await.get.get, rb.await.get.get)
        assertEquals(got, Set(1, 2), s"round $round")
        assertEquals((a.tryRead(), b.tryRead()), (None, None), s"round $round: a value was left or duplicated")
    }

class SelectOnVirtualThreads extends SelectBehaviour(Runtime.VirtualThreads)
class SelectOnPlatformThreads extends SelectBehaviour(Runtime.PlatformThreads)
