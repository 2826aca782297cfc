package asyncpipe.cli.system

import java.lang.foreign.{Arena, ValueLayout}

/** How many bytes a socket or pipe holds ready to read (`ioctl(fd, FIONREAD)`), through the foreign
  * function interface: a reader that knows more is at hand reads on before its output is flushed.
  */
object Readable:
  private val FIONREAD = 0x541bL // <asm-generic/ioctls.h>

  /** The bytes ready on `fd`; 0 when none, or when it cannot be asked. */
  def bytes(fd: Int): Int =
    Foreign.ioctl match
      case None => 0
      case Some(h) =>
        val arena = Arena.ofConfined()
        try
          val n = arena.allocate(ValueLayout.JAVA_INT)
          val status = h.invoke(Integer.valueOf(fd), java.lang.Long.valueOf(FIONREAD), n).asInstanceOf[Int]
          if status != 0 then 0 else n.get(ValueLayout.JAVA_INT, 0L)
        catch case _: Throwable => 0
        finally arena.close()
