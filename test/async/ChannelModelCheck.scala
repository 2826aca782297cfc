package asyncpipe.async

import java.util.concurrent.TimeUnit
import scala.collection.mutable
import scala.util.{Failure, Random, Success, Try}
import munit.{Assertions, Location}
import org.jetbrains.lincheck.datastructures.{IntGen, ModelCheckingOptions, Operation, Param, Validate}
import org.jetbrains.lincheck.datastructures.verifier.Verifier
import org.jetbrains.kotlinx.lincheck.Actor
import org.jetbrains.kotlinx.lincheck.execution.{ExecutionResult, ExecutionScenario}
import org.jetbrains.kotlinx.lincheck.util.{LincheckResult, ValueResult, VoidResult}
import ChannelStress.{Factor, kindName, make, safeDump, seedFrom, segment}

/** Channels checked against a model.
  *
  * ==Differential test against a sequential model==
  * On one thread, random sequences of operations run on a real channel and on a naive model (a
  * queue with a capacity, a closed flag, and the listeners waiting for a value); every result is
  * compared, and `checkInvariants()` runs after every operation (one thread: always quiescent).
  * Operations: `trySend`, `tryRead`, `close`, `error` (readers then see its cause), `cancel` (what
  * the model holds is dropped; a tap may take what it is offered on the way), `isClosed`,
  * `canRead.poll()`, a refusing
  * `canRead.poll(k)` and `canRead.filter(...).poll()` (the value must stay), `canRead.onComplete`
  * of an accepting listener (a reader waiting: the rendezvous channel's only way to pair on one
  * thread) and its `dropListener`, `send` / `read` where the model says they cannot block, and
  * `tap` / `untap` of a tap (doc/adr/0018) that takes every value, only even ones, or none: the
  * tap takes the head whenever it would (so after every step the model's head is one it refuses),
  * and a value sent into an empty channel if it would, ahead of any waiting listener; what it
  * refuses stays first; it is offered only the head, the value being sent, or the closed failure
  * (once closed and drained); an untapped tap is offered nothing more.
  * With send branches (the second set of tests), sends also include `canSend(v).poll(k)`
  * (selectNow's way: it sends iff a trySend would, asking `k` first, and `k`'s no sends nothing),
  * `canSend(v).onComplete(k)` (a select's registration: asked at once where the send would not
  * wait, else parked, to the model a blocked sender whose `k` is asked when a reader, room or the
  * tap comes to it) and `dropListener(k)` (a parked branch gone, having sent nothing); each `k`
  * accepts or refuses (a select won elsewhere), and must be called exactly as the model says. On
  * a tapped or filtered rendezvous channel a parked branch is asked before the reader that found
  * it, which may then refuse the value: it stays first in line (the relaxation documented at
  * `Channel.canSend`), and the model keeps it as a buffered value.
  * Without contention nothing may fail spuriously, so the model is exact, except for which of
  * several waiting listeners a value goes to (the facade does not promise reader order).
  * Kinds: rendezvous, buffered 1, 2, 3, and one short of the segment size, the segment size, one
  * past it and twice it, and
  * unbounded; 300 sequences each (100 with send branches; times `ASYNCPIPE_STRESS`), one in ten
  * up to 2,000 operations long so that failed tries and cancelled listeners cross many segments.
  *
  * ==Lincheck model checking==
  * Lincheck (org.jetbrains.lincheck:lincheck, JDK 25 in the test fork: it instruments classes
  * through a dynamically attached agent, hence the JDK's one-line warning about it) runs small
  * concurrent scenarios on rendezvous, buffered(1) and unbounded channels through many
  * interleavings of their shared-memory accesses, and checks each execution for
  * linearizability against [[ChannelSpec]] with [[SpuriousTryVerifier]] (which lets a `trySend`
  * or `tryRead` fail spuriously where operations run in parallel, as the facade allows, and
  * nowhere else); `checkInvariants()` runs after each scenario (`@Validate`).
  *   - random scenarios of `trySend`, `tryRead`, `close` (and, unbounded, `send`), drawn by
  *     Lincheck: two threads of three operations, two before and two after;
  *   - scenarios with blocking `send` and `read`, generated here so that every interleaving
  *     ends ([[LincheckScenarios]]), with and without `close`, plus fixed regression scenarios;
  *   - on buffered(1), random scenarios that also draw `error` and `cancel`, with written ones
  *     where an ending races buffered values and a sender blocked on the full buffer (a `cancel`
  *     that skips its drain fails them; the random ones alone did not catch it).
  * A failure's message is Lincheck's report: the scenario, the results, and the interleaving.
  */
