package asyncpipe.cli

import asyncpipe.cli.command.*

/** The training run of install.sh's JDK AOT cache: runs each argument as one command line (split on
  * spaces; but `run PIPELINE` passes PIPELINE, with its spaces, as one argument) the way
  * `java asyncpipe.cli.Main ARGS` would, all in this one JVM, so that one cache learns the
  * classes of all of them. A command line that starts with `exit=N ` is expected to exit N (a
  * client trained against a broker that never answers); every other one, 0. Exits 1 if any of them
  * exits otherwise.
  */
object AotTraining:
  private val Expected = """exit=(\d+) (.*)""".r

  def main(commands: Array[String]): Unit =
    // Through the static forwarder in class Main, as the java launcher goes, so that the cache also
    // holds class Main (calls from Scala would go to Main$ only).
    val launch = Class.forName("asyncpipe.cli.Main").getMethod("launch", classOf[Array[String]])
    val failed = commands.filter { command =>
      val (expected, line) = command.trim match
        case Expected(code, rest) => (code.toInt, rest.trim)
        case line                 => (ExitCode.Ok, line)
      val args: Array[String] =
        if line.startsWith("run ") then Array("run", line.drop(4).trim)
        else line.split(" +").filter(_.nonEmpty)
      launch.invoke(null, args).asInstanceOf[Int] != expected
    }
    if failed.nonEmpty then System.err.println(s"AotTraining: failed: ${failed.mkString("; ")}")
    System.err.flush()
    Runtime.getRuntime.halt(if failed.isEmpty then ExitCode.Ok else ExitCode.Runtime)
