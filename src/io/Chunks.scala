package asyncpipe.io

import java.nio.ByteBuffer
import java.nio.channels.FileChannel
import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.atomic.AtomicInteger

/** Whole-array reads and writes through pooled direct buffers of 1 MiB.
  *
  * A heap buffer handed to a `FileChannel` makes the JDK copy it through a temporary direct
  * buffer as large as the request, which it caches per thread; on a fresh virtual thread per
  * operation that is a new 40 MiB allocation for a 40 MiB file. Copying through a pooled 1 MiB
  * chunk costs the same one copy, allocates nothing once the pool is warm, and needs 40 system
  * calls for 40 MiB (`Files.write` uses 8 KiB, 5,000 calls).
  */
private[io] object Chunks:
  val Size: Int = 1 << 20
  private val MaxPooled = 4
  private val Small = 16 * 1024
  private val pool = ConcurrentLinkedQueue[ByteBuffer]()
  private val pooled = AtomicInteger()

  private def take(): ByteBuffer =
    val b = pool.poll()
    if b == null then ByteBuffer.allocateDirect(Size)
    else
      pooled.decrementAndGet()
      b.clear()

  private def give(b: ByteBuffer): Unit =
    if pooled.incrementAndGet() <= MaxPooled then pool.offer(b)
    else pooled.decrementAndGet() // enough pooled: let this one go

  /** Reads into `bytes[off, off + len)` from the channel's position: until `len` bytes or the
    * end if `untilFull`, else what one read gives (a pipe's reader should not wait for more than
    * it got). The number of bytes read; 0 at the end.
    */
  def read(ch: FileChannel, bytes: Array[Byte], off: Int, len: Int, untilFull: Boolean): Int =
    if len == 0 then 0
    else if len <= Small then readSmall(ch, bytes, off, len, untilFull)
    else readLarge(ch, bytes, off, len, untilFull)

  /** Up to `Small` bytes: straight into the array (the JDK's per-thread temporary buffer of this
    * size is cheap); a path of its own, so that large reads do not shape how the JIT compiles it.
    */
  private def readSmall(ch: FileChannel, bytes: Array[Byte], off: Int, len: Int, untilFull: Boolean): Int =
    val into = ByteBuffer.wrap(bytes, off, len)
    var more = true
    while more && into.hasRemaining do
      val n = ch.read(into)
      if n < 0 || (!untilFull && n > 0) then more = false
    into.position() - off

  private def readLarge(ch: FileChannel, bytes: Array[Byte], off: Int, len: Int, untilFull: Boolean): Int =
    val chunk = take()
    try
      var done = 0
      var more = true
      while more && done < len do
        chunk.clear().limit(math.min(len - done, chunk.capacity))
        val n = ch.read(chunk)
        if n < 0 then more = false
        else
          chunk.flip()
          chunk.get(bytes, off + done, n)
          done += n
          if !untilFull && n > 0 then more = false
      done
    finally give(chunk)

  /** Writes all of `bytes` at the channel's position. */
  def writeFully(ch: FileChannel, bytes: Array[Byte]): Unit =
    if bytes.length <= Small then
      val from = ByteBuffer.wrap(bytes)
      while from.hasRemaining do ch.write(from)
    else writeLarge(ch, bytes)

  private def writeLarge(ch: FileChannel, bytes: Array[Byte]): Unit =
    val chunk = take()
    try
      var done = 0
      while done < bytes.length do
        chunk.clear()
        val n = math.min(bytes.length - done, chunk.capacity)
        chunk.put(bytes, done, n).flip()
        while chunk.hasRemaining do ch.write(chunk)
        done += n
    finally give(chunk)
