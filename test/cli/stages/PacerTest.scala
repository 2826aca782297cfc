package asyncpipe.cli.stages

import asyncpipe.cli.frames.*
import java.nio.charset.StandardCharsets.UTF_8
import scala.collection.mutable.ArrayBuffer

/** [[Pacer]] and [[RateLimit]] (`--rate-limit`), on a clock of the test's own: the schedule, its
  * catch-up and forgiveness, and the cutting of batches at frame boundaries.
  */
class PacerTest extends munit.FunSuite:
  /** A clock that only the pacer's sleeps move; each sleep is recorded. */
  private final class FakeClock:
    var now = 1_000_000_000L
    val sleeps = ArrayBuffer.empty[Long]
    def sleep(n: Long): Unit = { sleeps += n; now += n }

  private def lines(text: String): FrameBatch =
    val b = text.getBytes(UTF_8)
    FrameBatch(Framing.Lines, b, b.length, terminated = text.endsWith("\n"))

  private def text(b: FrameBatch): String = String(b.bytes, 0, b.length, UTF_8)

  test("RATE: a size is bytes a second in binary units, as pv -L; Nf is frames a second; anything else is refused by name"):
    assertEquals(RateLimit.reader.read("10M"), Right(RateLimit(10L << 20, frames = false)))
    assertEquals(RateLimit.reader.read("512k"), Right(RateLimit(512L << 10, frames = false)))
    assertEquals(RateLimit.reader.read("500f"), Right(RateLimit(500, frames = true)))
    for bad <- Seq("0", "0f", "fast", "10 M", "-5", "1.5M", "f") do
      assert(RateLimit.reader.read(bad).left.exists(_.contains(s"'$bad'")), s"$bad: ${RateLimit.reader.read(bad)}")

  test("the schedule: the piece after n units goes n / rate seconds after the first, whatever the pieces' sizes"):
    val clock = FakeClock()
    val p = Pacer(RateLimit(1000, frames = false), () => clock.now, clock.sleep)
    val start = clock.now
    p.admit(300) // the first goes at once
    assertEquals(clock.now, start)
    p.admit(200)
    assertEquals(clock.now - start, 300_000_000L) // after 300 bytes at 1000/s
    p.admit(500)
    assertEquals(clock.now - start, 500_000_000L)
    clock.now += 700_000_000L // the writer was slow: 1.2 s in, 1000 bytes due by 1.0 s
    p.admit(100)
    assertEquals(clock.sleeps.size, 2, "late: no wait, the lateness is made up")
    p.admit(100)
    assertEquals(clock.now - start, 1_200_000_000L, "and the schedule stays where it was: the next is due at 1.1 s, already past")
    p.admit(1)
    assertEquals(clock.now - start, 1_200_000_000L)
    assertEquals(clock.sleeps.size, 2)

  test("far behind (a stalled reader) is forgiven: the schedule starts again rather than bursting"):
    val clock = FakeClock()
    val p = Pacer(RateLimit(1000, frames = false), () => clock.now, clock.sleep)
    p.admit(1000)
    clock.now += 10_000_000_000L // 10 s of stall
    p.admit(1000) // goes now, and the schedule restarts from here
    val restart = clock.now
    p.admit(10)
    assertEquals(clock.now - restart, 1_000_000_000L, "the next piece waits for the one before, at the rate")

  test("a batch is cut at frame boundaries into pieces of at most a slice (a twentieth of a second), each on its turn"):
    val clock = FakeClock()
    val p = Pacer(RateLimit(200, frames = false), () => clock.now, clock.sleep) // slice: 10 bytes
    assertEquals(p.slice, 10L)
    val written = ArrayBuffer.empty[String]
    val times = ArrayBuffer.empty[Long]
    val start = clock.now
    p.pass(lines("aaaa\nbbbb\ncccccccccccccccc\ndd\nee"))((b, _) => { written += text(b); times += clock.now - start })
    assertEquals(written.toSeq, Seq("aaaa\nbbbb\n", "cccccccccccccccc\n", "dd\nee"), "a frame over the slice goes whole")
    assertEquals(times.toSeq, Seq(0L, 50_000_000L, 135_000_000L))

  test("a frame limit counts frames: pieces of a slice of frames; len and nul frames are cut whole too"):
    val clock = FakeClock()
    val p = Pacer(RateLimit(40, frames = true), () => clock.now, clock.sleep) // slice: 2 frames
    val written = ArrayBuffer.empty[String]
    p.pass(lines("1\n2\n3\n4\n5\n"))((b, _) => written += text(b))
    assertEquals(written.toSeq, Seq("1\n2\n", "3\n4\n", "5\n"))
    assertEquals(clock.now - 1_000_000_000L, 100_000_000L, "4 frames at 40/s before the last piece")
    val wire = Array.concat(FrameBatch.single("x".getBytes, 0, 1).bytes, FrameBatch.single("yy".getBytes, 0, 2).bytes,
      FrameBatch.single("".getBytes, 0, 0).bytes)
    val len = FrameBatch(Framing.Len, wire, wire.length, terminated = true)
    assertEquals(Pacer.pieceEnds(len, 2, frames = true).toSeq, Seq(11, 15))
    assertEquals(Pacer.pieceEnds(len, 6, frames = false).toSeq, Seq(5, 11, 15))
    val nul = FrameBatch(Framing.Nul, "a\u0000b\u0000c".getBytes, 5, terminated = false)
    assertEquals(Pacer.pieceEnds(nul, 1, frames = true).toSeq, Seq(2, 4, 5))

  test("a batch within a slice passes as it is, uncut; raw is cut by bytes only"):
    val clock = FakeClock()
    val p = Pacer(RateLimit(1 << 20, frames = false), () => clock.now, clock.sleep)
    val b = lines("small\n")
    var seen: FrameBatch | Null = null
    p.pass(b)((x, waited) => { seen = x; assert(!waited, "the first piece goes at once") })
    assert(seen eq b)
    val raw = FrameBatch(Framing.Raw, new Array[Byte](25), 25, terminated = true)
    assertEquals(Pacer.pieceEnds(raw, 10, frames = false).toSeq, Seq(10, 20, 25))
    assertEquals(Pacer.pieceEnds(raw, 10, frames = true).toSeq, Seq(25))
