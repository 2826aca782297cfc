package asyncpipe.cli.frames

import asyncpipe.cli.frames.Support.*

import java.io.ByteArrayOutputStream
import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets.UTF_8
import scala.util.Random
import asyncpipe.async.Watchdog

/** [[FrameEncoder]]: frames into a caller's heap or direct buffer, the `len` prefix, and the
  * frames a framing cannot carry.
  */
class FrameEncoderTest extends munit.FunSuite with Watchdog:

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

  test("encode into a buffer that is too small writes nothing and says so"):
    for framing <- Framing.values do
      for direct <- Seq(false, true) do
        val encoder = FrameEncoder(framing)
        val buf = if direct then ByteBuffer.allocateDirect(5) else ByteBuffer.allocate(5)
        buf.put(1.toByte)
        val fits = encoder.encode(Frame("abcde"), buf)
        assert(!fits, s"$framing: 5 payload bytes cannot fit in 4 free bytes")
        assertEquals(buf.position(), 1, s"$framing: nothing written")
