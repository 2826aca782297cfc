package asyncpipe.cli.tasks

import asyncpipe.cli.Main
import asyncpipe.cli.command.*
import asyncpipe.cli.system.OwnedOutput
import java.io.{ByteArrayOutputStream, PrintStream}
import java.nio.channels.Channels

/** What the task runner says before it runs anything: a command not found, and the shell hint. */
class TaskRunnerTest extends munit.FunSuite:
  private def run(args: String*): (Int, String) =
    val err = ByteArrayOutputStream()
    val status = Main.run(args, Io(OwnedOutput(Channels.newChannel(ByteArrayOutputStream())), PrintStream(err, true, "UTF-8")))
    (status, err.toString("UTF-8"))

  test("a quoted shell pipeline after -- is not found (127), and the message says how to run it through sh -c"):
    val (status, err) = run("retry", "--max-attempts", "1", "--", "curl -s x | jq .")
    assertEquals(status, ExitCode.NotFound, err)
    assert(err.contains("curl -s x | jq .: command not found; commands run without a shell: for a shell command line, sh -c 'curl -s x | jq .'"), err)

  test("a plain name not found gets no shell hint; quotes inside are kept for sh"):
    val (status, err) = run("every", "1s", "--count", "1", "--", "no-such-command-here")
    assertEquals((status, err.trim), (ExitCode.NotFound, "asyncpipe every: no-such-command-here: command not found"))
    assertEquals(TaskRunner.shellHint(Seq("echo 'a' > x")), "; commands run without a shell: for a shell command line, sh -c 'echo '\\''a'\\'' > x'")
    assertEquals(TaskRunner.shellHint(Seq("ls", "a b")), "")

  test("-v lines begin with the wall-clock time, and a long wait says what it waits for and until when"):
    assume(asyncpipe.cli.Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")
    val r = os.proc(asyncpipe.cli.Launch.command("retry", "-v", "--max-attempts", "2", "--backoff", "1s", "--", "false"))
      .call(stdin = "", stderr = os.Pipe, check = false, timeout = 20_000)
    assertEquals(r.exitCode, 1, r.err.text())
    val lines = r.err.lines()
    val stamped = """\d\d:\d\d:\d\d\.\d\d\d asyncpipe retry: .*""".r
    assert(lines.nonEmpty && lines.forall(stamped.matches), lines.mkString("\n"))
    assert(lines.exists(_.matches(""".* waiting 1s before attempt 2 \(until \d\d:\d\d:\d\d\.\d\d\d\)""")), lines.mkString("\n"))

  /** A command that fails twice, then succeeds, saying which attempt it is (its count in `file`). */
  private def flaky(file: os.Path): Seq[String] =
    Seq("sh", "-c", s"""n=$$(cat '$file' 2>/dev/null || echo 0); n=$$((n+1)); echo $$n > '$file'; echo "attempt $$n"; [ $$n -ge 3 ]""")

  private def launched(args: Seq[String], stdin: os.Source = ""): os.CommandResult =
    assume(asyncpipe.cli.Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")
    os.proc(asyncpipe.cli.Launch.command(args*)).call(stdin = stdin, stderr = os.Pipe, check = false, timeout = 60_000)

  /** [[flaky]] that also copies its stdin to its stdout, and fails unless that was `expected`. */
  private def flakyReader(file: os.Path, expected: String): Seq[String] =
    Seq("sh", "-c", s"""n=$$(cat '$file' 2>/dev/null || echo 0); n=$$((n+1)); echo $$n > '$file'; got=$$(cat); echo "attempt $$n read [$$got]"; [ $$n -ge 3 ] && [ "$$got" = '$expected' ]""")

  test("--stdin replay gives every attempt all of asyncpipe's stdin; by default (none) each reads /dev/null"):
    val dir = os.temp.dir(prefix = "asyncpipe-stdin-")
    try
      val input = "line one\nline two"
      val replay = launched(Seq("retry", "--stdin", "replay", "--backoff", "10ms", "--") ++ flakyReader(dir / "a", input), stdin = input)
      assertEquals((replay.exitCode, replay.out.text()),
        (0, s"attempt 1 read [$input]\nattempt 2 read [$input]\nattempt 3 read [$input]\n"), replay.err.text())
      val none = launched(Seq("retry", "--max-attempts", "3", "--backoff", "10ms", "--") ++ flakyReader(dir / "b", input), stdin = input)
      assertEquals((none.exitCode, none.out.text()), (1, "attempt 1 read []\nattempt 2 read []\nattempt 3 read []\n"), none.err.text())
      // with --output success: only the attempt that succeeded, having read it all
      val both = launched(Seq("retry", "--stdin", "replay", "--output", "success", "--backoff", "10ms", "--") ++ flakyReader(dir / "c", input), stdin = input)
      assertEquals((both.exitCode, both.out.text()), (0, s"attempt 3 read [$input]\n"), both.err.text())
    finally os.remove.all(dir)

  test("--stdin replay: a command that reads none of it still ends; more than 64 MiB is an error naming the bound"):
    val ignored = launched(Seq("every", "10ms", "--count", "2", "--stdin", "replay", "--", "true"), stdin = "x" * 1_000_000)
    assertEquals(ignored.exitCode, 0, ignored.err.text())
    val big = launched(Seq("retry", "--stdin", "replay", "--", "true"), stdin = os.proc("head", "-c", "70000000", "/dev/zero").spawn().stdout)
    assertEquals(big.exitCode, ExitCode.Runtime, big.err.text())
    assert(big.err.text().contains("stdin is more than 64 MiB") && big.err.text().contains("--stdin replay"), big.err.text())

  test("retry --output success passes on only the attempt that succeeded; by default (--output all), every attempt's"):
    val dir = os.temp.dir(prefix = "asyncpipe-output-")
    try
      val success = launched(Seq("retry", "--output", "success", "--backoff", "10ms", "--") ++ flaky(dir / "a"))
      assertEquals((success.exitCode, success.out.text()), (0, "attempt 3\n"), success.err.text())
      val all = launched(Seq("retry", "--backoff", "10ms", "--") ++ flaky(dir / "b"))
      assertEquals((all.exitCode, all.out.text()), (0, "attempt 1\nattempt 2\nattempt 3\n"), all.err.text())
      // every passes every run on by default; with success, only those that exit 0
      val every = launched(Seq("every", "10ms", "--count", "3", "--output", "success", "--") ++ flaky(dir / "c"))
      assertEquals((every.exitCode, every.out.text()), (1, "attempt 3\n"), every.err.text())
      // no attempt succeeded: nothing goes on, and the status is the last attempt's
      val none = launched(Seq("retry", "--output", "success", "--max-attempts", "2", "--backoff", "10ms", "--") ++ flaky(dir / "d"))
      assertEquals((none.exitCode, none.out.text()), (1, ""), none.err.text())
    finally os.remove.all(dir)

  test("--output success holds at most 64 MiB of a run: more is an error naming the bound, not a silent loss"):
    val r = launched(Seq("retry", "--output", "success", "--max-attempts", "1", "--", "sh", "-c", "yes | head -c 70000000"))
    assertEquals(r.exitCode, ExitCode.Runtime, r.err.text())
    assert(r.err.text().contains("more than 64 MiB") && r.err.text().contains("--output all"), r.err.text())
    assertEquals(r.out.text(), "")
