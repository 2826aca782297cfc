package asyncpipe.cli.tasks

import asyncpipe.cli.*

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*

import asyncpipe.async.{Jitter, Overrun, TaskSchedule}
import java.io.{ByteArrayOutputStream, PrintStream}
import java.nio.channels.Channels
import munit.Location
import TaskOptions.Kind

/** The command lines of `every`, `retry` and `repeat`: what each option becomes, and every usage
  * error naming its token. In-process: nothing here starts a command.
  */
class TaskOptionsTest extends munit.FunSuite:
  private def ok(kind: Kind, args: String*)(using Location): TaskOptions =
    TaskOptions.parse(kind, args) match
      case Right(o)    => o
      case Left(error) => fail(s"expected ${args.mkString(" ")} to parse, got:\n${error.render}")

  /** The usage error for `args`, whose rendering must contain each of `parts`. */
  private def refused(kind: Kind, args: String*)(parts: String*)(using Location): CliError =
    TaskOptions.parse(kind, args) match
      case Right(o) => fail(s"expected ${args.mkString(" ")} to be refused, got $o")
      case Left(error) =>
        assertEquals(error.exitCode, ExitCode.Usage, error.render)
        for p <- parts do assert(error.render.contains(p), s"the message for '${args.mkString(" ")}' should contain [$p]:\n${error.render}")
        error

  private def schedule(kind: Kind, args: String*)(using Location) = ok(kind, (args :+ "--" :+ "true")*).schedule

  // ---------------------------------------------------------------- what the options become

  test("retry: defaults are backoff 1s, factor 2, at most 1m apart, no limit, any failure retried"):
    val o = ok(Kind.Retry, "--", "curl", "-f", "http://x")
    assertEquals(o.command, Seq("curl", "-f", "http://x"))
    assertEquals(o.schedule, TaskSchedule.RepeatUntilSuccess(1000, 0, 2, 60_000, Jitter.Off))
    assertEquals(o.failing, Failing.Retryable(Set.empty, Set.empty))
    assertEquals((o.timeoutMillis, o.killAfterMillis, o.seed, o.deadlineMillis, o.dryRun, o.verbose), (None, 2000L, None, None, false, false))

  test("retry: the design's example, spelled with --max-attempts"):
    assertEquals(schedule(Kind.Retry, "--max-attempts", "8", "--backoff", "100ms", "--factor", "2"),
      TaskSchedule.RepeatUntilSuccess(100, 8, 2, 60_000, Jitter.Off))
    assertEquals(schedule(Kind.Retry, "--backoff=0ms", "--factor=1.5", "--max-delay=2s"),
      TaskSchedule.RepeatUntilSuccess(0, 0, 1.5, 2000, Jitter.Off))

  test("every: DURATION is a fixed rate; --spacing a fixed delay; --overlap wait runs late; allow overlaps"):
    assertEquals(schedule(Kind.Every, "10s", "--jitter", "1s"), TaskSchedule.Every(10_000, 0, Jitter.Spread(1000), Overrun.Skip))
    assertEquals(schedule(Kind.Every, "--count", "3", "1.5s"), TaskSchedule.Every(1500, 3))
    assertEquals(schedule(Kind.Every, "--spacing", "2m", "--count", "4"), TaskSchedule.RepeatUntilFailure(120_000, 4))
    assertEquals(schedule(Kind.Every, "1h", "--overlap", "wait"), TaskSchedule.Every(3_600_000, 0, Jitter.Off, Overrun.RunLate))
    val allow = ok(Kind.Every, "100ms", "--overlap", "allow", "--", "true")
    assertEquals((allow.schedule, allow.overlap), (TaskSchedule.Every(100), Overlap.Allow))
    assertEquals(ok(Kind.Every, "1s", "--", "true").failing, Failing.Never)

  test("repeat: --until-failure and --until-success, with the delay options (none by default)"):
    assertEquals(schedule(Kind.Repeat, "--until-failure"), TaskSchedule.RepeatUntilFailure(0, 0, 1, Long.MaxValue))
    assertEquals(schedule(Kind.Repeat, "--until-success", "--count", "5", "--backoff", "1s", "--factor", "3", "--max-delay", "5s"),
      TaskSchedule.RepeatUntilSuccess(1000, 5, 3, 5000))
    assertEquals(ok(Kind.Repeat, "--until-failure", "--", "x").failing, Failing.NonZero)

  test("the options every verb takes"):
    val o = ok(Kind.Repeat, "--until-success", "--timeout", "30s", "--kill-after", "0s", "--seed", "-7",
      "--deadline", "2m", "--dry-run", "-v", "--", "make", "test")
    assertEquals((o.timeoutMillis, o.killAfterMillis, o.seed, o.deadlineMillis, o.dryRun, o.verbose),
      (Some(30_000L), 0L, Some(-7L), Some(120_000L), true, true))
    assertEquals(o.command, Seq("make", "test"))

  test("--jitter: none, full, equal, a percentage (+-) or a duration"):
    def jitter(j: String) = ok(Kind.Retry, "--jitter", j, "--", "x").schedule match
      case TaskSchedule.RepeatUntilSuccess(_, _, _, _, jitter) => jitter
      case other                                               => fail(s"unexpected $other")
    assertEquals(jitter("none"), Jitter.Off)
    assertEquals(jitter("full"), Jitter.Full)
    assertEquals(jitter("equal"), Jitter.Equal)
    assertEquals(jitter("10%"), Jitter.Percent(10))
    assertEquals(jitter("+-12.5%"), Jitter.Percent(12.5))
    assertEquals(jitter("±100%"), Jitter.Percent(100))
    assertEquals(jitter("250ms"), Jitter.Spread(250))
    assertEquals(jitter("0s"), Jitter.Spread(0))

  test("durations: ms, s, m and h, with decimals, in whole milliseconds"):
    for (text, millis) <- Seq("250ms" -> 250L, "1.5s" -> 1500L, "2m" -> 120_000L, "1.25h" -> 4_500_000L, "0.001s" -> 1L) do
      assertEquals(ok(Kind.Retry, "--timeout", text, "--", "x").timeoutMillis, Some(millis), text)

  test("Durations: one parser for addresses and task verbs; whole milliseconds here; exact rendering"):
    assertEquals(Durations.parseMillis("1.5s"), Right(1500L))
    assertEquals(Durations.parseMillis("0ms"), Left("the duration must be more than zero (got '0ms')"))
    assertEquals(Durations.parseMillis("0ms", allowZero = true), Right(0L))
    assertEquals(Durations.parseMillis("10us"), Left("duration '10us' is not a whole number of milliseconds (the smallest step here is 1ms)"))
    assertEquals(Durations.parse("1.5.5s").left.map(_.take(27)), Left("unknown duration unit '.5s'"))
    for (millis, text) <- Seq(0L -> "0ms", 1500L -> "1500ms", 2000L -> "2s", 60_000L -> "1m", 5_400_000L -> "90m") do
      assertEquals(Durations.renderMillis(millis), text)
    assert(Durations.isDecimal("1.5") && !Durations.isDecimal(".5") && !Durations.isDecimal("1.") && !Durations.isDecimal(""))

  test("everything after '--' is the command's, options and '--' included"):
    assertEquals(ok(Kind.Retry, "--", "grep", "--", "-v", "--timeout").command, Seq("grep", "--", "-v", "--timeout"))
    assertEquals(ok(Kind.Every, "1s", "--", "--help").command, Seq("--help"))

  test("Failing: every never fails the schedule, repeat on any non-zero status, retry only on retryable ones"):
    assert(!Failing.Never(1))
    assert(Failing.NonZero(1) && !Failing.NonZero(0))
    val r = Failing.Retryable(Set(75, 76), Set(76))
    assert(r(75) && !r(76) && !r(1) && !r(0))
    assert(Failing.Retryable(Set.empty, Set(2))(1) && !Failing.Retryable(Set.empty, Set(2))(2))

  test("exit-code lists: numbers and ranges 1-255"):
    ok(Kind.Retry, "--retry-on", "1,2,75-78", "--stop-on", "3", "--", "x").failing match
      case Failing.Retryable(on, stop) => assertEquals((on, stop), (Set(1, 2, 75, 76, 77, 78), Set(3)))
      case other                       => fail(s"unexpected $other")

  // ---------------------------------------------------------------- usage errors name the token

  test("a bad duration names the token and the rule"):
    refused(Kind.Every, "10x", "--", "true")("asyncpipe every: bad value '10x'", "DURATION: unknown duration unit 'x'")
    refused(Kind.Every, "10", "--", "true")("bad value '10'", "needs a unit")
    refused(Kind.Retry, "--timeout", "0s", "--", "x")("bad value '0s'", "more than zero", "--timeout D")
    refused(Kind.Retry, "--backoff", "1.5ms", "--", "x")("bad value '1.5ms'", "not a whole number of milliseconds")
    refused(Kind.Retry, "--deadline", "soon", "--", "x")("bad value 'soon'", "not a number with a unit")

  test("bad numbers, jitters, overlaps and code lists name the token"):
    refused(Kind.Retry, "--max-attempts", "0", "--", "x")("bad value '0'", "--max-attempts: '0' is not a positive whole number")
    refused(Kind.Retry, "--max-attempts", "-3", "--", "x")("bad value '-3'")
    refused(Kind.Retry, "--max-attempts", "99999999999999999999", "--", "x")("is too large")
    refused(Kind.Every, "1s", "--count", "many", "--", "x")("bad value 'many'", "--count N")
    refused(Kind.Retry, "--seed", "1.5", "--", "x")("bad value '1.5'", "--seed: '1.5' is not a whole number")
    refused(Kind.Retry, "--factor", "0.5", "--", "x")("bad value '0.5'", "at least 1")
    refused(Kind.Retry, "--factor", "NaN", "--", "x")("bad value 'NaN'")
    refused(Kind.Retry, "--jitter", "101%", "--", "x")("bad value '101%'", "at most 100%")
    refused(Kind.Retry, "--jitter", "lots", "--", "x")("bad value 'lots'", "none, full, equal")
    refused(Kind.Every, "1s", "--overlap", "never", "--", "x")("bad value 'never'", "skip, wait, allow")
    refused(Kind.Retry, "--retry-on", "0", "--", "x")("bad value '0'", "0 is success")
    refused(Kind.Retry, "--retry-on", "1,256", "--", "x")("bad value '1,256'", "1-255")
    refused(Kind.Retry, "--stop-on", "9-3", "--", "x")("runs backwards")
    refused(Kind.Retry, "--stop-on", "1,,2", "--", "x")("'' is not an exit status")
    refused(Kind.Retry, "--retry-on", "1-5", "--stop-on", "4", "--", "x")("exit status 4 is in both")

  test("--max is not taken: the error suggests --max-attempts"):
    val e = refused(Kind.Retry, "--max", "8", "--", "x")("unknown option '--max'", "did you mean '--max-attempts' or '--max-delay'?")
    assertEquals(e, CliError.UnknownOption(Some("retry"), "--max", Kind.Retry.synopsis, Seq("--max-attempts", "--max-delay")))
    refused(Kind.Retry, "--tiemout", "1s", "--", "x")("unknown option '--tiemout'; did you mean '--timeout'?")
    refused(Kind.Every, "1s", "--max-attempts", "3", "--", "x")("unknown option '--max-attempts'")

  test("the shape of the command line: '--', the command, positionals, repeats, flags and values"):
    refused(Kind.Retry, "curl", "http://x")("bad value 'curl'", "the command goes after '--'")
    refused(Kind.Retry, "--timeout", "1s")("missing '--' and the command to run after it")
    refused(Kind.Retry, "--")("missing the command to run after '--'")
    refused(Kind.Retry, "--", "")("the command name is empty")
    refused(Kind.Retry, "--timeout")("missing a value after --timeout")
    refused(Kind.Retry, "--timeout", "1s", "--timeout", "2s", "--", "x")("bad value '--timeout'", "given more than once")
    refused(Kind.Retry, "--dry-run=yes", "--", "x")("bad value '--dry-run=yes'", "--dry-run takes no value")
    refused(Kind.Every, "--", "true")("missing DURATION (or --spacing D)")
    refused(Kind.Every, "1s", "--spacing", "2s", "--", "true")("bad value '1s'", "not both")
    refused(Kind.Every, "1s", "2s", "--", "true")("bad value '2s'", "the command goes after '--'")
    refused(Kind.Every, "--spacing", "1s", "--overlap", "allow", "--", "true")("bad value 'allow'", "--overlap is for a fixed rate")
    refused(Kind.Repeat, "--", "x")("missing --until-failure or --until-success")
    refused(Kind.Repeat, "--until-failure", "--until-success", "--", "x")("bad value '--until-success'", "not both")

  // ---------------------------------------------------------------- through Main, in-process

  private final case class Ran(status: Int, out: String, err: String)
  private def run(args: String*): Ran =
    val out = ByteArrayOutputStream()
    val err = ByteArrayOutputStream()
    val status = Main.run(args, Io(OwnedOutput(Channels.newChannel(out)), PrintStream(err, true, "UTF-8")))
    Ran(status, out.toString("UTF-8"), err.toString("UTF-8"))

  test("through Main: a usage error exits 2 with the message on stderr, nothing on stdout"):
    val r = run("every", "10x", "--", "true")
    assertEquals((r.status, r.out), (ExitCode.Usage, ""))
    assert(r.err.startsWith("asyncpipe every: bad value '10x'"), r.err)
    assert(r.err.contains("(see 'asyncpipe every --help')"), r.err)

  test("a command that is not found exits 127, one that cannot be run 126, as shells do"):
    val missing = run("retry", "--", "asyncpipe-no-such-command")
    assertEquals(missing, Ran(ExitCode.NotFound, "", "asyncpipe retry: asyncpipe-no-such-command: command not found\n"))
    assertEquals(run("every", "1s", "--", "/no/such/file").status, ExitCode.NotFound)
    val dir = os.temp.dir(prefix = "asyncpipe-options")
    try
      val plain = dir / "not-executable.sh"
      os.write(plain, "exit 0\n", perms = "rw-r--r--")
      val notExecutable = run("repeat", "--until-success", "--", plain.toString)
      assertEquals(notExecutable.status, ExitCode.NotExecutable, notExecutable.err)
      assert(notExecutable.err.contains(s"$plain: Permission denied"), notExecutable.err)
    finally os.remove.all(dir)
    assertEquals(run("retry", "--", "/").err, "asyncpipe retry: /: Is a directory\n")

  test("--help names every option and the exit statuses"):
    for verb <- TaskVerbs.all do
      val r = run(verb.name, "--help")
      assertEquals(r.status, 0)
      for spec <- Kind.valueOf(verb.name.capitalize).opts do assert(r.out.contains(spec.form), s"${verb.name} --help lacks ${spec.form}")
      for s <- Seq("124", "127", "129", "130/143", "setsid", "Durations") do assert(r.out.contains(s), s"${verb.name} --help lacks $s")
