package asyncpipe.bench

import asyncpipe.cli.command.*

import asyncpipe.bench.{Bench, Plan, Suites}
import java.nio.file.Path

/** `asyncpipe bench`: measures the library's primitives against baselines on this machine. */
object BenchVerb extends Verb:
  val name = "bench"
  val synopsis = "asyncpipe bench [SUITE...] [--quick] [--forks N] [--json FILE] [--plot FILE.svg]"
  val summary = "measure the primitives against baselines on this machine"

  val quick: Opt[Unit] = Opt.flag("--quick", "a smoke run: fewer operations and iterations (for CI)")
  val forks: Opt[Long] = Opt("--forks", Reader.wholeNumber(1, 100),
    "measure the suites whose figures depend on choices a JVM makes once (JIT, thread placement: channels, future) in N fresh JVMs, one after the other, and pool their iterations (default 3; 1 with --quick)")
  val json: Opt[String] = Opt("--json", Reader.path(), "also write every number as JSON")
  val plot: Opt[String] = Opt("--plot", Reader.path(), "also draw the ratios as an SVG bar chart")
  val forkPlan: Opt[String] = Opt("--fork-plan", Reader.text("PLAN"), "internal: this process is one fork, measuring with this plan", hidden = true)
  val forkOut: Opt[String] = Opt("--fork-out", Reader.path(), "internal: the file a fork writes its result to", hidden = true)
  override val opts: Seq[Opt[?]] = Seq(quick, forks, json, plot, forkPlan, forkOut)
  override def operandWords: Seq[String] = Suites.all.map(_.name)

  override def help: String =
    val suites = Suites.all.map(s => s"  ${s.name.padTo(8, ' ')}  ${s.description}").mkString("\n")
    s"""${Options.usage(synopsis)}
       |
       |${Options.paragraph("Measures each suite's subjects and their baselines in the same run: warm-up, several iterations, median with min-max, allocation per operation where it matters, and the ratio subject/baseline (above 1.0x is faster). Tables go to stdout; progress to stderr on a terminal.")}
       |
       |Suites:
       |$suites
       |
       |Options:
       |${Options.helpLines(opts)}
       |""".stripMargin

  def run(args: Seq[String], io: Io): Either[CliError, Int] =
    for
      options <- Options.parse(args, opts, Some(name), synopsis)
      suites <- chosen(options.operands)
      plan <- plan(options)
      fork <- fork(options, suites)
    yield fork match
      case Some((suite, forkPlan, out)) =>
        Bench.runFork(suite, forkPlan, out)
        ExitCode.Ok
      case None =>
        val progress = Option.when(Tty.isInteractive)((line: String) => io.err.print(s"\r\u001b[K$line"))
        Bench.run(
          suites,
          plan,
          text => { io.out.write(text); io.out.flush() },
          progress,
          options.get(json).map(Path.of(_)),
          options.get(plot).map(Path.of(_))
        )
        progress.foreach(_ => io.err.print("\r\u001b[K"))
        ExitCode.Ok

  private def plan(options: Parsed): Either[CliError, Plan] =
    val base = if options.has(quick) then Plan.Quick else Plan.Full
    Right(options.get(forks).fold(base)(n => base.copy(forks = n.toInt)))

  /** The hidden options of a fork (see asyncpipe.bench.Forks): both or neither, and one suite. */
  private def fork(options: Parsed, suites: Seq[asyncpipe.bench.Suite]): Either[CliError, Option[(asyncpipe.bench.Suite, Plan, Path)]] =
    (options.get(forkPlan), options.get(forkOut)) match
      case (None, None) => Right(None)
      case (Some(spec), Some(out)) =>
        Plan.parse(spec) match
          case None => Left(CliError.BadToken(Some(name), spec, "--fork-plan takes WARMUP,ITERATIONS,SCALE", synopsis))
          case Some(p) =>
            suites match
              case Seq(one) => Right(Some((one, p, Path.of(out))))
              case _ => Left(CliError.BadToken(Some(name), suites.map(_.name).mkString(" "), "a fork measures exactly one suite", synopsis))
      case (onlyPlan, _) =>
        Left(CliError.BadToken(Some(name), if onlyPlan.isDefined then "--fork-plan" else "--fork-out", "--fork-plan and --fork-out go together", synopsis))

  private def chosen(names: Seq[String]): Either[CliError, Seq[asyncpipe.bench.Suite]] =
    if names.isEmpty then Right(Suites.all)
    else
      names.foldLeft[Either[CliError, Seq[asyncpipe.bench.Suite]]](Right(Vector.empty)) { (acc, n) =>
        acc.flatMap { got =>
          if n.startsWith("-") then Left(CliError.UnknownOption(Some(name), n, synopsis))
          else
            Suites.named(n).map(got :+ _).toRight(
              CliError.BadToken(Some(name), n, "unknown suite", Suites.all.map(_.name).mkString("one of: ", ", ", ""))
            )
        }
      }
