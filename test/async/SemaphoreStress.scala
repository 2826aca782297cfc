package asyncpipe.async

import java.util.concurrent.{CancellationException, ConcurrentLinkedQueue, CountDownLatch, TimeUnit}
import java.util.concurrent.atomic.{AtomicInteger, AtomicLong, AtomicLongArray, AtomicReferenceArray}
import java.util.concurrent.locks.LockSupport
import scala.collection.mutable
import scala.jdk.CollectionConverters.*
import scala.util.{Failure, Random, Success, Try}
import munit.{Assertions, Location}
import Support.*
import ChannelStress.{Factor, seedFrom}

/** Semaphore stress: exactly once under races and random cancels (issue 40).
  *
  * Four actors each take permits `Rounds` times (more while a branch has not won yet) from two
  * semaphores, `a` (2 permits) and `b` (1), mostly through `Async.race` of `a.acquireSource`,
  * `b.acquireSource` and a channel's `canRead` (fed by a sender without end), hold what they won
  * (sometimes across a `sleep(0)`, where a cancel may end them holding it: their `finally` gives it
  * back) and release it; a canceller cancels the actors' futures at random, mostly while they wait.
  * A cancelled actor carries on in a new future.
  * Then:
  *   - no more than `permits` actors ever held a permit of one semaphore at once (a permit taken
  *     twice), and no release was refused (more releases than acquires: a permit handed twice);
  *   - every permit is free again, and no listener is left registered (a losing branch, or a
  *     cancelled wait, that took a permit or stayed behind);
  *   - every value the sender sent was read exactly once (a losing channel branch takes nothing);
  *   - each of the three branches won sometimes, and some cancels landed: the test tested.
  * Modes: a flat race of the three; a nested race `race(race(a, ch), b)`; and a mix of those with
  * `acquire`, `withPermit`, `tryAcquire` and `Async.either(a, b)`. Sizes scale with
  * `ASYNCPIPE_STRESS` (a multiplier, default 1: a few seconds per runtime); `ASYNCPIPE_SEED`
  * replays the random choices (not the thread schedule).
  */
