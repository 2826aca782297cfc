package asyncpipe.async

import scala.concurrent.duration.FiniteDuration

/** One branch of a select ([[Async.select]]): a source, and what to do with its value. Made with
  * `source.handle(f)`:
  * {{{
  * Async.select(
  *   requests.canRead.handle(r => serve(r.get)),
  *   shutdown.handle(_ => "stopping")
  * )
  * }}}
  */
final class SelectCase[+R] private[async] (private[async] val source: Async.Source[Any], private[async] val handler: Any => R):
  /** The handler, on the winning value (the select's thread). */
  private[async] def run(v: Any): R = handler(v)
  /** The branch as a source of its handler's run, for a race that waits (made only then). */
  private[async] def runs: Async.Source[() => R] = Select.runs(source, handler)
  /** Cancels the branch's source if it is a timer made for one select (`Async.after`). */
  private[async] def cancelTimer(): Unit = Select.cancelTimer(source)

extension [T](src: Async.Source[T])
  /** A branch of a select: `f` runs with the value, on the selecting thread, once this branch won
    * (only the winner's value is taken: the other sources keep theirs).
    */
  def handle[R](f: T => R): SelectCase[R] =
    // f is only ever applied to values of src: the cast forgets T, which a Seq of branches cannot keep
    SelectCase[R](src, f.asInstanceOf[Any => R])

/** A timer made for one select (`Async.after`): the select cancels it when another branch wins. A
  * timer made with `Timer(d)` is the caller's (a deadline shared by the selects of a loop must not
  * be cancelled by the first of them).
  */
private[async] final class SelectTimer(millis: Long) extends Timer(millis)

