package asyncpipe.bench

import java.lang.management.ManagementFactory
import scala.jdk.CollectionConverters.*

/** How long and how often to measure: warm-up runs, then timed iterations; suites that are
  * [[Suite.forked]] run in `forks` fresh JVMs (see [[Forks]]).
  */
final case class Plan(warmup: Int, iterations: Int, scale: Double, forks: Int = 1):
  require(warmup >= 0 && iterations >= 1 && scale > 0 && forks >= 1, s"not a plan: $this")

  /** `ops` scaled down for a quick run, never below 1. */
  def ops(full: Int): Int = math.max(1, (full * scale).toInt)

  /** What each of `forks` JVMs does: the whole warm-up, so that a fork differs from a single run
    * only in being a fresh JVM, and `iterations / forks` of the iterations, at least two.
    */
  def perFork: Plan =
    if forks == 1 then this
    else Plan(warmup, iterations = math.max(2, iterations / forks), scale)

  /** The plan of one fork as a command-line word (see [[Plan.parse]]). */
  def spec: String = s"$warmup,$iterations,$scale"

object Plan:
  val Full: Plan = Plan(warmup = 3, iterations = 7, scale = 1.0, forks = 3)
  val Quick: Plan = Plan(warmup = 1, iterations = 3, scale = 0.05)

  /** A fork's plan from its [[Plan.spec]]. */
  def parse(spec: String): Option[Plan] =
    spec.split(',') match
      case Array(w, i, s) =>
        for
          warmup <- w.toIntOption if warmup >= 0
          iterations <- i.toIntOption if iterations >= 1
          scale <- s.toDoubleOption if scale > 0
        yield Plan(warmup, iterations, scale)
      case _ => None

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
  def median: Double = Measurement.medianOfSorted(sorted)
  def min: Double = sorted.head
  def max: Double = sorted.last
  /** (max - min) / median: above `Measurement.NoisySpread` the figures deserve a re-run. */
  def spread: Double = (max - min) / median
  def noisy: Boolean = spread > Measurement.NoisySpread

object Measurement:
  val NoisySpread = 0.25

  /** The median the bench reports everywhere: the middle figure, the upper one of an even count. */
  def medianOf(xs: Seq[Double]): Double = medianOfSorted(xs.sorted)
  private def medianOfSorted(sorted: Seq[Double]): Double = sorted(sorted.size / 2)

/** A subject against its baseline, measured in the same run; `ratio` = subject / baseline
  * throughput, so above 1 is faster. `target` is the goal the ratio is held to, if any.
  */
final case class Comparison(subject: Measurement, baseline: Measurement, target: Option[Target]):
  def ratio: Double = subject.median / baseline.median
  /** How the summary and the chart name it. */
  def label: String = s"${subject.name} vs ${baseline.name}"
  def verdict: Option[Verdict] = target.map(Verdict(label, ratio, Target.Ratio, _))

/** A suite's results: comparisons plus free-standing figures (heap, lateness) with their units;
  * `forks` is how many JVMs measured them (their iterations pooled); `partsApart`, whether each of
  * the suite's parts was measured in JVMs of its own, under the launcher's flags and under JVM
  * defaults (see [[Forks]]); `seconds` is how long the suite took, set by [[Bench.run]] (0 until then).
  */
final case class SuiteResult(name: String, comparisons: Seq[Comparison], figures: Seq[Figure], forks: Int = 1, seconds: Double = 0,
    partsApart: Boolean = false):
  /** Every target of the suite against its value: the comparisons' in order, then the figures'. */
  def verdicts: Seq[Verdict] = comparisons.flatMap(_.verdict) ++ figures.flatMap(_.verdict)

  /** Each measurement once, in the order the comparisons first name it (a baseline may serve
    * several comparisons, a subject several baselines).
    */
  def measurements: Seq[Measurement] = comparisons.flatMap(c => Seq(c.subject, c.baseline)).distinctBy(_.name)

  /** This result and `more` as one: their comparisons and figures, in order. */
  def ++(more: SuiteResult): SuiteResult = copy(comparisons = comparisons ++ more.comparisons, figures = figures ++ more.figures)

  /** The same results with `suffix` after every measurement's and figure's name. */
  def named(suffix: String): SuiteResult =
    def m(x: Measurement) = x.copy(name = x.name + suffix)
    copy(
      comparisons = comparisons.map(c => c.copy(subject = m(c.subject), baseline = m(c.baseline))),
      figures = figures.map(f => f.copy(name = f.name + suffix))
    )

