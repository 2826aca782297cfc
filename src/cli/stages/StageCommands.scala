package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*

import java.nio.file.{Files, Path}
import scala.util.Try

/** The stage command lines: `asyncpipe FROM [TO]`, `asyncpipe mux`, `asyncpipe run` and the
  * single-argument pipeline `asyncpipe 'A | STAGE | B'`. Each builds [[Flow.Stage]]s and runs a
  * [[Flow]].
  */
object StageCommands:
  val addressSynopsis = "asyncpipe [OPTIONS] FROM [TO]"

  /** `asyncpipe [OPTIONS] ADDR [ADDR]`: one address takes its role from the streams (see
    * [[Address.inferRole]]); two are FROM and TO.
    */
  def addresses(args: Seq[String], io: Io): Either[CliError, Int] =
    for
      line <- StageOptions.parse(args, None, addressSynopsis, mux = false)
      addrs <- line.operands.toList.traverse(Address.parse)
      pair <- addrs match
        case List(only) =>
          Address.inferRole(only, StreamKind.of(0), StreamKind.of(1), only.present).map {
            case Role.Source => (only, StdAddress)
            case Role.Sink   => (StdAddress, only)
          }
        case List(from, to) => from.checkRole(Role.Source).flatMap(_ => to.checkRole(Role.Sink)).map(_ => (from, to))
        case Nil => Left(CliError.Missing(None, "an address", addressSynopsis))
        case _ => Left(CliError.BadToken(None, line.operands(2), "at most two addresses (FROM and TO); use 'asyncpipe mux --out ADDR' for more outputs", addressSynopsis))
      status <- runStages(Seq(StagePlan(Seq(pair._1), Seq(pair._2), line.options)), io)
    yield status

  /** What one stage reads and writes, before anything is opened. */
  final case class StagePlan(inputs: Seq[Address], outputs: Seq[Address], options: StageOptions)

  /** Checks that no file is both read and written, then opens and runs the stages. */
  def runStages(plans: Seq[StagePlan], io: Io): Either[CliError, Int] =
    for
      _ <- sameFileCheck(plans)
      status <- Flow(reporting(plans).map(toStage(_, io)), io).run()
    yield status

  /** The statistics options are the command's, wherever in a pipeline they were given: every
    * stage counts, and the flow reports once.
    */
  private def reporting(plans: Seq[StagePlan]): Seq[StagePlan] =
    val os = plans.map(_.options)
    def any(f: StageOptions => Boolean) = os.exists(f)
    plans.map(p => p.copy(options = p.options.copy(stats = any(_.stats), statsJson = any(_.statsJson), progress = any(_.progress))))

  private def toStage(plan: StagePlan, io: Io): Flow.Stage =
    Flow.Stage(plan.inputs.map(Endpoints.input(_, plan.options)), plan.outputs.map(Endpoints.output(_, plan.options, io.out)), plan.options)

  /** Writing a file truncates (or grows) it before or while it is read: refused, as `cat` refuses
    * "input file is output file". Files are compared by device and inode, so the standard streams
    * count (`asyncpipe - file:x < x`, `asyncpipe file:y - >> y`), as do links and other names.
    */
  private def sameFileCheck(plans: Seq[StagePlan]): Either[CliError, Unit] =
    // Loops, not combinators: their closures would be spun at run time on every start (ADR 0008,
    // "Start-up"), as the AOT cache's training reads no regular file.
    val reads = SameFile.all(plans, Role.Source)
    val writes = SameFile.all(plans, Role.Sink)
    var clash: CliError | Null = null
    var i = 0
    while clash == null && i < reads.length do
      var j = 0
      while clash == null && j < writes.length do
        val (r, w) = (reads(i), writes(j))
        if r.key == w.key then
          val loop = if w.address.isStandard then "grow it without end while it is read" else "destroy what is being read"
          clash = CliError.BadToken(None, w.address.render, s"${w.what} is the same file as ${r.what}: writing it would $loop",
            "a different file for the output")
        j += 1
      i += 1
    if clash == null then Right(()) else Left(clash.nn)

  /** A regular file a stage reads or writes: its device and inode (`key`), and how to name it. */
  private final case class SameFile(address: Address, key: AnyRef, what: String)

  private object SameFile:
    /** The regular files that `plans` read (`Role.Source`) or write. */
    def all(plans: Seq[StagePlan], role: Role): Vector[SameFile] =
      val found = Vector.newBuilder[SameFile]
      val stages = plans.iterator
      while stages.hasNext do
        val p = stages.next()
        val addresses = (if role == Role.Source then p.inputs else p.outputs).iterator
        while addresses.hasNext do
          val f = of(addresses.next(), role)
          if f.isDefined then found += f.get
      found.result()

    /** The file behind `address` in `role`, when it is a regular file that exists. */
    def of(address: Address, role: Role): Option[SameFile] =
      val local = address.localFile(role)
      if local.isEmpty then return None
      val (path, what) = local.get
      val attributes =
        try Files.readAttributes(path, classOf[java.nio.file.attribute.BasicFileAttributes])
        catch case _: java.io.IOException => null
      if attributes == null || !attributes.isRegularFile || attributes.fileKey == null then None
      else Some(SameFile(address, attributes.fileKey, what))

  extension [A](list: List[String])
    private def traverse(f: String => Either[CliError, A]): Either[CliError, List[A]] =
      list.foldRight[Either[CliError, List[A]]](Right(Nil))((s, acc) => for a <- f(s); rest <- acc yield a :: rest)

