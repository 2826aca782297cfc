package asyncpipe.cli.tasks

import asyncpipe.cli.command.*

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

/** The system logger the JDK asks at every `ProcessBuilder.start` (JDK 24 and later) whether to
  * log the start, made silent before the first start, when that changes nothing the user sees.
  *
  * Why: the JDK finds that logger (private field `ProcessBuilder.LOGGER`) on the first start, and
  * the JVM's first system logger looks for a logging back end: a service lookup that opens the
  * several-thousand-entry assembly jar and then sets up java.util.logging (ADR 0008, "Start-up").
  * `start` returns only after that, so it was the longest part of `retry -- true` (the command
  * itself runs meanwhile). By default that logger logs nothing at the levels the start asks for
  * (java.util.logging's root level is INFO, the start logs at DEBUG): the silent one gives the
  * same answer without the lookup. It is not set when the user configured JDK logging
  * ([[configured]]), or when `java.lang` is not open to asyncpipe (the launcher passes
  * `--add-opens=java.base/java.lang=ALL-UNNAMED`, project.scala; the AOT cache is trained with
  * it, as it must be to be used) or the JDK has no such field: then nothing changes.
  */
object StartLog:
  /** The system properties that configure the JDK's logging: with any of them set, the logger
    * might log starts, so the real one is kept.
    */
  val Properties: Seq[String] = Seq("java.util.logging.config.file", "java.util.logging.config.class", "jdk.system.logger.level")

  def configured(property: String => String | Null): Boolean =
    var i = 0
    while i < Properties.length && property(Properties(i)) == null do i += 1
    i < Properties.length

  /** Sets the silent logger unless the JDK's was found already; whether the JDK now has it. */
  def silence(): Boolean =
    if configured(System.getProperty(_)) then false
    else
      try
        val field = classOf[ProcessBuilder].getDeclaredField("LOGGER")
        if field.getType != classOf[System.Logger] || !java.lang.reflect.Modifier.isStatic(field.getModifiers) then false
        else
          field.setAccessible(true)
          if field.get(null) == null then field.set(null, Silent)
          field.get(null) eq Silent
      catch case _: ReflectiveOperationException | _: RuntimeException => false // not open to us, or another JDK

  /** Logs nothing, at any level. */
  object Silent extends System.Logger:
    def getName: String = "java.lang.ProcessBuilder"
    def isLoggable(level: System.Logger.Level): Boolean = false
    def log(level: System.Logger.Level, bundle: java.util.ResourceBundle, msg: String, thrown: Throwable): Unit = ()
    def log(level: System.Logger.Level, bundle: java.util.ResourceBundle, format: String, params: Object*): Unit = ()

/** One command running in a session and process group of its own, whose leader it is (the
  * session's id and the group's are the command's pid). Its stdin is /dev/null (repeated runs
  * cannot share one input), its stderr asyncpipe's, and its stdout a pipe for [[Records]].
  *
  * Everything the command starts stays in its session unless it calls setsid(2) itself (a daemon
  * does): a process that makes a process group of its own (setpgid(2): `set -m` in a shell, or
  * `timeout`, which makes one for its child) leaves the group but not the session. So every
  * signal to the run, and the look for what is left of it, is for the whole session: the group by
  * its id, each other group of the session found in /proc ([[ProcStat]]).
  */
