package asyncpipe.bench

import java.nio.charset.StandardCharsets
import java.nio.file.Files

/** A suite measured in several fresh JVMs ("forks"), their iterations pooled.
  *
  * Why: some figures depend on choices a JVM makes once and keeps for its life (how C2 compiled
  * a hot loop, where the scheduler placed the carrier threads), so two runs of one suite could
  * differ more than the iterations inside either, each run's iterations keeping to its own level;
  * pooled over fresh JVMs, the medians agree (figures: doc/adr/0017).
  *
  * How: the parent starts `asyncpipe bench SUITE` once per fork with the JVM options it runs
  * with itself, hidden options carrying the per-fork plan ([[Plan.perFork]]) and a file for the
  * result, written in a line format of its own ([[encode]]). A measurement's pooled figures are
  * every fork's iterations; bytes per operation is the median of the forks', GC counts add up;
  * a free-standing figure is the median of the forks'.
  *
  * A suite with [[Suite.parts]] is measured part by part: each part in forks of its own (a hidden
  * option names the part), so that a part's code is compiled by a JIT that has seen only that
  * part (in one JVM, every channel kind's calls go through the same methods, so what one row
  * measures depends on which rows ran before it); and all of that twice, once under the
  * launcher's flags ([[Flags.Launcher]]: what `asyncpipe` runs with) and once under the JVM's
  * defaults ([[Flags.Defaults]]: what a library user's JVM runs with), the second set's names
  * marked [[Flags.DefaultsMark]].
  */
