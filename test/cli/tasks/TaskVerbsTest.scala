package asyncpipe.cli.tasks

import asyncpipe.cli.*

import asyncpipe.cli.command.*

import asyncpipe.async.Watchdog
import java.util.concurrent.{LinkedBlockingQueue, TimeUnit}
import scala.concurrent.duration.{Duration, FiniteDuration}
import munit.Location

/** `every`, `retry` and `repeat` end to end: the built tool runs real commands (sh, seq, sleep,
  * date), and the tests read what they leave in files, on stdout and in the attempt log. Ordering
  * comes from marker files and log lines, never from sleeping in the test; timing is checked with
  * generous lower bounds only (the drift target is an opt-in test: ASYNCPIPE_LONG_TESTS=1).
  */
class TaskVerbsTest extends munit.FunSuite, Watchdog:
  override def watchdog: FiniteDuration = Duration(90, TimeUnit.SECONDS)

  /** A bound for waits that include starting a JVM on a busy machine. */
  private val Startup = 30_000L

  private val dir = FunFixture[os.Path](_ => os.temp.dir(prefix = "asyncpipe-tasks"), os.remove.all(_))

  private final case class Ran(status: Int, out: String, err: String, millis: Long)

  /** Runs the tool to its end in `cwd`. */
  private def run(cwd: os.Path, args: String*): Ran =
    val t0 = System.nanoTime()
    val r = os.proc(Launch.command(args*)).call(cwd = cwd, check = false, stdin = os.Pipe, stderr = os.Pipe, timeout = 60_000)
    Ran(r.exitCode, r.out.text(), r.err.text(), (System.nanoTime() - t0) / 1_000_000)

  /** The tool running in the background, its stderr read line by line as it comes. */
  private final class Running(cwd: os.Path, args: String*):
    private val process = ProcessBuilder(Launch.command(args*)*)
      .directory(cwd.toIO)
      .redirectInput(ProcessBuilder.Redirect.from(java.io.File("/dev/null")))
      .redirectOutput(ProcessBuilder.Redirect.DISCARD)
      .start()
    private val lines = LinkedBlockingQueue[String]()
    private val all = StringBuffer()
    private val reader = Thread.ofPlatform().daemon().start { () =>
      val in = java.io.BufferedReader(java.io.InputStreamReader(process.getErrorStream))
      Iterator.continually(in.readLine()).takeWhile(_ != null).foreach { l => all.append(l).append('\n'); lines.add(l) }
    }

    /** Waits for a line of stderr holding `text`. */
    def awaitErr(text: String)(using Location): Unit =
      val deadline = System.nanoTime() + Startup * 1_000_000
      var found = false
      while !found do
        val line = lines.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS)
        if line == null then fail(s"no line with [$text] on stderr within $Startup ms; stderr so far:\n$all")
        found = line.contains(text)

    def signal(name: String)(using Location): Unit = Launch.signal(name, process.pid)

    /** Waits at most `millis` for the end; the exit status. */
    def awaitExit(millis: Long = Startup)(using Location): Int =
      if !process.waitFor(millis, TimeUnit.MILLISECONDS) then
        process.destroyForcibly()
        fail(s"asyncpipe ${args.mkString(" ")} still running after $millis ms; stderr:\n$all")
      reader.join(Startup)
      process.exitValue

    def err: String = all.toString

  private def lines(file: os.Path): Vector[String] = if os.exists(file) then os.read.lines(file).toVector else Vector.empty

  /** Start times (ms) that a command wrote with `date +%s%N`. */
  private def times(file: os.Path): Vector[Long] = lines(file).map(_.trim.toLong / 1_000_000)
  private def gaps(ts: Vector[Long]): Vector[Long] = ts.zip(ts.drop(1)).map((a, b) => b - a)

  /** Whether process `pid` has ended (a zombie waiting for a parent that never reaps counts). */
  private def gone(pid: Long): Boolean =
    val stat = os.Path(s"/proc/$pid/stat")
    !os.exists(stat) || scala.util.Try(os.read(stat)).toOption.forall(s => s.substring(s.lastIndexOf(')') + 2).startsWith("Z"))

  private def sh(script: String): Seq[String] = Seq("--", "sh", "-c", script)

  // ---------------------------------------------------------------------------------------------
  // every

  dir.test("every 100ms --count 5 runs the command 5 times on a 100 ms grid and exits 0"):
    d =>
      val r = run(d, ("every" +: "100ms" +: "--count" +: "5" +: sh(s"date +%s%N >> ${d / "t"}"))*)
      assertEquals((r.status, r.out, r.err), (0, "", ""), "a quiet run: no output of its own")
      val ts = times(d / "t")
      assertEquals(ts.size, 5, "runs")
      // Each time is taken in the command, after a start-up that varies with the machine's load:
      // run k starts on the grid, (k-1) x 100 ms after run 1 less run 1's own start-up (< 100 ms).
      for (t, k) <- ts.zipWithIndex.drop(1) do
        assert(t - ts.head >= k * 100 - 100, s"run ${k + 1} started ${t - ts.head} ms after run 1 on a 100 ms grid: ${gaps(ts)}")
      assert(ts.last - ts.head >= 300, s"5 runs on a 100 ms grid spanned ${ts.last - ts.head} ms")

  dir.test("every never overlaps a command slower than its period: the ticks in between are skipped and counted"):
    d =>
      val log = d / "log"
      val r = run(d, ("every" +: "100ms" +: "--count" +: "3" +: "-v" +: sh(s"echo start >> $log; date +%s%N >> ${d / "t"}; sleep 0.3; echo end >> $log"))*)
      assertEquals(r.status, 0, r.err)
      assertEquals(lines(log), Vector("start", "end", "start", "end", "start", "end"), "runs overlapped")
      for g <- gaps(times(d / "t")) do assert(g >= 300, s"a run started $g ms after the last, before it could have ended")
      assert(raw"run 2 after \d+ms \(\d+ ticks? skipped\)".r.findFirstIn(r.err).isDefined, s"no skipped ticks in the log:\n${r.err}")
      assert(r.err.contains("asyncpipe every: 3 runs, 0 failed, "), r.err)

  dir.test("every --overlap allow starts a run alongside the one still going, and waits for all before it exits"):
    d =>
      val log = d / "log"
      val r = run(d, ("every" +: "100ms" +: "--count" +: "3" +: "--overlap" +: "allow" +: sh(s"echo start >> $log; sleep 0.5; echo end >> $log"))*)
      assertEquals(r.status, 0, r.err)
      assert(lines(log).take(2) == Vector("start", "start"), s"the second run waited for the first: ${lines(log)}")
      assertEquals(lines(log).count(_ == "end"), 3, "every run ended before asyncpipe exited")

  dir.test("every --overlap wait runs once as soon as an overrunning run ends, then keeps to the grid"):
    d =>
      val r = run(d, ("every" +: "100ms" +: "--count" +: "3" +: "--overlap" +: "wait" +: "-v" +: sh(s"test -e ${d / "slow"} || { touch ${d / "slow"}; sleep 0.25; }"))*)
      assertEquals(r.status, 0, r.err)
      assert(raw"run 2 after 0ms \(\d+ ticks? skipped\)".r.findFirstIn(r.err).isDefined, s"run 2 was not started at once:\n${r.err}")

  dir.test("every goes on after a failed run, and exits with the status of the last failed one"):
    d =>
      val f = d / "runs"
      val r = run(d, ("every" +: "20ms" +: "--count" +: "3" +: sh(s"echo x >> $f; test $$(wc -l < $f) -ne 2 || exit 9"))*)
      assertEquals(r.status, 9, r.err)
      assertEquals(lines(f).size, 3)

  // ---------------------------------------------------------------------------------------------
  // the command's output

  dir.test("the command's stdout flows on as lines; a last line without newline is kept, and completed when more follows"):
    d =>
      val r = run(d, "every", "20ms", "--count", "3", "--", "printf", "a\\nb")
      assertEquals((r.status, r.out), (0, "a\nb\na\nb\na\nb"))

  dir.test("two commands running at once never tear each other's lines"):
    d =>
      // seq writes in blocks that end inside a line; the pause makes the runs overlap.
      val r = run(d, ("every" +: "20ms" +: "--count" +: "3" +: "--overlap" +: "allow" +: sh("seq 1 40000; sleep 0.2; seq 40001 80000"))*)
      assertEquals(r.status, 0, r.err)
      val got = r.out.split("\n", -1).toVector
      assertEquals(got.last, "", "the output ends with a newline")
      val counts = got.init.groupMapReduce(identity)(_ => 1)(_ + _)
      val torn = counts.keys.filter(k => k.toIntOption.forall(n => n < 1 || n > 80000)).take(5)
      assert(torn.isEmpty, s"torn lines: ${torn.mkString(", ")}")
      assertEquals((counts.size, counts.values.toSet), (80000, Set(3)), "each line once per run")

  // ---------------------------------------------------------------------------------------------
  // retry and repeat

  dir.test("retry goes on until a marker file appears, and exits 0"):
    d =>
      val attempts = d / "attempts"
      val running = Running(d, ("retry" +: "--backoff" +: "50ms" +: "--factor" +: "1" +: "-v" +: sh(s"echo x >> $attempts; test -e ${d / "marker"}"))*)
      running.awaitErr("attempt 2 after 50ms: exit 1")
      os.write(d / "marker", "")
      assertEquals(running.awaitExit(), 0, running.err)
      assert(lines(attempts).size >= 3, s"${lines(attempts).size} attempts")
      assert(running.err.contains(s"attempt ${lines(attempts).size} after 50ms: exit 0"), running.err)

  dir.test("retry --max-attempts 3 makes 3 attempts in all and exits with the last one's status"):
    d =>
      val f = d / "attempts"
      val r = run(d, ("retry" +: "--max-attempts" +: "3" +: "--backoff" +: "10ms" +: sh(s"echo x >> $f; exit 7"))*)
      assertEquals((r.status, lines(f).size), (7, 3), r.err)

  dir.test("--stop-on ends at once on a listed status; --retry-on retries only the listed ones"):
    d =>
      def attempts(args: String*)(status: Int): (Int, Int) =
        val f = d / s"attempts-${args.mkString}-$status".replace(",", "_")
        val r = run(d, ("retry" +: "--max-attempts" +: "3" +: "--backoff" +: "10ms" +: args) ++ sh(s"echo x >> $f; exit $status")*)
        (r.status, lines(f).size)
      assertEquals(attempts("--stop-on", "3")(3), (3, 1), "--stop-on 3, exit 3")
      assertEquals(attempts("--retry-on", "5")(4), (4, 1), "--retry-on 5, exit 4")
      assertEquals(attempts("--retry-on", "4-5", "--stop-on", "3")(5), (5, 3), "--retry-on 4-5, exit 5")

  dir.test("a deadline: no attempt starts that could not begin in time"):
    d =>
      val f = d / "attempts"
      val r = run(d, ("retry" +: "--backoff" +: "100ms" +: "--factor" +: "10" +: "--deadline" +: "3s" +: "-v" +: sh(s"echo x >> $f; exit 3"))*)
      assertEquals((r.status, lines(f).size), (3, 3), r.err)
      assert(r.err.contains("attempt 4 not started: it would begin after the deadline (in 10s)"), r.err)

  dir.test("repeat --until-failure ends with the first failure; --until-success with the first success"):
    d =>
      val f = d / "runs"
      val failing = run(d, ("repeat" +: "--until-failure" +: sh(s"echo x >> $f; test $$(wc -l < $f) -lt 3"))*)
      assertEquals((failing.status, lines(f).size), (1, 3), failing.err)
      val g = d / "runs2"
      val succeeding = run(d, ("repeat" +: "--until-success" +: "--backoff" +: "10ms" +: sh(s"echo x >> $g; test $$(wc -l < $g) -ge 4"))*)
      assertEquals((succeeding.status, lines(g).size), (0, 4), succeeding.err)

  dir.test("--dry-run prints the delays that a run with the same --seed then uses"):
    d =>
      val options = Seq("--seed", "42", "--jitter", "full", "--backoff", "40ms", "--factor", "2", "--max-attempts", "5")
      val delays = raw"attempt (\d+) after (\d+(?:ms|s))".r
      val dry = run(d, ("retry" +: "--dry-run" +: options :+ "--" :+ "false")*)
      assertEquals(dry.status, 0, dry.err)
      val planned = delays.findAllMatchIn(dry.out).map(m => m.group(1) -> m.group(2)).toList
      assertEquals(planned.map(_._1), List("2", "3", "4", "5"), s"the dry run:\n${dry.out}")
      val real = run(d, ("retry" +: "-v" +: options :+ "--" :+ "false")*)
      assertEquals(real.status, 1, real.err)
      assertEquals(delays.findAllMatchIn(real.err).map(m => m.group(1) -> m.group(2)).toList, planned, s"the attempt log:\n${real.err}")
      assertNotEquals(planned.map(_._2).distinct.size, 1, "full jitter gave equal delays")

  // ---------------------------------------------------------------------------------------------
  // process groups and signals

  dir.test("--timeout kills the command's whole process group, a grandchild included, and the status is 124"):
    d =>
      val pid = d / "pid"
      val r = run(d, ("retry" +: "--max-attempts" +: "1" +: "--timeout" +: "300ms" +: sh(s"sleep 100 & echo $$! > $pid; wait"))*)
      assertEquals(r.status, ExitCode.TimedOut, r.err)
      val grandchild = os.read(pid).trim.toLong
      assert(gone(grandchild), s"the grandchild $grandchild outlived the timeout")
      assert(r.millis < 20_000, s"took ${r.millis} ms")

  dir.test("a group that ignores SIGTERM gets SIGKILL after --kill-after"):
    d =>
      val pid = d / "pid"
      val r = run(d, ("retry" +: "--max-attempts" +: "1" +: "--timeout" +: "200ms" +: "--kill-after" +: "300ms" +: "-v" +:
        sh(s"trap '' TERM; sleep 100 & echo $$! > $pid; wait"))*)
      assertEquals(r.status, ExitCode.TimedOut, r.err)
      assert(gone(os.read(pid).trim.toLong), "the grandchild that ignored SIGTERM outlived the kill")
      val took = raw"exit 124 \(timed out after 200ms\) in (\d+)ms".r.findFirstMatchIn(r.err).map(_.group(1).toLong)
      assert(took.exists(_ >= 490), s"the attempt ended before timeout + kill-after (500 ms): $took\n${r.err}")

  dir.test("what a command leaves running in its group is stopped when it exits"):
    d =>
      val pid = d / "pid"
      val r = run(d, ("retry" +: "--max-attempts" +: "1" +: sh(s"sleep 100 & echo $$! > $pid"))*)
      assertEquals(r.status, 0, r.err)
      assert(gone(os.read(pid).trim.toLong), "the background sleep outlived its attempt")

  dir.test("SIGINT during the backoff wait exits 130 at once, with no further attempt"):
    d =>
      val f = d / "attempts"
      val running = Running(d, ("retry" +: "--backoff" +: "30s" +: "-v" +: sh(s"echo x >> $f; exit 1"))*)
      running.awaitErr("attempt 1: exit 1")
      val t0 = System.nanoTime()
      running.signal("INT")
      assertEquals(running.awaitExit(), ExitCode.Interrupted, running.err)
      val took = (System.nanoTime() - t0) / 1_000_000
      assert(took < 5000, s"exited $took ms after SIGINT")
      assertEquals(lines(f).size, 1)

  dir.test("SIGTERM during a run goes to the command's group first; asyncpipe then exits 143"):
    d =>
      val f = d / "events"
      val running = Running(d, ("retry" +: sh(s"trap 'echo TERM >> $f; exit 9' TERM; echo started >> $f; while :; do sleep 0.05; done"))*)
      asyncpipe.async.Support.eventually("the command to start")(lines(f).contains("started"))
      running.signal("TERM")
      assertEquals(running.awaitExit(), ExitCode.Terminated, running.err)
      assertEquals(lines(f), Vector("started", "TERM"), "the command did not get the SIGTERM")

  // ---------------------------------------------------------------------------------------------
  // README

  dir.test("README: the task runner examples run as the README says"):
    d =>
      val readme = os.read(os.Path(sys.env("ASYNCPIPE_ROOT")) / "README.md")
      def example(line: String): Seq[String] =
        assert(readme.contains(line), s"README.md no longer has: $line")
        line.split(" ").toSeq.tail
      val every = run(d, example("asyncpipe every 200ms --count 3 -- date +%s.%N")*)
      assertEquals((every.status, every.out.linesIterator.size), (0, 3), every.err)
      os.write(d / "ready", "")
      assertEquals(run(d, example("asyncpipe retry --max-attempts 5 --backoff 100ms -- test -e ready")*).status, 0)
      os.write(d / "flaky-test.sh", s"echo x >> ${d / "runs"}; test $$(wc -l < ${d / "runs"}) -lt 4\n", perms = "rwxr-xr-x")
      val flaky = run(d, example("asyncpipe repeat --until-failure --count 20 --timeout 10s -- ./flaky-test.sh")*)
      assertEquals((flaky.status, lines(d / "runs").size), (1, 4), flaky.err)
      // pasted where there is no ./upload.sh yet: the plan all the same, and a note of what a run would do
      val dry = run(d, example("asyncpipe retry --dry-run --seed 7 --jitter full --backoff 1s --max-attempts 5 -- ./upload.sh")*)
      assertEquals(dry.status, 0, dry.err)
      assert(dry.err.contains("note: ./upload.sh: No such file or directory (a real run would exit 127)"), dry.err)
      assert(dry.out.startsWith("attempt 1 at 0ms\nattempt 2 after "), dry.out)
      assertEquals(dry.out.linesIterator.size, 5, dry.out)

  // ---------------------------------------------------------------------------------------------
  // the drift target, opt-in: ASYNCPIPE_LONG_TESTS=1

  dir.test("target: every 100ms --count 50 of a trivial command ends within 5.1 s of its first run's start"):
    d =>
      assume(sys.env.contains("ASYNCPIPE_LONG_TESTS"), "a 5 s timing test: set ASYNCPIPE_LONG_TESTS=1 to run it")
      val first = d / "first"
      val r = run(d, ("every" +: "100ms" +: "--count" +: "50" +: sh(s"test -e $first || date +%s%N > $first"))*)
      val end = System.currentTimeMillis()
      assertEquals(r.status, 0, r.err)
      val span = end - times(first).head
      assert(span <= 5100, s"from the first run's start to the end: $span ms (with the JVM's start: ${r.millis} ms)")
