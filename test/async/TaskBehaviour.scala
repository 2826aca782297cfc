package asyncpipe.async

import java.util.concurrent.{ConcurrentHashMap, ConcurrentLinkedQueue, CountDownLatch}
import java.util.concurrent.atomic.{AtomicInteger, AtomicReference}
import scala.util.{Success, Try}
import munit.Location
import Support.*
import TaskSchedule.*

/** Tasks and every TaskSchedule (behaviours 41, 42): run counts, maxRepetitions as "at most n
  * runs" for every schedule, results, and delays as lower bounds only.
  */
abstract class TaskBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  /** What a scheduled run did: its result, how many times the body ran, when each run started
    * (ms after `run` was called) and how long the whole took.
    */
  private final case class Outcome[T](result: Try[T], runs: Int, starts: Vector[Long], elapsed: Long):
    def gaps: Vector[Long] = starts.zip(starts.drop(1)).map((a, b) => b - a)

  /** The exception run `i` throws, the same object every time it is asked for. */
  private final class Failures:
    private val byRun = ConcurrentHashMap[Int, RuntimeException]()
    def apply(i: Int): RuntimeException = byRun.computeIfAbsent(i, i => RuntimeException(s"run $i failed"))

  /** Runs `body` (given the 1-based run number) on schedule `s` in a scope of its own, and waits
    * for the end: after the scope no run can start any more, so the count is final.
    */
  private def scheduled[T](s: TaskSchedule)(body: Int => T): Outcome[T] =
    val runs = AtomicInteger(0)
    val starts = ConcurrentLinkedQueue[Long]()
    val t0 = System.nanoTime()
    val result = Async.blocking:
      Task {
        starts.add(System.nanoTime())
        body(runs.incrementAndGet())
      }.schedule(s).run.result
    val elapsed = millisSince(t0)
    val startMillis = starts.toArray.toVector.map(n => (n.asInstanceOf[Long] - t0) / 1_000_000).sorted
    Outcome(result, runs.get, startMillis, elapsed)

  private def assertAtLeast(what: String, actual: Long, min: Long)(using Location): Unit =
    assert(actual >= min, s"$what was $actual ms, expected at least $min ms")

  test("run starts the body once; a task is a template that runs again on each run"):
    val runs = AtomicInteger(0)
    val task = Task(runs.incrementAndGet())
    val scheduled = task.schedule(Every(10, 3))
    Async.blocking:
      assertEquals(task.run.value, 1)
      assertEquals(task.run.value, 2)
      assertEquals(scheduled.run.value, 5)
      assertEquals(task.run.value, 6, "schedule changed the task it was called on")
    assertEquals(runs.get, 6)

  // ---------------------------------------------------------------------------------------------
  // Every

  test("Every(100, 3) runs 3 times in at least 200 ms, and its value is the last result"):
    val o = scheduled(Every(100, 3))(i => i * 10)
    assertEquals(o.result, Success(30))
    assertEquals(o.runs, 3)
    assertAtLeast("the whole", o.elapsed, 190)
    assertAtLeast("the time from the first run to the third", o.starts(2) - o.starts(0), 190)

  test("Every without a limit runs until cancelled, and no run starts after the cancel"):
    val runs = AtomicInteger(0)
    val fifth = CountDownLatch(1)
    val atCancel = AtomicInteger(-1)
    val t0 = System.nanoTime()
    Async.blocking:
      val f = Task {
        if runs.incrementAndGet() == 5 then fifth.countDown()
      }.schedule(Every(100)).run
      awaitLatch(fifth, "the fifth run")
      f.cancel()
      atCancel.set(runs.get)
      assertCancelledNow(f)
    assertAtLeast("five runs", millisSince(t0), 390)
    assertEquals(runs.get, atCancel.get, "a run started after the cancel")

  test("Every stops when the body throws, and fails with that exception"):
    val failures = Failures()
    val o = scheduled(Every(50))(i => if i == 3 then throw failures(3) else i)
    assert(failureOf[RuntimeException](o.result) eq failures(3))
    assertEquals(o.runs, 3)
    assertAtLeast("the whole", o.elapsed, 95)

  test("Every skips the slots missed by an overrunning run instead of bursting"):
    val o = scheduled(Every(100, 3)) { i => if i == 1 then Thread.sleep(250); i }
    assertEquals(o.result, Success(3))
    assertEquals(o.runs, 3)
    assertAtLeast("the start of run 2 after run 1", o.gaps(0), 250)
    assertAtLeast("the gap between runs 2 and 3 (missed slots must not burst)", o.gaps(1), 90)

  // ---------------------------------------------------------------------------------------------
  // ExponentialBackoff

  test("ExponentialBackoff(50, 2, 5) runs 5 times in at least 750 ms with doubling delays"):
    val o = scheduled(ExponentialBackoff(50, 2, 5))(identity)
    assertEquals(o.result, Success(5))
    assertEquals(o.runs, 5)
    assertAtLeast("the whole", o.elapsed, 740)
    Vector(50L, 100, 200, 400).zip(o.gaps).zipWithIndex.foreach:
      case ((d, gap), k) => assertAtLeast(s"the delay before run ${k + 2}", gap, d - 5)

  test("ExponentialBackoff delays are capped by maxDelayMillis"):
    val o = scheduled(ExponentialBackoff(20, 10, 4, maxDelayMillis = 50))(identity)
    assertEquals(o.result, Success(4))
    assertEquals(o.runs, 4)
    Vector(20L, 50, 50).zip(o.gaps).zipWithIndex.foreach:
      case ((d, gap), k) => assertAtLeast(s"the delay before run ${k + 2}", gap, d - 5)
    // Uncapped, the delays would be 20 + 200 + 2000 ms.
    assert(o.elapsed < 1500, s"a backoff capped at 50 ms took ${o.elapsed} ms for three delays")

  test("ExponentialBackoff stops when the body throws"):
    val failures = Failures()
    val o = scheduled(ExponentialBackoff(10, 2))(i => if i == 4 then throw failures(4) else i)
    assert(failureOf[RuntimeException](o.result) eq failures(4))
    assertEquals(o.runs, 4)
    assertAtLeast("the whole", o.elapsed, 65)

  test("ExponentialBackoff with Equal jitter waits at least half of each delay"):
    val o = scheduled(ExponentialBackoff(100, 1, 4, jitter = Jitter.Equal))(identity)
    assertEquals(o.result, Success(4))
    assertEquals(o.runs, 4)
    o.gaps.zipWithIndex.foreach((gap, k) => assertAtLeast(s"the equal-jittered delay before run ${k + 2}", gap, 45))

  test("ExponentialBackoff with Full jitter runs its repetitions"):
    val o = scheduled(ExponentialBackoff(50, 1, 4, jitter = Jitter.Full))(identity)
    assertEquals(o.result, Success(4))
    assertEquals(o.runs, 4)

  test("ExponentialBackoff with Percent jitter stays near each delay"):
    // 0.1 read as a fraction is ±10 %, read as a percentage ±0.1 %: at least 85 ms either way.
    val o = scheduled(ExponentialBackoff(100, 1, 4, jitter = Jitter.Percent(0.1)))(identity)
    assertEquals(o.result, Success(4))
    assertEquals(o.runs, 4)
    o.gaps.zipWithIndex.foreach((gap, k) => assertAtLeast(s"the jittered delay before run ${k + 2}", gap, 85))

  // ---------------------------------------------------------------------------------------------
  // RepeatUntilSuccess and RepeatUntilFailure

  test("RepeatUntilSuccess(100) returns the first success after 4 failures, in at least 400 ms"):
    val failures = Failures()
    val o = scheduled(RepeatUntilSuccess(100))(i => if i <= 4 then throw failures(i) else s"success at $i")
    assertEquals(o.result, Success("success at 5"))
    assertEquals(o.runs, 5)
    assertAtLeast("the whole", o.elapsed, 390)
    o.gaps.zipWithIndex.foreach((gap, k) => assertAtLeast(s"the delay before run ${k + 2}", gap, 95))

  test("RepeatUntilSuccess with maxRepetitions = 3 runs at most 3 times and fails with the last failure"):
    val failures = Failures()
    val o = scheduled(RepeatUntilSuccess(50, maxRepetitions = 3))(i => throw failures(i))
    assertEquals(o.runs, 3, "maxRepetitions = 3 must mean at most 3 runs")
    assert(failureOf[RuntimeException](o.result) eq failures(3), s"failed with ${o.result}, not the third run's exception")
    assertAtLeast("the whole", o.elapsed, 95)

  test("RepeatUntilSuccess with maxRepetitions = 3 returns a success on the third run"):
    val failures = Failures()
    val o = scheduled(RepeatUntilSuccess(10, maxRepetitions = 3))(i => if i < 3 then throw failures(i) else i)
    assertEquals(o.result, Success(3))
    assertEquals(o.runs, 3)

  test("RepeatUntilSuccess with maxRepetitions = 0 repeats without limit"):
    val failures = Failures()
    val o = scheduled(RepeatUntilSuccess(0, 0))(i => if i <= 20 then throw failures(i) else i)
    assertEquals(o.result, Success(21))
    assertEquals(o.runs, 21)

  test("RepeatUntilFailure(100) fails with the first failure after 4 successes, in at least 400 ms"):
    val failures = Failures()
    val o = scheduled(RepeatUntilFailure(100))(i => if i == 5 then throw failures(5) else i)
    assert(failureOf[RuntimeException](o.result) eq failures(5))
    assertEquals(o.runs, 5)
    assertAtLeast("the whole", o.elapsed, 390)
    o.gaps.zipWithIndex.foreach((gap, k) => assertAtLeast(s"the delay before run ${k + 2}", gap, 95))

  test("RepeatUntilFailure with maxRepetitions = 3 runs at most 3 times and returns the last success"):
    val o = scheduled(RepeatUntilFailure(50, maxRepetitions = 3))(i => s"success $i")
    assertEquals(o.runs, 3, "maxRepetitions = 3 must mean at most 3 runs")
    assertEquals(o.result, Success("success 3"))
    assertAtLeast("the whole", o.elapsed, 95)

  test("RepeatUntilFailure with maxRepetitions = 0 repeats without limit"):
    val failures = Failures()
    val o = scheduled(RepeatUntilFailure(0, 0))(i => if i == 21 then throw failures(21) else i)
    assert(failureOf[RuntimeException](o.result) eq failures(21))
    assertEquals(o.runs, 21)

  // ---------------------------------------------------------------------------------------------
  // Limits and cancellation common to every schedule

  test("maxRepetitions = 1 runs once, with no delay after the run, for every schedule"):
    val failures = Failures()
    val long = 60_000L
    val cases = Vector[(String, TaskSchedule, Int => Int, Try[Int])](
      ("Every", Every(long, 1), identity, Success(1)),
      ("ExponentialBackoff", ExponentialBackoff(long, maxRepetitions = 1), identity, Success(1)),
      ("RepeatUntilSuccess", RepeatUntilSuccess(long, 1), i => throw failures(i), scala.util.Failure(failures(1))),
      ("RepeatUntilFailure", RepeatUntilFailure(long, 1), identity, Success(1))
    )
    for (name, s, body, expected) <- cases do
      val runs = AtomicInteger(0)
      Async.blocking:
        val f = Task(body(runs.incrementAndGet())).schedule(s).run
        assertEquals(resultWithin(f, s"$name with maxRepetitions = 1 to end after its only run"), expected, name)
      assertEquals(runs.get, 1, name)

  test("cancelling a scheduled task during its delay ends it promptly"):
    val runs = AtomicInteger(0)
    val firstRun = CountDownLatch(1)
    val failure = RuntimeException("keep trying")
    val cancelledAt = AtomicReference[java.lang.Long]()
    Async.blocking:
      val f = Task[Int] {
        runs.incrementAndGet()
        firstRun.countDown()
        throw failure
      }.schedule(RepeatUntilSuccess(60_000)).run
      awaitLatch(firstRun, "the first run")
      cancelledAt.set(System.nanoTime())
      f.cancel()
      assertCancelledNow(f)
    // The scope awaited the task's thread: it ended well before the next run was due.
    val ended = millisSince(cancelledAt.get)
    assert(ended < Patience, s"the cancelled task's thread ended $ended ms after the cancel")
    assertEquals(runs.get, 1)

class TaskOnVirtualThreads extends TaskBehaviour(Runtime.VirtualThreads)
class TaskOnPlatformThreads extends TaskBehaviour(Runtime.PlatformThreads)
