package asyncpipe.cli.command

import asyncpipe.cli.system.Stop

/** Why a command stopped before its work was done (a flow of stages, a task run); the first
  * reason wins, and it decides the exit status.
  */
enum StopReason:
  /** SIGINT, SIGTERM or SIGHUP: the status is 130, 143 or 129. */
  case Signalled(stop: Stop)
  /** An error: the reader of stdout gone, an endpoint or a command that failed. */
  case Failed(error: CliError)
  /** The reader of stdout went away (EPIPE): status 141, reported by status alone. */
  case PipeClosed
