package asyncpipe.async

import scala.util.Try

/** Channels: values handed from senders to readers, each value to exactly one reader.
  *
  * ==Kinds==
  *   - `SyncChannel[T]()`: rendezvous. `send` returns only once a reader has taken the value.
  *   - `BufferedChannel[T](n)`, `n >= 1`: up to `n` values wait in the channel; `send` blocks
  *     only while `n` values are waiting.
  *   - `UnboundedChannel[T]()`: `send` never blocks (`sendImmediately` needs no `Async`); memory
  *     is the limit.
  * All three are one implementation ([[SegmentChannel]], the Fetch-And-Add channel of "Fast and
  * Scalable Channels"); the kind only sets how many cells count as buffer.
  *
  * ==Operations==
  *   - `send(x)` blocks until `x` is buffered or taken (see kinds); throws
  *     [[ChannelClosedException]] if the channel was closed before the send began.
  *   - `read()` blocks until a value is there and returns `Success(value)`; once the channel is
  *     closed and drained, returns `Failure(ChannelClosedException)` at once, every time.
  *   - `canRead` is the same read as an [[Async.Source]], for races (`Async.race(a.canRead,
  *     b.canRead)` is Go's `select`), filters and maps. A listener that refuses a value leaves it
  *     first in line for the next reader; only the head of the channel is ever offered.
  *   - `trySend(x)` / `tryRead()` never block: `false` / `None` when the operation would have to
  *     wait. Under contention they may fail spuriously (a sender in the middle of depositing its
  *     value is "not there yet"); they never lose or duplicate a value.
  *
  * ==Blocking and interruption==
  * A blocked `send` or `read` parks its thread. Cancelling its future (or interrupting its
  * thread) ends the wait with `CancellationException`: a cancelled `send` did not send (its value
  * is delivered to nobody), a cancelled `read` took nothing (the value goes to the next reader).
  * The future's `cancel()` decides the wait before it returns: from then on no value sent reaches
  * the cancelled read, and no reader takes the cancelled send's value. If a partner completed the
  * operation first, it returns normally (the read returns the value, the send has sent it) and
  * the cancel takes effect at the body's next await. The exact terms, with the operations that
  * do not wait, are in [[Future.cancel]] and `doc/adr/0006-channel-close-and-interruption.md`.
  * An interrupt of a thread that no future runs (an `Async.blocking` body) is seen when the
  * thread wakes: what was handed over before that is returned normally. Inside `uninterruptible`
  * a cancel waits until the operation completes normally. A cancelled waiter leaves no garbage
  * behind: its cell is skipped, and segments full of such cells are unlinked.
  *
  * ==Closing==
  * `close()` (idempotent) stops new sends: a `send` that starts after it throws
  * [[ChannelClosedException]]. Nothing already sent is lost: readers drain every buffered value
  * and the value of every sender that was blocked at the close, then see
  * `Failure(ChannelClosedException)`. Those senders complete as they would have without the
  * close: once a reader takes their value (rendezvous) or makes room for it (buffered). Readers blocked on an
  * empty channel wake with that failure. `error(cause)` is the same close with a failure that
  * readers see after the values (`ChannelClosedException` with that cause); `cancel()` drops what
  * was not read. See `doc/adr/0006-channel-close-and-interruption.md`.
  */
trait SendableChannel[-T]:
  /** Sends `x`, blocking while the channel has no room (see the kinds above).
    * @throws ChannelClosedException if the channel is closed
    * @throws java.util.concurrent.CancellationException if cancelled while blocked; `x` was not
    *   sent, and no reader takes it once the future's `cancel()` has returned
    */
  def send(x: T)(using Async): Unit

  /** Sends `x` if that needs no waiting; `false` if it would block.
    * @throws ChannelClosedException if the channel is closed
    */
  def trySend(x: T): Boolean

trait ReadableChannel[+T]:
  /** The next value as a source: offered to a listener only while it is first in line. */
  val canRead: Async.Source[Try[T]]

  /** The next value, blocking until there is one; `Failure(ChannelClosedException)` once the
    * channel is closed and drained.
    * @throws java.util.concurrent.CancellationException if cancelled while blocked; nothing was
    *   taken, and no value reaches this read once the future's `cancel()` has returned
    */
  def read()(using Async): Try[T]

  /** `read()` without the `Try`: the value, or [[ChannelClosed]] once closed and drained. It
    * allocates nothing per value, for hot loops.
    */
  def readOrClosed()(using Async): T | ChannelClosed

  /** The next value if one is there now, `Some(Failure(ChannelClosedException))` if closed and
    * drained, `None` otherwise.
    */
  def tryRead(): Option[Try[T]]

