package asyncpipe.cli.command

import scala.concurrent.duration.{FiniteDuration, MILLISECONDS, NANOSECONDS}

/** Durations on the command line, in one place: addresses (`tick:1.5s`) and the task verbs
  * (`every 10s`, `--timeout 2m`) read and print them here.
  *
  * {{{
  * duration = decimal number (decimals allowed, "1.5s") followed by a unit: ns, us, ms, s, m, h;
  *            more than zero (or zero, where a caller allows it), a whole number of nanoseconds,
  *            at most Long.MaxValue ns
  * }}}
  * Failures are rules: sentences that quote the text and say what is wrong, for a caller to wrap
  * in its own usage error with the token and the expected form.
  */
object Durations:
  /** Units, largest first, in nanoseconds. */
  val units: Seq[(String, Long)] =
    Seq("h" -> 3600_000_000_000L, "m" -> 60_000_000_000L, "s" -> 1_000_000_000L, "ms" -> 1_000_000L, "us" -> 1_000L, "ns" -> 1L)

  /** "ns, us, ms, s, m, h", for messages. */
  val unitList: String = units.map(_._1).reverse.mkString(", ")

  /** The duration in `text`, or the rule it breaks. `allowZero` accepts "0s" and the like. */
  def parse(text: String, allowZero: Boolean = false): Either[String, FiniteDuration] =
    val split = numberEnd(text)
    val (number, unit) = (text.substring(0, split), text.substring(split))
    if text.isEmpty then Left(s"the duration is missing: a number and a unit ($unitList), e.g. 500ms or 1.5s")
    else if number.isEmpty then Left(s"duration '$text' is not a number with a unit ($unitList), e.g. 500ms or 1.5s")
    else if unit.isEmpty then Left(s"duration '$number' needs a unit ($unitList), e.g. ${number}ms or ${number}s")
    else
      units.find(_._1 == unit) match
        case None =>
          val hint = CliError.suggest(unit, units.map(_._1).reverse).fold("")(s => s"; did you mean '$number$s'?")
          Left(s"unknown duration unit '$unit' in '$text' (known: $unitList)$hint")
        case Some((_, nanosPerUnit)) =>
          // java.math, not scala.math: this runs at every start-up of a task verb.
          val nanos = java.math.BigDecimal(number).multiply(java.math.BigDecimal.valueOf(nanosPerUnit))
          if nanos.signum == 0 && !allowZero then Left(s"the duration must be more than zero (got '$text')")
          else if nanos.signum != 0 && nanos.stripTrailingZeros.scale > 0 then Left(s"duration '$text' is not a whole number of nanoseconds")
          else if nanos.compareTo(java.math.BigDecimal.valueOf(Long.MaxValue)) > 0 then
            Left(s"duration '$text' is too long (at most ${Long.MaxValue}ns, about 292 years)")
          else Right(FiniteDuration(nanos.longValue, NANOSECONDS).toCoarsest)

  /** Whether `text` is a decimal number: digits, optionally a '.' and more digits ("1.5", not ".5"). */
  def isDecimal(text: String): Boolean = text.nonEmpty && numberEnd(text) == text.length

  /** The end of the leading decimal number of `text` (0 if there is none). */
  private def numberEnd(text: String): Int =
    def digits(from: Int): Int =
      var i = from
      while i < text.length && text(i) >= '0' && text(i) <= '9' do i += 1
      i
    val whole = digits(0)
    if whole == 0 then 0
    else if whole < text.length && text(whole) == '.' && digits(whole + 1) > whole + 1 then digits(whole + 1)
    else whole

  /** As [[parse]], for callers that count in whole milliseconds (timers): the milliseconds, or the
    * rule; "1.5ms" and "10us" are refused rather than rounded.
    */
  def parseMillis(text: String, allowZero: Boolean = false): Either[String, Long] =
    parse(text, allowZero).flatMap { d =>
      if d.toNanos % 1_000_000 != 0 then Left(s"duration '$text' is not a whole number of milliseconds (the smallest step here is 1ms)")
      else Right(d.toMillis)
    }

  /** The shortest exact text: the largest unit that divides the duration (`90s` is "90s", 60s is
    * "1m"); zero is "0ms".
    */
  def render(d: FiniteDuration): String =
    val nanos = d.toNanos
    if nanos == 0 then "0ms"
    else
      val (unit, per) = units.find((_, per) => nanos % per == 0).get
      s"${nanos / per}$unit"

  def renderMillis(millis: Long): String = render(FiniteDuration(millis, MILLISECONDS))
