package asyncpipe.cli

import scala.util.Try

/** Runs the built tool as a real process: the assembly jar (ASYNCPIPE_ASSEMBLY, set by build.mill)
  * on the JDK the tests run on (the build picks JDK 25 for them), with the flags the launcher
  * gives it (native access and opened packages: stages resize their pipes and splice them).
  */
object Launch:
  final case class Outcome(exitCode: Int, out: String, err: String)

  val java: String = os.Path(System.getProperty("java.home")).toString + "/bin/java"
  def assembly: Option[String] = sys.env.get("ASYNCPIPE_ASSEMBLY").filter(p => os.exists(os.Path(p)))

  private def jar: String = assembly.getOrElse(sys.error("ASYNCPIPE_ASSEMBLY is not set or missing: run the tests through ./mill"))

  def command(args: String*): Seq[String] = Seq(java) ++ runtimeFlags ++ Seq("-cp", jar, "asyncpipe.cli.Main") ++ args

  /** The tool as a user who skips the launcher starts it: `java -jar` with no flag at all (what
    * the launcher's flags grant must then come from the jar's manifest).
    */
  def bareCommand(args: String*): Seq[String] = Seq(java, "-jar", jar) ++ args

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

  /** Sends SIG`name` (`INT`, `TERM`, `KILL`, ...) to the processes `pids` with kill(1). Fails the
    * test first, saying why, if this JVM's children start with that signal ignored: they would keep
    * ignoring it (a stage honours an ignored signal, as `nohup` asks), and the test would only
    * time out waiting for an exit.
    */
  def signal(name: String, pids: Long*)(using munit.Location): Unit =
    assertDeliverable(name)
    val r = os.proc(Seq("kill", s"-$name") ++ pids.map(_.toString)).call(check = false, stderr = os.Pipe)
    munit.Assertions.assertEquals(r.exitCode, 0, s"kill -$name ${pids.mkString(" ")}: ${r.err.text()}")

  /** Fails the test, saying why and what to do, if this JVM's children start with SIG`name` ignored. */
  def assertDeliverable(name: String)(using munit.Location): Unit =
    if ignoredSignals.contains(name) then
      munit.Assertions.fail(
        s"the tests' JVM starts its children with SIG$name ignored (SigIgn in /proc/self/status), and they would " +
          s"keep ignoring it: start the tests from a shell that does not ignore it, e.g. " +
          "`./mill shutdown; env --default-signal=INT,HUP,TERM ./mill test` (a Mill daemon passes on the " +
          "signals ignored where it was started, as a command started with `&` in a script is)"
      )

  /** The signals, of those the tests send, that this JVM's children start with ignored: what
    * /proc/self/status's SigIgn mask says (a JVM started with a signal ignored leaves it so).
    */
  lazy val ignoredSignals: Set[String] =
    val line = Try(os.read.lines(os.Path("/proc/self/status")).find(_.startsWith("SigIgn:"))).toOption.flatten
    val mask = line.flatMap(l => Try(_root_.java.lang.Long.parseUnsignedLong(l.stripPrefix("SigIgn:").trim, 16)).toOption).getOrElse(0L)
    SignalNumbers.collect { case (name, n) if (mask & (1L << (n - 1))) != 0 => name }.toSet

  private val SignalNumbers = Map("HUP" -> 1, "INT" -> 2, "QUIT" -> 3, "PIPE" -> 13, "TERM" -> 15)