final class ProcessGroup private (process: Process, tools: GroupTools, startedAfter: PidClock | Null):
  /** The session id, and the id of the command's own process group: the command's pid. */
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

  /** Sends signal `name` (TERM, INT, HUP, KILL) to every process of the session, in one `kill`:
    * to the command's group (`-ID`) and to each other group of the session that /proc shows now,
    * each by its group id (`-PGID`), so that a process that forks meanwhile in any of them gets
    * the signal in its child too (the kernel delivers a signal to a group and a fork in it
    * atomically). A process that moves to a new group after the look escapes this signal: the
    * callers look again and signal again ([[alive]]).
    *
    * A group's id stays taken while any process is in the group, and /proc is read just before
    * the signal (never kept from an earlier look), so a signal reaches a process of another
    * session only if the group emptied and the kernel handed out every other free pid in the
    * milliseconds before `kill` runs.
    *
    * In the moment between the start and setsid(2) there is no session or group yet (and /proc
    * shows none): then the signal goes to the pid, which still is `setsid` itself, so the
    * command is never started.
    */
  def signal(name: String): Unit =
    val others = otherGroups()
    if others.isEmpty then
      if !ProcessGroup.kill(tools, name, Seq(s"-$id")) then ProcessGroup.kill(tools, name, Seq(id.toString))
    else
      // The session exists, its own group may be empty already: kill(1) goes on past a target
      // that is gone, and reports it in its status, which is of no use here.
      val targets = new Array[String](others.length + 1)
      targets(0) = s"-$id"
      var i = 0
      while i < others.length do
        targets(i + 1) = s"-${others(i)}"
        i += 1
      ProcessGroup.kill(tools, name, targets.toSeq)

  /** Whether any process of the session is still running (zombies count as gone); Linux /proc.
    * It runs after each run, mostly in a cold JVM: it reads the stat files only of the pids
    * handed out since the command started when [[PidClock]] can tell them ("every process"
    * otherwise), with one buffer for all, parsed in place.
    */
  def alive: Boolean = scan(null)

  /** The ids of the session's process groups other than the command's, each once. */
  private[cli] def otherGroups(): Array[Long] =
    val found = LongSet()
    scan(found)
    found.toArray

  /** Looks through the processes that can be in the session (see [[PidClock]]): whether any of
    * them is, and not a zombie. With `groups`, it looks through all of them and adds the group
    * of each one not in the command's own group; without, it stops at the first one found.
    */
  private def scan(groups: LongSet | Null): Boolean =
    val window = PidClock.window(startedAfter, PidClock.read())
    val pids = File("/proc").list()
    val buffer = new Array[Byte](ProcStat.Prefix)
    val ids = new Array[Long](2)
    var any = false
    var i = 0
    while pids != null && i < pids.length && (groups != null || !any) do
      val pid = PidClock.parsePid(pids(i))
      if pid > 0 && (window == null || window.holds(pid)) && ProcStat.read(pids(i), buffer, ids) && ids(1) == id then
        any = true
        if groups != null && ids(0) != id then groups.add(ids(0))
      i += 1
    any

/** A few distinct longs (the group ids of one session), in the order they were added. */
private final class LongSet:
  private var values = new Array[Long](4)
  private var size = 0

  def add(v: Long): Unit =
    var i = 0
    while i < size && values(i) != v do i += 1
    if i == size then
      if size == values.length then values = java.util.Arrays.copyOf(values, 2 * size)
      values(size) = v
      size += 1

  def toArray: Array[Long] = java.util.Arrays.copyOf(values, size)

