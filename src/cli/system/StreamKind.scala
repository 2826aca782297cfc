package asyncpipe.cli.system

import java.nio.file.{Files, Path}
import scala.util.Try

/** What a standard stream of this process is connected to. */
enum StreamKind:
  case Terminal, Pipe, RegularFile, NullDevice, Socket, Unknown

  /** Carries data somewhere (or from somewhere): not a terminal, not /dev/null, not unknown. */
  def carriesData: Boolean = this == Pipe || this == RegularFile || this == Socket

  /** For messages: "stdin is a pipe". */
  def describe: String = this match
    case Terminal    => "a terminal"
    case Pipe        => "a pipe"
    case RegularFile => "a file"
    case NullDevice  => "/dev/null"
    case Socket      => "a socket"
    case Unknown     => "of a kind asyncpipe cannot tell"

object StreamKind:
  /** What file descriptor `fd` of this process is, from the link `/proc/self/fd/FD` (Linux); Unknown
    * where there is no such link (another OS, a closed fd) or it names something else.
    */
  def of(fd: Int): StreamKind =
    val link = Path.of(s"/proc/self/fd/$fd")
    Try(Files.readSymbolicLink(link).toString).fold(
      _ => Unknown,
      // Following the magic link reaches the open file even when its name was deleted or moved.
      text => fromLink(text, Try(Files.isRegularFile(link)).getOrElse(false))
    )

  private val terminal = "/dev/pts/[0-9]+|/dev/tty[0-9]*".r

  /** The kind from the text of a `/proc/self/fd` link; `regularFile` says whether the fd is a regular file. */
  def fromLink(link: String, regularFile: Boolean): StreamKind = link match
    case l if l.startsWith("pipe:[")   => Pipe
    case l if l.startsWith("socket:[") => Socket
    case "/dev/null"                   => NullDevice
    case terminal()                    => Terminal
    case l if l.startsWith("/") && regularFile => RegularFile
    case _                             => Unknown
