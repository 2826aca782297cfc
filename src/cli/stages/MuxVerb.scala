package asyncpipe.cli.stages

import asyncpipe.cli.command.*

/** `asyncpipe mux`: frames from stdin and every `--in` to stdout and every `--out`. */
object MuxVerb extends Verb:
  val name = "mux"
  val synopsis = "asyncpipe mux [--in ADDR]... [--out ADDR]... [OPTIONS]"
  val summary = "fan frames in from stdin and --in, out to stdout and --out"
  override def opts: Seq[Opt[?]] = StageOptions.all(mux = true)
  override def help: String =
    s"""${Options.usage(synopsis)}
       |
       |${Options.paragraph("Reads whole frames from stdin and from every --in address, and writes every frame to stdout and to every --out address: frames are never torn or merged, and the frames of one input keep their order. Outputs are served in parallel; a slow one holds the others back only once --buffer frames wait for it.")}
       |
       |Options:
       |${StageOptions.helpLines(mux = true)}
       |
       |Examples:
       |  asyncpipe udp:9000 | asyncpipe mux --out file:copy.log | grep ERROR
       |  asyncpipe mux --in file:a.log --in file:b.log > both.log
       |  producer | asyncpipe mux --out udp:host:9000 --output-error warn > local.log
       |""".stripMargin

  def run(args: Seq[String], io: Io): Either[CliError, Int] =
    stage(args, StageOptions(), first = true, last = true).flatMap(p => Stages.run(Seq(p), io))

  /** A mux stage from its arguments (after the word `mux`), `base` holding options given before:
    * stdin in when it is first, stdout out when it is last, and every `--in` and `--out`.
    */
  def stage(args: Seq[String], base: StageOptions, first: Boolean, last: Boolean): Either[CliError, Stages.StagePlan] =
    StageOptions.parse(args, Some(name), synopsis, mux = true, base).flatMap { line =>
      line.operands.headOption match
        case Some(extra) => Left(CliError.BadToken(Some(name), extra, "mux takes no operands: give inputs with --in ADDR and outputs with --out ADDR", synopsis))
        case None =>
          val o = line.options
          Right(Stages.StagePlan((if first then Seq(StdAddress) else Nil) ++ o.ins, (if last then Seq(StdAddress) else Nil) ++ o.outs, o))
    }
