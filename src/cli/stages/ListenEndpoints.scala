package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.frames.*
import asyncpipe.cli.system.*

import asyncpipe.async.*
import java.io.IOException
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.locks.ReentrantLock
import scala.util.{Failure, Success}

/** What a listener tells about each connection as it ends, under `--stats` (a line) or
  * `--stats-json` (an object `{"connection": {...}}`): its peer, frames, bytes and seconds, and why
  * it ended early, if it did.
  */
private[stages] final class ConnectionLog(address: StreamSocketAddress, options: StageOptions) extends Teller:
  /** A connection past `max-conns`, closed at once. */
  def refused(peer: String): Unit =
    warn(s"asyncpipe: ${address.render}: refused $peer: ${address.settings.maxConns} connections already (max-conns)")

  def ended(peer: String, own: Counters, startedNanos: Long, problem: Option[String]): Unit =
    val t = diagnostics
    if t != null && (options.stats || options.statsJson) then
      val seconds = (System.nanoTime() - startedNanos) / 1e9
      val frames = if options.countingFrames then s"${own.frames} frame${if own.frames == 1 then "" else "s"}, " else ""
      val text = f"asyncpipe: ${address.render}: $peer closed: $frames${StatsReporter.bytes(own.bytes.toDouble)} in $seconds%.2f s" +
        problem.fold("")(p => s" ($p)")
      val json = s"""{"address":${StatsReporter.quote(address.render)},"peer":${StatsReporter.quote(peer)},""" +
        s""""frames":${own.frames},"bytes":${own.bytes},"seconds":${"%.3f".formatLocal(java.util.Locale.ROOT, seconds)},""" +
        s""""error":${problem.fold("null")(StatsReporter.quote)}}"""
      t.record("connection", json, text)

/** `tcp-listen:`, `unix-listen:` as a source: the frames of every connection, fanned in. Each
  * connection is read by a thread of its own with its own framing, and only whole frames are
  * passed on, so two clients writing at once never tear or merge a frame. A connection that ends,
  * breaks or sends a bad frame ends alone (said on stderr; whole frames before it were passed on);
  * the listener goes on until the stage stops, or with `once` ends with its one connection (whose
  * failure is then the stage's). Past `max-conns` a connection is closed at once, and said.
  */
final class ListenInput(val address: StreamSocketAddress, options: StageOptions) extends Input:
  private var listener: SocketListener | Null = null
  private val once = address.settings.once
  // One connection reads as a stream does; many, in smaller buffers each.
  private val pool = if once then BufferPool(Endpoints.ReadSize, keep = 2 * options.buffer + 4) else BufferPool(ListenInput.ReadSize, keep = 64)
  private val live = AtomicInteger()
  private val log = ConnectionLog(address, options)
  @volatile private var notes: List[String] = Nil

  // Many connections: accepted and read in futures of the flow, which a stop cancels (and waits
  // for). One (`once`): read on a thread of its own, which a direct copy writes from (ADR 0013).
  override def detached: Boolean = once
  // `once`: more already in the connection's socket (a direct copy flushes only when not).
  override def atHand: Boolean = { val d = onceFd; d >= 0 && Readable.bytes(d) > 0 }
  @volatile private var onceFd = -1
  override def countsFrames: Boolean = options.countingFrames

  def open(): Unit = listener = Sockets.listen(address, s => notes = s :: notes)

  override def opened: Seq[String] = notes.reverse ++ listener.nn.chosenPort
  override def attach(tell: Diagnostics): Unit = log.attach(tell)

  def pump(out: SendableChannel[FrameBatch])(using Async): Unit =
    val l = listener.nn
    if address.settings.once then
      // A client whose TLS handshake fails is not the one served: said, and the next one awaited.
      var c = l.accept()
      while !handshaken(c) do c = l.accept()
      val ch = c.kernelChannel
      if ch != null then onceFd = Splice.descriptor(ch)
      serve(c, out, alone = true)
    else
      Async.group {
        while true do
          val c = l.accept()
          if live.incrementAndGet() > address.settings.maxConns then
            live.decrementAndGet()
            c.close()
            log.refused(c.peer)
          else Future { try serve(c, out, alone = false) finally live.decrementAndGet() }
      }

  /** Whether `c` is ready ([[Connection.ready]]: a TLS handshake); if not, it is said and closed. */
  private def handshaken(c: Connection): Boolean =
    try { c.ready(); true }
    catch
      case e: IOException =>
        c.close()
        log.warn(s"asyncpipe: ${address.render}: ${c.peer}: ${Sockets.reason(e)}; still listening (once)")
        false

  /** Reads `c` to its end. A failure ends only this connection, unless it is the stage's `alone`. */
  private def serve(c: Connection, out: SendableChannel[FrameBatch], alone: Boolean)(using Async): Unit =
    val own = Counters(c.peer)
    val started = System.nanoTime()
    val reader = ConnectionReader(address.render, options, pool, counters, own, log.warn)
    try
      c.ready()
      reader.run(c, out)
      log.ended(c.peer, own, started, None)
    catch
      case e: (IOException | FramingException) if !Async.current.group.isCancelled =>
        val lost = reader.pending
        val why = e match
          case f: FramingException => f.getMessage
          case _                   => Sockets.reason(e)
        val problem = s"$why${if lost > 0 then s"; $lost bytes of a partial frame dropped" else ""}"
        log.ended(c.peer, own, started, Some(problem))
        if alone then throw CliError.Failed(CliError.Runtime(s"${address.render}: ${c.peer}", problem))
        log.warn(s"asyncpipe: ${address.render}: ${c.peer}: $problem; the others go on")
    finally c.close()

  def close(): Unit =
    val l = listener
    if l != null then l.close()

