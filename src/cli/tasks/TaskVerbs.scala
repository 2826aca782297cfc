package asyncpipe.cli.tasks

import asyncpipe.cli.command.*

import TaskOptions.Kind

/** `asyncpipe every`, `retry` and `repeat`: the task runner (design sections 3 and 4; decisions in
  * doc/adr/0008-task-runner.md). Options are read by [[TaskOptions]], runs made by [[TaskRunner]].
  * `description`: '|'-margined text, stripped and wrapped when the help is shown.
  */
final class TaskVerb(kind: Kind, description: String, examples: Seq[String]) extends Verb:
  val name: String = kind.verb
  val synopsis: String = kind.synopsis
  val summary: String = kind.summary
  override def opts: Seq[Opt[?]] = kind.opts

  override def help: String =
    s"""${Options.usage(synopsis)}
       |
       |${summary.capitalize}.
       |
       |${Options.paragraph(description.stripMargin)}
       |
       |${Options.paragraph("Each run: CMD and ARGS are run as they are, without a shell, in a session of its own (setsid), with stdin from /dev/null and stderr passed through; its stdout is passed on as whole lines (so this is a pipeline source). '--' ends asyncpipe's options. A timeout, a stop and the end of the run reach every process of that session, in whatever process group (set -m, timeout): nothing is left running but what left the session itself (a daemon). Durations: a number and a unit, ms, s, m or h (1.5s, 250ms, 2m).")}
       |
       |Options:
       |${Options.helpLines(kind.opts)}
       |
       |Exit status:
       |${Options.table(Seq(
        TaskVerb.exitStatus(kind),
        "124" -> "the last run timed out",
        "126/127" -> "CMD cannot be run / is not found (checked before the first run)",
        "129" -> "SIGHUP (forwarded to a running CMD's session first, as SIGINT/SIGTERM are)",
        "130/143" -> "SIGINT/SIGTERM (forwarded to a running CMD's session first)",
        "141" -> "the reader of stdout went away (noticed while idle too)",
        "2" -> "a usage error"
      ))}
       |
       |Examples:
       |${examples.map("  " + _).mkString("\n")}
       |""".stripMargin

  def run(args: Seq[String], io: Io): Either[CliError, Int] =
    TaskOptions.parse(kind, args) match
      case Right(options) => TaskRunner(options, io).run()
      case Left(error)    => Left(error)

object TaskVerb:
  private def exitStatus(kind: Kind): (String, String) = kind match
    case Kind.Every  => "0" -> "every run succeeded; else the status of the last failed run"
    case Kind.Retry  => "0" -> "an attempt succeeded; else the last attempt's status"
    case Kind.Repeat => "0 or N" -> "the last run's status"

object TaskVerbs:
  val every: TaskVerb = TaskVerb(
    Kind.Every,
    """Runs CMD at once, then at a fixed rate on a grid from that first start: run k begins at
      |k x DURATION however long the runs take, so nothing drifts. A tick that comes while a run
      |still goes on is skipped and counted, and never made up for in a burst (--overlap wait runs
      |once late instead, --overlap allow starts it alongside). --spacing D instead waits D after
      |each run ends. A failed run does not stop the schedule. --jitter moves each run from its
      |tick at random (by the jittered period minus the period). Runs until stopped, --count N
      |runs, or --deadline.""",
    Seq("asyncpipe every 10s --jitter 1s -- curl -fsS https://example.org/health",
      "asyncpipe every 1m --count 60 --timeout 50s -- ./poll.sh >> polls.log")
  )

  val retry: TaskVerb = TaskVerb(
    Kind.Retry,
    """Runs CMD until it exits 0. After a failed attempt it waits --backoff, then each wait is
      |--factor times the last, at most --max-delay, jittered if asked. --max-attempts N counts every
      |run, the first included (the design's '--max' is not taken: it could as well mean
      |--max-delay). --retry-on and --stop-on choose which failures are retried; any other failure
      |ends the run at once with its status. --deadline: no attempt starts that could not begin in
      |time.""",
    Seq("asyncpipe retry --max-attempts 8 --backoff 100ms --factor 2 -- ./upload.sh",
      "asyncpipe retry --timeout 10s --deadline 2m --stop-on 2 -- ssh host true")
  )

  val repeat: TaskVerb = TaskVerb(
    Kind.Repeat,
    """Runs CMD again and again: with --until-failure while it succeeds (to catch a flaky test),
      |with --until-success while it fails. Between runs it waits --backoff (none by default),
      |growing by --factor up to --max-delay, as retry does.""",
    Seq("asyncpipe repeat --until-failure --count 100 -- ./run-flaky-test.sh",
      "asyncpipe repeat --until-success --backoff 1s -- test -e /tmp/ready")
  )

  val all: Seq[Verb] = Seq(every, retry, repeat)