class ChannelModelCheck extends munit.FunSuite, Watchdog:
  // Lincheck's first check instruments every class it meets: slow on a loaded two-core machine
  override def watchdog = scala.concurrent.duration.Duration(120L * Factor, TimeUnit.SECONDS)
  override def munitTimeout = watchdog + scala.concurrent.duration.Duration(10, TimeUnit.SECONDS)
  private val Kinds = Seq(0, 1, 2, 3, SegmentChannel.SegmentSize - 1, SegmentChannel.SegmentSize,
    SegmentChannel.SegmentSize + 1, 2 * SegmentChannel.SegmentSize, SegmentChannel.Unbounded)

  for cap <- Kinds do
    test(s"differential: ${kindName(cap)} agrees with a sequential model on random operation sequences"):
      val seed = seedFrom(s"model $cap")
      val rnd = Random(seed)
      val sequences = 300 * Factor
      for n <- 0 until sequences do
        val length = 1 + rnd.nextInt(if rnd.nextInt(10) == 0 then 2000 else 250)
        Differential(cap, seed, n, Random(rnd.nextLong())).run(length)

  for cap <- Kinds do
    test(s"differential with send branches: ${kindName(cap)} agrees with the model on sequences of canSend polls, registered branches and drops among the rest"):
      val seed = seedFrom(s"model with send branches $cap")
      val rnd = Random(seed)
      val sequences = 100 * Factor
      for n <- 0 until sequences do
        val length = 1 + rnd.nextInt(if rnd.nextInt(10) == 0 then 2000 else 250)
        Differential(cap, seed, n, Random(rnd.nextLong()), sendBranches = true).run(length)

  // Lincheck, model checking (see LincheckChannel below)

  private val LincheckKinds = Seq(
    ("rendezvous", classOf[LincheckSyncChannel], classOf[SyncChannelSpec], 0),
    ("buffered(1)", classOf[LincheckBufferedChannel], classOf[BufferedChannelSpec], 1),
    ("unbounded", classOf[LincheckUnboundedChannel], classOf[UnboundedChannelSpec], SegmentChannel.Unbounded)
  )

  // Sizes: about 20 s in all on an idle two-core machine (Lincheck instruments each class it
  // meets on first use); ASYNCPIPE_STRESS multiplies the scenarios explored.
  for (name, cls, spec, cap) <- LincheckKinds do
    test(s"lincheck: $name trySend, tryRead and close are linearizable in every explored interleaving"):
      lincheck(s"$name, random scenarios"):
        ModelCheckingOptions()
          // a rendezvous channel never pairs two tries: its random scenarios are the plainest
          .iterations((if cap == 0 then 1 else 2) * Factor).invocationsPerIteration(120)
          .threads(2).actorsPerThread(3).actorsBefore(2).actorsAfter(2)
          .sequentialSpecification(spec).verifier(classOf[SpuriousTryVerifier])
          .loopBound(LoopBound)
          .check(cls)

  test("lincheck: buffered(1) trySend, tryRead, close, error and cancel are linearizable in every explored interleaving"):
    val cls = classOf[LincheckEndingChannel]
    val options = ModelCheckingOptions()
      .iterations(Factor).invocationsPerIteration(120)
      .threads(2).actorsPerThread(3).actorsBefore(2).actorsAfter(2)
      .sequentialSpecification(classOf[BufferedChannelSpec]).verifier(classOf[SpuriousTryVerifier])
      .loopBound(LoopBound)
    // and, always: an ending racing values in the buffer, a sender blocked on the full buffer, a read
    Seq(
      LincheckScenarios.of(cls, Seq("trySend" -> 1, "trySend" -> 2), Seq("cancel" -> 0, "tryRead" -> 0)),
      LincheckScenarios.of(cls, Seq("send" -> 1, "send" -> 2), Seq("cancel" -> 0), Seq("tryRead" -> 0)),
      LincheckScenarios.of(cls, Seq("send" -> 1, "send" -> 2), Seq("error" -> 0, "cancel" -> 0), Seq("read" -> 0))
    ).foreach(options.addCustomScenario)
    lincheck("buffered(1) with error and cancel, random and written scenarios")(options.check(cls))

  for (name, cls, spec, cap) <- LincheckKinds do
    test(s"lincheck: $name blocking send and read, with and without close, are linearizable"):
      val seed = seedFrom(s"lincheck $name")
      val rnd = Random(seed)
      val options = ModelCheckingOptions().iterations(0).invocationsPerIteration(100)
        .sequentialSpecification(spec).verifier(classOf[SpuriousTryVerifier]).loopBound(LoopBound)
      LincheckScenarios.regressions(cls, cap).foreach(options.addCustomScenario)
      for _ <- 0 until 2 * Factor do options.addCustomScenario(LincheckScenarios.random(cls, cap, rnd))
      lincheck(s"$name, blocking scenarios of seed $seed")(options.check(cls))

  /** Lincheck's bound on a loop's iterations before it calls the thread hung: above the
    * rendezvous waiter's spin (128 iterations before it parks), which the default of 50 took for
    * a livelock.
    */
  private val LoopBound = 400

  /** Runs a Lincheck check; its report (scenario, results, interleaving) becomes the failure. */
  private def lincheck(what: String)(check: => Unit)(using Location): Unit =
    try check
    catch case e: Throwable if e.getClass.getName.contains("lincheck") => Assertions.fail(s"$what: ${e.getMessage}", e)

/** One random sequence on a fresh channel and a fresh model; with `sendBranches`, the sends
  * include send branches (`canSend`) too.
  */
