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
