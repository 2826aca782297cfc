package asyncpipe.cli.frames

import java.nio.ByteBuffer
import asyncpipe.async.Watchdog

/** [[Framing]]: the `--frame` tokens; and the throughput of the package's paths, decoding and
  * writing back lines.
  */
class FramingTest extends munit.FunSuite with Watchdog:

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

    /** Decodes `data` in 64 KiB chunks into batches and writes it back: 0 as Frames
      * (`FrameBatch.frames`), 1 as slices (`FrameBatch.foreach` into the writer's frameSink), 2 as
      * batches.
      */
    def run(how: Int): Double =
      written = 0
      val batches = BatchDecoder(Framing.Lines)
      val writer = FrameWriter(FrameEncoder(Framing.Lines), counting)
      val emit: FrameBatch => Unit = how match
        case 0 => _.frames.foreach(writer.write)
        case 1 => _.foreach(writer.frameSink)
        case _ => writer.write
      val t0 = System.nanoTime()
      var from = 0
      while from < total do
        batches.feed(ByteBuffer.wrap(data, from, math.min(chunkSize, total - from)))(emit)
        writer.flush()
        from += chunkSize
      batches.finish(emit)
      writer.flush()
      val seconds = (System.nanoTime() - t0) / 1e9
      assertEquals(written, total.toLong, "every byte written back")
      total / seconds / 1e6

    val Seq(framed, sliced, batched) = (0 to 2).map(how => (0 until 4).map(_ => run(how)).max)
    println(f"framing throughput, lines, $total%d bytes ($n%d lines), best of 4: " +
      f"Frame per line $framed%.0f MB/s, slices $sliced%.0f MB/s, batches $batched%.0f MB/s")
