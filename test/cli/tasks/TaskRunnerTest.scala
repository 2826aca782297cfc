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
