package asyncpipe.cli.frames

import java.nio.ByteBuffer

/** Where a [[FrameWriter]] sends its bytes: `OwnedOutput.write`, an `OutputStream`'s `write`.
  * Every call carries whole frames (see [[OwnedOutput]], "Whole frames").
  */
trait ByteSink:
  def write(bytes: Array[Byte], offset: Int, length: Int): Unit

  /** Told the framing of what will be written (an output that cuts a short write back to a whole
    * frame needs it); nothing by default.
    */
  def framedAs(framing: Framing): Unit = ()

  /** Writes the remaining bytes of `parts`, in order, as one write: the parts of one frame. A
    * sink whose writes can be cut short between calls (as [[OwnedOutput]]'s by a halt) overrides
    * this.
    */
  def writeParts(parts: ByteBuffer*): Unit = parts.foreach(write)

  /** Writes the remaining bytes of `src` (its position ends at its limit). A sink that can write
    * a direct buffer without copying it (as [[OwnedOutput]] can) overrides this.
    */
  def write(src: ByteBuffer): Unit =
    if src.hasArray then
      write(src.array, src.arrayOffset + src.position(), src.remaining)
      src.position(src.limit())
    else
      val chunk = new Array[Byte](math.min(src.remaining, 64 * 1024))
      while src.hasRemaining do
        val n = math.min(chunk.length, src.remaining)
        src.get(chunk, 0, n)
        write(chunk, 0, n)

/** Encodes frames into a buffer of `bufferSize` bytes and hands it to `out` when full and on
  * `flush()`: one sink write per buffer, however small the frames. Frames larger than the buffer
  * go to the sink directly, after what was buffered.
  *
  * `flush()` hands the buffered bytes to the sink (it does not flush the sink itself). A stage
  * calls it whenever it has no more frames at hand, e.g. after each chunk it decoded, so that an
  * interactive line does not wait in this buffer; [[OwnedOutput]] then flushes on idleness.
  */
final class FrameWriter(val encoder: FrameEncoder, out: ByteSink, bufferSize: Int = FrameWriter.DefaultBufferSize):
  require(bufferSize >= 8, s"bufferSize was $bufferSize, must be >= 8")

  private val buffer = new Array[Byte](bufferSize)
  private var position = 0

  def write(frame: Frame): Unit = write(frame.bytes, 0, frame.length, frame.terminated)

  def write(bytes: Array[Byte], offset: Int, length: Int, terminated: Boolean): Unit =
    java.util.Objects.checkFromIndexSize(offset, length, bytes.length)
    var end = encoder.encodeInto(bytes, offset, length, terminated, buffer, position, bufferSize)
    if end < 0 then
      flush()
      end = encoder.encodeInto(bytes, offset, length, terminated, buffer, 0, bufferSize)
    if end >= 0 then position = end
    else
      // Larger than the buffer: its head, the payload as it is and its tail in one write of the
      // sink, so that the frame reaches the output whole or not at all (ByteSink.writeParts).
      encoder.check(bytes, offset, length)
      val head = ByteBuffer.allocate(8)
      encoder.encodeHead(length, terminated, head)
      val tail = ByteBuffer.allocate(1)
      encoder.encodeTail(terminated, tail)
      out.writeParts(head.flip(), ByteBuffer.wrap(bytes, offset, length), tail.flip())

  /** Writes every frame of `batch`: as it is when it has the writer's framing (one copy, or
    * none for a batch larger than the buffer: a pooled batch goes from its direct buffer to the
    * sink), frame by frame otherwise.
    */
  def write(batch: FrameBatch): Unit =
    if batch.framing == encoder.framing then
      val d = encoder.framing.delimiter
      if d >= 0 && batch.length > 0 && encoder.takeOwed() then
        if position == bufferSize then flush()
        buffer(position) = d.toByte
        position += 1
      if batch.length <= bufferSize - position then
        batch.data.get(buffer, position, batch.length)
        position += batch.length
      else
        flush()
        if batch.length < bufferSize then
          batch.data.get(buffer, 0, batch.length)
          position = batch.length
        else out.write(batch.data)
      if batch.length > 0 then encoder.batchWritten(batch)
    else batch.foreach(frameSink)

  /** A [[FrameSink]] that writes every frame it receives: `batch.foreach(writer.frameSink)`
    * re-encodes a batch's frames without allocating (what `write(batch)` does for a batch of
    * another framing).
    */
  val frameSink: FrameSink = (bytes, offset, length, terminated) => write(bytes, offset, length, terminated)

  /** Hands everything buffered to the sink. */
  def flush(): Unit =
    if position > 0 then
      val n = position
      position = 0
      out.write(buffer, 0, n)

object FrameWriter:
  /** 64 KiB: as much as a pipe holds by default. */
  val DefaultBufferSize: Int = 64 * 1024

  def apply(encoder: FrameEncoder, out: ByteSink, bufferSize: Int = DefaultBufferSize): FrameWriter =
    new FrameWriter(encoder, out, bufferSize)

  /** A writer of `framing` into `out` (use one writer per output stream); tells `out` its framing. */
  def apply(framing: Framing, out: ByteSink): FrameWriter =
    out.framedAs(framing)
    new FrameWriter(FrameEncoder(framing), out, DefaultBufferSize)
