package asyncpipe.cli.stages

import asyncpipe.cli.Launch
import asyncpipe.cli.command.ExitCode
import asyncpipe.cli.tasks.TaskSessionTest.{PromptEnd, Startup, waitFor}
import java.io.File
import java.lang.ProcessBuilder.Redirect

/** `--rate-limit` end to end: every frame comes out whole and in order, never faster than the
  * rate (the flow's own elapsed time, from `--stats-json`; how close to the rate it keeps is a
  * benchmark's question, not a test's), and a stop does not wait for the pace: what was read goes
  * out at once.
  */
class RateLimitTest extends munit.FunSuite:
  override def beforeAll(): Unit = assume(Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")

  private def elapsed(statsJson: String): Double =
    val last = statsJson.linesIterator.filter(_.contains("\"final\":true")).toSeq.last
    """"elapsed_s":([0-9.]+)""".r.findFirstMatchIn(last).get.group(1).toDouble

  for (limit, bytesPerSecond) <- Seq("40k" -> 40 * 1024.0, "2000f" -> 2000 * 7.0) do
    test(s"--rate-limit $limit: all of it, whole and in order, and no faster than the rate"):
      val dir = os.temp.dir(prefix = "asyncpipe-rate-")
      try
        val input = dir / "in.txt"
        os.write(input, (100000 until 100000 + 4000).map(n => s"$n\n").mkString) // 4000 frames of 7 bytes
        val r = os.proc(Launch.command("--stats-json", "--rate-limit", limit, s"file:$input", "-"))
          .call(stderr = os.Pipe, check = false, timeout = 60_000)
        assertEquals(r.exitCode, 0, r.err.text())
        assertEquals(r.out.text(), os.read(input))
        val slice = bytesPerSecond / Pacer.SlicesPerSecond
        val least = (28000 - slice) / bytesPerSecond
        assert(elapsed(r.err.text()) >= least, s"28000 bytes in ${elapsed(r.err.text())} s at $limit: faster than ${least} s")
      finally os.remove.all(dir)

  test("a stop does not wait for the pace: SIGINT, 130, and every frame read comes out whole"):
    val dir = os.temp.dir(prefix = "asyncpipe-rate-")
    try
      val out = dir / "out"
      // A backlog of far more than PromptEnd's worth at 10 frames a second: a tick a millisecond,
      // held in a buffer of 5000 messages, for the second or more it takes to write 12 frames.
      val p = ProcessBuilder((Launch.command("--rate-limit", "10f", "--buffer", "5000", "tick:1ms", "-"))*)
        .redirectInput(Redirect.from(File("/dev/null"))).redirectOutput(out.toIO).redirectError((dir / "err").toIO).start()
      try
        waitFor("twelve paced frames", Startup)(os.exists(out) && os.read(out).count(_ == '\n') >= 12)
        Launch.signal("INT", p.pid)
        assert(p.waitFor(PromptEnd, java.util.concurrent.TimeUnit.MILLISECONDS), "still running after SIGINT: it waited for the pace")
        assertEquals(p.exitValue, ExitCode.Interrupted, os.read(dir / "err"))
        val text = os.read(out)
        assert(text.endsWith("\n"), text)
        val numbers = text.linesIterator.map(_.toLong).toSeq
        assertEquals(numbers, (1L to numbers.size).toSeq, "in order, none lost or torn")
        assert(numbers.size > 200, s"only ${numbers.size} frames: the backlog did not come out at the stop")
      finally p.destroyForcibly()
    finally os.remove.all(dir)
