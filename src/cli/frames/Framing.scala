package asyncpipe.cli.frames


import asyncpipe.async.check // not `require`: its by-name message is a closure (ADR 0008, "Start-up")
import java.io.IOException
import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets
import java.util.concurrent.atomic.AtomicInteger

/** Framing: how the messages (frames) that stages pass between processes are laid out on a byte
  * stream (a pipe, a file, a stream socket), chosen with `--frame lines|len|nul|raw`.
  *
  * Wire formats:
  *   - `lines` (the default): each frame is its payload followed by one `'\n'` (0x0A). The payload
  *     is every byte before the newline, `'\r'` included (a CRLF file stays byte-exact). An empty
  *     line is a frame of 0 bytes. The last frame of a stream may lack its newline: it is decoded
  *     with `terminated = false`, and written back without one.
  *   - `nul`: the same with the terminator 0x00 (as `find -print0`, `xargs -0`).
  *   - `len`: each frame is a 4-byte big-endian unsigned length, then that many payload bytes.
  *     Binary-safe (any byte may occur in a payload), keeps datagram boundaries, and has no
  *     unterminated form: a stream that ends inside a frame is an error.
  *   - `raw`: no boundaries at all. Every chunk read is one frame, as it came (split into pieces of
  *     at most `maxFrame` bytes, since a raw stream has no boundary to keep); writing appends the
  *     payloads as they are.
  *
  * Rules:
  *   - A frame boundary is never merged or split silently. Decoding: a frame longer than
  *     `maxFrame` is a [[FramingException]] naming the size, the limit and the framing, never two
  *     frames. Encoding: a frame that holds its own terminator (a `'\n'` under `lines`, a 0 under
  *     `nul`) would come out as two frames, so the [[FrameEncoder]] refuses it (use `len` for such
  *     data); and a frame written after an unterminated one first gets the terminator the earlier
  *     frame lacked, so two inputs' frames never run together.
  *   - A copy `file | stage | file` with the same framing in and out is byte-exact, including a
  *     last frame without terminator (no newline is added that was not there) and empty frames.
  *     (Through `len` the "unterminated" mark is lost: `lines -> len -> lines` ends with a newline.)
  *
  * Pieces: [[Framing]] (the four kinds and `--frame` parsing), [[Frame]] (one payload),
  * [[FrameDecoder]] (bytes in any chunks -> frames), [[BatchDecoder]] (bytes -> [[FrameBatch]]es,
  * runs of whole frames in wire form; [[BatchReader]] in BatchReader.scala does the same where a
  * stream is read), [[FrameEncoder]] (frame -> bytes into a caller's
  * `ByteBuffer`), [[FrameWriter]] (frames and batches -> a batching [[ByteSink]] such as
  * [[OwnedOutput]]). Decoders, encoders and writers are single-threaded, one per stream.
  *
  * Which path for a stage, fastest first (lines of `seq`, 64 KiB chunks, measured by
  * FramingTest's throughput check):
  *   - input and output framing the same (a copy, `mux`): a stream read into pooled direct
  *     buffers, cut by [[BatchReader]] (or bytes in arrays by `BatchDecoder.feed`) -> pass the
  *     batches on (they are immutable, so one may go to many outputs) ->
  *     `FrameWriter.write(batch)`. The cost is per chunk, not per frame: from a direct buffer no
  *     copy at all, from an array about a memory copy.
  *   - frames written out at once, framing changed: `FrameDecoder.feedSlices(buf,
  *     writer.frameSink)`, no allocation per frame (some hundreds of MB/s for short lines).
  *   - frames that must outlive the call (queued, sent to another thread): `FrameDecoder.feed`,
  *     one [[Frame]] and one array per frame (the slowest, by about a third).
  */
enum Framing(val token: String):
  case Lines extends Framing("lines")
  case Len extends Framing("len")
  case Nul extends Framing("nul")
  case Raw extends Framing("raw")

  /** The terminator byte of `lines` and `nul`; -1 for the others. */
  def delimiter: Int = this match
    case Lines => '\n'
    case Nul   => 0
    case _     => -1

  /** The bytes a whole frame has on the wire besides its payload (its terminator or prefix). */
  def overhead: Int = this match
    case Lines | Nul => 1
    case Len         => 4
    case Raw         => 0

