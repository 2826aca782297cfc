package asyncpipe.async

import java.lang.invoke.{MethodHandles, VarHandle}
import scala.annotation.static
import java.util.concurrent.{CancellationException, ConcurrentLinkedQueue}
import scala.util.{Failure, Success, Try}

/* =================================================================================================
 * The channel algorithm: one implementation for rendezvous, buffered and unbounded channels.
 *
 * Provenance: N. Koval, D. Alistarh, R. Elizarov, "Fast and Scalable Channels in Kotlin
 * Coroutines" (PPoPP 2023; ../shared/seeds/fast-scalable-channels-paper.txt). jox's Channel.java
 * and kotlinx.coroutines' BufferedChannel.kt were read to understand the algorithm; this code is
 * written from the paper.
 *
 * The idea in one paragraph: an infinite array of cells, allocated lazily as a linked list of
 * segments of `SegmentSize` cells. A sender takes the next index with Fetch-And-Add on S, a
 * reader with FAA on R; sender `s` and reader `r == s` meet in cell `s`, and whoever comes first
 * leaves its value or its parked thread there for the other (a CAS on the cell decides). A third
 * counter B ("buffer end") makes cells below it buffer cells, where a sender deposits its value
 * and leaves without waiting; each completed read moves B on by one (`expandBuffer`), so the
 * buffer holds `capacity` cells. Rendezvous: B never moves from 0. Unbounded: B is infinite.
 *
 * Deviations from the paper (and where it differs from the two implementations read):
 *  1. Threads block instead of suspending: a waiter is a [[Waiter]] (thread + payload + a word
 *     decided by CAS), parked with the runtime's park. Where the other party is likely a step
 *     behind, a party spins a bounded number of times first (see "Spinning" in the object).
 *     Unlike the paper, an FAA reader that finds its sender in flight (S > r, cell empty) waits
 *     for it a little before poisoning the cell. Rendezvous: a blocking sender deposits its value
 *     first and then waits for a reader to take it; a reader that comes first spins on a mark
 *     (SPINNING_READER) that a sender swaps for its value before it returns (doc/adr/0011). The
 *     rendezvous sender deposits with an unconditional swap, and puts back a reader's state it
 *     displaced (a parked, cancelled or poisoning reader; `displaced`).
 *  2. Values are stored in the cells themselves (a buffered cell *is* its value; a sender's value
 *     rides in its Waiter), as jox does, rather than in a parallel array.
 *  3. Cancellation is a future's cancel or a thread interrupt (also inside `read`/`send` of a
 *     cancelled scope). A waiter is registered with its future before it is published
 *     (`RunnableFuture.beginWait`), and the future's `cancel()` wins its word (null to
 *     INTERRUPTED, the CAS a resumer would make) before it interrupts the thread, so no partner
 *     completes the wait once the cancel has returned; a rendezvous reader in a future spins on
 *     a mark of its own ([[SpinMark]]), whose cell the cancel claims. An interrupt
 *     alone is noticed by the waiter when it wakes, and it CASes its own word. The cell of a
 *     cancelled waiter is settled (INTERRUPTED_SEND / _RECEIVE, counted once) by its thread or by
 *     the partner that finds it cancelled while holding the cell, whichever comes first
 *     (`settleCancelled`). A cancel inside `uninterruptible` is held until the operation
 *     completes. See doc/adr/0006.
 *  4. `close()` is the paper's close with "drain" semantics (Go's and jox's `done`): it sets the
 *     closed bit in S, closes the segment chain (no new segments) and closes every cell at or
 *     above the last sender's index in reverse order. Cells below it are untouched, so buffered
 *     values and the values of senders blocked at the close are still read. There is no
 *     discarding close (cancel/error) yet. See doc/adr/0006.
 *  5. Listener reads (`canRead` as an `Async.Source`), which neither the paper nor jox have in
 *     this form. A listener may refuse a value (a filter, a race lost elsewhere), so a listener
 *     read never owns a cell by FAA: it RESERVES the head cell `R` (CAS the cell to the shared
 *     marker Hold; the reader keeps the old state), offers the value, and then either commits (cell TAKEN,
 *     `CAS R r -> r+1`, whoever moves R past the cell runs `expandBuffer`) or restores the cell.
 *     Parties that meet a reserved cell spin: the reservation ends within one listener call.
 *     Listeners waiting for a value (`onComplete`) sit in a per-channel queue, not in cells, and
 *     are offered the head whenever it may have changed: a value deposited, a sender parked or
 *     withdrawn, a value taken, a close. With no registered listener that costs one volatile
 *     read. See doc/adr/0005.
 *  6. `trySend` with registered listeners on a channel where it would wait deposits a trial
 *     Waiter, lets the listeners look at it, and withdraws it if none took it; without
 *     listeners it poisons its cell (INTERRUPTED_SEND) like jox's trySend. `tryRead` is a
 *     listener read with an accept-all listener.
 *  7. Segment reclamation follows jox: one int per segment counts pointers (how many of the
 *     three segment references point at it), cells not yet processed by `expandBuffer` (buffered
 *     channels only) and cells not interrupted; at zero the segment is unlinked, so cancelled
 *     waiters leave memory flat. A segment one of whose cells holds a buffered value (or will:
 *     a sender that took the index before any close) is never unlinked so, since that cell is
 *     never interrupted: it is marked kept, and `expandBuffer` stops counting its cells. After
 *     a successful operation a segment forgets its `prev`, and the channel holds no segment but
 *     the three references: segments behind them are garbage.
 *  8. `null` is a legal value: it is stored as NullValue, which the cells hold as any value.
 *  9. A channel may have one tap (`tap`), a standing listener offered the head like the listeners
 *     of 5 but never removed by taking a value; and a send that finds a tapped channel empty
 *     (S == R) offers its value to the tap before it takes an index (`forward`), so the cells
 *     never see a value the tap takes at once. The multiplexer's relay; see doc/adr/0018.
 * 10. Send branches (`canSend(x)`, a send as a Source for a select), which the paper leaves to
 *     Kotlin's select machinery. The branch's listener must say yes before the value is sent, and
 *     a no must leave no trace, so a send branch takes an index by FAA as any sender and then:
 *     where the send completes at once (a buffer cell, a reader that has taken the index, spins
 *     or is parked there) it HOLDS the cell (Reserved; a parked reader also claimed, so that its
 *     cancel waits) while the listener decides; yes puts the value in (or hands it to the
 *     reader), no leaves the cell VOID (its reader, if one took the index, retries; readers pass
 *     it without moving B, which the branch moves on for it at once, so the buffer's room is what
 *     it was; a parked reader is woken to retry, and its cell is TAKEN). Where the send would wait, it parks a [[SelectSender]], a sender with no
 *     thread whose listener is asked by whoever resumes it (an FAA reader, expandBuffer, a
 *     listener read): a no makes it a cancelled sender, settled by that party. A listener read
 *     that finds one asks the send's listener before its own (one of them must go first; see
 *     Channel.canSend for what that means) and never takes its own select's send: it moves that
 *     send to the tail when values wait behind it. See doc/adr/0028.
 * ============================================================================================== */
