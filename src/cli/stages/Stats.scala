package asyncpipe.cli.stages

import asyncpipe.cli.system.*

import java.io.PrintStream
import java.util.Locale

/** `--stats`, `--stats-json` and `--progress`: what the endpoints of a flow have moved, on stderr
  * only (stdout carries data and nothing else).
  *   - `--stats`: one summary line at exit. Each loss is counted once, under one cause: dropped
  *     here (busy, oversize), by the kernel (a full receive buffer), or in transit (sequence gaps
  *     beyond the kernel's drops, [[StatsReporter.lostInTransit]]); frames out + dropped = sent.
  *   - `--stats-json`: one JSON object per line, every second and at exit (`"final": true`):
  *     elapsed seconds, and per input and output its address, frames, bytes, drops, kernel drops,
  *     losses in transit, the raw sequence gaps and unterminated frames (a stream that ended inside its last frame, a
  *     rotated file's last line). Bytes are counted as they arrive or leave: terminators and
  *     length prefixes included, for streams and datagrams alike.
  *   - `--progress`: a line rewritten in place every quarter second, only when stderr is a
  *     terminal, as pv draws it: bytes, the rate over the last seconds, the time; frames, frames/s
  *     and drops where they are counted; with a known total (`--size`, or a single regular file's
  *     size) a bar, the percent and the time left. It fits the terminal's width, read again on
  *     SIGWINCH ([[TerminalWidth]]), and is cleared at exit ([[ProgressLine]], [[LiveLine]]).
  *     `--progress` alone counts bytes, not a stream's frames ([[StageOptions.countingFrames]]).
  * Under `--stats-json` the `--stats` line is `{"summary": ...}`, as the flow's other lines are
  * JSON then (see [[Diagnostics]]).
  */
final class StatsReporter(inputs: Seq[Input], outputs: Seq[Output], options: StageOptions, err: PrintStream, tell: Diagnostics):
  import StatsReporter.*

  private val started = System.nanoTime()
  private val live = options.progress && StreamKind.of(2) == StreamKind.Terminal
  @volatile private var running = true
  private var ticker: Thread | Null = null
  // The progress line, once the ticker has made it (on its thread, at its first refresh: the
  // terminal's width is a foreign call, and a process's first foreign link costs some 0.1 s of
  // CPU, ADR 0009's History).
  @volatile private var progress: Live | Null = null
  private val ins = inputs.toArray
  private val outs = outputs.toArray
  private val inCounters = ins.map(_.counters)
  private val outCounters = outs.map(_.counters)

  def start(): Unit =
    if live || options.statsJson then
      ticker = Thread.ofVirtual().name("asyncpipe-stats").start { () =>
        var n = 0L
        try
          while running do
            Thread.sleep(TickMillis)
            n += 1
            if live then
              // Made at the first refresh: a flow that ends sooner pays nothing for the line.
              if progress == null then
                progress = Live()
                tell.beforeLine = () => progress.nn.clear() // a notice meanwhile starts on a clean line
              progress.nn.tick(refreshDrops = n % TicksPerSecond == 0)
            if options.statsJson && n % TicksPerSecond == 0 then err.println(json(isFinal = false))
        catch case _: InterruptedException => ()
      }

  def finish(): Unit =
    running = false
    val t = ticker
    if t != null then
      t.interrupt()
      t.join()
    val line = progress
    if line != null then line.clear()
    if options.stats then tell.summary(s"asyncpipe: $summary")
    if options.statsJson then err.println(json(isFinal = true))
    err.flush()

  private def seconds: Double = (System.nanoTime() - started) / 1e9

  /** The `--progress` line: its layout, the terminal it is drawn on and that terminal's width,
    * and the rate windows it is measured with. Used by the ticker's thread only (then by
    * [[finish]], after the ticker has ended).
    */
  private final class Live:
    private val layout = ProgressLine()
    private val out = LiveLine(err, LiveLine.ansi(Option(System.getenv("TERM"))))
    private val byteRates = RateWindow(WindowSamples)
    private val frameRates = RateWindow(WindowSamples)
    // The frames are shown when every input counts all of its own.
    private val framesKnown = ins.forall(_.countsFrames)
    // Drops are shown where something can drop (a UDP endpoint), or once something did.
    private val canDrop = ins.exists(_.isInstanceOf[UdpInput]) || outs.exists(_.isInstanceOf[UdpOutput])
    private val total = options.size.getOrElse(if ins.length == 1 then ins(0).expectedBytes else -1L)
    TerminalWidth.watchResizes()
    private var resizes = TerminalWidth.resizes
    private var width = TerminalWidth.of(2)
    byteRates.add(started, 0)
    frameRates.add(started, 0)

    /** Samples the counters and redraws the line; `refreshDrops` also reads the kernel's drops. */
    def tick(refreshDrops: Boolean): Unit =
      if refreshDrops && canDrop then refresh()
      if TerminalWidth.resizes != resizes then
        resizes = TerminalWidth.resizes
        width = TerminalWidth.of(2)
      val now = System.nanoTime()
      var bytes, frames, drops = 0L
      var i = 0
      while i < inCounters.length do
        val c = inCounters(i)
        bytes += c.bytes
        frames += c.frames
        drops += c.dropped + c.kernelDrops + lostInTransit(c) // as the --stats line counts them
        i += 1
      i = 0
      while i < outCounters.length do
        drops += outCounters(i).dropped
        i += 1
      byteRates.add(now, bytes)
      frameRates.add(now, frames)
      val p = Progress(bytes, byteRates.perSecond(RecentNanos), now - started, total, byteRates.perSecond(SteadyNanos),
        if framesKnown then frames else -1L, frameRates.perSecond(RecentNanos), if canDrop || drops > 0 then drops else -1L)
      val text = layout.render(p, width)
      err.synchronized(out.draw(text, width)) // never inside a notice's line (Diagnostics)

    def clear(): Unit = err.synchronized(out.clear(width))

  private def refresh(): Unit = inputs.foreach {
    case u: UdpInput => u.refreshKernelDrops()
    case _           => ()
  }

  /** One line: frames and bytes in and out, drops by cause, time and rates. */
  def summary: String =
    refresh()
    val s = seconds
    val framesIn = inputs.map(_.counters.frames).sum
    val bytesIn = inputs.map(_.counters.bytes).sum
    val framesOut = outputs.map(_.counters.frames).sum
    val dropped = inputs.map(_.counters.dropped).sum + outputs.map(_.counters.dropped).sum
    val kernel = inputs.map(_.counters.kernelDrops).sum
    val transit = inputs.map(c => StatsReporter.lostInTransit(c.counters)).sum
    val rate = if s > 0 then framesIn / s else 0.0
    val byteRate = if s > 0 then bytesIn / s else 0.0
    val unterminated = inputs.map(_.counters.unterminated).sum
    val partial = if unterminated > 0 then s", $unterminated unterminated" else ""
    String.format(Locale.ROOT, "%d frames (%s) in%s, %d frames out, dropped %d (busy/oversize %d, kernel %d, in transit %d), %.2f s, %.0f frames/s, %s/s",
      framesIn, StatsReporter.bytes(bytesIn.toDouble), partial, framesOut, dropped + kernel + transit, dropped, kernel, transit, s, rate,
      StatsReporter.bytes(byteRate))

  def json(isFinal: Boolean): String =
    refresh()
    def endpoint(c: Counters) =
      s"""{"address":${StatsReporter.quote(c.name)},"frames":${c.frames},"bytes":${c.bytes},"dropped":${c.dropped},"kernel_drops":${c.kernelDrops},"lost_in_transit":${StatsReporter.lostInTransit(c)},"seq_gaps":${c.seqGaps},"unterminated":${c.unterminated}}"""
    String.format(Locale.ROOT, """{"final":%s,"elapsed_s":%.3f,"inputs":[%s],"outputs":[%s]}""",
      isFinal.toString, seconds, inputs.map(i => endpoint(i.counters)).mkString(","), outputs.map(o => endpoint(o.counters)).mkString(","))

