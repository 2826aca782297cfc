package asyncpipe.cli.frames

import java.nio.ByteBuffer

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
        Framing.writeLength(dst, pos, length)
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
