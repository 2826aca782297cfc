package asyncpipe.async

import java.lang.invoke.{MethodHandles, VarHandle}
import java.util.concurrent.atomic.AtomicReferenceArray
import SegmentChannel.SegmentSize

/** `SegmentSize` cells of a channel's infinite array (see [[SegmentChannel]]), one link of the
  * chain of segments that holds them, and the segment's counter: how many of its cells are not
  * interrupted and (finite buffered channels only, until the segment is [[kept]]) not yet
  * processed by `expandBuffer`, and how many of the channel's three segment references point at
  * it. At zero the segment is unlinked (segment reclamation, deviation 7).
  */
private[async] final class Segment(val id: Long, prev0: Segment | Null, pointers: Int, val countProcessed: Boolean,
    /** Whether consecutive cells lie on different cache lines (see [[slot]]). */
    val spread: Boolean)
    extends SegmentCountPad(SegmentSize + (if countProcessed then SegmentSize << Segment.ProcessedShift else 0) + (pointers << Segment.PointersShift)):
  import Segment.*

  private val cells = AtomicReferenceArray[AnyRef](SegmentSize)
  @volatile var next: Segment | Null = compiletime.uninitialized // null: the tail
  @volatile var prev: Segment | Null = prev0
  /** Set once some cell of this segment holds a state that is never counted as interrupted (a
    * buffered value, or a cell that will get one): the segment's count of cells not interrupted
    * can then never reach zero, so it is never unlinked by its counter, and `expandBuffer` need
    * not count the cells it processes here (an atomic step on a line every reader writes). A
    * plain field: a reader that misses the write only counts a cell, as before.
    */
  var kept: Boolean = false
  inline def markKept(): Unit = if !kept then kept = true

  /** Where cell `i` lives in `cells`. Spread: cell `i` at `(i % 16) * 16 + i / 16`, so that the 16
    * references of a cache line hold cells 16 apart and cells next to each other never share a
    * line. In a rendezvous, sender and reader work on the same cell or the next: the cell the
    * sender fills next no longer takes from the reader the line of the cell it is taking. Where
    * they work far apart (a large buffer, unbounded), a line carries 16 cells from the sender's
    * core to the reader's, and the plain layout keeps that (doc/adr/0011, "Cell layout").
    */
  private[async] inline def slot(i: Int): Int = if spread then ((i & 15) << 4) | (i >>> 4) else i
  inline def cell(i: Int): AnyRef | Null = cells.get(slot(i))
  inline def setCell(i: Int, v: AnyRef): Unit = cells.set(slot(i), v)
  /** Ends a hold of cell `i` with `v` (a release write, no full fence): for the holder, whose
    * CAS that took the hold already ordered it against the channel's other words, while every
    * other party only waits for the hold to end.
    */
  inline def endHold(i: Int, v: AnyRef): Unit = cells.setRelease(slot(i), v)
  inline def cas(i: Int, expected: AnyRef | Null, v: AnyRef): Boolean = cells.compareAndSet(slot(i), expected, v)
  /** What cell `i` holds, read as the first step of a change: the read takes the cell's line for
    * writing (a compare-and-exchange that changes nothing), so that the CAS that follows finds it
    * here. A plain read of a line another core wrote brings a shared copy, and the CAS then has
    * to take the line a second time (doc/adr/0011, "Read for ownership").
    */
  inline def cellForUpdate(i: Int): AnyRef | Null = cells.compareAndExchange(slot(i), null, null)
  /** Writes `v` whatever the cell held, and returns what it held. */
  inline def swap(i: Int, v: AnyRef): AnyRef | Null = cells.getAndSet(slot(i), v)

  def cleanPrev(): Unit = if prev != null then prev = null // no write when already clean: every operation calls it
  def isRemoved: Boolean = get == 0
  def isTail: Boolean = next == null || (next eq ClosedChain)
  def liveNext: Segment | Null = { val n = next; if n eq ClosedChain then null else n }

  def counters: (Int, Int, Int) =
    val c = get
    (c >>> PointersShift, (c >>> ProcessedShift) & FieldMask, c & FieldMask)

  def markProcessed(n: Int): Unit = addAndGet(-n * OneProcessed)
  def tryIncPointers(): Boolean =
    var c = get
    while c != 0 && !compareAndSet(c, c + OnePointer) do c = get
    c != 0
  /** True if that made the segment removable. */
  def decPointers(): Boolean = addAndGet(-OnePointer) == 0
  def cellInterruptedReceiver(): Unit = if addAndGet(-1) == 0 then remove()
  def cellInterruptedSender(): Unit =
    if addAndGet(if countProcessed then -(1 + OneProcessed) else -1) == 0 then remove()
  /** `expandBuffer` has processed one cell: counted while the segment may still be unlinked. */
  def cellProcessed(): Unit = if !kept && addAndGet(-OneProcessed) == 0 then remove()

  /** Unlinks this (logically removed) segment: its live neighbours point at each other. The
    * tail is never unlinked (new segments are appended to it).
    */
  def remove(): Unit =
    var done = false
    while !done do
      if isTail then done = true
      else
        var left = prev
        while left != null && left.isRemoved do left = left.prev
        var right = next.nn
        while right.isRemoved && !right.isTail do right = right.next.nn
        // right.prev := left, unless right has forgotten its prev (cleanPrev)
        var linked = false
        while !linked do
          val p = right.prev
          linked = p == null || SegmentPrev.compareAndSet(right, p, left)
        if left != null then left.next = right
        // if a neighbour was removed meanwhile, link again around it
        done = !(right.isRemoved && !right.isTail) && !(left != null && left.isRemoved)

  /** Marks the end of the chain so no segment is appended; returns the tail. */
  def closeChain(): Segment =
    var s = this
    while true do
      val n = s.next
      if n == null then
        if SegmentNext.compareAndSet(s, null, ClosedChain) then return s
        // else: a segment was appended meanwhile, look again
      else if n eq ClosedChain then return s
      else s = n
    s

  override def toString: String =
    val (p, np, ni) = counters
    s"#$id(p=$p np=$np ni=$ni${if kept then " kept" else ""}${if isRemoved then " removed" else ""})"

