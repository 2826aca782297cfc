package asyncpipe.cli.stages

import asyncpipe.cli.*

import asyncpipe.cli.command.*
import asyncpipe.cli.frames.*

import asyncpipe.async.Watchdog
import java.io.FileOutputStream
import java.nio.ByteBuffer
import java.nio.channels.FileChannel
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, StandardCopyOption, StandardOpenOption}
import java.util.concurrent.TimeUnit
import scala.concurrent.duration.{Duration, FiniteDuration}
import scala.jdk.CollectionConverters.*
import scala.util.Random

/** `file:PATH,follow` end to end: the built tool follows a file that the test,
  * as its writer, rotates (renames away and replaces), truncates and regrows, or creates late,
  * and every line must come out exactly once, in order, whole. The follower is stopped with
  * SIGTERM once the output holds what was written (a bounded poll of the output, no fixed sleep);
  * the only sleeps are the writer's, which make the workload's timing (rotations N ms apart). The
  * follower runs with the launcher's JVM flags (project.scala's stage-jvm-flags), as installed.
  *
  * Rotation runs have GNU `tail -F` follow the same file beside the tool, as the control (when
  * `tail` is installed). A follower must open each file while it still has its name, and one kept
  * off the CPU for longer than the rotations are apart cannot: it loses whole files, `tail -F`
  * too (on this 2-core machine, shared with other jobs at load averages of 15 to 40, tail lost
  * files in most runs of the 100 x 10 ms workload, and the tool about as often). So a run in which
  * the tool loses nothing but whole files is run again, up to [[FollowTest.Attempts]] runs. If
  * none is complete, the test fails, unless `tail -F` lost whole files in one of them too: then
  * the machine starved the followers while the test ran, and the test is skipped with the
  * figures. A run that loses part of a file, repeats, reorders or merges a line fails at once.
  * Without `tail`, every run is judged alone.
  *
  * `ASYNCPIPE_STRESS` (a multiplier, default 1) sizes the stress variant. With
  * `ASYNCPIPE_FOLLOW_REPORT` set, the rotation runs print their figures and the control's.
  */
