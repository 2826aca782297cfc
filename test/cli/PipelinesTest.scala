package asyncpipe.cli

/** Runs every `pipelines/NAME.pipe` with `asyncpipe run FILE` in a fresh directory holding an
  * `in.txt`, and checks what it wrote. A new example needs its check here: the test of a file
  * without one fails, so no example goes untested.
  */
class PipelinesTest extends munit.FunSuite:
  private val root = os.Path(sys.env.getOrElse("ASYNCPIPE_ROOT", os.pwd.toString))
  private val input = (1 to 2000).map(i => s"line $i of the input").mkString("", "\n", "\n")

  /** What each example must leave behind, by file name: (file, expected content or a check). */
  private val checks: Map[String, os.Path => Unit] = Map(
    "ticks-to-two-files.pipe" -> { dir =>
      assertEquals(os.read(dir / "ticks.txt").linesIterator.size, 10)
      assertEquals(os.read(dir / "ticks.log"), os.read(dir / "ticks.txt"), "mux --out and the sink differ")
      val ticks = os.read(dir / "ticks.txt").linesIterator.map(_.toLong).toSeq
      assertEquals(ticks, ticks.sorted, "ticks out of order")
    },
    "copy-file.pipe" -> { dir => assertEquals(os.read(dir / "out.txt"), input) },
    "fan-in.pipe" -> { dir =>
      val lines = os.read(dir / "merged.txt").linesIterator.toSeq
      assertEquals(lines.filter(_.startsWith("line ")), input.linesIterator.toSeq, "the file's lines, in order")
      val ticks = lines.filterNot(_.startsWith("line ")).map(_.toLong)
      assertEquals(ticks.size, 5, lines.filterNot(_.startsWith("line ")).mkString(","))
      assertEquals(ticks, ticks.sorted)
    }
  )

  private val examples = os.list(root / "pipelines").filter(_.ext == "pipe")

  test("there are example pipelines"):
    assert(examples.nonEmpty, s"no *.pipe in ${root / "pipelines"}")

  for example <- os.list(os.Path(sys.env.getOrElse("ASYNCPIPE_ROOT", os.pwd.toString)) / "pipelines").filter(_.ext == "pipe") do
    test(s"pipelines/${example.last} runs and writes what it says"):
      val check = checks.getOrElse(example.last, fail(s"pipelines/${example.last} has no check in PipelinesTest"))
      val dir = os.temp.dir()
      try
        os.write(dir / "in.txt", input)
        val r = os.proc(Launch.command("run", example.toString)).call(cwd = dir, check = false, stdin = os.Pipe, stderr = os.Pipe, timeout = 60_000)
        assertEquals(r.exitCode, 0, r.err.text())
        assertEquals(r.err.text(), "", "stderr of a normal run")
        check(dir)
      finally os.remove.all(dir)