object ProcessGroup:
  /** Readies the JDK for this JVM's first process start on a thread of its own, while the caller
    * goes on setting up; it gains what a free core allows. `Main` calls it first thing for a
    * task verb. It gives the JDK's process-start logger a silent one ([[StartLog]]), or where
    * that cannot be done makes the logger's back-end lookup in advance, and it initializes
    * `ProcessBuilder.Redirect` (whose initializer finds the OS by reflection) and the JDK's
    * process classes (launch mechanism, reaper thread pool). Without a process start after it,
    * it costs that work and nothing else.
    */
  def prepare(): Unit =
    val ready: Runnable = () =>
      if !StartLog.silence() then
        try ServiceLoader.load(classOf[System.LoggerFinder], ClassLoader.getSystemClassLoader).iterator().hasNext
        catch case _: ServiceConfigurationError => () // the start reports it, if it comes again there
      val _ = Redirect.INHERIT
      try
        Class.forName("java.lang.ProcessImpl")
        Class.forName("java.lang.ProcessHandleImpl")
      catch case _: ClassNotFoundException => () // another JDK: its start does what it needs
    Thread.ofPlatform().daemon().name("asyncpipe-prepare").start(ready)

  /** Starts `command` in a session and group of its own; an IOException if it cannot be started.
    * Its stdin is /dev/null, or with `input` a pipe that a thread of its own fills with `input`
    * and closes (a command that stops reading early, or ends, just ends that thread).
    */
  def start(command: Seq[String], tools: GroupTools, input: Array[Byte] | Null = null): ProcessGroup =
    val builder = ProcessBuilder((tools.setsid +: command)*)
      .redirectInput(if input == null then Redirect.from(File("/dev/null")) else Redirect.PIPE)
      .redirectError(Redirect.INHERIT)
      .redirectOutput(Redirect.PIPE)
    val before = PidClock.read() // before the leader's pid is handed out
    val process = builder.start()
    if input != null then feed(process.getOutputStream, input)
    ProcessGroup(process, tools, before)

  private def feed(stdin: java.io.OutputStream, input: Array[Byte]): Unit =
    Thread.ofVirtual().name("asyncpipe-stdin").start { () =>
      try stdin.write(input)
      catch case _: IOException => () // the command closed its stdin or ended: it has what it read
      finally
        try stdin.close() catch case _: IOException => ()
    }

  /** `kill -s SIGNAL -- TARGET...`; whether it succeeded for every target. It waits for `kill` to
    * end even on an interrupted thread (and leaves the interrupt set): a run being cancelled is
    * just when its signal must be sent and done before the caller goes on.
    */
  private def kill(tools: GroupTools, signal: String, targets: Seq[String]): Boolean =
    try
      val killing = ProcessBuilder((Seq(tools.kill, "-s", signal, "--") ++ targets)*)
        .redirectInput(Redirect.from(File("/dev/null")))
        .redirectOutput(Redirect.DISCARD)
        .redirectError(Redirect.DISCARD)
        .start()
      var interrupted = false
      var status = -1
      while status < 0 do
        try status = killing.waitFor()
        catch case _: InterruptedException => interrupted = true
      if interrupted then Thread.currentThread.interrupt()
      status == 0
    catch case _: IOException => false

/** The fields of /proc/PID/stat that tell a process's process group and session: "pid (comm)
  * state ppid pgrp session ...", where comm may hold spaces and parentheses (up to 15 bytes of
  * any kind but NUL), so the last ')' ends it: nothing after comm is anything but numbers and
  * the state's letter.
  */
private[cli] object ProcStat:
  /** How much of /proc/PID/stat is read: its fields up to the session and more. */
  val Prefix = 512

  /** Reads process `pid`'s stat into `buffer` (room for [[Prefix]] bytes) and parses it into
    * `ids` ([[parse]]); false if it is gone or a zombie.
    */
  def read(pid: String, buffer: Array[Byte], ids: Array[Long]): Boolean =
    val n =
      try
        val in = FileInputStream("/proc/" + pid + "/stat")
        try in.readNBytes(buffer, 0, Prefix)
        finally in.close()
      catch case _: IOException => return false // gone meanwhile
    parse(buffer, n, ids)

  /** Parses the first `n` bytes of a stat line: false for a zombie (or a task being reaped), or
    * for text that is not a whole stat prefix; otherwise true, with `ids(0)` the process group
    * and `ids(1)` the session.
    */
  def parse(buffer: Array[Byte], n: Int, ids: Array[Long]): Boolean =
    var at = n - 1
    while at >= 0 && buffer(at) != ')' do at -= 1
    val state = at + 2
    if at < 0 || state >= n || buffer(at + 1) != ' ' || buffer(state) == 'Z' || buffer(state) == 'X' then return false
    // " ppid pgrp session ": three numbers after the state, each after one space; the session
    // must be followed by its space, or it might have been cut short by the end of the buffer.
    at = state + 1
    var field = 0
    while field < 3 do
      if at >= n || buffer(at) != ' ' then return false
      at += 1
      val first = at
      var value = 0L
      while at < n && buffer(at) >= '0' && buffer(at) <= '9' && at - first < 18 do
        value = value * 10 + (buffer(at) - '0')
        at += 1
      if at == first then return false
      if field > 0 then ids(field - 1) = value
      field += 1
    at < n && buffer(at) == ' '

