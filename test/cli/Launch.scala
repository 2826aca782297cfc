package asyncpipe.cli

/** Runs the built tool as a real process: the assembly jar (ASYNCPIPE_ASSEMBLY, set by build.mill)
  * on the JDK the tests run on (the build picks JDK 25 for them), with the flags the launcher
  * gives it (native access and opened packages: stages resize their pipes and splice them).
  */
object Launch:
  final case class Outcome(exitCode: Int, out: String, err: String)

  val java: String = os.Path(System.getProperty("java.home")).toString + "/bin/java"
  def assembly: Option[String] = sys.env.get("ASYNCPIPE_ASSEMBLY").filter(p => os.exists(os.Path(p)))

  def command(args: String*): Seq[String] =
    val jar = assembly.getOrElse(sys.error("ASYNCPIPE_ASSEMBLY is not set or missing: run the tests through ./mill"))
    Seq(java) ++ runtimeFlags ++ Seq("-cp", jar, "asyncpipe.cli.Main") ++ args

  /** The flags of project.scala's `//> using javaOpt` lines, which the launcher gives every run
    * and the build gives this test JVM (read from project.scala, the one place they are written).
    */
  lazy val runtimeFlags: Seq[String] =
    val root = os.Path(sys.env.getOrElse("ASYNCPIPE_ROOT", sys.error("ASYNCPIPE_ROOT is not set: run the tests through ./mill")))
    val directive = """^//> using javaOpt (.+)$""".r
    os.read.lines(root / "project.scala").collect { case directive(flag) => flag.trim }

  def apply(args: String*): Outcome =
    val r = os.proc(command(args*)).call(check = false, stdin = os.Pipe, stderr = os.Pipe)
    Outcome(r.exitCode, r.out.text(), r.err.text())
