package asyncpipe.cli.frames

import java.nio.ByteBuffer
import asyncpipe.async.Watchdog

/** [[BufferPool]]: which buffers it keeps for reuse. */
class BufferPoolTest extends munit.FunSuite with Watchdog:

  test("a buffer the pool does not keep (larger than its size, or over `keep`) is dropped") {
    val pool = BufferPool(16, keep = 1)
    val big = pool.take(100)
    assertEquals(big.capacity, 100)
    pool.give(big)
    assertEquals(pool.kept, 0)
    pool.give(pool.take())
    pool.give(ByteBuffer.allocateDirect(16))
    assertEquals(pool.kept, 1)
  }
