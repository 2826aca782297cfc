package asyncpipe.cli

import scala.concurrent.duration.FiniteDuration

/** What a source does with a frame when the stage after it is not ready (UDP cannot be slowed). */
/** A value of an option that takes one of a few words. */
trait Choice:
  def token: String

enum OnFull(val token: String) extends Choice:
  /** Wait for room: back-pressure (the kernel's socket buffer fills, then it drops). */
  case Block extends OnFull("block")
  /** Drop the frame and count it. */
  case Drop extends OnFull("drop")

/** What a UDP sink does with a frame too large for one datagram (65,507 bytes of payload). */
enum Oversize(val token: String) extends Choice:
  case Fail extends Oversize("fail")
  case Drop extends Oversize("drop")

/** What a stage does with a stream input that ends inside a frame (`lines`, `nul`: bytes after the
  * last terminator), which is what a writer that died mid-frame leaves (`len` always fails then).
  */
enum FinalDelimiter(val token: String) extends Choice:
  /** Fail the stage (exit 1): the partial frame is not passed on. */
  case Require extends FinalDelimiter("require")
  /** Pass it on as an unterminated frame; from a pipe, FIFO or socket, say so on stderr. */
  case Warn extends FinalDelimiter("warn")
  /** Pass it on quietly: data known to lack a final terminator. */
  case Optional extends FinalDelimiter("optional")

/** What `mux` does when one of its outputs fails (as coreutils tee's `--output-error`). */
enum OutputError(val token: String) extends Choice:
  /** Stop the stage: exit 141 for a closed pipe, 1 with the reason for any other failure. */
  case Exit extends OutputError("exit")
  /** Report it on stderr (a closed pipe quietly), go on with the other outputs; when all have
    * failed, stop. The exit status is 1 if any output failed other than by a closed pipe.
    */
  case Warn extends OutputError("warn")

/** The options of a stage command line (an address form, `mux`, or one stage of `run`). */
final case class StageOptions(
    frame: Framing = Framing.Lines,
    buffer: Int = 16,
    onFull: OnFull = OnFull.Block,
    oversize: Oversize = Oversize.Fail,
    outputError: OutputError = OutputError.Exit,
    count: Option[Long] = None,
    idleTimeout: Option[FiniteDuration] = None,
    checkSeq: Boolean = false,
    finalDelimiter: FinalDelimiter = FinalDelimiter.Warn,
    stats: Boolean = false,
    statsJson: Boolean = false,
    progress: Boolean = false,
    ins: Vector[Address] = Vector.empty,
    outs: Vector[Address] = Vector.empty
):
  /** Whether frames are counted (a pass over each batch): only when statistics are asked for. */
  def counting: Boolean = stats || statsJson || progress

/** A stage command line split into its options and its operands (addresses, in order). */
final case class StageLine(options: StageOptions, operands: Vector[String])

