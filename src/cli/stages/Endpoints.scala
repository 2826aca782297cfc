package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.frames.*
import asyncpipe.cli.system.*

import asyncpipe.async.*
import asyncpipe.io.IoFailure
import java.io.{FileDescriptor, FileInputStream, IOException}
import java.nio.ByteBuffer
import java.nio.channels.{FileChannel, ReadableByteChannel, WritableByteChannel}
import java.nio.file.{Files, Path, StandardOpenOption}

/** What one endpoint has moved, for `--stats`: written by the endpoint's own thread, read by any. */
final class Counters(val name: String):
  @volatile var frames = 0L
  @volatile var bytes = 0L
  /** Frames dropped here: the next stage was busy (`--on-full drop`) or too large (`--oversize drop`). */
  @volatile var dropped = 0L
  /** Datagrams the kernel dropped on this socket (its receive buffer was full), from /proc/net/udp. */
  @volatile var kernelDrops = 0L
  /** Frames missing by their sequence numbers (`--check-seq`). */
  @volatile var seqGaps = 0L
  /** Frames that ended without their terminator (the last line of a stream, of a rotated file). */
  @volatile var unterminated = 0L

  def add(batch: FrameBatch, countFrames: Boolean): Unit =
    bytes += batch.length
    if countFrames then frames += batch.frameCount

/** Why an endpoint failed: its address and the OS's (or the rule's) reason, as the user sees it. */
object EndpointFailure:
  def apply(subject: String, operation: String, e: Throwable): CliError =
    e match
      case f: CliError.Failed  => f.error
      case f: FramingException => CliError.Runtime(subject, f.getMessage)
      case _                   => CliError.Runtime(subject, s"$operation: ${IoFailure.reason(e)}")

/** A source of messages: a stream (stdin, a file, a FIFO), a UDP socket, or a timer. */
trait Input:
  def address: Address
  val counters: Counters = Counters(address.render)
  /** Acquires the endpoint (opens the file, binds the port); throws [[CliError.Failed]] with the reason. */
  def open(): Unit
  /** What the user must be told once the endpoint is open, a line each on stderr (the port the
    * kernel chose for `udp:0`, a receive buffer the kernel capped).
    */
  def opened: Seq[String] = Nil
  /** What the user must be told once the input has ended, a warning a line on stderr. */
  def endNotes: Seq[String] = Nil
  /** Where the endpoint tells of things as they happen (a connect's retries, a listener's
    * connections): given before it is opened.
    */
  def attach(tell: Diagnostics): Unit = ()
  /** True when `pump` runs on a platform thread of its own, which the flow does not wait for
    * when stopping: it may block in a system call that no cancel ends (a read of a pipe), or
    * waits in one more cheaply than a future could (a UDP socket).
    */
  def detached: Boolean = false
  /** True when more of the input is ready now, so that reading it would not wait (a regular file
    * before its end, a pipe holding data). A direct copy ([[Flow]]) flushes its output only when
    * this is false: when the input is about to wait, not after every message.
    */
  def atHand: Boolean = false
  /** True when `pump` drops a message the next stage has no room for (`trySend`, `--on-full
    * drop`) rather than waiting: such an input always hands over through a channel.
    */
  def dropsWhenFull: Boolean = false
  /** Sends the input's messages into `out` until the input ends (returns), fails (throws), or is
    * cancelled. Never sends [[Message.End]]: the flow does.
    */
  def pump(out: SendableChannel[FrameBatch])(using Async): Unit
  /** Once the flow has ended and every output has finished, before [[close]]: `written` when no
    * output failed, so every frame this input passed on has been written wherever it went (a
    * `kafka:` source with a group commits then what it passed on).
    */
  def settle(written: Boolean): Unit = ()
  /** Releases the endpoint; idempotent. */
  def close(): Unit
  /** Whether [[counters]]' frames are every frame the input passed: not for a stream whose frames
    * are not counted ([[StageOptions.countingFrames]]), which counts bytes only.
    */
  def countsFrames: Boolean = true
  /** The bytes the input will pass, when known once it is open: what a regular file read once
    * holds from where it is read (its size, for a `file:`); -1 when unknown. For `--progress`.
    */
  def expectedBytes: Long = -1

