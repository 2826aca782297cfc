package asyncpipe.async

import java.util.concurrent.atomic.AtomicLong
import scala.util.{Failure, Success}

/** Quick end-to-end checks of every channel kind: pairs of threads passing values, with and
  * without listener reads, then the invariants of the quiet channel.
  */
class ChannelQuickCheck extends munit.FunSuite:
  given Runtime = Runtime.VirtualThreads
  val kinds: Seq[(String, () => Channel[Long])] = Seq(
    "rendezvous" -> (() => SyncChannel[Long]()),
    "buffered(1)" -> (() => BufferedChannel[Long](1)),
    "buffered(2)" -> (() => BufferedChannel[Long](2)),
    s"buffered(${SegmentChannel.SegmentSize - 1})" -> (() => BufferedChannel[Long](SegmentChannel.SegmentSize - 1)),
    s"buffered(${SegmentChannel.SegmentSize + 1})" -> (() => BufferedChannel[Long](SegmentChannel.SegmentSize + 1)),
    "unbounded" -> (() => UnboundedChannel[Long]()))

  for (name, make) <- kinds do
    test(s"$name: 2 senders x 20000, 2 readers (one reading through canRead), every value once"):
      val ch = make()
      val n = 20000L
      val sum = AtomicLong()
      val count = AtomicLong()
      Async.blocking:
        val senders = (0 until 2).map(k => Future { var i = 0L; while i < n do { ch.send(i * 2 + k); i += 1 } })
        val readers = (0 until 2).map: k =>
          Future:
           try
            var go = true
            while go do
              val v = if k == 0 then ch.read() else Async.await(ch.canRead)
              v match
                case Success(x) => { sum.addAndGet(x); count.incrementAndGet() }
                case Failure(_) => go = false
           catch case e: Throwable => { e.printStackTrace(); throw e }
        senders.foreach(_.await)
        ch.close()
        readers.foreach(_.await)
      assertEquals(count.get, 2 * n, ch.asInstanceOf[SegmentChannel[?]].dump)
      assertEquals(sum.get, (0L until 2 * n).sum)
      ch.asInstanceOf[SegmentChannel[?]].checkInvariants()

  for (name, make) <- kinds do
    test(s"$name: a channel read only through canRead keeps its segments few (no walk from the first)"):
      // regression: listener reads never moved receiveSegment, so every read walked the chain
      // from segment 0 and kept all of it alive (found by the multiplexer bench)
      val ch = make()
      val impl = ch.asInstanceOf[SegmentChannel[?]]
      val n = 10_000L
      var sum = 0L
      var maxSegments = 0
      Async.blocking:
        Future { var i = 0L; while i < n do { ch.send(i); i += 1 } }
        var i = 0L
        while i < n do
          sum += Async.await(ch.canRead).get
          if i % 1000 == 0 then maxSegments = maxSegments max impl.segmentCount
          i += 1
      assertEquals(sum, (0L until n).sum)
      if ch.capacity != -1 then // an unbounded sender may run ahead: its values hold segments
        assert(maxSegments <= 4, s"$maxSegments segments reachable while reading through canRead:\n${impl.dump.take(2000)}")
      assert(impl.segmentCount <= 2, s"${impl.segmentCount} segments reachable after reading all:\n${impl.dump.take(2000)}")
      impl.checkInvariants()

  for (name, make) <- kinds do
    test(s"$name: 2 senders x 20000, a reader, and a tap attached and detached in turns that refuses at random: every value once"):
      // the tap sees values handed over by sends into the empty channel (forward) and the head
      // offered by deposits, while an FAA reader takes its share; then close ends the reader
      val ch = make()
      val impl = ch.asInstanceOf[SegmentChannel[Long]]
      val n = 20000L
      // refuses one offer in four; detached before the close, so it takes values only
      val tap = ChannelTapBehaviour.Recorder[Long](_ => java.util.concurrent.ThreadLocalRandom.current().nextInt(4) == 0)
      val taken = tap.taken
      val sum = AtomicLong()
      val count = AtomicLong()
      val sendersDone = java.util.concurrent.atomic.AtomicBoolean(false)
      val readerThread = java.util.concurrent.atomic.AtomicReference[Thread]()
      Async.blocking:
        assert(impl.tap(tap), "the only tap was refused") // before any send: unbounded senders are quick
        val reader = Future:
          readerThread.set(Thread.currentThread)
          var go = true
          while go do
            ch.read() match
              case Success(x) => { sum.addAndGet(x); count.incrementAndGet() }
              case Failure(_) => go = false
        // the reader waits in the channel before the first send, which then goes to it (a send
        // forwards to the tap only while no reader waits): so the reader takes a share however
        // the threads are scheduled (it once took none, the senders of 40,000 values outrunning it)
        Support.eventually("the reader to start")(readerThread.get != null)
        ChannelBehaviour.awaitParkedIn(readerThread.get, "the reader")
        val senders = (0 until 2).map(k => Future { var i = 0L; while i < n do { ch.send(i * 2 + k); i += 1 } })
        val toggler = Future:
          while !sendersDone.get do
            val until = taken.size + 500
            while taken.size < until && !sendersDone.get do Support.pause()
            impl.untap(tap)
            Support.pause()
            assert(impl.tap(tap), "the only tap was refused")
          impl.untap(tap)
        senders.foreach(_.await)
        sendersDone.set(true)
        toggler.await
        ch.close()
        reader.await
      // An offer under way when the tap was detached may still complete (`untap`), and once the
      // channel is closed that offer is the closed failure: not a value (a CI run met it).
      val tapped = tap.values.collect { case Success(v) => v }.toArray
      assertEquals(count.get + tapped.length, 2 * n, s"reader ${count.get}, tap ${tapped.length}\n${impl.dump}")
      assertEquals(sum.get + tapped.sum, (0L until 2 * n).sum, "a value lost or taken twice")
      assertEquals(tapped.distinct.length, tapped.length, "the tap took a value twice")
      assert(tapped.nonEmpty && count.get > 0, s"one side took nothing: reader ${count.get}, tap ${tapped.length}")
      impl.checkInvariants()
