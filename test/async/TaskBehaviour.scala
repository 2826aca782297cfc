package asyncpipe.async

import java.util.concurrent.{ConcurrentHashMap, ConcurrentLinkedQueue, CountDownLatch}
import java.util.concurrent.atomic.{AtomicInteger, AtomicReference}
import scala.concurrent.duration.{Duration, DurationInt, DurationLong}
import scala.util.{Random, Success, Try}
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
    // Run 1 overran the slots at 100 and 200 ms: run 2 takes the one at 300 (or a later one, on a
    // busy machine) and run 3 the next, at 400 ms or later. Catching up the missed slots instead
    // would start run 3 at once after run 2, near 250 ms. (A gap between runs 2 and 3 is no
    // measure: a late start of run 2 shortens it, on the grid.)
    assertAtLeast("the start of run 3 (missed slots must not burst)", o.starts(2) - o.starts(0), 390)

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

  // ---------------------------------------------------------------------------------------------
  // Scheduling: seeded jitter, the observer of pauses, deadlines, overruns and plans. Most of these
  // run on a TestClock, where a run "takes" time by moving the clock: exact and without waiting.

  /** A clock that moves only when slept on, or when a run spends time on it. */
  private final class TestClock extends Clock:
    @volatile var nowMillis = 0L
    def nanoTime(): Long = nowMillis * 1_000_000
    def sleep(millis: Long)(using Async): Unit = nowMillis += millis
    def spend(millis: Long): Unit = nowMillis += millis

  /** Records what the loop tells its observer: (run, pause) of each wait, and the run after which a
    * deadline ended it.
    */
  private final class Pauses extends ScheduleObserver:
    val waits = ConcurrentLinkedQueue[(Long, Pause)]()
    val pastDeadline = AtomicReference[(Long, Pause)]()
    override def waiting(run: Long, pause: Pause): Unit = waits.add(run -> pause)
    override def pastDeadline(run: Long, pause: Pause): Unit = pastDeadline.set(run -> pause)
    def list: List[(Long, Pause)] = waits.toArray.toList.asInstanceOf[List[(Long, Pause)]]
    def millis: List[Long] = list.map(_._2.millis)

  /** Runs `body` (given the run number and the clock) on `s` with a TestClock; the result, the
    * clock time at which each run started, and the observer's record.
    */
  private def onTestClock[T](s: TaskSchedule, deadline: Option[Long] = None, random: Random = Random(1))(
      body: (Int, TestClock) => T): (Try[T], Vector[Long], Pauses) =
    val clock = TestClock()
    val pauses = Pauses()
    val runs = AtomicInteger(0)
    val starts = ConcurrentLinkedQueue[Long]()
    val result = Async.blocking:
      Task {
        starts.add(clock.nowMillis)
        body(runs.incrementAndGet(), clock)
      }.schedule(s, Scheduling(random, pauses, deadline, clock)).run.result
    (result, starts.toArray.toVector.map(_.asInstanceOf[Long]), pauses)

  test("Every with Overrun.Skip: a 250 ms run on a 100 ms grid skips slots 1 and 2, counts them, and resumes at slot 3"):
    val (result, starts, pauses) = onTestClock(Every(100, 4)) { (i, clock) => if i == 1 then clock.spend(250); i }
    assertEquals(result, Success(4))
    assertEquals(starts, Vector(0L, 300, 400, 500), "run starts on the grid after the overrun")
    assertEquals(pauses.list.head, 1L -> Pause(50, 2, 3), "the pause after the overrunning run")
    assertEquals(pauses.list.tail.map(_._2.skipped), List(0L, 0L), "no slot skipped after the others")

  test("Every with Overrun.RunLate: after an overrun the latest missed slot runs at once, the others are skipped, then the grid again"):
    val (result, starts, pauses) = onTestClock(Every(100, 4, overrun = Overrun.RunLate)) { (i, clock) =>
      if i == 1 then clock.spend(250)
      i
    }
    assertEquals(result, Success(4))
    assertEquals(starts, Vector(0L, 250, 300, 400), "the late run at once, then slots 3 and 4")
    assertEquals(pauses.list.head, 1L -> Pause(0, 1, 2), "run at once for slot 2, slot 1 skipped")

  test("Every with jitter keeps each run within the spread of its slot, so nothing drifts over many runs"):
    val (result, starts, _) = onTestClock(Every(100, 200, Jitter.Spread(20)), random = Random(5)) { (i, clock) =>
      clock.spend(3) // each run takes a little time
      i
    }
    assertEquals(result, Success(200))
    assertEquals(starts.head, 0L)
    for (start, k) <- starts.zipWithIndex.drop(1) do
      assert(math.abs(start - k * 100) <= 20, s"run ${k + 1} started at $start ms, more than 20 ms from its slot at ${k * 100} ms")
    assert(starts.distinct.size > 100, s"the jitter moved hardly any run: ${starts.take(10)}")

  test("each Jitter stays within its bounds, and never goes below 0"):
    val random = Random(3)
    def draws(j: Jitter, delay: Long) = Vector.fill(2000)(j(delay, random))
    def within(j: Jitter, delay: Long, lo: Long, hi: Long) =
      val d = draws(j, delay)
      assert(d.forall(x => x >= lo && x <= hi), s"$j of $delay ms gave ${d.min}..${d.max}, expected within $lo..$hi")
      assert(d.distinct.size > 10, s"$j of $delay ms hardly varies: ${d.distinct}")
    within(Jitter.Full, 100, 0, 100)
    within(Jitter.Equal, 100, 50, 100)
    within(Jitter.Percent(10), 200, 180, 220)
    within(Jitter.Spread(30), 100, 70, 130)
    within(Jitter.Spread(500), 100, 0, 600)
    assertEquals(draws(Jitter.Off, 100).distinct, Vector(100L))
    assertEquals(Jitter.Spread(50)(0, random), 0L, "a delay of 0 stays 0")

  test("the same seed gives the same jittered pauses; another seed others"):
    def plan(seed: Long) =
      val pauses = Pauses()
      TaskSchedule.plan(ExponentialBackoff(100, 2, jitter = Jitter.Full), 8, Scheduling(Random(seed), pauses))
      pauses.millis
    assertEquals(plan(42), plan(42))
    assertNotEquals(plan(42), plan(43))

  test("RepeatUntilSuccess and RepeatUntilFailure back off by their factor up to their cap"):
    val failures = Failures()
    val (r1, _, p1) = onTestClock(RepeatUntilSuccess(10, 5, factor = 3, maxDelayMillis = 50)) { (i, _) => throw failures(i) }
    assert(failureOf[RuntimeException](r1) eq failures(5))
    assertEquals(p1.millis, List(10L, 30, 50, 50))
    val (r2, _, p2) = onTestClock(RepeatUntilFailure(10, 4, factor = 2)) { (i, _) => i }
    assertEquals(r2, Success(4))
    assertEquals(p2.millis, List(10L, 20, 40))

  test("a deadline: no run begins after it; the observer hears of the run not started, and the last result stands"):
    val failures = Failures()
    val (result, starts, pauses) = onTestClock(RepeatUntilSuccess(100, factor = 2), deadline = Some(350)) { (i, _) => throw failures(i) }
    assertEquals(starts, Vector(0L, 100, 300), "runs at 0, 100 and 300 ms; the next would be at 700")
    assert(failureOf[RuntimeException](result) eq failures(3), s"ended with $result, not the third run's failure")
    assertEquals(pauses.pastDeadline.get, 3L -> Pause(400, 0, 3))

  test("a deadline counts the runs' own time: a run that ends past it is the last"):
    val (result, starts, pauses) = onTestClock(Every(100), deadline = Some(250)) { (i, clock) => clock.spend(40); i }
    assertEquals(starts, Vector(0L, 100, 200))
    assertEquals(result, Success(3))
    assertEquals(pauses.pastDeadline.get._1, 3L)

  test("the observer is told each pause before the loop waits it: the real gaps are at least the pauses told"):
    val pauses = Pauses()
    val starts = ConcurrentLinkedQueue[Long]()
    val t0 = System.nanoTime()
    Async.blocking:
      Task { starts.add(millisSince(t0)); () }
        .schedule(RepeatUntilFailure(20, 4, factor = 2, jitter = Jitter.Equal), Scheduling(Random(9), pauses)).run.value
    val s = starts.toArray.toVector.map(_.asInstanceOf[Long])
    assertEquals(pauses.list.map(_._1), List(1L, 2, 3))
    for ((_, p), k) <- pauses.list.zipWithIndex do
      assertAtLeast(s"the gap before run ${k + 2}", s(k + 1) - s(k), p.millis - 1)

  test("plan gives the pauses a real run makes with the same seed, without running or waiting"):
    val schedule = RepeatUntilSuccess(5, 6, factor = 2, jitter = Jitter.Full)
    val planned = Pauses()
    assertEquals(TaskSchedule.plan(schedule, 100, Scheduling(Random(77), planned)), 6L, "the runs of the plan")
    // Not waiting: a plan of an hour of pauses ends long before its first pause would have.
    val t0 = System.nanoTime()
    assertEquals(TaskSchedule.plan(RepeatUntilSuccess(600_000, 7), 100, Scheduling()), 7L)
    assert(millisSince(t0) < 60_000, s"a plan of 6 pauses of 10 minutes took ${millisSince(t0)} ms: it waited")
    val real = Pauses()
    val failures = Failures()
    val runs = AtomicInteger(0)
    Async.blocking:
      Task[Int](throw failures(runs.incrementAndGet())).schedule(schedule, Scheduling(Random(77), real)).run.result
    assertEquals(real.list, planned.list)

  test("plan stops at its limit, at the schedule's cap, and at a deadline"):
    val pauses = Pauses()
    assertEquals(TaskSchedule.plan(Every(1000), 10, Scheduling(observer = pauses)), 10L)
    assertEquals(pauses.millis, List.fill(9)(1000L))
    assertEquals(TaskSchedule.plan(Every(1000, 3), 10, Scheduling()), 3L)
    val ended = Pauses()
    assertEquals(TaskSchedule.plan(RepeatUntilSuccess(100, factor = 2), 10, Scheduling(observer = ended, deadlineMillis = Some(1000))), 4L)
    assertEquals(ended.pastDeadline.get, 4L -> Pause(800, 0, 4))

  test("a schedule or jitter that breaks a rule is refused where it is made"):
    intercept[IllegalArgumentException](Every(0))
    intercept[IllegalArgumentException](RepeatUntilSuccess(10, factor = 0.5))
    intercept[IllegalArgumentException](Jitter.Percent(101))
    intercept[IllegalArgumentException](Jitter.Spread(-1))
    intercept[IllegalArgumentException](Scheduling(deadlineMillis = Some(-1)))

  // ---------------------------------------------------------------------------------------------
  // Durations: every schedule in milliseconds also takes FiniteDurations

  test("each schedule made with durations equals the one made with their milliseconds, rounded up"):
    assertEquals(Every(2.seconds, 3), Every(2000, 3))
    assertEquals(Every(100.millis, jitter = Jitter.Full, overrun = Overrun.RunLate), Every(100, 0, Jitter.Full, Overrun.RunLate))
    assertEquals(ExponentialBackoff(50.millis, 3, 5, maxDelay = 1.second), ExponentialBackoff(50, 3, 5, maxDelayMillis = 1000))
    assertEquals(ExponentialBackoff(50.millis), ExponentialBackoff(50), "Duration.Inf is no cap, as maxDelayMillis's default")
    assertEquals(RepeatUntilFailure(1.second, maxRepetitions = 10), RepeatUntilFailure(1000, maxRepetitions = 10))
    assertEquals(
      RepeatUntilSuccess(100.millis, maxRepetitions = 8, factor = 2, maxDelay = 5.seconds, jitter = Jitter.Equal),
      RepeatUntilSuccess(100, 8, 2, 5000, Jitter.Equal))
    assertEquals(RepeatUntilSuccess(1500.micros), RepeatUntilSuccess(2), "1.5 ms rounds up to 2 ms: a delay is never shorter")
    assertEquals(RepeatUntilSuccess(1.nanosecond), RepeatUntilSuccess(1))
    assertEquals(RepeatUntilFailure(0.seconds), RepeatUntilFailure(0))
    assertEquals(Jitter.Spread(250.millis), Jitter.Spread(250))
    assertEquals(Jitter.Off(2.seconds, Random(1)), 2000.millis)
    assertEquals(Jitter.Full(1500.micros, Random(5)), Jitter.Full(2, Random(5)).millis)
    assertEquals(Scheduling().withDeadline(1.minute).deadlineMillis, Some(60_000L))

  test("a schedule made with durations runs as the one in milliseconds: RepeatUntilSuccess(50.millis) waits at least 50 ms between runs"):
    val failures = Failures()
    val o = scheduled(RepeatUntilSuccess(50.millis, maxRepetitions = 3))(i => if i < 3 then throw failures(i) else i)
    assertEquals(o.result, Success(3))
    assertEquals(o.runs, 3)
    o.gaps.foreach(g => assertAtLeast("a gap", g, 49))

  test("Clock.sleep of a duration moves a virtual clock by its milliseconds, rounded up"):
    val clock = Clock.Virtual()
    Async.blocking:
      clock.sleep(1500.micros)
      assertEquals(clock.nanoTime(), 2_000_000L)
      clock.sleep(3.seconds)
      assertEquals(clock.nanoTime(), 3_002_000_000L)

  test("a duration that breaks a rule is refused where it is made, with a message naming it"):
    def refused(expected: String)(make: => Any)(using Location): Unit =
      val e = intercept[IllegalArgumentException](make)
      assert(e.getMessage.contains(expected), s"the message '${e.getMessage}' does not name '$expected'")
    refused("period was 0 seconds, must be > 0")(Every(0.seconds))
    refused("period was -1 seconds, must be > 0")(Every(-1.second))
    refused("delay was -5 milliseconds, must be >= 0")(ExponentialBackoff(-5.millis))
    refused("maxDelay was Duration.MinusInf")(RepeatUntilSuccess(10.millis, maxDelay = Duration.MinusInf))
    refused("maxDelay was -1 seconds")(RepeatUntilFailure(10.millis, maxDelay = -1.second))
    refused("jitter spread was -2 milliseconds")(Jitter.Spread(-2.millis))
    refused("deadline was -1 minutes")(Scheduling().withDeadline(-1.minute))
    refused("backoff factor was 0.5")(RepeatUntilSuccess(10.millis, factor = 0.5))

class TaskOnVirtualThreads extends TaskBehaviour(Runtime.VirtualThreads)
class TaskOnPlatformThreads extends TaskBehaviour(Runtime.PlatformThreads)
