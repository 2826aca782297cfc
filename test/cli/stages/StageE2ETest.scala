package asyncpipe.cli.stages

import asyncpipe.cli.*

import asyncpipe.cli.command.*

import asyncpipe.async.{Support, Watchdog}
import java.io.{ByteArrayOutputStream, File, InputStream}
import java.lang.ProcessBuilder.Redirect
import java.net.{DatagramPacket, DatagramSocket, InetAddress, InetSocketAddress}
import java.nio.ByteBuffer
import java.nio.channels.DatagramChannel
import java.nio.charset.StandardCharsets.UTF_8
import java.security.MessageDigest
import java.util.concurrent.{CompletableFuture, TimeUnit}
import scala.collection.mutable.ArrayBuffer
import scala.concurrent.duration.{Duration, FiniteDuration}
import scala.jdk.CollectionConverters.*
import scala.util.{Random, Try}

/** The pipeline stages end to end: the built tool as real processes (see [[Launch]]), joined by
  * real pipes, files and UDP sockets on 127.0.0.1, checked as a user sees them: the bytes that come
  * out, exit statuses, and what stdout and stderr carry.
  */
class StageE2ETest extends munit.FunSuite with Watchdog:
  import StageE2ETest.*

  override def watchdog: FiniteDuration = Duration(60, TimeUnit.SECONDS)

  override def beforeAll(): Unit =
    assume(Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")

  private val e2e = FunFixture[Env](_ => Env(os.temp.dir(prefix = "asyncpipe-e2e-")), _.close())

  // -----------------------------------------------------------------------------------------------
  // Byte-exact copies, for every framing and three ways of joining the stages

  private val framings = Seq("lines", "nul", "len", "raw")

  for frame <- framings do
    e2e.test(s"--frame $frame: asyncpipe [OPTIONS] file:IN file:OUT copies byte for byte"): env =>
      val in = env.write("in.bin", sample(frame))
      val r = env.start(Seq("--frame", frame, s"file:$in", s"file:${env.dir / "out.bin"}"))
      assertEquals(r.exit(Slow), 0, r.err)
      assertSameBytes(env.dir / "out.bin", in)
      assertEquals(r.err, "")

    e2e.test(s"--frame $frame: three processes 'asyncpipe file:IN - | asyncpipe mux | asyncpipe - file:OUT' copy byte for byte"): env =>
      val in = env.write("in.bin", sample(frame))
      val out = env.dir / "out.bin"
      // The sample ends inside a frame (lines, nul), which a stage reading a pipe reports unless
      // told that the data lacks its final terminator (FaultTest checks the report).
      val quiet = Seq("--final-delimiter", "optional")
      val stages = Seq(
        Seq("--frame", frame, s"file:$in", "-"),
        Seq("mux", "--frame", frame) ++ quiet,
        Seq("--frame", frame, "-", s"file:$out") ++ quiet
      )
      val builders = stages.zipWithIndex.map { (args, i) =>
        ProcessBuilder(Launch.command(args*).asJava).redirectError((env.dir / s"err$i.txt").toIO)
      }
      builders.head.redirectInput(Redirect.from(File("/dev/null")))
      builders.last.redirectOutput((env.dir / "stdout.txt").toIO)
      val procs = ProcessBuilder.startPipeline(builders.asJava).asScala.toSeq
      env.adopt(procs*)
      for (p, i) <- procs.zipWithIndex do
        assertEquals(exitOf(p, s"stage ${i + 1}", Slow), 0, os.read(env.dir / s"err$i.txt"))
      assertSameBytes(out, in)
      assertEquals(os.read(env.dir / "stdout.txt"), "", "the last stage wrote to a file, not to stdout")
      for i <- stages.indices do assertEquals(os.read(env.dir / s"err$i.txt"), "", s"stderr of stage ${i + 1}")

    e2e.test(s"--frame $frame: asyncpipe run 'file:IN | mux | file:OUT' copies byte for byte"): env =>
      val in = env.write("in.bin", sample(frame))
      val out = env.dir / "out.bin"
      val r = env.start(Seq("run", "--frame", frame, s"file:'$in' | mux | file:'$out'"))
      assertEquals(r.exit(Slow), 0, r.err)
      assertSameBytes(out, in)
      assertEquals((r.out, r.err), ("", ""))

  e2e.test("a single argument 'A | mux | B' is a pipeline, as asyncpipe run"): env =>
    val in = env.write("in.txt", sample("lines"))
    val out = env.dir / "out.txt"
    val r = env.start(Seq(s"file:$in | mux | file:$out"))
    assertEquals(r.exit(Slow), 0, r.err)
    assertSameBytes(out, in)

  // -----------------------------------------------------------------------------------------------
  // UDP

  e2e.test("udp source: every datagram is one frame, its bytes exactly (--frame len on stdout), --count ends it with 0"): env =>
    val rnd = Random(7)
    val datagrams: Seq[Array[Byte]] = Seq(
      bytes("hello world"), bytes("  two  spaces  "), Array.emptyByteArray, bytes("line\n"), bytes("a\nb"),
      Array.fill(60_000)(rnd.nextInt(256).toByte), Array[Byte](0, 10, 13, 0), bytes("last")
    )
    val src = env.udpSource(port => Seq("--frame", "len", "--count", datagrams.size.toString, s"udp:127.0.0.1:$port", "-"))
    sendAll(src.port, datagrams)
    assertEquals(src.exit(), 0, src.err)
    val got = decodeLen(os.read.bytes(src.stdoutFile))
    assertEquals(got.map(_.toSeq), datagrams.map(_.toSeq), "the frames on stdout are not the datagrams sent")
    assertEquals(src.err, "")

  e2e.test("udp source under lines: a datagram's one trailing newline is its terminator, an empty datagram an empty line"): env =>
    val src = env.udpSource(port => Seq("--count", "4", s"udp:127.0.0.1:$port", "-"))
    sendAll(src.port, Seq("one", "two words\n", "", "three").map(bytes))
    assertEquals(src.exit(), 0, src.err)
    assertEquals(os.read(src.stdoutFile), "one\ntwo words\n\nthree\n")

  e2e.test("udp:127.0.0.1:0 binds a port the kernel chose and tells it on stderr; a datagram sent there arrives"): env =>
    val r = env.start(Seq("--count", "1", "udp:127.0.0.1:0", "-"))
    val said = """asyncpipe: udp:127\.0\.0\.1:0 listens on port ([0-9]+)\n""".r
    Support.eventually("asyncpipe to tell its port") { said.matches(r.err) || !r.alive }
    val port = r.err match
      case said(p) => p.toInt
      case other   => fail(s"stderr was: $other")
    assert(boundBy(r.process.pid, port), s"asyncpipe does not hold the port $port it told")
    sendAll(port, Seq(bytes("hello")))
    assertEquals(r.exit(), 0, r.err)
    assertEquals(r.out, "hello\n")

  e2e.test("udp source: a rcvbuf over net.core.rmem_max is granted as far as the kernel allows, and stderr says so"): env =>
    assume(rmemMax < (1L << 29), s"net.core.rmem_max is $rmemMax: no ask above it fits")
    val asked = 2 * rmemMax
    val r = env.udpSource(port => Seq("--count", "1", s"udp:127.0.0.1:$port,rcvbuf=$asked", "-"))
    Support.eventually("the warning on stderr") { r.err.nonEmpty }
    assert(r.err.contains(s"granted a receive buffer of $rmemMax bytes, not $asked (net.core.rmem_max)"), r.err)
    sendAll(r.port, Seq(bytes("still works")))
    assertEquals(r.exit(), 0, r.err)
    assertEquals(r.out, "still works\n")

  e2e.test("udp source: --count ends it after exactly N datagrams when many more are waiting (they arrive in batches)"): env =>
    val src = env.udpSource(port => Seq("--count", "300", s"udp:127.0.0.1:$port,rcvbuf=4M", "-"))
    sendAll(src.port, (0 until 1000).map(i => bytes(i.toString))) // loopback: all wait in the kernel at once
    assertEquals(src.exit(), 0, src.err)
    assertEquals(os.read(src.stdoutFile), (0 until 300).map(_.toString + "\n").mkString)

  e2e.test("udp source: a burst that fills one whole message (256 datagrams, or 5 of 60 KB) reaches the file without a later datagram"): env =>
    for (count, size) <- Seq((256, 10), (5, 60_000)) do
      val out = env.dir / s"burst-$count.bin"
      val src = env.udpSource(port => Seq("--frame", "len", s"udp:127.0.0.1:$port,rcvbuf=4M", s"file:$out"))
      kill("STOP", src.process.pid) // all of the burst waits in the kernel, to be read as one message
      sendAll(src.port, Seq.fill(count)(Array.fill(size)('x'.toByte)))
      kill("CONT", src.process.pid)
      val want = count * (4L + size)
      Support.eventually(s"$want bytes in $out (the stage flushes when nothing more waits)") { os.exists(out) && os.size(out) == want }
      kill("TERM", src.process.pid)
      assertEquals(src.exit(), 143, src.err)

  e2e.test("udp sink: 'asyncpipe - udp:127.0.0.1:PORT' sends each line as one datagram, newline appended"): env =>
    withReceiver { rx =>
      val r = env.start(Seq("-", s"udp:127.0.0.1:${rx.port}"), stdin = Redirect.from(env.write("in.txt", "one\ntwo words\n\nlast without newline").toIO))
      assertEquals(r.exit(), 0, r.err)
      val got = (1 to 4).map(_ => rx.receiveText())
      assertEquals(got, Seq("one\n", "two words\n", "\n", "last without newline\n"))
    }

  e2e.test("udp to udp: a relay keeps every datagram whole under --frame len (an empty one too)"): env =>
    withReceiver { rx =>
      val datagrams = Seq("alpha", "", "with\nnewline", "x" * 30_000, "omega").map(bytes)
      val relay = env.udpSource(port => Seq("--frame", "len", "--count", datagrams.size.toString, s"udp:127.0.0.1:$port", s"udp:127.0.0.1:${rx.port}"))
      sendAll(relay.port, datagrams)
      val got = datagrams.indices.map(_ => rx.receive().toSeq)
      assertEquals(got, datagrams.map(_.toSeq))
      assertEquals(relay.exit(), 0, relay.err)
    }

  e2e.test("fan-in: several senders into one udp source, --count of them all, each sender's datagrams in its order"): env =>
    val senders = 3
    val each = 100
    val src = env.udpSource(port => Seq("--count", (senders * each).toString, s"udp:127.0.0.1:$port", "-"), stdout = Redirect.PIPE)
    // At most `window` datagrams in flight beyond what stdout has shown: the kernel's receive
    // buffer never overflows, so none is lost.
    val window = java.util.concurrent.Semaphore(32)
    val lines = LineReader(src.process.getInputStream, () => window.release())
    val threads = (0 until senders).map { s =>
      Thread.ofPlatform().daemon().start { () =>
        val ch = DatagramChannel.open()
        try
          for i <- 0 until each do
            if !window.tryAcquire(Support.Patience, TimeUnit.MILLISECONDS) then throw IllegalStateException("stdout stalled")
            ch.send(ByteBuffer.wrap(bytes(s"sender$s-$i")), InetSocketAddress("127.0.0.1", src.port))
        finally ch.close()
      }
    }
    threads.foreach(t => Support.join(t, "a sender"))
    assertEquals(src.exit(), 0, src.err)
    val got = lines.all()
    assertEquals(got.size, senders * each, s"expected ${senders * each} lines, got ${got.size}")
    for s <- 0 until senders do
      assertEquals(got.filter(_.startsWith(s"sender$s-")), (0 until each).map(i => s"sender$s-$i"), s"the lines of sender $s")

  // -----------------------------------------------------------------------------------------------
  // mux: fan-out and per-source order

  // Past KernelCopy.After (4 MiB) a stage moves a stream inside the kernel (ADR 0009): splice from
  // a pipe, sendfile from a file, into a pipe; the sink writes its file the usual way.
  for frame <- Seq("lines", "nul", "raw") do
    e2e.test(s"--frame $frame: 12 MB through three processes (moved in the kernel after 4 MiB, frames over 64 KiB and 1 MiB among them) byte for byte"): env =>
      val rnd = Random(frame.hashCode + 1)
      val big = ByteArrayOutputStream()
      val unit = sample(frame)
      while big.size < 12_000_000 do
        big.write(unit, 0, unit.length - 40) // whole frames of the sample (its odd last one left out)
        val d = if frame == "nul" then 0 else '\n'.toInt
        big.write(Array.fill[Byte](if rnd.nextBoolean() then 100_000 else 1_200_000)('k'.toByte))
        big.write(d)
      val in = env.write("in.bin", big.toByteArray)
      val out = env.dir / "out.bin"
      val stages = Seq(Seq("--frame", frame, s"file:$in", "-"), Seq("mux", "--frame", frame), Seq("--frame", frame, "-", s"file:$out"))
      val builders = stages.zipWithIndex.map { (args, i) =>
        ProcessBuilder(Launch.command(args*).asJava).redirectError((env.dir / s"err$i.txt").toIO)
      }
      val procs = ProcessBuilder.startPipeline(builders.asJava).asScala.toSeq
      env.adopt(procs*)
      for (p, i) <- procs.zipWithIndex do
        assertEquals(exitOf(p, s"stage ${i + 1}", Slow), 0, os.read(env.dir / s"err$i.txt"))
      assertSameBytes(out, in)
      for i <- stages.indices do assertEquals(os.read(env.dir / s"err$i.txt"), "", s"stderr of stage ${i + 1}")

  e2e.test("fan-out: 'mux --out file:A --out file:B' writes stdout and both files identical to the input"): env =>
    val in = env.write("in.txt", sample("lines"))
    val (a, b) = (env.dir / "a.txt", env.dir / "b.txt")
    val r = env.start(Seq("mux", "--out", s"file:$a", "--out", s"file:$b"), stdin = Redirect.from(in.toIO))
    assertEquals(r.exit(Slow), 0, r.err)
    assertSameBytes(r.stdoutFile, in)
    assertSameBytes(a, in)
    assertSameBytes(b, in)

  e2e.test("--output-error warn: an output that fails (file:/dev/full) is reported, the others get everything, exit 1"): env =>
    assume(os.exists(os.Path("/dev/full")), "no /dev/full here")
    val in = env.write("in.txt", sample("lines"))
    val r = env.start(Seq("mux", "--output-error", "warn", "--out", "file:/dev/full"), stdin = Redirect.from(in.toIO))
    assertEquals(r.exit(Slow), ExitCode.Runtime, r.err)
    assertSameBytes(r.stdoutFile, in)
    assert(r.err.contains("file:/dev/full") && r.err.contains("no space left on device") && r.err.contains("going on with the other outputs"), r.err)

  e2e.test("--output-error warn: an output that cannot be opened is reported, the others get everything, exit 1"): env =>
    val in = env.write("in.txt", sample("lines"))
    val good = env.dir / "good.txt"
    val r = env.start(Seq("mux", "--output-error", "warn", "--out", "file:/nonexistent-dir/x", "--out", s"file:$good"), stdin = Redirect.from(in.toIO))
    assertEquals(r.exit(Slow), ExitCode.Runtime, r.err)
    assertSameBytes(r.stdoutFile, in)
    assertSameBytes(good, in)
    assert(r.err.contains("file:/nonexistent-dir/x") && r.err.contains("going on with the other outputs"), r.err)
    assertEquals(r.err.linesIterator.size, 1, r.err)

  e2e.test("run: a later stage's output that cannot be opened under --output-error warn leaves the rest running"): env =>
    val in = env.write("in.txt", sample("lines"))
    val out = env.dir / "out.txt"
    val r = env.start(Seq("run", s"file:$in | mux --output-error warn --out file:/nonexistent-dir/x | file:$out"))
    assertEquals(r.exit(Slow), ExitCode.Runtime, r.err)
    assertSameBytes(out, in)
    assert(r.err.contains("file:/nonexistent-dir/x") && r.err.contains("going on with the other outputs"), r.err)

  e2e.test("an output that cannot be opened under the default --output-error exit: exit 1 before anything is written"): env =>
    val in = env.write("in.txt", sample("lines"))
    val r = env.start(Seq("mux", "--out", "file:/nonexistent-dir/x"), stdin = Redirect.from(in.toIO))
    assertEquals(r.exit(Slow), ExitCode.Runtime, r.err)
    assertEquals(r.out, "")
    assert(r.err.contains("file:/nonexistent-dir/x") && !r.err.contains("going on"), r.err)

  e2e.test("an output that fails (file:/dev/full) under the default --output-error exit: exit 1, stderr names it"): env =>
    assume(os.exists(os.Path("/dev/full")), "no /dev/full here")
    val in = env.write("in.txt", sample("lines"))
    val r = env.start(Seq("mux", "--out", "file:/dev/full"), stdin = Redirect.from(in.toIO))
    assertEquals(r.exit(Slow), ExitCode.Runtime, r.err)
    assert(r.err.contains("file:/dev/full") && r.err.contains("no space left on device"), r.err)
    assert(!r.err.contains("going on"), r.err)

  e2e.test("fan-in: 'mux --in file:X' with stdin keeps each source's order and never tears a line"): env =>
    val rnd = Random(3)
    def source(tag: String, n: Int) = (0 until n).map(i => s"$tag-$i-" + "y" * rnd.nextInt(300))
    val fromFile = source("file", 20_000)
    val fromStdin = source("stdin", 20_000)
    val x = env.write("x.txt", fromFile.mkString("", "\n", "\n"))
    val in = env.write("stdin.txt", fromStdin.mkString("", "\n", "\n"))
    val r = env.start(Seq("mux", "--in", s"file:$x"), stdin = Redirect.from(in.toIO))
    assertEquals(r.exit(Slow), 0, r.err)
    val got = os.read(r.stdoutFile).split("\n", -1).toSeq
    assertEquals(got.last, "", "the output ends with a newline")
    val lines = got.init
    assertEquals(lines.filter(_.startsWith("file-")), fromFile, "the frames of file:X, in their order, whole")
    assertEquals(lines.filter(_.startsWith("stdin-")), fromStdin, "the frames of stdin, in their order, whole")
    assertEquals(lines.size, fromFile.size + fromStdin.size, "every line is a whole input line")

  // -----------------------------------------------------------------------------------------------
  // Ending: a closed pipe, signals, timeouts

  e2e.test("EPIPE: 'asyncpipe tick:1ms - | head -n 3' exits 141 promptly, with nothing on stderr"): env =>
    val tick = ProcessBuilder(Launch.command("tick:1ms", "-").asJava).redirectError((env.dir / "err.txt").toIO)
    val head = ProcessBuilder("head", "-n", "3")
    val started = System.nanoTime()
    val procs = ProcessBuilder.startPipeline(Seq(tick, head).asJava).asScala.toSeq
    env.adopt(procs*)
    val shown = String(procs(1).getInputStream.readAllBytes(), UTF_8)
    assertEquals(exitOf(procs(1), "head"), 0)
    assertEquals(shown.linesIterator.size, 3, shown)
    assert(shown.linesIterator.forall(_.matches("[0-9]+")), shown)
    assertEquals(exitOf(procs(0), "asyncpipe after head exited"), ExitCode.ClosedPipe)
    assertEquals(os.read(env.dir / "err.txt"), "")
    val took = Support.millisSince(started)
    assert(took < Support.Patience, s"head -n 3 of tick:1ms took $took ms")

  // A stream copied as it is read (one stream input, one output): the reading thread writes.
  // Taking 6,000,000 bytes, head leaves while the stage moves bytes in the kernel (after 4 MiB).
  for (name, args) <- Seq("file:IN -" -> Seq("file:IN", "-"), "- - < IN" -> Seq("-", "-"), "mux < IN" -> Seq("mux")); take <- Seq(100, 6_000_000) do
    e2e.test(s"EPIPE: 'asyncpipe $name | head -c $take' exits 141 promptly, with nothing on stderr"): env =>
      val text = (1 to 600_000).map(i => s"line $i\n").mkString
      val in = env.write("in.txt", text)
      val stage = ProcessBuilder(Launch.command(args.map(a => if a == "file:IN" then s"file:$in" else a)*).asJava)
        .redirectInput(in.toIO).redirectError((env.dir / "err.txt").toIO)
      val procs = ProcessBuilder.startPipeline(Seq(stage, ProcessBuilder("head", "-c", take.toString)).asJava).asScala.toSeq
      env.adopt(procs*)
      val shown = String(procs(1).getInputStream.readAllBytes(), UTF_8)
      assertEquals(shown.length, take)
      assert(shown == text.take(take), "head did not get the input's start")
      assertEquals(exitOf(procs(0), "asyncpipe after head exited"), ExitCode.ClosedPipe)
      assertEquals(os.read(env.dir / "err.txt"), "")

  e2e.test("EPIPE on a udp source: asyncpipe exits 141 once head is gone, and its port is free again"): env =>
    // asyncpipe's stdout is head's stdin (a real pipe, through bash); the shell exits with asyncpipe's status.
    val (port, r) = env.udpSourceInto(port =>
      s"${shellCommand(s"udp:127.0.0.1:$port", "-")} | head -n 1 > '${env.dir / "head.txt"}'; exit $${PIPESTATUS[0]}")
    val ch = DatagramChannel.open()
    try
      var i = 0
      var last = 0L
      // A datagram every 20 ms until asyncpipe has seen that head is gone (on its next write).
      Support.eventually("asyncpipe to exit after head exited") {
        if System.nanoTime() - last > 20_000_000 then
          i += 1
          ch.send(ByteBuffer.wrap(bytes(s"m$i")), InetSocketAddress("127.0.0.1", port))
          last = System.nanoTime()
        !r.alive
      }
    finally ch.close()
    assertEndedQuietly(r, port, env.dir / "head.txt", "m1\n")

  // With nothing to write, a stage learns that its reader has gone from ReaderWatch.
  e2e.test("EPIPE with nothing to write: a udp source whose reader left exits 141 with no further datagram, its port free"): env =>
    val (port, r) = env.udpSourceInto(port =>
      s"${shellCommand(s"udp:127.0.0.1:$port", "-")} | head -n 1 > '${env.dir / "head.txt"}'; exit $${PIPESTATUS[0]}")
    sendAll(port, Seq(bytes("only")))
    assertEndedQuietly(r, port, env.dir / "head.txt", "only\n")

  for (name, args, feed) <- Seq(
      ("tick:1h -", Seq("tick:1h", "-"), None),
      ("- - (stdin open and quiet)", Seq("-", "-"), Some("first\n")),
      ("mux --out file:OUT (stdin open and quiet)", Seq("mux", "--out", "file:OUT"), Some("first\n"))
    ) do
    e2e.test(s"EPIPE with nothing to write: 'asyncpipe $name | head -n 1' exits 141 once head has gone"): env =>
      val stage = ProcessBuilder(Launch.command(args.map(_.replace("OUT", (env.dir / "out.txt").toString))*).asJava)
        .redirectError((env.dir / "err.txt").toIO)
      val procs = ProcessBuilder.startPipeline(Seq(stage, ProcessBuilder("head", "-n", "1")).asJava).asScala.toSeq
      env.adopt(procs*)
      val stdin = procs(0).getOutputStream
      try
        feed.foreach { text => stdin.write(bytes(text)); stdin.flush() } // and stdin stays open
        val shown = String(procs(1).getInputStream.readAllBytes(), UTF_8)
        assertEquals(exitOf(procs(1), "head"), 0)
        assertEquals(shown.linesIterator.size, 1, shown)
        assertEquals(exitOf(procs(0), "asyncpipe after head exited, its input quiet"), ExitCode.ClosedPipe)
        assertEquals(os.read(env.dir / "err.txt"), "")
      finally stdin.close()

  for (name, args) <- Seq(
      "tick:1h file:FIFO" -> Seq("tick:1h", "file:FIFO"),
      "mux --out file:FIFO (stdin open and quiet)" -> Seq("mux", "--out", "file:FIFO")
    ) do
    e2e.test(s"a FIFO output whose reader left while the stage is quiet: 'asyncpipe $name' exits 141, nothing on stderr"): env =>
      val fifo = env.dir / "fifo"
      assertEquals(os.proc("mkfifo", fifo.toString).call(check = false).exitCode, 0, "mkfifo")
      val first = if args.head == "mux" then "first" else "1"
      val r = env.start(args.map(_.replace("FIFO", fifo.toString)))
      val stdin = r.process.getOutputStream
      try
        if args.head == "mux" then { stdin.write(bytes(s"$first\n")); stdin.flush() } // and stdin stays open
        // Opening a FIFO's read end waits for its writer (the stage opening its output). The line
        // is read a byte at a time, so that no read is left blocked when the reader is closed (a
        // read in progress would keep the read end open).
        val firstLine = CompletableFuture.supplyAsync { () =>
          val reader = java.io.FileInputStream(fifo.toIO)
          try Iterator.continually(reader.read()).takeWhile(b => b >= 0 && b != '\n').map(_.toChar).mkString
          finally reader.close()
        }
        assertEquals(firstLine.get(Support.Patience, TimeUnit.MILLISECONDS), first)
        assertEquals(r.exit(), ExitCode.ClosedPipe, r.err)
        assertEquals(r.err, "")
      finally stdin.close()

  for (signal, status) <- Seq("INT" -> ExitCode.Interrupted, "TERM" -> ExitCode.Terminated) do
    e2e.test(s"SIG$signal mid-stream: exit $status, the file ends with a whole record"): env =>
      val out = env.dir / "out.txt"
      val r = env.start(Seq("tick:1ms", s"file:$out"))
      Support.eventually(s"$out to have content") { os.exists(out) && os.size(out) > 0 }
      kill(signal, r.process.pid)
      assertEquals(r.exit(), status, r.err)
      val text = os.read(out)
      assert(text.endsWith("\n"), s"the last byte is not a newline: ...${text.takeRight(20)}")
      val numbers = text.linesIterator.toSeq
      assert(numbers.forall(_.matches("[0-9]+")), s"a line is not a number: ${numbers.find(!_.matches("[0-9]+"))}")
      val ns = numbers.map(_.toLong)
      assert(ns.zip(ns.drop(1)).forall(_ < _), "the numbers are not increasing")
      assertEquals(r.err, "")

  for (signal, status) <- Seq("INT" -> ExitCode.Interrupted, "TERM" -> ExitCode.Terminated); args <- Seq(Seq("-", "file:OUT"), Seq("run", "- | mux | file:OUT")) do
    e2e.test(s"SIG$signal while 'asyncpipe ${args.mkString(" ")}' waits on stdin: exit $status, the whole lines that came are in the file, the partial one is not"): env =>
      val out = env.dir / "out.txt"
      val r = env.start(args.map(_.replace("file:OUT", s"file:$out")))
      val stdin = r.process.getOutputStream
      stdin.write(bytes("one\ntwo\npart"))
      stdin.flush()
      Support.eventually(s"$out to hold the whole lines") { os.exists(out) && os.read(out) == "one\ntwo\n" }
      kill(signal, r.process.pid)
      assertEquals(r.exit(), status, r.err)
      assertEquals(os.read(out), "one\ntwo\n")
      assertEquals(r.err, "")
      stdin.close()

  e2e.test("SIGINT while a udp source waits for a datagram: exit 130 at once, what came is in the file"): env =>
    val out = env.dir / "out.txt"
    val src = env.udpSource(port => Seq(s"udp:127.0.0.1:$port", s"file:$out"))
    sendAll(src.port, Seq("first", "second").map(bytes))
    Support.eventually(s"$out to hold both datagrams") { os.exists(out) && os.read(out) == "first\nsecond\n" }
    kill("INT", src.process.pid)
    assertEquals(src.exit(), ExitCode.Interrupted, src.err)
    assertEquals(os.read(out), "first\nsecond\n")
    assertEquals(src.err, "")

  e2e.test("a second signal while a stage is stuck (nobody reads stdout) exits at once with the first one's status"): env =>
    val r = env.start(Seq("--frame", "raw", "file:/dev/zero", "-"), stdout = Redirect.PIPE)
    // The pipe (64 KiB) fills, then asyncpipe's writes block: a stop cannot flush, so it cannot end.
    Support.eventually("stdout's pipe to fill") { r.process.getInputStream.available() >= 65_536 }
    // The same signal twice: two different ones sent back to back may reach the JVM's handler
    // threads in either order, and then either status is "the first one's" (a fresh-user run saw 143).
    kill("INT", r.process.pid)
    kill("INT", r.process.pid)
    assertEquals(r.exit(), ExitCode.Interrupted, r.err)

  e2e.test("a steady trickle (tick:1ms) reaches stdout as it comes, not in 64 KiB bursts"): env =>
    val r = env.start(Seq("tick:1ms", "-"), stdout = Redirect.PIPE)
    val lines = LineReader(r.process.getInputStream)
    assert(lines.next(Slow).isDefined, s"no line within $Slow ms")
    val until = System.nanoTime() + 2_000_000_000L
    var count = 0
    while System.nanoTime() < until do
      assert(lines.next(500).isDefined, s"stdout was silent for 500 ms while ticks kept coming (after $count lines)")
      count += 1

  e2e.test("--idle-timeout ends a udp source with 0 once no datagram came for that long"): env =>
    val src = env.udpSource(port => Seq("--idle-timeout", "1s", s"udp:127.0.0.1:$port", "-"))
    sendAll(src.port, Seq("a", "b").map(bytes))
    assertEquals(src.exit(), 0, src.err)
    assertEquals(os.read(src.stdoutFile), "a\nb\n")
    assertEquals(src.err, "")

  e2e.test("--stats: one summary line on stderr, and stdout carries the data only"): env =>
    val src = env.udpSource(port => Seq("--count", "3", "--stats", s"udp:127.0.0.1:$port", "-"))
    sendAll(src.port, Seq("one", "two words", "").map(bytes))
    assertEquals(src.exit(), 0, src.err)
    assertEquals(os.read(src.stdoutFile), "one\ntwo words\n\n")
    val lines = src.err.linesIterator.toSeq
    assertEquals(lines.size, 1, s"expected one summary line on stderr, got:\n${src.err}")
    assert(lines.head.startsWith("asyncpipe: 3 frames (12 B) in, 3 frames out"), lines.head)

  test("run: --stats given to a later stage reports the whole pipeline, counting the first stage's frames"):
    val r = Launch("run", "tick:10ms,count=3 | mux --stats | -")
    assertEquals(r.exitCode, 0, r.err)
    assertEquals(r.out, "1\n2\n3\n")
    val lines = r.err.linesIterator.toSeq
    assertEquals(lines.size, 1, r.err)
    assert(lines.head.startsWith("asyncpipe: 3 frames (3 B) in, 3 frames out"), lines.head)

  e2e.test("--stats-json: every stderr line is JSON; the final one counts what was sent and written"): env =>
    val sent = Seq("alpha", "beta gamma", "", "delta\n", "x" * 1000).map(bytes)
    val src = env.udpSource(port => Seq("--count", sent.size.toString, "--stats-json", s"udp:127.0.0.1:$port", "-"))
    sendAll(src.port, sent)
    assertEquals(src.exit(), 0, src.err)
    val stdout = os.read.bytes(src.stdoutFile)
    assertEquals(String(stdout, UTF_8), sent.map(String(_, UTF_8).stripSuffix("\n") + "\n").mkString)
    val last = finalStats(src.err)
    val in = last("inputs")(0)
    val out = last("outputs")(0)
    assertEquals(in("address").str, s"udp:127.0.0.1:${src.port}")
    assertEquals(in("frames").num.toLong, sent.size.toLong, "frames in")
    assertEquals(in("bytes").num.toLong, sent.map(_.length.toLong).sum, "bytes in: the datagrams sent, a trailing newline too")
    assertEquals(out("address").str, "-")
    assertEquals(out("frames").num.toLong, sent.size.toLong, "frames out")
    assertEquals(out("bytes").num.toLong, stdout.length.toLong, "bytes out: what stdout received")
    assertEquals((in("dropped").num, out("dropped").num, in("seq_gaps").num), (0.0, 0.0, 0.0))

  e2e.test("--stats-json: a notice (the port of udp:0) is a JSON line too"): env =>
    val r = env.start(Seq("--count", "1", "--stats-json", "udp:127.0.0.1:0", "-"))
    val said = """asyncpipe: udp:127\.0\.0\.1:0 listens on port ([0-9]+)""".r
    def told = Try(jsonLines(r.err)).toOption.toSeq.flatMap(saying(_, "notice")).collectFirst { case said(p) => p.toInt }
    Support.eventually("asyncpipe to tell its port as a JSON notice") { told.isDefined || !r.alive }
    val port = told.getOrElse(fail(s"no notice of the port on stderr: ${r.err}"))
    sendAll(port, Seq(bytes("hello")))
    assertEquals(r.exit(), 0, r.err)
    assertEquals(r.out, "hello\n")
    assertEquals(finalStats(r.err)("inputs")(0)("frames").num, 1.0)

  e2e.test("--stats-json: an output lost under --output-error warn, and --stats's summary, are JSON lines; exit 1"): env =>
    assume(os.exists(os.Path("/dev/full")), "no /dev/full here")
    val in = env.write("in.txt", sample("lines"))
    val r = env.start(Seq("mux", "--output-error", "warn", "--stats", "--stats-json", "--out", "file:/dev/full"), stdin = Redirect.from(in.toIO))
    assertEquals(r.exit(Slow), ExitCode.Runtime, r.err)
    assertSameBytes(r.stdoutFile, in)
    val lines = jsonLines(r.err)
    val warnings = saying(lines, "warning")
    assertEquals(warnings.size, 1, r.err)
    assert(warnings.head.contains("file:/dev/full") && warnings.head.contains("going on with the other outputs"), r.err)
    val summaries = saying(lines, "summary")
    assertEquals(summaries.size, 1, r.err)
    assert(summaries.head.startsWith("asyncpipe: ") && summaries.head.contains("frames out"), r.err)
    finalStats(r.err)

  e2e.test("--stats-json: a runtime error (a missing input file) is one JSON line naming the address; exit 1"): env =>
    val missing = env.dir / "missing.txt"
    for args <- Seq(Seq("--stats-json", s"file:$missing", "-"), Seq("run", s"file:$missing | mux --stats-json | -")) do
      val r = Launch(args*)
      assertEquals(r.exitCode, ExitCode.Runtime, r.err)
      assertEquals(r.out, "")
      val lines = jsonLines(r.err)
      assertEquals(lines.size, 1, r.err)
      val errors = saying(lines, "error")
      assertEquals(errors.size, 1, r.err)
      assert(errors.head.contains(s"file:$missing") && errors.head.contains("no such file"), r.err)

  e2e.test("--on-full drop with a stalled consumer: frames written + dropped + kernel drops = datagrams sent"): env =>
    val n = 4000
    val src = env.udpSource(
      // A receive buffer the kernel grants whole, so that the run is the same on every machine.
      port => Seq("--on-full", "drop", "--buffer", "1", "--idle-timeout", "1s", "--stats-json", s"udp:127.0.0.1:$port,rcvbuf=${math.min(4L << 20, rmemMax)}", "-"),
      stdout = Redirect.PIPE
    )
    // Nobody reads stdout yet: once its pipe and asyncpipe's buffers are full, the next stage is busy.
    // The burst (4 MB) is far more than the stage's pipe (1 MiB once grown) and buffers hold, and
    // the kernel buffer keeps most of it even when the stage starts reading late (a message may
    // carry 256 datagrams). With 3,000 datagrams of 208 bytes (624 KB) a grown pipe took them all.
    sendAll(src.port, (0 until n).map(i => bytes(f"$i%06d-" + "z" * 993)))
    val lines = LineReader(src.process.getInputStream) // now read everything (the source ends on idleness)
    assertEquals(src.exit(), 0, src.err)
    val got = lines.all()
    val last = finalStats(src.err)
    val in = last("inputs")(0)
    val (received, dropped, kernel) = (in("frames").num.toLong, in("dropped").num.toLong, in("kernel_drops").num.toLong)
    val written = last("outputs")(0)("frames").num.toLong
    assert(dropped > 0, s"nothing was dropped: $last")
    assertEquals(received + kernel, n.toLong, s"received + kernel drops must be what was sent: $last")
    assertEquals(written + dropped, received, s"written + dropped must be what was received: $last")
    assertEquals(got.size.toLong, written, "the lines on stdout")
    val ns = got.map(_.take(6).toInt)
    assert(ns.zip(ns.drop(1)).forall(_ < _), "the frames kept are in the order sent")

  e2e.test("--check-seq with kernel drops: each lost datagram counted once; frames out + dropped = datagrams sent, in the text and the JSON"): env =>
    val n = 20_000
    // The smallest receive buffer the kernel grants: a burst overflows it, and the drops the
    // kernel counts between received datagrams are sequence gaps too (once counted twice).
    val src = env.udpSource(port => Seq("--check-seq", "--idle-timeout", "1s", "--stats", "--stats-json", s"udp:127.0.0.1:$port,rcvbuf=1", "-"))
    // In bursts, each sent once the stage has written what came of the last: every burst after the
    // first starts after drops, so the received numbers have gaps however slowly the stage runs.
    val bursts = 20
    for b <- 0 until bursts do
      val seen = if os.exists(src.stdoutFile) then os.read.lines(src.stdoutFile).size else 0
      sendAll(src.port, (b * n / bursts + 1 to (b + 1) * n / bursts).map(i => bytes(f"$i%06d-" + "z" * 200)))
      Support.eventually(s"the stage to write what came of burst ${b + 1}", Slow) {
        os.exists(src.stdoutFile) && os.read.lines(src.stdoutFile).size > seen
      }
    assertEquals(src.exit(), 0, src.err)
    val last = finalStats(src.err)
    val (in, out) = (last("inputs")(0), last("outputs")(0))
    val (received, kernel, transit, gaps) =
      (in("frames").num.toLong, in("kernel_drops").num.toLong, in("lost_in_transit").num.toLong, in("seq_gaps").num.toLong)
    assert(kernel > 0, s"the kernel dropped nothing: the test shows nothing: $last")
    assert(gaps > 0 && gaps <= kernel, s"on loopback every gap is a kernel drop: $last")
    assertEquals(transit, 0L, s"nothing is lost in transit on loopback: $last")
    assertEquals(received + kernel + transit, n.toLong, s"received + kernel drops + lost in transit = sent: $last")
    assertEquals(out("frames").num.toLong, received, s"every datagram received is written: $last")
    assertEquals(os.read.lines(src.stdoutFile).size.toLong, received)
    val summary = jsonLines(src.err).collectFirst { case j if j.obj.contains("summary") => j("summary").str }
      .getOrElse(fail(s"no summary line:\n${src.err}"))
    val counts = """(\d+) frames out, dropped (\d+) \(busy/oversize 0, kernel (\d+), in transit 0\)""".r.unanchored
    summary match
      case counts(written, dropped, k) =>
        assertEquals((written.toLong + dropped.toLong, k.toLong), (n.toLong, kernel), summary)
      case _ => fail(s"the summary has no totals in the expected form: $summary")

  e2e.test("--oversize: a 70,000-byte frame into a udp sink fails (exit 1, the size named); --oversize drop counts it"): env =>
    withReceiver { rx =>
      val frames = Seq(bytes("small"), Array.fill[Byte](70_000)('x'.toByte), bytes("after"))
      val in = env.write("in.len", encodeLen(frames))
      val r = env.start(Seq("--frame", "len", s"file:$in", s"udp:127.0.0.1:${rx.port}"))
      assertEquals(r.exit(), ExitCode.Runtime, r.err)
      assert(r.err.contains(s"udp:127.0.0.1:${rx.port}") && r.err.contains("70000"), r.err)
      assertEquals(r.out, "")
      assertEquals(rx.receiveText(), "small")

      val d = env.start(Seq("--frame", "len", "--oversize", "drop", "--stats-json", s"file:$in", s"udp:127.0.0.1:${rx.port}"))
      assertEquals(d.exit(), 0, d.err)
      assertEquals(Seq(rx.receiveText(), rx.receiveText()), Seq("small", "after"))
      val out = finalStats(d.err)("outputs")(0)
      assertEquals((out("frames").num, out("dropped").num), (2.0, 1.0), d.err)
    }

  // -----------------------------------------------------------------------------------------------
  // Errors

  e2e.test("a missing input file: exit 1, stderr names file:PATH and 'no such file', the output file is left alone"): env =>
    val missing = env.dir / "missing.txt"
    val r = Launch(s"file:$missing", "-")
    assertEquals(r.exitCode, ExitCode.Runtime, r.err)
    assert(r.err.contains(s"file:$missing") && r.err.contains("no such file"), r.err)
    assertEquals(r.out, "")
    val keep = env.write("keep.txt", "precious\n")
    for args <- Seq(Seq(s"file:$missing", s"file:$keep"), Seq("run", s"tick:1ms | mux --in file:$missing | file:$keep")) do
      val again = Launch(args*)
      assertEquals(again.exitCode, ExitCode.Runtime, again.err)
      assertEquals(os.read(keep), "precious\n", s"${args.mkString(" ")} failed at its start, yet changed the output file")

  e2e.test("a udp port in use: exit 1, 'address already in use'"): env =>
    val held = DatagramChannel.open().bind(InetSocketAddress("127.0.0.1", 0))
    try
      val port = held.getLocalAddress.asInstanceOf[InetSocketAddress].getPort
      val r = Launch(s"udp:127.0.0.1:$port", "-")
      assertEquals(r.exitCode, ExitCode.Runtime, r.err)
      assert(r.err.contains(s"udp:127.0.0.1:$port") && r.err.contains("address already in use"), r.err)
      assertEquals(r.out, "")
    finally held.close()

  test("bad address tokens: exit 2, the token quoted, nothing on stdout"):
    for (args, token) <- Seq(
        Seq("file:in", "udp:70000") -> "'udp:70000'",
        Seq("tcp:1", "-") -> "'tcp:1'",
        Seq("-", "tick:1ms") -> "'tick:1ms'",
        Seq("tick:5", "-") -> "'tick:5'",
        Seq("-", "udp:127.0.0.1:0") -> "'udp:127.0.0.1:0'"
      )
    do
      val r = Launch(args*)
      assertEquals(r.exitCode, ExitCode.Usage, s"${args.mkString(" ")}: ${r.err}")
      assert(r.err.contains(token), s"${args.mkString(" ")}: expected $token in:\n${r.err}")
      assertEquals(r.out, "")

  test("an unknown option: exit 2 with a did-you-mean, before or after the addresses, and in mux and run"):
    for (args, option, meant) <- Seq(
        (Seq("-", "-", "--frmae", "len"), "--frmae", "--frame"),
        (Seq("--cuont", "3", "-", "-"), "--cuont", "--count"),
        (Seq("mux", "--ot", "file:x"), "--ot", "--out"),
        (Seq("run", "--idle-timout", "1s", "- | mux | -"), "--idle-timout", "--idle-timeout")
      )
    do
      val r = Launch(args*)
      assertEquals(r.exitCode, ExitCode.Usage, s"${args.mkString(" ")}: ${r.err}")
      assert(r.err.contains(s"'$option'") && r.err.contains(s"did you mean '$meant'"), s"${args.mkString(" ")}:\n${r.err}")

  e2e.test("the same file as input and output is refused before anything is written"): env =>
    val x = env.write("x.txt", "keep me\n")
    for args <- Seq(Seq(s"file:$x", s"file:$x"), Seq(s"file:$x", s"file:${env.dir}/./x.txt"), Seq("run", s"file:$x | mux | file:$x")) do
      val r = Launch(args*)
      assertEquals(r.exitCode, ExitCode.Usage, s"${args.mkString(" ")}: ${r.err}")
      assert(r.err.contains("same file"), r.err)
    assertEquals(os.read(x), "keep me\n")

  e2e.test("run: an address in the middle and an empty stage are refused (exit 2, the token quoted)"): env =>
    val middle = Launch("run", "tick:1ms,count=1 | file:x | -")
    assertEquals(middle.exitCode, ExitCode.Usage, middle.err)
    assert(middle.err.contains("'file:x'") && middle.err.contains("only be first"), middle.err)
    for text <- Seq("tick:1ms,count=1 | | -", "tick:1ms,count=1 | -  |", "| tick:1ms,count=1 | -") do
      val r = Launch("run", text)
      assertEquals(r.exitCode, ExitCode.Usage, s"$text: ${r.err}")
      assert(r.err.contains("a stage is empty"), s"$text: ${r.err}")

  e2e.test("one address with stdin and stdout both pipes is refused where it could destroy data, naming 'asyncpipe FROM TO'"): env =>
    val kept = env.write("x.txt", "kept\n")
    for addr <- Seq(s"file:$kept", s"file:$kept,fsync", "udp:127.0.0.1:9") do
      val r = Launch(addr)
      assertEquals(r.exitCode, ExitCode.Usage, s"$addr: ${r.err}")
      assert(r.err.contains("asyncpipe FROM TO") && r.err.contains("stdin is a pipe, stdout is a pipe"), s"$addr:\n${r.err}")
      assertEquals(r.out, "")
    assertEquals(os.read(kept), "kept\n", "a refused command changed the file")

  e2e.test("one address with stdin /dev/null is a source: 'asyncpipe file:IN' prints the file"): env =>
    val in = env.write("in.txt", "a\nb\n")
    val r = env.start(Seq(s"file:$in"), stdin = Redirect.from(File("/dev/null")))
    assertEquals(r.exit(), 0, r.err)
    assertEquals(os.read(r.stdoutFile), "a\nb\n")

  e2e.test("one address with stdin a file and stdout a terminal is a sink (under script's pty); a file that holds data is refused with stdout a file"): env =>
    assume(os.exists(os.Path("/usr/bin/script")) || os.exists(os.Path("/bin/script")), "script (util-linux) is not installed")
    val in = env.write("in.txt", "first\nsecond\n")
    val out = env.dir / "out.txt"
    val r = env.startCommand(Seq("script", "-qec", s"${shellCommand(s"file:$out")} < $in", "/dev/null"), stdin = Redirect.from(File("/dev/null")))
    assertEquals(r.exit(), 0, os.read(r.stdoutFile))
    assertEquals(os.read(out), "first\nsecond\n")
    val other = env.write("other.txt", "holds data\n")
    val refused = env.startCommand(Seq("bash", "-c", s"${shellCommand(s"file:$other")} < $in > ${env.dir / "stdout.txt"}"))
    assertEquals(refused.exit(), ExitCode.Usage, refused.err)
    assert(refused.err.contains("asyncpipe FROM TO") && refused.err.contains("stdin is a file, stdout is a file"), refused.err)
    assertEquals(os.read(other), "holds data\n")

  test("--help presents the address forms and pipelines as available (only planned verbs are marked)"):
    val r = Launch("--help")
    assertEquals(r.exitCode, 0, r.err)
    val marked = r.out.linesIterator.filter(_.contains("not in this version")).toSeq
    val planned = Main.verbs.filterNot(_.available).map(_.name)
    assert(marked.forall(l => planned.exists(v => l.trim.startsWith(v + " "))), s"marked as not available:\n${marked.mkString("\n")}")

  // -----------------------------------------------------------------------------------------------
  // Interactive use and the timer

  for args <- Seq(Seq("-", "-"), Seq("mux"), Seq("run", "- | mux | -")) do
    e2e.test(s"an interactive line reaches the next stage promptly: asyncpipe ${args.mkString(" ")}, stdin kept open"): env =>
      val r = env.start(args, stdout = Redirect.PIPE)
      val lines = LineReader(r.process.getInputStream)
      val stdin = r.process.getOutputStream
      for word <- Seq("hello", "again") do
        stdin.write(bytes(word + "\n"))
        stdin.flush()
        assertEquals(lines.next(2000), Some(word), s"the line '$word' did not come out within 2 s while stdin stayed open")
      stdin.close()
      assertEquals(r.exit(), 0, r.err)

  e2e.test("tick:50ms,count=3 prints 1, 2, 3 and exits 0"): env =>
    val r = env.start(Seq("tick:50ms,count=3"))
    assertEquals(r.exit(), 0, r.err)
    assertEquals(os.read(r.stdoutFile), "1\n2\n3\n")
    assertEquals(r.err, "")

object StageE2ETest:
  /** A bound for the heavier runs (a few MB through three JVMs on a busy 2-core machine). */
  val Slow: Long = 20_000

  def bytes(s: String): Array[Byte] = s.getBytes(UTF_8)

  /** A udp source piped into head: it exited 141 with nothing on stderr, head wrote `shown`, and
    * the port is free again.
    */
  def assertEndedQuietly(r: Running, port: Int, headFile: os.Path, shown: String)(using munit.Location): Unit =
    munit.Assertions.assertEquals(r.exit(), ExitCode.ClosedPipe, r.err)
    munit.Assertions.assertEquals(os.read(headFile), shown)
    munit.Assertions.assertEquals(r.err, "")
    val again = DatagramChannel.open()
    try again.bind(InetSocketAddress("127.0.0.1", port)) // throws if the port were still held
    finally again.close()

  /** The most a socket's receive buffer may be asked for here (bytes). */
  lazy val rmemMax: Long = os.read(os.Path("/proc/sys/net/core/rmem_max")).trim.toLong

  def sha256(b: Array[Byte]): String = MessageDigest.getInstance("SHA-256").digest(b).map(x => f"$x%02x").mkString

  def assertSameBytes(got: os.Path, expected: os.Path)(using munit.Location): Unit =
    munit.Assertions.assert(os.exists(got), s"$got does not exist")
    val (g, e) = (os.read.bytes(got), os.read.bytes(expected))
    munit.Assertions.assertEquals(
      s"${g.length} bytes, sha256 ${sha256(g)}",
      s"${e.length} bytes, sha256 ${sha256(e)}",
      s"$got differs from $expected" + firstDifference(g, e).fold("")(i => s" (first at byte $i)")
    )

  private def firstDifference(a: Array[Byte], b: Array[Byte]): Option[Int] =
    (0 until math.min(a.length, b.length)).find(i => a(i) != b(i)).orElse(Option.when(a.length != b.length)(math.min(a.length, b.length)))

  /** About 2 MB of data in each framing, with its edge cases. */
  def sample(frame: String): Array[Byte] =
    val rnd = Random(frame.hashCode)
    val b = ByteArrayOutputStream()
    val size = 2_000_000
    def noByte(excluded: Int, n: Int): Array[Byte] = Array.fill(n) { var x = excluded; while x == excluded do x = rnd.nextInt(256); x.toByte }
    frame match
      case "lines" =>
        while b.size < size do
          rnd.nextInt(10) match
            case 0 => b.write('\n')
            case 1 => b.write(noByte('\n', rnd.nextInt(200))); b.write("\r\n".getBytes)
            case _ => b.write(noByte('\n', rnd.nextInt(200))); b.write('\n')
        b.write(bytes("a last line without its newline"))
      case "nul" =>
        while b.size < size do
          if rnd.nextInt(10) > 0 then b.write(noByte(0, rnd.nextInt(300)))
          b.write(0)
        b.write(noByte(0, 17))
      case "len" =>
        val frames = Iterator.continually(Array.fill(if rnd.nextInt(8) == 0 then 0 else rnd.nextInt(20_000))(rnd.nextInt(256).toByte))
        var total = 0
        while total < size do
          val f = frames.next()
          b.write(encodeLen(Seq(f)))
          total += f.length + 4
      case "raw" => b.write(Array.fill(size)(rnd.nextInt(256).toByte))
    b.toByteArray

  /** The last statistics line of `stderr` under --stats-json (every line must be a JSON object),
    * which must be the only final one.
    */
  def finalStats(stderr: String)(using munit.Location): ujson.Value =
    val stats = jsonLines(stderr).filter(_.obj.contains("final"))
    munit.Assertions.assert(stats.nonEmpty, s"no --stats-json statistics line on stderr:\n$stderr")
    munit.Assertions.assert(stats.init.forall(_("final").bool == false), s"only the last statistics line is final:\n$stderr")
    munit.Assertions.assert(stats.last("final").bool, s"the last statistics line is not final:\n$stderr")
    stats.last

  /** Every line of `stderr`, each of which must be a JSON object. */
  def jsonLines(stderr: String)(using munit.Location): Seq[ujson.Value] =
    stderr.linesIterator.toSeq.map { l =>
      Try(ujson.read(l)).filter(_.objOpt.isDefined).getOrElse(munit.Assertions.fail(s"a stderr line is not a JSON object: $l\n$stderr"))
    }

  /** The texts of the one-key objects `{"kind": "..."}` among `lines`. */
  def saying(lines: Seq[ujson.Value], kind: String): Seq[String] =
    lines.filter(l => l.obj.size == 1 && l.obj.contains(kind)).map(_(kind).str)

  def encodeLen(frames: Seq[Array[Byte]]): Array[Byte] =
    val b = ByteArrayOutputStream()
    for f <- frames do
      b.write(ByteBuffer.allocate(4).putInt(f.length).array())
      b.write(f)
    b.toByteArray

  def decodeLen(wire: Array[Byte]): Seq[Array[Byte]] =
    val buf = ByteBuffer.wrap(wire)
    val out = ArrayBuffer.empty[Array[Byte]]
    while buf.remaining >= 4 do
      val n = buf.getInt()
      munit.Assertions.assert(n >= 0 && n <= buf.remaining, s"a len frame of $n bytes with ${buf.remaining} left")
      val f = new Array[Byte](n)
      buf.get(f)
      out += f
    munit.Assertions.assertEquals(buf.remaining, 0, "bytes after the last len frame")
    out.toSeq

  def exitOf(p: Process, what: String, bound: Long = Support.Patience)(using munit.Location): Int =
    munit.Assertions.assert(p.waitFor(bound, TimeUnit.MILLISECONDS), s"$what: still running after $bound ms")
    p.exitValue

  def kill(signal: String, pid: Long)(using munit.Location): Unit = Launch.signal(signal, pid)

  /** The tool's command line for a shell, every word quoted. */
  def shellCommand(args: String*): String = shellWords(Launch.command(args*))

  /** `words` as one shell command line, each word single-quoted. */
  def shellWords(words: Seq[String]): String = words.map(a => "'" + a.replace("'", "'\\''") + "'").mkString(" ")

  /** Sends each payload as one datagram to 127.0.0.1:port. */
  def sendAll(port: Int, datagrams: Seq[Array[Byte]]): Unit =
    val ch = DatagramChannel.open()
    try for d <- datagrams do ch.send(ByteBuffer.wrap(d), InetSocketAddress("127.0.0.1", port))
    finally ch.close()

  /** A port that was free a moment ago (the caller retries if it is taken meanwhile). */
  def freePort(): Int =
    val ch = DatagramChannel.open().bind(InetSocketAddress("127.0.0.1", 0))
    try ch.getLocalAddress.asInstanceOf[InetSocketAddress].getPort
    finally ch.close()

  /** Whether process `pid` holds a UDP socket bound to `port`: the kernel's socket table
    * (/proc/net/udp) joined with the process's descriptors (/proc/PID/fd), so that a test sends
    * only once the tool listens, and knows it is the tool that does.
    */
  def boundBy(pid: Long, port: Int): Boolean =
    val inodes = Seq("/proc/net/udp", "/proc/net/udp6").map(os.Path(_)).filter(os.exists(_))
      .flatMap(p => Try(os.read.lines(p).drop(1)).getOrElse(Nil))
      .map(_.trim.split("\\s+"))
      .collect { case cols if cols.length > 9 && Integer.parseInt(cols(1).split(':').last, 16) == port => cols(9) }
      .toSet
    inodes.nonEmpty && Try {
      os.list(os.Path(s"/proc/$pid/fd")).exists(fd => Try(java.nio.file.Files.readSymbolicLink(fd.toNIO).toString).toOption.exists(l =>
        l.startsWith("socket:[") && inodes.contains(l.stripPrefix("socket:[").stripSuffix("]"))))
    }.getOrElse(false)

  /** A socket of the test's own on 127.0.0.1 (a port the kernel chose), for what a UDP sink sends. */
  final class Receiver:
    private val socket = DatagramSocket(InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0))
    socket.setSoTimeout(Support.Patience.toInt)
    def port: Int = socket.getLocalPort
    def receive(): Array[Byte] =
      val p = DatagramPacket(new Array[Byte](65_536), 65_536)
      socket.receive(p) // SocketTimeoutException after Patience: the test fails with it
      java.util.Arrays.copyOf(p.getData, p.getLength)
    def receiveText(): String = String(receive(), UTF_8)
    def close(): Unit = socket.close()

  def withReceiver[T](body: Receiver => T): T =
    val rx = Receiver()
    try body(rx)
    finally rx.close()

  /** Reads lines from `in` on a thread of its own, as they come. */
  final class LineReader(in: InputStream, onLine: () => Unit = () => ()):
    private val queue = java.util.concurrent.LinkedBlockingQueue[Option[String]]()
    private val done = CompletableFuture[Unit]()
    Thread.ofPlatform().daemon().start { () =>
      try
        val reader = java.io.BufferedReader(java.io.InputStreamReader(in, UTF_8))
        var line = reader.readLine()
        while line != null do
          queue.put(Some(line))
          onLine()
          line = reader.readLine()
      catch case _: java.io.IOException => ()
      finally
        queue.put(None)
        done.complete(())
    }
    /** The next line within `ms`, or None (the end, or nothing came). */
    def next(ms: Long): Option[String] =
      Option(queue.poll(ms, TimeUnit.MILLISECONDS)).flatten
    /** Every line up to the end of the stream (waits for it, bounded). */
    def all()(using munit.Location): Seq[String] =
      Try(done.get(Support.Patience, TimeUnit.MILLISECONDS)).failed.foreach(e => munit.Assertions.fail(s"stdout did not end within ${Support.Patience} ms", e))
      val out = ArrayBuffer.empty[String]
      var item = queue.poll()
      while item != null && item.isDefined do
        out += item.get
        item = queue.poll()
      out.toSeq

  /** A started process, with its stdout and stderr in files (unless stdout is a pipe). */
  final class Running(val process: Process, val stdoutFile: os.Path, errFile: os.Path, val port: Int = 0):
    def alive: Boolean = process.isAlive
    def exit(bound: Long = Support.Patience)(using munit.Location): Int = exitOf(process, s"pid ${process.pid}", bound)
    def err: String = if os.exists(errFile) then os.read(errFile) else ""
    def out: String = if os.exists(stdoutFile) then os.read(stdoutFile) else ""

  /** A temporary directory for one test, and the processes it started (killed at the end). */
  final class Env(val dir: os.Path):
    private val started = ArrayBuffer.empty[Process]
    private var n = 0

    def write(name: String, data: Array[Byte]): os.Path =
      os.write.over(dir / name, data)
      dir / name
    def write(name: String, text: String): os.Path = write(name, bytes(text))

    def adopt(ps: Process*): Unit = synchronized(started ++= ps)

    /** Starts the tool with `args` in `dir`: stdin a pipe (closed at once unless kept), stdout a
      * file unless `stdout` says otherwise, stderr a file.
      */
    def start(args: Seq[String], stdin: Redirect = Redirect.PIPE, stdout: Redirect | Null = null): Running =
      startCommand(Launch.command(args*), stdin, stdout)

    def startCommand(cmd: Seq[String], stdin: Redirect = Redirect.PIPE, stdout: Redirect | Null = null, port: Int = 0): Running =
      val k = synchronized { n += 1; n }
      val (outFile, errFile) = (dir / s"stdout-$k", dir / s"stderr-$k")
      val pb = ProcessBuilder(cmd.asJava).directory(dir.toIO).redirectInput(stdin).redirectError(errFile.toIO)
      pb.redirectOutput(if stdout == null then Redirect.to(outFile.toIO) else stdout)
      val p = pb.start()
      adopt(p)
      Running(p, outFile, errFile, port)

    /** Starts a udp source made by `args(port)` on a free port, and returns once the process is
      * bound to it (so that datagrams sent now are queued for it). Retries with another port if
      * the port was taken meanwhile.
      */
    def udpSource(args: Int => Seq[String], stdout: Redirect | Null = null)(using munit.Location): Running =
      startBound(port => Launch.command(args(port)*), stdout)

    /** As [[udpSource]], for a shell command line made by `line(port)`; the running shell. */
    def udpSourceInto(line: Int => String)(using munit.Location): (Int, Running) =
      val r = startBound(port => Seq("bash", "-c", line(port)), null, shell = true)
      (r.port, r)

    private def startBound(cmd: Int => Seq[String], stdout: Redirect | Null, shell: Boolean = false)(using munit.Location): Running =
      var attempt = 0
      var result: Option[Running] = None
      while result.isEmpty do
        attempt += 1
        val port = freePort()
        val r = startCommand(cmd(port), stdout = stdout, port = port)
        def pids = if shell then r.process.descendants().iterator().asScala.map(_.pid).toSeq :+ r.process.pid else Seq(r.process.pid)
        Support.eventually(s"the udp source to bind 127.0.0.1:$port") { !r.alive || pids.exists(boundBy(_, port)) }
        if r.alive then result = Some(r)
        else if r.err.contains("already in use") && attempt < 5 then ()
        else munit.Assertions.fail(s"the udp source on port $port exited with ${r.exit()} before binding:\n${r.err}")
      result.get

    def close(): Unit =
      val ps = synchronized(started.toSeq)
      for p <- ps do
        p.descendants().forEach(_.destroyForcibly())
        p.destroyForcibly()
      for p <- ps do p.waitFor(Support.Patience, TimeUnit.MILLISECONDS)
      os.remove.all(dir)
