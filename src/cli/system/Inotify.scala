package asyncpipe.cli.system

import java.lang.foreign.{Arena, FunctionDescriptor, MemorySegment, ValueLayout}
import java.lang.invoke.MethodHandle
import java.nio.{ByteBuffer, ByteOrder}
import java.nio.charset.Charset
import java.nio.file.Path

/** inotify(7) through the foreign function interface: what happens to a few directories' entries
  * and to a file, waited for and read on the caller's own thread. [[Follow]] uses it to open a new
  * file while it still has its name, and to read a file as soon as it is written.
  *
  * Why not the JDK's `WatchService` (inotify too, on Linux): it watches directories only, so a
  * follower that must see writes watches its directory for writes to every file in it, and wakes
  * for each (a busy neighbour, its own output file beside the log); and it hands every event over
  * from a thread of its own. Here, as in GNU `tail -F`, the directory is watched for names and the
  * file in hand for writes: beside a busy file, a follower through a `WatchService` used several
  * times the CPU of this one, and both open a new file as soon (figures: ADR 0020).
  *
  * One instance: `watch` and `unwatch` from any thread; `await` from one thread only, which also
  * calls `close` once it is done with `await`.
  */
final class Inotify private (fd: Int, calls: Inotify.Calls):
  import Inotify.*

  private val arena = Arena.ofShared()
  private val buffer = arena.allocate(BufferSize, 8)
  private val pollfd = arena.allocate(8, 4) // struct pollfd { int fd; short events; short revents; }
  pollfd.set(ValueLayout.JAVA_INT, 0, fd) // poll(2) only writes revents
  pollfd.set(ValueLayout.JAVA_SHORT, 4, PollIn)
  // What a read gave, copied out of `buffer` at once to be parsed (see `parse`).
  private val events = new Array[Byte](BufferSize)
  private val eventsView = ByteBuffer.wrap(events).order(ByteOrder.nativeOrder)
  // Where the calls leave errno (not looked at): one for `await`'s thread, one for the others.
  private val awaitState = Foreign.newCallState(arena)
  private val state = Foreign.newCallState(arena)
  private var closed = false // under this

  /** Watches what `path` names (links followed) for `events` (the IN_* bits, which replace those
    * of a watch of it already there): its watch descriptor, the same one again for a file or
    * directory watched already; or -1 when it cannot be watched (it does not exist, there is no
    * permission, the per-user limit of watches is reached).
    */
  def watch(path: Path, events: Int): Int = synchronized {
    if closed then -1
    else
      val local = Arena.ofConfined()
      try calls.addWatch.invoke(state, fd, local.allocateFrom(path.toString, NameCharset), events).asInstanceOf[Int]
      finally local.close()
  }

  /** Stops watching `wd` (a directory no longer wanted); an IN_IGNORED event follows. */
  def unwatch(wd: Int): Unit = synchronized {
    if !closed then
      val _ = calls.rmWatch.invoke(state, fd, wd).asInstanceOf[Int]
  }

  /** Waits up to `millis` for events, and returns those that came (none if none came). */
  def await(millis: Int): Seq[Event] =
    val ready = calls.poll.invoke(awaitState, pollfd, 1L, millis).asInstanceOf[Int]
    if ready <= 0 then Nil // none came, or EINTR
    else
      val n = readEvents()
      if n <= 0 then Nil else parse(n.toInt)

  /** read(2) of the (non-blocking) descriptor into `buffer`: the bytes read, or -1 (none there). */
  private def readEvents(): Long = calls.read.invoke(awaitState, fd, buffer, BufferSize.toLong).asInstanceOf[Long]

  /** Makes the first events as quick to take as the next ones, while a rotation may be a few
    * milliseconds away: the first call through a foreign handle makes its stub, and the first
    * parse runs cold code, which cost a cold JVM milliseconds each. Calls each handle `await` and
    * `unwatch` use (a read that finds nothing, a removal of no watch) and parses a made-up event.
    */
  private def prepare(): Unit =
    val _ = await(0)
    val _ = readEvents()
    val _ = calls.rmWatch.invoke(state, fd, -1).asInstanceOf[Int] // EINVAL
    buffer.set(ValueLayout.JAVA_INT, 0, -1) // wd
    buffer.set(ValueLayout.JAVA_INT, 4, 0) // mask
    buffer.set(ValueLayout.JAVA_INT, 8, 0) // cookie
    buffer.set(ValueLayout.JAVA_INT, 12, 16) // len
    buffer.asSlice(16, 16).fill(0)
    buffer.set(ValueLayout.JAVA_BYTE, 16, 'x'.toByte)
    val _ = parse(32)

  /** Closes the inotify descriptor (its watches with it). */
  def close(): Unit = synchronized {
    if !closed then
      closed = true
      val _ = calls.close.invoke(state, fd).asInstanceOf[Int]
      arena.close()
  }

  /** The events in `buffer[0, n)`: each `struct inotify_event { int wd; uint32_t mask; uint32_t
    * cookie; uint32_t len; char name[len]; }`, the name NUL-padded to `len`.
    *
    * They are copied to the heap in one call and parsed there: each access to a native segment
    * goes through a VarHandle, which costs microseconds until the JIT compiles the parse (a
    * stage runs C1 only), and a read of a few dozen events took a starved follower 5-18 ms, while
    * a rotated file may keep its name for less.
    */
  private def parse(n: Int): Seq[Event] =
    MemorySegment.copy(buffer, ValueLayout.JAVA_BYTE, 0L, events, 0, n)
    val result = Seq.newBuilder[Event]
    var at = 0
    while at + 16 <= n do
      val len = eventsView.getInt(at + 12)
      var end = at + 16
      val limit = math.min(end + len, n)
      while end < limit && events(end) != 0 do end += 1
      val name = if end == at + 16 then "" else String(events, at + 16, end - at - 16, NameCharset)
      result += Event(eventsView.getInt(at), eventsView.getInt(at + 4), eventsView.getInt(at + 8), name)
      at += 16 + len
    result.result()

