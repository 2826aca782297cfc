package asyncpipe.async

import java.util.concurrent.{CancellationException, ConcurrentLinkedQueue, CountDownLatch}
import java.util.concurrent.atomic.AtomicReference
import scala.jdk.CollectionConverters.*
import scala.util.Success
import munit.Location
import Support.*
import ChannelBehaviour.awaitParkedIn

/** Semaphore (issue 40): permits taken and given back, waiting acquirers served in order, a
  * cancelled or losing acquire that takes nothing, and more releases than acquires refused with
  * the counts. Exactly-once under load is in [[SemaphoreStress]]; the sequential model in
  * [[SemaphoreModelCheck]].
  */
abstract class SemaphoreBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  /** Starts a future that acquires a permit of `sem` and then runs `andThen`; returns it once it
    * waits (its listener registered, `waiting` listeners in all).
    */
  private def waitingAcquirer[T](sem: Semaphore, waiting: Int)(andThen: => T)(using Async, Location): Future[T] =
    val thread = AtomicReference[Thread]()
    val f = Future:
      thread.set(Thread.currentThread())
      sem.acquire()
      andThen
    eventually(s"acquirer $waiting to wait")(sem.waitingCount == waiting)
    awaitParkedIn(thread.get, s"acquirer $waiting")
    f

  test("tryAcquire takes free permits until none is left; release gives them back"):
    val sem = Semaphore(2)
    assertEquals(sem.permits, 2)
    assertEquals(sem.available, 2)
    assert(sem.tryAcquire())
    assert(sem.tryAcquire())
    assert(!sem.tryAcquire(), "took a third permit of two")
    assertEquals(sem.available, 0)
    sem.release()
    assertEquals(sem.available, 1)
    assert(sem.tryAcquire())
    sem.release()
    sem.release()
    assertEquals(sem.available, 2)
    sem.checkInvariants()

  test("acquire takes a free permit at once, and otherwise waits for a release, which it takes"):
    val sem = Semaphore(1)
    Async.blocking:
      sem.acquire()
      assertEquals(sem.available, 0)
      val steps = Steps()
      val waiter = waitingAcquirer(sem, 1)(steps.expect(2))
      steps.expect(1)
      sem.release()
      waiter.value
      steps.finish(3)
      assertEquals(sem.available, 0, "the released permit went to the waiter")
      assertEquals(sem.waitingCount, 0)
      sem.release()
      assertEquals(sem.available, 1)

  test("withPermit holds a permit while its body runs and gives it back, also when the body throws"):
    val sem = Semaphore(2)
    val e = IllegalStateException("from the body")
    Async.blocking:
      assertEquals(sem.withPermit(sem.available), 1)
      assertEquals(sem.available, 2)
      val thrown = intercept[IllegalStateException](sem.withPermit[Int](throw e))
      assert(thrown eq e)
      assertEquals(sem.available, 2, "a throwing body kept its permit")

  test("waiting acquirers are served in the order they came"):
    val sem = Semaphore(1)
    val order = ConcurrentLinkedQueue[Int]()
    Async.blocking:
      assert(sem.tryAcquire())
      val waiters = (1 to 3).map(i => waitingAcquirer(sem, i)(order.add(i)))
      for i <- 1 to 3 do
        sem.release() // to waiter i, which keeps it
        eventually(s"a waiter to take release $i")(order.size == i)
        assertEquals(order.asScala.toList, (1 to i).toList)
        assertEquals(sem.available, 0)
      waiters.foreach(_.value)

  test("release with every permit free is an IllegalStateException naming the counts, and changes nothing"):
    val sem = Semaphore(2)
    val e = intercept[IllegalStateException](sem.release())
    assert(e.getMessage.contains("all 2 of 2 permits free"), e.getMessage)
    assertEquals(sem.available, 2)
    assert(sem.tryAcquire())
    sem.release()
    intercept[IllegalStateException](sem.release())
    assertEquals(sem.available, 2)
    sem.checkInvariants()

  test("a semaphore needs at least one permit: Semaphore(0) is refused naming the value"):
    val e = intercept[IllegalArgumentException](Semaphore(0))
    assert(e.getMessage.contains("permits was 0, must be > 0"), e.getMessage)
    intercept[IllegalArgumentException](Semaphore(-4))

  test("a cancelled acquire takes no permit: the permit released after the cancel goes to the next waiter"):
    val sem = Semaphore(1)
    Async.blocking:
      assert(sem.tryAcquire())
      val first = waitingAcquirer(sem, 1)("first")
      val second = waitingAcquirer(sem, 2)("second")
      first.cancel()
      assertCancelled(resultWithin(first, "the cancelled acquirer"))
      eventually("the cancelled acquirer to drop its listener")(sem.waitingCount == 1)
      sem.release()
      assertEquals(second.value, "second")
      assertEquals(sem.available, 0, "the permit went to no one, or to the cancelled acquirer")
      sem.release()
      assertEquals(sem.available, 1)
      assertEquals(sem.waitingCount, 0)

  test("acquire in a cancelled scope throws CancellationException and takes no permit, though one is free"):
    val sem = Semaphore(1)
    Async.blocking:
      try
        Async.group:
          Async.current.group.cancel()
          intercept[CancellationException](sem.acquire())
          intercept[CancellationException](sem.withPermit(fail("the body ran in a cancelled scope")))
      catch case _: CancellationException => ()
      assertEquals(sem.available, 1)

  test("withPermit gives the permit back when its body is cancelled"):
    val sem = Semaphore(1)
    val inBody = CountDownLatch(1)
    val thread = AtomicReference[Thread]()
    Async.blocking:
      val f = Future:
        thread.set(Thread.currentThread())
        sem.withPermit:
          inBody.countDown()
          sleep(60_000)
      awaitLatch(inBody, "the body to run")
      assertEquals(sem.available, 0)
      f.cancel()
      join(thread.get, "the cancelled body")
      assertCancelledNow(f)
      assertEquals(sem.available, 1, "the cancelled body kept its permit")

  // ---------------------------------------------------------------------------------------------
  // acquireSource: races and listeners

  test("acquireSource.poll() takes a free permit, and gives None when none is free"):
    val sem = Semaphore(1)
    val p = sem.acquireSource.poll()
    assertEquals(p, Some(sem.permit))
    assertEquals(sem.available, 0)
    assertEquals(sem.acquireSource.poll(), None)
    p.get.release()
    assertEquals(sem.available, 1)

  test("a listener that refuses a permit takes nothing: the permit stays free, or goes to the next listener"):
    val sem = Semaphore(1)
    val refusing = Recorder[Semaphore.Permit](_ => false)
    assert(!sem.acquireSource.poll(refusing))
    assertEquals(refusing.calls, 1)
    assertEquals(sem.available, 1, "a refused permit was not given back")
    assertEquals(sem.acquireSource.filter(_ => false).poll(), None)
    assertEquals(sem.available, 1)
    assert(sem.tryAcquire())
    val accepting = Recorder[Semaphore.Permit]()
    sem.acquireSource.onComplete(refusing)
    sem.acquireSource.onComplete(accepting)
    assertEquals(sem.waitingCount, 2)
    sem.release()
    assertEquals(accepting.values, List(sem.permit), "the listener after the refusing one did not get the permit")
    assertEquals(sem.available, 0)
    assertEquals(sem.waitingCount, 1, "the refusing listener is no longer registered")
    sem.acquireSource.dropListener(refusing)
    assertEquals(sem.waitingCount, 0)
    sem.release()
    assertEquals(sem.available, 1)
    assertEquals(accepting.calls, 1)

  test("onComplete on a semaphore with a free permit hands it over at once"):
    val sem = Semaphore(2)
    val k = Recorder[Semaphore.Permit]()
    sem.acquireSource.onComplete(k)
    assertEquals(k.values, List(sem.permit))
    assertEquals(sem.available, 1)
    assertEquals(sem.waitingCount, 0)

  test("a listener that throws is dropped; the permit goes to the next one, and the release rethrows"):
    val sem = Semaphore(1)
    val e = RuntimeException("a listener failed")
    assert(sem.tryAcquire())
    val accepting = Recorder[Semaphore.Permit]()
    sem.acquireSource.onComplete(Listener[Semaphore.Permit](_ => throw e))
    sem.acquireSource.onComplete(accepting)
    val thrown = intercept[RuntimeException](sem.release())
    assert(thrown eq e)
    assertEquals(accepting.calls, 1)
    assertEquals(sem.available, 0)
    assertEquals(sem.waitingCount, 0)
    sem.checkInvariants()

  test("the losing branch of Async.either takes no permit, and leaves nothing registered"):
    val sem = Semaphore(1)
    val ch = SyncChannel[Int]()
    val thread = AtomicReference[Thread]()
    Async.blocking:
      assert(sem.tryAcquire())
      val f = Future:
        thread.set(Thread.currentThread())
        Async.await(Async.either(sem.acquireSource, ch.canRead))
      eventually("the race to register")(sem.waitingCount == 1)
      awaitParkedIn(thread.get, "the race")
      ch.send(7)
      assertEquals(f.value, Right(Success(7)))
      assertEquals(sem.waitingCount, 0, "the race left its listener on the semaphore")
      sem.release()
      assertEquals(sem.available, 1, "the losing branch took a permit")

  test("the semaphore branch that wins Async.either takes one permit, and the channel keeps its value"):
    val sem = Semaphore(1)
    val ch = BufferedChannel[Int](1)
    val thread = AtomicReference[Thread]()
    Async.blocking:
      assert(sem.tryAcquire())
      val f = Future:
        thread.set(Thread.currentThread())
        Async.await(Async.either(ch.canRead.filter(_ => false), sem.acquireSource))
      eventually("the race to register")(sem.waitingCount == 1)
      awaitParkedIn(thread.get, "the race")
      sem.release()
      assertEquals(f.value, Right(sem.permit))
      assertEquals(sem.available, 0)
      ch.send(3)
      assertEquals(ch.tryRead(), Some(Success(3)))

  test("a race of two semaphores takes exactly one permit, also when both are released at once (50 rounds)"):
    Async.blocking:
      val a = Semaphore(1)
      val b = Semaphore(1)
      assertEquals(Async.await(Async.race(a.acquireSource.map(_ => "a"), b.acquireSource.map(_ => "b"))), "a")
      assertEquals((a.available, b.available), (0, 1))
      a.release()
      for round <- 1 to 50 do
        assert(a.tryAcquire() && b.tryAcquire())
        val thread = AtomicReference[Thread]()
        val f = Future:
          thread.set(Thread.currentThread())
          Async.await(Async.race(a.acquireSource.map(_ => "a"), b.acquireSource.map(_ => "b")))
        eventually("the race to register")(a.waitingCount == 1 && b.waitingCount == 1)
        val go = CountDownLatch(1)
        val releasers = Seq(a, b).map(s => Thread.ofPlatform().start(() => { go.await(); s.release() }))
        go.countDown()
        releasers.foreach(join(_, "a releaser"))
        val won = f.value
        assertEquals(a.available + b.available, 1, s"round $round: $won won; $a, $b")
        (if won == "a" then a else b).release()
        assertEquals((a.available, b.available), (1, 1), s"round $round")
        eventually(s"round $round: the loser's listener to go")(a.waitingCount == 0 && b.waitingCount == 0)

  test("an acquire timed out by withTimeoutOption takes nothing"):
    val sem = Semaphore(1)
    Async.blocking:
      assert(sem.tryAcquire())
      assertEquals(withTimeoutOption(50)(sem.acquire()), None)
      assertEquals(sem.waitingCount, 0)
      sem.release()
      assertEquals(sem.available, 1)

class SemaphoreOnVirtualThreads extends SemaphoreBehaviour(Runtime.VirtualThreads)
class SemaphoreOnPlatformThreads extends SemaphoreBehaviour(Runtime.PlatformThreads)