abstract class SemaphoreStress(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime
  import SemaphoreStress.*

  override def watchdog = scala.concurrent.duration.Duration(30L * Factor, TimeUnit.SECONDS)
  override def munitTimeout = watchdog + scala.concurrent.duration.Duration(10, TimeUnit.SECONDS)

  private val Actors = 4
  private val Rounds = 1500 * Factor
  /** The rounds an actor may go on making while some branch has never won (see `Run.more`). */
  private val MaxRounds = Rounds * 20

  for mode <- Mode.values do
    test(s"exactly once under random cancels: $Actors actors, ${mode.describe}"):
      val seed = seedFrom(s"semaphore $mode")
      val run = Run(mode, seed)
      Async.blocking:
        val sender = Future:
          var v = 0L
          try
            while true do
              run.ch.send(v)
              run.sent.add(v)
              v += 1
          catch case _: ChannelClosedException => ()
        val actors = (0 until Actors).map(slot => run.supervise(slot))
        run.cancelWhile(!actors.forall(_.isCompleted))
        actors.foreach(f => resultWithin(f, s"${run.where}: an actor") match
          case Failure(e) => Assertions.fail(s"${run.where}: an actor failed: $e", e)
          case _          => ())
        run.ch.close()
        var open = true
        while open do
          run.ch.read() match
            case Success(v) => run.received.add(v)
            case Failure(_) => open = false
        resultWithin(sender, s"${run.where}: the sender")
      val stats = run.verify()
      if Factor > 1 || sys.env.contains("ASYNCPIPE_STATS") then println(s"${getClass.getSimpleName}: ${run.where}: $stats")

  /** One run: the semaphores, the channel, the actors' records, the canceller. */
  private final class Run(mode: Mode, seed: Long):
    val where = s"${mode.describe}, seed $seed"
    val a = Semaphore(2)
    val b = Semaphore(1)
    val ch = BufferedChannel[Long](2)
    val sent = ConcurrentLinkedQueue[Long]()
    val received = ConcurrentLinkedQueue[Long]()
    private val inside = Map(a -> AtomicInteger(0), b -> AtomicInteger(0))
    private val errors = ConcurrentLinkedQueue[String]()
    /** Wins of a, b and the channel. */
    private val wins = AtomicLongArray(3)
    private val epochs = AtomicReferenceArray[Epoch](Actors)
    private val progress = AtomicLong()
    private val cancels = AtomicLong()

    /** Whether an actor that has made `done` rounds makes another: until `Rounds`, and on (up to
      * `MaxRounds`) while a, b or the channel has never won a race. When the actors take every
      * value as it comes, the channel is empty at each poll and loses to the semaphores listed
      * before it, which happened once in a loaded run of the whole suite.
      */
    private def more(done: Int): Boolean =
      done < Rounds || (done < MaxRounds && (0 until 3).exists(wins.get(_) == 0))

    /** Runs actor `slot` in a fresh future, epoch after epoch, until it has made its rounds; a
      * cancel ends only the current epoch, and the next starts once the last one's body has ended.
      */
    def supervise(slot: Int)(using Async): Future[Unit] = Future:
      val rnd = Random(seed * 31 + slot)
      var done = 0 // rounds made, carried from epoch to epoch
      while more(done) do
        val epoch = Epoch()
        epoch.future = Future:
          try
            epoch.thread = Thread.currentThread // from here on, the canceller may cancel it
            while more(done) do
              step(rnd)
              done += 1
              progress.incrementAndGet()
          catch
            case _: CancellationException => ()
            case e: Throwable =>
              errors.add(s"actor $slot died: $e\n    ${e.getStackTrace.take(12).mkString("\n    ")}")
              done = MaxRounds
          finally epoch.ended.countDown()
        epochs.set(slot, epoch)
        if !epoch.ended.await(Patience * 4, TimeUnit.MILLISECONDS) then
          errors.add(s"actor $slot: an epoch did not end")
          done = MaxRounds
      epochs.set(slot, null)

    private def step(rnd: Random)(using Async): Unit = mode match
      case Mode.Flat   => take(flat, rnd)
      case Mode.Nested => take(nested, rnd)
      case Mode.Mixed =>
        rnd.nextInt(6) match
          case 0 => take(flat, rnd)
          case 1 => take(nested, rnd)
          case 2 => a.withPermit(counted(a, rnd))
          case 3 =>
            b.acquire()
            hold(b, rnd)
          case 4 => take(Async.either(a.acquireSource, b.acquireSource).map(_.fold(_.semaphore, _.semaphore)), rnd)
          case _ => if a.tryAcquire() then hold(a, rnd)

    private def flat: Async.Source[Semaphore | Try[Long]] =
      Async.race(a.acquireSource.map(_.semaphore), b.acquireSource.map(_.semaphore), ch.canRead)
    private def nested: Async.Source[Semaphore | Try[Long]] =
      Async.race(Async.race[Semaphore | Try[Long]](a.acquireSource.map(_.semaphore), ch.canRead), b.acquireSource.map(_.semaphore))

    /** Awaits `src` and acts on what it won: holds a permit (and gives it back), or keeps a value. */
    private def take(src: Async.Source[Semaphore | Try[Long]], rnd: Random)(using Async): Unit =
      src.await match
        case s: Semaphore =>
          wins.incrementAndGet(if s eq a then 0 else 1)
          hold(s, rnd)
        case Success(v: Long) =>
          wins.incrementAndGet(2)
          received.add(v)
        case other => errors.add(s"the race gave $other")

    /** Holds a permit of `s` that the caller has taken, then gives it back, also when cancelled. */
    private def hold(s: Semaphore, rnd: Random)(using Async): Unit =
      try counted(s, rnd)
      finally s.release()

    /** Counts this actor among the holders of `s` while it holds (sometimes across a sleep). */
    private def counted(s: Semaphore, rnd: Random)(using Async): Unit =
      val holders = inside(s).incrementAndGet()
      if holders > s.permits then errors.add(s"$holders actors held a permit of $s at once")
      try if rnd.nextInt(3) == 0 then sleep(0)
      finally inside(s).decrementAndGet()

    /** Cancels random epochs while `cond` holds: mostly ones blocked, sometimes any. Pacing by a
      * short random park is not synchronisation: it only spreads the cancels.
      */
    def cancelWhile(cond: => Boolean)(using Location): Unit =
      val rnd = Random(seed)
      var lastProgress = progress.get
      var lastChange = System.nanoTime()
      while cond do
        val epoch = epochs.get(rnd.nextInt(Actors))
        val t = if epoch == null then null else epoch.thread
        if t != null && !epoch.future.isCompleted && (t.getState == Thread.State.WAITING || rnd.nextInt(8) == 0) then
          epoch.future.cancel()
          cancels.incrementAndGet()
        LockSupport.parkNanos(rnd.between(5_000, 100_000))
        val p = progress.get
        if p != lastProgress then
          lastProgress = p
          lastChange = System.nanoTime()
        else if millisSince(lastChange) > Patience then
          val message = s"$where: no progress for $Patience ms; $a; $b; errors ${errors.asScala.take(5).mkString("; ")}"
          System.err.println(message)
          Assertions.fail(message)

    /** Checks the run; returns a line of statistics. */
    def verify()(using Location): String =
      val problems = mutable.ArrayBuffer.from(errors.asScala.take(20))
      for s <- Seq(a, b) do
        s.checkInvariants()
        if s.available != s.permits then problems += s"a permit was lost: $s"
        if s.waitingCount != 0 then problems += s"listeners left registered: $s"
      val got = received.asScala.toVector
      val dup = got.groupBy(identity).collect { case (v, vs) if vs.size > 1 => v }
      if dup.nonEmpty then problems += s"values read twice: ${dup.take(10).mkString(", ")}"
      val missing = sent.asScala.toSet -- got
      if missing.nonEmpty then problems += s"values sent and never read: ${missing.take(10).mkString(", ")}"
      val extra = got.toSet -- sent.asScala.toSet
      if extra.nonEmpty then problems += s"values read and never sent: ${extra.take(10).mkString(", ")}"
      for (name, i) <- Seq("a", "b", "the channel").zipWithIndex do
        if wins.get(i) == 0 then problems += s"$name never won a race: the test did not test it"
      if cancels.get == 0 then problems += "the canceller cancelled nothing: the test did not test cancellation"
      if problems.nonEmpty then Assertions.fail(s"$where:\n  ${problems.mkString("\n  ")}")
      s"wins a ${wins.get(0)}, b ${wins.get(1)}, channel ${wins.get(2)}; ${cancels.get} cancels; ${got.size} values"

object SemaphoreStress:
  enum Mode:
    case Flat, Nested, Mixed
    def describe: String = this match
      case Flat   => "race(a, b, channel)"
      case Nested => "race(race(a, channel), b)"
      case Mixed  => "races, acquire, withPermit, tryAcquire, either(a, b)"

  /** One future of an actor: `thread` is set once its body runs. */
  final class Epoch:
    @volatile var future: Future[Unit] = null
    @volatile var thread: Thread = null
    val ended = CountDownLatch(1)

class SemaphoreStressOnVirtualThreads extends SemaphoreStress(Runtime.VirtualThreads)
class SemaphoreStressOnPlatformThreads extends SemaphoreStress(Runtime.PlatformThreads)
