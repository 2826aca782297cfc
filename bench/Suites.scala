package asyncpipe.bench

import asyncpipe.async.*
import asyncpipe.bench.Harness.{onVirtualThread, times}
import java.util.concurrent.Semaphore as JdkSemaphore
import java.util.concurrent.atomic.AtomicBoolean
import scala.collection.immutable.ArraySeq
import scala.concurrent.{ExecutionContext, Promise as ScalaPromise}
import scala.util.Success

/** A group of measurements that `asyncpipe bench NAME` runs. */
trait Suite:
  def name: String
  /** What it measures and why, for `asyncpipe bench --help` and the JSON. */
  def description: String
  def run(h: Harness): SuiteResult
  /** Whether its figures depend on choices a JVM makes once (JIT, thread placement), so that it
    * is measured in [[Plan.forks]] fresh JVMs (see [[Forks]]).
    */
  def forked: Boolean = false
  /** A forked suite's parts, if it is measured part by part: each part's subjects are measured
    * together, in turns, in fresh JVMs of their own, once under the launcher's JVM flags and once
    * under the JVM's defaults (see [[Forks]]), so that no part's figures depend on what another
    * part made the JIT compile, and both the tuned and the default figures are shown. Empty (the
    * default): the suite is one part, measured whole in each fork, under the launcher's flags.
    */
  def parts: Seq[String] = Nil
  /** One of [[parts]], measured in this JVM. */
  def runPart(h: Harness, part: String): SuiteResult =
    throw IllegalArgumentException(s"suite $name has no part '$part'")

object Suites:
  val all: Seq[Suite] = Seq(FutureSuite, RaceSuite, TimerSuite, ChannelSuite, FileSuite, UdpSuite, PipelineSuite, NetSuite, KafkaSuite, TaskSuite)

/** Futures: what a `Future { x }` costs over the virtual thread it runs on (start, complete,
  * await, one at a time from a virtual thread), what a completed-then-mapped Promise costs
  * against Scala's own on the parasitic context, in time and in bytes per operation, and what
  * `parLimit(16)` over 100,000 small tasks costs against a semaphore of 16 permits over a virtual
  * thread per task.
  */
object FutureSuite extends Suite:
  val name = "future"
  val description = "Future start+await vs a raw virtual thread; Promise complete+map vs Scala's Promise; parLimit(16) vs a Semaphore(16) over virtual threads"
  override val forked = true // see Forks: Promise+map ratios 1.02-1.30x between single runs

  private val ok = Success(1)
  private val inc: Int => Int = _ + 1

  def run(h: Harness): SuiteResult =
    val IndexedSeq(thread, future) = onVirtualThread {
      h.measureTogether(
        Subject("virtual thread start+join", 200_000)(k => times(k)(Thread.ofVirtual().start(() => ()).join())),
        Subject("Future start+await", 200_000)(k => Async.blocking(times(k)(Future(1).value)))
      )
    }: @unchecked
    val IndexedSeq(ours, scala) = h.measureTogether(
      Subject("Promise complete+mapValue", 2_000_000, Allocation.CallingThread) { k =>
        times(k) { val p = Promise[Int](); p.complete(ok); p.mapValue(inc) }
      },
      Subject("scala Promise complete+map", 2_000_000, Allocation.CallingThread) { k =>
        times(k) { val p = ScalaPromise[Int](); p.complete(ok); p.future.map(inc)(using ExecutionContext.parasitic) }
      }
    ): @unchecked
    // parLimit's own work per body (a worker takes an index, runs the body in a scope of its own,
    // stores the value) against the hand-written way to bound virtual threads: one per task, each
    // holding one of 16 permits while it runs. The same task both ways, results in input order.
    val perCall = h.plan.ops(ParTasks)
    val IndexedSeq(limited, semaphore) = onVirtualThread {
      h.measureTogether(
        Subject(f"parLimit($Parallelism) of $perCall%,d tasks", ParCalls * ParTasks, Allocation.AllThreads) { k =>
          inCalls(k, perCall) { count =>
            checked(Async.blocking(parLimit(Parallelism)(Vector.tabulate[Async ?=> Int](count)(i => smallTask(i)))))
          }
        },
        Subject(f"Semaphore($Parallelism) over $perCall%,d virtual threads", ParCalls * ParTasks, Allocation.AllThreads) { k =>
          inCalls(k, perCall)(count => checked(semaphoreOverVirtualThreads(count)))
        }
      )
    }: @unchecked
    // the Promise target was one text, ">= 1.0x, <= 48 B/op": two numbers, so two targets, the
    // allocation one a figure of its own (as the channels suite's)
    SuiteResult(name, Seq(
      Comparison(future, thread, Some(Target.atLeast(0.8))),
      Comparison(ours, scala, Some(Target.atLeast(1.0))),
      Comparison(limited, semaphore, Some(Target.atLeast(0.8)))
    ), ours.bytesPerOp.toSeq.map { b =>
      Figure("Promise complete+mapValue allocation per operation", b, "B/op", Some(Target.atMost(48)))
    })

  // The parLimit rows (issue 40): each call runs ParTasks tasks (scaled by the plan), a
  // measurement ParCalls calls: about 0.3 s of parLimit and 0.7 s of the semaphore on 2 busy cores.
  private val Parallelism = 16
  private val ParTasks = 100_000
  private val ParCalls = 20

  /** `k` tasks as calls of `call` with at most `perCall` tasks each. */
  private def inCalls(k: Int, perCall: Int)(call: Int => Unit): Unit =
    var left = k
    while left > 0 do
      val count = math.min(left, perCall)
      call(count)
      left -= count

  /** Fails the suite unless the last result is the last task's: the values are used, and in order. */
  private def checked(results: Seq[Int]): Unit =
    val last = results.size - 1
    if results(last) != smallTask(last) then
      throw IllegalStateException(s"result $last was ${results(last)}, not ${smallTask(last)}")

  /** The small task of the parLimit rows: eight rounds of multiply and xor-shift of `i`, whose
    * value is kept (so it cannot be optimised away), a few nanoseconds: what is measured is the
    * cost of running a task, not the task.
    */
  private def smallTask(i: Int): Int =
    var x = i
    var r = 0
    while r < 8 do
      x = x * 0x9e3779b9 + r
      x ^= x >>> 15
      r += 1
    x

  /** The baseline of parLimit, as the JDK suggests bounding virtual threads (JEP 444: a semaphore,
    * not a pool): a virtual thread per task, started at once, each running its task while it holds
    * one of `Parallelism` permits; all joined, the values in input order. (Taking the permit in the
    * starting loop instead, so that at most 16 threads live, was 2.6 times slower in a trial: the
    * starting thread parks and is woken for every task.)
    */
  private def semaphoreOverVirtualThreads(count: Int): Seq[Int] =
    val permits = JdkSemaphore(Parallelism)
    val results = new Array[Int](count)
    val threads = new Array[Thread](count)
    var i = 0
    while i < count do
      val j = i
      threads(i) = Thread.ofVirtual().start { () =>
        permits.acquire()
        try results(j) = smallTask(j)
        finally permits.release()
      }
      i += 1
    i = 0
    while i < count do
      threads(i).join()
      i += 1
    ArraySeq.unsafeWrapArray(results)

