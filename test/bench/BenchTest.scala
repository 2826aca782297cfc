package asyncpipe.bench

import asyncpipe.cli.Main
import asyncpipe.cli.command.Io
import asyncpipe.cli.system.OwnedOutput
import java.io.{ByteArrayOutputStream, PrintStream}
import java.nio.channels.Channels

/** `asyncpipe bench --quick` end to end: every suite runs, and its JSON has the documented shape
  * (numbers present and positive, ratios consistent with their parts). No speed is asserted.
  */
class BenchTest extends munit.FunSuite:
  import BenchTest.*
  // A quick run of every suite: about 120 s alone (the kafka suite starts a broker and a dozen JVMs),
  // 220 s beside the other test modules on 2 cores.
  override val munitTimeout = scala.concurrent.duration.Duration(420, "s")

  /** A temporary directory for the report files, removed after the test. */
  private val tempDir = FunFixture[os.Path](_ => os.temp.dir(prefix = "asyncpipe-bench-test"), os.remove.all(_))

  test("tables keep three significant digits: a few runs/s keep their decimals, millions of ops/s none"):
    assertEquals(Seq(8.347, 12.34, 4_512_345.6).map(Report.number), Seq("8.35", "12.3", "4,512,346"))

  tempDir.test("bench --quick writes JSON and SVG with every suite, in the documented shape"): dir =>
    val out = ByteArrayOutputStream()
    val status = Main.run(
      Seq("bench", "--quick", "--json", (dir / "b.json").toString, "--plot", (dir / "b.svg").toString),
      Io(OwnedOutput(Channels.newChannel(out)), PrintStream(ByteArrayOutputStream()))
    )
    assertEquals(status, 0)
    val text = out.toString("UTF-8")
    assert(text.startsWith("machine: "), text)
    for s <- Suites.all do assert(text.contains(s"== ${s.name} ("), s"table for ${s.name} missing")
    assert(s"\n${Suites.all.size} suites in \\d+(\\.\\d)? s\n$$".r.findFirstIn(text).isDefined, text.takeRight(200))

    val json = ujson.read(os.read(dir / "b.json"))
    for key <- Seq("cpu", "os", "jdk") do assert(json("machine")(key).str.nonEmpty, key)
    assert(json("machine")("cores").num >= 1)
    assertEquals(json("suites").arr.map(_("name").str).toSeq, Suites.all.map(_.name))
    for suite <- json("suites").arr do assert(suite("seconds").num > 0, suite("name").str)
    var comparisons = 0
    for suite <- json("suites").arr; c <- suite("comparisons").arr do
      comparisons += 1
      for side <- Seq("subject", "baseline") do
        val m = c(side)
        val iterations = m("iterations").arr.map(_.num)
        assertEquals(iterations.size, Plan.Quick.iterations, m.toString)
        assert(iterations.forall(_ > 0), m.toString)
        assert(m("min").num <= m("median").num && m("median").num <= m("max").num, m.toString)
        assertEquals(m("min").num, iterations.min)
        assertEquals(m("max").num, iterations.max)
        if !m("bytesPerOp").isNull then assert(m("bytesPerOp").num >= 0, m.toString)
      assertEqualsDouble(c("ratio").num, c("subject")("median").num / c("baseline")("median").num, 1e-9)
    for suite <- json("suites").arr; f <- suite("figures").arr do
      assert(f("value").num >= 0 && f("unit").str.nonEmpty, f.toString)
    assert(comparisons >= 4, s"only $comparisons comparisons")
    val channels = json("suites").arr.find(_("name").str == "channels").getOrElse(fail("no channels suite"))
    assert(channels("figures").arr.exists(f => f("unit").str == "B/op" && f("value").num > 0), channels("figures").toString)
    for suite <- json("suites").arr; row <- suite("comparisons").arr ++ suite("figures").arr do
      assertEquals(row("target").isNull, row("met").isNull, row.toString)
      if !row("met").isNull then assert(row("met").bool || !row("met").bool)
    val svg = os.read(dir / "b.svg")
    assert(svg.startsWith("<svg"), svg.take(100))
    assertEquals("<rect class=\"bar ".r.findAllIn(svg).size, comparisons)
    val verdicts = json("suites").arr.flatMap(s => s("comparisons").arr ++ s("figures").arr).filterNot(_("met").isNull)
    val missed = verdicts.count(!_("met").bool)
    val summary = if missed == 0 then s"\nall ${verdicts.size} targets met\n" else s"\n$missed of ${verdicts.size} targets MISSED:\n"
    assert(text.contains(summary), s"no '${summary.trim}' in ${text.takeRight(1500)}")

  test("the completions offer the suites as bench's operands, and the man page lists its options"):
    def out(args: String*) =
      val o = ByteArrayOutputStream()
      assertEquals(Main.run(args, Io(OwnedOutput(Channels.newChannel(o)), PrintStream(ByteArrayOutputStream(), true, "UTF-8"))), 0)
      o.toString("UTF-8")
    val bash = out("completions", "bash")
    for s <- Suites.all do assert(bash.contains(s.name), s"suite ${s.name} not completed")
    val man = out("manpage").replace("\\-", "-")
    for o <- BenchVerb.opts if !o.hidden do assert(man.contains(o.name), s"${o.name} not in the man page")

  test("an unknown suite or option is a usage error that names it"):
    def run(args: String*) =
      val err = ByteArrayOutputStream()
      val status = Main.run(args, Io(OwnedOutput(Channels.newChannel(ByteArrayOutputStream())), PrintStream(err, true, "UTF-8")))
      (status, err.toString("UTF-8"))
    // each bad command line (what it tests), and what its message must name
    val cases = Seq(
      (Seq("channelz"), "an unknown suite", Seq("'channelz'", "future")),
      (Seq("--jsn", "x"), "an unknown option", Seq("'--jsn'")),
      (Seq("channelz", "--quick"), "an option after a suite name must not hide the bad name", Seq("'channelz'")),
      (Seq("channels", "--forks", "0"), "forks out of range", Seq("'0'", "from 1 to 100")),
      (Seq("channels", "--fork-plan", "1,2,0.05"), "a fork's plan without its output file", Seq("--fork-out")),
      (Seq("channels", "--fork-plan", "1,two,0.05", "--fork-out", "/dev/null"), "a malformed plan", Seq("'1,two,0.05'")),
      (Seq("channels", "--fork-plan", "1,2,0.05", "--fork-out", "/dev/null", "--fork-part", "rendezvouz"),
        "a part the suite does not have", Seq("'rendezvouz'", "16 to 16")),
      (Seq("race", "--fork-plan", "1,2,0.05", "--fork-out", "/dev/null", "--fork-part", "x"), "a part of a suite without parts",
        Seq("'x'", "suite race has no parts")),
      (Seq("channels", "--fork-part", "select"), "a part without a fork's plan", Seq("--fork-plan")),
      (Seq("channels", "--parts", "select,rendezvouz"), "--parts with a part the suite does not have", Seq("'rendezvouz'", "16 to 16")),
      (Seq("race", "--parts", "select"), "--parts where no suite has parts", Seq("'select'", "no chosen suite has parts"))
    )
    for (args, what, named) <- cases do
      val (status, err) = run("bench" +: args*)
      assertEquals(status, 2, what)
      for n <- named do assert(err.contains(n), s"$what: '$n' not in: $err")

  tempDir.test("options may follow the suite names"): dir =>
    val err = ByteArrayOutputStream()
    val status = Main.run(Seq("bench", "race", "--quick", "--json", (dir / "r.json").toString),
      Io(OwnedOutput(Channels.newChannel(ByteArrayOutputStream())), PrintStream(err, true, "UTF-8")))
    assertEquals(status, 0, err.toString("UTF-8"))
    assertEquals(ujson.read(os.read(dir / "r.json"))("suites").arr.map(_("name").str).toSeq, Seq("race"))

  tempDir.test("--forks 2 measures a forked suite in two JVMs and pools their iterations, part by part under both flag sets; other suites run once"): dir =>
    val err = ByteArrayOutputStream()
    val out = ByteArrayOutputStream()
    val status = Main.run(Seq("bench", "channels", "race", "--quick", "--forks", "2", "--parts", "rendezvous,select", "--json", (dir / "f.json").toString),
      Io(OwnedOutput(Channels.newChannel(out)), PrintStream(err, true, "UTF-8")))
    assertEquals(status, 0, err.toString("UTF-8"))
    assert(out.toString("UTF-8").contains("== channels (each part in 2 fresh JVMs of its own, their iterations pooled, under the launcher's flags and under JVM defaults"),
      out.toString("UTF-8"))
    val suites = ujson.read(os.read(dir / "f.json"))("suites").arr.map(s => s("name").str -> s).toMap
    val perFork = Plan.Quick.copy(forks = 2).perFork.iterations
    assertEquals(suites("channels")("forks").num.toInt, 2)
    assertEquals(suites("channels")("partsApart").bool, true)
    assertEquals(suites("race")("forks").num.toInt, 1)
    assertEquals(suites("race")("partsApart").bool, false)
    for c <- suites("channels")("comparisons").arr; side <- Seq("subject", "baseline") do
      assertEquals(c(side)("iterations").arr.size, 2 * perFork, c(side).toString)
    // every comparison twice: under the launcher's flags, then under JVM defaults, in the same order
    val labels = suites("channels")("comparisons").arr.map(c => c("subject")("name").str + " vs " + c("baseline")("name").str).toSeq
    val (launcher, defaults) = labels.splitAt(labels.size / 2)
    assertEquals(defaults, launcher.map(_.replace(" vs ", " [JVM defaults] vs ") + " [JVM defaults]"))
    assertEquals(launcher, Seq("SyncChannel vs SynchronousQueue put/take", "SyncChannel vs jox 1.1.1 rendezvous Channel",
      "SyncChannel vs spin hand-off on two volatiles", "select of a read and a send, 2 BufferedChannel(16) vs the same reads and sends without select"))
    assertEquals(suites("channels")("figures").arr.map(_("name").str).toSeq.take(2),
      Seq("select of a read and a send: allocation per select", "select of a read and a send: rounds the read won"))
    for c <- suites("race")("comparisons").arr do assertEquals(c("subject")("iterations").arr.size, Plan.Quick.iterations)

  // ---------------------------------------------------------------------------------------------
  // Targets, the table's status column and summary, --check, --plot's checks and the chart: on
  // results chosen here (a suite that returns them, Fixed), so that met and missed are known in
  // advance and nothing is measured.

  test("a target is met on its bound and missed just past it; a value that is not a number never meets one"):
    val cases = Seq(
      (Target.atLeast(1.0), 1.0, true), (Target.atLeast(1.0), 0.9999, false), (Target.atLeast(1.0), 13.78, true),
      (Target.atMost(16), 16.0, true), (Target.atMost(16), 16.0001, false), (Target.atMost(16), 0.0, true),
      (Target.below(5), 5.0, false), (Target.below(5), 4.999, true),
      (Target.exactly(100), 100.0, true), (Target.exactly(100), 99.99, false), (Target.exactly(100), 100.01, false),
      (Target.timeWithin(1.15), 1 / 1.15, true), (Target.timeWithin(1.15), 0.8695, false), (Target.timeWithin(1.15), 0.87, true),
      (Target.timeWithin(1.2), 0.83, false), (Target.timeWithin(1.2), 0.834, true)
    )
    for (t, value, met) <- cases do assertEquals(t.met(value), met, s"$t with $value")
    for t <- cases.map(_._1).distinct do assert(!t.met(Double.NaN), s"$t met by NaN")

  test("a target reads as the suites wrote it before it could be checked"):
    assertEquals(Target.atLeast(0.8).text("x"), ">= 0.8x")
    assertEquals(Target.atLeast(1.0).text("x"), ">= 1.0x")
    assertEquals(Target.atLeast(0.95).text("x"), ">= 0.95x")
    assertEquals(Target.timeWithin(1.15).text("x"), ">= 0.87x (time <= 1.15x)")
    assertEquals(Target.timeWithin(1.5).text("x"), ">= 0.67x (time <= 1.5x)")
    assertEquals(Target.timeWithin(1.2).text("x"), ">= 0.83x (time <= 1.2x)")
    assertEquals(Target.below(64).text("MiB"), "< 64 MiB")
    assertEquals(Target.below(5100).text("ms"), "< 5100 ms")
    assertEquals(Target.atMost(16).text("B/op"), "<= 16 B/op")
    assertEquals(Target.exactly(100).text("%"), "100 %")
    for t <- Seq(Target.atLeast(0.95), Target.atMost(48), Target.below(5), Target.exactly(100), Target.timeWithin(1.15)) do
      assertEquals(Target.parse(t.spec), Some(t))
    for bad <- Seq("", "AtLeast", "AtLeast:x", "Around:1.0", "TimeWithin:0", "TimeWithin:-1", "AtLeast:1:2") do
      assertEquals(Target.parse(bad), None, bad)

  test("the table marks each target met or MISSED on its row; the summary lists the missed ones"):
    val table = Report.table(pipeline)
    def rowOf(start: String) = table.linesIterator.find(_.startsWith(start)).getOrElse(fail(s"no row '$start' in\n$table"))
    def last(start: String, n: Int) = rowOf(start).trim.split("  +").toSeq.takeRight(n)
    assertEquals(last(s"  vs ${cat.name}", 3), Seq("0.07x", ">= 1.0x", "MISSED"), table)
    assertEquals(last(s"  vs ${three.name}", 3), Seq("2.50x", ">= 2.0x", "met"), table) // run vs three
    assertEquals(last("interactive line through mux, median", 3), Seq("120.00 ms", "< 100 ms", "MISSED"), table)
    assertEquals(last("heap of a stage", 3), Seq("31.00 MiB", "< 256 MiB", "met"), table)
    assert(!rowOf("cat IN > OUT").contains("met") && !rowOf("cat IN > OUT").contains("MISSED"), "a row without a target has no status")
    val summary = Report.summary(Seq(pipeline, file))
    assert(summary.contains("\n3 of 8 targets MISSED:\n"), summary)
    assert(summary.contains(s"  pipeline: ${three.name} vs ${cat.name}: 0.07x, target >= 1.0x\n"), summary)
    assert(summary.contains("  pipeline: interactive line through mux, median: 120.00 ms, target < 100 ms\n"), summary)
    assert(summary.contains("  file: PIO readString 4 B vs Files.readString 4 B: 0.866x, target >= 0.87x (time <= 1.15x)\n"),
      s"a miss that rounds to its bound keeps a third decimal: $summary")
    assertEquals(Report.summary(Seq(allMet)), "\nall 2 targets met\n")
    assertEquals(Report.summary(Seq(allMet.copy(comparisons = Nil, figures = Nil))), "\nno targets to check\n")

  test("each measurement's figures and each warning are printed once, however many comparisons share it"):
    val table = Report.table(shared)
    for m <- shared.measurements do
      assertEquals(s"${Report.number(m.median)} ${m.unit}".r.findAllMatchIn(table).size, 1, s"${m.name}:\n$table")
      if m.noisy then assertEquals(table.linesIterator.count(_.startsWith(s"warning: '${m.name}'")), 1, table)
    assertEquals(table.linesIterator.count(_.startsWith("warning: ")), 2, table)
    assertEquals(table.linesIterator.count(_.startsWith("race of three ")), 1, s"one row for the subject of two comparisons:\n$table")
    assertEquals(table.linesIterator.count(_.contains("as above")), 1, table)

  tempDir.test("--check: status 1 when a target was missed, naming how many; 0 when all were met, and 0 without it"): dir =>
    val (missed, err) = run(Fixed(pipeline), "--check")
    assertEquals(missed, 1)
    assert(err.contains("bench --check: 2 of 4 targets missed"), err)
    assertEquals(run(Fixed(pipeline))._1, 0, "without --check a missed target does not change the status")
    assertEquals(run(Fixed(allMet), "--check")._1, 0)
    val (_, _, out) = runOut(Fixed(pipeline), "--check")
    assert(out.contains("\n2 of 4 targets MISSED:\n"), out)

  tempDir.test("--plot into a directory, into a missing one or with another extension is a usage error before any suite runs"): dir =>
    val tripwire = Fixed(pipeline)
    val missingDir = dir / "not-there"
    for (path, rule) <- Seq(
      dir.toString -> "it is a directory",
      (missingDir / "c.svg").toString -> s"the directory $missingDir does not exist",
      (dir / "c.jpg").toString -> "drawn as .svg or .png, by the file's extension; '.jpg' is neither",
      (dir / "chart").toString -> "a name without an extension is neither"
    ) do
      val (status, err) = run(tripwire, "--plot", path)
      assertEquals(status, 2, err)
      assert(err.contains(s"'$path'") && err.contains(rule), err)
    assertEquals(tripwire.runs, 0, "a suite ran")
    assert(!os.exists(missingDir), "the missing directory was created")
    val (status, err) = run(tripwire, "--json", dir.toString)
    assertEquals(status, 2, err)
    assert(err.contains("it is a directory"), err)
    assertEquals(tripwire.runs, 0, "a suite ran")

  tempDir.test("--plot FILE.png and FILE.SVG write the chart in the format their extension names"): dir =>
    val suite = Fixed(pipeline)
    assertEquals(run(suite, "--plot", (dir / "c.png").toString)._1, 0)
    val image = javax.imageio.ImageIO.read((dir / "c.png").toIO)
    assert(image != null, "not a PNG ImageIO can read")
    assertEquals(run(suite, "--plot", (dir / "c.SVG").toString)._1, 0)
    assert(os.read(dir / "c.SVG").startsWith("<svg"))
    assertEquals(suite.runs, 2)

  test("the SVG chart: every label whole, every target marked, a loss drawn left of 1.0x and a win right of it"):
    val results = Seq(pipeline, file, timers)
    val svg = ChartSvg.render(Chart.layout(results, "machine: test", ChartSvg.textWidth))
    val comparisons = results.flatMap(_.comparisons)
    for c <- comparisons do
      assert(svg.contains(s">${ChartSvg.esc(c.subject.name)}</text>"), s"label '${c.subject.name}' not whole")
      assert(svg.contains(s">vs ${ChartSvg.esc(c.baseline.name)}</text>"), s"label 'vs ${c.baseline.name}' not whole")
    for r <- results do assert(svg.contains(s""">${r.name}</text>"""), s"no heading for ${r.name}")
    val one = """<line class="one" x1="([\d.]+)"""".r.findFirstMatchIn(svg).getOrElse(fail("no 1.0x line")).group(1).toDouble
    val bars = """<rect class="bar (\w+)" data-row="([^"]*)" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"""".r.findAllMatchIn(svg)
      .map(m => m.group(2) -> (m.group(1), m.group(3).toDouble, m.group(4).toDouble)).toMap
    assertEquals(bars.size, comparisons.size)
    for c <- comparisons do
      val (status, x, width) = bars(ChartSvg.esc(c.label))
      assertEquals(status, c.verdict.fold("none")(v => if v.met then "met" else "missed"), c.label)
      if c.ratio < 1 then assertEqualsDouble(x + width, one, 0.11, s"${c.label}: a loss ends at 1.0x")
      else assertEqualsDouble(x, one, 0.11, s"${c.label}: a win starts at 1.0x")
    val (status, x, width) = bars(ChartSvg.esc(s"${three.name} vs ${cat.name}"))
    assertEquals(status, "missed")
    assert(x < one - 100 && width > 100, s"0.07x: a long bar left of 1.0x ($x + $width, 1.0x at $one)")
    val targets = """<line class="target" x1="([\d.]+)"""".r.findAllMatchIn(svg).map(_.group(1).toDouble).toSeq
    assertEquals(targets.size, comparisons.count(_.target.isDefined))
    assert(targets.exists(_ > one + 20), "the >= 2.0x target right of 1.0x")
    assert(targets.count(_ < one - 10) == 4, s"the four file targets (0.87x, 0.67x) left of 1.0x: $targets")
    for word <- Seq("met", "MISSED", "no target") do assert(svg.contains(s">$word</text>"), s"no status '$word' in words")
    assert(svg.contains(">MISSED  interactive line through mux, median: 120.00 ms, target &lt; 100 ms</text>"), "the missed figure")
    for t <- Seq("0.1x", "0.5x", "1x", "2x", "10x") do assert(svg.contains(s""">$t</text>"""), s"no axis tick $t")

  test("the chart's texts stay inside it and its labels left of the bars, measured as each renderer draws them"):
    for width <- Seq(ChartSvg.textWidth, ChartPng.textWidth) do
      val chart = Chart.layout(Seq(pipeline, file, timers), "machine: a CPU with a long name, 2 cores", width)
      val plotLeft = chart.shapes.collect { case Shape.Box(x, _, _, _, _, role, _) if role.startsWith("bar") => x }.min
      for case Shape.Text(x, _, text, style, _, anchor, role) <- chart.shapes do
        val w = width(text, style)
        val (left, right) = anchor match
          case Anchor.Start  => (x, x + w)
          case Anchor.Middle => (x - w / 2, x + w / 2)
          case Anchor.End    => (x - w, x)
        assert(left >= 0 && right <= chart.width, s"'$text' at $left-$right, outside 0-${chart.width}")
        if role == "label" then assert(right < plotLeft, s"label '$text' ends at $right, over the bars from $plotLeft")

  test("the SVG's width estimate is no narrower than the font the PNG draws with"):
    val texts = Seq(pipeline, file).flatMap(_.comparisons).flatMap(c => Seq(c.subject.name, s"vs ${c.baseline.name}", c.label)) ++
      Seq("MISSED", "0.07x", "WWWWmmmm %%%", "iiiilll.,;:", "target >= 0.87x (time <= 1.15x)")
    for t <- texts; style <- Seq(TextStyle(13), TextStyle(12), TextStyle(13, bold = true)) do
      val (estimate, drawn) = (ChartSvg.textWidth(t, style), ChartPng.textWidth(t, style))
      assert(estimate >= drawn, s"'$t' $style: estimated $estimate, drawn $drawn")

  test("the axis is centred on 1.0x and wide enough for every ratio and target, with 0.5x and 2x labelled"):
    def axis(ratios: Double*) = Chart.Axis(ratios.map(r => Comparison(m("s", r), m("b", 1), None)))
    assertEquals(axis(1.05).span, 2.0)
    assertEquals(axis(1 / 13.78).span, 20.0, "a loss of 13.78x as far as a win of 13.78x")
    assertEquals(axis(13.78).span, 20.0)
    assertEquals(axis(0.5, 76.75).span, 100.0)
    assertEquals(Chart.Axis(Seq(Comparison(m("s", 1), m("b", 1), Some(Target.atLeast(4.5))))).span, 10.0, "room for the target's mark")
    assertEquals(axis(1e9).span, 1000.0, "at most 1000x either way")
    assertEqualsDouble(axis(2).x(1.0) * 2, axis(2).x(2.0) + axis(2).x(0.5), 1e-9)
    assertEquals(axis(13.78).ticks.map(Chart.Axis.label), Seq("0.05x", "0.1x", "0.2x", "0.5x", "1x", "2x", "5x", "10x", "20x"))
    assertEquals(axis(76.75).ticks.map(Chart.Axis.label), Seq("0.01x", "0.1x", "0.5x", "1x", "2x", "10x", "100x"))
    assertEquals(axis(0.0).position(0.0), None, "no bar for a ratio that is not a positive number")

  tempDir.test("the PNG chart decodes, has the laid-out size, and paints the 0.07x bar red left of 1.0x"): dir =>
    val results = Seq(pipeline, file, timers)
    val chartFile = ChartFile.read((dir / "chart.png").toString).fold(e => fail(e), identity)
    chartFile.write(results, "machine: test")
    val chart = Chart.layout(results, "machine: test", ChartPng.textWidth)
    val image = javax.imageio.ImageIO.read((dir / "chart.png").toIO)
    assertEquals((image.getWidth, image.getHeight), (chart.width, chart.height))
    val one = chart.shapes.collectFirst { case Shape.Line(x, _, _, _, _, _, "one") => x }.getOrElse(fail("no 1.0x line"))
    val bar = chart.shapes.collectFirst { case b: Shape.Box if b.row == s"${three.name} vs ${cat.name}" => b }.getOrElse(fail("no bar"))
    assert(bar.x + bar.w <= one + 0.01 && bar.w > 100, s"$bar, 1.0x at $one")
    val (px, py) = ((bar.x + bar.w / 2).toInt, (bar.y + bar.h / 2).toInt)
    assertEquals(image.getRGB(px, py) & 0xffffff, Chart.Missed.rgb, s"pixel at $px,$py")
    assert(os.size(dir / "chart.png") < 150_000, s"${os.size(dir / "chart.png")} bytes")

