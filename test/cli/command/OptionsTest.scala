package asyncpipe.cli.command

/** The one option parser: forms, values, repeats, unknown options with suggestions, `--`. */
class OptionsTest extends munit.FunSuite:
  private val count = Opt("--count", Reader.positive, "how many")
  private val mode = Opt("--mode", Reader.choice(Seq("fast", "slow"))(identity), "how")
  private val in = Opt("--in", Reader.path("ADDR"), "an input", repeatable = true)
  private val verbose = Opt.flag("--verbose", "say more", short = Some("-v"))
  private val maxA = Opt("--max-attempts", Reader.positive, "attempts")
  private val maxD = Opt("--max-delay", Reader.millis(), "delay")
  private val hidden = Opt("--secret", Reader.text("X"), "internal", hidden = true)
  private val opts = Seq(count, mode, in, verbose, maxA, maxD, hidden)
  private def parse(args: String*) = Options.parse(args, opts, Some("v"), "SYN")

  test("values by '--name VALUE' and '--name=VALUE', flags, short forms and operands in any order"):
    val p = parse("a", "--count", "3", "--mode=slow", "-v", "b", "--in", "x", "--in=y").toOption.get
    assertEquals((p.get(count), p.get(mode), p.has(verbose), p.all(in), p.operands), (Some(3L), Some("slow"), true, Vector("x", "y"), Vector("a", "b")))
    assertEquals(p.raw(count), "3")
    assertEquals(p.get(maxA), None)

  test("'-' alone is an operand; after '--' everything is"):
    val p = parse("-", "--", "--count", "x").toOption.get
    assertEquals((p.operands, p.get(count), p.command), (Vector("-", "--count", "x"), None, None))

  test("UntilDoubleDash: the tokens after '--' are the command, untouched"):
    val p = Options.parse(Seq("--count", "2", "--", "ls", "--count"), opts, None, "SYN", Options.Operands.UntilDoubleDash).toOption.get
    assertEquals((p.get(count), p.command), (Some(2L), Some(Vector("ls", "--count"))))

  test("a bad value names the token, the option and its rule, and shows the option's form"):
    assertEquals(parse("--count", "0"), Left(CliError.BadToken(Some("v"), "0", "--count: '0' is not a positive whole number", "--count N")))
    assertEquals(parse("--mode", "fsat").left.map(_.render).left.toOption.get.contains("did you mean 'fast'?"), true)

  test("missing values, values on flags and repeats are usage errors"):
    assertEquals(parse("--count"), Left(CliError.Missing(Some("v"), "a value after --count (N)", "--count N")))
    assertEquals(parse("--verbose=yes"), Left(CliError.BadToken(Some("v"), "--verbose=yes", "--verbose takes no value", "--verbose")))
    assertEquals(parse("--count", "1", "--count", "2"), Left(CliError.BadToken(Some("v"), "--count", "--count is given more than once", "--count N")))

  test("an unknown option suggests a near one, or the options it is the start of"):
    assertEquals(parse("--cuont", "1"), Left(CliError.UnknownOption(Some("v"), "--cuont", "SYN", Seq("--count"))))
    assertEquals(parse("--max=1"), Left(CliError.UnknownOption(Some("v"), "--max", "SYN", Seq("--max-attempts", "--max-delay"))))
    assertEquals(parse("--zzzzzz"), Left(CliError.UnknownOption(Some("v"), "--zzzzzz", "SYN", Nil)))

  test("help lines: every visible option, forms in one column, each line within 80 columns"):
    val text = Options.helpLines(opts)
    for o <- opts if !o.hidden do assert(text.contains(o.helpForm), s"${o.name} missing:\n$text")
    assert(!text.contains("--secret"), text)
    for line <- text.linesIterator do assert(line.length <= 80, s"too long: $line")
    val long = Opt("--x", Reader.text("X"), "word " * 40)
    assert(Options.helpLines(Seq(long)).linesIterator.size > 1)

  test("'-' and a pipeline text that starts with it are operands; '-x' and '--x' are options"):
    val p = parse("- | mux | file:x", "-").toOption.get
    assertEquals(p.operands, Vector("- | mux | file:x", "-"))
    assert(Options.isOption("-v") && Options.isOption("--count") && !Options.isOption("-") && !Options.isOption("- | b"))
    assert(!Options.isOption("--") && !Options.isOption("-5"))
