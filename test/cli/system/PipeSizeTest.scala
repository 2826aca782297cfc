package asyncpipe.cli.system

import asyncpipe.cli.*

import java.nio.channels.FileChannel
import java.nio.file.{Files, Path, StandardOpenOption}
import asyncpipe.async.Watchdog

/** [[PipeSize]] (of asyncpipe.cli.system, which a stream input uses to grow its pipe). */
class PipeSizeTest extends munit.FunSuite with Watchdog:

  test("PipeSize: a pipe is made to hold 1 MiB; a regular file is left alone") {
    val dir = Files.createTempDirectory("pipesize")
    try
      val fifo = dir.resolve("fifo")
      val made = ProcessBuilder("mkfifo", fifo.toString).start().waitFor()
      assertEquals(made, 0, "mkfifo")
      val file = dir.resolve("file")
      Files.writeString(file, "x")
      // Opened for reading and writing, a FIFO opens without waiting for a peer (Linux).
      val pipe = FileChannel.open(fifo, StandardOpenOption.READ, StandardOpenOption.WRITE)
      val regular = FileChannel.open(file, StandardOpenOption.READ)
      try
        assertEquals(PipeSize.grow(descriptor(fifo)), PipeSize.Wanted)
        assertEquals(PipeSize.grow(descriptor(file)), -1)
      finally
        pipe.close()
        regular.close()
    finally
      Files.list(dir).forEach(Files.delete(_))
      Files.delete(dir)
  }

  test("PipeSize.Growth: the pipe is grown once, on another thread, when the stream first reaches the threshold") {
    val grown = java.util.concurrent.LinkedBlockingQueue[Thread]()
    val growth = PipeSize.Growth(1, after = 1000, grow = () => grown.put(Thread.currentThread))
    growth.passed(600)
    assert(!growth.isStarted && grown.isEmpty, "grown before the stream reached the threshold")
    growth.passed(399)
    assert(!growth.isStarted, "grown at 999 of 1000 bytes")
    growth.passed(1)
    growth.passed(5000)
    val by = grown.poll(30, java.util.concurrent.TimeUnit.SECONDS)
    assert(by != null, "not grown after 6,000 bytes")
    assert(by ne Thread.currentThread, "grown on the stream's own thread")
    assert(by.isDaemon, "the growing thread would keep the JVM alive")
    assertEquals(grown.poll(200, java.util.concurrent.TimeUnit.MILLISECONDS), null, "grown twice")
  }

  /** This process's descriptor for `path`, from /proc/self/fd. */
  private def descriptor(path: Path): Int =
    val fds = Files.list(Path.of("/proc/self/fd")).toArray.toSeq.map(_.asInstanceOf[Path])
    fds.find(fd => scala.util.Try(Files.readSymbolicLink(fd)).toOption.contains(path.toRealPath()))
      .map(_.getFileName.toString.toInt)
      .getOrElse(fail(s"no descriptor for $path in /proc/self/fd"))

  test("PipeSize: in a JVM without native access a stage leaves its pipes alone and says nothing") {
    assume(Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")
    val r = os.proc(Launch.java, "-cp", Launch.assembly.get, "asyncpipe.cli.Main", "tick:1ms,count=2", "-")
      .call(check = false, stdin = os.Pipe, stderr = os.Pipe, timeout = 60_000)
    assertEquals((r.exitCode, r.err.text()), (0, ""))
    assertEquals(r.out.lines().size, 2)
  }