/** A sink of messages: a stream (stdout, a file), a UDP destination, or the next stage's channel. */
trait Output:
  def name: String
  val counters: Counters = Counters(name)
  def open(): Unit
  def write(batch: FrameBatch)(using Async): Unit
  /** The stage has nothing more at hand for now: hand on what is buffered (interactive lines). */
  def idle()(using Async): Unit
  /** Hands on everything written so far for good, and returns when it is there: in the OS (a file,
    * a pipe, a socket), or acknowledged (Kafka). What a source that commits waits for ([[settle]]).
    * Only where [[handsOff]]; elsewhere it is `idle`.
    */
  def handOff()(using Async): Unit = idle()
  /** Whether [[handOff]] is a point past which what was written is out of this process's hands
    * (not a channel to the next stage, not a broadcast's per-client queues).
    */
  def handsOff: Boolean = false
  /** A mark ([[FrameBatch.mark]]) came after every frame written so far: where [[handsOff]],
    * hands them off and acknowledges it; elsewhere leaves it unacknowledged, so that what it
    * marks is never taken as written. A channel to the next stage passes it on.
    */
  def mark(m: FrameBatch)(using Async): Unit =
    if handsOff then
      handOff()
      m.receipt.nn.ack()
  /** The input has ended: hand on everything, then release the endpoint (or pass the end on). */
  def finish()(using Async): Unit
  /** The flow failed (an input, another output, another stage of `run`): hand on what was
    * written, as `finish` (no frame written is lost), but end so that the reader can tell the
    * stream from a complete one where the endpoint can say so (a connection resets rather than
    * closing cleanly). The exit status says it for the others.
    */
  def finishFailed()(using Async): Unit = finish()
  /** Releases the endpoint after a failure, without waiting for anything. */
  def abort(): Unit
  /** What the user must be told once the output has finished, a warning a line on stderr. */
  def endNotes: Seq[String] = Nil
  /** What the user must be told once the endpoint is open (the port chosen for port 0). */
  def opened: Seq[String] = Nil
  /** Where the endpoint tells of things as they happen (a connect's retries, a listener's
    * clients): given before it is opened.
    */
  def attach(tell: Diagnostics): Unit = ()
  /** The flow is stopping: end any wait that is not a write in progress (a sink waiting for its
    * first client, or for a client's queue), so that the stop's flush is not held up by it.
    */
  def stopping(): Unit = ()
  /** What a [[KernelCopy]] may move bytes into, if this output takes one. */
  def kernelTarget: KernelTarget | Null = null
  /** What bytes written as they are may go into, from a direct buffer, by [[kernelMove]]: the
    * kernel target's channel, unless the output says otherwise.
    */
  def bytesTarget: WritableByteChannel | Null = { val k = kernelTarget; if k == null then null else k.channel }
  /** Writes out whatever the output buffered, then runs `move` (a kernel copy into the output's
    * descriptor) holding the output as a write does: a halt waits for it ([[OwnedOutput]]).
    */
  def kernelMove[T](move: => T): T = move
  /** Counts `n` bytes that a kernel copy moved into the output. */
  def movedInKernel(n: Long): Unit = ()
  /** The descriptor whose reader, once gone, ends this output as a failed write would
    * ([[ReaderWatch]]): standard output, or a file output that is not a regular file (a FIFO);
    * -1 for any other output.
    */
  def readerFd: Int = -1
  /** Has `report` told of a failure the output meets on its own, with no write or flush of the
    * flow's in progress (its buffer's idle flush into a full disk), so that the flow ends now
    * rather than at the next frame, which a quiet input may never bring. Given after `open`.
    */
  def onFailureAlone(report: Exception => Unit): Unit = ()

