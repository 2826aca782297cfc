package asyncpipe.async

import scala.util.{Success, Try}
import Waiter.{DECIDING, INTERRUPTED, RESUMED, WaiterData}

/** A send branch of a select ([[Channel.canSend]]) that had to wait, parked in cell `i` of `seg`
  * as a sender with no thread of its own: its value rides in it as a parked sender's does, and
  * every party that would resume a parked sender (an FAA reader, `expandBuffer`, a listener read)
  * resumes it the same way, except that `tryResume` first asks the branch's listener `k`. Yes: the
  * send happened (RESUMED); no (the select was won by another branch): it is cancelled
  * (INTERRUPTED), and the party, which holds the cell, settles it as for any cancelled sender and
  * moves on. So a losing branch sent nothing, and of concurrent resumers exactly one asks.
  *
  * `withdraw` is the select's side: the race won elsewhere drops the branch, which cancels the
  * waiter if no one is asking `k` (a party that is will hear no and settle the cell itself).
  */
private[async] final class SelectSender(value: AnyRef, val k: Listener[Try[Unit]], ch: SegmentChannel[?], seg: Segment, i: Int,
    branch: SelectSender.Branch | Null) extends Waiter(null, value, null):

  override def tryResume(v: AnyRef): Boolean =
    WaiterData.compareAndSet(this, null, DECIDING) && {
      // A listener that throws is taken for a refusal: the party asking holds the cell and must
      // settle it, and it is not the select's thread, which would be the one to hear of it.
      val took = try k(SelectSender.Sent) catch case _: Throwable => false
      data = if took then RESUMED else INTERRUPTED
      if branch != null then branch.forget(this)
      took
    }

  /** Never: a listener read resumes a send branch (`tryResume`) rather than claiming it, since its
    * listener must be asked before the read's (see SegmentChannel's deviation 10).
    */
  override def tryClaim(): Boolean = throw IllegalStateException("a send branch is resumed, not claimed")

  /** Withdraws this waiter and sends again at the tail (a registered branch only): its own
    * select's read found it first in line. False if it is being decided or was (nothing moved).
    */
  def requeue(): Boolean =
    branch != null && WaiterData.compareAndSet(this, null, INTERRUPTED) && {
      SegmentChannel.settleCancelled(seg, i, this, sender = true)
      branch.forget(this)
      ch.sendBranch(payload.nn, k, branch)
      true
    }

  /** Ends the wait from the select's side (its race was won elsewhere, or it gave up). If a
    * party is asking `k` at this moment, that party decides: `k` refuses, and the party settles
    * the cell. Never waits: the party may be this very thread, inside `k`, dropping the losers.
    */
  def abandon(): Unit =
    // No listener read is told (as a cancelled sender tells them): every registered one has been
    // offered this send already (when it parked, or when the read registered), and this may run
    // inside `k` of a send branch holding another cell of this channel, which they would wait for.
    if WaiterData.compareAndSet(this, null, INTERRUPTED) then
      SegmentChannel.settleCancelled(seg, i, this, sender = true) // unless a party holding the cell does

  /** A poll's trial ends: whether the value was sent after all (a listener read resumed the
    * waiter, and `k` took it); waits for a decision under way, which another thread makes.
    */
  def withdraw(): Boolean =
    while true do
      val d = data
      if d eq RESUMED then return true
      else if d eq INTERRUPTED then return false
      else if d == null then
        if WaiterData.compareAndSet(this, null, INTERRUPTED) then
          SegmentChannel.settleCancelled(seg, i, this, sender = true)
          ch.notifyListeners() // the head may now be skippable
          return false
      else SegmentChannel.spinWait() // DECIDING: a party is asking k
    false

private[async] object SelectSender:
  val Sent: Try[Unit] = Success(())

  /** The waiters a `canSend` source has parked for its registered listeners, so that
    * `dropListener` finds them. Usually none or one: an immutable list swapped by CAS, null while
    * empty. Null rather than `Nil`, and a field of its own rather than an `AtomicReference` base:
    * a `canSend` made for a select that then polls is never registered, and a volatile field
    * written in its constructor would cost a full fence in every such select.
    */
  private[async] abstract class Branch:
    @volatile private[async] var parked: List[SelectSender] | Null = compiletime.uninitialized

    private def swap(from: List[SelectSender] | Null, to: List[SelectSender]): Boolean =
      Parked.compareAndSet(this, from, if to.isEmpty then null else to)

    def remember(w: SelectSender): Unit =
      var l = parked
      while !swap(l, w :: (if l == null then Nil else l)) do l = parked
    def forget(w: SelectSender): Unit =
      var l = parked
      while l != null && l.exists(_ eq w) && !swap(l, l.filterNot(_ eq w)) do l = parked
    /** The waiter registered for a listener equal to `k`, removed from the list; null if none. */
    def take(k: Listener[Try[Unit]]): SelectSender | Null =
      while true do
        val l = parked
        if l == null then return null
        l.find(_.k == k) match
          case None => return null
          case Some(w) => if swap(l, l.filterNot(_ eq w)) then return w
      null

  private val Parked: java.lang.invoke.VarHandle =
    java.lang.invoke.MethodHandles.privateLookupIn(classOf[Branch], java.lang.invoke.MethodHandles.lookup())
      .findVarHandle(classOf[Branch], "parked", classOf[List[?]])
