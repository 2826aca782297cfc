package asyncpipe.cli.tasks

import asyncpipe.cli.command.*

import asyncpipe.async.{Async, Future, Timer, sleep, uninterruptible}
import java.util.concurrent.CancellationException

/** How one run of the command ended: its exit status (124 when it was stopped for running past
  * `--timeout`; 128 + N when signal N ended it otherwise) and how long it took.
  */
final case class Exit(status: Int, timedOut: Boolean, millis: Long)

/** Runs the command once per call, each time in a session and process group of its own, and
  * makes sure the whole session is gone before the call returns (every signal here goes to each
  * process group of the session: [[ProcessGroup.signal]]):
  *
  *   - the command ends by itself: anything it left running in its session gets SIGTERM, then
  *     SIGKILL after `killAfterMillis` (nothing outlives its attempt; a program meant to must
  *     start a session of its own);
  *   - it runs past `timeoutMillis`: SIGTERM to the session, SIGKILL after `killAfterMillis`;
  *   - the caller is cancelled (a stop, whose signal [[LiveGroups.stop]] has forwarded to the
  *     session already): as after a timeout, then the cancel goes on.
  *
  * SIGKILL is sent again for as long as anything of the session is left (a process that a fork
  * and a new group put out of the last signal's reach), up to a bound.
  *
  * Its stdout goes through [[Records]]; the call also waits (at most the grace) for the last of
  * it, so the output of one attempt is out before the next begins.
  */
final class Attempt(
    command: Seq[String],
    tools: GroupTools,
    timeoutMillis: Option[Long],
    killAfterMillis: Long,
    val records: Records,
    live: LiveGroups,
    input: Array[Byte] | Null = null
):
  /** Runs the command to its end; an IOException if it cannot be started. */
  def run(held: Records.Held | Null = null)(using Async): Exit =
    val started = System.nanoTime()
    val group = live.start(() => ProcessGroup.start(command, tools, input)) match
      case Some(g) => g
      case None    => throw CancellationException("the run is stopping: no command is started")
    try
      val pumped = records.pump(group.stdout, command.head, held)
      var signalledAt = 0L // when SIGTERM (ours) or a forwarded stop signal went to the group; 0: none
      try
        if !exitsWithin(group, timeoutMillis) then
          signalledAt = System.nanoTime()
          group.signal("TERM")
      catch
        case e: Throwable => // a cancel (a stop), or anything else: the session ends all the same
          uninterruptible(finish(group, pumped, System.nanoTime()))
          throw e
      uninterruptible(finish(group, pumped, signalledAt))
      val status = if signalledAt != 0 then ExitCode.TimedOut else group.exited.poll().get.get
      Exit(status, signalledAt != 0, (System.nanoTime() - started) / 1_000_000)
    finally live.remove(group)

  /** Waits for the command's exit; false if `timeout` passed first. */
  private def exitsWithin(group: ProcessGroup, timeout: Option[Long])(using Async): Boolean =
    timeout match
      case None    => { Async.await(group.exited); true }
      case Some(t) => Attempt.within(group.exited, t)

  /** Ends the session: waits for the command (SIGKILL once the grace from `signalledAt` is
    * over), stops what it left in its session, and waits for the end of its output.
    */
  private def finish(group: ProcessGroup, pumped: Future[Unit], signalledAt: Long)(using Async): Unit =
    def graceLeft(from: Long) = killAfterMillis - (System.nanoTime() - from) / 1_000_000
    if signalledAt != 0 && !Attempt.within(group.exited, graceLeft(signalledAt)) then group.signal("KILL")
    Async.await(group.exited)
    if group.alive then
      val termAt = if signalledAt != 0 then signalledAt else { group.signal("TERM"); System.nanoTime() }
      if !Attempt.poll(!group.alive, graceLeft(termAt)) then Attempt.killAll(group, killAfterMillis.max(1000))
    // A process that left the session (a daemon, which made one of its own) may still hold the
    // command's stdout: its output goes on, but the attempt does not wait for it. Mostly the
    // output ends a moment after the command: looked for first without a timer.
    if !Attempt.soon(pumped) then Attempt.within(pumped, killAfterMillis.max(100))

object Attempt:
  /** Waits for `f` at most `millis` (0 or less: only looks); whether it completed. */
  private[cli] def within(f: Future[?], millis: Long)(using Async): Boolean =
    if f.isCompleted || millis <= 0 then f.isCompleted
    else
      val timer = Timer(millis)
      try Async.await(Async.either(f, timer)).isLeft
      finally timer.cancel()

  /** Whether `f` completes within about [[SoonMicros]], looked for between yields of this thread.
    * For a wait that mostly ends at once: a timer (with the race it takes part in) costs a cold
    * JVM some milliseconds at its first use, which a run that ends at once should not pay.
    */
  private def soon(f: Future[?]): Boolean =
    val end = System.nanoTime() + SoonMicros * 1000
    while !f.isCompleted && end - System.nanoTime() > 0 do Thread.`yield`()
    f.isCompleted

  private val SoonMicros = 2000L

  /** SIGKILL to every process of `group`'s session, and again every [[LiveGroups.AgainMillis]]
    * to what is still there, until it is empty or `millis` have passed.
    */
  private def killAll(group: ProcessGroup, millis: Long)(using Async): Unit =
    val end = System.nanoTime() + millis * 1_000_000
    var gone = false
    while !gone && end - System.nanoTime() > 0 do
      group.signal("KILL")
      gone = poll(!group.alive, LiveGroups.AgainMillis.min((end - System.nanoTime()) / 1_000_000))

  /** Checks `done` every 10 ms for at most `millis`: for states without an event (a session
    * emptying). Whether it came true.
    */
  private def poll(done: => Boolean, millis: Long)(using Async): Boolean =
    val end = System.nanoTime() + millis * 1_000_000
    var ok = done
    while !ok && end - System.nanoTime() > 0 do
      sleep(10)
      ok = done
    ok
