package asyncpipe.async

import java.util.concurrent.{CancellationException, ConcurrentLinkedQueue, CountDownLatch, TimeUnit, TimeoutException}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicReference}
import scala.concurrent.duration.{DurationInt, DurationLong}
import scala.util.Success
import Support.*

/** Timers, sleep and withTimeout (behaviour 40). Times are checked only as lower bounds;
  * upper bounds are the generous `Patience` of "does not hang".
  */
abstract class TimerBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  test("awaiting a Timer returns true after its period, and again afterwards"):
    Async.blocking:
      val t0 = System.nanoTime()
      val timer = Timer(200)
      assertEquals(Async.await(timer), true)
      val elapsed = millisSince(t0)
      assert(elapsed >= 190, s"a 200 ms timer rang after $elapsed ms")
      assertEquals(timer.poll(), Some(true))
      assertEquals(Async.await(timer), true)

  test("a StartableTimer counts from start(), not from its creation"):
    Async.blocking:
      val timer = StartableTimer(150)
      assertEquals(timer.millis, 150L)
      Thread.sleep(100) // time passing between creating and starting the timer
      assertEquals(timer.poll(), None)
      val t0 = System.nanoTime()
      timer.start()
      assertEquals(Async.await(timer), true)
      val elapsed = millisSince(t0)
      assert(elapsed >= 140, s"a 150 ms timer rang $elapsed ms after start()")

  test("timers ring in the order of their deadlines"):
    val millis = Vector[Long](250, 50, 200, 100, 150)
    val order = ConcurrentLinkedQueue[Long]()
    val rang = CountDownLatch(millis.size)
    millis.foreach: m =>
      Timer(m).onComplete(Listener[Boolean] { _ => order.add(m); rang.countDown(); true })
    awaitLatch(rang, "every timer to ring")
    assertEquals(order.toArray.toList.map(_.asInstanceOf[Long]), millis.sorted.toList)

  test("all timers ring on one shared scheduler thread"):
    val threads = ConcurrentLinkedQueue[Thread]()
    val rang = CountDownLatch(5)
    // listeners first, then start: a timer that rang before its listener came would run it on
    // this thread (a loaded machine can take 20 ms between two lines)
    val timers = (1 to 5).map(i => StartableTimer(20L * i))
    timers.foreach(_.onComplete(Listener[Boolean] { _ => threads.add(Thread.currentThread()); rang.countDown(); true }))
    timers.foreach(_.start())
    awaitLatch(rang, "every timer to ring")
    val distinct = threads.toArray.toSet
    assertEquals(distinct.size, 1, s"timers rang on $distinct")
    assert(!distinct.contains(Thread.currentThread()))

  test("cancelling a timer gives false to its current waiters at once, and to later ones"):
    val threads = Vector.fill(3)(AtomicReference[Thread]())
    Async.blocking:
      val timer = Timer(60_000)
      val waiters = threads.map: ref =>
        Future:
          ref.set(Thread.currentThread())
          Async.await(timer)
      threads.foreach(ref => eventually("a waiter to start")(ref.get != null))
      threads.foreach(ref => awaitBlocked(ref.get))
      timer.cancel()
      waiters.foreach(w => assertEquals(resultWithin(w, "a waiter of the cancelled timer"), Success(false)))
      assertEquals(timer.poll(), Some(false))
      assertEquals(Async.await(timer), false)

  test("cancelling a timer before it starts or after it rang"):
    Async.blocking:
      val unstarted = StartableTimer(10)
      unstarted.cancel()
      assertEquals(unstarted.poll(), Some(false))
      assertEquals(Async.await(unstarted), false)
      val rung = Timer(10)
      assertEquals(Async.await(rung), true)
      rung.cancel()
      assertEquals(rung.poll(), Some(true), "cancel after ringing replaced the value")

  test("a timer raced against a slow future wins"):
    val effect = CountDownLatch(1)
    val thread = AtomicReference[Thread]()
    Async.blocking:
      val slow = Future:
        thread.set(Thread.currentThread())
        Thread.sleep(1000)
        effect.countDown()
        1
      assertEquals(Async.await(Async.either(Timer(100), slow)), Left(true))
      slow.cancel()
      // On a loaded machine the future may not have started before it was cancelled: then it never does.
      val t = thread.get
      if t != null then join(t, "the cancelled slow future")
    // The scope has waited for every child: the cancelled future never got to its effect.
    assertEquals(effect.getCount, 1L)

  // ---------------------------------------------------------------------------------------------
  // sleep

  test("sleep waits at least its time, in a scope and in a future"):
    Async.blocking:
      val t0 = System.nanoTime()
      sleep(200)
      val elapsed = millisSince(t0)
      assert(elapsed >= 190, s"sleep(200) returned after $elapsed ms")
      val t1 = System.nanoTime()
      Future(sleep(100)).value
      val elapsed1 = millisSince(t1)
      assert(elapsed1 >= 90, s"sleep(100) in a future returned after $elapsed1 ms")

  test("a cancelled sleep ends promptly with CancellationException"):
    checkCancelEndsBlockedBody(classOf[CancellationException]):
      sleep(60_000)

  // ---------------------------------------------------------------------------------------------
  // withTimeout

  test("withTimeout returns the value of a body that finishes in time"):
    Async.blocking:
      assertEquals(withTimeout(Patience)(1 + 1), 2)
      assertEquals(Future(withTimeout(Patience) { sleep(10); 3 }).value, 3)

  test("withTimeout passes the body's own exception through"):
    val e = IllegalStateException("from the body")
    Async.blocking:
      val thrown = intercept[IllegalStateException](withTimeout[Int](Patience)(throw e))
      assert(thrown eq e)

  test("withTimeout fails a slow body with TimeoutException, and the body's side effect never happens"):
    val effect = CountDownLatch(1)
    val bodyEnded = CountDownLatch(1)
    Async.blocking:
      val t0 = System.nanoTime()
      intercept[TimeoutException]:
        withTimeout(250):
          try
            Thread.sleep(1000)
            effect.countDown()
          finally
            // 50 ms of clean-up once interrupted: withTimeout must not return before it is done
            try Thread.sleep(50)
            catch case _: InterruptedException => ()
            bodyEnded.countDown()
      val elapsed = millisSince(t0)
      assert(elapsed >= 240, s"a 250 ms timeout fired after $elapsed ms")
      assertEquals(bodyEnded.getCount, 0L, "withTimeout threw while its body was still running")
      assert(!Thread.currentThread().isInterrupted, "withTimeout left the caller's interrupt flag set")
      assert(!effect.await(1000, TimeUnit.MILLISECONDS), "the timed-out body's side effect happened")

  test("withTimeout of an awaiting body in a future"):
    val never = Promise[Int]()
    Async.blocking:
      val f = Future(withTimeout(100)(never.future.value))
      failureOf[TimeoutException](f.result)

  // ---------------------------------------------------------------------------------------------
  // withTimeoutOption

  test("withTimeoutOption gives Some of the value of a body that finishes in time"):
    Async.blocking:
      assertEquals(withTimeoutOption(Patience)(1 + 1), Some(2))
      assertEquals(withTimeoutOption(Patience.millis)("a"), Some("a"))
      assertEquals(Future(withTimeoutOption(Patience) { sleep(10); 3 }).value, Some(3))

  test("withTimeoutOption passes the body's own exception through"):
    val e = IllegalStateException("from the body")
    Async.blocking:
      val thrown = intercept[IllegalStateException](withTimeoutOption[Int](Patience.millis)(throw e))
      assert(thrown eq e)

  test("withTimeoutOption gives None once the timed-out body was cancelled and its thread has ended"):
    val never = Promise[Int]()
    val thread = AtomicReference[Thread]()
    val cleanedUp = AtomicBoolean(false)
    Async.blocking:
      val t0 = System.nanoTime()
      val r = withTimeoutOption(100.millis):
        thread.set(Thread.currentThread())
        try never.future.value
        finally cleanedUp.set(true)
      val elapsed = millisSince(t0)
      assertEquals(r, None)
      assert(elapsed >= 95, s"a 100 ms timeout fired after $elapsed ms")
      assert(cleanedUp.get, "withTimeoutOption returned before the body's clean-up")
      assert(!thread.get.isAlive, "the timed-out body's thread outlived withTimeoutOption")
      assert(!Thread.currentThread().isInterrupted, "withTimeoutOption left the caller's interrupt flag set")
    assertEquals(never.listenerCount, 0, "the cancelled body left its listener on the promise")

  test("a read timed out by withTimeoutOption takes nothing: the value sent later goes to the next reader"):
    val ch = BufferedChannel[Int](1)
    Async.blocking:
      assertEquals(withTimeoutOption(50.millis)(ch.read()), None)
      ch.send(7)
      assertEquals(ch.tryRead(), Some(Success(7)))

  test("a cancel of the caller of withTimeoutOption cancels the body and awaits its end"):
    val started = CountDownLatch(1)
    val cleanedUp = AtomicBoolean(false)
    val caller = AtomicReference[Thread]()
    val body = AtomicReference[Thread]()
    Async.blocking:
      val f = Future:
        caller.set(Thread.currentThread())
        withTimeoutOption(60.seconds):
          body.set(Thread.currentThread())
          started.countDown()
          try sleep(60_000)
          finally cleanedUp.set(true)
      awaitLatch(started, "the body to start")
      f.cancel()
      join(caller.get, "the cancelled caller")
      assertCancelledNow(f)
      assert(cleanedUp.get, "the caller ended before the body's clean-up")
      assert(!body.get.isAlive, "the body's thread outlived its cancelled caller")

  // ---------------------------------------------------------------------------------------------
  // Durations: every entry in milliseconds also takes a FiniteDuration

  test("Timer, StartableTimer, sleep and withTimeout take durations, rounded up to whole milliseconds"):
    assertEquals(StartableTimer(1500.micros).millis, 2L)
    assertEquals(StartableTimer(2.seconds).millis, 2000L)
    assertEquals(StartableTimer(0.seconds).millis, 0L)
    assertEquals(StartableTimer(1.nanosecond).millis, 1L, "a timer of a nanosecond must not ring at once")
    assertEquals(StartableTimer(Long.MaxValue.nanos).millis, Math.ceilDiv(Long.MaxValue, 1_000_000L))
    assertEquals(millisOf(999_999.nanos, "d"), 1L)
    assertEquals(millisOf(1_000_001.nanos, "d"), 2L)
    Async.blocking:
      val t0 = System.nanoTime()
      assertEquals(Async.await(Timer(100.millis)), true)
      val timerElapsed = millisSince(t0)
      assert(timerElapsed >= 95, s"a 100 ms timer rang after $timerElapsed ms")
      val t1 = System.nanoTime()
      sleep(100.millis)
      val sleepElapsed = millisSince(t1)
      assert(sleepElapsed >= 95, s"sleep(100.millis) returned after $sleepElapsed ms")
      assertEquals(withTimeout(Patience.millis)(5), 5)
      val never = Promise[Int]()
      val e = intercept[TimeoutException](withTimeout(100.millis)(never.future.value))
      assertEquals(e.getMessage, "timed out after 100 milliseconds")

  test("a negative duration is refused with a message naming it"):
    def refused(expected: String)(make: => Any)(using munit.Location): Unit =
      val e = intercept[IllegalArgumentException](make)
      assert(e.getMessage.contains(expected), s"the message '${e.getMessage}' does not name '$expected'")
    refused("timer delay was -1 seconds, must be >= 0")(Timer(-1.second))
    refused("timer delay was -1 milliseconds")(StartableTimer(-1.milli))
    Async.blocking:
      refused("sleep duration was -2 seconds")(sleep(-2.seconds))
      refused("timeout was -3 seconds")(withTimeout(-3.seconds)(1))
      refused("timeout was -4 seconds")(withTimeoutOption(-4.seconds)(1))

  // ---------------------------------------------------------------------------------------------
  // One scheduler, not one thread per timer

  test("100,000 pending timers do not create 100,000 threads"):
    Async.blocking:
      assertEquals(Async.await(Timer(1)), true) // the scheduler is up
      val before = liveThreadCount()
      val timers = Array.fill(100_000)(Timer(60_000))
      val during = liveThreadCount()
      timers.foreach(_.cancel())
      assert(during - before < 100, s"$before live threads before, $during with 100,000 timers pending")
      assert(timers.forall(_.poll() == Some(false)), "a cancelled pending timer does not report false")

class TimerOnVirtualThreads extends TimerBehaviour(Runtime.VirtualThreads)
class TimerOnPlatformThreads extends TimerBehaviour(Runtime.PlatformThreads)
