package asyncpipe.cli.frames

import java.nio.ByteBuffer

/** Cuts a byte stream into [[FrameBatch]]es of whole frames where it is read: the stream is read
  * into direct buffers of `pool`, and each batch is the front of one buffer, so an output writes
  * it from there (read(2) into the buffer, write(2) from it, no copy in user space). The
  * incomplete frame after a batch moves to the start of the next buffer (the only copy, of at most
  * one frame), so every buffer starts at a frame boundary and the reader keeps no other state.
  *
  * Use: read into `room` (at its position, up to its limit), then call `filled`, which emits the
  * whole frames read so far as one batch, if any; at the end of the stream `finish`. The same
  * limits and errors as [[BatchDecoder]]: a frame over `maxFrame` fails as soon as it is seen to be
  * too long (a `len` prefix at once, a `lines`/`nul` frame once a buffer of the largest allowed
  * frame is full without a terminator), a stream that ends inside a `len` frame fails at `finish`,
  * `raw` batches are at most `maxFrame` bytes. A frame longer than the pool's buffers is read into
  * a larger buffer of its own.
  */
final class BatchReader(framing: Framing, pool: BufferPool, maxFrame: Int = Framing.DefaultMaxFrame):
  require(maxFrame > 0, s"maxFrame was $maxFrame, must be > 0")
  // The largest frame on the wire. No buffer is larger, so every frame that ends in one is within
  // the limit and a batch needs no check per frame.
  private val largest: Int = math.min(maxFrame.toLong + framing.overhead, Framing.MaxArray.toLong).toInt
  // The capacity of a buffer that holds no overlong frame.
  private val normal: Int = math.min(pool.bufferSize, largest)
  private val delimiter: Byte = framing.delimiter.toByte
  private var buffer: ByteBuffer | Null = fresh(normal)
  // lines/nul: [0, clean) of the buffer holds no terminator (scanned already).
  private var clean = 0
  // The bytes of the stream before the buffer's first one (in batches emitted): the offset that a
  // framing error names.
  private var consumed = 0L

  /** The buffer to read into: after the bytes read so far, room up to its limit (never none). */
  def room: ByteBuffer = current

  /** The bytes read but not yet emitted: the start of a frame whose end has not come. */
  def pending: Int = current.position()

  /** After a read into `room`: emits every frame completed so far as one batch, and keeps the
    * incomplete frame after them for the next read.
    * @throws FramingException for a frame over the limit, after emitting the frames before it
    *   (the reader is done then)
    */
  def filled(emit: FrameBatch => Unit): Unit =
    val b = current
    val end = b.position()
    val complete = wholeFramesEnd(b, end)
    val problem = overLimit(b, complete, end)
    if problem != null then
      buffer = null
      if complete > 0 then emit(FrameBatch.pooled(framing, b, complete, terminated = true, pool)) else pool.give(b)
      throw FramingException(problem)
    else if complete > 0 then
      val rest = end - complete
      val next = fresh(capacityFor(b, complete, end))
      next.put(b.slice(complete, rest))
      clean = rest
      buffer = next
      consumed += complete
      emit(FrameBatch.pooled(framing, b, complete, terminated = true, pool))
    else if end == b.limit() then
      // One frame fills the buffer: read on into a larger one.
      val next = fresh(capacityFor(b, 0, end))
      next.put(b.flip())
      pool.give(b)
      buffer = next

  /** Ends the stream: emits the last, unterminated frame of `lines` or `nul` as a batch with
    * `terminated = false`, or fails if a `len` frame is incomplete. The reader is done after this.
    */
  def finish(emit: FrameBatch => Unit): Unit =
    val b = current
    buffer = null
    val end = b.position()
    if end == 0 then pool.give(b)
    else
      framing match
        case Framing.Len =>
          val message =
            if end < 4 then FramingException.truncatedHeader(end, consumed)
            else FramingException.truncatedPayload(end - 4, b.getInt(0) & 0xffffffffL, consumed)
          pool.give(b)
          throw FramingException(message)
        case _ => emit(FrameBatch.pooled(framing, b, end, terminated = false, pool))

  private def current: ByteBuffer =
    val b = buffer
    if b == null then throw IllegalStateException("the reader has finished")
    b

  /** A buffer of `capacity` bytes (limited to it: a pooled one may be larger than a frame may be). */
  private def fresh(capacity: Int): ByteBuffer = pool.take(capacity).limit(capacity)

  /** The end of the last whole frame in `b[0, end)` (0 if none). */
  private def wholeFramesEnd(b: ByteBuffer, end: Int): Int =
    framing match
      case Framing.Raw => end
      case Framing.Lines | Framing.Nul =>
        var i = end - 1
        while i >= clean && b.get(i) != delimiter do i -= 1
        if i < clean then
          clean = end
          0
        else i + 1
      case Framing.Len =>
        var i = 0
        var more = true
        while more && end - i >= 4 do
          val n = prefix(b, i)
          if n <= maxFrame && end - i - 4 >= n then i += 4 + n.toInt else more = false
        i

  /** The length in the `len` prefix at `at`. */
  private def prefix(b: ByteBuffer, at: Int): Long = b.getInt(at) & 0xffffffffL

  /** Why the incomplete frame `b[from, end)` is already too long (its `len` prefix says so, or
    * a `lines`/`nul` frame fills the largest buffer allowed without a terminator), or null.
    */
  private def overLimit(b: ByteBuffer, from: Int, end: Int): String | Null =
    val rest = end - from
    framing match
      case Framing.Len if rest >= 4 && prefix(b, from) > maxFrame =>
        FramingException.tooLongMessage(framing, prefix(b, from), exact = true, maxFrame, consumed + from)
      case Framing.Lines | Framing.Nul if rest >= largest =>
        FramingException.tooLongMessage(framing, rest.toLong, exact = false, maxFrame, consumed + from)
      case _ => null

  /** The capacity for a buffer that starts with the incomplete frame `b[from, end)`: the pool's
    * size, or what that frame needs when it is larger (its prefix says, for `len`; twice what is
    * there, up to the largest allowed, for `lines`/`nul`).
    */
  private def capacityFor(b: ByteBuffer, from: Int, end: Int): Int =
    val rest = end - from
    framing match
      case Framing.Len if rest >= 4 => math.max(normal, 4 + prefix(b, from).toInt)
      case Framing.Lines | Framing.Nul if rest >= normal => math.min(largest.toLong, 2L * rest).toInt
      case _ => normal
