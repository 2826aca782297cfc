package asyncpipe.bench

import java.net.InetSocketAddress
import java.nio.ByteBuffer
import java.nio.channels.{ServerSocketChannel, SocketChannel}
import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path}
import java.util.concurrent.{CountDownLatch, TimeUnit}
import java.util.concurrent.locks.LockSupport
import scala.util.Try

/** The stream-socket addresses as users run them: real `asyncpipe` processes ([[Processes]], the
  * launcher's flags) on 127.0.0.1, against socat (or, where socat is not installed, a pair of
  * Python `socket.sendfile` / `recv_into` loops), files on tmpfs.
  * What it measures and why:
  *   - `asyncpipe --frame raw file:IN tcp:127.0.0.1:P` into `asyncpipe --frame raw
  *     tcp-listen:P,once file:OUT` against `socat -u FILE:IN TCP:...` into `socat -u
  *     TCP-LISTEN:P FILE:OUT` (MiB/s of a 1 GiB text file, scaled by the plan): a raw copy through
  *     a socket must cost no more than the plainest tool that makes one. The time runs from the
  *     sender's start (its JVM's start is in it, as a user waits for it) to both ends' exit, the
  *     receiver already listening.
  *   - the same with lines framing (the default) against the same baseline: what finding every
  *     newline costs, within half of socat's rate.
  *   - `tls:` into `tls-listen:` (raw, a self-signed certificate made with openssl; no row without
  *     it) against the raw `tcp:` row of the same run: what encryption costs, within half.
  *   - figures: 1,000 clients (virtual threads of this JVM) connected at once to one `tcp-listen`,
  *     each sending 1,000 lines cut into writes that split lines: the percentage of lines that
  *     arrive whole and in each client's order (all of them), and the listener's peak resident set
  *     (VmHWM of the process as launched, no -Xmx: its read buffers and threads per connection
  *     must stay bounded); and the round trip of one line through the conversation form
  *     `asyncpipe tcp:127.0.0.1:P` to an echo server in this JVM (stdin to stdout, median of 200
  *     after the first 20: start-up excluded).
  * Each side of a comparison runs in turn within a round, so both see the same machine; a warm-up
  * round first.
  */
