package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*

import scala.concurrent.duration.FiniteDuration

/** `tick:DURATION[,count=N]`: a timer source, one frame every DURATION ([[TickInput]]); `count`
  * frames, or forever. A source only.
  */
object TickKind extends AddressKind:
  val scheme = "tick"
  val forms: Seq[(String, String)] = Seq("tick:DURATION[,count=N]" -> "a timer source: one frame every DURATION")
  override val options: Seq[AddressOption] =
    Seq(AddressOption.valued("count", Reader.positive, "end after N frames (default: run until stopped)"))

  def parse(rest: String, p: AddressParser): Either[CliError, Address] =
    val segments = rest.split(",", -1).toSeq
    for
      every <- Reader.duration().read(segments.head).left.flatMap(p.bad)
      opts <- p.options(segments.tail)
    yield TickAddress(every, opts.value[Long]("count"))

final case class TickAddress(every: FiniteDuration, count: Option[Long] = None) extends Address:
  def kind: AddressKind = TickKind
  def render: String = s"tick:${Address.renderDuration(every)}${count.fold("")(n => s",count=$n")}"
  override protected def roleRule(role: Role): Option[String] =
    Option.when(role == Role.Sink)(s"$render is a timer: it can only be a source")
  def input(options: StageOptions): Input = TickInput(this)
  def output(options: StageOptions, stdout: OwnedOutput): Output = cannot(Role.Sink)
