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

class SelectOnVirtualThreads extends SelectBehaviour(Runtime.VirtualThreads)
class SelectOnPlatformThreads extends SelectBehaviour(Runtime.PlatformThreads)
