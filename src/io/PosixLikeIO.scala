package asyncpipe.io

/** Files and UDP sockets with POSIX-like operations that return futures: the endpoints of every
  * file and UDP pipeline stage. Buffers are NIO `ByteBuffer`s (a direct buffer goes to the
  * system without a copy), options are `java.nio.file.StandardOpenOption`s, datagrams are
  * `java.net.DatagramPacket`s.
  *
  * {{{
  * Async.blocking:
  *   PIOHelper.withFile("/tmp/x.txt", CREATE, TRUNCATE_EXISTING, WRITE)(_.writeString("hello\n").value)
  *   PIOHelper.withFile("/tmp/x.txt")(_.readString(1024).value)  // "hello\n"
  * }}}
  *
  * ==Files== `File(path)`, then `open(options*)` (none: `READ`), `read` / `write` of a
  * `ByteBuffer` and `readString` / `writeString`, `close()`. Sequential operations continue from
  * the file's position and advance it (`APPEND` writes at the end); the variants with a
  * `position` argument leave it alone. `readString(size)` reads up to `size` bytes (fewer at the
  * end, "" there) and never cuts a character: one cut by `size` is left for the next read;
  * malformed input and text the charset cannot encode fail, as in `java.nio.file.Files`.
  *
  * ==Where the work happens, and cancelling it== A regular file is always ready (POSIX `poll`
  * says so; a read or write never waits for another party), so its operations run on the calling
  * thread and return a completed future. There is nothing to cancel in them: a cancel of the
  * caller that arrives meanwhile is held until the operation returns (an interrupt would close the
  * channel, as NIO's interruptible channels do), then the future holds the
  * `CancellationException`. Other files (FIFOs, terminals, devices) can block; their operations
  * run on a future of their own, and cancelling one interrupts it: NIO then closes the file.
  * The `File` reports `isOpened == false` and later operations fail with "closed when a blocked
  * read was cancelled"; nothing else is closed. These run on a platform thread (the runtime's
  * `startForSystemCall`): a virtual thread blocked in `read(2)` on a FIFO cannot be woken.
  * Opening a FIFO blocks until its other end opens, and cannot be cancelled.
  *
  * ==UDP== `SocketUDP()`, then `bindAndOpen(port)` (0: a free port, see `localPort`) or `open()`,
  * `send(data, address, port)`, `receive()`, `close()`, `receiveBufferSize` (SO_RCVBUF). The
  * channel is non-blocking: a datagram already in the kernel is returned at once, and a receive
  * with nothing to take waits on a selector in a future of its own. Cancelling that future wakes
  * it without closing the socket (a selector's wait ends on an interrupt; a blocking channel's
  * would close the channel), and a datagram taken at the moment of the cancel is kept for the next
  * receive, so a cancelled receive (a timeout, a lost race) loses nothing. The receive future is
  * a member of the caller's scope: a cancel of the scope is a cancel of the receive. A datagram
  * that completed the future before the cancel stays in it, as every completed value does. Every
  * datagram arrives whole: the receive buffer holds 65,536 bytes. `bindAndOpen(host, port,
  * receiveBuffer)` sets SO_RCVBUF before the bind; `receiveWaiting(timeoutNanos)(each)` is a
  * direct-style receive for the one thread that reads a socket: it blocks that thread until
  * datagrams wait and hands each to `each`, with no future per datagram.
  *
  * ==Errors== A failed operation's future holds a [[PosixIOException]] naming the operation, the
  * path or address and the system's reason: `open /tmp/none: no such file or directory`,
  * `bind udp *:9000: address already in use`. Invalid arguments (a negative size) throw at the
  * call.
  *
  * Use the classes directly (`asyncpipe.io.File`) or through this object.
  */
object PosixLikeIO:
  type File = asyncpipe.io.File
  type SocketUDP = asyncpipe.io.SocketUDP
  def File(path: String): File = new asyncpipe.io.File(path)
  def SocketUDP(): SocketUDP = new asyncpipe.io.SocketUDP()
