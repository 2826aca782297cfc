package asyncpipe.cli.stages

import asyncpipe.cli.*

import asyncpipe.async.{Support, Watchdog}
import java.io.FileInputStream
import java.lang.ProcessBuilder.Redirect
import java.net.{InetAddress, ServerSocket}
import java.security.{KeyStore, PrivateKey}
import java.util.Base64
import scala.concurrent.duration.{Duration, FiniteDuration}
import java.util.concurrent.TimeUnit
import scala.util.{Random, Try}

import StageE2ETest.{Env, Running, Slow, assertSameBytes, bytes}

/** `tls:` and `tls-listen:` end to end: the built tool as real processes on 127.0.0.1 (ephemeral
  * ports), against itself, `openssl s_server`/`s_client` and Python's `ssl` module (peers no one
  * here wrote), with a CA, server, expired and client certificates made by `keytool` for the suite.
  */
class TlsTest extends munit.FunSuite with Watchdog:
  import TlsTest.*

  override def watchdog: FiniteDuration = Duration(180, TimeUnit.SECONDS)
  // munit's own 30 s timeout would end a test first: on a busy 2-core machine the first test (which
  // makes the certificates with a dozen keytool JVMs) took 41 s.
  override def munitTimeout = watchdog + Duration(10, TimeUnit.SECONDS)

  override def beforeAll(): Unit =
    assume(Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")

  private var pkiDir: Option[os.Path] = None
  /** The certificates and keys, made on first use (keytool: a dozen JVMs). */
  private lazy val pki: Pki =
    val dir = os.temp.dir(prefix = "asyncpipe-tls-pki-")
    pkiDir = Some(dir)
    Pki.make(dir)

  override def afterAll(): Unit = pkiDir.foreach(os.remove.all(_))

  private val tls = FunFixture[Env](_ => Env(os.temp.dir(prefix = "asyncpipe-tls-")), _.close())

  private def openssl: Boolean = Try(os.proc("openssl", "version").call(check = false, stderr = os.Pipe).exitCode == 0).getOrElse(false)
  private def assumeOpenssl(): Unit =
    assume(openssl, "openssl is not installed: the tests against openssl s_server / s_client (and of traditional PEM keys) are skipped")

  /** A listening asyncpipe (its address on port 0), and the port it told on stderr. */
  private def listening(env: Env, args: Seq[String], stdin: Redirect = Redirect.PIPE)(using munit.Location): (Running, Int) =
    val r = env.start(args, stdin)
    Support.eventually(s"asyncpipe ${args.mkString(" ")} to listen", Slow)(!r.alive || told(r.err).isDefined)
    assert(r.alive, s"the listener exited with ${r.exit()}:\n${r.err}")
    (r, told(r.err).get)

  private def server(p: Pki, extra: String = "") = s"cert=${p.serverCert},key=${p.serverKey}$extra"

  private def randomBytes(n: Int, seed: Int): Array[Byte] =
    val b = new Array[Byte](n)
    Random(seed).nextBytes(b)
    b

  // -----------------------------------------------------------------------------------------------
  // Copies

  tls.test("tls: into tls-listen: and back out of it: a few MB byte for byte, both directions"): env =>
    val p = pki
    val in = env.write("in.bin", randomBytes(3_000_000, 1))
    val (l, port) = listening(env, Seq("--frame", "raw", s"tls-listen:127.0.0.1:0,once,${server(p)}", s"file:${env.dir / "got.bin"}"))
    val c = env.start(Seq("--frame", "raw", s"file:$in", s"tls:localhost:$port,ca=${p.ca}"))
    assertEquals(c.exit(Slow), 0, c.err)
    assertEquals(l.exit(Slow), 0, l.err)
    assertSameBytes(env.dir / "got.bin", in)
    assertEquals(c.err, "")

    // The listener as a sink: every frame to the client (the first one is waited for).
    val (l2, port2) = listening(env, Seq("--frame", "raw", s"file:$in", s"tls-listen:127.0.0.1:0,${server(p)}"))
    val c2 = env.start(Seq("--frame", "raw", s"tls:127.0.0.1:$port2,ca=${p.ca}", s"file:${env.dir / "back.bin"}"))
    assertEquals(c2.exit(Slow), 0, c2.err)
    assertEquals(l2.exit(Slow), 0, l2.err)
    assertSameBytes(env.dir / "back.bin", in)
    assertEquals(c2.err, "")

  tls.test("openssl s_server and s_client as the peers: a few MB byte for byte, each way"): env =>
    assumeOpenssl()
    val p = pki
    val in = env.write("in.bin", randomBytes(2_500_000, 2))

    // asyncpipe tls: (a sink) into openssl s_server, which writes what it receives to its stdout.
    val port = freeTcpPort()
    val sOut = env.dir / "s_server.out"
    val s = env.startCommand(Seq("openssl", "s_server", "-quiet", "-naccept", "1", "-accept", s"127.0.0.1:$port",
      "-cert", p.serverCert.toString, "-key", p.serverKey.toString), stdout = Redirect.to(sOut.toIO))
    awaitListening(port, s)
    val c = env.start(Seq("--frame", "raw", s"file:$in", s"tls:localhost:$port,ca=${p.ca}"))
    assertEquals(c.exit(Slow), 0, c.err)
    assertEquals(StageE2ETest.exitOf(s.process, "openssl s_server", Slow), 0, s.err)
    assertSameBytes(sOut, in)

    // openssl s_client into asyncpipe tls-listen: (a source); s_client ends the connection at its stdin's end.
    val (l, lport) = listening(env, Seq("--frame", "raw", s"tls-listen:127.0.0.1:0,once,${server(p)}", s"file:${env.dir / "got.bin"}"))
    val sc = env.startCommand(Seq("openssl", "s_client", "-quiet", "-no_ign_eof", "-nocommands", "-connect", s"127.0.0.1:$lport",
      "-servername", "localhost", "-CAfile", p.ca.toString, "-verify_return_error"), stdin = Redirect.from(in.toIO))
    assertEquals(l.exit(Slow), 0, l.err)
    assertEquals(StageE2ETest.exitOf(sc.process, "openssl s_client", Slow), 0, sc.err)
    assertSameBytes(env.dir / "got.bin", in)

    // asyncpipe tls-listen: (a sink) to openssl s_client, which writes what it receives to its stdout.
    val (l2, lport2) = listening(env, Seq("--frame", "raw", s"file:$in", s"tls-listen:127.0.0.1:0,${server(p)}"))
    val scOut = env.dir / "s_client.out"
    val sc2 = env.startCommand(Seq("openssl", "s_client", "-quiet", "-connect", s"127.0.0.1:$lport2", "-servername", "localhost",
      "-CAfile", p.ca.toString, "-verify_return_error"), stdout = Redirect.to(scOut.toIO)) // stdin: a pipe kept open
    assertEquals(l2.exit(Slow), 0, l2.err)
    assertEquals(StageE2ETest.exitOf(sc2.process, "openssl s_client", Slow), 0, sc2.err)
    assertSameBytes(scOut, in)

  tls.test("Python's ssl module as the peer: a server that sends, a server that receives, a client that sends"): env =>
    val p = pki
    val py = env.write("peer.py", PythonPeer)
    val in = env.write("in.bin", randomBytes(2_500_000, 3))

    val send = python(env, py, "serve-send", p.serverCert.toString, p.serverKey.toString, in.toString)
    val c = env.start(Seq("--frame", "raw", s"tls:localhost:${send.port},ca=${p.ca}", s"file:${env.dir / "got.bin"}"))
    assertEquals(c.exit(Slow), 0, c.err)
    assertEquals(send.exit(Slow), 0, send.err)
    assertSameBytes(env.dir / "got.bin", in)

    val recv = python(env, py, "serve-recv", p.serverCert.toString, p.serverKey.toString, (env.dir / "py.bin").toString)
    val c2 = env.start(Seq("--frame", "raw", s"file:$in", s"tls:127.0.0.1:${recv.port},ca=${p.ca}"))
    assertEquals(c2.exit(Slow), 0, c2.err)
    assertEquals(recv.exit(Slow), 0, recv.err)
    assertSameBytes(env.dir / "py.bin", in)

    val (l, port) = listening(env, Seq("--frame", "raw", s"tls-listen:127.0.0.1:0,once,${server(p)}", s"file:${env.dir / "from-py.bin"}"))
    val client = env.startCommand(Seq("python3", py.toString, "connect-send", port.toString, p.ca.toString, in.toString))
    assertEquals(l.exit(Slow), 0, l.err)
    assertEquals(client.exit(Slow), 0, client.err)
    assertSameBytes(env.dir / "from-py.bin", in)

  tls.test("a single tls: address is a conversation: the request, its end (close_notify), then the reply, to a Python ssl server"): env =>
    val p = pki
    val py = env.write("peer.py", PythonPeer)
    val s = python(env, py, "serve-reply", p.serverCert.toString, p.serverKey.toString, "-")
    val request = env.write("request", "GET / HTTP/1.0\r\n\r\n")
    val c = env.start(Seq(s"tls:localhost:${s.port},ca=${p.ca}"), stdin = Redirect.from(request.toIO))
    assertEquals(c.exit(Slow), 0, c.err)
    assertEquals(s.exit(Slow), 0, s.err)
    assertEquals(c.out, "reply to 18 bytes: GET / HTTP/1.0\r\n\r\n")
    assertEquals(c.err, "")

  // -----------------------------------------------------------------------------------------------
  // Refusals

  tls.test("the server's certificate refused: a name it is not for, an unknown CA, no CA given; the listener goes on"): env =>
    val p = pki
    val (l, port) = listening(env, Seq(s"tls-listen:127.0.0.1:0,${server(p)}", "-"))

    val wrongName = s"tls:127.0.0.1:$port,sni=wrong.example,ca=${p.ca}"
    val a = env.start(Seq("-", wrongName))
    assertEquals(a.exit(Slow), 1, a.err)
    assertEquals(a.err, s"asyncpipe: $wrongName: TLS handshake: the server's certificate is for localhost, 127.0.0.1, not wrong.example\n")

    val otherCa = s"tls:localhost:$port,ca=${p.otherCa}"
    val b = env.start(Seq("-", otherCa))
    assertEquals(b.exit(Slow), 1, b.err)
    assertEquals(b.err, s"asyncpipe: $otherCa: TLS handshake: the server's certificate is not signed by a trusted CA (those of ca=${p.otherCa})\n")

    val system = s"tls:localhost:$port"
    val c = env.start(Seq("-", system))
    assertEquals(c.exit(Slow), 1, c.err)
    assertEquals(c.err, s"asyncpipe: $system: TLS handshake: the server's certificate is not signed by a trusted CA (the system's; ca=FILE trusts others)\n")

    // The listener said each refusal, and goes on: a client that trusts it (a bundle of two CAs) gets through.
    Support.eventually("the listener to tell of three refused handshakes", Slow)(
      l.err.linesIterator.count(_.contains("TLS handshake: the client refused the server's certificate")) == 3)
    val good = env.start(Seq("-", s"tls:127.0.0.1:$port,ca=${p.bundle}"), stdin = Redirect.from(env.write("hi", "hi\n").toIO))
    assertEquals(good.exit(Slow), 0, good.err)
    Support.eventually("the good client's line on the listener's stdout", Slow)(l.out == "hi\n")
    assert(l.alive, l.err)
    for line <- l.err.linesIterator.toSeq.filterNot(_.contains(" listens on port ")) do
      assert(line.matches(s"asyncpipe: tls-listen:127.0.0.1:0,\\S+: 127\\.0\\.0\\.1:\\d+: TLS handshake: the client refused the server's certificate \\(\\w+\\); the others go on"), line)

  tls.test("an expired server certificate is refused; insecure accepts an unknown CA and says so once"): env =>
    val p = pki
    val (_, port) = listening(env, Seq(s"tls-listen:127.0.0.1:0,cert=${p.expiredCert},key=${p.serverKey}", "-"))
    val expired = s"tls:localhost:$port,ca=${p.ca}"
    val a = env.start(Seq("-", expired))
    assertEquals(a.exit(Slow), 1, a.err)
    assert(a.err.matches(s"(?s)asyncpipe: \\Q$expired\\E: TLS handshake: the server's certificate expired on \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC\n"), a.err)

    val (l, port2) = listening(env, Seq(s"tls-listen:127.0.0.1:0,once,${server(p)}", "-"))
    val insecure = s"tls:localhost:$port2,insecure"
    val b = env.start(Seq("-", insecure), stdin = Redirect.from(env.write("secret", "not so secret\n").toIO))
    assertEquals(b.exit(Slow), 0, b.err)
    assertEquals(l.exit(Slow), 0, l.err)
    assertEquals(l.out, "not so secret\n")
    assertEquals(b.err, s"asyncpipe: $insecure: insecure: the server's certificate is not verified; anyone on the path could read and change the data\n")

  tls.test("verify: a client with a certificate of the CA is served, one without is refused (and told why), and once waits for the good one"): env =>
    val p = pki
    val verify = server(p, s",verify,ca=${p.ca}")
    val (l, port) = listening(env, Seq(s"tls-listen:127.0.0.1:0,once,$verify", "-"))
    // Without a certificate, writing: the refusal comes after the client's handshake (TLS 1.3),
    // so the client finds it as it writes or as it waits for the close; either way, exit 1.
    val none = env.start(Seq("-", s"tls:localhost:$port,ca=${p.ca}"), stdin = Redirect.from(env.write("none", "no certificate\n").toIO))
    assertEquals(none.exit(Slow), 1, none.err)
    assert(none.err.contains("client certificate"), none.err)
    Support.eventually("the listener to tell of the client without a certificate", Slow)(
      l.err.contains(": TLS handshake: the client sent no certificate, and verify requires one; still listening (once)\n"))
    val good = env.start(Seq("-", s"tls:localhost:$port,ca=${p.ca},cert=${p.clientCert},key=${p.clientKey}"),
      stdin = Redirect.from(env.write("good", "with a certificate\n").toIO))
    assertEquals(good.exit(Slow), 0, good.err)
    assertEquals(l.exit(Slow), 0, l.err)
    assertEquals(l.out, "with a certificate\n")

    // A broadcasting listener: a client without a certificate, reading, is told at once; the one
    // with a certificate gets every byte (the refused one never counted as a client).
    val data = env.write("data.bin", randomBytes(200_000, 4))
    val (l2, port2) = listening(env, Seq("--frame", "raw", s"file:$data", s"tls-listen:127.0.0.1:0,$verify"))
    val reader = s"tls:localhost:$port2,ca=${p.ca}"
    val refused = env.start(Seq(reader, "-"))
    assertEquals(refused.exit(Slow), 1, refused.err)
    // Under TLS 1.3 the JDK tells the server's alert as the handshake's (it is, for the server).
    assertEquals(refused.err, s"asyncpipe: $reader: TLS handshake: the server requires a client certificate: give one with cert=FILE,key=FILE\n")
    val served = env.start(Seq("--frame", "raw", s"tls:localhost:$port2,ca=${p.ca},cert=${p.clientCert},key=${p.clientKey}", s"file:${env.dir / "got.bin"}"))
    assertEquals(served.exit(Slow), 0, served.err)
    assertEquals(l2.exit(Slow), 0, l2.err)
    assertSameBytes(env.dir / "got.bin", data)
    assert(l2.err.contains("TLS handshake: the client sent no certificate, and verify requires one; the others go on"), l2.err)

  // -----------------------------------------------------------------------------------------------
  // Files and keys

  tls.test("files read when the endpoint opens: missing, not PEM, a key that is another's: exit 1 naming the file"): env =>
    val p = pki
    val notPem = env.write("not.pem", "hello\n")
    val cases = Seq(
      Seq(s"tls-listen:127.0.0.1:0,cert=${env.dir / "missing.pem"},key=${p.serverKey}", "-") ->
        s"cert=${env.dir / "missing.pem"}: cannot read it: no such file or directory",
      Seq(s"tls-listen:127.0.0.1:0,cert=$notPem,key=${p.serverKey}", "-") -> s"cert=$notPem: not PEM (no -----BEGIN ...----- block)",
      Seq(s"tls-listen:127.0.0.1:0,cert=${p.serverCert},key=${p.clientKey}", "-") ->
        s"key=${p.clientKey}: does not belong to the certificate of cert=${p.serverCert}",
      Seq(s"tls-listen:127.0.0.1:0,cert=${p.serverCert},key=${p.serverCert}", "-") ->
        s"key=${p.serverCert}: holds no private key (-----BEGIN PRIVATE KEY-----); it holds a certificate, which goes to cert=FILE",
      // A client reads its files before it connects (port 1: nothing listens there).
      Seq("-", s"tls:127.0.0.1:1,ca=$notPem") -> s"ca=$notPem: not PEM (no -----BEGIN ...----- block)"
    )
    for (args, said) <- cases do
      val r = env.start(args)
      assertEquals(r.exit(Slow), 1, r.err)
      val address = args.find(_.startsWith("tls")).get
      assert(r.err.startsWith(s"asyncpipe: $address: $said"), s"${args.mkString(" ")}:\n${r.err}")
      assert(!r.err.contains("Exception") && !r.err.contains("\tat "), r.err)

  tls.test("traditional PEM keys (BEGIN RSA PRIVATE KEY, BEGIN EC PRIVATE KEY) are read; an encrypted one is refused, naming the command"): env =>
    assumeOpenssl()
    val p = pki
    val rsa = env.dir / "server-rsa.key"
    val ec = env.dir / "client-ec.key"
    val enc = env.dir / "server-enc.key"
    os.proc("openssl", "rsa", "-in", p.serverKey, "-traditional", "-out", rsa).call(stderr = os.Pipe)
    os.proc("openssl", "ec", "-in", p.clientKey, "-out", ec).call(stderr = os.Pipe)
    os.proc("openssl", "pkcs8", "-topk8", "-in", p.serverKey, "-passout", "pass:secret", "-out", enc).call(stderr = os.Pipe)
    assert(os.read(rsa).startsWith("-----BEGIN RSA PRIVATE KEY-----"), os.read(rsa).take(40))
    assert(os.read(ec).startsWith("-----BEGIN EC PRIVATE KEY-----"), os.read(ec).take(40))

    val (l, port) = listening(env, Seq(s"tls-listen:127.0.0.1:0,once,cert=${p.serverCert},key=$rsa,verify,ca=${p.ca}", "-"))
    val c = env.start(Seq("-", s"tls:localhost:$port,ca=${p.ca},cert=${p.clientCert},key=$ec"), stdin = Redirect.from(env.write("x", "traditional\n").toIO))
    assertEquals(c.exit(Slow), 0, c.err)
    assertEquals(l.exit(Slow), 0, l.err)
    assertEquals(l.out, "traditional\n")

    val r = env.start(Seq(s"tls-listen:127.0.0.1:0,cert=${p.serverCert},key=$enc", "-"))
    assertEquals(r.exit(Slow), 1, r.err)
    assert(r.err.contains(s"key=$enc: is encrypted, and asyncpipe reads plain keys: openssl pkey -in FILE -out FILE.plain"), r.err)

  // -----------------------------------------------------------------------------------------------
  // Parsing

  test("parse errors exit 2 naming the token: tls-listen: without cert and key, verify without ca, an unknown option"):
    val cases = Seq(
      "tls-listen:127.0.0.1:0" -> "tls-listen needs the server's certificate and its private key: cert=FILE and key=FILE missing",
      "tls-listen:0,cert=a.pem" -> "tls-listen needs the server's certificate and its private key: key=FILE missing",
      "tls-listen:0,cert=a.pem,key=a.key,verify" -> "tls-listen option 'verify' checks client certificates against ca=FILE, which is missing",
      "tls:localhost:443,insecur" -> "unknown tls option 'insecur'",
      "tls:localhost:443,cert=c.pem" -> "tls option 'cert' needs its private key: key=FILE"
    )
    for (token, rule) <- cases do
      val r = Launch("-", token)
      assertEquals(r.exitCode, 2, r.err)
      assert(r.err.contains(s"bad value '$token': $rule"), r.err)
    val r = Launch("-", "tls:localhost:443,insecur")
    assert(r.err.contains("did you mean 'insecure'?"), r.err)

  test("tls addresses parse and render back (a FILE's ',' escaped), and sni= is a host name"):
    val token = """tls:localhost:8443,ca=/tmp/a\,b.pem,sni=example.com,connect-timeout=5s"""
    val a = Address.parse(token).toOption.get.asInstanceOf[StreamSocketAddress]
    assertEquals(a.family, SocketFamily.Tls)
    assertEquals(a.settings.tls, TlsSettings(ca = Some("/tmp/a,b.pem"), sni = Some("example.com")))
    assertEquals(a.render, token)
    assertEquals(Address.parse(a.render), Right(a))
    val l = Address.parse("tls-listen:0,cert=s.pem,key=s.key,verify,ca=c.pem,once").toOption.get.asInstanceOf[StreamSocketAddress]
    assertEquals((l.listen, l.settings.tls.verify, l.settings.once), (true, true, true))
    assertEquals(Address.parse(l.render), Right(l))
    val e = Address.parse("tls:localhost:443,sni=10.0.0.1")
    assert(e.left.toOption.exists(_.render.contains("'10.0.0.1' is an address, and a server name (SNI) is a host name")), e)
    val zero = Address.parse("tls:localhost:0").flatMap(_.checkRole(Role.Sink))
    assert(zero.left.toOption.exists(_.render.contains("port 0 (any free port) is for listening (tls-listen:0)")), zero)

object TlsTest:
  private val Told = """listens on port (\d+)""".r.unanchored

  /** The port a listener on port 0 told on stderr. */
  def told(err: String): Option[Int] = err match
    case Told(p) => Some(p.toInt)
    case _       => None

  /** A TCP port on 127.0.0.1 that was free a moment ago. */
  def freeTcpPort(): Int =
    val s = ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))
    try s.getLocalPort finally s.close()

  /** Waits until something listens on 127.0.0.1:`port` (the kernel's table, /proc/net/tcp: no
    * connection is made, which a one-connection server would take for its client).
    */
  def awaitListening(port: Int, r: Running)(using munit.Location): Unit =
    def listens = Try(os.read.lines(os.Path("/proc/net/tcp")).drop(1)).getOrElse(Nil).exists { line =>
      val cols = line.trim.split("\\s+")
      cols.length > 3 && cols(3) == "0A" && Integer.parseInt(cols(1).split(':').last, 16) == port
    }
    Support.eventually(s"a server to listen on port $port", Slow)(!r.alive || listens)
    assert(r.alive, s"the server exited with ${r.exit()}:\n${r.err}")

  /** A Python ssl peer ([[PythonPeer]]) that listens on a port of its own, told on its stderr. */
  def python(env: Env, script: os.Path, mode: String, args: String*)(using munit.Location): RunningWithPort =
    val r = env.startCommand(Seq("python3", script.toString, mode) ++ args)
    Support.eventually(s"python3 $mode to listen", Slow)(!r.alive || told(r.err).isDefined)
    assert(told(r.err).isDefined, s"python3 $mode exited with ${r.exit()}:\n${r.err}")
    RunningWithPort(r, told(r.err).get)

  /** A running peer and its port. */
  final class RunningWithPort(r: Running, val port: Int):
    def exit(bound: Long)(using munit.Location): Int = r.exit(bound)
    def err: String = r.err

  /** The peers written with Python's ssl module (OpenSSL underneath). A server listens on port 0
    * of 127.0.0.1 and says "listens on port N" on stderr; each serves one connection.
    */
  val PythonPeer: String =
    """import socket, ssl, sys
      |
      |mode = sys.argv[1]
      |
      |def read_all(s):
      |    chunks = []
      |    while True:
      |        b = s.recv(65536)
      |        if not b:
      |            return b"".join(chunks)
      |        chunks.append(b)
      |
      |def close(s):
      |    try:
      |        s.unwrap()  # close_notify, and the peer's
      |    except (ssl.SSLError, OSError):
      |        pass
      |    s.close()
      |
      |if mode.startswith("serve-"):
      |    cert, key, arg = sys.argv[2], sys.argv[3], sys.argv[4]
      |    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
      |    ctx.load_cert_chain(cert, key)
      |    srv = socket.create_server(("127.0.0.1", 0))
      |    print("listens on port %d" % srv.getsockname()[1], file=sys.stderr, flush=True)
      |    conn, _ = srv.accept()
      |    s = ctx.wrap_socket(conn, server_side=True)
      |    if mode == "serve-send":
      |        with open(arg, "rb") as f:
      |            s.sendall(f.read())
      |    elif mode == "serve-recv":
      |        with open(arg, "wb") as f:
      |            f.write(read_all(s))
      |    elif mode == "serve-reply":
      |        request = read_all(s)  # to the client's close_notify: its half-close
      |        s.sendall(b"reply to %d bytes: " % len(request) + request)
      |    close(s)
      |elif mode == "connect-send":
      |    port, ca, path = int(sys.argv[2]), sys.argv[3], sys.argv[4]
      |    ctx = ssl.create_default_context(cafile=ca)
      |    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
      |    with open(path, "rb") as f:
      |        s.sendall(f.read())
      |    close(s)
      |""".stripMargin

  /** The suite's certificates and keys, PEM files in `dir`. */
  final case class Pki(dir: os.Path):
    def ca: os.Path = dir / "ca.pem"
    def otherCa: os.Path = dir / "other-ca.pem"
    /** Both CAs in one file. */
    def bundle: os.Path = dir / "bundle.pem"
    /** For localhost and 127.0.0.1, signed by [[ca]]. */
    def serverCert: os.Path = dir / "server.pem"
    def serverKey: os.Path = dir / "server.key"
    /** The server's key, signed by [[ca]], expired nine days ago. */
    def expiredCert: os.Path = dir / "expired.pem"
    /** An EC key's certificate for client authentication, signed by [[ca]]. */
    def clientCert: os.Path = dir / "client.pem"
    def clientKey: os.Path = dir / "client.key"

  object Pki:
    private val Pass = "changeit"

    def make(dir: os.Path): Pki =
      val keytool = os.Path(System.getProperty("java.home")) / "bin" / "keytool"
      def run(args: String*): Unit =
        val r = os.proc(keytool, args).call(cwd = dir, check = false, stderr = os.Pipe, stdout = os.Pipe)
        if r.exitCode != 0 then throw AssertionError(s"keytool ${args.mkString(" ")}: ${r.out.text()}${r.err.text()}")
      def store(name: String) = Seq("-keystore", s"$name.p12", "-storepass", Pass, "-storetype", "PKCS12")
      def keypair(name: String, dname: String, alg: Seq[String], ext: String*) =
        run(Seq("-genkeypair", "-alias", name, "-dname", dname, "-validity", "30") ++ alg ++ ext.flatMap(e => Seq("-ext", e)) ++ store(name)*)
      def signed(name: String, out: String, ext: Seq[String], validity: Seq[String] = Seq("-validity", "30")) =
        run(Seq("-certreq", "-alias", name, "-file", s"$name.csr") ++ store(name)*)
        run(Seq("-gencert", "-alias", "ca", "-infile", s"$name.csr", "-outfile", out, "-rfc") ++ validity ++
          ext.flatMap(e => Seq("-ext", e)) ++ store("ca")*)
      val rsa = Seq("-keyalg", "RSA", "-keysize", "2048")
      keypair("ca", "CN=asyncpipe test CA", rsa, "bc:c")
      keypair("other", "CN=asyncpipe other CA", rsa, "bc:c")
      run(Seq("-exportcert", "-alias", "ca", "-rfc", "-file", "ca.pem") ++ store("ca")*)
      run(Seq("-exportcert", "-alias", "other", "-rfc", "-file", "other-ca.pem") ++ store("other")*)
      keypair("server", "CN=localhost", rsa)
      signed("server", "server.pem", Seq("san=dns:localhost,ip:127.0.0.1", "eku=serverAuth"))
      signed("server", "expired.pem", Seq("san=dns:localhost,ip:127.0.0.1", "eku=serverAuth"), Seq("-startdate", "-10d", "-validity", "1"))
      keypair("client", "CN=asyncpipe test client", Seq("-keyalg", "EC", "-groupname", "secp256r1"))
      signed("client", "client.pem", Seq("eku=clientAuth"))
      os.write(dir / "server.key", pkcs8(dir / "server.p12", "server"))
      os.write(dir / "client.key", pkcs8(dir / "client.p12", "client"))
      os.write(dir / "bundle.pem", os.read(dir / "other-ca.pem") + os.read(dir / "ca.pem"))
      Pki(dir)

    /** The private key of `alias` in `store`, as PEM (PKCS#8). */
    private def pkcs8(store: os.Path, alias: String): String =
      val ks = KeyStore.getInstance("PKCS12")
      val in = FileInputStream(store.toIO)
      try ks.load(in, Pass.toCharArray) finally in.close()
      val key = ks.getKey(alias, Pass.toCharArray).asInstanceOf[PrivateKey]
      "-----BEGIN PRIVATE KEY-----\n" + Base64.getMimeEncoder(64, bytes("\n")).encodeToString(key.getEncoded) + "\n-----END PRIVATE KEY-----\n"
