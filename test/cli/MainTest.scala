package asyncpipe.cli

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*
import asyncpipe.cli.stages.*

import java.io.{ByteArrayOutputStream, PrintStream}
import java.nio.channels.Channels

/** The command line in-process: statuses, and which stream each text goes to. */
class MainTest extends munit.FunSuite:
  final case class Ran(status: Int, out: String, err: String)

  private def run(args: String*): Ran =
    val out = ByteArrayOutputStream()
    val err = ByteArrayOutputStream()
    val status = Main.run(args, Io(OwnedOutput(Channels.newChannel(out)), PrintStream(err, true, "UTF-8")))
    Ran(status, out.toString("UTF-8"), err.toString("UTF-8"))

  test("--version prints the version from project.scala"):
    assertEquals(run("--version"), Ran(0, s"asyncpipe ${BuildInfo.version}\n", ""))
    assert(BuildInfo.version.matches("""\d+\.\d+\.\d+.*"""), BuildInfo.version)

  test("--help lists every verb and every address form, on stdout"):
    val r = run("--help")
    assertEquals((r.status, r.err), (0, ""))
    for v <- Main.verbs if v.listed do assert(r.out.contains(s"\n  ${v.name} "), s"verb ${v.name} missing from help")
    for (form, _) <- Address.forms do assert(r.out.contains(form), s"address $form missing from help")

  test("every verb has its own --help, and 'help VERB' gives the same text"):
    for v <- Main.verbs if v.listed do
      val r = run(v.name, "--help")
      assertEquals(r.status, 0, v.name)
      assert(r.out.startsWith(s"Usage: asyncpipe ${v.name}"), r.out)
      assertEquals(run("help", v.name).out, r.out)

  test("the FROM TO form has its help after an address, with options first or not, and as 'help FROM'"):
    for args <- Seq(Seq("-", "--help"), Seq("--frame", "len", "file:x", "--help"), Seq("help", "-"), Seq("help", "FROM")) do
      val r = run(args*)
      assertEquals(r.status, 0, args.mkString(" "))
      assert(r.out.startsWith("Usage: asyncpipe [OPTIONS] FROM [TO]"), s"${args.mkString(" ")}: ${r.out}")
    assertEquals(run("help", "nope").status, ExitCode.Usage)

  test("every line of every help text fits 80 columns"):
    val texts = run("--help").out +: Main.verbs.map(_.help)
    val long = for text <- texts; line <- text.linesIterator if line.length > 80 yield s"${line.length}: $line"
    assert(long.isEmpty, long.mkString("lines wider than 80 columns:\n", "\n", ""))

  test("--help after -- belongs to the command, not to asyncpipe"):
    assert(Usage.asksForHelp(Seq("1s", "--help")))
    assert(!Usage.asksForHelp(Seq("1s", "--", "grep", "--help")))
    assertEquals(Address.schemes, Set("file", "udp", "tcp", "tcp-listen", "unix", "unix-listen", "tls", "tls-listen", "kafka", "tick", "null"))

  test("an unknown verb is a usage error that names it"):
    val r = run("frobnicate", "x")
    assertEquals(r.status, ExitCode.Usage)
    assertEquals(r.out, "")
    assert(r.err.contains("'frobnicate'"), r.err)

  test("an unknown top-level option is a usage error that names it"):
    val r = run("--frob")
    assertEquals(r.status, ExitCode.Usage)
    assert(r.err.contains("unknown option '--frob'"), r.err)

  test("an unknown address scheme is refused with the forms that exist"):
    val r = run("sctp:80")
    assertEquals(r.status, ExitCode.Usage)
    assert(r.err.contains("'sctp:80'") && r.err.contains("udp:PORT") && r.err.contains("tcp:HOST:PORT"), r.err)

  test("a known scheme with a bad value is refused naming the token and the rule"):
    val r = run("udp:70000")
    assertEquals(r.status, ExitCode.Usage)
    assert(r.err.contains("'udp:70000'") && r.err.contains("out of range"), r.err)
    val r2 = run("-", "file:")
    assertEquals(r2.status, ExitCode.Usage)
    assert(r2.err.contains("'file:'"), r2.err)

  test("no arguments at all is a usage error"):
    assertEquals(run().status, ExitCode.Usage)

