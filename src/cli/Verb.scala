package asyncpipe.cli

/** Standard streams as the tool sees them: data goes to `out`, diagnostics to `err`. */
final case class Io(out: OwnedOutput, err: java.io.PrintStream)

/** One verb of the command line (`asyncpipe VERB ...`). */
trait Verb:
  def name: String
  /** The forms the verb accepts, one per line, for `--help` and usage errors. */
  def synopsis: String
  /** One line for the verb table in `asyncpipe --help`. */
  def summary: String
  /** Whether this build can run the verb (the rest are listed so users see what is coming). */
  def available: Boolean = true
  def help: String = s"Usage: $synopsis\n\n$summary\n"
  /** Runs the verb with the arguments after its name (`--help` among them is handled by `Main`);
    * returns the exit status or an error.
    */
  def run(args: Seq[String], io: Io): Either[CliError, Int]
