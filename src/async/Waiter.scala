package asyncpipe.async

import java.lang.invoke.{MethodHandles, VarHandle}
import java.util.concurrent.CancellationException
import java.util.concurrent.locks.LockSupport
import scala.annotation.static
import SegmentChannel.{settleCancelled, spinWait}

/** A sender (with `payload`) or reader (`payload == null`) parked in a channel's cell
  * ([[SegmentChannel]]). Its `data` word decides every race on it with one CAS from null: a
  * value or RESUMED (someone resumed it), ChannelClosed for a reader at close, INTERRUPTED
  * (cancelled: by its own thread when interrupted, or by its future's `cancel()`, `cancelWait`),
  * or CLAIMED (a listener read is deciding whether to take a sender's value; it goes back to null
  * or on to RESUMED, or, if a cancel came meanwhile (CLAIMED_CANCELLED), on to RESUMED or
  * INTERRUPTED).
  *
  * A cancelled waiter's cell is settled (INTERRUPTED_SEND / INTERRUPTED_RECEIVE, counted) by
  * `settleCancelled`, from the waiter's own thread or from whichever party finds the waiter
  * cancelled while it holds the cell (see the catalogue at [[CellState]]): the cancel itself
  * writes no cell, since it cannot tell whether the waiter is in its cell yet (`register` comes
  * before that).
  */
