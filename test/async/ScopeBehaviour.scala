package asyncpipe.async

import java.util.concurrent.{CancellationException, CountDownLatch, TimeUnit}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicReference}
import scala.util.Try
import Support.*

/** Structured concurrency: Async.blocking and Async.group cancel and then await everything
  * started inside them, cancellation reaches inward through nested groups, and a future's own
  * children end with its body (behaviours 1-4, 8, 10).
  */
abstract class ScopeBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  /** A future that records its thread, signals `started`, sleeps `millis` and then sets `flag`.
    * However it ends, it first does 50 ms of clean-up and sets `cleanedUp`: a scope that returned
    * without awaiting its end would return before that.
    */
  private final class Sleeper(millis: Long)(using Async):
    val started = CountDownLatch(1)
    val flag = AtomicBoolean(false)
    val cleanedUp = AtomicBoolean(false)
    private val thread = AtomicReference[Thread]()
    val future: Future[Unit] = Future:
      thread.set(Thread.currentThread())
      started.countDown()
      try
        Thread.sleep(millis)
        flag.set(true)
      finally
        try Thread.sleep(50)
        catch case _: InterruptedException => ()
        cleanedUp.set(true)
    def awaitStarted(): Unit = awaitLatch(started, "the sleeper to start")
    def threadOf: Thread = thread.get

  test("Async.blocking returns the body's value and rethrows the body's own exception"):
    assertEquals(Async.blocking(1 + 1), 2)
    val e = IllegalStateException("from the body")
    val thrown = intercept[IllegalStateException](Async.blocking[Int](throw e))
    assert(thrown eq e, s"Async.blocking rethrew $thrown, not the body's exception object")

  test("Async.blocking cancels and awaits a child still running at its exit"):
    val sleeper = AtomicReference[Sleeper]()
    Async.blocking:
      val s = Sleeper(400)
      sleeper.set(s)
      s.awaitStarted()
    val s = sleeper.get
    assert(s.cleanedUp.get, "Async.blocking returned before its child's body ended")
    assert(!s.threadOf.isAlive, "the child's thread outlived Async.blocking")
    assert(!s.flag.get, "the child ran to its end instead of being cancelled")
    assertCancelledNow(s.future)

  test("Async.blocking cancels and awaits its children also when its body throws"):
    val sleeper = AtomicReference[Sleeper]()
    val e = RuntimeException("body failed")
    val thrown = intercept[RuntimeException]:
      Async.blocking:
        val s = Sleeper(400)
        sleeper.set(s)
        s.awaitStarted()
        throw e
    assert(thrown eq e)
    assert(sleeper.get.cleanedUp.get, "Async.blocking returned before its child's body ended")
    assert(!sleeper.get.threadOf.isAlive, "the child's thread outlived Async.blocking")
    assert(!sleeper.get.flag.get)

  test("Async.group cancels and awaits its children at exit and returns the body's value"):
    val sleeper = AtomicReference[Sleeper]()
    val group = AtomicReference[CompletionGroup]()
    Async.blocking:
      val r = Async.group:
        group.set(Async.current.group)
        val s = Sleeper(400)
        sleeper.set(s)
        s.awaitStarted()
        "done"
      assertEquals(r, "done")
      val s = sleeper.get
      assert(s.cleanedUp.get, "Async.group returned before its child's body ended")
      assert(!s.threadOf.isAlive, "the child's thread outlived Async.group")
      assert(!s.flag.get, "the child ran to its end instead of being cancelled")
      assertCancelledNow(s.future)
      assert(group.get.isCancelled, "the group is not marked cancelled after its exit")
      assertEquals(group.get.size, 0)
      assert(!Async.current.isCancelled, "the group's exit cancelled the enclosing scope")

  test("Async.group rethrows its body's exception after cancelling and awaiting its children"):
    val e = RuntimeException("group body failed")
    val sleeper = AtomicReference[Sleeper]()
    Async.blocking:
      val thrown = intercept[RuntimeException]:
        Async.group:
          val s = Sleeper(400)
          sleeper.set(s)
          s.awaitStarted()
          throw e
      assert(thrown eq e)
      assert(sleeper.get.cleanedUp.get, "Async.group returned before its child's body ended")
      assert(!sleeper.get.threadOf.isAlive)
      assert(!sleeper.get.flag.get)

  test("an inner group's exit cancels only its own children"):
    val gate = CountDownLatch(1)
    Async.blocking:
      val sibling = Future:
        gate.await()
        1
      val inner = AtomicReference[Sleeper]()
      Async.group:
        val s = Sleeper(60_000)
        inner.set(s)
        s.awaitStarted()
      assertCancelledNow(inner.get.future)
      assert(!sibling.isCompleted, "the inner group's exit cancelled a future of the enclosing scope")
      gate.countDown()
      assertEquals(sibling.value, 1)

  test("a group's size counts its members not yet ended"):
    val gate = CountDownLatch(1)
    val started = CountDownLatch(3)
    val group = AtomicReference[CompletionGroup]()
    Async.blocking:
      Async.group:
        val g = Async.current.group
        group.set(g)
        assertEquals(g.size, 0)
        val fs = (1 to 3).map: i =>
          Future:
            started.countDown()
            gate.await()
            i
        awaitLatch(started, "three members to start")
        assertEquals(g.size, 3)
        gate.countDown()
        assertEquals(fs.map(_.value), 1 to 3)
        eventually("the members to end")(g.size == 0)
    assertEquals(group.get.size, 0)

  test("a Future started in an already-cancelled group completes with CancellationException without running"):
    val ran = AtomicBoolean(false)
    val f = AtomicReference[Future[Unit]]()
    Async.blocking:
      try
        Async.group:
          Async.current.group.cancel()
          assert(Async.current.group.isCancelled)
          f.set(Future(ran.set(true)))
      catch case _: CancellationException => () // whether a cancelled group's exit throws is not specified
      assertCancelledNow(f.get)
      assertEquals(Future(1).value, 1, "cancelling an inner group reached the enclosing scope")
    assert(!ran.get, "a future of a cancelled group ran")

  // ---------------------------------------------------------------------------------------------
  // Nested groups (behaviour 2)

  test("cancelling an outer future reaches the futures of its inner groups at once"):
    val innerStarted = CountDownLatch(1)
    val innerEnded = CountDownLatch(1)
    val innerEndedDuringBlock = AtomicReference[Option[Boolean]](None)
    val inner = AtomicReference[Future[Unit]]()
    val outerThread = AtomicReference[Thread]()
    Async.blocking:
      val outer = Future:
        outerThread.set(Thread.currentThread())
        Async.group:
          inner.set(Future:
            innerStarted.countDown()
            try Thread.sleep(60_000)
            finally innerEnded.countDown())
          // The outer future cannot end here until the block ends: only the propagated cancel
          // can end the inner future.
          uninterruptible:
            innerEndedDuringBlock.set(Some(innerEnded.await(Patience, TimeUnit.MILLISECONDS)))
      awaitLatch(innerStarted, "the inner future to start")
      outer.cancel()
      join(outerThread.get, "the cancelled outer future")
      assertCancelledNow(outer)
    assertEquals(innerEndedDuringBlock.get, Some(true), "cancelling the outer future did not reach its inner group")
    assertCancelledNow(inner.get)

  test("a cancelled outer future ends only after the futures of its inner groups have ended"):
    val steps = Steps()
    val innerStarted = CountDownLatch(1)
    val outerThread = AtomicReference[Thread]()
    val inner = AtomicReference[Future[Unit]]()
    Async.blocking:
      val outer = Future:
        outerThread.set(Thread.currentThread())
        try
          Async.group:
            val f = Future:
              try
                innerStarted.countDown()
                Thread.sleep(60_000)
              finally steps.expect(2)
            inner.set(f)
            f.value
        finally steps.expect(3)
      awaitLatch(innerStarted, "the inner future to start")
      steps.expect(1)
      outer.cancel()
      join(outerThread.get, "the cancelled outer future")
      steps.finish(4)
      assertCancelledNow(outer)
    assertCancelledNow(inner.get)

  // ---------------------------------------------------------------------------------------------
  // A future's children (behaviour 4)

  test("a future's own children end with its body, before its value is set"):
    val child = AtomicReference[Sleeper]()
    Async.blocking:
      val f = Future:
        val s = Sleeper(1000)
        child.set(s)
        s.awaitStarted()
        42
      assertEquals(f.value, 42)
      val s = child.get
      assert(s.cleanedUp.get, "the parent's value was set before its child's body ended")
      assert(!s.threadOf.isAlive, "the child's thread was still alive when its parent's value was set")
      assert(!s.flag.get, "the child ran to its end instead of being cancelled")
      assertCancelledNow(s.future)

  test("a failing future's children end before its failure is set"):
    val e = RuntimeException("parent failed")
    val child = AtomicReference[Sleeper]()
    Async.blocking:
      val f = Future[Int]:
        val s = Sleeper(1000)
        child.set(s)
        s.awaitStarted()
        throw e
      assert(failureOf[RuntimeException](f.result) eq e)
      assert(child.get.cleanedUp.get, "the parent's failure was set before its child's body ended")
      assert(!child.get.threadOf.isAlive, "the child's thread was still alive when its parent's failure was set")
      assert(!child.get.flag.get)

  // ---------------------------------------------------------------------------------------------
  // Capabilities and threads (behaviours 8, 10)

  test("a Future started with the Async of a scope that has ended does not run"):
    val ran = AtomicBoolean(false)
    val leaked = Async.blocking(Async.current)
    assert(leaked.group.isCancelled, "the group of an ended scope is not cancelled")
    val f = Future(ran.set(true))(using leaked)
    val done = CountDownLatch(1)
    f.onComplete(Listener[Try[Unit]] { _ => done.countDown(); true })
    awaitLatch(done, "the future of an ended scope to complete")
    assertCancelledNow(f)
    assert(!ran.get, "a future of an ended scope ran")

  test("a Future started with the Async of a future whose body has ended does not run"):
    val ran = AtomicBoolean(false)
    Async.blocking:
      val leaked = Future(Async.current).value
      val f = Future(ran.set(true))(using leaked)
      assertCancelled(resultWithin(f, "the future of an ended body to complete"))
    assert(!ran.get, "a future started in the scope of an ended body ran")

  test("a future started from a foreign thread with a scope's Async is cancelled and awaited at its exit"):
    val started = CountDownLatch(1)
    val flag = AtomicBoolean(false)
    val thread = AtomicReference[Thread]()
    val created = AtomicReference[Try[Future[Unit]]]()
    Async.blocking:
      val a = Async.current
      val spawner = Thread.ofPlatform().start: () =>
        created.set(Try(Future {
          thread.set(Thread.currentThread())
          started.countDown()
          Thread.sleep(400)
          flag.set(true)
        }(using a)))
      join(spawner, "the foreign thread")
      if created.get.isSuccess then awaitLatch(started, "the future to start")
    created.get.fold(
      e => assert(e.getMessage != null, s"spawning from a foreign thread failed without a message: $e"),
      f =>
        assert(!thread.get.isAlive, "a future spawned from a foreign thread outlived the scope")
        assert(!flag.get)
        assertCancelledNow(f)
    )

  test("scope exits leave the calling thread's interrupt flag clear"):
    val started = CountDownLatch(3)
    def sleeper()(using Async) = Future:
      started.countDown()
      Thread.sleep(60_000)
    Async.blocking:
      sleeper()
      Async.group:
        sleeper()
        val f = sleeper()
        awaitLatch(started, "the sleepers to start")
        f.cancel()
        assert(!Thread.currentThread().isInterrupted, "cancelling a future interrupted its canceller")
      assert(!Thread.currentThread().isInterrupted, "Async.group's exit left the caller interrupted")
    assert(!Thread.interrupted(), "Async.blocking's exit left the caller interrupted")

class ScopeOnVirtualThreads extends ScopeBehaviour(Runtime.VirtualThreads)
class ScopeOnPlatformThreads extends ScopeBehaviour(Runtime.PlatformThreads)
