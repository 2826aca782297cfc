package asyncpipe.bench

import java.net.InetSocketAddress
import java.nio.ByteBuffer
import java.nio.channels.DatagramChannel
import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path}
import java.util.concurrent.TimeUnit
import java.util.concurrent.locks.LockSupport
import scala.jdk.CollectionConverters.*

/** The pipeline stages as users run them: real `asyncpipe` processes ([[Processes]]) in real shell
  * pipelines, against coreutils `cat` in the same shapes, on tmpfs.
  * What it measures and why:
  *   - `file:IN | mux | file:OUT` as three processes against `cat IN | cat | cat > OUT` (MiB/s of
  *     a 1 GiB text file): the cost of three JVMs, their copies and their channels, next to the
  *     copies the kernel makes anyway.
  *   - the same pipeline in one JVM (`asyncpipe run`) against the three processes: what joining
  *     stages by channels instead of pipes saves. Beside it, with no target, `cat IN > OUT` (one
  *     process, no pipe) against the three processes: one read and one write of every byte is what
  *     any copy must do, and on tmpfs the write (the kernel allocating the output's pages) is most
  *     of it, so this row is about the most `run`'s ratio could be in the same run.
  *   - `mux` over about 200 MB of `seq` output (short lines), pipe to pipe, against `cat` in the
  *     same place (`cat SEQ | X | cat`): the per-frame cost of line framing. (`cat < FILE >
  *     /dev/null` alone copies nothing and would compare start-up times.)
  *   - what shaping costs when it does not shape: the three-process copy with `--rate-limit 1T`
  *     on its first stage against it as it is, and (where util-linux `script` gives a terminal)
  *     with `--progress` drawing against it on the same terminal: each within 2 %.
  *   - figures: `--rate-limit 10M` over 100 MB, how far off the rate its reader sees (within 2 %,
  *     as pv -L gets within about 1 %); the in-process pipeline's frames/s and MiB/s on the `seq` lines; how long an
  *     interactive line takes through `mux` (a person typing must not wait for a full buffer);
  *     100,000 datagrams paced at 50,000/s into `udp:PORT,rcvbuf=4M | file:OUT` (all must arrive,
  *     in order), and unpaced (received + dropped must equal sent); and the heap of a stage whose
  *     consumer stops reading for 10 s (bounded channels keep it small).
  * Each side runs in turn within a round, so both see the same machine; a warm-up round first.
  */