private final class Differential(cap: Int, seed: Long, sequence: Int, rnd: Random, sendBranches: Boolean = false):
  import ChannelModelCheck.*

  private val ch = make[Int](cap)
  private val queue = mutable.Queue.empty[Int]
  private var closed = false
  /** Why it ended: null for `close`, the cause of `error`, the channel's own for `cancel`. */
  private var cause: Throwable | Null = null
  private def closedFailure: Try[Int] = Failure(ChannelClosedException(cause))
  /** Accepting listeners registered and neither served nor dropped, in registration order. */
  private val waiting = mutable.ArrayBuffer.empty[Probe]
  /** Every listener ever registered or polled with, to check that no call was unexpected. */
  private val probes = mutable.ArrayBuffer.empty[Probe]
  private val history = mutable.ArrayBuffer.empty[String]
  /** Calls of all listeners, counted as they happen, and as the model expects them. */
  private val calls = Counter()
  private var expectedCalls = 0
  private def expect(p: Probe, t: Try[Int]): Unit =
    p.expected += t
    expectedCalls += 1
  private var nextValue = 0

  /** Send branches registered (`canSend(v).onComplete(k)`) that wait, in the order they parked.
    * To the model they are senders blocked in `send`: the channel holds their values beyond its
    * capacity, in line after the buffered ones. Each one's listener is asked (called with
    * `Success(())`) once a reader, room or the tap comes to it: yes, and the value is sent; no,
    * and the branch is gone, having sent nothing (a select won elsewhere meanwhile).
    */
  private val parked = mutable.ArrayBuffer.empty[SendProbe]
  /** Every send branch's listener, registered or polled with. */
  private val sendProbes = mutable.ArrayBuffer.empty[SendProbe]
  private def expectSend(p: SendProbe, t: Try[Unit]): Unit =
    p.expected += t
    expectedCalls += 1
  private def closedSend: Try[Unit] = Failure(ChannelClosedException(cause))

  /** Asks the parked branch first in line: its value joins the queue if its listener accepts. */
  private def askFirstParked(): Unit =
    val p = parked.remove(0)
    expectSend(p, Sent)
    if p.accept then queue.enqueue(p.v)

  /** Someone looks at the head of an empty rendezvous channel (a reader, a listener, the tap): its
    * parked branches are asked in order until one accepts, whose value is then first in line (a
    * reader takes it; one that refuses leaves it there, like a buffered value: the documented
    * relaxation of `canSend`). Other kinds have no parked branch while their queue is empty.
    */
  private def surface(): Unit = while queue.isEmpty && parked.nonEmpty do askFirstParked()

  /** Room made in a buffered channel goes to its parked branches, in order (`expandBuffer`). */
  private def promote(): Unit = while room && parked.nonEmpty do askFirstParked()

  /** Favours sends (towards full) or reads (towards empty) for this whole sequence. */
  private val sendBias = 0.15 + rnd.nextDouble() * 0.7

  private def room: Boolean = cap == SegmentChannel.Unbounded || queue.size < cap

  private def fail(msg: String)(using Location): Nothing =
    Assertions.fail(
      s"${kindName(cap)}, seed $seed, sequence $sequence, operation ${history.size}: $msg\n" +
        s"model: queue ${queue.mkString("[", ",", "]")}, closed $closed, ${waiting.size} listeners waiting, " +
        s"send branches parked ${parked.map(p => s"k${p.id}:${p.v}${if p.accept then "" else "(refusing)"}").mkString("[", ",", "]")}\n" +
        s"last operations: ${history.takeRight(25).mkString("; ")}\nchannel: ${safeDump(ch)}")

  private def check(cond: Boolean, msg: => String)(using Location): Unit = if !cond then fail(msg)

  def run(length: Int): Unit =
    for _ <- 0 until length do
      step()
      settleTap()
      checkTaps()
      try segment(ch).checkInvariants()
      catch case e: AssertionError => fail(s"invariants broken: ${e.getMessage}")
      if calls.count != expectedCalls then // some listener was called unexpectedly, or not called
        probes.foreach(p => check(p.calls.map(norm) == p.expected.map(norm), s"listener k${p.id} was called with ${p.calls}, expected ${p.expected}"))
        checkSendProbes()
        fail(s"listeners were called ${calls.count} times in all, expected $expectedCalls")
      waiting.foreach(p => check(p.calls.map(norm) == p.expected.map(norm), s"listener k${p.id} was called with ${p.calls}, expected ${p.expected}"))
    probes.foreach(p => check(p.calls.map(norm) == p.expected.map(norm), s"listener k${p.id} was called with ${p.calls}, expected ${p.expected}"))
    checkSendProbes()
    check(ch.isClosed == closed, s"isClosed is ${ch.isClosed}, model says $closed")
    check(ch.capacity == cap, s"capacity ${ch.capacity}")

  /** The channel's tap, if any; taps untapped before, which must be offered nothing more. */
  private val tapped = segment(ch).asInstanceOf[SegmentChannel[Int]]
  private var tap: TapProbe | Null = null
  private val untapped = mutable.ArrayBuffer.empty[(TapProbe, Int)]
  /** Whether a send of `v` now goes straight to the tap (the channel is empty). */
  private def tapTakes(v: Int): Boolean = tap != null && queue.isEmpty && parked.isEmpty && !closed && tap.nn.takes(v)
  /** What this step may offer the tap besides the head after it: the head before it, a value it sends. */
  private var offerable = Set.empty[Any]

  private def step(): Unit =
    offerable = head.map(norm).toSet
    val r = rnd.nextDouble()
    if r < 0.006 then doClose()
    else if r < 0.009 then doError()
    else if r < 0.012 then doCancel()
    else if r < 0.026 then doTapOrUntap()
    else if r < sendBias then
      val op = if sendBranches then rnd.nextInt(8) else rnd.nextInt(4)
      if op == 0 && (closed || waiting.nonEmpty || room || tapTakes(nextValue)) then doSend()
      else if op <= 3 then doTrySend()
      else if op == 4 then doSendBranchPoll()
      else if op <= 6 then doSendBranchRegister()
      else doSendBranchDrop()
    else
      rnd.nextInt(10) match
        case 0 | 1 | 2 => doTryRead()
        case 3         => if queue.nonEmpty || closed || parked.exists(_.accept) then doRead() else doTryRead()
        case 4         => doPoll()
        case 5         => doRefusingPoll()
        case 6         => doFilteredPoll()
        case 7 | 8     => doRegister()
        case _         => doDrop()

  /** The outcome a send of `v` must have now: hands `v` to a waiting listener (which one is the
    * channel's choice), buffers it, or reports no room. Returns whether it was sent.
    */
  private def expectSend(v: Int, sent: Boolean, op: String): Unit =
    if tapTakes(v) then
      check(sent, s"$op was refused, though the tap takes it")
      tap.nn.expected += v
    else if waiting.nonEmpty then
      check(sent, s"$op was refused while ${waiting.size} listeners waited")
      val served = waiting.filter(p => p.calls.size > p.expected.size)
      check(served.size == 1, s"$op: ${served.size} waiting listeners were called, expected exactly one")
      val p = served.head
      expect(p, Success(v))
      waiting -= p
    else if room then
      check(sent, s"$op was refused with ${queue.size} of $cap buffered")
      queue.enqueue(v)
    else check(!sent, s"$op succeeded with ${queue.size} of $cap buffered and no listener waiting")

  private def doTrySend(): Unit =
    val v = nextValue
    nextValue += 1
    offerable += v
    history += s"trySend($v)"
    val result = Try(ch.trySend(v))
    if closed then check(isClosedFailure(result), s"trySend($v) on a closed channel gave $result")
    else result match
      case Success(sent) => expectSend(v, sent, s"trySend($v)")
      case Failure(e)    => fail(s"trySend($v) threw $e")

  private def doSend(): Unit =
    val v = nextValue
    nextValue += 1
    offerable += v
    history += s"send($v)"
    val result = Try(notBlocking(s"send($v)")(ch.send(v)))
    if closed then check(isClosedFailure(result), s"send($v) on a closed channel gave $result")
    else result match
      case Success(_)                       => expectSend(v, true, s"send($v)")
      case Failure(e: munit.FailException) => throw e // blocked (notBlocking)
      case Failure(e)                       => fail(s"send($v) threw $e")

  /** Runs a blocking `send` or `read` that the model says will not block. With send branches it
    * is bounded, in a future of its own: a channel that disagrees (a send branch that took room
    * it did not use once blocked the send) then fails the test rather than hanging it.
    */
  private def notBlocking[T](what: String)(body: Async ?=> T): T =
    if !sendBranches then Async.blocking(body)
    else Async.blocking(withTimeoutOption(NotBlockingBound)(body))
      .getOrElse(fail(s"$what blocked for $NotBlockingBound ms, though the model says it does not wait"))

  /** What a read must give now, taking it from the model. */
  private def expectRead(): Option[Try[Int]] =
    surface()
    if queue.nonEmpty then
      val v = queue.dequeue()
      promote()
      Some(Success(v))
    else if closed then Some(closedFailure)
    else None

  private def same(actual: Option[Try[Int]], expected: Option[Try[Int]]): Boolean = actual.map(norm) == expected.map(norm)

  private def doTryRead(): Unit =
    history += "tryRead"
    val actual = Try(ch.tryRead()).fold(e => fail(s"tryRead threw $e"), identity)
    val expected = expectRead()
    check(same(actual, expected), s"tryRead gave $actual, expected $expected")

  private def doRead(): Unit =
    history += "read"
    val actual = Try(notBlocking("read")(ch.read())).fold({ case e: munit.FailException => throw e; case e => fail(s"read threw $e") }, identity)
    val expected = expectRead()
    check(same(Some(actual), expected), s"read gave $actual, expected $expected")

  private def doPoll(): Unit =
    history += "canRead.poll()"
    val actual = Try(ch.canRead.poll()).fold(e => fail(s"canRead.poll() threw $e"), identity)
    val expected = expectRead()
    check(same(actual, expected), s"canRead.poll() gave $actual, expected $expected")

  // Send branches

  /** What a send branch of `p.v` does now, asking `p` where the send would not wait; true iff
    * `p` took the send. A poll (`parks = false`) that would wait gives up without asking `p`; a
    * registration parks (its listener asked later, see `parked`).
    */
  private def expectBranch(p: SendProbe, parks: Boolean): Boolean =
    if closed then
      expectSend(p, closedSend)
      p.accept
    else if tapTakes(p.v) then
      // an empty channel whose tap takes the value: `p` is asked first (the value held in a buffer
      // cell, or, rendezvous, waiting in the head cell where the tap looks at once), and the tap
      // has it ahead of any waiting listener, as a send's value
      expectSend(p, Sent)
      if p.accept then tap.nn.expected += p.v
      p.accept
    else if waiting.nonEmpty then
      // a reader waits (the queue is empty): `p` is asked first, then the reader gets the value
      expectSend(p, Sent)
      if p.accept then
        val served = waiting.filter(w => w.calls.size > w.expected.size)
        check(served.size == 1, s"canSend(${p.v}): ${served.size} waiting listeners were called, expected exactly one")
        expect(served.head, Success(p.v))
        waiting -= served.head
      p.accept
    else if room then
      // a buffer cell: `p` is asked while the cell is held; no, and the cell takes no room
      expectSend(p, Sent)
      if p.accept then queue.enqueue(p.v)
      p.accept
    else if tap != null && cap == 0 && queue.isEmpty && parked.isEmpty then
      // a rendezvous branch waits in the head cell, where the tap looks at once: `p` is asked
      // first, and an accepted value is the tap's if it takes it, else first in line (settleTap)
      expectSend(p, Sent)
      if p.accept then queue.enqueue(p.v)
      p.accept
    else
      if parks then parked += p
      false

  private def newSendProbe(what: String): SendProbe =
    val v = nextValue
    nextValue += 1
    offerable += v
    val p = SendProbe(sendProbes.size, v, accept = rnd.nextInt(4) != 0, calls, ch.canSend(v))
    sendProbes += p
    history += s"canSend($v).$what(k${p.id}${if p.accept then "" else ", refusing"})"
    p

  /** `canSend(v).poll(k)`: selectNow's way. Sends iff a trySend would (asking `k` first), but
    * for the relaxation on a tapped rendezvous channel (see `expectBranch`).
    */
  private def doSendBranchPoll(): Unit =
    val p = newSendProbe("poll")
    val took = Try(p.source.poll(p)).fold(e => fail(s"canSend(${p.v}).poll threw $e"), identity)
    val expected = expectBranch(p, parks = false)
    check(took == expected, s"canSend(${p.v}).poll(k${p.id}) gave $took, expected $expected")

  /** `canSend(v).onComplete(k)`: a select's registration. */
  private def doSendBranchRegister(): Unit =
    val p = newSendProbe("onComplete")
    Try(p.source.onComplete(p)).failed.foreach(e => fail(s"canSend(${p.v}).onComplete threw $e"))
    expectBranch(p, parks = true)

  /** `dropListener(k)` of a parked branch (a select that won elsewhere): it is gone, having sent
    * nothing; or of a branch decided before, which changes nothing.
    */
  private def doSendBranchDrop(): Unit =
    if parked.nonEmpty then
      val p = parked(rnd.nextInt(parked.size))
      history += s"canSend(${p.v}).dropListener(k${p.id})"
      p.source.dropListener(p)
      parked -= p
    else if sendProbes.nonEmpty then
      val p = sendProbes(rnd.nextInt(sendProbes.size))
      history += s"canSend(${p.v}).dropListener(k${p.id}) (decided)"
      p.source.dropListener(p)
    else doTrySend()

  private def checkSendProbes(): Unit =
    sendProbes.foreach(p => check(p.calls.map(normSend) == p.expected.map(normSend),
      s"send branch k${p.id} (of ${p.v}) was called with ${p.calls}, expected ${p.expected}"))

  /** The value ready now, if any, without taking it. */
  private def head: Option[Try[Int]] =
    if queue.nonEmpty then Some(Success(queue.head))
    else if closed && parked.isEmpty then Some(closedFailure)
    else None

  private def doRefusingPoll(): Unit =
    history += "canRead.poll(refusing)"
    val p = Probe(probes.size, accept = false, calls)
    probes += p
    val took = ch.canRead.poll(p)
    check(!took, "canRead.poll(k) reported a take though k refused")
    surface()
    head.foreach(expect(p, _)) // offered the head, which stays

  private def doFilteredPoll(): Unit =
    val keepOdd = rnd.nextBoolean()
    history += s"canRead.filter(${if keepOdd then "odd" else "none"}).poll()"
    val actual = ch.canRead.filter {
      case Success(v) => keepOdd && v % 2 == 1
      case Failure(_) => true
    }.poll()
    surface()
    val passes = head match
      case Some(Success(v)) => keepOdd && v % 2 == 1
      case Some(Failure(_)) => true
      case None             => false
    val expected = if passes then expectRead() else None
    check(same(actual, expected), s"a filtered canRead.poll() gave $actual, expected $expected (head $head)")

  private def doRegister(): Unit =
    val p = Probe(probes.size, accept = true, calls)
    probes += p
    history += s"canRead.onComplete(k${p.id})"
    ch.canRead.onComplete(p)
    expectRead() match
      case Some(t) => expect(p, t)
      case None    => waiting += p

  private def doDrop(): Unit =
    if waiting.isEmpty then doTryRead()
    else
      val p = waiting(rnd.nextInt(waiting.size))
      history += s"canRead.dropListener(k${p.id})"
      ch.canRead.dropListener(p)
      waiting -= p

  private def doTapOrUntap(): Unit =
    tap match
      case t: TapProbe =>
        history += s"untap(${t.name})"
        tapped.untap(t)
        untapped += ((t, t.calls.size))
        tap = null
      case null =>
        val t = TapProbe(rnd.nextInt(3))
        history += s"tap(${t.name})"
        check(tapped.tap(t), "tap() refused with no tap registered")
        tap = t

  /** The tap takes the head while it would: every step that changes the head offers it the head
    * (on a rendezvous channel, a parked send branch's, once its listener accepted).
    */
  private def settleTap(): Unit = tap match
    case t: TapProbe =>
      var again = true
      while again do
        surface()
        if queue.nonEmpty && t.takes(queue.head) then
          t.expected += queue.dequeue()
          promote()
        else again = false
    case null => ()

  /** After each step: the tap took what the model says, and was offered nothing but what this
    * step may offer (the head before or after it, a value it sent, a value the tap took), and the
    * closed failure only with the model closed and drained; an untapped tap was offered nothing.
    */
  private def checkTaps(): Unit =
    val ready = head.map(norm).toSet
    tap match
      case t: TapProbe =>
        check(t.took == t.expected, s"tap ${t.name} took ${t.took.takeRight(10)}, expected ${t.expected.takeRight(10)}")
        val odd = t.calls.drop(t.checked).map(norm).filterNot {
          case x: String if x.startsWith("closed") => closed && queue.isEmpty && parked.isEmpty
          case x        => offerable(x) || ready(x) || t.took.contains(x)
        }
        check(odd.isEmpty, s"tap ${t.name} was offered ${odd.take(5)}; this step may offer ${offerable ++ ready}")
        t.checked = t.calls.size
      case null => ()
    untapped.foreach((t, n) => check(t.calls.size == n, s"untapped tap ${t.name} was offered ${t.calls.drop(n).take(5)}"))

  private def doError(): Unit =
    history += "error"
    ch.error(Boom)
    end(Boom)

  /** A cancel drops what the model holds; the first ending stays. */
  private def doCancel(): Unit =
    history += "cancel"
    ch.cancel()
    check(ch.closeCause == (if closed then Option(cause) else ch.closeCause) && (closed || ch.closeCause.exists(_.isInstanceOf[ChannelCancelledException])),
      s"closeCause after cancel: ${ch.closeCause}")
    end(ch.closeCause.orNull)
    // The cancel drains the channel as a reader would: a tap is offered each head on the way and
    // may take it (a reader at the moment of the cancel). What it took was one of the dropped
    // values, and one it takes.
    val dropped = queue.toList ++ parked.filter(_.accept).map(_.v)
    parked.foreach(expectSend(_, Sent)) // asked as a reader would; their values dropped with the rest
    parked.clear()
    tap match
      case t: TapProbe =>
        val taken = t.took.drop(t.expected.size).toList
        check(taken.forall(v => dropped.contains(v) && t.takes(v)), s"tap ${t.name} took $taken during a cancel that dropped $dropped")
        t.expected ++= taken
      case null => ()
    offerable = offerable ++ dropped.map(v => norm(Success(v)))
    queue.clear()

  private def doClose(): Unit =
    history += "close"
    ch.close()
    end(null)

  /** The model's end: the first one decides how it ended. */
  private def end(why: Throwable | Null): Unit =
    if !closed then
      cause = why
      closed = true
      waiting.foreach(expect(_, closedFailure))
      waiting.clear()

