package asyncpipe.cli.frames

import java.io.ByteArrayOutputStream
import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets.UTF_8
import scala.util.Random

/** Helpers shared by the frames suites: inputs in chunks of every buffer kind, random frames and
  * cuts, and encoding through a [[FrameWriter]].
  */
object Support:
  val delimitedKinds: Seq[Framing] = Seq(Framing.Lines, Framing.Nul)
  val boundaryKinds: Seq[Framing] = Seq(Framing.Lines, Framing.Nul, Framing.Len)

  def bytes(s: String): Array[Byte] = s.getBytes(UTF_8)

  /** `a[from, to)` as the kind of ByteBuffer a reader might hand over: 0 a wrapped array at a
    * position, 1 a slice (non-zero arrayOffset), 2 a direct buffer, 3 a read-only heap buffer (no
    * accessible array).
    */
  def chunk(a: Array[Byte], from: Int, to: Int, kind: Int): ByteBuffer = kind match
    case 0 => ByteBuffer.wrap(a, from, to - from)
    case 1 => ByteBuffer.wrap(a, from, to - from).slice()
    case 2 =>
      val d = ByteBuffer.allocateDirect(to - from)
      d.put(a, from, to - from).flip()
    case _ => ByteBuffer.wrap(a, from, to - from).asReadOnlyBuffer()

  /** Encodes through a FrameWriter with a buffer of `bufferSize` bytes. */
  def encode(framing: Framing, frames: Seq[Frame], bufferSize: Int = 64): Array[Byte] =
    val out = ByteArrayOutputStream()
    val writer = FrameWriter(FrameEncoder(framing), (b, o, l) => out.write(b, o, l), bufferSize)
    frames.foreach(writer.write)
    writer.flush()
    out.toByteArray

  def randomCuts(n: Int, rnd: Random): Seq[Int] =
    if n == 0 then Seq.empty
    else
      val meanChunk = 1 + rnd.nextInt(math.max(1, n / (1 + rnd.nextInt(8))))
      Iterator.iterate(0)(_ + 1 + rnd.nextInt(2 * meanChunk)).drop(1).takeWhile(_ < n).toSeq

  /** Bytes biased towards the interesting ones: terminators, CR, 0. */
  def randomByte(rnd: Random): Byte = rnd.nextInt(8) match
    case 0 => '\n'
    case 1 => 0
    case 2 => '\r'
    case _ => rnd.nextInt(256).toByte

  /** A random frame set that `framing` can represent: payloads without its terminator, and for
    * lines and nul perhaps a non-empty last frame without terminator.
    */
  def randomFrames(framing: Framing, rnd: Random): Vector[Frame] =
    val d = framing.delimiter
    val count = rnd.nextInt(if rnd.nextInt(10) == 0 then 200 else 12)
    val frames = Vector.fill(count) {
      val length = rnd.nextInt(10) match
        case 0 | 1 => 0
        case 2     => rnd.nextInt(3000)
        case _     => rnd.nextInt(20)
      val a = Array.fill(length) {
        var b = randomByte(rnd)
        while b == d do b = randomByte(rnd)
        b
      }
      Frame(a)
    }
    if delimitedKinds.contains(framing) && frames.nonEmpty && frames.last.length > 0 && rnd.nextInt(3) == 0 then
      frames.init :+ Frame(frames.last.bytes, terminated = false)
    else frames

  def show(a: Array[Byte]): String = Frame(a).toString

  /** True when `f` holds the terminator of `framing` (so it cannot be written with it). */
  def holds(framing: Framing, f: Frame): Boolean =
    framing.delimiter >= 0 && (0 until f.length).exists(i => f.bytes(i) == framing.delimiter.toByte)

  def interceptFraming(body: => Any)(using munit.Location): FramingException =
    munit.Assertions.intercept[FramingException](body)

  def assertMentions(e: Throwable, parts: String*)(using munit.Location): Unit =
    for p <- parts do
      munit.Assertions.assert(e.getMessage.contains(p), s"expected the message to mention '$p', got: ${e.getMessage}")
