package asyncpipe.async

import java.util.concurrent.atomic.AtomicReference

/** The state machine shared by every source that completes once (futures, promises, timers): one
  * atomic word that holds, in turn,
  *
  * {{{
  *   null ──onComplete──▶ Listener ──onComplete──▶ Callbacks(k, Listener | Callbacks) ─┐
  *    │                      │                                                           │
  *    └──────────── complete(v): the value (never a Listener or Callbacks) ◀─────────────┘
  * }}}
  *
  * so a pending source with one listener allocates nothing beyond the listener, and completing
  * is one compare-and-set followed by offering the value to the listeners it replaced, on the
  * completing thread (no executor hop). `dropListener` swaps the word for one without the
  * listener (compared with `==`, which lets derived sources drop by an equal forwarder).
  */
private[async] abstract class OneShot[T](initial: AnyRef | Null) extends AtomicReference[AnyRef | Null]():
  import OneShot.*

  // The JVM's zero value (null: pending) is not written: a volatile write in a constructor costs
  // a full fence, in every future, promise and timer made. The same rule holds for every object
  // the library makes per operation (waiters, the awaiting listener, a send branch).
  if initial != null then set(initial)

  final def hasValue: Boolean = isValue(get)

  /** Sets the value if none is set; offers it to every registered listener in registration order. */
  protected final def completeWith(value: T): Boolean =
    val encoded = encode(value)
    var s = get
    while !isValue(s) do
      if compareAndSet(s, encoded) then
        offerAll(s, value)
        return true
      s = get // else: a listener came or went meanwhile, retry
    false

  final def poll(k: Listener[T]): Boolean =
    val s = get
    isValue(s) && k(decode(s))

  final def onComplete(k: Listener[T]): Unit =
    var s = get
    while true do
      if isValue(s) then
        k(decode(s))
        return
      val next = if s == null then k else Callbacks(k, s.nn)
      if compareAndSet(s, next) then return
      s = get // else: completed or changed meanwhile, retry

  final def dropListener(k: Listener[T]): Unit =
    var s = get
    while true do
      val next: AnyRef | Null = s match
        case cbs: Callbacks => cbs.without(k)
        case l: Listener[?] => if l == k then null else l
        case _              => return // pending with no listeners, or completed
      if next eq s then return // k was not registered
      if compareAndSet(s, next) then return
      s = get // else: retry on the new word

  /** The value, which must be set (`hasValue`): read without a listener. */
  private[async] final def valueNow: T = decode(get)

  /** Listeners registered now (for tests and diagnostics). */
  private[async] final def listenerCount: Int = get match
    case cbs: Callbacks => cbs.size
    case _: Listener[?] => 1
    case _              => 0

  private def offerAll(registered: AnyRef | Null, value: T): Unit = registered match
    case null           => ()
    case l: Listener[?] => l.asInstanceOf[Listener[T]](value)
    case cbs: Callbacks => cbs.inRegistrationOrder.foreach(_.asInstanceOf[Listener[T]](value))
    case _              => () // never: a completed word is not replaced

  private def decode(s: AnyRef | Null): T = (s match
    case Boxed(v) => v
    case v        => v
  ).asInstanceOf[T]

private[async] object OneShot:
  /** Two or more listeners, newest first: an immutable list whose nodes are the only allocation. */
  final class Callbacks(val head: Listener[?], val tail: AnyRef):
    def size: Int = 1 + (tail match { case c: Callbacks => c.size; case _ => 1 })
    def without(k: Listener[?]): AnyRef | Null =
      if head == k then tail
      else
        tail match
          case c: Callbacks =>
            val rest = c.without(k)
            if rest eq c then this else if rest == null then head else Callbacks(head, rest.nn)
          case l => if l == k then head else this
    def inRegistrationOrder: List[Listener[?]] =
      var acc = List.empty[Listener[?]]
      var node: AnyRef = this
      while node != null do
        node match
          case c: Callbacks => acc = c.head :: acc; node = c.tail
          case l: Listener[?] => acc = l :: acc; node = null
      acc

  /** Wraps a value that could be mistaken for a state (null, a listener): rare, never a `Try`. */
  final case class Boxed(value: Any)

  def isValue(s: AnyRef | Null): Boolean = s != null && !s.isInstanceOf[Listener[?]] && !s.isInstanceOf[Callbacks]

  def encode(value: Any): AnyRef = value match
    case null | _: Listener[?] | _: Callbacks | _: Boxed => Boxed(value)
    case v: AnyRef                                        => v
    case v                                                => v.asInstanceOf[AnyRef]
