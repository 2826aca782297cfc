package asyncpipe.async

import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.atomic.AtomicInteger

/** A counting semaphore: `permits` permits, taken by `acquire` and given back by `release`.
  *
  * ==Operations==
  *   - `acquire()` takes a permit, blocking (parking the thread) while none is free; `tryAcquire()`
  *     takes one only if one is free now; `withPermit(body)` runs `body` holding a permit and gives
  *     it back however `body` ends.
  *   - `release()` gives a permit back; a waiting acquirer, if any, takes it.
  *   - `acquireSource` is the acquire as an [[Async.Source]] of [[Semaphore.Permit]]s, for races:
  *     `Async.either(sem.acquireSource, jobs.canRead)` takes a permit or a job, never both. A
  *     permit is taken exactly once, by the one listener that accepts it (doc/adr/0003): a
  *     listener that refuses (a losing branch of a race, a filter) takes nothing, and the permit
  *     goes to the next waiting listener, or back to the free ones.
  *
  * ==Blocking and cancellation==
  * A blocked `acquire` is an `Async.await` of `acquireSource`: a cancel of its future (or an
  * interrupt of its thread) ends the wait with `CancellationException` having taken no permit,
  * and the permit it would have had goes to the next waiter. If a permit reached the acquire
  * first, the acquire returns normally, holding it (the cancel takes effect at the next await):
  * no permit is lost either way. In a cancelled scope `acquire` throws at once, taking nothing.
  *
  * ==Order==
  * Waiting listeners are offered permits in the order they registered. Not strictly fair: an
  * acquire that comes while a released permit is on its way to a waiter may take it first (as
  * `java.util.concurrent.Semaphore` without fairness).
  *
  * ==Too many releases==
  * A release that would make more permits free than the semaphore has (more releases than
  * acquires) throws `IllegalStateException` naming the counts, and changes nothing. Counts are
  * all a semaphore knows: a release by a thread that holds no permit while another holds one is
  * not seen. A permit on its way to a listener counts as taken until the listener refuses it.
  *
  * {{{
  * val connections = Semaphore(4)
  * Async.blocking:
  *   val pages = urls.map(url => Future(connections.withPermit(fetch(url)))) // at most 4 fetch at once
  *   Async.await(Async.either(connections.acquireSource, cancelled.canRead)) match
  *     case Left(permit) => try cleanUp() finally permit.release()
  *     case Right(_)     => () // no permit was taken
  * }}}
  *
  * @throws IllegalArgumentException if `permits` is not above zero
  */
