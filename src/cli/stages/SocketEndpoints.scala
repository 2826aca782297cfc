package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.frames.*
import asyncpipe.cli.system.*

import asyncpipe.async.*
import asyncpipe.io.IoFailure
import java.io.IOException
import java.net.{InetSocketAddress, SocketTimeoutException, StandardProtocolFamily, StandardSocketOptions, UnixDomainSocketAddress}
import java.nio.ByteBuffer
import java.nio.channels.{ReadableByteChannel, ServerSocketChannel, SocketChannel, WritableByteChannel}
import java.nio.file.{Files, LinkOption, Path}
import scala.concurrent.duration.FiniteDuration

/** One connected stream socket: its two directions and the peer's name. */
trait Connection:
  def in: ReadableByteChannel
  def out: WritableByteChannel
  /** The peer, as a message names it (`127.0.0.1:40122`, or the socket's path). */
  def peer: String
  /** Ends this side's direction (TCP FIN): the peer reads the end; it may still send. */
  def shutdownOutput(): Unit
  def close(): Unit
  /** Makes the coming close a reset (SO_LINGER 0): unsent data is dropped and the peer reads an
    * error, not an end (for a halt in the middle of a frame).
    */
  def resetOnClose(): Unit
  /** The plain socket under it, which a kernel copy may write into (sendfile, splice); null for
    * one that transforms what it sends (TLS).
    */
  def kernelChannel: SocketChannel | Null = null
  /** What must happen before data moves, on the thread that serves the connection (an accepted
    * TLS connection's handshake: not in the accept loop, so a slow client holds up no other).
    */
  def ready(): Unit = ()

/** A TCP or Unix connection: one blocking [[SocketChannel]]. */
final class SocketConnection(channel: SocketChannel, val peer: String) extends Connection:
  def in: ReadableByteChannel = channel
  def out: WritableByteChannel = channel
  override def kernelChannel: SocketChannel | Null = channel
  def shutdownOutput(): Unit = try channel.shutdownOutput() catch case _: IOException => ()
  def close(): Unit = try channel.close() catch case _: IOException => ()
  def resetOnClose(): Unit = Sockets.resetOnClose(channel)

/** Where an endpoint says things as they happen: the flow's diagnostics once given
  * ([[Input.attach]], before the endpoint opens; JSON under `--stats-json`), stderr before that.
  */
private[stages] class Teller:
  @volatile private var tell: Diagnostics | Null = null
  def attach(d: Diagnostics): Unit = tell = d
  protected def diagnostics: Diagnostics | Null = tell
  def notice(text: String): Unit = { val t = tell; if t != null then t.notice(text) else System.err.println(text) }
  def warn(text: String): Unit = { val t = tell; if t != null then t.warning(text) else System.err.println(text) }
  /** `{"kind": json}` under `--stats-json`, else `text`. */
  def record(kind: String, json: String, text: String): Unit =
    val t = tell
    if t != null then t.record(kind, json, text) else System.err.println(text)

/** Raised for a connect that ran past `connect-timeout`: the stage exits 124, as timeout(1). */
final class ConnectTimedOut(val after: FiniteDuration) extends IOException(s"no connection within ${Durations.render(after)} (connect-timeout)")

