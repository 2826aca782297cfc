package asyncpipe.cli

import java.net.{DatagramSocket, InetSocketAddress}
import scala.util.Try

/** The README's five everyday uses, pasted into bash as they are: the block under "Five everyday
  * uses" runs with `asyncpipe` on PATH (the assembly), and what it prints and the files it writes
  * in its scratch directory are what the README says.
  */
class ReadmeExamplesTest extends munit.FunSuite:
  override val munitTimeout = scala.concurrent.duration.Duration(120, "s")

  private def block(readme: String, after: String): String =
    val at = readme.indexOf(after)
    assert(at >= 0, s"README.md has no '$after'")
    val start = readme.indexOf("```sh\n", at) + "```sh\n".length
    readme.substring(start, readme.indexOf("```", start))

  test("README: the five everyday uses run as pasted, and do what their comments say"):
    assume(Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")
    assume(Try(DatagramSocket(InetSocketAddress("127.0.0.1", 9000)).close()).isSuccess, "UDP port 9000 is in use here")
    val root = os.Path(sys.env("ASYNCPIPE_ROOT"))
    val script = block(os.read(root / "README.md"), "Five everyday uses")
    val tmp = os.temp.dir(prefix = "asyncpipe-readme-")
    try
      val bin = tmp / "bin"
      os.makeDir(bin)
      def quoted(s: String) = "'" + s.replace("'", "'\\''") + "'"
      os.write(bin / "asyncpipe", s"#!/bin/sh\nexec ${Launch.command().map(quoted).mkString(" ")} \"$$@\"\n", perms = "rwxr-xr-x")
      val scratch = tmp / "scratch"
      os.makeDir(scratch)
      val r = os.proc("bash", "-c", script + "\necho \"dir=$PWD\"\n")
        .call(env = Map("PATH" -> s"$bin:${sys.env("PATH")}", "TMPDIR" -> scratch.toString), stdin = "",
          stderr = os.Pipe, check = false, timeout = 100_000)
      val out = r.out.lines()
      assertEquals(r.exitCode, 0, s"${r.out.text()}\n${r.err.text()}")
      val dir = os.Path(out.last.stripPrefix("dir="))
      assert(dir.startsWith(scratch), s"the examples ran in $dir, not in a new directory under TMPDIR")
      val three = "1\n2\n3\n"
      assertEquals(os.read(dir / "copy.txt"), three)
      assertEquals((os.read(dir / "a.txt"), os.read(dir / "b.txt")), (three, three))
      assertEquals(out.take(3), Seq("1", "2", "3"), "mux passes the lines on to stdout too")
      val udp = os.read.lines(dir / "udp.txt").map(_.toLong)
      assertEquals(udp.size, 3, udp.toString)
      assertEquals(udp, Seq(udp.head, udp.head + 1, udp.head + 2), "consecutive ticks")
      assertEquals(out.count(_.contains("load average")), 3, out.mkString("\n"))
      assertEquals(out(out.size - 2), "uploaded")
      val err = r.err.text()
      assert(err.contains("refused") && err.contains("attempt 2"), err)
    finally os.remove.all(tmp)