/** A free-standing figure in its `unit`, held to `target` (in the same unit) if it has one. */
final case class Figure(name: String, value: Double, unit: String, target: Option[Target]):
  def verdict: Option[Verdict] = target.map(Verdict(name, value, unit, _))

/** Something to measure: `body(ops)` runs `ops` operations (`fullOps` scaled by the plan). */
final case class Subject(name: String, fullOps: Int, allocation: Allocation = Allocation.NotMeasured)(val body: Int => Unit)

/** Whose allocation a subject's figure counts: none, the calling thread's (the work is done
  * there), or every thread's (the work is done by threads the body starts: virtual threads'
  * own counters read -1, so their carriers are what is counted).
  */
enum Allocation:
  case NotMeasured, CallingThread, AllThreads

/** Measures bodies that run `ops` operations each call. */
final class Harness(val plan: Plan, val progress: String => Unit):
  private val threadBean = ManagementFactory.getThreadMXBean.asInstanceOf[com.sun.management.ThreadMXBean]

  /** One subject alone: see `measureTogether`. */
  def measure(name: String, fullOps: Int, countAllocation: Boolean = false)(body: Int => Unit): Measurement =
    measureTogether(Subject(name, fullOps, if countAllocation then Allocation.CallingThread else Allocation.NotMeasured)(body)).head

  /** Measures subjects that will be compared in turns: every warm-up round and every measured
    * round calls each subject's body once, each round starting one subject later. A shared
    * machine has slow spells (a neighbour's burst, both carrier threads on one core) that last
    * for several calls; measured one after the other, a spell falls on one subject and skews its
    * ratio, while in turns it falls on all of them alike. After the rounds, one more call of each
    * subject that counts allocation does so (see [[Allocation]]).
    */
  def measureTogether(subjects: Subject*): IndexedSeq[Measurement] =
    val n = subjects.size
    val ops = subjects.map(s => plan.ops(s.fullOps)).toIndexedSeq
    for round <- 1 to plan.warmup; j <- 0 until n do
      progress(s"${subjects(j).name}: warm-up $round/${plan.warmup}")
      subjects(j).body(ops(j))
    val rates = IndexedSeq.fill(n)(Seq.newBuilder[Double])
    val gcs = Array.fill(n)(0L)
    for round <- 1 to plan.iterations; t <- 0 until n do
      val j = (round + t) % n
      progress(s"${subjects(j).name}: iteration $round/${plan.iterations}")
      val gcBefore = gcCount()
      val t0 = System.nanoTime()
      subjects(j).body(ops(j))
      val elapsed = System.nanoTime() - t0
      gcs(j) += gcCount() - gcBefore
      rates(j) += ops(j) / (elapsed / 1e9)
    subjects.indices.map { j =>
      val s = subjects(j)
      Measurement(s.name, rates(j).result(), allocatedPerOp(s.allocation, s.body, ops(j)), gcs(j))
    }

  /** Bytes allocated per operation during one call of `body(ops)`, as `allocation` says to count. */
  private def allocatedPerOp(allocation: Allocation, body: Int => Unit, ops: Int): Option[Double] =
    def perOp(count: () => Long): Option[Double] =
      // what reading the counter allocates itself (a few bytes: a Promise of 48 B read 48.00001)
      val first = count()
      val itself = count() - first
      val before = count()
      body(ops)
      val after = count()
      Option.when(first >= 0 && before >= 0 && after >= 0)(math.max(0L, after - before - itself).toDouble / ops)
    allocation match
      case Allocation.NotMeasured          => scala.None
      case Allocation.CallingThread => perOp(() => threadBean.getThreadAllocatedBytes(Thread.currentThread.threadId))
      case Allocation.AllThreads    => perOp(() => threadBean.getTotalThreadAllocatedBytes)

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
