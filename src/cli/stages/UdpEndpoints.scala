package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.frames.*
import asyncpipe.cli.system.*

import asyncpipe.async.*
import asyncpipe.io.{IoFailure, SocketUDP}
import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path}
import scala.util.Try

/** `udp:PORT` or `udp:HOST:PORT` as a source: every datagram, from any sender, is one frame.
  *
  * Under `lines` (`nul`) a datagram is one line: one trailing newline (NUL) is its terminator and
  * not part of the frame, so `echo hi | nc -u` arrives as the line "hi"; a datagram holding a
  * newline elsewhere cannot be one line, and fails the stage when written to a `lines` stream
  * (use `--frame len`). Under `len` and `raw` the frame is the datagram exactly.
  *
  * Ends after `--count` datagrams or `--idle-timeout` without one; otherwise runs until stopped.
  * With `--on-full drop` a datagram that the next stage has no room for is dropped and counted;
  * drops in the kernel (the receive buffer was full) are read from /proc/net/udp.
  */
final class UdpInput(val address: UdpAddress, options: StageOptions) extends Input:
  private val socket = SocketUDP()
  private val (host, port, rcvbuf) = (address.hostLiteral, address.port, address.rcvbuf)
  private val terminator: Int = options.frame.delimiter
  private var lastSeq = -1L
  /** The message being filled: the waiting datagrams, one `len` frame each. */
  private val batch = UdpInput.BatchBuilder()
  /** Whether the last message stopped at its limit rather than at an empty queue. */
  @volatile private var stoppedFull = false

  def open(): Unit =
    try socket.bindAndOpen(host.orNull, port, rcvbuf.getOrElse(0))
    catch
      case e: Exception =>
        FdReserve.release(e)
        throw CliError.Failed(CliError.Runtime(address.render, IoFailure.reason(e)))

  /** The port the socket is bound to (the one the kernel chose, for port 0). */
  def localPort: Int = socket.localPort

  /** For port 0, the port the kernel chose (the senders must be told); a `rcvbuf` the kernel
    * capped at net.core.rmem_max (the user counts on it to absorb bursts).
    */
  override def opened: Seq[String] =
    val chosen = if port == 0 then Seq(s"asyncpipe: ${address.render} listens on port $localPort") else Nil
    val capped = rcvbuf.map(asked => (asked, socket.receiveBufferSize)).collect { case (asked, granted) if granted < asked =>
      s"asyncpipe: ${address.render}: the kernel granted a receive buffer of $granted bytes, " +
        s"not $asked (net.core.rmem_max); more needs 'sysctl -w net.core.rmem_max=$asked'"
    }
    chosen ++ capped

  /** Read on a thread of its own: a wait for the socket is a system call there (`epoll_wait`),
    * not a future, a worker and a timer per datagram (which cost ~16 us of CPU per datagram and
    * could not keep up with 50,000 a second while the next stage's JVM started). With one output
    * (and `--on-full block`) the flow also writes each message on this thread ([[Flow]]).
    */
  override def detached: Boolean = true
  /** After a message that stopped at its limit, whether another datagram waits (one system call). */
  override def atHand: Boolean = stoppedFull && socket.hasWaiting
  override def dropsWhenFull: Boolean = options.onFull == OnFullPolicy.Drop

  /** Each message holds every datagram that was waiting (at most [[UdpInput.MaxBatchFrames]] or
    * about [[UdpInput.MaxBatchBytes]]): a burst costs one hand-over, not one per datagram.
    */
  def pump(out: SendableChannel[FrameBatch])(using Async): Unit =
    val limit = options.count.getOrElse(Long.MaxValue)
    val timeout = options.idleTimeout.fold(0L)(_.toNanos)
    var received = 0L
    var idle = false
    while received < limit && !idle do
      val room = math.min(UdpInput.MaxBatchFrames.toLong, limit - received).toInt
      batch.clear()
      stoppedFull = false
      val n = socket.receiveWaiting(timeout) { payload =>
        add(payload)
        val more = batch.frames < room && batch.size < UdpInput.MaxBatchBytes
        if !more then stoppedFull = true
        more
      }
      if n == 0 then idle = true
      else
        received += n
        val message = batch.result()
        options.onFull match
          case OnFullPolicy.Block => out.send(message)
          case OnFullPolicy.Drop  => if !out.trySend(message) then counters.dropped += n

  /** One datagram into the batch, without its trailing terminator (see the class comment). */
  private def add(payload: java.nio.ByteBuffer): Unit =
    val length = payload.remaining
    val framed = if terminator >= 0 && length > 0 && (payload.get(payload.limit - 1) & 0xff) == terminator then length - 1 else length
    val at = batch.append(payload, framed)
    if options.checkSeq then checkSequence(batch.array, at, framed)
    counters.frames += 1
    counters.bytes += length // as it arrived, its terminator too: what a stream input counts

  /** Counts the numbers missing between the decimal number this frame starts with and the last. */
  private def checkSequence(data: Array[Byte], offset: Int, length: Int): Unit =
    var i = 0
    var n = 0L
    while i < length && i < 18 && data(offset + i) >= '0' && data(offset + i) <= '9' do
      n = n * 10 + (data(offset + i) - '0')
      i += 1
    if i > 0 then
      if lastSeq >= 0 && n > lastSeq + 1 then counters.seqGaps += n - lastSeq - 1
      if n > lastSeq then lastSeq = n

  def close(): Unit =
    if socket.isOpened then
      KernelDrops.of(socket).foreach(counters.kernelDrops = _)
      socket.close()

  /** Reads the kernel's drop count now (for live statistics). */
  def refreshKernelDrops(): Unit =
    if socket.isOpened then KernelDrops.of(socket).foreach(counters.kernelDrops = _)

