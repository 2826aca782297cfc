package asyncpipe.cli.stages

import asyncpipe.cli.command.*

/** `tls:HOST:PORT`: a TCP connection with TLS, as its client ([[StreamSocket]] has the grammar and
  * the roles, [[Tls]] the handshake).
  */
object TlsKind extends AddressKind:
  val scheme = "tls"
  val forms: Seq[(String, String)] = Seq(
    "tls:HOST:PORT[,OPT...]" -> "as tcp:, with TLS 1.3/1.2: the server's certificate verified (system trust store, or ca=FILE) for HOST or sni=NAME"
  )
  override val options: Seq[AddressOption] = StreamSocket.connecting(SocketFamily.Tls)
  def parse(rest: String, p: AddressParser): Either[CliError, Address] = StreamSocket.parseTcp(this, SocketFamily.Tls, listen = false, rest, p)
