package asyncpipe.cli

import asyncpipe.cli.command.*
import asyncpipe.cli.stages.*

import asyncpipe.async.{Support, Watchdog}
import java.io.{File, InputStream}
import java.lang.ProcessBuilder.Redirect
import java.nio.ByteBuffer
import java.util.concurrent.TimeUnit
import scala.concurrent.duration.{Duration, FiniteDuration}
import scala.jdk.CollectionConverters.*

/** Nothing lost under faults: each way adversarial testing found to lose or corrupt
  * data, end to end with real processes, real signals, a real small file system (tmpfs where this
  * machine lets the tests mount one, else a file-size limit) and real pipes. What a stage writes
  * must end on a whole frame and be a prefix of what it read; its exit status the documented one.
  * The random-signal suite over many runs is FaultSuite.
  */
class FaultTest extends munit.FunSuite with Watchdog:
  import StageE2ETest.*
  import FaultTest.*

  override def watchdog: FiniteDuration = Duration(120, TimeUnit.SECONDS)

  override def beforeAll(): Unit =
    assume(Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")

  private val e2e = FunFixture[Env](_ => Env(os.temp.dir(prefix = "asyncpipe-fault-")), _.close())

  // -----------------------------------------------------------------------------------------------
  // 1. SIGQUIT: the JVM's thread dump goes to stderr, never into the data

  private val quitForms: Seq[(String, Seq[String])] = Seq(
    "FROM TO" -> Seq("tick:20ms,count=40", "-"),
    "mux" -> Seq("mux", "--in", "tick:20ms,count=40"),
    "run" -> Seq("run", "tick:20ms,count=40 | mux | -"),
    "every" -> Seq("every", "20ms", "--count", "40", "--", "echo", "x")
  )

  for (form, args) <- quitForms do
    e2e.test(s"SIGQUIT ($form): the thread dump goes to stderr; stdout holds the data alone"): env =>
      val r = env.start(args, stdin = Redirect.from(File("/dev/null")))
      Support.eventually("5 lines on stdout", Slow) { os.exists(r.stdoutFile) && os.read(r.stdoutFile).count(_ == '\n') >= 5 }
      kill("QUIT", r.process.pid)
      Support.eventually("the thread dump on stderr", Slow) { r.err.contains("Full thread dump") }
      assertEquals(r.exit(Slow), 0, r.err.take(300))
      val expected = if form == "every" then "x\n" * 40 else (1 to 40).map(_.toString + "\n").mkString
      assertEquals(r.out, expected)

  // -----------------------------------------------------------------------------------------------
  // 2. A second signal while a stage is blocked writing to a slow reader

  /** The three stage forms, given the input file and the framing. */
  private val slowForms: Seq[(String, (String, String) => Seq[String])] = Seq(
    "FROM TO" -> ((in, frame) => Seq("--frame", frame, s"file:$in", "-")),
    "mux" -> ((in, frame) => Seq("mux", "--frame", frame, "--in", s"file:$in")),
    "run" -> ((in, frame) => Seq("run", "--frame", frame, s"file:'$in' | mux | -"))
  )

  for (form, args) <- slowForms; frame <- Seq("lines", "len") do
    e2e.test(s"a second SIGTERM while $form --frame $frame writes to a slow reader: whole frames only, 143"): env =>
      // Several times what the stage's pipe (grown to 1 MiB) and the write in progress when the
      // signal comes (a kernel copy moves up to 1 MiB) hold: the stop must come before the end.
      val input = if frame == "lines" then numberLines(1_500_000) else numberFrames(1_000_000)
      val in = env.write("in", input)
      val r = env.start(args(in.toString, frame), stdin = Redirect.from(File("/dev/null")), stdout = Redirect.PIPE)
      // The reader reads nothing until the stage is blocked on a full pipe.
      Support.eventually("stdout's pipe to fill", Slow) { r.process.getInputStream.available() >= 65_536 }
      kill("TERM", r.process.pid)
      kill("TERM", r.process.pid)
      val out = readSlowly(r.process.getInputStream)
      assertEquals(r.exit(Slow), ExitCode.Terminated, r.err)
      assertWholePrefix(frame, out, input, complete = false)

  e2e.test("a reader that takes nothing more keeps the second signal waiting for the frame; a third exits at once"): env =>
    val in = env.write("in", numberLines(400_000))
    val r = env.start(Seq(s"file:$in", "-"), stdin = Redirect.from(File("/dev/null")), stdout = Redirect.PIPE)
    Support.eventually("stdout's pipe to fill", Slow) { r.process.getInputStream.available() >= 65_536 }
    kill("INT", r.process.pid)
    kill("INT", r.process.pid)
    // Negative: the stage must not halt in the middle of the write it is blocked in.
    assert(!r.process.waitFor(500, TimeUnit.MILLISECONDS), "the second signal halted a stage blocked in the middle of a write")
    // Two signals of one kind sent back to back may reach the process as one (the kernel keeps one
    // pending), so the third is sent again until the process takes it; it then exits at once.
    var tries = 0
    while { kill("INT", r.process.pid); tries += 1; !r.process.waitFor(2, TimeUnit.SECONDS) && tries < 5 } do ()
    assertEquals(r.exit(Slow), ExitCode.Interrupted, r.err)

  e2e.test("SIGHUP stops a stage as SIGTERM does: whole frames written, exit 129"): env =>
    val r = env.start(Seq("tick:5ms", "-"), stdin = Redirect.from(File("/dev/null")))
    Support.eventually("a few lines", Slow) { os.exists(r.stdoutFile) && os.read(r.stdoutFile).count(_ == '\n') >= 3 }
    kill("HUP", r.process.pid)
    assertEquals(r.exit(Slow), ExitCode.HungUp, r.err)
    val out = os.read(r.stdoutFile)
    assertEquals(out, (1 to out.count(_ == '\n')).map(_.toString + "\n").mkString)

  e2e.test("one SIGTERM to every stage of a pipeline, the reader first: each exits 143, not 141 for the pipe it closed"): env =>
    val input = numberLines(1_500_000)
    val in = env.write("in", input)
    for round <- 1 to 5 do
      val out = env.dir / s"out$round"
      val stages = Seq(Seq(s"file:$in", "-"), Seq("-", s"file:$out"))
      val builders = stages.zipWithIndex.map((a, i) => ProcessBuilder(Launch.command(a*).asJava).redirectError((env.dir / s"err$round-$i").toIO))
      builders.head.redirectInput(Redirect.from(File("/dev/null")))
      val procs = ProcessBuilder.startPipeline(builders.asJava).asScala.toSeq
      env.adopt(procs*)
      Support.eventually("the copy to be under way", Slow) { os.exists(out) && os.size(out) > 100_000 }
      Launch.signal("TERM", procs(1).pid, procs(0).pid)
      for (p, i) <- procs.zipWithIndex do
        assertEquals(exitOf(p, s"stage ${i + 1}", Slow), ExitCode.Terminated, s"round $round, stage ${i + 1}: ${os.read(env.dir / s"err$round-$i")}")
      assertWholePrefix("lines", os.read.bytes(out), input, complete = false)

  // -----------------------------------------------------------------------------------------------
  // 3. A full disk (or a file-size limit): the file is cut back to its last whole frame

  private lazy val smallFs: Option[os.Path] =
    val dir = os.temp.dir(prefix = "asyncpipe-tmpfs-")
    val mounted = os.proc("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir.toString)
      .call(check = false, stderr = os.Pipe, stdout = os.Pipe).exitCode == 0
    if mounted then Some(dir) else { os.remove.all(dir); None }

  override def afterAll(): Unit =
    smallFs.foreach(dir => os.proc("umount", dir.toString).call(check = false, stderr = os.Pipe))

  for frame <- Seq("lines", "len"); into <- Seq("file:OUT", "- > OUT") do
    e2e.test(s"a full file system ($frame, $into): exit 1 naming the reason, and the file ends on a whole frame"): env =>
      val fs = smallFs.getOrElse { assume(false, "cannot mount a tmpfs here (not root?): the ulimit -f test covers the cut"); ??? }
      val input = if frame == "lines" then numberLines(300_000) else numberFrames(200_000)
      val in = env.write("in", input)
      os.list(fs).foreach(os.remove.all)
      os.write(fs / "fill", Array.fill[Byte](12_345)(0)) // the disk fills in the middle of a frame
      val out = fs / "out"
      val command = (if into == "file:OUT" then shellCommand("--frame", frame, s"file:$in", s"file:$out")
                     else shellCommand("--frame", frame, s"file:$in", "-") + s" > $out")
      val r = env.startCommand(Seq("bash", "-c", command), stdin = Redirect.from(File("/dev/null")))
      assertEquals(r.exit(Slow), ExitCode.Runtime, r.err)
      assert(r.err.contains("no space left on device") && r.err.contains("last whole frame"), r.err)
      assertWholePrefix(frame, os.read.bytes(out), input, complete = false)
      assert(os.size(out) > 500_000, s"only ${os.size(out)} bytes kept")

  // The disk fills at the idle flush (the buffer written out once the writer pauses) while the
  // input stays open and quiet, as a followed log or a paused producer leaves it: no later write
  // would ever report the failure, so the idle flush must. Also started as `java -jar` with no
  // flag, where the cut back relies on the jar's manifest for the file's descriptor.
  for (into, launcher) <- Seq(("file:OUT", "launcher flags"), ("- > OUT", "launcher flags"), ("file:OUT", "bare java -jar")) do
    e2e.test(s"a full file system met by the idle flush, the input open and quiet ($into, $launcher): exit 1 at once, a whole frame last"): env =>
      val fs = smallFs.getOrElse { assume(false, "cannot mount a tmpfs here (not root?)"); ??? }
      val input = numberLines(5_000) // 23,893 bytes: all of it waits in the buffers for the idle flush
      os.list(fs).foreach(os.remove.all)
      fillLeaving(fs / "fill", 8192)
      val out = fs / "out"
      val tool: Seq[String] => Seq[String] = a => if launcher == "bare java -jar" then Launch.bareCommand(a*) else Launch.command(a*)
      val args = if into == "file:OUT" then tool(Seq("-", s"file:$out")) else tool(Seq("-"))
      val quoted = shellWords(args)
      val r = env.startCommand(Seq("bash", "-c", if into == "file:OUT" then s"exec $quoted" else s"exec $quoted > $out"))
      val stdin = r.process.getOutputStream
      stdin.write(input)
      stdin.flush() // and kept open: no more input, no end of it
      assertEquals(r.exit(), ExitCode.Runtime, r.err)
      assert(r.err.contains("no space left on device") && r.err.contains("last whole frame"), r.err)
      assertWholePrefix("lines", os.read.bytes(out), input, complete = false)
      assert(os.size(out) > 4096, s"only ${os.size(out)} bytes kept")
      stdin.close()

  for frame <- Seq("lines", "len", "nul") do
    e2e.test(s"a file-size limit (ulimit -f, $frame): exit 1, and the file ends on a whole frame"): env =>
      val input = frame match
        case "lines" => numberLines(100_000)
        case "nul"   => numberLines(100_000).map(c => if c == '\n' then 0.toByte else c)
        case _       => numberFrames(30_000)
      val in = env.write("in", input)
      for into <- Seq("file", "stdout") do
        val out = env.dir / s"out-$into"
        val command =
          if into == "file" then shellCommand("--frame", frame, s"file:$in", s"file:$out")
          else shellCommand("--frame", frame, s"file:$in", "-") + s" > $out"
        val r = env.startCommand(Seq("bash", "-c", s"ulimit -f 100; exec $command"), stdin = Redirect.from(File("/dev/null")))
        assertEquals(r.exit(Slow), ExitCode.Runtime, r.err)
        assert(r.err.contains("file too large") && r.err.contains("last whole frame"), r.err)
        assertWholePrefix(frame, os.read.bytes(out), input, complete = false)
        assert(os.size(out) > 90_000, s"$into: only ${os.size(out)} bytes kept")

  // -----------------------------------------------------------------------------------------------
  // 4. A len header over the limit: every whole frame before it is delivered

  e2e.test("a len prefix claiming 2 GB after 20,000 valid frames: all 400,000 bytes before it come out, exit 1 naming the offset"): env =>
    val good = encodeLen(Seq.fill(20_000)(Array.fill[Byte](16)('x')))
    val bad = env.write("bad.len", good ++ ByteBuffer.allocate(8).putInt(Int.MinValue).array())
    val r = env.start(Seq("--frame", "len", s"file:$bad", "-"), stdin = Redirect.from(File("/dev/null")))
    assertEquals(r.exit(Slow), ExitCode.Runtime, r.err)
    assertEquals(os.read.bytes(r.stdoutFile).length, 400_000)
    assert(r.err.contains("a len frame of 2147483648 bytes at byte 400000"), r.err)

  // -----------------------------------------------------------------------------------------------
  // 5. The same file read and written through the standard streams

  e2e.test("the same file through stdin or stdout is refused (exit 2) and left as it was"): env =>
    val x = env.write("x", numberLines(1000))
    val y = env.write("y", numberLines(1000))
    for command <- Seq(
        shellCommand("-", s"file:$x") + s" < $x",
        shellCommand("mux", "--out", s"file:$x") + s" < $x > /dev/null",
        shellCommand("run", s"- | mux | file:'$x'") + s" < $x",
        shellCommand(s"file:$y", "-") + s" >> $y",
        shellCommand("-", "-") + s" < $y >> $y"
      )
    do
      val r = env.startCommand(Seq("bash", "-c", command))
      assertEquals(r.exit(Slow), ExitCode.Usage, s"$command: ${r.err}")
      assert(r.err.contains("is the same file as"), r.err)
    assertEquals(os.read.bytes(x).toSeq, numberLines(1000).toSeq)
    assertEquals(os.read.bytes(y).toSeq, numberLines(1000).toSeq)

  // -----------------------------------------------------------------------------------------------
  // 7. An input that ends inside a frame (a writer that died mid-line)

  e2e.test("an input from a pipe that ends inside a line: passed on and reported; refused under --final-delimiter require"): env =>
    def run(options: String*): Running =
      val r = env.start(options ++ Seq("-", s"file:${env.dir / "out"}"))
      val stdin = r.process.getOutputStream
      stdin.write(bytes("a\nb\npart"))
      stdin.close()
      r
    val warned = run()
    assertEquals(warned.exit(Slow), 0, warned.err)
    assertEquals(os.read(env.dir / "out"), "a\nb\npart")
    assert(warned.err.contains("the input ended inside a frame (4 bytes after its last newline)"), warned.err)
    val quiet = run("--final-delimiter", "optional")
    assertEquals(quiet.exit(Slow), 0, quiet.err)
    assertEquals(quiet.err, "")
    val refused = run("--final-delimiter", "require")
    assertEquals(refused.exit(Slow), ExitCode.Runtime, refused.err)
    assertEquals(os.read(env.dir / "out"), "a\nb\n")
    assert(refused.err.contains("not passed on (--final-delimiter require)"), refused.err)
    // A regular file's last line is what the file holds: no report.
    val file = env.write("in", "a\nlast")
    val fromFile = env.start(Seq(s"file:$file", s"file:${env.dir / "copy"}"))
    assertEquals(fromFile.exit(Slow), 0, fromFile.err)
    assertEquals(fromFile.err, "")

  e2e.test("SIGKILL of the middle stage: the last stage under --final-delimiter require keeps whole lines only"): env =>
    val input = numberLines(4_000_000) // about 31 MB: the kill comes in the middle of the copy
    val in = env.write("in", input)
    for round <- 1 to 4 do
      val out = env.dir / s"out$round"
      val stages = Seq(Seq(s"file:$in", "-"), Seq("mux"), Seq("--final-delimiter", "require", "-", s"file:$out"))
      val builders = stages.zipWithIndex.map((a, i) => ProcessBuilder(Launch.command(a*).asJava).redirectError((env.dir / s"err$round-$i").toIO))
      builders.head.redirectInput(Redirect.from(File("/dev/null")))
      val procs = ProcessBuilder.startPipeline(builders.asJava).asScala.toSeq
      env.adopt(procs*)
      Support.eventually("the copy to be under way", Slow) { os.exists(out) && os.size(out) > 200_000 * round }
      procs(1).destroyForcibly()
      val last = exitOf(procs(2), "the last stage")
      val kept = os.read.bytes(out)
      assertWholePrefix("lines", kept, input)
      val err = os.read(env.dir / s"err$round-2")
      if last == ExitCode.Runtime then assert(err.contains("not passed on (--final-delimiter require)"), err)
      else assertEquals(last, 0, s"round $round: $err")

  // -----------------------------------------------------------------------------------------------
  // 8. One address: never overwrite a file that holds data; a new file is written in a script too

  e2e.test("while read f; do asyncpipe file:$f; done at a terminal refuses to overwrite the file it names"): env =>
    assume(os.exists(os.Path("/usr/bin/script")) || os.exists(os.Path("/bin/script")), "script (util-linux) is not installed")
    val k1 = env.write("k1", "precious\n")
    val loop = s"cd ${env.dir} && printf 'k1\\nk2\\n' | while read f; do ${shellCommand("file:$f").replace("'file:$f'", "\"file:$f\"")}; echo \"status $$?\"; done"
    val r = env.startCommand(Seq("script", "-qec", loop, "/dev/null"), stdin = Redirect.from(File("/dev/null")))
    assertEquals(r.exit(Slow), 0, r.out)
    assert(r.out.contains("status 2"), r.out)
    assertEquals(os.read(k1), "precious\n")

  e2e.test("the product's own example works in a script: producer | asyncpipe mux | asyncpipe file:NEW, stdout not a terminal"): env =>
    val out = env.dir / "out"
    val command = s"${shellCommand("tick:10ms,count=5")} | ${shellCommand("mux")} | ${shellCommand(s"file:$out")} > ${env.dir / "log"}"
    val r = env.startCommand(Seq("bash", "-c", command), stdin = Redirect.from(File("/dev/null")))
    assertEquals(r.exit(Slow), 0, r.err)
    assertEquals(os.read(out), "1\n2\n3\n4\n5\n")

  // -----------------------------------------------------------------------------------------------
  // .pipe files: bounded, and their encoding named

  e2e.test("a .pipe file that is /dev/zero is refused at once; one that is not UTF-8 is named so"): env =>
    os.symlink(env.dir / "zero.pipe", os.Path("/dev/zero"))
    val zero = Launch("run", (env.dir / "zero.pipe").toString)
    assertEquals(zero.exitCode, ExitCode.Runtime, zero.err)
    assert(zero.err.contains("a pipeline file holds at most 1024 KiB"), zero.err)
    val latin = env.write("latin.pipe", "tick:1ms,count=1 | file:caf".getBytes("UTF-8") ++ Array(0xe9.toByte) ++ bytes("\n"))
    val bad = Launch("run", latin.toString)
    assertEquals(bad.exitCode, ExitCode.Runtime, bad.err)
    assert(bad.err.contains("not UTF-8 text: byte 27 (line 1)"), bad.err)

