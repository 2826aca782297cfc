package asyncpipe.async

import java.util.concurrent.CountDownLatch
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.locks.LockSupport

/** The waits for another thread's short step (`SegmentChannel.spinWait`, a race decision's wait)
  * must let that thread run even when it waits for a carrier in a queue the carriers do not look
  * at. A virtual thread that `Thread.yield`s is put back on its carrier's own queue when that
  * queue holds other work, and a carrier runs its own queue until it is empty before it looks at
  * the queues that platform threads submit to: so spinners that only yield, two or more per
  * carrier, keep every carrier busy with each other, and a thread unparked by a platform thread
  * (a cancel, a timer) waits for ever. ChannelStress stalled that way (a listener read holding
  * a cell while waiting for a decision whose thread was never run again).
  */
class SpinWaitStarvation extends munit.FunSuite, Watchdog:
  test("spinners waiting for a thread that a platform thread unparked let it run"):
    val spinners = 2 * math.max(2, java.lang.Runtime.getRuntime.availableProcessors)
    @volatile var done = false
    @volatile var released = false
    val parked = CountDownLatch(1)
    val doneLatch = CountDownLatch(1)
    // the thread the spinners wait for: parked until a platform thread (this one) unparks it
    val awaited = Thread.ofVirtual().start { () =>
      parked.countDown()
      while !released do LockSupport.park()
      done = true
      doneLatch.countDown()
    }
    Support.awaitLatch(parked, "the awaited thread to start")
    Support.eventually("the awaited thread to park")(awaited.getState == Thread.State.WAITING)
    val spinning = AtomicInteger()
    val threads = (1 to spinners).map { _ =>
      Thread.ofVirtual().start { () =>
        spinning.incrementAndGet()
        while !done do SegmentChannel.spinWait()
      }
    }
    Support.eventually("every spinner to run")(spinning.get == spinners)
    released = true
    LockSupport.unpark(awaited) // from a platform thread: an external submission
    val ran = doneLatch.await(Support.Patience, java.util.concurrent.TimeUnit.MILLISECONDS)
    done = true // let the spinners end either way
    threads.foreach(_.join(Support.Patience))
    assert(ran, s"a thread unparked by a platform thread did not run within ${Support.Patience} ms while $spinners virtual threads spun in spinWait")
