package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*

import java.net.Inet6Address
import java.nio.file.{Files, Path}
import scala.concurrent.duration.FiniteDuration
import scala.util.Try

/** The addresses of the pipeline stages (design section 4, "Addresses"): parsing, rendering, the
  * roles each form can take, and the rule that gives a single address its role.
  *
  * ==Grammar==
  * {{{
  * address  = "-"
  *          | "file:" path { "," file-opt }          file-opt = "append" | "follow" | "fsync"
  *          | "udp:" port { "," udp-opt }            udp-opt  = "rcvbuf=" size
  *          | "udp:" host ":" port { "," udp-opt }
  *          | "tick:" duration { "," tick-opt }      tick-opt = "count=" N      (N >= 1)
  * path     = one or more characters; ':' is an ordinary character; "\," is a ',' and "\\" a '\'
  *            (an unescaped ',' starts the options; any other '\' is itself)
  * host     = name | ipv4 | "[" ipv6 [ "%" zone ] "]"
  *            name: letters, digits, '-', '_' and '.', labels of 1-63 characters, 253 at most
  *            ipv4: four numbers 0-255 joined by '.'; an IPv6 address always goes in brackets
  * port     = 0-65535 in decimal. 0 means "any free port" and is for receiving only: udp:0 and
  *            udp:HOST:0 are sources; as a sink (sending) a port must be 1-65535 ([[checkRole]]).
  * size     = decimal bytes with an optional K, M or G suffix, binary (4M = 4 MiB = 4194304);
  *            1 byte to 2147483647 bytes (the int of SO_RCVBUF)
  * duration = decimal number (decimals allowed, "1.5s") followed by a unit: ns, us, ms, s, m, h;
  *            more than zero, a whole number of nanoseconds, at most Long.MaxValue ns ([[Durations]])
  * }}}
  * Schemes are lower case. An option is given at most once. Options that belong to one role are
  * recorded by [[parse]] and checked by [[checkRole]]: `append` and `fsync` are for a sink only,
  * `follow` and `rcvbuf` for a source only (so `follow` with `append` or `fsync` is refused at
  * once). `udp:PORT` and `tick:` are sources only.
  *
  * ==The role of a single address== (`asyncpipe ADDRESS`; see [[inferRole]])
  * Source = copy from ADDRESS to stdout; Sink = copy from stdin to ADDRESS. The rule never turns
  * a probable read into a write, and never truncates or overwrites a file that holds data: only
  * `asyncpipe - file:PATH` names one as an output.
  *  1. `-` is a Source (stdin to stdout). An address that can only be a source (`tick:`,
  *     `udp:PORT`, `udp:HOST:0`, `udp:...,rcvbuf=`, `file:...,follow`) is a Source whatever the
  *     streams are (reading destroys nothing).
  *  1. A file, when stdin carries data (a pipe, a file, a socket), by what its path names
  *     ([[Present]]): no file yet, or an empty one, is a Sink (the new file is written), whatever
  *     stdout is, so `producer | asyncpipe file:new` works in a script; with `append`, a Sink too
  *     (appending destroys nothing); a regular file that holds data is refused (it would be
  *     overwritten; and `while read f; do asyncpipe file:$f; done` means to read it), naming the
  *     explicit forms. A FIFO or a device follows the table below.
  *  1. Otherwise the streams decide; "data" means Pipe, RegularFile or Socket:
  *     {{{
  *     stdin \ stdout   Terminal  Pipe    RegularFile  NullDevice  Socket  Unknown
  *     Terminal         Source    Source  Source       Source      Source  refuse
  *     NullDevice       Source    Source  Source       Source      Source  refuse
  *     Pipe             Sink      refuse  refuse       refuse      refuse  refuse
  *     RegularFile      Sink      refuse  refuse       refuse      refuse  refuse
  *     Socket           Sink      refuse  refuse       refuse      refuse  refuse
  *     Unknown          refuse    refuse  refuse       refuse      refuse  refuse
  *     }}}
  *     Both terminals: Source (reading never destroys anything). Data in and data out (or
  *     /dev/null out): nobody can tell which end is meant, so refuse.
  *  1. An address that can only be a sink (`file:...,fsync` without `append`, on a FIFO or a
  *     device) is a Sink where the table says Sink, and refused everywhere else.
  * A refusal is a usage error naming what stdin and stdout are and the explicit form
  * `asyncpipe FROM TO`.
  */
