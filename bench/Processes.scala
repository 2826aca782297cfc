package asyncpipe.bench

import asyncpipe.cli.BuildInfo
import java.lang.management.ManagementFactory
import java.nio.charset.StandardCharsets
import java.nio.file.Path
import scala.jdk.CollectionConverters.*

/** Starting `asyncpipe` processes from a suite as users run them: this JVM's java and class path,
  * with the launcher's flags (project.scala's stage-jvm-flags) and this JVM's own options, such as
  * the installed launcher's AOT cache; agents and this JVM's JIT and GC choices are left out.
  */
private[bench] object Processes:
  /** The command line of an `asyncpipe` process, as sh words. */
  lazy val asyncpipe: String = command(stageOptions ++ BuildInfo.stageJvmFlags)

  /** This JVM's options less agents and its JIT and GC choices. */
  private def stageOptions: Seq[String] = ownOptions.filterNot(a =>
    a.startsWith("-agentlib") || a.startsWith("-javaagent") || a.startsWith("-XX:TieredStopAtLevel") || a.startsWith("-XX:+Use") && a.endsWith("GC"))

  /** `asyncpipe` as the launcher runs a command line with a `kafka:` address: the AOT cache that
    * holds the Kafka client's classes too (install.sh's `NAME.kafka.aot` beside `NAME.aot`), where
    * this JVM runs with an installed cache.
    */
  lazy val asyncpipeKafka: String = command(stageOptions.map(kafkaCache) ++ BuildInfo.stageJvmFlags)

  private def kafkaCache(option: String): String = option match
    case s"-XX:AOTCache=$file.aot" if java.nio.file.Files.isRegularFile(Path.of(s"$file.kafka.aot")) => s"-XX:AOTCache=$file.kafka.aot"
    case other => other

  /** `asyncpipe` as the launcher runs a command line with a TLS address: the JDK's JIT and GC
    * (C2's AES-GCM intrinsics) with project.scala's tls-jvm-flags, none of the stage flags.
    */
  lazy val asyncpipeTls: String =
    command(ownOptions.filterNot(a => a.startsWith("-agentlib") || a.startsWith("-javaagent")) ++ BuildInfo.tlsJvmFlags)

  /** This JVM's own options, as it was started with them. */
  def ownOptions: Seq[String] = ManagementFactory.getRuntimeMXBean.getInputArguments.asScala.toSeq

  /** This JVM's java and class path running `asyncpipe.cli.Main` with `jvmOptions`, as sh words. */
  def command(jvmOptions: Seq[String]): String =
    val java = Path.of(System.getProperty("java.home"), "bin", "java").toString
    (Seq(java) ++ jvmOptions ++ Seq("-cp", System.getProperty("java.class.path"), "asyncpipe.cli.Main")).map(q).mkString(" ")

  /** Milliseconds of each of `count` round trips through `p`: "line I" written on its stdin, and
    * read back as a line of its stdout (`what` names `p` when the echo differs).
    */
  def lineRoundTrips(p: Process, count: Int, what: String): IndexedSeq[Double] =
    val in = p.getOutputStream
    val reader = java.io.BufferedReader(java.io.InputStreamReader(p.getInputStream, StandardCharsets.UTF_8))
    (0 until count).map { i =>
      val t0 = System.nanoTime()
      in.write(s"line $i\n".getBytes(StandardCharsets.UTF_8))
      in.flush()
      val got = reader.readLine()
      if got != s"line $i" then throw IllegalStateException(s"$what echoed '$got' for 'line $i'")
      (System.nanoTime() - t0) / 1e6
    }

  /** `asyncpipe ARGS...` run by sh, as a ProcessBuilder command. */
  def asyncpipeArgs(args: String*): Seq[String] = Seq("sh", "-c", (asyncpipe +: args.map(q)).mkString(" "))

  /** Whether a program of that name is on PATH. */
  def onPath(name: String): Boolean =
    Option(System.getenv("PATH")).getOrElse("").split(':').exists(d => java.nio.file.Files.isExecutable(Path.of(if d.isEmpty then "." else d, name)))

  /** Single-quoted for sh. */
  def q(s: Any): String = "'" + s.toString.replace("'", "'\\''") + "'"

  /** Runs `command` with sh, its stdout discarded; fails the suite on a non-zero status, with its stderr. */
  def shell(command: String): Unit =
    val p = ProcessBuilder("sh", "-c", command).redirectOutput(ProcessBuilder.Redirect.DISCARD).start()
    val err = String(p.getErrorStream.readAllBytes(), StandardCharsets.UTF_8)
    val status = p.waitFor()
    if status != 0 then throw IllegalStateException(s"'$command' exited $status: ${err.take(2000)}")
