package asyncpipe.cli.stages

/** The rate of a growing count (bytes, frames) over a recent span of time, as pv shows it: the
  * average since the start hides a stall or a burst, a rate over the last seconds shows it.
  *
  * It keeps the last `capacity` samples (time in nanoseconds, count), one added per refresh, in a
  * ring of two arrays: no allocation after construction. [[perSecond]] measures from the newest
  * sample back to the oldest one within the span asked for; when none but the newest is (the
  * refreshes came further apart than the span), back to the one before, so that a slow refresh
  * still gives a rate. Spans longer than the ring holds measure over the whole ring.
  */
final class RateWindow(capacity: Int):
  require(capacity >= 2, s"a rate window of $capacity samples measures nothing: it needs at least 2")
  private val times = new Array[Long](capacity)
  private val counts = new Array[Long](capacity)
  private var newest = -1 // index of the newest sample
  private var size = 0

  /** Records that the count was `count` at `nanos` (System.nanoTime; not earlier than the last). */
  def add(nanos: Long, count: Long): Unit =
    newest = (newest + 1) % capacity
    times(newest) = nanos
    counts(newest) = count
    if size < capacity then size += 1

  /** The count's growth per second over about the last `spanNanos`; 0 before two samples. */
  def perSecond(spanNanos: Long): Double =
    if size < 2 then 0.0
    else
      val now = times(newest)
      var back = 1 // samples behind the newest
      // Walk back while the next older sample is still within the span.
      while back + 1 < size && now - times(at(back + 1)) <= spanNanos do back += 1
      val from = at(back)
      val elapsed = now - times(from)
      if elapsed <= 0 then 0.0 else (counts(newest) - counts(from)) * 1e9 / elapsed

  /** The index of the sample `back` places behind the newest. */
  private def at(back: Int): Int = (newest - back + capacity) % capacity