object Framing:
  /** The form a `--frame` value must have, for usage errors. */
  val Expected: String = "--frame lines|len|nul|raw"

  /** The framing named `token`, if one is. */
  def named(token: String): Option[Framing] = values.find(_.token == token)

/** A frame's payload is `bytes[0, length)`; `terminated` is false only for the last frame of a
  * `lines` or `nul` stream that ended without its terminator. The decoders hand out a fresh array
  * per frame (`length == bytes.length`), which the receiver owns. Equality compares the payload
  * and `terminated`.
  */
final class Frame(val bytes: Array[Byte], val length: Int, val terminated: Boolean):
  if length < 0 || length > bytes.length then
    throw IllegalArgumentException(s"length was $length, must be in [0, ${bytes.length}]")

  /** The payload as an array of exactly `length` bytes (`bytes` itself when it is that already). */
  def payload: Array[Byte] = if length == bytes.length then bytes else java.util.Arrays.copyOf(bytes, length)

  /** The payload decoded as UTF-8 (malformed input replaced), for messages and tests. */
  def utf8: String = String(bytes, 0, length, StandardCharsets.UTF_8)

  override def equals(other: Any): Boolean = other match
    case f: Frame =>
      f.terminated == terminated && java.util.Arrays.equals(bytes, 0, length, f.bytes, 0, f.length)
    case _ => false

  override def hashCode: Int =
    var h = if terminated then 1 else 0
    var i = 0
    while i < length do
      h = 31 * h + bytes(i)
      i += 1
    h

  override def toString: String =
    val shown = 40
    val text = String(bytes, 0, math.min(length, shown), StandardCharsets.ISO_8859_1)
      .flatMap(c => if c >= ' ' && c < 0x7f && c != '\\' then c.toString else f"\\x${c.toInt}%02x")
    val more = if length > shown then "..." else ""
    val mark = if terminated then "" else ", unterminated"
    s"Frame($length bytes: \"$text$more\"$mark)"

object Frame:
  def apply(bytes: Array[Byte], terminated: Boolean = true): Frame = new Frame(bytes, bytes.length, terminated)
  def apply(text: String): Frame = apply(text.getBytes(StandardCharsets.UTF_8))

/** A stream broke a framing rule: a frame over the size limit, a stream that ends inside a `len`
  * frame, or a frame that the output framing cannot represent. An `IOException`, so a stage
  * reports it like any other failure of its input or output. The message names the sizes, the
  * limit and the framing.
  */
final class FramingException(message: String) extends IOException(message)

/** Receives decoded frames without a copy: `bytes[offset, offset + length)` is valid only during
  * the call (it may be the caller's input buffer or the decoder's own), so a receiver that keeps a
  * frame copies it. The fast path for a stage that writes each frame out at once.
  */
trait FrameSink:
  def frame(bytes: Array[Byte], offset: Int, length: Int, terminated: Boolean): Unit

  /** A frame in an array nobody else holds (offset 0, the whole array): a receiver that keeps
    * frames may take it as it is. By default the same as `frame`.
    */
  private[cli] def owned(bytes: Array[Byte], terminated: Boolean): Unit = frame(bytes, 0, bytes.length, terminated)

/** What both decoders share: their framing and limit, and a failure that sticks (after a
  * framing error a decoder keeps failing the same way).
  */