/** Connecting and listening, for the stream-socket kinds ([[StreamSocket]]). */
object Sockets:
  /** SO_LINGER 0 on `channel` (see [[Connection.resetOnClose]]); a Unix socket has no reset. */
  def resetOnClose(channel: SocketChannel): Unit =
    try channel.setOption(StandardSocketOptions.SO_LINGER, Integer.valueOf(0))
    catch case _: (IOException | UnsupportedOperationException) => ()

  /** The socket address of `a` (a name is looked up here). */
  private def target(a: StreamSocketAddress): java.net.SocketAddress = a.where match
    case SocketWhere.Port(host, port) =>
      host.fold(InetSocketAddress(port))(h => InetSocketAddress(java.net.InetAddress.getByName(h.literal), port))
    case SocketWhere.Path(path) => UnixDomainSocketAddress.of(path)

  private def open(a: StreamSocketAddress): SocketChannel =
    if a.family == SocketFamily.Unix then SocketChannel.open(StandardProtocolFamily.UNIX) else SocketChannel.open()

  private def configure(ch: SocketChannel, s: SocketSettings, tcp: Boolean): Unit =
    if tcp then
      if s.keepalive then ch.setOption(StandardSocketOptions.SO_KEEPALIVE, java.lang.Boolean.TRUE)
      if s.nodelay then ch.setOption(StandardSocketOptions.TCP_NODELAY, java.lang.Boolean.TRUE)

  /** One attempt to connect, within `connect-timeout`. */
  def connectOnce(a: StreamSocketAddress, say: String => Unit = System.err.println): Connection =
    val ch = open(a)
    try
      configure(ch, a.settings, a.family.overTcp)
      val timeout = a.settings.connectTimeout.toMillis.min(Int.MaxValue).toInt.max(1)
      val started = System.nanoTime()
      if a.family == SocketFamily.Unix then connectUnix(ch, a, timeout)
      else
        try ch.socket().connect(target(a), timeout)
        catch case _: SocketTimeoutException => throw ConnectTimedOut(a.settings.connectTimeout)
      if a.family == SocketFamily.Tls then
        // The handshake is part of the connect, within what is left of connect-timeout.
        Tls.connect(a, ch, (timeout - (System.nanoTime() - started) / 1_000_000).max(1).toInt, say)
      else SocketConnection(ch, a.where.render)
    catch
      case e: Throwable =>
        try ch.close() catch case _: IOException => ()
        throw e

  /** A Unix channel has no socket adaptor (`socket()` throws "not supported"), so no connect with a
    * timeout: it connects directly. Such a connect blocks only while the listener's backlog is
    * full; past `timeoutMillis` the channel is closed, which ends the connect.
    */
  private def connectUnix(ch: SocketChannel, a: StreamSocketAddress, timeoutMillis: Int): Unit =
    val expired = java.util.concurrent.atomic.AtomicBoolean(false)
    val timer = Thread.ofVirtual().name("asyncpipe-connect-timeout").start { () =>
      try
        Thread.sleep(timeoutMillis.toLong)
        expired.set(true)
        ch.close()
      catch case _: InterruptedException => ()
    }
    try ch.connect(target(a))
    catch case _: IOException if expired.get => throw ConnectTimedOut(a.settings.connectTimeout)
    finally
      timer.interrupt()
      timer.join()
    if expired.get then throw ConnectTimedOut(a.settings.connectTimeout)

  /** Connects, trying again up to `retry` times `interval` apart (each try told through `say`);
    * throws [[CliError.Failed]] naming the address and the last reason.
    */
  def connect(a: StreamSocketAddress, say: String => Unit, sleep: Long => Unit): Connection =
    if a.family == SocketFamily.Tls then Tls.prepareClient(a, say) // its files, read once, before any try
    var attempt = 0
    var result: Connection | Null = null
    while result == null do
      try result = connectOnce(a, say)
      catch
        // A TLS refusal (a certificate, a name) would be the same on the next try.
        case e: Exception if attempt < a.settings.retry && !e.isInstanceOf[TlsFailed] =>
          attempt += 1
          say(s"asyncpipe: ${a.render}: connect: ${reason(e)}; trying again in ${Durations.render(a.settings.interval)} ($attempt of ${a.settings.retry})")
          sleep(a.settings.interval.toNanos)
        case e: Exception => throw failure(a, "connect", e)
    result.nn

  /** The user's error for `e`, an operation on `a` that failed: exit 124 for a connect timeout. */
  def failure(a: StreamSocketAddress, operation: String, e: Throwable): CliError.Failed =
    FdReserve.release(e)
    e match
      case t: ConnectTimedOut            => CliError.Failed(CliError.Expired(a.render, s"$operation: ${t.getMessage}"))
      case t: TlsFailed if t.inHandshake => CliError.Failed(CliError.Runtime(a.render, reason(e)))
      case _                             => CliError.Failed(CliError.Runtime(a.render, s"$operation: ${reason(e)}"))

  /** Waits `nanos` (a wait between connects); an interrupt ends it, and is kept. */
  def pause(nanos: Long): Unit =
    try Thread.sleep(java.time.Duration.ofNanos(nanos))
    catch case _: InterruptedException => Thread.currentThread.interrupt()

  /** How a sink's wait for its peer to close ended, and the bytes the peer sent meanwhile. */
  enum Lingered:
    case Closed(bytes: Long)
    case TimedOut(bytes: Long)
    /** The peer refused the connection after all: a TLS alert (under TLS 1.3, a server's refusal
      * of the client's certificate comes after the client's handshake, when it reads), or a reset
      * (a peer that closed with our data unread: what it had not read is lost).
      */
    case Refused(bytes: Long, why: IOException)

  /** After this side's FIN: reads (and drops) what the peer sends until it closes, for at most
    * `limit`; then the connection is closed by the caller.
    */
  def linger(c: Connection, limit: FiniteDuration): Lingered =
    val got = java.util.concurrent.atomic.AtomicLong()
    @volatile var refused: IOException | Null = null
    @volatile var givenUp = false
    val reader = Thread.ofVirtual().name("asyncpipe-linger").start { () =>
      val b = ByteBuffer.allocate(8192)
      try
        var n = 0
        while { b.clear(); n = c.in.read(b); n >= 0 } do got.addAndGet(n)
      catch case e: IOException => if !givenUp then refused = e // not the close that ends a wait past `limit`
    }
    val closed =
      try reader.join(java.time.Duration.ofNanos(limit.toNanos))
      catch case _: InterruptedException => { Thread.currentThread.interrupt(); false }
    val why = refused
    if closed && why != null then Lingered.Refused(got.get, why)
    else if closed then Lingered.Closed(got.get)
    else
      givenUp = true
      c.close()
      reader.join()
      Lingered.TimedOut(got.get)

  def reason(e: Throwable): String = e match
    case _: DownstreamGone             => "the peer closed the connection (broken pipe)"
    case t: TlsFailed if t.inHandshake => s"TLS handshake: ${t.getMessage}"
    case _                             => IoFailure.reason(e)

  /** Binds `a` and listens (a Unix path: a stale socket file there is replaced first, anything else
    * refused); throws [[CliError.Failed]].
    */
  def listen(a: StreamSocketAddress, say: String => Unit): SocketListener =
    val unixPath = a.where match
      case SocketWhere.Path(p) => Some(Path.of(p))
      case _                   => None
    unixPath.foreach(clearStale(a, _, say))
    // The server's certificate and key are read before anything is bound.
    val tls = if a.family == SocketFamily.Tls then Tls.server(a) else null
    val ch = if a.family == SocketFamily.Unix then ServerSocketChannel.open(StandardProtocolFamily.UNIX) else ServerSocketChannel.open()
    try
      if a.family.overTcp then ch.setOption(StandardSocketOptions.SO_REUSEADDR, java.lang.Boolean.TRUE)
      ch.bind(target(a), SocketListener.Backlog)
      SocketListener(ch, a, unixPath, tls)
    catch
      case e: Exception =>
        try ch.close() catch case _: IOException => ()
        throw failure(a, "listen", e)

  // The file type bits of st_mode, and those of a socket.
  private val TypeMask = 0xf000
  private val SocketType = 0xc000

  /** A socket file left at `path` by a server that is gone is removed (a connect to it is refused);
    * a socket with a server behind it, or anything that is not a socket, is refused and left as it is.
    */
  private def clearStale(a: StreamSocketAddress, path: Path, say: String => Unit): Unit =
    if Files.exists(path, LinkOption.NOFOLLOW_LINKS) then
      val mode = try Files.getAttribute(path, "unix:mode", LinkOption.NOFOLLOW_LINKS).asInstanceOf[Int] catch case _: Exception => 0
      if (mode & TypeMask) != SocketType then
        val what = if Files.isDirectory(path, LinkOption.NOFOLLOW_LINKS) then "a directory"
          else if Files.isSymbolicLink(path) then "a symbolic link" else if Files.isRegularFile(path, LinkOption.NOFOLLOW_LINKS) then "a regular file"
          else "not a socket"
        throw CliError.Failed(CliError.Runtime(a.render, s"listen: $path exists and is $what, not a socket: it is never removed (remove it, or choose another path)"))
      val answered =
        try
          val probe = SocketChannel.open(StandardProtocolFamily.UNIX)
          try { probe.connect(UnixDomainSocketAddress.of(path)); true } finally probe.close()
        catch case _: IOException => false
      if answered then throw CliError.Failed(CliError.Runtime(a.render, s"listen: address already in use (a server answers on $path)"))
      try Files.delete(path) catch case e: IOException => throw failure(a, s"remove the stale socket $path", e)
      say(s"asyncpipe: ${a.render}: replaced a stale socket file (no server answered on it)")

