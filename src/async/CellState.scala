package asyncpipe.async

import scala.annotation.static

/** A state of a channel's cell other than a value, a [[Waiter]] or a reservation: one instance a
  * state, compared by identity (`eq`). The one catalogue of what a cell can hold:
  *
  * {{{
  *   state                 set by                         moves to
  *   null (empty)          -                              IN_BUFFER, value, Waiter, BROKEN,
  *                                                        INTERRUPTED_SEND (trySend), CLOSED;
  *                                                        rendezvous: SPINNING_READER, and
  *                                                        INTERRUPTED_RECEIVE (the cancel of a
  *                                                        reader registered with a SpinMark)
  *   IN_BUFFER             expandBuffer: a buffer cell    value (sender), Waiter(reader), BROKEN, CLOSED
  *                         whose sender has not come
  *   SPINNING_READER       rendezvous FAA reader that     value (a sender hands it over and goes),
  *   (a SpinMark: shared,  came first and spins           null (the reader stops spinning), CLOSED,
  *   or the reader's own                                  INTERRUPTED_RECEIVE (the cancel of the
  *   in a future)                                         reader's future claims its own mark)
  *   value (any object)    sender: buffered or            DONE (FAA reader), Reserved (listener read),
  *                         eliminated; expandBuffer:      Waiter (a rendezvous sender that stopped
  *                         a released sender's value;     spinning and parks); INTERRUPTED_RECEIVE
  *                         rendezvous: a sender waiting   (a sender's value swapped over a reader
  *                         for its reader (spinning)      whose cancel won: settled by that sender
  *                                                        or the reader's thread)
  *   Waiter (reader)       FAA reader with no sender      DONE (sender resumed it), CLOSED (close),
  *                                                        Reserved (a send branch claimed it),
  *                                                        INTERRUPTED_RECEIVE (its cancel won the
  *                                                        word: settled by its thread, the sender
  *                                                        or the close that found it so);
  *                                                        rendezvous: the sender's swap puts its
  *                                                        value in first (then DONE, or
  *                                                        INTERRUPTED_RECEIVE)
  *   Waiter (sender)       sender that must wait          RESUMING, Reserved, INTERRUPTED_SEND
  *                         (also trySend's trial, and a   (its cancel or trial withdrawal: settled
  *                         send branch's SelectSender,    by its thread; a SelectSender's refusal:
  *                         which has no thread)           by the party that asked, or its
  *                                                        withdrawal: by the select), value (a
  *                                                        listener read resumed a SelectSender)
  *   RESUMING              FAA reader / expandBuffer      DONE, value (expandBuffer released it),
  *                         resuming a parked sender       INTERRUPTED_SEND (the sender's cancel won:
  *                                                        settled by the resumer)
  *   Reserved (the one     listener read of the head      TAKEN, previous (refused), or
  *   shared Hold; the                                     INTERRUPTED_SEND (a sender's cancel won,
  *                                                        or came while the listener decided and
  *   holder keeps what                                    it refused: settled by the listener read)
  *   it replaced)          send branch holding its cell   value (yes), DONE (yes, to a parked
  *                         (previous: empty, IN_BUFFER,   reader), VOID (no), TAKEN (no, and the
  *                         a spinning or parked reader)   parked reader retries),
  *                                                        INTERRUPTED_RECEIVE (the parked reader's
  *                                                        cancel won)
  *   TAKEN                 listener read: took the head;  final (R moved past by the taker or a helper)
  *                         send branch: refused a parked
  *                         reader's cell (it retries)
  *   VOID                  send branch: refused the       final; readers pass it without moving B
  *                         cell it held                   (the branch moved B for it); expandBuffer
  *                                                        counts it as a window cell
  *   DONE                  sender and reader met          final
  *   BROKEN                reader that overtook its       final (both retry with new indices);
  *                         sender                         rendezvous: the sender's swap puts its
  *                                                        value in and BROKEN back at once
  *   INTERRUPTED_SEND      cancelled or trial sender;     final; not a buffer-window cell
  *                         trySend that would wait
  *   INTERRUPTED_RECEIVE   cancelled reader (settled),    final; as BROKEN for a rendezvous swap
  *                         or its future's cancel's
  *                         claim (SpinMark)
  *   CLOSED                close(), index >= closedAt     final
  * }}}
  *
  * Why a class of its own. The algorithm has three kinds of marker: cell states (this class),
  * [[Outcome]]s (what a step returns, never stored in a cell) and [[Waiter.Word]]s (only ever in
  * a waiter's word). Each kind has its own class, and no two names differ only by case: cell
  * states keep the catalogue's upper-case names (`DONE`, `CLOSED`); outcomes are named for what
  * the step found and are always written with their type (`Outcome.Expanded`,
  * `Outcome.FoundClosed`), so one cannot be read for the other. A marker is compared by
  * identity: a cell holds `AnyRef`, and a read step returns a value or an outcome, so a marker
  * must be an object, not an `Int` code. Each is one object made once: a test is one reference
  * comparison (`eq`), or one type test for "any cell state" (`isValue`); nothing is boxed or
  * allocated, and no method of a marker is called on a hot path (only `toString`, for dumps).
  * The markers are `@static`: a use is one read of a static final field, a constant to the JIT,
  * as for a private value of the channel's own object (a public value of another object would
  * be read through its module's getter).
  * Not a Scala `enum`: SPINNING_READER, a [[SpinMark]], is a cell state of a class of its own,
  * which is why this class is sealed rather than final.
  */
