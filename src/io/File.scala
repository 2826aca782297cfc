package asyncpipe.io

import asyncpipe.async.{Async, Future, Worker, uninterruptible}
import java.nio.ByteBuffer
import java.nio.channels.{ClosedByInterruptException, FileChannel}
import java.nio.charset.{Charset, StandardCharsets}
import java.nio.file.{InvalidPathException, Path, StandardOpenOption}
import java.util.concurrent.locks.ReentrantLock
import scala.util.{Failure, Success}
import scala.util.control.NonFatal

/** A file opened on a NIO `FileChannel`; see [[PosixLikeIO]] for the contract. */
final class File(val path: String):
  @volatile private var channel: FileChannel | Null = null
  /** A regular file never makes a reader or writer wait for another party (POSIX: it is always
    * ready), so its operations run on the caller's thread; other files (FIFOs, devices) can
    * block, so theirs run on a future of their own.
    */
  @volatile private var regular = true
  /** Why the channel closed, when it was not `close()` (a cancelled blocking operation). */
  @volatile private var closedBecause: String | Null = null
  /** Sequential operations, one at a time, so a `readString` is not interleaved with another. */
  private val sequential = ReentrantLock()
  /** Bytes read past the end of the last whole character by `readString` on a file that cannot
    * seek back (a FIFO): the next sequential read returns them first. Guarded by `sequential`.
    */
  private var carry: Array[Byte] = File.NoBytes

  def isOpened: Boolean =
    val ch = channel
    ch != null && ch.isOpen

  /** Opens the file with `options` (none: `READ`). Throws [[PosixIOException]] naming the path
    * and the reason (no such file, permission denied, bad options); `IllegalStateException` if
    * it is open already.
    */
  def open(options: StandardOpenOption*): File = synchronized {
    if isOpened then throw IllegalStateException(s"file $path is already open: close it before opening it again")
    val opts = if options.isEmpty then Seq(StandardOpenOption.READ) else options
    val p =
      try Path.of(path)
      catch case e: InvalidPathException => throw PosixIOException("open", path, s"invalid path: ${e.getReason}", e)
    val ch =
      try FileChannel.open(p, opts*)
      catch
        case e: (IllegalArgumentException | UnsupportedOperationException) =>
          throw PosixIOException("open", path, s"bad options ${opts.mkString(", ")}: ${e.getMessage}", e)
        case NonFatal(e) => throw IoFailure.wrap("open", path, e)
    // A file that can seek never blocks (regular files, /dev/null, /dev/zero); FIFOs, sockets and
    // terminals cannot (ESPIPE). One lseek, cheaper than a stat of the path.
    regular =
      try { ch.position(); true }
      catch case NonFatal(_) => false
    closedBecause = null
    carry = File.NoBytes
    channel = ch
    this
  }

  /** Closes the file; closing a closed or never opened file does nothing. */
  def close(): Unit =
    val ch = channel
    if ch != null then IoFailure.about("close", path)(ch.close())

  /** The position sequential reads and writes continue from. */
  def position: Long = withLock(IoFailure.about("position", path)(opened("position").position() - carry.length))
  /** The file's size in bytes now. */
  def size: Long = IoFailure.about("size", path)(opened("size").size())

  // ---------------------------------------------------------------------------------------------
  // Bytes

  /** Reads into `buffer` from the current position, advancing it: the number of bytes read
    * (fewer than asked, as POSIX `read` may), or -1 at the end of the file.
    */
  def read(buffer: ByteBuffer)(using Async): Future[Int] =
    perform("read")(ch => withLock {
      if carry.length == 0 then ch.read(buffer)
      else
        val n = math.min(carry.length, buffer.remaining)
        buffer.put(carry, 0, n)
        carry = carry.drop(n)
        n
    })

  /** Reads into `buffer` at `position`, leaving the sequential position where it is. */
  def read(buffer: ByteBuffer, position: Long)(using Async): Future[Int] =
    require(position >= 0, s"read position was $position, must be >= 0")
    perform("read")(_.read(buffer, position))

  /** Writes `buffer` at the current position (the end, if opened with `APPEND`), advancing it:
    * the number of bytes written.
    */
  def write(buffer: ByteBuffer)(using Async): Future[Int] =
    perform("write")(ch => withLock(ch.write(buffer)))

  /** Writes `buffer` at `position`, leaving the sequential position where it is. */
  def write(buffer: ByteBuffer, position: Long)(using Async): Future[Int] =
    require(position >= 0, s"write position was $position, must be >= 0")
    perform("write")(_.write(buffer, position))

  // ---------------------------------------------------------------------------------------------
  // Text

  /** Reads up to `size` bytes from the current position and decodes them: fewer at the end of the
    * file, "" there. A character cut by `size` is left for the next read; malformed input fails.
    */
  def readString(size: Int, charset: Charset = StandardCharsets.UTF_8)(using Async): Future[String] =
    require(size >= 0, s"readString size was $size, must be >= 0")
    perform("read")(ch => withLock(readText(ch, size, charset)))

  /** Encodes `s` and writes all of it at the current position: the number of bytes written.
    * Text the charset cannot encode fails without writing anything.
    */
  def writeString(s: String, charset: Charset = StandardCharsets.UTF_8)(using Async): Future[Int] =
    perform("write") { ch =>
      val bytes = Text.encode(s, charset)
      withLock(Chunks.writeFully(ch, bytes))
      bytes.length
    }

  /** On a regular file: `min(size, what is left)` bytes, and a cut character is given back by
    * moving the position back. On others: what one read gives after the carry, and a cut
    * character is carried.
    */
  private def readText(ch: FileChannel, size: Int, charset: Charset): String =
    val fromCarry = math.min(size, carry.length) // 0 on a regular file
    val start = if regular then ch.position() else 0L
    val end = if regular then ch.size() else 0L
    val want = if regular then math.min(size.toLong, math.max(0L, end - start)).toInt else size
    val bytes = new Array[Byte](want)
    System.arraycopy(carry, 0, bytes, 0, fromCarry)
    carry = carry.drop(fromCarry)
    val got = fromCarry + Chunks.read(ch, bytes, fromCarry, want - fromCarry, untilFull = regular)
    val atEnd = if regular then start + got >= end else got == fromCarry && want > fromCarry
    val decoded =
      try Text.decode(bytes, got, charset, atEnd, start)
      catch
        case e: TextCodingException =>
          giveBack(ch, bytes, 0, got) // a failed read consumes nothing
          throw e
    val left = got - decoded.consumed
    if left > 0 then giveBack(ch, bytes, decoded.consumed, got) // part of a character: for the next read
    if decoded.consumed == 0 && got > 0 then
      throw TextCodingException(s"readString size $size is smaller than the character at byte $start: ask for at least 4 bytes")
    decoded.text

  /** Makes `bytes[from, until)`, just read, the next bytes a sequential read returns. */
  private def giveBack(ch: FileChannel, bytes: Array[Byte], from: Int, until: Int): Unit =
    if until > from then
      if regular then ch.position(ch.position() - (until - from))
      else carry = java.util.Arrays.copyOfRange(bytes, from, until) ++ carry

  // ---------------------------------------------------------------------------------------------
  // How an operation runs

  private def opened(operation: String): FileChannel =
    val ch = channel
    if ch == null then throw PosixIOException(operation, path, "not open: call open() first")
    if !ch.isOpen then
      val why = closedBecause
      throw PosixIOException(operation, path, if why == null then "closed" else s"closed $why")
    ch

  /** A plain `lock`: inline operations hold a cancel anyway, and a worker's wait for the lock
    * ends when the worker ends (a cancel closes the channel the holder is blocked on).
    */
  private inline def withLock[T](inline body: T): T =
    sequential.lock()
    try body
    finally sequential.unlock()

  /** Runs `body` on the open channel as [[PosixLikeIO]] says: on a regular file on this thread,
    * with a cancel held until it returns (an interrupt would close the channel); otherwise on a
    * platform thread of its own (a virtual thread blocked in `read(2)` on a FIFO cannot be woken),
    * which a cancel interrupts, closing the file as NIO does. Failures, "not open" included, are
    * the future's.
    */
  private inline def perform[T](operation: String)(inline body: FileChannel => T)(using async: Async): Future[T] =
    if regular then
      Future.now(
        if async.isCancelled then Failure(java.util.concurrent.CancellationException(s"$operation $path in a cancelled scope"))
        else
          try Success(uninterruptible(body(opened(operation))))
          catch case NonFatal(e) => Failure(IoFailure.wrap(operation, path, e))
      )
    else
      Worker.start[T](s"$operation $path", onPlatformThread = true) { w =>
        try w.offer(Success(body(opened(operation))))
        catch
          case e: ClosedByInterruptException =>
            closedBecause = s"when a blocked $operation was cancelled"
            w.offer(Failure(IoFailure.wrap(operation, path, e)))
          case NonFatal(e) => w.offer(Failure(IoFailure.wrap(operation, path, e)))
      }

object File:
  private val NoBytes: Array[Byte] = Array.emptyByteArray