/** A listening socket. */
final class SocketListener(channel: ServerSocketChannel, address: StreamSocketAddress, unixPath: Option[Path],
    tls: javax.net.ssl.SSLContext | Null = null):
  /** The port it listens on (the one the kernel chose, for port 0); -1 for a Unix socket. */
  def localPort: Int = channel.getLocalAddress match
    case i: InetSocketAddress => i.getPort
    case _                    => -1

  /** The next connection (blocks); a TLS one's handshake is its [[Connection.ready]]. */
  def accept(): Connection =
    val ch = channel.accept()
    val peer = ch.getRemoteAddress match
      case i: InetSocketAddress => s"${Option(i.getAddress).fold(i.getHostString)(_.getHostAddress)}:${i.getPort}"
      case _                    => unixPath.fold("a client")(p => s"a client of $p")
    if address.family.overTcp then
      if address.settings.keepalive then ch.setOption(StandardSocketOptions.SO_KEEPALIVE, java.lang.Boolean.TRUE)
      if address.settings.nodelay then ch.setOption(StandardSocketOptions.TCP_NODELAY, java.lang.Boolean.TRUE)
    if tls != null then Tls.accept(tls, address, ch, peer) else SocketConnection(ch, peer)

  /** The note for port 0: which port the kernel chose. */
  def chosenPort: Seq[String] = address.where match
    case SocketWhere.Port(_, 0) => Seq(s"asyncpipe: ${address.render} listens on port $localPort")
    case _                      => Nil

  /** Stops listening, and removes the socket file it made. */
  // Once: the channel may be closed already (an interrupted accept closes it), the file not yet.
  private val closed = java.util.concurrent.atomic.AtomicBoolean()

  def close(): Unit =
    if closed.compareAndSet(false, true) then
      try channel.close() catch case _: IOException => ()
      unixPath.foreach(p => try Files.deleteIfExists(p) catch case _: IOException => ())