final class Semaphore(val permits: Int):
  import Semaphore.*

  check(permits > 0, s"a semaphore's permits was $permits, must be > 0")

  /** The free permits, `0 <= free <= permits`; a permit reserved for an offer in flight is not free. */
  private val free = AtomicInteger(permits)
  /** Listeners waiting for a permit (`acquireSource.onComplete`), in registration order. */
  private val waiting = ConcurrentLinkedQueue[Listener[Permit]]()
  /** Requests to hand permits to `waiting`: the thread that raises it from 0 hands them out, and
    * goes on while others asked meanwhile (see `pump`).
    */
  private val pumps = AtomicInteger(0)

  /** The one permit value this semaphore hands to the listeners of `acquireSource`. */
  val permit: Permit = Permit(this)

  /** The permits free now. */
  def available: Int = free.get

  /** Takes a permit if one is free now; never blocks. */
  def tryAcquire(): Boolean = reserve()

  /** Takes a permit, blocking while none is free (see Blocking and cancellation above).
    * @throws java.util.concurrent.CancellationException if cancelled before or while waiting;
    *   no permit was taken
    */
  def acquire()(using async: Async): Unit =
    Async.checkCancelled(async, "acquiring a permit")
    if !reserve() then Async.await(acquireSource)

  /** Gives a permit back: to the first waiting listener that accepts it, or to the free ones.
    * @throws IllegalStateException if every permit is free already (more releases than acquires)
    */
  def release(): Unit =
    var f = free.get
    while true do
      if f >= permits then
        throw IllegalStateException(s"release() with all $f of $permits permits free: more releases than acquires")
      if free.compareAndSet(f, f + 1) then
        pump()
        return
      f = free.get // else: CAS unsuccessful (an acquire or another release), repeat

  /** Runs `body` holding a permit, and gives the permit back however `body` ends:
    * {{{
    * val db = Semaphore(8)
    * Async.blocking:
    *   val rows = mapPar(32)(ids)(id => db.withPermit(query(id))) // 32 workers, 8 queries at most
    * }}}
    * @throws java.util.concurrent.CancellationException if cancelled while waiting for the permit;
    *   `body` did not run, and no permit was taken
    */
  def withPermit[T](body: => T)(using Async): T =
    acquire()
    try body
    finally release()

  /** A permit as a source, for races and listeners (see the class doc):
    * {{{
    * Async.blocking:
    *   Async.await(Async.race(pool.acquireSource.map(Some(_)), Timer(1.second).map(_ => None))) match
    *     case Some(permit) => try work() finally permit.release()
    *     case None         => println("no permit within a second") // and none was taken
    * }}}
    */
  val acquireSource: Async.Source[Permit] = new Async.OriginalSource[Permit]:
    def poll(k: Listener[Permit]): Boolean =
      reserve() && {
        val took =
          try k(permit)
          catch
            case e: Throwable =>
              giveBack()
              throw e
        if !took then giveBack()
        took
      }
    def onComplete(k: Listener[Permit]): Unit =
      waiting.add(k)
      pump() // a free permit goes to it at once, unless listeners before it take it
    def dropListener(k: Listener[Permit]): Unit = waiting.remove(k)
    override def toString: String = s"acquireSource of ${Semaphore.this}"

  // ---------------------------------------------------------------------------------------------
  // Permits in flight

  /** Takes a free permit: for the caller, or for an offer to a listener (then `giveBack` if it is
    * refused). False if none is free.
    */
  private def reserve(): Boolean =
    var f = free.get
    while f > 0 do
      if free.compareAndSet(f, f - 1) then return true
      f = free.get // else: CAS unsuccessful, repeat
    false

  /** Returns a reserved permit that a listener refused, and hands it on to a waiting listener. */
  private def giveBack(): Unit =
    returnReserved()
    pump()

  /** Returns a reserved permit to the free ones. A release that came while the permit was on its
    * way (one more than the acquires, and not seen as such: the permit counted as taken) has made
    * every permit free already: then the returned permit is dropped, so `free <= permits` holds.
    */
  private def returnReserved(): Unit =
    var f = free.get
    while f < permits && !free.compareAndSet(f, f + 1) do f = free.get // else: CAS unsuccessful, repeat

  /** Hands free permits to the waiting listeners, one pass per request, by one thread at a time (a
    * drain loop: whoever raises `pumps` from 0 delivers, and delivers again while other threads
    * asked meanwhile; they return at once). Listeners are called outside any lock, and no thread
    * ever waits for the delivering one. Every change that may let a listener take a permit asks:
    * a permit freed (release, a refused offer) and a listener registered. A release that sees no
    * listener waiting asks nothing; the write of `free` before the read of `waiting` there, and the
    * write of `waiting` before the read of `free` in a registration's pass, make one of the two
    * see the other.
    */
  private def pump(): Unit =
    if waiting.isEmpty || pumps.getAndIncrement() != 0 then return
    var failure: Throwable | Null = null
    var missed = 1
    while missed != 0 do
      val f = deliver()
      if failure == null then failure = f
      missed = pumps.addAndGet(-missed)
    if failure != null then throw failure

  /** One pass: while a listener waits and a permit is free, offers a reserved permit to the waiting
    * listeners in order until one takes it (it is then removed); a listener that is done is
    * removed unasked, one that refuses stays. If none takes it, the permit goes back and the pass
    * ends. A listener that throws is removed and counts as a refusal; the first such exception is
    * returned, for `pump` to rethrow once the semaphore is consistent.
    */
  private def deliver(): Throwable | Null =
    var failure: Throwable | Null = null
    var more = true
    while more && !waiting.isEmpty do
      if !reserve() then more = false
      else
        var taken = false
        val it = waiting.iterator()
        while !taken && it.hasNext do
          val k = it.next()
          if k.isDone then it.remove() // satisfied or abandoned: forget it
          else
            val took =
              try k(permit)
              catch
                case e: Throwable =>
                  if failure == null then failure = e
                  it.remove()
                  false
            if took then
              it.remove()
              taken = true
        if !taken then
          returnReserved() // nobody wants it now; a listener registering later asks again
          more = false
    failure

  // ---------------------------------------------------------------------------------------------
  // Debug

  /** Listeners registered now (for tests and diagnostics). */
  private[async] def waitingCount: Int = waiting.size

  /** Throws `IllegalStateException` with the state if a count is out of range. Exact when quiet
    * (no operation in flight): then `available` is the permits that no one holds.
    */
  private[async] def checkInvariants(): Unit =
    val f = free.get
    if f < 0 || f > permits then throw IllegalStateException(s"free permits out of range: $this")

  override def toString: String = s"Semaphore(${free.get} of $permits permits free, ${waiting.size} listeners waiting)"

object Semaphore:
  /** What `acquireSource` delivers: a permit of `semaphore`, held by whoever took it. */
  final class Permit private[Semaphore] (val semaphore: Semaphore):
    /** `semaphore.release()`. */
    def release(): Unit = semaphore.release()
    override def toString: String = s"a permit of $semaphore"