/** What a flow writes on stderr besides its statistics: notices (a port chosen for `udp:0`, a
  * receive buffer the kernel capped), warnings (an output lost under `--output-error warn`), the
  * `--stats` summary and errors. Plain lines; under `--stats-json` one JSON object a line, keyed
  * by kind (`{"notice": "..."}`, `{"warning": ...}`, `{"summary": ...}`, `{"error": ...}`), so
  * that every line the flow writes on stderr parses as JSON. Empty texts are not written.
  */
final class Diagnostics(err: PrintStream, json: Boolean):
  /** Run before each line, holding `err`'s monitor: the `--progress` line's clear, once it is drawn
    * (the next refresh draws it again below), so that a line never lands on the tail of the
    * progress line.
    */
  @volatile private[stages] var beforeLine: Runnable | Null = null

  def notice(text: String): Unit = line("notice", text)
  def warning(text: String): Unit = line("warning", text)
  def summary(text: String): Unit = line("summary", text)
  def error(text: String): Unit = line("error", text)
  /** A record of its own: `{"kind": json}` under `--stats-json`, else `text`. */
  def record(kind: String, obj: String, text: String): Unit =
    err.synchronized {
      val before = beforeLine
      if before != null then before.run()
      err.println(if json then s"{\"$kind\":$obj}" else text)
    }

  private def line(kind: String, text: String): Unit =
    if text.nonEmpty then
      val out = if json then s"{\"$kind\":${StatsReporter.quote(text)}}" else text
      err.synchronized {
        val before = beforeLine
        if before != null then before.run()
        err.println(out)
      }

object StatsReporter:
  /** How often the statistics are refreshed: the progress line four times a second. */
  private val TickMillis = 250L
  private val TicksPerSecond = 4
  /** The span of the rates shown (bytes/s, frames/s): the last seconds, as pv's. */
  private val RecentNanos = 2_000_000_000L
  /** The span of the rate the time left is reckoned with: longer, steadier (pv's default window). */
  private val SteadyNanos = 30_000_000_000L
  private val WindowSamples = (SteadyNanos / 1_000_000 / TickMillis).toInt + 2

  /** Datagrams lost before this input received them other than in its own receive buffer (on
    * the way, or in a sender's), as far as `--check-seq` tells: its sequence gaps beyond the
    * kernel's drops. A datagram the kernel dropped between two received ones is a gap too, and
    * is counted once, as a kernel drop; one lost after the last received one is no gap, so the
    * kernel's count, which is exact, comes first. Then frames in + kernel drops + lost in transit
    * = datagrams sent (when none was lost after the last received one on the way).
    */
  def lostInTransit(c: Counters): Long = math.max(0L, c.seqGaps - c.kernelDrops)

  /** Bytes in decimal units (kB, MB, GB), as `ls -h --si` and network tools print them ([[Quantities]]). */
  def bytes(n: Double): String = Quantities.appendBytes(java.lang.StringBuilder(), math.round(n)).toString

  /** A JSON string literal. */
  def quote(s: String): String =
    val b = StringBuilder("\"")
    s.foreach {
      case '"'  => b ++= "\\\""
      case '\\' => b ++= "\\\\"
      case c if c < ' ' => b ++= f"\\u${c.toInt}%04x"
      case c    => b += c
    }
    b += '"'
    b.result()
