package asyncpipe.cli.command

import asyncpipe.cli.system.OwnedOutput

/** Standard streams as the tool sees them: data goes to `out`, diagnostics to `err`. */
final case class Io(out: OwnedOutput, err: java.io.PrintStream)
