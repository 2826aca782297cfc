package asyncpipe.io

import asyncpipe.async.*
import asyncpipe.async.Support.*
import java.nio.ByteBuffer
import java.util.concurrent.{CancellationException, ConcurrentLinkedQueue}
import java.util.concurrent.atomic.AtomicInteger
import IoSupport.*

/** A supervised scope over blocking IO (issue 40): a failing child cancels siblings blocked in
  * UDP receives, the one through a receive's worker future, the other in the sibling's own
  * selector wait (`receiveWaiting`); the scope rethrows once both have ended, every thread the
  * scope started has ended, and the sockets are left open and working.
  */
abstract class SupervisedIoBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  private val Loopback = "127.0.0.1"

  private def intPacket(n: Int): ByteBuffer = ByteBuffer.allocate(4).putInt(n).flip()

  test("a failing child cancels siblings blocked in UDP receives; the scope rethrows once they ended, no thread is left, the sockets still receive"):
    val rec = RecordingRuntime(runtime)
    val e = IllegalStateException("child failed")
    val ended = AtomicInteger(0)
    val endedWith = ConcurrentLinkedQueue[Throwable]()
    val viaWorker = SocketUDP().bindAndOpen(Loopback, 0)
    val direct = SocketUDP().bindAndOpen(Loopback, 0)
    val client = SocketUDP().open()
    def recording(body: => Any): Any =
      try body
      catch
        case t: Throwable =>
          endedWith.add(t)
          throw t
      finally ended.incrementAndGet()
    try
      blockingOn(rec):
        val thrown = intercept[IllegalStateException]:
          Async.supervised:
            Future.user(recording(viaWorker.receive().value))
            Future(recording(direct.receiveWaiting(0)(_ => false)))
            Future[Unit]:
              eventually("both receives to wait in a selector"):
                rec.threads.count(t => t.isAlive && t.getStackTrace.exists(inSelect)) == 2
              throw e
            Promise[Int]().future.value
        assert(thrown eq e, s"the scope threw $thrown")
        assertEquals(ended.get, 2, "the scope rethrew before its blocked children had ended")
      val ends = endedWith.toArray.toList
      assert(ends.exists(_.isInstanceOf[CancellationException]), s"the worker's receive ended with ${ends.mkString(", ")}")
      assert(ends.exists(_.isInstanceOf[InterruptedException]), s"the direct receive ended with ${ends.mkString(", ")}")
      rec.threads.foreach(t => join(t, s"a thread of the supervised scope ($t)"))
      assert(viaWorker.isOpened && direct.isOpened, "cancelling a receive closed its socket")
      Async.blocking:
        for (s, n) <- Seq(viaWorker -> 1, direct -> 2) do
          client.send(intPacket(n), Loopback, s.localPort).value
          val p = s.receive().value
          assertEquals(ByteBuffer.wrap(p.getData, p.getOffset, p.getLength).getInt, n)
    finally
      viaWorker.close()
      direct.close()
      client.close()

class SupervisedIoOnVirtualThreads extends SupervisedIoBehaviour(Runtime.VirtualThreads)
class SupervisedIoOnPlatformThreads extends SupervisedIoBehaviour(Runtime.PlatformThreads)
