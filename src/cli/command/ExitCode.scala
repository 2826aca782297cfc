package asyncpipe.cli.command

import asyncpipe.cli.system.*

/** Process exit statuses, following shell conventions (128 + signal number for signals). */
object ExitCode:
  val Ok = 0
  val Runtime = 1
  val Usage = 2
  val TimedOut = 124 // as timeout(1): the command ran past its time and was killed
  val NotExecutable = 126 // as shells: the command exists but cannot be run
  val NotFound = 127 // as shells: no such command
  val HungUp: Int = Stop.HangUp.exitCode // 129: the terminal went away
  val Interrupted: Int = Stop.Interrupt.exitCode // 130
  val ClosedPipe = 141 // SIGPIPE: the downstream reader went away
  val Terminated: Int = Stop.Terminate.exitCode // 143
