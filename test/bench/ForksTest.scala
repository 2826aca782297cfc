package asyncpipe.bench

/** The pieces of forked measurement that need no JVM of their own: a fork's plan, the result
  * file's round trip, and pooling.
  */
class ForksTest extends munit.FunSuite:
  private def m(name: String, its: Seq[Double], bytes: Option[Double] = None, gcs: Long = 0) =
    Measurement(name, its, bytes, gcs)

  private val one = SuiteResult("channels",
    Seq(
      Comparison(m("A", Seq(10, 11, 12), Some(8.5), 1), m("base", Seq(5, 5.5, 6)), Some(Target.atLeast(1.0))),
      Comparison(m("A", Seq(10, 11, 12), Some(8.5), 1), m("spin", Seq(20, 21, 1e-3)), None)
    ),
    Seq(Figure("A allocation per element", 8.5, "B/op", Some(Target.atMost(16))), Figure("odd, name: 1/2", 0.1, "ms", None)))

  test("a fork does the whole warm-up and its share of the iterations, at least two"):
    assertEquals(Plan.Full.perFork, Plan(3, 2, 1.0, 1))
    assertEquals(Plan(3, 7, 1.0, 7).perFork.iterations, 2)
    assertEquals(Plan(0, 6, 0.5, 2).perFork, Plan(0, 3, 0.5, 1))
    assertEquals(Plan.Quick.perFork, Plan.Quick, "one fork is the plan itself")

  test("a fork's plan survives the command line; a malformed one is refused"):
    val p = Plan(1, 3, 0.05)
    assertEquals(Plan.parse(p.spec), Some(p))
    for bad <- Seq("", "1,3", "1,3,0.05,2", "a,3,1.0", "1,0,1.0", "-1,3,1.0", "1,3,0", "1,3,x") do
      assertEquals(Plan.parse(bad), None, bad)

  test("a fork's result reads back exactly: iterations, absent values, targets and figures"):
    val back = Forks.decode(Forks.encode(one))
    assertEquals(back, one)
    assertEquals(back.comparisons(1).target, None)
    assertEquals(back.comparisons(1).baseline.perIteration.last, 1e-3)

  test("every kind of target survives a fork's result file, and one the reader does not know fails"):
    val targets = Seq(Target.atLeast(0.95), Target.atMost(16), Target.below(5100), Target.exactly(100), Target.timeWithin(1.15))
    val r = one.copy(figures = targets.zipWithIndex.map((t, i) => Figure(s"figure $i", i.toDouble, "ms", Some(t))))
    assertEquals(Forks.decode(Forks.encode(r)).figures.map(_.target), targets.map(Some(_)))
    val e = intercept[IllegalStateException](Forks.decode(Forks.encode(one) + "F\tx\t1.0\tms\tAbout:3\n"))
    assert(e.getMessage.contains("About:3"), e.getMessage)

  test("a line the reader does not know fails with the line in the message"):
    val e = intercept[IllegalStateException](Forks.decode(Forks.encode(one) + "X\tsomething new\n"))
    assert(e.getMessage.contains("'X\tsomething new'"), e.getMessage)

  test("pooling joins every fork's iterations, adds GC counts, takes medians of bytes and figures"):
    val two = SuiteResult("channels",
      Seq(
        Comparison(m("A", Seq(30, 31), Some(9.5), 2), m("base", Seq(7, 8)), Some(Target.atLeast(1.0))),
        Comparison(m("A", Seq(30, 31), Some(9.5), 2), m("spin", Seq(22, 23)), None)
      ),
      Seq(Figure("A allocation per element", 9.5, "B/op", Some(Target.atMost(16))), Figure("odd, name: 1/2", 0.3, "ms", None)))
    val three = two.copy(figures = two.figures.map(f => f.copy(value = f.value * 10)))
    val p = Forks.pool(Seq(one, two, three))
    assertEquals(p.forks, 3)
    val a = p.comparisons.head.subject
    assertEquals(a.perIteration, Seq[Double](10, 11, 12, 30, 31, 30, 31))
    assertEquals(a.median, 30.0)
    assertEquals(a.gcCount, 5L)
    assertEquals(a.bytesPerOp, Some(9.5))
    assertEquals(p.comparisons.head.ratio, 30.0 / 7)
    assertEquals(p.comparisons(1).target, None)
    assertEquals(p.figures.map(_.value), Seq(9.5, 0.3))

  test("a suite's parts join in order; a flag set's mark follows every measurement's and figure's name"):
    val part2 = SuiteResult("channels", Seq(Comparison(m("B", Seq(1)), m("base2", Seq(2)), None)), Seq(Figure("B per op", 3, "B/op", None)))
    val both = one ++ part2
    assertEquals(both.comparisons.map(_.subject.name), Seq("A", "A", "B"))
    assertEquals(both.figures.map(_.name), Seq("A allocation per element", "odd, name: 1/2", "B per op"))
    val marked = both.named(" [JVM defaults]")
    assertEquals(marked.measurements.map(_.name), Seq("A", "base", "spin", "B", "base2").map(_ + " [JVM defaults]"))
    assertEquals(marked.figures.map(_.name), both.figures.map(_.name + " [JVM defaults]"))
    assertEquals(marked.comparisons.map(_.ratio), both.comparisons.map(_.ratio))
    assertEquals(marked.verdicts.map(_.met), both.verdicts.map(_.met))

  test("JVM defaults leave out every -XX and -Xlog option, agents and module options, and keep properties and heap sizes"):
    val own = Seq("-XX:+UseCompactObjectHeaders", "-XX:AOTCache=/x/a.aot", "-Xlog:disable", "-Xlog:all=warning:stderr",
      "-agentlib:jdwp=x", "-javaagent:a.jar", "-Djdk.virtualThreadScheduler.parallelism=1", "--add-opens=java.base/java.lang=ALL-UNNAMED",
      "--enable-native-access=ALL-UNNAMED", "-Xmx2g")
    assertEquals(own.filterNot(Forks.Flags.tuning), Seq("-Djdk.virtualThreadScheduler.parallelism=1", "-Xmx2g"))

  test("pooling refuses forks that measured different things"):
    val other = one.copy(comparisons = one.comparisons.map(c => c.copy(baseline = c.baseline.copy(name = "else"))))
    val e = intercept[IllegalStateException](Forks.pool(Seq(one, other)))
    assert(e.getMessage.contains("'base'"), e.getMessage)
