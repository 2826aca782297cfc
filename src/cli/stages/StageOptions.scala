package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.frames.*

import scala.concurrent.duration.FiniteDuration

/** What a source does with a frame when the stage after it is not ready (UDP cannot be slowed). */
enum OnFullPolicy(val token: String):
  /** Wait for room: back-pressure (the kernel's socket buffer fills, then it drops). */
  case Block extends OnFullPolicy("block")
  /** Drop the frame and count it. */
  case Drop extends OnFullPolicy("drop")

/** What a UDP sink does with a frame too large for one datagram (65,507 bytes of payload). */
enum Oversize(val token: String):
  case Fail extends Oversize("fail")
  case Drop extends Oversize("drop")

/** What a stage does with a stream input that ends inside a frame (`lines`, `nul`: bytes after the
  * last terminator), which is what a writer that died mid-frame leaves (`len` always fails then).
  */
enum FinalDelimiter(val token: String):
  /** Fail the stage (exit 1): the partial frame is not passed on. */
  case Require extends FinalDelimiter("require")
  /** Pass it on as an unterminated frame; from a pipe, FIFO or socket, say so on stderr. */
  case Warn extends FinalDelimiter("warn")
  /** Pass it on quietly: data known to lack a final terminator. */
  case Optional extends FinalDelimiter("optional")

/** What `mux` does when one of its outputs fails (as coreutils tee's `--output-error`). */
enum OutputError(val token: String):
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
    onFull: OnFullPolicy = OnFullPolicy.Block,
    oversize: Oversize = Oversize.Fail,
    outputError: OutputError = OutputError.Exit,
    count: Option[Long] = None,
    idleTimeout: Option[FiniteDuration] = None,
    checkSeq: Boolean = false,
    finalDelimiter: FinalDelimiter = FinalDelimiter.Warn,
    stats: Boolean = false,
    statsJson: Boolean = false,
    progress: Boolean = false,
    rateLimit: Option[RateLimit] = None,
    timestamp: Boolean = false,
    /** The bytes the inputs will pass (`--size`), for `--progress`'s bar, percent and ETA. */
    size: Option[Long] = None,
    ins: Vector[Address] = Vector.empty,
    outs: Vector[Address] = Vector.empty,
    /** The names of the options given (here or, for a stage of `run`, before the pipeline). */
    givenOptions: Set[String] = Set.empty
):
  /** Whether a stream's frames are counted (a pass over each batch): only for the statistics that
    * report them, `--stats` and `--stats-json`. `--progress` counts bytes, as pv does: counting
    * frames doubled the CPU of a 1 GiB copy and rules out the kernel copy (ADR 0009). Bytes,
    * drops, and the frames of inputs that count them at no cost (datagrams, ticks) are always counted.
    */
  def countingFrames: Boolean = stats || statsJson

/** A stage command line split into its options and its operands (addresses, in order). */
final case class StageLine(options: StageOptions, operands: Vector[String])

