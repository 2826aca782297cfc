package asyncpipe.cli.stages

/** How the statistics write sizes, counts and durations: appended to a builder the caller keeps,
  * so that a line redrawn four times a second (`--progress`) allocates nothing for its numbers.
  * One place for the units, shared with the `--stats` line ([[StatsReporter.bytes]]).
  */
object Quantities:
  private val byteUnits = Array("B", "kB", "MB", "GB", "TB", "PB")
  private val countUnits = Array("", "k", "M", "G", "T", "P")

  /** Bytes in decimal units, as `ls -h --si` and network tools print them: "999 B", "1.2 kB",
    * "118.3 MB" (one decimal, rounded half up).
    */
  def appendBytes(b: java.lang.StringBuilder, n: Long): java.lang.StringBuilder =
    if n < 1000 then b.append(n).append(" B")
    else scaled(b, n).append(' ').append(byteUnits(unit(n)))

  /** A count: exact below 10,000, then one decimal and a unit, "12.3k", "4.5M". */
  def appendCount(b: java.lang.StringBuilder, n: Long): java.lang.StringBuilder =
    if n < 10_000 then b.append(n)
    else scaled(b, n).append(countUnits(unit(n)))

  /** A duration in whole seconds as a clock shows it: "M:SS", or "H:MM:SS" from an hour. */
  def appendDuration(b: java.lang.StringBuilder, seconds: Long): java.lang.StringBuilder =
    val s = math.max(0L, seconds)
    val h = s / 3600
    val m = s / 60 % 60
    val sec = s % 60
    if h > 0 then
      b.append(h).append(':')
      if m < 10 then b.append('0')
    b.append(m).append(':')
    if sec < 10 then b.append('0')
    b.append(sec)

  /** The power of 1000 that leaves `n` (>= 1000) under 1000, at most the last unit. */
  private def unit(n: Long): Int =
    var u = 0
    var v = n
    while v >= 1000 && u < byteUnits.length - 1 do
      v /= 1000
      u += 1
    u

  /** `n` in its [[unit]], with one decimal, rounded half up (999,950 is "1000.0"). */
  private def scaled(b: java.lang.StringBuilder, n: Long): java.lang.StringBuilder =
    var divisor = 1L
    var u = unit(n)
    while u > 0 do
      divisor *= 1000
      u -= 1
    val tenth = divisor / 10
    val tenths = n / tenth + (if n % tenth * 2 >= tenth then 1 else 0) // no overflow near Long.MaxValue
    b.append(tenths / 10).append('.').append(tenths % 10)
