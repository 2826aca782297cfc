package asyncpipe.bench

import java.awt.{BasicStroke, Font, RenderingHints}
import java.awt.font.FontRenderContext
import java.awt.geom.{Line2D, Rectangle2D}
import java.awt.image.BufferedImage

/** Draws a [[Chart]] into an image with java.awt, headless (no display is needed or looked for):
  * the layout is measured with the fonts drawn here, so no text runs past its column.
  */
object ChartPng:
  // Before the first AWT class loads: on a machine with a display (or a DISPLAY variable and
  // none behind it) AWT would otherwise try to connect to it.
  System.setProperty("java.awt.headless", "true")

  /** Anti-aliased text with fractional widths: what is measured is what is drawn. */
  private val context = FontRenderContext(null, true, true)

  private def font(style: TextStyle): Font = Font(Font.SANS_SERIF, if style.bold then Font.BOLD else Font.PLAIN, style.size)

  /** How to lay a chart out for PNG: widths as this renderer's fonts draw them. */
  val textWidth: TextWidth = (text, style) => font(style).getStringBounds(text, context).getWidth

  def render(chart: Chart): BufferedImage =
    val image = BufferedImage(chart.width, chart.height, BufferedImage.TYPE_INT_RGB)
    val g = image.createGraphics()
    try
      g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON)
      g.setRenderingHint(RenderingHints.KEY_TEXT_ANTIALIASING, RenderingHints.VALUE_TEXT_ANTIALIAS_ON)
      g.setRenderingHint(RenderingHints.KEY_FRACTIONALMETRICS, RenderingHints.VALUE_FRACTIONALMETRICS_ON)
      g.setRenderingHint(RenderingHints.KEY_STROKE_CONTROL, RenderingHints.VALUE_STROKE_PURE)
      for shape <- chart.shapes do
        shape match
          case Shape.Box(x, y, w, h, fill, _, _) =>
            g.setColor(java.awt.Color(fill.rgb))
            g.fill(Rectangle2D.Double(x, y, w, h))
          case Shape.Line(x1, y1, x2, y2, colour, width, _) =>
            g.setColor(java.awt.Color(colour.rgb))
            g.setStroke(BasicStroke(width.toFloat, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER))
            g.draw(Line2D.Double(x1, y1, x2, y2))
          case Shape.Text(x, y, text, style, colour, anchor, _) =>
            val f = font(style)
            val w = f.getStringBounds(text, context).getWidth
            val left = anchor match
              case Anchor.Start  => x
              case Anchor.Middle => x - w / 2
              case Anchor.End    => x - w
            g.setFont(f)
            g.setColor(java.awt.Color(colour.rgb))
            g.drawString(text, left.toFloat, y.toFloat)
    finally g.dispose()
    image
