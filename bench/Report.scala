package asyncpipe.bench

import java.nio.file.{Files, Path}

/** Where the numbers were measured: printed above every table and stored in the JSON. */
final case class Machine(cpu: String, cores: Int, os: String, jdk: String)

object Machine:
  def current: Machine =
    val cpu = scala.util.Try {
      scala.io.Source.fromFile("/proc/cpuinfo").getLines().collectFirst {
        case l if l.startsWith("model name") => l.split(":", 2)(1).trim
      }
    }.toOption.flatten.getOrElse(sys.props.getOrElse("os.arch", "unknown"))
    Machine(
      cpu,
      java.lang.Runtime.getRuntime.availableProcessors,
      s"${sys.props("os.name")} ${sys.props("os.version")} ${sys.props("os.arch")}",
      s"${sys.props("java.vm.name")} ${sys.props("java.runtime.version")}"
    )

/** Renders results as terminal tables with a summary of the targets, and as JSON (the chart: [[Chart]]). */
object Report:
  def header(m: Machine): String = s"machine: ${m.cpu}, ${m.cores} cores, ${m.os}; ${m.jdk}\n"

  /** A suite's tables. Comparisons: each subject on a row of its own, then one row per baseline
    * it is compared with ("  vs BASELINE") that carries the ratio, its target and whether it was
    * met. A measurement that already has a row (a baseline shared by two comparisons, a subject
    * that is another's baseline) is named again with "as above" instead of its figures, so every
    * figure is printed once; so is each warning about a noisy measurement. Figures: value,
    * target, status.
    */
  def table(r: SuiteResult): String =
    val pooled =
      if r.partsApart then
        s"each part in ${r.forks} fresh JVMs of its own, their iterations pooled, under the launcher's flags and under JVM defaults (rows marked${Forks.Flags.DefaultsMark}); "
      else if r.forks > 1 then s"${r.forks} JVMs, their iterations pooled; "
      else ""
    val b = StringBuilder(s"\n== ${r.name} ($pooled${seconds(r.seconds)})\n")
    if r.comparisons.nonEmpty then
      val shown = collection.mutable.Set.empty[String]
      def figures(m: Measurement): Seq[String] =
        if shown.add(m.name) then Seq(s"${number(m.median)} ${m.unit}", s"${number(m.min)}-${number(m.max)}", m.bytesPerOp.fold("")(b => f"$b%.0f"))
        else Seq("as above", "", "")
      val bySubject = r.comparisons.groupBy(_.subject.name)
      val rows = r.comparisons.map(_.subject.name).distinct.flatMap { name =>
        val cs = bySubject(name)
        val subjectRow = (name +: figures(cs.head.subject)) ++ Seq("", "", "")
        val baselineRows = cs.map { c =>
          (s"  vs ${c.baseline.name}" +: figures(c.baseline)) ++ Seq(ratioOf(c), targetText(c.verdict), status(c.verdict))
        }
        subjectRow +: baselineRows
      }
      b ++= render(Seq("subject", "median", "min-max", "B/op", "ratio", "target", "status") +: rows)
      for m <- r.measurements if m.noisy do
        b ++= f"warning: '${m.name}' spread ${m.spread * 100}%.0f%% between iterations; the machine may be busy\n"
    if r.figures.nonEmpty then
      b ++= render(Seq("figure", "value", "target", "status") +: r.figures.map { f =>
        Seq(f.name, f.verdict.fold(f"${f.value}%,.2f ${f.unit}")(valueOf), targetText(f.verdict), status(f.verdict))
      })
    b.toString

  /** After every suite's table: each missed target (suite, row, measured against the target), or
    * that all were met. `--check` fails the run on the same list.
    */
  def summary(results: Seq[SuiteResult]): String =
    val all = for r <- results; v <- r.verdicts yield (r.name, v)
    val missed = all.filterNot(_._2.met)
    if all.isEmpty then "\nno targets to check\n"
    else if missed.isEmpty then s"\nall ${all.size} targets met\n"
    else
      val lines = missed.map((suite, v) => s"  $suite: ${v.row}: ${valueOf(v)}, target ${v.target.text(v.unit)}")
      lines.mkString(s"\n${missed.size} of ${all.size} targets MISSED:\n", "\n", "\n")

  /** A ratio with two decimals. */
  private[bench] def ratio(x: Double): String = "%.2fx".formatLocal(java.util.Locale.ROOT, x)

  /** A comparison's ratio as the table and the chart show it: see [[valueOf]]. */
  private[bench] def ratioOf(c: Comparison): String = c.verdict.fold(ratio(c.ratio))(valueOf)

  /** A value held to a target, with two decimals, or more where two would make a missed target
    * look met (0.866x against ">= 0.87x" would read "0.87x"), or a met one look missed.
    */
  private[bench] def valueOf(v: Verdict): String =
    def rounded(d: Int) = BigDecimal(v.measured).setScale(d, BigDecimal.RoundingMode.HALF_UP).toDouble
    val decimals =
      if v.measured.isNaN || v.measured.isInfinite then 2
      else (2 to 6).find(d => v.target.met(rounded(d)) == v.met).getOrElse(6)
    val n = s"%,.${decimals}f".formatLocal(java.util.Locale.ROOT, v.measured)
    if v.unit == Target.Ratio then n + Target.Ratio else s"$n ${v.unit}"

  private def targetText(v: Option[Verdict]): String = v.fold("")(v => v.target.text(v.unit))
  private def status(v: Option[Verdict]): String = v.fold("")(_.status)

  /** The closing line: how many suites, in how long (the full run's target is under 5 minutes). */
  def footer(results: Seq[SuiteResult], total: Double): String =
    s"\n${results.size} suite${if results.size == 1 then "" else "s"} in ${seconds(total)}\n"

  /** A duration: whole seconds, with a tenth below 10 s (the timers suite takes under one). */
  private def seconds(s: Double): String =
    (if s < 10 then "%.1f s" else "%.0f s").formatLocal(java.util.Locale.ROOT, s)

  /** A figure with three significant digits at least: millions of ops/s in whole numbers, a few
    * runs/s with their decimals.
    */
  private[bench] def number(x: Double): String =
    val pattern = if math.abs(x) >= 100 then "%,.0f" else if math.abs(x) >= 10 then "%.1f" else "%.2f"
    pattern.formatLocal(java.util.Locale.ROOT, x)

  private def render(rows: Seq[Seq[String]]): String =
    val widths = rows.transpose.map(_.map(_.length).max)
    rows.map(r => r.zip(widths).map((cell, w) => cell.padTo(w, ' ')).mkString("  ").stripTrailing).mkString("", "\n", "\n")

  // ---------------------------------------------------------------------------------------------
  // JSON: {"machine": {...}, "suites": [{"name", "forks", "partsApart", "seconds", "comparisons": [{"subject": M,
  // "baseline": M, "ratio", "target", "met"}], "figures": [{"name", "value", "unit", "target", "met"}]}]},
  // where M is {"name", "unit", "median", "min", "max", "iterations": [...], "bytesPerOp", "gcCount"};
  // "target" is the target's text as the table shows it and "met" whether it was met (both null
  // where there is no target).

  def json(machine: Machine, results: Seq[SuiteResult]): String =
    def str(s: String) = "\"" + s.flatMap {
      case '"' => "\\\""; case '\\' => "\\\\"; case '\n' => "\\n"; case c if c < ' ' => f"\\u${c.toInt}%04x"; case c => c.toString
    } + "\""
    def num(d: Double) = if d.isNaN || d.isInfinite then "null" else d.toString
    def target(v: Option[Verdict]) = Seq("target" -> v.fold("null")(v => str(v.target.text(v.unit))), "met" -> v.fold("null")(_.met.toString))
    def obj(fields: (String, String)*) = fields.map((k, v) => s"${str(k)}: $v").mkString("{", ", ", "}")
    def arr(items: Seq[String]) = items.mkString("[", ", ", "]")
    def meas(m: Measurement) = obj(
      "name" -> str(m.name), "median" -> num(m.median), "min" -> num(m.min), "max" -> num(m.max),
      "unit" -> str(m.unit), "iterations" -> arr(m.perIteration.map(num)), "bytesPerOp" -> m.bytesPerOp.fold("null")(num),
      "gcCount" -> m.gcCount.toString
    )
    obj(
      "machine" -> obj("cpu" -> str(machine.cpu), "cores" -> machine.cores.toString, "os" -> str(machine.os), "jdk" -> str(machine.jdk)),
      "suites" -> arr(results.map { r =>
        obj(
          "name" -> str(r.name),
          "forks" -> r.forks.toString,
          "partsApart" -> r.partsApart.toString,
          "seconds" -> num(r.seconds),
          "comparisons" -> arr(r.comparisons.map(c =>
            obj(Seq("subject" -> meas(c.subject), "baseline" -> meas(c.baseline), "ratio" -> num(c.ratio)) ++ target(c.verdict)*))),
          "figures" -> arr(r.figures.map(f =>
            obj(Seq("name" -> str(f.name), "value" -> num(f.value), "unit" -> str(f.unit)) ++ target(f.verdict)*)))
        )
      })
    ) + "\n"

  /** Writes `text` to `path`, whose directory exists ([[ReportFile]] checked it before the run). */
  def write(path: Path, text: String): Unit = Files.writeString(path, text)
