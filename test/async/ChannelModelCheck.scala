package asyncpipe.async

import scala.collection.mutable
import scala.util.{Failure, Random, Success, Try}
import munit.{Assertions, Location}
import ChannelStress.{Factor, kindName, make, safeDump, seedFrom, segment}

/** Channels checked against a model.
  *
  * ==Differential test against a sequential model==
  * On one thread, random sequences of operations run on a real channel and on a naive model (a
  * queue with a capacity, a closed flag, and the listeners waiting for a value); every result is
  * compared, and `checkInvariants()` runs after every operation (one thread: always quiescent).
  * Operations: `trySend`, `tryRead`, `close`, `isClosed`, `canRead.poll()`, a refusing
  * `canRead.poll(k)` and `canRead.filter(...).poll()` (the value must stay), `canRead.onComplete`
  * of an accepting listener (a reader waiting: the rendezvous channel's only way to pair on one
  * thread) and its `dropListener`, and `send` / `read` where the model says they cannot block.
  * Without contention nothing may fail spuriously, so the model is exact, except for which of
  * several waiting listeners a value goes to (the facade does not promise reader order).
  */
class ChannelModelCheck extends munit.FunSuite, Watchdog:
  private val Kinds = Seq(0, 1, 2, 3, 31, 32, 33, 64, SegmentChannel.Unbounded)

  for cap <- Kinds do
    test(s"differential: ${kindName(cap)} agrees with a sequential model on random operation sequences"):
      val seed = seedFrom(s"model $cap")
      val rnd = Random(seed)
      val sequences = 150 * Factor
      for n <- 0 until sequences do
        val length = 1 + rnd.nextInt(if rnd.nextInt(10) == 0 then 2000 else 250)
        Differential(cap, seed, n, Random(rnd.nextLong())).run(length)

