package asyncpipe.cli

/** Command plumbing: what every verb is made of and how a command line is read.
  *
  * What lives here: [[Verb]] (the verb interface) and [[Io]] (the standard streams as a verb sees
  * them), the one option system ([[Opt]], [[Options]], [[Parsed]]) with one [[Reader]] per value
  * type (whole numbers, sizes, durations via [[Durations]], decimals, word choices, paths),
  * [[CliError]] (every failure as a value, rendered in one place), [[ExitCode]], [[Usage]] (the
  * forms and the help and version flags) and [[Tty]] (whether a person is watching).
  *
  * What it may import: the library, [[asyncpipe.cli.system]] (the standard output it writes to,
  * the signals' exit statuses) and [[asyncpipe.cli.frames]]; never `stages` or `tasks`, which
  * are built on it.
  */
package object command
