package asyncpipe.cli.command

import scala.concurrent.duration.*

/** One test per value reader: what each accepts, and the rule (quoting the text) for what it refuses. */
class ReaderTest extends munit.FunSuite:
  private def refuses[A](r: Reader[A], text: String, part: String)(using munit.Location): Unit =
    r.read(text) match
      case Right(v)   => fail(s"'$text' read as $v")
      case Left(rule) => assert(rule.contains(part), s"rule for '$text': $rule (should contain [$part])")

  test("wholeNumber: decimal digits in its range, with the range in the rule"):
    val r = Reader.wholeNumber(0, 1 << 20)
    assertEquals(r.read("0"), Right(0L))
    assertEquals(r.read("1048576"), Right(1048576L))
    refuses(r, "1048577", "'1048577' is not a whole number from 0 to 1048576")
    refuses(r, "-1", "'-1' is not a whole number from 0 to 1048576")
    refuses(r, "1e3", "'1e3' is not")
    refuses(r, "", "'' is not")
    refuses(r, "99999999999999999999999", "is not a whole number")
    assertEquals(r.form, "N")

  test("positive: 1 and up; too large says the largest"):
    assertEquals(Reader.positive.read("1"), Right(1L))
    assertEquals(Reader.positive.read(Long.MaxValue.toString), Right(Long.MaxValue))
    refuses(Reader.positive, "0", "'0' is not a positive whole number")
    refuses(Reader.positive, "-3", "'-3' is not a positive whole number")
    refuses(Reader.positive, "9223372036854775808", s"too large (at most ${Long.MaxValue})")

  test("wholeNumber over all longs takes a sign"):
    val r = Reader.wholeNumber(Long.MinValue, Long.MaxValue)
    assertEquals(r.read("-42"), Right(-42L))
    refuses(r, "1.5", "'1.5' is not a whole number")

  test("size: bytes with a binary K, M, G or T suffix, in its range; rendered back with the largest suffix"):
    val r = Reader.size(1, Int.MaxValue)
    assertEquals(r.read("4096"), Right(4096L))
    assertEquals(r.read("4k"), Right(4096L))
    assertEquals(r.read("4M"), Right(4L << 20))
    assertEquals(r.read("1G"), Right(1L << 30))
    refuses(r, "0", "less than 1 byte")
    refuses(r, "2G", s"more than ${Int.MaxValue} bytes")
    refuses(r, "4MB", "'4MB' is not a size")
    assertEquals(Reader.size(1, Long.MaxValue).read("2T"), Right(2L << 40))
    assertEquals(Seq(4096L, 4L << 20, 1L << 30, 1000L, 3L << 40).map(Reader.renderSize), Seq("4K", "4M", "1G", "1000", "3T"))

  test("duration: a number and a unit; zero only where allowed"):
    assertEquals(Reader.duration().read("1.5s"), Right(1500.millis))
    refuses(Reader.duration(), "0s", "more than zero")
    assertEquals(Reader.duration(allowZero = true).read("0s"), Right(Duration.Zero))
    refuses(Reader.duration(), "10", "needs a unit")
    refuses(Reader.duration(), "10x", "unknown duration unit 'x'")

  test("millis: whole milliseconds, never rounded"):
    assertEquals(Reader.millis().read("2m"), Right(120_000L))
    refuses(Reader.millis(), "1.5ms", "not a whole number of milliseconds")
    assertEquals(Reader.millis(allowZero = true).read("0ms"), Right(0L))

  test("decimal: at least its minimum, its purpose in the rule"):
    val r = Reader.decimal(1, "a factor of at least 1")
    assertEquals(r.read("1.5"), Right(1.5))
    refuses(r, "0.5", "'0.5' is not a factor of at least 1")
    refuses(r, "NaN", "'NaN' is not")
    refuses(r, ".5", "'.5' is not")

  test("choice: the tokens, a near miss suggested, the words for completion"):
    enum Mode(val token: String):
      case Block extends Mode("block")
      case Drop extends Mode("drop")
    val r = Reader.choice(Mode.values.toSeq)(_.token)
    assertEquals(r.read("drop"), Right(Mode.Drop))
    refuses(r, "drp", "'drp' is not one of block, drop; did you mean 'drop'?")
    refuses(r, "zzzzz", "'zzzzz' is not one of block, drop")
    assertEquals((r.form, r.words), ("block|drop", Seq("block", "drop")))

  test("path: any non-empty text, completed as a file"):
    assertEquals(Reader.path().read("a b/c"), Right("a b/c"))
    refuses(Reader.path(), "", "empty")
    assert(Reader.path().isPath && !Reader.positive.isPath)

  test("a reader checked further (andThen) or renamed (as) is still completed as a file when it was one"):
    assert(Reader.path().andThen(p => Right(p.length)).isPath, "andThen dropped isPath")
    assert(Reader.path().as("FILE.svg").isPath, "as dropped isPath")
    assert(!Reader.positive.andThen(n => Right(n)).isPath)