/** The messages between stages. */
object Message:
  /** The end of one upstream: every channel into a stage carries exactly one, after its data. */
  val End: FrameBatch = FrameBatch(Framing.Len, Array.emptyByteArray, 0, terminated = true)
  def isEnd(m: FrameBatch): Boolean = m eq End

// -------------------------------------------------------------------------------------------------
// Streams

/** Standard input, or a file (regular, FIFO, device) read from its start; with `follow`, a file
  * read on as it grows and across rotation and truncation (as `tail -F`), by a [[Follow]]. A
  * partial last frame is kept until its end arrives. The input reads into direct buffers of
  * `pool`, which become its messages as they are ([[BatchReader]]).
  */
final class StreamInput(val address: Address, path: Option[Path], follow: Boolean, framing: Framing, countFrames: Boolean,
    pool: BufferPool, finalDelimiter: FinalDelimiter = FinalDelimiter.Warn) extends Input:
  private var channel: ReadableByteChannel | Null = null
  // Standard input's stream, which can say how many bytes a pipe holds (FIONREAD).
  private var stdin: FileInputStream | Null = null
  // A regular file read once (not followed): a read never waits, whatever its size.
  private var regular = false
  // A pipe, FIFO, socket or terminal: a stream whose writer may die in the middle of a frame.
  private var streamed = false
  @volatile private var expected = -1L
  @volatile private var notes: List[String] = Nil
  @volatile private var closed = false
  // With `follow`: what reads the file, and the files that later take its name.
  private var follower: Follow | Null = null

  // A read of a pipe, terminal or FIFO blocks in read(2), which nothing but data or a signal ends.
  override def detached: Boolean = true
  /** Standard input only: grows its pipe once the stream carries data ([[PipeSize.Growth]]). */
  private var growth: PipeSize.Growth | Null = null

  def open(): Unit =
    if follow then
      val f = Follow(path.get, address.render, framing, pool, counters, countFrames)
      f.open()
      follower = f
    else channel = path match
      case None =>
        growth = PipeSize.Growth(0)
        val in = FileInputStream(FileDescriptor.in)
        stdin = in
        streamed = StreamKind.of(0) != StreamKind.RegularFile
        in.getChannel
      case Some(p) =>
        regular = Files.isRegularFile(p)
        streamed = !regular
        openFile(p)
    if !follow && !streamed then expected = remaining(channel.nn)

  override def countsFrames: Boolean = countFrames
  override def expectedBytes: Long = expected

  /** What a regular file holds from the position it is read from; -1 if it cannot be told. */
  private def remaining(ch: ReadableByteChannel): Long = ch match
    case fc: FileChannel => try math.max(0L, fc.size() - fc.position()) catch case _: IOException => -1L
    case _               => -1L

  override def opened: Seq[String] =
    val f = follower
    if f != null then f.notices else Nil

  override def atHand: Boolean =
    val in = stdin
    if in != null then try in.available() > 0 catch case _: IOException => false
    else regular

  private def openFile(p: Path): FileChannel =
    try FileChannel.open(p, StandardOpenOption.READ)
    catch
      case e: Exception =>
        FdReserve.release(e)
        throw CliError.Failed(EndpointFailure(address.render, s"open $p", e))

  def pump(out: SendableChannel[FrameBatch])(using Async): Unit =
    val f = follower
    if f != null then f.pump(out) else readStream(out)

  private def readStream(out: SendableChannel[FrameBatch])(using Async): Unit =
    val reader = BatchReader(framing, pool)
    val emit: FrameBatch => Unit = batch =>
      if !batch.terminated then endedInsideFrame(batch)
      counters.add(batch, countFrames)
      out.send(batch)
    val ch = channel.nn
    var done = false
    // A kernel copy takes over once the stream has passed `KernelCopy.After` bytes.
    // (Nothing of it is looked at before then but the threshold, KernelCopy.After.)
    var kernel = out match
      case sink: KernelSink if framing != Framing.Len && !countFrames => sink
      case _                                                        => null
    var read = 0L
    while !done && !closed do
      if kernel != null && read >= KernelCopy.After then
        done = copyInKernel(kernel.nn, reader, emit)
        kernel = null
      val n = if done then 0 else readOnce(ch, reader, emit)
      if n > 0 then read += n
      else if n < 0 then
        reader.finish(emit)
        done = true

  override def endNotes: Seq[String] = notes.reverse

  /** The stream ended inside a frame: [[PartialFrame]], counted. */
  private def endedInsideFrame(batch: FrameBatch): Unit =
    val warning = PartialFrame.check(batch, framing, finalDelimiter, address.render, streamed)
    counters.unterminated += 1
    warning.foreach(w => notes = w :: notes)

  /** Copies the rest of the stream into `sink` inside the kernel ([[KernelCopy]]): from a regular
    * file, or from a pipe when splice(2) can be had. True when the input has ended; false when the
    * usual reading must go on (with `reader`, which holds what was read so far).
    */
  private def copyInKernel(sink: KernelSink, reader: BatchReader, emit: FrameBatch => Unit)(using Async): Boolean =
    val fc = channel.nn.asInstanceOf[FileChannel] // stdin's channel is a FileChannel too
    val regularNow = regular || (stdin != null && Files.isRegularFile(Path.of("/proc/self/fd/0")))
    val calls = if regularNow || sink.kernelTarget == null then null else Splice.syscalls().orNull
    val fd = if stdin != null then 0 else Splice.descriptor(fc)
    if sink.kernelTarget == null || fd < 0 || (!regularNow && calls == null) then false
    else
      val readOn = () => readOnce(fc, reader, emit) >= 0 || { reader.finish(emit); false }
      val moved = (n: Long) =>
        counters.bytes += n
        if growth != null then growth.nn.passed(n)
      val copy = KernelCopy(calls, fd, fc, regularNow, framing, reader, sink, emit, readOn, moved)
      val outcome = try copy.run() catch case e: IOException => throw CliError.Failed(EndpointFailure(address.render, "read", e))
      outcome == KernelCopy.Outcome.Ended

  /** Reads once into `reader` (see [[fill]]) and emits the whole frames read so far; the bytes
    * read, or -1 at the end.
    */
  private def readOnce(ch: ReadableByteChannel, reader: BatchReader, emit: FrameBatch => Unit): Int =
    val n = try fill(ch, reader.room) catch case e: IOException => throw CliError.Failed(EndpointFailure(address.render, "read", e))
    if n > 0 then
      if growth != null then growth.nn.passed(n)
      reader.filled(emit)
    n

  /** Reads at least one byte (or the end, -1) into `buffer`; then, while a pipe already holds more
    * and there is room, reads on, so that a fast writer's data moves in large messages (a read of
    * a pipe returns at most what the pipe holds). The end found while reading on is found again by
    * the next call.
    */
  private def fill(ch: ReadableByteChannel, buffer: ByteBuffer): Int =
    var n = ch.read(buffer)
    val in = stdin
    if n > 0 && in != null then
      var more = true
      while more && buffer.remaining >= Endpoints.DefaultPipeSize && in.available() > 0 do
        val m = ch.read(buffer)
        if m > 0 then n += m else more = false
    n

  def close(): Unit =
    closed = true
    val f = follower
    if f != null then f.close()
    if path.isDefined then
      val ch = channel
      if ch != null then try ch.close() catch case _: IOException => ()