object BenchTest:
  /** A suite that measures nothing: it gives `result`, and counts how often it was asked. */
  final class Fixed(result: SuiteResult) extends Suite:
    val name: String = result.name
    val description = "results chosen by a test"
    @volatile var runs = 0
    def run(h: Harness): SuiteResult = { runs += 1; result }

  def m(name: String, median: Double, unit: String = "MiB/s", spread: Double = 0.02) =
    Measurement(name, Seq(median * (1 - spread / 2), median, median * (1 + spread / 2)), None, 0, unit)

  // The pipeline suite's shapes, with cat 13.78x faster than three asyncpipe processes (0.07x).
  val three: Measurement = m("asyncpipe file:IN | asyncpipe mux | asyncpipe file:OUT", 100)
  val cat: Measurement = m("cat IN | cat | cat > OUT", 1378)
  val pipeline: SuiteResult = SuiteResult("pipeline", Seq(
    Comparison(three, cat, Some(Target.atLeast(1.0))),
    Comparison(m("asyncpipe run 'file:IN | mux | file:OUT'", 250), three, Some(Target.atLeast(2.0))),
    Comparison(m("cat IN > OUT (one copy: about the most run can do)", 1500), three, None)
  ), Seq(
    Figure("interactive line through mux, median", 120, "ms", Some(Target.below(100))),
    Figure("heap of a stage whose consumer stopped reading", 31, "MiB", Some(Target.below(256))),
    Figure("in-process run, seq lines: frames/s", 1e7, "frames/s", None)
  ))
  val file: SuiteResult = SuiteResult("file", Seq(
    Comparison(m("PIO readString 4 B", 86.6, "ops/s"), m("Files.readString 4 B", 100, "ops/s"), Some(Target.timeWithin(1.15))),
    Comparison(m("PIO writeString 4 B", 88, "ops/s"), m("Files.writeString 4 B", 100, "ops/s"), Some(Target.timeWithin(1.15))),
    Comparison(m("PIO readString 40 MB", 9, "ops/s"), m("Files.readString 40 MB", 10, "ops/s"), Some(Target.timeWithin(1.5))),
    Comparison(m("PIO writeString 40 MB", 7, "ops/s"), m("Files.writeString 40 MB", 10, "ops/s"), Some(Target.timeWithin(1.5)))
  ), Nil)
  val timers: SuiteResult = SuiteResult("timers", Nil, Seq(Figure("heap for 100,000 pending timers", 13, "MiB", Some(Target.below(64)))))
  val allMet: SuiteResult = SuiteResult("race", Seq(Comparison(m("race of three", 170, "ops/s"), m("await the fastest", 160, "ops/s"), Some(Target.atLeast(0.95)))),
    Seq(Figure("threads added for them", 1, "threads", Some(Target.atMost(1)))))
  /** A subject compared with two baselines, one of them also another comparison's subject; two noisy. */
  val shared: SuiteResult =
    val race = m("race of three", 173, "ops/s", spread = 0.5)
    val fastest = m("await the fastest", 162, "ops/s", spread = 0.4)
    SuiteResult("race", Seq(
      Comparison(race, fastest, Some(Target.atLeast(0.95))),
      Comparison(race, m("spin on a flag", 110, "ops/s"), None),
      Comparison(fastest, m("sleep alone", 200, "ops/s"), None)
    ), Nil)

  /** Runs `BenchVerb` over `suite` with `args` (a quick plan): the status, as `Main` gives it, and stderr. */
  def run(suite: Suite, args: String*): (Int, String) =
    val (status, err, _) = runOut(suite, args*)
    (status, err)

  def runOut(suite: Suite, args: String*): (Int, String, String) =
    val (out, err) = (ByteArrayOutputStream(), ByteArrayOutputStream())
    val io = Io(OwnedOutput(Channels.newChannel(out)), PrintStream(err, true, "UTF-8"))
    val status = BenchVerb(Seq(suite)).run("--quick" +: args, io) match
      case Right(s) => s
      case Left(e)  => { io.err.println(e.render); e.exitCode }
    io.out.flush()
    (status, err.toString("UTF-8"), out.toString("UTF-8"))