object UdpInput:
  /** The most datagrams in one message. */
  val MaxBatchFrames: Int = 256
  /** A message takes no more datagrams once it holds this many bytes. */
  val MaxBatchBytes: Int = 256 * 1024

  /** Datagrams as `len` frames in one growing array; `result` copies them out as a message. */
  private final class BatchBuilder:
    var array: Array[Byte] = new Array[Byte](4096)
    var size: Int = 0
    var frames: Int = 0

    def clear(): Unit =
      size = 0
      frames = 0

    /** Appends the first `length` bytes of `payload` as one frame; where its payload starts. */
    def append(payload: java.nio.ByteBuffer, length: Int): Int =
      if size + 4 + length > array.length then
        array = java.util.Arrays.copyOf(array, math.max(array.length * 2, size + 4 + length))
      Framing.writeLength(array, size, length)
      payload.get(payload.position(), array, size + 4, length)
      size += 4 + length
      frames += 1
      size - length

    def result(): FrameBatch = FrameBatch(Framing.Len, java.util.Arrays.copyOf(array, size), size, terminated = true)

/** `udp:HOST:PORT` as a sink: one datagram per frame. Under `lines` (`nul`) the datagram is the
  * frame with its newline (NUL), under `len` the payload alone, under `raw` each chunk as read, cut
  * into datagrams of at most 65,507 bytes. A frame too large for a datagram fails the stage, or
  * with `--oversize drop` is dropped and counted.
  */
