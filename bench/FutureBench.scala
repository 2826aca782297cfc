package asyncpipe.bench

import asyncpipe.async.*
import java.lang.management.ManagementFactory
import scala.concurrent.{ExecutionContext, Promise as ScalaPromise}
import scala.util.Success

/** The async core's targets, measured against baselines in the same run (until `asyncpipe bench`
  * lands, run as a plain main: `./mill runMain asyncpipe.bench.FutureBench`).
  *
  *   - future: `Future { x }` started and awaited one at a time vs a raw virtual thread start+join;
  *   - mapPromise: a Promise completed and mapped vs Scala's Promise + map on the parasitic context,
  *     with bytes allocated per operation;
  *   - race: `Async.race` of three sleeping futures vs awaiting the fastest alone;
  *   - timers: 100,000 pending timers: heap they hold, and how late they ring.
  */
object FutureBench:
  private val threads = ManagementFactory.getThreadMXBean.asInstanceOf[com.sun.management.ThreadMXBean]

  /** Median ops/s over `iterations` timed runs of `ops` operations each, after `warmup` runs. */
  def opsPerSecond(ops: Int, iterations: Int = 7, warmup: Int = 3)(body: Int => Unit): Double =
    for _ <- 0 until warmup do body(ops)
    val rates = (0 until iterations).map { _ =>
      val t0 = System.nanoTime()
      body(ops)
      ops / ((System.nanoTime() - t0) / 1e9)
    }
    rates.sorted.apply(rates.size / 2)

  /** `body` `k` times in a plain loop (a `for` over a Range would box the index and add 16 B/op). */
  inline def times(k: Int)(inline body: Unit): Unit =
    var i = 0
    while i < k do
      body
      i += 1

  def bytesPerOp(ops: Int)(body: Int => Unit): Double =
    body(ops) // warm
    val id = Thread.currentThread.threadId
    val before = threads.getThreadAllocatedBytes(id)
    body(ops)
    (threads.getThreadAllocatedBytes(id) - before).toDouble / ops

  /** Runs `body` on a virtual thread and waits for it (the targets measure from a virtual thread). */
  def onVirtualThread[T](body: => T): T =
    var result: Option[T] = None
    Thread.ofVirtual().start(() => result = Some(body)).join()
    result.get

  def main(args: Array[String]): Unit =
    val n = 200_000
    val (thread, future) = onVirtualThread {
      val thread = opsPerSecond(n) { k => times(k)(Thread.ofVirtual().start(() => ()).join()) }
      val future = opsPerSecond(n) { k => Async.blocking { times(k)(Future(1).value) } }
      (thread, future)
    }
    println(f"future start+await: $future%,.0f ops/s; virtual thread start+join: $thread%,.0f ops/s; ratio ${future / thread}%.2f (target >= 0.8)")

    val ok = Success(1)
    val inc: Int => Int = _ + 1
    val ours = opsPerSecond(2_000_000) { k => times(k) { val p = Promise[Int](); p.complete(ok); p.mapValue(inc) } }
    val std = opsPerSecond(2_000_000) { k =>
      times(k) { val p = ScalaPromise[Int](); p.complete(ok); p.future.map(inc)(using ExecutionContext.parasitic) }
    }
    val oursBytes = bytesPerOp(1_000_000) { k => times(k) { val p = Promise[Int](); p.complete(ok); p.mapValue(inc) } }
    val scalaBytes = bytesPerOp(1_000_000) { k =>
      times(k) { val p = ScalaPromise[Int](); p.complete(ok); p.future.map(inc)(using ExecutionContext.parasitic) }
    }
    println(f"promise complete+map: $ours%,.0f ops/s, $oursBytes%.0f B/op; scala: $std%,.0f ops/s, $scalaBytes%.0f B/op; ratio ${ours / std}%.2f (target >= 1, <= 48 B/op)")

    val (race, fastest) = onVirtualThread {
      Async.blocking {
        def three() = (Future { Thread.sleep(5); 1 }, Future { Thread.sleep(10); 2 }, Future { Thread.sleep(15); 3 })
        val race = opsPerSecond(40, iterations = 5, warmup = 1) { k =>
          times(k) { val (a, b, c) = three(); Async.await(Async.race(a, b, c)); a.cancel(); b.cancel(); c.cancel() }
        }
        val fastest = opsPerSecond(40, iterations = 5, warmup = 1) { k =>
          times(k) { val (a, b, c) = three(); a.value; b.cancel(); c.cancel() }
        }
        (race, fastest)
      }
    }
    println(f"race of three: $race%,.1f ops/s; await fastest: $fastest%,.1f ops/s; ratio ${fastest / race}%.3f (target <= 1.05)")

    val rt = java.lang.Runtime.getRuntime
    System.gc()
    val heapBefore = rt.totalMemory - rt.freeMemory
    val threadsBefore = Thread.activeCount
    val timers = Array.fill(100_000)(Timer(60_000))
    System.gc()
    val heapWith = rt.totalMemory - rt.freeMemory
    println(f"100,000 pending timers: ${(heapWith - heapBefore) / 1048576.0}%.1f MiB of heap, ${Thread.activeCount - threadsBefore} more threads (target < 64 MiB)")
    timers.foreach(_.cancel())
    val lateness = onVirtualThread {
      Async.blocking {
        val fired = (0 until 2000).map { i =>
          val due = System.nanoTime() + (i % 50 + 1) * 1_000_000L
          val t = Timer((i % 50 + 1).toLong)
          Future { Async.await(t); (System.nanoTime() - due) / 1e6 }
        }
        fired.map(_.value).sorted
      }
    }
    println(f"timer lateness: median ${lateness(lateness.size / 2)}%.2f ms, p99 ${lateness((lateness.size * 0.99).toInt)}%.2f ms (target median < 5 ms)")