private[async] object Select:
  /** A select first polls its branches in order, as the race it awaits would (`Async.race`'s poll
    * is the first ready source, in order), with one listener that takes what it is offered: when a
    * branch is ready, as in a busy loop, that is all, and nothing else is made (no race, mapped
    * sources, forwarders or waiter). Only when none is ready, and none again after a yield
    * ([[yieldOnce]]), does it await the race of them all, whose registration with every branch
    * looks at each again.
    */
  def select[R](branches: Seq[SelectCase[R]])(using async: Async): R =
    try
      Async.checkCancelled(async, "awaiting") // as the await would, before taking anything
      val taker = Listener.Taker[Any]()
      var ready = firstReady(branches, taker)
      if ready == null then
        yieldOnce(async)
        ready = firstReady(branches, taker)
      if ready != null then return ready.run(taker.value)
      Async.awaitWith(async, Async.race(branches.map(_.runs)*), pollFirst = false)() // all were polled just now
    finally cancelTimers(branches)

  /** `select` of two branches, given as their sources and handlers (see `Async.select(a, b)`),
    * polled in order as `select` polls them; when neither is ready it awaits [[Either2]], the
    * race of the two in one object. Branches with a select's own timer take `select`.
    */
  def select2[R](sa: Async.Source[Any], ha: Any => R, sb: Async.Source[Any], hb: Any => R)(using async: Async): R =
    if sa.isInstanceOf[SelectTimer] || sb.isInstanceOf[SelectTimer] then // timers to cancel at the end
      select(Vector(SelectCase(sa, ha), SelectCase(sb, hb)))
    else
      Async.checkCancelled(async, "awaiting")
      val taker = Listener.Taker[Any]()
      if sa.poll(taker) then ha(taker.value)
      else if sb.poll(taker) then hb(taker.value)
      else
        yieldOnce(async)
        if sa.poll(taker) then ha(taker.value)
        else if sb.poll(taker) then hb(taker.value)
        else Async.awaitWith(async, Either2(sa, ha, sb, hb), pollFirst = false)() // both were polled just now

  /** What `select2` awaits when neither branch was ready: the race of the two branches mapped to
    * their handlers' runs (`Async.race(a.runs, b.runs)`), in one object with one forwarder per
    * branch. As the race's: whoever offers a branch's value offers its handler's run to the waiting
    * listener `k`, which decides (exactly once: its compare-and-set), and an offer that `k` took
    * drops the other branch's registration; a winner that came while the branches were being
    * registered ends the registering. The two forwarders of a `k` end at `k`, so a select's read
    * is never offered its own send (`Listener.sameWaiter`), and a forwarder equals every other of
    * the same `k` and race, so `dropListener(k)` finds what `onComplete(k)` registered.
    */
  private final class Either2[R](sa: Async.Source[Any], ha: Any => R, sb: Async.Source[Any], hb: Any => R)
      extends Async.Source[() => R]:
    private final class Forward(k: Listener[() => R], first: Boolean) extends Listener.Forwarder[Any, () => R](k, Either2.this):
      /** The other branch's forwarder, to drop once this one won (null in a poll: none registered). */
      var other: Forward | Null = null
      def apply(v: Any): Boolean =
        val handler = if first then ha else hb
        val took = k(() => handler(v))
        if took then
          val o = other
          if o != null then (if first then sb else sa).dropListener(o)
        took

    def poll(k: Listener[() => R]): Boolean = sa.poll(Forward(k, true)) || sb.poll(Forward(k, false))

    def onComplete(k: Listener[() => R]): Unit =
      val a = Forward(k, true)
      val b = Forward(k, false)
      a.other = b
      b.other = a
      sa.onComplete(a)
      if a.isDone then sa.dropListener(a) // a winner came while registering: k is satisfied, or abandoned
      else
        sb.onComplete(b)
        if b.isDone then sb.dropListener(b)

    def dropListener(k: Listener[() => R]): Unit =
      sa.dropListener(Forward(k, true))
      sb.dropListener(Forward(k, false))

  /** What a select that found no branch ready does before it looks again, and only then waits:
    * gives its carrier to whoever is ready to run (`Thread.yield()`), as a partner that would make
    * a branch ready often is, on two carriers shared by more threads. Waiting costs a select far
    * more than a plain read or send (a listener on each branch, a send branch's cell that the
    * readers then pass, the losing branch's removal); in `bench channels`' select a branch was
    * ready after the yield in every round that had found none, and the select moved 7-12 % more
    * values (doc/adr/0028). The scope's cancel, if it came meanwhile, ends the select before
    * anything is taken.
    */
  private def yieldOnce(async: Async): Unit =
    Thread.`yield`()
    Async.checkCancelled(async, "awaiting")

  /** Polls the branches in order until one takes a value into `taker`: that branch, or null. */
  private def firstReady[R](branches: Seq[SelectCase[R]], taker: Listener.Taker[Any]): SelectCase[R] | Null =
    val n = branches.length
    var i = 0
    while i < n do
      val b = branches(i)
      if b.source.poll(taker) then return b
      i += 1
    null

  /** A branch as a source of its handler's run, for a race that waits. */
  def runs[R](source: Async.Source[Any], handler: Any => R): Async.Source[() => R] = source.map(v => () => handler(v))

  /** Cancels `source` if it is a timer made for one select (`Async.after`). */
  def cancelTimer(source: Async.Source[Any]): Unit = source match
    case t: SelectTimer => t.cancel()
    case _              => ()

  def selectNow[R](branches: Seq[SelectCase[R]], otherwise: => R): R =
    try
      val taker = Listener.Taker[Any]()
      val ready = firstReady(branches, taker)
      if ready != null then ready.run(taker.value) else otherwise
    finally cancelTimers(branches)

  def selectWithin[R](limit: FiniteDuration, branches: Seq[SelectCase[R]])(using Async): Option[R] =
    val wrapped = branches.map(b => SelectCase[Option[R]](b.source, v => Some(b.run(v))))
    try select(wrapped :+ Async.after(limit).handle(_ => Option.empty[R]))
    finally cancelTimers(branches)

  /** A select's own timer (`Async.after`) that lost leaves the scheduler now (one that rang is not
    * changed by a cancel).
    */
  private def cancelTimers(branches: Seq[SelectCase[?]]): Unit = branches.foreach(_.cancelTimer())
