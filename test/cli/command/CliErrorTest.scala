package asyncpipe.cli.command

class CliErrorTest extends munit.FunSuite:
  test("usage errors exit 2 and name the token, the rule and the expected form"):
    val e = CliError.BadToken(Some("every"), "10q", "a duration is a number with ms, s, m or h", "asyncpipe every DURATION")
    assertEquals(e.exitCode, ExitCode.Usage)
    assertEquals(
      e.render,
      """asyncpipe every: bad value '10q': a duration is a number with ms, s, m or h
        |  expected: asyncpipe every DURATION
        |  (see 'asyncpipe every --help')""".stripMargin
    )

  test("an unknown verb suggests the nearest verb when it is a likely typo"):
    val e = CliError.UnknownVerb("mxu", CliError.suggest("mxu", Seq("mux", "run", "every")))
    assert(e.render.startsWith("asyncpipe: unknown verb or address 'mxu'; did you mean 'mux'?\n"), e.render)
    assertEquals(e.exitCode, ExitCode.Usage)

  test("no suggestion for a token far from every verb"):
    assertEquals(CliError.suggest("frobnicate", Seq("mux", "run", "every", "retry", "repeat", "bench")), None)
    assertEquals(CliError.suggest("retyr", Seq("mux", "retry", "repeat")), Some("retry"))

  test("runtime errors exit 1 with the subject and the reason"):
    val e = CliError.Runtime("file:/nope", "No such file or directory")
    assertEquals(e.exitCode, ExitCode.Runtime)
    assertEquals(e.render, "asyncpipe: file:/nope: No such file or directory")

  test("a closed downstream is a quiet 141"):
    assertEquals(CliError.DownstreamGone.exitCode, ExitCode.ClosedPipe)
    assertEquals(CliError.DownstreamGone.render, "")

  test("missing pieces and unknown options are usage errors naming what is wrong"):
    val missing = CliError.Missing(Some("retry"), "a command after --", "asyncpipe retry -- CMD")
    assert(missing.render.contains("missing a command after --"), missing.render)
    val unknown = CliError.UnknownOption(None, "--frob", "asyncpipe --help")
    assert(unknown.render.contains("unknown option '--frob'"), unknown.render)
    assertEquals(Seq(missing, unknown).map(_.exitCode), Seq(ExitCode.Usage, ExitCode.Usage))
