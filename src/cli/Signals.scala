package asyncpipe.cli

import java.util.concurrent.atomic.{AtomicBoolean, AtomicReference}
import java.util.function.IntConsumer
import sun.misc.{Signal, SignalHandler}

/** A request from outside to stop: SIGINT (Ctrl-C), SIGTERM or SIGHUP (the terminal went away),
  * and the exit status each one asks for (128 + the signal number, as shells report it).
  */
enum Stop(val signalName: String, val exitCode: Int):
  case Interrupt extends Stop("INT", ExitCode.Interrupted)
  case Terminate extends Stop("TERM", ExitCode.Terminated)
  case HangUp extends Stop("HUP", ExitCode.HungUp)

/** SIGINT, SIGTERM and SIGHUP as an orderly stop: the first signal calls the stopper, which
  * flushes and closes what it must and lets the command return its status; a second signal (of
  * any of the three) ends the process with the status of the first, for a user who will not wait.
  *
  * [[install]] runs first thing in `main`, so that a signal is never met by the JVM's own handler
  * (which runs `Runtime.exit` and its logging in a JVM still starting up). A signal that comes
  * before a command has set its stopper ends the process at once: nothing has been written yet.
  *
  * The second signal's end ([[Signals.endNow]] by default) never leaves part of a frame behind:
  * it waits for the write in progress of every [[OwnedOutput]] (each write is of whole frames)
  * and starts no other, then halts. Only a reader that takes nothing more can keep it waiting
  * (for the rest of that one write): a third signal then halts at once, even in the middle of a
  * frame, as SIGKILL would.
  *
  * A signal that the process inherited as ignored (SIGHUP under `nohup`) stays ignored. The JVM
  * runs each signal's handler on a thread of its own, so a stopper may take a moment, but it
  * should only start the stop (cancel a scope, signal a child) and return.
  */
object Signals:
  private val first = AtomicReference[Stop | Null](null)
  private val later = java.util.concurrent.atomic.AtomicInteger(0) // signals after the first
  private val stopper = AtomicReference[Stopper | Null](null)
  // Whether the stopper has been called (by the handler, or by onStop for an early signal).
  private val told = AtomicBoolean(false)
  @volatile private var second: IntConsumer = code => endNow(code)

  /** What the first signal calls. Its own trait rather than `Stop => Unit`, and the second
    * signal's end an IntConsumer, so that the lambdas given for them are ones the JDK AOT cache
    * holds (doc/adr/0008-task-runner.md, "Start-up").
    */
  trait Stopper:
    def stop(request: Stop): Unit

  /** Installs the handlers of the three signals for the rest of the process (once is enough). */
  def install(): Unit =
    installed = true
    val stops = Stop.values
    var i = 0
    while i < stops.length do
      val stop = stops(i)
      try
        Signal.handle(
          Signal(stop.signalName),
          new SignalHandler:
            def handle(signal: Signal): Unit = arrived(stop)
        )
      catch case _: IllegalArgumentException => () // not on this OS, or the JVM keeps it (-Xrs)
      i += 1

  private def arrived(stop: Stop): Unit =
    if first.compareAndSet(null, stop) then
      val s = stopper.get
      if s == null then Runtime.getRuntime.halt(stop.exitCode) // before any command began
      else tell(s, stop)
    else if later.incrementAndGet() == 1 then second.accept(first.get.nn.exitCode)
    else Runtime.getRuntime.halt(first.get.nn.exitCode) // the user will not wait for the frame

  private def tell(s: Stopper, stop: Stop): Unit = if told.compareAndSet(false, true) then s.stop(stop)

  /** Sets what the first signal calls (one stopper: a later call replaces it), and what the second
    * one does (by default [[endNow]]; the task verbs also kill what they run). If a signal came
    * before, the stopper is called at once.
    */
  def onStop(s: Stopper, end: IntConsumer = code => endNow(code)): Unit =
    if !installed then install()
    second = end
    stopper.set(s)
    val early = first.get
    if early != null then tell(s, early)

  // Tests run commands without `main`: onStop installs the handlers then.
  @volatile private var installed = false

  /** Ends the process with `status` once no output is in the middle of a write, so that what any
    * output wrote ends on a whole frame ([[OwnedOutput.quiesceAll]]).
    */
  def endNow(status: Int): Unit =
    OwnedOutput.quiesceAll()
    Runtime.getRuntime.halt(status)

  /** The signal that asked for the stop, if one came. */
  def received: Option[Stop] = Option(first.get)