private object ChannelModelCheck:
  val Boom = IllegalStateException("boom")

  /** A result made comparable: failures compare by kind (exceptions have identity equality). */
  def norm(t: Try[Int]): Any = t match
    case Success(v)                         => v
    case Failure(e: ChannelClosedException) => if e.getCause == null then "closed" else s"closed by ${e.getCause.getClass.getSimpleName}"
    case Failure(e)                         => e.toString

  val Sent: Try[Unit] = Success(())

  /** How long a `send` or `read` the model says does not wait may take (it takes microseconds). */
  val NotBlockingBound: Long = 1000

  /** A send branch's result made comparable, as `norm`. */
  def normSend(t: Try[Unit]): Any = t match
    case Success(_)                         => "sent"
    case Failure(e: ChannelClosedException) => if e.getCause == null then "closed" else s"closed by ${e.getCause.getClass.getSimpleName}"
    case Failure(e)                         => e.toString

  /** A send branch's listener (`canSend(v)`'s, held in `source`): it records its calls and
    * accepts every one, or refuses every one (a select that won elsewhere).
    */
  final class SendProbe(val id: Int, val v: Int, val accept: Boolean, counter: Counter, val source: Async.Source[Try[Unit]])
      extends Listener[Try[Unit]]:
    val calls = mutable.ArrayBuffer.empty[Try[Unit]]
    val expected = mutable.ArrayBuffer.empty[Try[Unit]]
    def apply(t: Try[Unit]): Boolean =
      counter.count += 1
      calls += t
      accept

  def isClosedFailure(t: Try[?]): Boolean = t match
    case Failure(_: ChannelClosedException) => true
    case _                                  => false

  /** A listener that records its calls; `expected` is what the model says it should have got. */
  final class Counter:
    var count = 0

  /** A tap that takes every value (mode 0), only even ones (1), or none (2), and the closed
    * failure unless it takes none; it records every offer.
    */
  final class TapProbe(mode: Int) extends SegmentChannel.Tap[Int]:
    val name: String = Seq("taking all", "taking even", "refusing")(mode)
    def takes(v: Int): Boolean = mode == 0 || (mode == 1 && v % 2 == 0)
    val calls = mutable.ArrayBuffer.empty[Try[Int]]
    /** The values it took (not the closed failure), and the values the model says it takes. */
    val took = mutable.ArrayBuffer.empty[Int]
    val expected = mutable.ArrayBuffer.empty[Int]
    /** How many of `calls` the model has checked. */
    var checked = 0
    def apply(v: Try[Int]): Boolean =
      calls += v
      val yes = v.fold(_ => mode != 2, takes)
      if yes then v.foreach(took += _)
      yes

  final class Probe(val id: Int, accept: Boolean, counter: Counter) extends Listener[Try[Int]]:
    val calls = mutable.ArrayBuffer.empty[Try[Int]]
    val expected = mutable.ArrayBuffer.empty[Try[Int]]
    private var served = false
    def apply(v: Try[Int]): Boolean =
      counter.count += 1
      calls += v
      if accept && !served then { served = true; true } else false

