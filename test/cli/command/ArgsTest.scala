package asyncpipe.cli.command

import asyncpipe.cli.*


import mainargs.{arg, main, ParserForClass}

/** A stand-in verb configuration to pin how mainargs failures become [[CliError]] values. */
@main final case class SampleOptions(
    @arg(doc = "how many") count: Int = 1,
    @arg(doc = "who") name: String
)
object SampleOptions:
  given ParserForClass[SampleOptions] = ParserForClass[SampleOptions]

class ArgsTest extends munit.FunSuite:
  private val synopsis = "asyncpipe sample --name NAME [--count N]"
  private def parse(args: String*) = Args.parse("sample", synopsis, summon[ParserForClass[SampleOptions]], args)

  test("well-formed options parse"):
    assertEquals(parse("--name", "x", "--count", "3"), Right(SampleOptions(3, "x")))

  test("an unknown option is named"):
    assertEquals(parse("--name", "x", "--colour", "red"), Left(CliError.UnknownOption(Some("sample"), "--colour", synopsis)))

  test("a value that does not parse names the token and the option"):
    parse("--name", "x", "--count", "lots") match
      case Left(CliError.BadToken(Some("sample"), "lots", rule, `synopsis`)) => assert(rule.startsWith("--count"), rule)
      case other                                                            => fail(s"unexpected $other")

  test("a missing required option is named"):
    assertEquals(parse("--count", "2"), Left(CliError.Missing(Some("sample"), "--name", synopsis)))

  test("an option without its value is named"):
    assertEquals(parse("--name"), Left(CliError.Missing(Some("sample"), "a value after --name", synopsis)))

  test("a repeated option is refused"):
    parse("--name", "a", "--name", "b") match
      case Left(CliError.BadToken(_, _, rule, _)) => assert(rule.contains("--name given more than once"), rule)
      case other                                  => fail(s"unexpected $other")
