package asyncpipe.cli

/** The command line's packages import one way (src/cli/package.scala): frames <- system <-
  * command <- (stages, tasks) <- asyncpipe.cli. The modules are the compiler's to enforce
  * (build.mill); the packages inside the cli module are checked here, from the sources.
  */
class ArchitectureTest extends munit.FunSuite:
  private val root = os.Path(sys.env.getOrElse("ASYNCPIPE_ROOT", os.pwd.toString)) / "src" / "cli"
  private val packages = Seq("command", "frames", "system", "stages", "tasks")
  /** The packages each one may use. */
  private val allowed: Map[String, Set[String]] = Map(
    "frames" -> Set(),
    "system" -> Set("frames"),
    "command" -> Set("frames", "system"),
    "stages" -> Set("frames", "system", "command"),
    "tasks" -> Set("frames", "system", "command")
  )
  private val reference = """asyncpipe\.cli\.(command|frames|system|stages|tasks)\b""".r

  test("each package of the command line uses only the packages below it"):
    assume(os.isDir(root), s"no sources at $root")
    val wrong =
      for
        pkg <- packages
        file <- os.list(root / pkg) if file.ext == "scala"
        (line, n) <- os.read.lines(file).zipWithIndex if !line.trim.startsWith("*") && !line.trim.startsWith("//")
        used <- reference.findAllMatchIn(line).map(_.group(1)) if used != pkg && !allowed(pkg)(used)
      yield s"${file.relativeTo(root)}:${n + 1}: $pkg uses $used: $line"
    assert(wrong.isEmpty, wrong.mkString("\n"))

  test("the library sees nothing of the command line"):
    val lib = root / os.up
    val wrong = for
      dir <- Seq(lib / "async", lib / "io") if os.isDir(dir)
      file <- os.walk(dir) if file.ext == "scala"
      (line, n) <- os.read.lines(file).zipWithIndex if line.contains("asyncpipe.cli")
    yield s"${file.relativeTo(lib)}:${n + 1}: $line"
    assert(wrong.isEmpty, wrong.mkString("\n"))
