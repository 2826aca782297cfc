package asyncpipe.cli.command

/** Whether a person is watching. */
object Tty:
  /** True when a person is probably watching (a console that is a terminal). */
  def isInteractive: Boolean = Option(System.console()).exists(_.isTerminal)
