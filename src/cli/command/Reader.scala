package asyncpipe.cli.command

import scala.concurrent.duration.FiniteDuration

/** Reads the text of one value (an option's, or an address option's): the value, or the rule the
  * text broke, a phrase that quotes it (the caller adds the token and the expected form). `form` is
  * the value's placeholder in help and usage lines (`N`, `DURATION`, `lines|len|nul|raw`), and
  * `words` the values a shell may complete (word choices only).
  */
trait Reader[A]:
  def form: String
  def read(text: String): Either[String, A]
  def words: Seq[String] = Nil
  /** Whether a shell should complete the value as a file name. */
  def isPath: Boolean = false

  /** The value of `text` given to option `name` of `verb`, or the usage error: the rule, with the
    * token and the option's form. A reader whose values carry their own usage errors (addresses)
    * gives those instead.
    */
  def readFor(text: String, name: String, verb: Option[String], optionForm: String): Either[CliError, A] =
    read(text).left.map(rule => CliError.BadToken(verb, text, s"$name: $rule", optionForm))

  /** This reader, with its values checked (or changed) by `f`. */
  final def andThen[B](f: A => Either[String, B]): Reader[B] =
    val base = this
    new Reader[B]:
      def form: String = base.form
      def read(text: String): Either[String, B] = base.read(text).flatMap(f)
      override def words: Seq[String] = base.words
      override def isPath: Boolean = base.isPath

  /** This reader under another placeholder. */
  final def as(placeholder: String): Reader[A] =
    val base = this
    new Reader[A]:
      def form: String = placeholder
      def read(text: String): Either[String, A] = base.read(text)
      override def words: Seq[String] = base.words
      override def isPath: Boolean = base.isPath

/** The readers, one per value type: whole numbers, sizes, durations, decimals and word choices. */
object Reader:
  /** A whole number in decimal, from `min` to `max`. */
  def wholeNumber(min: Long, max: Long, placeholder: String = "N"): Reader[Long] = new Reader[Long]:
    def form: String = placeholder
    def read(text: String): Either[String, Long] =
      val negative = text.startsWith("-")
      val digits = if negative then text.substring(1) else text
      val range =
        if min == 1 && max == Long.MaxValue then "a positive whole number"
        else if min == Long.MinValue && max == Long.MaxValue then "a whole number"
        else s"a whole number from $min to $max"
      if !isDigits(digits) then Left(s"'$text' is not $range")
      else
        val n = BigInt(text)
        if n < min || n > max then
          if n > max && max == Long.MaxValue then Left(s"'$text' is too large (at most $max)") else Left(s"'$text' is not $range")
        else Right(n.toLong)

  /** A positive whole number (1 and up). */
  val positive: Reader[Long] = wholeNumber(1, Long.MaxValue)

  /** A size in bytes: digits with an optional K, M, G or T suffix, binary (4M = 4 MiB), from `min`
    * to `max` bytes.
    */
  def size(min: Long, max: Long): Reader[Long] = new Reader[Long]:
    private val text = "([0-9]+)([KMGTkmgt]?)".r
    def form: String = "SIZE"
    def read(s: String): Either[String, Long] = s match
      case text(digits, suffix) =>
        val shift = suffix.toUpperCase match
          case "K" => 10
          case "M" => 20
          case "G" => 30
          case "T" => 40
          case _   => 0
        val bytes = BigInt(digits) << shift
        if bytes < min then Left(s"'$s' is less than $min byte${if min == 1 then "" else "s"}")
        else if bytes > max then Left(s"'$s' is more than $max bytes")
        else Right(bytes.toLong)
      case _ => Left(s"'$s' is not a size: a number of bytes with an optional K, M, G or T suffix (binary: 4M = 4 MiB)")

  /** The text of a size, the largest binary suffix that divides it (4194304 is "4M"). */
  def renderSize(bytes: Long): String =
    Seq(40 -> "T", 30 -> "G", 20 -> "M", 10 -> "K").find((shift, _) => bytes % (1L << shift) == 0 && bytes != 0) match
      case Some((shift, s)) => s"${bytes >> shift}$s"
      case None             => bytes.toString

  /** A duration ([[Durations]]): more than zero unless `allowZero`. */
  def duration(allowZero: Boolean = false, placeholder: String = "DURATION"): Reader[FiniteDuration] = new Reader[FiniteDuration]:
    def form: String = placeholder
    def read(text: String): Either[String, FiniteDuration] = Durations.parse(text, allowZero)

  /** A duration in whole milliseconds (for timers): "1.5ms" is refused rather than rounded. */
  def millis(allowZero: Boolean = false, placeholder: String = "D"): Reader[Long] = new Reader[Long]:
    def form: String = placeholder
    def read(text: String): Either[String, Long] = Durations.parseMillis(text, allowZero)

  /** A decimal number of at least `min` ("1.5"); `rule` says what it is for. */
  def decimal(min: Double, rule: String, placeholder: String = "F"): Reader[Double] = new Reader[Double]:
    def form: String = placeholder
    def read(text: String): Either[String, Double] =
      val n = if Durations.isDecimal(text) then text.toDouble else Double.NaN
      if n.isNaN || n < min || n.isInfinite then Left(s"'$text' is not $rule") else Right(n)

  /** One of `values`, named by `token`; a near miss is suggested ("did you mean 'drop'?"). */
  def choice[A](values: Seq[A])(token: A => String): Reader[A] = new Reader[A]:
    private val tokens = values.map(token)
    def form: String = tokens.mkString("|")
    override def words: Seq[String] = tokens
    def read(text: String): Either[String, A] =
      values.find(token(_) == text).toRight {
        val hint = CliError.suggest(text, tokens).fold("")(s => s"; did you mean '$s'?")
        s"'$text' is not one of ${tokens.mkString(", ")}$hint"
      }

  /** A file's path, as given. */
  def path(placeholder: String = "FILE"): Reader[String] = new Reader[String]:
    def form: String = placeholder
    override def isPath: Boolean = true
    def read(text: String): Either[String, String] = if text.isEmpty then Left("the path is empty") else Right(text)

  /** Any text (for asyncpipe's own options). */
  def text(placeholder: String): Reader[String] = new Reader[String]:
    def form: String = placeholder
    def read(text: String): Either[String, String] = Right(text)

  /** Whether `text` is one or more decimal digits. */
  def isDigits(text: String): Boolean =
    var i = 0
    while i < text.length && text(i) >= '0' && text(i) <= '9' do i += 1
    text.nonEmpty && i == text.length
