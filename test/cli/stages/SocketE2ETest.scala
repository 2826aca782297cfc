package asyncpipe.cli.stages

import asyncpipe.cli.*

import asyncpipe.cli.command.*

import asyncpipe.async.{Support, Watchdog}
import java.io.{ByteArrayOutputStream, OutputStream}
import java.lang.ProcessBuilder.Redirect
import java.net.{InetSocketAddress, StandardProtocolFamily, UnixDomainSocketAddress}
import java.nio.ByteBuffer
import java.nio.channels.{FileChannel, ServerSocketChannel, SocketChannel}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, StandardOpenOption}
import java.util.concurrent.TimeUnit
import scala.concurrent.duration.{Duration, FiniteDuration}
import scala.util.Try

/** The stream-socket addresses (`tcp:`, `tcp-listen:`, `unix:`, `unix-listen:`) end to end: the
  * built tool as real processes (with the launcher's JVM flags, as installed) against peers that
  * were not written here: socat, and Python's `socket` module (small inline scripts). Checked as a
  * user sees it: the bytes that arrive, exit statuses, and what stderr says.
  *
  * Nothing waits by sleeping: a listener is waited for by the port it tells on stderr (port 0) or by
  * the kernel's socket tables (/proc/net/tcp, /proc/net/unix: a peer's listening socket), a peer by
  * the lines it prints, a stage by its exit. `ASYNCPIPE_NET_MB` sizes the byte-exact copies (default
  * 20; 200 for the issue's figure), `ASYNCPIPE_STRESS` multiplies the fan-in's lines.
  */
