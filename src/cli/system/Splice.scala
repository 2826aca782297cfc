package asyncpipe.cli.system

import java.io.{FileDescriptor, IOException}
import java.lang.foreign.{Arena, FunctionDescriptor, MemorySegment, ValueLayout}
import java.lang.invoke.MethodHandle

/** Linux's copies between pipes inside the kernel, `splice(2)` and `tee(2)`, through the JDK's
  * foreign function interface (the JDK has no call for them). A [[KernelCopy]] moves a stage's
  * bytes with them, without reading them into the JVM.
  *
  * Available only on Linux, in a JVM with native access (`--enable-native-access=ALL-UNNAMED`)
  * that opens `sun.nio.ch` to the tool (`--add-opens=java.base/sun.nio.ch=ALL-UNNAMED`: the
  * descriptor of a JDK channel is private there); project.scala gives both to the launcher, the
  * AOT training and the tests. Elsewhere [[syscalls]] is None and stages copy as before.
  *
  * Linking costs a cold JVM milliseconds of CPU per call (tens for the first foreign call of the
  * process), so only these two are linked, on first use, and a stage uses them only once a stream
  * has shown itself to be large ([[KernelCopy.After]]). Every call returns what the system call
  * returned (bytes, >= 0) or minus its errno, and retries after EINTR itself.
  */
object Splice:
  val EINTR = 4
  val EINVAL = 22
  private val SpliceMove = 1 // SPLICE_F_MOVE: a hint that pages may be moved rather than copied

  private final class Calls(val splice: MethodHandle, val tee: MethodHandle)

  /** The descriptor behind a JDK channel (a FileChannel, a Pipe's ends), if it can be read. */
  private lazy val fdOf: Option[AnyRef => Int] =
    try
      val fdVal = Class.forName("sun.nio.ch.IOUtil").getDeclaredMethod("fdVal", classOf[FileDescriptor])
      fdVal.setAccessible(true) // throws unless sun.nio.ch is opened to us
      val fields = Seq("sun.nio.ch.FileChannelImpl", "sun.nio.ch.SourceChannelImpl", "sun.nio.ch.SinkChannelImpl",
          "sun.nio.ch.SocketChannelImpl").map { c =>
        val f = Class.forName(c).getDeclaredField("fd")
        f.setAccessible(true)
        Class.forName(c) -> f
      }
      Some { (channel: AnyRef) =>
        fields.find(_._1.isInstance(channel)) match
          case Some((_, f)) => fdVal.invoke(null, f.get(channel)).asInstanceOf[Integer].intValue
          case None         => -1
      }
    catch case _: Throwable => None

  private lazy val calls: Option[Calls] =
    if !permitted then None
    else
      try
        val int = ValueLayout.JAVA_INT
        val long = ValueLayout.JAVA_LONG
        val address = ValueLayout.ADDRESS
        Some(Calls(
          splice = Foreign.linkWithErrno("splice", FunctionDescriptor.of(long, int, address, int, address, long, int)),
          tee = Foreign.linkWithErrno("tee", FunctionDescriptor.of(long, int, int, long, int))
        ))
      catch case _: Throwable => None // not Linux, a call missing: stages copy as before

  /** Whether this JVM may make kernel copies (native access, `sun.nio.ch` opened, Linux), without
    * linking anything.
    */
  def permitted: Boolean =
    Foreign.permitted && System.getProperty("os.name", "").startsWith("Linux") && fdOf.isDefined

  /** The calls for one thread (each keeps its own errno), if kernel copies are possible here. */
  def syscalls(): Option[Syscalls] = calls.map(Syscalls(_))

  /** The descriptor `channel` (a FileChannel, a Pipe's end, a SocketChannel, opened by the JDK) reads or writes, or
    * -1 when it cannot be known.
    */
  def descriptor(channel: AnyRef): Int =
    fdOf match
      case Some(f) => try f(channel) catch case _: Exception => -1
      case None    => -1

  /** The exception for a call that returned `result`, minus an errno, in the system's words (as
    * the JDK's own exceptions give them: "Broken pipe", "No space left on device").
    */
  def failure(result: Long): IOException =
    val words = (-result).toInt match
      case 1   => "Operation not permitted"
      case 5   => "Input/output error"
      case 9   => "Bad file descriptor"
      case 12  => "Cannot allocate memory"
      case 22  => "Invalid argument"
      case 27  => "File too large"
      case 28  => "No space left on device"
      case 32  => "Broken pipe"
      case 104 => "Connection reset by peer"
      case 122 => "Disk quota exceeded"
      case n   => s"error $n (errno)"
    IOException(words)

  /** The system calls, for use by one thread at a time. */
  final class Syscalls private[Splice] (c: Calls):
    private val state: MemorySegment = Foreign.newCallState(Arena.ofAuto())

    /** Moves up to `len` bytes from `in` to `out`, one of which is a pipe, at their positions. */
    def splice(in: Int, out: Int, len: Long): Long =
      retrying(c.splice.invoke(state, in, MemorySegment.NULL, out, MemorySegment.NULL, len, SpliceMove).asInstanceOf[Long])

    /** Duplicates up to `len` bytes at the front of pipe `in` into pipe `out`, consuming none;
      * waits while `in` is empty and has a writer; 0 when it is empty and has none.
      */
    def tee(in: Int, out: Int, len: Long): Long =
      retrying(c.tee.invoke(state, in, out, len, 0).asInstanceOf[Long])

    private def errno: Int = Foreign.errno(state)

    private inline def retrying(inline call: Long): Long =
      var r = call
      while r < 0 && errno == EINTR do r = call
      if r < 0 then -errno.toLong else r
