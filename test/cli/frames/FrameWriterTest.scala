package asyncpipe.cli.frames

import asyncpipe.cli.frames.Support.*
import asyncpipe.cli.system.OwnedOutput

import java.io.ByteArrayOutputStream
import java.nio.ByteBuffer
import java.nio.channels.WritableByteChannel
import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.TimeUnit
import scala.util.Random
import asyncpipe.async.Watchdog

/** [[FrameWriter]]: frames and batches written in few writes of its sink, batches as they are or
  * re-encoded frame by frame, and the terminator owed after an unterminated frame.
  */
class FrameWriterTest extends munit.FunSuite with Watchdog:

  test("frames handed to FrameWriter.frameSink as slices (FrameBatch.foreach, the path of a framing change) are byte-exact too"):
    val rnd = Random(4242)
    for framing <- Framing.values.toSeq; round <- 0 until 300 do
      val input =
        if framing == Framing.Len then encode(framing, randomFrames(framing, rnd))
        else Array.fill(rnd.nextInt(3000))(randomByte(rnd))
      val out = ByteArrayOutputStream()
      val writer = FrameWriter(FrameEncoder(framing), (b, o, l) => out.write(b, o, l), 8 + rnd.nextInt(100))
      val decoder = BatchDecoder(framing)
      val slices: FrameBatch => Unit = _.foreach(writer.frameSink)
      var from = 0
      for to <- randomCuts(input.length, rnd) :+ input.length do
        decoder.feed(chunk(input, from, to, round % 4))(slices)
        from = to
      decoder.finish(slices)
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
