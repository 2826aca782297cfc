package asyncpipe.cli.system

import asyncpipe.cli.frames.*

import java.io.{FileDescriptor, FileOutputStream, IOException}
import java.nio.ByteBuffer
import java.nio.channels.{FileChannel, WritableByteChannel}
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
  *
  * Whole frames: every call that writes (`write`, [[writeParts]]) must carry whole frames, and
  * what one call hands over reaches the OS in write(2) calls made under one hold of the lock (a
  * ''sequence''). So whenever the lock is free, what the OS has from this output ends on a whole
  * frame, and:
  *   - [[OwnedOutput.quiesceAll]] (a second SIGINT/SIGTERM) takes every output's lock for good
  *     before the process halts: a write in progress finishes, and none starts;
  *   - a sequence that fails part way into a regular file (a full disk, a file-size limit) is
  *     cut back (ftruncate) to the last whole frame it wrote, found with the framing given by
  *     [[framedAs]] (without one: to where the sequence began), so the file never ends in part
  *     of a frame.
  */
final class OwnedOutput(
    channel: WritableByteChannel,
    capacity: Int = OwnedOutput.DefaultCapacity,
    idleFlushNanos: Long = OwnedOutput.DefaultIdleFlushNanos,
    maxDelayNanos: Long = -1,
    /** The descriptor `channel` writes, when it is one of the process's standard ones; else -1. */
    val descriptor: Int = -1,
    /** What a halt in the middle of a write does first ([[OwnedOutput.cutAll]]): a socket resets
      * its connection, so that its peer reads a broken stream, not a clean end after part of a frame.
      */
    private val onCut: Runnable | Null = null
) extends ByteSink:
  asyncpipe.async.check(capacity > 0, s"capacity was $capacity, must be > 0")
  asyncpipe.async.check(idleFlushNanos > 0, s"idleFlushNanos was $idleFlushNanos, must be > 0")
  // By default 10 idle periods: 20 ms for the default 2 ms, so at most 50 flushes a second.
  private val maxDelay = if maxDelayNanos < 0 then OwnedOutput.MaxDelayPeriods * idleFlushNanos else maxDelayNanos
  asyncpipe.async.check(maxDelay >= idleFlushNanos, s"maxDelayNanos was $maxDelayNanos, must be >= idleFlushNanos ($idleFlushNanos)")

  // Direct, so that writing it out needs no copy into the JDK's temporary direct buffer.
  private val buffer = ByteBuffer.allocateDirect(capacity)
  private val lock = ReentrantLock()
  @volatile private var failure: IOException | Null = null
  // Told of a failure of the idle flush, which no caller is there to see ([[onIdleFailure]]).
  @volatile private var idleFailed: (IOException => Unit) | Null = null
  // Idle flushing: `writes` counts writes (under `lock`); the flusher sleeps until armed, then flushes
  // once a whole idle period passes without a new write.
  private var writes = 0L
  @volatile private var armed = false
  // The framing of the bytes written, for cutting a failed write back to a whole frame.
  @volatile private var framing: Framing | Null = null
  // The sequence in progress (under `lock`): the buffers it wrote from, each as [from, to) of its
  // own indices (read back only if the sequence fails), and the bytes the OS took so far.
  private var parts = new Array[ByteBuffer | Null](4)
  private var partFrom = new Array[Int](4)
  private var partTo = new Array[Int](4)
  private var partCount = 0
  private var sequenceWritten = 0L
  // A write sequence holds the lock (a frame may be part way out): what [[OwnedOutput.cutAll]] looks at.
  @volatile private var inSequence = false
  OwnedOutput.live.add(this)
  private lazy val flusher: Thread = Thread.ofVirtual().name("asyncpipe-idle-flush").start(() => idleLoop())

  def write(bytes: Array[Byte]): Unit = write(bytes, 0, bytes.length)

  def write(s: String): Unit = write(s.getBytes(StandardCharsets.UTF_8))

  override def write(bytes: Array[Byte], offset: Int, length: Int): Unit = write(ByteBuffer.wrap(bytes, offset, length))

  /** Writes the remaining bytes of `src` (its position ends at its limit); a direct `src` at
    * least as large as the buffer goes to the channel as it is, without a copy.
    */
  override def write(src: ByteBuffer): Unit =
    var wake = false
    lock.lock()
    try
      throwIfFailed()
      begin()
      if src.remaining >= capacity then
        drain()
        writeFully(src)
      else
        if src.remaining > buffer.remaining then drain()
        buffer.put(src)
      writes += 1
      wake = !armed && buffer.position() > 0
      if wake then armed = true
    finally end()
    if wake then LockSupport.unpark(flusher)

  /** Writes the remaining bytes of `srcs`, in order, after what is buffered and in one sequence
    * (see the class comment): for a frame whose parts lie in different buffers (a `len` prefix,
    * a payload larger than any buffer, its terminator).
    */
  override def writeParts(srcs: ByteBuffer*): Unit =
    lock.lock()
    try
      throwIfFailed()
      begin()
      drain()
      for src <- srcs do writeFully(src)
    finally end()

  /** Tells the output the framing of what is written to it (see the class comment). */
  override def framedAs(f: Framing): Unit = framing = f

  /** Runs `body` after writing out everything buffered, holding the output as a write does, so
    * that [[OwnedOutput.quiesceAll]] waits for it: for a kernel copy into this output's
    * descriptor, which must move whole frames (ADR 0009).
    */
  def exclusively[T](body: => T): T =
    lock.lock()
    try
      throwIfFailed()
      begin()
      drain()
      body
    finally end()

  /** Writes out everything buffered. */
  def flush(): Unit =
    lock.lock()
    try
      throwIfFailed()
      begin()
      drain()
    finally lock.unlock()

  /** Flushes if the lock can be had within `timeoutMillis`, ignoring errors: for shutdown hooks. */
  def flushQuietly(timeoutMillis: Long = 100): Unit =
    if lock.tryLock(timeoutMillis, TimeUnit.MILLISECONDS) then
      begin()
      try if failure == null then drain()
      catch case _: IOException => ()
      finally lock.unlock()

  /** True once a write has failed; every later write throws the same failure. */
  def isFailed: Boolean = failure != null

  /** Has `report` told, on the flusher's thread, when a flush of the idle writer fails (a full
    * disk): no write is in progress to throw it, and the writer may stay idle for long (a followed
    * file, a quiet pipe), so its owner must hear of it now, not at its next write. A failure that
    * came before this call is told at once. One listener: a later call replaces it.
    */
  def onIdleFailure(report: IOException => Unit): Unit =
    idleFailed = report
    val f = failure
    if f != null then report(f)

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
      var failed: IOException | Null = null
      lock.lock()
      try
        armed = false
        begin()
        if failure == null then drain()
      catch case e: IOException => failed = e // also recorded in `failure`: the next write throws it
      finally lock.unlock()
      val report = idleFailed
      if failed != null && report != null then
        try report(failed.nn) catch case _: Exception => ()

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

  /** Starts a sequence (see the class comment); caller holds `lock`. */
  /** Ends a sequence begun with [[begin]], and releases the lock. */
  private def end(): Unit =
    inSequence = false
    lock.unlock()

  private def begin(): Unit =
    inSequence = true
    while partCount > 0 do
      partCount -= 1
      parts(partCount) = null // the caller's buffers are theirs again
    sequenceWritten = 0

  /** Writes all of `src` as a part of the sequence in progress; caller holds `lock`. */
  private def writeFully(src: ByteBuffer): Unit =
    remember(src)
    try
      while src.hasRemaining do sequenceWritten += channel.write(src)
    catch
      case e: IOException =>
        val f =
          if OwnedOutput.isBrokenPipe(e) then DownstreamGone(e)
          else cutBack(e)
        failure = f
        throw f

  private def remember(src: ByteBuffer): Unit =
    if partCount == parts.length then
      parts = java.util.Arrays.copyOf(parts, 2 * partCount)
      partFrom = java.util.Arrays.copyOf(partFrom, 2 * partCount)
      partTo = java.util.Arrays.copyOf(partTo, 2 * partCount)
    parts(partCount) = src
    partFrom(partCount) = src.position()
    partTo(partCount) = src.limit()
    partCount += 1

  /** After the sequence in progress failed with `e`: when this output is a regular file that
    * ends with what the sequence wrote, cuts that back to its last whole frame. Returns the
    * failure to report (`e`, with what was done said after its reason).
    */
  private def cutBack(e: IOException): IOException =
    if sequenceWritten == 0 then e
    else
      channel match
        case fc: FileChannel if OwnedOutput.isRegularFile(fc) =>
          try
            val end = fc.position()
            if fc.size() != end then e // someone else wrote after us: their bytes are not ours to cut
            else
              val keep = OwnedOutput.wholeFrames(written(), framing)
              val at = end - sequenceWritten + keep
              if keep < sequenceWritten then fc.truncate(at)
              IOException(s"${asyncpipe.io.IoFailure.reason(e)} (the output ends at its last whole frame, byte $at)", e)
          catch case _: IOException => e
        case _ => e

  /** The bytes the OS took of the sequence in progress, in order. */
  private def written(): Array[Byte] =
    val out = new Array[Byte](sequenceWritten.toInt)
    var at = 0
    var i = 0
    while i < partCount && at < out.length do
      val n = math.min(partTo(i) - partFrom(i), out.length - at)
      parts(i).nn.get(partFrom(i), out, at, n)
      at += n
      i += 1
    out

