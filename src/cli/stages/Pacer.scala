package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.frames.*

/** `--rate-limit`: at most `perSecond` bytes, or frames, a second through each output. */
final case class RateLimit(perSecond: Long, frames: Boolean):
  def render: String = if frames then s"${perSecond}f" else Reader.renderSize(perSecond)

object RateLimit:
  /** `10M` (bytes a second, binary units as pv's `-L`: 10 MiB/s) or `500f` (frames a second). */
  val reader: Reader[RateLimit] = new Reader[RateLimit]:
    private val bytes = Reader.size(1, 1L << 50)
    private val frames = "([0-9]{1,12})f".r
    def form: String = "RATE"
    def read(text: String): Either[String, RateLimit] = text match
      case frames(n) if n.toLong >= 1 => Right(RateLimit(n.toLong, frames = true))
      case frames(_)                   => Left(s"'$text' is less than 1 frame a second")
      case _ =>
        bytes.read(text) match
          case Right(n) => Right(RateLimit(n, frames = false))
          case Left(_)  => Left(s"'$text' is not a rate: bytes a second as a size (10M, 512k) or frames a second (500f)")

/** Holds one output to a [[RateLimit]], on an absolute schedule from its first write: the piece
  * that follows `n` units goes out `n / rate` seconds after the first, so the waits' rounding
  * never adds up, and a moment of lateness is made up at once. More than [[Pacer.MaxLagNanos]]
  * behind (a stalled reader) is forgiven, not made up in a burst.
  *
  * A batch larger than [[slice]] (a twentieth of a second's worth) is cut at frame boundaries into
  * pieces of at most that much, each written and flushed on its turn, so that the output flows
  * rather than coming in bursts of one read each; a frame larger than a slice goes whole.
  *
  * @param clock nanoseconds, as `System.nanoTime`
  * @param sleep waits that many nanoseconds, or less (a flow's stops the wait: [[Flow]])
  */
final class Pacer(val limit: RateLimit, clock: () => Long = () => System.nanoTime(), sleep: Long => Unit = Pacer.sleepNanos):
  /** The most units one piece holds: a twentieth of a second's worth, at least one. */
  val slice: Long = math.max(1L, limit.perSecond / Pacer.SlicesPerSecond)
  private var start = Long.MinValue
  private var passed = 0L // units passed on since `start`, on the schedule

  /** Waits until the schedule lets `units` more go, and counts them as gone; whether it waited. */
  def admit(units: Long): Boolean =
    val now = clock()
    if start == Long.MinValue then start = now
    var due = start + Pacer.nanosFor(passed, limit.perSecond)
    if now - due > Pacer.MaxLagNanos then // too far behind: start the schedule again from now
      start = now
      passed = 0
      due = now
    val waits = due - now > 0
    if waits then sleep(due - now)
    passed += units
    waits

  /** Whether `batch` goes as one piece of bytes ([[pass]] would not cut it): then the caller may
    * [[admit]] its length and write it itself, with no function passed (the common case of a
    * limit above the flow's rate, on the path of every write).
    */
  def whole(batch: FrameBatch): Boolean = !limit.frames && batch.length <= slice

  /** Hands `batch` to `write` in pieces of at most [[slice]] units, each when the schedule lets it
    * go; `batch` itself (released once cut) when it is one piece. `write` is told whether the
    * piece waited for its turn (then it is due out now: the writer flushes it).
    */
  def pass(batch: FrameBatch)(write: (FrameBatch, Boolean) => Unit): Unit =
    val ends = Pacer.pieceEnds(batch, slice, limit.frames)
    if ends.length == 1 then
      val waited = admit(units(batch, batch.length))
      write(batch, waited)
    else
      val bytes = batch.bytes
      val pieces = new Array[FrameBatch](ends.length)
      var from = 0
      var i = 0
      while i < ends.length do
        val to = ends(i)
        val last = i == ends.length - 1
        pieces(i) = FrameBatch(batch.framing, java.util.Arrays.copyOfRange(bytes, from, to), to - from, terminated = !last || batch.terminated)
        from = to
        i += 1
      batch.release()
      i = 0
      while i < pieces.length do
        val waited = admit(units(pieces(i), pieces(i).length))
        write(pieces(i), waited)
        i += 1

  private def units(b: FrameBatch, length: Int): Long = if limit.frames then b.frameCount else length

object Pacer:
  val SlicesPerSecond = 20
  /** How far behind the schedule an output may fall and still make it up (a busy machine's
    * hiccup, a slow write): a second.
    */
  val MaxLagNanos: Long = 1_000_000_000L

  /** Nanoseconds for `units` at `perSecond`: in a double, exact enough for a schedule (and no
    * allocation per write), capped far from overflow.
    */
  private def nanosFor(units: Long, perSecond: Long): Long =
    math.min(units.toDouble * 1e9 / perSecond, (Long.MaxValue / 4).toDouble).toLong

  private def sleepNanos(nanos: Long): Unit = java.util.concurrent.locks.LockSupport.parkNanos(nanos)

  /** The ends of the pieces `batch` is cut into (offsets after each piece's last byte, the last
    * one `batch.length`): consecutive whole frames, each piece at most `slice` frames (`frames`)
    * or bytes, but at least one frame. `raw` has no frames inside a batch: it is cut every `slice`
    * bytes, or not at all when counting frames.
    */
  def pieceEnds(batch: FrameBatch, slice: Long, frames: Boolean): Array[Int] =
    val length = batch.length
    if length == 0 || (!frames && length <= slice) then return Array(length)
    val ends = Array.newBuilder[Int]
    batch.framing match
      case Framing.Raw =>
        if frames then ends += length
        else
          var at = 0L
          while at < length do
            at = math.min(length.toLong, at + slice)
            ends += at.toInt
      case framing =>
        var inPiece = 0L // frames or bytes in the piece so far
        var start = 0 // where the frame at hand begins
        batch.foreach { (_, offset, n, terminated) =>
          val end = offset + n + (if terminated && framing != Framing.Len then 1 else 0)
          val size = if frames then 1L else (end - start).toLong
          if inPiece > 0 && inPiece + size > slice then
            ends += start
            inPiece = 0
          inPiece += size
          start = end
        }
        ends += length
    ends.result()
