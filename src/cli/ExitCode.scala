package asyncpipe.cli

/** Process exit statuses, following shell conventions (128 + signal number for signals). */
object ExitCode:
  val Ok = 0
  val Runtime = 1
  val Usage = 2
  val Interrupted = 130 // SIGINT
  val ClosedPipe = 141 // SIGPIPE: the downstream reader went away
  val Terminated = 143 // SIGTERM