object PipelineSuite extends Suite:
  import Processes.{asyncpipe, asyncpipeArgs, q, shell}
  val name = "pipeline"
  val description = "shell pipelines of asyncpipe processes and in-process run vs cat; UDP delivery; interactive latency; heap"

  private val MiB = 1024.0 * 1024

  def run(h: Harness): SuiteResult =
    val dir = Workspace.create()
    try
      val big = dir.resolve("big.txt")
      val lines = dir.resolve("seq.txt")
      val bigSize = h.plan.ops(1 << 30).toLong
      Workspace.writeText(big, bigSize)
      shell(s"seq 1 ${h.plan.ops(25_000_000)} > ${q(lines)}")
      val rounds = 1 + math.min(h.plan.iterations, 5)
      val out = dir.resolve("out")
      val cat3, three, inProcess, oneCopy, cat1, mux1, limited, plainTty, progressTty = Seq.newBuilder[Double]
      val tty = Processes.onPath("script") // util-linux: a terminal for --progress to draw on
      for round <- 1 to rounds do
        val measured = round > 1
        h.progress(s"pipeline: round $round of $rounds${if measured then "" else " (warm-up)"}")
        def timed(command: String, bytes: Long, check: Boolean): Double =
          val t0 = System.nanoTime()
          shell(command)
          val rate = bytes / MiB / ((System.nanoTime() - t0) / 1e9)
          if check then Workspace.sameContent(big, out)
          rate
        val c = timed(s"cat ${q(big)} | cat | cat > ${q(out)}", bigSize, check = false)
        val a = timed(s"$asyncpipe file:${q(big)} - | $asyncpipe mux | $asyncpipe - file:${q(out)}", bigSize, check = round == 2)
        val r = timed(s"$asyncpipe run ${q(s"file:$big | mux | file:$out")}", bigSize, check = round == 2)
        val w = timed(s"cat ${q(big)} > ${q(out)}", bigSize, check = false)
        val lineBytes = Files.size(lines)
        val cl = timed(s"cat ${q(lines)} | cat | cat > /dev/null", lineBytes, check = false)
        val ml = timed(s"cat ${q(lines)} | $asyncpipe mux | cat > /dev/null", lineBytes, check = false)
        def threeStages(first: String) = s"$asyncpipe $first file:${q(big)} - | $asyncpipe mux | $asyncpipe - file:${q(out)}"
        // Checked as the plain copy is: a pipeline's status is its last command's, so a first stage
        // that refused its options would go unseen (and look fast).
        val rl = timed(threeStages("--rate-limit 1T"), bigSize, check = round == 2)
        if measured then
          cat3 += c; three += a; inProcess += r; oneCopy += w; cat1 += cl; mux1 += ml; limited += rl
          if tty then
            def onTerminal(command: String) = s"script -qec ${q(command)} /dev/null"
            plainTty += timed(onTerminal(threeStages("")), bigSize, check = round == 2)
            progressTty += timed(onTerminal(threeStages("--progress")), bigSize, check = round == 2)
      def m(label: String, xs: Seq[Double]) = Measurement(label, xs, None, 0, "MiB/s")
      val threeM = m("asyncpipe file:IN | asyncpipe mux | asyncpipe file:OUT", three.result())
      val comparisons = Seq(
        Comparison(threeM, m("cat IN | cat | cat > OUT", cat3.result()), Some(Target.atLeast(1.0))),
        Comparison(m("asyncpipe run 'file:IN | mux | file:OUT'", inProcess.result()), threeM, Some(Target.atLeast(2.0))),
        Comparison(m("cat IN > OUT (one copy: about the most run can do)", oneCopy.result()), threeM, None),
        Comparison(m("cat SEQ | asyncpipe mux | cat", mux1.result()), m("cat SEQ | cat | cat", cat1.result()), Some(Target.atLeast(0.5))),
        Comparison(m("the same, the first stage with --rate-limit 1T (no wait)", limited.result()), threeM, Some(Target.atLeast(0.98)))
      ) ++ (if !tty then Nil else Seq(
        Comparison(m("the same on a terminal (script), with --progress", progressTty.result()),
          m("the same on a terminal (script)", plainTty.result()), Some(Target.atLeast(0.98)))))
      h.progress("pipeline: in-process frames/s")
      val framesPerSecond = inProcessFrames(lines, dir.resolve("seq.out"))
      h.progress("pipeline: interactive latency")
      val latency = interactiveLatencyMillis(20)
      h.progress("pipeline: UDP paced and unpaced")
      val count = h.plan.ops(100_000)
      val paced = udpPaced(count, 50_000, dir.resolve("udp.out"))
      val unpaced = udpUnpaced(count)
      h.progress("pipeline: --rate-limit 10M")
      val rateError = rateLimitErrorPercent(big, h.plan.ops(100_000_000).toLong, 10L << 20)
      h.progress("pipeline: heap with a stopped consumer")
      val heap = stalledHeapMiB(big, if h.plan.scale < 1 then 1 else 10)
      SuiteResult(name, comparisons, Seq(
        Figure("in-process run, seq lines: frames/s", framesPerSecond._1, "frames/s", None),
        Figure("in-process run, seq lines: MiB/s", framesPerSecond._2, "MiB/s", None),
        Figure("interactive line through mux, median", latency, "ms", Some(Target.below(100))),
        Figure(s"$count datagrams paced at 50,000/s: arrived (in order)", paced, "%", Some(Target.exactly(100))),
        Figure(s"$count datagrams unpaced: (received + dropped) / sent", unpaced, "%", Some(Target.exactly(100))),
        Figure("heap of a stage whose consumer stopped reading", heap, "MiB", Some(Target.below(256))),
        Figure("--rate-limit 10M over 100 MB: off the rate by", rateError, "%", Some(Target.below(2)))
      ))
    finally Workspace.delete(dir)

  // -----------------------------------------------------------------------------------------------
  // Figures

  /** `run 'file:LINES | mux | file:OUT' --stats-json`: frames/s and MiB/s from its own statistics. */
  private def inProcessFrames(lines: Path, out: Path): (Double, Double) =
    val p = ProcessBuilder(asyncpipeArgs("run", "--stats-json", s"file:$lines | mux | file:$out")*)
      .redirectOutput(ProcessBuilder.Redirect.DISCARD).start()
    val err = String(p.getErrorStream.readAllBytes(), StandardCharsets.UTF_8)
    if p.waitFor() != 0 then throw IllegalStateException(s"in-process run failed: $err")
    val last = err.linesIterator.filter(_.contains("\"final\":true")).toSeq.lastOption.getOrElse(throw IllegalStateException(s"no final stats: $err"))
    val seconds = Json.seconds(last)
    (Json.inputs(last, "frames") / seconds, Json.inputs(last, "bytes") / MiB / seconds)

  /** `head -c BYTES BIG | asyncpipe --rate-limit RATE - -` read here as it comes: how far the rate
    * a reader sees (the bytes after the first read, over the time from the first byte to the end)
    * is off `perSecond`, in %. The JVM's start is not in it, as a reader sees no rate before the
    * first byte.
    */
  private def rateLimitErrorPercent(big: Path, bytes: Long, perSecond: Long): Double =
    val p = ProcessBuilder("sh", "-c", s"head -c $bytes ${q(big)} | $asyncpipe --rate-limit $perSecond - -")
      .redirectError(ProcessBuilder.Redirect.INHERIT).start()
    val in = p.getInputStream
    val buffer = new Array[Byte](1 << 16)
    var n = in.read(buffer)
    val first = System.nanoTime()
    val firstBytes = math.max(n, 0).toLong
    var total = firstBytes
    while n >= 0 do
      n = in.read(buffer)
      if n > 0 then total += n
    val end = System.nanoTime()
    if p.waitFor() != 0 || total != bytes then throw IllegalStateException(s"--rate-limit run: exit ${p.exitValue}, $total of $bytes bytes")
    val kept = (total - firstBytes) / ((end - first) / 1e9)
    math.abs(kept / perSecond - 1) * 100

  /** Median milliseconds from writing a line into `mux` (stdin kept open) to reading it on its stdout. */
  private def interactiveLatencyMillis(lines: Int): Double =
    val p = ProcessBuilder(asyncpipeArgs("mux")*).redirectError(ProcessBuilder.Redirect.DISCARD).start()
    try
      val times = Processes.lineRoundTrips(p, lines + 1, "mux")
      Measurement.medianOf(times.drop(1)) // the first includes the JVM start
    finally
      p.getOutputStream.close()
      p.waitFor(10, TimeUnit.SECONDS)
      p.destroyForcibly()

  /** `udp:127.0.0.1:PORT,rcvbuf=4M | file:OUT` fed `count` numbered datagrams at `perSecond`:
    * the percentage that arrived (the suite fails if any came out of order).
    */
  private def udpPaced(count: Int, perSecond: Int, out: Path): Double =
    val port = Udp.freePort()
    val p = ProcessBuilder("sh", "-c",
      s"$asyncpipe --count $count --idle-timeout 3s udp:127.0.0.1:$port,rcvbuf=4M - | $asyncpipe - file:${q(out)}")
      .redirectError(ProcessBuilder.Redirect.DISCARD).redirectOutput(ProcessBuilder.Redirect.DISCARD).start()
    Udp.awaitBound(port)
    Udp.send(port, count, perSecond)
    if !p.waitFor(60, TimeUnit.SECONDS) then { p.destroyForcibly(); throw IllegalStateException("paced UDP pipeline did not end") }
    val got = Files.readAllLines(out).asScala.map(_.toInt)
    val outOfOrder = got.sliding(2).count(pair => pair.size == 2 && pair(1) <= pair(0))
    if outOfOrder > 0 then throw IllegalStateException(s"paced UDP: $outOfOrder datagrams came out of order")
    got.size * 100.0 / count

  /** `udp:127.0.0.1:PORT --stats-json` fed `count` datagrams unpaced: (received + dropped) / sent. */
  private def udpUnpaced(count: Int): Double =
    val port = Udp.freePort()
    val p = ProcessBuilder(asyncpipeArgs("--idle-timeout", "2s", "--stats-json", s"udp:127.0.0.1:$port", "-")*)
      .redirectOutput(ProcessBuilder.Redirect.DISCARD).start()
    Udp.awaitBound(port)
    Udp.send(port, count, perSecond = 0)
    val err = String(p.getErrorStream.readAllBytes(), StandardCharsets.UTF_8)
    p.waitFor()
    val last = err.linesIterator.filter(_.contains("\"final\":true")).toSeq.lastOption.getOrElse(throw IllegalStateException(s"no final stats: $err"))
    val counted = Json.inputs(last, "frames") + Json.inputs(last, "dropped") + Json.inputs(last, "kernel_drops")
    counted * 100.0 / count

  /** Heap used (MiB, by `jcmd GC.heap_info`) of `asyncpipe file:BIG -` whose reader reads nothing for `seconds`. */
  private def stalledHeapMiB(big: Path, seconds: Int): Double =
    val proc = ProcessBuilder("sh", "-c", s"exec $asyncpipe file:${q(big)} -")
      .redirectError(ProcessBuilder.Redirect.DISCARD).start() // its stdout: a pipe this JVM never reads
    try
      LockSupport.parkNanos(seconds * 1_000_000_000L) // the measured condition: stopped for this long
      val jcmd = Path.of(System.getProperty("java.home"), "bin", "jcmd").toString
      val info = ProcessBuilder(jcmd, proc.pid.toString, "GC.heap_info").redirectErrorStream(true).start()
      val text = String(info.getInputStream.readAllBytes(), StandardCharsets.UTF_8)
      info.waitFor()
      val used = """used (\d+)K""".r.findAllMatchIn(text).map(_.group(1).toLong).toSeq
      if used.isEmpty then throw IllegalStateException(s"jcmd GC.heap_info said: ${text.take(500)}")
      used.max / 1024.0
    finally proc.destroyForcibly().waitFor()

  // -----------------------------------------------------------------------------------------------
  // Helpers

  private[bench] object Workspace:
    def create(): Path =
      val shm = Path.of("/dev/shm")
      if Files.isDirectory(shm) && Files.isWritable(shm) then Files.createTempDirectory(shm, "asyncpipe-bench")
      else Files.createTempDirectory("asyncpipe-bench")

    def delete(dir: Path): Unit =
      Files.list(dir).forEach(Files.delete(_))
      Files.delete(dir)

    /** `size` bytes of lines of varied text (every line differs, so a misplaced block shows). */
    def writeText(path: Path, size: Long): Unit =
      val ch = java.nio.channels.FileChannel.open(path, java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.WRITE, java.nio.file.StandardOpenOption.TRUNCATE_EXISTING)
      try
        var n = 0L
        var written = 0L
        val buf = ByteBuffer.allocate(1 << 20)
        while written < size do
          buf.clear()
          while buf.remaining > 100 && written + buf.position() < size do
            n += 1
            buf.put(s"$n the quick brown fox jumps over the lazy dog ${n * 2654435761L % 1000003}\n".getBytes(StandardCharsets.US_ASCII))
          buf.flip()
          if written + buf.remaining > size then buf.limit((size - written).toInt)
          written += buf.remaining
          while buf.hasRemaining do ch.write(buf)
      finally ch.close()

    def sameContent(a: Path, b: Path): Unit =
      if Files.mismatch(a, b) != -1L then throw IllegalStateException(s"$b differs from $a")

  private object Udp:
    def freePort(): Int =
      val ch = DatagramChannel.open().bind(InetSocketAddress("127.0.0.1", 0))
      try ch.getLocalAddress.asInstanceOf[InetSocketAddress].getPort finally ch.close()

    /** Waits (at most 30 s) until some socket is bound to `port`, by /proc/net/udp and udp6 (a
      * JDK socket is an IPv6 one that takes IPv4 too, where the system has IPv6).
      */
    def awaitBound(port: Int): Unit =
      val hex = f":$port%04X "
      def bound = Seq("/proc/net/udp", "/proc/net/udp6").map(Path.of(_)).exists(p => Files.isReadable(p) && Files.readString(p).contains(hex))
      val deadline = System.nanoTime() + 30_000_000_000L
      while !bound do
        if System.nanoTime() > deadline then throw IllegalStateException(s"nothing bound UDP port $port within 30 s")
        LockSupport.parkNanos(10_000_000)

    /** Sends "1\n" .. "count\n" to 127.0.0.1:port, `perSecond` a second (0: as fast as it can). */
    def send(port: Int, count: Int, perSecond: Int): Unit =
      val ch = DatagramChannel.open()
      try
        val to = InetSocketAddress("127.0.0.1", port)
        val start = System.nanoTime()
        var i = 1
        while i <= count do
          if perSecond > 0 then
            val due = start + (i - 1).toLong * 1_000_000_000L / perSecond
            while System.nanoTime() < due do Thread.onSpinWait()
          ch.send(ByteBuffer.wrap(s"$i\n".getBytes(StandardCharsets.US_ASCII)), to)
          i += 1
      finally ch.close()

  /** Numbers from a line of `--stats-json`. */
  private object Json:
    /** `key` summed over the line's inputs. */
    def inputs(line: String, key: String): Double =
      val start = line.indexOf("\"inputs\":[")
      val end = line.indexOf("]", start)
      if start < 0 || end < 0 then throw IllegalStateException(s"no inputs in $line")
      val found = s""""$key":([0-9]+)""".r.findAllMatchIn(line.substring(start, end)).map(_.group(1).toDouble).toSeq
      if found.isEmpty then throw IllegalStateException(s"no \"$key\" among the inputs of $line")
      found.sum

    def seconds(line: String): Double =
      """"elapsed_s":([0-9.]+)""".r.findFirstMatchIn(line).map(_.group(1).toDouble)
        .getOrElse(throw IllegalStateException(s"no elapsed_s in $line"))
