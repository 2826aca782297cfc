package asyncpipe.bench

/** A chart of a run's ratios as what to draw: boxes, lines and texts in pixels from the top left.
  * [[Chart.layout]] computes it once; [[ChartSvg]] and [[ChartPng]] only draw it, so that the two
  * files show the same chart.
  */
final case class Chart(width: Int, height: Int, shapes: Seq[Shape])

/** A colour as 0xRRGGBB. */
final case class Colour(rgb: Int):
  def hex: String = f"#$rgb%06x"

/** How a text is set: its size in pixels, and whether bold. */
final case class TextStyle(size: Int, bold: Boolean = false)

/** Which point of a text its `x` names. */
enum Anchor:
  case Start, Middle, End

/** What a chart is made of. `role` says what a shape shows ("bar met", "target", "label"...): the
  * SVG gives it as the class, so that a reader (or a test) can find the bars and the marks.
  */
enum Shape:
  /** A filled rectangle; `row` names the comparison a bar shows. */
  case Box(x: Double, y: Double, w: Double, h: Double, fill: Colour, role: String, row: String = "")
  case Line(x1: Double, y1: Double, x2: Double, y2: Double, colour: Colour, width: Double, role: String)
  /** A text on the baseline `y`. */
  case Text(x: Double, y: Double, text: String, style: TextStyle, colour: Colour, anchor: Anchor, role: String)

/** How wide a text is drawn, in pixels. The PNG measures with the font it draws with; the SVG
  * estimates (the viewer picks the font), generously, so that no label runs past its column.
  */
trait TextWidth:
  def apply(text: String, style: TextStyle): Double

object TextWidth:
  /** An estimate at least as wide as DejaVu Sans and Verdana (the widest of the usual sans-serif
    * fonts, which the SVG asks for first), so wider than Arial or Helvetica: em fractions by
    * class of character, bold an eighth wider.
    */
  val estimate: TextWidth = (text, style) =>
    val ems = text.map {
      case c if "ijl.,:;'|!I ".contains(c) => 0.36
      case c if "frt()[]-/".contains(c)     => 0.46
      case c if "mwMW%@".contains(c)        => 1.04
      case c if "<>=+~#&".contains(c)       => 0.86
      case c if c.isDigit                   => 0.66
      case c if c.isUpper                   => 0.78
      case _                                => 0.64
    }.sum
    ems * style.size * (if style.bold then 1.125 else 1.0)