private[async] class Waiter(thread: Thread | Null, val payload: AnyRef | Null, runtime: Runtime | Null) extends CancellableWait:
  import Waiter.*

  @volatile var data: AnyRef | Null = compiletime.uninitialized // null: waiting (not written here: see OneShot)
  def isSender: Boolean = payload != null

  def tryResume(v: AnyRef): Boolean =
    val ok = WaiterData.compareAndSet(this, null, v)
    if ok then wake()
    ok
  def tryCancel(): Boolean = WaiterData.compareAndSet(this, null, INTERRUPTED)
  def isCancelled: Boolean = data eq INTERRUPTED
  def tryClaim(): Boolean = WaiterData.compareAndSet(this, null, CLAIMED)
  /** The claiming listener refused: waiting again, or, if a cancel came meanwhile, cancelled
    * (true; the caller then settles the cell it holds).
    */
  def unclaim(): Boolean =
    if WaiterData.compareAndSet(this, CLAIMED, null) then false
    else
      data = INTERRUPTED // from CLAIMED_CANCELLED: no one else writes the word while it is claimed
      true
  def resumeClaimed(): Unit = resumeClaimedWith(RESUMED)
  /** Ends a claim with `v` (RESUMED for a sender, the value for a reader): from CLAIMED, or
    * CLAIMED_CANCELLED: the claimer decided before the cancel did.
    */
  def resumeClaimedWith(v: AnyRef): Unit =
    data = v
    wake()
  /** A claimed reader whose claimer (a send branch of a select, [[SelectSender]]) was refused:
    * the reader takes a new index (RETRY). If a cancel came meanwhile, the reader is cancelled
    * instead (true; the caller then settles the cell it holds).
    */
  def retryClaimed(): Boolean =
    if WaiterData.compareAndSet(this, CLAIMED, RETRY) then
      wake()
      false
    else
      data = INTERRUPTED // from CLAIMED_CANCELLED, as in unclaim
      true

  /** The cancel of our future, before it interrupts us: wins the word as a resumer would, or
    * leaves the decision to the listener read that has claimed it (a refusal then cancels).
    */
  def cancelWait(): Unit =
    var d = data
    while (d == null && !tryCancel()) || ((d eq CLAIMED) && !WaiterData.compareAndSet(this, CLAIMED, CLAIMED_CANCELLED)) do
      d = data // the word changed under us: decide on the new one
    // else: resumed, closed or cancelled already (a decided wait), or the claim now cancels

  /** Registers this waiter, about to be published in its cell, with the body's future; if that
    * is cancelled already, makes it cancelled first, so that it is published decided (no
    * partner can take it; `await` throws at once and settles the cell).
    */
  def register(async: Async): Unit =
    val owner = async.owner
    if owner != null && !owner.beginWait(this) then tryCancel()
  /** Undoes `register` (the waiter was not published, or its wait is over). */
  def unregister(async: Async): Unit =
    val owner = async.owner
    if owner != null then owner.endWait()

  /** Set (then a full fence) by the waiter just before it parks: a resumer unparks only then. */
  @volatile var parking: Boolean = compiletime.uninitialized // false
  /** Set by the resumer (the thread that won `data`) when its resume unparked us: read only by
    * that thread, right after, as a hint for its own next wait (see `SegmentChannel.woke`). */
  var unparked: Boolean = false
  private def wake(): Unit =
    if parking then
      unparked = true
      if runtime == null then LockSupport.unpark(thread) else runtime.unpark(thread)

  def awaitSend(seg: Segment, i: Int, async: Async, ch: SegmentChannel[?]): Outcome =
    await(seg, i, async, ch)
    Outcome.Awaited

  def awaitReceive(seg: Segment, i: Int, async: Async, ch: SegmentChannel[?]): AnyRef =
    val d = await(seg, i, async, ch)
    if d eq ChannelClosed then Outcome.FoundClosed
    else if d eq RETRY then Outcome.Failed // a send branch claimed us and lost its race: a new index
    else d

  /** Parks until resumed or cancelled, then ends the registration. A cancel (interrupt, or the
    * scope's cancel flag) outside `uninterruptible` abandons the cell if no one has resumed us
    * yet; inside, it is held and restored on return. Our future's `cancel()` may have decided
    * the word already (INTERRUPTED): then we throw as if we had.
    */
  private def await(seg: Segment, i: Int, async: Async, ch: SegmentChannel[?]): AnyRef =
    try
      val budget = if ch.capacity == 0 then ch.waitBudget(isSender) else 0
      var spins = budget
      var heldInterrupt = false
      var d = data
      while d == null || (d eq CLAIMED) || (d eq CLAIMED_CANCELLED) do
        if d != null then spinWait() // a listener read (or a send branch) is deciding on us
        else if spins > 0 then
          spins -= 1
          Thread.onSpinWait()
        else if !parking then
          if budget > 0 then ch.spinWasted()
          parking = true
          VarHandle.fullFence()
        else
          async.runtime.park(this)
          if data == null then
            if async.cancellationDeferred then
              if Thread.interrupted() then heldInterrupt = true // park would spin on the flag
            else if Thread.interrupted() || async.isCancelled then tryCancel()
            // else (or the CAS failed): resumed, claimed or cancelled meanwhile: look again
        d = data
      if d eq INTERRUPTED then
        // cancelled: nothing taken, nothing sent. Settle the cell, unless a party that found us
        // cancelled holds it (RESUMING, Reserved, a swapped value) and settles it itself
        settleCancelled(seg, i, this, isSender)
        if isSender then ch.notifyListeners() // the head may now be skippable
        Thread.interrupted() // the cancel's interrupt, if it has landed: this is its exception
        throw CancellationException(if isSender then "cancelled while sending" else "cancelled while reading")
      if spins < budget && !parking then ch.spinPaidOff() // resumed while spinning
      if heldInterrupt then Thread.currentThread.interrupt()
      d.nn
    finally unregister(async)

private[async] object Waiter:
  /** A word of a [[Waiter]] (besides null = waiting, and a reader's delivered value). Neither a
    * cell state nor an outcome (see [[CellState]]): a word is only ever in a waiter's `data`.
    */
  private[async] final class Word(name: String):
    override def toString: String = name

  // RESUMED is read by the channel too, so it is @static: one read of a static final field (see
  // CellState). The other words are private to Waiter and its object, which compile to the same.
  @static private[async] val RESUMED = Word("RESUMED")
  private val CLAIMED = Word("CLAIMED")
  private val CLAIMED_CANCELLED = Word("CLAIMED_CANCELLED")
  private[async] val INTERRUPTED = Word("INTERRUPTED")
  /** A reader claimed by a send branch that then lost its race: it takes a new index. */
  private val RETRY = Word("RETRY")
  /** A [[SelectSender]] whose listener is being asked (by the party that holds its cell). */
  private[async] val DECIDING = Word("DECIDING")

  private[async] val WaiterData: VarHandle =
    MethodHandles.privateLookupIn(classOf[Waiter], MethodHandles.lookup()).findVarHandle(classOf[Waiter], "data", classOf[AnyRef])
