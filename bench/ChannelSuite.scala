package asyncpipe.bench

import asyncpipe.async.*
import java.util.concurrent.{ArrayBlockingQueue, LinkedTransferQueue, SynchronousQueue}
import java.util.concurrent.atomic.AtomicReference

/** Channels: values handed from sender threads to receiver threads, against the
  * java.util.concurrent queue of the same shape (rendezvous, bounded, unbounded), against a spin
  * hand-off on two volatile cells (what a rendezvous could cost at best), and through a
  * `ChannelMultiplexer` against one plain channel. Bytes allocated per element on
  * `BufferedChannel(100)`. Buffered(1) has no target: it is the seed's own benchmark shape.
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
  * the sum is not that of the values sent. All rows are measured in turns
  * (`Harness.measureTogether`), so a slow spell of the machine falls on subjects and baselines
  * alike.
  */
object ChannelSuite extends Suite:
  val name = "channels"
  val description = "channels and a multiplexer vs SynchronousQueue, ArrayBlockingQueue, LinkedTransferQueue, a spin hand-off; B/op"
  override val forked = true // see Forks: its ratios differed by up to 20 % between single runs

  private type Elem = java.lang.Long
  private val Mask = 1023
  private val boxes: Array[Elem] = Array.tabulate(Mask + 1)(i => java.lang.Long.valueOf(i.toLong))

  def run(h: Harness): SuiteResult =
    val subjects = Vector(
      channel("SyncChannel", 1_000_000)(SyncChannel[Elem]()),
      queue("SynchronousQueue put/take", 1_000_000)(SynchronousQueue[Elem]()),
      Subject("spin hand-off on two volatiles", 1_000_000) { k =>
        inParts(k) { n =>
          val cell = SpinCell()
          transfer("spin hand-off", n, 1, 1)((x, _) => cell.put(x))(_ => cell.take())
        }
      },
      channel("BufferedChannel(1)", 1_000_000)(BufferedChannel[Elem](1)),
      queue("ArrayBlockingQueue(1)", 1_000_000)(ArrayBlockingQueue[Elem](1)),
      channel("BufferedChannel(16)", 2_000_000)(BufferedChannel[Elem](16)),
      queue("ArrayBlockingQueue(16)", 2_000_000)(ArrayBlockingQueue[Elem](16)),
      channel("BufferedChannel(100)", 2_000_000, allocation = Allocation.AllThreads)(BufferedChannel[Elem](100)),
      queue("ArrayBlockingQueue(100)", 2_000_000, allocation = Allocation.AllThreads)(ArrayBlockingQueue[Elem](100)),
      channel("UnboundedChannel", 2_000_000)(UnboundedChannel[Elem]()),
      queue("LinkedTransferQueue put/take", 2_000_000)(LinkedTransferQueue[Elem]()),
      channel("BufferedChannel(100), 4 to 4", 2_000_000, 4)(BufferedChannel[Elem](100)),
      queue("ArrayBlockingQueue(100), 4 to 4", 2_000_000, 4)(ArrayBlockingQueue[Elem](100)),
      multiplexed
    )
    val m = h.measureTogether(subjects*).map(x => x.name -> x).toMap
    def compare(subject: String, baseline: String, target: Option[Target]) = Comparison(m(subject), m(baseline), target)
    SuiteResult(name, Seq(
      compare("SyncChannel", "SynchronousQueue put/take", Some(Target.atLeast(1.0))),
      compare("BufferedChannel(1)", "ArrayBlockingQueue(1)", None),
      compare("BufferedChannel(16)", "ArrayBlockingQueue(16)", Some(Target.atLeast(1.0))),
      compare("BufferedChannel(100)", "ArrayBlockingQueue(100)", Some(Target.atLeast(1.0))),
      compare("UnboundedChannel", "LinkedTransferQueue put/take", Some(Target.atLeast(1.0))),
      compare("BufferedChannel(100), 4 to 4", "ArrayBlockingQueue(100), 4 to 4", Some(Target.atLeast(1.0))),
      compare("SyncChannel", "spin hand-off on two volatiles", Some(Target.atLeast(0.3))),
      compare("ChannelMultiplexer, 1 to 1", "BufferedChannel(16)", Some(Target.atLeast(0.5)))
    ), m("BufferedChannel(100)").bytesPerOp.toSeq.map { b =>
      Figure("BufferedChannel(100) allocation per element", b, "B/op", Some(Target.atMost(16)))
    })

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

  /** Sends the values `boxes(i & Mask)` for `i` in `0 until k` from `senders` virtual threads
    * (sender `j` sends `i = j, j + senders, ...`) to `receivers` virtual threads (each takes its
    * share of `k`), all started and joined here; fails if a thread failed or the received values
    * do not sum to the sent ones. Inline, so that each subject's loops call its own operations.
    */
  private inline def transfer(label: String, k: Int, senders: Int, receivers: Int)(
      inline send: (Elem, Async) => Unit
  )(inline take: Async => Elem): Unit =
    val sums = new Array[Long](receivers)
    val failure = AtomicReference[Throwable]()
    val threads = new Array[Thread](senders + receivers)
    def guarded(body: Async ?=> Unit): Runnable = () =>
      try Async.blocking(body)
      catch
        case e: Throwable =>
          if failure.compareAndSet(null, e) then
            threads.foreach(t => if t != null && (t ne Thread.currentThread) then t.interrupt())
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
    threads.foreach(_.start())
    threads.foreach(_.join())
    val e = failure.get
    if e != null then throw IllegalStateException(s"$label: a sender or receiver failed", e)
    val got = sums.sum
    val expected = sentSum(k)
    if got != expected then throw IllegalStateException(s"$label: received values sum to $got, sent $expected")

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
