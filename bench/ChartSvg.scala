package asyncpipe.bench

/** Draws a [[Chart]] as SVG text: each shape one element, its role as the class (the bars carry
  * the comparison they show as `data-row`). The layout is measured with [[TextWidth.estimate]],
  * made for the fonts named here, widest first.
  */
object ChartSvg:
  /** How to lay a chart out for SVG: the viewer picks the font, so widths are estimated. */
  val textWidth: TextWidth = TextWidth.estimate

  def render(chart: Chart): String =
    val b = StringBuilder()
    b ++= s"""<svg xmlns="http://www.w3.org/2000/svg" width="${chart.width}" height="${chart.height}" """ +
      s"""viewBox="0 0 ${chart.width} ${chart.height}" font-family="DejaVu Sans, Verdana, sans-serif">\n"""
    for shape <- chart.shapes do
      b ++= (shape match
        case Shape.Box(x, y, w, h, fill, role, row) =>
          val data = if row.isEmpty then "" else s""" data-row="${esc(row)}""""
          s"""<rect class="$role"$data x="${n(x)}" y="${n(y)}" width="${n(w)}" height="${n(h)}" fill="${fill.hex}"/>"""
        case Shape.Line(x1, y1, x2, y2, colour, width, role) =>
          s"""<line class="$role" x1="${n(x1)}" y1="${n(y1)}" x2="${n(x2)}" y2="${n(y2)}" stroke="${colour.hex}" stroke-width="${n(width)}"/>"""
        case Shape.Text(x, y, text, style, colour, anchor, role) =>
          val weight = if style.bold then """ font-weight="bold"""" else ""
          val at = anchor match
            case Anchor.Start  => ""
            case Anchor.Middle => """ text-anchor="middle""""
            case Anchor.End    => """ text-anchor="end""""
          s"""<text class="$role" x="${n(x)}" y="${n(y)}" font-size="${style.size}"$weight$at fill="${colour.hex}">${esc(text)}</text>"""
      ) + "\n"
    b ++= "</svg>\n"
    b.toString

  /** A coordinate with one decimal at most. */
  private def n(x: Double): String =
    val r = math.round(x * 10) / 10.0
    if r == r.floor then r.toLong.toString else r.toString

  private[bench] def esc(s: String): String =
    s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;")