enum Address:
  /** `-`: standard input as a source, standard output as a sink. */
  case Std
  /** `file:PATH[,append][,follow][,fsync]`. */
  case File(path: String, append: Boolean = false, follow: Boolean = false, fsync: Boolean = false)
  /** `udp:PORT[,rcvbuf=SIZE]`: receive on all interfaces; a source only. */
  case UdpAny(port: Int, rcvbuf: Option[Int] = None)
  /** `udp:HOST:PORT[,rcvbuf=SIZE]`: receive bound to HOST as a source, send to HOST:PORT as a sink. */
  case Udp(host: Host, port: Int, rcvbuf: Option[Int] = None)
  /** `tick:DURATION[,count=N]`: a timer source, one frame every `every`; `count` frames, or forever. */
  case Tick(every: FiniteDuration, count: Option[Long] = None)

  /** The canonical text; `Address.parse(a.render) == Right(a)`. */
  def render: String = this match
    case Std                            => "-"
    case File(path, append, follow, fsync) =>
      val flags = Seq("append" -> append, "follow" -> follow, "fsync" -> fsync).collect { case (n, true) => s",$n" }
      "file:" + Address.escapePath(path) + flags.mkString
    case UdpAny(port, rcvbuf)      => s"udp:$port${Address.renderRcvbuf(rcvbuf)}"
    case Udp(host, port, rcvbuf)   => s"udp:${host.render}:$port${Address.renderRcvbuf(rcvbuf)}"
    case Tick(every, count)        => s"tick:${Address.renderDuration(every)}${count.fold("")(n => s",count=$n")}"

  override def toString: String = render

  /** Right when this address can play `role`; else a usage error saying why (the token is [[render]]). */
  def checkRole(role: Role): Either[CliError, Unit] =
    def refuse(rule: String) = Left(CliError.BadToken(None, render, rule, Address.expectedFor(this)))
    (this, role) match
      case (Std, _) => Right(())
      case (f: File, Role.Source) if f.append || f.fsync =>
        val opt = if f.append then "append" else "fsync"
        refuse(s"file option '$opt' is for writing (a sink), but $render is the source here")
      case (f: File, Role.Sink) if f.follow =>
        refuse(s"file option 'follow' is for reading (a source), but $render is the sink here")
      case (_: File, _)            => Right(())
      case (_: UdpAny, Role.Sink)  =>
        refuse(s"$render only receives (it is a source); to send, give the host: udp:HOST:PORT")
      case (u: Udp, Role.Sink) if u.port == 0 =>
        refuse(s"port 0 (any free port) is for receiving only; sending to ${u.host.render} needs a port in 1-65535")
      case (u: Udp, Role.Sink) if u.rcvbuf.isDefined =>
        refuse(s"udp option 'rcvbuf' is for receiving (a source), but $render is the sink here")
      case (_: (UdpAny | Udp), _) => Right(())
      case (_: Tick, Role.Sink)   => refuse(s"$render is a timer: it can only be a source")
      case (_: Tick, Role.Source) => Right(())

  /** The roles this address can play, by [[checkRole]]. */
  def roles: Set[Role] = Role.values.filter(checkRole(_).isRight).toSet

/** The host of `udp:HOST:PORT`. */
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
    case Name(n)              => n
    case IPv4(a)              => a
    case IPv6(a, zone)        => a + zone.fold("")("%" + _)

