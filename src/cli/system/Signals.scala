package asyncpipe.cli.system

import java.util.concurrent.atomic.{AtomicBoolean, AtomicReference}
import java.util.function.IntConsumer
import sun.misc.{Signal, SignalHandler}

/** Where the first signal finds its stopper, so that the signal and the stopper's setter agree:
  * either the signal finds the stopper and tells it, or it finds none and the slot closes for
  * good (the process halts, and a stopper set after that is refused, so that its caller starts
  * nothing the halt would leave running).
  */
private[system] final class StopperSlot:
  private val ref = AtomicReference[Signals.Stopper | Null](null)

  /** For the first signal: the stopper to tell, or null when none is set; then the slot closes. */
  def claim(): Signals.Stopper | Null =
    if ref.compareAndSet(null, StopperSlot.Closed) then null else ref.get

  /** Sets `s` (in place of an earlier one); false if the first signal came with no stopper set. */
  def set(s: Signals.Stopper): Boolean =
    var current = ref.get
    while (current ne StopperSlot.Closed) && !ref.compareAndSet(current, s) do current = ref.get
    current ne StopperSlot.Closed

private[system] object StopperSlot:
  /** What the slot holds once a signal found it empty. */
  private object Closed extends Signals.Stopper:
    def stop(request: Stop): Unit = ()

/** A request from outside to stop: SIGINT (Ctrl-C), SIGTERM or SIGHUP (the terminal went away),
  * and the exit status each one asks for (128 + the signal number, as shells report it).
  */
enum Stop(val signalName: String, val signalNumber: Int):
  case Interrupt extends Stop("INT", 2)
  case Terminate extends Stop("TERM", 15)
  case HangUp extends Stop("HUP", 1)

  def exitCode: Int = 128 + signalNumber

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
  * frame, as SIGKILL would; a socket cut so is reset first, so that its peer does not take the
  * partial frame and a clean end for the whole stream ([[OwnedOutput.cutAll]]).
  *
  * A signal can still meet the JVM's own handler: one that came before [[install]], or whose
  * handler thread the JVM made before it and ran after. That handler runs `Runtime.exit` with the
  * right status (128 + N), which runs the shutdown hooks; asyncpipe itself always ends with a
  * halt ([[end]]), so its hook ([[jvmExiting]]) knows that this is a signal. It stops what runs
  * as a first signal would (a command's session is stopped and ended, an output ends on whole
  * frames) and waits for the command to return before the JVM's exit goes on; a command that had
  * not set its stopper yet never starts ([[onStop]] does not return).
  *
  * A signal that the process inherited as ignored (SIGHUP under `nohup`) stays ignored. The JVM
  * runs each signal's handler on a thread of its own, so a stopper may take a moment, but it
  * should only start the stop (cancel a scope, signal a child) and return.
  *
  * Which signal came first: the JVM's one signal dispatcher starts a handler thread per signal,
  * in the order the signals arrive, but a loaded machine may run those threads in another order.
  * So the first signal is the one whose handler thread was made first (the lowest thread id), and
  * its status is the exit status, whichever handler runs first; the count of handlers that have
  * run decides what is done (stop, end, halt).
  */
