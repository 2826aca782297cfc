package asyncpipe.cli

import asyncpipe.cli.command.*

import asyncpipe.async.Watchdog
import java.io.{ByteArrayOutputStream, File, IOException, InputStream, OutputStream}
import java.lang.ProcessBuilder.Redirect
import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets.{ISO_8859_1, US_ASCII}
import java.nio.file.{Files, Path as JPath}
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicLong
import java.util.concurrent.locks.LockSupport
import scala.collection.mutable.ArrayBuffer
import scala.concurrent.duration.{Duration, FiniteDuration}
import scala.jdk.CollectionConverters.*
import scala.util.{Random, Try}

/** Signals at random moments over many runs, each checked exactly.
  *
  * Every run draws, from a seed of its own, a stage form, a framing, inputs, a reader (or a feeder
  * of stdin), a fault and its moment; runs the built tool as real processes (see [[Launch]]) on
  * real pipes and files; sends real signals with `kill -s SIG PID`; and then checks:
  *   - every output, parsed frame by frame, is per input an in-order prefix of that input's frames,
  *     each frame byte for byte as it went in (none torn, merged, lost or duplicated), and ends on
  *     a whole frame (only `head -c N`, the reader that leaves, may cut one);
  *   - every exit status is the documented one (README "Stages" and "Task runner", `--help`): the
  *     first signal's 130/143/129, also after a second signal; 141 and an empty stderr when the
  *     reader went away; 0 and a byte-exact copy when no fault came (or SIGSTOP and SIGCONT); under
  *     `--final-delimiter require`, 0 or 1 (saying why) for the last stage when the middle one of
  *     three was killed; nothing on stderr but that;
  *   - no process of the run is left: none whose command line holds the run's marker (its
  *     directory's name, a JVM property of every JVM it starts, and the task verbs' commands).
  *
  * A signal that reaches a JVM before asyncpipe's `main` installed its handlers meets the JVM's own
  * (a JDK limitation: `Runtime.exit` and its logging in a JVM still starting up). Such a signal
  * is noticed when it is sent (the JVM has none of its carrier or asyncpipe threads yet, see
  * [[reachedMain]]), and a wrong status or stderr after it is counted apart, as a start-up-window
  * anomaly, and printed; it fails nothing. Torn, lost or duplicated frames and orphans fail the
  * suite whenever they happen.
  *
  * Sizing (an environment variable, as the stress tests): ASYNCPIPE_FAULT_RUNS runs in all (spread
  * over the cases by weight; default [[Settings.DefaultRuns]], a couple of minutes here),
  * ASYNCPIPE_FAULT_SEED the base seed (printed in every summary and failure),
  * ASYNCPIPE_FAULT_CASES a comma-separated subset of the case ids, ASYNCPIPE_FAULT_REPLAY=ID:SEED one
  * run's plan (from a failure message) repeated ASYNCPIPE_FAULT_RUNS times (default once), and
  * ASYNCPIPE_FAULT_VERBOSE=1 prints every run's story.
  * The single-fault regression tests are [[FaultTest]].
  */
