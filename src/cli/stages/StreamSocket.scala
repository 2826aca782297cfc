package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*

import scala.concurrent.duration.*

/** What the stream-socket kinds share (`tcp:`, `tcp-listen:`, `unix:`, `unix-listen:`, `tls:`,
  * `tls-listen:`; each is a file of its own that declares its forms and options): the grammar of
  * their options, the address they parse to, and its roles.
  * {{{
  * "tcp:" host ":" port { "," opt }            connect to HOST:PORT
  * "tcp-listen:" [ host ":" ] port { "," opt } listen on PORT (all interfaces, or HOST's); 0: a free port, told on stderr
  * "unix:" path { "," opt }                    connect to the Unix socket PATH
  * "unix-listen:" path { "," opt }             listen on PATH (a stale socket file there is replaced; anything else never is)
  * "tls:" host ":" port { "," opt }            connect to HOST:PORT, then TLS 1.3 or 1.2 as the client
  * "tls-listen:" [ host ":" ] port { "," opt } listen on PORT as tcp-listen:, then TLS as the server of each connection
  * connecting:  connect-timeout=DURATION (default 30s, the TLS handshake included; expiry: exit 124)  retry=N (default 0)
  *              interval=DURATION (default 1s)
  * listening:   once  max-conns=N (default 1024)  on-slow=block|drop (a sink: default block)
  * both:        linger=DURATION (a sink, after its end of input: default 30s)  keepalive  nodelay (TCP, TLS)
  * tls:         ca=FILE (default: the system's trust store)  sni=NAME (default: HOST when it is a name)  insecure
  *              cert=FILE key=FILE (a client certificate: both or neither)
  * tls-listen:  cert=FILE key=FILE (required)  verify (client certificates, checked against ca=FILE, then required)
  * }}}
  * A path escapes ',' and '\' as `file:` does (a `tls` option's FILE too). The files of the TLS
  * options are PEM, read when the endpoint opens, not when the address is parsed ([[Tls]]). One
  * address is one kind of endpoint in each role:
  *   - connecting, a source reads the connection's frames until the peer ends its side; a sink
  *     writes frames, then at its end of input shuts its side (FIN; with TLS, close_notify and
  *     FIN) and waits up to `linger` for the peer to close (what the peer sends meanwhile is read
  *     and dropped, and counted);
  *   - listening, a source takes frames from every connection at once, whole frames only, each
  *     connection framed on its own and ended on its own; it keeps listening (`once`: serves one
  *     connection and ends with it); a sink sends every frame to every client connected then (a
  *     broadcast; `on-slow=drop`: a client whose socket is full misses the frame, counted); with
  *     TLS each connection's handshake is on that connection's own thread, and a client whose
  *     handshake fails is said on stderr while the listener goes on;
  *   - a single connecting address (`asyncpipe tcp:HOST:PORT`) is a conversation, as `nc`: stdin
  *     is sent, what comes back goes to stdout, and it ends when both directions have ended.
  */
final case class StreamSocketAddress(kind: AddressKind, family: SocketFamily, listen: Boolean, where: SocketWhere,
    settings: SocketSettings, named: Seq[String]) extends Address:
  def render: String =
    val opts = named.map(settings.render).map("," + _).mkString
    s"${kind.scheme}:${where.render}$opts"

  override def optionsGiven: Seq[String] = named

  override protected def roleRule(role: Role): Option[String] = (where, role) match
    case (SocketWhere.Port(_, 0), _) if !listen =>
      Some(s"port 0 (any free port) is for listening (${family.listenScheme}:0); connecting needs a port in 1-65535")
    case _ => None

  /** The single-address form: a connecting address both sends stdin and receives into stdout. One
    * that can play no role (port 0) is not: the single-address rule refuses it, with the reason.
    */
  def converses: Boolean = !listen && roles.nonEmpty

  def input(options: StageOptions): Input =
    if listen then ListenInput(this, options) else ConnectInput(this, options)
  def output(options: StageOptions, stdout: OwnedOutput): Output =
    if listen then ListenOutput(this, options) else ConnectOutput(this, options)