object SocketListener:
  /** Connections the kernel queues before they are accepted (capped by net.core.somaxconn). */
  val Backlog = 4096

// -------------------------------------------------------------------------------------------------
// Reading frames from a connection

/** Reads one connection's frames into `out` until the peer ends its side: whole frames only, the
  * connection's own framing, `--final-delimiter` for a last frame without its terminator. Counts
  * into `counters` (shared by every connection of a listener: added under its lock) and `own`.
  * A warning names `subject` and the peer, unless `subject` names it already (`namesPeer`: a
  * connecting address, whose peer is its HOST:PORT or path).
  */
private[stages] final class ConnectionReader(subject: String, options: StageOptions, pool: BufferPool, counters: Counters,
    own: Counters, warn: String => Unit, namesPeer: Boolean = false):
  /** Reads `conn` to its end; throws on a broken connection or a framing error (whole frames read
    * before it were passed on). The bytes of a partial frame left at a break are in [[pending]].
    */
  def run(conn: Connection, out: SendableChannel[FrameBatch])(using Async): Unit =
    val reader = BatchReader(options.frame, pool)
    current = reader
    val emit: FrameBatch => Unit = batch =>
      if !batch.terminated then
        PartialFrame.check(batch, options.frame, options.finalDelimiter, if namesPeer then subject else s"$subject: ${conn.peer}",
          streamed = true).foreach(warn)
        count(_.unterminated += 1)
      count(_.add(batch, options.countingFrames))
      out.send(batch)
    // Raw bytes into a stage's one output that takes them as they are: past KernelCopy.After
    // bytes they go from a direct buffer straight into it, never into the heap (bytesTarget).
    val direct = out match
      case sink: KernelSink if options.frame == Framing.Raw && !options.countingFrames && sink.bytesTarget != null => sink
      case _                                                                                                  => null
    var read = 0L
    var done = false
    while !done do
      if direct != null && read >= KernelCopy.After then
        copyDirect(conn, direct)
        done = true
      else
        val n = conn.in.read(reader.room)
        if n > 0 then { read += n; reader.filled(emit) }
        else if n < 0 then done = true
    current = null
    reader.finish(emit)

  /** Reads `conn` to its end into a direct buffer, each read written whole into `sink`'s
    * [[KernelSink.bytesTarget]] (raw frames: every byte read is a whole frame).
    */
  private def copyDirect(conn: Connection, sink: KernelSink): Unit =
    val target = sink.bytesTarget.nn
    val buffer = ByteBuffer.allocateDirect(Endpoints.ReadSize)
    var done = false
    while !done do
      buffer.clear()
      val n = conn.in.read(buffer)
      if n < 0 then done = true
      else if n > 0 then
        buffer.flip()
        count(_.bytes += n)
        val _ = sink.moveInKernel(n)(_ => target.write(buffer))

  private var current: BatchReader | Null = null
  /** Bytes read after the last whole frame (a partial one), when a read failed. */
  def pending: Int = { val r = current; if r == null then 0 else try r.pending catch case _: IllegalStateException => 0 }

  private def count(f: Counters => Unit): Unit =
    counters.synchronized(f(counters))
    f(own)