/** `asyncpipe mux`: frames from stdin and every `--in` to stdout and every `--out`. */
object MuxVerb extends Verb:
  val name = "mux"
  val synopsis = "asyncpipe mux [--in ADDR]... [--out ADDR]... [OPTIONS]"
  val summary = "fan frames in from stdin and --in, out to stdout and --out"
  override def help: String =
    s"""Usage: $synopsis
       |
       |Reads whole frames from stdin and from every --in address, and writes every frame to stdout
       |and to every --out address: frames are never torn or merged, and the frames of one input
       |keep their order. Outputs are served in parallel; a slow one holds the others back only
       |once --buffer frames wait for it.
       |
       |Options:
       |${StageOptions.helpLines(mux = true)}
       |""".stripMargin

  def run(args: Seq[String], io: Io): Either[CliError, Int] =
    stage(args, StageOptions(), first = true, last = true).flatMap(p => StageCommands.runStages(Seq(p), io))

  /** A mux stage from its arguments (after the word `mux`), `base` holding options given before:
    * stdin in when it is first, stdout out when it is last, and every `--in` and `--out`.
    */
  def stage(args: Seq[String], base: StageOptions, first: Boolean, last: Boolean): Either[CliError, StageCommands.StagePlan] =
    StageOptions.parse(args, Some(name), synopsis, mux = true, base).flatMap { line =>
      line.operands.headOption match
        case Some(extra) => Left(CliError.BadToken(Some(name), extra, "mux takes no operands: give inputs with --in ADDR and outputs with --out ADDR", synopsis))
        case None =>
          val o = line.options
          Right(StageCommands.StagePlan((if first then Seq(StdAddress) else Nil) ++ o.ins, (if last then Seq(StdAddress) else Nil) ++ o.outs, o))
    }

/** `asyncpipe run 'A | STAGE | B'` or `asyncpipe run FILE.pipe`: a pipeline in one JVM. */
object RunVerb extends Verb:
  val name = "run"
  val synopsis = "asyncpipe run [OPTIONS] 'A | STAGE | B' | asyncpipe run [OPTIONS] FILE.pipe"
  val summary = "run a whole pipeline in one JVM, stages joined by channels"
  override def help: String =
    s"""Usage: $synopsis
       |
       |Runs the stages of a pipeline in one process, joined by in-memory channels (no framing, no
       |copies between stages). The text is what the shell pipeline would be without the word
       |'asyncpipe': an address first is the source, an address last is the sink, and 'mux [OPTIONS]'
       |stages go between (a first mux reads stdin, a last one writes stdout). Stages are separated
       |by '|'; quote with '...' or "...". A FILE.pipe holds such a text, on as many lines as you
       |like; a word that begins with '#' begins a comment, to the end of its line.
       |Options given before the pipeline apply to every stage; a stage's own options follow it.
       |
       |Options:
       |${StageOptions.helpLines(mux = false)}
       |""".stripMargin

  def run(args: Seq[String], io: Io): Either[CliError, Int] =
    for
      line <- StageOptions.parse(args, Some(name), synopsis, mux = false)
      text <- line.operands match
        case Seq(one) => pipelineText(one)
        case Seq() => Left(CliError.Missing(Some(name), "a pipeline ('A | STAGE | B') or a FILE.pipe", synopsis))
        case more => Left(CliError.BadToken(Some(name), more(1), "one pipeline only: quote it as one argument", synopsis))
      plans <- PipelineText.plans(text, line.options)
      status <- StageCommands.runStages(plans, io)
    yield status

  /** The argument itself, or the text of the `.pipe` file it names. */
  private def pipelineText(arg: String): Either[CliError, String] =
    if arg.endsWith(".pipe") && !arg.contains('|') then PipeFile.read(Path.of(arg), arg)
    else Right(arg)

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

