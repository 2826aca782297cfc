package asyncpipe.cli.command

/** One verb of the command line (`asyncpipe VERB ...`). */
trait Verb:
  def name: String
  /** The forms the verb accepts, one per line, for `--help` and usage errors. */
  def synopsis: String
  /** One line for the verb table in `asyncpipe --help`. */
  def summary: String
  /** Whether this build can run the verb (the rest are listed so users see what is coming). */
  def available: Boolean = true
  /** Its options, as declared: help, the completions and the man page come from them. */
  def opts: Seq[Opt[?]] = Nil
  /** What its operands are, for completions: addresses, suites, verbs... (none by default). */
  def operandWords: Seq[String] = Nil
  /** Whether the verb table of `--help` lists it (a verb without a name to type does not). */
  def listed: Boolean = true
  /** Whether the verb takes a command line that starts with no verb's name (`asyncpipe FROM TO`). */
  def claims(args: Seq[String]): Boolean = false
  def help: String = s"Usage: $synopsis\n\n$summary\n"
  /** Runs the verb with the arguments after its name (`--help` among them is handled by `Main`);
    * returns the exit status or an error.
    */
  def run(args: Seq[String], io: Io): Either[CliError, Int]

object Verb:
  /** A verb that lives in a module above the command line (`bench`, in the bench module, which
    * depends on this one): found by its object's class name when it is first used. A build
    * without that module lists the verb as not available.
    */
  def above(name: String, className: String): Verb = Above(name, className)

  private final class Above(val name: String, className: String) extends Verb:
    private lazy val loaded: Option[Verb] =
      try Some(Class.forName(className + "$").getField("MODULE$").get(null).asInstanceOf[Verb])
      catch case _: ClassNotFoundException => None
    def synopsis: String = loaded.fold(s"asyncpipe $name")(_.synopsis)
    def summary: String = loaded.fold("not part of this build")(_.summary)
    override def available: Boolean = loaded.isDefined
    override def help: String = loaded.fold(super.help)(_.help)
    override def opts: Seq[Opt[?]] = loaded.fold(Nil)(_.opts)
    override def operandWords: Seq[String] = loaded.fold(Nil)(_.operandWords)
    def run(args: Seq[String], io: Io): Either[CliError, Int] = loaded match
      case Some(verb) => verb.run(args, io)
      case None       => Left(CliError.Runtime(name, s"'$name' is not part of this build of asyncpipe"))
