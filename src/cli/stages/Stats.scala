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
  *     terminal; cleared at exit. Plain text: no colours (NO_COLOR holds trivially).
  * Under `--stats-json` the `--stats` line is `{"summary": ...}`, as the flow's other lines are
  * JSON then (see [[Diagnostics]]).
  */
final class StatsReporter(inputs: Seq[Input], outputs: Seq[Output], options: StageOptions, err: PrintStream, tell: Diagnostics):
  private val started = System.nanoTime()
  private val live = options.progress && StreamKind.of(2) == StreamKind.Terminal
  @volatile private var running = true
  private var ticker: Thread | Null = null

  def start(): Unit =
    if live || options.statsJson then
      ticker = Thread.ofVirtual().name("asyncpipe-stats").start { () =>
        var n = 0L
        try
          while running do
            Thread.sleep(250)
            n += 1
            if live then err.print("\r" + StatsReporter.pad(summary) + "\r")
            if options.statsJson && n % 4 == 0 then err.println(json(isFinal = false))
        catch case _: InterruptedException => ()
      }

  def finish(): Unit =
    running = false
    val t = ticker
    if t != null then
      t.interrupt()
      t.join()
    if live then err.print("\r" + " " * StatsReporter.Width + "\r")
    if options.stats then tell.summary(s"asyncpipe: $summary")
    if options.statsJson then err.println(json(isFinal = true))
    err.flush()

  private def seconds: Double = (System.nanoTime() - started) / 1e9

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
  def notice(text: String): Unit = line("notice", text)
  def warning(text: String): Unit = line("warning", text)
  def summary(text: String): Unit = line("summary", text)
  def error(text: String): Unit = line("error", text)

  private def line(kind: String, text: String): Unit =
    if text.nonEmpty then err.println(if json then s"{\"$kind\":${StatsReporter.quote(text)}}" else text)

object StatsReporter:
  private val Width = 100

  /** Datagrams lost before this input received them other than in its own receive buffer (on
    * the way, or in a sender's), as far as `--check-seq` tells: its sequence gaps beyond the
    * kernel's drops. A datagram the kernel dropped between two received ones is a gap too, and
    * is counted once, as a kernel drop; one lost after the last received one is no gap, so the
    * kernel's count, which is exact, comes first. Then frames in + kernel drops + lost in transit
    * = datagrams sent (when none was lost after the last received one on the way).
    */
  def lostInTransit(c: Counters): Long = math.max(0L, c.seqGaps - c.kernelDrops)

  private def pad(s: String): String = if s.length >= Width then s.take(Width) else s + " " * (Width - s.length)

  /** Bytes in decimal units (kB, MB, GB), as `ls -h --si` and network tools print them. */
  def bytes(n: Double): String =
    val units = Seq("B", "kB", "MB", "GB", "TB")
    var v = n
    var u = 0
    while v >= 1000 && u < units.length - 1 do
      v /= 1000
      u += 1
    if u == 0 then f"${v.toLong}%d B" else String.format(Locale.ROOT, "%.1f %s", v, units(u))

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
