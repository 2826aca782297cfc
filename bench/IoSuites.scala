package asyncpipe.bench

import asyncpipe.async.*
import asyncpipe.bench.Harness.{onVirtualThread, times}
import asyncpipe.io.{PIOHelper, SocketUDP}
import java.net.InetSocketAddress
import java.nio.ByteBuffer
import java.nio.channels.DatagramChannel
import java.nio.file.{Files, Path, StandardOpenOption as Open}
import java.util.concurrent.atomic.AtomicBoolean

/** File IO: `PIOHelper.withFile` + `readString` / `writeString` (open, operate, close) against
  * `java.nio.file.Files.readString` / `writeString` (which also open and close), for a 40 MB and
  * a 4-byte file, on tmpfs (`/dev/shm`) where there is one, so that the disk does not drown the
  * difference. Both sides run on the same virtual thread, in turns of the same plan.
  */
object FileSuite extends Suite:
  val name = "file"
  val description = "PosixLikeIO readString/writeString vs java.nio.file.Files, 40 MB and 4 B files"

  private val BigSize = 40_000_000

  def run(h: Harness): SuiteResult =
    val shm = Path.of("/dev/shm")
    val dir = if Files.isDirectory(shm) && Files.isWritable(shm) then Files.createTempDirectory(shm, "asyncpipe-bench")
              else Files.createTempDirectory("asyncpipe-bench")
    try
      // text that is not one repeated byte, so a misplaced chunk would change the checks below
      val big = Iterator.from(0).map(i => s"line $i of the forty megabytes\n").flatMap(_.iterator).take(BigSize).mkString
      val comparisons = onVirtualThread {
        Async.blocking {
          // 12 whole-file operations a call (480 MB, a few tenths of a second each): with 20 this
          // suite took 45 s of the full run's 5-minute budget
          Seq(("40 MB", big, 12), ("4 B", "abcd", 100_000)).flatMap { (label, text, fullOps) =>
            val file = dir.resolve(s"bench-${label.replace(' ', '-')}")
            val path = file.toString
            val size = text.length // ASCII: bytes == chars
            def check(s: String) = if s.length != size then throw IllegalStateException(s"read ${s.length} chars of $size from $path")
            Files.writeString(file, text)
            val IndexedSeq(read, filesRead) = h.measureTogether(
              Subject(s"PIO readString $label", fullOps)(k => times(k)(check(PIOHelper.withFile(path)(_.readString(size).value)))),
              Subject(s"Files.readString $label", fullOps)(k => times(k)(check(Files.readString(file))))
            ): @unchecked
            val IndexedSeq(write, filesWrite) = h.measureTogether(
              Subject(s"PIO writeString $label", fullOps) { k =>
                times(k)(PIOHelper.withFile(path, Open.CREATE, Open.TRUNCATE_EXISTING, Open.WRITE)(_.writeString(text).value))
              },
              Subject(s"Files.writeString $label", fullOps)(k => times(k)(Files.writeString(file, text)))
            ): @unchecked
            if Files.size(file) != size then throw IllegalStateException(s"$path has ${Files.size(file)} bytes, wrote $size")
            val target = Target.timeWithin(if size > 4 then 1.15 else 1.5)
            Seq(Comparison(read, filesRead, Some(target)), Comparison(write, filesWrite, Some(target)))
          }
        }
      }
      SuiteResult(name, comparisons, Nil)
    finally
      Files.list(dir).forEach(Files.delete(_))
      Files.delete(dir)

/** UDP loopback: one sender thread sends 1,000,000 unpaced 100-byte datagrams to a receive loop
  * on a virtual thread; how many arrive, for a `SocketUDP` loop (`receive().await`) and for a
  * plain blocking `DatagramChannel` loop receiving into one reused direct buffer, in turns, each
  * with a fresh socket and the system's default receive buffer. A datagram that finds the
  * kernel's buffer full is dropped, so what a loop receives measures how fast it drains.
  *
  * The sender ends each run with one-byte end markers, one per millisecond, until the receiver
  * has seen one: loopback keeps order, so every data datagram that survived came before it.
  */
