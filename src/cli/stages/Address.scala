package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*

import java.nio.file.{Files, Path}

/** An address of the pipeline stages (design section 4, "Addresses"): where a stage reads
  * (a source) or writes (a sink). Each kind of address ([[AddressKind]]: `-`, `file:`, `udp:`,
  * `tick:`, `null:`) is one file that declares its scheme, grammar, options, roles and endpoints;
  * [[AddressKinds]] lists them, and parsing, help, role inference and the endpoints ask it. What
  * is common to all kinds is here: the option syntax, the role checks and the rule that gives a
  * single address its role.
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
trait Address:
  def kind: AddressKind

  /** The canonical text; `Address.parse(a.render) == Right(a)`. */
  def render: String
  override def toString: String = render

  /** The names of the options given (those [[AddressKind.options]] restricts to one role are checked
    * by [[checkRole]]).
    */
  def optionsGiven: Seq[String] = Nil

  /** Why this address cannot play `role` for a reason of its kind (not of its options), if it cannot. */
  protected def roleRule(role: Role): Option[String] = None

  /** Right when this address can play `role`; else a usage error saying why (the token is [[render]]). */
  final def checkRole(role: Role): Either[CliError, Unit] =
    roleRule(role).orElse(optionRule(role)) match
      case Some(rule) => Left(CliError.BadToken(None, render, rule, kind.expected))
      case None       => Right(())

  private def optionRule(role: Role): Option[String] =
    kind.options.find(o => o.role.exists(_ != role) && optionsGiven.contains(o.name)).map { o =>
      s"${kind.scheme} option '${o.name}' is for ${o.purpose} (a ${o.role.get.noun}), but $render is the ${role.noun} here"
    }

  /** The roles this address can play, by [[checkRole]]. */
  final def roles: Set[Role] = Role.values.filter(checkRole(_).isRight).toSet

  /** Standard input as a source, standard output as a sink. */
  def isStandard: Boolean = false

  /** What its path names now, for an address of a path ([[Present.Other]] for the rest). */
  def present: Present = Present.Other

  /** Whether a single address (`asyncpipe ADDRESS`) may be written when stdin carries data, given
    * what its path names (`present`).
    */
  def sinkInference(present: Present): SinkInference = SinkInference.FromStreams

  /** The local file it reads (as a source) or writes (as a sink), for the same-file check: the path
    * to look at and how to name it in a message.
    */
  def localFile(role: Role): Option[(Path, String)] = None

  /** The endpoint that reads it. Only for an address that can be a source ([[checkRole]]). */
  def input(options: StageOptions): Input
  /** The endpoint that writes it. Only for an address that can be a sink ([[checkRole]]). */
  def output(options: StageOptions, stdout: OwnedOutput): Output

  /** For [[input]] or [[output]] of a role the address cannot play: a bug of the caller. */
  protected final def cannot(role: Role): Nothing =
    throw IllegalStateException(s"$render cannot be a ${role.noun} (checkRole was not asked)")

/** Source: the stage reads from the address. Sink: the stage writes to it. */
enum Role:
  case Source, Sink

  def noun: String = if this == Source then "source" else "sink"

/** What the path of an address names when the single-address rule looks at it. */
enum Present:
  /** Nothing yet: writing it creates a file. */
  case Absent
  /** A regular file of no bytes: writing it destroys nothing. */
  case EmptyFile
  /** A regular file that holds data: a single address never overwrites it. */
  case DataFile
  /** Not an address of a path, or a path that names something else (a FIFO, a device, a directory). */
  case Other

object Present:
  /** What `path` names now. */
  def of(path: String): Present =
    try
      val p = Path.of(path)
      if !Files.exists(p) then Absent
      else if !Files.isRegularFile(p) then Other
      else if Files.size(p) == 0 then EmptyFile
      else DataFile
    catch case _: Exception => Other

/** Whether a single address may be written when stdin carries data ([[Address.inferRole]]). */
enum SinkInference:
  /** Writing it destroys nothing (a new or empty file, an append): it is the sink. */
  case Safe
  /** Writing it would destroy data (`what` says which): refused, naming the explicit forms. */
  case Overwrites(what: String)
  /** Nothing to tell from the address: the streams decide. */
  case FromStreams

