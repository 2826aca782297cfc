package asyncpipe.cli

import java.io.{FileInputStream, IOException}

/** One file descriptor held back from the start, and given back when the process runs out of
  * them (EMFILE, "too many open files"), so that reporting it still works.
  *
  * Why: the JVM loads a class that its AOT cache does not hold from the jar, and opens the jar
  * only then; a class first needed to report a failure (the error of an open that found no
  * descriptor left) cannot be loaded without one, and the report becomes a
  * `NoClassDefFoundError`. `Main` takes the reserve first thing; every place that opens an
  * endpoint or starts a command calls [[release]] with its failure before it builds the report
  * (this object is loaded by then, so the call itself needs nothing from the jar).
  */
object FdReserve:
  @volatile private var held: FileInputStream | Null =
    try FileInputStream("/dev/null") catch case _: IOException => null

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
    if out && h != null then
      held = null
      try h.close() catch case _: IOException => ()
