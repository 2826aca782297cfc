package asyncpipe.bench

import asyncpipe.async.*
import com.softwaremill.jox.Channel as JoxChannel
import java.util.concurrent.{ArrayBlockingQueue, LinkedTransferQueue, SynchronousQueue}
import java.util.concurrent.atomic.{AtomicLong, AtomicReference}

/** Channels: values handed from sender threads to receiver threads, against the
  * java.util.concurrent queue of the same shape (rendezvous, bounded, unbounded), against jox's
  * rendezvous channel (issue 41: at least 1.3x), against a spin
  * hand-off on two volatile cells (what a rendezvous could cost at best), and through a
  * `ChannelMultiplexer` against one plain channel. Bytes allocated per element on
  * `BufferedChannel(100)`. Buffered(1) has no target: it is the seed's own benchmark shape. And
  * `select` of a read against a send on two channels against the same reads and sends without
  * it, with its bytes per select (see [[selectSubject]]).
  *
  * Every iteration moves its values in [[Parts]] rounds, each of which builds a fresh channel or
  * queue, starts its sender and receiver virtual threads and joins them: the same `transfer` does
  * this for every subject and baseline, so thread start, `Async.blocking` and join cost both sides
  * alike. Why rounds: where the scheduler puts two fresh threads (on one carrier, or on two)
  * changes a transfer's speed by up to 2x (unbounded: 26 M or 47 M ops/s), and keeps it for the
  * whole transfer; with one placement per iteration the median of seven iterations fell on either
  * mode from run to run, while an iteration of eight placements measures their mix. The elements are
  * `java.lang.Long`s boxed in advance (a table of 1,024), so neither side allocates boxes and the
  * allocation figure is the channel's own: for that, too, channel readers call `readOrClosed`,
  * which returns the value as `take` does. `read()` wraps it in a `Success` (16 bytes) that C2
  * removes only when it inlines `read` into the loop, which it did in some JVMs and not in others
  * (13 B/op in some runs, 31-33 in others). The receivers sum what they take; `transfer` fails if
  * the sum is not that of the values sent. A part's subjects and baselines are measured in turns
  * (`Harness.measureTogether`), so a slow spell of the machine falls on them alike; the parts
  * ([[parts]]: rendezvous, rendezvous 8 to 8 and 64 to 64, buffered(1), buffered(16) with the
  * multiplexer, buffered(100), unbounded, 4 to 4, 16 to 16, select) one after the other, and in
  * a forked run each part in fresh JVMs of its own, under the launcher's flags and under JVM
  * defaults (see [[Forks]]).
  */
