package asyncpipe.cli.system

import java.lang.foreign.{Arena, ValueLayout}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicInteger}
import sun.misc.{Signal, SignalHandler}

/** How many columns a terminal has, and a count of the times it was resized: what a line drawn in
  * place (`--progress`) needs so as never to wrap (a wrapped line cannot be rewritten by `\r`, and
  * each refresh would leave one behind).
  *
  * The width is the terminal's own (`ioctl(fd, TIOCGWINSZ)` through the foreign function
  * interface: the JDK has no call for it); where that cannot be had (no native access, not Linux,
  * not a terminal) it is `$COLUMNS`, then [[Fallback]]. The terminal tells of a resize with
  * SIGWINCH, which [[watchResizes]] counts ([[resizes]]): a reader compares the count with the one
  * it last saw and asks the width again. Its handler only counts: SIGWINCH is no stop, and
  * [[Signals]] (INT, TERM, HUP) never sees it.
  */
object TerminalWidth:
  /** The width when the terminal cannot say and `$COLUMNS` is not set: a classic terminal's. */
  val Fallback: Int = 80
  private val TIOCGWINSZ = 0x5413L // <asm-generic/ioctls.h>


  /** The columns of the terminal on `fd`: its own count, else `columnsVariable` (the text of
    * `$COLUMNS`, a positive number), else [[Fallback]].
    */
  def of(fd: Int, columnsVariable: Option[String] = Option(System.getenv("COLUMNS"))): Int =
    val own = fromTerminal(fd)
    if own > 0 then own
    else columnsVariable.flatMap(_.trim.toIntOption).filter(_ > 0).getOrElse(Fallback)

  /** The columns the terminal on `fd` reports (`struct winsize`'s `ws_col`); 0 when it reports
    * none (a pseudo-terminal nobody sized) and -1 when it cannot be asked.
    */
  def fromTerminal(fd: Int): Int =
    Foreign.ioctl match
      case None => -1 // not Linux, or no ioctl: $COLUMNS, then the fallback
      case Some(h) =>
        val arena = Arena.ofConfined()
        try
          // struct winsize { unsigned short ws_row, ws_col, ws_xpixel, ws_ypixel; }
          val size = arena.allocate(8)
          val status = h.invoke(Integer.valueOf(fd), java.lang.Long.valueOf(TIOCGWINSZ), size).asInstanceOf[Int]
          if status != 0 then -1 else java.lang.Short.toUnsignedInt(size.get(ValueLayout.JAVA_SHORT, 2L))
        catch case _: Throwable => -1
        finally arena.close()

  private val resized = AtomicInteger(0)
  private val watching = AtomicBoolean(false)

  /** How many times the terminal was resized since [[watchResizes]] (SIGWINCH). */
  def resizes: Int = resized.get

  /** Counts SIGWINCH from now on (once is enough; later calls do nothing). Where the JVM does not
    * let the signal be handled, [[resizes]] stays 0 and the width is the one read first.
    */
  def watchResizes(): Unit =
    if watching.compareAndSet(false, true) then
      try
        Signal.handle(Signal("WINCH"), new SignalHandler:
          def handle(signal: Signal): Unit = { val _ = resized.incrementAndGet() })
        ()
      catch case _: IllegalArgumentException => () // not on this OS, or the JVM keeps it
