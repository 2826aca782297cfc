package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.frames.*

class StageOptionsTest extends munit.FunSuite:
  test("--frame takes the framings' tokens; a bad one is a usage error that quotes it and shows the form"):
    for f <- Framing.values do
      assertEquals(StageOptions.parse(Seq("--frame", f.token, "-"), None, "SYN", mux = false).map(_.options.frame), Right(f))
    val bad = StageOptions.parse(Seq("--frame", "line", "-"), Some("mux"), "SYN", mux = true)
    assertEquals(bad.map(_ => ()), Left(CliError.BadToken(Some("mux"), "line", "--frame: 'line' is not one of lines, len, nul, raw; did you mean 'lines'?", "--frame lines|len|nul|raw")))
    val text = bad.left.toOption.get.render
    assert(text.contains("'line'") && text.contains("--frame lines|len|nul|raw"), s"rendered as: $text")