object Signals:
  /** A signal, and the id of the thread that handles it (its place in the order of arrival). */
  private final class Arrival(val stop: Stop, val order: Long)
  private val first = AtomicReference[Arrival | Null](null)
  private val count = java.util.concurrent.atomic.AtomicInteger(0) // handlers that have run
  private val any = java.util.concurrent.CountDownLatch(1) // opened by the first handler to run
  private val stopper = StopperSlot()
  // Whether the stopper has been called (by the handler, or by onStop for an early signal).
  private val told = AtomicBoolean(false)
  @volatile private var second: IntConsumer = code => endNow(code)
  // Set by the hook of the JVM's exit; then `end` leaves the exit to the JVM, once the command returned.
  @volatile private var exitByJvm = false
  private val returned = java.util.concurrent.CountDownLatch(1) // opened by `end` for the hook

  /** What the first signal calls. Its own trait rather than `Stop => Unit`, and the second
    * signal's end an IntConsumer, so that the lambdas given for them are ones the JDK AOT cache
    * holds (doc/adr/0008-task-runner.md, "Start-up").
    */
  trait Stopper:
    def stop(request: Stop): Unit

  /** Installs the handlers of the three signals for the rest of the process (once is enough). */
  def install(): Unit =
    installed = true
    // Loaded now, not by the first signal: a handler that must load a class fails when it cannot
    // (the jar replaced under a running process: NoClassDefFoundError, and the signal was lost).
    val _ = Arrival(Stop.Interrupt, Long.MaxValue)
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
    val me = Arrival(stop, Thread.currentThread.threadId)
    var seen = first.get
    while (seen == null || me.order < seen.order) && !first.compareAndSet(seen, me) do seen = first.get
    any.countDown()
    val earliest = first.get.nn.stop
    count.incrementAndGet() match
      case 1 =>
        val s = stopper.claim()
        if s == null then Runtime.getRuntime.halt(earliest.exitCode) // before any command began
        else tell(s, earliest)
      case 2 => second.accept(earliest.exitCode)
      case _ => // the user will not wait for the frame: a socket cut in one is reset (OwnedOutput.cutAll)
        OwnedOutput.cutAll()
        Runtime.getRuntime.halt(earliest.exitCode)

  private def tell(s: Stopper, stop: Stop): Unit = if told.compareAndSet(false, true) then s.stop(stop)

  /** Sets what the first signal calls (one stopper: a later call replaces it), and what the second
    * one does (by default [[endNow]]; the task verbs also kill what they run). If a signal came
    * before, the stopper is called at once. If that signal found no stopper, the process is
    * halting already: this call does not return (its caller must start nothing, no command of a
    * task verb above all, that the halt would leave running).
    */
  def onStop(s: Stopper, end: IntConsumer = code => endNow(code)): Unit =
    if !installed then install()
    second = end
    if !stopper.set(s) then Signals.parkForever() // a halt or the JVM's exit is on its way
    val early = first.get
    if early != null then tell(s, early.stop)

  // Tests run commands without `main`: onStop installs the handlers then.
  @volatile private var installed = false

  /** Adds the hook of the JVM's exit ([[jvmExiting]]), for a process that ends with [[end]]
    * (`main`; not tests, whose JVM ends by exiting).
    */
  def hookJvmExit(): Unit =
    if hooked.compareAndSet(false, true) then
      try Runtime.getRuntime.addShutdownHook(Thread.ofPlatform().name("asyncpipe-exit").unstarted(ExitHook))
      catch case _: IllegalStateException => parkForever() // the exit began already: start nothing

  private val hooked = AtomicBoolean(false)

  // Objects, not lambdas: the JDK AOT cache holds classes, but spins a lambda at run time (ADR 0012).
  private object ExitHook extends Runnable:
    def run(): Unit = jvmExiting()
  private object NoWork extends Runnable:
    def run(): Unit = ()

  /** How the process ends once the command returned `status`: a halt (no hook to wait for, the
    * command flushed already), unless the JVM's exit is on its way ([[jvmExiting]]): then it goes
    * on with the status it has (the signal's), and this thread waits for it.
    */
  def end(status: Int): Unit =
    if exitByJvm || exitBegun then // (the second: an exit that began before the hook was added)
      returned.countDown()
      parkForever()
    Runtime.getRuntime.halt(status)

  /** Whether the JVM's exit has begun: it refuses new shutdown hooks then. */
  private def exitBegun: Boolean =
    val probe = Thread.ofPlatform().unstarted(NoWork)
    try
      Runtime.getRuntime.addShutdownHook(probe)
      Runtime.getRuntime.removeShutdownHook(probe)
      false
    catch case _: IllegalStateException => true

  /** The shutdown hook: the JVM's exit began, which only a signal that met the JVM's own handler
    * does. A command that set its stopper is stopped as by a first signal (the JVM's exit status is
    * the signal's; the stopper is told SIGINT, the one asked for most) and the exit waits until the
    * command has returned; one that had not yet set it never will, nor start anything.
    */
  private def jvmExiting(): Unit =
    exitByJvm = true
    val s = stopper.claim()
    if s != null then
      tell(s, Stop.Interrupt)
      var waiting = true
      while waiting do
        try { returned.await(); waiting = false }
        catch case _: InterruptedException => () // the exit waits for the command, as it must

  private def parkForever(): Nothing =
    while true do java.util.concurrent.locks.LockSupport.park()
    throw IllegalStateException("unreachable")

  /** Ends the process with `status` once no output is in the middle of a write, so that what any
    * output wrote ends on a whole frame ([[OwnedOutput.quiesceAll]]).
    */
  def endNow(status: Int): Unit =
    OwnedOutput.quiesceAll()
    Runtime.getRuntime.halt(status)

  /** The signal that asked for the stop (the first to arrive), if one came: the exit status a
    * command reports once a signal came, whatever else ended it meanwhile (a closed pipe, most
    * often the reader that the same signal stopped first).
    */
  def received: Option[Stop] =
    val a = first.get
    if a == null then None else Some(a.stop)

  /** [[received]], after waiting up to `millis` for a signal's handler to run. For a command whose
    * reader went away: one signal to a whole pipeline (Ctrl-C) may stop the reader before this
    * process's handler thread runs (the JVM starts one per signal), and the signal, not the closed
    * pipe, is what ended the pipeline.
    */
  def receivedWithin(millis: Long): Option[Stop] =
    if first.get == null then
      try any.await(millis, java.util.concurrent.TimeUnit.MILLISECONDS)
      catch case _: InterruptedException => Thread.currentThread.interrupt()
    received

  /** How long a command whose reader went away waits for a signal that may be on its way. */
  val PipeGraceMillis: Long = 50