trait Channel[T] extends SendableChannel[T], ReadableChannel[T], java.io.Closeable:
  /** Stops further sends; readers drain what was sent before (see Closing above). Idempotent. */
  def close(): Unit
  /** Closes the channel with a failure: as `close()` (nothing sent before is lost: readers drain
    * it), but then every read, and every later send, fails with a [[ChannelClosedException]] whose
    * cause is `cause`: a producer's failure travels to its consumers, after its last values.
    * The first of `close` and `error` decides how the channel ended; later calls change nothing.
    * {{{
    * val ch = BufferedChannel[Int](4)
    * ch.send(1); ch.error(IllegalStateException("bad input"))
    * ch.read()  // Success(1)
    * ch.read()  // Failure(ChannelClosedException(cause = IllegalStateException("bad input")))
    * }}}
    */
  def error(cause: Throwable): Unit
  /** A consumer gives up: closes the channel with a [[ChannelCancelledException]] (if nothing
    * ended it before: else that ending stays) and discards what was sent and not yet read:
    * buffered values, and the values of senders blocked at that moment, which return as if their
    * value was taken. Readers then read `Failure(ChannelClosedException)` with that cause, at once;
    * a send after it throws. A reader taking a value at the very moment of the cancel may still
    * get it; no value is read twice.
    * {{{
    * val ch = BufferedChannel[Int](4)
    * ch.send(1); ch.cancel()
    * ch.read()  // Failure(ChannelClosedException(cause = ChannelCancelledException)): 1 was dropped
    * }}}
    */
  def cancel(): Unit
  /** The cause given to `error`, or the [[ChannelCancelledException]] of `cancel`, once the
    * channel ended with one; None while open or after `close()`.
    */
  def closeCause: Option[Throwable]
  /** True once `close()` or `error` has been called. */
  def isClosed: Boolean
  /** 0 for rendezvous, `n` for buffered, -1 for unbounded. */
  def capacity: Int

  /** A send of `x` as an [[Async.Source]], for a select or a race: it completes with
    * `Success(())` once `x` was accepted (buffered, or taken by a reader, as `send` would), and
    * with `Failure(ChannelClosedException)` if the channel was closed before that. Exactly once,
    * as reads are: a branch that lost its race sent nothing. Each use is a new send: a source
    * registered twice offers `x` twice.
    * {{{
    * Async.select(
    *   out.canSend(next).handle(_ => "sent"),
    *   control.canRead.handle(c => s"control: ${c.get}")
    * )
    * }}}
    * A select's read of a channel is never offered the select's own send on it (as in Go). One
    * case completes a send a moment before its reader: a send branch that a listener read (a
    * `canRead` in another select) found waiting is decided first, and if that read then refuses
    * (its select won elsewhere at that instant), the value stays first in the channel for the next
    * reader, like a value sent to a buffer.
    */
  def canSend(x: T): Async.Source[Try[Unit]]

  def asSendable(): SendableChannel[T] = this
  def asReadable(): ReadableChannel[T] = this
  def asCloseable(): java.io.Closeable = this

/** Thrown by a send on a closed channel; the failure a closed and drained channel reads as. Its
  * cause is the one given to [[Channel.error]], or null after a plain `close()`.
  */
final class ChannelClosedException(cause: Throwable | Null = null)
    extends Exception(if cause == null then "channel closed" else s"channel closed with an error: $cause", cause)

/** The cause of a channel's end by `cancel()`: a consumer gave up, and what was left was dropped. */
final class ChannelCancelledException extends java.util.concurrent.CancellationException("the channel was cancelled: what was not read was dropped")

/** A rendezvous channel: every send waits for its reader. */
trait SyncChannel[T] extends Channel[T]
object SyncChannel:
  def apply[T](): SyncChannel[T] = new SegmentChannel[T](0) with SyncChannel[T]

/** A channel holding up to `size` values that no reader has taken yet. */
trait BufferedChannel[T] extends Channel[T]
object BufferedChannel:
  def apply[T](size: Int): BufferedChannel[T] =
    require(size >= 1, s"a buffered channel needs a size of at least 1, got $size (use SyncChannel for 0)")
    new SegmentChannel[T](size) with BufferedChannel[T]

/** A channel whose sends never wait. */
trait UnboundedChannel[T] extends Channel[T]:
  /** `send` without an `Async`: an unbounded channel never blocks a sender.
    * @throws ChannelClosedException if the channel is closed
    */
  def sendImmediately(x: T): Unit
object UnboundedChannel:
  def apply[T](): UnboundedChannel[T] = new SegmentChannel[T](SegmentChannel.Unbounded) with UnboundedChannel[T]:
    def sendImmediately(x: T): Unit =
      if !trySend(x) then throw IllegalStateException("an unbounded channel refused a send") // cannot happen

/** What `readOrClosed()` returns once the channel is closed and drained. */
object ChannelClosed
type ChannelClosed = ChannelClosed.type
