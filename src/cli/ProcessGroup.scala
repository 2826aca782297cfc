package asyncpipe.cli

import asyncpipe.async.{Future, Promise}
import java.io.{File, FileInputStream, IOException, InputStream}
import java.lang.ProcessBuilder.Redirect
import java.nio.file.Path
import java.util.{ServiceConfigurationError, ServiceLoader}
import java.util.concurrent.ConcurrentHashMap
import scala.util.Success

/** Where a command name leads, found the way a shell finds it: a name with a '/' is a path, any
  * other is looked for in each directory of `PATH`. Either the path, or why it cannot run and
  * the shell's status for that (127 not found, 126 found but not executable).
  */
object CommandPath:
  /** `PATH`, or "" when it is not set. */
  def searchPath: String =
    val p = System.getenv("PATH")
    if p == null then "" else p

  def resolve(name: String, path: String = CommandPath.searchPath): Either[(String, Int), Path] =
    if name.contains('/') then
      val f = File(name)
      if !f.exists then Left(("No such file or directory", ExitCode.NotFound))
      else if f.isDirectory then Left(("Is a directory", ExitCode.NotExecutable))
      else if !f.canExecute then Left(("Permission denied", ExitCode.NotExecutable))
      else Right(f.toPath)
    else
      // As shells do: a file that is there but not executable is 126, nothing at all 127.
      var found: Either[(String, Int), Path] = Left(("command not found", ExitCode.NotFound))
      val dirs = path.split(":", -1)
      var i = 0
      while i < dirs.length do
        val f = File(if dirs(i).isEmpty then "." else dirs(i), name)
        if f.isFile then
          if f.canExecute then return Right(f.toPath)
          found = Left(("Permission denied", ExitCode.NotExecutable))
        i += 1
      found

/** The two programs that give a command a process group of its own, since the JDK can neither
  * start a process in a new session nor signal a group: util-linux `setsid` (the JVM's child is
  * never a group leader, so `setsid` calls setsid(2) and execs the command in the same pid: pid ==
  * process group id == session id) and `kill` (procps or util-linux: `kill -s SIG -- -PGID`).
  */
final class GroupTools(val setsid: String, val kill: String)

object GroupTools:
  def find(): Either[String, GroupTools] =
    def missing(name: String, what: String) =
      Left(s"'$name' ($what) is not on PATH: it is needed to run a command in a process group of its own")
    (CommandPath.resolve("setsid"), CommandPath.resolve("kill")) match
      case (Right(setsid), Right(kill)) => Right(GroupTools(setsid.toString, kill.toString))
      case (Left(_), _)                 => missing("setsid", "util-linux")
      case (_, Left(_))                 => missing("kill", "procps or util-linux")

/** One command running in a session and process group of its own, whose leader it is. Its stdin
  * is /dev/null (repeated runs cannot share one input), its stderr asyncpipe's, and its stdout a
  * pipe for [[Records]].
  */
final class ProcessGroup private (process: Process, tools: GroupTools):
  /** The process group id: the command's pid. */
  val id: Long = process.pid()

  /** The command's exit status once it ends (128 + N when a signal N ended it). */
  val exited: Future[Int] =
    // A thread of its own in waitFor rather than onExit(), which would start the common
    // ForkJoinPool for its callback: a few milliseconds of every start-up.
    val p = Promise[Int]()
    Thread.ofVirtual().name("asyncpipe-exit").start { () =>
      var status = -1
      while status < 0 do
        try status = process.waitFor()
        catch case _: InterruptedException => () // nobody interrupts it; the exit is still to come
      p.complete(Success(status))
    }
    p.future

  def stdout: InputStream = process.getInputStream

  /** Sends signal `name` (TERM, INT, KILL) to every process of the group. In the moment between
    * the start and setsid(2) there is no group yet: then the signal goes to the pid, which still
    * is `setsid` itself, so the command is never started.
    */
  def signal(name: String): Unit =
    if !ProcessGroup.kill(tools, name, s"-$id") then ProcessGroup.kill(tools, name, id.toString)

  /** Whether any process of the group is still running (zombies count as gone); Linux /proc. It
    * reads the stat file of every process on the machine after each run, mostly in a cold JVM: one
    * buffer for all, parsed in place.
    */
  def alive: Boolean =
    val pids = File("/proc").list()
    val buffer = new Array[Byte](ProcessGroup.StatPrefix)
    var i = 0
    while pids != null && i < pids.length do
      val pid = pids(i)
      if pid.nonEmpty && pid(0).isDigit && ProcessGroup.inGroup(pid, id, buffer) then return true
      i += 1
    false