private[async] object Segment:
  // The segment's int: [0,9) cells not interrupted, [9,18) cells not processed by expandBuffer
  // (finite buffered channels only), [18,32) pointers (references among sendSegment,
  // receiveSegment, bufferEndSegment). Zero means logically removed.
  private final val ProcessedShift = 9
  private final val PointersShift = 18
  private final val OneProcessed = 1 << ProcessedShift
  private final val OnePointer = 1 << PointersShift
  /** A field of the segment's int: up to SegmentSize, which must fit. */
  private final val FieldMask = OneProcessed - 1
  require(SegmentSize == 256, s"SegmentSize $SegmentSize: Segment.slot spreads 256 cells as 16 lines of 16")
  require(SegmentSize <= FieldMask, s"SegmentSize $SegmentSize does not fit the segment's counter fields")

  private val SegmentNext: VarHandle =
    MethodHandles.privateLookupIn(classOf[Segment], MethodHandles.lookup()).findVarHandle(classOf[Segment], "next", classOf[Segment])
  private val SegmentPrev: VarHandle =
    MethodHandles.privateLookupIn(classOf[Segment], MethodHandles.lookup()).findVarHandle(classOf[Segment], "prev", classOf[Segment])

  /** The `next` of a tail whose chain is closed. */
  private val ClosedChain = Segment(-1, null, 0, false, false)

  /** The segment with `id`, from `start` on, appending segments as needed; a later one if `id`'s
    * was removed; null if the chain is closed before `id`.
    */
  private[async] def findSegment(start: Segment, id: Long): Segment | Null =
    var cur = start
    while cur.id < id || cur.isRemoved do
      val n = cur.next
      if n eq ClosedChain then return null
      else if n == null then
        val created = Segment(cur.id + 1, cur, 0, start.countProcessed, start.spread)
        if SegmentNext.compareAndSet(cur, null, created) then
          if cur.isRemoved then cur.remove() // it was the tail, so it could not be unlinked before
        // else: another thread appended first; look again
      else cur = n
    cur