// -------------------------------------------------------------------------------------------------
// Lincheck: linearizability under the model checker, which runs the threads of small scenarios
// through many interleavings of their shared-memory accesses.

/** The operations Lincheck calls on a real channel of capacity `cap`. Results are strings, so a
  * failure report reads as the operations did: "true", "none", "closed", a value.
  *
  * `trySend`, `tryRead` and `close` are Lincheck operations, drawn at random into scenarios; the
  * blocking `send` and `read` are not (a random scenario would block forever), and appear only in
  * the generated scenarios of [[LincheckScenarios]], which always terminate.
  */
@Param(name = "v", gen = classOf[IntGen], conf = "1:9")
abstract class LincheckChannel(cap: Int):
  private val ch = make[Int](cap)

  @Operation def trySend(v: Int): String =
    try ch.trySend(v).toString
    catch case _: ChannelClosedException => "closed"

  @Operation def tryRead(): String = LincheckChannel.show(ch.tryRead())

  @Operation def close(): Unit = ch.close()

  // Drawn only for LincheckEndingChannel (two more operations doubled the time of every check on a
  // loaded machine); the differential test above covers `error` and `cancel` on every kind.
  def error(): Unit = ch.error(LincheckChannel.Boom)

  def cancel(): Unit = ch.cancel()

  def send(v: Int): String =
    try
      Async.blocking(ch.send(v))
      "ok"
    catch case _: ChannelClosedException => "closed"

  def read(): String = LincheckChannel.show(Some(Async.blocking(ch.read())))

  @Validate def invariants(): Unit = segment(ch).checkInvariants()