/** The text of a pipeline: stages separated by unquoted '|', each one tokens like a command line. */
object PipelineText:
  private val synopsis = RunVerb.synopsis

  /** The stage plans of `text`; `base` holds the options given before the pipeline. */
  def plans(text: String, base: StageOptions): Either[CliError, Seq[StageCommands.StagePlan]] =
    tokenize(text).flatMap { segments =>
      val n = segments.length
      if segments.exists(_.isEmpty) then Left(CliError.BadToken(Some("run"), text.trim, "a stage is empty (two '|' in a row, or one at an end)", synopsis))
      else
        val plans = segments.zipWithIndex.map((tokens, i) => plan(tokens, i, n, base))
        plans.collectFirst { case Left(e) => e }.toLeft(plans.collect { case Right(p) => p }).flatMap { ps =>
          if n == 1 && segments.head.head != "mux" then
            Left(CliError.BadToken(Some("run"), text.trim, "a pipeline needs a source and a sink ('A | B') or a mux stage; for one address run 'asyncpipe ADDR'", synopsis))
          else Right(ps)
        }
    }

  private def plan(tokens: Seq[String], i: Int, n: Int, base: StageOptions): Either[CliError, StageCommands.StagePlan] =
    val first = i == 0
    val last = i == n - 1
    if tokens.head == "mux" then MuxVerb.stage(tokens.tail, base, first, last)
    else
      StageOptions.parse(tokens, Some("run"), synopsis, mux = false, base).flatMap { line =>
        line.operands match
          case Seq(one) =>
            Address.parse(one).flatMap { a =>
              if first then a.checkRole(Role.Source).map(_ => StageCommands.StagePlan(Seq(a), Nil, line.options))
              else if last then a.checkRole(Role.Sink).map(_ => StageCommands.StagePlan(Nil, Seq(a), line.options))
              else Left(CliError.BadToken(Some("run"), one, "an address stage can only be first (the source) or last (the sink); to copy in the middle use 'mux --out ADDR'", synopsis))
            }
          case Seq() => Left(CliError.Missing(Some("run"), s"an address or 'mux' in stage ${i + 1}", synopsis))
          case more =>
            val known = Seq("mux")
            val hint = CliError.suggest(more.head, known).fold("")(s => s"; did you mean '$s'?")
            Left(CliError.BadToken(Some("run"), more.mkString(" "), s"stage ${i + 1} must be one address or 'mux [OPTIONS]'$hint", synopsis))
      }

  /** Splits into stages at unquoted '|', each stage into words at unquoted blanks. '...' quotes
    * literally, "..." quotes with '\' escaping '"' and '\', and an unquoted '\' makes the blank, '|' or quote after
    * it ordinary (before anything else it is itself, so `file:a\,b` keeps its escaped comma).
    * An unquoted '#' that begins a word begins a comment, to the end of its line (as in a shell:
    * a '#' inside a word, `file:log#1`, is part of it).
    */
  def tokenize(text: String): Either[CliError, Vector[Vector[String]]] =
    val stages = Vector.newBuilder[Vector[String]]
    var words = Vector.newBuilder[String]
    val word = StringBuilder()
    var inWord = false
    var i = 0
    def endWord(): Unit =
      if inWord then words += word.result()
      word.clear()
      inWord = false
    while i < text.length do
      val c = text(i)
      c match
        case '#' if !inWord =>
          while i + 1 < text.length && text(i + 1) != '\n' do i += 1
        case '|' =>
          endWord()
          stages += words.result()
          words = Vector.newBuilder[String]
        case ' ' | '\t' | '\n' | '\r' => endWord()
        case '\'' =>
          val end = text.indexOf('\'', i + 1)
          if end < 0 then return Left(CliError.BadToken(Some("run"), text.substring(i), "a ' quote is not closed", synopsis))
          word ++= text.substring(i + 1, end)
          inWord = true
          i = end
        case '"' =>
          i += 1
          while i < text.length && text(i) != '"' do
            if text(i) == '\\' && i + 1 < text.length && (text(i + 1) == '"' || text(i + 1) == '\\') then i += 1
            word += text(i)
            i += 1
          if i >= text.length then return Left(CliError.BadToken(Some("run"), text, "a \" quote is not closed", synopsis))
          inWord = true
        case '\\' if i + 1 < text.length && " \t|'\"".contains(text(i + 1)) =>
          i += 1
          word += text(i)
          inWord = true
        case other =>
          word += other
          inWord = true
      i += 1
    endWord()
    stages += words.result()
    Right(stages.result())