private[bench] object Forks:
  /** Runs `suite` in `plan.forks` child JVMs (per part and flag set, if it has parts: those of
    * `parts`, its own by default) and pools their results.
    */
  def run(suite: Suite, plan: Plan, progress: String => Unit, parts: Seq[String] = Nil): SuiteResult =
    if suite.parts.isEmpty then pool(forks(suite, None, Flags.Launcher, plan, progress))
    else
      val measured = if parts.isEmpty then suite.parts else parts
      val sets = Flags.values.toSeq.map { flags =>
        val whole = measured.map(part => pool(forks(suite, Some(part), flags, plan, progress))).reduce(_ ++ _)
        if flags == Flags.Defaults then whole.named(Flags.DefaultsMark) else whole
      }
      sets.reduce(_ ++ _).copy(partsApart = true)

  /** The JVM options a fork runs with. */
  enum Flags:
    /** This JVM's own: the launcher's flags when the bench runs as `asyncpipe bench`. */
    case Launcher
    /** This JVM's own less every `-XX:` and `-Xlog` option, agent and module option
      * (`--add-opens`, `--enable-native-access`): the JIT, GC, object layout and AOT cache of a
      * JVM started without flags, and the closed JDK of a library user's JVM (the channel reads
      * a virtual thread's carrier only where java.lang is open: doc/adr/0011); system
      * properties and heap sizes stay.
      */
    case Defaults

    def options: Seq[String] = this match
      case Launcher => Processes.ownOptions
      case Defaults => Processes.ownOptions.filterNot(Flags.tuning)

  object Flags:
    /** What follows the names of the measurements and figures made under [[Defaults]]. */
    val DefaultsMark = " [JVM defaults]"
    /** Whether `option` is one that [[Defaults]] leaves out. */
    def tuning(option: String): Boolean =
      Seq("-XX:", "-Xlog", "-agentlib", "-javaagent", "--add-opens", "--add-exports", "--enable-native-access").exists(option.startsWith)

  /** The results of `plan.forks` forks of `suite` (or its `part`) under `flags`, one after the other. */
  private def forks(suite: Suite, part: Option[String], flags: Flags, plan: Plan, progress: String => Unit): Seq[SuiteResult] =
    val perFork = plan.perFork
    val what = part.fold(suite.name)(p => s"${suite.name} $p${if flags == Flags.Defaults then Flags.DefaultsMark else ""}")
    (1 to plan.forks).map { k =>
      progress(s"$what: fork $k/${plan.forks}")
      val out = Files.createTempFile("asyncpipe-bench-fork", ".txt")
      try
        val args = Seq("bench", suite.name, "--fork-plan", perFork.spec, "--fork-out", out.toString) ++
          part.toSeq.flatMap(p => Seq("--fork-part", p))
        Processes.shell((Processes.command(flags.options) +: args.map(Processes.q)).mkString(" "))
        decode(Files.readString(out, StandardCharsets.UTF_8))
      finally Files.deleteIfExists(out)
    }

  /** One result from the results of several forks of one suite (see the object's comment). */
  def pool(results: Seq[SuiteResult]): SuiteResult =
    require(results.nonEmpty, "no fork results to pool")
    val first = results.head
    def measurements(r: SuiteResult) = r.measurements.map(m => m.name -> m).toMap
    val all = results.map(measurements)
    val pooled = measurements(first).keys.map { name =>
      val ms = all.map(_.getOrElse(name, throw IllegalStateException(s"fork results differ: no '$name' in one")))
      name -> Measurement(name, ms.flatMap(_.perIteration), median(ms.flatMap(_.bytesPerOp)), ms.map(_.gcCount).sum, ms.head.unit)
    }.toMap
    val figures = first.figures.map { f =>
      val values = results.map(_.figures.find(_.name == f.name)
        .getOrElse(throw IllegalStateException(s"fork results differ: no figure '${f.name}' in one")).value)
      f.copy(value = median(values).get)
    }
    SuiteResult(first.name, first.comparisons.map(c => Comparison(pooled(c.subject.name), pooled(c.baseline.name), c.target)),
      figures, forks = results.size)

  private def median(xs: Seq[Double]): Option[Double] = Option.when(xs.nonEmpty)(Measurement.medianOf(xs))

  // ---------------------------------------------------------------------------------------------
  // The fork's result file: one line per measurement (M), comparison (C) and figure (F), fields
  // separated by tabs, "-" for an absent value; numbers as Double.toString writes them, so they
  // read back exactly; a target as its Target.spec.

  def encode(r: SuiteResult): String =
    def field(s: String) =
      require(!s.exists(c => c == '\t' || c == '\n'), s"a tab or newline in '$s'")
      s
    def opt(o: Option[String]) = o.fold("-")(field)
    val ms = r.measurements
    val lines =
      Seq(s"S\t${field(r.name)}") ++
        ms.map(m => Seq("M", field(m.name), field(m.unit), opt(m.bytesPerOp.map(_.toString)), m.gcCount.toString,
          m.perIteration.mkString(" ")).mkString("\t")) ++
        r.comparisons.map(c => Seq("C", c.subject.name, c.baseline.name, opt(c.target.map(_.spec))).mkString("\t")) ++
        r.figures.map(f => Seq("F", field(f.name), f.value.toString, field(f.unit), opt(f.target.map(_.spec))).mkString("\t"))
    lines.mkString("", "\n", "\n")

  def decode(text: String): SuiteResult =
    def opt(s: String) = Option.when(s != "-")(s)
    def bad(line: String) = IllegalStateException(s"a bench fork wrote a line this version cannot read: '$line'")
    val rows = text.linesIterator.filter(_.nonEmpty).map(l => l -> l.split("\t", -1).toSeq).toSeq
    val name = rows.collectFirst { case (_, Seq("S", n)) => n }.getOrElse(throw bad(text.take(200)))
    val ms = rows.collect {
      case (_, Seq("M", n, unit, bytes, gcs, its)) =>
        n -> Measurement(n, its.split(' ').toSeq.map(_.toDouble), opt(bytes).map(_.toDouble), gcs.toLong, unit)
    }.toMap
    def target(line: String, spec: String) = opt(spec).map(t => Target.parse(t).getOrElse(throw bad(line)))
    val comparisons = rows.collect { case (line, Seq("C", s, b, t)) =>
      Comparison(ms.getOrElse(s, throw bad(line)), ms.getOrElse(b, throw bad(line)), target(line, t))
    }
    val figures = rows.collect { case (line, Seq("F", n, v, unit, t)) => Figure(n, v.toDouble, unit, target(line, t)) }
    rows.foreach { case (line, fields) => if !Set("S", "M", "C", "F")(fields.head) then throw bad(line) }
    SuiteResult(name, comparisons, figures)
