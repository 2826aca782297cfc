package asyncpipe.async

import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.atomic.{AtomicBoolean, AtomicInteger}
import scala.jdk.CollectionConverters.*
import scala.util.{Success, Try}
import munit.Location
import Support.*
import ChannelBehaviour.*
import ChannelTapBehaviour.Recorder

/** A channel's tap (`SegmentChannel.tap`, the standing listener the multiplexer relays through),
  * on every kind: values reach it in order, exactly once, whether a send hands its value over
  * directly (an empty channel) or the tap takes it from the head; a refused value stays first in
  * the channel; one tap at a time; `untap` stops the offers; the closed failure comes once the
  * channel is drained.
  */
abstract class ChannelTapBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  private def segment[T](c: Channel[T]): SegmentChannel[T] = c.asInstanceOf[SegmentChannel[T]]

  private def drain[T](c: Channel[T]): List[T] =
    Iterator.continually(c.tryRead()).takeWhile(_.exists(_.isSuccess)).map(_.get.get).toList

  for kind <- ChannelKind.all do
    test(s"$kind: a tap takes every value sent, in order, and leaves the channel empty"):
      Async.blocking:
        val c = kind.make[Int]()
        val tap = Recorder[Int]()
        assert(segment(c).tap(tap), "the first tap was refused")
        (1 to 100).foreach(c.send) // a rendezvous send returns once the tap took its value
        assertEquals(tap.values, (1 to 100).toList.map(Success(_)))
        assertEquals(c.tryRead(), None, "the channel kept a value the tap took")
        segment(c).checkInvariants()

    test(s"$kind: a value the tap refuses stays first in the channel, and later ones wait behind it"):
      Async.blocking:
        val c = kind.make[Int]()
        val tap = Recorder[Int](refusing = _ > 3) // takes three offers, then refuses everything
        assert(segment(c).tap(tap))
        (1 to 3).foreach(c.send)
        val more = if kind.room == 0 then 1 else math.min(kind.room, 5)
        val sender = Future((4 until 4 + more).foreach(c.send)) // blocks at the first on a rendezvous
        if kind.room >= more then assert(resultWithin(sender, "the sender").isSuccess)
        assertEquals(tap.values, List(1, 2, 3).map(Success(_)))
        segment(c).untap(tap)
        assertEquals((4 until 4 + more).toList.map(_ => c.read().get), (4 until 4 + more).toList, "what the tap refused")
        assert(resultWithin(sender, "the sender").isSuccess)
        segment(c).checkInvariants()

    test(s"$kind: concurrent senders into a tap that sometimes refuses: each value once, per-sender order"):
      val senders = 3
      val each = 2_000
      Async.blocking:
        val c = kind.make[(Int, Int)]()
        val tap = Recorder[(Int, Int)](refusing = _ => java.util.concurrent.ThreadLocalRandom.current().nextInt(4) == 0)
        assert(segment(c).tap(tap))
        // A reader that also reads now and then: what it takes goes past the tap, too.
        val stop = AtomicBoolean(false)
        val read = ConcurrentLinkedQueue[(Int, Int)]()
        val reader = Future {
          while !stop.get do
            c.tryRead() match
              case Some(Success(v)) => read.add(v)
              case _                => pause()
        }
        val sending = (0 until senders).map(id => Future((0 until each).foreach(i => c.send((id, i)))))
        sending.foreach(f => assert(resultWithin(f, "a sender").isSuccess))
        stop.set(true)
        assert(resultWithin(reader, "the reader").isSuccess)
        segment(c).untap(tap)
        val left = drain(c)
        val tapped = tap.values.map(_.get)
        val all = tapped ++ read.asScala.toList ++ left
        assertEquals(all.size, senders * each, s"values taken ${all.size}, sent ${senders * each}")
        assertEquals(all.toSet.size, all.size, "a value was taken twice")
        for id <- 0 until senders do
          // the tap never takes a value before one sent earlier (it is offered the head only, and
          // a send hands over directly only into an empty channel), and what is left is in order
          val mine = tapped.filter(_._1 == id).map(_._2)
          assertEquals(mine, mine.sorted, s"sender $id: the tap's values out of order")
          val rest = left.filter(_._1 == id).map(_._2)
          assertEquals(rest, rest.sorted, s"sender $id: the values left out of order")
          if mine.nonEmpty && rest.nonEmpty then
            assert(mine.last < rest.head, s"sender $id: the tap took ${mine.last} after ${rest.head} was left")
        segment(c).checkInvariants()

    test(s"$kind: one tap at a time; after untap values stay in the channel; close is offered once drained"):
      Async.blocking:
        val c = kind.make[Int]()
        val first = Recorder[Int]()
        val second = Recorder[Int]()
        assert(segment(c).tap(first))
        assert(!segment(c).tap(second), "a second tap was accepted")
        if kind.room > 0 then
          c.send(1)
          segment(c).untap(first)
          c.send(2)
          assertEquals(first.values, List(Success(1)))
          assert(segment(c).tap(second), "a tap after untap was refused")
          assertEquals(second.values, List(Success(2)), "the new tap was not offered the waiting value")
          c.close()
          assertEquals(second.values.size, 2, s"the closed failure was not offered: ${second.values}")
          failureOf[ChannelClosedException](second.values.last)
        else
          segment(c).untap(first)
          c.close()
          assert(segment(c).tap(second))
          failureOf[ChannelClosedException](second.values.head)

object ChannelTapBehaviour:
  /** A tap that records what it takes, refuses the offers (numbered from 1) that `refusing`
    * picks, and decides one offer at a time (as the multiplexer's tap does: a send into an empty
    * channel may offer while the head is being offered).
    */
  final class Recorder[T](refusing: Int => Boolean = (_: Int) => false) extends SegmentChannel.Tap[T]:
    private val busy = AtomicBoolean(false)
    private val offers = AtomicInteger(0)
    val taken = ConcurrentLinkedQueue[Try[T]]()
    def apply(v: Try[T]): Boolean =
      while !busy.compareAndSet(false, true) do Thread.onSpinWait()
      try
        if refusing(offers.incrementAndGet()) then false
        else
          taken.add(v)
          true
      finally busy.set(false)
    def values: List[Try[T]] = taken.asScala.toList

class ChannelTapOnVirtualThreads extends ChannelTapBehaviour(Runtime.VirtualThreads)
class ChannelTapOnPlatformThreads extends ChannelTapBehaviour(Runtime.PlatformThreads)
