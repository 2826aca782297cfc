package asyncpipe.cli.stages

import asyncpipe.cli.command.*

import java.nio.file.Path

/** `asyncpipe run 'A | STAGE | B'` or `asyncpipe run FILE.pipe`: a pipeline in one JVM. */
object RunVerb extends Verb:
  val name = "run"
  val synopsis = "asyncpipe run [OPTIONS] 'A | STAGE | B' | asyncpipe run [OPTIONS] FILE.pipe"
  val summary = "run a whole pipeline in one JVM, stages joined by channels"
  override def opts: Seq[Opt[?]] = StageOptions.all(mux = false)

  /** Also `asyncpipe [OPTIONS] 'A | STAGE | B'`, without the word `run`. */
  override def claims(args: Seq[String]): Boolean = args match
    case Seq(head, _*) if Options.isOption(head) => args.exists(isPipeline)
    case Seq(head, _*)                           => isPipeline(head)
    case _                                       => false

  private def isPipeline(token: String): Boolean = token.contains(" | ")
  override def help: String =
    s"""${Options.usage(synopsis)}
       |
       |${Options.paragraph("Runs the stages of a pipeline in one process, joined by in-memory channels (no framing, no copies between stages). The text is what the shell pipeline would be without the word 'asyncpipe': an address first is the source, an address last is the sink, and 'mux [OPTIONS]' stages go between (a first mux reads stdin, a last one writes stdout). Stages are separated by '|'; quote with '...' or \"...\". A FILE.pipe holds such a text, on as many lines as you like; a word that begins with '#' begins a comment, to the end of its line. Options given before the pipeline apply to every stage; a stage's own options follow it.")}
       |
       |Options:
       |${StageOptions.helpLines(mux = false)}
       |
       |Examples:
       |  asyncpipe run 'udp:9000 | mux --out file:all.log | file:copy.log'
       |  asyncpipe --stats 'file:in.txt | mux | null:'
       |  asyncpipe run capture.pipe
       |""".stripMargin

  def run(args: Seq[String], io: Io): Either[CliError, Int] =
    for
      line <- StageOptions.parse(args, Some(name), synopsis, mux = false)
      text <- line.operands match
        case Seq(one) => pipelineText(one)
        case Seq() => Left(CliError.Missing(Some(name), "a pipeline ('A | STAGE | B') or a FILE.pipe", synopsis))
        case more => Left(CliError.BadToken(Some(name), more(1), "one pipeline only: quote it as one argument", synopsis))
      plans <- PipelineText.plans(text, line.options)
      status <- Stages.run(plans, io)
    yield status

  /** The argument itself, or the text of the `.pipe` file it names. */
  private def pipelineText(arg: String): Either[CliError, String] =
    if arg.endsWith(".pipe") && !arg.contains('|') then PipeFile.read(Path.of(arg), arg)
    else Right(arg)
