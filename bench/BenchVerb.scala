package asyncpipe.bench

import asyncpipe.cli.command.*

import asyncpipe.bench.{Bench, Plan, Suites}
import java.nio.file.Path

/** `asyncpipe bench`: measures the library's primitives against baselines on this machine. A
  * class over the suites it offers so that tests can run the verb itself on suites of their own
  * (results they chose, met or missed); the command line's verb is the object, over every suite.
  */
class BenchVerb(suites: Seq[Suite]) extends Verb:
  val name = "bench"
  val synopsis = "asyncpipe bench [SUITE...] [--quick] [--forks N] [--parts PART,...] [--json FILE] [--plot FILE.svg|FILE.png] [--check]"
  val summary = "measure the primitives against baselines on this machine"

  val quick: Opt[Unit] = Opt.flag("--quick", "a smoke run: fewer operations and iterations (for CI)")
  val forks: Opt[Long] = Opt("--forks", Reader.wholeNumber(1, 100),
    "measure the suites whose figures depend on choices a JVM makes once (JIT, thread placement: channels, future) in N fresh JVMs, one after the other, and pool their iterations (default 3; 1 with --quick)")
  val onlyParts: Opt[String] = Opt("--parts", Reader.text("PART,..."),
    "measure only these parts of a suite that has parts (channels: " + suites.flatMap(_.parts).distinct.mkString(", ") + "); other suites run whole")
  val json: Opt[Path] = Opt("--json", Reader.path().andThen(ReportFile.check), "also write every number as JSON, into a directory that exists")
  val plot: Opt[ChartFile] = Opt("--plot", Reader.path("FILE.svg|FILE.png").andThen(ChartFile.read),
    "also draw the ratios as a chart, SVG or PNG by the file's extension, into a directory that exists: a bar per comparison on a log scale centred on 1.0x (right: faster than the baseline), its target marked, met or MISSED")
  val check: Opt[Unit] = Opt.flag("--check", "exit with status 1 if any target was missed (the summary after the tables lists them); without it the status is 0 whatever was measured")
  val forkPlan: Opt[String] = Opt("--fork-plan", Reader.text("PLAN"), "internal: this process is one fork, measuring with this plan", hidden = true)
  val forkOut: Opt[String] = Opt("--fork-out", Reader.path(), "internal: the file a fork writes its result to", hidden = true)
  val forkPart: Opt[String] = Opt("--fork-part", Reader.text("PART"), "internal: the part of the suite this fork measures", hidden = true)
  override val opts: Seq[Opt[?]] = Seq(quick, forks, onlyParts, json, plot, check, forkPlan, forkOut, forkPart)
  override def operandWords: Seq[String] = suites.map(_.name)

  override def help: String =
    val list = Options.table(suites.map(s => s.name -> s.description))
    s"""${Options.usage(synopsis)}
       |
       |${Options.paragraph("Measures each suite's subjects and their baselines in the same run: warm-up, several iterations, median with min-max, allocation per operation where it matters, and the ratio subject/baseline (above 1.0x is faster). Each target is marked met or MISSED on its row, and after the tables a summary lists the missed ones. Tables go to stdout; progress to stderr on a terminal.")}
       |
       |Suites:
       |$list
       |
       |Options:
       |${Options.helpLines(opts)}
       |""".stripMargin

  def run(args: Seq[String], io: Io): Either[CliError, Int] =
    for
      options <- Options.parse(args, opts, Some(name), synopsis)
      chosen <- chosen(options.operands)
      plan <- plan(options)
      fork <- fork(options, chosen)
      parts <- parts(options, chosen)
      status <- fork match
        case Some((suite, forkPlan, out, part)) =>
          Bench.runFork(suite, forkPlan, out, part)
          Right(ExitCode.Ok)
        case None =>
          val progress = Option.when(Tty.isInteractive)((line: String) => io.err.print(s"\r\u001b[K$line"))
          val results = Bench.run(
            chosen,
            plan,
            text => { io.out.write(text); io.out.flush() },
            progress,
            options.get(json),
            options.get(plot),
            parts
          )
          progress.foreach(_ => io.err.print("\r\u001b[K"))
          checked(results, options.has(check))
    yield status

  /** The run's status: with `--check`, a runtime error (1) when any target was missed. */
  private def checked(results: Seq[SuiteResult], check: Boolean): Either[CliError, Int] =
    val verdicts = results.flatMap(_.verdicts)
    val missed = verdicts.count(!_.met)
    if check && missed > 0 then
      Left(CliError.Runtime(s"$name --check", s"$missed of ${verdicts.size} targets missed (listed after the tables)"))
    else Right(ExitCode.Ok)

  private def plan(options: Parsed): Either[CliError, Plan] =
    val base = if options.has(quick) then Plan.Quick else Plan.Full
    Right(options.get(forks).fold(base)(n => base.copy(forks = n.toInt)))

  /** The parts `--parts` names: each a part of a chosen suite, and every chosen suite that has
    * parts keeps one at least. Empty: all.
    */
  private def parts(options: Parsed, chosen: Seq[Suite]): Either[CliError, Set[String]] =
    options.get(onlyParts).fold(Right(Set.empty[String])) { list =>
      val names = list.split(',').map(_.trim).toSeq
      val known = chosen.flatMap(_.parts)
      names.find(n => !known.contains(n)) match
        case Some(bad) =>
          val rule = if known.isEmpty then "no chosen suite has parts" else known.mkString("not a part of a chosen suite; one of: ", ", ", "")
          Left(CliError.BadToken(Some(name), bad, rule, synopsis))
        case None =>
          chosen.find(s => s.parts.nonEmpty && !s.parts.exists(names.contains)) match
            case Some(s) => Left(CliError.BadToken(Some(name), list, s"names no part of suite ${s.name}", synopsis))
            case None    => Right(names.toSet)
    }

  /** The hidden options of a fork (see asyncpipe.bench.Forks): plan and output both or neither,
    * one suite, and a part only of a suite that has parts.
    */
  private def fork(options: Parsed, chosen: Seq[Suite]): Either[CliError, Option[(Suite, Plan, Path, Option[String])]] =
    (options.get(forkPlan), options.get(forkOut)) match
      case (None, None) =>
        options.get(forkPart).fold(Right(None))(p =>
          Left(CliError.BadToken(Some(name), "--fork-part", "--fork-part goes with --fork-plan and --fork-out", synopsis)))
      case (Some(spec), Some(out)) =>
        Plan.parse(spec) match
          case None => Left(CliError.BadToken(Some(name), spec, "--fork-plan takes WARMUP,ITERATIONS,SCALE", synopsis))
          case Some(p) =>
            chosen match
              case Seq(one) =>
                options.get(forkPart) match
                  case Some(part) if !one.parts.contains(part) =>
                    val known = if one.parts.isEmpty then s"suite ${one.name} has no parts" else one.parts.mkString("one of: ", ", ", "")
                    Left(CliError.BadToken(Some(name), part, known, synopsis))
                  case part => Right(Some((one, p, Path.of(out), part)))
              case _ => Left(CliError.BadToken(Some(name), chosen.map(_.name).mkString(" "), "a fork measures exactly one suite", synopsis))
      case (onlyPlan, _) =>
        Left(CliError.BadToken(Some(name), if onlyPlan.isDefined then "--fork-plan" else "--fork-out", "--fork-plan and --fork-out go together", synopsis))

  private def chosen(names: Seq[String]): Either[CliError, Seq[Suite]] =
    if names.isEmpty then Right(suites)
    else
      names.foldLeft[Either[CliError, Seq[Suite]]](Right(Vector.empty)) { (acc, n) =>
        acc.flatMap { got =>
          if n.startsWith("-") then Left(CliError.UnknownOption(Some(name), n, synopsis))
          else
            suites.find(_.name == n).map(got :+ _).toRight(
              CliError.BadToken(Some(name), n, "unknown suite", suites.map(_.name).mkString("one of: ", ", ", ""))
            )
        }
      }

/** The command line's `asyncpipe bench`, over every suite. */
object BenchVerb extends BenchVerb(Suites.all)
