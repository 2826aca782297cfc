package asyncpipe.cli.stages

import asyncpipe.cli.Launch
import asyncpipe.cli.frames.*
import java.nio.charset.StandardCharsets.UTF_8

/** `--timestamp`: each frame prefixed with the UTC time it was read, fixed width, frames kept whole;
  * refused for framings with no place for one.
  */
class TimestampTest extends munit.FunSuite:
  private val stampPattern = """\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z """

  test("stamp: every frame of a batch gets the prefix, the terminators and an unterminated last frame kept"):
    val prefix = Timestamps.prefix(0)
    assertEquals(String(prefix, UTF_8), "1970-01-01T00:00:00.000Z ")
    assertEquals(prefix.length, Timestamps.Width)
    val in = "a\n\nbc\nd".getBytes(UTF_8)
    val out = Timestamps.stamp(FrameBatch(Framing.Lines, in, in.length, terminated = false), Timestamps.prefix(1_764_238_333_123L))
    assertEquals(String(out.bytes, 0, out.length, UTF_8),
      "2025-11-27T10:12:13.123Z a\n2025-11-27T10:12:13.123Z \n2025-11-27T10:12:13.123Z bc\n2025-11-27T10:12:13.123Z d")
    assertEquals(out.terminated, false)
    val nul = "x\u0000y\u0000".getBytes(UTF_8)
    val n = Timestamps.stamp(FrameBatch(Framing.Nul, nul, nul.length, terminated = true), Timestamps.prefix(0))
    assertEquals(n.frameCount, 2)
    assertEquals(String(n.bytes, 0, n.length, UTF_8), "1970-01-01T00:00:00.000Z x\u00001970-01-01T00:00:00.000Z y\u0000")

  test("--timestamp end to end: each line stamped with a time within the run, in order; len and raw refused (2)"):
    assume(Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")
    val before = java.time.Instant.now().minusMillis(1)
    val r = os.proc(Launch.command("--timestamp", "-", "-")).call(stdin = "one\ntwo\nthree\n", stderr = os.Pipe, check = false, timeout = 60_000)
    val after = java.time.Instant.now().plusMillis(1)
    assertEquals(r.exitCode, 0, r.err.text())
    val lines = r.out.lines()
    assertEquals(lines.map(_.drop(Timestamps.Width)), Seq("one", "two", "three"))
    for l <- lines do
      assert(l.take(Timestamps.Width).matches(stampPattern), l)
      val t = java.time.Instant.parse(l.take(Timestamps.Width - 1))
      assert(!t.isBefore(before) && !t.isAfter(after), s"$t not within the run ($before .. $after)")
    for framing <- Seq("len", "raw") do
      val refused = Launch("--timestamp", "--frame", framing, "-", "-")
      assertEquals(refused.exitCode, 2, refused.err)
      assert(refused.err.contains("--timestamp") && refused.err.contains(s"--frame $framing"), refused.err)