sealed abstract class FailingDecoder(val framing: Framing, val maxFrame: Int):
  private var failure: FramingException | Null = null
  /** The bytes of the stream before the frame being decoded (of every frame emitted so far): the
    * offset that a framing error names.
    */
  protected var consumed = 0L

  /** Fails for a frame of `size` bytes that starts `into` bytes after [[consumed]]. */
  protected final def tooLong(size: Long, exact: Boolean, into: Long = 0): Nothing =
    fail(FrameDecoder.tooLongMessage(framing, size, exact, maxFrame, consumed + into))

  protected final def fail(message: String): Nothing =
    val e = FramingException(message)
    failure = e
    throw e

  protected final def throwIfFailed(): Unit =
    val f = failure
    if f != null then throw f

  // Where a buffer without an accessible array (a direct or read-only one) is copied to be decoded.
  private var scratch: Array[Byte] = Array.emptyByteArray

  /** The scratch array, made on first use. */
  protected final def scratchArray(): Array[Byte] =
    if scratch.length == 0 then scratch = new Array[Byte](FrameDecoder.ScratchSize)
    scratch

  /** Decodes the remaining bytes of `buf` (its position ends at its limit) with
    * `decode(array, from, to)`: in place when it has an accessible array, else in copies of up to
    * [[FrameDecoder.ScratchSize]] bytes. Inline, so a decoder's feed makes no closure.
    */
  protected final inline def inPieces(buf: ByteBuffer)(inline decode: (Array[Byte], Int, Int) => Unit): Unit =
    throwIfFailed()
    if buf.hasArray then
      val start = buf.arrayOffset + buf.position()
      val end = buf.arrayOffset + buf.limit()
      buf.position(buf.limit())
      decode(buf.array, start, end)
    else
      val piece = scratchArray()
      while buf.hasRemaining do
        val n = math.min(buf.remaining, piece.length)
        buf.get(piece, 0, n)
        decode(piece, 0, n)

/** Turns a byte stream, fed in chunks of any size, into frames (see [[Framing]] for the formats).
  * A frame may span many chunks and a chunk may hold many frames; every whole frame is emitted as
  * soon as its last byte is fed, and `finish` at the end of the stream emits or rejects what is
  * left. After a [[FramingException]] the decoder keeps failing with it; after an exception thrown
  * by the receiver its state is unspecified (discard it).
  *
  * @param maxFrame the largest payload accepted, in bytes; a longer frame is an error (for `raw`,
  *                 the largest piece a chunk is cut into).
  */
