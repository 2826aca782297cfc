package asyncpipe.cli

import asyncpipe.cli.command.*
import asyncpipe.cli.stages.*

/** The texts of `asyncpipe --help` and `--version`, from the verbs, the address kinds and the
  * stage options' declarations.
  */
object Help:

  def version: String = s"asyncpipe ${BuildInfo.version}\n"

  def top(verbs: Seq[Verb]): String =
    val later = " (not in this version yet)"
    s"""asyncpipe ${BuildInfo.version}: shell pipeline stages on a direct-style async library
       |
       |Usage:
       |${Options.table(Seq(
        "asyncpipe [OPTIONS] FROM [TO]" -> "copy frames between two addresses (one alone: its role from the streams)",
        "asyncpipe 'A | STAGE | B'" -> "a whole pipeline in one JVM, as 'asyncpipe run'",
        "asyncpipe VERB [OPTIONS] [ARGS]" -> "run a verb",
        "asyncpipe help VERB" -> "describe a verb (also 'asyncpipe VERB --help', 'asyncpipe - --help')",
        "asyncpipe --help | --version" -> "this text; the version"
      ))}
       |
       |Verbs:
       |${Options.table(verbs.filter(_.listed).map(v => v.name -> (v.summary + (if v.available then "" else later))))}
       |
       |Addresses:
       |${Options.table(Address.forms, maxColumn = 24)}
       |
       |Options of FROM TO, mux and run (mux has three more: 'asyncpipe help mux'):
       |${StageOptions.helpLines(mux = false)}
       |
       |${Options.paragraph("Exit status: 0 done, 1 runtime error, 2 usage error, 124 a run timed out, 126/127 a command cannot run / was not found, 129 SIGHUP, 130 SIGINT, 141 downstream closed, 143 SIGTERM.")}
       |""".stripMargin
