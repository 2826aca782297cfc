package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*

import java.nio.file.Path

/** `-`: standard input as a source, standard output as a sink ([[StreamInput]], [[StreamOutput]]). */
object StdKind extends AddressKind:
  val scheme = "-"
  val forms: Seq[(String, String)] = Seq("-" -> "standard input as a source, standard output as a sink")
  override def takes(role: Role): Set[String] = if role == Role.Source then Set("--size") else Set.empty
  def parse(rest: String, p: AddressParser): Either[CliError, Address] = Right(StdAddress)

case object StdAddress extends Address:
  def kind: AddressKind = StdKind
  def render: String = "-"
  override def isStandard: Boolean = true
  override def localFile(role: Role): Option[(Path, String)] =
    if role == Role.Source then Some((Path.of("/proc/self/fd/0"), "stdin")) else Some((Path.of("/proc/self/fd/1"), "stdout"))
  def input(options: StageOptions): Input = StreamInput.of(this, None, follow = false, options)
  def output(options: StageOptions, stdout: OwnedOutput): Output =
    StreamOutput(this, None, append = false, fsync = false, options.frame, stdout, options.countingFrames)
