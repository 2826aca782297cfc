package asyncpipe.cli.stages

/** What the `--progress` line shows at one moment. `total` (bytes expected: `--size`, or a single
  * regular file's size) is -1 when unknown, `frames` -1 when the frames are not counted (a stream
  * under `--progress` alone counts bytes), `drops` -1 when nothing here drops (no UDP endpoint).
  * Rates are per second: `byteRate` and `frameRate` over the last seconds, `etaRate` over a longer
  * span, steadier, for the time left ([[StatsReporter]] keeps the windows).
  */
final case class Progress(
    bytes: Long,
    byteRate: Double,
    elapsedNanos: Long,
    total: Long = -1,
    etaRate: Double = 0,
    frames: Long = -1,
    frameRate: Double = 0,
    drops: Long = -1
)

/** Lays out the `--progress` line for a terminal `width` columns wide. It is at most `width - 1`
  * characters, so that it never wraps: a wrapped line cannot be rewritten in place, and every
  * refresh would leave one behind (a terminal that puts the cursor past the last column on the
  * last character wraps at the next one).
  *
  * The fields, left to right, separated by two spaces:
  * {{{
  * 118.3 MB  45.2 MB/s  0:03  1.2M frames  401.5k frames/s  3 dropped  [=====>     ]  45%  ETA 0:04
  * bytes     rate       time  frames       frames/s         drops      bar            %    ETA
  * }}}
  * Frames and frames/s are shown when counted, drops when something here can drop (or did); the
  * bar, percent and ETA when the total is known. Each field is whole or absent: as the width
  * shrinks, the least important goes first, in [[Field.leastImportantFirst]] order (frames/s,
  * frames, drops, ETA, percent, time, rate); the bytes stay, cut at the width if they must. The
  * bar takes whatever width the fields leave once all of them are shown (when at least [[MinBar]]
  * cells are).
  *
  * One instance draws one line again and again: it writes into builders it keeps, so that a
  * refresh allocates nothing; [[render]]'s result is valid until the next call.
  */
final class ProgressLine:
  import ProgressLine.*

  private val fields = Field.values
  private val parts = Array.fill(fields.length)(java.lang.StringBuilder(32))
  private val line = java.lang.StringBuilder(256)

  /** The line for `p` on a terminal of `width` columns: at most `width - 1` characters. */
  def render(p: Progress, width: Int): java.lang.StringBuilder =
    line.setLength(0)
    val limit = width - 1
    if limit <= 0 then return line
    var i = 0
    while i < parts.length do
      parts(i).setLength(0)
      write(fields(i), p, parts(i))
      i += 1
    // The length of the shown fields with their separators; drop the least important until it fits.
    var length = 0
    var shown = 0
    i = 0
    while i < parts.length do
      if parts(i).length > 0 then
        length += parts(i).length
        shown += 1
      i += 1
    length += Separator.length * math.max(0, shown - 1)
    val whole = length
    i = 0
    while length > limit && i < Field.leastImportantFirst.length do
      val part = parts(Field.leastImportantFirst(i).ordinal)
      if part.length > 0 then
        length -= part.length + Separator.length
        part.setLength(0)
      i += 1
    // The bar takes the room the fields leave, all of them: its separator, its brackets and at
    // least MinBar cells. A field left out says more than a bar the width of it.
    val room = limit - length - Separator.length - 2
    val cells = if p.total > 0 && length == whole && room >= MinBar then room else 0
    i = 0
    while i < parts.length do
      if fields(i) == Field.Percent && cells > 0 then appendBar(cells, p)
      if parts(i).length > 0 then
        if line.length > 0 then line.append(Separator)
        line.append(parts(i))
      i += 1
    if line.length > limit then line.setLength(limit) // the bytes alone are wider than the terminal
    line

  private def appendBar(cells: Int, p: Progress): Unit =
    if line.length > 0 then line.append(Separator)
    val done = if p.bytes >= p.total then cells else (cells * (p.bytes.toDouble / p.total)).toInt
    line.append('[')
    var c = 0
    while c < cells do
      line.append(if c < done then '=' else if c == done then '>' else ' ')
      c += 1
    line.append(']')

  /** The text of `field` for `p` into `b`; nothing when the field is not shown. */
  private def write(field: Field, p: Progress, b: java.lang.StringBuilder): Unit =
    field match
      case Field.Bytes   => Quantities.appendBytes(b, p.bytes)
      case Field.Rate    => Quantities.appendBytes(b, math.round(p.byteRate)).append("/s")
      case Field.Elapsed => Quantities.appendDuration(b, p.elapsedNanos / 1_000_000_000L)
      case Field.Frames =>
        if p.frames >= 0 then Quantities.appendCount(b, p.frames).append(" frames")
      case Field.FrameRate =>
        if p.frames >= 0 then Quantities.appendCount(b, math.round(p.frameRate)).append(" frames/s")
      case Field.Drops =>
        if p.drops >= 0 then Quantities.appendCount(b, p.drops).append(" dropped")
      case Field.Percent =>
        if p.total > 0 then b.append((p.bytes.toDouble * 100 / p.total).toLong).append('%')
      case Field.Eta =>
        if p.total > 0 then
          b.append("ETA ")
          if p.bytes >= p.total then Quantities.appendDuration(b, 0)
          else if p.etaRate <= 0 then b.append("-:--")
          else Quantities.appendDuration(b, math.ceil((p.total - p.bytes) / p.etaRate).toLong)

object ProgressLine:
  /** Between two fields. */
  val Separator = "  "
  /** The fewest cells a bar is drawn with: fewer say nothing the percent does not. */
  val MinBar = 5

  /** The fields in the order they are shown (the bar comes before [[Percent]]). */
  enum Field:
    case Bytes, Rate, Elapsed, Frames, FrameRate, Drops, Percent, Eta

  object Field:
    /** The order fields are left out in as the width shrinks; [[Bytes]] never is. */
    val leastImportantFirst: Array[Field] = Array(FrameRate, Frames, Drops, Eta, Percent, Elapsed, Rate)
