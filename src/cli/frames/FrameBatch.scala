package asyncpipe.cli.frames

import java.nio.ByteBuffer
import java.util.concurrent.atomic.AtomicInteger

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
    pool: BufferPool | Null,
    /** Only in a mark ([[FrameBatch.mark]]): what its readers acknowledge. */
    val receipt: HandOffReceipt | Null = null
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
    val r = receipt
    if r != null then r.hold(consumers - 1)

  /** Whether this is a mark: no frames, a receipt to acknowledge once handed off. */
  def isMark: Boolean = receipt != null

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
          val n = Framing.readLength(bytes, i).toInt
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
      // In array-sized pieces: a loop over an array is much faster than one of ByteBuffer.get(i)
      // on a direct buffer, under C1 (which stages run with) most of all.
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
  /** A mark for `receipt`: an empty batch that travels a flow behind the frames sent before it;
    * each output it reaches acknowledges it once those are handed off ([[HandOffReceipt]]).
    */
  def mark(receipt: HandOffReceipt): FrameBatch =
    new FrameBatch(Framing.Len, 0, true, Array.emptyByteArray, null, null, null, receipt)

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
    Framing.writeLength(wire, 0, length)
    System.arraycopy(bytes, offset, wire, 4, length)
    FrameBatch(Framing.Len, wire, wire.length, terminated = true)
