package asyncpipe.cli.system

import java.lang.foreign.{FunctionDescriptor, Linker, ValueLayout}
import java.lang.invoke.MethodHandle

/** Makes the pipes a stage reads and writes hold 1 MiB instead of Linux's default 64 KiB.
  *
  * Why: a pipe passes at most what it holds per wake-up, so through a 64 KiB pipe a stage and its
  * neighbour hand over every 64 KiB, each hand-over two context switches; a gigabyte costs some
  * 30,000 of them. With 1 MiB pipes a stage reads and writes whole messages
  * ([[Endpoints.ReadSize]]) without waiting for its neighbour each time, and a gigabyte costs
  * about a sixth of the context switches. Either end of a pipe may resize it.
  *
  * How: `fcntl(fd, F_SETPIPE_SZ, size)` through the JDK's foreign function interface (the JDK has
  * no call for it). It asks, never insists: the kernel refuses sizes over
  * /proc/sys/fs/pipe-max-size (1 MiB by default) to unprivileged users, and gives a user whose pipes
  * already hold pipe-user-pages-soft pages no more; on any refusal, on a descriptor that is not a
  * pipe, or in a JVM without native access, the pipe stays as it was and nothing is reported.
  *
  * When: once the stream carries its first bytes ([[Growth]]), on a thread of its own: the first
  * foreign call costs a cold JVM tens of milliseconds of CPU (the JDK generates its downcall
  * code), which would delay a stage's first line on its own thread, and compete with a large
  * copy if made later. A stream that never carries anything never pays (figures: ADR 0009,
  * "Figures").
  */
object PipeSize:
  /** The size asked for: the default pipe-max-size, which any user may ask for. */
  val Wanted: Int = 1 << 20
  private val F_SETPIPE_SZ = 1031 // <linux/fcntl.h>: F_LINUX_SPECIFIC_BASE + 7
  private val F_GETPIPE_SZ = 1032

  private lazy val fcntl: Option[MethodHandle] =
    if !Foreign.permitted then None
    else try
      val int = ValueLayout.JAVA_INT
      Some(Foreign.link("fcntl", FunctionDescriptor.of(int, int, int, int), Linker.Option.firstVariadicArg(2)))
    catch case _: Throwable => None // not Linux, or no fcntl: keep the default size

  /** Asks for the pipe on `fd` to hold `bytes`; the size it holds now, or -1 when `fd` is not a pipe
    * or the call is not possible here.
    */
  def grow(fd: Int, bytes: Int = Wanted): Int =
    fcntl match
      case Some(h) =>
        val got = h.invoke(Integer.valueOf(fd), Integer.valueOf(F_SETPIPE_SZ), Integer.valueOf(bytes)).asInstanceOf[Int]
        if got >= 0 then got else h.invoke(Integer.valueOf(fd), Integer.valueOf(F_GETPIPE_SZ), Integer.valueOf(0)).asInstanceOf[Int]
      case None => -1

  /** Bytes a standard stream passes before its pipe is grown: its first. */
  val GrowAfter: Long = 1L

  /** Counts what a standard stream passes and, when the total first reaches `after` bytes, runs
    * `grow` once on a daemon thread of its own (by default: [[PipeSize.grow]] on `fd`). One
    * per stream, used by that stream's thread only.
    */
  final class Growth(fd: Int, after: Long = GrowAfter, grow: Runnable | Null = null):
    private var passed = 0L
    private var started = false
    def passed(bytes: Long): Unit =
      if !started then
        passed += bytes
        if passed >= after then
          started = true
          val action: Runnable = if grow != null then grow else () => { val _ = PipeSize.grow(fd) }
          Thread.ofPlatform().daemon().name(s"asyncpipe-pipe-size-$fd").start(action)
    /** Whether the growth has been started. */
    def isStarted: Boolean = started