class SocketE2ETest extends munit.FunSuite with Watchdog:
  import SocketE2ETest.*
  import StageE2ETest.{Env, LineReader, Running, bytes, exitOf, finalStats, kill}

  override def watchdog: FiniteDuration = Duration(60 + NetMB / 2 + 20 * Stress, TimeUnit.SECONDS)
  override def munitTimeout = watchdog + Duration(10, TimeUnit.SECONDS)

  override def beforeAll(): Unit =
    assume(Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")

  private val e2e = FunFixture[Env](_ => Env(os.temp.dir(prefix = "asyncpipe-net-")), _.close())

  private def socat(using munit.Location): Unit = assume(onPath("socat"), "socat is not installed (apt-get install socat)")

  // -----------------------------------------------------------------------------------------------
  // Byte-exact copies, both ways, against socat and against asyncpipe

  e2e.test(s"tcp: 'asyncpipe --frame raw file:IN tcp:127.0.0.1:P' into 'socat -u TCP-LISTEN:P FILE:OUT': $NetMB MB byte for byte"): env =>
    socat
    val in = env.dir / "in.bin"
    writeRandom(in, NetBytes, 1)
    val out = env.dir / "out.bin"
    val port = freeTcpPort()
    val peer = env.startCommand(Seq("socat", "-u", s"TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr", s"OPEN:$out,creat,trunc"))
    awaitTcpListener(peer, port)
    val r = env.startCommand(ap("--frame", "raw", s"file:$in", s"tcp:127.0.0.1:$port"))
    assertEquals(r.exit(Copy), 0, r.err)
    assertEquals(exitOf(peer.process, "socat"), 0, peer.err)
    assertSameFile(out, in)
    assertEquals(r.err, "")

  e2e.test(s"tcp-listen: 'socat -u FILE:IN TCP:127.0.0.1:P' into 'asyncpipe --frame raw tcp-listen:P,once file:OUT': $NetMB MB byte for byte"): env =>
    socat
    val in = env.dir / "in.bin"
    writeRandom(in, NetBytes, 2)
    val out = env.dir / "out.bin"
    val r = env.startCommand(ap("--frame", "raw", "tcp-listen:127.0.0.1:0,once", s"file:$out"))
    val port = toldPort(r, "tcp-listen:127.0.0.1:0,once")
    val peer = env.startCommand(Seq("socat", "-u", s"FILE:$in", s"TCP:127.0.0.1:$port"))
    assertEquals(exitOf(peer.process, "socat", Copy), 0, peer.err)
    assertEquals(r.exit(Copy), 0, r.err)
    assertSameFile(out, in)
    assertEquals(r.err, s"asyncpipe: tcp-listen:127.0.0.1:0,once listens on port $port\n")

  for frame <- Seq("raw", "lines") do
    e2e.test(s"tcp: asyncpipe into asyncpipe ('file:IN tcp:127.0.0.1:P' into 'tcp-listen:P,once file:OUT'), --frame $frame: $NetMB MB byte for byte"): env =>
      val in = env.dir / "in.bin"
      if frame == "raw" then writeRandom(in, NetBytes, 3) else writeLines(in, NetBytes, 3)
      val out = env.dir / "out.bin"
      val rx = env.startCommand(ap("--frame", frame, "tcp-listen:127.0.0.1:0,once", s"file:$out"))
      val port = toldPort(rx, "tcp-listen:127.0.0.1:0,once")
      val tx = env.startCommand(ap("--frame", frame, s"file:$in", s"tcp:127.0.0.1:$port"))
      assertEquals(tx.exit(Copy), 0, tx.err)
      assertEquals(rx.exit(Copy), 0, rx.err)
      assertSameFile(out, in)
      assertEquals((tx.err, rx.err), ("", s"asyncpipe: tcp-listen:127.0.0.1:0,once listens on port $port\n"))

  e2e.test(s"unix: 'asyncpipe --frame raw file:IN unix:PATH' into 'socat -u UNIX-LISTEN:PATH FILE:OUT': $NetMB MB byte for byte"): env =>
    socat
    val in = env.dir / "in.bin"
    writeRandom(in, NetBytes, 4)
    val (out, path) = (env.dir / "out.bin", env.dir / "s.sock")
    val peer = env.startCommand(Seq("socat", "-u", s"UNIX-LISTEN:$path", s"OPEN:$out,creat,trunc"))
    awaitUnixListener(peer, path)
    val r = env.startCommand(ap("--frame", "raw", s"file:$in", s"unix:$path"))
    assertEquals(r.exit(Copy), 0, r.err)
    assertEquals(exitOf(peer.process, "socat"), 0, peer.err)
    assertSameFile(out, in)
    assertEquals(r.err, "")

  e2e.test(s"unix-listen: 'socat -u FILE:IN UNIX-CONNECT:PATH' into 'asyncpipe --frame raw unix-listen:PATH,once file:OUT': $NetMB MB byte for byte, the socket file removed after"): env =>
    socat
    val in = env.dir / "in.bin"
    writeRandom(in, NetBytes, 5)
    val (out, path) = (env.dir / "out.bin", env.dir / "s.sock")
    val r = env.startCommand(ap("--frame", "raw", s"unix-listen:$path,once", s"file:$out"))
    awaitUnixListener(r, path)
    val peer = env.startCommand(Seq("socat", "-u", s"FILE:$in", s"UNIX-CONNECT:$path"))
    assertEquals(exitOf(peer.process, "socat", Copy), 0, peer.err)
    assertEquals(r.exit(Copy), 0, r.err)
    assertSameFile(out, in)
    assertEquals(r.err, "")
    assert(!os.exists(path), s"$path is left behind")

  // Past its first 4 MiB a raw connection is written from a direct buffer straight into its one
  // output (KernelSink.bytesTarget): each kind of output that takes it, and --stats-json, which does not.
  for (target, stats) <- Seq(("a pipe on stdout", false), ("file:OUT", false), ("tcp:127.0.0.1:Q", false), ("file:OUT", true)) do
    e2e.test(s"tcp: as a source, --frame raw${if stats then " --stats-json" else ""}: $NetMB MB from 'socat -u FILE:IN TCP-LISTEN:P' into $target, byte for byte, the end said by the peer's FIN"): env =>
      socat
      val in = env.dir / "in.bin"
      writeRandom(in, NetBytes, 5)
      val out = env.dir / "out.bin"
      val port = freeTcpPort()
      val server = env.startCommand(Seq("socat", "-u", s"FILE:$in", s"TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr"))
      awaitTcpListener(server, port)
      val flags = if stats then Seq("--frame", "raw", "--stats-json") else Seq("--frame", "raw")
      val source = s"tcp:127.0.0.1:$port"
      val r = target match
        case "a pipe on stdout" =>
          val r = env.startCommand(ap(flags :+ source :+ "-"*), stdout = Redirect.PIPE)
          os.write(out, r.process.getInputStream) // drains the pipe as cat would
          r
        case "file:OUT" => env.startCommand(ap(flags :+ source :+ s"file:$out"*))
        case _ =>
          val sinkPort = freeTcpPort()
          val sink = env.startCommand(Seq("socat", "-u", s"TCP-LISTEN:$sinkPort,bind=127.0.0.1,reuseaddr", s"FILE:$out,create,trunc"))
          awaitTcpListener(sink, sinkPort)
          val r = env.startCommand(ap(flags :+ source :+ s"tcp:127.0.0.1:$sinkPort"*))
          assertEquals(r.exit(Copy), 0, r.err)
          assertEquals(exitOf(sink.process, "socat", Copy), 0, sink.err)
          r
      assertEquals(r.exit(Copy), 0, r.err)
      assertEquals(exitOf(server.process, "socat", Copy), 0, server.err)
      assertSameFile(out, in)
      if stats then
        // The input's bytes and the output's, each exact.
        assertEquals(s"\"bytes\":$NetBytes,".r.findAllIn(r.err).size, 2, r.err)
      else assertEquals(r.err, "")

  e2e.test(s"unix: asyncpipe into asyncpipe, --frame lines: $NetMB MB byte for byte"): env =>
    val in = env.dir / "in.txt"
    writeLines(in, NetBytes, 6)
    val (out, path) = (env.dir / "out.txt", env.dir / "s.sock")
    val rx = env.startCommand(ap(s"unix-listen:$path,once", s"file:$out"))
    awaitUnixListener(rx, path)
    val tx = env.startCommand(ap(s"file:$in", s"unix:$path"))
    assertEquals(tx.exit(Copy), 0, tx.err)
    assertEquals(rx.exit(Copy), 0, rx.err)
    assertSameFile(out, in)
    assertEquals((tx.err, rx.err), ("", ""))

  // -----------------------------------------------------------------------------------------------
  // Fan-in: many clients writing at once into one listener

  e2e.test(s"20 clients write lines at once into one tcp-listen, cut at odd sizes: every line whole, each client's in its order; SIGINT: exit 130, --stats per connection and a summary"): env =>
    val (clients, each) = (20, 2000 * Stress)
    val out = env.dir / "out.txt"
    val r = env.startCommand(ap("--stats", "tcp-listen:127.0.0.1:0", s"file:$out"))
    val port = toldPort(r, "tcp-listen:127.0.0.1:0")
    val py = env.python(FanInClients, port.toString, clients.toString, each.toString)
    val peers = (1 to clients).map(_ => py.line("a client's address")).toSet
    assertEquals(py.line("the clients' end"), "done", py.run.err)
    assertEquals(py.run.exit(), 0, py.run.err)
    assertEquals(peers.size, clients, peers.toString)
    val closed = """asyncpipe: tcp-listen:127\.0\.0\.1:0: (127\.0\.0\.1:[0-9]+) closed: ([0-9]+) frames, .+ in [0-9]+\.[0-9]{2} s""".r
    def closedLines = r.err.linesIterator.collect { case closed(peer, frames) => (peer, frames.toInt) }.toSeq
    // A connection's line comes once every frame it brought is passed on: then the stop must write them.
    Support.eventually(s"$clients connections to be told closed", Slow) { closedLines.size == clients || !r.alive }
    kill("INT", r.process.pid)
    assertEquals(r.exit(), ExitCode.Interrupted, r.err)
    val lines = os.read(out).split("\n", -1).toSeq
    assertEquals(lines.last, "", "the output ends with a newline")
    val got = lines.init
    assertEquals(got.size, clients * each, "every line arrived once, none merged or torn")
    for k <- 0 until clients do
      assertEquals(got.filter(_.startsWith(f"c$k%02d-")), (0 until each).map(fanInLine(k, _)), s"the lines of client $k, whole, in order")
    assertEquals(closedLines.map(_._1).toSet, peers, r.err)
    assertEquals(closedLines.map(_._2), Seq.fill(clients)(each), r.err)
    val err = r.err.linesIterator.toSeq
    assertEquals(err.head, s"asyncpipe: tcp-listen:127.0.0.1:0 listens on port $port")
    assertEquals(err.size, clients + 2, r.err)
    assert(err.last.startsWith(s"asyncpipe: ${clients * each} frames (") && err.last.contains(s" in, ${clients * each} frames out, dropped 0 ("),
      err.last)

  e2e.test("--stats-json on a listener: each connection is a {\"connection\":{...}} object with its peer, frames and bytes; SIGTERM: exit 143, the final line counts them all"): env =>
    socat
    val r = env.startCommand(ap("--stats-json", "tcp-listen:127.0.0.1:0", "-"))
    val said = """\{"notice":"asyncpipe: tcp-listen:127\.0\.0\.1:0 listens on port ([0-9]+)"\}""".r
    Support.eventually("the port notice") { said.findFirstIn(r.err).isDefined || !r.alive }
    val port = said.findFirstMatchIn(r.err).fold(fail(r.err))(_.group(1).toInt)
    val sent = Seq("one\n", "two\nthree\n", "x" * 70_000 + "\n" + "y\n" * 100)
    for (text, i) <- sent.zipWithIndex do
      val f = env.write(s"c$i.txt", text)
      val c = env.startCommand(Seq("socat", "-u", s"FILE:$f", s"TCP:127.0.0.1:$port"))
      assertEquals(c.exit(), 0, c.err)
      Support.eventually(s"connection ${i + 1} to be told") { connections(r.err).size == i + 1 || !r.alive }
    kill("TERM", r.process.pid)
    assertEquals(r.exit(), ExitCode.Terminated, r.err)
    assertEquals(os.read(r.stdoutFile), sent.mkString)
    val cs = connections(r.err)
    assertEquals(cs.map(c => (c("address").str, c("frames").num.toLong, c("bytes").num.toLong, c("error").isNull)),
      sent.map(t => ("tcp-listen:127.0.0.1:0", t.count(_ == '\n').toLong, t.length.toLong, true)))
    assert(cs.forall(_("peer").str.matches("127\\.0\\.0\\.1:[0-9]+")), cs.toString)
    val in = finalStats(r.err)("inputs")(0)
    assertEquals((in("frames").num.toLong, in("bytes").num.toLong), (sent.map(_.count(_ == '\n')).sum.toLong, sent.map(_.length).sum.toLong))

  // -----------------------------------------------------------------------------------------------
  // The conversation: request, half-close, reply

  e2e.test("request/reply: 'printf REQUEST | asyncpipe tcp:127.0.0.1:P > page' against a server that answers only after the end of input: page is the answer, exit 0"): env =>
    val py = env.python(AnswerAfterEof)
    val port = py.line("the server's port").toInt
    val request = "GET / HTTP/1.0\r\n\r\n"
    val r = env.startCommand(ap(s"tcp:127.0.0.1:$port"), stdin = Redirect.from(env.write("request", request).toIO))
    assertEquals(r.exit(), 0, r.err)
    assertEquals(py.line("what the server read"), s"read ${request.length} bytes")
    assertEquals(py.run.exit(), 0, py.run.err)
    assertEquals(os.read(r.stdoutFile), answer(request))
    assertEquals(r.err, "")

  e2e.test("request/reply: an answer whose last line has no newline arrives exactly, with one warning that names the address once"): env =>
    val py = env.python(AnswerAfterEof, "no-newline")
    val port = py.line("the server's port").toInt
    val request = "GET / HTTP/1.0\r\n\r\n"
    val r = env.startCommand(ap(s"tcp:127.0.0.1:$port"), stdin = Redirect.from(env.write("request", request).toIO))
    assertEquals(r.exit(), 0, r.err)
    val expected = answer(request).stripSuffix("\n")
    assertEquals(os.read(r.stdoutFile), expected)
    val tail = expected.length - expected.lastIndexOf('\n') - 1
    assertEquals(r.err, s"asyncpipe: tcp:127.0.0.1:$port: the input ended inside a frame ($tail bytes after its last newline): " +
      "passed on as they are (--final-delimiter require refuses them, optional passes them quietly)\n")

  // ncat -l --exec closes the connection when the client half-closes, before the command has
  // answered (socat's own client gets nothing back either): only socat's EXEC serves this here.
  e2e.test("request/reply: 'printf REQUEST | asyncpipe tcp:127.0.0.1:P' against socat TCP-LISTEN:P EXEC:'wc -c': the count of the request, exit 0"): env =>
    socat
    val port = freeTcpPort()
    val peer = env.startCommand(Seq("socat", s"TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr", "EXEC:wc -c"))
    awaitTcpListener(peer, port)
    val request = "GET / HTTP/1.0\r\n\r\n"
    val r = env.startCommand(ap(s"tcp:127.0.0.1:$port"), stdin = Redirect.from(env.write("request", request).toIO))
    assertEquals(r.exit(), 0, r.err)
    assertEquals(os.read(r.stdoutFile), s"${request.length}\n")
    assertEquals(exitOf(peer.process, "socat"), 0, peer.err)
    assertEquals(r.err, "")

  // -----------------------------------------------------------------------------------------------
  // Back-pressure: a reader that stops holds the sender, whose memory stays bounded

  for listen <- Seq(false, true) do
    val shape = if listen then "'asyncpipe --frame raw file:BIG tcp-listen:P' with a client" else "'asyncpipe --frame raw file:BIG tcp:127.0.0.1:P' into a server"
    e2e.test(s"back-pressure: $shape that stops reading: the sender blocks with VmRSS under 300 MB while 1 GiB is offered, then delivers it all"): env =>
      val big = env.dir / "big.bin"
      val raf = java.io.RandomAccessFile(big.toIO, "rw")
      try raf.setLength(Gib) finally raf.close() // sparse: 1 GiB of zeros that the disk does not hold
      val (py, r) =
        if listen then
          val r = env.startCommand(ap("--frame", "raw", s"file:$big", "tcp-listen:127.0.0.1:0"))
          val port = toldPort(r, "tcp-listen:127.0.0.1:0")
          (env.python(StalledReader, "connect", port.toString), r)
        else
          val py = env.python(StalledReader, "listen")
          val port = py.line("the server's port").toInt
          (py, env.startCommand(ap("--frame", "raw", s"file:$big", s"tcp:127.0.0.1:$port")))
      assertEquals(py.line("the connection"), "connected", py.run.err)
      val pid = r.process.pid
      val peak = PeakRss(pid)
      try
        // Blocked: it has read some of the file and reads no more (for 500 ms on end).
        var (last, since) = (-1L, System.nanoTime())
        Support.eventually("the sender to stop reading the file", Slow) {
          val now = rchar(pid)
          if now != last then { last = now; since = System.nanoTime() }
          !r.alive || now > 0 && System.nanoTime() - since > 500_000_000L
        }
        assert(r.alive, s"the sender exited: ${r.err}")
        val blockedAt = rchar(pid)
        val rss = status(pid, "VmRSS")
        assert(blockedAt < Gib / 8, s"the sender read $blockedAt bytes of 1 GiB while nobody read the socket")
        assert(rss < 300L * 1024 * 1024, s"VmRSS ${rss >> 20} MiB while blocked")
        py.tell("go")
        assertEquals(py.line("the reader's count"), s"total $Gib", py.run.err)
        assertEquals(r.exit(Copy), 0, r.err)
        assertEquals(py.run.exit(), 0, py.run.err)
        assert(peak.max < 300L * 1024 * 1024, s"VmHWM ${peak.max >> 20} MiB over the copy of 1 GiB")
        assertEquals(r.err, if listen then s"asyncpipe: tcp-listen:127.0.0.1:0 listens on port ${toldPort(r, "tcp-listen:127.0.0.1:0")}\n" else "")
      finally peak.stop()

  // -----------------------------------------------------------------------------------------------
  // Connecting: a timeout, retries, a refusal

  for conversation <- Seq(false, true) do
    val form = if conversation then "asyncpipe tcp:127.0.0.1:P,connect-timeout=1s (a conversation)" else "asyncpipe tcp:127.0.0.1:P,connect-timeout=1s -"
    e2e.test(s"connect-timeout: '$form' to a listener whose accept queue is full (SYNs dropped) exits 124 after 1 s and says the timeout"): env =>
      val py = env.python(BlackHole)
      val said = py.line("the black hole")
      assume(said != "none", "this kernel completed every connection to a listener with a full accept queue (no SYN was dropped): no black hole on 127.0.0.1 here")
      val port = said.toInt
      val address = s"tcp:127.0.0.1:$port,connect-timeout=1s"
      val started = System.nanoTime()
      val r = env.startCommand(ap((if conversation then Seq(address) else Seq(address, "-"))*))
      assertEquals(r.exit(), ExitCode.TimedOut, r.err)
      val took = Support.millisSince(started)
      assert(took >= 1000, s"exited after $took ms, before its 1 s")
      assertEquals(r.err, s"asyncpipe: $address: connect: no connection within 1s (connect-timeout)\n")
      assertEquals(os.read(r.stdoutFile), "")

  e2e.test("connect-timeout on unix: a listener whose backlog is full (a connect blocks): 'asyncpipe unix:PATH,connect-timeout=1s -' exits 124 after 1 s and says the timeout"): env =>
    val path = env.dir / "full.sock"
    val py = env.python(UnixBlackHole, path.toString)
    assertEquals(py.line("the full backlog"), "full", py.run.err)
    val address = s"unix:$path,connect-timeout=1s"
    val started = System.nanoTime()
    val r = env.startCommand(ap(address, "-"))
    assertEquals(r.exit(), ExitCode.TimedOut, r.err)
    val took = Support.millisSince(started)
    assert(took >= 1000, s"exited after $took ms, before its 1 s")
    assertEquals(r.err, s"asyncpipe: $address: connect: no connection within 1s (connect-timeout)\n")

  e2e.test("retry: 'tcp:127.0.0.1:P,retry=3,interval=100ms' as a source connects once the server starts (after the first 'trying again'), and reads it all"): env =>
    val py = env.python(LateServer)
    val port = py.line("the server's port").toInt
    val address = s"tcp:127.0.0.1:$port,retry=3,interval=100ms"
    val r = env.startCommand(ap(address, "-"))
    Support.eventually("the first 'trying again'") { r.err.contains("trying again") || !r.alive }
    py.tell("listen")
    assertEquals(py.line("the server, listening"), "listening", py.run.err)
    assertEquals(r.exit(), 0, r.err)
    assertEquals(os.read(r.stdoutFile), "one\ntwo\nthree\n")
    val tries = r.err.linesIterator.toSeq
    assert(tries.nonEmpty && tries.size <= 3, r.err)
    assertEquals(tries, tries.indices.map(i => s"asyncpipe: $address: connect: connection refused; trying again in 100ms (${i + 1} of 3)"))
    assertEquals(py.run.exit(), 0, py.run.err)

  e2e.test("connection refused without retry: exit 1 at once, stderr names the address and 'connection refused'"): env =>
    val port = freeTcpPort()
    for args <- Seq(Seq(s"tcp:127.0.0.1:$port", "-"), Seq("-", s"tcp:127.0.0.1:$port")) do
      val r = env.startCommand(ap(args*))
      assertEquals(r.exit(), ExitCode.Runtime, r.err)
      assertEquals(r.err, s"asyncpipe: tcp:127.0.0.1:$port: connect: connection refused\n")
    val path = env.dir / "nobody.sock"
    val r = env.startCommand(ap(s"unix:$path", "-"))
    assertEquals(r.exit(), ExitCode.Runtime, r.err)
    assert(r.err.startsWith(s"asyncpipe: unix:$path: connect: ") && r.err.contains("no such file"), r.err)

  // -----------------------------------------------------------------------------------------------
  // Unix socket files

  e2e.test("unix-listen: a stale socket file (its server exited without removing it) is replaced and said; a client's line then arrives"): env =>
    val path = env.dir / "stale.sock"
    val py = env.python(BindAndExit, path.toString)
    assertEquals(py.run.exit(), 0, py.run.err)
    assert(isSocket(path), s"the server left no socket file at $path")
    val r = env.startCommand(ap(s"unix-listen:$path,once", "-"))
    awaitUnixListener(r, path)
    Support.eventually("the note of the replaced file") { r.err.endsWith("\n") || !r.alive }
    assertEquals(r.err, s"asyncpipe: unix-listen:$path,once: replaced a stale socket file (no server answered on it)\n")
    unixSend(path, "hello\n")
    assertEquals(r.exit(), 0, r.err)
    assertEquals(os.read(r.stdoutFile), "hello\n")
    assert(!os.exists(path), s"$path is left behind")

  e2e.test("unix-listen: a path that is a regular file is never deleted: exit 1, stderr says it is a regular file, its content unchanged"): env =>
    val path = env.write("data.txt", "precious\n")
    val r = env.startCommand(ap(s"unix-listen:$path", "-"))
    assertEquals(r.exit(), ExitCode.Runtime, r.err)
    assertEquals(r.err, s"asyncpipe: unix-listen:$path: listen: $path exists and is a regular file, not a socket: it is never removed (remove it, or choose another path)\n")
    assertEquals(os.read(path), "precious\n")

  e2e.test("unix-listen: a path where a live server answers: exit 1 'already in use', the server's socket file left alone"): env =>
    val path = env.dir / "live.sock"
    val py = env.python(UnixServer, path.toString)
    assertEquals(py.line("the server"), "listening", py.run.err)
    val r = env.startCommand(ap(s"unix-listen:$path", "-"))
    assertEquals(r.exit(), ExitCode.Runtime, r.err)
    assertEquals(r.err, s"asyncpipe: unix-listen:$path: listen: address already in use (a server answers on $path)\n")
    assert(unixListening(path), s"the server's socket $path is gone")

  // -----------------------------------------------------------------------------------------------
  // The broadcasting listener sink

  e2e.test("broadcast: '- tcp-listen:P' with 3 socat clients connected before the data: each receives every byte from its first frame on"): env =>
    socat
    val r = env.startCommand(ap("-", "tcp-listen:127.0.0.1:0"))
    val port = toldPort(r, "tcp-listen:127.0.0.1:0")
    val feed = Feed(r.process.getOutputStream)
    val files = (1 to 3).map(k => env.dir / s"client$k.txt")
    val peers = files.zipWithIndex.map { (f, i) =>
      val c = env.startCommand(Seq("socat", "-u", s"TCP:127.0.0.1:$port", s"OPEN:$f,creat,trunc"))
      feed.register(f, i + 1)
      c
    }
    val payload = env.dir / "payload.txt"
    writeLines(payload, 4_000_000, 8)
    feed.send(os.read.bytes(payload))
    feed.close()
    assertEquals(r.exit(Slow), 0, r.err)
    for (c, k) <- peers.zipWithIndex do assertEquals(exitOf(c.process, s"client ${k + 1}"), 0, c.err)
    val all = feed.written
    for (f, k) <- files.zipWithIndex do
      val got = os.read.bytes(f)
      assert(String(got.take(10), UTF_8).startsWith(s"sync-${k + 1}-"), s"client ${k + 1} began with ${String(got.take(40), UTF_8)}")
      val from = feed.start(f)
      assert(got.sameElements(all.drop(from)), s"client ${k + 1}: ${got.length} bytes, not the ${all.length - from} of the stream from its first frame on")
    assertEquals(r.err, s"asyncpipe: tcp-listen:127.0.0.1:0 listens on port $port\n")

  e2e.test("broadcast: on-slow=drop with one stopped client: the other two receive everything, the stopped one whole frames in order with gaps, --stats counts its drops"): env =>
    socat
    val r = env.startCommand(ap("--stats", "-", "tcp-listen:127.0.0.1:0,on-slow=drop"))
    val port = toldPort(r, "tcp-listen:127.0.0.1:0,on-slow=drop")
    val feed = Feed(r.process.getOutputStream)
    val files = (1 to 3).map(k => env.dir / s"client$k.txt")
    val peers = files.zipWithIndex.map { (f, i) =>
      val c = env.startCommand(Seq("socat", "-u", s"TCP:127.0.0.1:$port", s"OPEN:$f,creat,trunc"))
      feed.register(f, i + 1)
      c
    }
    val starts = files.map(feed.start) // where each client's bytes began in the stream
    kill("STOP", peers(2).process.pid)
    // 24 MB, far more than the stopped client's socket buffers and queue hold, whole lines of up to
    // 64 KiB at a time (a partial line would wait in the stage for its end), each waited for by the
    // two others (so that they are never the slow ones).
    val payload = env.dir / "payload.txt"
    writeLines(payload, 24_000_000, 9)
    val data = os.read.bytes(payload)
    for chunk <- wholeLines(data, 65_536) do
      feed.send(chunk)
      val want = feed.written.length
      Support.eventually("the two running clients to have the chunk") { (0 to 1).forall(i => os.size(files(i)) == want - starts(i)) || !r.alive }
    feed.close()
    for k <- 0 to 1 do assertEquals(exitOf(peers(k).process, s"client ${k + 1}"), 0, peers(k).err)
    kill("CONT", peers(2).process.pid)
    assertEquals(r.exit(Slow), 0, r.err)
    assertEquals(exitOf(peers(2).process, "client 3"), 0, peers(2).err)
    val all = feed.written
    for k <- 0 to 1 do assert(os.read.bytes(files(k)).sameElements(all.drop(starts(k))), s"client ${k + 1} did not get every byte")
    val offered = String(all.drop(starts(2)), UTF_8).split("\n").toSeq
    val stopped = String(os.read.bytes(files(2)), UTF_8).split("\n", -1).toSeq
    assertEquals(stopped.last, "", "the stopped client's last frame is whole")
    val got = stopped.init
    assertEquals(got.head, offered.head)
    assert(isSubsequence(got, offered), "the stopped client's lines are not whole lines of the stream in its order")
    val missed = offered.size - got.size
    assert(missed > 0, s"the stopped client missed nothing of ${offered.size} frames")
    // Under drop, the sync lines sent before the first client was accepted went to nobody: dropped too.
    val drops = missed + all.take(starts(0)).count(_ == '\n')
    val err = r.err.linesIterator.toSeq
    val summary = err.last
    assert(summary.contains(s", dropped $drops (busy/oversize $drops, kernel 0, in transit 0)"), s"expected $drops drops in: $summary")
    val closed = err.filter(_.matches(".* closed: [0-9]+ frames, .*"))
    assertEquals(closed.size, 3, r.err)
    assert(closed.exists(_.contains(s" closed: ${got.size} frames, ")), s"no connection line with the stopped client's ${got.size} frames:\n${r.err}")

  // -----------------------------------------------------------------------------------------------
  // run and mux

  e2e.test("run: 'asyncpipe run \"tcp-listen:127.0.0.1:0,once | mux | file:OUT\"' with a socat client copies byte for byte"): env =>
    socat
    val in = env.dir / "in.txt"
    writeLines(in, 2_000_000, 10)
    val out = env.dir / "out.txt"
    val r = env.startCommand(ap("run", s"tcp-listen:127.0.0.1:0,once | mux | file:$out"))
    val port = toldPort(r, "tcp-listen:127.0.0.1:0,once")
    val peer = env.startCommand(Seq("socat", "-u", s"FILE:$in", s"TCP:127.0.0.1:$port"))
    assertEquals(exitOf(peer.process, "socat"), 0, peer.err)
    assertEquals(r.exit(Slow), 0, r.err)
    assertSameFile(out, in)

  e2e.test("mux --out tcp:127.0.0.1:P: stdout and a socat listener both get the input byte for byte"): env =>
    socat
    val in = env.dir / "in.txt"
    writeLines(in, 2_000_000, 11)
    val got = env.dir / "got.txt"
    val port = freeTcpPort()
    val peer = env.startCommand(Seq("socat", "-u", s"TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr", s"OPEN:$got,creat,trunc"))
    awaitTcpListener(peer, port)
    val r = env.startCommand(ap("mux", "--out", s"tcp:127.0.0.1:$port"), stdin = Redirect.from(in.toIO))
    assertEquals(r.exit(Slow), 0, r.err)
    assertEquals(exitOf(peer.process, "socat"), 0, peer.err)
    assertSameFile(r.stdoutFile, in)
    assertSameFile(got, in)
    assertEquals(r.err, "")

  // -----------------------------------------------------------------------------------------------
  // Errors

  e2e.test("a port in use: exit 1, stderr names the address and 'address already in use'"): env =>
    val held = ServerSocketChannel.open().bind(InetSocketAddress("127.0.0.1", 0))
    try
      val port = held.getLocalAddress.asInstanceOf[InetSocketAddress].getPort
      for args <- Seq(Seq(s"tcp-listen:127.0.0.1:$port", "-"), Seq("-", s"tcp-listen:127.0.0.1:$port")) do
        val r = env.startCommand(ap(args*))
        assertEquals(r.exit(), ExitCode.Runtime, r.err)
        assertEquals(r.err, s"asyncpipe: tcp-listen:127.0.0.1:$port: listen: address already in use\n")
    finally held.close()

  e2e.test("port 0 on tcp: (connecting) is a usage error, exit 2, in every form, the conversation too"): env =>
    for args <- Seq(Seq("tcp:127.0.0.1:0"), Seq("tcp:127.0.0.1:0", "-"), Seq("-", "tcp:127.0.0.1:0"), Seq("mux", "--out", "tcp:127.0.0.1:0")) do
      val r = env.startCommand(ap(args*))
      assertEquals(r.exit(), ExitCode.Usage, s"${args.mkString(" ")}: ${r.err}")
      assert(r.err.startsWith("asyncpipe: bad value 'tcp:127.0.0.1:0': port 0 (any free port) is for listening (tcp-listen:0); connecting needs a port in 1-65535\n"),
        s"${args.mkString(" ")}: ${r.err}")

  e2e.test("an unknown socket option: exit 2 with a did-you-mean; a sink's option on a source is refused, naming its role"): env =>
    val cases = Seq(
      Seq("-", "tcp:127.0.0.1:9,retyr=3") -> "unknown tcp option 'retyr' (known: connect-timeout, retry, interval, linger, keepalive, nodelay); did you mean 'retry'?",
      Seq("tcp-listen:0,onse", "-") -> "unknown tcp-listen option 'onse'",
      Seq("unix:/tmp/x.sock,conect-timeout=1s", "-") -> "did you mean 'connect-timeout'?",
      Seq("tcp-listen:0,on-slow=drop", "-") -> "tcp-listen option 'on-slow' is for writing (a sink)"
    )
    for (args, says) <- cases do
      val r = env.startCommand(ap(args*))
      assertEquals(r.exit(), ExitCode.Usage, s"${args.mkString(" ")}: ${r.err}")
      assert(r.err.contains(says), s"${args.mkString(" ")}: expected '$says' in ${r.err}")
    val r = env.startCommand(ap("-", "tcp-listen:0,onse"))
    assertEquals(r.exit(), ExitCode.Usage, r.err)
    assert(r.err.contains("did you mean 'once'?"), r.err)

  e2e.test("run: a truncated --frame len input in the middle stage fails the pipeline (exit 1 naming stage 2 and why); the tcp: sink's peer reads a reset, not a clean end"): env =>
    val py = env.python(ReadToEnd)
    val port = py.line("the server's port").toInt
    val good = env.write("good.txt", (1 to 100).map(i => s"line $i\n").mkString)
    // One whole len frame, then one that promises 5 bytes and has 2.
    val truncated = env.write("truncated.bin", Array[Byte](0, 0, 0, 3, 'a', 'b', 'c', 0, 0, 0, 5, 'a', 'b'))
    val r = env.startCommand(ap("run", s"file:$good | mux --frame len --in file:$truncated | tcp:127.0.0.1:$port"))
    assertEquals(r.exit(), ExitCode.Runtime, r.err)
    assert(r.err.startsWith(s"asyncpipe: stage 2: file:$truncated: the stream ended inside a len frame"), r.err)
    val end = py.line("how the stream ended")
    assert(end.startsWith("reset after "), s"the peer saw a complete stream: $end")

  e2e.test("a peer that resets the connection mid-stream on a sink: exit 1, stderr names the address and the write"): env =>
    val py = env.python(ResetAfter, "1000000")
    val port = py.line("the server's port").toInt
    val r = env.startCommand(ap("--frame", "raw", "file:/dev/zero", s"tcp:127.0.0.1:$port"))
    assertEquals(r.exit(), ExitCode.Runtime, r.err)
    assert(py.line("the reset").startsWith("reset after "), py.run.err)
    val said = s"asyncpipe: tcp:127.0.0.1:$port: write: "
    assert(r.err.startsWith(said) && (r.err.contains("broken pipe") || r.err.contains("connection reset")) && r.err.linesIterator.size == 1, r.err)

  e2e.test("a third signal halts a sink in the middle of a frame to a peer that reads nothing: the peer reads a reset, not a clean end after part of a frame"): env =>
    val small = (1 to 10).map(i => s"line $i\n").mkString
    val py = env.python(StallThenRead, small.length.toString)
    val port = py.line("the server's port").toInt
    val r = env.startCommand(ap("--frame", "lines", "-", s"tcp:127.0.0.1:$port"))
    // Whole lines, then one of 16 MB: more than the two sockets' buffers hold while the peer reads
    // nothing, so its write stays part way (stdin stays open: the flow does not end by itself).
    val feeder = Thread.ofPlatform().start(() =>
      Try {
        val in = r.process.getOutputStream
        in.write(bytes(small))
        in.write(Array.fill[Byte](16 << 20)('x'.toByte))
        in.write('\n')
        in.flush()
      })
    assertEquals(py.line("the peer holding part of the long line"), "part of the long line is here")
    for signal <- Seq("INT", "TERM", "HUP") do kill(signal, r.process.pid)
    assertEquals(r.exit(), 130, r.err)
    py.tell("read")
    val end = py.line("how the stream ended")
    assert(end.startsWith("reset after "), s"the peer saw: $end")
    val got = end.stripPrefix("reset after ").split(' ').head.toLong
    assert(got > small.length && got < small.length + (16 << 20), end)
    feeder.join(Support.Patience)

  e2e.test("--stats-json: a connect's retries are JSON notices as they happen, its failure a JSON error"): env =>
    val port = freeTcpPort()
    val address = s"tcp:127.0.0.1:$port,retry=1,interval=50ms"
    val r = env.startCommand(ap("--stats-json", address, "-"))
    assertEquals(r.exit(), ExitCode.Runtime, r.err)
    val lines = r.err.linesIterator.toSeq.map(ujson.read(_))
    assertEquals(lines.map(_.obj.keys.toSeq), Seq(Seq("notice"), Seq("error")), r.err)
    assertEquals(lines(0)("notice").str, s"asyncpipe: $address: connect: connection refused; trying again in 50ms (1 of 1)")
    assertEquals(lines(1)("error").str, s"asyncpipe: $address: connect: connection refused")

  e2e.test("IPv6: 'asyncpipe - tcp:[::1]:P' into 'asyncpipe tcp-listen:[::1]:0,once -' copies the lines"): env =>
    assume(Try(os.read(os.Path("/proc/net/if_inet6"))).toOption.exists(_.contains("00000000000000000000000000000001")),
      "this machine has no ::1 (no IPv6 loopback in /proc/net/if_inet6)")
    val listener = env.startCommand(ap("tcp-listen:[::1]:0,once", "-"))
    val port = toldPort(listener, "tcp-listen:[::1]:0,once")
    val lines = (1 to 1000).map(i => s"v6 line $i\n").mkString
    val sender = env.startCommand(ap("-", s"tcp:[::1]:$port"), stdin = Redirect.from(env.write("in.txt", lines).toIO))
    assertEquals(sender.exit(), 0, sender.err)
    assertEquals(listener.exit(), 0, listener.err)
    assertEquals(os.read(listener.stdoutFile), lines)

  e2e.test("a peer that closes with our data unread after our end of input (a reset while lingering): exit 1, not 0"): env =>
    val py = env.python(CloseUnread)
    val port = py.line("the server's port").toInt
    val in = env.write("in.txt", "x" * 99 + "\n")
    val r = env.startCommand(ap(s"file:$in", s"tcp:127.0.0.1:$port"))
    assertEquals(py.line("the close"), "closed with 99 bytes unread")
    assertEquals(r.exit(), ExitCode.Runtime, r.err)
    assert(r.err.startsWith(s"asyncpipe: tcp:127.0.0.1:$port: write: ") && r.err.contains("reset"), r.err)

  e2e.test("a listening sink with 'once' serves one client: a second connect is refused while the first is served"): env =>
    val in = env.write("in.txt", (1 to 1000).map(i => s"line $i\n").mkString)
    val sink = env.startCommand(ap(s"file:$in", "tcp-listen:127.0.0.1:0,once"))
    val port = toldPort(sink, "tcp-listen:127.0.0.1:0,once")
    val py = env.python(TwoClients, port.toString)
    assertEquals(py.line("the first line"), "first line 1")
    assertEquals(py.line("the second connect"), "second refused")
    assertEquals(py.line("the total"), s"total ${os.size(in)}")
    assertEquals(sink.exit(), 0, sink.err)

  // -----------------------------------------------------------------------------------------------
  // Helpers that need the test's Env

  extension (env: Env)
    /** Runs an inline Python script with `args`; its stdout is read line by line, its stdin is the
      * test's to write.
      */
    def python(script: String, args: String*): Peer =
      val file = env.write(s"peer-${script.hashCode.toHexString}.py", script)
      val r = env.startCommand(Seq("python3", "-u", file.toString) ++ args, stdout = Redirect.PIPE)
      Peer(r, LineReader(r.process.getInputStream))

  /** A peer process: the lines it prints, the lines the test tells it. */
  final class Peer(val run: Running, lines: LineReader):
    private val stdin = run.process.getOutputStream
    def line(what: String)(using munit.Location): String =
      lines.next(Support.Patience * 2).getOrElse(fail(s"no line from the peer for $what; its stderr:\n${run.err}"))
    def tell(text: String): Unit =
      stdin.write(bytes(text + "\n"))
      stdin.flush()

  /** A listener sink's stdin as the test writes it, and every byte written, in order. */
  final class Feed(stdin: OutputStream):
    private val all = ByteArrayOutputStream()
    def written: Array[Byte] = all.toByteArray
    def send(b: Array[Byte]): Unit =
      stdin.write(b)
      stdin.flush()
      all.write(b)
    def close(): Unit = stdin.close()

    /** Sends `sync-K-N` lines, one every 20 ms, until `got` (what client K received) holds one:
      * then the sink has that client, and every later frame reaches it. */
    def register(got: os.Path, k: Int)(using munit.Location): Unit =
      var (n, last) = (0, 0L)
      Support.eventually(s"client $k to receive a first frame") {
        val seen = os.exists(got) && os.size(got) > 0
        if !seen && System.nanoTime() - last > 20_000_000L then
          send(bytes(s"sync-$k-$n\n"))
          n += 1
          last = System.nanoTime()
        seen
      }
      // Its first frame may still be arriving: wait for a whole line.
      Support.eventually(s"client $k's first line") { os.read(got).contains("\n") }

    /** Where in the stream the bytes of the client that wrote `got` begin: at its first line (each
      * sync line is written once).
      */
    def start(got: os.Path)(using munit.Location): Int =
      val first = os.read.bytes(got).takeWhile(_ != '\n') :+ '\n'.toByte
      val at = written.indexOfSlice(first)
      assert(at >= 0 && String(first, UTF_8).startsWith("sync-"), s"$got begins with ${String(first, UTF_8)}, not a sync line of the stream")
      at

object SocketE2ETest:
  import StageE2ETest.{Running, sha256}

  /** The size of the byte-exact copies: `ASYNCPIPE_NET_MB` MB (default 20). */
  val NetMB: Int = sys.env.get("ASYNCPIPE_NET_MB").flatMap(_.trim.toIntOption).filter(_ >= 1).getOrElse(20)
  val NetBytes: Long = NetMB * 1_000_000L
  /** The stress multiplier: `ASYNCPIPE_STRESS`, default 1. */
  val Stress: Int = sys.env.get("ASYNCPIPE_STRESS").flatMap(_.trim.toIntOption).filter(_ >= 1).getOrElse(1)
  val Gib: Long = 1L << 30
  /** A bound for a few MB through two JVMs on a busy 2-core machine. */
  val Slow: Long = 20_000
  /** A bound for one copy of NetMB MB. */
  val Copy: Long = Slow + NetMB * 200L

  /** The tool's command line with the installed launcher's JVM flags (project.scala's
    * stage-jvm-flags: C1 and the serial collector), as users run it.
    */
  def ap(args: String*): Seq[String] = FollowTest.follower(args*)

  def onPath(name: String): Boolean =
    sys.env.getOrElse("PATH", "").split(':').exists(d => Files.isExecutable(java.nio.file.Path.of(if d.isEmpty then "." else d, name)))

  /** A TCP port on 127.0.0.1 that was free a moment ago. */
  def freeTcpPort(): Int =
    val ch = ServerSocketChannel.open().bind(InetSocketAddress("127.0.0.1", 0))
    try ch.getLocalAddress.asInstanceOf[InetSocketAddress].getPort finally ch.close()

  /** The port a listener on port 0 told on stderr (`asyncpipe: ADDRESS listens on port N`). */
  def toldPort(r: Running, address: String)(using munit.Location): Int =
    val said = (java.util.regex.Pattern.quote(s"asyncpipe: $address listens on port ") + "([0-9]+)\n").r
    Support.eventually(s"$address to tell its port") { said.findFirstIn(r.err).isDefined || !r.alive }
    said.findFirstMatchIn(r.err).fold(munit.Assertions.fail(s"$address exited ${Try(r.process.exitValue)} without telling its port:\n${r.err}"))(_.group(1).toInt)

  /** Whether some socket listens on TCP `port` (the kernel's tables, IPv4 and IPv6). */
  def tcpListening(port: Int): Boolean =
    Seq("/proc/net/tcp", "/proc/net/tcp6").map(os.Path(_)).filter(os.exists(_))
      .flatMap(p => Try(os.read.lines(p).drop(1)).getOrElse(Nil))
      .map(_.trim.split("\\s+"))
      .exists(cols => cols.length > 3 && Integer.parseInt(cols(1).split(':').last, 16) == port && cols(3) == "0A")

  /** Whether a socket listens on the Unix path (flag __SO_ACCEPTCON in /proc/net/unix). */
  def unixListening(path: os.Path): Boolean =
    Try(os.read.lines(os.Path("/proc/net/unix")).drop(1)).getOrElse(Nil).map(_.trim.split("\\s+"))
      .exists(cols => cols.length >= 8 && cols(7) == path.toString && cols(3) == "00010000")

  def awaitTcpListener(r: Running, port: Int)(using munit.Location): Unit =
    Support.eventually(s"a listener on port $port") { tcpListening(port) || !r.alive }
    munit.Assertions.assert(r.alive, s"the listener on port $port exited: ${r.err}")

  def awaitUnixListener(r: Running, path: os.Path)(using munit.Location): Unit =
    Support.eventually(s"a listener on $path") { unixListening(path) || !r.alive }
    munit.Assertions.assert(r.alive, s"the listener on $path exited: ${r.err}")

  /** Connects to the Unix socket at `path` and sends `text`, then closes. */
  def unixSend(path: os.Path, text: String): Unit =
    val ch = SocketChannel.open(StandardProtocolFamily.UNIX)
    try
      ch.connect(UnixDomainSocketAddress.of(path.toNIO))
      val b = ByteBuffer.wrap(text.getBytes(UTF_8))
      while b.hasRemaining do ch.write(b)
    finally ch.close()

  /** `size` random bytes (a different stream for each seed), written 1 MiB at a time. */
  def writeRandom(path: os.Path, size: Long, seed: Long): Unit =
    val rnd = java.util.SplittableRandom(seed)
    val buf = new Array[Byte](1 << 20)
    write(path, size) { () => rnd.nextBytes(buf); buf }

  /** `size` bytes of lines: printable bytes with an occasional '\r', empty lines among them, the
    * last line ended by its newline.
    */
  def writeLines(path: os.Path, size: Long, seed: Long): Unit =
    val rnd = java.util.SplittableRandom(seed)
    val buf = new Array[Byte](1 << 20)
    write(path, size) { () =>
      var i = 0
      while i < buf.length do
        val r = rnd.nextInt(100)
        buf(i) = if r == 0 then '\n' else if r == 1 then '\r' else (32 + rnd.nextInt(95)).toByte
        i += 1
      buf
    }
    // The last byte a newline (the copy then has nothing to warn of).
    val ch = FileChannel.open(path.toNIO, StandardOpenOption.WRITE)
    try ch.write(ByteBuffer.wrap(Array('\n'.toByte)), size - 1) finally ch.close()

  private def write(path: os.Path, size: Long)(next: () => Array[Byte]): Unit =
    val ch = FileChannel.open(path.toNIO, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)
    try
      var left = size
      while left > 0 do
        val b = ByteBuffer.wrap(next(), 0, math.min(left, 1 << 20).toInt)
        left -= b.remaining
        while b.hasRemaining do ch.write(b)
    finally ch.close()

  /** The two files hold the same bytes (compared without reading them whole into the heap). */
  def assertSameFile(got: os.Path, expected: os.Path)(using munit.Location): Unit =
    munit.Assertions.assert(os.exists(got), s"$got does not exist")
    val at = Files.mismatch(got.toNIO, expected.toNIO)
    if at != -1L then
      munit.Assertions.fail(s"$got (${os.size(got)} bytes) differs from $expected (${os.size(expected)} bytes) first at byte $at" +
        (if os.size(got) < 50_000_000 then s"; sha256 ${sha256(os.read.bytes(got))} vs ${sha256(os.read.bytes(expected))}" else ""))

  /** A field of /proc/PID/status in bytes (VmRSS, VmHWM: given in kB). */
  def status(pid: Long, field: String): Long =
    os.read.lines(os.Path(s"/proc/$pid/status")).collectFirst { case l if l.startsWith(field + ":") => l.split("\\s+")(1).toLong * 1024 }
      .getOrElse(sys.error(s"no $field in /proc/$pid/status"))

  /** The bytes process `pid` has read (rchar of /proc/PID/io); 0 once it is gone. */
  def rchar(pid: Long): Long =
    Try(os.read.lines(os.Path(s"/proc/$pid/io")).collectFirst { case l if l.startsWith("rchar:") => l.split("\\s+")(1).toLong }.getOrElse(0L)).getOrElse(0L)

  /** The highest VmHWM read of a process while it lives (read every 20 ms until stopped). */
  final class PeakRss(pid: Long):
    @volatile var max: Long = 0L
    @volatile private var running = true
    private val thread = Thread.ofPlatform().daemon().start { () =>
      while running do
        Try(status(pid, "VmHWM")).foreach(v => if v > max then max = v)
        java.util.concurrent.locks.LockSupport.parkNanos(20_000_000L)
    }
    def stop(): Unit = { running = false; thread.join(1000) }

  /** The `{"connection": {...}}` objects of a --stats-json stderr, in order. */
  def connections(err: String): Seq[ujson.Value] =
    err.linesIterator.flatMap(l => Try(ujson.read(l)).toOption).filter(_.objOpt.exists(_.contains("connection"))).map(_("connection")).toSeq

  /** Whether `path` is a socket file (st_mode's file type). */
  def isSocket(path: os.Path): Boolean =
    Try(Files.getAttribute(path.toNIO, "unix:mode", java.nio.file.LinkOption.NOFOLLOW_LINKS).asInstanceOf[Int] & 0xf000).toOption.contains(0xc000)

  /** `data` cut into pieces that end with a newline, of at most `max` bytes (unless a line is longer). */
  def wholeLines(data: Array[Byte], max: Int): Iterator[Array[Byte]] =
    var from = 0
    Iterator.continually {
      var end = math.min(from + max, data.length)
      if end < data.length then
        val cut = data.lastIndexOf('\n'.toByte, end - 1) + 1
        end = if cut > from then cut else { val next = data.indexOf('\n'.toByte, end); if next < 0 then data.length else next + 1 }
      val piece = data.slice(from, end)
      from = end
      piece
    }.takeWhile(_.nonEmpty)

  def isSubsequence(xs: Seq[String], of: Seq[String]): Boolean =
    val it = of.iterator
    xs.forall(x => it.exists(_ == x))

  // -----------------------------------------------------------------------------------------------
  // The Python peers

  /** Line `i` of fan-in client `k`: its name, its number, a padding of a length of its own. */
  def fanInLine(k: Int, i: Int): String = f"c$k%02d-$i%06d-" + "x" * ((k * 7919 + i * 104729) % 300)

  /** argv: PORT CLIENTS LINES. Connects every client, prints each one's address, then all write at
    * once (a barrier), their lines cut into writes of odd sizes (1 to 8191 bytes, TCP_NODELAY: a
    * line spans writes and segments), and close. Prints "done", exits 1 on any error.
    */
  val FanInClients: String =
    """import socket, sys, threading, random
      |port, clients, lines = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
      |socks = []
      |for k in range(clients):
      |    s = socket.create_connection(("127.0.0.1", port))
      |    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
      |    socks.append(s)
      |    host, p = s.getsockname()[:2]
      |    print("%s:%d" % (host, p))
      |barrier = threading.Barrier(clients)
      |errors = []
      |def client(k):
      |    try:
      |        data = b"".join(b"c%02d-%06d-%s\n" % (k, i, b"x" * ((k * 7919 + i * 104729) % 300)) for i in range(lines))
      |        rnd = random.Random(k)
      |        cuts = [1, 2, 3, 7, 13, 61, 127, 509, 1021, 4093, 8191]
      |        barrier.wait()
      |        s, pos = socks[k], 0
      |        while pos < len(data):
      |            n = rnd.choice(cuts)
      |            s.sendall(data[pos:pos + n])
      |            pos += n
      |        s.close()
      |    except Exception as e:
      |        errors.append("client %d: %r" % (k, e))
      |threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
      |for t in threads: t.start()
      |for t in threads: t.join()
      |print("done" if not errors else "; ".join(errors))
      |sys.exit(1 if errors else 0)
      |""".stripMargin

  /** The answer of [[AnswerAfterEof]] to `request`. */
  def answer(request: String): String =
    val body = s"you sent ${request.length} bytes\n"
    s"HTTP/1.0 200 OK\r\nContent-Length: ${body.length}\r\n\r\n$body"

  /** Prints its port; accepts one connection, reads it to its end (the client's FIN), then sends
    * the answer (argv "no-newline": without its last newline) and closes. Prints "read N bytes".
    */
  val AnswerAfterEof: String =
    """import socket, sys
      |s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
      |print(s.getsockname()[1])
      |c, _ = s.accept()
      |data = b""
      |while True:
      |    b = c.recv(65536)
      |    if not b: break
      |    data += b
      |body = b"you sent %d bytes\n" % len(data)
      |page = b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
      |c.sendall(page[:-1] if sys.argv[1:] == ["no-newline"] else page)
      |c.close()
      |print("read %d bytes" % len(data))
      |""".stripMargin

  /** argv: listen | connect PORT. Listens (printing its port) and accepts one connection, or
    * connects; prints "connected", reads nothing until told a line on stdin, then reads to the end
    * and prints "total N".
    */
  val StalledReader: String =
    """import socket, sys
      |if sys.argv[1] == "listen":
      |    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
      |    print(s.getsockname()[1])
      |    c, _ = s.accept()
      |else:
      |    c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
      |print("connected")
      |sys.stdin.readline()
      |buf = bytearray(1 << 20)
      |total = 0
      |while True:
      |    n = c.recv_into(buf)
      |    if n == 0: break
      |    total += n
      |c.close()
      |print("total %d" % total)
      |""".stripMargin

  /** A listener with a backlog of 0 that never accepts, its accept queue filled until a connect
    * times out: a SYN to it is dropped (prints the port; "none" if every connect completed).
    * Stays until its stdin ends.
    */
  val BlackHole: String =
    """import socket, sys
      |s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(0)
      |port = s.getsockname()[1]
      |held = []
      |for i in range(16):
      |    c = socket.socket(); c.settimeout(0.3)
      |    try:
      |        c.connect(("127.0.0.1", port)); held.append(c)
      |    except socket.timeout:
      |        print(port); break
      |else:
      |    print("none")
      |sys.stdin.read()
      |""".stripMargin

  /** argv: PATH. A Unix listener with a backlog of 0 that never accepts, filled until a
    * non-blocking connect is refused for want of room (a blocking one then waits): prints "full"
    * ("none" if that never happened). Stays until its stdin ends.
    */
  val UnixBlackHole: String =
    """import socket, sys
      |s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(0)
      |held = []
      |for i in range(16):
      |    c = socket.socket(socket.AF_UNIX); c.setblocking(False)
      |    try:
      |        c.connect(sys.argv[1]); held.append(c)
      |    except BlockingIOError:
      |        print("full"); break
      |else:
      |    print("none")
      |sys.stdout.flush()
      |sys.stdin.read()
      |""".stripMargin

  /** Binds a port and prints it, but listens only once told a line on stdin (until then a connect
    * is refused), then prints "listening", accepts one connection, sends three lines and closes.
    */
  val LateServer: String =
    """import socket, sys
      |s = socket.socket(); s.bind(("127.0.0.1", 0))
      |print(s.getsockname()[1])
      |sys.stdin.readline()
      |s.listen(1)
      |print("listening")
      |c, _ = s.accept()
      |c.sendall(b"one\ntwo\nthree\n")
      |c.close()
      |""".stripMargin

  /** argv: PATH. Binds a Unix socket there, listens, and exits without removing it. */
  val BindAndExit: String =
    """import socket, sys
      |s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1)
      |""".stripMargin

  /** argv: PATH. Listens on a Unix socket there (never accepting), prints "listening", stays until
    * its stdin ends.
    */
  val UnixServer: String =
    """import socket, sys
      |s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
      |print("listening")
      |sys.stdin.read()
      |""".stripMargin

  /** argv: BYTES. Prints its port; accepts one connection, reads BYTES of it, then resets it
    * (SO_LINGER 0) and prints "reset after N".
    */
  val ResetAfter: String =
    """import socket, struct, sys
      |s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
      |print(s.getsockname()[1])
      |c, _ = s.accept()
      |got = 0
      |while got < int(sys.argv[1]):
      |    b = c.recv(65536)
      |    if not b: break
      |    got += len(b)
      |c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
      |c.close()
      |print("reset after %d" % got)
      |""".stripMargin

  /** Prints its port; accepts one connection and reads it to its end: prints "end after B bytes"
    * for a clean end (FIN), "reset after B bytes" for a reset.
    */
  val ReadToEnd: String =
    """import socket
      |s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
      |print(s.getsockname()[1])
      |c, _ = s.accept()
      |""".stripMargin + ReadsConnectionToItsEnd

  /** Reads connection `c` to its end; prints "end after B bytes" (FIN) or "reset after B bytes". */
  private def ReadsConnectionToItsEnd: String =
    """got = 0
      |try:
      |    while True:
      |        b = c.recv(1 << 20)
      |        if not b: break
      |        got += len(b)
      |    print("end after %d bytes" % got)
      |except ConnectionResetError:
      |    print("reset after %d bytes" % got)
      |""".stripMargin

  /** argv: N. Prints its port; accepts one connection (a small receive buffer) and reads nothing
    * until more than N bytes are waiting (the first N are whole lines, the rest part of a long one):
    * says so; then, told "read", reads to the end and prints "end after B bytes" for a clean end
    * (FIN) or "reset after B bytes" for a reset.
    */
  val StallThenRead: String =
    """import socket, sys
      |s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
      |s.bind(("127.0.0.1", 0)); s.listen(1)
      |print(s.getsockname()[1])
      |c, _ = s.accept()
      |c.recv(int(sys.argv[1]) + 1, socket.MSG_PEEK | socket.MSG_WAITALL)
      |print("part of the long line is here")
      |sys.stdin.readline()
      |""".stripMargin + ReadsConnectionToItsEnd

  /** Prints its port; accepts one connection, waits until its 100 bytes are there, reads one and
    * closes with the other 99 unread (the kernel then resets the connection).
    */
  val CloseUnread: String =
    """import socket
      |s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
      |print(s.getsockname()[1])
      |c, _ = s.accept()
      |while len(c.recv(200, socket.MSG_PEEK)) < 100: pass
      |c.recv(1)
      |c.close()
      |print("closed with 99 bytes unread")
      |""".stripMargin

  /** argv: PORT. Connects, reads the first line; connects a second time (prints "second refused"
    * or "second accepted"); then reads the first connection to its end and prints the total bytes.
    */
  val TwoClients: String =
    """import socket, sys
      |port = int(sys.argv[1])
      |a = socket.create_connection(("127.0.0.1", port))
      |f = a.makefile("rb")
      |first = f.readline()
      |print("first " + first.decode().strip())
      |try:
      |    b = socket.create_connection(("127.0.0.1", port)); b.close(); print("second accepted")
      |except ConnectionRefusedError:
      |    print("second refused")
      |rest = f.read()
      |print("total %d" % (len(first) + len(rest)))
      |a.close()
      |""".stripMargin