object LincheckChannel:
  val Boom = IllegalStateException("boom")

  def show(r: Option[Try[Int]]): String = r match
    case None             => "none"
    case Some(Success(v)) => v.toString
    case Some(Failure(e: ChannelClosedException)) =>
      e.getCause match
        case null                        => "closed"
        case _: ChannelCancelledException => "cancelled"
        case _                           => "error"
    case Some(Failure(e)) => e.toString

class LincheckSyncChannel extends LincheckChannel(0)
/** A buffered(1) channel whose random scenarios also draw `error` and `cancel` (a test of its own,
  * with few scenarios: five operations make each one slower to explore).
  */
class LincheckEndingChannel extends LincheckChannel(1):
  @Operation override def error(): Unit = super.error()
  @Operation override def cancel(): Unit = super.cancel()
class LincheckBufferedChannel extends LincheckChannel(1)
class LincheckUnboundedChannel extends LincheckChannel(SegmentChannel.Unbounded):
  @Operation override def trySend(v: Int): String = super.trySend(v) // never refused: no room limit
  // `send` never blocks on an unbounded channel, so random scenarios may draw it too.
  @Operation override def send(v: Int): String = super.send(v)

/** The sequential specification: a FIFO queue and a closed flag.
  *
  * A `send` is linearized when its value joins the queue, whether it then waits or not: this is
  * what makes "a sender blocked at the close is still drained" linearizable. So the spec does not
  * bound the queue for `send` (the capacity is checked by the differential test); `trySend` is
  * bounded (a rendezvous channel refuses it: the spec has no waiting readers, so blocking
  * scenarios on a rendezvous channel do not use it). A `read` of an empty open queue cannot be
  * linearized there ("blocked" never matches a result).
  */
