package asyncpipe.cli.stages

import asyncpipe.cli.command.*

/** `unix:PATH`: a Unix domain stream socket's connection ([[StreamSocket]] has the grammar and the roles). */
object UnixKind extends AddressKind:
  val scheme = "unix"
  val forms: Seq[(String, String)] = Seq(
    "unix:PATH[,OPT...]" -> "connect to a Unix socket: as tcp:"
  )
  override val options: Seq[AddressOption] = StreamSocket.connecting(SocketFamily.Unix)
  def parse(rest: String, p: AddressParser): Either[CliError, Address] = StreamSocket.parseUnix(this, listen = false, rest, p)