final class FrameDecoder(framing: Framing, maxFrame: Int = FrameDecoder.DefaultMaxFrame)
    extends FailingDecoder(framing, maxFrame):
  check(maxFrame > 0 && maxFrame <= FrameDecoder.MaxArray,
    s"maxFrame was $maxFrame, must be in [1, ${FrameDecoder.MaxArray}]")

  private val delimiter: Byte = framing.delimiter.toByte
  // lines, nul: the start of a frame whose terminator has not come yet.
  private var pending: Array[Byte] = Array.emptyByteArray
  private var pendingLength = 0
  // len: the header bytes seen so far (0 to 3 while waiting, 4 once a payload is being filled),
  // their value, and the payload being filled.
  private var headerCount = 0
  private var header = 0
  private var payload: Array[Byte] | Null = null
  private var filled = 0
  // Chunks of a buffer without an accessible array are copied through this one.

  /** Decodes all remaining bytes of `buf` (its position ends at its limit), emitting each whole
    * frame as a [[Frame]] that the receiver owns.
    */
  def feed(buf: ByteBuffer)(emit: Frame => Unit): Unit = feedSlices(buf, FrameDecoder.Framed(emit))

  /** Decodes `bytes[offset, offset + length)`. */
  def feed(bytes: Array[Byte], offset: Int, length: Int)(emit: Frame => Unit): Unit =
    feedSlices(bytes, offset, length, FrameDecoder.Framed(emit))

  /** Ends the stream: emits the last, unterminated frame of `lines` or `nul` (if any bytes follow
    * the last terminator); fails with a [[FramingException]] if a `len` frame is incomplete. The
    * decoder is then empty and could decode a new stream.
    */
  def finish(emit: Frame => Unit): Unit = finishSlices(FrameDecoder.Framed(emit))

  /** As `feed`, handing frames to `sink` as slices, without a copy where the frame lies whole in
    * the chunk.
    */
  def feedSlices(buf: ByteBuffer, sink: FrameSink): Unit = inPieces(buf)((a, from, to) => decode(a, from, to, sink))

  def feedSlices(bytes: Array[Byte], offset: Int, length: Int, sink: FrameSink): Unit =
    java.util.Objects.checkFromIndexSize(offset, length, bytes.length)
    throwIfFailed()
    decode(bytes, offset, offset + length, sink)

  def finishSlices(sink: FrameSink): Unit =
    throwIfFailed()
    framing match
      case Framing.Lines | Framing.Nul =>
        if pendingLength > 0 then
          val last = java.util.Arrays.copyOf(pending, pendingLength)
          pendingLength = 0
          pending = Array.emptyByteArray
          sink.owned(last, terminated = false)
      case Framing.Len =>
        if payload != null then fail(FrameDecoder.truncatedPayload(filled, payload.nn.length, consumed))
        else if headerCount > 0 then fail(FrameDecoder.truncatedHeader(headerCount, consumed))
      case Framing.Raw => ()

  /** True when bytes of an incomplete frame are held (so ending the stream now would emit an
    * unterminated frame, or fail for `len`).
    */
  def hasPartialFrame: Boolean = pendingLength > 0 || headerCount > 0 || payload != null

  private def decode(a: Array[Byte], from: Int, to: Int, sink: FrameSink): Unit =
    framing match
      case Framing.Lines | Framing.Nul => decodeDelimited(a, from, to, sink)
      case Framing.Len                 => decodeLen(a, from, to, sink)
      case Framing.Raw                 => decodeRaw(a, from, to, sink)

  // ---- lines, nul ------------------------------------------------------------------------------

  private def decodeDelimited(a: Array[Byte], from: Int, to: Int, sink: FrameSink): Unit =
    val d = delimiter
    var start = from
    var i = from
    while i < to do
      // The hot loop: find the next terminator.
      while i < to && a(i) != d do i += 1
      if i < to then
        val n = i - start
        if pendingLength == 0 then
          if n > maxFrame then tooLong(n.toLong, exact = true)
          consumed += n + 1
          sink.frame(a, start, n, terminated = true)
        else
          val total = pendingLength.toLong + n
          if total > maxFrame then tooLong(total, exact = true)
          val whole = java.util.Arrays.copyOf(pending, total.toInt)
          System.arraycopy(a, start, whole, pendingLength, n)
          pendingLength = 0
          if pending.length > FrameDecoder.ScratchSize then pending = Array.emptyByteArray
          consumed += total + 1
          sink.owned(whole, terminated = true)
        i += 1
        start = i
    if start < to then keep(a, start, to)

  /** Holds `a[from, to)`, the start of a frame whose terminator has not come yet. */
  private def keep(a: Array[Byte], from: Int, to: Int): Unit =
    val n = to - from
    val total = pendingLength.toLong + n
    // Fails as soon as the limit is passed: waiting for the terminator could mean holding an
    // unbounded amount.
    if total > maxFrame then tooLong(total, exact = false)
    if total > pending.length then
      val grown = math.max(total, math.min(pending.length.toLong * 2, maxFrame.toLong))
      pending = java.util.Arrays.copyOf(pending, math.max(grown.toInt, 64))
    System.arraycopy(a, from, pending, pendingLength, n)
    pendingLength = total.toInt

  // ---- len -------------------------------------------------------------------------------------

  private def decodeLen(a: Array[Byte], from: Int, to: Int, sink: FrameSink): Unit =
    var i = from
    while i < to do
      val p = payload
      if p != null then
        val n = math.min(p.length - filled, to - i)
        System.arraycopy(a, i, p, filled, n)
        filled += n
        i += n
        if filled == p.length then
          payload = null
          headerCount = 0
          consumed += 4 + p.length
          sink.owned(p, terminated = true)
      else if headerCount == 0 && to - i >= 4 then
        val length = FrameDecoder.readLength(a, i)
        i += 4
        checkLen(length)
        if to - i >= length then
          consumed += 4 + length
          sink.frame(a, i, length.toInt, terminated = true)
          i += length.toInt
        else
          headerCount = 4
          payload = new Array[Byte](length.toInt)
          filled = 0
      else
        header = (header << 8) | (a(i) & 0xff)
        headerCount += 1
        i += 1
        if headerCount == 4 then
          val length = header & 0xffffffffL
          header = 0
          checkLen(length)
          if length == 0 then
            headerCount = 0
            consumed += 4
            sink.owned(Array.emptyByteArray, terminated = true)
          else
            payload = new Array[Byte](length.toInt)
            filled = 0

  private def checkLen(length: Long): Unit = if length > maxFrame then tooLong(length, exact = true)

  // ---- raw -------------------------------------------------------------------------------------

  private def decodeRaw(a: Array[Byte], from: Int, to: Int, sink: FrameSink): Unit =
    var i = from
    while i < to do
      val n = math.min(maxFrame, to - i)
      sink.frame(a, i, n, terminated = true)
      i += n

  // ---- errors ----------------------------------------------------------------------------------