/** Where a stream socket connects or listens. */
enum SocketWhere:
  /** A TCP port, at `host` (None: every interface, for listening). */
  case Port(host: Option[Host], port: Int)
  /** A Unix socket's path. */
  case Path(path: String)

  def render: String = this match
    case Port(None, port)    => port.toString
    case Port(Some(h), port) => s"${h.render}:$port"
    case Path(path)          => Address.escapePath(path)

/** The transport of a stream-socket kind. */
enum SocketFamily(val connectScheme: String, val listenScheme: String):
  case Tcp extends SocketFamily("tcp", "tcp-listen")
  case Unix extends SocketFamily("unix", "unix-listen")
  /** TCP with TLS on it ([[Tls]]). */
  case Tls extends SocketFamily("tls", "tls-listen")

  /** Whether its connections are TCP ones (TCP's socket options apply). */
  def overTcp: Boolean = this != Unix

/** What the block policy of a broadcasting listener does with a client that cannot take a frame now. */
enum OnSlow(val token: String):
  case Block extends OnSlow("block")
  case Drop extends OnSlow("drop")

/** The options of a stream-socket address, read (defaults where not given). */
final case class SocketSettings(
    connectTimeout: FiniteDuration = SocketSettings.DefaultConnectTimeout,
    retry: Int = 0,
    interval: FiniteDuration = 1.second,
    linger: FiniteDuration = SocketSettings.DefaultLinger,
    keepalive: Boolean = false,
    nodelay: Boolean = false,
    once: Boolean = false,
    maxConns: Int = SocketSettings.DefaultMaxConns,
    onSlow: OnSlow = OnSlow.Block,
    tls: TlsSettings = TlsSettings()
):
  /** The option `name` as given, for [[StreamSocketAddress.render]]. */
  def render(name: String): String = name match
    case "connect-timeout" => s"$name=${Durations.render(connectTimeout)}"
    case "retry"           => s"$name=$retry"
    case "interval"        => s"$name=${Durations.render(interval)}"
    case "linger"          => s"$name=${Durations.render(linger)}"
    case "max-conns"       => s"$name=$maxConns"
    case "on-slow"         => s"$name=${onSlow.token}"
    case "ca"              => s"$name=${Address.escapePath(tls.ca.getOrElse(""))}"
    case "cert"            => s"$name=${Address.escapePath(tls.cert.getOrElse(""))}"
    case "key"             => s"$name=${Address.escapePath(tls.key.getOrElse(""))}"
    case "sni"             => s"$name=${tls.sni.getOrElse("")}"
    case flag              => flag

object SocketSettings:
  val DefaultConnectTimeout: FiniteDuration = 30.seconds
  val DefaultLinger: FiniteDuration = 30.seconds
  val DefaultMaxConns = 1024

/** The TLS options of a `tls:` or `tls-listen:` address, as given (the files are read when the
  * endpoint opens: [[Tls]]).
  */
final case class TlsSettings(
    ca: Option[String] = None,
    cert: Option[String] = None,
    key: Option[String] = None,
    sni: Option[String] = None,
    insecure: Boolean = false,
    verify: Boolean = false
)

