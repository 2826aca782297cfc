package asyncpipe.cli.system

import asyncpipe.cli.frames.*

import asyncpipe.async.SendableChannel
import java.nio.ByteBuffer
import java.nio.channels.{FileChannel, Pipe, ReadableByteChannel, WritableByteChannel}

/** An output a kernel copy can move bytes into: its descriptor, and a channel on it (which
  * `FileChannel.transferTo` writes into with sendfile(2)).
  */
final case class KernelTarget(fd: Int, channel: WritableByteChannel)

/** The one output of a direct copy ([[Flow]]'s `DirectSink`), which a [[KernelCopy]] may also
  * move bytes into inside the kernel.
  */
trait KernelSink extends SendableChannel[FrameBatch]:
  /** The output, when it takes a kernel copy (standard output into a pipe, not counted). */
  def kernelTarget: KernelTarget | Null

  /** The output, when it takes bytes as they are from a buffer outside the heap, moved with
    * [[moveInKernel]] (`move` writes the buffer into this channel): a stream input whose bytes
    * need no look (raw frames from a socket) then never copies them into the JVM's heap.
    */
  def bytesTarget: WritableByteChannel | Null = null

  /** Moves exactly `n` bytes into the output with `move` (given the bytes still to move, it
    * returns how many it moved, or minus an errno), after writing out what the output buffered,
    * and while holding what `send` holds: a stop waits for a move in progress, as for a write.
    * False when the first call said EINVAL (nothing moved: the kernel cannot copy between these
    * two). Throws a `CancellationException` once the flow has stopped or the output has failed
    * (the failure is reported by the sink).
    */
  def moveInKernel(n: Long)(move: Long => Long): Boolean

/** Copies a stream input to its stage's one output inside the kernel, the bytes never entering
  * the JVM: `splice(2)` from a pipe ([[Splice]]), `sendfile(2)` from a regular file (what the
  * JDK's `FileChannel.transferTo` makes into a pipe). ADR 0009.
  *
  * A stage passes whole frames: a stop must not leave half a line in the output, and a frame
  * over the limit must fail. So each move ends at a frame boundary. The copy looks at the input
  * without consuming it (a pipe: `tee(2)` into a private pipe, whose last [[Peek]] bytes it reads
  * and the rest it drops into /dev/null; a file: `pread`), finds the last terminator there, and
  * moves up to it. What follows stays in the input; the next look starts at it. When the bytes
  * looked at hold no terminator (a frame longer than [[Peek]], or a partial frame with no more
  * behind it yet), the copy reads them the usual way into `reader` ([[BatchReader]], which also
  * enforces the frame limit), and then reads exactly up to the first terminator that follows, so
  * that the next move starts at a frame boundary again. Every frame that is moved lies within one
  * look, at most [[Chunk]] bytes, well under the frame limit. `raw` has no frames: everything
  * that is there is moved.
  *
  * @param calls splice and tee, for a pipe
  * @param fd the input's descriptor; `channel` reads the same descriptor
  * @param regular the input is a regular file read once, and `channel` a FileChannel on it
  *   (otherwise it must be a pipe)
  * @param readOnce reads once the usual way into `reader` and emits what it completed; false at
  *   the end of the input (after `reader.finish`)
  * @param moved counts bytes moved in the kernel (statistics, pipe growth)
  */