object NetSuite extends Suite:
  import Processes.{asyncpipe, asyncpipeTls, onPath, q}
  val name = "net"
  val description = "tcp: into tcp-listen: (raw, lines) vs socat, tls: vs tcp:; 1,000 clients into one listener (lines whole, peak RSS); line round trip"

  private val MiB = 1024.0 * 1024

  def run(h: Harness): SuiteResult =
    val dir = PipelineSuite.Workspace.create()
    try
      val in = dir.resolve("in.txt")
      val out = dir.resolve("out")
      val size = h.plan.ops(1 << 30).toLong
      PipelineSuite.Workspace.writeText(in, size)
      val socat = onPath("socat")
      val baseline: Pair =
        if socat then Pair("socat -u FILE:IN TCP:... into socat -u TCP-LISTEN:P FILE:OUT",
          p => s"socat -u TCP-LISTEN:$p,bind=127.0.0.1,reuseaddr OPEN:${q(out)},creat,trunc",
          p => s"socat -u FILE:${q(in)} TCP:127.0.0.1:$p")
        else
          val (rx, tx) = (dir.resolve("rx.py"), dir.resolve("tx.py"))
          Files.writeString(rx, PythonReceiver)
          Files.writeString(tx, PythonSender)
          Pair("python socket.sendfile into recv_into (no socat here)",
            p => s"python3 ${q(rx)} $p ${q(out)}", p => s"python3 ${q(tx)} $p ${q(in)}")
      def ours(frame: String) = Pair(s"asyncpipe --frame $frame file:IN tcp:... into tcp-listen:P,once file:OUT",
        p => s"$asyncpipe --frame $frame tcp-listen:127.0.0.1:$p,once file:${q(out)}",
        p => s"$asyncpipe --frame $frame file:${q(in)} tcp:127.0.0.1:$p")
      // TLS against plain TCP, both asyncpipe: a self-signed certificate for 127.0.0.1 made by
      // openssl (no row without it).
      val tls: Option[Pair] = selfSigned(dir).map { (cert, key) =>
        Pair("asyncpipe --frame raw file:IN tls:... into tls-listen:P,once file:OUT",
          p => s"$asyncpipeTls --frame raw tls-listen:127.0.0.1:$p,once,cert=${q(cert.toString)},key=${q(key.toString)} file:${q(out)}",
          p => s"$asyncpipeTls --frame raw file:${q(in)} tls:127.0.0.1:$p,ca=${q(cert.toString)}")
      }
      val sides = Seq(baseline, ours("raw"), ours("lines")) ++ tls
      val rates = sides.map(_ => Seq.newBuilder[Double])
      val rounds = 1 + math.min(h.plan.iterations, 5)
      for round <- 1 to rounds do
        val measured = round > 1
        h.progress(s"net: round $round of $rounds${if measured then "" else " (warm-up)"}")
        for (side, i) <- sides.zipWithIndex do
          val rate = side.time(size, dir)
          if round == 2 && Files.mismatch(in, out) != -1L then throw IllegalStateException(s"${side.label}: $out differs from $in")
          if measured then rates(i) += rate
      def m(i: Int) = Measurement(sides(i).label, rates(i).result(), None, 0, "MiB/s")
      val comparisons = Seq(
        Comparison(m(1), m(0), Some(Target.atLeast(1.0))),
        Comparison(m(2), m(0), Some(Target.atLeast(0.5)))
      ) ++ tls.map(_ => Comparison(m(3), m(1), Some(Target.atLeast(0.5))))
      Files.deleteIfExists(out)
      val (clients, lines) = (1000, h.plan.ops(1000))
      h.progress(s"net: $clients clients x $lines lines into one tcp-listen")
      val (whole, peak) = manyClients(clients, lines, dir.resolve("many.txt"), dir.resolve("many.err"))
      h.progress("net: line round trip through tcp:")
      val latency = roundTripMillis(200, 20)
      SuiteResult(name, comparisons, Seq(
        Figure(s"$clients clients x $lines lines into one tcp-listen: lines whole, in each client's order", whole, "%", Some(Target.exactly(100))),
        Figure(s"$clients clients x $lines lines into one tcp-listen: the listener's peak RSS (VmHWM)", peak, "MiB", Some(Target.below(256))),
        Figure("a line's round trip through 'asyncpipe tcp:' to an echo server, median", latency, "ms", Some(Target.below(2)))
      ))
    finally PipelineSuite.Workspace.delete(dir)

  // -----------------------------------------------------------------------------------------------
  // Copies

  /** A receiver and a sender, as sh commands for a port. */
  private final case class Pair(label: String, receiver: Int => String, sender: Int => String):
    /** Starts the receiver, waits until it listens, then times the sender's start to both ends'
      * exit: MiB/s of `bytes`.
      */
    def time(bytes: Long, dir: Path): Double =
      val port = freePort()
      val err = dir.resolve("receiver.err")
      val rx = ProcessBuilder("sh", "-c", receiver(port)).redirectOutput(ProcessBuilder.Redirect.DISCARD)
        .redirectError(err.toFile).start()
      try
        awaitListening(port, rx, err)
        val t0 = System.nanoTime()
        Processes.shell(sender(port))
        if !rx.waitFor(600, TimeUnit.SECONDS) then throw IllegalStateException(s"$label: the receiver did not end")
        val seconds = (System.nanoTime() - t0) / 1e9
        if rx.exitValue != 0 then throw IllegalStateException(s"$label: the receiver exited ${rx.exitValue}: ${Files.readString(err).take(2000)}")
        bytes / MiB / seconds
      finally rx.destroyForcibly().waitFor()

  /** A certificate for 127.0.0.1 and its key (PEM, in `dir`), made by openssl; None without openssl. */
  private def selfSigned(dir: Path): Option[(Path, Path)] =
    if !onPath("openssl") then None
    else
      val (cert, key) = (dir.resolve("cert.pem"), dir.resolve("key.pem"))
      Processes.shell(s"openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 " +
        s"-subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout ${q(key.toString)} -out ${q(cert.toString)} 2>/dev/null")
      Some((cert, key))

  private def freePort(): Int =
    val ch = ServerSocketChannel.open().bind(InetSocketAddress("127.0.0.1", 0))
    try ch.getLocalAddress.asInstanceOf[InetSocketAddress].getPort finally ch.close()

  /** Whether some socket listens on TCP `port` (/proc/net/tcp and tcp6: a JDK socket may be an
    * IPv6 one).
    */
  private def listening(port: Int): Boolean =
    val hex = f":$port%04X "
    Seq("/proc/net/tcp", "/proc/net/tcp6").map(Path.of(_)).exists { p =>
      Files.isReadable(p) && Files.readAllLines(p).stream().anyMatch { l =>
        val cols = l.trim.split("\\s+")
        cols.length > 3 && (cols(1) + " ").endsWith(hex) && cols(3) == "0A"
      }
    }

  private def awaitListening(port: Int, p: Process, err: Path): Unit =
    val deadline = System.nanoTime() + 30_000_000_000L
    while !listening(port) do
      if !p.isAlive then throw IllegalStateException(s"the receiver exited ${p.exitValue} before listening: ${Try(Files.readString(err)).getOrElse("")}")
      if System.nanoTime() > deadline then throw IllegalStateException(s"nothing listened on port $port within 30 s")
      LockSupport.parkNanos(2_000_000)

  // -----------------------------------------------------------------------------------------------
  // Many clients

  private def clientLine(k: Int, i: Int): String = s"client $k line $i the quick brown fox jumps over the lazy dog\n"

  /** `clients` connections at once to `tcp-listen:127.0.0.1:0 file:OUT`, each sending `lines`
    * lines in writes of 1,000 bytes (lines span them), all released together once every one is
    * connected. Returns the percentage of lines that came whole and in their client's order, and
    * the listener's VmHWM in MiB once everything has arrived.
    */
  private def manyClients(clients: Int, lines: Int, out: Path, err: Path): (Double, Double) =
    val p = ProcessBuilder("sh", "-c", s"exec $asyncpipe tcp-listen:127.0.0.1:0 file:${q(out)}")
      .redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectError(err.toFile).start()
    try
      val port = toldPort(p, err)
      val data = (0 until clients).map(k => (0 until lines).map(clientLine(k, _)).mkString.getBytes(StandardCharsets.US_ASCII))
      val expected = data.map(_.length.toLong).sum
      val connected = CountDownLatch(clients)
      val go = CountDownLatch(1)
      val failures = java.util.concurrent.ConcurrentLinkedQueue[String]()
      val threads = (0 until clients).map { k =>
        Thread.ofVirtual().start { () =>
          try
            val ch = SocketChannel.open(InetSocketAddress("127.0.0.1", port))
            try
              connected.countDown()
              go.await()
              val b = ByteBuffer.wrap(data(k))
              while b.hasRemaining do
                val slice = b.slice(b.position(), math.min(1000, b.remaining))
                while slice.hasRemaining do ch.write(slice)
                b.position(b.position() + slice.position())
            finally ch.close()
          catch case e: Exception =>
            failures.add(s"client $k: $e")
            connected.countDown()
        }
      }
      if !connected.await(120, TimeUnit.SECONDS) then throw IllegalStateException(s"$clients clients did not connect within 120 s")
      go.countDown()
      threads.foreach(_.join())
      if !failures.isEmpty then throw IllegalStateException(s"${failures.size} clients failed, e.g. ${failures.peek()}")
      val deadline = System.nanoTime() + 120_000_000_000L
      while Files.size(out) < expected do
        if !p.isAlive then throw IllegalStateException(s"the listener exited ${p.exitValue}: ${Files.readString(err).take(2000)}")
        if System.nanoTime() > deadline then throw IllegalStateException(s"the listener wrote ${Files.size(out)} of $expected bytes in 120 s")
        LockSupport.parkNanos(10_000_000)
      val peak = vmHwmMiB(p.pid)
      p.destroy() // SIGTERM: a listener without `once` goes on until stopped
      p.waitFor(30, TimeUnit.SECONDS)
      (wholeInOrder(out, clients, lines), peak)
    finally p.destroyForcibly().waitFor()

  /** The percentage of the `clients` x `lines` lines that `out` holds whole, each client's in its order. */
  private def wholeInOrder(out: Path, clients: Int, lines: Int): Double =
    val next = Array.fill(clients)(0)
    var good = 0L
    val reader = Files.newBufferedReader(out, StandardCharsets.US_ASCII)
    try
      val shape = """client ([0-9]+) line ([0-9]+) .*""".r
      var line = reader.readLine()
      while line != null do
        line match
          case shape(k, i) if k.toInt < clients && i.toInt == next(k.toInt) && (line + "\n") == clientLine(k.toInt, i.toInt) =>
            next(k.toInt) += 1
            good += 1
          case _ => ()
        line = reader.readLine()
    finally reader.close()
    good * 100.0 / (clients.toLong * lines)

  /** The port a listener on port 0 tells on stderr. */
  private def toldPort(p: Process, err: Path): Int =
    val said = """listens on port ([0-9]+)""".r
    val deadline = System.nanoTime() + 30_000_000_000L
    var port = -1
    while port < 0 do
      said.findFirstMatchIn(Try(Files.readString(err)).getOrElse("")) match
        case Some(m) => port = m.group(1).toInt
        case None =>
          if !p.isAlive then throw IllegalStateException(s"the listener exited ${p.exitValue}: ${Files.readString(err).take(2000)}")
          if System.nanoTime() > deadline then throw IllegalStateException("the listener did not tell its port within 30 s")
          LockSupport.parkNanos(2_000_000)
    port

  private def vmHwmMiB(pid: Long): Double =
    Files.readAllLines(Path.of(s"/proc/$pid/status")).stream().filter(_.startsWith("VmHWM:")).findFirst()
      .map(l => l.split("\\s+")(1).toDouble / 1024).orElseThrow(() => IllegalStateException(s"no VmHWM for $pid"))

  // -----------------------------------------------------------------------------------------------
  // Round trips

  /** Median milliseconds from writing a line into `asyncpipe tcp:127.0.0.1:P` (the conversation:
    * stdin kept open) to reading its echo on stdout, over `count` lines after the first `skip`.
    */
  private def roundTripMillis(count: Int, skip: Int): Double =
    val server = ServerSocketChannel.open().bind(InetSocketAddress("127.0.0.1", 0))
    val port = server.getLocalAddress.asInstanceOf[InetSocketAddress].getPort
    val echo = Thread.ofPlatform().daemon().start { () =>
      try
        val c = server.accept()
        try
          val b = ByteBuffer.allocate(65_536)
          while c.read(b) >= 0 do
            b.flip()
            while b.hasRemaining do c.write(b)
            b.clear()
        finally c.close()
      catch case _: java.io.IOException => ()
    }
    val p = ProcessBuilder("sh", "-c", s"exec $asyncpipe tcp:127.0.0.1:$port").redirectError(ProcessBuilder.Redirect.DISCARD).start()
    try
      val times = Processes.lineRoundTrips(p, skip + count, "asyncpipe tcp: to an echo server")
      p.getOutputStream.close()
      if !p.waitFor(30, TimeUnit.SECONDS) || p.exitValue != 0 then throw IllegalStateException(s"asyncpipe tcp: did not end with 0 after stdin's end")
      Measurement.medianOf(times.drop(skip))
    finally
      p.destroyForcibly().waitFor()
      server.close()
      echo.join(5000)

  // -----------------------------------------------------------------------------------------------
  // The baseline where socat is not installed

  /** argv: PORT OUT. Accepts one connection on 127.0.0.1:PORT and writes what it brings to OUT. */
  private val PythonReceiver =
    """import socket, sys
      |s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
      |s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
      |c, _ = s.accept()
      |buf = bytearray(1 << 18); view = memoryview(buf)
      |with open(sys.argv[2], "wb") as f:
      |    while True:
      |        n = c.recv_into(buf)
      |        if n == 0: break
      |        f.write(view[:n])
      |""".stripMargin

  /** argv: PORT IN. Connects to 127.0.0.1:PORT and sends IN with socket.sendfile. */
  private val PythonSender =
    """import socket, sys
      |c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
      |with open(sys.argv[2], "rb") as f:
      |    c.sendfile(f)
      |c.shutdown(socket.SHUT_WR)
      |c.recv(1)
      |c.close()
      |""".stripMargin
