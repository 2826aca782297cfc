package asyncpipe.cli.system

import asyncpipe.cli.*

import asyncpipe.cli.frames.*
import asyncpipe.cli.stages.*

import asyncpipe.async.{Async, Watchdog}
import java.io.ByteArrayOutputStream
import java.nio.ByteBuffer
import java.nio.channels.{FileChannel, Pipe, ReadableByteChannel}
import java.nio.file.{Files, StandardOpenOption}
import java.util.concurrent.CancellationException
import scala.util.Random

/** [[KernelCopy]] over real pipes and files ([[Splice]]): what comes out is exactly what went in,
  * every move inside the kernel ends at a frame boundary (so a stop never leaves half a frame),
  * frames longer than a look go the usual way, and a stop or a refusal is honoured.
  *
  * The tests run in a JVM with the launcher's flags (project.scala): if kernel copies are not
  * possible here, the first test fails rather than every test passing through the usual path.
  */
class KernelCopyTest extends munit.FunSuite with Watchdog:

  test("kernel copies are possible in the test JVM (Linux, native access, sun.nio.ch opened)"):
    assert(Splice.permitted, "the tests must run with project.scala's javaOpt lines")
    assert(Splice.syscalls().isDefined, "splice and tee could not be linked")

  /** A [[KernelSink]] writing into a pipe that a thread drains into `received`; it records where
    * each kernel move ended, and stops (as a halted flow does) after `stopAfter` moves.
    */
  private final class PipeSink(stopAfter: Int = Int.MaxValue, refuse: Boolean = false) extends KernelSink:
    private val pipe = Pipe.open()
    val received = ByteArrayOutputStream()
    private val drainer = Thread.ofPlatform().start { () =>
      val b = ByteBuffer.allocate(1 << 16)
      while pipe.source.read(b.clear()) >= 0 do received.synchronized(received.write(b.array, 0, b.position()))
    }
    @volatile var written = 0L
    var moveEnds = Vector.empty[Long]
    var batches = 0
    val kernelTarget: KernelTarget | Null = KernelTarget(Splice.descriptor(pipe.sink), pipe.sink)

    def send(x: FrameBatch)(using Async): Unit =
      val data = x.data
      while data.hasRemaining do pipe.sink.write(data)
      written += x.length
      batches += 1
      x.release()
    def trySend(x: FrameBatch): Boolean = throw UnsupportedOperationException()

    def moveInKernel(n: Long)(move: Long => Long): Boolean =
      if moveEnds.size >= stopAfter then throw CancellationException("stopped")
      val first = move(n)
      if refuse || first == -Splice.EINVAL then false
      else
        var left = n - first
        assert(first > 0, s"the first move of $n gave $first")
        while left > 0 do
          val m = move(left)
          assert(m > 0, s"a move gave $m with $left left")
          left -= m
        written += n
        moveEnds :+= written
        true

    /** Closes the pipe and returns everything that came through it. */
    def close(): Array[Byte] =
      pipe.sink.close()
      drainer.join()
      received.synchronized(received.toByteArray)

  /** Lines (or `nul` frames) of random lengths, with a few longer than a look (64 KiB) and one
    * longer than a whole look of 1 MiB; `tail` bytes of an unterminated last frame.
    */
  private def content(framing: Framing, bytes: Int, tail: Int, rnd: Random): Array[Byte] =
    val out = ByteArrayOutputStream()
    val d = if framing == Framing.Raw then '\n'.toInt else framing.delimiter
    var k = 0
    while out.size < bytes do
      val n = k match
        case 50  => 200 * 1024 // longer than a look at the tail or the head
        case 300 => 1536 * 1024 // longer than one tee can take
        case _   => rnd.nextInt(300)
      out.write(Array.tabulate[Byte](n)(i => ('a' + (i + k) % 26).toByte))
      out.write(d)
      k += 1
    out.write(Array.fill[Byte](tail)('z'.toByte))
    out.toByteArray

  /** Runs a copy from `channel` (descriptor `fd`) into `sink` on this thread; what it returned. */
  private def runCopy(framing: Framing, fd: Int, channel: ReadableByteChannel, regular: Boolean, sink: PipeSink): KernelCopy.Outcome =
    val reader = BatchReader(framing, BufferPool(Endpoints.ReadSize, 4))
    val emit: FrameBatch => Unit = b => Async.blocking(sink.send(b))
    val readOnce = () =>
      val n = channel.read(reader.room)
      if n < 0 then { reader.finish(emit); false }
      else { reader.filled(emit); true }
    val calls = if regular then null else Splice.syscalls().get
    KernelCopy(calls, fd, channel, regular, framing, reader, sink, emit, readOnce, _ => ()).run()

  /** Writes `data` into a new pipe from a thread, in writes of random sizes; its read end. */
  private def feeding(data: Array[Byte], rnd: Random): Pipe.SourceChannel =
    val pipe = Pipe.open()
    val sizes = Iterator.continually(1 + rnd.nextInt(300 * 1024))
    Thread.ofPlatform().start { () =>
      var at = 0
      try
        while at < data.length do
          val n = math.min(sizes.next(), data.length - at)
          val b = ByteBuffer.wrap(data, at, n)
          while b.hasRemaining do pipe.sink.write(b)
          at += n
      catch case _: java.io.IOException => () // the test closed the read end early
      finally pipe.sink.close()
    }
    pipe.source

  private def assertFrameEnds(framing: Framing, out: Array[Byte], ends: Vector[Long]): Unit =
    if framing != Framing.Raw then
      for e <- ends do assertEquals(out((e - 1).toInt), framing.delimiter.toByte, s"a move ended at $e, inside a frame")

  for framing <- Seq(Framing.Lines, Framing.Nul, Framing.Raw); tail <- Seq(0, 7) do
    test(s"from a pipe, $framing, ${if tail == 0 then "ending with a terminator" else "an unterminated last frame"}: the bytes exactly, moves at frame ends"):
      val rnd = Random(framing.ordinal * 10 + tail)
      val data = content(framing, 6 << 20, tail, rnd)
      val source = feeding(data, rnd)
      val sink = PipeSink()
      assertEquals(runCopy(framing, Splice.descriptor(source), source, regular = false, sink), KernelCopy.Outcome.Ended)
      val out = sink.close()
      assertEquals(out.length, data.length)
      assert(java.util.Arrays.equals(out, data), "the output differs from the input")
      assert(sink.moveEnds.nonEmpty, "nothing was moved in the kernel")
      assert(sink.moveEnds.last > data.length / 2, s"the kernel moved only ${sink.moveEnds.last} of ${data.length} bytes")
      assertFrameEnds(framing, out, sink.moveEnds)

  for framing <- Seq(Framing.Lines, Framing.Raw) do
    test(s"from a regular file, $framing (sendfile through transferTo): the bytes exactly, moves at frame ends"):
      val rnd = Random(7 + framing.ordinal)
      val data = content(framing, 5 << 20, 3, rnd)
      val file = Files.createTempFile("kernelcopy", ".txt")
      try
        Files.write(file, data)
        val channel = FileChannel.open(file, StandardOpenOption.READ)
        val sink = PipeSink()
        assertEquals(runCopy(framing, Splice.descriptor(channel), channel, regular = true, sink), KernelCopy.Outcome.Ended)
        channel.close()
        val out = sink.close()
        assert(java.util.Arrays.equals(out, data), s"the output differs from the input (${out.length} of ${data.length} bytes)")
        assert(sink.moveEnds.nonEmpty, "nothing was moved in the kernel")
        assertFrameEnds(framing, out, sink.moveEnds)
      finally Files.deleteIfExists(file)

  test("a stop during the copy ends it with a CancellationException; what was moved ends at a frame end"):
    val rnd = Random(3)
    val data = content(Framing.Lines, 6 << 20, 0, rnd)
    val source = feeding(data, rnd)
    val sink = PipeSink(stopAfter = 3)
    intercept[CancellationException](runCopy(Framing.Lines, Splice.descriptor(source), source, regular = false, sink))
    val out = sink.close()
    assertEquals(sink.moveEnds.size, 3)
    assert(out.nonEmpty && out.last == '\n'.toByte, "the output does not end at a line's end")
    assert(java.util.Arrays.equals(out, data.take(out.length)), "the output is not a prefix of the input")
    source.close()

  test("an output the kernel refuses (EINVAL) hands back to the usual path with nothing lost"):
    val rnd = Random(4)
    val data = content(Framing.Lines, 2 << 20, 5, rnd)
    val source = feeding(data, rnd)
    val sink = PipeSink(refuse = true)
    val reader = BatchReader(Framing.Lines, BufferPool(Endpoints.ReadSize, 4))
    val emit: FrameBatch => Unit = b => Async.blocking(sink.send(b))
    val readOnce = () =>
      val n = source.read(reader.room)
      if n < 0 then { reader.finish(emit); false } else { reader.filled(emit); true }
    val copy = KernelCopy(Splice.syscalls().get, Splice.descriptor(source), source, false, Framing.Lines, reader, sink, emit, readOnce, _ => ())
    assertEquals(copy.run(), KernelCopy.Outcome.Refused)
    while readOnce() do () // the usual path, with the same reader
    val out = sink.close()
    assert(java.util.Arrays.equals(out, data), s"the output differs from the input (${out.length} of ${data.length} bytes)")

  test("a line over the frame limit fails as on the usual path, even when it starts in a kernel copy"):
    val rnd = Random(5)
    val data = content(Framing.Lines, 1 << 20, 0, rnd) ++ Array.fill[Byte](Framing.DefaultMaxFrame + 2)('q'.toByte) ++ "\n".getBytes
    val source = feeding(data, rnd)
    val sink = PipeSink()
    val e = intercept[FramingException](runCopy(Framing.Lines, Splice.descriptor(source), source, regular = false, sink))
    assert(e.getMessage.contains("exceeds the limit"), e.getMessage)
    sink.close()
    source.close()

  test("a pipe input whose descriptor is not a pipe after all (a regular file) is refused at once"):
    val file = Files.createTempFile("kernelcopy", ".txt")
    try
      Files.write(file, "a\nb\n".getBytes)
      val channel = FileChannel.open(file, StandardOpenOption.READ)
      val sink = PipeSink()
      assertEquals(runCopy(Framing.Lines, Splice.descriptor(channel), channel, regular = false, sink), KernelCopy.Outcome.Refused)
      channel.close()
      assertEquals(sink.close().length, 0)
    finally Files.deleteIfExists(file)
