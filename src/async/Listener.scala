package asyncpipe.async

/** A callback that a [[Async.Source]] offers its value to.
  *
  * The contract: `apply(v)` either takes the value and returns `true`, or refuses it and returns
  * `false`, in both cases quickly and without blocking. A source whose values are consumed (a
  * channel) keeps a refused value for another reader, so a filtering reader never destroys what it
  * does not want. A listener that has been satisfied or abandoned reports `isDone`, which tells a
  * source it can forget the registration instead of offering again.
  *
  * Exactly-once acceptance in races comes from this contract: racing and mapping listeners only
  * forward, and the one listener at the end of the chain (the waiting `await`) decides with a
  * single compare-and-set, so of all concurrent offers exactly one is taken.
  */
trait Listener[-T] extends (T => Boolean):
  /** True once every further offer will be refused. */
  def isDone: Boolean = false

object Listener:
  def apply[T](f: T => Boolean): Listener[T] = new Listener[T]:
    def apply(value: T): Boolean = f(value)

  /** Whether `a` and `b` forward to the same listener at the end of their chains: the same
    * waiting party (the two branches of one select, say).
    */
  private[async] def sameWaiter(a: Listener[?], b: Listener[?]): Boolean = (last(a) eq last(b))
  private def last(k: Listener[?]): Listener[?] = k match
    case f: Forwarder[?, ?] => last(f.inner)
    case _                  => k

  /** The listener of a poll: takes every value it is offered and keeps it, nothing else. Since its
    * answer is yes before it is asked, a source may complete its operation first and tell it after
    * (a channel's send branch then sends as `trySend` does). A poll offers at most one value.
    */
  private[async] final class Taker[T] extends Listener[T]:
    var value: T = null.asInstanceOf[T]
    def apply(v: T): Boolean = { value = v; true }

  /** A listener forwarding to `inner` after a transformation; it equals every other forwarder of
    * an equal `inner` and the same `source`, so `dropListener(k)` on a derived source can find
    * what `onComplete(k)` registered without keeping a table. Equality recurses through nested
    * forwarders (a race over a mapped channel read registers a forwarder of a forwarder) and ends
    * at the waiting listener, compared by identity.
    */
  private[async] abstract class Forwarder[-T, U](val inner: Listener[U], val source: AnyRef) extends Listener[T]:
    override def isDone: Boolean = inner.isDone
    override def equals(that: Any): Boolean = that match
      case f: Forwarder[?, ?] => (f.source eq source) && f.inner == inner
      case _                  => false
    override def hashCode: Int = inner.hashCode * 31 + System.identityHashCode(source)