final class KernelCopy(
    calls: Splice.Syscalls | Null,
    fd: Int,
    channel: ReadableByteChannel,
    regular: Boolean,
    framing: Framing,
    reader: BatchReader,
    sink: KernelSink,
    emit: FrameBatch => Unit,
    readOnce: () => Boolean,
    moved: Long => Unit
):
  import KernelCopy.*
  require(framing != Framing.Len, "a len stream is checked frame by frame: it is never copied in the kernel")
  private val delimiter: Byte = framing.delimiter.toByte
  private val raw = framing == Framing.Raw
  private val peek = ByteBuffer.allocateDirect(Peek)
  private val target = sink.kernelTarget.nn
  private lazy val file = channel.asInstanceOf[FileChannel] // `regular` only

  /** Copies until the input ends ([[Outcome.Ended]], `reader` finished), or until the kernel
    * refuses these two descriptors ([[Outcome.Refused]]: the caller goes on reading the usual way
    * with `reader`, which holds whatever was read so far).
    */
  def run(): Outcome =
    if regular then fromFile() else fromPipe()

  // -----------------------------------------------------------------------------------------------
  // From a pipe

  private def fromPipe(): Outcome =
    val c = calls.nn
    val scratch = Pipe.open() // blocking ends: a look reads what tee put there
    val scratchOut = Splice.descriptor(scratch.sink)
    val _ = PipeSize.grow(scratchOut) // a look takes at most what the private pipe holds
    val devNull = java.io.FileOutputStream("/dev/null")
    val drop = Splice.descriptor(devNull.getChannel)
    val look = Look(c, scratch.source, Splice.descriptor(scratch.source), drop)
    try
      var first = true
      var outcome: Outcome | Null = null
      while outcome == null do
        val n = c.tee(fd, scratchOut, Chunk)
        if n == -Splice.EINVAL && first then outcome = Outcome.Refused // not a pipe after all
        else if n < 0 then throw Splice.failure(n)
        else if n == 0 then // empty, and no writer left: the end
          reader.finish(emit)
          outcome = Outcome.Ended
        else if reader.pending == 0 then
          val cut = if raw then { look.discard(n); n } else look.lastCut(n)
          if cut == 0 then { if !readOnce() then outcome = Outcome.Ended }
          else if !move(cut, left => c.splice(fd, target.fd, left)) then outcome = Outcome.Refused
        else readExactly(look.firstCut(n))
        first = false
      outcome.nn
    finally
      scratch.source.close()
      scratch.sink.close()
      devNull.close()

  /** The private pipe that `tee` fills with a copy of the input's front: read at its end, dropped
    * (into /dev/null) before that.
    */
  private final class Look(c: Splice.Syscalls, source: Pipe.SourceChannel, scratch: Int, drop: Int):
    /** After a look of `n` bytes: the bytes up to the last terminator among its last [[Peek]], or 0
      * if there is none. Leaves the private pipe empty.
      */
    def lastCut(n: Long): Long =
      val t = math.min(n, Peek.toLong).toInt
      discard(n - t)
      read(t)
      lastTerminator(n, t)

    /** After a look of `n` bytes: the bytes up to the first terminator among its first [[Peek]],
      * or all of those when there is none. Leaves the private pipe empty.
      */
    def firstCut(n: Long): Int =
      val h = math.min(n, Peek.toLong).toInt
      read(h)
      discard(n - h)
      firstTerminator(h)

    def discard(n: Long): Unit =
      var left = n
      while left > 0 do
        val r = c.splice(scratch, drop, left)
        if r < 0 then throw Splice.failure(r)
        left -= r

    private def read(n: Int): Unit =
      peek.clear().limit(n)
      while peek.hasRemaining do
        if source.read(peek) < 0 then throw java.io.IOException("the private pipe of a kernel copy ended early")
      peek.flip()

  // -----------------------------------------------------------------------------------------------
  // From a regular file

  private def fromFile(): Outcome =
    var outcome: Outcome | Null = null
    while outcome == null do
      val at = file.position()
      val n = math.min(Chunk, file.size() - at)
      if n <= 0 then { if !readOnce() then outcome = Outcome.Ended } // the end: the usual read finds it
      else if reader.pending == 0 then
        val cut = if raw then n else lastCutAt(at, n)
        if cut == 0 then { if !readOnce() then outcome = Outcome.Ended }
        else
          var sent = 0L
          val _ = move(cut, left => { val m = file.transferTo(at + sent, left, target.channel); sent += m; m })
          file.position(at + sent)
      else readExactly(firstCutAt(at, n))
    outcome.nn

  private def lastCutAt(at: Long, n: Long): Long =
    val t = math.min(n, Peek.toLong).toInt
    if !preadLook(at + n - t, t) then 0 else lastTerminator(n, t)

  private def firstCutAt(at: Long, n: Long): Int =
    val h = math.min(n, Peek.toLong).toInt
    if !preadLook(at, h) then h else firstTerminator(h)

  /** Reads `n` bytes at `at` into the look buffer; false if the file ended first (it shrank). */
  private def preadLook(at: Long, n: Int): Boolean =
    peek.clear().limit(n)
    var ended = false
    while !ended && peek.hasRemaining do
      if file.read(peek, at + peek.position()) < 0 then ended = true
    peek.flip()
    !ended

  // -----------------------------------------------------------------------------------------------
  // Both

  /** Of a look of `n` bytes whose last `t` are in [[peek]]: the bytes up to the last terminator
    * there, or 0 when there is none.
    */
  private def lastTerminator(n: Long, t: Int): Long =
    var i = t - 1
    while i >= 0 && peek.get(i) != delimiter do i -= 1
    if i < 0 then 0 else n - t + i + 1

  /** The bytes up to the first terminator among the `h` looked at, or `h` when there is none. */
  private def firstTerminator(h: Int): Int =
    var i = 0
    while i < h && peek.get(i) != delimiter do i += 1
    if i < h then i + 1 else h

  private def move(n: Long, call: Long => Long): Boolean =
    val ok = sink.moveInKernel(n)(call)
    if ok then moved(n)
    ok

  /** Reads exactly `n` bytes (known to be there) the usual way into `reader`: the rest of the frame
    * it holds, up to and with its terminator (then the frame is emitted and the reader is empty)
    * or, for a longer frame, the next part of it.
    */
  private def readExactly(n: Int): Unit =
    var left = n
    while left > 0 do
      val room = reader.room
      val limit = room.limit()
      room.limit(math.min(limit, room.position() + left))
      val r = channel.read(room)
      room.limit(limit)
      if r < 0 then left = 0 // ended early (a file that shrank): the next look finds the end
      else
        left -= r
        reader.filled(emit)

object KernelCopy:
  /** How much one look takes at most: what a grown pipe holds. */
  val Chunk: Long = PipeSize.Wanted.toLong
  /** The bytes a stream passes the usual way before a kernel copy takes over: a stream that
    * stays smaller (a few lines, an interactive session) never pays for linking the calls.
    */
  val After: Long = 4L * 1024 * 1024
  /** How many bytes of a look are read to find a terminator. */
  val Peek: Int = 64 * 1024

  enum Outcome:
    case Ended, Refused