/** One kind of address: everything about it is declared in one place, its file. */
trait AddressKind:
  /** The text before ':' (`file`); `-` for the kind that is the token `-` itself. */
  def scheme: String
  /** The forms for help, each with one line saying what it is. */
  def forms: Seq[(String, String)]
  /** Its options (after ',' in the token). */
  def options: Seq[AddressOption] = Nil
  /** The stage options ([[StageOptions.forEndpoints]]) this kind's endpoints take in `role`, by name. */
  def takes(role: Role): Set[String] = Set.empty
  /** The address of the text after "SCHEME:" (`rest`), read with the help of `p`. */
  def parse(rest: String, p: AddressParser): Either[CliError, Address]
  /** The forms joined, for usage errors. */
  final def expected: String = forms.map(_._1).mkString(" | ")

/** An option of an address kind: `name` or `name=VALUE` (a flag when `reader` is None). An option
  * for one role only (`append`: a sink) names that `role` and its `purpose` ("writing"), for the
  * message when it is given to the other role.
  */
final case class AddressOption(name: String, reader: Option[Reader[?]], role: Option[Role], purpose: String, help: String):
  def form: String = reader.fold(name)(r => s"$name=${r.form}")

object AddressOption:
  def flag(name: String, help: String, role: Option[Role] = None, purpose: String = ""): AddressOption =
    AddressOption(name, None, role, purpose, help)
  def valued(name: String, reader: Reader[?], help: String, role: Option[Role] = None, purpose: String = ""): AddressOption =
    AddressOption(name, Some(reader), role, purpose, help)

/** The parse of one address token of `kind`: the checks every kind shares, each failure a
  * [[CliError.BadToken]] for `token` with the kind's forms.
  */
final class AddressParser(val token: String, val kind: AddressKind):
  type Result[A] = Either[CliError, A]
  private val scheme = kind.scheme

  def bad(rule: String): Result[Nothing] = Left(CliError.BadToken(None, token, rule, kind.expected))

  /** The options in `segments` (the parts after the first ','), read by the kind's declarations:
    * empty, nameless, unknown and repeated ones refused, flags without values, values read.
    */
  def options(segments: Seq[String]): Result[AddressOptions] =
    val known = kind.options
    val knownList = known.map(_.name).mkString(", ")
    var got = Map.empty[String, Any]
    val it = segments.iterator
    while it.hasNext do
      val segment = it.next()
      val (name, value) = segment.indexOf('=') match
        case -1 => (segment, None)
        case i  => (segment.take(i), Some(segment.drop(i + 1)))
      val read: Result[Any] = known.find(_.name == name) match
        case _ if segment.isEmpty => bad(s"an empty $scheme option (a ',' with nothing after it)")
        case _ if name.isEmpty    => bad(s"a $scheme option without a name ('=${value.getOrElse("")}'; known: $knownList)")
        case None =>
          val hint = CliError.suggest(name, known.map(_.name)).fold("")(s => s"; did you mean '$s'?")
          bad(s"unknown $scheme option '$name' (known: $knownList)$hint")
        case Some(_) if got.contains(name) => bad(s"$scheme option '$name' is given more than once")
        case Some(o) =>
          (o.reader, value) match
            case (None, None)    => Right(())
            case (None, Some(v)) => bad(s"$scheme option '$name' takes no value (got '$name=$v')")
            case (Some(r), None) => bad(s"$scheme option '$name' needs a value: ${o.form}")
            case (Some(r), Some(v)) => r.read(v).left.flatMap(rule => bad(s"$scheme option '$name': $rule"))
      read match
        case Left(e)  => return Left(e)
        case Right(v) => got = got.updated(name, v)
    Right(AddressOptions(got))

  /** A value read by `reader`, or the usage error naming `what` it is. */
  def value[A](text: String, reader: Reader[A], what: String): Result[A] =
    reader.read(text).left.flatMap(rule => bad(s"$what: $rule"))