object Inotify:
  /** One event: the watch it concerns, what happened (the IN_* bits), and the entry's name
    * ("" for an event of the directory itself, or of the queue).
    */
  final case class Event(wd: Int, mask: Int, cookie: Int, name: String):
    def overflowed: Boolean = (mask & QueueOverflow) != 0
    /** The watch is gone (its directory was deleted, or it was unwatched). */
    def ignored: Boolean = (mask & Ignored) != 0

  val Modify = 0x2
  val MovedFrom = 0x40
  val MovedTo = 0x80
  val Create = 0x100
  val Delete = 0x200
  val DeleteSelf = 0x400
  val MoveSelf = 0x800
  val QueueOverflow = 0x4000
  val Ignored = 0x8000
  /** Watch only if it is a directory (an `events` bit of `watch`). */
  val OnlyDir = 0x01000000
  private val CloseOnExec = 0x80000 // IN_CLOEXEC = O_CLOEXEC
  private val NonBlocking = 0x800 // IN_NONBLOCK = O_NONBLOCK
  private val PollIn: Short = 0x1
  /** Room for a few hundred events a read (an event is 16 bytes and its name). */
  private val BufferSize = 64 * 1024
  /** How file names are bytes here: the JDK's own (`sun.jnu.encoding`). */
  private val NameCharset: Charset =
    try Charset.forName(System.getProperty("sun.jnu.encoding", "UTF-8"))
    catch case _: Exception => Charset.defaultCharset()

  private final class Calls(val init: MethodHandle, val addWatch: MethodHandle, val rmWatch: MethodHandle,
      val poll: MethodHandle, val read: MethodHandle, val close: MethodHandle)

  private lazy val calls: Option[Calls] =
    if !Foreign.permitted || !System.getProperty("os.name", "").startsWith("Linux") then None
    else
      try
        val int = ValueLayout.JAVA_INT
        val long = ValueLayout.JAVA_LONG
        val address = ValueLayout.ADDRESS
        Some(Calls(
          init = Foreign.linkWithErrno("inotify_init1", FunctionDescriptor.of(int, int)),
          addWatch = Foreign.linkWithErrno("inotify_add_watch", FunctionDescriptor.of(int, int, address, int)),
          rmWatch = Foreign.linkWithErrno("inotify_rm_watch", FunctionDescriptor.of(int, int, int)),
          poll = Foreign.linkWithErrno("poll", FunctionDescriptor.of(int, address, long, int)),
          read = Foreign.linkWithErrno("read", FunctionDescriptor.of(long, int, address, long)),
          close = Foreign.linkWithErrno("close", FunctionDescriptor.of(int, int))
        ))
      catch case _: Throwable => None

  /** A new inotify instance; None where there is none (not Linux, no native access, the
    * per-user limit of instances reached).
    */
  def open(): Option[Inotify] =
    calls.flatMap { c =>
      val arena = Arena.ofConfined()
      try
        val fd = c.init.invoke(Foreign.newCallState(arena), CloseOnExec | NonBlocking).asInstanceOf[Int]
        Option.when(fd >= 0) {
          val i = Inotify(fd, c)
          i.prepare()
          i
        }
      catch case _: Throwable => None
      finally arena.close()
    }
