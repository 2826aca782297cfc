package asyncpipe.async

import java.util.concurrent.CountDownLatch
import java.util.concurrent.atomic.AtomicReference
import scala.concurrent.duration.*
import scala.util.{Failure, Success, Try}
import munit.Location
import ChannelBehaviour.{ChannelKind, cellCodes, dumpOf, parkedInChannel, seg, stress}
import Support.eventually

/** `Async.select`, `selectNow` and `selectWithin` over channel reads, futures and timers: the
  * winner's handler runs with its value, a losing branch takes nothing, a losing timer is
  * cancelled, a select that does not wait takes nothing that was not ready.
  *
  * Send branches (`ch.canSend(v)`), also on every kind of channel (rendezvous, buffered(1),
  * buffered(16), unbounded): ready at once where a send would not wait; waiting until a reader
  * (read(), tryRead, a select's canRead) or room comes; lost to another branch, refused by its
  * listener, timed out (selectWithin) or cancelled with its select (its future's cancel, an
  * interrupt), having sent nothing and left nothing (no parked sender, no cell held, all the
  * room); closed, error(cause) and cancel() of the channel, before and while it waits; nested in
  * a race inside a select, or in a handler; a select sending and reading on one channel, against
  * a reader, a sender, or another such select. Losing timers leave the scheduler.
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

  // ---------------------------------------------------------------------------------------------
  // Send branches on every kind of channel: rendezvous, buffered(1), buffered(16), unbounded.
  // Each test orders its parties with "parked" checks and joins, never with sleeps.

  private val SendKinds = List(ChannelKind.Rendezvous, ChannelKind.Buffered(1), ChannelKind.Buffered(16), ChannelKind.Unbounded)
  private val Boom = IllegalStateException("boom")

  /** A future of the scope running `body`, and its thread once it runs. */
  private final class Party[T](val future: Future[T], thread: AtomicReference[Thread], what: String):
    /** Waits until the body is parked in a channel operation or an await (a select). */
    def awaitParked()(using Location): Unit = eventually(s"$what to park")(parkedInChannel(thread.get))
    def result(using Location): Try[T] = Support.resultWithin(future, what)
    def join()(using Location): Unit =
      eventually(s"$what to start")(thread.get != null)
      Support.join(thread.get, what)
    def interrupt()(using Location): Unit =
      eventually(s"$what to start")(thread.get != null)
      thread.get.interrupt()
    def isParkedOrDone: Boolean = future.isCompleted || parkedInChannel(thread.get)

  private def party[T](what: String)(body: Async ?=> T)(using Async): Party[T] =
    val t = AtomicReference[Thread]()
    Party(Future { t.set(Thread.currentThread); body }, t, what)

  /** Fills `ch` until a send must wait (nothing for a rendezvous or unbounded channel): the values
    * -1, -2, ... are buffered.
    */
  private def fillUp(kind: ChannelKind, ch: Channel[Int])(using Location): List[Int] =
    val values = List.tabulate(if kind.sendCanBlock then kind.room else 0)(i => -1 - i)
    values.foreach(v => assert(ch.trySend(v), s"$kind refused $v while filling it: ${dumpOf(ch)}"))
    values

  /** The values `tryRead` takes, until it takes nothing or the closed failure. */
  private def drain(ch: Channel[Int]): List[Int] =
    Iterator.continually(ch.tryRead()).takeWhile(_.exists(_.isSuccess)).map(_.get.get).toList

  /** The channel is quiet and a send branch left nothing in it: no sender parked, no cell held
    * (`checkInvariants`), and exactly `left` to read, in that order. A losing branch is
    * withdrawn by the thread whose offer won the race, just after it woke the select's thread
    * (a timer's thread, say): so the select may return a moment before that; a reader coming
    * meanwhile is refused by the branch. Hence the wait.
    */
  private def assertLeft(ch: Channel[Int], left: List[Int], what: String)(using Location): Unit =
    eventually(s"$what: the losing send branches to be withdrawn: ${dumpOf(ch)}")(seg(ch).parkedSenders == 0)
    seg(ch).checkInvariants()
    assertEquals(drain(ch), left, s"$what: ${dumpOf(ch)}")
    seg(ch).checkInvariants()

  /** The drained channel takes exactly as many sends that do not wait as its kind promises. */
  private def assertRoom(kind: ChannelKind, ch: Channel[Int], what: String)(using Location): Unit =
    if kind.sendCanBlock then
      val n = kind.room
      val taken = (1 to n + 1).takeWhile(i => ch.trySend(1000 + i)).size
      assertEquals(taken, n, s"$what: the empty $kind took $taken sends without a reader: ${dumpOf(ch)}")
      assertEquals(drain(ch), (1 to n).map(1000 + _).toList, s"$what: ${dumpOf(ch)}")

  /** No timer is scheduled beyond the `before` there were: the select's own are gone. Polled, and
    * bounded from above only: one run here once saw a timer more than before for a moment, not
    * the select's (a timer a select leaves behind stays an hour).
    */
  private def assertNoTimerLeft(before: Int, what: String)(using Location): Unit =
    eventually(s"$what to leave the scheduler (${Timers.pending} timers pending, $before before)")(Timers.pending <= before)

  private def causeOf(t: Try[?])(using Location): Throwable | Null = Support.failureOf[ChannelClosedException](t).getCause

  for kind <- SendKinds do
    test(s"$kind: a send branch completes at once where a send would not wait (room, or a reader waiting in read() or a select), and its values are read in order"):
      Async.blocking {
        val ch = kind.make[Int]()
        val idle = BufferedChannel[Int](1)
        val ready = if kind.sendCanBlock then kind.room else 100
        for v <- 1 to ready do
          assertEquals(Async.selectNow(ch.canSend(v).handle(_ => "sent"))(otherwise = "would wait"), "sent", s"value $v: ${dumpOf(ch)}")
        if kind.sendCanBlock then
          assertEquals(Async.selectNow(ch.canSend(0).handle(_ => "sent"))(otherwise = "would wait"), "would wait", dumpOf(ch))
        assertEquals(drain(ch), (1 to ready).toList, "values lost, out of order, or the refused selectNow sent its value")
        val reader = party("the reader")(ch.read())
        reader.awaitParked()
        assertEquals(Async.selectNow(ch.canSend(7).handle(_ => "sent"))(otherwise = "would wait"), "sent", dumpOf(ch))
        assertEquals(reader.result, Success(Success(7)))
        val selecting = party("the selecting reader")(Async.select(ch.canRead.handle(_.get), idle.canRead.handle(_ => -1)))
        selecting.awaitParked()
        assertEquals(Async.select(ch.canSend(8).handle(_ => "sent")), "sent", dumpOf(ch))
        assertEquals(selecting.result, Success(8))
        assertEquals(seg(idle).registeredListeners, 0, "the selecting reader's losing branch is still registered")
        assertLeft(ch, Nil, "after the reads")
      }

  for kind <- SendKinds if kind.sendCanBlock do
    test(s"$kind: a send branch that must wait completes when a reader or room comes (read(), tryRead, a select's canRead); its value follows those sent before it"):
      Async.blocking {
        for how <- Seq("read()", "tryRead()", "a select's canRead") do
          val ch = kind.make[Int]()
          val idle = BufferedChannel[Int](1)
          val before = fillUp(kind, ch)
          val sel = party(s"$how: the select")(Async.select(ch.canSend(100).handle(r => s"sent $r"), idle.canRead.handle(v => s"idle $v")))
          sel.awaitParked()
          assertEquals(seg(ch).parkedSenders, 1, s"$how: the send branch is not parked: ${dumpOf(ch)}")
          assert(!sel.future.isCompleted, s"$how: the select completed with nothing to take its value")
          val first = how match
            case "read()"    => ch.read()
            case "tryRead()" => ch.tryRead().getOrElse(fail(s"tryRead took nothing with a send branch waiting: ${dumpOf(ch)}"))
            case _           => Async.select(ch.canRead.handle(identity), idle.canRead.handle(_ => Success(-100)))
          assertEquals(first, Success(before.headOption.getOrElse(100)), s"$how: ${dumpOf(ch)}")
          assertEquals(sel.result, Success("sent Success(())"), how)
          assertEquals(seg(idle).registeredListeners, 0, s"$how: the select's losing read branch is still registered")
          assertLeft(ch, if before.isEmpty then Nil else before.drop(1) :+ 100, how)
          assertRoom(kind, ch, how)
      }

  for kind <- SendKinds do
    test(s"$kind: a send branch that loses to a read sent nothing and left nothing: no parked sender, no value, no cell held, all the room"):
      Async.blocking {
        val ch = kind.make[Int]()
        val before = fillUp(kind, ch)
        if kind.sendCanBlock then
          // the send branch waits; then the read branch wins
          val in = SyncChannel[Int]()
          val sel = party("the select")(Async.select(ch.canSend(100).handle(_ => "sent"), in.canRead.handle(v => s"read ${v.get}")))
          sel.awaitParked()
          assertEquals(seg(ch).parkedSenders, 1, s"the send branch is not parked: ${dumpOf(ch)}")
          in.send(7)
          assertEquals(sel.result, Success("read 7"))
          assertEquals(seg(in).registeredListeners, 0)
        // a read branch ready first: the send branch is not made
        val ready = BufferedChannel[Int](1)
        ready.send(8)
        assertEquals(Async.select(ready.canRead.handle(v => s"read ${v.get}"), ch.canSend(101).handle(_ => "sent")), "read 8")
        assertLeft(ch, before, "after the lost send branches")
        assertRoom(kind, ch, "after the lost send branches")
      }

  for kind <- SendKinds do
    test(s"$kind: a send branch whose listener refuses (its race won elsewhere at that instant) sends nothing and leaves all the room to later sends"):
      Async.blocking {
        val ch = kind.make[Int]()
        val refuse = Listener[Try[Unit]](_ => false)
        val reader = if kind == ChannelKind.Rendezvous then Some(party("the reader")(ch.read())) else None
        reader.foreach(_.awaitParked()) // a rendezvous send branch is asked only with a reader there
        assert(!ch.canSend(1).poll(refuse), "poll reported a take though its listener refused")
        val registered = ch.canSend(2)
        registered.onComplete(refuse)
        registered.dropListener(refuse)
        reader match
          case Some(r) =>
            // the reader the refused branches claimed takes a new index, and still gets a send
            eventually("the reader to wait again, and take a trySend")(ch.trySend(11))
            assertEquals(r.result, Success(Success(11)), "the reader got a refused branch's value, or nothing")
            // a reader spinning on its cell (before it parks): the refused branch held the cell
            // while it was asked, and leaves it void; the reader takes the next value
            seg(ch).setSpinBudget(Int.MaxValue >> 4)
            val spinning = party("the spinning reader")(ch.read())
            eventually("the reader to spin on its cell")(cellCodes(ch).contains('w'))
            assert(!ch.canSend(3).poll(refuse), "poll reported a take though its listener refused")
            eventually("the spinning reader to take a trySend")(ch.trySend(12))
            assertEquals(spinning.result, Success(Success(12)), "the spinning reader got a refused branch's value, or nothing")
            seg(ch).setSpinBudget(0)
          case None =>
            // before any read passes the refused branches' cells, every promised room is still there
            val room = if kind.sendCanBlock then kind.room else 100
            val taken = (1 to room).takeWhile(i => ch.trySend(10 + i)).size
            assertEquals(taken, room, s"after two refused send branches, $kind took $taken of $room sends that should not wait: ${dumpOf(ch)}")
            if kind.sendCanBlock then assert(!ch.trySend(0), s"$kind took a send beyond its room: ${dumpOf(ch)}")
            assertEquals(drain(ch), (11 to 10 + room).toList, "a refused branch's value was sent")
        assertLeft(ch, Nil, "after the refused send branches")
      }

  for kind <- SendKinds do
    test(s"$kind: a send branch on a closed channel fails with ChannelClosedException; after error(cause) or cancel() with that cause"):
      Async.blocking {
        for how <- Seq("close()", "error(cause)", "cancel()") do
          val ch = kind.make[Int]()
          how match
            case "close()"      => ch.close()
            case "error(cause)" => ch.error(Boom)
            case _              => ch.cancel()
          def checkCause(t: Try[Unit], via: String): Unit =
            val cause = causeOf(t)
            how match
              case "close()"      => assertEquals(cause, null, s"$how, $via")
              case "error(cause)" => assert(cause eq Boom, s"$how, $via: cause $cause")
              case _              => assert(cause.isInstanceOf[ChannelCancelledException], s"$how, $via: cause $cause")
          checkCause(Async.select(ch.canSend(1).handle(identity)), "select")
          checkCause(Async.selectNow(ch.canSend(2).handle(identity))(otherwise = Success(())), "selectNow")
          val rec = Support.Recorder[Try[Unit]]()
          ch.canSend(3).onComplete(rec)
          assertEquals(rec.calls, 1, s"$how: onComplete offered ${rec.values}")
          checkCause(rec.values.head, "onComplete")
          assert(ch.tryRead().exists(_.isFailure), s"$how: a value is readable after the failed send branches: ${dumpOf(ch)}")
          assertLeft(ch, Nil, how)
      }

  for kind <- SendKinds if kind.sendCanBlock do
    test(s"$kind: a send branch waiting at close() or error() is drained as a blocked send; cancel() of the channel completes it as sent and drops its value"):
      Async.blocking {
        for how <- Seq("close()", "error(cause)", "cancel()") do
          val ch = kind.make[Int]()
          val idle = BufferedChannel[Int](1)
          val before = fillUp(kind, ch)
          val sel = party(s"$how: the select")(Async.select(ch.canSend(100).handle(identity), idle.canRead.handle(_ => Failure(Boom))))
          sel.awaitParked()
          how match
            case "close()"      => ch.close()
            case "error(cause)" => ch.error(Boom)
            case _              => ch.cancel()
          if how == "cancel()" then
            assertEquals(sel.result, Success(Success(())), s"$how: a sender waiting at the cancel returns as if its value was taken")
            assert(causeOf(ch.tryRead().get).isInstanceOf[ChannelCancelledException], s"$how: ${dumpOf(ch)}")
          else
            assertEquals(seg(ch).parkedSenders, 1, s"$how ended the waiting send branch: ${dumpOf(ch)}")
            assert(!sel.future.isCompleted, s"$how completed the waiting send branch")
            val got = Vector.fill(before.size + 1)(ch.read())
            assertEquals(got, (before :+ 100).toVector.map(Success(_)), s"$how: the values sent before the close, and the waiting branch's")
            assertEquals(sel.result, Success(Success(())))
            val cause = causeOf(ch.read())
            if how == "close()" then assertEquals(cause, null) else assert(cause eq Boom, s"cause $cause")
          assertEquals(seg(idle).registeredListeners, 0)
          assertLeft(ch, Nil, how)
      }

  for kind <- SendKinds if kind.sendCanBlock do
    test(s"$kind: a select cancelled (its future's cancel(), or an interrupt) while its send branch waits sent nothing and left nothing"):
      Async.blocking {
        for how <- Seq("cancel()", "interrupt") do
          val ch = kind.make[Int]()
          val idle = BufferedChannel[Int](1)
          val before = fillUp(kind, ch)
          val sel = party(s"$how: the select")(Async.select(ch.canSend(100).handle(_ => "sent"), idle.canRead.handle(_ => "idle")))
          sel.awaitParked()
          if how == "cancel()" then
            sel.future.cancel()
            // decided by the cancel: a read that comes now does not take the value
            assertEquals(drain(ch), before, s"$how: a read after the cancel returned took the cancelled select's value")
          else
            sel.interrupt()
            sel.join()
            assertEquals(drain(ch), before, s"$how: ${dumpOf(ch)}")
          Support.assertCancelled(sel.result)
          sel.join()
          assertEquals(seg(idle).registeredListeners, 0, s"$how: the read branch is still registered")
          assertLeft(ch, Nil, how)
          assertRoom(kind, ch, how)
      }

  for kind <- SendKinds do
    test(s"$kind: nested selects: a race of two send branches inside a select, and a select in a handler, send each value once or not at all; their timers leave"):
      Async.blocking {
        val timers = Timers.pending
        val a = kind.make[Int]()
        val b = kind.make[Int]()
        val c = BufferedChannel[Int](1)
        val beforeA = fillUp(kind, a)
        val beforeB = fillUp(kind, b)
        def nested(using Async): String = Async.select(
          Async.race(a.canSend(1).map(_ => "a"), b.canSend(2).map(_ => "b")).handle(identity),
          c.canRead.handle(v => s"c ${v.get}"),
          Async.after(1.hour).handle(_ => "timer")
        )
        if kind.sendCanBlock then
          val sel = party("the nested select")(nested)
          sel.awaitParked()
          assertEquals(seg(a).parkedSenders + seg(b).parkedSenders, 2, s"${dumpOf(a)}\n${dumpOf(b)}")
          assertEquals(b.read(), Success(beforeB.headOption.getOrElse(2)), dumpOf(b)) // a reader, or room, on b only
          assertEquals(sel.result, Success("b"))
          assertLeft(a, beforeA, "a, whose branch lost")
          assertLeft(b, if beforeB.isEmpty then Nil else beforeB.drop(1) :+ 2, "b, whose branch won")
        else
          assertEquals(nested, "a")
          assertLeft(a, List(1), "a, whose branch won")
          assertLeft(b, Nil, "b, whose branch lost")
        assertEquals(seg(c).registeredListeners, 0, "the read branch of the nested select is still registered")
        // a handler forwards the value it read with a select of its own
        val out = kind.make[Int]()
        val beforeOut = fillUp(kind, out)
        c.send(5)
        val forwarder = party("the forwarding select")(Async.select(
          c.canRead.handle(v => Async.select(out.canSend(v.get * 10).handle(_ => "forwarded"), Async.after(1.hour).handle(_ => "late"))),
          Async.after(1.hour).handle(_ => "nothing to forward")
        ))
        if kind.sendCanBlock then
          eventually("the inner select's send branch to park")(seg(out).parkedSenders == 1)
          forwarder.awaitParked()
          assertEquals(out.read(), Success(beforeOut.headOption.getOrElse(50)))
        assertEquals(forwarder.result, Success("forwarded"))
        assertLeft(out, if beforeOut.isEmpty && kind.sendCanBlock then Nil else beforeOut.drop(1) :+ 50, "the forwarded value")
        assertNoTimerLeft(timers, "a losing timer of a nested select")
      }

  private def sendOrRead(ch: Channel[Int], v: Int)(using Async): String =
    Async.select(ch.canSend(v).handle(_ => "sent"), ch.canRead.handle(r => s"read ${r.get}"))

  for kind <- SendKinds do
    test(s"$kind: a select sending and reading on one channel never reads its own value; a party doing the opposite (read, send) pairs with it"):
      Async.blocking {
        // against a reader: the select sends (a rendezvous select waits for it)
        val ch = kind.make[Int]()
        val sel = party("the select against a reader")(sendOrRead(ch, 1))
        if kind == ChannelKind.Rendezvous then sel.awaitParked()
        assertEquals(ch.read(), Success(1))
        assertEquals(sel.result, Success("sent"))
        assertLeft(ch, Nil, "against a reader")
        // against a sender: a rendezvous select reads its value; others send at once, to the buffer
        val ch2 = kind.make[Int]()
        val sel2 = party("the select against a sender")(sendOrRead(ch2, 1))
        if kind == ChannelKind.Rendezvous then
          sel2.awaitParked()
          val sender = party("the sender")(ch2.send(2))
          assertEquals(sel2.result, Success("read 2"))
          assertEquals(sender.result, Success(()))
          assertLeft(ch2, Nil, "against a sender")
        else
          assertEquals(sel2.result, Success("sent"))
          val sender = party("the sender")(ch2.send(2))
          eventually("the sender to send or park")(sender.isParkedOrDone)
          assertEquals(drain(ch2), List(1, 2), dumpOf(ch2))
          assertEquals(sender.result, Success(()))
          assertLeft(ch2, Nil, "against a sender")
        // on a full channel the read branch takes the head, never its own send, which is not made
        if kind.sendCanBlock && kind.room > 0 then
          val full = kind.make[Int]()
          val before = fillUp(kind, full)
          assertEquals(sendOrRead(full, 1), s"read ${before.head}")
          assertLeft(full, before.drop(1), "a full channel")
      }

  for kind <- SendKinds do
    test(s"$kind: two selects each sending and reading on one channel: each value sent is read once, never by its own select (${100 * stress} rounds)"):
      Async.blocking {
        for round <- 1 to 100 * stress do
          val ch = kind.make[Int]()
          val x = Future(sendOrRead(ch, 1))
          val y = Future(sendOrRead(ch, 2))
          val (rx, ry) = (Support.resultWithin(x, s"round $round: x").get, Support.resultWithin(y, s"round $round: y").get)
          assert(rx != "read 1" && ry != "read 2", s"round $round: a select read its own value: x $rx, y $ry")
          if kind == ChannelKind.Rendezvous then
            assert((rx == "sent" && ry == "read 1") || (rx == "read 2" && ry == "sent"), s"round $round: x $rx, y $ry")
          val sent = List(1 -> rx, 2 -> ry).collect { case (v, "sent") => v }
          val readBySelects = List(rx, ry).collect { case s"read $v" => v.toInt }
          val left = drain(ch)
          assertEquals((readBySelects ++ left).sorted, sent, s"round $round: x $rx, y $ry, left $left: ${dumpOf(ch)}")
          assertLeft(ch, Nil, s"round $round")
      }

  for kind <- SendKinds do
    test(s"$kind: selectWithin: a send branch that times out sent nothing and leaves no timer; a send branch that wins cancels the select's timer"):
      Async.blocking {
        val timers = Timers.pending
        val ch = kind.make[Int]()
        val before = fillUp(kind, ch)
        if kind.sendCanBlock then
          assertEquals(Async.selectWithin(20.millis)(ch.canSend(100).handle(_ => "sent")), None)
          assertNoTimerLeft(timers, "the timer of a selectWithin")
          assertLeft(ch, before, "after the timeout")
          assertRoom(kind, ch, "after the timeout")
        // each send below goes to a reader waiting (rendezvous) or to the room, drained after it
        def withReader[T](body: => T): T =
          if kind != ChannelKind.Rendezvous then
            val r = body
            assertEquals(drain(ch).size, 1)
            r
          else
            val reader = party("the reader")(ch.read())
            reader.awaitParked()
            val r = body
            assert(reader.result.get.isSuccess)
            r
        assertEquals(withReader(Async.selectWithin(1.hour)(ch.canSend(7).handle(_ => "sent"))), Some("sent"))
        assertEquals(withReader(Async.select(ch.canSend(8).handle(_ => "sent"), Async.after(1.hour).handle(_ => "timer"))), "sent")
        assertNoTimerLeft(timers, "a select's lost timer")
        assertLeft(ch, Nil, "after the sends")
      }

class SelectOnVirtualThreads extends SelectBehaviour(Runtime.VirtualThreads)
class SelectOnPlatformThreads extends SelectBehaviour(Runtime.PlatformThreads)