object FrameDecoder:
  /** The default largest frame: 16 MiB. */
  val DefaultMaxFrame: Int = 16 * 1024 * 1024
  /** The largest array the JVM reliably allocates. */
  val MaxArray: Int = Int.MaxValue - 8
  private[cli] val ScratchSize = 64 * 1024

  private[cli] def tooLongMessage(framing: Framing, size: Long, exact: Boolean, maxFrame: Int, at: Long): String =
    val what = if exact then s"of $size bytes" else s"of at least $size bytes (its end not yet read)"
    s"a ${framing.token} frame $what at byte $at of the stream exceeds the limit of $maxFrame bytes; frames are never split"

  private[cli] def truncatedPayload(got: Long, of: Long, at: Long): String =
    s"the stream ended inside a len frame at byte $at: $got of its $of payload bytes came"

  private[cli] def truncatedHeader(got: Int, at: Long): String =
    s"the stream ended inside a len frame header at byte $at: $got of its 4 length bytes came"

  private[cli] def readLength(a: Array[Byte], i: Int): Long =
    (((a(i) & 0xff) << 24) | ((a(i + 1) & 0xff) << 16) | ((a(i + 2) & 0xff) << 8) | (a(i + 3) & 0xff)) & 0xffffffffL

  /** Writes a `len` frame's 4-byte big-endian length prefix at `a(i)`. */
  private[cli] def writeLength(a: Array[Byte], i: Int, length: Int): Unit =
    a(i) = (length >>> 24).toByte
    a(i + 1) = (length >>> 16).toByte
    a(i + 2) = (length >>> 8).toByte
    a(i + 3) = length.toByte

  /** Adapts a `Frame => Unit` receiver: copies slices, takes owned arrays as they are. */
  private final class Framed(emit: Frame => Unit) extends FrameSink:
    def frame(bytes: Array[Byte], offset: Int, length: Int, terminated: Boolean): Unit =
      emit(new Frame(java.util.Arrays.copyOfRange(bytes, offset, offset + length), length, terminated))
    override private[cli] def owned(bytes: Array[Byte], terminated: Boolean): Unit =
      emit(new Frame(bytes, bytes.length, terminated))

/** Whole frames in their wire form, as [[BatchDecoder]] and [[BatchReader]] hand them out: the
  * batch's `length` bytes hold complete frames of `framing`, each with its terminator or length
  * prefix, except that when `terminated` is false the last frame (of `lines` or `nul`, at the end
  * of a stream) lacks its terminator. Batches can be concatenated, interleaved and copied out as
  * they are without ever merging or splitting a frame; [[FrameWriter]] writes one to an output of
  * the same framing as it is, and re-encodes it frame by frame otherwise. Immutable once made, so
  * one batch may go to many outputs.
  *
  * The bytes live in a heap array, or in a direct buffer of a [[BufferPool]] (a stream input reads
  * into one and an output writes from it: no copy in user space). A pooled batch goes back to its
  * pool when every consumer has called `release()`: whoever hands it to `n` consumers first calls
  * `share(n)`, and each consumer releases it once it no longer reads it. A batch that is never
  * released is simply collected; releasing one too early would let the pool reuse bytes still being
  * read, so a consumer that is unsure does not release. For a heap batch both are no-ops.
  */
