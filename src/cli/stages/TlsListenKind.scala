package asyncpipe.cli.stages

import asyncpipe.cli.command.*

/** `tls-listen:[HOST:]PORT`: TCP connections accepted, with TLS as their server ([[StreamSocket]]
  * has the grammar and the roles, [[Tls]] the handshake).
  */
object TlsListenKind extends AddressKind:
  val scheme = "tls-listen"
  val forms: Seq[(String, String)] = Seq(
    "tls-listen:[HOST:]PORT,cert=FILE,key=FILE[,OPT...]" -> "as tcp-listen:, with TLS 1.3/1.2; verify,ca=FILE: client certificates required"
  )
  override val options: Seq[AddressOption] = StreamSocket.listening(SocketFamily.Tls)
  def parse(rest: String, p: AddressParser): Either[CliError, Address] = StreamSocket.parseTcp(this, SocketFamily.Tls, listen = true, rest, p)
