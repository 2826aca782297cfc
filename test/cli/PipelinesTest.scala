package asyncpipe.cli

import asyncpipe.async.{Support, Watchdog}
import java.lang.ProcessBuilder.Redirect
import java.nio.ByteBuffer
import java.util.concurrent.TimeUnit
import scala.jdk.CollectionConverters.*

/** Runs every `.pipe` file in pipelines/ as a user would, `asyncpipe run pipelines/NAME.pipe` from a
  * directory that holds a copy of `pipelines/` (so the examples' relative paths resolve, and what
  * they write lands in a scratch directory). Every one must exit 0 within a bound with nothing on
  * stderr; the examples named in `checks` have their output checked too.
  */
class PipelinesTest extends munit.FunSuite with Watchdog:
  private val root = sys.env.get("ASYNCPIPE_ROOT").map(os.Path(_))
  private val pipes: Seq[os.Path] =
    root.map(r => os.list(r / "pipelines").filter(p => os.isFile(p) && p.ext == "pipe").sorted).getOrElse(Nil)

  override def beforeAll(): Unit =
    assume(Launch.assembly.isDefined && root.isDefined, "ASYNCPIPE_ASSEMBLY or ASYNCPIPE_ROOT not set: run through ./mill")

  private def lines(p: os.Path): Seq[String] = os.read(p).split("\n", -1).toSeq match
    case init :+ "" => init
    case other      => munit.Assertions.fail(s"$p does not end with a newline: ${other.lastOption}")

  private def numbers(text: Seq[String], count: Int, what: String): Unit =
    assertEquals(text.size, count, s"$what: $text")
    assert(text.forall(_.matches("[0-9]+")), s"$what: not all numbers: $text")
    val ns = text.map(_.toInt)
    assert(ns.zip(ns.drop(1)).forall(_ < _), s"$what: not increasing: $text")

  /** What each known example must leave: (scratch directory, its stdout) => assertions. */
  private val checks: Map[String, (os.Path, String) => Unit] = Map(
    "tick-to-file" -> { (dir, out) =>
      numbers(out.split("\n").toSeq, 10, "stdout")
      assertEquals(out.head, '1', "the first tick is 1")
      assertEquals(os.read(dir / "ticks.txt"), out, "ticks.txt is a copy of stdout")
    },
    "merge" -> { (dir, out) =>
      assertEquals(out, "")
      val merged = lines(dir / "merged.txt")
      val greek = lines(dir / "pipelines" / "data" / "greek.txt")
      val numbers = lines(dir / "pipelines" / "data" / "numbers.txt")
      assertEquals(merged.size, greek.size + numbers.size, s"merged.txt: $merged")
      assertEquals(merged.filter(greek.contains), greek, "greek.txt's lines, in order")
      assertEquals(merged.filter(numbers.contains), numbers, "numbers.txt's lines, in order")
    },
    "fan-out" -> { (dir, out) =>
      assertEquals(out, "")
      val c = lines(dir / "copy-c.txt")
      numbers(c, 50, "copy-c.txt")
      for f <- Seq("copy-a.txt", "copy-b.txt") do assertEquals(lines(dir / f), c, s"$f is a copy of copy-c.txt")
    },
    "len-frames" -> { (dir, out) =>
      val greek = os.read(dir / "pipelines" / "data" / "greek.txt")
      assertEquals(out, greek)
      val wire = ByteBuffer.wrap(os.read.bytes(dir / "greek.len"))
      val frames = Iterator.continually(wire).takeWhile(_.remaining > 0).map { w =>
        val payload = new Array[Byte](w.getInt())
        w.get(payload)
        String(payload, "UTF-8")
      }.toSeq
      assertEquals(frames, greek.linesIterator.toSeq, "greek.len: one len frame per line, without its newline")
    }
  )

  test("there are examples, and every known example is still there"):
    assume(root.isDefined, "ASYNCPIPE_ROOT not set")
    assert(pipes.nonEmpty, s"no .pipe files in ${root.get / "pipelines"}")
    val names = pipes.map(_.baseName).toSet
    for known <- checks.keys do assert(names.contains(known), s"pipelines/$known.pipe is gone (its check is in PipelinesTest)")

  for pipe <- pipes do
    test(s"pipelines/${pipe.last} runs to its end with exit 0${if checks.contains(pipe.baseName) then ", and its output is right" else ""}"):
      val dir = os.temp.dir(prefix = "asyncpipe-pipelines-")
      try
        os.copy(root.get / "pipelines", dir / "pipelines")
        val (out, err) = (dir / "stdout.txt", dir / "stderr.txt")
        val p = ProcessBuilder(Launch.command("run", s"pipelines/${pipe.last}").asJava)
          .directory(dir.toIO).redirectInput(Redirect.from(java.io.File("/dev/null")))
          .redirectOutput(out.toIO).redirectError(err.toIO).start()
        try
          assert(p.waitFor(Support.Patience * 2, TimeUnit.MILLISECONDS), s"${pipe.last} still running after ${Support.Patience * 2} ms")
          assertEquals(p.exitValue, 0, os.read(err))
          assertEquals(os.read(err), "", "stderr")
          checks.get(pipe.baseName).foreach(check => check(dir, os.read(out)))
        finally p.destroyForcibly()
      finally os.remove.all(dir)