abstract class ChannelSpec(val capacity: Int):
  private var state = ChannelSpec.Start
  private def run(op: String, arg: Int = 0): String =
    val (result, next) = ChannelSpec.step(capacity, state, op, arg)
    state = next
    result
  def trySend(v: Int): String = run("trySend", v)
  def tryRead(): String = run("tryRead")
  def close(): Unit = run("close")
  def error(): Unit = run("error")
  def cancel(): Unit = run("cancel")
  def send(v: Int): String = run("send", v)
  def read(): String = run("read")

object ChannelSpec:
  /** `ending`: null while open, else what a drained read shows: "closed", "error", "cancelled". */
  final case class State(queue: Vector[Int], ending: String | Null):
    def closed: Boolean = ending != null
  val Start: State = State(Vector.empty, null)

  /** One operation on the model: its result as the real operation shows it, and the next state. */
  def step(cap: Int, s: State, op: String, arg: Int): (String, State) = op match
    case "trySend" =>
      if s.closed then ("closed", s)
      else if cap == SegmentChannel.Unbounded || s.queue.size < cap then ("true", s.copy(queue = s.queue :+ arg))
      else ("false", s)
    case "send" => if s.closed then ("closed", s) else ("ok", s.copy(queue = s.queue :+ arg))
    case "tryRead" | "read" =>
      if s.queue.nonEmpty then (s.queue.head.toString, s.copy(queue = s.queue.tail))
      else if s.closed then (s.ending.nn, s)
      else (if op == "read" then "blocked" else "none", s)
    // The first ending stays; a cancel drops the queue whatever ended the channel.
    case "close"  => ("void", if s.closed then s else s.copy(ending = "closed"))
    case "error"  => ("void", if s.closed then s else s.copy(ending = "error"))
    case "cancel" => ("void", State(Vector.empty, if s.closed then s.ending else "cancelled"))
    case other   => (s"unknown operation $other", s)

class SyncChannelSpec extends ChannelSpec(0)
class BufferedChannelSpec extends ChannelSpec(1)
class UnboundedChannelSpec extends ChannelSpec(SegmentChannel.Unbounded)

/** Linearizability against [[ChannelSpec]], relaxed as the facade allows: in the parallel part
  * of a scenario (where operations may contend), a `trySend` that returned "false" or a
  * `tryRead` that returned "none" may also be a spurious failure, which changes nothing. The
  * initial and final sequential parts must match the spec exactly, and so must every other result
  * (a lost or duplicated value, a wrong order, a failure without contention all fail the check).
  * The search tries every order of the parallel operations that respects their real-time order
  * (Lincheck's happens-before clocks), with the spec's state alongside.
  */
