package asyncpipe.async

import scala.collection.mutable
import scala.util.Random
import munit.{Assertions, Location}
import ChannelStress.{Factor, seedFrom}

/** Semaphore checked against a naive sequential model (issue 40).
  *
  * On one thread, random sequences of operations run on a real semaphore and on a model: a count of
  * free permits and the listeners registered, in order. Every result is compared, and after every
  * operation the free permits, the registered listeners, what each listener took, and
  * `checkInvariants()`. Operations: `tryAcquire`; `release` (refused with the counts when every
  * permit is free, changing nothing; otherwise to the first accepting listener registered, or to
  * the free permits); `acquireSource.onComplete` of a listener that accepts (served at once if a
  * permit is free, else in order) or refuses (registered, never served) and `dropListener` of one;
  * `acquireSource.poll` with an accepting listener, a refusing one, `poll()`, and
  * `filter(_ => false).poll()`; `acquire` and `withPermit` where the model says a permit is free;
  * and `Permit.release`. Without contention nothing is spurious, so the model is exact.
  * Sizes: permits 1, 2, 3 and 5; 300 sequences each (times `ASYNCPIPE_STRESS`), up to 250
  * operations long.
  */
class SemaphoreModelCheck extends munit.FunSuite, Watchdog:
  given Runtime = Runtime.VirtualThreads

  for permits <- Seq(1, 2, 3, 5) do
    test(s"differential: Semaphore($permits) agrees with a sequential model on random operation sequences"):
      val seed = seedFrom(s"semaphore model $permits")
      val rnd = Random(seed)
      for n <- 0 until 300 * Factor do
        SemaphoreDifferential(permits, seed, n, Random(rnd.nextLong())).run(1 + rnd.nextInt(250))

/** One random sequence on a fresh semaphore and a fresh model. */
private final class SemaphoreDifferential(permits: Int, seed: Long, sequence: Int, rnd: Random):
  private val sem = Semaphore(permits)
  /** The model: free permits, and the listeners registered, in order. */
  private var free = permits
  private val registered = mutable.ArrayBuffer.empty[Probe]
  private val probes = mutable.ArrayBuffer.empty[Probe]
  private val log = mutable.ArrayBuffer.empty[String]

  /** A listener that accepts or refuses every offer, and counts the permits it took; `expected`
    * is what the model says it took.
    */
  private final class Probe(val id: Int, val accepts: Boolean) extends Listener[Semaphore.Permit]:
    var took = 0
    var expected = 0
    def apply(p: Semaphore.Permit): Boolean =
      if p ne sem.permit then fail(s"probe $id was offered $p, not this semaphore's permit")
      if accepts then took += 1
      accepts
    override def toString: String = s"probe $id (${if accepts then "accepts" else "refuses"})"

  private def probe(accepts: Boolean): Probe =
    val p = Probe(probes.size, accepts)
    probes += p
    p

  private def fail(message: String)(using Location): Nothing =
    Assertions.fail(s"seed $seed, sequence $sequence, after ${log.size} operations: $message\n" +
      s"model: $free of $permits free, registered ${registered.mkString("[", ", ", "]")}\nreal: $sem\n" +
      s"operations:\n  ${log.takeRight(40).mkString("\n  ")}")

  private def check(ok: Boolean, message: => String)(using Location): Unit = if !ok then fail(message)

  /** The model's release: to the first accepting listener registered, or to the free permits. */
  private def modelRelease(): Unit =
    registered.indexWhere(_.accepts) match
      case -1 => free += 1
      case i  => registered.remove(i).expected += 1

  def run(length: Int): Unit =
    Async.blocking:
      for _ <- 0 until length do
        step()
        sem.checkInvariants()
        check(sem.available == free, s"available is ${sem.available}, model says $free")
        check(sem.waitingCount == registered.size, s"${sem.waitingCount} listeners registered, model says ${registered.size}")
        probes.foreach(p => check(p.took == p.expected, s"$p took ${p.took} permits, model says ${p.expected}"))

  private def step()(using Async): Unit =
    rnd.nextInt(13) match
      case 0 | 1 =>
        log += "tryAcquire"
        val got = sem.tryAcquire()
        check(got == (free > 0), s"tryAcquire gave $got with $free free")
        if got then free -= 1
      case 2 | 3 =>
        log += "release"
        if free == permits then
          val e = Assertions.intercept[IllegalStateException](sem.release())
          check(e.getMessage.contains(s"all $permits of $permits permits free"), s"the refused release says '${e.getMessage}'")
        else
          sem.release()
          modelRelease()
      case 4 =>
        log += "permit.release"
        if free < permits then
          sem.permit.release()
          modelRelease()
      case 5 =>
        val p = probe(accepts = true)
        log += s"onComplete($p)"
        sem.acquireSource.onComplete(p)
        if free > 0 then
          free -= 1
          p.expected += 1
        else registered += p
      case 6 =>
        val p = probe(accepts = false)
        log += s"onComplete($p)"
        sem.acquireSource.onComplete(p)
        registered += p
      case 7 =>
        if registered.nonEmpty then
          val p = registered.remove(rnd.nextInt(registered.size))
          log += s"dropListener($p)"
          sem.acquireSource.dropListener(p)
      case 8 =>
        val accepts = rnd.nextBoolean()
        val p = probe(accepts)
        log += s"poll($p)"
        val got = sem.acquireSource.poll(p)
        check(got == (accepts && free > 0), s"poll($p) gave $got with $free free")
        if got then
          free -= 1
          p.expected += 1
      case 9 =>
        log += "poll()"
        val got = sem.acquireSource.poll()
        check(got == (if free > 0 then Some(sem.permit) else None), s"poll() gave $got with $free free")
        if got.nonEmpty then free -= 1
      case 10 =>
        log += "filter(_ => false).poll()"
        val got = sem.acquireSource.filter(_ => false).poll()
        check(got.isEmpty, s"a refusing filter's poll() gave $got")
      case 11 =>
        if free > 0 then
          log += "acquire"
          sem.acquire()
          free -= 1
      case _ =>
        if free > 0 then
          log += "withPermit"
          val inside = sem.withPermit(sem.available)
          check(inside == free - 1, s"inside withPermit $inside were free, model says ${free - 1}")
