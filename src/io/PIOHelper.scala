package asyncpipe.io

import java.nio.file.StandardOpenOption
import scala.util.control.NonFatal

/** Files and sockets used inside a block, Python's `with open(...) as f`: the resource is open
  * for the body and closed on every way out, a return, a throw or a cancel. When the body threw
  * and closing throws too, the close's error is added to the body's as suppressed.
  */
object PIOHelper:
  def withFile[T](path: String, options: StandardOpenOption*)(f: File => T): T =
    closing(File(path).open(options*))(_.close())(f)

  /** An unbound socket (bound by the system on first use). */
  def withSocketUDP[T]()(f: SocketUDP => T): T =
    closing(SocketUDP().open())(_.close())(f)

  /** A socket bound to `port` on every interface (0: a free port; see `localPort`). */
  def withSocketUDP[T](port: Int)(f: SocketUDP => T): T =
    closing(SocketUDP().bindAndOpen(port))(_.close())(f)

  private def closing[R, T](resource: R)(close: R => Unit)(body: R => T): T =
    val result =
      try body(resource)
      catch
        case e: Throwable =>
          try close(resource)
          catch case NonFatal(c) => e.addSuppressed(c)
          throw e
    close(resource)
    result
