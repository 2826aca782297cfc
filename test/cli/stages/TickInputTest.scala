package asyncpipe.cli.stages

import asyncpipe.cli.frames.*

import asyncpipe.async.*
import scala.concurrent.duration.*

/** `tick:` as a stage's input: numbering and the fixed-rate grid. */
class TickInputTest extends munit.FunSuite:
  /** The frames of `b` as text, one after the other. */
  private def text(b: FrameBatch): String =
    val sb = StringBuilder()
    b.foreach((bytes, offset, length, _) => sb ++= String(bytes, offset, length, java.nio.charset.StandardCharsets.US_ASCII))
    sb.toString

  test("frames are numbered 1, 2, 3, ... even when the next stage holds a tick up past many slots"):
    Async.blocking:
      val out = SyncChannel[FrameBatch]()
      val tick = TickInput(TickAddress(1.millisecond, Some(4)))
      val pump = Future(tick.pump(out))
      val first = text(out.read().get)
      sleep(30) // not a synchronisation: the hold-up itself, some 30 slots of the grid
      val rest = List.fill(3)(text(out.read().get))
      pump.value
      assertEquals(first :: rest, List("1", "2", "3", "4"))
      assertEquals(tick.counters.frames, 4L)