final class FrameBatch private (
    val framing: Framing,
    val length: Int,
    val terminated: Boolean,
    heap: Array[Byte] | Null,
    offHeap: ByteBuffer | Null, // [0, length) of `owned`
    owned: ByteBuffer | Null,
    pool: BufferPool | Null
):
  private val holders: AtomicInteger | Null = if pool != null then AtomicInteger(1) else null
  private lazy val copied: Array[Byte] =
    val a = new Array[Byte](length)
    offHeap.nn.get(0, a)
    a

  /** The batch's bytes as an array: its own, or (for a pooled batch) a copy made once. */
  def bytes: Array[Byte] = if heap != null then heap else copied

  /** A fresh view of the batch's bytes, `[0, length)`: read it without a copy. */
  def data: ByteBuffer = if heap != null then ByteBuffer.wrap(heap, 0, length) else offHeap.nn.duplicate()

  /** Before handing the batch to `consumers` readers (each of which calls `release()` once). */
  def share(consumers: Int): Unit =
    val h = holders
    if h != null && consumers > 1 then h.addAndGet(consumers - 1)

  /** This reader is done with the batch: the last one gives its buffer back to the pool. */
  def release(): Unit =
    val h = holders
    if h != null then
      val left = h.decrementAndGet()
      if left == 0 then pool.nn.give(owned.nn)
      else if left < 0 then throw IllegalStateException(s"$this released more often than shared")

  /** Hands each frame to `sink` as a slice of `bytes`, in order. */
  def foreach(sink: FrameSink): Unit =
    val bytes = this.bytes
    framing match
      case Framing.Lines | Framing.Nul =>
        val d = framing.delimiter.toByte
        var start = 0
        var i = 0
        while i < length do
          while i < length && bytes(i) != d do i += 1
          if i < length then
            sink.frame(bytes, start, i - start, terminated = true)
            i += 1
            start = i
        if start < length then sink.frame(bytes, start, length - start, terminated)
      case Framing.Len =>
        var i = 0
        while i < length do
          val n = FrameDecoder.readLength(bytes, i).toInt
          sink.frame(bytes, i + 4, n, terminated = true)
          i += 4 + n
      case Framing.Raw => if length > 0 then sink.frame(bytes, 0, length, terminated = true)

  /** How many frames the batch holds (a pass over its bytes for `lines` and `nul`). */
  def frameCount: Int =
    framing match
      case Framing.Lines | Framing.Nul =>
        val n = delimiters(framing.delimiter.toByte)
        if !terminated && length > 0 then n + 1 else n
      case Framing.Len =>
        val view = data
        var n = 0
        var i = 0
        while i < length do
          i += 4 + view.getInt(i)
          n += 1
        n
      case Framing.Raw => if length > 0 then 1 else 0

  private def delimiters(d: Byte): Int =
    var n = 0
    var i = 0
    if heap != null then
      val a = heap
      while i < length do
        if a(i) == d then n += 1
        i += 1
    else
      // In array-sized pieces: a loop over an array is several times faster than one of
      // ByteBuffer.get(i) on a direct buffer (under C1, which stages run with, many times).
      val b = offHeap.nn
      val piece = new Array[Byte](math.min(length, 16 * 1024))
      while i < length do
        val m = math.min(piece.length, length - i)
        b.get(i, piece, 0, m)
        var j = 0
        while j < m do
          if piece(j) == d then n += 1
          j += 1
        i += m
    n

  /** The frames, each copied into a [[Frame]]. */
  def frames: Vector[Frame] =
    val out = Vector.newBuilder[Frame]
    foreach((b, o, l, t) => out += new Frame(java.util.Arrays.copyOfRange(b, o, o + l), l, t))
    out.result()

  override def toString: String =
    s"FrameBatch(${framing.token}, $length bytes${if terminated then "" else ", last frame unterminated"})"

object FrameBatch:
  /** The batch of `bytes[0, length)`. */
  def apply(framing: Framing, bytes: Array[Byte], length: Int, terminated: Boolean): FrameBatch =
    if length < 0 || length > bytes.length then
      throw IllegalArgumentException(s"length was $length, must be in [0, ${bytes.length}]")
    new FrameBatch(framing, length, terminated, bytes, null, null, null)

  /** The batch of `buffer[0, length)`, a buffer of `pool` that goes back to it once released. */
  def pooled(framing: Framing, buffer: ByteBuffer, length: Int, terminated: Boolean, pool: BufferPool): FrameBatch =
    if length < 0 || length > buffer.capacity then
      throw IllegalArgumentException(s"length was $length, must be in [0, ${buffer.capacity}]")
    new FrameBatch(framing, length, terminated, null, buffer.slice(0, length), buffer, pool)

  /** One frame of `length` bytes from `bytes[offset, ...)`, as a batch of its own (in `len` wire
    * form, so that every payload, an empty one or one holding a newline, stays one frame).
    */
  def single(bytes: Array[Byte], offset: Int, length: Int): FrameBatch =
    java.util.Objects.checkFromIndexSize(offset, length, bytes.length)
    val wire = new Array[Byte](4 + length)
    FrameDecoder.writeLength(wire, 0, length)
    System.arraycopy(bytes, offset, wire, 4, length)
    FrameBatch(Framing.Len, wire, wire.length, terminated = true)

