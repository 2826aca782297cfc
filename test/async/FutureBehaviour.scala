package asyncpipe.async

import java.util.concurrent.{CancellationException, CountDownLatch, CyclicBarrier, LinkedBlockingQueue}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicInteger, AtomicReference}
import java.util.concurrent.locks.ReentrantLock
import scala.util.{Failure, Success, Try}
import munit.Location
import Support.*

/** Futures and promises: results, failures, cancellation, uninterruptible sections, and the
  * combinators zip, *:, alt and altC (behaviours 3, 6, 7, 9-11, 13, 14, 16, 17).
  */
abstract class FutureBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  /** Waits, without an Async, for a latch a body may be interrupted out of; loops past interrupts. */
  private def awaitIgnoringInterrupts(latch: CountDownLatch): Unit =
    var done = false
    while !done do
      try
        latch.await()
        done = true
      catch case _: InterruptedException => ()

  // ---------------------------------------------------------------------------------------------
  // Results and failures (behaviour 9)

  test("Future { v } yields Success(v); result, value and await return it"):
    Async.blocking:
      val f = Future(42)
      assertEquals(f.result, Success(42))
      assertEquals(f.value, 42)
      assertEquals(Async.await(f), Success(42))
      assertEquals(f.await, Success(42))
      assert(f.isCompleted)

  test("the body starts at once, on a thread of the runtime, without being awaited"):
    val started = CountDownLatch(1)
    val onVirtual = AtomicReference[Option[Boolean]](None)
    val bodyRuntime = AtomicReference[Runtime]()
    val bodyCancelled = AtomicReference[Option[Boolean]](None)
    Async.blocking:
      assert(Async.current.runtime eq runtime, s"Async.blocking runs on ${Async.current.runtime}, not $runtime")
      Future:
        onVirtual.set(Some(Thread.currentThread().isVirtual))
        bodyRuntime.set(Async.current.runtime)
        bodyCancelled.set(Some(Async.current.isCancelled))
        started.countDown()
      awaitLatch(started, "the body to start although nobody awaits it")
    assertEquals(onVirtual.get, Some(isVirtual(runtime)), s"body on a virtual thread under $runtime")
    assert(bodyRuntime.get eq runtime)
    assertEquals(bodyCancelled.get, Some(false))

  test("Future { throw e } yields Failure(e) with the same exception object"):
    val e = IllegalStateException("boom")
    Async.blocking:
      val f = Future[Int](throw e)
      assert(failureOf[IllegalStateException](f.result) eq e)
      val thrown = intercept[IllegalStateException](f.value)
      assert(thrown eq e, s"value rethrew $thrown, not the body's own exception object")

  test("value rethrows the same exception object through nested futures"):
    val e = ArithmeticException("three levels down")
    Async.blocking:
      val outer = Future:
        val middle = Future:
          val inner = Future[Int](throw e)
          inner.value + 1
        middle.value + 1
      val thrown = intercept[ArithmeticException](outer.value)
      assert(thrown eq e, s"value rethrew $thrown, not the innermost body's exception object")
      assert(failureOf[ArithmeticException](outer.result) eq e)

  test("Future.now is completed at once with the given result"):
    val e = RuntimeException("given")
    val ok = Future.now(Success(1))
    val bad = Future.now[Int](Failure(e))
    assert(ok.isCompleted)
    assert(bad.isCompleted)
    assertEquals(ok.poll(), Some(Success(1)))
    assertEquals(bad.poll(), Some(Failure(e)))
    Async.blocking:
      assertEquals(ok.value, 1)
      assert(intercept[RuntimeException](bad.value) eq e)

  test("isCompleted turns true only when the body has returned"):
    val gate = CountDownLatch(1)
    Async.blocking:
      val f = Future:
        gate.await()
        7
      assert(!f.isCompleted)
      assertEquals(f.poll(), None)
      gate.countDown()
      assertEquals(f.value, 7)
      assert(f.isCompleted)
      assertEquals(f.poll(), Some(Success(7)))

  test("Future.mapValue (the API's Future.map) transforms a success, passes a failure through, and captures an exception of f"):
    val e = IllegalArgumentException("from the body")
    val e2 = IllegalStateException("from f")
    Async.blocking:
      val base = Future(2)
      assertEquals(base.mapValue((x: Int) => x * 3).value, 6)
      assertEquals(base.value, 2, "mapValue consumed the underlying future")
      val failed = Future[Int](throw e).mapValue((x: Int) => x * 3)
      assert(failureOf[IllegalArgumentException](failed.result) eq e)
      val throwing = base.mapValue((_: Int) => throw e2)
      assert(failureOf[IllegalStateException](throwing.result) eq e2)

  // ---------------------------------------------------------------------------------------------
  // Failure propagation: await-only, as the API's Try results imply (behaviours 6, 7)

  test("a child's failure surfaces only through its result: the scope and its siblings go on"):
    val e = RuntimeException("child failed")
    val failed = CountDownLatch(1)
    val r = Async.blocking:
      val f = Future[Int](throw e)
      f.onComplete(Listener[Try[Int]] { _ => failed.countDown(); true })
      awaitLatch(failed, "the child to fail")
      val sibling = Future(5)
      sibling.value
    assertEquals(r, 5)

  test("two children failing at the same moment never hang the scope (20 rounds)"):
    for round <- 1 to 20 do
      val barrier = CyclicBarrier(2)
      val e1 = RuntimeException(s"first, round $round")
      val e2 = RuntimeException(s"second, round $round")
      val slowRef = AtomicReference[Future[Int]]()
      Async.blocking:
        val slow = Future:
          Thread.sleep(60_000)
          0
        slowRef.set(slow)
        val f1 = Future[Int] { barrier.await(); throw e1 }
        val f2 = Future[Int] { barrier.await(); throw e2 }
        val first = failureOf[RuntimeException](Async.await(Async.race(slow, f1, f2)))
        assert((first eq e1) || (first eq e2), s"round $round: race reported $first")
      assertCancelledNow(slowRef.get)

  // ---------------------------------------------------------------------------------------------
  // Promises (behaviour 11)

  test("Promise: complete succeeds once; a later complete is ignored"):
    val p = Promise[Int]()
    assert(!p.isCompleted)
    assertEquals(p.poll(), None)
    assert(p.complete(Success(1)))
    assert(!p.complete(Success(2)), "a second complete reported success")
    assert(!p.complete(Failure(RuntimeException("late"))))
    assertEquals(p.poll(), Some(Success(1)))
    assertEquals(p.future.poll(), Some(Success(1)))
    Async.blocking(assertEquals(p.future.value, 1))

  test("a Promise wakes every future awaiting it"):
    val p = Promise[Int]()
    Async.blocking:
      val waiters = (1 to 10).map(i => Future(p.future.value + i))
      p.complete(Success(100))
      assertEquals(waiters.map(_.value), 101 to 110)

  test("cancelling a pending Promise fails it with CancellationException; a later complete is ignored"):
    val p = Promise[Int]()
    p.cancel()
    assertCancelledNow(p.future)
    assert(!p.complete(Success(1)), "complete after cancel reported success")
    assertCancelledNow(p.future)
    Async.blocking:
      intercept[CancellationException](p.future.value)

  test("cancel after completion keeps the value, and cancel is idempotent"):
    val e = RuntimeException("kept")
    val p = Promise[Int]()
    p.complete(Success(3))
    p.cancel()
    p.cancel()
    assertEquals(p.poll(), Some(Success(3)))
    Async.blocking:
      val f = Future(4)
      assertEquals(f.value, 4)
      f.cancel()
      f.cancel()
      assertEquals(f.result, Success(4))
      val g = Future[Int](throw e)
      g.result
      g.cancel()
      assert(failureOf[RuntimeException](g.result) eq e, "cancel replaced a completed failure")

  // ---------------------------------------------------------------------------------------------
  // Cancelling running futures (behaviours 10, 15)

  test("cancel sets Failure(CancellationException) at once and does not wait for the body to end"):
    val started = CountDownLatch(1)
    val release = CountDownLatch(1)
    val ended = CountDownLatch(1)
    Async.blocking:
      val f = Future:
        started.countDown()
        try awaitIgnoringInterrupts(release)
        finally ended.countDown()
      awaitLatch(started, "the body to start")
      f.cancel()
      assertCancelledNow(f)
      assert(f.isCompleted)
      assertEquals(ended.getCount, 1L, "cancel returned only after the body ended")
      assertCancelled(Async.await(f))
      release.countDown()
    assertEquals(ended.getCount, 0L, "the scope ended before the cancelled body")

  test("cancel interrupts a body blocked in Thread.sleep promptly"):
    checkCancelEndsBlockedBody(classOf[InterruptedException]):
      Thread.sleep(60_000)

  test("cancel interrupts a body blocked in ReentrantLock.lockInterruptibly promptly"):
    val lock = ReentrantLock()
    lock.lock()
    try
      checkCancelEndsBlockedBody(classOf[InterruptedException]):
        lock.lockInterruptibly()
    finally lock.unlock()

  test("cancel interrupts a body blocked in a blocking queue take promptly"):
    val queue = LinkedBlockingQueue[Int]()
    checkCancelEndsBlockedBody(classOf[InterruptedException]):
      queue.take()

  test("cancel ends a body blocked in await with CancellationException and drops its listener"):
    val src = ProbeSource.persistent[Int]()
    checkCancelEndsBlockedBody(classOf[CancellationException]):
      Async.await(src)
    assert(src.totalRegistrations >= 1, "the await never registered a listener")
    assertEquals(src.registered, 0, "the cancelled await left its listener on the source")

  test("await in a cancelled body throws CancellationException even when the source is ready"):
    val started = CountDownLatch(1)
    val cancelled = CountDownLatch(1)
    val seen = AtomicReference[Try[Try[Int]]]()
    Async.blocking:
      val f = Future:
        started.countDown()
        awaitIgnoringInterrupts(cancelled)
        Thread.interrupted() // the check must be cooperative, not only through the interrupt flag
        seen.set(Try(Async.await(Future.now(Success(1)))))
      awaitLatch(started, "the body to start")
      f.cancel()
      cancelled.countDown()
    assertCancelled(seen.get)

  test("20 concurrent cancels end the future once, with CancellationException"):
    val ended = AtomicInteger(0)
    val started = CountDownLatch(1)
    Async.blocking:
      val f = Future:
        try
          started.countDown()
          Thread.sleep(60_000)
        finally ended.incrementAndGet()
      awaitLatch(started, "the body to start")
      val go = CountDownLatch(1)
      val cancellers = (1 to 20).map(_ => Thread.ofPlatform().start(() => { go.await(); f.cancel() }))
      go.countDown()
      cancellers.foreach(join(_, "a canceller"))
      assertCancelledNow(f)
    assertEquals(ended.get, 1)

  test("cancelling a future does not cancel a future it was awaiting"):
    val gate = CountDownLatch(1)
    val waiterThread = AtomicReference[Thread]()
    Async.blocking:
      val awaited = Future:
        gate.await()
        5
      val waiting = Future:
        waiterThread.set(Thread.currentThread())
        awaited.value
      eventually("the waiter to start")(waiterThread.get != null)
      awaitBlocked(waiterThread.get)
      waiting.cancel()
      assertCancelled(Async.await(waiting))
      join(waiterThread.get, "the cancelled waiter")
      assert(!awaited.isCompleted, "the awaited future was cancelled with its waiter")
      gate.countDown()
      assertEquals(awaited.value, 5)

  // ---------------------------------------------------------------------------------------------
  // uninterruptible (behaviours 3, 13, 14)

  test("uninterruptible without a cancel returns the block's value"):
    Async.blocking:
      assertEquals(uninterruptible(5), 5)
      assertEquals(Future(uninterruptible(6) + 1).value, 7)

  test("uninterruptible defers a cancel to the end of the block, then throws CancellationException"):
    val inBlock = CountDownLatch(1)
    val blockDone = AtomicBoolean(false)
    val after = AtomicBoolean(false)
    val seen = AtomicReference[Throwable]()
    val thread = AtomicReference[Thread]()
    Async.blocking:
      val f = Future:
        thread.set(Thread.currentThread())
        try
          uninterruptible:
            inBlock.countDown()
            Thread.sleep(200) // work that a cancel must not cut short
            blockDone.set(true)
          after.set(true)
        catch
          case e: Throwable =>
            seen.set(e)
            throw e
      awaitLatch(inBlock, "the block to start")
      f.cancel()
      assertCancelledNow(f)
      join(thread.get, "the cancelled body")
    assert(blockDone.get, s"the uninterruptible block was cut short by ${seen.get}")
    assert(!after.get, "the statement after the block ran in a cancelled future")
    assert(seen.get.isInstanceOf[CancellationException], s"the body ended with ${seen.get}")

  test("nested uninterruptible blocks defer a cancel to the end of the outermost one"):
    val inBlock = CountDownLatch(1)
    val gate = CountDownLatch(1)
    val innerDone = AtomicBoolean(false)
    val outerDone = AtomicBoolean(false)
    val after = AtomicBoolean(false)
    val thread = AtomicReference[Thread]()
    Async.blocking:
      val f = Future:
        thread.set(Thread.currentThread())
        uninterruptible:
          uninterruptible:
            inBlock.countDown()
            gate.await()
            innerDone.set(true)
          outerDone.set(true)
        after.set(true)
      awaitLatch(inBlock, "the inner block to start")
      f.cancel()
      gate.countDown()
      join(thread.get, "the cancelled body")
      assertCancelledNow(f)
    assert(innerDone.get, "the inner block was cut short")
    assert(outerDone.get, "the outer block was cut short at the end of the inner one")
    assert(!after.get, "the statement after the blocks ran in a cancelled future")

  test("uninterruptible loses no value: a cancelled reader inside it takes one value and leaves the next"):
    val src = ProbeSource.ephemeral[Int]()
    val got = AtomicReference[Option[Int]](None)
    val after = AtomicBoolean(false)
    val thread = AtomicReference[Thread]()
    Async.blocking:
      val f = Future:
        thread.set(Thread.currentThread())
        uninterruptible:
          got.set(Some(Async.await(src)))
        after.set(true)
      src.awaitRegistered(1, "(the reader)")
      f.cancel()
      src.offer(1)
      src.offer(2)
      join(thread.get, "the cancelled reader")
    assertEquals(got.get, Some(1))
    assert(!after.get, "the statement after the block ran in a cancelled future")
    assertEquals(src.poll(), Some(2), "the second value was taken from the source")

  test("a future started inside a cancelled future completes with CancellationException without running"):
    val inBlock = CountDownLatch(1)
    val gate = CountDownLatch(1)
    val child = AtomicReference[Future[Unit]]()
    val childRan = AtomicBoolean(false)
    val sawCancelled = AtomicReference[Option[Boolean]](None)
    val blockDone = AtomicBoolean(false)
    val after = AtomicBoolean(false)
    val thread = AtomicReference[Thread]()
    Async.blocking:
      val f = Future:
        thread.set(Thread.currentThread())
        uninterruptible:
          inBlock.countDown()
          gate.await()
          sawCancelled.set(Some(Async.current.isCancelled))
          child.set(Future(childRan.set(true)))
          blockDone.set(true)
        after.set(true)
      awaitLatch(inBlock, "the block to start")
      f.cancel()
      gate.countDown()
      join(thread.get, "the cancelled body")
    assertEquals(sawCancelled.get, Some(true), "Async.current.isCancelled in a cancelled future")
    assert(blockDone.get, "the uninterruptible block was cut short")
    assert(child.get != null, "no child was created")
    assertCancelledNow(child.get)
    assert(!childRan.get, "a child of a cancelled future ran")
    assert(!after.get)

  // ---------------------------------------------------------------------------------------------
  // zip and *: (behaviour 16)

  test("zip of two successes is the pair"):
    Async.blocking:
      assertEquals(Future(1).zip(Future("a")).value, (1, "a"))

  test("zip fails with the first failure without waiting for the slower side"):
    val e = RuntimeException("fast failure")
    val gate = CountDownLatch(1)
    Async.blocking:
      val slow = Future:
        gate.await()
        1
      val failing = Future[Int](throw e)
      assert(failureOf[RuntimeException](slow.zip(failing).result) eq e)
      assert(failureOf[RuntimeException](failing.zip(slow).result) eq e)
      assertEquals(gate.getCount, 1L)
      gate.countDown()

  test("*: and zip build tuples of any arity, and a failure anywhere fails the tuple"):
    val e = RuntimeException("third")
    Async.blocking:
      val t = Future(1) *: Future("b") *: Future(3.0).zip(Future('d'))
      assertEquals(t.value, (1, "b", 3.0, 'd'))
      val single = Future(1) *: Future.now[EmptyTuple](Success(EmptyTuple))
      assertEquals(single.value, Tuple1(1))
      val failing = Future(1) *: Future("b") *: Future[Double](throw e).zip(Future('d'))
      assert(failureOf[RuntimeException](failing.result) eq e)

  // ---------------------------------------------------------------------------------------------
  // alt and altC (behaviour 17)

  test("alt takes the first success, even after an earlier failure"):
    val gate = CountDownLatch(1)
    Async.blocking:
      val failsFirst = Future[Int](throw RuntimeException("fast failure"))
      val succeedsLater = Future:
        gate.await()
        2
      val a = failsFirst.alt(succeedsLater)
      Async.await(failsFirst)
      assert(!a.isCompleted, "alt completed with a failure while a success was still possible")
      gate.countDown()
      assertEquals(a.value, 2)

  test("alt takes whichever side succeeds first"):
    val gate = CountDownLatch(1)
    Async.blocking:
      val slow = Future:
        gate.await()
        1
      assertEquals(slow.alt(Future(2)).value, 2)
      assertEquals(Future(3).alt(slow).value, 3)
      gate.countDown()

  /** Futures that fail with errors(i) once gates(i) opens, reporting their threads. */
  private final class Failing(n: Int)(using Async):
    val gates = Vector.fill(n)(CountDownLatch(1))
    val errors = Vector.tabulate(n)(i => RuntimeException(s"failure $i"))
    private val threads = Vector.fill(n)(AtomicReference[Thread]())
    val futures: Vector[Future[Int]] = Vector.tabulate(n) { i =>
      Future[Int]:
        threads(i).set(Thread.currentThread())
        gates(i).await()
        throw errors(i)
    }
    /** Lets future i fail and waits until it has completed and its thread has ended, so that
      * every listener of its completion has run before the next one fails.
      */
    def fail(i: Int)(using Location): Unit =
      gates(i).countDown()
      Async.await(futures(i))
      eventually(s"future $i to start")(threads(i).get != null)
      join(threads(i).get, s"future $i")

  test("alt of two futures that both fail reports the last failure"):
    Async.blocking:
      val fs = Failing(2)
      val a = fs.futures(0).alt(fs.futures(1))
      val b = fs.futures(1).alt(fs.futures(0))
      fs.fail(0)
      fs.fail(1)
      assert(failureOf[RuntimeException](a.result) eq fs.errors(1))
      assert(failureOf[RuntimeException](b.result) eq fs.errors(1))

  test("n-ary alt of failures reports the last failure, in 20 random orders"):
    val rnd = scala.util.Random(20240617)
    for round <- 1 to 20 do
      Async.blocking:
        val fs = Failing(5)
        val a = Future.alt(fs.futures*)
        val order = rnd.shuffle((0 until 5).toVector)
        order.foreach(fs.fail)
        assert(failureOf[RuntimeException](a.result) eq fs.errors(order.last), s"round $round, failure order $order")

  test("n-ary alt takes the first success among failures"):
    val gate = CountDownLatch(1)
    Async.blocking:
      val fs = Vector(
        Future[Int](throw RuntimeException("a")),
        Future[Int] { gate.await(); 1 },
        Future(2),
        Future[Int](throw RuntimeException("b"))
      )
      assertEquals(Future.alt(fs*).value, 2)
      gate.countDown()

  test("plain alt lets the slower future run to its side effect"):
    val effect = CountDownLatch(1)
    Async.blocking:
      val slow = Future:
        Thread.sleep(200)
        effect.countDown()
        1
      assertEquals(Future(2).alt(slow).value, 2)
      awaitLatch(effect, "the loser's side effect under plain alt")
      assertEquals(slow.value, 1)

  test("altC cancels the slower future: its side effect after a sleep never happens"):
    val effect = CountDownLatch(1)
    val slowThread = AtomicReference[Thread]()
    Async.blocking:
      val slow = Future:
        slowThread.set(Thread.currentThread())
        Thread.sleep(200)
        effect.countDown()
        1
      eventually("the slow future to start")(slowThread.get != null)
      assertEquals(Future(2).altC(slow).value, 2)
      join(slowThread.get, "the loser of altC")
      assertEquals(effect.getCount, 1L, "the loser of altC ran to its side effect")
      assertCancelled(Async.await(slow))

  test("n-ary altC cancels every loser and keeps the winner's value"):
    val effects = AtomicInteger(0)
    val threads = java.util.concurrent.ConcurrentLinkedQueue[Thread]()
    val started = CountDownLatch(3)
    Async.blocking:
      def slow(i: Int) = Future:
        threads.add(Thread.currentThread())
        started.countDown()
        Thread.sleep(200)
        effects.incrementAndGet()
        i
      val losers = Vector(slow(1), slow(2), slow(3))
      awaitLatch(started, "the slow futures to start")
      val winner = Future(0)
      assertEquals(Future.altC(losers(0), winner, losers(1), losers(2)).value, 0)
      threads.forEach(join(_, "a loser of altC"))
      assertEquals(effects.get, 0, "a loser of altC ran to its side effect")
      losers.foreach(l => assertCancelled(Async.await(l)))
      assertEquals(winner.value, 0)

  test("altC of futures that all fail reports the last failure"):
    Async.blocking:
      val fs = Failing(2)
      val a = fs.futures(1).altC(fs.futures(0))
      fs.fail(1)
      fs.fail(0)
      assert(failureOf[RuntimeException](a.result) eq fs.errors(0))

class FutureOnVirtualThreads extends FutureBehaviour(Runtime.VirtualThreads)
class FutureOnPlatformThreads extends FutureBehaviour(Runtime.PlatformThreads)
