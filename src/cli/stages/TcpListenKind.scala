package asyncpipe.cli.stages

import asyncpipe.cli.command.*

/** `tcp-listen:[HOST:]PORT`: TCP connections accepted ([[StreamSocket]] has the grammar and the roles). */
object TcpListenKind extends AddressKind:
  val scheme = "tcp-listen"
  val forms: Seq[(String, String)] = Seq(
    "tcp-listen:[HOST:]PORT[,OPT...]" -> "accept: frames of every client (a source), every frame to every client (a sink); 0: a free port"
  )
  override val options: Seq[AddressOption] = StreamSocket.listening(SocketFamily.Tcp)
  def parse(rest: String, p: AddressParser): Either[CliError, Address] = StreamSocket.parseTcp(this, SocketFamily.Tcp, listen = true, rest, p)
