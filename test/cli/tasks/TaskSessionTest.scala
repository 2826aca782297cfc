package asyncpipe.cli.tasks

import asyncpipe.cli.*

import asyncpipe.cli.command.*
import asyncpipe.cli.stages.*

import asyncpipe.async.Watchdog
import java.io.File
import java.lang.ProcessBuilder.Redirect
import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.TimeUnit
import scala.concurrent.duration.{Duration, FiniteDuration}
import scala.util.{Random, Try}
import munit.Location

/** The task verbs and process trees: nothing a run started is left running, whatever process group
  * it moved to in the run's session (`set -m`, `timeout`), under `--timeout`, at the end of the
  * run, and under a forwarded SIGINT, SIGTERM or SIGHUP; and an idle task verb whose reader left
  * ends (141) and stops what it runs.
  *
  * Each command sleeps for a duration of its own (a marker no other process has as an argument),
  * and the test looks for processes with that argument in /proc, with a bounded wait, both to
  * know that the command got as far as starting them and to find any left over afterwards
  * (which it then kills: they are its own). No test sleeps to wait for anything.
  */
class TaskSessionTest extends munit.FunSuite, Watchdog:
  import StageE2ETest.{Env, Running, exitOf, kill}
  import TaskSessionTest.*

  override def watchdog: FiniteDuration = Duration(120, TimeUnit.SECONDS)

  override def beforeAll(): Unit =
    assume(Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")

  private val e2e = FunFixture[Env](_ => Env(os.temp.dir(prefix = "asyncpipe-session-")), _.close())

  /** The tool with `args` in the background: stdin /dev/null, stdout and stderr in files. */
  private def start(env: Env, args: String*): Running = env.start(args, stdin = Redirect.from(File("/dev/null")))

  // -----------------------------------------------------------------------------------------------
  // --timeout

  e2e.test("--timeout reaches the group `timeout` makes: `sh -c 'timeout 100 sleep U'` exits 124, nothing left"): env =>
    val u = marker()
    val r = start(env, "retry", "--max-attempts", "1", "--timeout", "1s", "--", "sh", "-c", s"timeout 100 sleep $u")
    awaitRunning(u)
    assertEquals(r.exit(Startup), ExitCode.TimedOut, r.err)
    assertNoneLeft(u)

  e2e.test("--timeout reaches the jobs of `bash -c 'set -m; ...'`, each in a group of its own: 124, nothing left"): env =>
    val (u1, u2) = (marker(), marker())
    val r = start(env, "retry", "--max-attempts", "1", "--timeout", "1s", "--", "bash", "-c", s"set -m; sleep $u1 & sleep $u2 & wait")
    awaitRunning(u1, u2)
    assertEquals(r.exit(Startup), ExitCode.TimedOut, r.err)
    assertNoneLeft(u1, u2)

  // -----------------------------------------------------------------------------------------------
  // a forwarded stop signal

  for (signal, status) <- Seq("TERM" -> ExitCode.Terminated, "INT" -> ExitCode.Interrupted, "HUP" -> ExitCode.HungUp) do
    e2e.test(s"SIG$signal reaches the jobs of `bash -c 'set -m; ...'` too: exit $status, nothing left"): env =>
      val (u1, u2) = (marker(), marker())
      val r = start(env, "every", "10s", "--", "bash", "-c", s"set -m; sleep $u1 & sleep $u2 & wait")
      awaitRunning(u1, u2)
      kill(signal, r.process.pid)
      assertEquals(r.exit(Startup), status, r.err)
      assertNoneLeft(u1, u2)

  // -----------------------------------------------------------------------------------------------
  // a signal that met the JVM's own handler (one that came before asyncpipe's were in place)

  /** The tool in a JVM whose exit (`System.exit(status)`, as the JVM's signal handler does) begins
    * once `trigger` exists, or at once for `-`.
    */
  private def startExiting(env: Env, status: Int, trigger: String, args: String*): Running =
    val classes = java.nio.file.Path.of(classOf[ExitDuringRun.type].getProtectionDomain.getCodeSource.getLocation.toURI).toString
    val cp = s"${Launch.assembly.get}:$classes"
    env.startCommand(Seq(Launch.java) ++ Launch.runtimeFlags ++ Seq("-cp", cp, "asyncpipe.cli.tasks.ExitDuringRun", status.toString, trigger) ++ args,
      stdin = Redirect.from(File("/dev/null")))

  e2e.test("the JVM's exit during a run (a signal the JVM's handler took) first stops the run's whole session: 143, nothing left"): env =>
    val u = marker()
    val started = env.dir / s"started-$u"
    val r = startExiting(env, ExitCode.Terminated, started.toString,
      "every", "10s", "--", "bash", "-c", s"set -m; sleep $u & touch $started; wait")
    assertEquals(r.exit(Startup), ExitCode.Terminated, r.err)
    assert(!r.err.contains("Exception"), r.err)
    assertNoneLeft(u)

  e2e.test("the JVM's exit beginning as the tool starts: no command is left running, 130, no stack trace"): env =>
    for _ <- 1 to 3 do
      val u = marker()
      val r = startExiting(env, ExitCode.Interrupted, "-", "every", "10s", "--", "sleep", u)
      assertEquals(r.exit(Startup), ExitCode.Interrupted, r.err)
      assert(!r.err.contains("Exception"), r.err)
      assertNoneLeft(u)

  e2e.test("a second SIGTERM kills the whole session at once, what ignores SIGTERM in another group too: 143, nothing left"): env =>
    val u = marker()
    // bash and its job ignore SIGTERM, and the grace before SIGKILL is long: only the second
    // signal's kill can end them within the test's bounds.
    val r = start(env, "every", "10s", "--kill-after", "60s", "-v", "--", "bash", "-c", s"trap '' TERM; set -m; sleep $u & wait")
    awaitRunning(u)
    kill("TERM", r.process.pid)
    waitFor("the first SIGTERM to be taken", Startup)(r.err.contains("SIGTERM: stopping"))
    kill("TERM", r.process.pid)
    assertEquals(r.exit(PromptEnd), ExitCode.Terminated, r.err)
    assertNoneLeft(u)

  e2e.test("SIGHUP is forwarded to the running command as SIGHUP: exit 129, the command's trap ran, nothing left"): env =>
    val u = marker()
    val r = start(env, "every", "10s", "--", "sh", "-c", s"trap 'echo got-hup >&2; exit 9' HUP; sleep $u & wait")
    awaitRunning(u)
    kill("HUP", r.process.pid)
    assertEquals(r.exit(Startup), ExitCode.HungUp, r.err)
    assert(r.err.contains("got-hup"), s"the command did not get SIGHUP; stderr:\n${r.err}")
    assertNoneLeft(u)

  // -----------------------------------------------------------------------------------------------
  // the end of a run

  /** Scripts for `bash -c` that start `sleep U` in a new group and exit at once, writing their
    * own pid (= their group) and the new group's id. `timeout` makes its group itself, after the
    * fork: the script waits for that (a loop on /proc, which ends as soon as it has).
    */
  private val leavers = Seq(
    "set -m" -> ((u: String) => s"set -m; sleep $u & echo $$$$ $$(cut -d' ' -f5 /proc/$$!/stat)"),
    "timeout" -> ((u: String) =>
      s"timeout 100 sleep $u & while [ $$(cut -d' ' -f5 /proc/$$!/stat) = $$$$ ]; do :; done; echo $$$$ $$(cut -d' ' -f5 /proc/$$!/stat)")
  )

  for (form, script) <- leavers do
    e2e.test(s"what a command leaves running in another group of its session ($form) is stopped when it exits"): env =>
      val u = marker()
      val r = start(env, "retry", "--max-attempts", "1", "--", "bash", "-c", script(u))
      assertEquals(r.exit(Startup), 0, r.err)
      // The command wrote its own pid (its group) and the group of what it left: not the same.
      val Array(group, left) = r.out.trim.split(' ').map(_.toLong)
      assertNotEquals(left, group, "the leftover was in the command's own group: not what this test is about")
      assertNoneLeft(u)

  // -----------------------------------------------------------------------------------------------
  // the reader of stdout goes away while nothing is written

  private val idle = Seq(
    "between runs" -> ((_: String) => Seq("echo", "x")),
    "while a run writes nothing" -> ((u: String) => Seq("sh", "-c", s"echo x; exec sleep $u"))
  )

  for (when, command) <- idle do
    e2e.test(s"every 1h ... | head -n 1: exits 141 quietly soon after head leaves ($when), nothing left"): env =>
      val u = marker()
      val errFile = env.dir / "err"
      val headOut = env.dir / "head"
      val pipeline = ProcessBuilder.startPipeline(java.util.List.of(
        ProcessBuilder((Launch.command("every", "1h", "--") ++ command(u))*)
          .redirectInput(Redirect.from(File("/dev/null"))).redirectError(errFile.toIO),
        ProcessBuilder("head", "-n", "1").redirectOutput(headOut.toIO).redirectError(Redirect.INHERIT)
      ))
      val (tool, head) = (pipeline.get(0), pipeline.get(1))
      env.adopt(tool, head)
      assertEquals(exitOf(head, "head", Startup), 0)
      // About 1.5 s: a second of quiet, the first poll (the foreign call's set-up: seconds of a
      // 2-core machine under a load of 50), SIGTERM to the running command. The code before
      // waited for the next run, an hour later.
      val status = exitOf(tool, "asyncpipe every 1h after head left", PromptEnd)
      assertEquals(status, ExitCode.ClosedPipe, os.read(errFile))
      assertEquals(os.read(errFile), "", "a closed reader ends the verb quietly")
      assertEquals(os.read(headOut), "x\n")
      assertNoneLeft(u)

object TaskSessionTest:
  /** A bound for waits that include starting a JVM on a busy machine. */
  val Startup: Long = 30_000
  /** A bound for an end that comes within about 1.5 s on a machine that is not loaded (an idle
    * verb whose reader left, a second signal), generous for a 2-core machine under a load of 50.
    */
  val PromptEnd: Long = 15_000

  private val markers = java.util.concurrent.atomic.AtomicLong(1_000_000L + Random.nextLong(1_000_000_000L))

  /** A sleep duration (in seconds) that no other process has as an argument: a marker. */
  def marker(): String = markers.incrementAndGet().toString

  /** Each process now running with one of `markers` as a whole argument (zombies count as gone):
    * its pid and a description (command line, process group and session).
    */
  def holding(markers: Seq[String]): Seq[(Long, String)] =
    val pids = Option(File("/proc").list()).map(_.toSeq).getOrElse(Nil).flatMap(_.toLongOption)
    pids.flatMap { pid =>
      val args = Try(String(os.read.bytes(os.Path(s"/proc/$pid/cmdline")), UTF_8).split('\u0000').toSeq).getOrElse(Nil)
      val stat = Try(os.read(os.Path(s"/proc/$pid/stat"))).toOption
      val fields = stat.map(s => s.substring(s.lastIndexOf(')') + 2).split(' ').toSeq) // state ppid pgrp session ...
      if !args.exists(markers.contains) || fields.forall(f => f.head == "Z" || f.head == "X") then None
      else Some(pid -> s"pid $pid (group ${fields.get(2)}, session ${fields.get(3)}): ${args.mkString(" ")}")
    }

  /** Waits until a process with each of `markers` runs (the command got that far), at most
    * [[Startup]]: the wait includes the tool's JVM starting on a busy machine.
    */
  def awaitRunning(markers: String*)(using Location): Unit =
    waitFor(s"processes with ${markers.mkString(", ")} to start", Startup) {
      val found = holding(markers).map(_._2)
      markers.forall(m => found.exists(_.split(' ').contains(m)))
    }

  /** Polls `cond` every millisecond until it holds; fails after `millis`. */
  def waitFor(what: String, millis: Long)(cond: => Boolean)(using Location): Unit =
    val deadline = System.nanoTime() + millis * 1_000_000
    while !cond do
      if System.nanoTime() - deadline > 0 then munit.Assertions.fail(s"timed out after $millis ms waiting for $what")
      java.util.concurrent.locks.LockSupport.parkNanos(1_000_000)

  /** Asserts that no process with any of `markers` is left (after a short bounded wait, for what
    * is being reaped). What is found is killed before the test fails, and named in the failure.
    */
  def assertNoneLeft(markers: String*)(using Location): Unit =
    val deadline = System.nanoTime() + 10_000 * 1_000_000L
    var left = holding(markers)
    while left.nonEmpty && System.nanoTime() - deadline < 0 do
      java.util.concurrent.locks.LockSupport.parkNanos(10_000_000)
      left = holding(markers)
    if left.nonEmpty then
      for (pid, _) <- left do os.proc("kill", "-KILL", pid.toString).call(check = false, stderr = os.Pipe)
      munit.Assertions.fail(s"left running after the run:\n${left.map(_._2).mkString("\n")}")