class FollowTest extends munit.FunSuite with Watchdog:
  import FollowTest.*
  import StageE2ETest.{Env, Running, finalStats}

  override def watchdog: FiniteDuration = Duration(180, TimeUnit.SECONDS)
  override def munitTimeout = watchdog + Duration(10, TimeUnit.SECONDS)

  override def beforeAll(): Unit =
    assume(Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")

  private val e2e = FunFixture[Env](_ => Env(os.temp.dir(prefix = "asyncpipe-follow-")), _.close())

  // -----------------------------------------------------------------------------------------------
  // Rotation

  e2e.test("follow: 100 rotations 10 ms apart (file -> file.1 -> file.2 -> file.3, the oldest deleted) keep every line, once, in order"): env =>
    keepsEverything(env, Workload(rotations = 100, linesPerFile = 100, gapMillis = 10, keep = 3), "100 rotations 10 ms apart")

  e2e.test("follow: a writer that goes on appending to the renamed file until the new one appears, and files that end without a newline: nothing lost, each last line its own frame"): env =>
    keepsEverything(env, Workload(rotations = 40, linesPerFile = 50, gapMillis = 10, keep = 2, appendAfterRename = true, unterminatedEvery = 3),
      "40 rotations 10 ms apart, appends after the rename, unterminated last lines")

  e2e.test("follow (stress, ASYNCPIPE_STRESS): rotations 5 ms apart, lines of random length, appends after the rename, unterminated last lines"): env =>
    val w = Workload(rotations = 200 * Stress, linesPerFile = 60, gapMillis = 5, keep = 4, appendAfterRename = true,
      unterminatedEvery = 4, randomLengths = true)
    keepsEverything(env, w, s"stress: ${200 * Stress} rotations 5 ms apart")

  // -----------------------------------------------------------------------------------------------
  // Truncation

  e2e.test("follow: a truncate-and-regrow (to more than was there, at once) is a new start every time, 50 times: no line lost"): env =>
    val log = env.dir / "app.log"
    os.write(log, "ready\n")
    val r = startFollower(env, log)
    val expected = StringBuilder("ready\n")
    for c <- 0 until 50 do
      // The follower must have read what is there before it goes: no reader could have it later.
      val lines = if c % 2 == 0 then 30 + c else 5
      val batch = (0 until lines).map(i => s"cycle $c line $i ${"x" * (i % 7)}\n").mkString
      val ch = FileChannel.open(log.toNIO, StandardOpenOption.WRITE)
      try
        ch.truncate(0)
        ch.write(ByteBuffer.wrap(batch.getBytes(UTF_8)))
      finally ch.close()
      expected ++= batch
      awaitOutput(r, expected.length, s"cycle $c")
    stop(r)
    assertLines(r.out, expected.result())

  e2e.test("follow: a file truncated and written again with less than it held starts anew"): env =>
    val log = env.dir / "app.log"
    os.write(log, "one\ntwo\n")
    val r = startFollower(env, log, ready = "one\ntwo\n")
    os.write.over(log, "")
    os.write.append(log, "3\n")
    awaitOutput(r, "one\ntwo\n3\n".length, "the line after the truncation")
    stop(r)
    assertEquals(r.out, "one\ntwo\n3\n")

  // -----------------------------------------------------------------------------------------------
  // Unterminated last lines

  for (frame, t) <- Seq("lines" -> "\n", "nul" -> "\u0000") do
    e2e.test(s"--frame $frame follow: an unterminated last frame of a rotated file is a frame of its own (abc, def: not abcdef), counted as unterminated"): env =>
      val log = env.dir / "app.log"
      os.write(log, s"ready${t}abc")
      val r = startFollower(env, log, ready = s"ready$t", extra = Seq("--frame", frame, "--stats-json"))
      os.move(log, env.dir / "app.log.1")
      os.write(log, s"def$t")
      val want = s"ready${t}abc${t}def$t"
      awaitOutput(r, want.length, "abc and def")
      stop(r)
      assertEquals(r.out, want)
      val in = finalStats(r.err)("inputs")(0)
      assertEquals(in("frames").num.toLong, 3L, r.err)
      assertEquals(in("unterminated").num.toLong, 1L, r.err)

  e2e.test("follow: what is appended to the renamed file before the new one appears is read, its unterminated end a frame of its own"): env =>
    val log = env.dir / "app.log"
    os.write(log, "one\n")
    val r = startFollower(env, log, ready = "one\n")
    val old = FileOutputStream(log.toIO, true)
    try
      os.move(log, env.dir / "app.log.1")
      old.write("two\nabc".getBytes(UTF_8)) // the writer still has the old file
      os.write(log, "def\n")
      awaitOutput(r, "one\ntwo\nabc\ndef\n".length, "the old file's end and the new file")
    finally old.close()
    stop(r)
    assertEquals(r.out, "one\ntwo\nabc\ndef\n")

  e2e.test("--frame len follow: whole frames pass a rotation unchanged"): env =>
    val log = env.dir / "app.log"
    val frames = Seq("ready", "first", "", "third, longer").map(_.getBytes(UTF_8))
    os.write(log, StageE2ETest.encodeLen(frames.take(2)))
    val r = startFollower(env, log, ready = "", extra = Seq("--frame", "len"))
    awaitOutputBytes(r, StageE2ETest.encodeLen(frames.take(2)).length, "the first two frames")
    os.move(log, env.dir / "app.log.1")
    os.write(log, StageE2ETest.encodeLen(frames.drop(2)))
    awaitOutputBytes(r, StageE2ETest.encodeLen(frames).length, "all four frames")
    stop(r)
    assertEquals(StageE2ETest.decodeLen(os.read.bytes(r.stdoutFile)).map(String(_, UTF_8)), frames.map(String(_, UTF_8)))

  e2e.test("--frame len follow: a rotated file that ends inside a frame fails the input (exit 1, the address and the reason)"): env =>
    val log = env.dir / "app.log"
    val whole = StageE2ETest.encodeLen(Seq("ready".getBytes(UTF_8)))
    os.write(log, whole ++ StageE2ETest.encodeLen(Seq("cut short".getBytes(UTF_8))).take(7))
    val r = startFollower(env, log, ready = "", extra = Seq("--frame", "len"))
    awaitOutputBytes(r, whole.length, "the whole frame")
    os.move(log, env.dir / "app.log.1")
    os.write(log, whole)
    assertEquals(r.exit(), ExitCode.Runtime, r.err)
    assertEquals(os.read.bytes(r.stdoutFile).toSeq, whole.toSeq)
    assert(r.err.contains(s"file:$log,follow: the stream ended inside a len frame at byte 9: 3 of its 9 payload bytes came (the file was rotated or truncated there)"), r.err)

  // -----------------------------------------------------------------------------------------------
  // Files that are not there

  e2e.test("follow: a file absent at the start is waited for (a notice says so), then read once it is created"): env =>
    val log = env.dir / "later.log"
    val r = env.startCommand(follower(s"file:$log,follow", "-"))
    awaitErr(r, "does not exist")
    assert(r.alive, r.err)
    os.write(log, "a\nb\n")
    awaitOutput(r, 4, "the lines of the created file")
    stop(r)
    assertEquals(r.out, "a\nb\n")

  e2e.test("follow: a file in a directory absent at the start is read once the directory and the file are created"): env =>
    val log = env.dir / "sub" / "later.log"
    val r = env.startCommand(follower(s"file:$log,follow", "-"))
    awaitErr(r, "does not exist")
    os.makeDir(env.dir / "sub")
    os.write(log, "a\n")
    awaitOutput(r, 2, "the line of the created file")
    stop(r)
    assertEquals(r.out, "a\n")

  e2e.test("follow: a file deleted without a replacement is waited for; the next one is read from its start"): env =>
    val log = env.dir / "app.log"
    os.write(log, "a\n")
    val r = startFollower(env, log, ready = "a\n")
    os.remove(log)
    os.write(log, "b\n")
    awaitOutput(r, 4, "the line of the new file")
    stop(r)
    assertEquals(r.out, "a\nb\n")

  e2e.test("follow: a symbolic link is followed to its file: the file's rotation, and the link pointed elsewhere"): env =>
    val link = env.dir / "current.log"
    os.makeDir(env.dir / "logs")
    val target = env.dir / "logs" / "app.log"
    os.write(target, "ready\n")
    os.symlink(link, target)
    val r = startFollower(env, link)
    os.move(target, env.dir / "logs" / "app.log.1")
    os.write(target, "rotated\n")
    awaitOutput(r, "ready\nrotated\n".length, "the rotated target's line")
    val other = env.dir / "logs" / "other.log"
    os.write(other, "other\n")
    Files.move(Files.createSymbolicLink((env.dir / "next.log").toNIO, other.toNIO), link.toNIO, StandardCopyOption.ATOMIC_MOVE)
    awaitOutput(r, "ready\nrotated\nother\n".length, "the new target's line")
    stop(r)
    assertEquals(r.out, "ready\nrotated\nother\n")

  // -----------------------------------------------------------------------------------------------
  // Stopping, in process

  test("in process: close() ends the pump at once, and the finder thread and every descriptor it held (inotify's too) go"):
    val dir = os.temp.dir(prefix = "asyncpipe-follow-")
    try
      val log = dir / "app.log"
      os.write(log, "one\n")
      // This JVM's descriptors of the test's files and of inotify instances.
      def descriptors = os.list(os.Path("/proc/self/fd")).count { fd =>
        scala.util.Try(Files.readSymbolicLink(fd.toNIO).toString).toOption.exists(t => t.startsWith(dir.toString) || t.contains("inotify"))
      }
      def finders = Thread.getAllStackTraces.keySet.asScala.count(_.getName.startsWith("asyncpipe-follow"))
      val (fdsBefore, findersBefore) = (descriptors, finders)
      val follow = Follow(log.toNIO, "file:app.log,follow", Framing.Lines, BufferPool(4096, 4), Counters("in"), countFrames = true)
      follow.open()
      val frames = java.util.concurrent.LinkedBlockingQueue[String]()
      val out = new asyncpipe.async.SendableChannel[FrameBatch]:
        def send(x: FrameBatch)(using asyncpipe.async.Async): Unit =
          x.foreach((bytes, offset, length, _) => frames.put(String(bytes, offset, length, UTF_8)))
          x.release()
        def trySend(x: FrameBatch): Boolean = throw UnsupportedOperationException("a follow pump sends")
      val pump = Thread.ofPlatform().start(() => asyncpipe.async.Async.blocking(follow.pump(out)))
      assertEquals(frames.poll(Bound, TimeUnit.MILLISECONDS), "one")
      os.move(log, dir / "app.log.1") // the old file stays open, a new one is opened and queued
      os.write(log, "two\n")
      assertEquals(frames.poll(Bound, TimeUnit.MILLISECONDS), "two")
      assertEquals(finders, findersBefore + 1)
      val stopping = System.nanoTime()
      follow.close()
      assert(pump.join(java.time.Duration.ofMillis(Bound)), "the pump did not end")
      val stopped = (System.nanoTime() - stopping) / 1_000_000
      assert(stopped < 1_000, s"the pump took $stopped ms to end")
      // The finder ends within its poll period (FollowPollMillis), closing the inotify descriptor.
      val deadline = System.nanoTime() + Bound * 1_000_000
      while (finders > findersBefore || descriptors > fdsBefore) && System.nanoTime() < deadline do
        java.util.concurrent.locks.LockSupport.parkNanos(1_000_000)
      assertEquals((finders, descriptors), (findersBefore, fdsBefore), "finder threads and open descriptors, against before")
    finally os.remove.all(dir)

  // -----------------------------------------------------------------------------------------------
  // Helpers

  /** Starts the tool following `log` (which must hold `ready`) to stdout, and returns once `ready`
    * is out: from then on the follower is following.
    */
  private def startFollower(env: Env, log: os.Path, ready: String = "ready\n", extra: Seq[String] = Nil)(using munit.Location): Running =
    val r = env.startCommand(follower(extra ++ Seq(s"file:$log,follow", "-")*))
    if ready.nonEmpty then awaitOutput(r, ready.length, s"'${ready.trim}' to be read")
    r

  /** Runs `w` until a run keeps every line, judged by the rule the class states. */
  private def keepsEverything(env: Env, w: Workload, what: String)(using munit.Location): Unit =
    var runs = Vector(rotations(env, w, env.dir / "run-1"))
    def last = runs.last._1
    while !last.complete && last.onlyWholeFilesLost && runs.size < Attempts do
      runs :+= rotations(env, w, env.dir / s"run-${runs.size + 1}")
    def told = runs.zipWithIndex.map { case ((run, control), i) =>
      s"run ${i + 1}: ${run.summary}" + control.fold("")(c => s"; tail -F beside it: ${c.controlSummary}")
    }.mkString("\n")
    report(what, told)
    if !last.complete then
      val starved = runs.exists((_, c) => c.exists(_.filesMissing.nonEmpty))
      if !last.onlyWholeFilesLost || !starved then fail(s"the follower's output is not what was written:\n$told${last.firstDifference}")
      else
        val why = s"tail -F lost whole files too: the machine kept followers off the CPU for longer than the rotations are apart:\n$told"
        println(s"[follow] skipped: $what: $why") // munit does not show an assumption's message
        assume(false, why)

  /** One run of `w` in a new directory `dir`: the tool's, and GNU tail -F's beside it if installed. */
  private def rotations(env: Env, w: Workload, dir: os.Path)(using munit.Location): (Run, Option[Run]) =
    os.makeDir.all(dir)
    val log = dir / "app.log"
    os.write(log, "ready\n")
    val r = env.startCommand(follower(s"file:$log,follow", "-"))
    val control = Option.when(TailInstalled)(env.startCommand(Seq("tail", "-F", "-n", "+1", log.toString)))
    for f <- r +: control.toSeq do awaitOutput(f, "ready\n".length, "a follower to read its first line")
    val started = System.nanoTime()
    val expected = "ready\n" + w.run(log)
    val written = System.nanoTime()
    // Not awaitOutput: a follower that lost lines never gets there. It is done when its output has
    // all, or has not grown for Quiet ms; the run is judged by the caller.
    def settle(f: Running): Long =
      val deadline = written + Bound * 1_000_000
      var (size, grew) = (-1L, System.nanoTime())
      while size < expected.length && System.nanoTime() < deadline && System.nanoTime() - grew < Quiet * 1_000_000 && f.alive do
        java.util.concurrent.locks.LockSupport.parkNanos(1_000_000)
        val now = os.size(f.stdoutFile)
        if now != size then { size = now; grew = System.nanoTime() }
      (System.nanoTime() - written) / 1_000_000
    val caughtUp = settle(r)
    stop(r)
    val run = Run(expected, r.out, (written - started) / 1_000_000, caughtUp)
    (run, control.map { c =>
      val caughtUp = settle(c)
      stop(c, 143)
      Run(expected, c.out, (written - started) / 1_000_000, caughtUp)
    })

  private def report(name: String, text: String): Unit =
    if Reporting then println(s"[follow] $name:\n$text")

object FollowTest:
  import StageE2ETest.Running

  /** The stress multiplier: `ASYNCPIPE_STRESS`, default 1. */
  val Stress: Int = sys.env.get("ASYNCPIPE_STRESS").flatMap(_.trim.toIntOption).filter(_ >= 1).getOrElse(1)
  val Reporting: Boolean = sys.env.contains("ASYNCPIPE_FOLLOW_REPORT")
  /** How long the output may take to show what was written (a busy 2-core machine). */
  val Bound: Long = 20_000
  /** How long a rotation run's output may stay the same before the follower is taken to be done. */
  val Quiet: Long = 3_000
  /** How many times a rotation run that lost only whole files is run in all (see the class). */
  val Attempts: Int = 3
  /** Whether GNU tail is here, to follow beside the tool as the control. */
  lazy val TailInstalled: Boolean =
    scala.util.Try(os.proc("tail", "--version").call(stderr = os.Pipe).out.text().contains("GNU")).getOrElse(false)

  /** The tool's command line as the launcher makes it for a stage: its JVM flags too. */
  def follower(args: String*): Seq[String] =
    val plain = Launch.command(args*)
    plain.head +: (BuildInfo.stageJvmFlags ++ plain.tail)

  /** Rotations by a writer: `rotations` times, write `linesPerFile` lines to the file, wait
    * `gapMillis`, then rotate as logrotate does: delete `file.keep`, rename `file.k` to `file.k+1`
    * down to `file` to `file.1`, and create the file anew. With `appendAfterRename`, the writer
    * adds lines to the renamed file before the new one exists (as a logger does until it reopens);
    * every `unterminatedEvery`-th file ends without its newline.
    */
  final case class Workload(rotations: Int, linesPerFile: Int, gapMillis: Long, keep: Int,
      appendAfterRename: Boolean = false, unterminatedEvery: Int = 0, randomLengths: Boolean = false):
    /** Runs the writer on `log` (which holds "ready\n"); the output expected after "ready\n". */
    def run(log: os.Path): String =
      val rnd = Random(rotations * 31 + linesPerFile)
      val expected = StringBuilder()
      def line(f: Int, i: Int) = s"file $f line $i" + (if randomLengths then " " + "y" * rnd.nextInt(300) else "")
      for f <- 0 to rotations do
        val out = FileOutputStream(log.toIO, true)
        try
          val n = linesPerFile
          // (The last file ends whole: no rotation ends its last line.)
          val unterminated = unterminatedEvery > 0 && f % unterminatedEvery == unterminatedEvery - 1 && f < rotations
          for i <- 0 until n do
            val text = line(f, i)
            val last = i == n - 1
            val tail = if last && unterminated && !appendAfterRename then "" else "\n"
            out.write((text + tail).getBytes(UTF_8)) // one write a line, as a logger does
            expected ++= text + "\n"
          if f < rotations then
            Thread.sleep(gapMillis)
            os.remove(log / os.up / s"${log.last}.$keep")
            for k <- keep - 1 to 1 by -1 do
              val from = log / os.up / s"${log.last}.$k"
              if os.exists(from) then os.move(from, log / os.up / s"${log.last}.${k + 1}")
            os.move(log, log / os.up / s"${log.last}.1")
            if appendAfterRename then
              val text = s"file $f after the rename"
              out.write((text + (if unterminated then "" else "\n")).getBytes(UTF_8))
              expected ++= text + "\n"
        finally out.close()
      expected.result()

  /** One run of a workload: what was expected and what came out. */
  final case class Run(expected: String, got: String, writeMillis: Long, catchUpMillis: Long):
    private val want = expected.linesIterator.toSeq
    private val have = got.linesIterator.toSeq
    private def file(line: String): Option[String] = Option.when(line.startsWith("file "))(line.split(' ')(1))
    private val lostLines = want.toSet -- have.toSet
    private val lostFiles = lostLines.flatMap(file)
    def complete: Boolean = got == expected
    /** Whether all that is wrong is whole files missing (what a starved follower does). */
    def onlyWholeFilesLost: Boolean = have == want.filterNot(l => file(l).exists(lostFiles.contains))
    def summary: String =
      val files = want.flatMap(file).distinct.size
      s"${want.size} lines written in $files files over $writeMillis ms; ${have.size} lines out, ${lostLines.size} lost " +
        s"(all or part of ${lostFiles.size} files${if lostFiles.nonEmpty && onlyWholeFilesLost then ", whole files only" else ""}" +
        s"${if lostFiles.isEmpty then "" else lostFiles.toSeq.sortBy(_.toIntOption).take(8).mkString(": ", " ", if lostFiles.size > 8 then " ..." else "")}), " +
        s"${have.size - have.distinct.size} repeated, ${if complete then "byte-identical" else "NOT identical"}; " +
        (if complete then s"caught up ${catchUpMillis} ms after the writer ended" else s"waited ${catchUpMillis} ms after the writer ended")
    /** The files none of whose lines is in the output, not even merged into another (tail merges
      * an unterminated last line with the next file's first).
      */
    def filesMissing: Set[String] =
      want.flatMap(file).distinct.filterNot(f => got.contains(s"file $f line ") || got.contains(s"file $f after")).toSet
    def controlSummary: String =
      s"${have.size} lines out, ${lostLines.size} lost, ${filesMissing.size} whole files missing"
    def firstDifference: String =
      val i = want.indices.find(i => i >= have.size || have(i) != want(i))
      i.fold("")(i => s"; first difference at line $i: expected '${want(i).take(60)}', got '${have.lift(i).fold("<end>")(_.take(60))}'")

  def awaitOutput(r: Running, bytes: Long, what: String)(using munit.Location): Unit =
    awaitOutputBytes(r, bytes, what)

  /** Waits (bounded) until `r`'s stdout holds at least `bytes` bytes. */
  def awaitOutputBytes(r: Running, bytes: Long, what: String)(using munit.Location): Unit =
    val deadline = System.nanoTime() + Bound * 1_000_000
    while (!os.exists(r.stdoutFile) || os.size(r.stdoutFile) < bytes) && r.alive && System.nanoTime() < deadline do
      java.util.concurrent.locks.LockSupport.parkNanos(1_000_000)
    val size = if os.exists(r.stdoutFile) then os.size(r.stdoutFile) else 0L
    if size < bytes then
      val after = if r.alive then s"$Bound ms" else "the follower exited"
      munit.Assertions.fail(s"waiting for $what: stdout has $size bytes, not $bytes, after $after:\n${r.out.takeRight(400)}\nstderr: ${r.err}")

  /** Waits (bounded) until `r`'s stderr contains `text`. */
  def awaitErr(r: Running, text: String)(using munit.Location): Unit =
    val deadline = System.nanoTime() + Bound * 1_000_000
    while !r.err.contains(text) && r.alive && System.nanoTime() < deadline do
      java.util.concurrent.locks.LockSupport.parkNanos(1_000_000)
    munit.Assertions.assert(r.err.contains(text), s"stderr does not say '$text': ${r.err}")

  /** Stops `r` with SIGTERM: it must exit with `status`, and say nothing on stderr but statistics. */
  def stop(r: Running, status: Int = ExitCode.Terminated)(using munit.Location): Unit =
    munit.Assertions.assert(r.alive, s"the follower exited early, with ${r.exit()}: ${r.err}")
    StageE2ETest.kill("TERM", r.process.pid)
    munit.Assertions.assertEquals(r.exit(), status, r.err)

  /** `got` is `expected`, line for line (a failure shows the first difference, not 10,000 lines). */
  def assertLines(got: String, expected: String)(using munit.Location): Unit =
    if got != expected then
      val (g, e) = (got.linesIterator.toSeq, expected.linesIterator.toSeq)
      val i = e.indices.find(i => i >= g.size || g(i) != e(i)).getOrElse(e.size)
      munit.Assertions.fail(s"${e.size} lines expected, ${g.size} came, ${(e.toSet -- g.toSet).size} lost; " +
        s"first difference at line $i: expected '${e.lift(i).getOrElse("<end>")}', got '${g.lift(i).getOrElse("<end>")}'")
