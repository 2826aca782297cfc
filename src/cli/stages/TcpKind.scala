package asyncpipe.cli.stages

import asyncpipe.cli.command.*

/** `tcp:HOST:PORT`: a TCP connection ([[StreamSocket]] has the grammar and the roles). */
object TcpKind extends AddressKind:
  val scheme = "tcp"
  val forms: Seq[(String, String)] = Seq(
    "tcp:HOST:PORT[,OPT...]" -> "connect: read its frames (a source), write frames (a sink); alone, a conversation as nc; [IPv6]"
  )
  override val options: Seq[AddressOption] = StreamSocket.connecting(SocketFamily.Tcp)
  def parse(rest: String, p: AddressParser): Either[CliError, Address] = StreamSocket.parseTcp(this, SocketFamily.Tcp, listen = false, rest, p)