/** What /proc says of the kernel's pid allocator at one moment: the last pid it handed out
  * (/proc/loadavg), how many tasks it has created since boot (/proc/stat "processes", threads
  * included) and how many exist (/proc/loadavg).
  *
  * It narrows the search for a session's members. Linux hands out pids in a cycle: each new pid
  * is the first free one after the last pid handed out, wrapping from pid_max to 300. A session's
  * leader is started after a reading `before`, and every other member descends from it (setsid
  * made a new session, and a process is only ever in its parent's session or one it made
  * itself; its process groups are in it too), so all of them have pids in the
  * cyclic range (before.lastPid, now.lastPid] -- unless the allocator has gone all the way
  * round in between. A lap takes pid_max - 300 steps: one per pid handed out (at most the tasks
  * created) and one per pid in use stepped over (at most the tasks that existed, plus as many
  * pids kept only as an ended leader's group or session id). When the counts cannot rule a lap
  * out, or /proc cannot be read, the window is null and the caller reads every pid.
  */
final case class PidClock(lastPid: Long, forks: Long, tasks: Long)

object PidClock:
  /** The pids of one reading's window: the cyclic range (after, upTo] below pid_max. */
  final class Window(after: Long, upTo: Long):
    def holds(pid: Long): Boolean =
      if after < upTo then pid > after && pid <= upTo else pid > after || pid <= upTo

  /** The first pid the kernel hands out after wrapping round. */
  private val FirstAfterWrap = 300L
  /** Steps of the allocator not counted by the readings (pids kept by other namespaces' use, a
    * reading made a moment late); generous.
    */
  private val Slack = 1000L

  /** The window of pids handed out between `before` and `now`, or null when it could hold every
    * pid (either reading missing, nothing handed out, or a lap of the allocator possible).
    */
  def window(before: PidClock | Null, now: PidClock | Null, pidMax: Long = readPidMax()): Window | Null =
    if before == null || now == null || pidMax <= FirstAfterWrap then null
    else
      val created = now.forks - before.forks
      val inUse = 2 * (before.tasks + created) // tasks then or since, and ended leaders' ids
      val steps = created + inUse + Slack
      if created <= 0 || now.lastPid == before.lastPid || steps >= pidMax - FirstAfterWrap then null
      else Window(before.lastPid, now.lastPid)

  /** A reading now; null if /proc does not tell. */
  def read(): PidClock | Null =
    val loadavg = ProcFile.read("/proc/loadavg", 256)
    val stat = ProcFile.read("/proc/stat", 1 << 20)
    if loadavg == null || stat == null then null
    else
      // "0.80 2.48 2.98 1/103 28448": running/tasks, then the last pid
      val slash = loadavg.indexOf('/')
      val space = loadavg.indexOf(' ', slash)
      val tasks = if slash < 0 || space < 0 then -1 else parsePid(loadavg.substring(slash + 1, space))
      val last = if space < 0 then -1 else parsePid(loadavg.substring(space + 1).trim)
      val at = stat.indexOf("\nprocesses ")
      val end = if at < 0 then -1 else stat.indexOf('\n', at + 1)
      val forks = if end < 0 then -1 else parsePid(stat.substring(at + "\nprocesses ".length, end))
      if tasks < 0 || last < 0 || forks < 0 then null else PidClock(last, forks, tasks)

  /** /proc/sys/kernel/pid_max, or 0 if it cannot be read. */
  def readPidMax(): Long =
    val text = ProcFile.read("/proc/sys/kernel/pid_max", 64)
    if text == null then 0 else parsePid(text.trim).max(0)

  /** A decimal number of up to 18 digits; -1 if `s` is anything else. */
  def parsePid(s: String): Long =
    if s.isEmpty || s.length > 18 then -1
    else
      var n = 0L
      var i = 0
      while i < s.length do
        val c = s.charAt(i)
        if c < '0' || c > '9' then return -1
        n = n * 10 + (c - '0')
        i += 1
      n