/** `tcp:`, `unix:` as a source: the frames the connection brings, until the peer ends its side.
  * With `retry`, a connection that breaks (a reset, not an end) is made again: the frames read
  * whole before the break have been passed on; a partial frame at the break is dropped (and said);
  * what the peer sends again on the new connection is its own affair.
  */
final class ConnectInput(val address: StreamSocketAddress, options: StageOptions, shared: SharedConnection | Null = null) extends Input:
  private val holder = if shared != null then shared else SharedConnection()
  @volatile private var closed = false
  private val pool = BufferPool(Endpoints.ReadSize, keep = 2 * options.buffer + 4)
  @volatile private var notes: List[String] = Nil

  override def detached: Boolean = true
  override def countsFrames: Boolean = options.countingFrames
  // More already in the socket: a direct copy writes on without flushing (ADR 0013).
  override def atHand: Boolean = holder.atHand

  // Each failed try is said at once.
  private val teller = Teller()
  override def attach(d: Diagnostics): Unit = teller.attach(d)
  private def say(text: String): Unit = teller.notice(text)

  def open(): Unit =
    holder.conn = Sockets.connect(address, say, Sockets.pause)

  override def endNotes: Seq[String] = notes.reverse

  def pump(out: SendableChannel[FrameBatch])(using Async): Unit =
    var retriesLeft = address.settings.retry
    var done = false
    while !done do
      val reader = ConnectionReader(address.render, options, pool, counters, Counters(address.render), w => notes = w :: notes, namesPeer = true)
      try
        reader.run(holder.conn.nn, out)
        done = true
      catch
        case e: IOException if !closed && retriesLeft > 0 =>
          retriesLeft -= 1
          val lost = reader.pending
          val partial = if lost > 0 then s" ($lost bytes of a partial frame dropped)" else ""
          say(s"asyncpipe: ${address.render}: the connection broke: ${Sockets.reason(e)}$partial; connecting again " +
            s"in ${Durations.render(address.settings.interval)} (${address.settings.retry - retriesLeft} of ${address.settings.retry})")
          holder.conn.nn.close()
          Sockets.pause(address.settings.interval.toNanos)
          holder.conn = Sockets.connect(address.copy(settings = address.settings.copy(retry = 0)), say, Sockets.pause)
        case e: IOException if !closed => throw Sockets.failure(address, "read", e)

  def close(): Unit =
    closed = true
    val c = holder.conn
    if c != null then c.close()

/** The connection of a conversation: opened by its input, written by its output. */
final class SharedConnection:
  @volatile private var current: Connection | Null = null
  @volatile private var fd = -1
  def conn: Connection | Null = current
  def conn_=(c: Connection | Null): Unit =
    current = c
    fd = if c == null then -1 else { val ch = c.kernelChannel; if ch == null then -1 else Splice.descriptor(ch) }
  /** Whether the socket holds bytes ready to read now (one ioctl); false when it cannot be told. */
  def atHand: Boolean = { val d = fd; d >= 0 && Readable.bytes(d) > 0 }

