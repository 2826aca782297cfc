package asyncpipe.cli

import java.io.{FileDescriptor, FileOutputStream, IOException}
import java.nio.ByteBuffer
import java.nio.channels.WritableByteChannel
import java.nio.charset.StandardCharsets
import java.util.concurrent.TimeUnit
import java.util.concurrent.locks.{LockSupport, ReentrantLock}

/** Raised by [[OwnedOutput]] once the reader of the output has gone away (EPIPE). It is a normal
  * end for a pipeline stage: `Main` turns it into exit status 141 and prints nothing.
  */
final class DownstreamGone(cause: IOException)
    extends IOException(s"downstream gone: ${cause.getMessage}", cause)

/** A buffered byte sink that the tool owns instead of `System.out`.
  *
  * Why not `System.out`: a `PrintStream` swallows write errors, and the JVM ignores SIGPIPE, so a
  * stage writing into a closed pipe would keep running and writing forever. Here every write error
  * surfaces: EPIPE as [[DownstreamGone]] (at once, and for every later write without another
  * system call), anything else (a full disk, say) as the plain `IOException`.
  *
  * Batching: writes go into one buffer of `capacity` bytes, which is written out when full, on
  * `flush()`, when the writer has been idle for `idleFlush` (so an interactive line reaches the
  * next stage promptly without a system call per line), and at the latest `maxDelay` (by default
  * 10 idle periods) after the oldest byte in it was written (so a steady trickle, a line every
  * millisecond, is not held back until the buffer fills). Writes larger than the buffer bypass it.
  * All methods are thread-safe.
  */
final class OwnedOutput(
    channel: WritableByteChannel,
    capacity: Int = OwnedOutput.DefaultCapacity,
    idleFlushNanos: Long = OwnedOutput.DefaultIdleFlushNanos,
    maxDelayNanos: Long = -1,
    /** The descriptor `channel` writes, when it is one of the process's standard ones; else -1. */
    val descriptor: Int = -1
):
  asyncpipe.async.check(capacity > 0, s"capacity was $capacity, must be > 0")
  asyncpipe.async.check(idleFlushNanos > 0, s"idleFlushNanos was $idleFlushNanos, must be > 0")
  // By default 10 idle periods: 20 ms for the default 2 ms, so at most 50 flushes a second.
  private val maxDelay = if maxDelayNanos < 0 then OwnedOutput.MaxDelayPeriods * idleFlushNanos else maxDelayNanos
  asyncpipe.async.check(maxDelay >= idleFlushNanos, s"maxDelayNanos was $maxDelayNanos, must be >= idleFlushNanos ($idleFlushNanos)")

  // Direct, so that writing it out needs no copy into the JDK's temporary direct buffer.
  private val buffer = ByteBuffer.allocateDirect(capacity)
  private val lock = ReentrantLock()
  @volatile private var failure: IOException | Null = null
  // Idle flushing: `writes` counts writes (under `lock`); the flusher sleeps until armed, then flushes
  // once a whole idle period passes without a new write.
  private var writes = 0L
  @volatile private var armed = false
  private lazy val flusher: Thread = Thread.ofVirtual().name("asyncpipe-idle-flush").start(() => idleLoop())

  def write(bytes: Array[Byte]): Unit = write(bytes, 0, bytes.length)

  def write(s: String): Unit = write(s.getBytes(StandardCharsets.UTF_8))

  def write(bytes: Array[Byte], offset: Int, length: Int): Unit = write(ByteBuffer.wrap(bytes, offset, length))

  /** Writes the remaining bytes of `src` (its position ends at its limit); a direct `src` at
    * least as large as the buffer goes to the channel as it is, without a copy.
    */
  def write(src: ByteBuffer): Unit =
    var wake = false
    lock.lock()
    try
      throwIfFailed()
      if src.remaining >= capacity then
        drain()
        writeFully(src)
      else
        if src.remaining > buffer.remaining then drain()
        buffer.put(src)
      writes += 1
      wake = !armed && buffer.position() > 0
      if wake then armed = true
    finally lock.unlock()
    if wake then LockSupport.unpark(flusher)

  /** Writes out everything buffered. */
  def flush(): Unit =
    lock.lock()
    try
      throwIfFailed()
      drain()
    finally lock.unlock()

  /** Flushes if the lock can be had within `timeoutMillis`, ignoring errors: for shutdown hooks. */
  def flushQuietly(timeoutMillis: Long = 100): Unit =
    if lock.tryLock(timeoutMillis, TimeUnit.MILLISECONDS) then
      try if failure == null then drain()
      catch case _: IOException => ()
      finally lock.unlock()

  /** True once a write has failed; every later write throws the same failure. */
  def isFailed: Boolean = failure != null

  private def idleLoop(): Unit =
    while true do
      while !armed do LockSupport.park(this)
      // Flush once a whole idle period passes with no write, or once the first unflushed write is
      // `maxDelay` old, whichever comes first; parking may return early (a leftover permit, a
      // spurious wake-up), so the deadline, not the wake-up, decides.
      val latest = System.nanoTime() + maxDelay
      var seen = writesNow
      var deadline = math.min(System.nanoTime() + idleFlushNanos, latest)
      var due = false
      while !due do
        LockSupport.parkNanos(this, deadline - System.nanoTime())
        val now = writesNow
        val t = System.nanoTime()
        if t - latest >= 0 then due = true
        else if now != seen then
          seen = now
          deadline = math.min(t + idleFlushNanos, latest)
        else due = t - deadline >= 0
      lock.lock()
      try
        armed = false
        if failure == null then drain()
      catch case _: IOException => () // recorded in `failure`: the next write reports it
      finally lock.unlock()

  private def writesNow: Long =
    lock.lock()
    try writes
    finally lock.unlock()

  private def throwIfFailed(): Unit =
    val f = failure
    if f != null then throw f

  /** Writes the buffer out; caller holds `lock`. */
  private def drain(): Unit =
    if buffer.position() > 0 then
      buffer.flip()
      try writeFully(buffer)
      finally buffer.clear()

  private def writeFully(src: ByteBuffer): Unit =
    try while src.hasRemaining do channel.write(src)
    catch
      case e: IOException =>
        val f = if OwnedOutput.isBrokenPipe(e) then DownstreamGone(e) else e
        failure = f
        throw f

object OwnedOutput:
  val DefaultCapacity: Int = 64 * 1024
  val DefaultIdleFlushNanos: Long = 2_000_000L
  /** The longest a byte waits in the buffer while writes keep coming, in idle periods. */
  val MaxDelayPeriods: Long = 10

  /** The process's standard output (file descriptor 1), unbuffered by the JDK. */
  lazy val stdout: OwnedOutput = OwnedOutput(FileOutputStream(FileDescriptor.out).getChannel, descriptor = 1)

  /** True when `e` is the OS reporting that the reading end of a pipe or socket is closed. */
  def isBrokenPipe(e: IOException): Boolean =
    e.isInstanceOf[DownstreamGone] || Option(e.getMessage).exists { m =>
      m.contains("Broken pipe") || m.contains("Connection reset by peer")
    }
