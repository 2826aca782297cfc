package asyncpipe.cli.frames

import java.nio.ByteBuffer

/** Turns a byte stream, fed in chunks of any size, into [[FrameBatch]]es (see [[Framing]] for the
  * formats): per chunk fed, at most one batch holding every frame that the chunk completes, in
  * wire form (one copy, one array), and the start of an incomplete frame kept for the next chunk.
  * A frame may span many chunks and a chunk may hold many frames. The work per chunk does not grow
  * with the number of frames in it (for `lines` and `nul` it looks for the last terminator from
  * the end; `len` steps from prefix to prefix). [[BatchReader]] does the same where a stream is
  * read into direct buffers; this one takes bytes that are already in memory.
  *
  * Limits and errors: a frame over `maxFrame` fails as soon as it is seen to be too long, after
  * the frames before it are handed on; a stream that ends inside a `len` frame fails at `finish`;
  * `raw` chunks come out as they are, cut into batches of at most `maxFrame` bytes. After a
  * [[FramingException]] the decoder keeps failing with it; after an exception thrown by the
  * receiver its state is unspecified (discard it).
  *
  * @param maxFrame the largest payload accepted, in bytes; a longer frame is an error (for `raw`,
  *                 the largest piece a chunk is cut into).
  */
final class BatchDecoder(val framing: Framing, val maxFrame: Int = Framing.DefaultMaxFrame):
  require(maxFrame > 0 && maxFrame <= Framing.MaxArray - 4,
    s"maxFrame was $maxFrame, must be in [1, ${Framing.MaxArray - 4}]")

  private val delimiter: Byte = framing.delimiter.toByte
  // The wire bytes of the incomplete frame at the end of what was fed.
  private var pending: Array[Byte] = Array.emptyByteArray
  private var pendingLength = 0
  // len: where the walk is inside the incomplete frame. In the header (`headerCount` of 4 bytes
  // read, their value `header`), or in a payload of `frameLength` bytes of which `remaining` are
  // still to come.
  private var inHeader = true
  private var headerCount = 0
  private var header = 0
  private var frameLength = 0L
  private var remaining = 0L
  // The bytes of the stream before the frame being decoded (of every frame emitted so far): the
  // offset that a framing error names.
  private var consumed = 0L
  // The first framing error, thrown again by every later call.
  private var failure: FramingException | Null = null
  // Where a buffer without an accessible array (a direct or read-only one) is copied to be
  // decoded, made on first use.
  private var scratch: Array[Byte] = Array.emptyByteArray

  /** Decodes all remaining bytes of `buf` (its position ends at its limit): in place when it has
    * an accessible array, else in copies of up to [[BatchDecoder.ScratchSize]] bytes.
    */
  def feed(buf: ByteBuffer)(emit: FrameBatch => Unit): Unit =
    throwIfFailed()
    if buf.hasArray then
      val start = buf.arrayOffset + buf.position()
      val end = buf.arrayOffset + buf.limit()
      buf.position(buf.limit())
      decode(buf.array, start, end, emit)
    else
      if scratch.length == 0 then scratch = new Array[Byte](BatchDecoder.ScratchSize)
      val piece = scratch
      while buf.hasRemaining do
        val n = math.min(buf.remaining, piece.length)
        buf.get(piece, 0, n)
        decode(piece, 0, n, emit)

  /** Decodes `bytes[offset, offset + length)`. */
  def feed(bytes: Array[Byte], offset: Int, length: Int)(emit: FrameBatch => Unit): Unit =
    java.util.Objects.checkFromIndexSize(offset, length, bytes.length)
    throwIfFailed()
    decode(bytes, offset, offset + length, emit)

  /** Ends the stream: emits the last, unterminated frame of `lines` or `nul` as a batch with
    * `terminated = false`, or fails if a `len` frame is incomplete.
    */
  def finish(emit: FrameBatch => Unit): Unit =
    throwIfFailed()
    if pendingLength > 0 then
      framing match
        case Framing.Len =>
          if inHeader then fail(FramingException.truncatedHeader(headerCount, consumed))
          else fail(FramingException.truncatedPayload(frameLength - remaining, frameLength, consumed))
        case _ =>
          val last = java.util.Arrays.copyOf(pending, pendingLength)
          pendingLength = 0
          pending = Array.emptyByteArray
          emit(FrameBatch(framing, last, last.length, terminated = false))

  /** True when bytes of an incomplete frame are held (so ending the stream now would emit an
    * unterminated frame, or fail for `len`).
    */
  def hasPartialFrame: Boolean = pendingLength > 0

  private def tooLong(size: Long, exact: Boolean): Nothing =
    fail(FramingException.tooLongMessage(framing, size, exact, maxFrame, consumed))

  private def fail(message: String): Nothing =
    val e = FramingException(message)
    failure = e
    throw e

  private def throwIfFailed(): Unit =
    val f = failure
    if f != null then throw f

  private def decode(a: Array[Byte], from: Int, to: Int, emit: FrameBatch => Unit): Unit =
    framing match
      case Framing.Lines | Framing.Nul => decodeDelimited(a, from, to, emit)
      case Framing.Len                 => decodeLen(a, from, to, emit)
      case Framing.Raw =>
        var i = from
        while i < to do
          val n = math.min(maxFrame, to - i)
          emit(FrameBatch(framing, java.util.Arrays.copyOfRange(a, i, i + n), n, terminated = true))
          i += n

  private def decodeDelimited(a: Array[Byte], from: Int, to: Int, emit: FrameBatch => Unit): Unit =
    val d = delimiter
    var last = to - 1
    while last >= from && a(last) != d do last -= 1
    if last < from then append(a, from, to, checked = true)
    else
      // Every frame completed here lies in pending ++ a[from, last]; if that span is within the
      // limit, so is each of them; otherwise they are measured one by one, and the frames before
      // the first one too long are still handed on before the failure.
      val whole = if pendingLength.toLong + (last - from) > maxFrame then wholeBeforeTooLong(a, from, last) else last + 1
      if whole > from then emitPending(a, from, whole, emit)
      if whole <= last then
        var end = whole
        while a(end) != d do end += 1
        tooLong(end - whole + pendingLength, exact = true) // pending: none after an emit
      append(a, last + 1, to, checked = true)

  /** Of pending ++ a[from, last] (which ends with a terminator): the end of the frames before the
    * first one longer than the limit, or `last + 1` when none is (an end at `from` with pending
    * bytes left means the pending frame itself is too long; `from` otherwise, that the first
    * frame of `a` is).
    */
  private def wholeBeforeTooLong(a: Array[Byte], from: Int, last: Int): Int =
    val d = delimiter
    var start = from - pendingLength.toLong // the frame's start, as if pending preceded `from`
    var i = from
    while i <= last do
      while a(i) != d do i += 1
      if i - start > maxFrame then return math.max(start, from.toLong).toInt
      i += 1
      start = i
    last + 1

  /** Emits pending ++ a[from, end) (whole frames) as one batch. */
  private def emitPending(a: Array[Byte], from: Int, end: Int, emit: FrameBatch => Unit): Unit =
    val batch = java.util.Arrays.copyOf(pending, pendingLength + (end - from))
    System.arraycopy(a, from, batch, pendingLength, end - from)
    pendingLength = 0
    if pending.length > 64 * 1024 then pending = Array.emptyByteArray
    consumed += batch.length
    emit(FrameBatch(framing, batch, batch.length, terminated = true))

  private def decodeLen(a: Array[Byte], from: Int, to: Int, emit: FrameBatch => Unit): Unit =
    var i = from
    var complete = from // the end of the last frame completed in this chunk
    var over = -1L // the length in a prefix over the limit, once one is read
    while over < 0 && i < to do
      if inHeader then
        if headerCount == 0 && to - i >= 4 then
          val length = Framing.readLength(a, i)
          if length > maxFrame then over = length
          else
            startPayload(length)
            i += 4
        else
          header = (header << 8) | (a(i) & 0xff)
          headerCount += 1
          i += 1
          if headerCount == 4 then
            val length = header & 0xffffffffL
            if length > maxFrame then over = length
            else
              headerCount = 0
              startPayload(length)
              header = 0
        if over < 0 && !inHeader && remaining == 0 then
          inHeader = true
          complete = i
      else
        val n = math.min(remaining, (to - i).toLong).toInt
        i += n
        remaining -= n
        if remaining == 0 then
          inHeader = true
          complete = i
    if complete > from then emitPending(a, from, complete, emit)
    if over >= 0 then tooLong(over, exact = true)
    append(a, complete, to, checked = false)

  private def startPayload(length: Long): Unit =
    frameLength = length
    remaining = length
    inHeader = false

  /** Holds `a[from, to)` after the pending bytes. `checked`: fail if they now pass the limit. */
  private def append(a: Array[Byte], from: Int, to: Int, checked: Boolean): Unit =
    val n = to - from
    if n > 0 then
      val total = pendingLength.toLong + n
      if checked && total > maxFrame then tooLong(total, exact = false)
      if total > pending.length then
        val grown = math.max(total, math.min(pending.length.toLong * 2, maxFrame.toLong + 4))
        pending = java.util.Arrays.copyOf(pending, math.max(grown.toInt, 64))
      System.arraycopy(a, from, pending, pendingLength, n)
      pendingLength = total.toInt

object BatchDecoder:
  /** The size of the pieces a buffer without an accessible array is copied in. */
  private val ScratchSize = 64 * 1024
