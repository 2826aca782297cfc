package asyncpipe.cli.tasks

import asyncpipe.cli.command.*
import asyncpipe.cli.frames.*
import asyncpipe.cli.system.*

import asyncpipe.async.{Future, Promise}
import java.io.{IOException, InputStream}
import java.util.concurrent.locks.ReentrantLock
import scala.util.Success

/** The standard output of the commands a task verb runs, passed on as line records on asyncpipe's
  * own (so a task verb is a pipeline source): each command's output is cut into whole lines
  * ([[BatchDecoder]]), and every batch of whole lines goes out in one write, under one lock, so
  * the lines of two commands running at once (`every --overlap allow`) never tear into each other.
  * A command's last line without a newline is passed on as it is, and gets its newline only if
  * more output follows (the [[FrameWriter]] rule), so nothing is lost or merged.
  *
  * A line longer than [[Framing.DefaultMaxFrame]] (16 MiB) is not cut: it ends the run with
  * an error. When the reader of our stdout goes away, the run is halted with
  * [[CliError.DownstreamGone]] (exit 141): found by the next write, or while nothing is written
  * (between runs of `every 1h`, a quiet command) by [[watchReader]].
  */
final class Records(out: OwnedOutput, control: RunControl):
  private val lock = ReentrantLock()
  private val writer = FrameWriter(Framing.Lines, out)
  /** Batches written so far: what [[ReaderWatch]] looks at to tell that the output is idle. */
  @volatile private var written = 0L

  /** Watches the reader of our stdout, when it is a pipe or a socket, once nothing has been
    * written for [[ReaderWatch.TaskIdleMillis]] ([[ReaderWatch]]): if it goes away, the run is
    * halted with [[CliError.DownstreamGone]] as a failed write would have halted it, and the halt
    * stops the running commands. Null when the output is not one of the process's descriptors.
    * The caller stops the watch at the end of the run.
    */
  def watchReader(): ReaderWatch | Null =
    val fd = out.descriptor
    if fd < 0 then null else ReaderWatch.start(fd, Written(), ReaderWatch.TaskIdleMillis)(Gone())

  private final class Written extends (() => Long):
    def apply(): Long = written
  private final class Gone extends (() => Unit):
    def apply(): Unit = control.halt(StopReason.PipeClosed)

  /** Copies `in` (a command's stdout) to the output on a thread of its own until its end; the
    * future completes then. Reads are chunks of what the command wrote, passed on at once (no
    * waiting for more), and the output is flushed after each.
    */
  def pump(in: InputStream, command: String, held: Records.Held | Null = null): Future[Unit] =
    val done = Promise[Unit]()
    Thread.ofVirtual().name(s"asyncpipe-records").start { () =>
      try copy(in, command, held)
      finally
        try in.close() catch case _: IOException => ()
        done.complete(Success(()))
    }
    done.future

  /** Writes one batch of whole lines out, in one piece. */
  private val write: FrameBatch => Unit = new (FrameBatch => Unit):
    def apply(batch: FrameBatch): Unit =
      lock.lock()
      try
        written += 1
        writer.write(batch)
        writer.flush()
        out.flush() // here, not on the idle flush's thread: a reader gone halts the run at once
      finally lock.unlock()

  /** Passes on what `held` holds, in one piece (the run it held ended well). */
  def release(held: Records.Held): Unit =
    lock.lock()
    try held.batches.foreach(write) finally lock.unlock()

  private def copy(in: InputStream, command: String, held: Records.Held | Null): Unit =
    val decoder = BatchDecoder(Framing.Lines)
    val buffer = new Array[Byte](64 * 1024)
    def failed(error: CliError) = control.halt(StopReason.Failed(error))
    val sink: FrameBatch => Unit =
      if held == null then write
      else batch => if !held.add(batch) then failed(CliError.Runtime(command,
        s"its output is more than ${TaskOptions.MaxHeldBytes >> 20} MiB, the most '--output success' holds until a run ends; '--output all' passes it on as it comes"))
    try
      var n = in.read(buffer)
      while n >= 0 do
        decoder.feed(buffer, 0, n)(sink)
        n = in.read(buffer)
      decoder.finish(sink)
    catch
      case _: DownstreamGone => failed(CliError.DownstreamGone)
      case e: FramingException => failed(CliError.Runtime(command, s"its output: ${e.getMessage}"))
      case e: IOException if OwnedOutput.isBrokenPipe(e) => failed(CliError.DownstreamGone)
      case e: IOException => failed(CliError.Runtime(command, s"passing its output on: ${e.getMessage}"))

object Records:
  /** One run's output, held until the run ends (`--output success`): copies of its batches, at
    * most `limit` bytes; past that, [[add]] refuses (and holds nothing more).
    */
  final class Held(limit: Long = TaskOptions.MaxHeldBytes):
    private val kept = Vector.newBuilder[FrameBatch]
    private var bytes = 0L
    private var full = false

    /** Keeps a copy of `batch`; false once the output is past the limit. */
    def add(batch: FrameBatch): Boolean =
      if full then false
      else if bytes + batch.length > limit then { full = true; false }
      else
        val copy = new Array[Byte](batch.length)
        batch.data.get(copy)
        kept += FrameBatch(batch.framing, copy, copy.length, batch.terminated)
        bytes += batch.length
        true

    def batches: Vector[FrameBatch] = kept.result()
