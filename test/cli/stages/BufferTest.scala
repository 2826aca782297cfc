package asyncpipe.cli.stages

import asyncpipe.cli.Launch
import asyncpipe.cli.tasks.TaskSessionTest.{Startup, waitFor}
import java.lang.ProcessBuilder.Redirect

/** `--buffer SIZE` on a plain copy: the stage reads ahead of a reader that takes nothing, into a
  * queue of about SIZE (as mbuffer's -m), and every byte comes out, in order, once it reads.
  */
class BufferTest extends munit.FunSuite:
  override val munitTimeout = scala.concurrent.duration.Duration(90, "s")

  // 64M, not 8M: SIZE is made into a number of messages of the largest read (256 KiB), and reads of
  // a pipe on a busy machine are often smaller, so 8M (32 messages) held under 4 MiB at times and
  // the test waited in vain (a flake of full runs).
  test("--buffer 64M: a copy reads ahead into its queue while its reader waits, then hands all of it on"):
    assume(Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")
    val dir = os.temp.dir(prefix = "asyncpipe-buffer-")
    try
      val data = (1 to 1_500_000).map(n => s"$n\n").mkString.getBytes // about 10.9 MB
      val err = dir / "err"
      val p = ProcessBuilder((Launch.command("--buffer", "64M", "--stats-json", "-", "-"))*)
        .redirectError(err.toIO).redirectOutput(Redirect.PIPE).redirectInput(Redirect.PIPE).start()
      try
        val writer = Thread.ofPlatform().start { () =>
          try { p.getOutputStream.write(data); p.getOutputStream.close() }
          catch case _: java.io.IOException => ()
        }
        // Nothing reads the stage's stdout yet: what it has read is in its queue (and two pipes).
        def readSoFar: Long =
          if !os.exists(err) then 0
          else os.read.lines(err).filter(_.startsWith("{\"final\"")).lastOption
            .flatMap(l => """"inputs":\[\{[^}]*"bytes":(\d+)""".r.findFirstMatchIn(l)).fold(0L)(_.group(1).toLong)
        waitFor("the stage to read 4 MiB ahead of its reader", Startup)(readSoFar >= (4L << 20)) // a copy without a queue: at most about 2.3 MiB (its pipes and one read)
        val out = p.getInputStream.readAllBytes()
        writer.join()
        assertEquals(p.waitFor(), 0, os.read(err))
        assert(java.util.Arrays.equals(out, data), s"${out.length} bytes out of ${data.length}, or not the same")
      finally p.destroyForcibly()
    finally os.remove.all(dir)
