package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*

/** `udp:PORT` and `udp:HOST:PORT` ([[UdpInput]], [[UdpOutput]]): datagrams, one frame each.
  * {{{
  * "udp:" port { "," udp-opt }             receive on all interfaces (a source only)
  * "udp:" host ":" port { "," udp-opt }    receive bound to HOST as a source; send to HOST:PORT as a sink
  * udp-opt = "rcvbuf=" size                the socket's receive buffer (a source only)
  * size    = bytes with an optional K, M or G suffix, binary (4M = 4 MiB); 1 to 2147483647
  * }}}
  * Host and port as [[Hosts]] reads them; port 0 (any free port) is for receiving only.
  */
object UdpKind extends AddressKind:
  val scheme = "udp"
  val forms: Seq[(String, String)] = Seq(
    "udp:PORT[,rcvbuf=SIZE]" -> "receive datagrams on PORT (0: a free port, told on stderr), all interfaces (a source)",
    "udp:HOST:PORT[,rcvbuf=SIZE]" -> "receive bound to HOST as a source; send to HOST:PORT as a sink; [IPv6]"
  )
  override val options: Seq[AddressOption] = Seq(
    AddressOption.valued("rcvbuf", Reader.size(1, Int.MaxValue), "the socket's receive buffer (default: the system's)",
      Some(Role.Source), "receiving")
  )

  override def takes(role: Role): Set[String] =
    if role == Role.Source then Set("--count", "--idle-timeout", "--on-full", "--check-seq", "--size") else Set("--oversize")

  def parse(rest: String, p: AddressParser): Either[CliError, Address] =
    val segments = rest.split(",", -1).toSeq
    val main = segments.head
    val where: Either[CliError, (Option[Host], Int)] =
      if main.isEmpty then p.bad("the port is missing: udp:PORT receives on all interfaces, udp:HOST:PORT names a host")
      else if !main.contains(':') && !main.startsWith("[") then
        if !main.forall(_.isDigit) && Hosts.host(main, p).isRight then
          p.bad(s"'$main' is not a port (a number in 1-65535); to name a host, add its port: udp:$main:PORT")
        else Hosts.port(main, p).map(n => (None, n))
      else Hosts.hostAndPort(main, p).map((h, n) => (Some(h), n))
    for
      (host, port) <- where
      opts <- p.options(segments.tail)
      rcvbuf = opts.value[Long]("rcvbuf").map(_.toInt)
    yield host.fold(UdpAddress.AllHosts(port, rcvbuf))(UdpAddress.At(_, port, rcvbuf))

/** A UDP address: on all interfaces (`udp:PORT`), or at a host (`udp:HOST:PORT`). */
enum UdpAddress extends Address:
  /** `udp:PORT`: receive on all interfaces; a source only. */
  case AllHosts(port: Int, rcvbuf: Option[Int] = None)
  /** `udp:HOST:PORT`: receive bound to HOST as a source, send to HOST:PORT as a sink. */
  case At(host: Host, port: Int, rcvbuf: Option[Int] = None)

  def kind: AddressKind = UdpKind
  def port: Int
  def rcvbuf: Option[Int]
  /** The host to bind or send to; None for all interfaces. */
  def hostLiteral: Option[String] = this match
    case AllHosts(_, _) => None
    case At(h, _, _)    => Some(h.literal)

  def render: String =
    val where = this match
      case AllHosts(port, _) => port.toString
      case At(host, port, _) => s"${host.render}:$port"
    s"udp:$where${rcvbuf.fold("")(b => s",rcvbuf=${Reader.renderSize(b)}")}"

  override def optionsGiven: Seq[String] = if rcvbuf.isDefined then Seq("rcvbuf") else Nil

  override protected def roleRule(role: Role): Option[String] = (this, role) match
    case (_: AllHosts, Role.Sink) => Some(s"$render only receives (it is a source); to send, give the host: udp:HOST:PORT")
    case (a: At, Role.Sink) if a.port == 0 =>
      Some(s"port 0 (any free port) is for receiving only; sending to ${a.host.render} needs a port in 1-65535")
    case _ => None

  def input(options: StageOptions): Input = UdpInput(this, options)
  def output(options: StageOptions, stdout: OwnedOutput): Output = this match
    case a: At => UdpOutput(a, options)
    case _     => cannot(Role.Sink)