class SpuriousTryVerifier(sequentialSpecification: Class[?]) extends Verifier:
  private val cap = sequentialSpecification.getDeclaredConstructor().newInstance().asInstanceOf[ChannelSpec].capacity

  private def shown(r: LincheckResult): String = r match
    case v: ValueResult => String.valueOf(v.getValue)
    case _: VoidResult  => "void"
    case other          => other.toString // an exception: matches nothing

  private def op(a: Actor): (String, Int) =
    (a.getMethod.getName, if a.getArguments.isEmpty then 0 else a.getArguments.get(0).asInstanceOf[Int])

  /** Runs a sequential part exactly; None if a result differs from the spec's. */
  private def sequential(s0: ChannelSpec.State, actors: java.util.List[Actor], results: java.util.List[? <: LincheckResult]): Option[ChannelSpec.State] =
    var s = s0
    var i = 0
    while i < actors.size do
      val (name, arg) = op(actors.get(i))
      val (expected, next) = ChannelSpec.step(cap, s, name, arg)
      if expected != shown(results.get(i)) then return None
      s = next
      i += 1
    Some(s)

  def verifyResults(scenario: ExecutionScenario, results: ExecutionResult): Boolean =
    val threads = scenario.getParallelExecution
    val n = threads.size
    val par = results.getParallelResultsWithClock
    val seen = mutable.HashSet.empty[(List[Int], ChannelSpec.State)]
    def search(pos: Array[Int], s: ChannelSpec.State): Boolean =
      if (0 until n).forall(t => pos(t) == threads.get(t).size) then
        sequential(s, scenario.getPostExecution, results.getPostResults).isDefined
      else if !seen.add((pos.toList, s)) then false
      else
        (0 until n).exists { t =>
          val i = pos(t)
          i < threads.get(t).size && {
            val clock = par.get(t).get(i).getClockOnStart
            (0 until n).forall(u => u == t || pos(u) >= clock.get(u)) && {
              val (name, arg) = op(threads.get(t).get(i))
              val actual = shown(par.get(t).get(i).getResult)
              val (expected, next) = ChannelSpec.step(cap, s, name, arg)
              val spurious = (name == "trySend" && actual == "false") || (name == "tryRead" && actual == "none")
              pos(t) += 1
              val ok = (expected == actual && search(pos, next)) || (spurious && expected != actual && search(pos, s))
              pos(t) -= 1
              ok
            }
          }
        }
    sequential(ChannelSpec.Start, scenario.getInitExecution, results.getInitResults)
      .exists(search(Array.fill(n)(0), _))

/** Random scenarios with blocking operations that end in every interleaving. Each thread has
  * one role, sender (`send`, `trySend`) or reader (`read`, `tryRead`):
  *   - without `close`: as many reads as sends, and no `try` operations (a `tryRead` could take
  *     the value a `read` waits for, a refused `trySend` would leave a `read` waiting);
  *   - with `close`, at the end of a sender thread: at least as many `read`s as values sent or
  *     try-sent, so every blocked sender is drained (it was blocked at the close) and the reads
  *     left over end as "closed".
  * A rendezvous channel gets no `trySend` (the spec has no waiting readers to hand it to).
  */
object LincheckScenarios:
  private def method(cls: Class[?], name: String): java.lang.reflect.Method =
    cls.getMethods.find(m => m.getName == name).getOrElse(throw NoSuchMethodException(s"${cls.getName}.$name"))

  /** A scenario of the given threads, each a list of (operation, argument or 0), drained after. */
  def of(cls: Class[?], threads: Seq[(String, Int)]*): ExecutionScenario =
    def actor(name: String, arg: Int): Actor =
      val m = method(cls, name)
      Actor(m, if m.getParameterCount == 0 then java.util.List.of() else java.util.List.of(Int.box(arg)))
    val parallel = threads.map(t => java.util.List.of(t.map(actor.tupled)*))
    val post = java.util.List.of(actor("tryRead", 0), actor("tryRead", 0), actor("tryRead", 0))
    ExecutionScenario(java.util.List.of(), java.util.List.of(parallel*), post, null)

  /** Scenarios that once failed, always explored. */
  def regressions(cls: Class[?], cap: Int): Seq[ExecutionScenario] =
    if cap == 0 then Seq()
    else Seq(
      // a value try-sent just before a close, with a concurrent tryRead that failed: was it lost?
      of(cls, Seq("trySend" -> 1, "close" -> 0), Seq("tryRead" -> 0, "read" -> 0), Seq("send" -> 2))
    )

  def random(cls: Class[?], cap: Int, rnd: Random): ExecutionScenario =
    def actor(name: String, args: Int*): Actor =
      Actor(method(cls, name), java.util.List.of(args.map(Int.box)*))
    val threads = 2 + rnd.nextInt(2)
    val withClose = rnd.nextBoolean()
    val senders = 0 +: (if threads == 3 && rnd.nextBoolean() then Seq(2) else Seq())
    val readers = (0 until threads).filterNot(senders.contains)
    val ops = Array.fill(threads)(mutable.ArrayBuffer.empty[Actor])
    var nextValue = 1
    var values = 0
    var reads = 0
    def send(t: Int, tryIt: Boolean): Unit =
      ops(t) += actor(if tryIt then "trySend" else "send", nextValue)
      nextValue += 1
      values += 1
    def read(t: Int, tryIt: Boolean): Unit =
      ops(t) += actor(if tryIt then "tryRead" else "read")
      if !tryIt then reads += 1
    for t <- senders; _ <- 0 until 1 + rnd.nextInt(2) do send(t, withClose && cap != 0 && rnd.nextInt(3) == 0)
    for t <- readers; _ <- 0 until 1 + rnd.nextInt(2) do read(t, withClose && rnd.nextInt(3) == 0)
    if withClose then
      while reads < values do read(readers(rnd.nextInt(readers.size)), false)
      ops(senders(rnd.nextInt(senders.size))) += actor("close")
    else
      while reads < values do read(readers(rnd.nextInt(readers.size)), false)
      while values < reads do send(senders(rnd.nextInt(senders.size)), false)
    val post = java.util.List.of(actor("tryRead"), actor("tryRead"), actor("tryRead"))
    ExecutionScenario(java.util.List.of(), java.util.List.of(ops.toSeq.map(b => java.util.List.of(b.toSeq*))*), post, null)
