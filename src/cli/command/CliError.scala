package asyncpipe.cli.command

/** Everything that can end a command unsuccessfully, as values. `render` is the one place that
  * turns them into text, and `exitCode` the one place that maps them to a status.
  */
enum CliError:
  /** The first token is neither a verb, an option, nor an address. */
  case UnknownVerb(token: String, suggestion: Option[String])
  /** An option the verb (or the top level, when `verb` is None) does not know; `suggestions`, the
    * options it may be a typo or an abbreviation of.
    */
  case UnknownOption(verb: Option[String], token: String, expected: String, suggestions: Seq[String] = Nil)
  /** A token that is in the right place but breaks a rule: names the token, the rule and the form. */
  case BadToken(verb: Option[String], token: String, rule: String, expected: String)
  /** Something required is absent. */
  case Missing(verb: Option[String], what: String, expected: String)
  /** A failure while running: an address or a command, and the reason (the OS's, where there is one). */
  case Runtime(subject: String, reason: String)
  /** A failure while running because a time limit ran out (a connect timeout): as `Runtime`, exit 124. */
  case Expired(subject: String, reason: String)
  /** A command the tool was to run cannot be run: `status` is 127 (not found) or 126 (not executable). */
  case CannotRun(verb: String, command: String, reason: String, status: Int)
  /** The reader of our standard output went away (EPIPE): a normal stop, reported by status alone. */
  case DownstreamGone
  /** `error`, already written on stderr in another form (as JSON, under `--stats-json`). */
  case Reported(error: CliError)

  def exitCode: Int = this match
    case _: (UnknownVerb | UnknownOption | BadToken | Missing) => ExitCode.Usage
    case _: Runtime                                            => ExitCode.Runtime
    case _: Expired                                            => ExitCode.TimedOut
    case c: CannotRun                                          => c.status
    case DownstreamGone                                        => ExitCode.ClosedPipe
    case Reported(error)                                       => error.exitCode

  /** The text for standard error; empty when the status says everything. */
  def render: String =
    def prefix(verb: Option[String]) = verb.fold("asyncpipe")(v => s"asyncpipe $v")
    def usage(verb: Option[String], problem: String, expected: String) =
      val help = verb.fold("asyncpipe --help")(v => s"asyncpipe $v --help")
      s"${prefix(verb)}: $problem\n  expected: $expected\n  (see '$help')"
    this match
      case UnknownVerb(token, suggestion) =>
        val hint = suggestion.fold("")(s => s"; did you mean '$s'?")
        usage(None, s"unknown verb or address '$token'$hint", Usage.topSynopsis)
      case UnknownOption(verb, token, expected, suggestions) =>
        val hint = if suggestions.isEmpty then "" else suggestions.map(s => s"'$s'").mkString("; did you mean ", " or ", "?")
        usage(verb, s"unknown option '$token'$hint", expected)
      case BadToken(verb, token, rule, expected) => usage(verb, s"bad value '$token': $rule", expected)
      case Missing(verb, what, expected)         => usage(verb, s"missing $what", expected)
      case Runtime(subject, reason)              => s"asyncpipe: $subject: $reason"
      case Expired(subject, reason)              => s"asyncpipe: $subject: $reason"
      case CannotRun(verb, command, reason, _)   => s"asyncpipe $verb: $command: $reason"
      case DownstreamGone | Reported(_)          => ""

object CliError:
  /** Thrown to unwind from deep inside a stage; `Main` turns it back into its value. */
  final class Failed(val error: CliError) extends RuntimeException(error.render, null, false, false)

  /** The closest of `candidates` to `token` by edit distance, if it is close enough to be a typo. */
  def suggest(token: String, candidates: Iterable[String]): Option[String] =
    val scored = candidates.map(c => c -> editDistance(token, c)).filter((c, d) => d <= math.max(1, c.length / 3))
    scored.minByOption(_._2).map(_._1)

  /** Optimal-string-alignment distance: insertions, deletions, substitutions and adjacent swaps. */
  private def editDistance(a: String, b: String): Int =
    val d = Array.tabulate(a.length + 1, b.length + 1)((i, j) => if i == 0 then j else if j == 0 then i else 0)
    for i <- 1 to a.length; j <- 1 to b.length do
      val cost = if a(i - 1) == b(j - 1) then 0 else 1
      d(i)(j) = math.min(math.min(d(i - 1)(j) + 1, d(i)(j - 1) + 1), d(i - 1)(j - 1) + cost)
      if i > 1 && j > 1 && a(i - 1) == b(j - 2) && a(i - 2) == b(j - 1) then
        d(i)(j) = math.min(d(i)(j), d(i - 2)(j - 2) + 1)
    d(a.length)(b.length)