object ProcessGroup:
  /** Readies the JDK for this JVM's first process start on a thread of its own, while the caller
    * goes on setting up; it gains what a free core allows. It initializes `ProcessBuilder.Redirect`
    * (whose initializer finds the OS by reflection), and it makes the lookup that the first
    * `ProcessBuilder.start` would make after the command started: the start asks the system logger
    * "java.lang.ProcessBuilder" whether to log (JDK 24 and later), and a JVM's first system logger
    * looks for a logging back end, a service lookup that opens the JDK's module image and the jar
    * on the class path, asyncpipe's of thousands of entries (about 10 ms in a cold JVM); the
    * logger's own lookup then finds both open. Without a process start after it, it costs that
    * work and nothing else.
    */
  def prepare(): Unit =
    val ready: Runnable = () =>
      val _ = Redirect.INHERIT
      try ServiceLoader.load(classOf[System.LoggerFinder], ClassLoader.getSystemClassLoader).iterator().hasNext
      catch case _: ServiceConfigurationError => () // the start reports it, if it comes again there
    Thread.ofPlatform().daemon().name("asyncpipe-prepare").start(ready)

  /** Starts `command` in a group of its own; an IOException if it cannot be started. */
  def start(command: Seq[String], tools: GroupTools): ProcessGroup =
    val builder = ProcessBuilder((tools.setsid +: command)*)
      .redirectInput(Redirect.from(File("/dev/null")))
      .redirectError(Redirect.INHERIT)
      .redirectOutput(Redirect.PIPE)
    ProcessGroup(builder.start(), tools)

  private def kill(tools: GroupTools, signal: String, target: String): Boolean =
    try
      ProcessBuilder(tools.kill, "-s", signal, "--", target)
        .redirectInput(Redirect.from(File("/dev/null")))
        .redirectOutput(Redirect.DISCARD)
        .redirectError(Redirect.DISCARD)
        .start().waitFor() == 0
    catch case _: IOException => false

  /** How much of /proc/PID/stat is read: its fields up to the process group and more. */
  private val StatPrefix = 512

  /** Whether process `pid` is in group `pgid` and not a zombie, from /proc/PID/stat: "pid (comm)
    * state ppid pgrp ...", where comm may hold spaces and parentheses (so the last ')' ends it).
    * `buffer`: room for [[StatPrefix]] bytes.
    */
  private def inGroup(pid: String, pgid: Long, buffer: Array[Byte]): Boolean =
    val n =
      try
        val in = FileInputStream("/proc/" + pid + "/stat")
        try in.readNBytes(buffer, 0, StatPrefix)
        finally in.close()
      catch case _: IOException => return false // gone meanwhile
    var at = n - 1
    while at >= 0 && buffer(at) != ')' do at -= 1
    val state = at + 2
    if at < 0 || state >= n || buffer(state) == 'Z' then return false
    at = state + 2 // the first digit of ppid
    while at < n && buffer(at) != ' ' do at += 1
    at += 1 // the first digit of pgrp
    val first = at
    var pgrp = 0L
    while at < n && buffer(at) >= '0' && buffer(at) <= '9' do
      pgrp = pgrp * 10 + (buffer(at) - '0')
      at += 1
    at > first && pgrp == pgid

/** The process groups running now, so that a stop can reach them all (a signal forwarded, or
  * SIGKILL when the user will not wait). A group added after a stop is signalled as it joins.
  */
final class LiveGroups:
  private val groups = ConcurrentHashMap.newKeySet[ProcessGroup]()
  @volatile private var stopSignal: String | Null = null

  def add(g: ProcessGroup): Unit =
    groups.add(g)
    val s = stopSignal
    if s != null then g.signal(s)

  def remove(g: ProcessGroup): Unit = groups.remove(g)

  /** Sends `signal` to every group now, and to each one added later. */
  def stop(signal: String): Unit =
    stopSignal = signal
    groups.forEach(_.signal(signal))

  /** SIGKILL to every group now: for a halt that cannot wait. */
  def killAll(): Unit = groups.forEach(_.signal("KILL"))