object StreamInput:
  /** The input of standard input (`path` None) or of a file, with read buffers for `options`. */
  def of(address: Address, path: Option[Path], follow: Boolean, options: StageOptions): StreamInput =
    StreamInput(address, path, follow, options.frame, options.countingFrames,
      BufferPool(Endpoints.ReadSize, keep = 2 * options.buffer + 4), options.finalDelimiter)

/** Standard output, or a file (created or truncated; with `append`, appended to; with `fsync`,
  * forced to disk each time the output catches up with its input and at the end). Frames are
  * encoded into a 64 KiB buffer that is written out when full, when the stage is idle, and at the
  * end: a stop never leaves a partial frame behind from this buffer. When idle, what is buffered
  * reaches the OS once the output has been idle a while ([[OwnedOutput]]), or at once with
  * `flushWhenIdle` (the reply side of a conversation, where someone waits for each answer).
  */
final class StreamOutput(val address: Address, path: Option[Path], append: Boolean, fsync: Boolean, framing: Framing,
    stdout: OwnedOutput, countFrames: Boolean, flushWhenIdle: Boolean = false) extends Output:
  def name: String = address.render
  private var file: FileChannel | Null = null
  private var out: OwnedOutput = stdout
  private var writer: FrameWriter | Null = null
  def open(): Unit =
    path match
      case Some(path) =>
        val mode = if append then StandardOpenOption.APPEND else StandardOpenOption.TRUNCATE_EXISTING
        try file = FileChannel.open(path, StandardOpenOption.CREATE, StandardOpenOption.WRITE, mode)
        catch
          case e: Exception =>
            FdReserve.release(e)
            throw CliError.Failed(EndpointFailure(address.render, s"open $path", e))
        out = OwnedOutput(file.nn)
      case _ => growth = PipeSize.Growth(1)
    writer = FrameWriter(framing, out)

  /** Standard output only: grows its pipe once the stream carries data ([[PipeSize.Growth]]). */
  private var growth: PipeSize.Growth | Null = null

  def write(batch: FrameBatch)(using Async): Unit =
    writer.nn.write(batch)
    if growth != null then growth.nn.passed(batch.length)
    StreamOutput.count(counters, batch, framing, countFrames)
    batch.release()

  def idle()(using Async): Unit =
    writer.nn.flush()
    if fsync || flushWhenIdle then out.flush()
    if fsync then file.nn.force(false)

  override def handOff()(using Async): Unit =
    writer.nn.flush()
    out.flush()
    if fsync then file.nn.force(false)
  override def handsOff: Boolean = true

  def finish()(using Async): Unit =
    writer.nn.flush()
    out.flush()
    val f = file
    if f != null then
      if fsync then f.force(true)
      f.close()

  def abort(): Unit =
    val f = file
    if f != null then try f.close() catch case _: IOException => ()

  /** Standard output when it is not a regular file and nothing is counted: a pipe (or a device)
    * takes spliced pages at no cost, while a file's own pages are written faster by write(2) than
    * by splice(2) or sendfile(2) (400 MB into tmpfs: 0.3 s against 0.7-0.9 s), so a file never does.
    */
  override lazy val kernelTarget: KernelTarget | Null =
    address match
      case _ if address.isStandard && stdout.descriptor == 1 && !countFrames && Splice.permitted && StreamKind.of(1) != StreamKind.RegularFile =>
        KernelTarget(1, java.io.FileOutputStream(FileDescriptor.out).getChannel)
      case _ => null

  /** A file (or standard output) takes raw bytes by write(2) from a direct buffer, unless frames
    * are counted or each catch-up is forced to disk (`fsync`, done when the output is idle).
    */
  override def bytesTarget: WritableByteChannel | Null =
    if countFrames || fsync then null
    else
      val f = file
      if f != null then f
      else if address.isStandard && stdout.descriptor == 1 then standardOut
      else null

  private lazy val standardOut = java.io.FileOutputStream(FileDescriptor.out).getChannel

  override def readerFd: Int =
    val f = file
    if address.isStandard then stdout.descriptor
    else if f == null then -1
    else
      val fd = Splice.descriptor(f)
      if fd >= 0 && StreamKind.of(fd) != StreamKind.RegularFile then fd else -1

  override def onFailureAlone(report: Exception => Unit): Unit = out.onIdleFailure(report(_))

  override def kernelMove[T](move: => T): T =
    writer.nn.flush()
    out.exclusively(move)

  override def movedInKernel(n: Long): Unit =
    counters.bytes += n
    if growth != null then growth.nn.passed(n)

