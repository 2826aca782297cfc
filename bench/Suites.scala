package asyncpipe.bench

import asyncpipe.async.*
import asyncpipe.bench.Harness.{onVirtualThread, times}
import java.util.concurrent.atomic.AtomicBoolean
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

object Suites:
  val all: Seq[Suite] = Seq(FutureSuite, RaceSuite, TimerSuite, ChannelSuite, FileSuite, UdpSuite, PipelineSuite, NetSuite, KafkaSuite, TaskSuite)

/** Futures: what a `Future { x }` costs over the virtual thread it runs on (start, complete,
  * await, one at a time from a virtual thread), and what a completed-then-mapped Promise costs
  * against Scala's own on the parasitic context, in time and in bytes per operation.
  */
object FutureSuite extends Suite:
  val name = "future"
  val description = "Future start+await vs a raw virtual thread; Promise complete+map vs Scala's Promise"
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
    // the Promise target was one text, ">= 1.0x, <= 48 B/op": two numbers, so two targets, the
    // allocation one a figure of its own (as the channels suite's)
    SuiteResult(name, Seq(
      Comparison(future, thread, Some(Target.atLeast(0.8))),
      Comparison(ours, scala, Some(Target.atLeast(1.0)))
    ), ours.bytesPerOp.toSeq.map { b =>
      Figure("Promise complete+mapValue allocation per operation", b, "B/op", Some(Target.atMost(48)))
    })

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