/** `tcp:`, `unix:` as a sink: frames written to the connection; at the end of input, the rest is
  * flushed, this side shut (FIN), and the peer given up to `linger` to close its side (what it
  * sends meanwhile is read and dropped, and said). In a conversation (`shared`), the input reads
  * what the peer sends, so the end is only the FIN.
  */
final class ConnectOutput(address: StreamSocketAddress, options: StageOptions, shared: SharedConnection | Null = null) extends Output:
  def name: String = address.render
  private var conn: Connection | Null = null
  private var out: OwnedOutput | Null = null
  private var writer: FrameWriter | Null = null
  @volatile private var notes: List[String] = Nil

  def open(): Unit =
    conn = if shared != null then shared.conn.nn else Sockets.connect(address, say, Sockets.pause)
    val c = conn.nn
    out = OwnedOutput(c.out, onCut = () => c.resetOnClose())
    writer = FrameWriter(options.frame, out.nn)

  override def endNotes: Seq[String] = notes.reverse
  private val teller = Teller()
  override def attach(d: Diagnostics): Unit = teller.attach(d)
  private def say(text: String): Unit = teller.notice(text)

  def write(batch: FrameBatch)(using Async): Unit =
    try
      writer.nn.write(batch)
      StreamOutput.count(counters, batch, options.frame, options.countingFrames)
    catch case e: IOException => throw Sockets.failure(address, "write", e)
    finally batch.release()

  // Flushed: in the socket's buffer, out of this process's hands.
  override def handsOff: Boolean = true

  // Nothing more at hand: sent at once, as nc sends each read (a reply may be waiting on it).
  def idle()(using Async): Unit =
    try
      writer.nn.flush()
      out.nn.flush()
    catch case e: IOException => throw Sockets.failure(address, "write", e)

  def finish()(using Async): Unit =
    val c = conn.nn
    try
      writer.nn.flush()
      out.nn.flush()
      c.shutdownOutput() // TLS: close_notify, which must reach the peer (a TCP FIN's failure is not said)
    catch case e: IOException => throw Sockets.failure(address, "write", e)
    if shared == null then
      val dropped = Sockets.linger(c, address.settings.linger)
      c.close()
      dropped match
        case Sockets.Lingered.Closed(0) => ()
        case Sockets.Lingered.Closed(n) => notes = s"asyncpipe: ${address.render}: the peer sent $n bytes, dropped (a sink only writes)" :: notes
        case Sockets.Lingered.Refused(_, why) => throw Sockets.failure(address, "write", why)
        case Sockets.Lingered.TimedOut(n) =>
          notes = s"asyncpipe: ${address.render}: every frame was sent, but the peer did not close within ${Durations.render(address.settings.linger)} (linger)${if n > 0 then s"; it sent $n bytes, dropped" else ""}" :: notes

  // Every frame written goes out, then a reset (TCP, TLS), which the peer reads as an error, not
  // as the end of a complete stream (a Unix socket has no reset: it closes).
  override def finishFailed()(using Async): Unit =
    val c = conn.nn
    if shared != null then finish()
    else
      try
        writer.nn.flush()
        out.nn.flush()
      catch case e: IOException => throw Sockets.failure(address, "write", e)
      finally
        c.resetOnClose()
        c.close()

  def abort(): Unit =
    val c = conn
    if c != null && shared == null then c.close()

  /** A plain socket takes a kernel copy when nothing is counted frame by frame: a regular file is
    * sent with sendfile(2), a pipe spliced (ADR 0014).
    */
  override lazy val kernelTarget: KernelTarget | Null =
    val ch = conn.nn.kernelChannel
    if ch == null || options.countingFrames || !Splice.permitted then null
    else
      val fd = Splice.descriptor(ch)
      if fd < 0 then null else KernelTarget(fd, ch)

  override def kernelMove[T](move: => T): T =
    writer.nn.flush()
    out.nn.exclusively(move)

  override def movedInKernel(n: Long): Unit = counters.bytes += n
