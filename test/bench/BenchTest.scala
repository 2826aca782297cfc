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
  override val munitTimeout = scala.concurrent.duration.Duration(300, "s") // a quick run of every suite: about 95 s alone, more on a loaded machine

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
    val svg = os.read(dir / "b.svg")
    assert(svg.startsWith("<svg"), svg.take(100))
    assertEquals("<rect x=".r.findAllIn(svg).size, comparisons)

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
    val (s1, e1) = run("bench", "channelz")
    assertEquals(s1, 2)
    assert(e1.contains("'channelz'") && e1.contains("future"), e1)
    val (s2, e2) = run("bench", "--jsn", "x")
    assertEquals(s2, 2)
    assert(e2.contains("'--jsn'"), e2)
    val (s3, e3) = run("bench", "channelz", "--quick")
    assertEquals(s3, 2, "an option after a suite name must not hide the bad name")
    assert(e3.contains("'channelz'"), e3)
    val (s4, e4) = run("bench", "channels", "--forks", "0")
    assertEquals(s4, 2)
    assert(e4.contains("'0'") && e4.contains("from 1 to 100"), e4)
    val (s5, e5) = run("bench", "channels", "--fork-plan", "1,2,0.05")
    assertEquals(s5, 2, "a fork's plan without its output file")
    assert(e5.contains("--fork-out"), e5)
    val (s6, e6) = run("bench", "channels", "--fork-plan", "1,two,0.05", "--fork-out", "/dev/null")
    assertEquals(s6, 2)
    assert(e6.contains("'1,two,0.05'"), e6)

  tempDir.test("options may follow the suite names"): dir =>
    val err = ByteArrayOutputStream()
    val status = Main.run(Seq("bench", "race", "--quick", "--json", (dir / "r.json").toString),
      Io(OwnedOutput(Channels.newChannel(ByteArrayOutputStream())), PrintStream(err, true, "UTF-8")))
    assertEquals(status, 0, err.toString("UTF-8"))
    assertEquals(ujson.read(os.read(dir / "r.json"))("suites").arr.map(_("name").str).toSeq, Seq("race"))

  tempDir.test("--forks 2 measures a forked suite in two JVMs and pools their iterations; other suites run once"): dir =>
    val err = ByteArrayOutputStream()
    val out = ByteArrayOutputStream()
    val status = Main.run(Seq("bench", "channels", "race", "--quick", "--forks", "2", "--json", (dir / "f.json").toString),
      Io(OwnedOutput(Channels.newChannel(out)), PrintStream(err, true, "UTF-8")))
    assertEquals(status, 0, err.toString("UTF-8"))
    assert(out.toString("UTF-8").contains("== channels (2 JVMs, their iterations pooled; "), out.toString("UTF-8"))
    val suites = ujson.read(os.read(dir / "f.json"))("suites").arr.map(s => s("name").str -> s).toMap
    val perFork = Plan.Quick.copy(forks = 2).perFork.iterations
    assertEquals(suites("channels")("forks").num.toInt, 2)
    assertEquals(suites("race")("forks").num.toInt, 1)
    for c <- suites("channels")("comparisons").arr; side <- Seq("subject", "baseline") do
      assertEquals(c(side)("iterations").arr.size, 2 * perFork, c(side).toString)
    for c <- suites("race")("comparisons").arr do assertEquals(c("subject")("iterations").arr.size, Plan.Quick.iterations)