private[async] sealed class CellState(name: String):
  override def toString: String = name

private[async] object CellState:
  @static val IN_BUFFER: CellState = CellState("IN_BUFFER")
  @static val RESUMING: CellState = CellState("RESUMING")
  @static val SPINNING_READER: SpinMark = SpinMark(null, 0)
  @static val TAKEN: CellState = CellState("TAKEN")
  @static val VOID: CellState = CellState("VOID")
  @static val DONE: CellState = CellState("DONE")
  @static val BROKEN: CellState = CellState("BROKEN")
  @static val INTERRUPTED_SEND: CellState = CellState("INTERRUPTED_SEND")
  @static val INTERRUPTED_RECEIVE: CellState = CellState("INTERRUPTED_RECEIVE")
  @static val CLOSED: CellState = CellState("CLOSED")

/** The mark of a rendezvous reader spinning in its cell (SPINNING_READER in the catalogue).
  * Readers that no future's cancel can reach share one, SPINNING_READER; a reader in a
  * runnable future puts its own, which knows its cell and is registered with the future, so
  * that the future's cancel can claim that cell for INTERRUPTED_RECEIVE (`cancelWait`): while
  * it holds the mark, and also while it is still empty, before the mark is in or after the
  * reader took it back, until the reader ends its read of this index (its cell is then never
  * empty again) or a parked waiter's registration takes over. The reader finds the claim in
  * its cell and throws CancellationException; a sender finds it and retries elsewhere.
  */
private[async] final class SpinMark(seg: Segment | Null, i: Int) extends CellState("SPINNING_READER") with CancellableWait:
  def cancelWait(): Unit =
    if seg != null then
      var st = seg.cell(i)
      // a send branch holding the cell while its select decides (Reserved) is a sender that came
      // first: wait for its decision (one listener call), which is the value or a void cell
      while ((st eq this) || st == null || st.isInstanceOf[SegmentChannel.Reserved]) &&
        (st.isInstanceOf[SegmentChannel.Reserved] || !seg.cas(i, st, CellState.INTERRUPTED_RECEIVE)) do
        if st.isInstanceOf[SegmentChannel.Reserved] then SegmentChannel.spinWait()
        st = seg.cell(i)
      if (st eq this) || st == null then seg.cellInterruptedReceiver() // claimed
      // else: a value, the close, or the reader's own waiter came first
