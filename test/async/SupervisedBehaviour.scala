package asyncpipe.async

import java.util.concurrent.{CancellationException, CountDownLatch, CyclicBarrier}
import java.util.concurrent.atomic.{AtomicInteger, AtomicReference}
import java.util.concurrent.locks.LockSupport
import scala.util.{Failure, Success, Try}
import munit.Location
import Support.*

/** Supervised scopes (issue 40): `Async.supervised`, daemon children (`Future { }`), user
  * children (`Future.user { }`) and the one escape, `Future.detached`.
  *
  * Order is asserted with latches, the `Steps` counter and counters set in `finally` blocks:
  * every child ends with a short clean-up that ignores interrupts before it counts its end, so a
  * scope that returned before its children ended would find the count short.
  */
abstract class SupervisedBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  // The simultaneous-failure loop grows with ASYNCPIPE_STRESS: so does its bound.
  override def watchdog = scala.concurrent.duration.Duration(30L * SupervisedBehaviour.Factor, java.util.concurrent.TimeUnit.SECONDS)
  override def munitTimeout = watchdog + scala.concurrent.duration.Duration(10, java.util.concurrent.TimeUnit.SECONDS)

  /** A child (or a body) of a test: its thread, when it started, what ended it. */
  private final class Child(val name: String):
    val started = CountDownLatch(1)
    val thread = AtomicReference[Thread]()
    val thrown = AtomicReference[Throwable]()
    @volatile var future: Future[Any] = null
    def awaitParked()(using Location): Unit =
      awaitLatch(started, s"$name to start")
      awaitBlocked(thread.get)

  /** Widens the window in which a scope that does not await its children would be caught: a
    * pause of `millis` that an interrupt does not cut short (the flag is restored after). Not
    * synchronisation: a correct scope passes whatever the pause.
    */
  private def linger(millis: Long = 20): Unit =
    val deadline = System.nanoTime() + millis * 1_000_000
    var interrupted = false
    while System.nanoTime() < deadline do
      LockSupport.parkNanos(deadline - System.nanoTime())
      if Thread.interrupted() then interrupted = true
    if interrupted then Thread.currentThread().interrupt()

  /** The body of a child that parks in `park`, recording how it ended; its `finally` lingers,
    * then counts the end in `ended`.
    */
  private def parking(c: Child, ended: AtomicInteger, lingering: Long = 20)(park: Async ?=> Any)(using Async): Any =
    c.thread.set(Thread.currentThread())
    c.started.countDown()
    try park
    catch
      case e: Throwable =>
        c.thrown.set(e)
        throw e
    finally
      linger(lingering)
      ended.incrementAndGet()

  /** A daemon child of the supervised scope that parks in `park`. */
  private def daemon(name: String, ended: AtomicInteger, lingering: Long = 20)(park: Async ?=> Any)(using Supervised): Child =
    val c = Child(name)
    c.future = Future(parking(c, ended, lingering)(park))
    c

  /** A user child of the supervised scope that parks in `park`. */
  private def user(name: String, ended: AtomicInteger)(park: Async ?=> Any)(using Supervised): Child =
    val c = Child(name)
    c.future = Future.user(parking(c, ended)(park))
    c

  /** Checks that `c` was cancelled while parked: its future is cancelled, its body saw the
    * cancel (a `CancellationException`, or an `InterruptedException` from a JDK call), and its
    * thread ends.
    */
  private def assertCancelledWhileParked(c: Child)(using Location): Unit =
    assertCancelledNow(c.future)
    val e = c.thrown.get
    assert(e.isInstanceOf[CancellationException] || e.isInstanceOf[InterruptedException],
      s"${c.name}: its body ended with $e, not with the cancel")
    join(c.thread.get, c.name)

  private def noneSuppressed(e: Throwable)(using Location): Unit =
    assertEquals(e.getSuppressed.toList, Nil, s"$e carries suppressed exceptions")

  // ---------------------------------------------------------------------------------------------
  // Values, daemons and user children

  test("Async.supervised returns the body's value and rethrows the body's own exception"):
    Async.blocking:
      assertEquals(Async.supervised(1 + 1), 2)
      val e = IllegalStateException("from the body")
      val thrown = intercept[IllegalStateException](Async.supervised[Int](throw e))
      assert(thrown eq e, s"Async.supervised rethrew $thrown, not the body's exception object")
      noneSuppressed(thrown)

  test("the Scaladoc examples of Async.supervised, Future.user and Future.detached run as described"):
    val audits = AtomicInteger(0)
    val uploads = AtomicInteger(0)
    def heartbeat()(using Async): Unit = while true do sleep(1000) // until the scope cancels it
    def writeAudit(): Unit = audits.incrementAndGet()
    def fetch(s: String): String = s.toUpperCase
    def upload(file: String): Unit = uploads.incrementAndGet()
    def flushForever(log: String)(using Async): Unit = while true do sleep(1000)
    val file = "f"
    val log = "l"
    Async.blocking:
      val page = Async.supervised:
        Future(heartbeat())                    // daemon: cancelled when the scope ends
        val audit = Future.user(writeAudit())  // user: awaited before the scope returns
        val a = Future(fetch("a"))             // if this fails, everything is cancelled
        val b = Future(fetch("b"))
        a.value ++ b.value                     // and the scope throws a's failure
      assertEquals(page, "AB")
      assertEquals(audits.get, 1)
      val queued = Async.supervised:
        Future.user(upload(file)) // the scope returns after the upload, or throws its failure
        "queued"
      assertEquals(queued, "queued")
      assertEquals(uploads.get, 1)
      val flusher = Future.detached(flushForever(log)) // keeps running after this scope ends
      assert(!flusher.isCompleted)
      flusher.cancel()                                // its holder's job
      assertCancelled(flusher.result)

  test("the body holds a Supervised capability, runs on a thread of the runtime, and Future { } in it is a daemon child"):
    Async.blocking:
      val caller = Thread.currentThread()
      Async.supervised:
        assert(Async.current.isInstanceOf[Supervised])
        assert(Async.current.runtime eq runtime)
        assert(Thread.currentThread() ne caller, "the body ran on the calling thread")
        assertEquals(Thread.currentThread().isVirtual, isVirtual(runtime))
        assertEquals(Async.current.group.size, 1, "the body's own future is the one member of the scope")
        val f = Future(1)
        assertEquals(f.value, 1)

  test("a daemon child still running when the body returns is cancelled and awaited; the value is the body's"):
    val ended = AtomicInteger(0)
    val child = AtomicReference[Child]()
    Async.blocking:
      val r = Async.supervised:
        val c = daemon("the daemon", ended)(Promise[Int]().future.value)
        child.set(c)
        c.awaitParked()
        "body"
      assertEquals(r, "body")
      assertEquals(ended.get, 1, "the scope returned before its daemon child's body ended")
      assertCancelledWhileParked(child.get)
      assert(!Thread.currentThread().isInterrupted, "the scope's end left the caller interrupted")

  test("the scope awaits a user child after the body returns, then cancels the daemons, and returns the body's value"):
    val steps = Steps()
    val release = CountDownLatch(1)
    val bodyReturning = CountDownLatch(1)
    val ended = AtomicInteger(0)
    val userChild = AtomicReference[Future[Int]]()
    val daemonChild = AtomicReference[Child]()
    Async.blocking:
      val outer = Future:
        val r = Async.supervised:
          val d = daemon("the daemon", ended)(Promise[Int]().future.value)
          daemonChild.set(d)
          userChild.set(Future.user:
            release.await() // interrupted if the scope cancelled its user child
            steps.expect(2)
            7)
          d.awaitParked()
          steps.expect(1)
          bodyReturning.countDown()
          "body"
        steps.expect(3)
        r
      awaitLatch(bodyReturning, "the body to return")
      assert(!outer.isCompleted, "the scope returned while its user child was still running")
      release.countDown()
      assertEquals(outer.value, "body")
      steps.finish(4)
    assertEquals(userChild.get.poll(), Some(Success(7)))
    assertEquals(ended.get, 1)
    assertCancelledWhileParked(daemonChild.get)

  test("a user child that the body cancels is not a failure"):
    Async.blocking:
      val r = Async.supervised:
        val started = CountDownLatch(1)
        val u = Future.user:
          started.countDown()
          Promise[Int]().future.value
        awaitLatch(started, "the user child to start")
        u.cancel()
        assertCancelled(u.result)
        "body"
      assertEquals(r, "body")

  test("Future.user outside a supervised scope does not compile"):
    val errors = compileErrors("Async.blocking(Future.user(1))")
    assert(errors.contains("Future.user starts a user child of a supervised scope"), errors)

  test("Future.user in a scope nested in the supervised one throws IllegalStateException"):
    Async.blocking:
      Async.supervised:
        val inGroup = intercept[IllegalStateException](Async.group(Future.user(1)))
        assert(inGroup.getMessage.contains("Async.supervised body itself"), inGroup.getMessage)
        val inChild = Future(Try(Future.user(1))).value
        assert(inChild.failed.toOption.exists(_.isInstanceOf[IllegalStateException]), s"Future.user in a child's body gave $inChild")
        assertEquals(Future.user(2).value, 2)

  test("a future in a child's body or in an inner Async.group is not supervised"):
    val e = RuntimeException("unsupervised")
    Async.blocking:
      val r = Async.supervised:
        val inGroup = Async.group(Future[Int](throw e).result)
        val inChild = Future(Future[Int](throw e).result).value
        assert(failureOf[RuntimeException](inGroup) eq e)
        assert(failureOf[RuntimeException](inChild) eq e)
        "body"
      assertEquals(r, "body")

  // ---------------------------------------------------------------------------------------------
  // Failures

  test("a failing child cancels siblings parked in a channel read, a channel send, sleep, a future's await and Thread.sleep, and the body; the scope rethrows it once all have ended"):
    val e = IllegalStateException("child failed")
    val ended = AtomicInteger(0)
    val children = AtomicReference[Seq[Child]]()
    val body = Child("the body")
    Async.blocking:
      val thrown = intercept[IllegalStateException]:
        Async.supervised:
          val empty = SyncChannel[Int]()
          val full = BufferedChannel[Int](1)
          full.send(0)
          val cs = Seq(
            daemon("a channel read", ended)(empty.read()),
            user("a channel send", ended)(full.send(1)),
            daemon("sleep", ended)(sleep(60_000)),
            user("a future's await", ended)(Promise[Int]().future.value),
            daemon("Thread.sleep", ended)(Thread.sleep(60_000))
          )
          children.set(cs)
          Future[Unit]:
            cs.foreach(_.awaitParked())
            body.awaitParked()
            throw e
          parking(body, ended)(Promise[Int]().future.value)
      assert(thrown eq e, s"the scope threw $thrown, not the child's failure")
      noneSuppressed(thrown)
      assertEquals(ended.get, 6, "the scope rethrew before every sibling and the body had ended")
    children.get.foreach(assertCancelledWhileParked)
    assert(body.thrown.get.isInstanceOf[CancellationException], s"the body ended with ${body.thrown.get}")
    join(body.thread.get, "the body")

  test("the body's failure cancels its daemon and user children, awaits them, and is rethrown"):
    val e = ArithmeticException("body failed")
    val ended = AtomicInteger(0)
    val children = AtomicReference[Seq[Child]]()
    Async.blocking:
      val thrown = intercept[ArithmeticException]:
        Async.supervised:
          val cs = Seq(
            daemon("a daemon", ended)(Promise[Int]().future.value),
            user("a user child", ended)(sleep(60_000))
          )
          children.set(cs)
          cs.foreach(_.awaitParked())
          throw e
      assert(thrown eq e)
      noneSuppressed(thrown)
      assertEquals(ended.get, 2, "the scope rethrew before its children had ended")
    children.get.foreach(assertCancelledWhileParked)

  test("a user child that fails while the body runs cancels the body"):
    val e = RuntimeException("user child failed")
    val ended = AtomicInteger(0)
    val body = Child("the body")
    Async.blocking:
      val thrown = intercept[RuntimeException]:
        Async.supervised:
          Future.user[Unit]:
            body.awaitParked()
            throw e
          parking(body, ended)(SyncChannel[Int]().read())
      assert(thrown eq e)
      assertEquals(ended.get, 1)
    assert(body.thrown.get.isInstanceOf[CancellationException], s"the body ended with ${body.thrown.get}")

  test("a user child that fails after the body returned fails the scope and cancels the daemons"):
    val e = RuntimeException("late user failure")
    val ended = AtomicInteger(0)
    val d = AtomicReference[Child]()
    val bodyThread = AtomicReference[Thread]()
    val bodyGone = CountDownLatch(1)
    Async.blocking:
      val thrown = intercept[RuntimeException]:
        Async.supervised:
          bodyThread.set(Thread.currentThread())
          // opens `bodyGone` once the body's thread has ended: after the body returned
          Thread.ofPlatform().daemon().start(() => { bodyThread.get.join(); bodyGone.countDown() })
          d.set(daemon("the daemon", ended)(Promise[Int]().future.value))
          Future.user[Unit]:
            bodyGone.await()
            throw e
          d.get.awaitParked()
          "body"
      assert(thrown eq e)
      assertEquals(ended.get, 1)
    assertCancelledWhileParked(d.get)

  test("the failing child's future holds its failure; awaiting it elsewhere does not change what the scope throws"):
    val e = RuntimeException("seen twice")
    Async.blocking:
      val thrown = intercept[RuntimeException]:
        Async.supervised:
          val failing = Future[Int](throw e)
          // a sibling that rethrows the same object while being cancelled: never suppressed on itself
          Future(failing.value)
          failing.value
      assert(thrown eq e)
      noneSuppressed(thrown)

  test("a fatal error in a user child fails the scope instead of leaving it waiting"):
    val e = StackOverflowError("a test's stack overflow")
    Async.blocking:
      val thrown = // not `intercept`, which lets a fatal error through
        try
          Async.supervised:
            Future.user[Unit](throw e)
            "body"
          null
        catch case t: StackOverflowError => t
      assert(thrown eq e, s"the scope threw $thrown")

  test("a break out of the body reaches a boundary outside the scope, after the children were cancelled"):
    val ended = AtomicInteger(0)
    val d = AtomicReference[Child]()
    Async.blocking:
      val r = scala.util.boundary:
        Async.supervised:
          d.set(daemon("a daemon", ended)(Promise[Int]().future.value))
          d.get.awaitParked()
          scala.util.boundary.break("broke out")
          "body"
      assertEquals(r, "broke out")
      assertEquals(ended.get, 1)
    assertCancelledWhileParked(d.get)

  test("a cancel of the enclosing future cancels the supervised scope and everything in it"):
    val ended = AtomicInteger(0)
    val children = AtomicReference[Seq[Child]]()
    val seen = AtomicReference[Try[String]]()
    val body = Child("the body")
    val outerThread = AtomicReference[Thread]()
    Async.blocking:
      val outer = Future:
        outerThread.set(Thread.currentThread())
        seen.set(Try(Async.supervised {
          children.set(Seq(
            daemon("a daemon", ended)(Promise[Int]().future.value),
            user("a user child", ended)(SyncChannel[Int]().read())
          ))
          parking(body, ended)(sleep(60_000))
          "body"
        }))
      eventually("the children to start")(children.get != null)
      children.get.foreach(_.awaitParked())
      body.awaitParked()
      outer.cancel()
      assertCancelled(resultWithin(outer, "the cancelled outer future"))
      join(outerThread.get, "the cancelled outer future") // its body returns once the scope has ended
      assertEquals(ended.get, 3, "the cancelled scope returned before its children had ended")
    children.get.foreach(assertCancelledWhileParked)
    failureOf[CancellationException](seen.get)

  // ---------------------------------------------------------------------------------------------
  // Nested scopes

  test("nested supervised scopes: an inner failure cancels the inner siblings, then the outer ones, and is rethrown at both levels"):
    val e = IllegalArgumentException("inner child failed")
    val ended = AtomicInteger(0)
    val inner = AtomicReference[Child]()
    val outer = AtomicReference[Child]()
    val innerThrew = AtomicReference[Throwable]()
    Async.blocking:
      val thrown = intercept[IllegalArgumentException]:
        Async.supervised:
          outer.set(user("an outer user child", ended)(Promise[Int]().future.value))
          outer.get.awaitParked()
          try
            Async.supervised:
              inner.set(daemon("an inner daemon", ended)(SyncChannel[Int]().read()))
              inner.get.awaitParked()
              Future[Unit](throw e)
              Promise[Int]().future.value
          catch
            case t: Throwable =>
              innerThrew.set(t)
              assertEquals(ended.get, 1, "the inner scope rethrew before its child ended")
              throw t
      assert(thrown eq e)
      assert(innerThrew.get eq e)
      noneSuppressed(thrown)
      assertEquals(ended.get, 2)
    assertCancelledWhileParked(inner.get)
    assertCancelledWhileParked(outer.get)

  test("nested supervised scopes: an inner failure that the outer body catches leaves the outer scope running"):
    val e = RuntimeException("inner")
    val gate = CountDownLatch(1)
    Async.blocking:
      val r = Async.supervised:
        val sibling = Future.user:
          gate.await()
          1
        val caught = Try(Async.supervised(Future[Int](throw e).value))
        assert(failureOf[RuntimeException](caught) eq e)
        assert(!sibling.isCompleted, "an inner scope's failure reached a child of the outer scope")
        gate.countDown()
        sibling.value + 1
      assertEquals(r, 2)

  test("nested supervised scopes: an outer failure cancels the inner scope's children; the inner cancellation is not suppressed"):
    val e = RuntimeException("outer child failed")
    val ended = AtomicInteger(0)
    val inner = AtomicReference[Seq[Child]]()
    Async.blocking:
      val thrown = intercept[RuntimeException]:
        Async.supervised:
          val innerParked = CountDownLatch(1)
          Future[Unit]:
            awaitLatch(innerParked, "the inner children to park")
            throw e
          Async.supervised:
            inner.set(Seq(
              daemon("an inner daemon", ended)(sleep(60_000)),
              user("an inner user child", ended)(Promise[Int]().future.value)
            ))
            inner.get.foreach(_.awaitParked())
            innerParked.countDown()
            Promise[Int]().future.value
      assert(thrown eq e)
      noneSuppressed(thrown)
      assertEquals(ended.get, 2)
    inner.get.foreach(assertCancelledWhileParked)

  // ---------------------------------------------------------------------------------------------
  // Two failures at once

  test(s"the first of two simultaneous failures wins; the other is suppressed if it came before its cancel (${SupervisedBehaviour.Rounds} rounds)"):
    var bothFailed = 0
    val before = liveThreadCount()
    for round <- 1 to SupervisedBehaviour.Rounds do
      val e1 = RuntimeException(s"first, round $round")
      val e2 = RuntimeException(s"second, round $round")
      val barrier = CyclicBarrier(2)
      val ended = AtomicInteger(0)
      val fs = AtomicReference[(Future[Unit], Future[Unit])]()
      val parked = AtomicReference[Child]()
      val thrown = intercept[RuntimeException]:
        Async.blocking:
          Async.supervised:
            parked.set(daemon("a parked sibling", ended, lingering = 1)(SyncChannel[Int]().read()))
            parked.get.awaitParked() // else the cancel may come before it starts: it would never run
            val f1 = Future[Unit] { barrier.await(); throw e1 }
            val f2 = Future.user[Unit] { barrier.await(); throw e2 }
            fs.set((f1, f2))
            Promise[Int]().future.value
      val (f1, f2) = fs.get
      val (other, otherFuture) =
        if thrown eq e1 then (e2, f2)
        else if thrown eq e2 then (e1, f1)
        else fail(s"round $round: the scope threw $thrown, not one of the two failures", thrown)
      otherFuture.poll() match
        case Some(Failure(x)) if x eq other =>
          // it failed before the supervision's cancel reached it: its failure is kept
          bothFailed += 1
          assertEquals(thrown.getSuppressed.toList, List(other), s"round $round: the second failure is not suppressed on the first")
        case Some(Failure(_: CancellationException)) =>
          noneSuppressed(thrown)
        case r => fail(s"round $round: the other failing child ended with $r")
      assertEquals(ended.get, 1, s"round $round: the scope threw before its parked sibling ended")
      if barrier.isBroken then fail(s"round $round: the barrier broke")
    eventually(s"the threads of ${SupervisedBehaviour.Rounds} rounds to end (${before} live before)")(liveThreadCount() <= before + 8)
    if sys.env.contains("ASYNCPIPE_STATS") then
      println(s"$runtime: both children failed before a cancel in $bothFailed of ${SupervisedBehaviour.Rounds} rounds")

  // ---------------------------------------------------------------------------------------------
  // The escape: Future.detached

  test("Future.detached outlives the scope that started it, until it completes or its holder cancels it"):
    val release = CountDownLatch(1)
    val thread = AtomicReference[Thread]()
    val (done, parked) = Async.blocking:
      Async.supervised:
        val done = Future.detached:
          release.await()
          5
        val parked = Future.detached:
          thread.set(Thread.currentThread())
          Promise[Int]().future.value
        (done, parked)
    assert(!done.isCompleted, "a detached future ended with its scope")
    assert(!parked.isCompleted, "a detached future ended with its scope")
    release.countDown()
    assertEquals(resultWithin(done, "the detached future"), Success(5))
    eventually("the parked detached future to start")(thread.get != null)
    awaitBlocked(thread.get)
    parked.cancel()
    join(thread.get, "the cancelled detached future")
    assertCancelledNow(parked)

  test("Future.detached: its failure does not fail the supervised scope; its own children end with it"):
    val e = RuntimeException("detached failure")
    val child = AtomicReference[Child]()
    val ended = AtomicInteger(0)
    Async.blocking:
      val r = Async.supervised:
        val failing = Future.detached[Int](throw e)
        assert(failureOf[RuntimeException](failing.result) eq e)
        val withChild = Future.detached:
          val c = Child("the detached future's child")
          c.future = Future(parking(c, ended)(Promise[Int]().future.value))
          child.set(c)
          c.awaitParked()
          "parent"
        assertEquals(withChild.value, "parent")
        assertEquals(ended.get, 1, "a detached future's value was set before its child ended")
        "body"
      assertEquals(r, "body")
    assertCancelledWhileParked(child.get)

  test("a future started with the Supervised capability of a scope that has ended does not run"):
    val ran = AtomicInteger(0)
    Async.blocking:
      val leaked = Async.supervised(summon[Supervised])
      val f = Future(ran.incrementAndGet())(using leaked)
      val u = Future.user(ran.incrementAndGet())(using leaked, leaked)
      assertCancelled(resultWithin(f, "a daemon of an ended scope"))
      assertCancelled(resultWithin(u, "a user child of an ended scope"))
    assertEquals(ran.get, 0, "a future of an ended supervised scope ran")

object SupervisedBehaviour:
  /** The stress multiplier: `ASYNCPIPE_STRESS`, default 1. */
  val Factor: Int = sys.env.get("ASYNCPIPE_STRESS").flatMap(_.trim.toIntOption).filter(_ >= 1).getOrElse(1)
  /** Rounds of the simultaneous-failure loop: 200 times `Factor` (about a second per runtime). */
  val Rounds: Int = 200 * Factor

class SupervisedOnVirtualThreads extends SupervisedBehaviour(Runtime.VirtualThreads)
class SupervisedOnPlatformThreads extends SupervisedBehaviour(Runtime.PlatformThreads)