object StageOptions:
  /** One option: its name, its value's form (None for a flag), and how it sets the options. */
  private final case class Spec(name: String, value: Option[String], help: String)(
      val set: (StageOptions, String, Option[String]) => Either[CliError, StageOptions]
  )

  /** The options every stage form accepts; `mux` adds [[muxSpecs]]. */
  private val commonSpecs: Seq[Spec] = Seq(
    Spec("--frame", Some("lines|len|nul|raw"), "how frames are laid out on byte streams (default lines)")((o, v, verb) =>
      Framing.parse(v, verb).map(f => o.copy(frame = f))),
    Spec("--buffer", Some("N"), "messages in flight between two stages (default 16; 0 = hand over one at a time)")((o, v, verb) =>
      wholeNumber(v, "--buffer", verb, min = 0, max = 1 << 20).map(n => o.copy(buffer = n.toInt))),
    Spec("--on-full", Some("block|drop"), "a UDP source whose next stage is busy waits (block, default) or drops and counts")((o, v, verb) =>
      choice(v, "--on-full", OnFull.values, verb).map(x => o.copy(onFull = x))),
    Spec("--oversize", Some("fail|drop"), "a frame too large for one datagram fails the stage (default) or is dropped and counted")((o, v, verb) =>
      choice(v, "--oversize", Oversize.values, verb).map(x => o.copy(oversize = x))),
    Spec("--count", Some("N"), "end a UDP source after N datagrams")((o, v, verb) =>
      wholeNumber(v, "--count", verb, min = 1, max = Long.MaxValue).map(n => o.copy(count = Some(n)))),
    Spec("--idle-timeout", Some("DURATION"), "end a UDP source after DURATION without a datagram")((o, v, verb) =>
      duration(v, "--idle-timeout", verb).map(d => o.copy(idleTimeout = Some(d)))),
    Spec("--check-seq", None, "count gaps in the numbers that UDP datagrams start with")((o, _, _) => Right(o.copy(checkSeq = true))),
    Spec("--final-delimiter", Some("MODE"), "an input that ends inside a frame: require (fail), warn (pass it on, say so; default), optional")((o, v, verb) =>
      choice(v, "--final-delimiter", FinalDelimiter.values, verb).map(x => o.copy(finalDelimiter = x))),
    Spec("--stats", None, "print a summary line on stderr at exit")((o, _, _) => Right(o.copy(stats = true))),
    Spec("--stats-json", None, "stderr as JSON lines: statistics each second and at exit, notices, warnings, errors")((o, _, _) => Right(o.copy(statsJson = true))),
    Spec("--progress", None, "a live progress line on stderr, when stderr is a terminal")((o, _, _) => Right(o.copy(progress = true)))
  )

  private val muxSpecs: Seq[Spec] = Seq(
    Spec("--in", Some("ADDR"), "another input (repeatable)")((o, v, verb) =>
      role(v, Role.Source, verb).map(a => o.copy(ins = o.ins :+ a))),
    Spec("--out", Some("ADDR"), "another output (repeatable)")((o, v, verb) =>
      role(v, Role.Sink, verb).map(a => o.copy(outs = o.outs :+ a))),
    Spec("--output-error", Some("exit|warn"), "when an output fails: stop (exit, default), or report it and go on (warn)")((o, v, verb) =>
      choice(v, "--output-error", OutputError.values, verb).map(x => o.copy(outputError = x)))
  )

  /** The option lines for `--help`. */
  def helpLines(mux: Boolean): String =
    val specs = if mux then muxSpecs ++ commonSpecs else commonSpecs
    specs.map { s =>
      val form = s.name + s.value.fold("")(" " + _)
      f"  $form%-30s ${s.help}"
    }.mkString("\n")

  /** Parses `args` (options anywhere, `--name value` or `--name=value`; `--` ends the options)
    * starting from `base`. `verb` names the command in errors; `mux` admits `--in`, `--out` and
    * `--output-error`.
    */
  def parse(args: Seq[String], verb: Option[String], synopsis: String, mux: Boolean, base: StageOptions = StageOptions()): Either[CliError, StageLine] =
    val specs = if mux then muxSpecs ++ commonSpecs else commonSpecs
    var options = base
    val operands = Vector.newBuilder[String]
    var rest = args.toList
    var onlyOperands = false
    while rest.nonEmpty do
      val token = rest.head
      rest = rest.tail
      if onlyOperands || !token.startsWith("--") then operands += token
      else if token == "--" then onlyOperands = true
      else
        val (name, inline) = token.indexOf('=') match
          case -1 => (token, None)
          case i  => (token.take(i), Some(token.drop(i + 1)))
        specs.find(_.name == name) match
          case None =>
            return Left(CliError.UnknownOption(verb, token, synopsis, CliError.suggest(name, specs.map(_.name)).toSeq))
          case Some(spec) =>
            val value: Either[CliError, Option[String]] = (spec.value, inline) match
              case (None, None)    => Right(None)
              case (None, Some(_)) => Left(CliError.BadToken(verb, token, s"$name takes no value", synopsis))
              case (Some(_), Some(v)) => Right(Some(v))
              case (Some(form), None) =>
                rest match
                  case v :: tail => rest = tail; Right(Some(v))
                  case Nil       => Left(CliError.Missing(verb, s"a value after $name ($form)", synopsis))
            value.flatMap(v => spec.set(options, v.getOrElse(""), verb)) match
              case Left(e)  => return Left(e)
              case Right(o) => options = o
    Right(StageLine(options, operands.result()))

  private def wholeNumber(v: String, name: String, verb: Option[String], min: Long, max: Long): Either[CliError, Long] =
    val n = if v.nonEmpty && v.length <= 19 && v.forall(_.isDigit) then Some(BigInt(v)) else None
    n match
      case Some(x) if x >= min && x <= max => Right(x.toLong)
      case _ => Left(CliError.BadToken(verb, v, s"$name takes a whole number from $min to $max", s"$name N"))

  private def choice[A <: Choice](v: String, name: String, values: Array[A], verb: Option[String]): Either[CliError, A] =
    values.find(_.token == v).toRight {
      val tokens = values.map(_.token)
      val hint = CliError.suggest(v, tokens).fold("")(s => s"; did you mean '$s'?")
      CliError.BadToken(verb, v, s"$name takes one of ${tokens.mkString(", ")}$hint", s"$name ${tokens.mkString("|")}")
    }

  private def role(v: String, r: Role, verb: Option[String]): Either[CliError, Address] =
    Address.parse(v).flatMap(a => a.checkRole(r).map(_ => a))

  /** A duration by the one rule that `tick:DURATION` follows. */
  private def duration(v: String, name: String, verb: Option[String]): Either[CliError, FiniteDuration] =
    Durations.parse(v).left.map(rule => CliError.BadToken(verb, v, s"$name: $rule", s"$name DURATION"))