object StreamOutput:
  /** The bytes `framing` adds to a frame's payload on the wire. */
  def overhead(framing: Framing, terminated: Boolean): Int = if terminated then framing.overhead else 0

  /** Counts `batch`, written in `framing`, into `counters`: as it is, or (re-encoded: a UDP
    * datagram, a frame of another stage's framing) the bytes it took on the wire.
    */
  def count(counters: Counters, batch: FrameBatch, framing: Framing, countFrames: Boolean): Unit =
    if batch.framing == framing || !countFrames then counters.add(batch, countFrames)
    else
      var bytes = 0L
      batch.foreach((_, _, length, terminated) => bytes += length + overhead(framing, terminated))
      counters.bytes += bytes
      counters.frames += batch.frameCount

/** `--final-delimiter` for a stream that ended inside a frame (`lines`, `nul`): the batch holds
  * that frame's bytes, without its terminator. A writer that died mid-frame leaves one, as does a
  * file written without a final newline: refused under `require` (the stage fails, exit 1), else
  * passed on as an unterminated frame, and under `warn` reported when it came from a pipe, a
  * socket or the like (a regular file's last line is what the file holds).
  */
object PartialFrame:
  /** Throws under `require` (releasing `batch`); else the warning to give, if any. */
  def check(batch: FrameBatch, framing: Framing, policy: FinalDelimiter, subject: String, streamed: Boolean): Option[String] =
    val terminator = if framing == Framing.Nul then "0 byte" else "newline"
    val said = s"the input ended inside a frame (${batch.length} bytes after its last $terminator)"
    if policy == FinalDelimiter.Require then
      batch.release()
      throw FramingException(s"$said: not passed on (--final-delimiter require)")
    Option.when(streamed && policy == FinalDelimiter.Warn)(
      s"asyncpipe: $subject: $said: passed on as they are (--final-delimiter require refuses them, optional passes them quietly)")

