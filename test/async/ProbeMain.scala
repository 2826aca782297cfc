package asyncpipe.async

import java.util.concurrent.*

object ProbeMain:
  given Runtime = Runtime.VirtualThreads
  val N = 2_000_000
  def time(name: String)(body: => Unit): Double =
    val t0 = System.nanoTime(); body; val dt = (System.nanoTime() - t0) / 1e9
    val ops = N / dt / 1e6
    println(f"$name%-20s $ops%.2f M ops/s"); ops
  def pair(send: Long => Unit, recv: () => Long): Unit =
    val s = Thread.ofVirtual().start(() => { var i = 0L; while i < N do { send(i); i += 1 } })
    var sum = 0L; var i = 0
    val r = Thread.ofVirtual().start(() => { var i = 0; while i < N do { sum += recv(); i += 1 } })
    s.join(); r.join()
  def chan(ch: Channel[java.lang.Long]) = Async.blocking:
    val a = summon[Async]
    pair(x => ch.send(x)(using a), () => ch.readOrClosed()(using a).asInstanceOf[java.lang.Long])
  def main(args: Array[String]): Unit =
    if args.nonEmpty then System.setProperty("asyncpipe.channel.yields", args(0))
    if args.length > 1 then System.setProperty("asyncpipe.channel.yield", args(1))
    for round <- 1 to 2 do
      time("SynchronousQueue") { val q = SynchronousQueue[java.lang.Long](); pair(q.put(_), () => q.take()) }
      time("rendezvous") { chan(SyncChannel()) }
      time("ABQ(16)") { val q = ArrayBlockingQueue[java.lang.Long](16); pair(q.put(_), () => q.take()) }
      time("buffered(16)") { chan(BufferedChannel(16)) }
      time("LTQ") { val q = LinkedTransferQueue[java.lang.Long](); pair(q.put(_), () => q.take()) }
      time("unbounded") { chan(UnboundedChannel()) }
      println()
