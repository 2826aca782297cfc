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

  test("--buffer takes a number of messages or a size, made into as many of the largest messages as fit"):
    def buffer(v: String) = StageOptions.parse(Seq("--buffer", v, "-"), None, "SYN", mux = false).map(_.options.buffer)
    assertEquals(buffer("0"), Right(0))
    assertEquals(buffer("100"), Right(100))
    assertEquals(buffer("64M"), Right(64 * 4)) // 256 KiB messages
    assertEquals(buffer("1K"), Right(1), "less than one message: one")
    for bad <- Seq("10x", "-1", "1.5M", "2000000") do
      val e = buffer(bad).left.toOption.map(_.render).getOrElse(fail(s"$bad was taken"))
      assert(e.contains(s"'$bad'") && e.contains("--buffer"), e)
