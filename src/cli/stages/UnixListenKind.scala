package asyncpipe.cli.stages

import asyncpipe.cli.command.*

/** `unix-listen:PATH`: Unix domain stream connections accepted ([[StreamSocket]] has the grammar and the roles). */
object UnixListenKind extends AddressKind:
  val scheme = "unix-listen"
  val forms: Seq[(String, String)] = Seq(
    "unix-listen:PATH[,OPT...]" -> "accept on a Unix socket: as tcp-listen: (a stale socket file is replaced, nothing else)"
  )
  override val options: Seq[AddressOption] = StreamSocket.listening(SocketFamily.Unix)
  def parse(rest: String, p: AddressParser): Either[CliError, Address] = StreamSocket.parseUnix(this, listen = true, rest, p)
