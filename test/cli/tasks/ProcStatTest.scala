package asyncpipe.cli.tasks

import java.nio.charset.StandardCharsets.ISO_8859_1

/** [[ProcStat]]: a process's group and session from /proc/PID/stat, whatever its name (comm) holds,
  * and never a number from a line cut short or of a zombie (a wrong answer would leave a process
  * running, or signal another session's).
  */
class ProcStatTest extends munit.FunSuite:
  /** (pgrp, session), or None when the parser says no. */
  private def parse(line: String, n: Int = -1): Option[(Long, Long)] =
    val buffer = new Array[Byte](ProcStat.Prefix)
    val bytes = line.getBytes(ISO_8859_1)
    val length = if n >= 0 then n else bytes.length.min(buffer.length)
    System.arraycopy(bytes, 0, buffer, 0, length)
    val ids = new Array[Long](2)
    if ProcStat.parse(buffer, length, ids) then Some((ids(0), ids(1))) else None

  private val tail = " 0 0 -1 4194560 103 0 0 0 0 0 0 0 20 0 1 0 1234 2428928 225 18446744073709551615\n"

  test("pgrp and session are the fifth and sixth fields"):
    assertEquals(parse("4242 (sleep) S 4200 4210 4100" + tail), Some((4210L, 4100L)))

  test("a name with spaces, parentheses and a ') ' of its own does not move the fields"):
    assertEquals(parse("77 (a) S 1 (x) y) R 70 71 72" + tail), Some((71L, 72L)))
    assertEquals(parse("78 ()) ) S 9 9 9) S 70 73 74" + tail), Some((73L, 74L)))
    assertEquals(parse("79 ( ) D 70 75 76" + tail), Some((75L, 76L)))

  test("a zombie or a task being reaped is no member"):
    assertEquals(parse("80 (sh) Z 70 71 72" + tail), None)
    assertEquals(parse("81 (sh) X 70 71 72" + tail), None)

  test("a line cut short before the session's end, or not a stat line, gives nothing"):
    val line = "4242 (sleep) S 4200 4210 4100" + tail
    val sessionEnd = line.indexOf(" 4100") + " 4100".length
    assertEquals(parse(line, sessionEnd), None, "cut right after the session: it may have had more digits")
    assertEquals(parse(line, sessionEnd + 1), Some((4210L, 4100L)))
    assertEquals(parse(line, line.indexOf(" 4210")), None)
    for bad <- Seq("", "4242 sleep S 1 2 3 ", "4242 (sleep)S 1 2 3 ", "4242 (sleep) S 1 x 3 ", "4242 (sleep) S 1  2 3 ") do
      assertEquals(parse(bad), None, s"[$bad]")

  test("this JVM's own stat: its group and session as /proc's fields say"):
    val text = os.read(os.Path("/proc/self/stat"))
    val fields = text.substring(text.lastIndexOf(')') + 2).split(' ')
    assertEquals(parse(text), Some((fields(2).toLong, fields(3).toLong)))