/** The next stage of an in-process pipeline: messages go into its channel as they are (no framing),
  * shared among that stage's `consumers` outputs, and the end of this stage's input becomes one
  * [[Message.End]] there.
  */
final class ChannelOutput(val name: String, next: SendableChannel[FrameBatch], consumers: Int) extends Output:
  def open(): Unit = ()
  def write(batch: FrameBatch)(using Async): Unit =
    batch.share(consumers) // this output's hold passes on to the next stage
    next.send(batch)
  def idle()(using Async): Unit = ()
  // The next stage's outputs acknowledge it (write shares it among them).
  override def mark(m: FrameBatch)(using Async): Unit = write(m)
  def finish()(using Async): Unit = next.send(Message.End)
  def abort(): Unit = ()

object Endpoints:
  /** The size of a stream input's read buffers, so the largest message it makes (bytes read
    * before they are passed on). Large enough that a gigabyte is a few thousand messages, small
    * enough that the two or three buffers in use stay in the CPU's cache (a 1 MiB one did not:
    * a copy stage used a third more CPU).
    */
  val ReadSize: Int = 256 * 1024
  /** What a pipe holds by default on Linux (see [[PipeSize]]): reading on is worth it while there is room for that. */
  val DefaultPipeSize: Int = 64 * 1024
  /** How often a followed file is looked at again when no change was notified ([[Follow]]). */
  val FollowPollMillis: Long = 100

  /** The input for a source address: its kind's endpoint. */
  def input(address: Address, options: StageOptions): Input = address.input(options)

  /** The output for a sink address: its kind's endpoint. */
  def output(address: Address, options: StageOptions, stdout: OwnedOutput): Output = address.output(options, stdout)
