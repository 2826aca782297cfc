package asyncpipe.cli

import asyncpipe.async.Watchdog
import java.io.{BufferedReader, InputStreamReader}
import java.net.InetSocketAddress
import java.nio.ByteBuffer
import java.nio.channels.DatagramChannel
import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.TimeUnit
import scala.concurrent.duration.*

/** The pipeline stages end to end: real `asyncpipe` processes, real pipes, UDP on 127.0.0.1,
  * real signals; outputs compared byte for byte.
  */
class StagesTest extends munit.FunSuite with Watchdog:
  override def watchdog: FiniteDuration = 60.seconds

  private val dir = FunFixture[os.Path](_ => os.temp.dir(), d => os.remove.all(d))

  /** `args` as a process with stdin from `in` (or nothing), stdout to `out` (or captured). */
  private def stage(args: String*): os.proc = os.proc(Launch.command(args*))

  /** Runs `a | b | c ...` with real pipes and returns each exit status and the last stderr. */
  private def pipeline(commands: Seq[Seq[String]], stdin: os.Path, stdout: os.Path): Seq[Int] =
    val builders = commands.map(c => ProcessBuilder(c*).redirectError(ProcessBuilder.Redirect.INHERIT))
    builders.head.redirectInput(stdin.toIO)
    builders.last.redirectOutput(stdout.toIO)
    val ps = ProcessBuilder.startPipeline(java.util.List.of(builders*))
    ps.toArray(Array.empty[Process]).toSeq.map { p =>
      assert(p.waitFor(60, TimeUnit.SECONDS), "a stage did not end")
      p.exitValue
    }

  private def lenFrames(payloads: Seq[Array[Byte]]): Array[Byte] =
    val b = ByteBuffer.allocate(payloads.map(_.length + 4).sum)
    payloads.foreach(p => b.putInt(p.length).put(p))
    b.array

  private def decodeLen(bytes: Array[Byte]): Seq[Seq[Byte]] =
    val b = ByteBuffer.wrap(bytes)
    Iterator.continually(b).takeWhile(_.hasRemaining).map { b =>
      val a = new Array[Byte](b.getInt); b.get(a); a.toSeq
    }.toSeq

  private val random = scala.util.Random(42)

  /** Inputs per framing that exercise its edges. */
  private def inputFor(framing: String): Array[Byte] = framing match
    case "lines" => ("a\r\nb\n\n" + (1 to 20000).map(i => s"line $i " * (i % 7)).mkString("\n") + "\nno newline at the end").getBytes(UTF_8)
    case "nul"   => (1 to 5000).map(i => s"item $i\nwith newline").mkString("\u0000").getBytes(UTF_8)
    case "len"   => lenFrames(Seq(Array.emptyByteArray) ++ (1 to 3000).map(i => Array.fill(i % 500)(random.nextInt().toByte)))
    case _       => Array.fill(3 * 1024 * 1024 + 17)(random.nextInt().toByte)

  for framing <- Seq("lines", "nul", "len", "raw") do
    dir.test(s"--frame $framing: file | mux | file as three processes and in one JVM is byte-exact"): d =>
      os.write(d / "in", inputFor(framing))
      val statuses = pipeline(Seq(
        Launch.command("--frame", framing, s"file:${d / "in"}", "-"),
        Launch.command("mux", "--frame", framing),
        Launch.command("--frame", framing, "-", s"file:${d / "out"}")
      ), stdin = d / "in", stdout = d / "stdout")
      assertEquals(statuses, Seq(0, 0, 0))
      assert(os.read.bytes(d / "out").sameElements(os.read.bytes(d / "in")), s"three processes changed the $framing data")
      val r = Launch("run", "--frame", framing, s"file:${d / "in"} | mux --out file:${d / "copy"} | file:${d / "out2"}")
      assertEquals(r.exitCode, 0, r.err)
      assert(os.read.bytes(d / "out2").sameElements(os.read.bytes(d / "in")), s"run changed the $framing data")
      assert(os.read.bytes(d / "copy").sameElements(os.read.bytes(d / "in")), s"mux --out changed the $framing data")

  /** A free UDP port on 127.0.0.1 (the system's choice, released again). */
  private def freePort(): Int =
    val ch = DatagramChannel.open().bind(InetSocketAddress("127.0.0.1", 0))
    try ch.getLocalAddress.asInstanceOf[InetSocketAddress].getPort finally ch.close()

  private def bound(port: Int): Boolean =
    val hex = f":$port%04X "
    Seq("/proc/net/udp", "/proc/net/udp6").exists(p => os.exists(os.Path(p)) && os.read(os.Path(p)).contains(hex))

  test("every datagram is one frame: boundaries, empty and large datagrams kept (--frame len out)"):
    val port = freePort()
    val payloads = Seq("one", "", "two words", "line\ninside", "x" * 60000).map(_.getBytes(UTF_8))
    val p = stage("--frame", "len", "--count", payloads.size.toString, s"udp:127.0.0.1:$port", "-").spawn(stderr = os.Pipe)
    asyncpipe.async.Support.eventually(s"port $port bound")(bound(port))
    val ch = DatagramChannel.open()
    try payloads.foreach(b => ch.send(ByteBuffer.wrap(b), InetSocketAddress("127.0.0.1", port))) finally ch.close()
    val out = p.stdout.readAllBytes()
    p.waitFor(30_000)
    assertEquals(p.exitCode(), 0, p.stderr.text())
    assertEquals(decodeLen(out), payloads.map(_.toSeq))

  test("lines to udp: one datagram per line, with its newline; --idle-timeout ends a source with 0"):
    val receiver = DatagramChannel.open().bind(InetSocketAddress("127.0.0.1", 0))
    try
      val port = receiver.getLocalAddress.asInstanceOf[InetSocketAddress].getPort
      val r = stage("-", s"udp:127.0.0.1:$port").call(stdin = "a\nbb\n\nccc", check = false, stderr = os.Pipe)
      assertEquals(r.exitCode, 0, r.err.text())
      val buf = ByteBuffer.allocate(65536)
      val got = (1 to 4).map { _ => buf.clear(); receiver.receive(buf); String(buf.array, 0, buf.position(), UTF_8) }
      assertEquals(got, Seq("a\n", "bb\n", "\n", "ccc\n"))
    finally receiver.close()
    val idle = Launch("--idle-timeout", "200ms", "udp:127.0.0.1:0", "-")
    assertEquals((idle.exitCode, idle.out, idle.err), (0, "", ""))

  test("a frame too large for a datagram fails naming its size; --oversize drop counts it"):
    val port = freePort()
    val frames = lenFrames(Seq("small".getBytes(UTF_8), Array.fill(70000)(1.toByte)))
    val r = stage("--frame", "len", "-", s"udp:127.0.0.1:$port").call(stdin = frames, check = false, stderr = os.Pipe)
    assertEquals(r.exitCode, 1)
    assert(r.err.text().contains("70000 bytes") && r.err.text().contains("--oversize drop"), r.err.text())
    val d = stage("--frame", "len", "--oversize", "drop", "--stats-json", "-", s"udp:127.0.0.1:$port").call(stdin = frames, check = false, stderr = os.Pipe)
    assertEquals(d.exitCode, 0, d.err.text())
    val stats = ujson.read(d.err.text().linesIterator.filter(_.contains("\"final\":true")).toSeq.last)
    assertEquals(stats("outputs")(0)("dropped").num, 1.0, stats.toString)
    assertEquals(stats("outputs")(0)("frames").num, 1.0, stats.toString)

  test("mux fans out to stdout and every --out, whole frames, and fans in --in with each source's order"):
    val d = os.temp.dir()
    try
      val input = (1 to 50000).map(i => s"in $i").mkString("", "\n", "\n")
      os.write(d / "in", input)
      val r = stage("mux", "--out", s"file:${d / "a"}", "--out", s"file:${d / "b"}").call(stdin = d / "in", stderr = os.Pipe)
      assertEquals(r.out.text(), input)
      assertEquals(os.read(d / "a"), input)
      assertEquals(os.read(d / "b"), input)
      val other = (1 to 30000).map(i => s"other $i").mkString("", "\n", "\n")
      os.write(d / "other", other)
      val merged = stage("mux", "--in", s"file:${d / "other"}").call(stdin = d / "in", stderr = os.Pipe).out.text().linesIterator.toSeq
      assertEquals(merged.filter(_.startsWith("in ")), input.linesIterator.toSeq)
      assertEquals(merged.filter(_.startsWith("other ")), other.linesIterator.toSeq)
      assertEquals(merged.size, 80000, "a torn or extra line")
    finally os.remove.all(d)

  test("a closed downstream ends a stage quietly with 141"):
    val ps = ProcessBuilder.startPipeline(java.util.List.of(
      ProcessBuilder(Launch.command("tick:1ms", "-")*),
      ProcessBuilder("head", "-n", "3")
    )).toArray(Array.empty[Process])
    val head = String(ps(1).getInputStream.readAllBytes(), UTF_8)
    assert(ps(0).waitFor(30, TimeUnit.SECONDS), "the stage kept running after head exited")
    assertEquals(ps(0).exitValue, ExitCode.ClosedPipe)
    assertEquals(String(ps(0).getErrorStream.readAllBytes(), UTF_8), "")
    assertEquals(head.linesIterator.size, 3)

  for (signal, status) <- Seq("INT" -> ExitCode.Interrupted, "TERM" -> ExitCode.Terminated) do
    dir.test(s"SIG$signal mid-stream: exit $status, the output ends with a whole record"): d =>
      val out = d / "out"
      val p = ProcessBuilder(Launch.command("tick:1ms", s"file:$out")*).redirectError(ProcessBuilder.Redirect.PIPE).start()
      asyncpipe.async.Support.eventually("ticks written")(os.exists(out) && os.size(out) > 100)
      os.proc("kill", s"-$signal", p.pid.toString).call()
      assert(p.waitFor(30, TimeUnit.SECONDS), "no exit after the signal")
      assertEquals(p.exitValue, status)
      val text = os.read(out)
      assert(text.endsWith("\n"), s"a partial record at the end: ${text.takeRight(20)}")
      assert(text.linesIterator.forall(_.forall(_.isDigit)), "a torn line")

  test("an interactive line goes through at once, with stdin still open"):
    val p = ProcessBuilder(Launch.command("mux")*).start()
    try
      val reader = BufferedReader(InputStreamReader(p.getInputStream, UTF_8))
      p.getOutputStream.write("hello\n".getBytes(UTF_8))
      p.getOutputStream.flush()
      assertEquals(reader.readLine(), "hello") // the watchdog bounds the wait
      p.getOutputStream.close()
      assert(p.waitFor(30, TimeUnit.SECONDS))
      assertEquals(p.exitValue, 0)
    finally p.destroyForcibly()

  dir.test("errors: a missing file is 1 with the OS reason; bad tokens and unsafe forms are 2"): d =>
    val missing = Launch(s"file:${d / "none"}", "-")
    assertEquals(missing.exitCode, 1)
    assert(missing.err.contains(s"file:${d / "none"}") && missing.err.contains("no such file"), missing.err)
    os.write(d / "x", "data\n")
    val same = Launch(s"file:${d / "x"}", s"file:${d / "x"}")
    assertEquals(same.exitCode, 2)
    assert(same.err.contains("same file"), same.err)
    assertEquals(os.read(d / "x"), "data\n", "the input was truncated")
    val middle = Launch("run", s"tick:1ms,count=1 | file:${d / "y"} | -")
    assertEquals(middle.exitCode, 2)
    assert(middle.err.contains("only be first"), middle.err)
    val typo = Launch("mux", "--ot", "-")
    assertEquals(typo.exitCode, 2)
    assert(typo.err.contains("'--ot'") && typo.err.contains("--out"), typo.err)
    // stdin a pipe and stdout a pipe: which end is meant cannot be told
    val unsure = stage(s"file:${d / "x"}").call(stdin = "new content\n", check = false, stderr = os.Pipe)
    assertEquals(unsure.exitCode, 2)
    assert(unsure.err.text().contains("asyncpipe FROM TO"), unsure.err.text())
    assertEquals(os.read(d / "x"), "data\n", "a refused command touched the file")

  test("a UDP port in use is a runtime error naming the address and the reason"):
    val holder = DatagramChannel.open().bind(InetSocketAddress("127.0.0.1", 0))
    try
      val port = holder.getLocalAddress.asInstanceOf[InetSocketAddress].getPort
      val r = Launch(s"udp:127.0.0.1:$port", "-")
      assertEquals(r.exitCode, 1)
      assert(r.err.contains(s"udp:127.0.0.1:$port") && r.err.contains("in use"), r.err)
    finally holder.close()

  test("tick:50ms,count=3 gives three numbered frames; --stats summarises on stderr only"):
    val r = Launch("--stats", "tick:50ms,count=3", "-")
    assertEquals(r.exitCode, 0, r.err)
    assertEquals(r.out, "1\n2\n3\n")
    assert(r.err.startsWith("asyncpipe: 3 frames") && r.err.linesIterator.size == 1, r.err)
