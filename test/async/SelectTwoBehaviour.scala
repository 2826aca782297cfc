package asyncpipe.async

import java.util.concurrent.{CancellationException, CountDownLatch}
import scala.concurrent.duration.*
import scala.util.Success

/** `Async.select(a, b)`, the two-branch overload (inline; `Select.select2`), on the paths that the
  * general select's tests reach only with other counts of branches: a ready branch taken by the
  * poll alone, a wait for either (the loser's registration dropped, a cancel dropping both,
  * exactly one of two racing offers taken), a select's own timer as one of the two (won and lost),
  * a cancelled scope, and the varargs select still chosen for one branch and for a spliced Seq.
  */
abstract class SelectTwoBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  test("two branches: the first ready one in the order given wins; the other keeps its value"):
    Async.blocking {
      val a = BufferedChannel[Int](1)
      val b = BufferedChannel[Int](1)
      a.send(1)
      b.send(2)
      assertEquals(Async.select(b.canRead.handle(v => s"b ${v.get}"), a.canRead.handle(v => s"a ${v.get}")), "b 2")
      assertEquals(Async.select(b.canRead.handle(v => s"b ${v.get}"), a.canRead.handle(v => s"a ${v.get}")), "a 1")
      assertEquals((a.tryRead(), b.tryRead()), (None, None))
    }

  test("two branches: a read against a send; the send goes where there is room, the read takes what is there"):
    Async.blocking {
      val in = BufferedChannel[Int](4)
      val out = BufferedChannel[Int](1)
      assertEquals(Async.select(in.canRead.handle(v => v.get), out.canSend(7).handle(_ => -1)), -1)
      in.send(3)
      assertEquals(Async.select(out.canSend(8).handle(_ => -1), in.canRead.handle(v => v.get)), 3, "out is full: the read wins")
      assertEquals(out.tryRead(), Some(Success(7)))
      assertEquals(out.tryRead(), None, "the losing send branch sent")
    }

  test("two branches, neither ready: the select waits for whichever comes first"):
    Async.blocking {
      val a = SyncChannel[Int]()
      val b = SyncChannel[Int]()
      val started = CountDownLatch(1)
      val sender = Future { started.countDown(); b.send(5) }
      Support.awaitLatch(started, "the sender to start")
      assertEquals(Async.select(a.canRead.handle(v => v.get * 10), b.canRead.handle(v => v.get)), 5)
      assertEquals(sender.await, Success(()))
      assertEquals(a.tryRead(), None)
    }

  test("two branches with a select's own timer: it wins when nothing comes, and is cancelled when it loses"):
    Async.blocking {
      val before = Timers.pending
      val ch = BufferedChannel[Int](1)
      assertEquals(Async.select(ch.canRead.handle(v => v.get), Async.after(10.millis).handle(_ => -1)), -1)
      ch.send(4)
      val own = Async.after(1.hour)
      assertEquals(Async.select(own.handle(_ => -1), ch.canRead.handle(v => v.get)), 4)
      assertEquals(own.poll(), Some(false), "the losing timer was not cancelled")
      assertEquals(Timers.pending, before, "a select's timer is still scheduled")
    }

  test("two branches in a cancelled scope: CancellationException, and the ready value is not taken"):
    Async.blocking {
      val ch = BufferedChannel[Int](1)
      ch.send(1)
      val out = BufferedChannel[Int](1)
      try
        Async.group {
          Async.current.group.cancel()
          intercept[CancellationException](Async.select(ch.canRead.handle(v => v.get), out.canSend(2).handle(_ => -1)))
        }
      catch case _: CancellationException => ()
      assertEquals(ch.tryRead(), Some(Success(1)), "the cancelled select took the value")
      assertEquals(out.tryRead(), None, "the cancelled select sent")
    }

  test("two branches, neither ready: the winner's offer drops the other branch's registration"):
    val a = ProbeSource.ephemeral[Int]()
    val b = ProbeSource.ephemeral[Int]()
    Async.blocking {
      val r = Future(Async.select(a.handle(v => s"a $v"), b.handle(v => s"b $v")))
      a.awaitRegistered(1, "(the select's first branch)")
      b.awaitRegistered(1, "(the select's second branch)")
      b.offer(2)
      assertEquals(r.value, "b 2")
    }
    assertEquals((a.registered, b.registered), (0, 0), "a finished select left a listener registered")
    a.offer(1)
    assertEquals(a.pending, 1, "a value offered after the select ended was taken")

  test("two branches, neither ready: a cancel ends the wait and drops both registrations, taking nothing"):
    val a = ProbeSource.ephemeral[Int]()
    val b = ProbeSource.ephemeral[Int]()
    val thread = java.util.concurrent.atomic.AtomicReference[Thread]()
    Async.blocking {
      val r = Future {
        thread.set(Thread.currentThread())
        Async.select(a.handle(identity), b.handle(identity))
      }
      a.awaitRegistered(1, "(the select's first branch)")
      b.awaitRegistered(1, "(the select's second branch)")
      r.cancel()
      Support.join(thread.get, "the cancelled select")
      Support.assertCancelledNow(r)
    }
    assertEquals((a.registered, b.registered), (0, 0), "a cancelled select left a listener registered")
    a.offer(1)
    b.offer(2)
    assertEquals((a.pending, b.pending), (1, 1), "a value offered after the cancel was taken")

  test(s"two branches, neither ready: offers racing from two threads, exactly one is taken (${200 * ChannelBehaviour.stress} rounds)"):
    Async.blocking {
      for round <- 1 to 200 * ChannelBehaviour.stress do
        val a = ProbeSource.ephemeral[Int]()
        val b = ProbeSource.ephemeral[Int]()
        val r = Future(Async.select(a.handle(v => v), b.handle(v => v)))
        a.awaitRegistered(1)
        b.awaitRegistered(1)
        val go = CountDownLatch(1)
        val fa = Future { go.await(); a.offer(1) }
        val fb = Future { go.await(); b.offer(2) }
        go.countDown()
        val won = r.value
        fa.await.get
        fb.await.get
        assertEquals(a.pending + b.pending, 1, s"round $round: won $won, and ${2 - a.pending - b.pending} values were taken")
        assertEquals(if won == 1 then a.pending else b.pending, 0, s"round $round: the winner's value is still there")
    }

  test("one branch, and a spliced Seq of two, take the general select"):
    Async.blocking {
      val ch = BufferedChannel[Int](2)
      ch.send(1)
      ch.send(2)
      assertEquals(Async.select(ch.canRead.handle(v => v.get)), 1)
      val branches = Seq(ch.canRead.handle(v => v.get), Async.after(1.hour).handle(_ => -1))
      assertEquals(Async.select(branches*), 2)
    }

class SelectTwoOnVirtualThreads extends SelectTwoBehaviour(Runtime.VirtualThreads)
class SelectTwoOnPlatformThreads extends SelectTwoBehaviour(Runtime.PlatformThreads)
