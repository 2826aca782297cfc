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

/** Renders results as a terminal table, as JSON, and as an SVG bar chart of the ratios. */
object Report:
  def header(m: Machine): String = s"machine: ${m.cpu}, ${m.cores} cores, ${m.os}; ${m.jdk}\n"

  def table(r: SuiteResult): String =
    val pooled = if r.forks > 1 then s"${r.forks} JVMs, their iterations pooled; " else ""
    val b = StringBuilder(s"\n== ${r.name} ($pooled${seconds(r.seconds)})\n")
    if r.comparisons.nonEmpty then
      val rows = r.comparisons.flatMap { c =>
        Seq(row(c.subject, f"${c.ratio}%.2fx", c.target.getOrElse("")), row(c.baseline, "baseline", ""))
      }
      b ++= render(Seq("subject", "median", "min-max", "B/op", "ratio", "target") +: rows)
      for c <- r.comparisons; m <- Seq(c.subject, c.baseline) if m.noisy do
        b ++= f"warning: '${m.name}' spread ${m.spread * 100}%.0f%% between iterations; the machine may be busy\n"
    if r.figures.nonEmpty then
      b ++= render(Seq("figure", "value", "", "", "", "target") +: r.figures.map { f =>
        Seq(f.name, f"${f.value}%,.2f ${f.unit}", "", "", "", f.target.getOrElse(""))
      })
    b.toString

  /** The closing line: how many suites, in how long (the full run's target is under 5 minutes). */
  def footer(results: Seq[SuiteResult], total: Double): String =
    s"\n${results.size} suite${if results.size == 1 then "" else "s"} in ${seconds(total)}\n"

  /** A duration: whole seconds, with a tenth below 10 s (the timers suite takes under one). */
  private def seconds(s: Double): String =
    (if s < 10 then "%.1f s" else "%.0f s").formatLocal(java.util.Locale.ROOT, s)

  private def row(m: Measurement, ratio: String, target: String): Seq[String] =
    Seq(m.name, s"${number(m.median)} ${m.unit}", s"${number(m.min)}-${number(m.max)}", m.bytesPerOp.fold("")(b => f"$b%.0f"), ratio, target)

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
  // JSON: {"machine": {...}, "suites": [{"name", "forks", "seconds", "comparisons": [{"subject": M,
  // "baseline": M, "ratio", "target"}], "figures": [{"name", "value", "unit", "target"}]}]}, where M is
  // {"name", "unit", "median", "min", "max", "iterations": [...], "bytesPerOp", "gcCount"}.

  def json(machine: Machine, results: Seq[SuiteResult]): String =
    def str(s: String) = "\"" + s.flatMap {
      case '"' => "\\\""; case '\\' => "\\\\"; case '\n' => "\\n"; case c if c < ' ' => f"\\u${c.toInt}%04x"; case c => c.toString
    } + "\""
    def num(d: Double) = if d.isNaN || d.isInfinite then "null" else d.toString
    def opt(o: Option[String]) = o.fold("null")(str)
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
          "seconds" -> num(r.seconds),
          "comparisons" -> arr(r.comparisons.map(c =>
            obj("subject" -> meas(c.subject), "baseline" -> meas(c.baseline), "ratio" -> num(c.ratio), "target" -> opt(c.target)))),
          "figures" -> arr(r.figures.map(f =>
            obj("name" -> str(f.name), "value" -> num(f.value), "unit" -> str(f.unit), "target" -> opt(f.target))))
        )
      })
    ) + "\n"

  // ---------------------------------------------------------------------------------------------
  // SVG: one horizontal bar per comparison, length = ratio, with a line at 1.0x.

  def svg(results: Seq[SuiteResult]): String =
    val bars = results.flatMap(r => r.comparisons.map(c => (s"${r.name}: ${c.subject.name} vs ${c.baseline.name}", c.ratio)))
    val labelWidth = 430
    val barArea = 360
    val rowHeight = 26
    val scaleMax = math.max(2.0, (bars.map(_._2) :+ 1.0).max * 1.1)
    def x(ratio: Double) = labelWidth + ratio / scaleMax * barArea
    val height = 50 + bars.size * rowHeight
    val width = labelWidth + barArea + 80
    def esc(s: String) = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    val rows = bars.zipWithIndex.map { case ((label, ratio), i) =>
      val y = 30 + i * rowHeight
      val colour = if ratio >= 1 then "#2e7d32" else "#c62828"
      s"""<text x="${labelWidth - 8}" y="${y + 15}" text-anchor="end">${esc(label)}</text>
         |<rect x="$labelWidth" y="${y + 3}" width="${x(ratio) - labelWidth}" height="16" fill="$colour"/>
         |<text x="${x(ratio) + 5}" y="${y + 15}">${f"$ratio%.2f"}x</text>""".stripMargin
    }
    s"""<svg xmlns="http://www.w3.org/2000/svg" width="$width" height="$height" font-family="sans-serif" font-size="13">
       |<rect width="100%" height="100%" fill="white"/>
       |<text x="10" y="18" font-weight="bold">asyncpipe bench: throughput ratio to the baseline (higher is better)</text>
       |${rows.mkString("\n")}
       |<line x1="${x(1.0)}" y1="26" x2="${x(1.0)}" y2="${height - 10}" stroke="black" stroke-dasharray="4 3"/>
       |<text x="${x(1.0) + 3}" y="${height - 12}">1.0x</text>
       |</svg>
       |""".stripMargin

  def write(path: Path, text: String): Unit =
    Option(path.toAbsolutePath.getParent).foreach(Files.createDirectories(_))
    Files.writeString(path, text)