object ListenInput:
  /** A listener's read buffers: smaller than a stream's, as a thousand connections may each hold one. */
  val ReadSize: Int = 64 * 1024

/** `tcp-listen:`, `unix-listen:` as a sink: every frame to every client connected at the time (a
  * broadcast). Each client has a queue of [[ListenOutput.ClientQueue]] messages and a thread that
  * writes it; a client whose queue is full is waited for (`on-slow=block`, the default: the
  * slowest client sets the pace, back-pressure reaches the input) or misses the message
  * (`on-slow=drop`: its frames are counted as dropped). Until the first client connects, frames
  * wait for it (block) or are dropped (drop). A client that goes away is said on stderr and the
  * rest go on; past `max-conns` a connection is closed at once; with `once`, the first client
  * (once ready) is the only one: the listener stops accepting. At the end of input each client
  * gets everything queued for it, then FIN, and up to `linger` to close.
  */
final class ListenOutput(address: StreamSocketAddress, options: StageOptions) extends Output:
  def name: String = address.render
  private var listener: SocketListener | Null = null
  private val clients = CopyOnWriteArrayList[Client]()
  // Accepted, their TLS handshake not done yet: no frame is theirs until it is.
  private val handshaking = java.util.concurrent.ConcurrentHashMap.newKeySet[Client]()
  private val lock = ReentrantLock()
  private val someone = lock.newCondition()
  @volatile private var ended = false
  private var acceptor: Thread | Null = null
  private val log = ConnectionLog(address, options)
  @volatile private var notes: List[String] = Nil
  private val block = address.settings.onSlow == OnSlow.Block

  def open(): Unit =
    listener = Sockets.listen(address, s => notes = s :: notes)
    notes = listener.nn.chosenPort.toList.reverse ++ notes
    acceptor = Thread.ofVirtual().name(s"asyncpipe-accept ${address.render}").start(() => acceptLoop())

  override def opened: Seq[String] = notes.reverse
  override def attach(tell: Diagnostics): Unit = log.attach(tell)

  private def acceptLoop(): Unit =
    val l = listener.nn
    try
      while !ended do
        val c = l.accept()
        if clients.size + handshaking.size >= address.settings.maxConns then
          c.close()
          log.refused(c.peer)
        else
          val client = Client(c)
          handshaking.add(client)
          client.start() // it joins `clients` once ready (a TLS handshake, on its own thread)
    catch case _: IOException => () // closed: the end, or a stop

  def write(batch: FrameBatch)(using Async): Unit =
    if block && clients.isEmpty then awaitClient()
    val now = clients.toArray(Array.empty[Client])
    if now.isEmpty then // went to no one: dropped, not out
      counters.dropped += batch.frameCount
      batch.release()
    else
      StreamOutput.count(counters, batch, options.frame, options.countingFrames)
      batch.share(now.length)
      var i = 0
      while i < now.length do
        now(i).offer(batch)
        i += 1

  /** Waits for a client (`on-slow=block` with none connected); a stop ends the wait. */
  private def awaitClient(): Unit =
    lock.lock()
    try
      while clients.isEmpty && !ended do
        try someone.await()
        catch case _: InterruptedException => throw java.util.concurrent.CancellationException("stopped")
      if clients.isEmpty then throw java.util.concurrent.CancellationException("stopped before a client connected")
    finally lock.unlock()

  override def stopping(): Unit =
    ended = true
    lock.lock()
    try someone.signalAll() finally lock.unlock()
    clients.forEach(_.end()) // a send waiting on a full queue gives up; what is queued still goes out

  def idle()(using Async): Unit = ()

  def finish()(using Async): Unit =
    ended = true
    lock.lock()
    try someone.signalAll() finally lock.unlock()
    val l = listener
    if l != null then l.close()
    clients.forEach(_.end())
    clients.forEach(_.join())

  def abort(): Unit =
    ended = true
    val l = listener
    if l != null then l.close()
    clients.forEach(_.kill())
    handshaking.forEach(_.kill())

  /** One connected client: its queue and the thread that writes it. */
  private final class Client(conn: Connection):
    private val queue = BufferedChannel[FrameBatch](ListenOutput.ClientQueue)
    private val own = Counters(conn.peer)
    private val started = System.nanoTime()
    @volatile private var thread: Thread | Null = null

    def start(): Unit = thread = Thread.ofVirtual().name(s"asyncpipe-client ${conn.peer}").start(() => run())

    def offer(batch: FrameBatch)(using Async): Unit =
      val taken =
        try if block then { queue.send(batch); true } else queue.trySend(batch)
        catch case _: ChannelClosedException => false
      if !taken then
        counters.synchronized(counters.dropped += batch.frameCount)
        batch.release()

    def end(): Unit = queue.close()
    def kill(): Unit = { queue.close(); conn.close() }
    def join(): Unit = { val t = thread; if t != null then t.join() }

    private def run(): Unit =
      val ready =
        try { conn.ready(); true }
        catch
          case e: IOException =>
            handshaking.remove(this)
            conn.close()
            val why = Sockets.reason(e)
            log.warn(s"asyncpipe: ${address.render}: ${conn.peer}: $why; the others go on")
            log.ended(conn.peer, own, started, Some(why))
            false
      if ready then
        // `once`: this is the one client; no other is accepted (closed before a frame can reach it).
        if address.settings.once then listener.nn.close()
        clients.add(this)
        handshaking.remove(this)
        if ended then queue.close() // the end came during the handshake: nothing is for this client
        lock.lock()
        try someone.signalAll() finally lock.unlock()
        serve()

    private def serve(): Unit =
      val out = OwnedOutput(conn.out, onCut = () => conn.resetOnClose())
      val writer = FrameWriter(options.frame, out)
      var problem: Option[String] = None
      def failed(e: IOException): Unit =
        problem = Some(Sockets.reason(e))
        clients.remove(this)
        queue.close() // a sender waiting on it gives up; what is queued is released below
      Async.blocking {
        var open = true
        while open do
          // Flushed only when nothing more is queued: a burst goes out in full buffers.
          val next = queue.tryRead() match
            case Some(t) => t
            case None =>
              if problem.isEmpty then try { writer.flush(); out.flush() } catch case e: IOException => failed(e)
              queue.read()
          next match
            case Failure(_) => open = false
            case Success(batch) =>
              if problem.isEmpty then
                try
                  writer.write(batch)
                  StreamOutput.count(own, batch, options.frame, options.countingFrames)
                catch case e: IOException => failed(e)
              else counters.synchronized(counters.dropped += batch.frameCount)
              batch.release()
      }
      if problem.isEmpty then
        try
          writer.flush()
          out.flush()
          conn.shutdownOutput()
          Sockets.linger(conn, address.settings.linger)
        catch case e: IOException => problem = Some(Sockets.reason(e))
      conn.close()
      clients.remove(this)
      problem.foreach(p => log.warn(s"asyncpipe: ${address.render}: ${conn.peer} went away: $p; the others go on"))
      log.ended(conn.peer, own, started, problem)

object ListenOutput:
  /** Messages queued for one client of a broadcast: how far it may fall behind the fastest. */
  val ClientQueue = 16
