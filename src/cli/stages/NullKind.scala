package asyncpipe.cli.stages

import asyncpipe.async.{Async, SendableChannel}
import asyncpipe.cli.command.*
import asyncpipe.cli.frames.FrameBatch
import asyncpipe.cli.system.*

/** `null:`: as a sink, discards every frame (counted, as `/dev/null` would not be); as a source,
  * ends at once. For measuring a source alone, and for a pipeline whose output is not wanted.
  */
object NullKind extends AddressKind:
  val scheme = "null"
  val forms: Seq[(String, String)] = Seq("null:" -> "discard every frame (a sink); end at once (a source)")

  def parse(rest: String, p: AddressParser): Either[CliError, Address] =
    if rest.isEmpty then Right(NullAddress) else p.bad(s"null: takes nothing after the ':' (got '$rest')")

case object NullAddress extends Address:
  def kind: AddressKind = NullKind
  def render: String = "null:"

  def input(options: StageOptions): Input = new Input:
    def address: Address = NullAddress
    def open(): Unit = ()
    def pump(out: SendableChannel[FrameBatch])(using Async): Unit = ()
    def close(): Unit = ()

  def output(options: StageOptions, stdout: OwnedOutput): Output = new Output:
    def name: String = render
    def open(): Unit = ()
    def write(batch: FrameBatch)(using Async): Unit =
      counters.add(batch, options.countingFrames)
      batch.release()
    def idle()(using Async): Unit = ()
    def finish()(using Async): Unit = ()
    def abort(): Unit = ()