/** The option declarations and the parse shared by the stream-socket kinds. */
object StreamSocket:
  private val duration = Reader.duration()
  val connectTimeout = AddressOption.valued("connect-timeout", duration,
    s"give up connecting after DURATION: exit 124 (default ${Durations.render(SocketSettings.DefaultConnectTimeout)})")
  val retry = AddressOption.valued("retry", Reader.wholeNumber(0, 1_000_000),
    "connect again up to N times after a refused connect, or a source's broken connection (whole frames before the break were passed on, a partial one is dropped; default 0)")
  val interval = AddressOption.valued("interval", duration, "the wait before each reconnect (default 1s)")
  val linger = AddressOption.valued("linger", duration,
    s"a sink, after its end of input: wait up to DURATION for the peer to close (default ${Durations.render(SocketSettings.DefaultLinger)})",
    Some(Role.Sink), "writing")
  val keepalive = AddressOption.flag("keepalive", "TCP keep-alive probes on the connection (SO_KEEPALIVE)")
  val nodelay = AddressOption.flag("nodelay", "send small writes at once (TCP_NODELAY)")
  val once = AddressOption.flag("once", "serve one connection, and end with it")
  val maxConns = AddressOption.valued("max-conns", Reader.wholeNumber(1, 1_000_000),
    s"at most N connections at once; one more is closed at once, said on stderr (default ${SocketSettings.DefaultMaxConns})")
  val onSlow = AddressOption.valued("on-slow", Reader.choice(OnSlow.values.toSeq)(_.token),
    "a broadcasting sink: a client that cannot take a frame now is waited for (block, default) or misses it (drop, counted)",
    Some(Role.Sink), "writing")

  private val file = Reader.path("FILE")
  val ca = AddressOption.valued("ca", file, "trust the CA certificates in FILE (PEM, one or more) instead of the system's trust store")
  val sni = AddressOption.valued("sni", Reader.text("NAME").andThen(hostName),
    "the server name sent (SNI) and verified against its certificate (default: HOST when it is a name)")
  val insecure = AddressOption.flag("insecure",
    "do not verify the server's certificate (said on stderr): anyone on the path could read and change the data")
  val clientCert = AddressOption.valued("cert", file, "a client certificate for servers that ask for one (PEM; its chain may follow), with key=FILE")
  val clientKey = AddressOption.valued("key", file,
    "the client certificate's private key (PEM: PKCS#8, or a traditional RSA or EC key; not encrypted)")
  val serverCert = AddressOption.valued("cert", file, "the server's certificate (PEM; its chain may follow): required, with key=FILE")
  val serverKey = AddressOption.valued("key", file,
    "the server certificate's private key (PEM: PKCS#8, or a traditional RSA or EC key; not encrypted): required")
  val verify = AddressOption.flag("verify", "ask every client for a certificate and accept only those signed by a CA of ca=FILE (required with verify)")
  val clientCa = AddressOption.valued("ca", file, "the CA certificates (PEM, one or more) that sign the client certificates verify accepts")

  /** The options of a connecting kind and of a listening one, by family. */
  def connecting(family: SocketFamily): Seq[AddressOption] =
    Seq(connectTimeout, retry, interval, linger) ++ (family match
      case SocketFamily.Unix => Nil
      case SocketFamily.Tcp  => Seq(keepalive, nodelay)
      case SocketFamily.Tls  => Seq(keepalive, nodelay, ca, sni, insecure, clientCert, clientKey))
  def listening(family: SocketFamily): Seq[AddressOption] =
    Seq(once, maxConns, onSlow, linger) ++ (family match
      case SocketFamily.Unix => Nil
      case SocketFamily.Tcp  => Seq(keepalive, nodelay)
      case SocketFamily.Tls  => Seq(keepalive, nodelay, serverCert, serverKey, verify, clientCa))

  private val label = "[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?".r

  /** A host name for `sni=` (an IP address is not a server name, RFC 6066). */
  private def hostName(text: String): Either[String, String] =
    if text.isEmpty then Left("the name is empty")
    else if text.forall(c => c.isDigit || c == '.') || text.contains(':') then
      Left(s"'$text' is an address, and a server name (SNI) is a host name (RFC 6066); without sni=, an address HOST is verified as it is")
    else if text.length <= 253 && text.stripSuffix(".").split("\\.", -1).forall(l => l.length <= 63 && label.matches(l)) then Right(text)
    else Left(s"'$text' is not a host name (letters, digits, '-', '_' and '.')")

  /** Reads the options in `segments` into settings. */
  def settings(segments: Seq[String], p: AddressParser): Either[CliError, (SocketSettings, Seq[String])] =
    p.options(segments).map { o =>
      val d = SocketSettings()
      val s = SocketSettings(
        connectTimeout = o.value[FiniteDuration]("connect-timeout").getOrElse(d.connectTimeout),
        retry = o.value[Long]("retry").fold(d.retry)(_.toInt),
        interval = o.value[FiniteDuration]("interval").getOrElse(d.interval),
        linger = o.value[FiniteDuration]("linger").getOrElse(d.linger),
        keepalive = o.flag("keepalive"),
        nodelay = o.flag("nodelay"),
        once = o.flag("once"),
        maxConns = o.value[Long]("max-conns").fold(d.maxConns)(_.toInt),
        onSlow = o.value[OnSlow]("on-slow").getOrElse(d.onSlow),
        tls = TlsSettings(
          ca = o.value[String]("ca"),
          cert = o.value[String]("cert"),
          key = o.value[String]("key"),
          sni = o.value[String]("sni"),
          insecure = o.flag("insecure"),
          verify = o.flag("verify")
        )
      )
      val names = segments.map(seg => seg.takeWhile(_ != '='))
      (s, names)
    }

  /** `HOST:PORT` (connecting) or `[HOST:]PORT` (listening) of a TCP or TLS kind, then its options
    * (a TLS kind's are split as a path's, for the '\,' of its files).
    */
  def parseTcp(kind: AddressKind, family: SocketFamily, listen: Boolean, rest: String, p: AddressParser): Either[CliError, Address] =
    val segments = if family == SocketFamily.Tls then Address.splitEscaped(rest) else rest.split(",", -1).toSeq
    val main = segments.head
    val scheme = kind.scheme
    val where: Either[CliError, SocketWhere] =
      if main.isEmpty then
        p.bad(if listen then s"the port is missing: $scheme:PORT listens on all interfaces, $scheme:HOST:PORT on one"
              else s"the host and port are missing: $scheme:HOST:PORT")
      else if !main.contains(':') && !main.startsWith("[") then
        if listen then Hosts.port(main, p).map(SocketWhere.Port(None, _))
        else if Reader.isDigits(main) then p.bad(s"'$main' is a port without a host: $scheme:HOST:PORT (e.g. $scheme:127.0.0.1:$main)")
        else p.bad(s"'$main' has no port: $scheme:HOST:PORT (e.g. $scheme:$main:80)")
      else Hosts.hostAndPort(main, p).map((h, n) => SocketWhere.Port(Some(h), n))
    for
      w <- where
      (s, names) <- settings(segments.tail, p)
      _ <- if family == SocketFamily.Tls then tlsRules(kind, listen, s.tls, p) else Right(())
    yield StreamSocketAddress(kind, family, listen, w, s, names)

  /** What the TLS options need of each other (the files themselves are read when the endpoint opens). */
  private def tlsRules(kind: AddressKind, listen: Boolean, t: TlsSettings, p: AddressParser): Either[CliError, Unit] =
    val scheme = kind.scheme
    if listen && (t.cert.isEmpty || t.key.isEmpty) then
      val missing = Seq("cert=FILE" -> t.cert, "key=FILE" -> t.key).collect { case (o, None) => o }.mkString(" and ")
      p.bad(s"$scheme needs the server's certificate and its private key: $missing missing (e.g. $scheme:8443,cert=server.pem,key=server.key)")
    else if !listen && t.cert.isDefined != t.key.isDefined then
      p.bad(if t.cert.isDefined then s"$scheme option 'cert' needs its private key: key=FILE" else s"$scheme option 'key' needs its certificate: cert=FILE")
    else if t.verify && t.ca.isEmpty then
      p.bad(s"$scheme option 'verify' checks client certificates against ca=FILE, which is missing (the CAs that sign them, PEM)")
    else if !t.verify && listen && t.ca.isDefined then
      p.bad(s"$scheme option 'ca' is for verify (the CAs that sign client certificates), and verify is not given: it would do nothing")
    else if t.insecure && t.ca.isDefined then
      p.bad(s"$scheme options 'insecure' and 'ca' contradict each other: insecure verifies nothing, so ca=FILE would do nothing")
    else Right(())

  /** `PATH` of a Unix kind (escaped as `file:` paths are), then its options. */
  def parseUnix(kind: AddressKind, listen: Boolean, rest: String, p: AddressParser): Either[CliError, Address] =
    val segments = Address.splitEscaped(rest)
    val path = segments.head
    if path.isEmpty then p.bad(s"the socket's path is missing: ${kind.scheme}:PATH")
    else if path.getBytes(java.nio.charset.StandardCharsets.UTF_8).length > MaxUnixPath then
      p.bad(s"a Unix socket's path is at most $MaxUnixPath bytes (sun_path); this one is ${path.getBytes(java.nio.charset.StandardCharsets.UTF_8).length}")
    else settings(segments.tail, p).map((s, names) => StreamSocketAddress(kind, SocketFamily.Unix, listen, SocketWhere.Path(path), s, names))

  /** The longest path a Unix socket address holds on Linux (sun_path, less its final NUL). */
  val MaxUnixPath = 107
