package asyncpipe.cli.tasks

import java.nio.file.{Files, Path}

/** For [[TaskSessionTest]]: asyncpipe's `main` in a JVM whose exit begins as the JVM's own handler
  * of SIGINT, SIGTERM or SIGHUP begins it (`System.exit(128 + N)`), which is what a signal does
  * that comes before asyncpipe's handlers are in place (or whose handler thread the JVM made
  * before them). Arguments: the exit status, a file whose appearance starts the exit (`-`: at
  * once), then asyncpipe's arguments.
  */
object ExitDuringRun:
  def main(args: Array[String]): Unit =
    val status = args(0).toInt
    val trigger = args(1)
    Thread.ofPlatform().start { () =>
      if trigger != "-" then
        while !Files.exists(Path.of(trigger)) do Thread.sleep(1) // a test's wait for a state, bounded by the test
      System.exit(status)
    }
    asyncpipe.cli.Main.main(args.drop(2))
