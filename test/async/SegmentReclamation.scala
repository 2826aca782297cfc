package asyncpipe.async

/** How a segment of a buffered channel decides that it may be unlinked: its counter of cells not
  * interrupted, cells not processed by `expandBuffer` and references, until a cell of it holds a
  * state that is never interrupted (a buffered value): from then on the segment is kept, and
  * `expandBuffer` stops counting its cells (doc/adr/0011, "Processed cells").
  */
class SegmentReclamation extends munit.FunSuite:
  private val Size = SegmentChannel.SegmentSize

  private def notProcessed(seg: Segment): Int = seg.counters._2

  test("a segment counts the cells expandBuffer processed until a cell keeps it"):
    val seg = Segment(1, null, 1, true, false)
    assertEquals(notProcessed(seg), Size)
    seg.cellProcessed()
    seg.cellProcessed()
    assertEquals(notProcessed(seg), Size - 2)
    seg.markKept()
    seg.cellProcessed()
    assertEquals(notProcessed(seg), Size - 2, "a kept segment still counted a processed cell")
    assert(!seg.isRemoved)

  test("a segment of interrupted senders and processed cells is unlinked; a kept one never is"):
    for kept <- Seq(false, true) do
      val seg = Segment(1, null, 0, true, false)
      if kept then seg.markKept()
      for _ <- 0 until Size / 2 do seg.cellInterruptedSender()
      for _ <- 0 until Size / 2 do { seg.cellProcessed(); seg.cellInterruptedReceiver() }
      assertEquals(seg.isRemoved, !kept, s"kept = $kept: $seg")

  test("a buffered value keeps its segment; a send that only waited does not"):
    val ch = BufferedChannel[Int](1).asInstanceOf[SegmentChannel[Int]]
    assert(!ch.dump.contains("kept"), ch.dump)
    assert(ch.trySend(1))
    assert(ch.dump.linesIterator.drop(1).next().contains("kept"), ch.dump)
    ch.checkInvariants()

  test("values through a buffered channel over many segments keep its counters consistent"):
    for capacity <- Seq(1, 16, 100, Size + 1) do
      val ch = BufferedChannel[Int](capacity).asInstanceOf[SegmentChannel[Int]]
      var sent, read = 0
      while read < 5 * Size do
        while sent - read < capacity && ch.trySend(sent) do sent += 1
        ch.checkInvariants()
        while ch.tryRead().isDefined do read += 1
        ch.checkInvariants()
      assert(ch.segmentCount <= 3, s"capacity $capacity: ${ch.segmentCount} segments reachable\n${ch.dump.take(2000)}")
