package asyncpipe.bench

import java.lang.management.ManagementFactory
import scala.jdk.CollectionConverters.*

/** How long and how often to measure: warm-up runs, then timed iterations. */
final case class Plan(warmup: Int, iterations: Int, scale: Double):
  /** `ops` scaled down for a quick run, never below 1. */
  def ops(full: Int): Int = math.max(1, (full * scale).toInt)

object Plan:
  val Full: Plan = Plan(warmup = 3, iterations = 7, scale = 1.0)
  val Quick: Plan = Plan(warmup = 1, iterations = 3, scale = 0.05)

/** One measured subject: a figure per iteration, higher is better (throughput in ops/s unless
  * `unit` says otherwise), allocation and GC figures.
  */
final case class Measurement(
    name: String,
    perIteration: Seq[Double],
    bytesPerOp: Option[Double],
    gcCount: Long,
    unit: String = "ops/s"
):
  require(perIteration.nonEmpty, s"measurement '$name' has no iterations")
  private val sorted = perIteration.sorted
  def median: Double = sorted(sorted.size / 2)
  def min: Double = sorted.head
  def max: Double = sorted.last
  /** (max - min) / median: above `Measurement.NoisySpread` the figures deserve a re-run. */
  def spread: Double = (max - min) / median
  def noisy: Boolean = spread > Measurement.NoisySpread

object Measurement:
  val NoisySpread = 0.25

/** A subject against its baseline, measured in the same run; `ratio` = subject / baseline
  * throughput, so above 1 is faster. `target` states the goal the ratio is held to, if any.
  */
final case class Comparison(subject: Measurement, baseline: Measurement, target: Option[String]):
  def ratio: Double = subject.median / baseline.median

/** A suite's results: comparisons plus free-standing figures (heap, lateness) with their units. */
final case class SuiteResult(name: String, comparisons: Seq[Comparison], figures: Seq[Figure])
final case class Figure(name: String, value: Double, unit: String, target: Option[String])

/** Measures bodies that run `ops` operations each call. */
final class Harness(val plan: Plan, val progress: String => Unit):
  private val threadBean = ManagementFactory.getThreadMXBean.asInstanceOf[com.sun.management.ThreadMXBean]

  /** Warm-up, then `plan.iterations` timed calls of `body(ops)`; allocation is counted on the
    * calling thread during one extra call (so work done on other threads is not included).
    */
  def measure(name: String, fullOps: Int, countAllocation: Boolean = false)(body: Int => Unit): Measurement =
    val ops = plan.ops(fullOps)
    for i <- 1 to plan.warmup do
      progress(s"$name: warm-up $i/${plan.warmup}")
      body(ops)
    val gcBefore = gcCount()
    val rates = (1 to plan.iterations).map { i =>
      progress(s"$name: iteration $i/${plan.iterations}")
      val t0 = System.nanoTime()
      body(ops)
      ops / ((System.nanoTime() - t0) / 1e9)
    }
    val gcs = gcCount() - gcBefore
    val bytes = Option.when(countAllocation) {
      val id = Thread.currentThread.threadId
      val before = threadBean.getThreadAllocatedBytes(id)
      body(ops)
      (threadBean.getThreadAllocatedBytes(id) - before).toDouble / ops
    }
    Measurement(name, rates, bytes, gcs)

  private def gcCount(): Long =
    ManagementFactory.getGarbageCollectorMXBeans.asScala.map(_.getCollectionCount.max(0L)).sum

object Harness:
  /** `body` `k` times in a plain loop (a `for` over a Range would box the index: 16 B/op). */
  inline def times(k: Int)(inline body: Unit): Unit =
    var i = 0
    while i < k do
      body
      i += 1

  /** Runs `body` on a fresh virtual thread and returns its result (the targets measure from one). */
  def onVirtualThread[T](body: => T): T =
    var result: Either[Throwable, T] = Left(IllegalStateException("virtual thread did not run"))
    Thread.ofVirtual().start(() => result = try Right(body) catch case e: Throwable => Left(e)).join()
    result.fold(e => throw e, identity)
