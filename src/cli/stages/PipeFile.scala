package asyncpipe.cli.stages

import asyncpipe.cli.command.*

import java.nio.file.{Files, Path}
import scala.util.Try

/** The text of a `.pipe` file: UTF-8, at most [[PipeFile.MaxBytes]] (a pipeline is a few lines;
  * a path that names /dev/zero or a huge file must not be read without end).
  */
object PipeFile:
  val MaxBytes: Int = 1 << 20

  def read(path: Path, shown: String): Either[CliError, String] =
    def failed(reason: String) = Left(CliError.Runtime(shown, reason))
    Try {
      val in = Files.newInputStream(path)
      try in.readNBytes(MaxBytes + 1)
      finally in.close()
    }.toEither match
      case Left(e) => failed(s"read: ${asyncpipe.io.IoFailure.reason(e)}")
      case Right(bytes) if bytes.length > MaxBytes =>
        failed(s"a pipeline file holds at most ${MaxBytes / 1024} KiB, and this one holds more")
      case Right(bytes) =>
        val decoder = java.nio.charset.StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(java.nio.charset.CodingErrorAction.REPORT)
          .onUnmappableCharacter(java.nio.charset.CodingErrorAction.REPORT)
        val in = java.nio.ByteBuffer.wrap(bytes)
        val out = java.nio.CharBuffer.allocate(bytes.length)
        val result = decoder.decode(in, out, true)
        if result.isError then
          val line = 1 + bytes.take(in.position()).count(_ == '\n')
          failed(s"not UTF-8 text: byte ${in.position()} (line $line) begins an invalid sequence of ${result.length} byte(s)")
        else Right(out.flip().toString)
