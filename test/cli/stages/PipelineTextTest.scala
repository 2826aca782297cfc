package asyncpipe.cli.stages

/** [[PipelineText.tokenize]]: stages at unquoted '|', words at unquoted blanks, quotes, and
  * comments from a word-initial '#' to the end of its line.
  */
class PipelineTextTest extends munit.FunSuite:
  private def words(text: String): Vector[Vector[String]] =
    PipelineText.tokenize(text).fold(e => fail(e.render), identity)

  test("stages and words"):
    assertEquals(words("file:a | mux --out file:b | -"), Vector(Vector("file:a"), Vector("mux", "--out", "file:b"), Vector("-")))

  test("a comment runs from a word-initial '#' to the end of its line, whole lines and after a stage"):
    val text =
      """# a whole line, with a ' quote and a | bar
        |file:a          # after the source
        |  | mux         # after a stage: | and "quotes" here are not seen
        |  | file:b""".stripMargin
    assertEquals(words(text), Vector(Vector("file:a"), Vector("mux"), Vector("file:b")))

  test("a '#' inside a word or quoted is part of the word"):
    assertEquals(words("file:log#1 | mux --out 'file:#x' | \"file:#y\""),
      Vector(Vector("file:log#1"), Vector("mux", "--out", "file:#x"), Vector("file:#y")))

  test("a comment at the very end, with no newline after it"):
    assertEquals(words("tick:1s | -   # the end"), Vector(Vector("tick:1s"), Vector("-")))
