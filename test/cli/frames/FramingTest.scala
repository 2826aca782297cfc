package asyncpipe.cli.frames

import asyncpipe.cli.*

import asyncpipe.cli.system.*

import java.io.ByteArrayOutputStream
import java.nio.ByteBuffer
import java.nio.channels.WritableByteChannel
import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.TimeUnit
import scala.util.Random
import asyncpipe.async.Watchdog

class FramingTest extends munit.FunSuite with Watchdog:
  private val delimitedKinds = Seq(Framing.Lines, Framing.Nul)
  private val boundaryKinds = Seq(Framing.Lines, Framing.Nul, Framing.Len)

  // ---- helpers ---------------------------------------------------------------------------------

  private def bytes(s: String): Array[Byte] = s.getBytes(UTF_8)

  /** `a[from, to)` as the kind of ByteBuffer a reader might hand over: 0 a wrapped array at a
    * position, 1 a slice (non-zero arrayOffset), 2 a direct buffer, 3 a read-only heap buffer (no
    * accessible array).
    */
  private def chunk(a: Array[Byte], from: Int, to: Int, kind: Int): ByteBuffer = kind match
    case 0 => ByteBuffer.wrap(a, from, to - from)
    case 1 => ByteBuffer.wrap(a, from, to - from).slice()
    case 2 =>
      val d = ByteBuffer.allocateDirect(to - from)
      d.put(a, from, to - from).flip()
    case _ => ByteBuffer.wrap(a, from, to - from).asReadOnlyBuffer()

  /** FrameDecoder (frame by frame) or BatchDecoder (batches of whole frames, checked to be whole
    * and flattened into frames) behind one face.
    */
  private final class Feeder(framing: Framing, maxFrame: Int, val batched: Boolean):
    private val frames = FrameDecoder(framing, maxFrame)
    private val batches = BatchDecoder(framing, maxFrame)
    private val seen = ByteArrayOutputStream() // the bytes of every batch, in order
    private val fed = ByteArrayOutputStream()

    def feed(buf: ByteBuffer): Vector[Frame] =
      val out = Vector.newBuilder[Frame]
      if batched then
        val copy = buf.duplicate()
        val a = new Array[Byte](copy.remaining)
        copy.get(a)
        fed.write(a)
        batches.feed(buf)(b => out ++= whole(b))
      else frames.feed(buf)(out += _)
      assertEquals(buf.remaining, 0, s"feed left ${buf.remaining} bytes unread")
      out.result()

    def feed(s: String): Vector[Frame] = feed(ByteBuffer.wrap(bytes(s)))

    def finish(): Vector[Frame] =
      val out = Vector.newBuilder[Frame]
      if batched then
        batches.finish(b => out ++= whole(b))
        assert(java.util.Arrays.equals(seen.toByteArray, fed.toByteArray),
          s"the batches, end to end, are not the input: expected ${show(fed.toByteArray)}, got ${show(seen.toByteArray)}")
      else frames.finish(out += _)
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
          while i < b.length do i += 4 + FrameDecoder.readLength(b.bytes, i).toInt
          assertEquals(i, b.length, s"the len frames of $b do not end where it ends")
        case Framing.Raw => ()
      b.frames

  extension (b: FrameBatch) private def payloadCopy: Array[Byte] = java.util.Arrays.copyOf(b.bytes, b.length)

  /** Decodes `a` fed in chunks ending at `cuts` (then at the end), then finishes. */
  private def decode(framing: Framing, a: Array[Byte], cuts: Seq[Int], kind: Int = 0,
      maxFrame: Int = FrameDecoder.DefaultMaxFrame, batched: Boolean = false): Vector[Frame] =
    val feeder = Feeder(framing, maxFrame, batched)
    val out = Vector.newBuilder[Frame]
    var from = 0
    for to <- cuts :+ a.length do
      out ++= feeder.feed(chunk(a, from, to, kind))
      from = to
    out ++= feeder.finish()
    out.result()

  /** Encodes through a FrameWriter with a buffer of `bufferSize` bytes. */
  private def encode(framing: Framing, frames: Seq[Frame], bufferSize: Int = 64): Array[Byte] =
    val out = ByteArrayOutputStream()
    val writer = FrameWriter(FrameEncoder(framing), (b, o, l) => out.write(b, o, l), bufferSize)
    frames.foreach(writer.write)
    writer.flush()
    out.toByteArray

  /** Encodes with FrameEncoder.encode into a ByteBuffer of `size` bytes, flushing it when a frame
    * does not fit and streaming frames larger than the buffer with encodeHead/payload/encodeTail.
    */
  private def encodeIntoBuffer(framing: Framing, frames: Seq[Frame], size: Int, direct: Boolean): Array[Byte] =
    val out = ByteArrayOutputStream()
    val encoder = FrameEncoder(framing)
    val buf = if direct then ByteBuffer.allocateDirect(size) else ByteBuffer.allocate(size)
    def flush(): Unit =
      buf.flip()
      val a = new Array[Byte](buf.remaining)
      buf.get(a)
      out.write(a)
      buf.clear()
    for f <- frames do
      if !encoder.encode(f, buf) then
        flush()
        if !encoder.encode(f, buf) then
          encoder.check(f.bytes, 0, f.length)
          encoder.encodeHead(f.length, f.terminated, buf)
          flush()
          out.write(f.bytes, 0, f.length)
          encoder.encodeTail(f.terminated, buf)
    flush()
    out.toByteArray

  private def randomCuts(n: Int, rnd: Random): Seq[Int] =
    if n == 0 then Seq.empty
    else
      val meanChunk = 1 + rnd.nextInt(math.max(1, n / (1 + rnd.nextInt(8))))
      Iterator.iterate(0)(_ + 1 + rnd.nextInt(2 * meanChunk)).drop(1).takeWhile(_ < n).toSeq

  /** Bytes biased towards the interesting ones: terminators, CR, 0. */
  private def randomByte(rnd: Random): Byte = rnd.nextInt(8) match
    case 0 => '\n'
    case 1 => 0
    case 2 => '\r'
    case _ => rnd.nextInt(256).toByte

  /** A random frame set that `framing` can represent: payloads without its terminator, and for
    * lines and nul perhaps a non-empty last frame without terminator.
    */
  private def randomFrames(framing: Framing, rnd: Random): Vector[Frame] =
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

  private def show(a: Array[Byte]): String = Frame(a).toString

  private def interceptFraming(body: => Any): FramingException = intercept[FramingException](body)

  private def assertMentions(e: Throwable, parts: String*): Unit =
    for p <- parts do assert(e.getMessage.contains(p), s"expected the message to mention '$p', got: ${e.getMessage}")

  // Issue 35: a frame over the limit must not take the whole frames fed with it down with it.
  for (batched, name) <- Seq(false -> "FrameDecoder", true -> "BatchDecoder") do
    test(s"$name: every frame before one over the limit is handed on, and the error names the offset where it starts"):
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
        val frames = FrameDecoder(framing, maxFrame)
        val batches = BatchDecoder(framing, maxFrame)
        val emitBatch: FrameBatch => Unit = b => got ++= b.frames
        val emitFrame: Frame => Unit = got += _
        var from = 0
        val e = interceptFraming {
          for to <- randomCuts(input.length, rnd) :+ input.length do
            val piece = chunk(input, from, to, round % 4)
            if batched then batches.feed(piece)(emitBatch) else frames.feed(piece)(emitFrame)
            from = to
          if batched then batches.finish(emitBatch) else frames.finish(emitFrame)
        }
        assertEquals(got.result(), good, s"$framing round $round: the frames before the bad one")
        assertMentions(e, s"at byte ${prefix.length} of the stream")

  // ---- round trips -----------------------------------------------------------------------------

  private val decoders = Seq(false -> "FrameDecoder", true -> "BatchDecoder")

  for (batched, name) <- decoders do
    test(s"$name: decode(encode(frames)) == frames for lines, nul and len, fed in random chunks of every buffer kind"):
      val rnd = Random(20240611)
      for framing <- boundaryKinds; round <- 0 until 400 do
        val frames = randomFrames(framing, rnd)
        val encoded = encode(framing, frames, bufferSize = 8 + rnd.nextInt(200))
        val cuts = randomCuts(encoded.length, rnd)
        val kind = round % 4
        val decoded = decode(framing, encoded, cuts, kind, batched = batched)
        assertEquals(decoded, frames, s"$framing round $round, buffer kind $kind, cuts $cuts, bytes ${show(encoded)}")

    test(s"$name: decode(encode(frames)) == frames when split at every byte boundary, and fed a byte at a time"):
      val rnd = Random(7)
      for framing <- boundaryKinds; round <- 0 until 40 do
        var frames = randomFrames(framing, rnd)
        while frames.map(_.length + 4).sum > 300 do frames = frames.init
        val encoded = encode(framing, frames)
        for k <- 0 to encoded.length do
          assertEquals(decode(framing, encoded, Seq(k), kind = k % 4, batched = batched), frames,
            s"$framing split at $k of ${show(encoded)}")
        assertEquals(decode(framing, encoded, 1 until encoded.length, batched = batched), frames,
          s"$framing byte by byte: ${show(encoded)}")

    test(s"$name: encode(decode(bytes)) == bytes for lines, nul and raw on arbitrary bytes, with or without a final terminator"):
      val rnd = Random(12345)
      for framing <- Seq(Framing.Lines, Framing.Nul, Framing.Raw); round <- 0 until 400 do
        val length = if rnd.nextInt(5) == 0 then rnd.nextInt(20000) else rnd.nextInt(60)
        val input = Array.fill(length)(randomByte(rnd))
        val cuts = randomCuts(input.length, rnd)
        val frames = decode(framing, input, cuts, kind = round % 4, batched = batched)
        val back = encode(framing, frames, bufferSize = 8 + rnd.nextInt(300))
        assert(java.util.Arrays.equals(back, input),
          s"$framing round $round, cuts $cuts: expected ${show(input)}, got ${show(back)} from $frames")

    test(s"$name: a frame of exactly maxFrame bytes passes, one byte more is an error naming size, limit and framing"):
      for framing <- boundaryKinds do
        val ok = Frame(Array.fill(10)('x'.toByte))
        assertEquals(decode(framing, encode(framing, Seq(ok, ok)), Seq(3), maxFrame = 10, batched = batched), Vector(ok, ok))
        for tooBig <- Seq(Seq(Frame(Array.fill(11)('x'.toByte))), Seq(Frame("a"), Frame(Array.fill(11)('x'.toByte)), Frame("b")))
            kind <- 0 until 4 do
          val e = interceptFraming(decode(framing, encode(framing, tooBig), Seq.empty, kind, maxFrame = 10, batched = batched))
          assertMentions(e, "11 bytes", "limit of 10 bytes", framing.token)

    test(s"$name: chunks longer than maxFrame are fine when every frame in them is within it"):
      for framing <- boundaryKinds do
        val frames = Vector.fill(50)(Frame("0123456789"))
        assertEquals(decode(framing, encode(framing, frames), Seq(1, 200), maxFrame = 10, batched = batched), frames)

    test(s"$name: lines: an over-long line fails as soon as the limit is passed, before its end is read, and stays failed"):
      val feeder = Feeder(Framing.Lines, maxFrame = 10, batched)
      assertEquals(feeder.feed("ok\n01234"), Vector(Frame("ok")))
      val e = interceptFraming(feeder.feed("56789A"))
      assertMentions(e, "at least 11 bytes", "limit of 10 bytes", "lines")
      val again = interceptFraming(feeder.feed("\n"))
      assertEquals(again.getMessage, e.getMessage)

    test(s"$name: lines: a line completed across chunks is measured whole"):
      val feeder = Feeder(Framing.Lines, maxFrame = 10, batched)
      feeder.feed("01234")
      assertMentions(interceptFraming(feeder.feed("56789A\nb\n")), "of 11 bytes", "limit of 10 bytes")

    test(s"$name: len: a huge length prefix is refused at once, with its unsigned value, whether the header comes whole or in bytes"):
      val header = Array[Byte](-1, -1, -1, -1)
      for cuts <- Seq(Seq.empty, Seq(1, 2, 3)) do
        val e = interceptFraming(decode(Framing.Len, header, cuts, maxFrame = 4096, batched = batched))
        assertMentions(e, "4294967295 bytes", "limit of 4096 bytes", "len")

    test(s"$name: len: a stream that ends inside a frame fails at finish, saying how much came"):
      def feeder(in: Byte*) =
        val f = Feeder(Framing.Len, FrameDecoder.DefaultMaxFrame, batched)
        assertEquals(f.feed(ByteBuffer.wrap(in.toArray)), Vector(Frame(Array[Byte](42))))
        f
      assertMentions(interceptFraming(feeder(0, 0, 0, 1, 42, 0, 0).finish()), "2 of its 4 length bytes")
      assertMentions(interceptFraming(feeder(0, 0, 0, 1, 42, 0, 0, 0, 10, 1, 2, 3).finish()), "3 of its 10 payload bytes")
      assertEquals(feeder(0, 0, 0, 1, 42).finish(), Vector.empty)

    test(s"$name: lines: empty lines are frames of 0 bytes; a last line without newline is unterminated; nothing, nothing"):
      def lines(s: String) = decode(Framing.Lines, bytes(s), Seq.empty, batched = batched)
      assertEquals(lines(""), Vector.empty)
      assertEquals(lines("\n"), Vector(Frame("")))
      assertEquals(lines("\n\n"), Vector(Frame(""), Frame("")))
      assertEquals(lines("a\n\nb"), Vector(Frame("a"), Frame(""), Frame(bytes("b"), terminated = false)))
      assertEquals(lines("a\n"), Vector(Frame("a")))
      assertEquals(new String(encode(Framing.Lines, lines("a\n\nb")), UTF_8), "a\n\nb")

    test(s"$name: lines: CRLF is kept byte-exact (the CR belongs to the payload)"):
      val input = bytes("one\r\ntwo\r\n\r\nlast\r")
      val frames = decode(Framing.Lines, input, Seq(4, 5), batched = batched)
      assertEquals(frames, Vector(Frame("one\r"), Frame("two\r"), Frame("\r"), Frame(bytes("last\r"), terminated = false)))
      assertEquals(new String(encode(Framing.Lines, frames), UTF_8), "one\r\ntwo\r\n\r\nlast\r")

    test(s"$name: nul: a newline is payload, 0 ends a frame"):
      val frames = decode(Framing.Nul, bytes("a\nb\u0000\u0000c"), Seq(1), batched = batched)
      assertEquals(frames, Vector(Frame("a\nb"), Frame(""), Frame(bytes("c"), terminated = false)))

  test("FrameEncoder.encode into heap and direct ByteBuffers writes the same bytes as FrameWriter"):
    val rnd = Random(99)
    for framing <- Framing.values.toSeq; round <- 0 until 200 do
      val frames = randomFrames(if framing == Framing.Raw then Framing.Len else framing, rnd)
      val expected = encode(framing, frames)
      val size = 8 + rnd.nextInt(100)
      for direct <- Seq(false, true) do
        val got = encodeIntoBuffer(framing, frames, size, direct)
        assert(java.util.Arrays.equals(got, expected),
          s"$framing round $round (buffer $size, direct $direct): expected ${show(expected)}, got ${show(got)}")

  test("the copying-free path (feedSlices into FrameWriter.frameSink) is byte-exact too"):
    val rnd = Random(4242)
    for framing <- Framing.values.toSeq; round <- 0 until 300 do
      val input =
        if framing == Framing.Len then encode(framing, randomFrames(framing, rnd))
        else Array.fill(rnd.nextInt(3000))(randomByte(rnd))
      val out = ByteArrayOutputStream()
      val writer = FrameWriter(FrameEncoder(framing), (b, o, l) => out.write(b, o, l), 8 + rnd.nextInt(100))
      val decoder = FrameDecoder(framing)
      var from = 0
      for to <- randomCuts(input.length, rnd) :+ input.length do
        decoder.feedSlices(chunk(input, from, to, round % 4), writer.frameSink)
        from = to
      decoder.finishSlices(writer.frameSink)
      writer.flush()
      assert(java.util.Arrays.equals(out.toByteArray, input),
        s"$framing round $round: expected ${show(input)}, got ${show(out.toByteArray)}")

  test("batches written by FrameWriter: byte-exact to the same framing, re-encoded frame by frame to another"):
    val rnd = Random(31337)
    for from <- Framing.values.toSeq; to <- Framing.values.toSeq; round <- 0 until 60 do
      val generated = randomFrames(if from == Framing.Raw then Framing.Len else from, rnd)
      // Across framings, only frames that both can carry.
      val frames = if from == to then generated else generated.filter(f => !holds(Framing.Lines, f) && !holds(Framing.Nul, f))
      val input = encode(from, frames)
      val batches = Vector.newBuilder[FrameBatch]
      val decoder = BatchDecoder(from)
      var start = 0
      for end <- randomCuts(input.length, rnd) :+ input.length do
        decoder.feed(input, start, end - start)(batches += _)
        start = end
      decoder.finish(batches += _)
      val all = batches.result()
      val out = ByteArrayOutputStream()
      val writer = FrameWriter(FrameEncoder(to), (b, o, l) => out.write(b, o, l), 8 + rnd.nextInt(100))
      all.foreach(writer.write)
      writer.flush()
      // The same framing: the input itself; another: what the frame-by-frame encoder makes.
      val expected = if from == to then input else encode(to, all.flatMap(_.frames))
      assert(java.util.Arrays.equals(out.toByteArray, expected),
        s"$from -> $to round $round: expected ${show(expected)}, got ${show(out.toByteArray)}")

  /** True when `f` holds the terminator of `framing` (so it cannot be written with it). */
  private def holds(framing: Framing, f: Frame): Boolean =
    framing.delimiter >= 0 && (0 until f.length).exists(i => f.bytes(i) == framing.delimiter.toByte)

  test("a batch written after an unterminated frame or batch first completes it"):
    val out = ByteArrayOutputStream()
    val writer = FrameWriter(FrameEncoder(Framing.Lines), (b, o, l) => out.write(b, o, l))
    writer.write(FrameBatch(Framing.Lines, bytes("a\nb"), 3, terminated = false))
    writer.write(FrameBatch(Framing.Lines, bytes("c\n"), 2, terminated = true))
    writer.write(Frame(bytes("d"), terminated = false))
    writer.write(FrameBatch(Framing.Lines, bytes("e"), 1, terminated = false))
    writer.flush()
    assertEquals(out.toString("UTF-8"), "a\nb\nc\nd\ne")

  test("a batch larger than the writer's buffer goes straight to the sink, after what was buffered"):
    val calls = scala.collection.mutable.ArrayBuffer.empty[Int]
    val out = ByteArrayOutputStream()
    val writer = FrameWriter(FrameEncoder(Framing.Lines), (b, o, l) => { calls += l; out.write(b, o, l) }, bufferSize = 16)
    val big = bytes("x" * 99 + "\n")
    writer.write(Frame("ab"))
    writer.write(FrameBatch(Framing.Lines, big, big.length, terminated = true))
    writer.write(Frame("cd"))
    writer.flush()
    assertEquals(out.toString("UTF-8"), "ab\n" + "x" * 99 + "\ncd\n")
    assertEquals(calls.toSeq, Seq(3, 100, 3))

  // ---- exact cases -----------------------------------------------------------------------------

  test("len: 4-byte big-endian length then payload; binary payloads and empty frames"):
    val payload = Array[Byte](0, '\n', -1, 0)
    val encoded = encode(Framing.Len, Seq(Frame(payload), Frame(Array.emptyByteArray)))
    assertEquals(encoded.toSeq, Seq[Byte](0, 0, 0, 4, 0, '\n', -1, 0, 0, 0, 0, 0))
    val big = Array.fill(70000)(7.toByte)
    val prefix = encode(Framing.Len, Seq(Frame(big))).take(4).toSeq
    assertEquals(prefix, Seq[Byte](0, 1, 0x11, 0x70), "70000 = 0x00011170")
    // big-endian whatever order the caller's buffer was set to
    for direct <- Seq(false, true) do
      val buf = (if direct then ByteBuffer.allocateDirect(16) else ByteBuffer.allocate(16)).order(java.nio.ByteOrder.LITTLE_ENDIAN)
      assert(FrameEncoder(Framing.Len).encode(Frame("abc"), buf))
      assertEquals((0 until 4).map(buf.get).toSeq, Seq[Byte](0, 0, 0, 3), s"prefix in a little-endian buffer (direct $direct)")

  test("raw: each chunk is one frame as it came; a chunk over maxFrame comes in pieces of maxFrame"):
    val input = bytes("abc\ndefghij")
    for batched <- Seq(false, true) do
      assertEquals(decode(Framing.Raw, input, Seq(3, 4), batched = batched), Vector(Frame("abc"), Frame("\n"), Frame("defghij")))
      assertEquals(decode(Framing.Raw, input, Seq.empty, maxFrame = 4, batched = batched),
        Vector(Frame("abc\n"), Frame("defg"), Frame("hij")))
      assertEquals(decode(Framing.Raw, Array.emptyByteArray, Seq.empty, batched = batched), Vector.empty)

  // ---- encoder rules ---------------------------------------------------------------------------

  test("the encoder refuses a frame that holds its own terminator, unless checks are off"):
    val buf = ByteBuffer.allocate(64)
    val e = interceptFraming(FrameEncoder(Framing.Lines).encode(Frame("a\nb"), buf))
    assertMentions(e, "3 bytes", "newline at offset 1", "--frame len")
    assertEquals(buf.position(), 0, "nothing written")
    assertMentions(interceptFraming(FrameEncoder(Framing.Nul).encode(Frame(Array[Byte](1, 0)), buf)), "0 byte at offset 1")
    val long = Array.fill(100)('y'.toByte)
    long(70) = '\n'
    assertMentions(interceptFraming(FrameEncoder(Framing.Lines).encode(Frame(long), ByteBuffer.allocate(200))), "newline at offset 70")
    assert(FrameEncoder(Framing.Lines, checkFrames = false).encode(Frame("a\nb"), buf))
    assertEquals(new String(buf.array, 0, buf.position(), UTF_8), "a\nb\n")
    // len and raw carry anything
    assert(FrameEncoder(Framing.Len).encode(Frame("a\nb\u0000"), ByteBuffer.allocate(64)))
    assert(FrameEncoder(Framing.Raw).encode(Frame("a\nb\u0000"), ByteBuffer.allocate(64)))
    // and the path for frames larger than the writer's buffer checks too
    val big = Array.fill(1000)('x'.toByte)
    big(999) = '\n'
    assertMentions(intercept[FramingException](encode(Framing.Lines, Seq(Frame(big)), bufferSize = 16)), "offset 999")

  test("a refused frame leaves the encoder as it was: an owed terminator is still owed"):
    val out = ByteArrayOutputStream()
    val writer = FrameWriter(FrameEncoder(Framing.Lines), (b, o, l) => out.write(b, o, l))
    writer.write(Frame(bytes("a"), terminated = false))
    intercept[FramingException](writer.write(Frame("b\nc")))
    writer.write(Frame("d"))
    writer.flush()
    assertEquals(out.toString("UTF-8"), "a\nd\n")

  test("a frame written after an unterminated one first completes it, so the two never merge"):
    val frames = Seq(Frame(bytes("a"), terminated = false), Frame("b"), Frame(bytes("c"), terminated = false))
    assertEquals(new String(encode(Framing.Lines, frames), UTF_8), "a\nb\nc")
    assertEquals(new String(encode(Framing.Nul, frames), UTF_8), "a\u0000b\u0000c")
    assertEquals(new String(encode(Framing.Raw, frames), UTF_8), "abc")

  test("encode into a buffer that is too small writes nothing and says so"):
    for framing <- Framing.values do
      for direct <- Seq(false, true) do
        val encoder = FrameEncoder(framing)
        val buf = if direct then ByteBuffer.allocateDirect(5) else ByteBuffer.allocate(5)
        buf.put(1.toByte)
        val fits = encoder.encode(Frame("abcde"), buf)
        assert(!fits, s"$framing: 5 payload bytes cannot fit in 4 free bytes")
        assertEquals(buf.position(), 1, s"$framing: nothing written")

  test("FrameWriter over OwnedOutput writes the frames in few system calls"):
    final class Recording extends WritableByteChannel:
      val calls = scala.collection.mutable.ArrayBuffer.empty[Int]
      val out = ByteArrayOutputStream()
      def write(src: ByteBuffer): Int = synchronized {
        val n = src.remaining
        val a = new Array[Byte](n)
        src.get(a)
        out.write(a)
        calls += n
        n
      }
      def isOpen = true
      def close() = ()
    val rec = Recording()
    val owned = OwnedOutput(rec, capacity = 1024, idleFlushNanos = TimeUnit.SECONDS.toNanos(3600))
    val writer = FrameWriter(Framing.Lines, owned)
    for i <- 0 until 1000 do writer.write(Frame(i.toString))
    writer.flush()
    owned.flush()
    assertEquals(rec.out.toString("UTF-8"), (0 until 1000).map(i => s"$i\n").mkString)
    assert(rec.calls.size <= 8, s"expected at most 8 writes for 3890 bytes, got ${rec.calls.size}: ${rec.calls}")

  // ---- parsing ---------------------------------------------------------------------------------

  test("every framing is named by its token, and only by it"):
    for f <- Framing.values do assertEquals(Framing.named(f.token), Some(f))
    assertEquals(Framing.named("line"), None)
    assertEquals(Framing.named("LINES"), None)

  // ---- throughput (printed, not asserted) ------------------------------------------------------

  test("throughput: decode + encode 50 MB of seq-like lines"):
    val size = 50 * 1024 * 1024
    val data = new Array[Byte](size + 16)
    var n = 0
    var pos = 0
    while pos < size do
      n += 1
      val s = Integer.toString(n)
      var i = 0
      while i < s.length do
        data(pos) = s.charAt(i).toByte
        pos += 1
        i += 1
      data(pos) = '\n'
      pos += 1
    val total = pos
    val chunkSize = 64 * 1024
    var written = 0L
    val counting: ByteSink = (_, _, length) => written += length

    /** Decodes `data` in 64 KiB chunks and writes it back: 0 as Frames, 1 as slices, 2 as batches. */
    def run(how: Int): Double =
      written = 0
      val frames = FrameDecoder(Framing.Lines)
      val batches = BatchDecoder(Framing.Lines)
      val writer = FrameWriter(FrameEncoder(Framing.Lines), counting)
      val t0 = System.nanoTime()
      var from = 0
      while from < total do
        val buf = ByteBuffer.wrap(data, from, math.min(chunkSize, total - from))
        how match
          case 0 => frames.feed(buf)(writer.write)
          case 1 => frames.feedSlices(buf, writer.frameSink)
          case _ => batches.feed(buf)(writer.write)
        writer.flush()
        from += chunkSize
      frames.finish(writer.write)
      batches.finish(writer.write)
      writer.flush()
      val seconds = (System.nanoTime() - t0) / 1e9
      assertEquals(written, total.toLong, "every byte written back")
      total / seconds / 1e6

    val Seq(framed, sliced, batched) = (0 to 2).map(how => (0 until 4).map(_ => run(how)).max)
    println(f"framing throughput, lines, $total%d bytes ($n%d lines), best of 4: " +
      f"Frame per line $framed%.0f MB/s, slices $sliced%.0f MB/s, batches $batched%.0f MB/s")
