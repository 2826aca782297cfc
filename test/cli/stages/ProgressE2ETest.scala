package asyncpipe.cli.stages

import asyncpipe.cli.*

import asyncpipe.async.Watchdog
import java.io.RandomAccessFile
import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.TimeUnit
import java.util.concurrent.locks.LockSupport
import scala.concurrent.duration.{Duration, FiniteDuration}

/** `--progress` in a real terminal: the built tool (see [[Launch]]) runs in a tmux pane, and what
  * the pane shows (`tmux capture-pane`) is checked as a user would see it: one line that fits the
  * width, nothing wrapped left behind, the line fitted again after a resize, and nothing of it left
  * once the stage has ended. The source is a FIFO that the test writes, so the stage runs until the
  * test closes it; every wait is a bounded poll of the pane for the state expected.
  */
class ProgressE2ETest extends munit.FunSuite with Watchdog:
  import ProgressE2ETest.*

  override def watchdog: FiniteDuration = Duration(120, TimeUnit.SECONDS)

  override def beforeAll(): Unit =
    assume(Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")
    assume(tmuxPresent, "tmux is not installed: the progress line is checked in a real terminal only")

  private val pane = FunFixture[Pane](_ => Pane(os.temp.dir(prefix = "asyncpipe-progress-")), _.close())

  /** The pattern of the line's first three fields: bytes, rate, time. */
  private val head = """^\d+(\.\d)? [kMG]?B  \d+(\.\d)? [kMG]?B/s  \d+:\d\d""".r

  pane.test("80 columns, a known total: one line that fills the width, re-fitted at 60, cleared at the end"): p =>
    val fifo = p.fifo("in")
    val writer = RandomAccessFile(fifo.toIO, "rw") // opening a FIFO read-write does not wait for a reader
    try
      p.start(80, Seq("--progress", "--size", "1M", s"file:$fifo", "null:"))
      writer.write(lines(300_000))
      val at80 = p.await("a progress line with its bar")(s => s.exists(l => l.contains("%") && l.contains("[")))
      val line = p.onlyLine(at80)
      assertEquals(line.length, 79, s"the bar should fill the line to the last column but one: [$line]")
      assert(head.findFirstIn(line).isDefined, s"bytes, rate, time first: [$line]")
      assert("""  \[=+>? *\]  \d+%  ETA (\d+:)?\d+:\d\d$""".r.findFirstIn(line).isDefined, s"bar, percent, ETA last: [$line]")
      assert(line.contains("  28%  "), s"300,000 of 1 MiB (28.6 %): [$line]")

      p.tmux("resize-window", "-t", Session, "-x", "60")
      val at60 = p.await("the line fitted to 60 columns, nothing else")(s => nonBlank(s).size == 1 && nonBlank(s).head.length == 59)
      assert(p.onlyLine(at60).contains("]  28%  ETA "), at60.mkString("\n"))
    finally writer.close()
    val end = p.await("the stage's exit")(_.exists(_.startsWith("[exit")))
    assertEquals(nonBlank(end), Seq("[exit 0]"), s"the progress line should be cleared:\n${end.mkString("\n")}")

  pane.test("200 columns, --stats: frames counted and shown; the --stats line prints clean after the progress line"): p =>
    val fifo = p.fifo("in")
    val writer = RandomAccessFile(fifo.toIO, "rw")
    try
      p.start(200, Seq("--progress", "--stats", "--size", "100K", s"file:$fifo", "null:"))
      writer.write(lines(50_000)) // 50,000 bytes: 5,000 lines of 10
      val shown = p.await("5,000 frames shown")(_.exists(_.contains("5000 frames  ")))
      val line = p.onlyLine(shown)
      assertEquals(line.length, 199, s"[$line]")
      assert("""^50\.0 kB  \d+(\.\d)? [kMG]?B/s  \d+:\d\d  5000 frames  \d+(\.\d)?k? frames/s  \[=+>? *\]  48%  ETA """.r.findFirstIn(line).isDefined,
        s"[$line]")
    finally writer.close()
    val end = nonBlank(p.await("the stage's exit")(_.exists(_.startsWith("[exit"))))
    assertEquals(end.size, 2, end.mkString("\n"))
    assert(end.head.startsWith("asyncpipe: 5000 frames (50.0 kB) in, 5000 frames out, dropped 0"), end.head)
    assertEquals(end(1), "[exit 0]")

  pane.test("stderr redirected to a file: nothing is drawn, on the terminal or in the file"): p =>
    val err = p.dir / "err.txt"
    p.start(80, Seq("--progress", "tick:50ms,count=12", "null:"), stderr = Some(err))
    val end = p.await("the stage's exit")(_.exists(_.startsWith("[exit")))
    assertEquals(nonBlank(end), Seq("[exit 0]"))
    assertEquals(os.read(err), "")

object ProgressE2ETest:
  private val Session = "progress"
  /** How long a state may take to show: a JVM starting on a loaded machine, then a few refreshes. */
  private val Patience = 60_000L

  def tmuxPresent: Boolean =
    try os.proc("tmux", "-V").call(check = false, stderr = os.Pipe).exitCode == 0
    catch case _: java.io.IOException => false

  /** `count` bytes of 10-byte lines. */
  def lines(count: Int): Array[Byte] = ("123456789\n" * (count / 10)).getBytes(UTF_8)

  def nonBlank(screen: Seq[String]): Seq[String] = screen.map(_.stripTrailing).filter(_.nonEmpty)

  /** A tmux server of its own (its own socket, no configuration) with one session, in `dir`. */
  final class Pane(val dir: os.Path):
    private val socket = s"asyncpipe-progress-${ProcessHandle.current.pid}-${dir.last}"

    def tmux(args: String*): os.CommandResult =
      os.proc(Seq("tmux", "-L", socket, "-f", "/dev/null") ++ args).call(check = false, stderr = os.Pipe, cwd = dir)

    def fifo(name: String): os.Path =
      val path = dir / name
      os.proc("mkfifo", path.toString).call()
      path

    /** Runs asyncpipe with `args` in a pane `width` columns wide; then prints its exit status as
      * `[exit N]` and waits (the pane stays to be read).
      */
    def start(width: Int, args: Seq[String], stderr: Option[os.Path] = None): Unit =
      val redirect = stderr.fold("")(f => s" 2>${quote(f.toString)}")
      val script = dir / "run.sh"
      os.write.over(script,
        s"""${Launch.command(args*).map(quote).mkString(" ")} </dev/null$redirect
           |echo "[exit $$?]"
           |exec cat
           |""".stripMargin)
      val r = tmux("new-session", "-d", "-s", Session, "-x", width.toString, "-y", "24", s"sh ${quote(script.toString)}")
      assert(r.exitCode == 0, s"tmux new-session: ${r.err.text()}")

    /** What the pane shows now, a string a row. */
    def screen: Seq[String] = tmux("capture-pane", "-p", "-t", Session).out.lines()

    /** The pane once `ok` holds of what it shows; fails after [[Patience]] with what it showed. */
    def await(what: String)(ok: Seq[String] => Boolean)(using munit.Location): Seq[String] =
      val deadline = System.nanoTime() + Patience * 1_000_000
      var shown = screen
      while !ok(shown) && System.nanoTime() < deadline do
        LockSupport.parkNanos(20_000_000)
        shown = screen
      if !ok(shown) then throw AssertionError(s"no $what within ${Patience / 1000} s; the pane shows:\n${shown.mkString("\n")}")
      shown

    /** The one row that shows something; fails if there are more (a line wrapped or left behind). */
    def onlyLine(screen: Seq[String])(using munit.Location): String =
      val rows = nonBlank(screen)
      if rows.size != 1 then throw AssertionError(s"one row expected, the pane shows ${rows.size}:\n${screen.mkString("\n")}")
      rows.head

    def close(): Unit =
      tmux("kill-server")
      os.remove.all(dir)

  private def quote(s: String): String = "'" + s.replace("'", "'\\''") + "'"
