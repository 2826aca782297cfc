package asyncpipe.bench

import java.awt.{BasicStroke, Font, RenderingHints}
import java.awt.font.FontRenderContext
import java.awt.geom.{Line2D, Rectangle2D}
import java.awt.image.{BufferedImage, IndexColorModel}
import java.nio.file.Path
import javax.imageio.{IIOImage, ImageIO, ImageWriteParam}

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

  /** The chart drawn in full colour, then reduced to a palette of its own colours ([[indexed]]). */
  def render(chart: Chart): BufferedImage = indexed(drawn(chart), chart)

  private def drawn(chart: Chart): BufferedImage =
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

  /** `image` in 256 colours at most, for a PNG of a third the size (an RGB one of every suite's
    * rows was 170 kB): the chart's own colours and, for each over each background (white, the
    * stripes), the shades anti-aliasing blends them to at text and bar edges. Each pixel takes
    * the nearest of them; a flat chart loses nothing a reader sees.
    */
  private def indexed(image: BufferedImage, chart: Chart): BufferedImage =
    val colours = chart.shapes.map {
      case b: Shape.Box  => b.fill
      case l: Shape.Line => l.colour
      case t: Shape.Text => t.colour
    }.distinct
    val backgrounds = chart.shapes.collect { case b: Shape.Box if b.role == "background" || b.role == "stripe" => b.fill }.distinct
    def blend(fg: Colour, bg: Colour, a: Double): Int =
      def channel(shift: Int) = math.round(((fg.rgb >> shift) & 0xff) * a + ((bg.rgb >> shift) & 0xff) * (1 - a)).toInt
      (channel(16) << 16) | (channel(8) << 8) | channel(0)
    def palette(shades: Int): Seq[Int] =
      (colours.map(_.rgb) ++ (for fg <- colours; bg <- backgrounds; k <- 1 until shades yield blend(fg, bg, k.toDouble / shades))).distinct
    val entries = Iterator.from(16, -1).map(palette).find(_.size <= 256).getOrElse(palette(1).take(256)).toArray
    val model = IndexColorModel(8, entries.length, entries.map(c => (c >> 16).toByte), entries.map(c => (c >> 8).toByte), entries.map(_.toByte))
    val out = BufferedImage(image.getWidth, image.getHeight, BufferedImage.TYPE_BYTE_INDEXED, model)
    val raster = out.getRaster
    val nearest = collection.mutable.HashMap.empty[Int, Int]
    def index(rgb: Int): Int = nearest.getOrElseUpdate(rgb, entries.indices.minBy { i =>
      def d(shift: Int) = ((entries(i) >> shift) & 0xff) - ((rgb >> shift) & 0xff)
      d(16) * d(16) + d(8) * d(8) + d(0) * d(0)
    })
    for y <- 0 until image.getHeight; x <- 0 until image.getWidth do raster.setSample(x, y, 0, index(image.getRGB(x, y) & 0xffffff))
    out

  /** Writes `image` to `path` as PNG, deflated as hard as the writer can: a chart is mostly flat
    * colour, and the smallest file costs a few milliseconds more.
    */
  def write(image: BufferedImage, path: Path): Unit =
    val writers = ImageIO.getImageWritersByFormatName("png")
    if !writers.hasNext then throw IllegalStateException(s"no PNG writer in this JDK for $path")
    val writer = writers.next()
    val param = writer.getDefaultWriteParam
    if param.canWriteCompressed then
      param.setCompressionMode(ImageWriteParam.MODE_EXPLICIT)
      param.setCompressionQuality(0f) // 0: the most compression
    java.nio.file.Files.deleteIfExists(path) // the stream would overwrite in place, leaving a longer old file's tail
    val out = ImageIO.createImageOutputStream(path.toFile)
    try
      writer.setOutput(out)
      writer.write(null, IIOImage(image, null, null), param)
    finally
      out.close()
      writer.dispose()
