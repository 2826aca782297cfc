package asyncpipe.cli.command

/** The one option system of every verb: an option is declared once ([[Opt]]: its names, its
  * value's reader, its default and its help line), and parsing, "did you mean", `--help`, the
  * shell completions and the man page all come from that declaration. A value is read by one of
  * the [[Reader]]s, one per value type.
  */
final class Opt[A] private (
    /** `--name`. */
    val name: String,
    /** `-x`, if the option has a short form. */
    val short: Option[String],
    /** How its value is read; None for a flag (present or not). */
    val reader: Option[Reader[A]],
    /** One line of help (what it does; its default in words, where it has one). */
    val help: String,
    /** Whether it may be given more than once (each value is kept, in order). */
    val repeatable: Boolean,
    /** Left out of help, completions and the man page: for asyncpipe's own use (a bench fork). */
    val hidden: Boolean
):
  /** The form for help and usage errors: `--name VALUE` or `--name`. */
  def form: String = reader.fold(name)(r => s"$name ${r.form}")
  /** The left column of help: the short form too, when there is one. */
  def helpForm: String = short.fold(form)(s => s"$s, $form")
  def isFlag: Boolean = reader.isEmpty
  override def toString: String = name

object Opt:
  /** An option that takes a value read by `reader`. */
  def apply[A](name: String, reader: Reader[A], help: String, short: Option[String] = None, repeatable: Boolean = false,
      hidden: Boolean = false): Opt[A] =
    new Opt(name, short, Some(reader), help, repeatable, hidden)

  /** An option without a value. */
  def flag(name: String, help: String, short: Option[String] = None): Opt[Unit] =
    new Opt[Unit](name, short, None, help, repeatable = false, hidden = false)

/** A command line read against a list of options: the values given, the other tokens (the
  * operands) in order, and, when the parse stopped at `--` ([[Options.Operands.UntilDoubleDash]]),
  * the tokens after it.
  */
final class Parsed(
    values: Map[Opt[?], Vector[Any]],
    val operands: Vector[String],
    raws: Map[Opt[?], Vector[String]],
    val command: Option[Vector[String]]
):
  /** The (last) value of `opt`, if it was given. */
  def get[A](opt: Opt[A]): Option[A] = values.get(opt).map(_.last.asInstanceOf[A])
  /** Every value of a repeatable `opt`, in order. */
  def all[A](opt: Opt[A]): Vector[A] = values.getOrElse(opt, Vector.empty).asInstanceOf[Vector[A]]
  /** Whether `opt` was given. */
  def has(opt: Opt[?]): Boolean = values.contains(opt)
  /** The text given for `opt` (the last one), for errors that concern it; "" if absent or a flag. */
  def raw(opt: Opt[?]): String = raws.get(opt).fold("")(_.last)

