package asyncpipe.cli.system

import asyncpipe.async.Watchdog
import java.util.concurrent.{CountDownLatch, CyclicBarrier}
import java.util.concurrent.atomic.AtomicReference

/** [[StopperSlot]]: the first signal and the stopper's setter agree, however they interleave:
  * either the signal tells the stopper, or it halts and the setter is refused (and starts
  * nothing that the halt would leave running).
  */
class StopperSlotTest extends munit.FunSuite with Watchdog:
  private final class Named(name: String) extends Signals.Stopper:
    def stop(request: Stop): Unit = ()
    override def toString: String = name

  test("a stopper set before the first signal is the one it tells") {
    val slot = StopperSlot()
    val s = Named("s")
    assert(slot.set(s))
    assert(slot.claim() eq s)
  }

  test("a later stopper replaces an earlier one") {
    val slot = StopperSlot()
    assert(slot.set(Named("a")))
    val b = Named("b")
    assert(slot.set(b))
    assert(slot.claim() eq b)
  }

  test("a signal that finds no stopper closes the slot: a stopper set after it is refused") {
    val slot = StopperSlot()
    assertEquals(slot.claim(), null)
    assert(!slot.set(Named("late")), "a stopper set after a signal that found none")
    assert(!slot.set(Named("later")), "the slot stays closed")
  }

  test("racing: the signal either tells the stopper or closes the slot to it, never neither") {
    val rounds = 20_000 * sys.env.get("ASYNCPIPE_STRESS").flatMap(_.toIntOption).getOrElse(1)
    var told = 0
    var refused = 0
    var round = 0
    while round < rounds do
      val slot = StopperSlot()
      val s = Named(s"s$round")
      val barrier = CyclicBarrier(2)
      val claimed = AtomicReference[Signals.Stopper | Null](null)
      val done = CountDownLatch(1)
      Thread.ofPlatform().start { () =>
        barrier.await()
        claimed.set(slot.claim())
        done.countDown()
      }
      barrier.await()
      val accepted = slot.set(s)
      done.await()
      val c = claimed.get
      if accepted then
        assert(c eq s, s"round $round: the stopper was set, but the signal found ${c}")
        told += 1
      else
        assertEquals(c, null, s"round $round: the stopper was refused, but the signal found one")
        refused += 1
      round += 1
    assertEquals(told + refused, rounds)
  }
