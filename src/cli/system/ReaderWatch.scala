package asyncpipe.cli.system

import java.lang.foreign.{Arena, FunctionDescriptor, ValueLayout}
import java.lang.invoke.MethodHandle
import java.nio.file.{Files, Path}

/** Notices that the reader of a pipe (or socket) the stage writes to has gone away while the
  * stage has nothing to write.
  *
  * Why: a write into a pipe whose reader has gone fails with EPIPE, and that ends a stage with
  * 141. But a stage whose input is quiet (a UDP port nobody sends to, `tick:1h`, an idle upstream)
  * writes nothing, so without a watch it would hold its port and keep running until its next
  * frame, which may never come (`asyncpipe udp:9000 | head -n 1`, after the first datagram).
  *
  * How: `poll(2)` on the descriptor asking for no event at all, which returns only with POLLERR
  * (a pipe whose last reader closed it) or POLLHUP (a socket whose peer closed both ways), on a
  * daemon thread of its own, through the JDK's foreign function interface (the JDK cannot poll an
  * arbitrary descriptor).
  *
  * When: only once the output has written nothing for `idleMillis` ([[IdleMillis]] for a stage;
  * the task verbs, whose commands are mostly quiet, wait longer: [[TaskIdleMillis]]). A busy
  * output finds out by its next write anyway, and the first foreign call costs a cold JVM tens of
  * milliseconds of CPU (see [[PipeSize]]): a short or busy stage never pays it. Until then the thread only sleeps.
  * Only pipes, FIFOs and sockets are watched; a regular file or a terminal never is.
  */
final class ReaderWatch private (fd: Int, written: () => Long, idleMillis: Long, onGone: () => Unit):
  import ReaderWatch.*

  @volatile private var stopped = false
  /** Whether the watch has begun to poll (for tests). */
  @volatile private[cli] var polling = false
  private val thread = Thread.ofPlatform().daemon().name(s"asyncpipe-reader-watch-$fd").start(() => run())

  /** Ends the watch (within one poll period), without reporting anything. */
  def stop(): Unit =
    stopped = true
    thread.interrupt() // ends a sleep at once; a poll in progress ends by its timeout

  /** Whether the watch has ended (reported, stopped, or found nothing to watch) within `millis`. */
  private[cli] def awaitEnd(millis: Long): Boolean = thread.join(java.time.Duration.ofMillis(millis))

  private def run(): Unit =
    try
      if awaitIdle() && isPipeOrSocket(fd) then
        poll.foreach { call =>
          if watch(call) && !stopped then onGone()
        }
    catch case _: InterruptedException => () // stopped

  /** Sleeps until a whole idle period passes with nothing written; false if stopped first. */
  private def awaitIdle(): Boolean =
    var seen = written()
    var idle = false
    while !idle && !stopped do
      Thread.sleep(idleMillis)
      val now = written()
      idle = now == seen
      seen = now
    !stopped

  /** Polls until the reader has gone (true) or the watch is stopped or cannot go on (false). */
  private def watch(poll: MethodHandle): Boolean =
    val arena = Arena.ofConfined()
    try
      val pollfd = arena.allocate(8, 4) // struct pollfd { int fd; short events; short revents; }
      val state = Foreign.newCallState(arena)
      pollfd.set(ValueLayout.JAVA_INT, 0, fd)
      pollfd.set(ValueLayout.JAVA_SHORT, 4, 0.toShort) // no events: only ERR, HUP and NVAL come back
      var outcome = 0 // 0 going on, 1 gone, -1 give up
      polling = true
      while outcome == 0 && !stopped do
        pollfd.set(ValueLayout.JAVA_SHORT, 6, 0.toShort)
        val r = poll.invoke(state, pollfd, 1L, PollMillis).asInstanceOf[Int]
        if r > 0 then
          val revents = pollfd.get(ValueLayout.JAVA_SHORT, 6).toInt
          outcome = if (revents & (PollErr | PollHup)) != 0 then 1 else -1 // NVAL: the descriptor was closed
        else if r < 0 && Foreign.errno(state) != Splice.EINTR then outcome = -1
      outcome == 1
    finally arena.close()

object ReaderWatch:
  /** How long a stage's output must have written nothing before its reader is watched. */
  val IdleMillis: Long = 200
  /** The same for a task verb's stdout: its commands are mostly quiet, and a run shorter than
    * this never pays for the first poll; a reader that left is still noticed within 1.5 s.
    */
  val TaskIdleMillis: Long = 1000
  /** How long one poll waits, so that a stopped watch ends within it. */
  private[cli] val PollMillis: Int = 500
  private val PollErr = 0x008
  private val PollHup = 0x010

  /** Watches the reader of `fd` once nothing has been written to it for `idleMillis` (`written`
    * counts what was); calls `onGone` once if that reader goes away before `stop`.
    */
  def start(fd: Int, written: () => Long, idleMillis: Long = IdleMillis)(onGone: () => Unit): ReaderWatch =
    ReaderWatch(fd, written, idleMillis, onGone)

  /** `poll(2)`, with errno captured, if it can be linked here. */
  private lazy val poll: Option[MethodHandle] =
    if !Foreign.permitted then None
    else
      try Some(Foreign.linkWithErrno("poll", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT)))
      catch case _: Throwable => None // not a POSIX system: a gone reader is found by the next write

  /** Whether `fd` of this process is a pipe, a FIFO or a socket (what its /proc link's target is). */
  private def isPipeOrSocket(fd: Int): Boolean =
    try
      val mode = Files.getAttribute(Path.of(s"/proc/self/fd/$fd"), "unix:mode").asInstanceOf[Int]
      val kind = mode & 0xf000 // S_IFMT
      kind == 0x1000 || kind == 0xc000 // S_IFIFO, S_IFSOCK
    catch case _: Exception => false
