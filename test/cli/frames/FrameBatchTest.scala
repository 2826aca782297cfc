package asyncpipe.cli.frames

import asyncpipe.async.Watchdog

/** [[FrameBatch]]: a pooled batch reads as a heap batch does, and goes back to its pool once every
  * consumer has released it.
  */
class FrameBatchTest extends munit.FunSuite with Watchdog:

  test("a pooled batch reads like a heap batch of the same bytes") {
    val text = "one\ntwo\n\nthree".getBytes
    val pool = BufferPool(64, keep = 1)
    val buffer = pool.take()
    buffer.put(text)
    val pooled = FrameBatch.pooled(Framing.Lines, buffer, text.length, terminated = false, pool)
    val heap = FrameBatch(Framing.Lines, text, text.length, terminated = false)
    assertEquals(pooled.frames, heap.frames)
    assertEquals(pooled.frameCount, 4)
    assert(java.util.Arrays.equals(pooled.bytes, text))
    val view = pooled.data
    assertEquals(view.remaining, text.length)
    view.get() // a reader's view is its own: another view starts at 0 again
    assertEquals(pooled.data.position(), 0)
  }

  test("a released batch's buffer is reused, the last given back first; a shared one only after every release") {
    val pool = BufferPool(32, keep = 4)
    val a = pool.take()
    val b = pool.take()
    val batchA = FrameBatch.pooled(Framing.Raw, a, 5, terminated = true, pool)
    val batchB = FrameBatch.pooled(Framing.Raw, b, 5, terminated = true, pool)
    batchB.share(3)
    batchA.release()
    assertEquals(pool.kept, 1)
    batchB.release()
    batchB.release()
    assertEquals(pool.kept, 1, "a batch shared among 3 went back after 2 releases")
    batchB.release()
    assertEquals(pool.kept, 2)
    assert(pool.take() eq b, "the buffer given back last is taken first")
    intercept[IllegalStateException](batchB.release())
  }