/** Races: `Async.race` of three futures that finish after 5, 10 and 15 ms, against awaiting the
  * fastest alone and against three virtual threads that set a flag the caller spins on. The
  * sleeps dominate; the ratio shows what racing adds.
  */
object RaceSuite extends Suite:
  val name = "race"
  val description = "Async.race of three futures vs awaiting the fastest vs a spin on an atomic flag"

  def run(h: Harness): SuiteResult =
    onVirtualThread {
      Async.blocking {
        def three() = (Future { Thread.sleep(5); 1 }, Future { Thread.sleep(10); 2 }, Future { Thread.sleep(15); 3 })
        val IndexedSeq(race, fastest, spin) = h.measureTogether(
          Subject("race of three", 40) { k =>
            times(k) { val (a, b, c) = three(); Async.await(Async.race(a, b, c)); b.cancel(); c.cancel() }
          },
          Subject("await the fastest", 40) { k =>
            times(k) { val (a, b, c) = three(); a.value; b.cancel(); c.cancel() }
          },
          Subject("spin on a flag", 40) { k =>
            times(k) {
              val done = AtomicBoolean(false)
              val ts = Seq(5, 10, 15).map { ms =>
                Thread.ofVirtual().start(() => try { Thread.sleep(ms); done.set(true) } catch case _: InterruptedException => ())
              }
              while !done.get do Thread.onSpinWait()
              ts.foreach(_.interrupt())
            }
          }
        ): @unchecked
        SuiteResult(name, Seq(Comparison(race, fastest, Some(Target.atLeast(0.95))), Comparison(race, spin, None)), Nil)
      }
    }

/** Timers: 100,000 pending timers share one scheduler thread (heap they hold, threads they add),
  * and how late a timer rings under a load of 2,000 concurrent ones.
  */
object TimerSuite extends Suite:
  val name = "timers"
  val description = "heap and threads for 100,000 pending timers; lateness of ringing timers"

  def run(h: Harness): SuiteResult =
    val rt = java.lang.Runtime.getRuntime
    System.gc()
    val heapBefore = rt.totalMemory - rt.freeMemory
    val threadsBefore = Thread.activeCount
    val timers = Array.fill(100_000)(Timer(600_000))
    System.gc()
    val heapMiB = ((rt.totalMemory - rt.freeMemory) - heapBefore) / 1048576.0
    val addedThreads = Thread.activeCount - threadsBefore
    timers.foreach(_.cancel())
    val lateness = onVirtualThread {
      Async.blocking {
        val fired = (0 until 2000).map { i =>
          val delay = (i % 50 + 1).toLong
          val due = System.nanoTime() + delay * 1_000_000L
          val t = Timer(delay)
          Future { Async.await(t); (System.nanoTime() - due) / 1e6 }
        }
        fired.map(_.value).sorted
      }
    }
    SuiteResult(name, Nil, Seq(
      Figure("heap for 100,000 pending timers", heapMiB, "MiB", Some(Target.below(64))),
      Figure("threads added for them", addedThreads.toDouble, "threads", Some(Target.atMost(1))),
      Figure("lateness, median", lateness(lateness.size / 2), "ms", Some(Target.below(5))),
      Figure("lateness, p99", lateness((lateness.size * 0.99).toInt), "ms", None)
    ))
