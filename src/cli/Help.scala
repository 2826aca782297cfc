package asyncpipe.cli

import asyncpipe.cli.command.*
import asyncpipe.cli.stages.*

/** The texts of `asyncpipe --help` and `--version`, built from the verb table and address forms. */
object Help:

  def version: String = s"asyncpipe ${BuildInfo.version}\n"

  def top(verbs: Seq[Verb]): String =
    val later = " (not in this version yet)"
    def table(rows: Seq[(String, String)]): String =
      val width = rows.map(_._1.length).max
      rows.map((left, right) => s"  ${left.padTo(width, ' ')}  $right").mkString("\n")
    s"""asyncpipe ${BuildInfo.version}: shell pipeline stages on a direct-style async library (JDK virtual threads)
       |
       |Usage:
       |  asyncpipe [OPTIONS] FROM [TO]    copy frames between two addresses (one: its role from the streams)
       |  asyncpipe 'A | STAGE | B'        a whole pipeline in one JVM, as 'asyncpipe run'
       |  asyncpipe VERB [OPTIONS] [ARGS]  run a verb; 'asyncpipe VERB --help' describes it
       |  asyncpipe --help | --version
       |
       |Verbs:
       |${table(verbs.map(v => v.name -> (v.summary + (if v.available then "" else later))))}
       |
       |Addresses:
       |${table(Address.forms)}
       |
       |Exit status: 0 done, 1 runtime error, 2 usage error, 124 a run timed out, 126/127 a command cannot
       |run / was not found, 129 SIGHUP, 130 SIGINT, 141 downstream closed, 143 SIGTERM.
       |""".stripMargin
