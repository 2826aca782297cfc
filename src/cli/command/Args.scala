package asyncpipe.cli.command

import mainargs.{ParserForClass, Result}

/** Parses a verb's options with mainargs and turns its failures into [[CliError]] values that name
  * the offending token.
  */
object Args:
  def parse[T](verb: String, synopsis: String, parser: ParserForClass[T], args: Seq[String]): Either[CliError, T] =
    parser.constructRaw(args, allowPositional = false, allowRepeats = false) match
      case Result.Success(value) => Right(value)
      case failure: Result.Failure => Left(toError(Some(verb), synopsis, failure))

  def toError(verb: Option[String], synopsis: String, failure: Result.Failure): CliError =
    failure match
      case Result.Failure.MismatchedArguments(missing, unknown, duplicate, incomplete) =>
        unknown.headOption.map { token =>
          if token.startsWith("-") && token != "-" then CliError.UnknownOption(verb, token, synopsis)
          else CliError.BadToken(verb, token, "unexpected argument", synopsis)
        }.orElse(duplicate.headOption.map { (arg, tokens) =>
          CliError.BadToken(verb, tokens.mkString(" "), s"${flag(arg)} given more than once", synopsis)
        }).orElse(incomplete.map(arg => CliError.Missing(verb, s"a value after ${flag(arg)}", synopsis)))
          .getOrElse(CliError.Missing(verb, missing.map(flag).mkString(", "), synopsis))
      case Result.Failure.InvalidArguments(errors) =>
        errors.head match
          case Result.ParamError.Failed(arg, tokens, message) =>
            CliError.BadToken(verb, tokens.mkString(" "), s"${flag(arg)}: $message", synopsis)
          case Result.ParamError.Exception(arg, tokens, e) =>
            CliError.BadToken(verb, tokens.mkString(" "), s"${flag(arg)}: ${e.getMessage}", synopsis)
          case Result.ParamError.DefaultFailed(arg, e) =>
            CliError.Runtime(verb.getOrElse("asyncpipe"), s"default of ${flag(arg)} failed: ${e.getMessage}")
      case Result.Failure.Exception(e) =>
        CliError.Runtime(verb.getOrElse("asyncpipe"), String.valueOf(e.getMessage))
      case early: Result.Failure.Early =>
        CliError.Runtime(verb.getOrElse("asyncpipe"), early.toString)

  private def flag(arg: mainargs.ArgSig): String =
    arg.longName(mainargs.Util.kebabCaseNameMapper(_)).map("--" + _)
      .orElse(arg.shortName.map(c => s"-$c")).getOrElse("<argument>")
