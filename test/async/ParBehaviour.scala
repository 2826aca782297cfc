package asyncpipe.async

import java.util.concurrent.{CancellationException, ConcurrentLinkedQueue, CountDownLatch, CyclicBarrier, TimeUnit}
import java.util.concurrent.atomic.{AtomicInteger, AtomicReference}
import scala.jdk.CollectionConverters.*
import scala.util.{Failure, Success}
import munit.Location
import Support.*
import ChannelBehaviour.awaitParkedIn

/** Bounded parallelism: `Future.awaitAll`, `par`, `parLimit` and `mapPar` (issue 40): values in
  * input order; the first failure cancels the rest and is rethrown, the same object, once every
  * started body has ended (no thread left behind); at most `n` bodies at once, counted, not timed;
  * a cancel of the caller reaches every body. doc/adr/0026.
  */
abstract class ParBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  /** Three bodies that park (in a sleep, a channel read and a semaphore acquire: the test holds the
    * semaphore's one permit) and a fourth that fails once the three are parked. Each parked body
    * records its thread and counts its clean-up.
    */
  private final class ParkedAndFailing:
    val failure = RuntimeException("the failing body")
    val ch = BufferedChannel[Int](1)
    val sem = Semaphore(1)
    assert(sem.tryAcquire(), "the test could not take the semaphore's permit")
    val threads = Vector.fill(3)(AtomicReference[Thread]())
    val cleanedUp = AtomicInteger(0)
    private val what = Vector("the sleeping body", "the reading body", "the acquiring body")

    private def parked(i: Int)(body: Async ?=> Int): Async ?=> Int =
      threads(i).set(Thread.currentThread())
      try body
      finally cleanedUp.incrementAndGet()

    val bodies: Vector[Async ?=> Int] = Vector(
      parked(0) { sleep(60_000); 0 },
      parked(1) { ch.read().get },
      parked(2) { sem.acquire(); 2 },
      { (_: Async) ?=>
        for i <- 0 until 3 do
          eventually(s"${what(i)} to start")(threads(i).get != null)
          awaitParkedIn(threads(i).get, what(i))
        throw failure
      }
    )

    /** Runs `call`, which must rethrow the failure, and checks that nothing was left behind. */
    def check(call: => Seq[Int])(using Location): Unit =
      val thrown = intercept[RuntimeException](call)
      assert(thrown eq failure, s"rethrew $thrown, not the failing body's own exception object")
      // at once, not eventually: the call returned only after the parked bodies had ended
      assertEquals(cleanedUp.get, 3, "the call returned before the parked bodies' clean-up")
      threads.zip(what).foreach((t, w) => assert(!t.get.isAlive, s"the thread of $w outlived the call"))
      // the cancelled acquire took nothing and left nothing registered: the permit released now stays free
      assertEquals(sem.waitingCount, 0, s"the cancelled acquire left its listener: $sem")
      sem.release()
      assertEquals(sem.available, 1, s"$sem")
      // the cancelled read took nothing and left no reader: a value sent now is there to read
      assert(ch.trySend(5))
      assertEquals(ch.tryRead(), Some(Success(5)))

  /** Bodies that count how many of them run at once, each held until the test lets it go; `check`
    * lets them go one at a time, and before each checks that exactly the expected number started
    * (no more than `n` at any time, and `n` while enough are left).
    */
  private final class Counted(n: Int, total: Int):
    private val running = AtomicInteger(0)
    private val started = AtomicInteger(0)
    val maxRunning = AtomicInteger(0)
    private val gate = java.util.concurrent.Semaphore(0)
    def body(i: Int)(using Async): Int =
      started.incrementAndGet()
      maxRunning.accumulateAndGet(running.incrementAndGet(), math.max)
      try
        if !gate.tryAcquire(Patience, TimeUnit.MILLISECONDS) then throw IllegalStateException(s"body $i was never let go")
        i
      finally running.decrementAndGet()
    val bodies: Vector[Async ?=> Int] = Vector.tabulate(total)(i => body(i))

    def check(call: Async ?=> Seq[Int])(using Location): Unit =
      Async.blocking:
        val f = Future(call)
        for released <- 0 until total do
          val expected = math.min(n + released, total)
          eventually(s"$expected bodies to have started")(started.get >= expected)
          assertEquals(started.get, expected, s"started bodies after $released were let go")
          eventually(s"the started bodies to run")(running.get == expected - released)
          assert(maxRunning.get <= n, s"${maxRunning.get} bodies ran at once, at most $n may")
          gate.release()
        assertEquals(f.value, 0 until total)
      assertEquals(maxRunning.get, math.min(n, total), "the most bodies running at once")

  // ---------------------------------------------------------------------------------------------
  // Future.awaitAll

  test("Future.awaitAll gives every value in the order of the futures, whichever completes first"):
    val gates = Vector.fill(3)(CountDownLatch(1))
    Async.blocking:
      val futures = Vector.tabulate(3)(i => Future { gates(i).await(); i * 10 })
      val all = Future(Future.awaitAll(futures))
      for i <- 2 to 0 by -1 do // the last completes first
        gates(i).countDown()
        Async.await(futures(i))
      assertEquals(all.value, Seq(0, 10, 20))
      assertEquals(Future.awaitAll(Seq.empty[Future[Int]]), Seq.empty)
      assertEquals(Future.awaitAll(Seq(Future.now(Success("done")))), Seq("done"))

  test("Future.awaitAll: the first failure cancels the others (a sleep, a read, a promise) and is rethrown once their threads have ended"):
    val failure = RuntimeException("the failing future")
    val ch = SyncChannel[Int]()
    val promise = Promise[Int]()
    val threads = Vector.fill(2)(AtomicReference[Thread]())
    val cleanedUp = AtomicInteger(0)
    // The sleeping future's clean-up waits until the caller is seen waiting for its end (or, wrongly,
    // returned): then awaitAll cannot return before the clean-up, however the threads are scheduled.
    val inCleanUp = CountDownLatch(1)
    val returned = java.util.concurrent.atomic.AtomicBoolean(false)
    val returnedEarly = AtomicReference[Option[Boolean]](None)
    val caller = Thread.currentThread()
    def awaitingEnds: Boolean = caller.getState == Thread.State.WAITING && caller.getStackTrace.exists(_.getMethodName == "awaitEnd")
    val watcher = Thread.ofPlatform().daemon().start: () =>
      if inCleanUp.await(Patience, TimeUnit.MILLISECONDS) then
        val deadline = System.nanoTime() + Patience * 1_000_000
        while !returned.get && !awaitingEnds && System.nanoTime() < deadline do pause()
        returnedEarly.set(Some(returned.get))
    Async.blocking:
      val sleeping = Future:
        threads(0).set(Thread.currentThread())
        try { sleep(60_000); 0 }
        finally
          inCleanUp.countDown()
          while watcher.isAlive do
            try watcher.join()
            catch case _: InterruptedException => () // the cancel's interrupt
          cleanedUp.incrementAndGet()
      val reading = Future:
        threads(1).set(Thread.currentThread())
        try ch.read().get
        finally cleanedUp.incrementAndGet()
      val failing = Future[Int]:
        threads.foreach(t => eventually("a future to start")(t.get != null))
        threads.foreach(t => awaitParkedIn(t.get, "a parked future"))
        throw failure
      val thrown = intercept[RuntimeException](Future.awaitAll(Seq(sleeping, reading, promise.future, failing)))
      returned.set(true)
      assert(thrown eq failure, s"awaitAll rethrew $thrown")
      join(watcher, "the watcher")
      assertEquals(returnedEarly.get, Some(false), "awaitAll returned while a cancelled future was in its clean-up")
      assertEquals(cleanedUp.get, 2, "awaitAll rethrew before the cancelled futures' clean-up")
      threads.foreach(t => assert(!t.get.isAlive, "a cancelled future's thread outlived awaitAll"))
      assertCancelledNow(sleeping)
      assertCancelledNow(reading)
      assertCancelledNow(promise.future)
      assert(!ch.trySend(1), "the cancelled read is still waiting in the channel")

  test("Future.awaitAll of a future that failed already rethrows its failure and cancels the pending ones"):
    val failure = IllegalStateException("failed before")
    val pending = Promise[Int]()
    Async.blocking:
      val thrown = intercept[IllegalStateException](Future.awaitAll(Seq(pending.future, Future.now(Failure(failure)))))
      assert(thrown eq failure)
      assertCancelledNow(pending.future)

  test("a cancel of the caller ends Future.awaitAll with CancellationException, leaving the futures pending and unlistened"):
    val pending = Promise[Int]()
    val caller = AtomicReference[Thread]()
    Async.blocking:
      val f = Future:
        caller.set(Thread.currentThread())
        Future.awaitAll(Seq(pending.future, Future.now(Success(1))))
      eventually("the caller to start")(caller.get != null)
      awaitParkedIn(caller.get, "the caller of awaitAll")
      f.cancel()
      join(caller.get, "the cancelled caller")
      assertCancelledNow(f)
    assert(!pending.isCompleted, "the caller's cancel cancelled a future it awaited")
    assertEquals(pending.listenerCount, 0, "the cancelled awaitAll left its listener on a pending future")

  // ---------------------------------------------------------------------------------------------
  // par

  test("par runs every body at once and gives their values in argument order; so does par of a sequence"):
    Async.blocking:
      val barrier = CyclicBarrier(3)
      def meet(i: Int): Int = { barrier.await(Patience, TimeUnit.MILLISECONDS); i * 10 }
      assertEquals(par(meet(0), meet(1), meet(2)), Seq(0, 10, 20))
      val bodies: Seq[Async ?=> Int] = Seq(meet(3), meet(4), meet(5))
      assertEquals(par(bodies), Seq(30, 40, 50))
      assertEquals(par[Int](), Seq.empty)
      assertEquals(par(Seq.empty[Async ?=> Int]), Seq.empty)

  test("each body of par runs on a thread of its own, with an Async of its own whose scope is inside the caller's"):
    Async.blocking:
      val outer = Async.current
      val here = Thread.currentThread()
      val seen = par(Async.current, Async.current)
      seen.foreach(a => assert(a ne outer, "a body ran with the caller's Async"))
      assert(seen(0) ne seen(1), "two bodies shared an Async")
      val threads = par(Thread.currentThread(), Thread.currentThread())
      assert(!threads.contains(here), "a body ran on the caller's thread")
      // the bodies' futures are children of a group inside the caller's scope, gone when par returns
      assertEquals(outer.group.size, 0, "par left a member in the caller's scope")

  test("a sequence of bodies typed Seq[Async ?=> T], made by a map, gives each body an Async of its own"):
    Async.blocking:
      val outer = Async.current
      val bodies: Seq[Async ?=> Async] = (1 to 3).map(_ => Async.current)
      val seen = par(bodies)
      assert(seen.forall(_ ne outer), "a body of the sequence ran with the caller's Async")
      assertEquals(seen.distinct.size, 3, "bodies of the sequence shared an Async")
      val limited: Seq[Async ?=> Async] = (1 to 3).map(_ => Async.current)
      assert(parLimit(2)(limited).forall(_ ne outer), "a body of parLimit ran with the caller's Async")

  test("par: a failing body cancels the bodies parked in a sleep, a channel read and a semaphore acquire; the failure is rethrown once their threads have ended"):
    val p = ParkedAndFailing()
    Async.blocking(p.check(par(p.bodies*)))

  test("par of a sequence: the same, through the sequence form"):
    val p = ParkedAndFailing()
    Async.blocking(p.check(par(p.bodies)))

  test("a cancel of the caller of par cancels every body and ends only after them"):
    val started = CountDownLatch(2)
    val cleanedUp = AtomicInteger(0)
    val bodyThreads = ConcurrentLinkedQueue[Thread]()
    val caller = AtomicReference[Thread]()
    def parked()(using Async): Int =
      bodyThreads.add(Thread.currentThread())
      started.countDown()
      try { sleep(60_000); 0 }
      finally cleanedUp.incrementAndGet()
    Async.blocking:
      val f = Future:
        caller.set(Thread.currentThread())
        par(parked(), parked())
      awaitLatch(started, "the bodies to start")
      f.cancel()
      join(caller.get, "the cancelled caller")
      assertCancelledNow(f)
      assertEquals(cleanedUp.get, 2, "the caller ended before its bodies' clean-up")
      bodyThreads.asScala.foreach(t => assert(!t.isAlive, "a body's thread outlived its cancelled caller"))

  // ---------------------------------------------------------------------------------------------
  // parLimit

  test("parLimit(3) of 10 bodies: never more than 3 run at once, and 3 do while enough are left"):
    val c = Counted(3, 10)
    c.check(parLimit(3)(c.bodies))

  test("parLimit(n) with n above the number of bodies runs them all at once"):
    val c = Counted(8, 4)
    c.check(parLimit(8)(c.bodies))

  test("parLimit(1) runs the bodies one after another, in input order"):
    val order = ConcurrentLinkedQueue[Int]()
    Async.blocking:
      val bodies: Seq[Async ?=> Int] = (0 until 6).map(i => (_: Async) ?=> { order.add(i); i })
      assertEquals(parLimit(1)(bodies), 0 until 6)
    assertEquals(order.asScala.toList, (0 until 6).toList)

  test("parLimit(4): a failing body cancels the parked ones; the failure is rethrown once their threads have ended"):
    val p = ParkedAndFailing()
    Async.blocking(p.check(parLimit(4)(p.bodies)))

  // ---------------------------------------------------------------------------------------------
  // mapPar

  test("mapPar gives the results in input order, though the applications end in reverse order"):
    val ended = Vector.fill(5)(CountDownLatch(1))
    Async.blocking:
      val results = mapPar(5)(0 until 5): i =>
        if i < 4 then awaitLatch(ended(i + 1), s"application ${i + 1} to end") // 4 ends first, then 3, ...
        ended(i).countDown()
        s"item $i"
      assertEquals(results, (0 until 5).map(i => s"item $i"))

  test("mapPar(2) of 40 items: results in input order, every item applied once"):
    val applied = ConcurrentLinkedQueue[Int]()
    Async.blocking:
      val results = mapPar(2)((0 until 40).toList) { i =>
        applied.add(i)
        if i % 3 == 0 then Future(i).value // some applications wait, so the two workers interleave
        i * i
      }
      assertEquals(results, (0 until 40).map(i => i * i))
    assertEquals(applied.asScala.toList.sorted, (0 until 40).toList)

  test("mapPar(3) of 10 items: never more than 3 applications run at once"):
    val c = Counted(3, 10)
    c.check(mapPar(3)(0 until 10)(i => c.body(i)))

  test("each application of mapPar runs with an Async of its own, not the caller's, on a thread other than the caller's"):
    Async.blocking:
      val outer = Async.current
      val here = Thread.currentThread()
      val seen = mapPar(2)(Seq(1, 2, 3))(_ => (Async.current, Thread.currentThread()))
      seen.foreach((a, t) => assert((a ne outer) && (t ne here), "an application ran with the caller's Async or thread"))
      assertEquals(seen.map(_._1).distinct.size, 3, "two applications shared an Async")

  test("a future an application of mapPar starts ends with that application, before the next one starts"):
    val child = AtomicReference[Thread]()
    val childCleanedUp = AtomicInteger(0)
    Async.blocking:
      val seen = mapPar(1)(Seq(0, 1)):
        case 0 =>
          Future:
            child.set(Thread.currentThread())
            try sleep(60_000)
            finally childCleanedUp.incrementAndGet()
          eventually("the child to start")(child.get != null)
          -1
        case _ => childCleanedUp.get // the worker runs this right after item 0
      assertEquals(seen, Seq(-1, 1), "the child of item 0 was still running when item 1 started")
      assert(!child.get.isAlive)

  test("mapPar(4): a failing application cancels the parked ones; the failure is rethrown once their threads have ended"):
    val p = ParkedAndFailing()
    Async.blocking(p.check(mapPar(4)(0 until 4)(i => p.bodies(i))))

  test("mapPar(2) of 10 items: after the first failure no further item starts, and the running one is cancelled and ended"):
    val failure = RuntimeException("item 1 failed")
    val started = ConcurrentLinkedQueue[Int]()
    val first = AtomicReference[Thread]()
    val cleanedUp = AtomicInteger(0)
    Async.blocking:
      val thrown = intercept[RuntimeException]:
        mapPar(2)(0 until 10): i =>
          started.add(i)
          i match
            case 0 =>
              first.set(Thread.currentThread())
              try { sleep(60_000); 0 }
              finally cleanedUp.incrementAndGet()
            case 1 =>
              eventually("item 0 to start")(first.get != null)
              awaitParkedIn(first.get, "item 0")
              throw failure
            case other => other
      assert(thrown eq failure, s"mapPar rethrew $thrown")
      assertEquals(started.asScala.toList.sorted, List(0, 1), "items started after the failure")
      assertEquals(cleanedUp.get, 1, "mapPar rethrew before item 0's clean-up")
      assert(!first.get.isAlive, "item 0's thread outlived mapPar")

  test("a cancel of the caller of mapPar cancels the running applications, starts no other, and ends only after them"):
    val started = ConcurrentLinkedQueue[Thread]()
    val cleanedUp = AtomicInteger(0)
    val caller = AtomicReference[Thread]()
    Async.blocking:
      val f = Future:
        caller.set(Thread.currentThread())
        mapPar(2)(0 until 10): _ =>
          started.add(Thread.currentThread())
          try { sleep(60_000); 0 }
          finally cleanedUp.incrementAndGet()
      eventually("two applications to start")(started.size == 2)
      started.asScala.foreach(t => awaitParkedIn(t, "an application"))
      f.cancel()
      join(caller.get, "the cancelled caller")
      assertCancelledNow(f)
      assertEquals(started.size, 2, "an application started after the cancel")
      assertEquals(cleanedUp.get, 2, "the caller ended before the applications' clean-up")
      started.asScala.foreach(t => assert(!t.isAlive, "an application's thread outlived its cancelled caller"))

  test("mapPar and parLimit refuse n <= 0 with an IllegalArgumentException naming n, even with no items"):
    Async.blocking:
      val e = intercept[IllegalArgumentException](mapPar(0)(Seq(1, 2))(identity))
      assert(e.getMessage.contains("n was 0, must be > 0"), e.getMessage)
      val e2 = intercept[IllegalArgumentException](mapPar(-3)(Seq.empty[Int])(identity))
      assert(e2.getMessage.contains("n was -3"), e2.getMessage)
      val e3 = intercept[IllegalArgumentException](parLimit(-1)(Seq.empty[Async ?=> Int]))
      assert(e3.getMessage.contains("n was -1"), e3.getMessage)

  test("mapPar of no items gives no results and starts nothing"):
    Async.blocking:
      assertEquals(mapPar(3)(Seq.empty[Int])(i => throw IllegalStateException(s"applied to $i")), Seq.empty)

  test("a failure that is a CancellationException of a body's own is the first failure too"):
    val never = Promise[Int]()
    never.cancel()
    Async.blocking:
      intercept[CancellationException](mapPar(2)(Seq(1, 2))(_ => never.future.value))
      assert(!Async.current.isCancelled, "the body's CancellationException cancelled the caller's scope")

class ParOnVirtualThreads extends ParBehaviour(Runtime.VirtualThreads)
class ParOnPlatformThreads extends ParBehaviour(Runtime.PlatformThreads)
