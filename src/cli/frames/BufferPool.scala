package asyncpipe.cli.frames

import java.nio.ByteBuffer

/** Direct buffers of `bufferSize` bytes kept for reuse, up to `keep` of them: a stream input reads
  * into one, the batch made of it travels to the outputs, and the last output to release it gives
  * it back (see [[FrameBatch]]). A pool never waits: when none is free it allocates another, so a
  * buffer that is never given back only costs an allocation.
  *
  * Last in, first out: the buffer given back last, still in the CPU's cache, is taken next (a queue
  * that cycles through every buffer would make each read and write miss the cache).
  */
final class BufferPool(val bufferSize: Int, keep: Int):
  require(bufferSize > 0, s"bufferSize was $bufferSize, must be > 0")
  require(keep > 0, s"keep was $keep, must be > 0")
  private val free = java.util.ArrayDeque[ByteBuffer](keep)

  /** A cleared buffer of at least `min` bytes: a kept one, or a new one (one of its own size when
    * `min` is above the pool's, which the pool will not keep).
    */
  def take(min: Int = bufferSize): ByteBuffer =
    if min > bufferSize then ByteBuffer.allocateDirect(min)
    else
      val b = synchronized(free.pollFirst())
      if b != null then b.clear() else ByteBuffer.allocateDirect(bufferSize)

  /** Takes `b` back for reuse; no one may read or write it after this. */
  def give(b: ByteBuffer): Unit =
    if b.capacity == bufferSize then synchronized { if free.size < keep then free.addFirst(b) }

  /** How many buffers wait for reuse (for tests). */
  def kept: Int = synchronized(free.size)