private[async] class SegmentChannel[T](val capacity: Int) extends Channel[T]:
  import SegmentChannel.*
  import CellState.*
  import Segment.findSegment

  require(capacity >= Unbounded, s"capacity must be -1 (unbounded), 0 (rendezvous) or positive, got $capacity")

  private def isRendezvous = capacity == 0
  private def isBuffered = capacity > 0 // buffered with a finite buffer: the only kind that moves B

  // The rendezvous spin budget (see "Spinning" in the object). Spinning pays when the partner
  // runs on another carrier and is a step behind; it is pure loss when the partner waits for
  // this very carrier (one core, a busy machine, or both virtual threads scheduled on one
  // carrier), where a fixed budget made the channel many times slower (doc/adr/0011). So the
  // budget halves on every spin that ran out and grows back on spins that paid off. Plain
  // fields: a racy update only nudges the budget.
  private var spinBudgetNow: Int = SpinMax
  private var waitsWithoutSpin: Int = 0

  /** Sets the rendezvous spin budget; for tests that need a party to spin rather than park. */
  private[async] def setSpinBudget(n: Int): Unit = spinBudgetNow = n

  // Whose partner sits in the queue of this party's carrier (doc/adr/0011, issue 41). A party
  // that has just unparked its parked partner has put it in its own carrier's queue (a virtual
  // thread unparked from a virtual thread is pushed to the waker's carrier): until this party
  // parks, or another carrier steals it, the partner cannot run, and a spin for it is wasted,
  // and it would tell the budget that spinning does not pay, which is false of this channel's
  // parties on two carriers. So the next operation of that side neither spins nor counts in the
  // budget: it parks at once, as SynchronousQueue does when its carrier has queued work
  // (ForkJoinWorkerThread.hasKnownQueuedWork, which is not public API). Per side (one word for
  // senders, one for readers): 0 nothing known, Woke (this side's last operation unparked its
  // partner), Skip (this side's operation in progress does not spin). A hint: with several
  // parties on a side it is only approximate, which costs a spin or a park, never a value.
  private var senderWoke: Int = 0
  private var readerWoke: Int = 0
  // The thread of each side's latest rendezvous party that waited: the partner a party waits for
  // (in a one-to-one rendezvous, exactly; with several parties on a side, a hint). Written only
  // when it changes, and only on the way to a wait, so that parties that find each other there
  // do not write the channel's line.
  private var lastSender: Thread | Null = null
  private var lastReader: Thread | Null = null

  /** Notes the current thread as its side's latest party. */
  private inline def noteParty(inline sender: Boolean): Unit =
    val me = Thread.currentThread
    if sender then { if lastSender ne me then lastSender = me }
    else if lastReader ne me then lastReader = me
  /** The partner a party of this side waits for. */
  private inline def partnerOf(inline sender: Boolean): Thread | Null = if sender then lastReader else lastSender

  /** At the start of a rendezvous party's attempt: whether it may spin (false right after its
    * side unparked a partner), moving its side's word on. Writes only when the word changes. */
  private inline def maySpin(inline sender: Boolean): Boolean =
    if CarrierOf != null then !notRunning(partnerOf(sender)) // seen live: no hint needed
    else maySpinByHint(sender)
  private inline def maySpinByHint(inline sender: Boolean): Boolean =
    val w = if sender then senderWoke else readerWoke
    if w == 0 then true
    else
      val next = if w == Woke then Skip else 0
      if sender then senderWoke = next else readerWoke = next
      next == 0
  /** A party that resumed `w` tells its side whether the resume unparked it. */
  private inline def woke(w: Waiter, inline sender: Boolean): Unit =
    if w.unparked then
      if sender then senderWoke = Woke else readerWoke = Woke

  /** The spins a parked-to-be rendezvous waiter makes on its word before it parks. */
  private[async] def waitBudget(sender: Boolean): Int =
    if CarrierOf != null then { if notRunning(partnerOf(sender)) then 0 else spinBudget() }
    else if (if sender then senderWoke else readerWoke) == Skip then 0 else spinBudget()

  /** How many spins a rendezvous wait may make now. */
  private[async] def spinBudget(): Int =
    val b = spinBudgetNow
    if OneCpu || (OneCarrier && Thread.currentThread.isVirtual) then 0 // a spin holds the CPU (carrier) the partner needs
    else if b > 0 then b
    else
      waitsWithoutSpin += 1
      if waitsWithoutSpin % ProbeEvery == 0 then SpinProbe else 0
  private[async] def spinPaidOff(): Unit =
    val b = spinBudgetNow
    if b < SpinMax then spinBudgetNow = math.min(SpinMax, b * 2 + SpinProbe)
  private[async] def spinWasted(): Unit =
    val b = spinBudgetNow
    if b > 0 then spinBudgetNow = b >> 1

  // ---------------------------------------------------------------------------------------------
  // State. Every field below is read and written through its VarHandle or as a volatile.

  /** S: the number of send attempts so far (low 62 bits) and the closed bit (bit 62). */
  private val sCounter = PaddedCounter(0L)
  private inline def sendersAndClosed: Long = sCounter.get
  /** R: the number of FAA reads so far, plus heads committed by listener reads. */
  private val rCounter = PaddedCounter(0L)
  private inline def receivers: Long = rCounter.get
  /** B: cells below it are buffer cells. 0 and never moved for rendezvous; unused for unbounded. */
  private val bCounter = PaddedCounter(if isBuffered then capacity.toLong else 0L)
  private inline def bufferEnd: Long = bCounter.get
  /** The index of the first cell no sender will ever reach; Long.MaxValue while open. */
  @volatile private var closedAt: Long = Long.MaxValue
  /** How the channel ended: null while open, then (set once, before the closed bit) NoCause for
    * `close()` or the cause given to `error`.
    */
  @volatile private var ending: AnyRef | Null = null

  // The three references start at segment 0. No field keeps segment 0 itself: its `next` leads to
  // every later segment, so holding it would hold every segment the channel ever used.
  @volatile private var sendSegment: Segment = Segment(0, null, if isBuffered then 3 else 2, isBuffered, spreadsCells(capacity))
  @volatile private var receiveSegment: Segment = sendSegment
  @volatile private var bufferEndSegment: Segment = if isBuffered then sendSegment else NoSegment

  /** Listeners waiting for a value (`canRead.onComplete`), each wrapped in a [[Registration]]. */
  private val listeners = ConcurrentLinkedQueue[Registration[T]]()
  /** The channel's one standing listener, if any (`tap`): it stays until `untap`. */
  @volatile private var standing: Tap[T] | Null = null
  private inline def noListeners: Boolean = listeners.isEmpty && standing == null

  markInitialBufferProcessed()

  private def markInitialBufferProcessed(): Unit =
    if isBuffered then
      var seg = sendSegment // still segment 0
      var left = capacity.toLong
      while left > 0 do
        val n = math.min(left, SegmentSize.toLong).toInt
        seg.markProcessed(n)
        left -= n
        if left > 0 then seg = findSegment(seg, seg.id + 1).nn

  // =============================================================================================
  // Sending

  def send(x: T)(using async: Async): Unit =
    Async.checkCancelled(async, "send")
    if doSend(encode(x), async) == Outcome.FoundClosed then throw closedException()

  def trySend(x: T): Boolean =
    doSend(encode(x), null) match
      case Outcome.FoundClosed => throw closedException()
      case Outcome.NotSent     => false
      case _                   => true

  /** The send loop: take an index with FAA, find its segment, and try the cell; on Failed (the
    * cell was poisoned or its reader gone) start again with a new index. `async == null` is
    * trySend: never park.
    */
  private def doSend(v: AnyRef, async: Async | Null): Outcome =
    val t = standing
    if t != null && forward(t, v) then return Outcome.Buffered
    while true do
      if async == null then // trySend: answer cheaply before spending an index
        val word = sCounter.getForUpdate // the FAA below then finds S's line here
        if isClosedWord(word) then return Outcome.FoundClosed
        if mustWait(word & CounterMask) && noListeners then return Outcome.NotSent
      val start = sendSegment
      val scf = sCounter.getAndAdd(1L)
      if isClosedWord(scf) then return Outcome.FoundClosed // the send started after close
      val s = scf & CounterMask
      val i = (s % SegmentSize).toInt
      val seg = segmentOfSend(start, scf)
      if seg == null then return Outcome.FoundClosed // the chain was closed: s is beyond the last cell
      if seg.id == s / SegmentSize then // else: its segment was removed; retry
        // A blocking rendezvous send's common case, checked here rather than in updateCellSend:
        // that large method is a call the JIT does not inline, and this path then skips it
        // (doc/adr/0011)
        val outcome = if async != null && isRendezvous then rendezvousDeposit(seg, i, v, async) else updateCellSend(seg, i, s, v, async)
        outcome match
          case Outcome.Failed => seg.cleanPrev() // poisoned or abandoned cell: retry with a new index
          case Outcome.FoundClosed => return Outcome.FoundClosed
          case Outcome.NotSent => return Outcome.NotSent
          case r =>
            if r == Outcome.WaiterResumed then seg.cleanPrev()
            return r
    throw IllegalStateException("unreachable")

  /** The segment of the send index that the FAA on S returned as `scf`, from `start` (the send
    * segment read before the FAA), moving the send reference on to it; null if the chain was
    * closed before it. If its segment was removed (all its cells interrupted), a later segment,
    * S having been moved over the removed one: the sender then retries with a new index.
    */
  private inline def segmentOfSend(start: Segment, scf: Long): Segment | Null =
    val id = (scf & CounterMask) / SegmentSize
    if start.id == id then start
    else
      val found = findAndMoveForward(SendSegment, start, id)
      if found != null && found.id != id then sCounter.compareAndSet(scf + 1, found.id * SegmentSize)
      found

  /** A send that finds the channel empty and tapped hands its value straight to the tap, and the
    * cells never see it: as if it were deposited and taken at once. Only while no value waits in
    * the channel (S == R: every index a sender took, a reader took too), so it never overtakes a
    * value. False if the channel is closed or not empty, or the tap refused: the send then goes
    * the usual way.
    */
  private def forward(t: Tap[T], v: AnyRef): Boolean =
    val scf = sendersAndClosed
    !isClosedWord(scf) && (scf & CounterMask) == receivers && t(Success(decode[T](v)))

  /** Whether cell `s` is a buffer cell (below B). B only grows, so a value of B that some sender
    * read earlier, kept beside S (a line senders own for their FAA anyway), answers yes without
    * reading B, whose line every read writes; only past it is B read (and the kept value moved).
    */
  private inline def belowBufferEnd(s: Long): Boolean =
    val seen = sCounter.seen
    s < seen || {
      val b = bufferEnd
      if b > seen then sCounter.seen = b
      s < b
    }

  /** Whether a sender of index `s` must wait: no reader has taken `s` and it is not a buffer cell. */
  private inline def mustWait(s: Long): Boolean = capacity != Unbounded && !belowBufferEnd(s) && s >= receivers

  /** One cell, from the sender's side. Returns an [[Outcome]]: Buffered, WaiterResumed, Awaited,
    * Failed, FoundClosed or NotSent (trySend only).
    */
  private def updateCellSend(seg: Segment, i: Int, s: Long, v: AnyRef, async: Async | Null): Outcome =
    // The common case of a buffer with room, or of a reader that has taken s and not yet looked:
    // the cell is empty, and one CAS deposits the value without reading the cell first (a read,
    // then the CAS, would take the cell's line from the reader's core twice)
    if !mustWait(s) && seg.cas(i, null, v) then
      seg.markKept() // a buffered value: never an interrupted cell
      notifyListeners()
      return Outcome.Buffered
    while true do
      val state = seg.cell(i)
      if state == null then
        if mustWait(s) then // wait (or give up, for trySend)
          if async == null && noListeners then
            if seg.cas(i, null, INTERRUPTED_SEND) then
              seg.cellInterruptedSender()
              return Outcome.NotSent
            // else: CAS unsuccessful, repeat
          else
            val w = Waiter(Thread.currentThread, v, if async == null then null else async.runtime)
            if async != null then w.register(async) // a trial (trySend) waits for no one: no cancel to decide
            if seg.cas(i, null, w) then
              notifyListeners() // a listener read may take the value from the waiter
              return if async == null then withdrawTrial(w, seg, i) else w.awaitSend(seg, i, async, this)
            if async != null then w.unregister(async)
            // else: CAS unsuccessful, repeat
        else
          // a reader has taken this index (it will find the value), or this is a buffer cell:
          // deposit the value and go (elimination)
          if seg.cas(i, null, v) then
            notifyListeners()
            return Outcome.Buffered
          // else: CAS unsuccessful, repeat
      else if isMark(state) then
        // the reader of this index spins here (rendezvous): hand the value over and go
        if seg.cas(i, state, v) then return Outcome.Buffered
        // else: CAS unsuccessful (the reader stopped spinning), repeat
      else if state eq IN_BUFFER then
        // expandBuffer made this a buffer cell before we arrived
        if seg.cas(i, IN_BUFFER, v) then
          notifyListeners()
          return Outcome.Buffered
        // else: CAS unsuccessful, repeat
      else state match
        case w: Waiter => return handToParkedReader(w, seg, i, v, w) // a reader is parked here
        case _ =>
          if (state eq INTERRUPTED_RECEIVE) || (state eq BROKEN) then return Outcome.Failed
          else if state eq CLOSED then return Outcome.FoundClosed
          else illegal("send", state, seg, i)
    throw IllegalStateException("unreachable")

  /** A blocking rendezvous send: deposit the value in the empty cell at once, whether or not its
    * reader has come, then wait until a reader takes it (DONE from an FAA reader, TAKEN from a
    * listener read): spin on the cell, then trade the value for a parked [[Waiter]] with one CAS.
    * The sender never reads R; each hand-off moves only the cell's line between the two parties
    * (value in, DONE back), which is faster than watching R first. The deposit is an
    * unconditional swap (getAndSet), not a CAS from empty: if the reader came first and spins
    * on its mark, the swap has already handed it the value, and the sender goes; one atomic
    * instruction where a failed CAS and a second one cost two (doc/adr/0011). Whatever else the
    * swap displaced is dealt with by [[displaced]]. A value in a rendezvous cell is
    * thus a sender still waiting for its reader, or a value its spinning reader has yet to take.
    */
  private def rendezvousDeposit(seg: Segment, i: Int, v: AnyRef, async: Async): Outcome =
    val found = seg.swap(i, v)
    if found != null then return displaced(seg, i, v, found)
    notifyListeners() // a listener read may take the value from the cell
    noteParty(sender = true) // we wait: the reader may want to know whether we run
    var state = spinWhileHeld(seg, i, v, if maySpin(sender = true) then spinBudget() else 0, lastReader)
    while true do
      if (state eq DONE) || (state eq TAKEN) then return Outcome.Buffered // a reader has the value
      else if state eq v then
        // park: a cancel from now on withdraws the value (if our future is cancelled already,
        // `register` makes the waiter cancelled, and the trade takes the value back at once)
        val w = Waiter(Thread.currentThread, v, async.runtime)
        w.register(async)
        if seg.cas(i, v, w) then return w.awaitSend(seg, i, async, this)
        w.unregister(async)
        // else: taken or reserved meanwhile, look again
      else spinWait() // Reserved: a listener read is deciding on the value
      state = seg.cell(i)
    throw IllegalStateException("unreachable")

  /** What a rendezvous sender's swap found in its cell instead of an empty one, when the reader
    * of this index came first. Only a reader's states can be there: no one but this sender puts
    * a value or a sender's state in the cell, and close closes only cells at or above S. The
    * reader spins on its mark: the swap handed it the value, done (its cancel, which claims the
    * mark, came too late). It parked: resume it; if its cancel won, we write INTERRUPTED_RECEIVE
    * over our value (or its thread does, if it comes first), and we retry. It poisoned the cell
    * (BROKEN) or was cancelled (INTERRUPTED_RECEIVE): write that back and retry. Our value stands
    * in such a cell only meanwhile, and no one else looks at it: the cell is below R (its reader
    * took the index), where listener reads do not look, and below S.
    */
  private def displaced(seg: Segment, i: Int, v: AnyRef, found: AnyRef): Outcome =
    if isMark(found) then Outcome.Buffered
    else found match
      case w: Waiter => handToParkedReader(w, seg, i, v, v)
      case _ =>
        if (found eq BROKEN) || (found eq INTERRUPTED_RECEIVE) then
          seg.setCell(i, found)
          Outcome.Failed
        else illegal("rendezvous send", found, seg, i)

  /** A sender's value for the reader `w` parked in cell `i`, which holds `inCell` (`w`, or our
    * value after a rendezvous swap): WaiterResumed, or Failed if the reader's cancel won; then the
    * cell is settled INTERRUPTED_RECEIVE (by us, or by the reader's thread if it comes first), and
    * the send retries with a new index.
    */
  private inline def handToParkedReader(w: Waiter, seg: Segment, i: Int, v: AnyRef, inCell: AnyRef): Outcome =
    if w.tryResume(v) then
      seg.setCell(i, DONE)
      if isRendezvous && CarrierOf == null then woke(w, sender = true)
      Outcome.WaiterResumed
    else
      settleCancelled(seg, i, inCell, sender = false)
      Outcome.Failed

  /** A rendezvous party's wait for the other: spins up to `budget` times while cell `i` still
    * holds `held` (the sender's value, the reader's mark), tells the spin budget whether the wait
    * paid off, and returns what the cell holds then. Inline: it is on every hand-off's path.
    */
  private inline def spinWhileHeld(seg: Segment, i: Int, held: AnyRef, budget: Int, partner: Thread | Null): AnyRef | Null =
    var left = budget
    var state = seg.cell(i)
    while left > 0 && (state eq held) do
      left -= 1
      Thread.onSpinWait()
      state = seg.cell(i)
      // the partner parked or lost its carrier: it cannot come while we spin; stop, no verdict
      if (left & 31) == 0 && (state eq held) && notRunning(partner) then left = -1
    if left < 0 then ()
    else if state eq held then { if budget > 0 then spinWasted() }
    else if left < budget then spinPaidOff()
    state

  /** Spins at most `spins` times (at least once) until cell `i`, empty when last read, holds
    * something other than null or IN_BUFFER; whether it came to. */
  private def awaitCell(seg: Segment, i: Int, spins: Int): Boolean =
    var left = spins
    var st: AnyRef | Null = null
    while left > 0 && (st == null || (st eq IN_BUFFER)) do
      left -= 1
      Thread.onSpinWait()
      st = seg.cell(i)
    !(st == null || (st eq IN_BUFFER))

  /** trySend with listeners registered: our trial waiter has been offered to them; withdraw it
    * unless one took it.
    */
  private def withdrawTrial(w: Waiter, seg: Segment, i: Int): Outcome =
    while true do
      val d = w.data
      if d eq Waiter.RESUMED then return Outcome.WaiterResumed
      else if d == null then
        if w.tryCancel() then
          settleCancelled(seg, i, w, sender = true) // unless a listener read holding the cell does
          notifyListeners() // the head may now be skippable
          return Outcome.NotSent
        // else: claimed or resumed meanwhile, look again
      else spinWait() // CLAIMED: a listener is deciding
    throw IllegalStateException("unreachable")

  // =============================================================================================
  // Reading (FAA readers: read() and readOrClosed())

  def read()(using Async): Try[T] =
    val v = readOrClosed()
    if v.asInstanceOf[AnyRef] eq ChannelClosed then Failure(closedException())
    else Success(v.asInstanceOf[T])

  def readOrClosed()(using async: Async): T | ChannelClosed =
    Async.checkCancelled(async, "read")
    val v = doReceive(async)
    if v eq Outcome.FoundClosed then ChannelClosed else decode[T](v)

  private def doReceive(async: Async): AnyRef =
    while true do
      var seg = receiveSegment
      val r = rCounter.getAndAdd(1L)
      val id = r / SegmentSize
      val i = (r % SegmentSize).toInt
      var skip = false
      if seg.id != id then
        val found = findAndMoveForward(ReceiveSegment, seg, id)
        if found == null then return Outcome.FoundClosed // beyond the closed chain
        seg = found
        if seg.id != id then
          rCounter.compareAndSet(r + 1, seg.id * SegmentSize) // skip a removed segment
          skip = true
      if !skip then
        val result = if isRendezvous then receiveRendezvous(seg, i, r, async) else updateCellReceive(seg, i, r, async)
        if result eq Outcome.FoundClosed then return Outcome.FoundClosed
        else if !(result eq Outcome.Failed) then
          seg.cleanPrev()
          notifyListeners() // the head moved: a filtering listener may want the next value
          return result
        // else: Failed, retry with a new index
    throw IllegalStateException("unreachable")

  /** One rendezvous cell, from the FAA reader's side. The common case first: the cell holds the
    * value of a sender waiting for us, or gets it within the spin; take it with one CAS. Anything
    * else (a parked sender, a reservation, an empty cell after the spin, a close) goes to the
    * general path, which no longer spins for the sender's arrival.
    */
  private def receiveRendezvous(seg: Segment, i: Int, r: Long, async: Async): AnyRef =
    var state = seg.cell(i)
    if state == null then
      noteParty(sender = false) // we wait: the sender may want to know whether we run
      val budget = if maySpin(sender = false) then spinBudget() else 0
      if budget > 0 then
        val owner = async.owner
        if owner != null then return cancellableSpin(seg, i, r, async, budget, owner)
        if seg.cas(i, null, SPINNING_READER) then return spinForSender(seg, i, r, async, budget, SPINNING_READER)
      state = seg.cell(i)
    takeOrGeneral(seg, i, r, async, state)

  /** `receiveRendezvous`'s spin for a reader in a runnable future, whose cancel must be able to
    * stop the spin (doc/adr/0006): its mark is its own [[SpinMark]], registered with the future
    * before it is put in the cell, so the cancel can claim the cell, marked or still empty, with
    * one CAS (INTERRUPTED_RECEIVE), and a sender that comes after the cancel finds it claimed.
    * If the future is cancelled already, no mark: the general path parks a waiter born
    * cancelled. The registration lasts until the read of this index ends: after the reader takes
    * its mark back, the cancel may still claim the empty cell, until a parked waiter's
    * registration replaces the mark's. Readers no future's cancel can reach share SPINNING_READER
    * and pay nothing of this.
    */
  private def cancellableSpin(seg: Segment, i: Int, r: Long, async: Async, budget: Int, owner: RunnableFuture[?]): AnyRef =
    val mark = SpinMark(seg, i)
    if !owner.beginWait(mark) then
      owner.endWait()
      takeOrGeneral(seg, i, r, async, seg.cell(i))
    else
      try
        if seg.cas(i, null, mark) then spinForSender(seg, i, r, async, budget, mark)
        else takeOrGeneral(seg, i, r, async, seg.cell(i)) // a value, the close, or our cancel's claim came first
      finally owner.endWait()

  /** An FAA reader that came to its rendezvous cell first has marked it (`mark`, a [[SpinMark]]):
    * a sender that finds the mark swaps its value in and returns at once, for the value is as
    * good as received: this reader takes it (its cancel, which claims a marked cell with one CAS,
    * can no longer), unless a listener read that read R before our FAA takes it first, and then
    * we retry with a new index as after any TAKEN cell. So the sender's hand-off costs one CAS,
    * where depositing and waiting for DONE costs it a round trip of the cell's line. Spins up to
    * `budget`; then takes the mark back and parks the usual way, unless a value, the close or our
    * cancel's claim (INTERRUPTED_RECEIVE, which the general path ends with) came first.
    */
  private def spinForSender(seg: Segment, i: Int, r: Long, async: Async, budget: Int, mark: SpinMark): AnyRef =
    var state = spinWhileHeld(seg, i, mark, budget, lastSender)
    if state eq mark then
      if seg.cas(i, mark, null) then return updateCellReceive(seg, i, r, async)
      state = seg.cell(i) // CAS unsuccessful: a value, the close or our cancel's claim came meanwhile
    takeOrGeneral(seg, i, r, async, state)

  /** A rendezvous FAA reader's last step: takes the value `state` it saw in its cell with one CAS
    * to DONE, or leaves anything else to the general path. A CAS, not a write: a listener read
    * that read R before our FAA may be reserving the value (then it is theirs if they take it,
    * and we retry), and a sender whose spin ran out may be trading it for its Waiter; the general
    * path handles those, a parked party and CLOSED. Inline: both callers are on every hand-off.
    */
  private inline def takeOrGeneral(seg: Segment, i: Int, r: Long, async: Async, state: AnyRef | Null): AnyRef =
    if isValue(state) && seg.cas(i, state, DONE) then state.nn
    else updateCellReceive(seg, i, r, async)

  /** One cell, from the FAA reader's side: a value, or Outcome.Failed, or Outcome.FoundClosed. */
  private def updateCellReceive(seg: Segment, i: Int, r: Long, async: Async): AnyRef =
    var inFlight = SenderPatience // for a sender that has taken this index to write it
    var state = seg.cellForUpdate(i) // most often a value, which the CAS below takes
    while true do
      if state == null || (state eq IN_BUFFER) then
        if r >= (sendersAndClosed & CounterMask) then
          // no sender has this index yet: park here (born cancelled if our future is cancelled)
          val w = Waiter(Thread.currentThread, null, async.runtime)
          w.register(async)
          if seg.cas(i, state, w) then
            expandBuffer() // our index moved the buffer window on
            return w.awaitReceive(seg, i, async, this)
          w.unregister(async)
          // else: CAS unsuccessful, repeat
        else if inFlight > 0 then
          // a sender has taken this index and is between its FAA and its write
          awaitCell(seg, i, inFlight)
          inFlight = 0
        else
          // the sender of this index is on its way but has not written: poison the cell rather
          // than wait; it will retry elsewhere, and so do we
          if seg.cas(i, state, BROKEN) then
            expandBuffer()
            return Outcome.Failed
          // else: CAS unsuccessful, repeat
      else state match
        case w: Waiter => // a sender is parked here; RESUMING keeps expandBuffer out meanwhile
          if seg.cas(i, w, RESUMING) then
            if w.tryResume(Waiter.RESUMED) then
              seg.setCell(i, DONE)
              if isRendezvous && CarrierOf == null then woke(w, sender = false)
              expandBuffer()
              return w.payload
            else
              settleCancelled(seg, i, RESUMING, sender = true) // its cancel won; we hold the cell
              return Outcome.Failed
          // else: CAS unsuccessful, repeat
        case _: Reserved => spinWait() // a listener read is deciding on this cell
        case _ =>
          if state eq RESUMING then spinWait() // expandBuffer is resuming the sender
          else if state eq INTERRUPTED_SEND then return Outcome.Failed // nothing here; the window did not count it
          else if state eq VOID then return Outcome.Failed // a refused send branch, which moved B for it
          else if state eq TAKEN then
            // a listener read took the value before our FAA reached it, and could not move R
            expandBuffer()
            return Outcome.Failed
          else if state eq CLOSED then return Outcome.FoundClosed
          else if (state eq INTERRUPTED_RECEIVE) && isRendezvous then
            // no one but our future's cancel writes this in a cell whose reader still reads it: it
            // claimed the cell (a rendezvous reader's, marked or empty: SpinMark) and counted it
            throw CancellationException("cancelled while reading")
          else if (state eq DONE) || (state eq BROKEN) || (state eq INTERRUPTED_RECEIVE) || isMark(state) then
            illegal("receive", state, seg, i)
          else
            // a buffered value (elimination). A CAS, not a write: a listener read may be
            // reserving it at this moment, and then it is theirs if they accept
            if seg.cas(i, state, DONE) then
              expandBuffer()
              return state
            // else: CAS unsuccessful (reserved), repeat
      state = seg.cell(i)
    throw IllegalStateException("unreachable")

  // =============================================================================================
  // Listener reads: canRead, tryRead (deviation 5)

  val canRead: Async.Source[Try[T]] = new Async.OriginalSource[Try[T]]:
    def poll(k: Listener[Try[T]]): Boolean =
      val took = offerHead(k)
      if took then notifyListeners() // the head moved: a filtering listener may want the next value
      took
    def onComplete(k: Listener[Try[T]]): Unit =
      val reg = Registration(k, SegmentChannel.this)
      listeners.add(reg) // register first, then look: a sender depositing after our look sees us
      if offerHead(reg) then
        listeners.remove(reg)
        notifyListeners()
      else if reg.isDone then listeners.remove(reg)
    def dropListener(k: Listener[Try[T]]): Unit = listeners.remove(Registration(k, SegmentChannel.this))

  def tryRead(): Option[Try[T]] = canRead.poll()

  /** Registers `k` as the channel's tap, a standing listener: it is offered values as a `canRead`
    * listener is, but stays registered after it takes one, until `untap(k)`. One registration
    * thus reads a stream of values, each in the thread that made it ready, and no thread of the
    * reader's is woken. A value is offered either as the head (the cell held reserved while `k`
    * decides, so in order) or, by a send that finds the channel empty, before it ever reaches a
    * cell (`forward`); so offers may overlap, and a tap must let one finish before it decides on
    * the next. The closed failure may be offered more than once. False if the channel has a tap
    * already. The multiplexer's relay (doc/adr/0018).
    */
  private[async] def tap(k: Tap[T]): Boolean =
    TapField.compareAndSet(this, null, k) && {
      notifyListeners() // register first, then look: a sender depositing after our look sees us
      true
    }

  /** Ends a `tap`; an offer already under way may still complete. */
  private[async] def untap(k: Tap[T]): Unit = TapField.compareAndSet(this, k, null)

  /** Offers the head value (or the closed failure) to `k`; true iff `k` took it. */
  private def offerHead(k: Listener[Try[T]]): Boolean =
    while true do
      val r = receivers
      // The common case of a busy channel first: a value already in the head cell. A cell holds a
      // value only below S and below closedAt, so neither is read: S's line stays with the
      // senders, who write it at every send (reading it cost a polling reader most of its time).
      val hinted = receiveSegment
      if hinted.id == r / SegmentSize then
        val i = (r % SegmentSize).toInt
        val state = hinted.cellForUpdate(i) // most often a value, which offerValue's CAS reserves
        if isValue(state) then
          val took = offerValue(k, hinted, i, r, state.nn)
          if took != Retry then return took == Took
        // and of an empty one: no sender has written the head (it notifies when it does), which
        // is all the slow path below would find too, once it had read S, unless closed
        else if (state == null || (state eq IN_BUFFER)) && r < closedAt then return false
      val s = sendersAndClosed & CounterMask
      if r >= closedAt then return k(Failure(closedException())) // closed and drained
      if r >= s then return false // nothing sent that no reader has claimed
      val seg = segmentOf(r)
      if seg == null then return k(Failure(closedException())) // beyond the closed chain
      if seg.id != r / SegmentSize then
        rCounter.compareAndSet(r, seg.id * SegmentSize) // removed segment: skip it
      else
        val i = (r % SegmentSize).toInt
        val state = seg.cell(i)
        if state == null || (state eq IN_BUFFER) then return false // its sender has not written yet; it will notify
        else state match
          case w: SelectSender =>
            // a send branch: its select is asked first (it may have been won elsewhere), and the
            // value it sends is then a value at the head like any other, offered to `k` next
            // round; a select's read is never offered its own send (Go's rule too)
            if Listener.sameWaiter(w.k, k) then
              // its own send is first in line: moved behind the values sent after it, if any, so
              // that the read can take them (Go's select reads another's send here too)
              if (sendersAndClosed & CounterMask) <= r + 1 || !w.requeue() then return false
              // else: the head is void now; look again
            else
              val reserved = Hold
              if seg.cas(i, w, reserved) then
                if w.tryResume(Waiter.RESUMED) then seg.setCell(i, w.payload)
                else settleCancelled(seg, i, reserved, sender = true) // the branch lost: look again
              // else: CAS unsuccessful, repeat
          case w: Waiter =>
            if w.isSender then
              val reserved = Hold
              if seg.cas(i, w, reserved) then
                if w.tryClaim() then
                  val took = offerTo(k, w.payload, seg, i, w)
                  if took then
                    w.resumeClaimed()
                    commitHead(seg, i, r)
                    return true
                  else return false
                else settleCancelled(seg, i, reserved, sender = true) // its cancel won; we hold the cell; look again
              // else: CAS unsuccessful, repeat
            // else: a parked reader: R has moved past r, look again
          case _: Reserved => spinWait() // another listener read is deciding
          case _ =>
            if state eq RESUMING then spinWait()
            else if state eq INTERRUPTED_SEND then rCounter.compareAndSet(r, r + 1) // skip; not a window cell
            else if state eq VOID then rCounter.compareAndSet(r, r + 1) // skip; its send branch moved B
            else if state eq TAKEN then { if rCounter.compareAndSet(r, r + 1) then expandBuffer() } // help commit
            else if state eq CLOSED then return k(Failure(closedException()))
            else if (state eq DONE) || (state eq BROKEN) || (state eq INTERRUPTED_RECEIVE) || isMark(state) then
              () // R moved on
            else
              // a buffered value
              val took = offerValue(k, seg, i, r, state)
              if took != Retry then return took == Took
    false

  /** Reserves the buffered value `v` in the head cell `i` (index `r`) and offers it to `k`: Took,
    * Refused (the cell restored), or Retry (the cell changed before it could be reserved).
    */
  private def offerValue(k: Listener[Try[T]], seg: Segment, i: Int, r: Long, v: AnyRef): Int =
    if !seg.cas(i, v, Hold) then Retry
    else if offerTo(k, v, seg, i, null) then
      commitHead(seg, i, r)
      Took
    else Refused

  /** Offers `v` (from the reserved cell `i`) to `k`; on refusal or exception restores the cell. */
  private def offerTo(k: Listener[Try[T]], v: AnyRef, seg: Segment, i: Int, sender: Waiter | Null): Boolean =
    val took =
      try k(Success(decode[T](v)))
      catch
        case e: Throwable =>
          restore(seg, i, v, sender)
          throw e
    if !took then restore(seg, i, v, sender)
    took

  /** Undoes a reservation that the listener refused. A sender's claim is released before the
    * cell is restored: if the sender's future was cancelled while we decided, the refusal cancels
    * it, and we settle the cell; if its thread cancels it once released, it may find the cell
    * still reserved and leave it to us, so we look at its word again after restoring the cell.
    */
  private def restore(seg: Segment, i: Int, v: AnyRef, sender: Waiter | Null): Unit =
    if sender == null then seg.cas(i, Hold, v)
    else if sender.unclaim() then settleCancelled(seg, i, Hold, sender = true)
    else if seg.cas(i, Hold, sender) && sender.isCancelled then settleCancelled(seg, i, sender, sender = true)

  /** The listener took the head `r`: mark the cell and move R past it; whoever moves R runs
    * expandBuffer for the index (a FAA reader that already owns `r` finds TAKEN and does it).
    * Callers outside `notifyListeners` then notify: the head moved.
    */
  private def commitHead(seg: Segment, i: Int, r: Long): Unit =
    seg.endHold(i, TAKEN) // the CAS on R right after orders it
    if rCounter.compareAndSet(r, r + 1) then expandBuffer()
    seg.cleanPrev()

  /** Offers the head to registered listeners until a full pass takes nothing. */
  private[async] def notifyListeners(): Unit =
    val t = standing
    if t != null then
      // as long as it takes values and stays attached (untap may come between two offers); the
      // closed failure, which a tap may take too, ends it
      while (standing eq t) && offerHead(t) && receivers < closedAt do ()
    if !listeners.isEmpty then
      var progress = true
      while progress do
        progress = false
        val it = listeners.iterator()
        while it.hasNext do
          val reg = it.next()
          if reg.isDone then listeners.remove(reg)
          else if offerHead(reg) then
            listeners.remove(reg)
            progress = true

  // =============================================================================================
  // Send branches: canSend (deviation 10)

  def canSend(x: T): Async.Source[Try[Unit]] = SendBranch(encode(x))

  private final class SendBranch(v: AnyRef) extends SelectSender.Branch with Async.OriginalSource[Try[Unit]]:
    def poll(k: Listener[Try[Unit]]): Boolean = k match
      case _: Listener.Taker[?] => takerSend(v, k)
      case _                    => sendBranch(v, k, null)
    def onComplete(k: Listener[Try[Unit]]): Unit = sendBranch(v, k, this)
    def dropListener(k: Listener[Try[Unit]]): Unit =
      val w = take(k)
      if w != null then w.abandon()

  /** A send branch polled by a [[Listener.Taker]] (a select's first look, `poll()`): since the
    * taker says yes to any offer, this is `trySend`, with the taker told after, on the send's own
    * path (a branch's cell held while `k` decides costs a second atomic step and a longer path:
    * in a select loop over a busy channel, twice a plain send's time).
    */
  private def takerSend(v: AnyRef, k: Listener[Try[Unit]]): Boolean =
    doSend(v, null) match
      case Outcome.FoundClosed => k(Failure(closedException()))
      case Outcome.NotSent     => false
      case _                   => k(SelectSender.Sent)

  /** A send branch offers its value: `k` is asked first wherever the send can complete without
    * waiting (a buffer cell, a reader that has taken the index, a reader spinning or parked in
    * the cell), while that cell is held, so that a refusal sends nothing; where it would wait,
    * `branch` (onComplete) parks a [[SelectSender]] in the cell, which whoever comes to resume it
    * asks then; `poll` (no branch) gives up as trySend does. True iff `k` took the send now.
    */
  private[async] def sendBranch(v: AnyRef, k: Listener[Try[Unit]], branch: SelectSender.Branch | Null): Boolean =
    while !k.isDone do
      val before = sendersAndClosed
      if isClosedWord(before) then return k(Failure(closedException()))
      if branch == null && mustWait(before & CounterMask) && noListeners then return false // poll: nothing to do
      val start = sendSegment
      val scf = sCounter.getAndAdd(1L)
      if isClosedWord(scf) then return k(Failure(closedException()))
      val s = scf & CounterMask
      val i = (s % SegmentSize).toInt
      val seg = segmentOfSend(start, scf)
      if seg == null then return k(Failure(closedException()))
      if seg.id == s / SegmentSize then // else: its segment was removed; retry
        val outcome = branchCell(seg, i, s, v, k, branch)
        if outcome == BranchTook then return true
        else if outcome == BranchRefused || outcome == BranchParked then return false
        else if outcome == BranchClosed then return k(Failure(closedException()))
        else seg.cleanPrev() // BranchRetry: a poisoned cell or a cancelled reader; a new index
    false

  /** A send branch refused in the cell it holds, which no reader has parked in: the cell becomes
    * VOID, which readers pass without moving B, and B is moved on here instead, now. So the
    * buffer's room is what it was at once (as if index `i` had never been taken), not only once
    * a reader has passed the cell, as it would be if the cell counted as a value taken (TAKEN).
    * The expansion that counts the cell itself (if one reaches it later) counts it as it would any
    * other: exactly one expansion per index, as for every index.
    */
  private def voidCell(seg: Segment, i: Int): Unit =
    seg.endHold(i, VOID)
    expandBuffer()

  /** One cell for a send branch; a Branch* code. */
  private def branchCell(seg: Segment, i: Int, s: Long, v: AnyRef, k: Listener[Try[Unit]], branch: SelectSender.Branch | Null): Int =
    while true do
      val state = seg.cell(i)
      if state == null && mustWait(s) then
        if branch == null && noListeners then
          if seg.cas(i, null, INTERRUPTED_SEND) then
            seg.cellInterruptedSender()
            return BranchRefused
        else
          val w = SelectSender(v, k, this, seg, i, branch)
          if branch != null then branch.remember(w) // before it is published: a drop must find it
          if seg.cas(i, null, w) then
            notifyListeners() // a listener read may take the value from the waiter
            if branch != null then return BranchParked
            // poll with listener reads registered: they have looked at it; withdraw it unless taken
            return if w.withdraw() then BranchTook else BranchRefused
          if branch != null then branch.forget(w)
        // else: CAS unsuccessful, repeat
      else if state == null || (state eq IN_BUFFER) || isMark(state) then
        // a buffer cell, or the reader of this index is on its way or spins here: hold the cell
        // while k decides (a reader spins on the reservation); no, and the cell is VOID
        if seg.cas(i, state, Hold) then
          val took = try k(SelectSender.Sent) catch
            case e: Throwable =>
              voidCell(seg, i)
              throw e
          if took then
            seg.endHold(i, v)
            if !isMark(state) then notifyListeners() // a listener read may take the value
            return BranchTook
          voidCell(seg, i)
          return BranchRefused
        // else: CAS unsuccessful, repeat
      else state match
        case w: Waiter => // a parked reader: claimed (its cancel waits) while k decides
          val reserved = Hold
          if seg.cas(i, w, reserved) then
            if !w.tryClaim() then
              settleCancelled(seg, i, reserved, sender = false) // its cancel won; we hold the cell
              return BranchRetry
            val took = try k(SelectSender.Sent) catch
              case e: Throwable =>
                if w.retryClaimed() then settleCancelled(seg, i, reserved, sender = false) else seg.setCell(i, TAKEN)
                throw e
            if took then
              w.resumeClaimedWith(v)
              seg.setCell(i, DONE)
              return BranchTook
            // refused: the reader takes a new index (or its cancel, if one came meanwhile, ends it)
            if w.retryClaimed() then settleCancelled(seg, i, reserved, sender = false) else seg.setCell(i, TAKEN)
            return BranchRefused
          // else: CAS unsuccessful, repeat
        case _ =>
          if (state eq INTERRUPTED_RECEIVE) || (state eq BROKEN) then return BranchRetry
          else if state eq CLOSED then return BranchClosed
          else illegal("send branch", state, seg, i)
    throw IllegalStateException("unreachable")

  // =============================================================================================
  // Buffer expansion

  /** Moves B on by one cell that can hold a value: releases a sender parked there into the buffer,
    * marks an empty cell IN_BUFFER for a sender in flight, or, when no sender has taken that
    * index yet, only counts it (that sender will see it is below B). Only finite buffered channels.
    */
  private def expandBuffer(): Unit =
    if isBuffered then
      var done = false
      while !done do
        var seg = bufferEndSegment
        val b = bCounter.getAndAdd(1L)
        val id = b / SegmentSize
        var skip = false
        if seg.id != id then
          val found = findAndMoveForward(BufferEndSegment, seg, id)
          if found == null then done = true // closed chain: nowhere to expand
          else
            seg = found
            // a removed segment held only interrupted senders (a reader's cell keeps its segment
            // alive until processed here), so skipping it loses no window cell
            if seg.id != id then
              bCounter.compareAndSet(b + 1, seg.id * SegmentSize)
              skip = true
        else ()
        if !done && !skip then
          val scf = sendersAndClosed
          if !isClosedWord(scf) && (scf & CounterMask) <= b then
            // No sender has taken index b yet (the paper's b >= S): the one that does will find b
            // below B and buffer its value, so the cell is not marked IN_BUFFER (a CAS on a line
            // the sender is about to write).
            seg.cellProcessed()
            done = true
          else updateCellExpand(seg, (b % SegmentSize).toInt, !isClosedWord(scf)) match
            case Outcome.Expanded =>
              seg.cellProcessed()
              done = true
            case Outcome.FoundClosed => seg.cellProcessed() // keep going: closed cells count as processed
            case _                   => () // Failed: an interrupted sender, not a window cell; expand again

  /** One cell for `expandBuffer`. `open`: the channel was open when S was read, and S was past
    * this index, so a sender took it before any close and will write it.
    */
  private def updateCellExpand(seg: Segment, i: Int, open: Boolean): Outcome =
    var state = seg.cellForUpdate(i) // most often a parked sender, whom the CAS below resumes
    while true do
      if state == null then
        if seg.cas(i, null, IN_BUFFER) then
          // the sender to come will buffer its value here (or a reader breaks the cell); after a
          // close, S counts sends that found it closed and write nothing, and close closes the cell
          if open then seg.markKept()
          return Outcome.Expanded
        // else: CAS unsuccessful, repeat
      else state match
        case w: Waiter =>
          if !w.isSender then return Outcome.Expanded // a parked reader: its own expansion already covered it
          else if seg.cas(i, w, RESUMING) then
            if w.tryResume(Waiter.RESUMED) then
              seg.setCell(i, w.payload) // the sender's value is now a buffered value
              seg.markKept()
              return Outcome.Expanded
            else
              settleCancelled(seg, i, RESUMING, sender = true) // its cancel won; we hold the cell
              return Outcome.Failed
          // else: CAS unsuccessful, repeat
        case _: Reserved => spinWait() // a listener read is deciding; wait for the outcome
        case _ =>
          if state eq RESUMING then spinWait()
          else if state eq INTERRUPTED_SEND then return Outcome.Failed
          else if state eq CLOSED then return Outcome.FoundClosed
          else return Outcome.Expanded // DONE, TAKEN, BROKEN, INTERRUPTED_RECEIVE, or a buffered value
      state = seg.cell(i)
    throw IllegalStateException("unreachable")

  // =============================================================================================
  // Closing (deviation 4)

  def isClosed: Boolean = isClosedWord(sendersAndClosed)

  def close(): Unit = end(SegmentChannel.NoCause)

  def error(cause: Throwable): Unit =
    if cause == null then throw NullPointerException("error(null): a channel's error needs a cause")
    end(cause)

  def cancel(): Unit =
    end(ChannelCancelledException())
    // Take and drop what was sent before: buffered values, and the values of senders parked at
    // this moment (which then return, as sent). A None is a sender between its claim of a cell and
    // its deposit, or a listener deciding on the head: either ends in a moment (no sender starts
    // now), so it is looked at again.
    var drained = false
    while !drained do
      canRead.poll() match
        case Some(Failure(_)) => drained = true
        case Some(_)          => ()
        case None             => SegmentChannel.spinWait()

  def closeCause: Option[Throwable] = ending match
    case t: Throwable => Some(t)
    case _            => None

  /** What a send or read finds once the channel is closed: with the cause, if it was an error. */
  private def closedException(): ChannelClosedException = ChannelClosedException(closeCause.orNull)

  /** Ends the channel as `how` says, if nothing ended it before; closes it either way, so that no
    * send that starts after this returns is accepted. `ending` is decided before the closed bit is
    * set, so whoever sees the bit sees how it ended.
    */
  private def end(how: AnyRef): Unit =
    EndingField.compareAndSet(this, null, how)
    var scf = sendersAndClosed
    while !isClosedWord(scf) && !sCounter.compareAndSet(scf, scf | ClosedBit) do
      scf = sendersAndClosed
    if !isClosedWord(scf) then // we closed it
      val last = scf & CounterMask
      closedAt = last
      val lastSeg = sendSegment.closeChain()
      closeCellsFrom(last, lastSeg)
      // B is not moved over the rest of the chain (jox does, to reclaim segments of closed
      // cells): that would release senders parked at the close into the buffer, beyond its
      // capacity; they are released by the readers that take their values, as before the close
      notifyListeners()

  /** Closes every cell with index >= `last`, from the tail backwards, so that a reader never
    * finds a closed cell below an open one.
    */
  private def closeCellsFrom(last: Long, tail: Segment): Unit =
    var seg: Segment | Null = tail
    while seg != null && seg.id >= last / SegmentSize do
      val from = if seg.id == last / SegmentSize then (last % SegmentSize).toInt else 0
      var i = SegmentSize - 1
      while i >= from do
        closeCell(seg, i)
        i -= 1
      seg = seg.prev

  private def closeCell(seg: Segment, i: Int): Unit =
    var done = false
    while !done do
      val state = seg.cell(i)
      if state == null || (state eq IN_BUFFER) || isMark(state) then
        // (a spinning reader finds CLOSED when it looks again)
        if seg.cas(i, state, CLOSED) then
          seg.cellInterruptedReceiver() // counted like an interrupted reader (jox does the same)
          done = true
        // else: CAS unsuccessful, repeat
      else state match
        case w: Waiter => // a parked reader (no sender reaches this index)
          if w.tryResume(ChannelClosed) then
            seg.setCell(i, CLOSED)
            seg.cellInterruptedReceiver()
            done = true
          else done = settleCancelled(seg, i, w, sender = false) // its cancel won; else its thread settled it: look again
        case _ => done = true // INTERRUPTED_*, BROKEN, DONE, CLOSED: nothing to wake

  // =============================================================================================
  // Segments

  /** Finds segment `id` from `start` (appending as needed) and moves the reference `ref` forward
    * to it; a later segment if `id`'s was removed; null if the chain is closed before `id`.
    */
  private def findAndMoveForward(ref: VarHandle, start: Segment, id: Long): Segment | Null =
    while true do
      val seg = findSegment(start, id)
      if seg == null then return null
      if moveForward(ref, seg.nn) then return seg
      // else: seg was removed before we could point at it; find again
    null

  /** Moves `ref` forward to `to` (never backwards), keeping the pointer counts; false if `to`
    * was removed meanwhile.
    */
  private def moveForward(ref: VarHandle, to: Segment): Boolean =
    while true do
      val cur = ref.getVolatile(this).asInstanceOf[Segment]
      if cur.id >= to.id then return true // someone moved it at least as far
      if !to.tryIncPointers() then return false
      if ref.compareAndSet(this, cur, to) then
        if cur.decPointers() then cur.remove()
        return true
      else if to.decPointers() then to.remove() // our extra pointer was not used; repeat
    false

  /** The segment holding index `r` for a listener read, without moving any reference; null if
    * the chain is closed before it; a later segment if it was removed.
    */
  private def segmentOf(r: Long): Segment | Null =
    val start = receiveSegment
    // if receiveSegment is already past r, then R has moved past r too (readers move the
    // reference only to segments of indices they took): the caller's CAS on R fails and it looks again
    if start.id > r / SegmentSize then start
    else
      val seg = findSegment(start, r / SegmentSize)
      // move the reference along, as a FAA reader would: a channel read only through listeners
      // must not walk (and keep alive) every segment since the first
      if seg != null && seg.id > start.id then moveForward(ReceiveSegment, seg)
      seg

  // =============================================================================================
  // Debugging

  /** Checks the invariants of a quiescent channel (no operation in progress); throws an
    * AssertionError carrying `dump` when one is broken.
    */
  def checkInvariants(): Unit =
    def fail(what: String): Nothing = throw AssertionError(s"channel invariant broken: $what\n$dump")
    val s = sendersAndClosed & CounterMask
    val r = receivers
    val b = bufferEnd
    val last = closedAt
    var seg: Segment | Null = earliestSegment
    var prevId = -1L
    var buffered = 0
    while seg != null do
      if seg.id <= prevId then fail(s"segment ids do not increase: ${seg.id} after $prevId")
      prevId = seg.id
      var interrupted = 0
      var processedMissing = 0
      var i = 0
      while i < SegmentSize do
        val idx = seg.id * SegmentSize + i
        val st = seg.cell(i)
        val code = cellCode(st)
        if (st eq INTERRUPTED_SEND) || (st eq INTERRUPTED_RECEIVE) || (st eq CLOSED) then interrupted += 1
        if isBuffered && idx >= b && !(st eq INTERRUPTED_SEND) then processedMissing += 1
        if st.isInstanceOf[Reserved] || (st eq RESUMING) || isMark(st) then
          fail(s"cell $idx is $code in a quiescent channel")
        if idx < math.min(s, r) && !(idx >= last) then
          if !isTerminal(st) then fail(s"cell $idx below both counters is $code, not finished")
        if st != null && !isTerminal(st) && !(st eq IN_BUFFER) then
          st match
            case w: Waiter if !w.isSender =>
              if idx < s then fail(s"reader parked in cell $idx although S=$s")
            case w: Waiter =>
              if idx < r then fail(s"sender parked in cell $idx although R=$r")
              if isBuffered && idx < b then fail(s"sender parked in buffer cell $idx (B=$b)")
              if capacity == Unbounded then fail(s"sender parked in an unbounded channel, cell $idx")
            case _ => // a buffered value
              if idx < r then fail(s"value left behind in cell $idx below R=$r")
              // one exception: a send branch resumed by a listener read that then refused leaves its
              // value at the head (Channel.canSend)
              if isRendezvous && idx != r then fail(s"value in rendezvous cell $idx of a quiescent channel (its sender should have parked)")
              buffered += 1
        i += 1
      val (pointers, notProcessed, notInterrupted) = seg.counters
      if notInterrupted != SegmentSize - interrupted then
        fail(s"segment ${seg.id}: counter says ${SegmentSize - notInterrupted} interrupted cells, found $interrupted")
      // A kept segment stops counting processed cells: its counter may only say more of them
      if isBuffered && (if seg.kept then notProcessed < processedMissing else notProcessed != processedMissing) then
        fail(s"segment ${seg.id}: counter says $notProcessed unprocessed cells, found $processedMissing")
      if seg.kept && interrupted == SegmentSize then fail(s"segment ${seg.id} is kept, but every cell is interrupted")
      val refs = (if sendSegment eq seg then 1 else 0) + (if receiveSegment eq seg then 1 else 0) +
        (if bufferEndSegment eq seg then 1 else 0)
      if pointers != refs then fail(s"segment ${seg.id}: counter says $pointers pointers, found $refs")
      seg = seg.liveNext
    if isBuffered && buffered > capacity then fail(s"$buffered values buffered, capacity $capacity")

  /** Counters, then every reachable segment's cells as one letter each (see `cellCode`). */
  def dump: String =
    val sb = StringBuilder()
    val scf = sendersAndClosed
    sb ++= s"SegmentChannel(capacity=$capacity, S=${scf & CounterMask}, R=$receivers, B=$bufferEnd, "
    sb ++= s"closed=${isClosedWord(scf)}, closedAt=${if closedAt == Long.MaxValue then "-" else closedAt}, "
    sb ++= s"listeners=${listeners.size}, tapped=${standing != null}, segments: send=${sendSegment.id} receive=${receiveSegment.id} bufferEnd=${bufferEndSegment.id})"
    var seg: Segment | Null = earliestSegment
    while seg != null do
      sb ++= s"\n  $seg  "
      var i = 0
      while i < SegmentSize do
        sb ++= cellCode(seg.cell(i))
        i += 1
      seg = seg.liveNext
    sb.result()

  /** Listeners waiting on `canRead` (for leak tests). */
  def registeredListeners: Int = listeners.size

  /** Senders parked in the channel now (for tests that must know a sender waits). */
  def parkedSenders: Int =
    var n = 0
    var seg: Segment | Null = earliestSegment
    while seg != null do
      var i = 0
      while i < SegmentSize do
        seg.cell(i) match
          case w: Waiter if w.isSender => n += 1
          case _                       => ()
        i += 1
      seg = seg.liveNext
    n

  /** The number of segments reachable from the earliest segment reference (for leak tests). */
  def segmentCount: Int =
    var n = 0
    var seg: Segment | Null = earliestSegment
    while seg != null do
      n += 1
      seg = seg.liveNext
    n

  // (written without Scala collections: Lincheck cannot instrument them when it runs checkInvariants)
  private def earliestSegment: Segment =
    val (s, r, b) = (sendSegment, receiveSegment, bufferEndSegment)
    val sr = if s.id <= r.id then s else r
    if (b ne NoSegment) && b.id < sr.id then b else sr

  private def illegal(op: String, state: AnyRef, seg: Segment, i: Int): Nothing =
    throw IllegalStateException(s"$op found ${cellCode(state)} in cell ${seg.id * SegmentSize + i}\n$dump")

  override def toString: String =
    val kind = capacity match
      case 0         => "rendezvous"
      case Unbounded => "unbounded"
      case n         => s"buffered($n)"
    s"Channel($kind${if isClosed then ", closed" else ""})"

