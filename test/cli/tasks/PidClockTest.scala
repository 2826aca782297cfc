package asyncpipe.cli.tasks

/** [[PidClock]]: which pids a process group started after a reading can have, and when that
  * cannot be told (then every pid is searched; a wrong window would leave a process running).
  */
class PidClockTest extends munit.FunSuite:
  private val PidMax = 32768L

  private def holds(window: PidClock.Window | Null, pids: Long*): Seq[Boolean] =
    assert(window != null, "expected a window, got 'search every pid'")
    pids.map(window.nn.holds)

  test("without a wrap the window is the pids after the first reading's last, up to the second's"):
    val w = PidClock.window(PidClock(1000, 50_000, 120), PidClock(1010, 50_012, 121), PidMax)
    assertEquals(holds(w, 1001, 1005, 1010), Seq(true, true, true))
    assertEquals(holds(w, 1000, 1011, 999, 500, 32767), Seq(false, false, false, false, false))

  test("across the wrap at pid_max the window is the end of the range and its start from 300"):
    val w = PidClock.window(PidClock(32760, 50_000, 120), PidClock(320, 50_030, 121), PidMax)
    assertEquals(holds(w, 32761, 32767, 300, 320), Seq(true, true, true, true))
    assertEquals(holds(w, 32760, 321, 1000, 20000), Seq(false, false, false, false))

  test("when the allocator may have gone all the way round, every pid is searched"):
    // created + 2 * (tasks + created) + slack >= pid_max - 300
    assertEquals(PidClock.window(PidClock(1000, 50_000, 120), PidClock(1010, 62_000, 120), PidMax), null)
    assertEquals(PidClock.window(PidClock(1000, 50_000, 16_000), PidClock(1010, 50_010, 16_000), PidMax), null)
    // the same counts are far from a lap with a larger pid_max
    assert(PidClock.window(PidClock(1000, 50_000, 16_000), PidClock(1010, 50_010, 16_000), 4_194_304) != null)

  test("a missing reading, no pid handed out, or an unknown pid_max: every pid is searched"):
    val r = PidClock(1000, 50_000, 120)
    assertEquals(PidClock.window(null, r, PidMax), null)
    assertEquals(PidClock.window(r, null, PidMax), null)
    assertEquals(PidClock.window(r, PidClock(1000, 50_000, 120), PidMax), null)
    assertEquals(PidClock.window(r, PidClock(1000, 50_007, 120), PidMax), null) // forks but the same last pid: a lap
    assertEquals(PidClock.window(r, PidClock(1010, 50_010, 120), 0), null)

  test("pids parse as decimal numbers only"):
    assertEquals(PidClock.parsePid("4194304"), 4194304L)
    assertEquals(Seq("", "self", "12a", "-1", "1234567890123456789").map(PidClock.parsePid), Seq(-1L, -1L, -1L, -1L, -1L))

  test("on this machine a process started between two readings lies in their window"):
    val before = PidClock.read()
    assert(before != null, "/proc/loadavg or /proc/stat could not be read")
    val children = (1 to 3).map(_ => ProcessBuilder("true").start())
    val now = PidClock.read()
    children.foreach(_.waitFor())
    val w = PidClock.window(before, now, PidClock.readPidMax())
    assert(PidClock.readPidMax() > 300, "pid_max")
    assertEquals(holds(w, children.map(_.pid())*), Seq(true, true, true), s"before $before, now $now")
    assertEquals(holds(w, ProcessHandle.current().pid()), Seq(false))
