package asyncpipe.cli.system

import java.io.{FileInputStream, IOException}

/** A few file descriptors held back from the start, and given back when the process runs out of
  * them (EMFILE, "too many open files"), so that reporting it still works.
  *
  * Why: the JVM loads a class that its AOT cache does not hold from the jar, and opens the jar
  * only then; a class first needed to report a failure (the error of an open that found no
  * descriptor left) cannot be loaded without one, and the report becomes a
  * `NoClassDefFoundError` (and opening the jar may need more than one: reading its entries loads
  * the JDK's zip library). `Main` takes the reserve first thing; every place that opens an
  * endpoint or starts a command calls [[release]] with its failure before it builds the report
  * (this object is loaded by then, so the call itself needs nothing from the jar).
  */
object FdReserve:
  /** How many descriptors are held back. */
  val Size = 4
  @volatile private var held: Array[FileInputStream] =
    val kept = new Array[FileInputStream](Size)
    var n = 0
    try while n < Size do { kept(n) = FileInputStream("/dev/null"); n += 1 }
    catch case _: IOException => ()
    java.util.Arrays.copyOf(kept, n)

  /** Takes the reserve (loading this object does). */
  def take(): Unit = ()

  /** Gives the reserve back if `e` (or its cause) says the process ran out of descriptors. */
  def release(e: Throwable): Unit =
    var t: Throwable | Null = e
    var out = false
    while t != null && !out do
      val m = t.getMessage
      out = m != null && m.contains("Too many open files")
      t = t.getCause
    val h = held
    if out && h.length > 0 then
      held = new Array[FileInputStream](0)
      for f <- h do try f.close() catch case _: IOException => ()
