package asyncpipe.cli.command

import asyncpipe.cli.system.OwnedOutput

/** Standard streams as the tool sees them: data goes to `out`, diagnostics to `err`; `in` is
  * read only where a command says so (`--stdin replay`; the stages open their inputs themselves).
  */
final case class Io(out: OwnedOutput, err: java.io.PrintStream, in: java.io.InputStream = System.in)