/** Source: the stage reads from the address. Sink: the stage writes to it. */
enum Role:
  case Source, Sink

/** What the path of a file address names when the single-address rule looks at it. */
enum Present:
  /** Nothing yet: writing it creates a file. */
  case Absent
  /** A regular file of no bytes: writing it destroys nothing. */
  case EmptyFile
  /** A regular file that holds data: a single address never overwrites it. */
  case DataFile
  /** Not a file address, or a path that names something else (a FIFO, a device, a directory). */
  case Other

object Present:
  /** What `address` names now (Other for all but `file:`). */
  def of(address: Address): Present = address match
    case f: Address.File =>
      try
        val p = Path.of(f.path)
        if !Files.exists(p) then Absent
        else if !Files.isRegularFile(p) then Other
        else if Files.size(p) == 0 then EmptyFile
        else DataFile
      catch case _: Exception => Other
    case _ => Other

object Address:
  /** The address forms (design section 4); the address parser of the pipeline stages owns the rules. */
  val forms: Seq[(String, String)] = Seq(
    "-" -> "standard input as a source, standard output as a sink",
    "file:PATH[,append][,follow][,fsync]" -> "a file: read as a source, written (or appended) as a sink; '\\,' is a comma in PATH",
    "udp:PORT[,rcvbuf=SIZE]" -> "receive datagrams on PORT (0: a free port, told on stderr), all interfaces (a source)",
    "udp:HOST:PORT[,rcvbuf=SIZE]" -> "receive bound to HOST as a source; send to HOST:PORT as a sink; [IPv6]",
    "tick:DURATION[,count=N]" -> "a timer source: one frame every DURATION"
  )

  /** The schemes of the address forms above (`file`, `udp`, `tick`); lazy: --version needs none
    * of its closures.
    */
  lazy val schemes: Set[String] = forms.map(_._1).collect { case f if f.contains(':') => f.takeWhile(_ != ':') }.toSet

  /** The form of each scheme, from the `--help` text. */
  private def formsOf(scheme: String): String =
    forms.map(_._1).filter(f => if scheme == "-" then f == "-" else f.startsWith(scheme + ":")).mkString(" | ")

  private val allForms: String = forms.map(_._1).mkString(", ")

  private[cli] def expectedFor(a: Address): String = a match
    case Std                 => formsOf("-")
    case _: File             => formsOf("file")
    case _: (UdpAny | Udp)   => formsOf("udp")
    case _: Tick             => formsOf("tick")

  /** The address in `token`, or a usage error naming the token, what is wrong and the expected form. */
  def parse(token: String): Either[CliError, Address] =
    def bad(rule: String, expected: String = allForms) = Left(CliError.BadToken(None, token, rule, expected))
    token.indexOf(':') match
      case _ if token == "-" => Right(Std)
      case _ if token.isEmpty => bad("an empty address")
      case -1 if token.startsWith("-") =>
        bad(s"'$token' is not an address ('-' alone is standard input or output)", formsOf("-"))
      case -1 => bad(s"'$token' is not an address: an address is '-' or SCHEME:...; for a file named so, write file:$token")
      case i =>
        val scheme = token.take(i)
        val rest = token.drop(i + 1)
        val p = Parser(token, scheme, formsOf(scheme))
        scheme match
          case "file" => p.file(rest)
          case "udp"  => p.udp(rest)
          case "tick" => p.tick(rest)
          case _ =>
            val hint = CliError.suggest(scheme.toLowerCase, schemes).fold("")(s => s"; did you mean '$s'?")
            val known = schemes.toSeq.sorted.mkString(", ")
            bad(s"unknown address scheme '$scheme:' (known: $known)$hint")

  /** The parse of one token of a scheme; every failure is a [[CliError.BadToken]] for `token`. */
  private final class Parser(token: String, scheme: String, expected: String):
    private type Result[A] = Either[CliError, A]
    private def bad(rule: String): Result[Nothing] = Left(CliError.BadToken(None, token, rule, expected))

    /** Options as (name, Some(value) | None), refusing empty, unknown and repeated ones. */
    private def options(segments: Seq[String], known: Seq[String]): Result[Seq[(String, Option[String])]] =
      val parsed = segments.map { s =>
        s.indexOf('=') match
          case -1 => s -> None
          case i  => s.take(i) -> Some(s.drop(i + 1))
      }
      val knownList = known.mkString(", ")
      parsed.find(_._1.isEmpty) match
        case Some((_, None))    => bad(s"an empty $scheme option (a ',' with nothing after it)")
        case Some((_, Some(v))) => bad(s"a $scheme option without a name ('=$v'; known: $knownList)")
        case None =>
          parsed.map(_._1).find(!known.contains(_)) match
            case Some(name) =>
              val hint = CliError.suggest(name, known).fold("")(s => s"; did you mean '$s'?")
              bad(s"unknown $scheme option '$name' (known: $knownList)$hint")
            case None =>
              parsed.map(_._1).diff(parsed.map(_._1).distinct).headOption match
                case Some(twice) => bad(s"$scheme option '$twice' is given more than once")
                case None        => Right(parsed)

    private def flag(opts: Seq[(String, Option[String])], name: String): Result[Boolean] =
      opts.find(_._1 == name) match
        case Some((_, Some(v))) => bad(s"$scheme option '$name' takes no value (got '$name=$v')")
        case found              => Right(found.isDefined)

    private def valued[A](opts: Seq[(String, Option[String])], name: String, form: String)(read: String => Result[A]): Result[Option[A]] =
      opts.find(_._1 == name) match
        case None               => Right(None)
        case Some((_, None))    => bad(s"$scheme option '$name' needs a value: $name=$form")
        case Some((_, Some(v))) => read(v).map(Some(_))

    def file(rest: String): Result[Address] =
      val segments = splitEscaped(rest)
      val path = segments.head
      for
        _ <- if path.isEmpty then bad("the file path is empty") else Right(())
        opts <- options(segments.tail, Seq("append", "follow", "fsync"))
        append <- flag(opts, "append")
        follow <- flag(opts, "follow")
        fsync <- flag(opts, "fsync")
        _ <-
          if follow && (append || fsync) then
            bad(s"'follow' is for reading a file and '${if append then "append" else "fsync"}' for writing one: give one or the other")
          else Right(())
      yield File(path, append, follow, fsync)

    def udp(rest: String): Result[Address] =
      val segments = rest.split(",", -1).toSeq
      val main = segments.head
      def withOptions(make: Option[Int] => Address): Result[Address] =
        for
          opts <- options(segments.tail, Seq("rcvbuf"))
          rcvbuf <- valued(opts, "rcvbuf", "SIZE")(size)
        yield make(rcvbuf)
      if main.startsWith("[") then
        main.indexOf(']') match
          case -1 => bad(s"'[' without its ']': an IPv6 address goes in brackets, e.g. udp:[::1]:9000")
          case close =>
            val after = main.drop(close + 1)
            if !after.startsWith(":") then
              bad(s"after ${main.take(close + 1)} comes ':PORT', e.g. udp:[::1]:9000")
            else
              for
                h <- ipv6(main.substring(1, close))
                p <- port(after.drop(1))
                a <- withOptions(Udp(h, p, _))
              yield a
      else
        main.count(_ == ':') match
          case 0 if main.isEmpty => bad("the port is missing: udp:PORT receives on all interfaces, udp:HOST:PORT names a host")
          case 0 if !main.forall(_.isDigit) && host(main).isRight =>
            bad(s"'$main' is not a port (a number in 1-65535); to name a host, add its port: udp:$main:PORT")
          case 0 => port(main).flatMap(p => withOptions(UdpAny(p, _)))
          case 1 =>
            val i = main.indexOf(':')
            for
              h <- host(main.take(i))
              p <- port(main.drop(i + 1))
              a <- withOptions(Udp(h, p, _))
            yield a
          case _ => bad(s"'$main' has too many ':'; an IPv6 address goes in brackets, e.g. udp:[::1]:9000")

    def tick(rest: String): Result[Address] =
      val segments = rest.split(",", -1).toSeq
      for
        every <- duration(segments.head)
        opts <- options(segments.tail, Seq("count"))
        count <- valued(opts, "count", "N")(positiveCount)
      yield Tick(every, count)

    private def port(text: String): Result[Int] =
      if text.isEmpty then bad("the port is missing after ':' (a number in 1-65535)")
      else if !text.forall(c => c >= '0' && c <= '9') then bad(s"port '$text' is not a number in 1-65535")
      else
        val n = BigInt(text)
        if n > 65535 then bad(s"port $text is out of range 1-65535 (or 0, any free port, when receiving)")
        else Right(n.toInt)

    private val label = "[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?".r

    private def host(text: String): Result[Host] =
      if text.isEmpty then bad("the host is empty (udp:HOST:PORT; for all interfaces, udp:PORT)")
      else if text.forall(c => c.isDigit || c == '.') then
        val parts = text.split("\\.", -1).toSeq
        if parts.size == 4 && parts.forall(p => p.nonEmpty && p.length <= 3 && p.toInt <= 255) then Right(Host.IPv4(text))
        else bad(s"'$text' is not an IPv4 address (four numbers 0-255 joined by '.')")
      else if text.length <= 253 && text.split("\\.", -1).forall(l => l.length <= 63 && label.matches(l)) then
        Right(Host.Name(text))
      else bad(s"'$text' is not a host name (letters, digits, '-', '_' and '.') nor an IPv4 address")

    private def ipv6(text: String): Result[Host] =
      val (address, zone) = text.indexOf('%') match
        case -1 => (text, None)
        case i  => (text.take(i), Some(text.drop(i + 1)))
      val plausible = address.contains(':') && address.forall(c => Character.digit(c, 16) >= 0 || c == ':' || c == '.')
      // Only characters of a literal reach ofLiteral, which parses and never looks anything up.
      if !plausible || Try(Inet6Address.ofLiteral(address)).isFailure then
        bad(s"'$address' in brackets is not an IPv6 address")
      else
        zone match
          case Some(z) if !z.matches("[A-Za-z0-9_.-]+") => bad(s"'$z' is not an IPv6 zone (an interface name or number after '%')")
          case _                                        => Right(Host.IPv6(address, zone))

    private val sizeText = "([0-9]+)([KMGkmg]?)".r

    private def size(text: String): Result[Int] = text match
      case sizeText(digits, suffix) =>
        val shift = suffix.toUpperCase match
          case "K" => 10
          case "M" => 20
          case "G" => 30
          case _   => 0
        val bytes = BigInt(digits) << shift
        if bytes < 1 then bad("rcvbuf must be at least 1 byte")
        else if bytes > Int.MaxValue then bad(s"rcvbuf $text is more than ${Int.MaxValue} bytes, the most a socket buffer can be")
        else Right(bytes.toInt)
      case _ => bad(s"rcvbuf '$text' is not a size: a number of bytes with an optional K, M or G suffix (binary: 4M = 4 MiB)")

    private def positiveCount(text: String): Result[Long] =
      if text.nonEmpty && text.forall(c => c >= '0' && c <= '9') then
        val n = BigInt(text)
        if n < 1 then bad(s"count must be a positive whole number (got '$text')")
        else if n > Long.MaxValue then bad(s"count $text is too large (at most ${Long.MaxValue})")
        else Right(n.toLong)
      else bad(s"count must be a positive whole number (got '$text')")

    private def duration(text: String): Result[FiniteDuration] =
      Durations.parse(text).left.map(rule => CliError.BadToken(None, token, rule, expected))

  private[cli] def renderDuration(d: FiniteDuration): String = Durations.render(d)

  private def renderRcvbuf(rcvbuf: Option[Int]): String =
    rcvbuf.fold("") { bytes =>
      val (n, suffix) = Seq(30 -> "G", 20 -> "M", 10 -> "K").find((shift, _) => bytes % (1 << shift) == 0) match
        case Some((shift, s)) => (bytes >> shift, s)
        case None             => (bytes, "")
      s",rcvbuf=$n$suffix"
    }

  /** The path escaped for `file:`: '\' as "\\" and ',' as "\,". */
  private[cli] def escapePath(path: String): String = path.replace("\\", "\\\\").replace(",", "\\,")

  /** Splits at unescaped ','; "\," is ',' and "\\" is '\' (in every segment); any other '\' is itself. */
  private def splitEscaped(text: String): Seq[String] =
    val segments = Seq.newBuilder[String]
    val current = StringBuilder()
    var i = 0
    while i < text.length do
      text(i) match
        case '\\' if i + 1 < text.length && (text(i + 1) == ',' || text(i + 1) == '\\') =>
          current += text(i + 1)
          i += 2
        case ',' =>
          segments += current.result()
          current.clear()
          i += 1
        case c =>
          current += c
          i += 1
    segments += current.result()
    segments.result()

  /** The role of `address` when it is the only address of the command (`asyncpipe ADDRESS`): Source
    * copies from it to stdout, Sink copies stdin to it. The rules are in the comment of
    * [[Address]]; `present` is what a file address's path names now ([[Present.of]]).
    */
  def inferRole(address: Address, stdin: StreamKind, stdout: StreamKind, present: Present = Present.Other): Either[CliError, Role] =
    val shown = address.render
    val streams = s"stdin is ${stdin.describe}, stdout is ${stdout.describe}"
    def refuse(rule: String, examples: Seq[String]) =
      Left(CliError.BadToken(None, shown, rule, s"asyncpipe FROM TO, e.g. ${examples.mkString(" or ")}"))
    val readIt = s"'asyncpipe $shown -' (read it)"
    val writeIt = s"'asyncpipe - $shown' (write it)"
    val fromStreams: Option[Role] =
      if stdin == StreamKind.Unknown || stdout == StreamKind.Unknown then None
      else if stdin.carriesData then Option.when(stdout == StreamKind.Terminal)(Role.Sink)
      else Some(Role.Source) // stdin a terminal or /dev/null: nothing to write, so read
    val roles = address.roles
    address match
      case Address.Std                     => Right(Role.Source)
      case _ if roles == Set(Role.Source)  => Right(Role.Source)
      case _ if roles.isEmpty              => address.checkRole(Role.Source).map(_ => Role.Source)
      case f: File if stdin.carriesData && !f.append && present == Present.DataFile =>
        val overwritten = s"${f.path} exists and holds data, and a single address never overwrites a file"
        val mustBeNamed = s"(only 'asyncpipe - $shown' writes it; $streams)"
        refuse(s"$overwritten $mustBeNamed", if roles.contains(Role.Source) then Seq(writeIt, readIt) else Seq(writeIt))
      case f: File if stdin.carriesData && (f.append || present == Present.Absent || present == Present.EmptyFile) =>
        Right(Role.Sink)
      case _ if roles == Set(Role.Sink) =>
        if fromStreams.contains(Role.Sink) then Right(Role.Sink)
        else
          refuse(
            s"$shown can only be written, and a single address is written only when stdin carries data ($streams)",
            Seq(writeIt)
          )
      case _ =>
        fromStreams match
          case Some(role) => Right(role)
          case None =>
            refuse(s"cannot tell whether $shown is the source or the sink here ($streams)", Seq(writeIt, readIt))
