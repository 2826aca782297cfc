package asyncpipe.async

import scala.annotation.static

/** What a step of the channel algorithm returns (a cell update, a send, a wait): never stored in
  * a cell. Always written with its type (`Outcome.FoundClosed`), and named apart from the cell
  * states (`CLOSED`) and the waiter's words (`RESUMED`); why markers are objects of classes of
  * their own, compared with `eq`, is at [[CellState]]. A read step returns either the value it
  * took or an outcome (`Failed`, `FoundClosed`), so an outcome is an object, not a code.
  */
private[async] final class Outcome private (name: String):
  override def toString: String = name

private[async] object Outcome:
  /** The send is over without a wait of its own: its value is in a buffer cell or with its
    * reader (a rendezvous sender's value taken, or handed to a spinning reader), or a tap took it.
    */
  @static val Buffered = Outcome("Buffered")
  /** The send is over, and a waiter was resumed: the parked reader it handed its value to, or its
    * own trial waiter (`trySend`), whose value a listener read took.
    */
  @static val WaiterResumed = Outcome("WaiterResumed")
  /** The send parked and was resumed: a reader or a listener read took its value, or
    * `expandBuffer` moved it into the buffer.
    */
  @static val Awaited = Outcome("Awaited")
  /** The cell holds nothing for this party (poisoned, taken by a listener read, or its partner
    * cancelled): try again with a new index (`expandBuffer`: move on to the next cell).
    */
  @static val Failed = Outcome("Failed")
  /** The channel is closed: a send after the close, a read past the last value, or (for
    * `expandBuffer`) a closed cell.
    */
  @static val FoundClosed = Outcome("FoundClosed")
  /** `trySend` would have to wait. */
  @static val NotSent = Outcome("NotSent")
  /** `expandBuffer` moved B over a cell that counts for the buffer window. */
  @static val Expanded = Outcome("Expanded")