final class UdpOutput(address: UdpAddress.At, options: StageOptions) extends Output:
  def name: String = address.render
  private val socket = SocketUDP()
  private val terminator = options.frame.delimiter

  def open(): Unit =
    try socket.open()
    catch
      case e: Exception =>
        FdReserve.release(e)
        throw CliError.Failed(CliError.Runtime(name, IoFailure.reason(e)))

  def write(batch: FrameBatch)(using Async): Unit =
    if batch.framing == Framing.Raw && options.frame == Framing.Raw then
      var at = 0
      while at < batch.length do
        val n = math.min(UdpOutput.MaxPayload, batch.length - at)
        send(batch.bytes, at, n, withTerminator = false)
        at += n
    else
      batch.foreach((bytes, offset, length, _) => send(bytes, offset, length, withTerminator = terminator >= 0))
    batch.release()

  private def send(bytes: Array[Byte], offset: Int, length: Int, withTerminator: Boolean)(using Async): Unit =
    val size = length + (if withTerminator then 1 else 0)
    if size > UdpOutput.MaxPayload then
      options.oversize match
        case Oversize.Drop => counters.dropped += 1
        case Oversize.Fail =>
          throw CliError.Failed(CliError.Runtime(name,
            s"a frame of $size bytes does not fit in one datagram (at most ${UdpOutput.MaxPayload} bytes); " +
              "--oversize drop drops and counts such frames"))
    else
      val data = ByteBuffer.allocate(size)
      data.put(bytes, offset, length)
      if withTerminator then data.put(terminator.toByte)
      data.flip()
      socket.send(data, address.host.literal, address.port).value
      counters.frames += 1
      counters.bytes += size

  def idle()(using Async): Unit = ()
  def finish()(using Async): Unit = socket.close()
  def abort(): Unit = if socket.isOpened then socket.close()

object UdpOutput:
  /** The largest UDP payload over IPv4. */
  val MaxPayload: Int = 65507

/** `tick:DURATION[,count=N]`: one frame every DURATION at a fixed rate, the first at once; the
  * frames are numbered 1, 2, 3, ... When a tick comes late past later slots of the grid (the next
  * stage held it up, or the machine was busy), those slots are skipped: no burst to catch up,
  * and the numbering goes on from the last frame (it used to jump with the slots, so a start-up
  * delay of a few milliseconds turned `tick:1ms,count=3` into 1, 5, 6).
  */
final class TickInput(val address: TickAddress) extends Input:
  def open(): Unit = ()
  def close(): Unit = ()

  def pump(out: SendableChannel[FrameBatch])(using Async): Unit =
    val period = address.every.toNanos
    val start = System.nanoTime()
    var slot = 0L
    var sent = 0L
    while address.count.forall(sent < _) do
      val due = start + slot * period
      val wait = due - System.nanoTime()
      if wait > 0 then sleep((wait + 999_999) / 1_000_000)
      val text = (sent + 1).toString.getBytes(StandardCharsets.US_ASCII)
      out.send(FrameBatch.single(text, 0, text.length))
      counters.frames += 1
      counters.bytes += text.length
      sent += 1
      slot = math.max(slot + 1, (System.nanoTime() - start) / period)

/** The kernel's count of datagrams dropped on a socket (its receive buffer was full): the `drops`
  * column of /proc/net/udp and /proc/net/udp6, for the row of the socket's inode.
  */
object KernelDrops:
  def of(socket: SocketUDP): Option[Long] =
    Try {
      val port = socket.localPort
      val inodes = socketInodes()
      val rows = Seq("/proc/net/udp", "/proc/net/udp6").map(Path.of(_)).filter(Files.isReadable(_))
        .flatMap(p => scala.jdk.CollectionConverters.ListHasAsScala(Files.readAllLines(p)).asScala.drop(1))
        .map(_.trim.split("\\s+"))
      rows.collectFirst {
        case cols if cols.length >= 13 && portOf(cols(1)) == port && inodes.contains(cols(9)) => cols(12).toLong
      }
    }.toOption.flatten

  private def portOf(local: String): Int = Integer.parseInt(local.substring(local.lastIndexOf(':') + 1), 16)

  /** The inodes of this process's sockets, from the links in /proc/self/fd ("socket:[12345]"). */
  private def socketInodes(): Set[String] =
    val fds = Path.of("/proc/self/fd")
    val stream = Files.list(fds)
    try
      scala.jdk.CollectionConverters.IteratorHasAsScala(stream.iterator()).asScala.flatMap { fd =>
        Try(Files.readSymbolicLink(fd).toString).toOption.collect {
          case link if link.startsWith("socket:[") => link.stripPrefix("socket:[").stripSuffix("]")
        }
      }.toSet
    finally stream.close()