/** Turns a byte stream into [[FrameBatch]]es: per chunk fed, at most one batch holding every frame
  * that the chunk completes, in wire form (one copy, one array), and the start of an incomplete
  * frame kept for the next chunk. The fast path for a stage whose input and output framing are the
  * same (`mux`, a copy): the work per chunk does not grow with the number of frames in it (for
  * `lines` and `nul` it looks for the last terminator from the end; `len` steps from prefix to
  * prefix). The same limits and errors as [[FrameDecoder]]: a frame over `maxFrame` fails (as
  * soon as it is seen to be too long), a stream that ends inside a `len` frame fails at `finish`;
  * `raw` chunks come out as they are, cut into batches of at most `maxFrame` bytes.
  */
final class BatchDecoder(framing: Framing, maxFrame: Int = FrameDecoder.DefaultMaxFrame)
    extends FailingDecoder(framing, maxFrame):
  check(maxFrame > 0 && maxFrame <= FrameDecoder.MaxArray - 4,
    s"maxFrame was $maxFrame, must be in [1, ${FrameDecoder.MaxArray - 4}]")

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

  /** Decodes all remaining bytes of `buf` (its position ends at its limit). */
  def feed(buf: ByteBuffer)(emit: FrameBatch => Unit): Unit = inPieces(buf)((a, from, to) => decode(a, from, to, emit))

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
          if inHeader then fail(FrameDecoder.truncatedHeader(headerCount, consumed))
          else fail(FrameDecoder.truncatedPayload(frameLength - remaining, frameLength, consumed))
        case _ =>
          val last = java.util.Arrays.copyOf(pending, pendingLength)
          pendingLength = 0
          pending = Array.emptyByteArray
          emit(FrameBatch(framing, last, last.length, terminated = false))

  def hasPartialFrame: Boolean = pendingLength > 0

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
          val length = FrameDecoder.readLength(a, i)
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


/** Writes frames as bytes of one output stream (see [[Framing]]). Stateful: it remembers whether
  * the last frame written was unterminated, so that the next frame first completes it.
  *
  * `encode` writes a whole frame into a caller's `ByteBuffer` or nothing (returning false: flush
  * the buffer and try again). A frame larger than any buffer is written in three parts:
  * `encodeHead` (into the buffer), the payload as it is, then `encodeTail`. [[FrameWriter]] does
  * all of this over a [[ByteSink]].
  *
  * @param checkFrames refuse (with a [[FramingException]]) a `lines` frame holding a `'\n'` or a
  *                    `nul` frame holding a 0, which would be split by the next reader. A caller
  *                    that knows its frames cannot hold one (they were decoded with the same
  *                    framing) may turn the scan off.
  */
