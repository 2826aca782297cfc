package asyncpipe.cli.stages

import asyncpipe.cli.system.TerminalWidth

/** The `--progress` line's layout ([[ProgressLine]]) at the widths users have, its numbers
  * ([[Quantities]]) and its rates ([[RateWindow]]): the line never reaches the last column, keeps
  * its fields in order, leaves the least important out first, and gives the bar what is left.
  */
class ProgressLineTest extends munit.FunSuite:
  private val second = 1_000_000_000L

  /** A copy under way: 123.5 MB in 3.2 s at 45.2 MB/s, 1.2M frames, 3 dropped. */
  private val counted = Progress(bytes = 123_456_789, byteRate = 45_200_000, elapsedNanos = 3_200_000_000L,
    frames = 1_234_567, frameRate = 401_500, drops = 3)
  /** The same with a total of 300 MB, and a steadier rate of 40 MB/s for the time left. */
  private val known = counted.copy(total = 300_000_000, etaRate = 40_000_000)
  /** A plain byte copy: no frames, nothing that drops. */
  private val plain = Progress(bytes = 123_456_789, byteRate = 45_200_000, elapsedNanos = 3_200_000_000L)

  private def render(p: Progress, width: Int): String = ProgressLine().render(p, width).toString

  private val barPattern = """\[[=> ]*\]""".r

  /** The fields of a line, in order (the bar is one). */
  private def fields(line: String): Seq[String] =
    val bar = barPattern.findFirstIn(line)
    val marked = barPattern.replaceFirstIn(line, "BAR")
    marked.split(ProgressLine.Separator).toSeq.filter(_.nonEmpty).map(f => if f == "BAR" then bar.get else f)

  private def fits(line: String, width: Int)(using munit.Location): Unit =
    assert(line.length <= width - 1, s"${line.length} characters at width $width: [$line]")

  test("at 200 columns every field is shown, in order, and the bar takes the rest of the line"):
    val line = render(known, 200)
    assertEquals(line.length, 199, s"[$line]")
    val f = fields(line)
    assertEquals(f.take(6), Seq("123.5 MB", "45.2 MB/s", "0:03", "1.2M frames", "401.5k frames/s", "3 dropped"))
    assert(f(6).startsWith("[") && f(6).endsWith("]"), s"no bar in [$line]")
    assertEquals(f.drop(7), Seq("41%", "ETA 0:05"))
    assertEquals(f.length, 9)
    // 41 % of the bar's cells are done, then the head.
    val cells = f(6).length - 2
    assertEquals(f(6).count(_ == '='), (cells * 123_456_789.0 / 300_000_000).toInt)
    assertEquals(f(6).count(_ == '>'), 1)

  test("at 200 columns without a total: no bar, percent or ETA"):
    assertEquals(render(counted, 200), "123.5 MB  45.2 MB/s  0:03  1.2M frames  401.5k frames/s  3 dropped")
    assertEquals(render(plain, 200), "123.5 MB  45.2 MB/s  0:03")

  test("at 80 columns: frames/s is the first to go, then the bar has no room; a plain copy has its bar"):
    val line = render(counted, 80)
    fits(line, 80)
    assertEquals(line, "123.5 MB  45.2 MB/s  0:03  1.2M frames  401.5k frames/s  3 dropped")
    assertEquals(render(known, 80), "123.5 MB  45.2 MB/s  0:03  1.2M frames  3 dropped  41%  ETA 0:05")
    val plainKnown = render(plain.copy(total = 300_000_000, etaRate = 40_000_000), 80)
    assertEquals(plainKnown.length, 79, s"the bar fills the line: [$plainKnown]")
    val f = fields(plainKnown)
    assertEquals(f.patch(3, Nil, 1), Seq("123.5 MB", "45.2 MB/s", "0:03", "41%", "ETA 0:05"))
    assertEquals(f(3), "[" + "=" * 14 + ">" + " " * 20 + "]")

  test("at 40 columns the least important fields are left out, whole"):
    assertEquals(render(counted, 40), "123.5 MB  45.2 MB/s  0:03  3 dropped")
    assertEquals(render(plain, 40), "123.5 MB  45.2 MB/s  0:03")
    val withTotal = render(known, 40)
    fits(withTotal, 40)
    assertEquals(withTotal, "123.5 MB  45.2 MB/s  0:03  41%")
    // The ETA is one character too many: 40 characters.
    assertEquals(render(plain.copy(total = 300_000_000, etaRate = 40_000_000), 40), "123.5 MB  45.2 MB/s  0:03  41%")
    assertEquals(render(plain.copy(total = 300_000_000, etaRate = 40_000_000), 41), "123.5 MB  45.2 MB/s  0:03  41%  ETA 0:05")

  test("every width from 1 to 200: the line fits, the bytes come first, the fields keep their order, and a narrower line shows no field a wider one left out"):
    def shown(line: String) = fields(line).filterNot(_.startsWith("["))
    for p <- Seq(plain, counted, known) do
      val all = shown(render(p, 1000))
      for width <- 1 to 200 do
        val line = render(p, width)
        fits(line, width)
        if width >= 10 then
          assert(line.startsWith("123.5 MB"), s"width $width: [$line]")
          assertEquals(shown(line), all.filter(shown(line).contains), s"width $width: [$line]")
          val narrower = render(p, width - 1)
          assert(shown(narrower).toSet.subsetOf(shown(line).toSet), s"width $width: [$line], at ${width - 1}: [$narrower]")

  test("the bar appears only with room for its cells, and is full at the total"):
    val done = known.copy(bytes = 300_000_000)
    val line = render(done, 100)
    val bar = fields(line).find(_.startsWith("[")).get
    assert(bar.drop(1).dropRight(1).forall(_ == '='), s"[$line]")
    assert(line.endsWith("100%  ETA 0:00"), s"[$line]")
    // Just too narrow for a bar of MinBar cells: percent and ETA, no bar.
    val noFrames = known.copy(frames = -1, drops = -1)
    val bare = render(noFrames, 200).replaceAll("""\s*\[[=> ]*\]""", "")
    val narrowest = bare.length + ProgressLine.Separator.length + 2 + ProgressLine.MinBar + 1
    assert(render(noFrames, narrowest).contains("["), render(noFrames, narrowest))
    assertEquals(render(noFrames, narrowest - 1), bare)

  test("ETA: unknown while nothing moves, 0:00 once the total is reached"):
    assert(render(known.copy(etaRate = 0), 200).endsWith("ETA -:--"))
    assert(render(known.copy(bytes = 400_000_000), 200).endsWith("133%  ETA 0:00"))

  test("a width too small for the bytes cuts them, and 1 column draws nothing"):
    assertEquals(render(plain, 5), "123.")
    assertEquals(render(plain, 1), "")
    assertEquals(render(plain, 0), "")

  test("numbers: bytes in decimal units, counts shortened from 10,000, clock durations"):
    def b(n: Long) = Quantities.appendBytes(java.lang.StringBuilder(), n).toString
    def c(n: Long) = Quantities.appendCount(java.lang.StringBuilder(), n).toString
    def d(s: Long) = Quantities.appendDuration(java.lang.StringBuilder(), s).toString
    assertEquals(Seq(0L, 999L, 1000L, 1049L, 1050L, 999_949L, 999_950L, 1_073_741_824L).map(b),
      Seq("0 B", "999 B", "1.0 kB", "1.0 kB", "1.1 kB", "999.9 kB", "1000.0 kB", "1.1 GB"))
    assertEquals(b(Long.MaxValue), "9223.4 PB")
    assertEquals(Seq(0L, 9999L, 10_000L, 1_234_567L).map(c), Seq("0", "9999", "10.0k", "1.2M"))
    assertEquals(Seq(0L, 5L, 59L, 60L, 754L, 3599L, 3600L, 3723L, 36_000L).map(d),
      Seq("0:00", "0:05", "0:59", "1:00", "12:34", "59:59", "1:00:00", "1:02:03", "10:00:00"))
    assertEquals(StatsReporter.bytes(1_234_567.0), "1.2 MB")

  test("the rate window measures over the span asked for, not since the start"):
    val w = RateWindow(10)
    assertEquals(w.perSecond(2 * second), 0.0, "one sample is no rate")
    w.add(0, 0)
    assertEquals(w.perSecond(2 * second), 0.0)
    // 1000 bytes/s for 4 s, then a stall for 2 s.
    for t <- 1 to 4 do w.add(t * second, t * 1000L)
    assertEqualsDouble(w.perSecond(2 * second), 1000.0, 1e-9)
    w.add(5 * second, 4000)
    w.add(6 * second, 4000)
    assertEqualsDouble(w.perSecond(2 * second), 0.0, 1e-9)
    assertEqualsDouble(w.perSecond(4 * second), 500.0, 1e-9)
    // Over more than the window holds: its whole span (here, since the start).
    assertEqualsDouble(w.perSecond(60 * second), 4000.0 / 6, 1e-9)

  test("the rate window, samples further apart than the span: the last two"):
    val w = RateWindow(4)
    w.add(0, 0)
    w.add(5 * second, 5000)
    assertEqualsDouble(w.perSecond(second), 1000.0, 1e-9)
    // The ring wraps: the oldest samples are forgotten.
    for t <- 6 to 20 do w.add(t * second, t * 1000L + (if t > 17 then 1000L * (t - 17) else 0L))
    // Held: t = 17, 18, 19, 20 s, counts 17,000, 19,000, 21,000, 23,000.
    assertEqualsDouble(w.perSecond(60 * second), (23_000.0 - 17_000.0) / 3, 1e-9)
    intercept[IllegalArgumentException](RateWindow(1))

  test("the terminal's width: its own, else $COLUMNS, else 80"):
    // The test JVM's descriptor 99 is no terminal: the variable decides, or the fallback.
    assertEquals(TerminalWidth.of(99, Some("132")), 132)
    assertEquals(TerminalWidth.of(99, Some(" 50 ")), 50)
    assertEquals(TerminalWidth.of(99, Some("wide")), TerminalWidth.Fallback)
    assertEquals(TerminalWidth.of(99, Some("0")), TerminalWidth.Fallback)
    assertEquals(TerminalWidth.of(99, None), 80)
    assert(TerminalWidth.fromTerminal(99) <= 0)

  test("ANSI erasing except where TERM is unset, empty or dumb"):
    assertEquals(Seq(None, Some(""), Some("dumb"), Some("xterm-256color"), Some("tmux-256color")).map(LiveLine.ansi),
      Seq(false, false, false, true, true))

  test("the line on a terminal: back to column 0, the text, the rest erased, back to column 0"):
    val bytes = java.io.ByteArrayOutputStream()
    val err = java.io.PrintStream(bytes, true, "US-ASCII")
    val ansi = LiveLine(err, ansi = true)
    ansi.draw("12.0 kB  1.0 kB/s  0:12", 80)
    ansi.clear(80)
    assertEquals(bytes.toString("US-ASCII"), "\r12.0 kB  1.0 kB/s  0:12\u001b[J\r" + "\r\u001b[J\r")
    bytes.reset()
    val dumb = LiveLine(err, ansi = false)
    dumb.draw("abcdef", 80)
    dumb.draw("abc", 80)
    dumb.clear(80)
    assertEquals(bytes.toString("US-ASCII"), "\rabcdef\r" + "\rabc   \r" + "\r   \r")

  test("a notice while the line is drawn clears the line first, so it never lands on the line's tail"):
    val bytes = java.io.ByteArrayOutputStream()
    val err = java.io.PrintStream(bytes, true, "US-ASCII")
    val line = LiveLine(err, ansi = false)
    val tell = Diagnostics(err, json = false)
    line.draw("1.2 MB  300 kB/s  0:04  5,000 frames", 80)
    tell.beforeLine = () => line.clear(80)
    tell.notice("short")
    val out = bytes.toString("US-ASCII")
    val notice = out.indexOf("short\n")
    // A terminal replays it: the row the notice is on holds the notice alone.
    val row = out.substring(0, notice + "short".length).split('\r').foldLeft(Array.fill(80)(' ')) { (r, seg) =>
      seg.zipWithIndex.foreach((c, i) => r(i) = c); r
    }.mkString.trim
    assertEquals(row, "short")
