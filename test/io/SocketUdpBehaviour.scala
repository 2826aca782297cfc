package asyncpipe.io

import asyncpipe.async.*
import asyncpipe.async.Support.*
import java.net.DatagramPacket
import java.nio.ByteBuffer
import java.util.concurrent.{CancellationException, ConcurrentLinkedQueue, CountDownLatch, TimeUnit}
import java.util.concurrent.atomic.{AtomicBoolean, AtomicReference}
import scala.collection.mutable
import scala.util.{Failure, Success, Try}
import munit.Location
import IoSupport.*

/** The UDP half of PosixLikeIO, on 127.0.0.1 and ephemeral ports: echo, datagram sizes, a
  * receive that waits and is cancelled (no datagram lost), errors, and close.
  */
abstract class SocketUdpBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  private val Loopback = "127.0.0.1"
  /** A bound for "promptly": a cancel or a close should take microseconds. */
  private val Prompt = 2000L

  private def intPacket(n: Int): ByteBuffer = ByteBuffer.allocate(4).putInt(n).flip()
  private def intOf(p: DatagramPacket): Int =
    assertEquals(p.getLength, 4, s"a datagram of ${p.getLength} bytes where an Int was sent")
    ByteBuffer.wrap(p.getData, p.getOffset, p.getLength).getInt

  /** The result of `f` if it completes within `millis`, waited for without an Async. */
  private def settledWithin[T](f: Future[T], millis: Long): Option[Try[T]] =
    val done = CountDownLatch(1)
    f.onComplete(Listener[Try[T]] { _ => done.countDown(); true })
    if done.await(millis, TimeUnit.MILLISECONDS) then f.poll() else None

  /** The next datagram, within `millis`; a receive that times out is cancelled (a datagram that
    * came meanwhile is kept: its value stands).
    */
  private def receiveWithin(s: SocketUDP, what: String, millis: Long = Patience)(using Async, Location): DatagramPacket =
    val r = s.receive()
    val timer = Timer(millis)
    Async.await(Async.either(r, timer)) match
      case Left(result) =>
        timer.cancel()
        result.get
      case Right(_) =>
        r.cancel()
        r.poll() match
          case Some(Success(p)) => p
          case _ =>
            val again = s.receive() // a datagram kept for the next receive comes back at once
            again.poll() match
              case Some(Success(p)) =>
                fail(s"no datagram within $millis ms: $what; yet datagram ${p.getData.take(p.getLength).mkString(",")} was kept for the next receive (a receive waited while it sat there)")
              case _ =>
                again.cancel()
                fail(s"no datagram within $millis ms: $what")

  private def withSockets[T](body: (SocketUDP, SocketUDP) => T): T =
    val server = SocketUDP().bindAndOpen(0)
    try
      val client = SocketUDP().bindAndOpen(0)
      try body(server, client)
      finally client.close()
    finally server.close()

  // ---------------------------------------------------------------------------------------------
  // Exchanges

  test("bindAndOpen(0) binds a free port: localPort > 0"):
    val s = SocketUDP()
    assert(!s.isOpened)
    assert(s.bindAndOpen(0) eq s, "bindAndOpen returns the socket")
    try
      assert(s.isOpened)
      assert(s.localPort > 0, s"localPort ${s.localPort}")
      assertEquals(s.localAddress.getPort, s.localPort)
    finally s.close()

  test("loopback echo: the server answers n with n + 1, several rounds; packets name the sender's address and port"):
    val rounds = 20
    withSockets: (server, client) =>
      Async.blocking:
        val senders = ConcurrentLinkedQueue[(String, Int)]()
        val echo = Future:
          for _ <- 1 to rounds do
            val p = server.receive().value
            senders.add((p.getAddress.getHostAddress, p.getPort))
            server.send(intPacket(intOf(p) + 1), p.getAddress.getHostAddress, p.getPort).value
        for n <- 1 to rounds do
          client.send(intPacket(n * 10), Loopback, server.localPort).value
          val reply = receiveWithin(client, s"the reply to ${n * 10}")
          assertEquals(intOf(reply), n * 10 + 1)
          assertEquals(reply.getAddress.getHostAddress, Loopback, "the reply's sender address")
          assertEquals(reply.getPort, server.localPort, "the reply's sender port")
        assertEquals(resultWithin(echo, "the echo server"), Success(()))
        senders.forEach: (addr, port) =>
          assertEquals(addr, Loopback, "the address the server saw")
          assertEquals(port, client.localPort, "the port the server saw")

  test("an unbound socket (open()) is bound by its first send; it receives the reply"):
    Async.blocking:
      val server = SocketUDP().bindAndOpen(0)
      val client = SocketUDP().open()
      try
        assert(client.isOpened)
        assertEquals(client.localPort, 0, "an unbound socket's port before its first use")
        client.send(intPacket(1), Loopback, server.localPort).value
        assert(client.localPort > 0, "the port after the first send")
        val p = receiveWithin(server, "the client's datagram")
        assertEquals(p.getPort, client.localPort)
        server.send(intPacket(2), Loopback, p.getPort).value
        assertEquals(intOf(receiveWithin(client, "the reply")), 2)
      finally
        client.close()
        server.close()

  test("a datagram of 65,507 bytes arrives whole and byte for byte"):
    val data = randomBytes(SocketUDP.MaxDatagram, 11)
    assertEquals(data.length, 65507)
    withSockets: (server, client) =>
      Async.blocking:
        client.send(ByteBuffer.wrap(data), Loopback, server.localPort).value
        val p = receiveWithin(server, "the largest datagram")
        assertEquals(p.getLength, data.length)
        assertSameBytes(java.util.Arrays.copyOfRange(p.getData, p.getOffset, p.getOffset + p.getLength), data, "the largest datagram")
        // from a direct buffer, and a part of a buffer (position and limit respected)
        val direct = ByteBuffer.allocateDirect(data.length + 100)
        direct.position(50)
        direct.put(data)
        direct.flip().position(50)
        client.send(direct, Loopback, server.localPort).value
        val q = receiveWithin(server, "the largest datagram from a direct buffer")
        assertSameBytes(java.util.Arrays.copyOfRange(q.getData, q.getOffset, q.getOffset + q.getLength), data, "from a direct buffer")

  test("sending 65,508 bytes fails with a message naming the size and the limit, and sends nothing"):
    withSockets: (server, client) =>
      Async.blocking:
        val e = failureOf[PosixIOException](outcome(client.send(ByteBuffer.allocate(65508), Loopback, server.localPort)))
        assertMentions(e, "65508", "65507", s"$Loopback:${server.localPort}")
        assert(client.isOpened)
        client.send(intPacket(3), Loopback, server.localPort).value
        assertEquals(intOf(receiveWithin(server, "the datagram after the failed send")), 3, "the next datagram")

  test("datagrams waiting in the kernel are returned in order, one per receive"):
    withSockets: (server, client) =>
      Async.blocking:
        for n <- 1 to 10 do client.send(intPacket(n), Loopback, server.localPort).value
        val got = (1 to 10).map(_ => intOf(receiveWithin(server, "a waiting datagram")))
        assertEquals(got.toList, (1 to 10).toList)

  // ---------------------------------------------------------------------------------------------
  // A receive that waits, and its cancel

  test("a receive with nothing waiting blocks in a future; cancelling it ends it promptly, the socket stays open, and the next datagram is received"):
    val rec = RecordingRuntime(runtime)
    withSockets: (server, client) =>
      blockingOn(rec):
        val r = server.receive()
        val worker = rec.awaitThreadIn("waiting in a selector")(inSelect)
        assert(!r.isCompleted, "a receive with nothing sent completed")
        val t0 = System.nanoTime()
        r.cancel()
        assertCancelledNow(r)
        join(worker, "the cancelled receive's worker")
        val took = millisSince(t0)
        assert(took < Prompt, s"the cancelled receive took $took ms to end")
        assert(server.isOpened, "the cancel closed the socket")
        client.send(intPacket(42), Loopback, server.localPort).value
        assertEquals(intOf(receiveWithin(server, "the datagram after the cancel")), 42)

  test("close wakes a waiting receive: it fails promptly, it does not hang"):
    val rec = RecordingRuntime(runtime)
    val server = SocketUDP().bindAndOpen(0)
    blockingOn(rec):
      val r = server.receive()
      rec.awaitThreadIn("waiting in a selector")(inSelect)
      server.close()
      settledWithin(r, Prompt) match
        case None => fail(s"the receive still waits $Prompt ms after close()")
        case Some(t) =>
          val e = failureOf[PosixIOException](t)
          assertMentions(e, "receive")
      assert(!server.isOpened)

  test("cancel race: 200 rounds of (receive, send, cancel), then every datagram is received exactly once"):
    withSockets: (server, client) =>
      Async.blocking:
        val seen = mutable.ArrayBuffer[Int]()
        var tookByCancelled = 0
        for batch <- 0 until 10 do
          for i <- 0 until 20 do
            val n = batch * 20 + i
            val r = server.receive()
            client.send(intPacket(n), Loopback, server.localPort).value
            r.cancel()
            r.poll() match
              case Some(Success(p))                         => seen += intOf(p); tookByCancelled += 1 // came before the cancel: its value stands
              case Some(Failure(_: CancellationException)) => ()
              case other                                    => fail(s"a cancelled receive gave $other")
          // the rest of this batch, before the kernel's buffer could fill
          while seen.count(_ / 20 == batch) < 20 do
            seen += intOf(receiveWithin(server, s"the rest of batch $batch (have ${seen.count(_ / 20 == batch)} of 20)"))
        // nothing more: the next datagram is the sentinel
        client.send(intPacket(-1), Loopback, server.localPort).value
        var v = intOf(receiveWithin(server, "the sentinel"))
        while v != -1 do
          seen += v
          v = intOf(receiveWithin(server, "the sentinel"))
        assertEquals(seen.sorted.toList, (0 until 200).toList, "every datagram exactly once")

  test("a datagram taken by a cancelled receive's worker is not stranded: the next receive gets it at once (1000 rounds)"):
    withSockets: (server, client) =>
      Async.blocking:
        for n <- 1 to 1000 do
          val r = server.receive()
          client.send(intPacket(n), Loopback, server.localPort).value
          r.cancel()
          r.poll() match
            case Some(Success(p)) => assertEquals(intOf(p), n)
            case _ => // nothing else will be sent: a datagram the worker stashed must not wait for another
              val next = server.receive()
              settledWithin(next, 1000) match
                case Some(t) => assertEquals(intOf(t.get), n)
                case None =>
                  next.cancel()
                  val again = server.receive() // a stashed datagram comes back at once
                  again.poll() match
                    case Some(Success(p)) =>
                      fail(s"round $n: a receive waited 1000 ms while datagram ${intOf(p)}, taken by the cancelled receive's worker, sat in the stash (the next receive returned it at once)")
                    case _ =>
                      again.cancel()
                      fail(s"round $n: datagram $n not received within 1000 ms after its receive was cancelled")

  test("a receive that lost a race against a Timer keeps waiting: the later datagram completes it"):
    withSockets: (server, client) =>
      Async.blocking:
        val r = server.receive()
        Async.await(Async.either(r, Timer(20))) match
          case Right(rang) => assert(rang)
          case Left(v)     => fail(s"nothing was sent, yet the receive won the race with $v")
        assert(server.isOpened)
        client.send(intPacket(5), Loopback, server.localPort).value
        resultWithin(r, "the receive that lost the race") match
          case Success(p) => assertEquals(intOf(p), 5)
          case other      => fail(s"the receive that lost the race gave $other")

  test("a receive that lost a race against a Timer and was cancelled loses nothing: the next receive gets the later datagram"):
    withSockets: (server, client) =>
      Async.blocking:
        for n <- 1 to 5 do
          val r = server.receive()
          val winner = Async.await(Async.race(r.map(_ => "receive"), Timer(10).map(_ => "timer")))
          assertEquals(winner, "timer")
          r.cancel()
          client.send(intPacket(n), Loopback, server.localPort).value
          assertEquals(intOf(receiveWithin(server, s"datagram $n after the lost race")), n)

  test("a receive in a future cancelled at the moment its datagram arrives loses nothing (300 rounds)"):
    // Each round races a future that receives against a 1 ms timer, with the datagram sent after
    // a 1 ms sleep: the cancel and the arrival meet. The future is cancelled when the timer
    // wins; its scope's end then waits for it and the receive's worker. Where can the datagram be?
    //   - in the future's value, or taken by its body before the cancel reached it: delivered
    //     (a cancelled body's value is discarded by the core, not by the socket);
    //   - in the receive future, completed before the cancel reached it: a completed value
    //     stands (as for every future), so it is there to poll, not lost; counted apart;
    //   - nowhere yet: the next receive must get it.
    // Lost is anything else: a datagram in none of these places, or a receive left pending.
    withSockets: (server, client) =>
      Async.blocking:
        var timerWon = 0
        var inReceiveFuture = 0
        val lost = mutable.ArrayBuffer[String]()
        for n <- 1 to 300 do
          val receive = AtomicReference[Future[DatagramPacket]]()
          val bodyGot = AtomicBoolean(false)
          val sender = Future:
            sleep(1)
            client.send(intPacket(n), Loopback, server.localPort).value
          val won = Async.group:
            val work = Future:
              val r = server.receive()
              receive.set(r)
              val p = r.value
              bodyGot.set(true)
              p
            Async.await(Async.either(work, Timer(1))) match
              case Left(result) => Some(result)
              case Right(_) =>
                work.cancel()
                work.poll().filter(_.isSuccess) // completed before the cancel: its value stands
          sender.value
          won match
            case Some(result) => assertEquals(intOf(result.get), n)
            case None if bodyGot.get => timerWon += 1
            case None =>
              timerWon += 1
              val r = receive.get
              val left = if r == null then None else r.poll()
              left match
                case Some(Success(p)) =>
                  assertEquals(intOf(p), n, "the datagram in the receive future of a cancelled body")
                  inReceiveFuture += 1
                case _ =>
                  if r != null && left.isEmpty then
                    lost += s"round $n: the receive future of a cancelled body is still pending after its scope ended"
                  val next = server.receive()
                  Async.await(Async.either(next, Timer(1000))) match
                    case Left(t) => assertEquals(intOf(t.get), n)
                    case Right(_) =>
                      next.cancel()
                      lost += s"datagram $n: not received within 1000 ms after its receive was cancelled"
        assert(lost.isEmpty, s"${lost.size} datagrams lost or receives left pending in 300 rounds ($timerWon won by the timer, $inReceiveFuture left in a completed receive future):\n${lost.mkString("\n")}")

  test("a receive whose scope ends before it gets a datagram completes (cancelled) instead of staying pending"):
    withSockets: (server, client) =>
      Async.blocking:
        for round <- 1 to 20 do
          val r = Async.group(server.receive()) // the group's end cancels what it started
          settledWithin(r, Prompt) match
            case Some(t) => assertCancelled(t)
            case None    => fail(s"round $round: a receive whose scope ended is still pending after $Prompt ms")
        client.send(intPacket(9), Loopback, server.localPort).value
        assertEquals(intOf(receiveWithin(server, "the datagram after the ended scopes")), 9)

  // ---------------------------------------------------------------------------------------------
  // Options, errors, open and close

  test("receiveBufferSize (SO_RCVBUF): set then get; on Linux the JDK reports the request capped by rmem_max, not the kernel's doubled figure"):
    val s = SocketUDP().bindAndOpen(0)
    try
      val initial = s.receiveBufferSize
      assert(initial > 0, s"initial SO_RCVBUF $initial")
      s.receiveBufferSize = 4096
      val small = s.receiveBufferSize
      s.receiveBufferSize = 1 << 20
      val large = s.receiveBufferSize
      assert(small > 0 && large > 0, s"SO_RCVBUF $small after asking 4096, $large after asking 1 MiB")
      assert(large > small, s"asking 1 MiB gave $large, not more than the $small of asking 4096")
      // Linux keeps min(request, rmem_max) * 2 (room for its bookkeeping) and getsockopt returns
      // that, but the JDK halves SO_RCVBUF on Linux when it reads it back: through Java the
      // request is what comes back, capped at rmem_max (not the doubled figure).
      val rmemMax = java.nio.file.Path.of("/proc/sys/net/core/rmem_max")
      if System.getProperty("os.name") == "Linux" && java.nio.file.Files.isReadable(rmemMax) then
        val max = java.nio.file.Files.readAllLines(rmemMax).get(0).trim.toInt // (readString gives "4" for procfs here)
        assertEquals(large, math.min(1 << 20, max), s"Linux: the request, capped at rmem_max = $max")
        assertEquals(small, 4096, "Linux: the request")
    finally s.close()

  test("bindAndOpen with a receive buffer: SO_RCVBUF is the request (capped at rmem_max) from the start; a negative size throws"):
    val s = SocketUDP().bindAndOpen(null, 0, 1 << 20)
    try
      val rmemMax = java.nio.file.Path.of("/proc/sys/net/core/rmem_max")
      if System.getProperty("os.name") == "Linux" && java.nio.file.Files.isReadable(rmemMax) then
        val max = java.nio.file.Files.readAllLines(rmemMax).get(0).trim.toInt
        assertEquals(s.receiveBufferSize, math.min(1 << 20, max), s"Linux: the request, capped at rmem_max = $max")
      assert(s.localPort > 0)
    finally s.close()
    intercept[IllegalArgumentException](SocketUDP().bindAndOpen(null, 0, -1))

  // ---------------------------------------------------------------------------------------------
  // Direct-style receive (a stage's reader thread)

  /** The Ints of the datagrams `receiveWaiting` hands over in one call, taking at most `max`. */
  private def intsWaiting(s: SocketUDP, timeoutNanos: Long, max: Int = Int.MaxValue): Seq[Int] =
    val got = mutable.ArrayBuffer.empty[Int]
    val n = s.receiveWaiting(timeoutNanos) { b =>
      assertEquals(b.remaining, 4, "a datagram's payload is the buffer's remaining bytes")
      got += b.getInt(b.position())
      got.size < max
    }
    assertEquals(n, got.size, "the count returned is the datagrams handed over")
    got.toSeq

  test("receiveWaiting: the waiting datagrams in order in one call; it stops where `each` says, and the rest come next"):
    withSockets: (server, client) =>
      Async.blocking:
        for n <- 1 to 10 do client.send(intPacket(n), Loopback, server.localPort).value
        // loopback delivers at the send: all ten wait in the kernel now
        assertEquals(intsWaiting(server, 0L, max = 4), 1 to 4)
        assertEquals(intsWaiting(server, 0L), 5 to 10)

  test("hasWaiting: false with nothing waiting, true once a datagram waits, and that datagram is still received, in order"):
    withSockets: (server, client) =>
      assert(!server.hasWaiting, "nothing was sent")
      Async.blocking:
        for n <- 1 to 3 do client.send(intPacket(n), Loopback, server.localPort).value
        assert(server.hasWaiting, "three datagrams wait")
        assert(server.hasWaiting, "asking again changes nothing")
        assertEquals(intsWaiting(server, 0L, max = 1), Seq(1), "the datagram hasWaiting took comes first")
        assertEquals(intOf(receiveWithin(server, "the second datagram")), 2)
        assertEquals(intsWaiting(server, 0L), Seq(3))
        assert(!server.hasWaiting, "all were received")

  test("receiveWaiting: with nothing waiting it returns 0 after its timeout, and a datagram sent meanwhile wakes it"):
    withSockets: (server, client) =>
      val t0 = System.nanoTime()
      assertEquals(intsWaiting(server, 50_000_000L), Nil)
      val waited = millisSince(t0)
      assert(waited >= 49, s"a 50 ms wait returned after $waited ms")
      val got = AtomicReference[Try[Seq[Int]]]()
      val receiver = Thread.ofPlatform().start { () => got.set(Try(intsWaiting(server, Patience * 1_000_000L))) }
      eventually("the receiver to wait in its selector")(receiver.getStackTrace.exists(inSelect))
      Async.blocking(client.send(intPacket(7), Loopback, server.localPort).value)
      receiver.join(Patience)
      assertEquals(got.get, Success(Seq(7)), "the datagram sent while it waited")

  /** `receiveWaiting` with no time limit on a thread of its own; once it waits in its selector,
    * `end` it; what the call then gave. */
  private def endedWait(s: SocketUDP, how: String)(end: Thread => Unit)(using Location): Try[Int] =
    val outcome = AtomicReference[Try[Int]]()
    val t = Thread.ofPlatform().start { () =>
      // not Try(...): it lets InterruptedException through
      outcome.set(try Success(s.receiveWaiting(0L)(_ => true)) catch case e: Throwable => Failure(e))
    }
    eventually("the receiver to wait in its selector")(t.getStackTrace.exists(inSelect))
    end(t)
    t.join(Prompt)
    assert(!t.isAlive, s"$how did not end the wait")
    outcome.get

  test("receiveWaiting: an interrupt ends the wait (InterruptedException), close ends it with a PosixIOException; the socket stays usable after the interrupt"):
    withSockets: (server, client) =>
      val interrupted = endedWait(server, "an interrupt")(_.interrupt())
      assert(interrupted.failed.toOption.exists(_.isInstanceOf[InterruptedException]), s"got $interrupted")
      assert(server.isOpened, "the interrupt closed the socket")
      Async.blocking(client.send(intPacket(5), Loopback, server.localPort).value)
      assertEquals(intsWaiting(server, Patience * 1_000_000L), Seq(5))
      val closed = endedWait(server, "close")(_ => server.close())
      assert(closed.failed.toOption.exists(_.isInstanceOf[PosixIOException]), s"got $closed")

  test("bind to a port in use fails with a PosixIOException naming the port and 'address already in use'"):
    val a = SocketUDP().bindAndOpen(0)
    try
      val port = a.localPort
      val b = SocketUDP()
      val e = intercept[PosixIOException](b.bindAndOpen(port))
      assertMentions(e, s":$port", "address already in use")
      assertEquals(e.operation, "bind")
      assert(!b.isOpened, "the socket whose bind failed reports open")
      b.bindAndOpen(0) // nothing left over from the failed bind
      try assert(b.localPort > 0 && b.localPort != port)
      finally b.close()
      assert(a.isOpened)
    finally a.close()

  test("operations before open fail with messages saying 'not open'"):
    val s = SocketUDP()
    Async.blocking:
      val failures = Seq[(String, Try[Any])](
        "send" -> outcome(s.send(intPacket(1), Loopback, 9)),
        "receive" -> outcome(s.receive()),
        "address" -> attempt(s.localPort),
        "SO_RCVBUF" -> attempt(s.receiveBufferSize),
        "SO_RCVBUF" -> attempt(s.receiveBufferSize = 1000)
      )
      for (op, t) <- failures do
        assertMentions(failureOf[PosixIOException](t), op, "not open", "open()")
    s.close() // closing a never opened socket does nothing
    assert(!s.isOpened)

  test("operations after close fail with messages saying 'closed'; close is idempotent"):
    val s = SocketUDP().bindAndOpen(0)
    s.close()
    assert(!s.isOpened)
    s.close()
    s.close()
    Async.blocking:
      val failures = Seq[(String, Try[Any])](
        "send" -> outcome(s.send(intPacket(1), Loopback, 9)),
        "receive" -> outcome(s.receive()),
        "address" -> attempt(s.localPort),
        "SO_RCVBUF" -> attempt(s.receiveBufferSize),
        "SO_RCVBUF" -> attempt(s.receiveBufferSize = 1000)
      )
      for (op, t) <- failures do
        assertMentions(failureOf[PosixIOException](t), op, "closed")

  test("a closed socket opens again, and works"):
    withSockets: (server, client) =>
      Async.blocking:
        client.close()
        client.bindAndOpen(0)
        client.send(intPacket(8), Loopback, server.localPort).value
        val p = receiveWithin(server, "from the reopened socket")
        assertEquals(p.getPort, client.localPort)
        server.send(intPacket(9), Loopback, p.getPort).value
        assertEquals(intOf(receiveWithin(client, "to the reopened socket")), 9)

  test("opening an open socket throws IllegalStateException and leaves it open"):
    val s = SocketUDP().bindAndOpen(0)
    try
      val port = s.localPort
      intercept[IllegalStateException](s.bindAndOpen(0))
      intercept[IllegalStateException](s.open())
      assert(s.isOpened)
      assertEquals(s.localPort, port)
    finally s.close()

  test("invalid ports and buffer sizes throw IllegalArgumentException at the call"):
    intercept[IllegalArgumentException](SocketUDP().bindAndOpen(-1))
    intercept[IllegalArgumentException](SocketUDP().bindAndOpen(65536))
    val s = SocketUDP().bindAndOpen(0)
    try
      intercept[IllegalArgumentException](s.receiveBufferSize = 0)
      assert(s.isOpened)
    finally s.close()

  test("a send to an invalid port throws IllegalArgumentException at the call (PosixLikeIO: Errors)"):
    val s = SocketUDP().bindAndOpen(0)
    try
      Async.blocking:
        for port <- Seq(0, -1, 65536) do
          val thrown =
            try
              val f = s.send(intPacket(1), Loopback, port)
              Left(f.result)
            catch case e: IllegalArgumentException => Right(e)
          assert(thrown.isRight, s"send to port $port: expected an IllegalArgumentException at the call, got a future of ${thrown.left.toOption.get}")
    finally s.close()

class SocketUdpOnVirtualThreads extends SocketUdpBehaviour(Runtime.VirtualThreads)
class SocketUdpOnPlatformThreads extends SocketUdpBehaviour(Runtime.PlatformThreads)
