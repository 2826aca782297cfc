package asyncpipe.cli.system

import asyncpipe.cli.*
import asyncpipe.async.Support


import java.io.IOException
import java.nio.ByteBuffer
import java.nio.channels.{Pipe, WritableByteChannel}
import java.util.concurrent.{CompletableFuture, TimeUnit}

class OwnedOutputTest extends munit.FunSuite:
  /** Records every write call the output makes. */
  final class Recording extends WritableByteChannel:
    val calls = scala.collection.mutable.ArrayBuffer.empty[Int]
    val bytes = java.io.ByteArrayOutputStream()
    def write(src: ByteBuffer): Int = synchronized {
      val n = src.remaining
      val a = new Array[Byte](n)
      src.get(a)
      bytes.write(a)
      calls += n
      n
    }
    def isOpen = true
    def close() = ()
    def text: String = synchronized(bytes.toString("UTF-8"))

  private val slowIdle = TimeUnit.SECONDS.toNanos(3600) // the idle flush never interferes

  test("small writes are batched into one system call per buffer"):
    val rec = Recording()
    val out = OwnedOutput(rec, capacity = 64, idleFlushNanos = slowIdle)
    for i <- 0 until 40 do out.write(f"$i%03d\n") // 40 x 4 bytes = 160 bytes
    out.flush()
    assertEquals(rec.text, (0 until 40).map(i => f"$i%03d\n").mkString)
    assert(rec.calls.size <= 3, s"expected at most 3 writes of <= 64 bytes, got ${rec.calls}")

  test("a write larger than the buffer goes straight through, after what was buffered"):
    val rec = Recording()
    val out = OwnedOutput(rec, capacity = 16, idleFlushNanos = slowIdle)
    out.write("ab")
    out.write("x" * 100)
    out.write("cd")
    out.flush()
    assertEquals(rec.text, "ab" + "x" * 100 + "cd")
    assertEquals(rec.calls.toSeq, Seq(2, 100, 2))

  test("a write of exactly the buffer size into an empty buffer is not lost"):
    val rec = Recording()
    val out = OwnedOutput(rec, capacity = 8, idleFlushNanos = slowIdle)
    out.write("12345678")
    out.flush()
    assertEquals(rec.text, "12345678")

  test("an idle writer's bytes reach the reader without an explicit flush"):
    val pipe = Pipe.open()
    val out = OwnedOutput(pipe.sink, idleFlushNanos = TimeUnit.MILLISECONDS.toNanos(1))
    val got = CompletableFuture.supplyAsync { () =>
      val buf = ByteBuffer.allocate(64)
      while buf.position() < 6 do pipe.source.read(buf)
      String(buf.array, 0, buf.position(), "UTF-8")
    }
    out.write("hello\n")
    assertEquals(got.get(10, TimeUnit.SECONDS), "hello\n")

  test("writing into a pipe whose reader has closed reports downstream gone at once, then on every write"):
    val pipe = Pipe.open()
    pipe.source.close()
    final class Counting extends WritableByteChannel:
      var calls = 0
      def write(src: ByteBuffer) = { calls += 1; pipe.sink.write(src) }
      def isOpen = pipe.sink.isOpen
      def close() = pipe.sink.close()
    val counting = Counting()
    val out = OwnedOutput(counting, capacity = 16, idleFlushNanos = slowIdle)
    intercept[DownstreamGone](out.write("y" * 32)) // larger than the buffer: written at once
    assertEquals(counting.calls, 1)
    assert(out.isFailed)
    intercept[DownstreamGone](out.write("more"))
    intercept[DownstreamGone](out.flush())
    assertEquals(counting.calls, 1, "no system call after the first EPIPE")

  test("a failure of the idle flush is told to the owner at once, with no write to throw it"):
    val failing = new WritableByteChannel:
      def write(src: ByteBuffer) = throw IOException("No space left on device")
      def isOpen = true
      def close() = ()
    val out = OwnedOutput(failing, capacity = 64, idleFlushNanos = 1_000_000)
    val told = CompletableFuture[IOException]()
    out.onIdleFailure(e => { val _ = told.complete(e) })
    out.write("abc") // buffered: only the idle flush writes it
    assertEquals(told.get(5, TimeUnit.SECONDS).getMessage, "No space left on device")
    assert(out.isFailed)
    assertEquals(intercept[IOException](out.write("d")).getMessage, "No space left on device", "and the next write throws it too")
    val late = CompletableFuture[IOException]()
    out.onIdleFailure(e => { val _ = late.complete(e) })
    assert(late.isDone, "an owner who asks after the failure is told at once")

  test("an idle flush that succeeds tells the owner nothing"):
    val recording = Recording()
    val out = OwnedOutput(recording, capacity = 64, idleFlushNanos = 1_000_000)
    val told = CompletableFuture[IOException]()
    out.onIdleFailure(e => { val _ = told.complete(e) })
    out.write("abc")
    Support.eventually("the idle flush") { recording.text == "abc" }
    out.write("def")
    Support.eventually("the second idle flush") { recording.text == "abcdef" }
    assert(!told.isDone, s"told of ${told.getNow(null)}")

  test("other write errors surface as themselves, not as downstream gone"):
    val failing = new WritableByteChannel:
      def write(src: ByteBuffer) = throw IOException("No space left on device")
      def isOpen = true
      def close() = ()
    val out = OwnedOutput(failing, capacity = 16, idleFlushNanos = slowIdle)
    out.write("abc")
    val e = intercept[IOException](out.flush())
    assert(!e.isInstanceOf[DownstreamGone])
    assertEquals(e.getMessage, "No space left on device")
    assert(!OwnedOutput.isBrokenPipe(e))