/** A small file of /proc as text (ASCII), or null if it cannot be read. */
private object ProcFile:
  def read(path: String, limit: Int): String | Null =
    try
      val in = FileInputStream(path)
      try String(in.readNBytes(limit), java.nio.charset.StandardCharsets.ISO_8859_1)
      finally in.close()
    catch case _: IOException => null

/** The commands running now (each a session and process group: [[ProcessGroup]]), so that a stop
  * can reach them all (a signal forwarded, or SIGKILL when the user will not wait). No command
  * starts after a stop; one whose start was under way when the stop came is signalled as it joins.
  */
final class LiveGroups:
  private val groups = ConcurrentHashMap.newKeySet[ProcessGroup]()
  @volatile private var stopSignal: String | Null = null
  // Held while a command is started and added, and by killAll while it takes its list: a command
  // is either in the list killAll kills, or never started (a halt came between start and add).
  private val starting = java.util.concurrent.locks.ReentrantLock()
  @volatile private var halting = false

  /** Starts a command with `start` and adds it, unless a stop ([[stop]]) or a halt ([[killAll]])
    * came first: then None. (A stop that comes while `start` runs reaches the command as it joins.)
    */
  def start(start: () => ProcessGroup): Option[ProcessGroup] =
    starting.lock()
    try
      if halting || stopSignal != null then None
      else
        val g = start()
        add(g)
        Some(g)
    finally starting.unlock()

  def add(g: ProcessGroup): Unit =
    groups.add(g)
    val s = stopSignal
    if s != null then g.signal(s)


  def remove(g: ProcessGroup): Unit = groups.remove(g)

  /** Sends `signal` to every session now, and to each one added later. */
  def stop(signal: String): Unit =
    stopSignal = signal
    groups.forEach(_.signal(signal))

  /** SIGKILL to every session now, then again to any that is not empty yet (a process that moved
    * to a new group out of the signal's reach, see [[ProcessGroup.signal]]) every
    * [[LiveGroups.AgainMillis]], for at most [[LiveGroups.KillAllMillis]]: for a halt that cannot
    * wait, on the thread of the signal that asks for it.
    */
  def killAll(): Unit =
    // A start in progress ends (and joins the list) first; bounded, as a halt must not hang.
    val locked = starting.tryLock(LiveGroups.KillAllMillis, java.util.concurrent.TimeUnit.MILLISECONDS)
    halting = true
    val all = try groups.toArray(new Array[ProcessGroup](0)) finally if locked then starting.unlock()
    var i = 0
    while i < all.length do
      all(i).signal("KILL")
      i += 1
    val end = System.nanoTime() + LiveGroups.KillAllMillis * 1_000_000
    var left = all.length > 0
    while left && end - System.nanoTime() > 0 do
      try Thread.sleep(LiveGroups.AgainMillis)
      catch case _: InterruptedException => () // nobody interrupts a signal's thread; the bound holds
      left = false
      i = 0
      while i < all.length do
        if all(i).alive then
          left = true
          all(i).signal("KILL")
        i += 1

object LiveGroups:
  /** How long [[LiveGroups.killAll]] keeps at it before the process halts anyway. */
  val KillAllMillis: Long = 300
  /** How often a session that SIGKILL has not emptied is looked at and signalled again. */
  val AgainMillis: Long = 50
