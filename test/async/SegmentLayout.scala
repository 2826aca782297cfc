package asyncpipe.async

/** The cells of a segment where they lie in its array (`Segment.slot`): a rendezvous channel's
  * segments spread neighbouring cells over different cache lines, every other channel keeps them
  * in order, and either way each cell has a place of its own.
  */
class SegmentLayout extends munit.FunSuite:
  private val Size = SegmentChannel.SegmentSize
  private val PerLine = 16 // 4-byte references in a 64-byte line

  for spread <- Seq(true, false) do
    test(s"each of the $Size cells has a slot of its own (spread = $spread)"):
      val seg = Segment(0, null, 2, false, spread)
      val slots = (0 until Size).map(seg.slot)
      assertEquals(slots.toSet, (0 until Size).toSet)
      val values = (0 until Size).map(i => Integer.valueOf(i))
      for i <- 0 until Size do seg.setCell(i, values(i))
      for i <- 0 until Size do assert(seg.cell(i) eq values(i), s"cell $i holds ${seg.cell(i)}")

  test("a spread segment puts neighbouring cells on different lines; a plain one keeps them in order"):
    val spread = Segment(0, null, 2, false, true)
    for i <- 0 until Size - 1 do
      assertNotEquals(spread.slot(i) / PerLine, spread.slot(i + 1) / PerLine, s"cells $i and ${i + 1} share a line")
    val plain = Segment(0, null, 3, true, false)
    for i <- 0 until Size do assertEquals(plain.slot(i), i)

  test("only a rendezvous channel spreads its cells"):
    assert(SegmentChannel.spreadsCells(0))
    for capacity <- Seq(-1, 1, 16, 100) do assert(!SegmentChannel.spreadsCells(capacity), s"capacity $capacity")
