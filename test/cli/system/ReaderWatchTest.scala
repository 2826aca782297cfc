package asyncpipe.cli.system

import asyncpipe.cli.*


import asyncpipe.async.{Support, Watchdog}
import java.nio.channels.{FileChannel, Pipe}
import java.nio.file.{Files, StandardOpenOption}
import java.util.concurrent.{CountDownLatch, TimeUnit}
import java.util.concurrent.atomic.{AtomicInteger, AtomicLong}

/** [[ReaderWatch]] on real pipes and files: it reports a reader that went away once the output
  * is idle, never while the output keeps writing, never for a regular file, and not after `stop`.
  */
class ReaderWatchTest extends munit.FunSuite with Watchdog:

  /** A pipe whose write end is watched; `gone` counts reports. */
  private final class Watched(written: () => Long = () => 0L):
    val pipe = Pipe.open()
    val gone = AtomicInteger(0)
    val reported = CountDownLatch(1)
    val watch = ReaderWatch.start(Splice.descriptor(pipe.sink), written) { () =>
      gone.incrementAndGet()
      reported.countDown()
    }
    def close(): Unit =
      watch.stop()
      pipe.sink.close()
      if pipe.source.isOpen then pipe.source.close()

  test("a reader that closes the pipe while the output is idle is reported, once"):
    val w = Watched()
    try
      w.pipe.source.close()
      assert(w.reported.await(Support.Patience, TimeUnit.MILLISECONDS), "the reader's going was not reported")
      assert(w.watch.awaitEnd(Support.Patience), "the watch did not end after reporting")
      assertEquals(w.gone.get, 1)
    finally w.close()

  test("a reader that is still there is not reported (a poll's timeout is not a going); stop ends the watch quietly"):
    val w = Watched()
    try
      Support.eventually("the watch to poll") { w.watch.polling }
      // More than one poll period: at least one poll timed out and the watch went on.
      assert(!w.watch.awaitEnd(ReaderWatch.PollMillis + 200L), "the watch ended with its reader still there")
      w.watch.stop()
      assert(w.watch.awaitEnd(Support.Patience), "stop did not end the watch")
      assertEquals(w.gone.get, 0)
    finally w.close()

  test("while the output keeps writing, the pipe is not watched (its next write finds EPIPE)"):
    val looks = AtomicLong(0)
    val w = Watched(() => looks.incrementAndGet()) // a new count at every look: never idle
    try
      w.pipe.source.close()
      Support.eventually("the watch to look at the output three times") { looks.get >= 3 }
      w.watch.stop()
      assert(w.watch.awaitEnd(Support.Patience), "stop did not end the watch")
      assertEquals(w.gone.get, 0, "a busy output was reported gone by the watch")
    finally w.close()

  test("a regular file is never watched: the watch ends at once, reporting nothing"):
    val path = Files.createTempFile("reader-watch", ".txt")
    val file = FileChannel.open(path, StandardOpenOption.WRITE)
    try
      val gone = AtomicInteger(0)
      val watch = ReaderWatch.start(Splice.descriptor(file), () => 0L)(() => gone.incrementAndGet())
      assert(watch.awaitEnd(Support.Patience), "the watch of a regular file did not end")
      assertEquals(gone.get, 0)
    finally
      file.close()
      Files.delete(path)