object ChannelSuite extends Suite:
  val name = "channels"
  val description = "channels and a multiplexer vs SynchronousQueue, ArrayBlockingQueue, LinkedTransferQueue, jox, a spin hand-off (1 to 1, 4 to 4, 16 to 16); select of a read and a send vs the plain operations; B/op; each part in JVMs of its own, with the launcher's flags and with JVM defaults"
  override val forked = true // see Forks: its ratios differed by up to 20 % between single runs

  private type Elem = java.lang.Long
  private val Mask = 1023
  private val boxes: Array[Elem] = Array.tabulate(Mask + 1)(i => java.lang.Long.valueOf(i.toLong))

  /** The suite's parts (see [[Suite.parts]]): each a comparison's subjects and baselines, which
    * are measured together, in turns.
    */
  override val parts: Seq[String] =
    Seq("rendezvous", "rendezvous, many to many", "buffered(1)", "buffered(16)", "buffered(100)", "unbounded", "4 to 4", "16 to 16", "select")

  /** Every part in this JVM, one after the other. */
  def run(h: Harness): SuiteResult = parts.map(runPart(h, _)).reduce(_ ++ _)

  override def runPart(h: Harness, part: String): SuiteResult =
    def result(cs: Seq[Comparison], figures: Seq[Figure] = Nil) = SuiteResult(name, cs, figures)
    def pair(subject: Subject, baseline: Subject, target: Option[Target]) =
      val IndexedSeq(s, b) = h.measureTogether(subject, baseline): @unchecked
      Comparison(s, b, target)
    part match
      case "rendezvous" =>
        val IndexedSeq(sync, sq, joxRendezvous, spin) = h.measureTogether(
          channel("SyncChannel", 1_000_000)(SyncChannel[Elem]()),
          queue("SynchronousQueue put/take", 1_000_000)(SynchronousQueue[Elem]()),
          jox("jox 1.1.1 rendezvous Channel", 1_000_000)(JoxChannel.newRendezvousChannel[Elem]()),
          Subject("spin hand-off on two volatiles", 1_000_000) { k =>
            inParts(k) { n =>
              val cell = SpinCell()
              transfer("spin hand-off", n, 1, 1)((x, _) => cell.put(x))(_ => cell.take())
            }
          }
        ): @unchecked
        result(Seq(Comparison(sync, sq, Some(Target.atLeast(1.0))), Comparison(sync, joxRendezvous, Some(Target.atLeast(1.3))),
          Comparison(sync, spin, Some(Target.atLeast(0.3)))))
      case "rendezvous, many to many" =>
        // no target: how the rendezvous's waiting holds with more parties than carriers (ADR 0011)
        val IndexedSeq(sync8, sq8, sync64, sq64) = h.measureTogether(
          channel("SyncChannel, 8 to 8", 1_000_000, 8)(SyncChannel[Elem]()),
          queue("SynchronousQueue, 8 to 8", 1_000_000, 8)(SynchronousQueue[Elem]()),
          channel("SyncChannel, 64 to 64", 1_000_000, 64)(SyncChannel[Elem]()),
          queue("SynchronousQueue, 64 to 64", 1_000_000, 64)(SynchronousQueue[Elem]())
        ): @unchecked
        result(Seq(Comparison(sync8, sq8, None), Comparison(sync64, sq64, None)))
      case "buffered(1)" =>
        result(Seq(pair(channel("BufferedChannel(1)", 1_000_000)(BufferedChannel[Elem](1)),
          queue("ArrayBlockingQueue(1)", 1_000_000)(ArrayBlockingQueue[Elem](1)), None)))
      case "buffered(16)" =>
        val IndexedSeq(b16, abq16, mux) = h.measureTogether(
          channel("BufferedChannel(16)", 2_000_000)(BufferedChannel[Elem](16)),
          queue("ArrayBlockingQueue(16)", 2_000_000)(ArrayBlockingQueue[Elem](16)),
          multiplexed
        ): @unchecked
        result(Seq(Comparison(b16, abq16, Some(Target.atLeast(1.0))), Comparison(mux, b16, Some(Target.atLeast(0.5)))))
      case "buffered(100)" =>
        val c = pair(channel("BufferedChannel(100)", 2_000_000, allocation = Allocation.AllThreads)(BufferedChannel[Elem](100)),
          queue("ArrayBlockingQueue(100)", 2_000_000, allocation = Allocation.AllThreads)(ArrayBlockingQueue[Elem](100)),
          Some(Target.atLeast(1.0)))
        result(Seq(c), c.subject.bytesPerOp.toSeq.map { b =>
          Figure("BufferedChannel(100) allocation per element", b, "B/op", Some(Target.atMost(16)))
        })
      case "unbounded" =>
        result(Seq(pair(channel("UnboundedChannel", 2_000_000)(UnboundedChannel[Elem]()),
          queue("LinkedTransferQueue put/take", 2_000_000)(LinkedTransferQueue[Elem]()), Some(Target.atLeast(1.0)))))
      case "4 to 4" | "16 to 16" =>
        val n = if part == "4 to 4" then 4 else 16
        result(Seq(pair(channel(s"BufferedChannel(100), $part", 2_000_000, n)(BufferedChannel[Elem](100)),
          queue(s"ArrayBlockingQueue(100), $part", 2_000_000, n)(ArrayBlockingQueue[Elem](100)), Some(Target.atLeast(1.0)))))
      case "select" =>
        val c = pair(selectSubject, plainSubject, Some(Target.atLeast(0.8)))
        result(Seq(c), c.subject.bytesPerOp.toSeq.map { b =>
          Figure("select of a read and a send: allocation per select", b, "B/op", Some(Target.atMost(100)))
        } ++ Seq(Figure("select of a read and a send: rounds the read won", selectReadShare(), "%", None)))
      case other => super.runPart(h, other)

  /** Values moved through a fresh channel from `parties` senders to `parties` readers. */
  private def channel(name: String, fullOps: Int, parties: Int = 1, allocation: Allocation = Allocation.NotMeasured)(
      make: => Channel[Elem]
  ): Subject =
    Subject(name, fullOps, allocation) { k =>
      inParts(k) { n =>
        val ch = make
        transfer(name, n, parties, parties)((x, a) => ch.send(x)(using a))(a => taken(ch.readOrClosed()(using a)))
      }
    }

  /** What a channel subject's reader took: the value, as `take` gives it. */
  private inline def taken[A](v: A | ChannelClosed): A = v match
    case _: ChannelClosed => throw ChannelClosedException()
    case e                => e.asInstanceOf[A]

  /** The same through a fresh JDK queue, with `put` and `take`. */
  private def queue(name: String, fullOps: Int, parties: Int = 1, allocation: Allocation = Allocation.NotMeasured)(
      make: => java.util.concurrent.BlockingQueue[Elem]
  ): Subject =
    Subject(name, fullOps, allocation) { k =>
      inParts(k) { n =>
        val q = make
        transfer(name, n, parties, parties)((x, _) => q.put(x))(_ => q.take())
      }
    }

  /** The same through a fresh jox channel (`com.softwaremill.jox`, the JVM's other channel on the
    * paper's algorithm), with `send` and `receive`.
    */
  private def jox(name: String, fullOps: Int)(make: => JoxChannel[Elem]): Subject =
    Subject(name, fullOps) { k =>
      inParts(k) { n =>
        val ch = make
        transfer(name, n, 1, 1)((x, _) => ch.send(x))(_ => ch.receive())
      }
    }

  /** One publisher and one subscriber (both `BufferedChannel(16)`) through a multiplexer, to be
    * compared with the same transfer on one `BufferedChannel(16)`. The multiplexer's loop and
    * delivery futures live in a scope of the measured body, so they start and end in every call.
    */
  private def multiplexed: Subject =
    Subject("ChannelMultiplexer, 1 to 1", 2_000_000) { k =>
      inParts(k) { n =>
        Async.blocking {
          val pub = BufferedChannel[Elem](16)
          val sub = BufferedChannel[scala.util.Try[Elem]](16)
          val mux = ChannelMultiplexer[Elem](buffer = 16)
          mux.addPublisher(pub)
          mux.addSubscriber(sub)
          transfer("ChannelMultiplexer", n, 1, 1)((x, a) => pub.send(x)(using a))(a => taken(sub.readOrClosed()(using a)).get)
          mux.close()
        }
      }
    }

  // ---------------------------------------------------------------------------------------------
  // Select of a read against a send (issue 40)

  private val SelectName = "select of a read and a send, 2 BufferedChannel(16)"
  private val PlainName = "the same reads and sends without select"

  /** `select` of a read against a send on two channels, against the same operations without
    * select (issue 40: >= 0.8x, and under 100 B per select).
    *
    * Interpretation: one virtual thread (the loop) makes `k` rounds over two
    * `BufferedChannel(16)`s, `in` and `out`; a feeder thread keeps `in` supplied (it sends until
    * `in` is cancelled at the end) and a drainer thread takes everything from `out` (until it is
    * closed), so the loop's select finds a branch ready almost every time, and waits only when
    * `in` is empty and `out` full at once. Each round of the subject is one
    * `Async.select(in.canRead.handle(_.get), out.canSend(x).handle(_ => null))`, written inline
    * as a caller writes it: its two `SelectCase`s and the send source are made in the round. The
    * handlers capture nothing (the JVM makes each once), so what is counted is the select's own
    * allocation; a handler that captures a local adds its closure, 16 B. `select` takes the first
    * ready branch in the order given (Go chooses among ready cases at random): with the read always
    * first it would read in every round while the feeder keeps up, and its send branch would never
    * be tried, so the order alternates, even rounds listing the read first and odd rounds the
    * send. The baseline makes the same rounds with what the select does when both are ready:
    * `in.read()` in even rounds, `out.send(x)` in odd ones. Either way a round moves one value, so
    * ops/s are values moved per second, and the feeder, the drainer, the channels, the checks (each
    * value read is the next the feeder sent, each value drained the next the loop sent) and the
    * threads' start and join are one code for both. A select whose first branch is not ready takes
    * the other, so its split of reads and sends may stray from half and half: the figure "rounds
    * the read won" shows it (50-55 % in trials).
    *
    * Allocation is counted on every thread (a virtual thread's own counter reads -1), so the
    * figure per select also holds what the channels and the partners allocate (segments, a
    * parked thread's waiter), which the baseline's B/op (13-14 in trials) shows. Rounds are made
    * in [[Parts]] parts with fresh threads and channels, as [[transfer]]'s.
    */
  private def selectSubject: Subject =
    Subject(SelectName, 1_000_000, Allocation.AllThreads) { k =>
      inParts(k) { n =>
        val done = exchange(SelectName, n) { (i, x, a) =>
          given Async = a
          // the value read, or null for the send
          val read =
            if (i & 1) == 0 then Async.select(x.in.canRead.handle(_.get), x.out.canSend(x.nextSend).handle(_ => null))
            else Async.select(x.out.canSend(x.nextSend).handle(_ => null), x.in.canRead.handle(_.get))
          if read != null then x.gotRead(read) else x.gotSent()
        }
        selectRounds.addAndGet(n)
        selectReads.addAndGet(done.reads)
      }
    }

  /** The baseline of [[selectSubject]]: the same rounds, a read in even ones and a send in odd ones. */
  private def plainSubject: Subject =
    Subject(PlainName, 1_000_000, Allocation.AllThreads) { k =>
      inParts(k) { n =>
        exchange(PlainName, n) { (i, x, a) =>
          given Async = a
          if (i & 1) == 0 then x.gotRead(x.in.read().get)
          else
            x.out.send(x.nextSend)
            x.gotSent()
        }
      }
    }

  /** Rounds of every select subject call in this JVM, and how many of them the read won. */
  private val selectRounds = AtomicLong()
  private val selectReads = AtomicLong()

  /** The share of the select rounds that read, in percent (0 before any). */
  private def selectReadShare(): Double =
    val n = selectRounds.get
    if n == 0 then 0 else 100.0 * selectReads.get / n

  /** The loop's side of an exchange: the two channels and what it has read and sent, in order. */
  private final class Exchange:
    val in: Channel[Elem] = BufferedChannel[Elem](16)
    val out: Channel[Elem] = BufferedChannel[Elem](16)
    var reads = 0L
    var sends = 0L
    /** The value the loop sends next: the drainer expects `boxes(sends & Mask)`. */
    def nextSend: Elem = boxes((sends & Mask).toInt)
    def gotRead(v: Elem): Unit =
      if v.longValue != (reads & Mask) then throw IllegalStateException(s"read $v as value $reads")
      reads += 1
    def gotSent(): Unit = sends += 1

  /** `k` rounds of `step(round, exchange, async)` on a loop thread, with a feeder sending
    * `boxes(j & Mask)`, `j = 0, 1, ...` into `in` until it is cancelled and a drainer reading `out`
    * until it is closed, all three virtual threads started and joined here; fails if a thread
    * failed, a value came out of order, or the drainer did not get every value the loop sent.
    * Inline, so that each subject's loop calls its own operations.
    */
  private inline def exchange(label: String, k: Int)(inline step: (Int, Exchange, Async) => Unit): Exchange =
    val x = Exchange()
    val crew = Crew(3)
    import crew.{guarded, threads}
    var drained = -1L
    threads(0) = Thread.ofVirtual().unstarted(guarded {
      var j = 0L
      try
        while true do
          x.in.send(boxes((j & Mask).toInt))
          j += 1
      catch case _: ChannelClosedException => () // cancelled by the loop: done
    })
    threads(1) = Thread.ofVirtual().unstarted(guarded {
      var j = 0L
      var open = true
      while open do
        x.out.readOrClosed() match
          case _: ChannelClosed => open = false
          case v =>
            if v.asInstanceOf[Elem].longValue != (j & Mask) then throw IllegalStateException(s"drained $v as value $j")
            j += 1
      drained = j
    })
    threads(2) = Thread.ofVirtual().unstarted(guarded {
      val a = summon[Async]
      try
        var i = 0
        while i < k do
          step(i, x, a)
          i += 1
      finally
        x.out.close()
        x.in.cancel()
    })
    val e = crew.run()
    if e != null then throw IllegalStateException(s"$label: a thread failed", e)
    if x.reads + x.sends != k then throw IllegalStateException(s"$label: ${x.reads} reads and ${x.sends} sends in $k rounds")
    if drained != x.sends then throw IllegalStateException(s"$label: the loop sent ${x.sends} values, the drainer took $drained")
    x

  /** Sends the values `boxes(i & Mask)` for `i` in `0 until k` from `senders` virtual threads
    * (sender `j` sends `i = j, j + senders, ...`) to `receivers` virtual threads (each takes its
    * share of `k`), all started and joined here; fails if a thread failed or the received values
    * do not sum to the sent ones. Inline, so that each subject's loops call its own operations.
    */
  private inline def transfer(label: String, k: Int, senders: Int, receivers: Int)(
      inline send: (Elem, Async) => Unit
  )(inline take: Async => Elem): Unit =
    val sums = new Array[Long](receivers)
    val crew = Crew(senders + receivers)
    import crew.{guarded, threads}
    for r <- 0 until receivers do
      threads(r) = Thread.ofVirtual().unstarted(guarded {
        val a = summon[Async]
        var n = share(r, receivers, k)
        var sum = 0L
        while n > 0 do
          sum += take(a).longValue
          n -= 1
        sums(r) = sum
      })
    for s <- 0 until senders do
      threads(receivers + s) = Thread.ofVirtual().unstarted(guarded {
        val a = summon[Async]
        var i = s
        while i < k do
          send(boxes(i & Mask), a)
          i += senders
      })
    val e = crew.run()
    if e != null then throw IllegalStateException(s"$label: a sender or receiver failed", e)
    val got = sums.sum
    val expected = sentSum(k)
    if got != expected then throw IllegalStateException(s"$label: received values sum to $got, sent $expected")

  /** The virtual threads of one transfer or exchange, which fail together: each body runs in a
    * scope of its own, and the first that fails is kept and interrupts the others.
    */
  private final class Crew(n: Int):
    val threads = new Array[Thread](n)
    private val failure = AtomicReference[Throwable]()
    def guarded(body: Async ?=> Unit): Runnable = () =>
      try Async.blocking(body)
      catch
        case e: Throwable =>
          if failure.compareAndSet(null, e) then
            threads.foreach(t => if t != null && (t ne Thread.currentThread) then t.interrupt())
    /** Starts every thread, joins them all; the first failure, or null. */
    def run(): Throwable | Null =
      threads.foreach(_.start())
      threads.foreach(_.join())
      failure.get

  /** How many rounds (fresh threads, fresh channel) one measured call is made of: see the object. */
  private val Parts = 8

  /** Runs `round(n)` [[Parts]] times, the `n`s adding up to `k`. */
  private inline def inParts(k: Int)(inline round: Int => Unit): Unit =
    var j = 0
    while j < Parts do
      round(share(j, Parts, k))
      j += 1

  /** How many of `k` elements receiver `j` of `parts` takes. */
  private def share(j: Int, parts: Int, k: Int): Int = k / parts + (if j < k % parts then 1 else 0)

  /** The sum of `i & Mask` for `i` in `0 until k`. */
  private def sentSum(k: Int): Long =
    val n = Mask + 1L
    val r = k % n
    (k / n) * (n * (n - 1) / 2) + r * (r - 1) / 2

  /** The ideal rendezvous: the sender waits for the cell to be empty, fills it; the receiver waits
    * for it to be full, empties it. Both spin (`onSpinWait`), yielding the carrier every 1,024
    * spins so that a busy machine with fewer free carriers than spinners still progresses.
    */
  private final class SpinCell:
    @volatile private var value: Elem = null
    @volatile private var full = false

    def put(x: Elem): Unit =
      spinUntil(!full)
      value = x
      full = true

    def take(): Elem =
      spinUntil(full)
      val x = value
      full = false
      x

    private inline def spinUntil(inline ready: Boolean): Unit =
      var spins = 0
      while !ready do
        spins += 1
        if (spins & 1023) == 0 then Thread.`yield`() else Thread.onSpinWait()
