package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*

import scala.concurrent.duration.*

/** What the stream-socket kinds share (`tcp:`, `tcp-listen:`, `unix:`, `unix-listen:`; each is a
  * file of its own that declares its forms and options): the grammar of their options, the
  * address they parse to, and its roles.
  * {{{
  * "tcp:" host ":" port { "," opt }            connect to HOST:PORT
  * "tcp-listen:" [ host ":" ] port { "," opt } listen on PORT (all interfaces, or HOST's); 0: a free port, told on stderr
  * "unix:" path { "," opt }                    connect to the Unix socket PATH
  * "unix-listen:" path { "," opt }             listen on PATH (a stale socket file there is replaced; anything else never is)
  * connecting:  connect-timeout=DURATION (default 30s; expiry: exit 124)  retry=N (default 0)  interval=DURATION (default 1s)
  * listening:   once  max-conns=N (default 1024)  on-slow=block|drop (a sink: default block)
  * both:        linger=DURATION (a sink, after its end of input: default 30s)  keepalive  nodelay (TCP)
  * }}}
  * A path escapes ',' and '\' as `file:` does. One address is one kind of endpoint in each role:
  *   - connecting, a source reads the connection's frames until the peer ends its side; a sink
  *     writes frames, then at its end of input shuts its side (FIN) and waits up to `linger` for the
  *     peer to close (what the peer sends meanwhile is read and dropped, and counted);
  *   - listening, a source takes frames from every connection at once, whole frames only, each
  *     connection framed on its own and ended on its own; it keeps listening (`once`: serves one
  *     connection and ends with it); a sink sends every frame to every client connected then (a
  *     broadcast; `on-slow=drop`: a client whose socket is full misses the frame, counted);
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
    onSlow: OnSlow = OnSlow.Block
):
  /** The option `name` as given, for [[StreamSocketAddress.render]]. */
  def render(name: String): String = name match
    case "connect-timeout" => s"$name=${Durations.render(connectTimeout)}"
    case "retry"           => s"$name=$retry"
    case "interval"        => s"$name=${Durations.render(interval)}"
    case "linger"          => s"$name=${Durations.render(linger)}"
    case "max-conns"       => s"$name=$maxConns"
    case "on-slow"         => s"$name=${onSlow.token}"
    case flag              => flag

object SocketSettings:
  val DefaultConnectTimeout: FiniteDuration = 30.seconds
  val DefaultLinger: FiniteDuration = 30.seconds
  val DefaultMaxConns = 1024

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

  /** The options of a connecting kind and of a listening one, TCP and Unix. */
  def connecting(tcp: Boolean): Seq[AddressOption] =
    Seq(connectTimeout, retry, interval, linger) ++ (if tcp then Seq(keepalive, nodelay) else Nil)
  def listening(tcp: Boolean): Seq[AddressOption] =
    Seq(once, maxConns, onSlow, linger) ++ (if tcp then Seq(keepalive, nodelay) else Nil)

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
        onSlow = o.value[OnSlow]("on-slow").getOrElse(d.onSlow)
      )
      val names = segments.map(seg => seg.takeWhile(_ != '='))
      (s, names)
    }

  /** `HOST:PORT` (connecting) or `[HOST:]PORT` (listening) of a TCP kind, then its options. */
  def parseTcp(kind: AddressKind, listen: Boolean, rest: String, p: AddressParser): Either[CliError, Address] =
    val segments = rest.split(",", -1).toSeq
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
    yield StreamSocketAddress(kind, SocketFamily.Tcp, listen, w, s, names)

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
