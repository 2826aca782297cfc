package asyncpipe.cli.frames

import asyncpipe.cli.frames.Support.*

import java.io.ByteArrayOutputStream
import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets.UTF_8
import scala.util.Random
import asyncpipe.async.Watchdog

/** [[BatchDecoder]]: bytes fed in chunks of any size and of every buffer kind, cut into batches of
  * whole frames; the frame limit and its errors.
  */
class BatchDecoderTest extends munit.FunSuite with Watchdog:

  /** A BatchDecoder whose batches are checked to be whole (and, end to end, to be the input) and
    * flattened into frames.
    */
  private final class Feeder(framing: Framing, maxFrame: Int):
    private val batches = BatchDecoder(framing, maxFrame)
    private val seen = ByteArrayOutputStream() // the bytes of every batch, in order
    private val fed = ByteArrayOutputStream()

    def feed(buf: ByteBuffer): Vector[Frame] =
      val out = Vector.newBuilder[Frame]
      val copy = buf.duplicate()
      val a = new Array[Byte](copy.remaining)
      copy.get(a)
      fed.write(a)
      batches.feed(buf)(b => out ++= whole(b))
      assertEquals(buf.remaining, 0, s"feed left ${buf.remaining} bytes unread")
      out.result()

    def feed(s: String): Vector[Frame] = feed(ByteBuffer.wrap(bytes(s)))

    def finish(): Vector[Frame] =
      val out = Vector.newBuilder[Frame]
      batches.finish(b => out ++= whole(b))
      assert(java.util.Arrays.equals(seen.toByteArray, fed.toByteArray),
        s"the batches, end to end, are not the input: expected ${show(fed.toByteArray)}, got ${show(seen.toByteArray)}")
      out.result()

    /** Checks that `b` holds whole frames only, and returns them. */
    private def whole(b: FrameBatch): Vector[Frame] =
      assert(b.length > 0, s"an empty batch: $b")
      seen.write(b.bytes, 0, b.length)
      framing match
        case Framing.Lines | Framing.Nul =>
          assertEquals(b.bytes(b.length - 1) == framing.delimiter.toByte, b.terminated,
            s"a batch ends with a terminator exactly when it is marked terminated: $b ${show(b.payloadCopy)}")
        case Framing.Len =>
          var i = 0
          while i < b.length do i += 4 + Framing.readLength(b.bytes, i).toInt
          assertEquals(i, b.length, s"the len frames of $b do not end where it ends")
        case Framing.Raw => ()
      b.frames

  extension (b: FrameBatch) private def payloadCopy: Array[Byte] = java.util.Arrays.copyOf(b.bytes, b.length)

  /** Decodes `a` fed in chunks ending at `cuts` (then at the end), then finishes. */
  private def decode(framing: Framing, a: Array[Byte], cuts: Seq[Int], kind: Int = 0,
      maxFrame: Int = Framing.DefaultMaxFrame): Vector[Frame] =
    val feeder = Feeder(framing, maxFrame)
    val out = Vector.newBuilder[Frame]
    var from = 0
    for to <- cuts :+ a.length do
      out ++= feeder.feed(chunk(a, from, to, kind))
      from = to
    out ++= feeder.finish()
    out.result()

  // A frame over the limit must not take the whole frames fed with it down with it.
  test("every frame before one over the limit is handed on, and the error names the offset where it starts"):
    val rnd = Random(35)
    for framing <- boundaryKinds; round <- 0 until 300 do
      val maxFrame = 50
      val good = randomFrames(framing, rnd).filter(_.length <= maxFrame).map(f => Frame(f.payload))
      val prefix = encode(framing, good)
      val bad =
        if framing == Framing.Len then java.nio.ByteBuffer.allocate(6).putInt(maxFrame + 1 + rnd.nextInt(1 << 30)).array()
        else Array.fill[Byte](maxFrame + 1 + rnd.nextInt(200))('a') ++ Array(framing.delimiter.toByte)
      val input = prefix ++ bad ++ encode(framing, Seq(Frame("after")))
      // Collected as they are emitted: the call that fails has handed some on before it throws.
      val got = Vector.newBuilder[Frame]
      val batches = BatchDecoder(framing, maxFrame)
      val emitBatch: FrameBatch => Unit = b => got ++= b.frames
      var from = 0
      val e = interceptFraming {
        for to <- randomCuts(input.length, rnd) :+ input.length do
          val piece = chunk(input, from, to, round % 4)
          batches.feed(piece)(emitBatch)
          from = to
        batches.finish(emitBatch)
      }
      assertEquals(got.result(), good, s"$framing round $round: the frames before the bad one")
      assertMentions(e, s"at byte ${prefix.length} of the stream")

  // ---- round trips -----------------------------------------------------------------------------

  test("decode(encode(frames)) == frames for lines, nul and len, fed in random chunks of every buffer kind"):
    val rnd = Random(20240611)
    for framing <- boundaryKinds; round <- 0 until 400 do
      val frames = randomFrames(framing, rnd)
      val encoded = encode(framing, frames, bufferSize = 8 + rnd.nextInt(200))
      val cuts = randomCuts(encoded.length, rnd)
      val kind = round % 4
      val decoded = decode(framing, encoded, cuts, kind)
      assertEquals(decoded, frames, s"$framing round $round, buffer kind $kind, cuts $cuts, bytes ${show(encoded)}")

  test("decode(encode(frames)) == frames when split at every byte boundary, and fed a byte at a time"):
    val rnd = Random(7)
    for framing <- boundaryKinds; round <- 0 until 40 do
      var frames = randomFrames(framing, rnd)
      while frames.map(_.length + 4).sum > 300 do frames = frames.init
      val encoded = encode(framing, frames)
      for k <- 0 to encoded.length do
        assertEquals(decode(framing, encoded, Seq(k), kind = k % 4), frames,
          s"$framing split at $k of ${show(encoded)}")
      assertEquals(decode(framing, encoded, 1 until encoded.length), frames,
        s"$framing byte by byte: ${show(encoded)}")

  test("encode(decode(bytes)) == bytes for lines, nul and raw on arbitrary bytes, with or without a final terminator"):
    val rnd = Random(12345)
    for framing <- Seq(Framing.Lines, Framing.Nul, Framing.Raw); round <- 0 until 400 do
      val length = if rnd.nextInt(5) == 0 then rnd.nextInt(20000) else rnd.nextInt(60)
      val input = Array.fill(length)(randomByte(rnd))
      val cuts = randomCuts(input.length, rnd)
      val frames = decode(framing, input, cuts, kind = round % 4)
      val back = encode(framing, frames, bufferSize = 8 + rnd.nextInt(300))
      assert(java.util.Arrays.equals(back, input),
        s"$framing round $round, cuts $cuts: expected ${show(input)}, got ${show(back)} from $frames")

  test("a frame of exactly maxFrame bytes passes, one byte more is an error naming size, limit and framing"):
    for framing <- boundaryKinds do
      val ok = Frame(Array.fill(10)('x'.toByte))
      assertEquals(decode(framing, encode(framing, Seq(ok, ok)), Seq(3), maxFrame = 10), Vector(ok, ok))
      for tooBig <- Seq(Seq(Frame(Array.fill(11)('x'.toByte))), Seq(Frame("a"), Frame(Array.fill(11)('x'.toByte)), Frame("b")))
          kind <- 0 until 4 do
        val e = interceptFraming(decode(framing, encode(framing, tooBig), Seq.empty, kind, maxFrame = 10))
        assertMentions(e, "11 bytes", "limit of 10 bytes", framing.token)

  test("chunks longer than maxFrame are fine when every frame in them is within it"):
    for framing <- boundaryKinds do
      val frames = Vector.fill(50)(Frame("0123456789"))
      assertEquals(decode(framing, encode(framing, frames), Seq(1, 200), maxFrame = 10), frames)

  test("lines: an over-long line fails as soon as the limit is passed, before its end is read, and stays failed"):
    val feeder = Feeder(Framing.Lines, maxFrame = 10)
    assertEquals(feeder.feed("ok\n01234"), Vector(Frame("ok")))
    val e = interceptFraming(feeder.feed("56789A"))
    assertMentions(e, "at least 11 bytes", "limit of 10 bytes", "lines")
    val again = interceptFraming(feeder.feed("\n"))
    assertEquals(again.getMessage, e.getMessage)

  test("lines: a line completed across chunks is measured whole"):
    val feeder = Feeder(Framing.Lines, maxFrame = 10)
    feeder.feed("01234")
    assertMentions(interceptFraming(feeder.feed("56789A\nb\n")), "of 11 bytes", "limit of 10 bytes")

  test("len: a huge length prefix is refused at once, with its unsigned value, whether the header comes whole or in bytes"):
    val header = Array[Byte](-1, -1, -1, -1)
    for cuts <- Seq(Seq.empty, Seq(1, 2, 3)) do
      val e = interceptFraming(decode(Framing.Len, header, cuts, maxFrame = 4096))
      assertMentions(e, "4294967295 bytes", "limit of 4096 bytes", "len")

  test("len: a stream that ends inside a frame fails at finish, saying how much came"):
    def feeder(in: Byte*) =
      val f = Feeder(Framing.Len, Framing.DefaultMaxFrame)
      assertEquals(f.feed(ByteBuffer.wrap(in.toArray)), Vector(Frame(Array[Byte](42))))
      f
    assertMentions(interceptFraming(feeder(0, 0, 0, 1, 42, 0, 0).finish()), "2 of its 4 length bytes")
    assertMentions(interceptFraming(feeder(0, 0, 0, 1, 42, 0, 0, 0, 10, 1, 2, 3).finish()), "3 of its 10 payload bytes")
    assertEquals(feeder(0, 0, 0, 1, 42).finish(), Vector.empty)

  test("lines: empty lines are frames of 0 bytes; a last line without newline is unterminated; nothing, nothing"):
    def lines(s: String) = decode(Framing.Lines, bytes(s), Seq.empty)
    assertEquals(lines(""), Vector.empty)
    assertEquals(lines("\n"), Vector(Frame("")))
    assertEquals(lines("\n\n"), Vector(Frame(""), Frame("")))
    assertEquals(lines("a\n\nb"), Vector(Frame("a"), Frame(""), Frame(bytes("b"), terminated = false)))
    assertEquals(lines("a\n"), Vector(Frame("a")))
    assertEquals(new String(encode(Framing.Lines, lines("a\n\nb")), UTF_8), "a\n\nb")

  test("lines: CRLF is kept byte-exact (the CR belongs to the payload)"):
    val input = bytes("one\r\ntwo\r\n\r\nlast\r")
    val frames = decode(Framing.Lines, input, Seq(4, 5))
    assertEquals(frames, Vector(Frame("one\r"), Frame("two\r"), Frame("\r"), Frame(bytes("last\r"), terminated = false)))
    assertEquals(new String(encode(Framing.Lines, frames), UTF_8), "one\r\ntwo\r\n\r\nlast\r")

  test("nul: a newline is payload, 0 ends a frame"):
    val frames = decode(Framing.Nul, bytes("a\nb\u0000\u0000c"), Seq(1))
    assertEquals(frames, Vector(Frame("a\nb"), Frame(""), Frame(bytes("c"), terminated = false)))

  test("raw: each chunk is one frame as it came; a chunk over maxFrame comes in pieces of maxFrame"):
    val input = bytes("abc\ndefghij")
    assertEquals(decode(Framing.Raw, input, Seq(3, 4)), Vector(Frame("abc"), Frame("\n"), Frame("defghij")))
    assertEquals(decode(Framing.Raw, input, Seq.empty, maxFrame = 4), Vector(Frame("abc\n"), Frame("defg"), Frame("hij")))
    assertEquals(decode(Framing.Raw, Array.emptyByteArray, Seq.empty), Vector.empty)
