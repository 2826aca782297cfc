package asyncpipe.bench

import Processes.{asyncpipe, q}

/** The task runner as users run it, in real `asyncpipe` processes ([[Processes]]):
  *   - its overhead: `asyncpipe retry --max-attempts 1 -- true` against `asyncpipe --version`
  *     followed by `true`, each in one `sh -c`, in turns (runs per second, so the ratio is the
  *     baseline's time over the runner's: 0.83x is "within 1.2x"). What the runner adds to a
  *     JVM's start: its options, a process group, the first process start of a JVM, the search
  *     for what the command left running.
  *   - fixed-rate drift: the wall time of `every 100ms --count N -- true`; with no drift run N
  *     starts (N - 1) x 100 ms after the first, so the whole takes that plus start-up and one run.
  */
object TaskSuite extends Suite:
  val name = "tasks"
  val description = "task runner: retry of 'true' vs --version then 'true'; every 100ms --count N wall time"

  /** Runs of each side per iteration, in turns. */
  private val RunsPerIteration = 10

  def run(h: Harness): SuiteResult =
    val retry = s"$asyncpipe retry --max-attempts 1 -- true"
    val version = s"$asyncpipe --version >/dev/null && true"
    val runner, baseline = Seq.newBuilder[Double]
    for iteration <- -h.plan.warmup until h.plan.iterations do
      h.progress(s"tasks: retry vs --version, iteration ${iteration + 1}/${h.plan.iterations}")
      var retryNanos, versionNanos = 0L
      for _ <- 1 to RunsPerIteration do
        retryNanos += timed(retry)
        versionNanos += timed(version)
      if iteration >= 0 then
        runner += RunsPerIteration / (retryNanos / 1e9)
        baseline += RunsPerIteration / (versionNanos / 1e9)
    val count = if h.plan.scale < 1 then 10 else 50
    h.progress(s"tasks: every 100ms --count $count")
    val everyMillis = timed(s"$asyncpipe every 100ms --count $count -- true") / 1e6
    SuiteResult(name,
      Seq(Comparison(
        Measurement("asyncpipe retry --max-attempts 1 -- true", runner.result(), None, 0, "runs/s"),
        Measurement("asyncpipe --version, then true", baseline.result(), None, 0, "runs/s"),
        Some(Target.timeWithin(1.2))
      )),
      Seq(Figure(s"every 100ms --count $count -- true: wall time", everyMillis, "ms", Some(Target.below(count * 100 + 100))))
    )

  /** Nanoseconds that sh takes to run `command`, its output discarded; the suite fails if it fails. */
  private def timed(command: String): Long =
    val t0 = System.nanoTime()
    val p = ProcessBuilder("sh", "-c", command)
      .redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectError(ProcessBuilder.Redirect.PIPE).start()
    val err = String(p.getErrorStream.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8)
    val status = p.waitFor()
    val nanos = System.nanoTime() - t0
    if status != 0 then throw IllegalStateException(s"${q(command)} exited $status: ${err.take(2000)}")
    nanos
