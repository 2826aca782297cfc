package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*

import java.nio.file.Path

/** `file:PATH[,append][,follow][,fsync]`: a file read from its start (or followed, as `tail -F`)
  * as a source, written (or appended to) as a sink ([[StreamInput]], [[StreamOutput]]).
  * {{{
  * "file:" path { "," ("append" | "follow" | "fsync") }
  * path = one or more characters; ':' is an ordinary character; "\," is a ',' and "\\" a '\'
  *        (an unescaped ',' starts the options; any other '\' is itself)
  * }}}
  * `append` and `fsync` are for a sink only, `follow` for a source only, so `follow` with either
  * of the others is refused at once.
  */
object FileKind extends AddressKind:
  val scheme = "file"
  val forms: Seq[(String, String)] =
    Seq("file:PATH[,append][,follow][,fsync]" -> "a file: read as a source, written (or appended) as a sink; '\\,' is a comma in PATH")
  override val options: Seq[AddressOption] = Seq(
    AddressOption.flag("append", "add to the end of the file instead of replacing it", Some(Role.Sink), "writing"),
    AddressOption.flag("follow", "read on as the file grows, across rotation and truncation (as tail -F)", Some(Role.Source), "reading"),
    AddressOption.flag("fsync", "force the data to disk as the output catches up, and at the end", Some(Role.Sink), "writing")
  )

  override def takes(role: Role): Set[String] = if role == Role.Source then Set("--size") else Set.empty

  def parse(rest: String, p: AddressParser): Either[CliError, Address] =
    val segments = Address.splitEscaped(rest)
    val path = segments.head
    for
      _ <- if path.isEmpty then p.bad("the file path is empty") else Right(())
      opts <- p.options(segments.tail)
      (append, follow, fsync) = (opts.flag("append"), opts.flag("follow"), opts.flag("fsync"))
      _ <-
        if follow && (append || fsync) then
          p.bad(s"'follow' is for reading a file and '${if append then "append" else "fsync"}' for writing one: give one or the other")
        else Right(())
    yield FileAddress(path, append, follow, fsync)

final case class FileAddress(path: String, append: Boolean = false, follow: Boolean = false, fsync: Boolean = false) extends Address:
  def kind: AddressKind = FileKind
  def render: String =
    val flags = Seq("append" -> append, "follow" -> follow, "fsync" -> fsync).collect { case (n, true) => s",$n" }
    "file:" + Address.escapePath(path) + flags.mkString
  override def optionsGiven: Seq[String] = Seq("append" -> append, "follow" -> follow, "fsync" -> fsync).collect { case (n, true) => n }
  override def present: Present = Present.of(path)
  override def sinkInference(present: Present): SinkInference =
    if append then SinkInference.Safe
    else
      present match
        case Present.Absent | Present.EmptyFile => SinkInference.Safe
        case Present.DataFile                   => SinkInference.Overwrites(s"$path exists and holds data")
        case Present.Other                      => SinkInference.FromStreams
  override def localFile(role: Role): Option[(Path, String)] =
    Some((Path.of(path), s"the ${if role == Role.Source then "input" else "output"} $render"))
  def input(options: StageOptions): Input = StreamInput.of(this, Some(Path.of(path)), follow, options)
  def output(options: StageOptions, stdout: OwnedOutput): Output =
    StreamOutput(this, Some(Path.of(path)), append, fsync, options.frame, stdout, options.countingFrames)