final class FrameEncoder(val framing: Framing, val checkFrames: Boolean = true):
  private val delimiter: Byte = framing.delimiter.toByte
  private val delimited = framing == Framing.Lines || framing == Framing.Nul
  // The last frame written lacked its terminator, which is owed if another frame follows.
  private var owed = false

  /** The bytes `encode` writes for a frame of `length` bytes (now: an owed terminator counts). */
  def encodedSize(length: Int, terminated: Boolean): Long =
    framing match
      case Framing.Lines | Framing.Nul => length.toLong + (if owed then 1 else 0) + (if terminated then 1 else 0)
      case Framing.Len                 => length.toLong + 4
      case Framing.Raw                 => length.toLong

  def encode(frame: Frame, dst: ByteBuffer): Boolean = encode(frame.bytes, 0, frame.length, frame.terminated, dst)

  /** Writes the frame `bytes[offset, offset + length)` whole into `dst` and returns true, or, if
    * it does not fit in `dst.remaining`, writes nothing and returns false. `terminated = false`
    * (lines, nul) leaves the terminator out; `len` and `raw` ignore it.
    */
  def encode(bytes: Array[Byte], offset: Int, length: Int, terminated: Boolean, dst: ByteBuffer): Boolean =
    java.util.Objects.checkFromIndexSize(offset, length, bytes.length)
    if dst.hasArray then
      val base = dst.arrayOffset
      val end = encodeInto(bytes, offset, length, terminated, dst.array, base + dst.position(), base + dst.limit())
      if end < 0 then false
      else
        dst.position(end - base)
        true
    else if encodedSize(length, terminated) > dst.remaining then false
    else
      check(bytes, offset, length)
      encodeHead(length, terminated, dst)
      dst.put(bytes, offset, length)
      encodeTail(terminated, dst)
      true

  /** The array form of `encode`: writes the frame into `dst[pos, limit)` and returns the position
    * after it, or -1 (nothing written) if it does not fit. The hot path of [[FrameWriter]].
    */
  private[cli] def encodeInto(bytes: Array[Byte], offset: Int, length: Int, terminated: Boolean,
      dst: Array[Byte], pos: Int, limit: Int): Int =
    if delimited then
      val d = delimiter
      val room = limit - pos - (if owed then 1 else 0) - (if terminated then 1 else 0)
      if length > room then -1
      else
        var p = pos
        if owed then
          dst(p) = d
          p += 1
        if length <= FrameEncoder.ShortCopy then
          // Short frames (most lines): copy and check in one pass.
          var i = 0
          while i < length do
            val b = bytes(offset + i)
            if b == d && checkFrames then holdsTerminator(length, i)
            dst(p + i) = b
            i += 1
        else
          check(bytes, offset, length)
          System.arraycopy(bytes, offset, dst, p, length)
        p += length
        if terminated then
          dst(p) = d
          p += 1
        owed = !terminated
        p
    else if framing == Framing.Len then
      if length > limit - pos - 4 then -1
      else
        FrameDecoder.writeLength(dst, pos, length)
        System.arraycopy(bytes, offset, dst, pos + 4, length)
        pos + 4 + length
    else if length > limit - pos then -1
    else
      System.arraycopy(bytes, offset, dst, pos, length)
      pos + length

  /** For [[FrameWriter]] writing a batch of this framing as it is: whether a terminator is owed
    * first (it is then taken as written), and after the batch, whether its last frame lacked one.
    */
  private[cli] def takeOwed(): Boolean =
    val o = owed
    owed = false
    o

  private[cli] def batchWritten(batch: FrameBatch): Unit = if delimited then owed = !batch.terminated

  /** Throws a [[FramingException]] if `checkFrames` and the payload holds its own terminator. */
  def check(bytes: Array[Byte], offset: Int, length: Int): Unit =
    if checkFrames && delimited then
      val d = delimiter
      val end = offset + length
      var i = offset
      while i < end && bytes(i) != d do i += 1
      if i < end then holdsTerminator(length, i - offset)

  private def holdsTerminator(length: Int, at: Int): Nothing =
    val what = if framing == Framing.Lines then "a newline" else "a 0 byte"
    throw FramingException(
      s"a frame of $length bytes holds $what at offset $at: written with --frame ${framing.token} it would " +
        "be read back as two frames (use --frame len for binary data)")

  /** Writes what goes before a payload of `length` bytes: an owed terminator, and for `len` the
    * length prefix. At most 4 bytes; `dst` must have room.
    */
  def encodeHead(length: Int, terminated: Boolean, dst: ByteBuffer): Unit =
    if owed then
      dst.put(delimiter)
      owed = false
    if framing == Framing.Len then
      // Byte by byte: big-endian whatever order `dst` was set to.
      dst.put((length >>> 24).toByte).put((length >>> 16).toByte).put((length >>> 8).toByte).put(length.toByte)

  /** Writes what goes after a payload: the terminator of a terminated `lines` or `nul` frame (1
    * byte; `dst` must have room), or records that it is owed.
    */
  def encodeTail(terminated: Boolean, dst: ByteBuffer): Unit =
    if delimited then
      if terminated then dst.put(delimiter) else owed = true

object FrameEncoder:
  /** Frames up to this size are copied byte by byte, checked on the way; longer ones by arraycopy. */
  private val ShortCopy = 32

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
  check(bufferSize >= 8, s"bufferSize was $bufferSize, must be >= 8")

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

  /** A [[FrameSink]] that writes every frame it receives: `decoder.feedSlices(buf, writer.frameSink)`
    * copies frames from input to output without allocating.
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