/** Definitions shared by every channel. The cell states are in CellState.scala (with the catalogue),
  * the results of the algorithm's steps in Outcome.scala, waiters in Waiter.scala, segments in
  * Segment.scala and the padded counters in Padding.scala.
  */
private[async] object SegmentChannel:
  /** A virtual thread's carrier (null while it is not mounted: parked, or queued to run), where
    * java.lang is open to us (`--add-opens java.base/java.lang=ALL-UNNAMED`, as the launcher
    * has it); else null, and the parties go by the hint of `senderWoke` / `readerWoke`. */
  @static private val CarrierOf: VarHandle | Null =
    try
      if java.lang.Boolean.getBoolean("asyncpipe.channel.noCarrierCheck") then throw UnsupportedOperationException()
      val c = Class.forName("java.lang.VirtualThread")
      MethodHandles.privateLookupIn(c, MethodHandles.lookup()).findVarHandle(c, "carrierThread", classOf[Thread])
    catch case _: Throwable => null
  /** Whether `t` is a virtual thread seen not mounted on a carrier: it cannot reach its cell
    * until it is, so a party that waits for it does not spin. */
  private inline def notRunning(t: Thread | Null): Boolean =
    t != null && CarrierOf != null && t.isVirtual && carrierOf(t) == null
  private def carrierOf(t: Thread): Thread | Null = CarrierOf.nn.getOpaque(t).asInstanceOf[Thread | Null]
  import CellState.*

  final val Unbounded = -1
  /** Cells per segment: 256. The paper, jox and kotlinx use 32; on two cores, where a value's
    * sender and reader park and wake each other, moving to a new segment is dear (a fresh
    * segment, three references moved on, the old one unlinked), and 256 moved buffered(16) 1 to 1
    * from 0.78-0.85x ArrayBlockingQueue to 1.02-1.05x (doc/adr/0011, "Segment size").
    */
  final val SegmentSize = 256
  /** Whether a channel of `capacity` spreads its cells over cache lines ([[Segment.slot]]): a
    * rendezvous does (its one to one moved 20-30 % more values spread); buffered channels do not
    * (buffered(1) and buffered(16) read the same either way, buffered(100) a little fewer spread:
    * doc/adr/0011, "Cell layout").
    */
  def spreadsCells(capacity: Int): Boolean = capacity == 0

  // ---------------------------------------------------------------------------------------------
  // The senders word: counter and closed bit

  private final val ClosedBit = 1L << 62
  private final val CounterMask = ClosedBit - 1
  private inline def isClosedWord(scf: Long): Boolean = (scf & ClosedBit) != 0

  // ---------------------------------------------------------------------------------------------
  // Cell states: the catalogue is at CellState; values, waiters and reservations are the rest.

  private inline def isMark(st: AnyRef | Null): Boolean = st.isInstanceOf[SpinMark]

  /** Cell `i` held a waiter whose cancel won its word, and holds `from` now: the waiter itself,
    * or the state that a party that found it there put in its place (RESUMING, a Reserved, a
    * rendezvous sender's swapped value). Moves the cell to INTERRUPTED_SEND or
    * INTERRUPTED_RECEIVE and counts it for the segment: whoever of the waiter's thread and that
    * party gets there first (the other's CAS fails, as it must: once, and only once). False if
    * the cell held something else.
    */
  private[async] def settleCancelled(seg: Segment, i: Int, from: AnyRef, sender: Boolean): Boolean =
    seg.cas(i, from, if sender then INTERRUPTED_SEND else INTERRUPTED_RECEIVE) && {
      if sender then seg.cellInterruptedSender() else seg.cellInterruptedReceiver()
      true
    }

  /** The stored form of a `null` value: to the cells a value like any other (not a CellState). */
  private object NullValue:
    override def toString: String = "NullValue"

  private inline def encode(x: Any): AnyRef = if x == null then NullValue else x.asInstanceOf[AnyRef]
  private inline def decode[T](v: AnyRef): T = (if v eq NullValue then null else v).asInstanceOf[T]

  /** Whether a cell's state is a value (a buffered one, or a released sender's): anything but
    * empty, a cell state, a waiter or a reservation (NullValue, the stored `null`, is a value).
    */
  private def isValue(st: AnyRef | Null): Boolean = st match
    case null                    => false
    case _: CellState            => false
    case _: Waiter | _: Reserved => false
    case _                       => true

  // Outcomes of branchCell
  private inline val BranchTook = 1
  private inline val BranchRefused = 2
  private inline val BranchParked = 3
  private inline val BranchRetry = 4
  private inline val BranchClosed = 5

  // Outcomes of offerValue
  private inline val Took = 1
  private inline val Refused = 0
  private inline val Retry = -1

  private def isTerminal(st: AnyRef): Boolean =
    (st eq TAKEN) || (st eq VOID) || (st eq DONE) || (st eq BROKEN) || (st eq INTERRUPTED_SEND) || (st eq INTERRUPTED_RECEIVE) || (st eq CLOSED)

  private def cellCode(st: AnyRef | Null): String =
    if st == null then "_"
    else st match
      case w: Waiter   => if w.isSender then "s" else "r"
      case _: Reserved => "?"
      case _ =>
        if st eq IN_BUFFER then "b"
        else if st eq RESUMING then "~"
        else if isMark(st) then "w"
        else if st eq TAKEN then "T"
        else if st eq DONE then "D"
        else if st eq BROKEN then "X"
        else if st eq VOID then "o"
        else if st eq INTERRUPTED_SEND then "i"
        else if st eq INTERRUPTED_RECEIVE then "j"
        else if st eq CLOSED then "C"
        else "V"

  /** One round of waiting for another thread's short step (a reservation, a resume, a claim, a
    * race's decision). It gives up the carrier now and then: the thread we wait for may be a
    * virtual thread that has no carrier. A yield alone is not enough for that: a virtual thread
    * that yields goes back on its carrier's own queue when that queue holds other work, and a
    * carrier runs its own queue until it is empty before it looks at the queues that other
    * threads submit to (a thread unparked by a platform thread or a timer waits there). Two
    * waiters per carrier that only yield keep every carrier busy with each other for ever (a
    * stall found by ChannelStress; SpinWaitStarvation shows it). So a virtual thread also parks
    * for [[BackoffNanos]] now and then (about once in [[BackoffEvery]] rounds, some tens of µs
    * of spinning): its carrier's queue can then run dry, and it comes back through the queue
    * that the waiting thread is in. Every park in the library re-checks its condition, so a
    * permit this park consumes is not lost.
    */
  private[async] def spinWait(): Unit =
    val r = java.util.concurrent.ThreadLocalRandom.current().nextInt(BackoffEvery)
    if (r & 15) != 0 then Thread.onSpinWait()
    else if r == 0 && Thread.currentThread.isVirtual then java.util.concurrent.locks.LockSupport.parkNanos(BackoffNanos)
    else Thread.`yield`()
  private inline val BackoffEvery = 2048
  private inline val BackoffNanos = 50_000L

  // Spinning. Parking and unparking a virtual thread costs microseconds; a partner one step
  // behind costs tens of nanoseconds. So a party spins (Thread.onSpinWait, a bounded number of
  // times, watching one word) where the other is likely close, then parks: faster than parking
  // at once or yielding before parking, and an FAA reader that waits a little for a sender in
  // flight poisons almost no cells, where the paper's rule (poison at once) poisons many.
  // Spinning is pure loss where the partner waits for this very carrier
  // (-Djdk.virtualThreadScheduler.parallelism=1, one core, or both threads scheduled on one
  // carrier for a while, which happens on a busy machine): hence the channel's adaptive budget
  // (`spinBudget`), which falls to 0 there. The figures behind these choices are in
  // doc/adr/0011.

  /** How long an FAA reader waits for a sender that has taken the reader's index (S > r) but not
    * yet written the cell, before it poisons the cell (both then retry with new indexes). */
  private val SenderPatience: Int = 64
  /** The most a rendezvous party spins at each of its waits (a reader for the value, a sender for
    * its value to be taken, then on its waiter's word before parking); the channel's
    * [[spinBudget]] adapts below it. A partner whose carrier the OS took away for a moment comes
    * back within 2,048 spins more often than within fewer, and each park it saves costs both
    * parties microseconds; more spins gained no more (doc/adr/0011). */
  private val SpinMax: Int = 2048
  /** A budget that reached 0 is tried again at this size once per `ProbeEvery` waits, so that a
    * channel whose parties got carriers of their own again finds out. */
  private val SpinProbe: Int = 16
  private val ProbeEvery: Int = 256
  /** The words of `senderWoke` and `readerWoke`. */
  private final val Woke = 1
  private final val Skip = 2
  /** Virtual threads have one carrier (`-Djdk.virtualThreadScheduler.parallelism=1`, or one
    * CPU): a virtual thread's spin then holds the carrier its partner needs, and never pays. */
  private val OneCpu: Boolean = java.lang.Runtime.getRuntime.availableProcessors <= 1
  private val OneCarrier: Boolean =
    try Integer.getInteger("jdk.virtualThreadScheduler.parallelism", 2).intValue <= 1 catch case _: Exception => false

  /** `ending` of `close()`. */
  private object NoCause

  private val EndingField: VarHandle =
    MethodHandles.privateLookupIn(classOf[SegmentChannel[?]], MethodHandles.lookup())
      .findVarHandle(classOf[SegmentChannel[?]], "ending", classOf[AnyRef])

  private val TapField: VarHandle =
    MethodHandles.privateLookupIn(classOf[SegmentChannel[?]], MethodHandles.lookup())
      .findVarHandle(classOf[SegmentChannel[?]], "standing", classOf[Tap[?]])

  /** A cell held while a listener decides (a listener read's, or a send branch's: see
    * `branchCell`): the one object [[Hold]]. The holder knows what the cell held and puts it
    * back (or the outcome) itself; everyone else only waits for the hold to end, so one shared
    * marker serves every cell and a hold allocates nothing.
    */
  private[async] final class Reserved

  /** The hold of a cell (see [[Reserved]]). */
  private val Hold = Reserved()

  /** A listener that stays registered after it takes a value (see `SegmentChannel.tap`). */
  private[async] abstract class Tap[T] extends Listener[Try[T]]

  /** A listener waiting on `canRead`: lets one offer through, whoever offers (see OnceForwarder). */
  private final class Registration[T](k: Listener[Try[T]], ch: SegmentChannel[T]) extends Async.OnceForwarder[Try[T]](k, ch)

  /** The buffer-end reference of channels that do not move B. */
  private val NoSegment = Segment(-1, null, 0, false, false)

  // Channel fields
  private val lookup = MethodHandles.privateLookupIn(classOf[SegmentChannel[?]], MethodHandles.lookup())
  private val SendSegment = lookup.findVarHandle(classOf[SegmentChannel[?]], "sendSegment", classOf[Segment])
  private val ReceiveSegment = lookup.findVarHandle(classOf[SegmentChannel[?]], "receiveSegment", classOf[Segment])
  private val BufferEndSegment = lookup.findVarHandle(classOf[SegmentChannel[?]], "bufferEndSegment", classOf[Segment])

