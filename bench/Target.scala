package asyncpipe.bench

/** The goal a measured value is held to: a ratio (unit "x") or a figure in its own unit. A target
  * is a value, not text, so that the table, the summary, `--check`, the JSON and the chart all ask
  * it the same question ([[met]]) and print the same words ([[text]]).
  *
  * The unit is not part of the target: it is the unit of what the target is attached to (a
  * [[Comparison]]'s ratio, a [[Figure]]'s unit), so it is stated once.
  */
enum Target:
  /** The value must stand in `relation` to `bound`. */
  case Bound(relation: Relation, bound: Double)

  /** A ratio of rates (subject/baseline, higher is faster) read as time: the subject may take at
    * most `factor` times the baseline's time, so the ratio must be at least `1 / factor`. Stated
    * by its factor so that "time <= 1.15x" and the bound 0.87x are one fact, not two numbers.
    */
  case TimeWithin(factor: Double)

  /** Whether `measured` meets the target; a value that is not a number (a failed division) never does. */
  def met(measured: Double): Boolean =
    !measured.isNaN && (this match
      case Bound(relation, bound) => relation.holds(measured, bound)
      case TimeWithin(factor)     => measured >= 1 / factor)

  /** Where the chart draws the target's mark: the value it holds the measurement to. */
  def mark: Double = this match
    case Bound(_, bound)    => bound
    case TimeWithin(factor) => 1 / factor

  /** The target as the table and the JSON show it, in `unit`: ">= 1.0x", "< 64 MiB", "100 %",
    * ">= 0.87x (time <= 1.15x)".
    */
  def text(unit: String): String = this match
    case Bound(Relation.Exactly, bound) => Target.amount(bound, unit)
    case Bound(relation, bound)         => s"${relation.symbol} ${Target.amount(bound, unit)}"
    case TimeWithin(factor)             => s">= ${Target.amount(1 / factor, unit)} (time <= ${Target.plain(factor)}x)"

  /** The target as one word for a fork's result file ([[Forks]]): reads back exactly with [[Target.parse]]. */
  def spec: String = this match
    case Bound(relation, bound) => s"${relation}:$bound"
    case TimeWithin(factor)     => s"TimeWithin:$factor"

/** How a measured value must relate to its bound. */
enum Relation(val symbol: String):
  case AtLeast extends Relation(">=")
  case AtMost extends Relation("<=")
  case Below extends Relation("<")
  /** Exactly the bound: for counts that must all add up (100 % of the datagrams). */
  case Exactly extends Relation("=")

  def holds(measured: Double, bound: Double): Boolean = this match
    case AtLeast => measured >= bound
    case AtMost  => measured <= bound
    case Below   => measured < bound
    case Exactly => measured == bound

object Target:
  /** The unit of a ratio, written without a space ("1.0x"). */
  val Ratio = "x"

  def atLeast(bound: Double): Target = Bound(Relation.AtLeast, bound)
  def atMost(bound: Double): Target = Bound(Relation.AtMost, bound)
  def below(bound: Double): Target = Bound(Relation.Below, bound)
  def exactly(bound: Double): Target = Bound(Relation.Exactly, bound)
  def timeWithin(factor: Double): Target =
    require(factor > 0, s"a time factor was $factor, must be > 0")
    TimeWithin(factor)

  /** A target from its [[Target.spec]]. */
  def parse(spec: String): Option[Target] =
    spec.split(':') match
      case Array("TimeWithin", f) => f.toDoubleOption.filter(_ > 0).map(TimeWithin(_))
      case Array(r, b)            => for relation <- Relation.values.find(_.toString == r); bound <- b.toDoubleOption yield Bound(relation, bound)
      case _                      => None

  /** A bound in its unit: a ratio with one or two decimals ("1.0x", "0.95x", "0.87x"), anything
    * else as plainly as it was written ("64 MiB", "100 %", "5100 ms").
    */
  private[bench] def amount(value: Double, unit: String): String =
    if unit == Ratio then
      val two = "%.2f".formatLocal(java.util.Locale.ROOT, value)
      (if two.endsWith("0") then two.dropRight(1) else two) + Ratio
    else s"${plain(value)} $unit"

  /** A number without trailing zeros, at most two decimals: 64, 1.15, 0.5. */
  private def plain(value: Double): String =
    BigDecimal(value).setScale(2, BigDecimal.RoundingMode.HALF_UP).bigDecimal.stripTrailingZeros.toPlainString

/** A target held against what was measured, on the row named `row` (a comparison's "subject vs
  * baseline", a figure's name), `measured` in `unit`: the one answer that the table's status
  * column, the summary, `--check`, the JSON and the chart all show.
  */
final case class Verdict(row: String, measured: Double, unit: String, target: Target):
  val met: Boolean = target.met(measured)

  /** "met" or "MISSED": plain words, so that the table reads without colour. */
  def status: String = if met then "met" else "MISSED"