object FaultTest:
  /** "1\n2\n...n\n" as bytes. */
  /** Fills the file system of `file` with `file`, then gives back `free` bytes of it. */
  def fillLeaving(file: os.Path, free: Int): Unit =
    val ch = java.nio.channels.FileChannel.open(file.toNIO, java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.WRITE)
    try
      val block = ByteBuffer.allocate(4096)
      try while true do { block.clear(); while block.hasRemaining do ch.write(block) }
      catch case _: java.io.IOException => () // full
      ch.truncate(ch.size() - free)
    finally ch.close()

  def numberLines(n: Int): Array[Byte] =
    val b = StringBuilder()
    for i <- 1 to n do b.append(i).append('\n')
    b.toString.getBytes("US-ASCII")

  /** The numbers 1 to n, a `len` frame each. */
  def numberFrames(n: Int): Array[Byte] = StageE2ETest.encodeLen((1 to n).map(i => i.toString.getBytes("US-ASCII")))

  /** Reads `in` to its end, a small piece at a time (a slow reader). */
  def readSlowly(in: InputStream): Array[Byte] =
    val out = java.io.ByteArrayOutputStream()
    val piece = new Array[Byte](4096)
    var n = in.read(piece)
    while n >= 0 do
      out.write(piece, 0, n)
      n = in.read(piece)
    out.toByteArray

  /** `out` is a prefix of `input` that ends on a whole frame of `frame` (and, when `complete`, it
    * may also be all of it).
    */
  def assertWholePrefix(frame: String, out: Array[Byte], input: Array[Byte], complete: Boolean = true)(using munit.Location): Unit =
    munit.Assertions.assert(out.length <= input.length, s"${out.length} bytes out of ${input.length} in")
    munit.Assertions.assert(java.util.Arrays.equals(out, 0, out.length, input, 0, out.length), "the output is not a prefix of the input")
    if !complete then munit.Assertions.assert(out.length < input.length, "everything came out: the fault did not happen")
    val whole = frame match
      case "len" =>
        var i = 0
        while i + 4 <= out.length && i + 4 + ByteBuffer.wrap(out, i, 4).getInt <= out.length do i += 4 + ByteBuffer.wrap(out, i, 4).getInt
        i == out.length
      case "nul" => out.isEmpty || out.last == 0
      case _     => out.isEmpty || out.last == '\n'
    munit.Assertions.assert(whole, s"the output (${out.length} bytes) ends inside a $frame frame: ...${new String(out.takeRight(20), "ISO-8859-1")}")