/** One random sequence on a fresh channel and a fresh model. */
private final class Differential(cap: Int, seed: Long, sequence: Int, rnd: Random):
  import ChannelModelCheck.*

  private val ch = make[Int](cap)
  private val queue = mutable.Queue.empty[Int]
  private var closed = false
  /** Accepting listeners registered and neither served nor dropped, in registration order. */
  private val waiting = mutable.ArrayBuffer.empty[Probe]
  /** Every listener ever registered or polled with, to check that no call was unexpected. */
  private val probes = mutable.ArrayBuffer.empty[Probe]
  private val history = mutable.ArrayBuffer.empty[String]
  private var nextValue = 0
  /** Favours sends (towards full) or reads (towards empty) for this whole sequence. */
  private val sendBias = 0.15 + rnd.nextDouble() * 0.7

  private def room: Boolean = cap == SegmentChannel.Unbounded || queue.size < cap

  private def fail(msg: String)(using Location): Nothing =
    Assertions.fail(
      s"${kindName(cap)}, seed $seed, sequence $sequence, operation ${history.size}: $msg\n" +
        s"model: queue ${queue.mkString("[", ",", "]")}, closed $closed, ${waiting.size} listeners waiting\n" +
        s"last operations: ${history.takeRight(25).mkString("; ")}\nchannel: ${safeDump(ch)}")

  private def check(cond: Boolean, msg: => String)(using Location): Unit = if !cond then fail(msg)

  def run(length: Int): Unit =
    for _ <- 0 until length do
      step()
      try segment(ch).checkInvariants()
      catch case e: AssertionError => fail(s"invariants broken: ${e.getMessage}")
      probes.foreach(p => check(p.calls.map(norm) == p.expected.map(norm), s"listener k${p.id} was called with ${p.calls}, expected ${p.expected}"))
      check(ch.isClosed == closed, s"isClosed is ${ch.isClosed}, model says $closed")
    check(ch.capacity == cap, s"capacity ${ch.capacity}")

  private def step(): Unit =
    val r = rnd.nextDouble()
    if r < 0.006 then doClose()
    else if r < sendBias then
      if rnd.nextInt(4) == 0 && (closed || waiting.nonEmpty || room) then doSend() else doTrySend()
    else
      rnd.nextInt(10) match
        case 0 | 1 | 2 => doTryRead()
        case 3         => if queue.nonEmpty || closed then doRead() else doTryRead()
        case 4         => doPoll()
        case 5         => doRefusingPoll()
        case 6         => doFilteredPoll()
        case 7 | 8     => doRegister()
        case _         => doDrop()

  /** The outcome a send of `v` must have now: hands `v` to a waiting listener (which one is the
    * channel's choice), buffers it, or reports no room. Returns whether it was sent.
    */
  private def expectSend(v: Int, sent: Boolean, op: String): Unit =
    if waiting.nonEmpty then
      check(sent, s"$op was refused while ${waiting.size} listeners waited")
      val served = waiting.filter(p => p.calls.size > p.expected.size)
      check(served.size == 1, s"$op: ${served.size} waiting listeners were called, expected exactly one")
      val p = served.head
      p.expected += Success(v)
      waiting -= p
    else if room then
      check(sent, s"$op was refused with ${queue.size} of $cap buffered")
      queue.enqueue(v)
    else check(!sent, s"$op succeeded with ${queue.size} of $cap buffered and no listener waiting")

  private def doTrySend(): Unit =
    val v = nextValue
    nextValue += 1
    history += s"trySend($v)"
    val result = Try(ch.trySend(v))
    if closed then check(isClosedFailure(result), s"trySend($v) on a closed channel gave $result")
    else result match
      case Success(sent) => expectSend(v, sent, s"trySend($v)")
      case Failure(e)    => fail(s"trySend($v) threw $e")

  private def doSend(): Unit =
    val v = nextValue
    nextValue += 1
    history += s"send($v)"
    val result = Try(Async.blocking(ch.send(v)))
    if closed then check(isClosedFailure(result), s"send($v) on a closed channel gave $result")
    else result match
      case Success(_) => expectSend(v, true, s"send($v)")
      case Failure(e) => fail(s"send($v) threw $e")

  /** What a read must give now, taking it from the model. */
  private def expectRead(): Option[Try[Int]] =
    if queue.nonEmpty then Some(Success(queue.dequeue()))
    else if closed then Some(Failure(ChannelClosedException()))
    else None

  private def same(actual: Option[Try[Int]], expected: Option[Try[Int]]): Boolean = actual.map(norm) == expected.map(norm)

  private def doTryRead(): Unit =
    history += "tryRead"
    val actual = Try(ch.tryRead()).fold(e => fail(s"tryRead threw $e"), identity)
    val expected = expectRead()
    check(same(actual, expected), s"tryRead gave $actual, expected $expected")

  private def doRead(): Unit =
    history += "read"
    val actual = Try(Async.blocking(ch.read())).fold(e => fail(s"read threw $e"), identity)
    val expected = expectRead()
    check(same(Some(actual), expected), s"read gave $actual, expected $expected")

  private def doPoll(): Unit =
    history += "canRead.poll()"
    val actual = Try(ch.canRead.poll()).fold(e => fail(s"canRead.poll() threw $e"), identity)
    val expected = expectRead()
    check(same(actual, expected), s"canRead.poll() gave $actual, expected $expected")

  /** The value ready now, if any, without taking it. */
  private def head: Option[Try[Int]] =
    if queue.nonEmpty then Some(Success(queue.head))
    else if closed then Some(Failure(ChannelClosedException()))
    else None

  private def doRefusingPoll(): Unit =
    history += "canRead.poll(refusing)"
    val p = Probe(probes.size, accept = false)
    probes += p
    val took = ch.canRead.poll(p)
    check(!took, "canRead.poll(k) reported a take though k refused")
    head.foreach(p.expected += _) // offered the head, which stays

  private def doFilteredPoll(): Unit =
    val keepOdd = rnd.nextBoolean()
    history += s"canRead.filter(${if keepOdd then "odd" else "none"}).poll()"
    val actual = ch.canRead.filter {
      case Success(v) => keepOdd && v % 2 == 1
      case Failure(_) => true
    }.poll()
    val passes = head match
      case Some(Success(v)) => keepOdd && v % 2 == 1
      case Some(Failure(_)) => true
      case None             => false
    val expected = if passes then expectRead() else None
    check(same(actual, expected), s"a filtered canRead.poll() gave $actual, expected $expected (head $head)")

  private def doRegister(): Unit =
    val p = Probe(probes.size, accept = true)
    probes += p
    history += s"canRead.onComplete(k${p.id})"
    ch.canRead.onComplete(p)
    expectRead() match
      case Some(t) => p.expected += t
      case None    => waiting += p

  private def doDrop(): Unit =
    if waiting.isEmpty then doTryRead()
    else
      val p = waiting(rnd.nextInt(waiting.size))
      history += s"canRead.dropListener(k${p.id})"
      ch.canRead.dropListener(p)
      waiting -= p

  private def doClose(): Unit =
    history += "close"
    ch.close()
    if !closed then
      closed = true
      waiting.foreach(_.expected += Failure(ChannelClosedException()))
      waiting.clear()

private object ChannelModelCheck:
  /** A result made comparable: failures compare by kind (exceptions have identity equality). */
  def norm(t: Try[Int]): Any = t match
    case Success(v)                         => v
    case Failure(_: ChannelClosedException) => "closed"
    case Failure(e)                         => e.toString

  def isClosedFailure(t: Try[?]): Boolean = t match
    case Failure(_: ChannelClosedException) => true
    case _                                  => false

  /** A listener that records its calls; `expected` is what the model says it should have got. */
  final class Probe(val id: Int, accept: Boolean) extends Listener[Try[Int]]:
    val calls = mutable.ArrayBuffer.empty[Try[Int]]
    val expected = mutable.ArrayBuffer.empty[Try[Int]]
    private var served = false
    def apply(v: Try[Int]): Boolean =
      calls += v
      if accept && !served then { served = true; true } else false
