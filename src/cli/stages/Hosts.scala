package asyncpipe.cli.stages

import asyncpipe.cli.command.*

import java.net.Inet6Address
import scala.util.Try

/** A host of a network address (`udp:HOST:PORT`). */
enum Host:
  case Name(name: String)
  case IPv4(address: String)
  /** Without the brackets; `zone` is the text after '%', if any (resolved when the socket opens). */
  case IPv6(address: String, zone: Option[String] = None)

  /** The text for an address (an IPv6 address in brackets) and for `InetAddress.getByName` (`literal`). */
  def render: String = this match
    case IPv6(_, _) => s"[$literal]"
    case _          => literal

  def literal: String = this match
    case Name(n)       => n
    case IPv4(a)       => a
    case IPv6(a, zone) => a + zone.fold("")("%" + _)

/** Hosts and ports in address tokens, for every network kind:
  * {{{
  * host = name | ipv4 | "[" ipv6 [ "%" zone ] "]"
  *        name: letters, digits, '-', '_' and '.', labels of 1-63 characters, 253 at most
  *        ipv4: four numbers 0-255 joined by '.'; an IPv6 address always goes in brackets
  * port = 0-65535 in decimal (0: any free port, for receiving or listening only)
  * }}}
  */
object Hosts:
  def port(text: String, p: AddressParser): Either[CliError, Int] =
    if text.isEmpty then p.bad("the port is missing after ':' (a number in 1-65535)")
    else if !Reader.isDigits(text) then p.bad(s"port '$text' is not a number in 1-65535")
    else if BigInt(text) > 65535 then p.bad(s"port $text is out of range 1-65535 (or 0, any free port, when receiving or listening)")
    else Right(text.toInt)

  private val label = "[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?".r

  /** A name or an IPv4 address (an IPv6 one is read by [[ipv6]], from inside its brackets). */
  def host(text: String, p: AddressParser): Either[CliError, Host] =
    val scheme = p.kind.scheme
    if text.isEmpty then p.bad(s"the host is empty ($scheme:HOST:PORT; for all interfaces, $scheme:PORT)")
    else if text.forall(c => c.isDigit || c == '.') then
      val parts = text.split("\\.", -1).toSeq
      if parts.size == 4 && parts.forall(p => p.nonEmpty && p.length <= 3 && p.toInt <= 255) then Right(Host.IPv4(text))
      else p.bad(s"'$text' is not an IPv4 address (four numbers 0-255 joined by '.')")
    else if text.length <= 253 && text.split("\\.", -1).forall(l => l.length <= 63 && label.matches(l)) then
      Right(Host.Name(text))
    else p.bad(s"'$text' is not a host name (letters, digits, '-', '_' and '.') nor an IPv4 address")

  def ipv6(text: String, p: AddressParser): Either[CliError, Host] =
    val (address, zone) = text.indexOf('%') match
      case -1 => (text, None)
      case i  => (text.take(i), Some(text.drop(i + 1)))
    val plausible = address.contains(':') && address.forall(c => Character.digit(c, 16) >= 0 || c == ':' || c == '.')
    // Only characters of a literal reach ofLiteral, which parses and never looks anything up.
    if !plausible || Try(Inet6Address.ofLiteral(address)).isFailure then
      p.bad(s"'$address' in brackets is not an IPv6 address")
    else
      zone match
        case Some(z) if !z.matches("[A-Za-z0-9_.-]+") => p.bad(s"'$z' is not an IPv6 zone (an interface name or number after '%')")
        case _                                        => Right(Host.IPv6(address, zone))

  /** `HOST:PORT` or `[IPv6]:PORT` (`main`, the token's text before its options), with a hint for
    * a bare port when `barePort` is how the kind spells "all interfaces".
    */
  def hostAndPort(main: String, p: AddressParser): Either[CliError, (Host, Int)] =
    val scheme = p.kind.scheme
    if main.startsWith("[") then
      main.indexOf(']') match
        case -1 => p.bad(s"'[' without its ']': an IPv6 address goes in brackets, e.g. $scheme:[::1]:9000")
        case close =>
          val after = main.drop(close + 1)
          if !after.startsWith(":") then p.bad(s"after ${main.take(close + 1)} comes ':PORT', e.g. $scheme:[::1]:9000")
          else
            for
              h <- ipv6(main.substring(1, close), p)
              n <- port(after.drop(1), p)
            yield (h, n)
    else
      main.count(_ == ':') match
        case 1 =>
          val i = main.indexOf(':')
          for
            h <- host(main.take(i), p)
            n <- port(main.drop(i + 1), p)
          yield (h, n)
        case _ => p.bad(s"'$main' has too many ':'; an IPv6 address goes in brackets, e.g. $scheme:[::1]:9000")