object OwnedOutput:
  val DefaultCapacity: Int = FrameWriter.DefaultBufferSize
  /** Every output made, for [[quiesceAll]] (weakly held: an output nobody uses goes away). */
  private val live: java.util.Set[OwnedOutput] =
    java.util.Collections.synchronizedSet(java.util.Collections.newSetFromMap(java.util.WeakHashMap()))

  /** Takes the lock of every output and keeps it: waits for the write in progress of each (which
    * ends on a whole frame; a `raw` output, which has no frames, is not waited for) and lets no
    * other begin. For ending the process at once; nothing can be written through these outputs
    * afterwards.
    */
  /** For a halt that will not wait for writes in progress (a third signal): each output in the
    * middle of one does what it was made to ([[OwnedOutput]]'s `onCut`: a socket resets its
    * connection). Never throws: the halt must follow.
    */
  def cutAll(): Unit =
    try
      val all = live.synchronized(live.toArray(new Array[OwnedOutput](0)))
      for o <- all do
        val cut = o.onCut
        if o.inSequence && cut != null then try cut.run() catch case _: Exception => ()
    catch case _: Throwable => ()

  def quiesceAll(): Unit =
    val all = live.synchronized(live.toArray(new Array[OwnedOutput](0)))
    for o <- all do
      // A raw output has no frames to keep whole: it is taken only if it is free.
      if o.framing == Framing.Raw then { val _ = o.lock.tryLock() } else o.lock.lock()

  /** How many of the first `bytes.length` bytes (starting on a frame boundary) are whole frames
    * of `framing`; with no framing known, none can be vouched for.
    */
  private[cli] def wholeFrames(bytes: Array[Byte], framing: Framing | Null): Long =
    framing match
      case null => 0
      case Framing.Raw => bytes.length
      case Framing.Len =>
        var i = 0L
        var whole = true
        while whole && i + 4 <= bytes.length do
          val n = Framing.readLength(bytes, i.toInt)
          if i + 4 + n <= bytes.length then i += 4 + n else whole = false
        i
      case f =>
        val d = f.delimiter.toByte
        var i = bytes.length - 1
        while i >= 0 && bytes(i) != d do i -= 1
        i + 1

  /** Whether `fc` writes a regular file (not a pipe, a terminal, a device). */
  private def isRegularFile(fc: FileChannel): Boolean =
    val fd = Splice.descriptor(fc)
    fd >= 0 && StreamKind.of(fd) == StreamKind.RegularFile
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
