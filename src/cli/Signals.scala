package asyncpipe.cli

import java.util.concurrent.atomic.AtomicReference
import java.util.function.IntConsumer
import sun.misc.{Signal, SignalHandler}

/** A request from outside to stop: SIGINT (Ctrl-C) or SIGTERM, and the exit status each one asks
  * for (128 + the signal number, as shells report it).
  */
enum Stop(val signalName: String, val exitCode: Int):
  case Interrupt extends Stop("INT", ExitCode.Interrupted)
  case Terminate extends Stop("TERM", ExitCode.Terminated)

/** SIGINT and SIGTERM as an orderly stop: the first signal calls the stopper, which flushes and
  * closes what it must and lets the command return its status; a second signal (of either kind)
  * halts the process at once with the status of the first, for a user who will not wait.
  *
  * The JVM runs each signal's handler on a thread of its own, so a stopper may take a moment, but
  * it should only start the stop (cancel a scope, signal a child) and return.
  */
object Signals:
  private val first = AtomicReference[Stop | Null](null)

  /** What the first signal calls. Its own trait rather than `Stop => Unit`, and `halt` an
    * IntConsumer, so that the lambdas given for them are ones the JDK AOT cache holds
    * (doc/adr/0008-task-runner.md, "Start-up").
    */
  trait Stopper:
    def stop(request: Stop): Unit

  /** Installs the handlers for the rest of the process (one stopper: a later call replaces it).
    * `halt` ends the process on the second signal; tests give their own.
    */
  def onStop(stopper: Stopper, halt: IntConsumer = code => Runtime.getRuntime.halt(code)): Unit =
    val stops = Stop.values
    var i = 0
    while i < stops.length do
      val stop = stops(i)
      Signal.handle(
        Signal(stop.signalName),
        new SignalHandler:
          def handle(signal: Signal): Unit =
            if first.compareAndSet(null, stop) then stopper.stop(stop)
            else halt.accept(first.get.nn.exitCode)
      )
      i += 1

  /** The signal that asked for the stop, if one came. */
  def received: Option[Stop] = Option(first.get)
