package asyncpipe.bench

import asyncpipe.cli.command.*

import asyncpipe.bench.{Bench, Plan, Suites}
import mainargs.{arg, main, Flag, Leftover, ParserForClass}
import java.nio.file.Path

@main final case class BenchOptions(
    @arg(doc = "a smoke run: fewer operations and iterations (for CI)") quick: Flag,
    @arg(doc = "also write every number as JSON to FILE") json: Option[String] = None,
    @arg(doc = "also draw the ratios as an SVG bar chart in FILE") plot: Option[String] = None,
    @arg(doc = "fresh JVMs for the suites that need them (default 3, 1 with --quick)") forks: Option[Int] = None,
    @arg(hidden = true, doc = "internal: this process is one fork, measuring with this plan") forkPlan: Option[String] = None,
    @arg(hidden = true, doc = "internal: the file a fork writes its result to") forkOut: Option[String] = None,
    @arg(doc = "suites to run (default: all)") suites: Leftover[String]
)

/** `asyncpipe bench`: measures the library's primitives against baselines on this machine. */
object BenchVerb extends Verb:
  val name = "bench"
  val synopsis = "asyncpipe bench [SUITE...] [--quick] [--forks N] [--json FILE] [--plot FILE.svg]"
  val summary = "measure the primitives against baselines on this machine"
  private lazy val parser = ParserForClass[BenchOptions] // lazy: mainargs spins lambdas at start-up

  override def help: String =
    val suites = Suites.all.map(s => s"  ${s.name.padTo(8, ' ')}  ${s.description}").mkString("\n")
    s"""Usage: $synopsis
       |
       |Measures each suite's subjects and their baselines in the same run: warm-up, several
       |iterations, median with min-max, allocation per operation where it matters, and the ratio
       |subject/baseline (above 1.0x is faster). Tables go to stdout; progress to stderr on a terminal.
       |
       |Suites:
       |$suites
       |
       |Options:
       |  --quick        a smoke run: fewer operations and iterations (for CI)
       |  --forks N      measure the suites whose figures depend on choices a JVM makes once
       |                 (JIT, thread placement: channels, future) in N fresh JVMs, one
       |                 after the other, and pool their iterations (default 3; 1 with --quick)
       |  --json FILE    also write every number as JSON
       |  --plot FILE    also draw the ratios as an SVG bar chart
       |""".stripMargin

  def run(args: Seq[String], io: Io): Either[CliError, Int] =
    for
      options <- Args.parse(name, synopsis, parser, optionsFirst(args))
      suites <- chosen(options.suites.value)
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
          options.json.map(Path.of(_)),
          options.plot.map(Path.of(_))
        )
        progress.foreach(_ => io.err.print("\r\u001b[K"))
        ExitCode.Ok

  private def plan(options: BenchOptions): Either[CliError, Plan] =
    val base = if options.quick.value then Plan.Quick else Plan.Full
    options.forks match
      case None                 => Right(base)
      case Some(n) if n >= 1    => Right(base.copy(forks = n))
      case Some(n)              => Left(CliError.BadToken(Some(name), n.toString, "--forks must be at least 1", synopsis))

  /** The hidden options of a fork (see asyncpipe.bench.Forks): both or neither, and one suite. */
  private def fork(options: BenchOptions, suites: Seq[asyncpipe.bench.Suite]): Either[CliError, Option[(asyncpipe.bench.Suite, Plan, Path)]] =
    (options.forkPlan, options.forkOut) match
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

  /** Options may come before or after the suite names (`bench channels --quick`): mainargs's
    * leftover would swallow everything after the first name, so the names go last.
    */
  private def optionsFirst(args: Seq[String]): Seq[String] =
    val takesValue = Set("--json", "--plot", "--forks", "--fork-plan", "--fork-out")
    val (options, names) = (Vector.newBuilder[String], Vector.newBuilder[String])
    var i = 0
    while i < args.length do
      val a = args(i)
      if takesValue(a) && i + 1 < args.length then { options += a += args(i + 1); i += 1 }
      else if a.startsWith("-") && a != "-" then options += a
      else names += a
      i += 1
    options.result() ++ names.result()

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