/** The options of one address, read. */
final class AddressOptions(values: Map[String, Any]):
  def flag(name: String): Boolean = values.contains(name)
  def value[A](name: String): Option[A] = values.get(name).map(_.asInstanceOf[A])

object Address:
  /** The forms of every kind, for help. */
  def forms: Seq[(String, String)] = AddressKinds.all.flatMap(_.forms)

  /** Each option of each kind that has options not spelt out in its forms (the stream sockets'
    * `OPT...`), as `scheme: form` and its help; an option several kinds share is listed once,
    * under all of them.
    */
  def optionLines: Seq[(String, String)] =
    val kinds = AddressKinds.all.filter(k => k.forms.exists(_._1.contains("OPT...")))
    val options = kinds.flatMap(_.options).distinct
    options.map { o =>
      val schemes = kinds.filter(_.options.contains(o)).map(_.scheme)
      (o.form, s"${o.help}; ${schemes.mkString(", ")}")
    }

  /** The schemes of the kinds written SCHEME:... (all but `-`). */
  def schemes: Set[String] = AddressKinds.all.map(_.scheme).filter(_ != "-").toSet

  /** Whether `token` has the shape of an address (`-`, or SCHEME:...), known kind or not: such a
    * token is read as an address, and an unknown scheme is reported as one.
    */
  def looksLike(token: String): Boolean =
    token == "-" || {
      val colon = token.indexOf(':')
      colon > 0 && token.charAt(0).isLetter && token.substring(0, colon).forall(c => c.isLetterOrDigit || c == '+' || c == '.' || c == '-')
    }

  private def allForms: String = forms.map(_._1).mkString(", ")

  /** The address in `token`, or a usage error naming the token, what is wrong and the expected form. */
  def parse(token: String): Either[CliError, Address] =
    def bad(rule: String, expected: String = allForms) = Left(CliError.BadToken(None, token, rule, expected))
    AddressKinds.named(token) match
      case Some(whole) => whole.parse("", AddressParser(token, whole))
      case None =>
        token.indexOf(':') match
          case _ if token.isEmpty => bad("an empty address")
          case -1 if token.startsWith("-") =>
            bad(s"'$token' is not an address ('-' alone is standard input or output)", AddressKinds.named("-").fold(allForms)(_.expected))
          case -1 => bad(s"'$token' is not an address: an address is '-' or SCHEME:...; for a file named so, write file:$token")
          case i =>
            val scheme = token.take(i)
            AddressKinds.named(scheme) match
              case Some(kind) => kind.parse(token.drop(i + 1), AddressParser(token, kind))
              case None =>
                val hint = CliError.suggest(scheme.toLowerCase, schemes).fold("")(s => s"; did you mean '$s'?")
                val known = schemes.toSeq.sorted.mkString(", ")
                bad(s"unknown address scheme '$scheme:' (known: $known)$hint")

  /** A duration as an address renders it. */
  def renderDuration(d: scala.concurrent.duration.FiniteDuration): String = Durations.render(d)

  /** The path escaped for `file:`: '\' as "\\" and ',' as "\,". */
  private[cli] def escapePath(path: String): String = path.replace("\\", "\\\\").replace(",", "\\,")

  /** Splits at unescaped ','; "\," is ',' and "\\" is '\' (in every segment); any other '\' is itself. */
  def splitEscaped(text: String): Seq[String] =
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
    * [[Address]]; `present` is what the address's path names now ([[Address.present]]).
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
      case _ if address.isStandard         => Right(Role.Source)
      case _ if roles == Set(Role.Source)  => Right(Role.Source)
      case _ if roles.isEmpty              => address.checkRole(Role.Source).map(_ => Role.Source)
      case _ if stdin.carriesData && address.sinkInference(present) != SinkInference.FromStreams =>
        address.sinkInference(present) match
          case SinkInference.Overwrites(what) =>
            val overwritten = s"$what, and a single address never overwrites a file"
            val mustBeNamed = s"(only 'asyncpipe - $shown' writes it; $streams)"
            refuse(s"$overwritten $mustBeNamed", if roles.contains(Role.Source) then Seq(writeIt, readIt) else Seq(writeIt))
          case _ => Right(Role.Sink)
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
