package asyncpipe.bench

import java.nio.file.Path

/** Runs suites and reports them: a table per suite on `out`, then the summary of the targets,
  * progress on `progress` (a terminal only), and optionally JSON and a chart (SVG or PNG). A
  * suite with parts measures those named in `onlyParts` (all if it is empty; the caller checked
  * that each suite with parts keeps at least one).
  */
object Bench:
  def run(
      suites: Seq[Suite],
      plan: Plan,
      out: String => Unit,
      progress: Option[String => Unit],
      json: Option[Path],
      plot: Option[ChartFile],
      onlyParts: Set[String] = Set.empty
  ): Seq[SuiteResult] =
    val machine = Machine.current
    out(Report.header(machine))
    val note = progress.getOrElse((_: String) => ())
    val harness = Harness(plan, note)
    val start = System.nanoTime()
    val results = suites.map { s =>
      note(s"${s.name}: starting")
      val t0 = System.nanoTime()
      val parts = s.parts.filter(p => onlyParts.isEmpty || onlyParts(p))
      val measured =
        if s.forked && plan.forks > 1 then Forks.run(s, plan, note, parts)
        else if s.parts.nonEmpty then parts.map(s.runPart(harness, _)).reduce(_ ++ _)
        else s.run(harness)
      val r = measured.copy(seconds = (System.nanoTime() - t0) / 1e9)
      out(Report.table(r))
      r
    }
    out(Report.summary(results))
    out(Report.footer(results, (System.nanoTime() - start) / 1e9))
    json.foreach(p => Report.write(p, Report.json(machine, results)))
    plot.foreach(_.write(results, Report.header(machine).stripSuffix("\n")))
    results

  /** One fork of a forked suite (see [[Forks]]): measures it (or its `part`) with `plan`, writes the result to `out`. */
  def runFork(suite: Suite, plan: Plan, out: Path, part: Option[String]): Unit =
    val h = Harness(plan, _ => ())
    Report.write(out, Forks.encode(part.fold(suite.run(h))(suite.runPart(h, _))))
