package asyncpipe.cli.frames

import java.io.ByteArrayOutputStream
import java.nio.ByteBuffer
import scala.util.Random
import asyncpipe.async.Watchdog

/** [[BatchReader]]: a stream read into pooled direct buffers, cut into batches of whole frames;
  * the frame limit and its errors.
  */
class BatchReaderTest extends munit.FunSuite with Watchdog:

  /** Feeds `input` to a reader in reads of the sizes `reads` gives, as a stream input does; the
    * batches it emitted, and the bytes of each taken at once (before anything is released).
    */
  private def readAll(framing: Framing, input: Array[Byte], pool: BufferPool, maxFrame: Int, reads: () => Int): Vector[(FrameBatch, Array[Byte])] =
    val reader = BatchReader(framing, pool, maxFrame)
    val out = Vector.newBuilder[(FrameBatch, Array[Byte])]
    val emit: FrameBatch => Unit = b => out += b -> b.bytes.clone()
    var at = 0
    while at < input.length do
      val room = reader.room
      assert(room.hasRemaining, s"no room to read into at $at")
      val n = math.min(math.min(reads(), room.remaining), input.length - at)
      room.put(input, at, n)
      at += n
      reader.filled(emit)
    reader.finish(emit)
    out.result()

  /** `count` random frames of `framing` (empty ones, short ones, and some up to `longest` bytes). */
  private def frames(framing: Framing, count: Int, longest: Int, rnd: Random): Vector[Frame] =
    Vector.fill(count) {
      val n = rnd.nextInt(10) match
        case 0 => 0
        case 1 => rnd.nextInt(longest + 1)
        case _ => rnd.nextInt(12)
      val d = framing.delimiter
      Frame(Array.fill(n)((rnd.nextInt(255) + 1).toByte).map(b => if b == d then 'x'.toByte else b))
    }

  private def encode(framing: Framing, fs: Vector[Frame], lastTerminated: Boolean): Array[Byte] =
    val out = ByteArrayOutputStream()
    val writer = FrameWriter(FrameEncoder(framing), (b, o, l) => out.write(b, o, l))
    fs.zipWithIndex.foreach((f, i) => writer.write(f.bytes, 0, f.length, lastTerminated || i < fs.size - 1))
    writer.flush()
    out.toByteArray

  /** The frames of `input`, by a [[BatchDecoder]]. */
  private def decode(framing: Framing, input: Array[Byte]): Vector[Frame] =
    val d = BatchDecoder(framing)
    val out = Vector.newBuilder[Frame]
    val emit: FrameBatch => Unit = out ++= _.frames
    d.feed(input, 0, input.length)(emit)
    d.finish(emit)
    out.result()

  for framing <- Seq(Framing.Lines, Framing.Nul, Framing.Len); bufferSize <- Seq(8, 64, 4096) do
    test(s"${framing.token}, ${bufferSize}-byte buffers: the batches are the input cut at frame boundaries, frames longer than a buffer included") {
      val rnd = Random(bufferSize * 31 + framing.ordinal)
      for round <- 1 to 40 do
        val fs = frames(framing, rnd.nextInt(60), longest = 3 * bufferSize, rnd)
        val lastTerminated = framing == Framing.Len || rnd.nextBoolean()
        val input = encode(framing, fs, lastTerminated)
        val pool = BufferPool(bufferSize, keep = 4)
        val batches = readAll(framing, input, pool, maxFrame = 10 * bufferSize, () => 1 + rnd.nextInt(2 * bufferSize))
        val joined = batches.flatMap(_._2).toArray
        assert(java.util.Arrays.equals(joined, input), s"round $round: the batches, end to end, are not the input")
        // Each batch holds whole frames: decoding batch by batch gives the frames of the input.
        val decoded = batches.flatMap((b, _) => b.frames)
        assertEquals(decoded, decode(framing, input), s"round $round")
        batches.dropRight(1).foreach((b, _) => assert(b.terminated, s"round $round: only the last batch may be unterminated"))
        batches.foreach((b, bytes) => assertEquals(b.frameCount, FrameBatch(framing, bytes, bytes.length, b.terminated).frameCount))
    }

  test("raw: every read is a batch as it came, never larger than the limit") {
    val input = Array.tabulate[Byte](1000)(_.toByte)
    val batches = readAll(Framing.Raw, input, BufferPool(4096, keep = 2), maxFrame = 100, () => 300)
    assert(batches.forall(_._1.length <= 100), s"batch sizes ${batches.map(_._1.length)}")
    assert(java.util.Arrays.equals(batches.flatMap(_._2).toArray, input))
  }

  test("lines: a frame over the limit fails as soon as it is known to be too long, before the stream ends") {
    val input = Array.fill[Byte](500)('a')
    val e = intercept[FramingException](readAll(Framing.Lines, input ++ "\n".getBytes, BufferPool(16, keep = 2), maxFrame = 100, () => 7))
    // Known too long once a buffer of the largest allowed frame (100 bytes and its newline) is full.
    assertEquals(e.getMessage, FramingException.tooLongMessage(Framing.Lines, 101, exact = false, 100, at = 0))
  }

  test("len: a prefix over the limit fails at once; a stream that ends inside a frame fails at the end") {
    val tooLong = ByteBuffer.allocate(4).putInt(1000).array()
    val e = intercept[FramingException](readAll(Framing.Len, tooLong, BufferPool(64, keep = 2), maxFrame = 100, () => 4))
    assert(e.getMessage.contains("1000"), e.getMessage)
    val cut = ByteBuffer.allocate(6).putInt(10).put(1.toByte).put(2.toByte).array()
    val t = intercept[FramingException](readAll(Framing.Len, cut, BufferPool(64, keep = 2), maxFrame = 100, () => 6))
    assertEquals(t.getMessage, FramingException.truncatedPayload(2, 10, at = 0))
    val header = intercept[FramingException](readAll(Framing.Len, Array[Byte](0, 0), BufferPool(64, keep = 2), maxFrame = 100, () => 2))
    assertEquals(header.getMessage, FramingException.truncatedHeader(2, at = 0))
  }

  // A frame over the limit must not take the whole frames read with it down with it.
  for framing <- Seq(Framing.Lines, Framing.Nul, Framing.Len); bufferSize <- Seq(16, 64, 4096) do
    test(s"$framing, buffers of $bufferSize: every frame before one over the limit is handed on, and the error names its offset") {
      val rnd = Random(bufferSize * 7 + framing.ordinal)
      for round <- 1 to 60 do
        val maxFrame = 40
        val good = frames(framing, rnd.nextInt(50), longest = maxFrame, rnd)
        val prefix = encode(framing, good, lastTerminated = true)
        val bad =
          if framing == Framing.Len then ByteBuffer.allocate(4 + 3).putInt(if rnd.nextBoolean() then Int.MaxValue else maxFrame + 1).array()
          else Array.fill[Byte](maxFrame + 1 + rnd.nextInt(3 * maxFrame))('a') ++ Array(framing.delimiter.toByte)
        val after = encode(framing, frames(framing, rnd.nextInt(5), longest = 10, rnd), lastTerminated = true)
        val input = prefix ++ bad ++ after
        val reader = BatchReader(framing, BufferPool(bufferSize, keep = 4), maxFrame)
        val got = Vector.newBuilder[Frame]
        var at = 0
        val e = intercept[FramingException] {
          while at < input.length do
            val room = reader.room
            val n = math.min(math.min(1 + rnd.nextInt(3 * bufferSize), room.remaining), input.length - at)
            room.put(input, at, n)
            at += n
            reader.filled(b => got ++= b.frames)
          reader.finish(b => got ++= b.frames)
        }
        assertEquals(got.result(), good, s"round $round: the frames before the bad one")
        assert(e.getMessage.contains(s"at byte ${prefix.length} of the stream"), s"round $round: ${e.getMessage}")
    }
