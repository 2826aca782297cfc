package asyncpipe.io

import java.io.IOException
import java.net.{BindException, PortUnreachableException, SocketException, UnknownHostException}
import java.nio.channels.{
  AsynchronousCloseException, ClosedByInterruptException, ClosedChannelException, NonReadableChannelException,
  NonWritableChannelException, UnresolvedAddressException
}
import java.nio.charset.CharacterCodingException
import java.nio.file.{AccessDeniedException, FileAlreadyExistsException, FileSystemException, NoSuchFileException}

/** An IO operation that failed, as one sentence: the operation, its target (a path or an
  * address) and the reason, in the words of the operating system where it gave some:
  * `open /tmp/in.txt: no such file or directory`, `bind udp 0.0.0.0:9000: address already in use`.
  * The JDK's exception, if there was one, is the cause.
  */
final class PosixIOException(val operation: String, val target: String, val reason: String, cause: Throwable | Null = null)
    extends IOException(s"$operation $target: $reason", cause)

private[asyncpipe] object IoFailure:
  /** The reason `e` gives, in lower case without the target the JDK sometimes repeats. */
  def reason(e: Throwable): String = e match
    case _: NoSuchFileException         => "no such file or directory"
    case _: AccessDeniedException       => "permission denied"
    case _: FileAlreadyExistsException  => "file already exists"
    case f: FileSystemException         => Option(f.getReason).map(lower).getOrElse(f.getClass.getSimpleName)
    case _: ClosedByInterruptException  => "closed, because the thread doing the IO was interrupted"
    case _: AsynchronousCloseException  => "closed by another thread during the operation"
    case _: ClosedChannelException      => "not open"
    case _: NonReadableChannelException => "not opened for reading (open with READ)"
    case _: NonWritableChannelException => "not opened for writing (open with WRITE or APPEND)"
    case _: UnresolvedAddressException  => "cannot resolve the host name"
    case _: UnknownHostException        => "cannot resolve the host name"
    case _: PortUnreachableException    => "port unreachable (nothing listens there)"
    case c: CharacterCodingException    => s"cannot ${c.getClass.getSimpleName.stripSuffix("Exception").toLowerCase} text: $c"
    case b: BindException               => lower(b.getMessage)
    case s: SocketException             => lower(s.getMessage)
    case other                          => Option(other.getMessage).map(lower).getOrElse(other.getClass.getSimpleName)

  private def lower(message: String | Null): String =
    if message == null || message.isEmpty then "unknown reason"
    else
      // the JDK often appends " (Bind failed)" or prefixes the path: keep the reason itself
      val m = message.replaceAll("""\s*\((Bind failed|connect failed)\)$""", "")
      m.substring(0, 1).toLowerCase + m.substring(1)

  /** `e` as a [[PosixIOException]] about `operation` on `target` (one already is: kept as it is). */
  def wrap(operation: String, target: String, e: Throwable): Throwable = e match
    case p: PosixIOException => p
    case _: IOException | _: UnresolvedAddressException | _: NonReadableChannelException | _: NonWritableChannelException =>
      PosixIOException(operation, target, reason(e), e)
    case other => other // a bug or a cancellation: never disguised as an IO error

  /** Runs `body`, turning what it throws into a [[PosixIOException]] about `operation` on `target`. */
  inline def about[T](operation: String, target: => String)(inline body: T): T =
    try body
    catch case e: Throwable => throw wrap(operation, target, e)