object UdpSuite extends Suite:
  val name = "udp"
  val description = "UDP loopback: datagrams received of 1,000,000 unpaced, SocketUDP vs a plain DatagramChannel loop"

  private val Payload = 100

  /** One warm-up round at most: a round sends `count` datagrams to each loop, far past the JIT's
    * thresholds, and takes about 8 s at 1,000,000; the first measured round after one warm-up
    * round was in line with the later ones in the five full runs looked at when this was decided.
    */
  private val WarmupRounds = 1
  /** Five measured rounds at most (the full plan has seven): each is about 8 s, and this was the
    * longest suite (67 s) of a full run that once took 308 s on a busy machine, past its 5 minutes.
    */
  private val MeasuredRounds = 5

  def run(h: Harness): SuiteResult =
    val count = h.plan.ops(1_000_000)
    val warmup = math.min(h.plan.warmup, WarmupRounds)
    val iterations = math.min(h.plan.iterations, MeasuredRounds)
    val ours = Seq.newBuilder[Double]
    val plain = Seq.newBuilder[Double]
    var buffer = 0
    for round <- 1 to warmup + iterations do
      val measured = round > warmup
      h.progress(s"udp: round $round of ${warmup + iterations}${if measured then "" else " (warm-up)"}")
      val a = onVirtualThread(receiveWithSocketUDP(count))
      val b = onVirtualThread(receiveWithDatagramChannel(count))
      if measured then
        ours += a.received
        plain += b.received
        buffer = a.receiveBuffer
    val subject = Measurement(s"SocketUDP receive loop, of $count", ours.result(), None, 0, "received")
    val baseline = Measurement(s"DatagramChannel receive loop, of $count", plain.result(), None, 0, "received")
    SuiteResult(name, Seq(Comparison(subject, baseline, Some(Target.atLeast(1.0)))), Seq(
      Figure("SocketUDP received, median", subject.median * 100 / count, "%", None),
      Figure("DatagramChannel received, median", baseline.median * 100 / count, "%", None),
      Figure("kernel receive buffer (SO_RCVBUF)", buffer / 1024.0, "KiB", None)
    ))

  private final case class Run(received: Double, receiveBuffer: Int)

  private def receiveWithSocketUDP(count: Int): Run =
    Async.blocking {
      val socket = SocketUDP().bindAndOpen("127.0.0.1", 0)
      try
        val done = AtomicBoolean(false)
        val sender = startSender(socket.localAddress, count, done)
        var received = 0
        var more = true
        while more do
          if socket.receive().value.getLength == Payload then received += 1 else more = false
        done.set(true)
        sender.join()
        Run(received, socket.receiveBufferSize)
      finally socket.close()
    }

  private def receiveWithDatagramChannel(count: Int): Run =
    val channel = DatagramChannel.open().bind(InetSocketAddress("127.0.0.1", 0))
    try
      val done = AtomicBoolean(false)
      val sender = startSender(channel.getLocalAddress.asInstanceOf[InetSocketAddress], count, done)
      val buf = ByteBuffer.allocateDirect(65536)
      var received = 0
      var more = true
      while more do
        buf.clear()
        channel.receive(buf)
        if buf.position() == Payload then received += 1 else more = false
      done.set(true)
      sender.join()
      Run(received, channel.getOption[Integer](java.net.StandardSocketOptions.SO_RCVBUF).intValue)
    finally channel.close()

  /** A platform thread sending `count` datagrams to `to` as fast as it can, then end markers
    * until `done` (for at most 10 seconds: a receiver that died must not hang the bench).
    */
  private def startSender(to: InetSocketAddress, count: Int, done: AtomicBoolean): Thread =
    Thread.ofPlatform().daemon().start { () =>
      val out = DatagramChannel.open()
      try
        val data = ByteBuffer.allocateDirect(Payload)
        var i = 0
        while i < count do
          data.clear()
          data.putInt(0, i)
          out.send(data, to)
          i += 1
        val end = ByteBuffer.allocateDirect(1)
        val deadline = System.nanoTime() + 10_000_000_000L
        while !done.get && System.nanoTime() < deadline do
          end.clear()
          out.send(end, to)
          Thread.sleep(1)
      finally out.close()
    }
