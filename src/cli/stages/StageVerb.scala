package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*

/** `asyncpipe [OPTIONS] FROM [TO]`: copies frames from one address to another. It has no name: it
  * takes a command line whose first operand is an address (`-` or SCHEME:...), options first or not.
  */
object StageVerb extends Verb:
  val name = "FROM"
  val synopsis = "asyncpipe [OPTIONS] FROM [TO]"
  val summary = "copy frames between two addresses (one: its role from the streams)"
  override def listed: Boolean = false
  override def opts: Seq[Opt[?]] = StageOptions.all(mux = false)

  override def claims(args: Seq[String]): Boolean = args match
    case Seq(head, rest*) if Options.isOption(head) => rest.exists(Address.looksLike)
    case Seq(head, _*)                              => Address.looksLike(head)
    case _                                          => false

  override def help: String =
    s"""${Options.usage(synopsis)}
       |
       |${Options.paragraph("Copies whole frames from FROM to TO. With one address, its role comes from the streams: a source is copied to stdout, a sink is written from stdin (a file that holds data is never overwritten this way: name both, '-' and the file). Options may come before or after the addresses.")}
       |
       |Addresses:
       |${Options.table(Address.forms, maxColumn = 24)}
       |
       |Address options (after a ',' in the address; OPT... above):
       |${Options.table(Address.optionLines, maxColumn = 24)}
       |
       |Options:
       |${StageOptions.helpLines(mux = false)}
       |
       |Examples:
       |  asyncpipe file:access.log,follow - | grep ' 500 '
       |  asyncpipe --frame len --stats udp:9000 file:captured.len
       |  seq 1000 | asyncpipe file:numbers.txt
       |""".stripMargin


  /** `asyncpipe [OPTIONS] ADDR [ADDR]`: one address takes its role from the streams (see
    * [[Address.inferRole]]); two are FROM and TO.
    */
  def run(args: Seq[String], io: Io): Either[CliError, Int] =
    for
      line <- StageOptions.parse(args, None, synopsis, mux = false)
      addrs <- line.operands.toList.traverse(Address.parse)
      status <- addrs match
        case List(only: StreamSocketAddress) if only.converses => Stages.converse(only, line.options, io)
        case _ => copy(addrs, line, io)
    yield status

  private def copy(addrs: List[Address], line: StageLine, io: Io): Either[CliError, Int] =
    for
      pair <- addrs match
        case List(only) =>
          Address.inferRole(only, StreamKind.of(0), StreamKind.of(1), only.present).map {
            case Role.Source => (only, StdAddress)
            case Role.Sink   => (StdAddress, only)
          }
        case List(from, to) => from.checkRole(Role.Source).flatMap(_ => to.checkRole(Role.Sink)).map(_ => (from, to))
        case Nil => Left(CliError.Missing(None, "an address", synopsis))
        case _ => Left(CliError.BadToken(None, line.operands(2), "at most two addresses (FROM and TO); use 'asyncpipe mux --out ADDR' for more outputs", synopsis))
      status <- Stages.run(Seq(Stages.StagePlan(Seq(pair._1), Seq(pair._2), line.options)), io)
    yield status

  extension [A](list: List[String])
    private def traverse(f: String => Either[CliError, A]): Either[CliError, List[A]] =
      list.foldRight[Either[CliError, List[A]]](Right(Nil))((s, acc) => for a <- f(s); rest <- acc yield a :: rest)