object StageOptions:
  import Reader.choice

  private val MaxBufferMessages: Long = 1L << 20

  /** `--buffer`: a number of messages, or a size (with a unit: `64M`, `512K`) made into the number
    * of the largest messages (a stream input's read, [[Endpoints.ReadSize]]) that fit in it, at
    * least one: so a queue never holds more than SIZE bytes.
    */
  val bufferReader: Reader[Long] = new Reader[Long]:
    private val messages = Reader.wholeNumber(0, MaxBufferMessages)
    private val size = Reader.size(1, MaxBufferMessages * Endpoints.ReadSize)
    def form: String = "N|SIZE"
    def read(text: String): Either[String, Long] =
      if Reader.isDigits(text) then messages.read(text)
      else size.read(text) match
        case Right(bytes) => Right(math.max(1L, bytes / Endpoints.ReadSize))
        case Left(_) => Left(s"'$text' is neither a number of messages (0 to $MaxBufferMessages) nor a size (64M, 512K; at most ${Reader.renderSize(MaxBufferMessages * Endpoints.ReadSize)})")


  val frame: Opt[Framing] = Opt("--frame", choice(Framing.values.toSeq)(_.token),
    "how frames are laid out on byte streams (default lines)")
  val buffer: Opt[Long] = Opt("--buffer", StageOptions.bufferReader,
    "what each queue of a stage holds: N messages (default 16; 0 = hand over one at a time) or SIZE (64M: as many messages of at most 256 KiB as fit); given, a copy reads ahead through it")
  val onFull: Opt[OnFullPolicy] = Opt("--on-full", choice(OnFullPolicy.values.toSeq)(_.token),
    "a UDP source whose next stage is busy waits (block, default) or drops and counts")
  val oversize: Opt[Oversize] = Opt("--oversize", choice(Oversize.values.toSeq)(_.token),
    "a frame too large for one datagram fails the stage (default) or is dropped and counted")
  val count: Opt[Long] = Opt("--count", Reader.positive, "end a UDP source after N datagrams")
  val idleTimeout: Opt[FiniteDuration] = Opt("--idle-timeout", Reader.duration(),
    "end a UDP source after DURATION without a datagram")
  val checkSeq: Opt[Unit] = Opt.flag("--check-seq", "count gaps in the numbers that UDP datagrams start with")
  val finalDelimiter: Opt[FinalDelimiter] = Opt("--final-delimiter", choice(FinalDelimiter.values.toSeq)(_.token).as("MODE"),
    "an input that ends inside a frame: require (fail), warn (pass it on, say so; default), optional")
  val stats: Opt[Unit] = Opt.flag("--stats", "print a summary line on stderr at exit")
  val statsJson: Opt[Unit] = Opt.flag("--stats-json",
    "stderr as JSON lines: statistics each second and at exit, notices, warnings, errors")
  val progress: Opt[Unit] = Opt.flag("--progress", "a live progress line on stderr, when stderr is a terminal")
  val size: Opt[Long] = Opt("--size", Reader.size(1, Long.MaxValue),
    "the bytes expected, for --progress's bar, percent and ETA (default: a single input file's size)")
  val timestamp: Opt[Unit] = Opt.flag("--timestamp",
    "prefix each frame with the UTC time it was read and a space (2026-11-27T10:12:13.123Z ); lines and nul frames")
  val rateLimit: Opt[RateLimit] = Opt("--rate-limit", RateLimit.reader,
    "at most RATE through each output: bytes a second (10M, as pv -L) or frames a second (500f); whole frames, smoothly")

  /** The options every stage form accepts; `mux` adds [[muxOnly]]. */
  val common: Seq[Opt[?]] =
    Seq(frame, buffer, onFull, oversize, count, idleTimeout, checkSeq, finalDelimiter, stats, statsJson, progress, size, rateLimit, timestamp)

  val in: Opt[Address] = Opt("--in", addressAs(Role.Source), "another input (repeatable)", repeatable = true)
  val out: Opt[Address] = Opt("--out", addressAs(Role.Sink), "another output (repeatable)", repeatable = true)
  val outputError: Opt[OutputError] = Opt("--output-error", choice(OutputError.values.toSeq)(_.token),
    "when an output fails: stop (exit, default), or report it and go on (warn)")

  val muxOnly: Seq[Opt[?]] = Seq(in, out, outputError)

  /** The options only some endpoints take, and the role of those endpoints: an address kind says
    * which of them it takes ([[AddressKind.takes]]); given where no endpoint takes it, an option is
    * refused rather than ignored ([[Stages.run]]).
    */
  val forEndpoints: Seq[(Opt[?], Role)] =
    Seq(count -> Role.Source, idleTimeout -> Role.Source, onFull -> Role.Source, checkSeq -> Role.Source, size -> Role.Source,
      oversize -> Role.Sink)

  /** The options of a stage form: `mux` admits `--in`, `--out` and `--output-error`. */
  def all(mux: Boolean): Seq[Opt[?]] = if mux then muxOnly ++ common else common

  /** The option lines for `--help`. */
  def helpLines(mux: Boolean): String = Options.helpLines(all(mux))

  /** Parses `args` (options anywhere, `--name value` or `--name=value`; `--` ends the options)
    * starting from `base`. `verb` names the command in errors.
    */
  def parse(args: Seq[String], verb: Option[String], synopsis: String, mux: Boolean, base: StageOptions = StageOptions()): Either[CliError, StageLine] =
    Options.parse(args, all(mux), verb, synopsis).map(p => StageLine(from(p, base), p.operands))

  /** `base` with the options given in `p`. */
  private def from(p: Parsed, base: StageOptions): StageOptions =
    base.copy(
      frame = p.get(frame).getOrElse(base.frame),
      buffer = p.get(buffer).fold(base.buffer)(_.toInt),
      onFull = p.get(onFull).getOrElse(base.onFull),
      oversize = p.get(oversize).getOrElse(base.oversize),
      outputError = p.get(outputError).getOrElse(base.outputError),
      count = p.get(count).orElse(base.count),
      idleTimeout = p.get(idleTimeout).orElse(base.idleTimeout),
      checkSeq = base.checkSeq || p.has(checkSeq),
      finalDelimiter = p.get(finalDelimiter).getOrElse(base.finalDelimiter),
      stats = base.stats || p.has(stats),
      statsJson = base.statsJson || p.has(statsJson),
      progress = base.progress || p.has(progress),
      rateLimit = p.get(rateLimit).orElse(base.rateLimit),
      timestamp = base.timestamp || p.has(timestamp),
      size = p.get(size).orElse(base.size),
      ins = base.ins ++ p.all(in),
      outs = base.outs ++ p.all(out),
      givenOptions = base.givenOptions ++ all(mux = true).filter(p.has).map(_.name)
    )

  /** An address that can play `role`. */
  private def addressAs(role: Role): Reader[Address] = new Reader[Address]:
    def form: String = "ADDR"
    override def readFor(text: String, name: String, verb: Option[String], optionForm: String): Either[CliError, Address] =
      Address.parse(text).flatMap(a => a.checkRole(role).map(_ => a))
    def read(text: String): Either[String, Address] = readFor(text, "", None, "").left.map(_.render)
