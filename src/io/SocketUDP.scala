package asyncpipe.io

import asyncpipe.async.{Async, Future, Worker}
import java.net.{DatagramPacket, InetSocketAddress, SocketAddress, StandardSocketOptions}
import java.nio.ByteBuffer
import java.nio.channels.{ClosedChannelException, DatagramChannel, SelectionKey, Selector}
import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.locks.ReentrantLock
import scala.util.{Failure, Success}
import scala.util.control.NonFatal

/** A UDP socket on a non-blocking NIO `DatagramChannel`; see [[PosixLikeIO]] for the contract. */
final class SocketUDP:
  import SocketUDP.*

  @volatile private var channel: DatagramChannel | Null = null
  /** One receive at a time uses `inbox`; a waiting receive holds it while it waits. */
  private val receiving = ReentrantLock()
  /** Where datagrams land before they are copied out whole: room for the largest one. */
  private var inbox: ByteBuffer | Null = null // guarded by `receiving`
  /** Datagrams a receive took from the kernel after its future was cancelled: the next
    * receives return them first, so a cancel loses none.
    */
  private val stash = ConcurrentLinkedQueue[DatagramPacket]()
  private val waiting = ReentrantLock()
  /** Made on first need: one to wait until a datagram can be read, one until one can be sent. */
  private var readable: Selector | Null = null // guarded by `waiting`
  private var writable: Selector | Null = null // guarded by `waiting`
  /** The last destination, resolved: a sink sends to the same one every time. */
  @volatile private var lastTarget: InetSocketAddress | Null = null
  /** What the socket was bound to, for messages after it closed. */
  @volatile private var boundTo = "udp socket"

  def isOpened: Boolean =
    val ch = channel
    ch != null && ch.isOpen

  /** Opens the socket bound to `port` on every interface (0: a port the system picks). */
  def bindAndOpen(port: Int): SocketUDP = bindAndOpen(null, port)

  /** Opens the socket bound to `port` on the interface of `host` (null: every interface). */
  def bindAndOpen(host: String | Null, port: Int): SocketUDP = bindAndOpen(host, port, 0)

  /** Opens the socket bound to `port` on the interface of `host` (null: every interface), with a
    * kernel receive buffer (SO_RCVBUF) of `receiveBuffer` bytes (0: the system's default). The
    * buffer is set before the bind: a datagram that arrives at once finds the buffer asked for.
    */
  def bindAndOpen(host: String | Null, port: Int, receiveBuffer: Int): SocketUDP =
    require(port >= 0 && port <= 65535, s"UDP port was $port, must be 0 to 65535")
    require(receiveBuffer >= 0, s"receive buffer size was $receiveBuffer, must be >= 0")
    val at = if host == null then InetSocketAddress(port) else InetSocketAddress(host, port)
    val where = s"udp ${if host == null then "*" else host}:$port"
    if at.isUnresolved then throw PosixIOException("bind", where, "cannot resolve the host name")
    openWith(where) { ch =>
      if receiveBuffer > 0 then ch.setOption[Integer](StandardSocketOptions.SO_RCVBUF, Integer.valueOf(receiveBuffer))
      ch.bind(at)
    }

  /** Opens the socket unbound: the system binds it to a free port on the first send or receive. */
  def open(): SocketUDP = openWith("udp socket")(_ => ())

  private def openWith(where: String)(setUp: DatagramChannel => Unit): SocketUDP = synchronized {
    if isOpened then throw IllegalStateException(s"UDP socket ${describe} is already open: close it first")
    val ch = IoFailure.about("open", where)(DatagramChannel.open())
    try
      IoFailure.about("bind", where) {
        ch.configureBlocking(false)
        setUp(ch)
      }
    catch
      case e: Throwable =>
        ch.close()
        throw e
    stash.clear() // datagrams of an earlier opening are not this one's
    channel = ch
    boundTo = describe
    this
  }

  /** Closes the socket; a receive or send waiting on it fails. Closing a closed socket does nothing. */
  def close(): Unit =
    val ch = channel
    if ch != null then
      boundTo = describe
      IoFailure.about("close", boundTo)(ch.close())
      stash.clear()
      waiting.lock()
      try
        Seq(readable, writable).foreach(s => if s != null then s.close())
        readable = null
        writable = null
      finally waiting.unlock()

  /** The address and port the socket is bound to (port 0 before an unbound socket's first use). */
  def localAddress: InetSocketAddress =
    IoFailure.about("address of", describe)(opened("address of").getLocalAddress.asInstanceOf[InetSocketAddress | Null]) match
      case null => InetSocketAddress(0)
      case a    => a
  def localPort: Int = localAddress.getPort

  /** The kernel's receive buffer (SO_RCVBUF) in bytes, as the JDK reports it: on Linux the
    * request capped at `net.core.rmem_max` (the kernel reserves twice that; the JDK halves it back).
    */
  def receiveBufferSize: Int = IoFailure.about("get SO_RCVBUF of", describe)(opened("get SO_RCVBUF of").getOption[Integer](StandardSocketOptions.SO_RCVBUF).intValue)
  def receiveBufferSize_=(bytes: Int): Unit =
    require(bytes > 0, s"receive buffer size was $bytes, must be > 0")
    IoFailure.about("set SO_RCVBUF of", describe)(opened("set SO_RCVBUF of").setOption[Integer](StandardSocketOptions.SO_RCVBUF, Integer.valueOf(bytes)))

  // ---------------------------------------------------------------------------------------------
  // Send

  /** Sends the remaining bytes of `data` as one datagram to `address`:`port`. At most 65,507
    * bytes; the future completes when the kernel has taken the datagram.
    */
  def send(data: ByteBuffer, address: String, port: Int)(using Async): Future[Unit] =
    require(port > 0 && port <= 65535, s"UDP port was $port, must be 1 to 65535")
    val where = s"udp $address:$port"
    try
      val ch = opened("send to")
      if data.remaining > MaxDatagram then
        throw PosixIOException("send to", where, s"a datagram of ${data.remaining} bytes is larger than the UDP limit of $MaxDatagram")
      val target = resolve(address, port, where)
      val size = data.remaining
      if ch.send(data, target) == size then Sent
      else
        Worker.start[Unit](s"send to $where") { w =>
          try
            while ch.send(data, target) != size do awaitReady(SelectionKey.OP_WRITE)
            w.offer(Success(()))
          catch case NonFatal(e) => w.offer(Failure(IoFailure.wrap("send to", where, e)))
        }
    catch case NonFatal(e) => Future.now(Failure(IoFailure.wrap("send to", where, e)))

  private def resolve(address: String, port: Int, where: String): InetSocketAddress =
    val last = lastTarget
    if last != null && last.getPort == port && last.getHostString == address then last
    else
      val t = InetSocketAddress(address, port)
      if t.isUnresolved then throw PosixIOException("send to", where, "cannot resolve the host name")
      lastTarget = t
      t

  // ---------------------------------------------------------------------------------------------
  // Receive

  /** The next datagram, whole (up to 65,507 bytes), with the sender's address and port. A
    * datagram already waiting in the kernel is returned at once (a completed future); otherwise a
    * future waits for one. Cancelling that future ends the wait and leaves the socket open; a
    * datagram it had taken already goes to the next receive.
    */
  def receive()(using Async): Future[DatagramPacket] =
    try
      val ch = opened("receive on")
      var tries = 0
      while tries < ImmediateTries do
        if receiving.tryLock() then
          try
            val p = nextDatagram(ch)
            if p != null then return Future.now(Success(p))
          finally receiving.unlock()
        tries += 1
        var spin = 0
        while spin < 32 do { Thread.onSpinWait(); spin += 1 }
      waitForDatagram(ch)
    catch case NonFatal(e) => Future.now(Failure(IoFailure.wrap("receive on", describe, e)))

  /** Direct style, for the one thread that reads this socket (a pipeline stage's reader):
    * blocks the calling thread until a datagram is waiting, or at most `timeoutNanos` (no limit
    * for 0 or less), then hands the waiting datagrams to `each`, oldest first, while it returns
    * true; returns how many it handed over (0: the time passed without one). `each` gets the
    * datagram's payload as the remaining bytes of a buffer that is reused after the call.
    *
    * One wait and one system call per datagram, on the caller's thread: no future, no worker.
    * Datagrams a cancelled `receive()` kept come first. An interrupt ends the wait with an
    * `InterruptedException`; closing the socket ends it with a [[PosixIOException]].
    */
  def receiveWaiting(timeoutNanos: Long)(each: ByteBuffer => Boolean): Int =
    val ch = opened("receive on")
    receiving.lockInterruptibly()
    try
      val deadline = if timeoutNanos > 0 then System.nanoTime() + timeoutNanos else 0L
      var handed = handWaiting(ch, each)
      var left = timeoutNanos
      while handed == 0 && (deadline == 0L || left > 0) do
        // Selector.select takes whole milliseconds (0 = no limit): round up, never to 0
        IoFailure.about("receive on", describe)(awaitReady(SelectionKey.OP_READ, if deadline == 0L then 0L else (left + 999_999) / 1_000_000))
        handed = handWaiting(ch, each)
        if deadline != 0L then left = deadline - System.nanoTime()
      handed
    finally receiving.unlock()

  /** Hands the stash's and then the kernel's waiting datagrams to `each` while it wants more;
    * how many. The caller holds `receiving`. */
  private def handWaiting(ch: DatagramChannel, each: ByteBuffer => Boolean): Int =
    var handed = 0
    var more = true
    while more && !stash.isEmpty do
      val p = stash.poll()
      handed += 1
      more = each(ByteBuffer.wrap(p.getData, p.getOffset, p.getLength))
    while more && receiveIntoInbox(ch) != null do
      handed += 1
      more = each(inbox.nn)
    handed

  /** Whether a datagram is waiting now. To know, one is taken from the kernel if the stash is
    * empty; it is kept there for the next receive, so nothing is lost or reordered.
    */
  def hasWaiting: Boolean =
    val ch = opened("receive on")
    receiving.lock()
    try
      !stash.isEmpty || {
        val p = tryReceive(ch)
        if p != null then stash.add(p)
        p != null
      }
    finally receiving.unlock()

  /** One datagram from the kernel into `inbox` (flipped: its payload remains) without waiting:
    * its sender, or null if none was waiting. The caller holds `receiving`. */
  private def receiveIntoInbox(ch: DatagramChannel): SocketAddress | Null =
    var box = inbox
    if box == null then
      box = ByteBuffer.allocateDirect(InboxSize)
      inbox = box
    box.clear()
    val from = IoFailure.about("receive on", describe)(ch.receive(box))
    box.flip()
    from

  /** A worker that takes the next datagram, waiting on the selector while there is none. It
    * completes its future only while holding `receiving`, and if a cancel came first it stashes
    * the datagram there too, so that a receive that finds the stash empty under the lock knows
    * that no datagram is on its way into it.
    */
  private def waitForDatagram(ch: DatagramChannel)(using Async): Future[DatagramPacket] =
    Worker.start[DatagramPacket](s"receive on $describe") { w =>
      try
        var done = false
        while !done && !w.isCompleted do
          receiving.lockInterruptibly()
          try
            val p = nextDatagram(ch)
            if p != null then
              if !w.offer(Success(p)) then stash.add(p) // cancelled meanwhile: the next receive gets it
              done = true
            else awaitReady(SelectionKey.OP_READ)
          finally receiving.unlock()
      catch case e: Throwable if NonFatal(e) || e.isInstanceOf[InterruptedException] =>
        w.offer(Failure(IoFailure.wrap("receive on", describe, e))) // a no-op after a cancel
    }

  /** The stash's oldest datagram, else one from the kernel without waiting, else null. The caller
    * holds `receiving`.
    */
  private def nextDatagram(ch: DatagramChannel): DatagramPacket | Null =
    val stashed = stash.poll()
    if stashed != null then stashed else tryReceive(ch)

  /** A datagram from the kernel without waiting, or null. The caller holds `receiving`. */
  private def tryReceive(ch: DatagramChannel): DatagramPacket | Null =
    receiveIntoInbox(ch) match
      case null => null
      case from =>
        val box = inbox.nn
        val bytes = new Array[Byte](box.remaining)
        box.get(bytes)
        DatagramPacket(bytes, bytes.length, from)

  /** Waits until the channel is ready for `op`, a wakeup, or an interrupt (which throws
    * `InterruptedException`). A selector is woken by an interrupt without closing anything,
    * unlike a blocking channel operation, which is why the channel never blocks itself.
    */
  private def awaitReady(op: Int, timeoutMillis: Long = 0L): Unit =
    val ch = opened("wait on")
    val selector =
      waiting.lockInterruptibly()
      try
        val made = if op == SelectionKey.OP_READ then readable else writable
        if made != null then made
        else
          val s = Selector.open()
          try ch.register(s, op)
          catch
            case e: Throwable =>
              s.close()
              throw e
          if op == SelectionKey.OP_READ then readable = s else writable = s
          s
      finally waiting.unlock()
    try selector.select((_: SelectionKey) => (), timeoutMillis)
    catch case _: java.nio.channels.ClosedSelectorException => throw ClosedChannelException() // closed meanwhile
    if Thread.interrupted() then throw InterruptedException("UDP wait interrupted")

  private def opened(operation: String): DatagramChannel =
    val ch = channel
    if ch == null then throw PosixIOException(operation, describe, "not open: call open() or bindAndOpen(port) first")
    if !ch.isOpen then throw PosixIOException(operation, describe, "closed")
    ch

  private def describe: String =
    val ch = channel
    val local = if ch == null || !ch.isOpen then null else try ch.getLocalAddress catch case NonFatal(_) => null
    local match
      case a: InetSocketAddress => s"udp ${a.getHostString}:${a.getPort}"
      case _                    => boundTo

  override def toString: String = s"SocketUDP(${describe}${if isOpened then "" else ", closed"})"

object SocketUDP:
  /** The largest UDP payload over IPv4: 65,535 minus the IP and UDP headers. */
  final val MaxDatagram = 65507
  /** Room for the largest IPv6 payload too (65,527), so no datagram is ever cut. */
  private final val InboxSize = 65536
  private val Sent: Future[Unit] = Future.now(Success(()))
  /** Non-blocking attempts before a receive waits in a worker: a flood refills the kernel's queue
    * within microseconds, and a worker costs a thread start and a selector wait.
    */
  private final val ImmediateTries = 4