object Options:
  /** How a parse treats the tokens that are not options. */
  enum Operands:
    /** Options and operands mix in any order; `--` makes every later token an operand. */
    case Anywhere
    /** As [[Anywhere]], but `--` ends the parse: what follows is returned as it is, untouched (a
      * command to run). Tokens that start with '-' are options before it.
      */
    case UntilDoubleDash

  /** Reads `args` against `opts`. `verb` names the command in errors and `synopsis` is its usage
    * line. An option's value is `--name VALUE` or `--name=VALUE`; a short form takes the next
    * token.
    */
  def parse(
      args: Seq[String],
      opts: Seq[Opt[?]],
      verb: Option[String],
      synopsis: String,
      operands: Operands = Operands.Anywhere
  ): Either[CliError, Parsed] =
    var values = Map.empty[Opt[?], Vector[Any]]
    var raws = Map.empty[Opt[?], Vector[String]]
    val rest = Vector.newBuilder[String]
    var i = 0
    var onlyOperands = false
    while i < args.length do
      val token = args(i)
      i += 1
      if !onlyOperands && token == "--" then
        if operands == Operands.UntilDoubleDash then
          return Right(Parsed(values, rest.result(), raws, Some(args.drop(i).toVector)))
        onlyOperands = true
      else if onlyOperands || !isOption(token) then rest += token
      else
        val at = token.indexOf('=')
        val name = if at < 0 then token else token.substring(0, at)
        named(opts, name) match
          case None => return Left(unknown(opts, token, name, verb, synopsis))
          case Some(opt) =>
            val text: Either[CliError, String] = opt.reader match
              case None =>
                if at >= 0 then Left(CliError.BadToken(verb, token, s"${opt.name} takes no value", opt.form)) else Right("")
              case Some(_) if at >= 0 => Right(token.substring(at + 1))
              case Some(r) =>
                if i < args.length then { i += 1; Right(args(i - 1)) }
                else Left(CliError.Missing(verb, s"a value after ${opt.name} (${r.form})", opt.form))
            text match
              case Left(e) => return Left(e)
              case Right(v) =>
                if values.contains(opt) && !opt.repeatable then
                  return Left(CliError.BadToken(verb, token, s"${opt.name} is given more than once", opt.form))
                val value: Either[CliError, Any] = opt.reader.fold(Right(()))(_.readFor(v, opt.name, verb, opt.form))
                value match
                  case Left(e) => return Left(e)
                  case Right(x) =>
                    values = values.updated(opt, values.getOrElse(opt, Vector.empty) :+ x)
                    raws = raws.updated(opt, raws.getOrElse(opt, Vector.empty) :+ v)
    Right(Parsed(values, rest.result(), raws, None))

  /** The option `name` (long or short) names, if any. */
  private def named(opts: Seq[Opt[?]], name: String): Option[Opt[?]] =
    val it = opts.iterator
    while it.hasNext do
      val o = it.next()
      if o.name == name || o.short.contains(name) then return Some(o)
    None

  /** An unknown option, with the options it is a typo of or the start of (`--max` in `retry`). */
  private def unknown(opts: Seq[Opt[?]], token: String, name: String, verb: Option[String], synopsis: String): CliError =
    val names = opts.map(_.name)
    val near = CliError.suggest(name, names).toSeq
    val suggestions = if near.nonEmpty then near else names.filter(n => name.length > 2 && n.startsWith(name))
    CliError.UnknownOption(verb, name, synopsis, suggestions)

  /** Whether `token` is an option (`--name`, `-x`), not an operand: `-` alone is one, and so is a
    * pipeline text that starts with it (`- | mux | file:x`). `--` itself is neither.
    */
  def isOption(token: String): Boolean =
    if token.startsWith("--") then token.length > 2
    else token.length >= 2 && token.charAt(0) == '-' && token.charAt(1).isLetter


  /** Rows of two columns for help, the first as wide as its widest cell (at most `maxColumn`),
    * the second wrapped to 80 columns.
    */
  def table(rows: Seq[(String, String)], maxColumn: Int = 36): String =
    val column = math.min(maxColumn, rows.map(_._1.length).max)
    val indent = " " * (column + 4)
    rows.map { (left, right) =>
      val text = wrap(right, 80 - indent.length)
      val first = if left.length <= column then s"  ${left.padTo(column, ' ')}  ${text.head}" else s"  $left\n$indent${text.head}"
      (first +: text.tail.map(indent + _)).mkString("\n")
    }.mkString("\n")

  /** Help lines for `opts`: the forms in a column as wide as the widest (at most `maxColumn`; a
    * longer form has its text on the next line), then the help, wrapped to 80 columns.
    */
  def helpLines(all: Seq[Opt[?]], maxColumn: Int = 28): String =
    table(all.filterNot(_.hidden).map(o => o.helpForm -> o.help), maxColumn)

  /** "Usage: " and the synopsis, each form (`... | asyncpipe ...`) on a line of its own and every
    * line within 80 columns (a long form goes on, indented, on the next line).
    */
  def usage(synopsis: String): String =
    val forms = synopsis.split(" \\| (?=asyncpipe )").toSeq
    val lines = forms.zipWithIndex.flatMap { (form, i) =>
      val lead = if i == 0 then "Usage: " else "       "
      val wrapped = wrap(form, 80 - 9)
      (lead + wrapped.head) +: wrapped.tail.map("         " + _)
    }
    lines.mkString("\n")

  /** Prose for help: `text`'s words (its line breaks are spaces), in lines of at most 80 columns. */
  def paragraph(text: String): String = wrap(text.trim.replaceAll("\\s+", " "), 80).mkString("\n")

  /** `text` in lines of at most `width` characters, broken at spaces. */
  def wrap(text: String, width: Int): Seq[String] =
    val lines = Vector.newBuilder[String]
    val line = StringBuilder()
    for word <- text.split(' ') if word.nonEmpty do
      if line.nonEmpty && line.length + 1 + word.length > width then
        lines += line.result()
        line.clear()
      if line.nonEmpty then line += ' '
      line ++= word
    if line.nonEmpty then lines += line.result()
    val result = lines.result()
    if result.isEmpty then Vector("") else result
