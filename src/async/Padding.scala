package asyncpipe.async

import java.lang.invoke.{MethodHandles, VarHandle}
import java.util.concurrent.atomic.AtomicInteger

// The padded classes of the channel (SegmentChannel.scala): fields that different threads write
// on every operation, each kept on cache lines of its own. The layout is the point of these
// classes: padding before the hot field in a superclass, the field, padding after it in the
// subclass (the JVM lays a superclass's fields out before a subclass's).

/** A counter on cache lines of its own: the sender and reader counters of a channel are written by
  * different threads on every operation, and on one line each write would take it from the other.
  */
private[async] abstract class CounterPadBefore:
  protected var p00, p01, p02, p03, p04, p05, p06, p07, p08, p09, p10, p11, p12, p13, p14: Long = 0L
private[async] abstract class CounterValue extends CounterPadBefore:
  @volatile protected var value: Long = 0L
  protected var seenValue: Long = 0L
private[async] final class PaddedCounter(initial: Long) extends CounterValue:
  protected var q00, q01, q02, q03, q04, q05, q06, q07, q08, q09, q10, q11, q12, q13, q14: Long = 0L
  value = initial
  inline def get: Long = value
  /** A value of another counter that this counter's party last read (a lower bound when that
    * counter only grows), kept here on the line the party writes anyway. Opaque: atomic, no fence.
    */
  def seen: Long = PaddedCounter.Seen.getOpaque(this)
  def seen_=(v: Long): Unit = PaddedCounter.Seen.setOpaque(this, v)
  def getAndAdd(n: Long): Long = PaddedCounter.Value.getAndAdd(this, n)
  /** The value, read as the first step of a change (a compare-and-exchange that never succeeds:
    * no value is -1): the read takes the line for writing, so the atomic step that follows finds
    * it here (see `Segment.cellForUpdate`).
    */
  def getForUpdate: Long = PaddedCounter.Value.compareAndExchange(this, -1L, -1L)
  def compareAndSet(expected: Long, next: Long): Boolean = PaddedCounter.Value.compareAndSet(this, expected, next)
private[async] object PaddedCounter:
  private val lookup = MethodHandles.privateLookupIn(classOf[CounterValue], MethodHandles.lookup())
  private val Value: VarHandle = lookup.findVarHandle(classOf[CounterValue], "value", java.lang.Long.TYPE)
  private val Seen: VarHandle = lookup.findVarHandle(classOf[CounterValue], "seenValue", java.lang.Long.TYPE)

/** A segment's counter (see [[Segment]]) followed by 64 bytes that keep the segment's own fields
  * off its cache line. With a buffer, every read counts its cell as processed there; were `id`,
  * `next` and `cells` on that line, every other sender and reader (each reads them to find its
  * cell) would then take the line back. It costs 64 bytes a segment (2 bytes an element of a
  * buffered(100) channel). `spGap` takes the 4 bytes the counter leaves before the first long:
  * with compact object headers the counter sits at offset 8, and the JVM puts a subclass's small
  * field in such a gap, so the segment's `spread`, read at every cell access, sat at offset 13,
  * on the counter's line (buffered(100) moved 25 % fewer values that way).
  */
private[async] abstract class SegmentCountPad(initial: Int) extends AtomicInteger(initial):
  protected var spGap: Int = 0
  protected var sp0, sp1, sp2, sp3, sp4, sp5, sp6, sp7: Long = 0L