class FaultSuite extends munit.FunSuite with Watchdog:
  import FaultSuite.*

  override def watchdog: FiniteDuration = Duration(300L + 90L * Settings.maxRunsPerCase, TimeUnit.SECONDS)
  // munit's own bound on a test's future (30 s by default) applies to the one Watchdog returns:
  // a case takes minutes, and the watchdog bounds it.
  override def munitTimeout: Duration = watchdog + Duration(60, TimeUnit.SECONDS)

  override def beforeAll(): Unit =
    assume(Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")

  for c <- Case.values do
    test(s"fault suite, ${c.id}: ${c.title}"):
      val runs = Settings.runs(c)
      assume(runs > 0, s"case ${c.id} not selected (ASYNCPIPE_FAULT_CASES / ASYNCPIPE_FAULT_REPLAY)")
      assume(usableSignals.nonEmpty, "SIGINT, SIGTERM and SIGHUP are all ignored in this test JVM's children")
      val tally = Tally(c)
      val root = os.temp.dir(prefix = s"asyncpipe-faults-${c.id}-")
      val seeds = Random(Settings.baseSeed ^ c.id.hashCode.toLong)
      val started = System.nanoTime()
      try
        for i <- 0 until runs do
          val seed = Settings.replay.fold(seeds.nextLong())(_._2)
          val run = Run(c, i, seed, root)
          try
            try c.body(run)
            catch
              case e: Throwable if !e.isInstanceOf[VirtualMachineError] && !e.isInstanceOf[InterruptedException] =>
                run.problem(Kind.Harness, s"the run itself failed: $e\n    ${e.getStackTrace.take(8).mkString("\n    ")}")
            run.checkOrphans()
            tally.add(run) // before close(), which removes the run's files (its stderr among them)
          finally run.close()
      finally os.remove.all(root)
      val took = (System.nanoTime() - started) / 1_000_000_000
      println(tally.summary(took))
      tally.printAnomalies()
      if tally.failures.nonEmpty then
        fail(s"${tally.summary(took)}\n\n${tally.failures.take(6).mkString("\n\n")}" +
          (if tally.failures.size > 6 then s"\n\n... and ${tally.failures.size - 6} more failed runs" else ""))

object FaultSuite:
  // =================================================================================================
  // Settings

  object Settings:
    val DefaultRuns = 60
    private def env(name: String): Option[String] = sys.env.get(name).map(_.trim).filter(_.nonEmpty)
    /** ASYNCPIPE_FAULT_REPLAY=ID:SEED: that case only, every run with that seed. */
    val replay: Option[(String, Long)] = env("ASYNCPIPE_FAULT_REPLAY").map { s =>
      val (id, seed) = s.span(_ != ':')
      id -> seed.drop(1).toLong
    }
    val totalRuns: Int = env("ASYNCPIPE_FAULT_RUNS").flatMap(_.toIntOption).filter(_ >= 0)
      .getOrElse(if replay.isDefined then 1 else DefaultRuns)
    /** ASYNCPIPE_FAULT_VERBOSE=1: every run's story, not only the failed ones'. */
    val verbose: Boolean = env("ASYNCPIPE_FAULT_VERBOSE").isDefined
    val baseSeed: Long = env("ASYNCPIPE_FAULT_SEED").flatMap(_.toLongOption).getOrElse(Random().nextLong())
    private val selected: Set[String] = replay.map(r => Set(r._1))
      .orElse(env("ASYNCPIPE_FAULT_CASES").map(_.split(",").map(_.trim).toSet))
      .getOrElse(Case.values.map(_.id).toSet)

    /** The runs of case `c`: its share of the total by weight (at least one), or all of them in
      * a replay.
      */
    def runs(c: Case): Int =
      if !selected(c.id) then 0
      else if replay.isDefined then totalRuns
      else
        val cases = Case.values.filter(k => selected(k.id))
        val weights = cases.map(_.weight).sum
        math.max(1, math.round(totalRuns.toDouble * c.weight / weights).toInt)

    def maxRunsPerCase: Int = Case.values.map(runs).max

  // =================================================================================================
  // The cases

  enum Case(val id: String, val weight: Int, val title: String, val body: Run => Unit):
    case Stage extends Case("stage", 3, "FROM TO (file to file, file to a stdout pipe, a stdin pipe to file)", stageRun)
    case Mux extends Case("mux", 3, "mux with 1-3 inputs and 1-2 outputs", muxRun)
    case InOneJvm extends Case("run", 2, "asyncpipe run 'A | mux | B'", inOneJvmRun)
    case Pipeline extends Case("pipeline", 2, "three processes 'FROM - | mux | --final-delimiter require - TO', signals to one or all, SIGKILL of the middle", pipelineRun)
    case Tasks extends Case("tasks", 2, "every / retry --timeout / repeat, with trees that make process groups of their own", tasksRun)

  // =================================================================================================
  // What can go wrong, and what a run records

  enum Kind(val label: String):
    case Torn extends Kind("torn")
    case LostOrDuplicated extends Kind("lost/duplicated")
    case WrongStatus extends Kind("wrong status")
    case Hung extends Kind("hung")
    case Noise extends Kind("unexpected stderr")
    case Orphan extends Kind("orphaned process")
    case Harness extends Kind("harness error")

  enum Sig(val code: Int):
    case INT extends Sig(ExitCode.Interrupted)
    case TERM extends Sig(ExitCode.Terminated)
    case HUP extends Sig(ExitCode.HungUp)

  /** The signals this JVM's children do not inherit as ignored (a stage keeps an ignored signal
    * ignored, as `nohup` asks): a shell that starts the tests in the background may ignore SIGINT.
    */
  lazy val usableSignals: Seq[Sig] =
    val usable = Sig.values.toSeq.filterNot(s => Launch.ignoredSignals.contains(s.toString))
    if usable.size < Sig.values.length then
      println(s"FaultSuite: this JVM's children ignore ${Sig.values.filterNot(usable.contains).mkString(", ")}: not sent")
    usable

  def pickSig(rnd: Random): Sig = usableSignals(rnd.nextInt(usableSignals.size))

  enum Fault:
    case NoFault
    /** SIGSTOP, then SIGCONT `ms` later. */
    case Pause(ms: Int)
    case One(sig: Sig)
    /** Two signals, `gapMs` apart (0: back to back, from one shell). */
    case Two(first: Sig, second: Sig, gapMs: Int)
    /** The reader is `head -c n`. */
    case ReaderGone(n: Long)
    /** SIGKILL (the middle stage of three). */
    case Kill

    def describe: String = this match
      case NoFault            => "no fault"
      case Pause(ms)          => s"SIGSTOP, SIGCONT $ms ms later"
      case One(s)             => s"SIG$s"
      case Two(a, b, 0)       => s"SIG$a and SIG$b back to back"
      case Two(a, b, gap)     => s"SIG$a, then SIG$b $gap ms later"
      case ReaderGone(n)      => s"the reader is head -c $n"
      case Kill               => "SIGKILL"

  enum Moment:
    /** `ms` after the process was started. */
    case FromStart(ms: Int)
    /** Once the outputs hold `fraction` of what they would hold at the end, and `ms` more. */
    case AtProgress(fraction: Double, ms: Int)

    def describe: String = this match
      case FromStart(ms)        => s"$ms ms after the start"
      case AtProgress(f, ms)    => f"once the output had ${f * 100}%.0f%% of its bytes, +$ms ms"

  def pickMoment(rnd: Random): Moment = rnd.nextInt(8) match
    case 0 | 1 => Moment.FromStart(rnd.nextInt(61)) // the first 0-60 ms of start-up
    case 2 | 3 => Moment.FromStart(rnd.between(60, 700))
    case _     => Moment.AtProgress(rnd.nextDouble() * 0.95, if rnd.nextBoolean() then 0 else rnd.nextInt(40))

  /** A fault for one stage process; `headOk` when its stdout may be read by `head -c N`. */
  def pickFault(rnd: Random, headOk: Boolean, total: Long): Fault =
    val r = rnd.nextInt(100)
    if r < 8 then Fault.NoFault
    else if r < 16 then Fault.Pause(rnd.between(5, 400))
    else if r < 30 && headOk then Fault.ReaderGone(pickHeadCount(rnd, total))
    else if r < 68 then Fault.One(pickSig(rnd))
    else Fault.Two(pickSig(rnd), pickSig(rnd), if rnd.nextBoolean() then 0 else rnd.between(5, 300))

  def pickHeadCount(rnd: Random, total: Long): Long = rnd.nextInt(6) match
    case 0 => 0
    case 1 => rnd.nextLong(math.min(total, 5_000) + 1)
    case 2 => total + rnd.nextInt(10) // head takes everything
    case _ => (rnd.nextDouble() * total).toLong

  // =================================================================================================
  // Inputs: frames that say which input and which place they are (tag, number), then random bytes

  /** One input: its bytes and where each frame begins (`starts(count)` is the end). Raw input is
    * one "frame" of random bytes.
    */
  final class Input(val tag: Char, val framing: String, val bytes: Array[Byte], val starts: Array[Int]):
    def count: Int = starts.length - 1
    def describe: String = s"input $tag: ${bytes.length} B" + (if framing == "raw" then "" else s", $count frames")

  def pickFraming(rnd: Random, raw: Boolean): String =
    if raw && rnd.nextInt(7) == 0 then "raw" else Seq("lines", "nul", "len")(rnd.nextInt(3))

  /** A total size: from a few bytes to past the 4 MiB after which a stage copies in the kernel. */
  def pickSize(rnd: Random, large: Boolean = false): Int = (if large then rnd.between(2, 10) else rnd.nextInt(10)) match
    case 0 | 1    => rnd.between(1, 4_000)
    case 2 | 3 | 4 => rnd.between(4_000, 400_000)
    case 5 | 6 | 7 => rnd.between(400_000, 3_000_000)
    case _        => rnd.between(3_000_000, 10_000_000)

  def makeInput(tag: Char, framing: String, target: Int, rnd: Random): Input =
    if framing == "raw" then
      val b = new Array[Byte](math.max(1, target))
      rnd.nextBytes(b)
      Input(tag, framing, b, Array(0, b.length))
    else
      val delimiter: Int = if framing == "lines" then '\n' else 0
      val out = ByteArrayOutputStream(target + 64)
      val starts = ArrayBuffer(0)
      val small = math.max(2, math.min(20_000, target / 4))
      var filler = new Array[Byte](1024)
      var n = 0
      while out.size < target do
        val r = rnd.nextInt(100)
        val length =
          if r < 70 then rnd.nextInt(math.min(100, small))
          else if r < 96 || target < 2_000_000 then rnd.nextInt(small)
          else rnd.between(65_000, 1_300_000) // larger than a pipe, and than the kernel's 1 MiB one
        if filler.length < length then filler = new Array[Byte](length)
        rnd.nextBytes(filler)
        var i = 0
        while i < length do
          if filler(i) == delimiter then filler(i) = (delimiter + 1).toByte
          i += 1
        val header = s"$tag$n:".getBytes(US_ASCII)
        if framing == "len" then out.write(ByteBuffer.allocate(4).putInt(header.length + length).array())
        out.write(header)
        out.write(filler, 0, length)
        if framing != "len" then out.write(delimiter)
        starts += out.size
        n += 1
      Input(tag, framing, out.toByteArray, starts.toArray)

  // =================================================================================================
  // Checking an output: frame by frame, against the inputs

  /** What one output held: `torn` and `lost` describe the first divergence of each kind. */
  final case class Check(name: String, bytes: Int, frames: Seq[Int], torn: Option[String], lost: Option[String], complete: Boolean):
    def describe: String =
      s"$name: $bytes B" + (if frames.nonEmpty then s", frames per input ${frames.mkString("/")}" else "") + (if complete then " (all)" else "")

  private def show(b: Array[Byte], from: Int, until: Int): String =
    val end = math.min(until, from + 40)
    val text = (from until end).map { i =>
      val c = b(i) & 0xff
      if c >= 32 && c < 127 && c != '\\' then c.toChar.toString else f"\\x$c%02x"
    }.mkString
    s"\"$text\"" + (if until > end then s"...(${until - from} B)" else "")

  /** Parses `out` as frames of the inputs' framing and compares each with the frame it claims to
    * be. `cutOk`: the output may end inside a frame (what `head -c N` took), as long as that
    * piece begins the frame an input was due to send next.
    */
  def check(name: String, out: Array[Byte], inputs: Seq[Input], cutOk: Boolean = false): Check =
    val framing = inputs.head.framing
    if framing == "raw" then
      val in = inputs.head.bytes
      val n = math.min(in.length, out.length)
      val at = java.util.Arrays.mismatch(out, 0, n, in, 0, n)
      val diff = Option.when(at >= 0)(at)
      val torn =
        diff.map(i => s"$name differs from the input at byte $i: ${show(out, i, out.length)}, the input has ${show(in, i, in.length)}")
          .orElse(Option.when(out.length > in.length)(s"$name has ${out.length} bytes, more than the input's ${in.length}"))
      return Check(name, out.length, Nil, torn, None, torn.isEmpty && out.length == in.length)
    val next = Array.fill(inputs.size)(0)
    var torn: Option[String] = None
    var lost: Option[String] = None
    var pos = 0
    val maxLength = inputs.map(i => (0 until i.count).map(k => i.starts(k + 1) - i.starts(k)).maxOption.getOrElse(0)).max
    while pos < out.length && torn.isEmpty do
      // The end of the whole frame at `pos`, or -1 if the rest is not one.
      val (end, payload) = framing match
        case "len" =>
          if out.length - pos < 4 then (-1, 0)
          else
            val n = ByteBuffer.wrap(out, pos, 4).getInt
            if n < 0 || n + 4 > maxLength then
              torn = Some(s"$name: the len header at byte $pos says $n bytes, which no input frame has: ${show(out, pos, out.length)}")
              (-2, 0)
            else if pos + 4 + n > out.length then (-1, 0)
            else (pos + 4 + n, pos + 4)
        case _ =>
          val d: Byte = if framing == "lines" then '\n' else 0
          var i = pos
          while i < out.length && out(i) != d do i += 1
          if i < out.length then (i + 1, pos) else (-1, 0)
      if end == -1 then
        val fits = inputs.indices.exists { k =>
          next(k) < inputs(k).count && {
            val (from, to) = (inputs(k).starts(next(k)), inputs(k).starts(next(k) + 1))
            out.length - pos < to - from && java.util.Arrays.equals(out, pos, out.length, inputs(k).bytes, from, from + out.length - pos)
          }
        }
        if !cutOk then torn = Some(s"$name ends inside a frame: its last ${out.length - pos} bytes (from byte $pos) are not a whole frame: ${show(out, pos, out.length)}")
        else if !fits then torn = Some(s"$name ends in ${out.length - pos} bytes (from byte $pos) that begin no input's next frame: ${show(out, pos, out.length)}")
        pos = out.length
      else if end >= 0 then
        // The header: tag, number, ':'.
        val k = inputs.indexWhere(_.tag == out(payload).toChar)
        var i = payload + 1
        var number = 0L
        while i < end && i - payload < 12 && out(i) >= '0' && out(i) <= '9' do
          number = number * 10 + (out(i) - '0')
          i += 1
        if k < 0 || i == payload + 1 || i >= end || out(i) != ':' || number >= inputs(k).count then
          torn = Some(s"$name: the frame at byte $pos (${end - pos} B) is no input's frame: ${show(out, pos, end)}")
        else
          val input = inputs(k)
          val seq = number.toInt
          val (from, to) = (input.starts(seq), input.starts(seq + 1))
          if !java.util.Arrays.equals(out, pos, end, input.bytes, from, to) then
            val at = (0 until math.min(end - pos, to - from)).find(j => out(pos + j) != input.bytes(from + j)).getOrElse(math.min(end - pos, to - from))
            torn = Some(s"$name: the frame at byte $pos claims to be ${input.tag}$seq but differs from it at its byte $at " +
              s"(${end - pos} B against ${to - from} B): ${show(out, pos + at, end)}, the input has ${show(input.bytes, from + at, to)}")
          else if seq != next(k) then
            if lost.isEmpty then
              lost = Some(
                if seq < next(k) then s"$name: frame ${input.tag}$seq again at byte $pos (a duplicate: ${input.tag}0..${input.tag}${next(k) - 1} came before)"
                else s"$name: frame ${input.tag}$seq at byte $pos follows ${if next(k) == 0 then "nothing" else s"${input.tag}${next(k) - 1}"} of input ${input.tag}: ${seq - next(k)} frames lost")
            next(k) = math.max(next(k), seq + 1)
          else next(k) = seq + 1
        pos = end
    val complete = torn.isEmpty && lost.isEmpty && inputs.indices.forall(k => next(k) == inputs(k).count)
    Check(name, out.length, next.toSeq, torn, lost, complete)

  // =================================================================================================
  // Processes, feeders, readers

  final class Proc(val name: String, val process: Process, val errFile: os.Path):
    /** Whether a signal reached it before its `main` (the JVM's own handler may have taken it). */
    @volatile var signalledBeforeMain = false
    def pid: Long = process.pid
    def alive: Boolean = process.isAlive
    def err: String = if os.exists(errFile) then os.read(errFile) else ""

  enum FeedMode:
    case AllAtOnce
    /** Pieces of 1 to `max` bytes (frames split anywhere), `parkMicros` apart. */
    case Pieces(max: Int, parkMicros: Int)
    /** Everything up to `at` (inside a frame), a pause of `ms`, then the rest. */
    case PauseInsideFrame(at: Int, ms: Int)

  def pickFeed(rnd: Random, input: Input): FeedMode = rnd.nextInt(3) match
    case 0 => FeedMode.AllAtOnce
    case 1 => FeedMode.Pieces(rnd.between(1, 9_000), rnd.nextInt(300))
    case _ =>
      val k = rnd.nextInt(input.count)
      val (from, to) = (input.starts(k), input.starts(k + 1))
      FeedMode.PauseInsideFrame(if to - from > 1 then from + 1 + rnd.nextInt(to - from - 1) else from, rnd.between(20, 400))

  /** Writes `data` into a stage's stdin, then closes it; stops at the first error (the stage left). */
  final class Feeder(out: OutputStream, data: Array[Byte], mode: FeedMode, rnd: Random):
    val written = AtomicLong(0)
    val thread: Thread = Thread.ofPlatform().daemon().name("fault-feeder").start { () =>
      try
        def put(from: Int, to: Int): Unit =
          var i = from
          while i < to do
            val n = math.min(to - i, 65_536)
            out.write(data, i, n)
            i += n
            written.set(i)
        mode match
          case FeedMode.AllAtOnce => put(0, data.length)
          case FeedMode.Pieces(max, park) =>
            var i = 0
            while i < data.length do
              val n = math.min(data.length - i, 1 + rnd.nextInt(max))
              out.write(data, i, n)
              out.flush()
              i += n
              written.set(i)
              if park > 0 then LockSupport.parkNanos(park * 1000L)
          case FeedMode.PauseInsideFrame(at, ms) =>
            put(0, at)
            out.flush()
            LockSupport.parkNanos(ms * 1_000_000L)
            put(at, data.length)
        out.close()
      catch case _: IOException => Try(out.close())
    }

  enum ReadMode:
    case Fast
    /** Pieces of at most `piece` bytes, `parkMicros` apart. */
    case Slow(piece: Int, parkMicros: Int)
    /** Fast, but once `after` bytes came, nothing for `ms`. */
    case Pausing(after: Long, ms: Int)

  def pickRead(rnd: Random, total: Long): ReadMode = rnd.nextInt(3) match
    case 0 => ReadMode.Fast
    case 1 => ReadMode.Slow(rnd.between(512, 32_768), rnd.between(50, 1_000))
    case _ => ReadMode.Pausing((rnd.nextDouble() * total).toLong, rnd.between(20, 500))

  /** Reads a stage's stdout to its end, as `mode` says. */
  final class Reader(in: InputStream, mode: ReadMode):
    val count = AtomicLong(0)
    private val bytes = ByteArrayOutputStream()
    val thread: Thread = Thread.ofPlatform().daemon().name("fault-reader").start { () =>
      val piece = new Array[Byte](65_536)
      var paused = false
      try
        var n = 0
        while n >= 0 do
          val ask = mode match
            case ReadMode.Slow(p, _) => p
            case _                   => piece.length
          n = in.read(piece, 0, ask)
          if n > 0 then
            bytes.synchronized(bytes.write(piece, 0, n))
            count.addAndGet(n)
            mode match
              case ReadMode.Slow(_, park) => LockSupport.parkNanos(park * 1000L)
              case ReadMode.Pausing(after, ms) if !paused && count.get >= after =>
                paused = true
                LockSupport.parkNanos(ms * 1_000_000L)
              case _ => ()
      catch case _: IOException => ()
    }
    def result: Array[Byte] = bytes.synchronized(bytes.toByteArray)

  // =================================================================================================
  // One run

  /** Bounds: a stage's exit (generous: a loaded 2-core machine, 10 MB through a slow reader), and
    * what a run's processes may take to be gone after it.
    */
  val ExitBound: Long = 90_000
  val OrphanBound: Long = 5_000

  final class Run(val c: Case, val index: Int, val seed: Long, root: os.Path):
    val rnd = Random(seed)
    /** Digits that nothing else on the machine has on its command line: this JVM, case, run. */
    val marker: String = f"7${ProcessHandle.current.pid % 1_000_000}%06d${c.ordinal}%d$index%06d"
    val dir: os.Path = root / s"run-$marker"
    os.makeDir.all(dir)
    private val procs = ArrayBuffer.empty[Proc]
    private val threads = ArrayBuffer.empty[Thread]
    val problems = ArrayBuffer.empty[(Kind, String)]
    val anomalies = ArrayBuffer.empty[String]
    private val story = ArrayBuffer.empty[String]
    var t0: Long = System.nanoTime()
    var faultSent = false
    var late = false
    var beforeMain = false
    private var n = 0

    def ms: Long = (System.nanoTime() - t0) / 1_000_000
    def note(line: String): Unit = story += line
    def problem(kind: Kind, text: String): Unit = problems += kind -> text

    /** A wrong status or stderr of `p`: a start-up-window anomaly if a signal reached `p` before
      * its `main`, else a failure.
      */
    def flag(p: Proc, kind: Kind, text: String): Unit =
      if p.signalledBeforeMain && (kind == Kind.WrongStatus || kind == Kind.Noise) then anomalies += text
      else problem(kind, text)

    def write(name: String, data: Array[Byte]): os.Path =
      os.write.over(dir / name, data)
      dir / name

    def read(p: os.Path): Array[Byte] = if os.exists(p) then os.read.bytes(p) else Array.emptyByteArray

    /** The tool's command line, as Launch gives it, with the launcher's stage flags (C1, serial
      * GC: three JVMs on two cores) and the run's marker as a JVM property.
      */
    def toolCommand(args: Seq[String]): Seq[String] =
      val c = Launch.command(args*)
      Seq(c.head) ++ BuildInfo.stageJvmFlags ++ Seq(s"-Dasyncpipe.fault=run-$marker") ++ c.tail

    def builder(name: String, cmd: Seq[String]): (String, ProcessBuilder) =
      n += 1
      name -> ProcessBuilder(cmd.asJava).directory(dir.toIO).redirectError((dir / s"stderr-$n-$name").toIO)

    private def adopt(name: String, p: Process, b: ProcessBuilder): Proc =
      val proc = Proc(name, p, os.Path(b.redirectError().file().getAbsolutePath))
      procs.synchronized(procs += proc)
      proc

    def start(named: (String, ProcessBuilder)): Proc =
      t0 = System.nanoTime()
      adopt(named._1, named._2.start(), named._2)

    def startPipeline(named: Seq[(String, ProcessBuilder)]): Seq[Proc] =
      t0 = System.nanoTime()
      val ps = ProcessBuilder.startPipeline(named.map(_._2).asJava).asScala.toSeq
      named.zip(ps).map { case ((name, b), p) => adopt(name, p, b) }

    def spawn(t: Thread): Unit = threads += t

    /** `p`'s exit status, waited for within `ExitBound`; a hung process is asked for a thread dump
      * (SIGQUIT, onto its stderr) and killed, and its status is -1.
      */
    def exitOf(p: Proc): Int =
      if p.process.waitFor(ExitBound, TimeUnit.MILLISECONDS) then p.process.exitValue
      else
        sendRaw("QUIT", Seq(p))
        val deadline = System.nanoTime() + 3_000_000_000L
        while !p.err.contains("Full thread dump") && System.nanoTime() < deadline do LockSupport.parkNanos(20_000_000)
        problem(Kind.Hung, s"${p.name} (pid ${p.pid}) still running $ExitBound ms after the start; its stderr:\n${p.err.take(6000)}")
        p.process.destroyForcibly()
        p.process.waitFor(5, TimeUnit.SECONDS)
        -1

    def join(t: Thread, what: String): Unit =
      if !t.join(java.time.Duration.ofMillis(ExitBound)) then problem(Kind.Hung, s"$what still running $ExitBound ms after its process ended")

    // --- signals -----------------------------------------------------------------------------

    /** Sends `kill -s SIG` to the live ones of `targets`; those it went to. */
    def sendRaw(sig: String, targets: Seq[Proc]): Seq[Proc] =
      val alive = targets.filter(_.alive)
      if alive.nonEmpty then
        val k = ProcessBuilder((Seq("kill", "-s", sig) ++ alive.map(_.pid.toString)).asJava)
          .redirectErrorStream(true).redirectOutput(Redirect.DISCARD).start()
        k.waitFor(10, TimeUnit.SECONDS)
      alive

    /** Sends `sigs` to `targets`: back to back from one shell when `gapMs` is 0, else `gapMs`
      * apart. Notes which targets had not reached `main` yet.
      */
    def signal(sigs: Seq[Sig], targets: Seq[Proc], gapMs: Int = 0): Seq[Proc] =
      val alive = targets.filter(_.alive)
      if alive.isEmpty then
        note(s"${sigs.map("SIG" + _).mkString(" and ")} not sent at $ms ms: ${targets.map(_.name).mkString(", ")} had ended")
        return Nil
      for p <- alive if !reachedMain(p.pid) do
        p.signalledBeforeMain = true
        beforeMain = true
      val at = ms
      if sigs.size == 1 || gapMs == 0 then
        val pids = alive.map(_.pid).mkString(" ")
        val script = sigs.map(s => s"kill -s $s $pids").mkString("; ")
        val k = ProcessBuilder("sh", "-c", script).redirectErrorStream(true).redirectOutput(Redirect.DISCARD).start()
        k.waitFor(10, TimeUnit.SECONDS)
      else
        sendRaw(sigs.head.toString, alive)
        parkMillis(gapMs)
        val still = sendRaw(sigs(1).toString, alive)
        if still.size < alive.size then note(s"SIG${sigs(1)} found ${alive.filterNot(still.contains).map(_.name).mkString(", ")} ended")
      faultSent = true
      note(s"${sigs.map("SIG" + _).mkString(if gapMs == 0 then " + " else s" +${gapMs}ms ")} sent to ${alive.map(_.name).mkString(", ")} at $at ms" +
        (if alive.exists(_.signalledBeforeMain) then s" (before main: ${alive.filter(_.signalledBeforeMain).map(_.name).mkString(", ")})" else ""))
      alive

    /** Waits for `moment`: `progress()` counts output bytes against `total`. The delay is the
      * experiment; a wait for progress ends when every process has ended, and is bounded.
      */
    def await(moment: Moment, progress: () => Long, total: Long, watched: Seq[Proc]): Unit = moment match
      case Moment.FromStart(d) => parkUntil(t0 + d * 1_000_000L)
      case Moment.AtProgress(f, extra) =>
        val deadline = System.nanoTime() + ExitBound * 1_000_000L
        while progress() < (f * total).toLong && watched.exists(_.alive) && System.nanoTime() < deadline do LockSupport.parkNanos(200_000)
        parkMillis(extra)

    /** Stops `targets` (SIGSTOP), and `ms` later lets them go on (SIGCONT), in any case. */
    def pause(targets: Seq[Proc], ms0: Int): Unit =
      val at = ms
      val stopped = sendRaw("STOP", targets)
      try parkMillis(ms0)
      finally sendRaw("CONT", stopped)
      if stopped.nonEmpty then
        faultSent = true
        note(s"SIGSTOP to ${stopped.map(_.name).mkString(", ")} at $at ms, SIGCONT $ms0 ms later")
      else note(s"SIGSTOP not sent at $at ms: ended")

    // --- checks -------------------------------------------------------------------------------

    def expectStatus(p: Proc, status: Int, allowed: Set[Int], why: String): Unit =
      if status >= 0 && !allowed(status) then
        flag(p, Kind.WrongStatus, s"${p.name} exited $status, expected ${allowed.toSeq.sorted.mkString(" or ")} ($why)")

    def expectQuiet(p: Proc): Unit =
      val err = p.err
      if err.nonEmpty then flag(p, Kind.Noise, s"${p.name} wrote on stderr: ${err.take(2000)}")

    /** Records the torn and lost frames of `c`; true if it had neither. */
    def record(c: Check): Check =
      note(c.describe)
      c.torn.foreach(problem(Kind.Torn, _))
      c.lost.foreach(problem(Kind.LostOrDuplicated, _))
      c

    /** After the run: no process whose command line holds the marker, within `OrphanBound`;
      * those left are reported and killed (by pid).
      */
    def checkOrphans(): Unit =
      for p <- procs if p.alive do
        problem(Kind.Orphan, s"${p.name} (pid ${p.pid}) still running after the run")
        p.process.destroyForcibly()
      val deadline = System.nanoTime() + OrphanBound * 1_000_000L
      var left = withMarker(marker)
      while left.nonEmpty && System.nanoTime() < deadline do
        LockSupport.parkNanos(20_000_000)
        left = withMarker(marker)
      if left.nonEmpty then
        problem(Kind.Orphan, s"${left.size} processes of the run still running $OrphanBound ms after it ended:\n" +
          left.map((pid, cmd) => s"    $pid ${processInfo(pid)} $cmd").mkString("\n"))
        for (pid, _) <- left do ProcessHandle.of(pid).ifPresent(_.destroyForcibly())

    def close(): Unit =
      val ps = procs.synchronized(procs.toSeq)
      for p <- ps do
        p.process.descendants().forEach(_.destroyForcibly())
        p.process.destroyForcibly()
      for p <- ps do p.process.waitFor(10, TimeUnit.SECONDS)
      for t <- threads do t.join(java.time.Duration.ofSeconds(10))
      Try(os.remove.all(dir))

    def describe: String =
      s"run ${index + 1} of case '${c.id}', seed $seed (reproduce with ASYNCPIPE_FAULT_REPLAY=${c.id}:$seed; " +
        s"the sequence with ASYNCPIPE_FAULT_SEED=${Settings.baseSeed}), marker $marker\n" +
        story.map("  " + _).mkString("\n") + "\n" +
        procs.map(p => s"  ${p.name} (pid ${p.pid}) stderr: ${if p.err.isEmpty then "(empty)" else p.err.take(1500)}").mkString("\n")

  def parkUntil(deadlineNanos: Long): Unit =
    var left = deadlineNanos - System.nanoTime()
    while left > 0 do
      LockSupport.parkNanos(left)
      left = deadlineNanos - System.nanoTime()

  def parkMillis(ms: Int): Unit = parkUntil(System.nanoTime() + ms * 1_000_000L)

  /** Whether the JVM `pid` runs asyncpipe's `main` already: it has a virtual threads' carrier or
    * a thread asyncpipe named, which it starts only after `Signals.install` (the first thing in
    * `main`). A JVM that is gone counts as started. A signal sent before this holds may meet the
    * JVM's own handler.
    */
  def reachedMain(pid: Long): Boolean =
    Try {
      os.list(os.Path(s"/proc/$pid/task")).exists { t =>
        val name = Try(os.read(t / "comm")).getOrElse("")
        name.startsWith("ForkJoinPool") || name.startsWith("asyncpipe") || name.startsWith("VirtualThread")
      }
    }.getOrElse(true)

  /** The processes whose command line holds `marker` (not this JVM). */
  def withMarker(marker: String): Seq[(Long, String)] =
    val me = ProcessHandle.current.pid
    val key = marker.getBytes(ISO_8859_1)
    val found = ArrayBuffer.empty[(Long, String)]
    val dirs = File("/proc").list()
    if dirs != null then
      for d <- dirs if d.nonEmpty && d.forall(_.isDigit) && d.toLong != me do
        Try(Files.readAllBytes(JPath.of("/proc", d, "cmdline"))).foreach { b =>
          if String(b, ISO_8859_1).contains(marker) && key.nonEmpty then
            found += d.toLong -> String(b, ISO_8859_1).replace('\u0000', ' ').take(300)
        }
    found.toSeq

  /** "(pgid G, sid S, ppid P)" of a process, for a report. */
  def processInfo(pid: Long): String =
    Try {
      val stat = os.read(os.Path(s"/proc/$pid/stat"))
      val f = stat.substring(stat.lastIndexOf(')') + 2).split(" ")
      s"(ppid ${f(1)}, pgid ${f(2)}, sid ${f(3)})"
    }.getOrElse("")

  // =================================================================================================
  // Tallies

  final class Tally(c: Case):
    private var runs = 0
    private var faults = 0
    private var late = 0
    private var beforeMain = 0
    private val counts = scala.collection.mutable.Map.empty[Kind, Int].withDefaultValue(0)
    private val anomalies = ArrayBuffer.empty[(String, String)] // the anomaly, its run
    val failures = ArrayBuffer.empty[String]

    def add(run: Run): Unit =
      runs += 1
      if run.faultSent then faults += 1
      if run.late then late += 1
      if run.beforeMain then beforeMain += 1
      for k <- run.problems.map(_._1).distinct do counts(k) += 1
      for a <- run.anomalies do
        anomalies += a -> s"[run ${run.index + 1}, ASYNCPIPE_FAULT_REPLAY=${c.id}:${run.seed}]${if Settings.verbose then "\n" + run.describe else ""}"
      if Settings.verbose && run.problems.isEmpty then println(s"ok ${run.describe}")
      if run.problems.nonEmpty then
        failures += s"FAILED ${run.describe}\n  found:\n${run.problems.map((k, t) => s"    [${k.label}] $t").mkString("\n")}"
        println(failures.last) // at once, for a long run

    def summary(seconds: Long): String =
      s"FaultSuite ${c.id}: $runs runs, $faults with a fault sent ($late came too late to matter, $beforeMain reached a JVM before main); " +
        s"torn ${counts(Kind.Torn)}, lost/duplicated ${counts(Kind.LostOrDuplicated)}, " +
        s"wrong statuses ${counts(Kind.WrongStatus) + counts(Kind.Hung)} (hung ${counts(Kind.Hung)}), unexpected stderr ${counts(Kind.Noise)}, " +
        s"orphans ${counts(Kind.Orphan)}, harness errors ${counts(Kind.Harness)}, start-up-window anomalies ${anomalies.size}; " +
        s"seed ${Settings.baseSeed}, $seconds s"

    /** The start-up-window anomalies, counted by kind (their text with the numbers left out),
      * then each with its run's seed (and its whole story under ASYNCPIPE_FAULT_VERBOSE).
      */
    def printAnomalies(): Unit =
      if anomalies.nonEmpty then
        val kinds = anomalies.groupBy((a, _) => a.replaceAll("[0-9]+", "N").linesIterator.next().take(160)).toSeq.sortBy(-_._2.size)
        println(s"FaultSuite ${c.id}: ${anomalies.size} start-up-window anomalies (a signal before main; not failures):")
        for (kind, as) <- kinds do println(s"  ${as.size} x $kind")
        for (a, run) <- anomalies do println(s"  ${a.linesIterator.next().take(300)} $run")

  // =================================================================================================
  // Single-process stages: FROM TO, mux, run

  enum Stdin:
    case Null
    case Pipe(input: Input, mode: FeedMode)
    case FromFile(path: os.Path)

  enum Stdout:
    /** A file that must stay empty: the stage writes to file:OUT, not to stdout. */
    case Unused(path: os.Path)
    case ToFile(path: os.Path)
    case ToReader(mode: ReadMode)
    case ToHead(n: Long)

  /** One stage process: its arguments, the inputs its outputs carry (all of them each), its
    * standard streams and the files it writes.
    */
  final case class Single(args: Seq[String], inputs: Seq[Input], stdin: Stdin, stdout: Stdout, files: Seq[(String, os.Path)]):
    def describe: String =
      val in = stdin match
        case Stdin.Null          => "stdin /dev/null"
        case Stdin.Pipe(_, mode) => s"stdin a pipe fed $mode"
        case Stdin.FromFile(_)   => "stdin a file"
      val out = stdout match
        case Stdout.Unused(_)     => "stdout a file (to stay empty)"
        case Stdout.ToFile(_)     => "stdout a file"
        case Stdout.ToReader(m)   => s"stdout a pipe read $m"
        case Stdout.ToHead(n)     => s"stdout a pipe into head -c $n"
      s"asyncpipe ${args.mkString(" ")}\n  $in; $out; ${inputs.map(_.describe).mkString("; ")}"

  def runSingle(run: Run, s: Single, fault: Fault, moment: Moment): Unit =
    run.note(s.describe)
    run.note(s"fault: ${fault.describe}, ${if fault == Fault.NoFault then "" else moment.describe}")
    val named = run.builder("asyncpipe", run.toolCommand(s.args))
    val b = named._2
    s.stdin match
      case Stdin.Null        => b.redirectInput(Redirect.from(File("/dev/null")))
      case Stdin.Pipe(_, _)  => b.redirectInput(Redirect.PIPE)
      case Stdin.FromFile(p) => b.redirectInput(Redirect.from(p.toIO))
    val headOut = run.dir / "head-out"
    val (stage, head) = s.stdout match
      case Stdout.ToFile(p) =>
        b.redirectOutput(p.toIO)
        (run.start(named), None)
      case Stdout.Unused(p) =>
        b.redirectOutput(p.toIO)
        (run.start(named), None)
      case Stdout.ToReader(_) =>
        b.redirectOutput(Redirect.PIPE)
        (run.start(named), None)
      case Stdout.ToHead(n) =>
        val h = run.builder("head", Seq("head", "-c", n.toString))
        h._2.redirectOutput(headOut.toIO)
        val ps = run.startPipeline(Seq(named, h))
        (ps(0), Some(ps(1)))
    val feeder = s.stdin match
      case Stdin.Pipe(input, mode) =>
        val f = Feeder(stage.process.getOutputStream, input.bytes, mode, Random(run.rnd.nextLong()))
        run.spawn(f.thread)
        Some(f)
      case _ => None
    val reader = s.stdout match
      case Stdout.ToReader(mode) =>
        val r = Reader(stage.process.getInputStream, mode)
        run.spawn(r.thread)
        Some(r)
      case _ => None
    val total = s.inputs.map(_.bytes.length.toLong).sum
    val stdoutFile = s.stdout match
      case Stdout.ToFile(p) => Some(p)
      case Stdout.ToHead(_) => Some(headOut)
      case _                => None
    val watched = Seq(stage)
    def size(p: os.Path) = Try(Files.size(p.toNIO)).getOrElse(0L)
    val progress = () => reader.fold(0L)(_.count.get) + stdoutFile.fold(0L)(size) + s.files.map(f => size(f._2)).maxOption.getOrElse(0L)

    var sent: Seq[Sig] = Nil
    var backToBack = false
    fault match
      case Fault.NoFault | Fault.ReaderGone(_) | Fault.Kill => ()
      case Fault.Pause(ms) =>
        run.await(moment, progress, total, watched)
        run.pause(watched, ms)
      case Fault.One(sig) =>
        run.await(moment, progress, total, watched)
        if run.signal(Seq(sig), watched).nonEmpty then sent = Seq(sig)
      case Fault.Two(a, b, gap) =>
        run.await(moment, progress, total, watched)
        if run.signal(Seq(a, b), watched, gap).nonEmpty then
          sent = Seq(a, b)
          backToBack = gap == 0
    val status = run.exitOf(stage)
    head.foreach(run.exitOf)
    feeder.foreach(f => run.join(f.thread, "the feeder of stdin"))
    reader.foreach(r => run.join(r.thread, "the reader of stdout"))
    run.note(s"asyncpipe exited $status after ${run.ms} ms")

    // What each output holds.
    s.stdout match
      case Stdout.Unused(p) if os.exists(p) && os.size(p) > 0 =>
        run.problem(Kind.Torn, s"asyncpipe wrote ${os.size(p)} bytes to its stdout, which is no output here: ${show(run.read(p), 0, os.size(p).toInt)}")
      case _ => ()
    val stdoutBytes = reader.map(_.result).orElse(stdoutFile.map(run.read))
    val checks = stdoutBytes.map(bytes => run.record(check("stdout", bytes, s.inputs, cutOk = head.isDefined))).toSeq ++
      s.files.map((name, p) => run.record(check(name, run.read(p), s.inputs)))
    val complete = checks.forall(_.complete)

    fault match
      case Fault.ReaderGone(n) =>
        // head takes n bytes, then leaves: the stage must see it go (141) unless it wrote all it
        // had first, which it can only when the rest fitted in the pipe (1 MiB) and head's buffer.
        val shown = checks.head
        if n >= total then
          run.expectStatus(stage, status, Set(0), s"head -c $n takes all $total bytes")
          if !shown.complete then run.problem(Kind.LostOrDuplicated, s"head -c $n of $total bytes got ${shown.bytes}")
        else
          val allowed = if total - n <= (1 << 20) + (256 << 10) then Set(ExitCode.ClosedPipe, 0) else Set(ExitCode.ClosedPipe)
          run.expectStatus(stage, status, allowed, s"head -c $n left $total - $n bytes unread")
          if status == ExitCode.ClosedPipe && shown.bytes != n then
            run.problem(Kind.LostOrDuplicated, s"head -c $n ended the stage (141) but got ${shown.bytes} bytes")
        run.expectQuiet(stage)
      case _ if sent.isEmpty =>
        // No fault, SIGSTOP and SIGCONT, or a signal that came after the end.
        run.expectStatus(stage, status, Set(0), if run.faultSent then "stopped and continued" else "no signal reached it")
        if status == 0 && !complete then run.problem(Kind.LostOrDuplicated, s"exit 0 but an output is short: ${checks.map(_.describe).mkString("; ")}")
        run.expectQuiet(stage)
      case _ =>
        val first = if backToBack && sent.size > 1 then sent.map(_.code).toSet else Set(sent.head.code)
        if status == 0 && complete then
          run.late = true
          run.note("the signal came after the work was done (exit 0, every output whole)")
        else
          run.expectStatus(stage, status, first,
            if backToBack && sent.distinct.size > 1 then "the first signal's; sent back to back, either may be first" else s"the first signal's, SIG${sent.head}")
        run.expectQuiet(stage)

  // --- FROM TO ---------------------------------------------------------------------------------

  def stageRun(run: Run): Unit =
    val rnd = run.rnd
    val framing = pickFraming(rnd, raw = true)
    val input = makeInput('a', framing, pickSize(rnd), rnd)
    val in = run.write("in-a", input.bytes)
    val out = run.dir / "out"
    val total = input.bytes.length.toLong
    val options = Seq("--frame", framing)
    val single = rnd.nextInt(3) match
      case 0 => Single(options ++ Seq(s"file:$in", s"file:$out"), Seq(input), Stdin.Null, Stdout.Unused(run.dir / "stdout"), Seq("file:OUT" -> out))
      case 1 => Single(options ++ Seq(s"file:$in", "-"), Seq(input), Stdin.Null, Stdout.ToReader(pickRead(rnd, total)), Nil)
      case _ =>
        // A pipe may end inside a frame only if the feeder stopped early: it never does here.
        Single(options ++ Seq("-", s"file:$out"), Seq(input), Stdin.Pipe(input, pickFeed(rnd, input)), Stdout.Unused(run.dir / "stdout"), Seq("file:OUT" -> out))
    val fault = pickFault(rnd, single.stdout.isInstanceOf[Stdout.ToReader], total)
    val stdout = fault match
      case Fault.ReaderGone(n) => Stdout.ToHead(n)
      case _                   => single.stdout
    runSingle(run, single.copy(stdout = stdout), fault, pickMoment(rnd))

  // --- mux -------------------------------------------------------------------------------------

  def muxRun(run: Run): Unit =
    val rnd = run.rnd
    val count = rnd.between(1, 4)
    val framing = pickFraming(rnd, raw = count == 1)
    val share = pickSize(rnd) / count + 1
    val inputs = (0 until count).map(k => makeInput(('a' + k).toChar, framing, share, rnd))
    // The first input is a file (--in), so that the marker is in the command line; stdin is
    // one of the others, or /dev/null.
    val stdinIndex = if count > 1 && rnd.nextBoolean() then Some(count - 1) else None
    val files = inputs.indices.filterNot(stdinIndex.contains).map(k => run.write(s"in-${inputs(k).tag}", inputs(k).bytes))
    val stdin = stdinIndex match
      case None => Stdin.Null
      case Some(k) =>
        if rnd.nextBoolean() then Stdin.Pipe(inputs(k), pickFeed(rnd, inputs(k)))
        else Stdin.FromFile(run.write(s"stdin-${inputs(k).tag}", inputs(k).bytes))
    val total = inputs.map(_.bytes.length.toLong).sum
    val second = Option.when(rnd.nextBoolean())(run.dir / "out2")
    val stdout =
      if rnd.nextInt(3) == 0 then Stdout.ToFile(run.dir / "stdout") else Stdout.ToReader(pickRead(rnd, total))
    val buffer = if rnd.nextInt(4) == 0 then Seq("--buffer", Seq("0", "1", "2")(rnd.nextInt(3))) else Nil
    val args = Seq("mux", "--frame", framing) ++ buffer ++ files.flatMap(f => Seq("--in", s"file:$f")) ++ second.toSeq.flatMap(p => Seq("--out", s"file:$p"))
    val fault = pickFault(rnd, stdout.isInstanceOf[Stdout.ToReader], total)
    val out = fault match
      case Fault.ReaderGone(n) => Stdout.ToHead(n)
      case _                   => stdout
    runSingle(run, Single(args, inputs, stdin, out, second.toSeq.map("--out file:OUT2" -> _)), fault, pickMoment(rnd))

  // --- run 'A | mux | B' -----------------------------------------------------------------------

  def inOneJvmRun(run: Run): Unit =
    val rnd = run.rnd
    val middle = rnd.nextInt(3) // 0: mux, 1: mux --in file:B, 2: mux --out file:COPY
    val framing = pickFraming(rnd, raw = middle != 1)
    val size = pickSize(rnd)
    val a = makeInput('a', framing, if middle == 1 then size / 2 + 1 else size, rnd)
    val inputs = if middle == 1 then Seq(a, makeInput('b', framing, size / 2 + 1, rnd)) else Seq(a)
    val total = inputs.map(_.bytes.length.toLong).sum
    val fromStdin = rnd.nextInt(3) == 0
    val source = if fromStdin then "-" else s"file:${run.write("in-a", a.bytes)}"
    val mux = middle match
      case 0 => "mux"
      case 1 => s"mux --in file:${run.write("in-b", inputs(1).bytes)}"
      case _ => s"mux --out file:${run.dir / "copy"}"
    val toStdout = rnd.nextBoolean()
    val sink = if toStdout then "-" else s"file:${run.dir / "out"}"
    val files = (if toStdout then Nil else Seq("file:OUT" -> run.dir / "out")) ++
      (if middle == 2 then Seq("--out file:COPY" -> run.dir / "copy") else Nil)
    val fault = pickFault(rnd, toStdout, total)
    val stdout = fault match
      case Fault.ReaderGone(n)   => Stdout.ToHead(n)
      case _ if toStdout         => Stdout.ToReader(pickRead(rnd, total))
      case _                     => Stdout.Unused(run.dir / "stdout")
    val stdin = if fromStdin then Stdin.Pipe(a, pickFeed(rnd, a)) else Stdin.Null
    runSingle(run, Single(Seq("run", "--frame", framing, s"$source | $mux | $sink"), inputs, stdin, stdout, files), fault, pickMoment(rnd))

  // =================================================================================================
  // Three processes: 'asyncpipe file:IN - | asyncpipe mux | asyncpipe --final-delimiter require - file:OUT'

  enum Target:
    case All, First, Middle, Last

  def pipelineRun(run: Run): Unit =
    val rnd = run.rnd
    val framing = pickFraming(rnd, raw = true)
    val input = makeInput('a', framing, pickSize(rnd, large = true), rnd)
    val in = run.write("in-a", input.bytes)
    val out = run.dir / "out"
    val options = Seq("--frame", framing)
    val buffer = if rnd.nextInt(4) == 0 then Seq("--buffer", Seq("0", "1", "2")(rnd.nextInt(3))) else Nil
    val args = Seq(
      options ++ Seq(s"file:$in", "-"),
      Seq("mux") ++ options ++ buffer,
      options ++ Seq("--final-delimiter", "require", "-", s"file:$out")
    )
    val stages = Seq("first", "middle", "last").zip(args).map((name, a) => run.builder(name, run.toolCommand(a)))
    stages.head._2.redirectInput(Redirect.from(File("/dev/null")))
    stages.last._2.redirectOutput((run.dir / "stdout").toIO)
    val r = rnd.nextInt(100)
    val (fault, target) =
      if r < 6 then (Fault.NoFault, Target.All)
      else if r < 14 then (Fault.Pause(rnd.between(5, 400)), Target.values(rnd.nextInt(4)))
      else if r < 34 then (Fault.One(pickSig(rnd)), Target.All)
      else if r < 42 then (Fault.Two(pickSig(rnd), pickSig(rnd), if rnd.nextBoolean() then 0 else rnd.between(5, 300)), Target.All)
      else if r < 72 then (Fault.One(pickSig(rnd)), Target.values(1 + rnd.nextInt(3)))
      else (Fault.Kill, Target.Middle)
    val moment = pickMoment(rnd)
    run.note(args.map(_.mkString("asyncpipe ", " ", "")).mkString(" | "))
    run.note(s"${input.describe}; fault: ${fault.describe} to ${target.toString.toLowerCase}${if fault == Fault.NoFault then "" else ", " + moment.describe}")
    val ps = run.startPipeline(stages)
    val Seq(first, middle, last) = ps: @unchecked
    val targets = target match
      case Target.All    => ps
      case Target.First  => Seq(first)
      case Target.Middle => Seq(middle)
      case Target.Last   => Seq(last)
    val total = input.bytes.length.toLong
    val progress = () => Try(Files.size(out.toNIO)).getOrElse(0L)
    var sentTo: Seq[Proc] = Nil
    var sigs: Seq[Sig] = Nil
    var backToBack = false
    fault match
      case Fault.Pause(ms) =>
        run.await(moment, progress, total, ps)
        run.pause(targets, ms)
      case Fault.One(sig) =>
        run.await(moment, progress, total, ps)
        sentTo = run.signal(Seq(sig), targets)
        sigs = Seq(sig)
      case Fault.Two(a, b, gap) =>
        run.await(moment, progress, total, ps)
        sentTo = run.signal(Seq(a, b), targets, gap)
        sigs = Seq(a, b)
        backToBack = gap == 0
      case Fault.Kill =>
        run.await(moment, progress, total, ps)
        val at = run.ms
        sentTo = run.sendRaw("KILL", Seq(middle))
        if sentTo.nonEmpty then run.faultSent = true
        run.note(if sentTo.nonEmpty then s"SIGKILL to the middle at $at ms" else s"SIGKILL not sent at $at ms: the middle had ended")
      case _ => ()
    val statuses = ps.map(run.exitOf)
    val s3 = statuses(2)
    run.note(s"exits ${statuses.mkString(", ")} after ${run.ms} ms")
    val c = run.record(check("file:OUT", run.read(out), Seq(input)))
    val stdout = run.read(run.dir / "stdout")
    if stdout.nonEmpty then run.problem(Kind.Torn, s"the last stage wrote ${stdout.length} bytes to its stdout, not to file:OUT")
    if statuses.forall(_ == 0) && !c.complete then run.problem(Kind.LostOrDuplicated, s"every stage exited 0 but file:OUT is short: ${c.describe}")

    val firstCodes = if backToBack && sigs.distinct.size > 1 then sigs.map(_.code).toSet else sigs.headOption.map(_.code).toSet
    def signalled(p: Proc) = sentTo.contains(p)
    val gone = Set(ExitCode.ClosedPipe, 0) // a stage whose reader left, or which was done before
    val expected: Map[Proc, (Set[Int], String)] = fault match
      case Fault.Kill if sentTo.nonEmpty =>
        Map(
          first -> (gone, "its reader was killed"),
          middle -> (Set(128 + 9, 0), "killed"),
          last -> (Set(0, ExitCode.Runtime), "its input ended where the middle stage was killed: 0 on a frame boundary, else 1 under --final-delimiter require")
        )
      case _ if sentTo.isEmpty => ps.map(p => p -> (Set(0), "no fault reached it")).toMap
      case _ =>
        // Each stage signalled stops with the first signal's status (or 0 if it was done); one
        // downstream of a stage that stopped sees its input end on a frame boundary (0), one
        // upstream of a stage that stopped sees its reader go (141) unless it was done (0).
        val why = "the first signal's"
        ps.zipWithIndex.map { (p, i) =>
          if signalled(p) then p -> (firstCodes + 0, why)
          else if ps.drop(i + 1).exists(signalled) then p -> (gone, "a stage after it stopped")
          else p -> (Set(0), "a stage before it stopped: its input ends on a whole frame")
        }.toMap
    for (p, s) <- ps.zip(statuses) do
      val (allowed, why) = expected(p)
      run.expectStatus(p, s, allowed, why)
    if fault == Fault.Kill && s3 == ExitCode.Runtime then
      val err = last.err
      val said = if framing == "len" then err.contains("ended inside a len frame") else err.contains("not passed on (--final-delimiter require)")
      if !said then run.flag(last, Kind.Noise, s"the last stage exited 1 without saying the input ended inside a frame: $err")
    else run.expectQuiet(last)
    run.expectQuiet(first)
    if fault != Fault.Kill then run.expectQuiet(middle)
    if sentTo.nonEmpty && s3 == 0 && statuses.forall(_ == 0) then run.late = true

  // =================================================================================================
  // Task verbs: every, repeat, retry --timeout (trees that make process groups of their own)

  def tasksRun(run: Run): Unit =
    val rnd = run.rnd
    val long = s"31.${run.marker}" // seconds: only a signal or a timeout ends it
    val short = s"0.0${run.marker}" // about 10-80 ms
    val line = s"M${run.marker}"
    val timeout = rnd.between(100, 700)
    // (the command line, whether it prints a line every 10-80 ms: only such a run is read by head)
    val (args, often) = rnd.nextInt(5) match
      case 0 =>
        val quick = rnd.nextBoolean()
        val overlap = Seq("skip", "wait")(rnd.nextInt(2))
        (Seq("every", "50ms", "--overlap", overlap, "--", "sh", "-c", s"echo $line; sleep ${if quick then short else long}"), quick)
      case 1 => (Seq("repeat", "--until-failure", "--", "sh", "-c", s"echo $line; sleep $short"), true)
      case 2 => (Seq("retry", "--timeout", s"${timeout}ms", "--backoff", "50ms", "--", "sh", "-c", s"echo $line; timeout 100 sleep $long"), false)
      case 3 => (Seq("retry", "--timeout", s"${timeout}ms", "--backoff", "50ms", "--kill-after", "200ms", "--", "bash", "-c", s"set -m; echo $line; sleep $long & wait"), false)
      case _ => (Seq("every", "30ms", "--timeout", s"${timeout}ms", "--", "sh", "-c", s"echo $line; exec sleep $long"), false)
    val fault =
      val r = rnd.nextInt(100)
      if r < 25 && often then Fault.ReaderGone(rnd.nextLong((line.length + 1) * 3L))
      else if r < 60 then Fault.One(pickSig(rnd))
      else Fault.Two(pickSig(rnd), pickSig(rnd), if rnd.nextBoolean() then 0 else rnd.between(5, 300))
    val moment = rnd.nextInt(5) match
      case 0 => Moment.FromStart(rnd.nextInt(61))
      case 1 => Moment.FromStart(rnd.between(60, 900))
      case _ => Moment.AtProgress(1.0, rnd.nextInt(1_500)) // after the first line, and up to 1.5 s
    run.note(s"asyncpipe ${args.mkString(" ")}")
    run.note(s"fault: ${fault.describe}${fault match { case Fault.ReaderGone(_) => ""; case _ => ", " + moment.describe }}")
    val named = run.builder("asyncpipe", run.toolCommand(args))
    named._2.redirectInput(Redirect.from(File("/dev/null")))
    val outFile = run.dir / "stdout"
    val stage = fault match
      case Fault.ReaderGone(n) =>
        val h = run.builder("head", Seq("head", "-c", n.toString))
        h._2.redirectOutput(outFile.toIO)
        val ps = run.startPipeline(Seq(named, h))
        run.exitOf(ps(1))
        run.note(s"head ended at ${run.ms} ms")
        ps(0)
      case _ =>
        named._2.redirectOutput(outFile.toIO)
        run.start(named)
    val progress = () => Try(Files.size(outFile.toNIO)).getOrElse(0L)
    var sigs: Seq[Sig] = Nil
    var backToBack = false
    fault match
      case Fault.One(sig) =>
        run.await(moment, progress, line.length + 1L, Seq(stage))
        if run.signal(Seq(sig), Seq(stage)).nonEmpty then sigs = Seq(sig)
      case Fault.Two(a, b, gap) =>
        run.await(moment, progress, line.length + 1L, Seq(stage))
        if run.signal(Seq(a, b), Seq(stage), gap).nonEmpty then
          sigs = Seq(a, b)
          backToBack = gap == 0
      case _ => ()
    val status = run.exitOf(stage)
    run.note(s"asyncpipe exited $status after ${run.ms} ms")
    val out = run.read(outFile)
    // Whole lines, each the command's line (head may cut the last).
    val text = String(out, ISO_8859_1)
    val lines = text.split("\n", -1).toSeq
    val whole = lines.init.forall(_ == line) && (lines.last.isEmpty || (fault.isInstanceOf[Fault.ReaderGone] && (line + "\n").startsWith(lines.last)))
    run.note(s"stdout: ${out.length} B, ${lines.size - 1} lines")
    if !whole then run.problem(Kind.Torn, s"stdout is not whole lines '$line': ${show(out, 0, out.length)}")
    fault match
      case Fault.ReaderGone(n) =>
        run.faultSent = true
        run.expectStatus(stage, status, Set(ExitCode.ClosedPipe), s"head -c $n left")
        if out.length != n then run.problem(Kind.LostOrDuplicated, s"head -c $n got ${out.length} bytes")
      case _ if sigs.isEmpty => run.expectStatus(stage, status, Set(-1), "it never ends by itself, yet no signal reached it")
      case _ =>
        val first = if backToBack && sigs.distinct.size > 1 then sigs.map(_.code).toSet else Set(sigs.head.code)
        run.expectStatus(stage, status, first, "the first signal's")
    run.expectQuiet(stage)