object Chart:
  // Colours: met, missed and no target are told apart by words too (the status column), so the
  // chart reads in grey print and for those who do not see red and green apart.
  val Met: Colour = Colour(0x2e7d32)
  val Missed: Colour = Colour(0xc62828)
  val NoTarget: Colour = Colour(0x9e9e9e)
  private val Ink = Colour(0x212121)
  private val Grey = Colour(0x616161)
  private val Grid = Colour(0xdddddd)
  private val Stripe = Colour(0xf3f3f3)
  private val White = Colour(0xffffff)

  private val Margin = 20.0
  private val Gap = 14.0
  private val PlotWidth = 480.0
  private val RowHeight = 40.0
  private val BarHeight = 16.0
  private val HeadingHeight = 32.0
  private val NoteHeight = 22.0
  /** The shortest bar, in pixels: a ratio near 1.0x would otherwise hide under the 1.0x line. */
  private val MinBar = 3.0

  private val Title = TextStyle(17, bold = true)
  private val Caption = TextStyle(12)
  private val Heading = TextStyle(15, bold = true)
  private val Subject = TextStyle(13)
  private val Versus = TextStyle(12)
  private val Value = TextStyle(13, bold = true)
  private val Small = TextStyle(12)
  private val Tick = TextStyle(11)

  /** The largest half-width the axis may have: 1000x either way; a ratio past it is drawn to the
    * edge, its value written beside it as measured.
    */
  private val MaxSpan = 1000.0

  /** The chart of `results`: one group per suite under its name, with how many of its targets
    * were met; one bar per comparison on a logarithmic axis centred on 1.0x (a win grows right, a
    * loss left, each as long as its factor: 0.07x as far left as 14x right), its target's mark across it, and in columns to
    * the right the ratio, "met" / "MISSED" and the target; a suite's missed figures as lines of
    * text. `caption` names the machine. Texts are measured with `width`.
    */
  def layout(results: Seq[SuiteResult], caption: String, width: TextWidth): Chart =
    val comparisons = results.flatMap(_.comparisons)
    val axis = Axis(comparisons)

    // Columns, left to right: labels, plot, ratio, status, target.
    val labelWidth = (comparisons.map(c => width(c.subject.name, Subject)) ++ comparisons.map(c => width(versus(c), Versus)) :+ 0.0).max
    val plotX0 = Margin + labelWidth + Gap * 2
    val plotX1 = plotX0 + PlotWidth
    val valueX = plotX1 + Gap + (comparisons.map(c => width(Report.ratioOf(c), Value)) :+ 0.0).max
    val statusX = valueX + Gap
    val targetX = statusX + Seq("MISSED", "met", "no target").map(width(_, Value)).max + Gap
    val columnsEnd = targetX + (comparisons.map(c => width(targetText(c), Small)) :+ 0.0).max

    val shapes = Vector.newBuilder[Shape]
    val texts = Vector.newBuilder[Shape] // drawn last, above the grid and the bars
    var y = Margin
    texts += Shape.Text(Margin, y + 17, "asyncpipe bench: subject / baseline throughput ratio", Title, Ink, Anchor.Start, "title")
    y += 28
    texts += Shape.Text(Margin, y + 13, caption, Caption, Grey, Anchor.Start, "caption")
    y += 26
    val legendEnd = legend(Margin, y, width, texts)
    y += 22
    val explanation = "Each bar starts at 1.0x: to the right the subject is faster than its baseline, to the left slower (log scale)."
    texts += Shape.Text(Margin, y + 13, explanation, Small, Grey, Anchor.Start, "legend")
    y += 30
    val plotTop = y
    axisLabels(axis, plotX0, y + 11, texts)
    y += 18

    val wide = Vector.newBuilder[Double] // right ends of texts that span columns
    var stripe = false
    val stripes = Vector.newBuilder[Double] // every other row's top: a band across the chart
    for r <- results do
      val verdicts = r.verdicts
      val missed = verdicts.count(!_.met)
      texts += Shape.Text(Margin, y + 22, r.name, Heading, Ink, Anchor.Start, "heading")
      val count =
        if verdicts.isEmpty then "no targets"
        else if missed == 0 then s"${verdicts.size} of ${verdicts.size} targets met"
        else s"$missed of ${verdicts.size} targets MISSED"
      val countX = Margin + width(r.name, Heading) + Gap
      texts += Shape.Text(countX, y + 22, count, Small, if missed > 0 then Missed else Grey, Anchor.Start, "heading")
      wide += countX + width(count, Small)
      y += HeadingHeight
      for c <- r.comparisons do
        if stripe then stripes += y
        stripe = !stripe
        row(c, y, axis, plotX0, valueX, statusX, targetX, shapes, texts)
        y += RowHeight
      for v <- r.figures.flatMap(_.verdict) if !v.met do
        val line = s"MISSED  ${v.row}: ${Report.valueOf(v)}, target ${v.target.text(v.unit)}"
        texts += Shape.Text(Margin, y + 16, line, Small, Missed, Anchor.Start, "figure missed")
        wide += Margin + width(line, Small)
        y += NoteHeight
      if r.comparisons.isEmpty && !r.figures.flatMap(_.verdict).exists(!_.met) then
        texts += Shape.Text(Margin, y + 16, "no ratios: figures only, in the table", Small, Grey, Anchor.Start, "note")
        y += NoteHeight
      y += 6
    val plotBottom = y
    val (gridLines, oneLine) = grid(axis, plotX0, plotTop + 18, plotBottom)
    axisLabels(axis, plotX0, y + 14, texts)
    y += 22 + Margin

    val textsDone = texts.result()
    val right = Seq(columnsEnd, legendEnd) ++ wide.result() ++ textsDone.collect {
      case Shape.Text(x, _, text, style, _, Anchor.Start, role) if role == "title" || role == "caption" || role == "legend" => x + width(text, style)
    }
    val w = math.ceil(right.max + Margin).toInt
    val h = math.ceil(y).toInt
    val bands = stripes.result().map(top => Shape.Box(Margin / 2, top, w - Margin, RowHeight, Stripe, "stripe"))
    // under the bars: the bands and the grid; over them: the 1.0x line each bar starts from, and the texts
    Chart(w, h, (Shape.Box(0, 0, w, h, White, "background") +: bands) ++ gridLines ++ shapes.result() ++ (oneLine +: textsDone))

  /** One comparison's row at `y`: label, bar, target mark, ratio, status, target. */
  private def row(
      c: Comparison, y: Double, axis: Axis, plotX0: Double, valueX: Double, statusX: Double, targetX: Double,
      shapes: collection.mutable.Growable[Shape], texts: collection.mutable.Growable[Shape]
  ): Unit =
    val verdict = c.verdict
    val colour = verdict.fold(NoTarget)(v => if v.met then Met else Missed)
    val status = verdict.fold("none")(v => if v.met then "met" else "missed")
    texts += Shape.Text(Margin, y + 17, c.subject.name, Subject, Ink, Anchor.Start, "label")
    texts += Shape.Text(Margin, y + 33, versus(c), Versus, Grey, Anchor.Start, "label")
    val one = plotX0 + axis.x(1.0)
    axis.position(c.ratio).foreach { x =>
      // at least MinBar wide, on its side of 1.0x: a 0.98x shows which way it leans
      val end = if c.ratio < 1 then math.min(plotX0 + x, one - MinBar) else math.max(plotX0 + x, one + MinBar)
      shapes += Shape.Box(math.min(one, end), y + (RowHeight - BarHeight) / 2, math.abs(end - one), BarHeight, colour, s"bar $status", c.label)
    }
    c.target.foreach { t =>
      val x = plotX0 + axis.x(t.mark)
      shapes += Shape.Line(x, y + 5, x, y + RowHeight - 5, Ink, 3, "target")
    }
    val value = if axis.position(c.ratio).isDefined then Report.ratioOf(c) else "n/a"
    texts += Shape.Text(valueX, y + 25, value, Value, Ink, Anchor.End, "value")
    texts += Shape.Text(statusX, y + 25, verdict.fold("no target")(_.status), if verdict.exists(!_.met) then Value else Small, colour, Anchor.Start, "status")
    texts += Shape.Text(targetX, y + 25, targetText(c), Small, Grey, Anchor.Start, "target text")

  /** The legend, from `x` on the line at `y`: what the colours and the mark mean. Returns where it ends. */
  private def legend(x0: Double, y: Double, width: TextWidth, out: collection.mutable.Growable[Shape]): Double =
    var x = x0
    for (colour, words) <- Seq(Met -> "target met", Missed -> "target MISSED", NoTarget -> "no target") do
      out += Shape.Box(x, y + 2, 14, 12, colour, "legend")
      out += Shape.Text(x + 20, y + 13, words, Small, Ink, Anchor.Start, "legend")
      x += 20 + width(words, Small) + Gap * 1.5
    out += Shape.Line(x + 5, y, x + 5, y + 16, Ink, 3, "legend")
    out += Shape.Text(x + 16, y + 13, "the target", Small, Ink, Anchor.Start, "legend")
    x + 16 + width("the target", Small)

  /** The grid line of every tick but 1.0x, and the 1.0x line. */
  private def grid(axis: Axis, plotX0: Double, top: Double, bottom: Double): (Seq[Shape], Shape) =
    val lines = for t <- axis.ticks if t != 1.0 yield Shape.Line(plotX0 + axis.x(t), top, plotX0 + axis.x(t), bottom, Grid, 1, "grid")
    (lines, Shape.Line(plotX0 + axis.x(1.0), top, plotX0 + axis.x(1.0), bottom, Grey, 1.5, "one"))

  private def axisLabels(axis: Axis, plotX0: Double, y: Double, out: collection.mutable.Growable[Shape]): Unit =
    for t <- axis.ticks do out += Shape.Text(plotX0 + axis.x(t), y, Axis.label(t), Tick, Grey, Anchor.Middle, "tick")

  private def versus(c: Comparison): String = s"vs ${c.baseline.name}"
  private def targetText(c: Comparison): String = c.target.fold("")(t => s"target ${t.text(Target.Ratio)}")

  /** The logarithmic axis of ratios: from 1/`span` to `span`, 1.0x in the middle, `span` the
    * smallest of 2, 5, 10, 20, 50, 100... that leaves room around every ratio and target mark.
    */
  private[bench] final case class Axis(span: Double):
    /** Pixels from the plot's left edge to `ratio` (which must be within the axis). */
    def x(ratio: Double): Double = PlotWidth / 2 * (1 + math.log(ratio) / math.log(span))

    /** Where a bar for `ratio` ends, clamped to the axis; none for a ratio that is not a positive number. */
    def position(ratio: Double): Option[Double] =
      Option.when(ratio > 0 && !ratio.isInfinite)(x(ratio.max(1 / span).min(span)))

    /** Labelled ratios: 1-2-5 in every decade up to 50x; beyond, the decades and 0.5x and 2x
      * (where most ratios are, and labels a decade apart would leave them unread).
      */
    def ticks: Seq[Double] =
      val all =
        if span <= 50 then for k <- -3 to 3; s <- Seq(1.0, 2.0, 5.0) yield s * math.pow(10, k)
        else (-3 to 3).map(math.pow(10, _)) ++ Seq(0.5, 2.0)
      all.filter(t => t >= 1 / span * 0.999 && t <= span * 1.001).sorted

  private[bench] object Axis:
    def apply(comparisons: Seq[Comparison]): Axis =
      val factors = comparisons.flatMap(c => c.ratio +: c.target.map(_.mark).toSeq).filter(r => r > 0 && !r.isInfinite).map(r => math.max(r, 1 / r))
      val needed = (factors :+ 1.0).max * 1.15
      val spans = Iterator.iterate(1.0)(_ * 10).flatMap(d => Seq(2 * d, 5 * d, 10 * d)).takeWhile(_ <= MaxSpan).toSeq
      new Axis(spans.find(_ >= needed).getOrElse(MaxSpan))

    /** "0.05x", "1x", "20x". */
    def label(t: Double): String = BigDecimal(t).round(java.math.MathContext(3)).bigDecimal.stripTrailingZeros.toPlainString + Target.Ratio
