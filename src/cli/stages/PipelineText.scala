package asyncpipe.cli.stages

import asyncpipe.cli.command.*

/** The text of a pipeline: stages separated by unquoted '|', each one tokens like a command line. */
object PipelineText:
  private val synopsis = RunVerb.synopsis

  /** The stage plans of `text`; `base` holds the options given before the pipeline. */
  def plans(text: String, base: StageOptions): Either[CliError, Seq[Stages.StagePlan]] =
    tokenize(text).flatMap { segments =>
      val n = segments.length
      if segments.exists(_.isEmpty) then Left(CliError.BadToken(Some("run"), text.trim, "a stage is empty (two '|' in a row, or one at an end)", synopsis))
      else
        val plans = segments.zipWithIndex.map((tokens, i) => plan(tokens, i, n, base))
        plans.collectFirst { case Left(e) => e }.toLeft(plans.collect { case Right(p) => p }).flatMap { ps =>
          if n == 1 && segments.head.head != "mux" then
            Left(CliError.BadToken(Some("run"), text.trim, "a pipeline needs a source and a sink ('A | B') or a mux stage; for one address run 'asyncpipe ADDR'", synopsis))
          else Right(ps)
        }
    }

  private def plan(tokens: Seq[String], i: Int, n: Int, base: StageOptions): Either[CliError, Stages.StagePlan] =
    val first = i == 0
    val last = i == n - 1
    if tokens.head == "mux" then MuxVerb.stage(tokens.tail, base, first, last)
    else
      StageOptions.parse(tokens, Some("run"), synopsis, mux = false, base).flatMap { line =>
        line.operands match
          case Seq(one) =>
            Address.parse(one).flatMap { a =>
              if first then a.checkRole(Role.Source).map(_ => Stages.StagePlan(Seq(a), Nil, line.options))
              else if last then a.checkRole(Role.Sink).map(_ => Stages.StagePlan(Nil, Seq(a), line.options))
              else Left(CliError.BadToken(Some("run"), one, "an address stage can only be first (the source) or last (the sink); to copy in the middle use 'mux --out ADDR'", synopsis))
            }
          case Seq() => Left(CliError.Missing(Some("run"), s"an address or 'mux' in stage ${i + 1}", synopsis))
          case more =>
            val known = Seq("mux")
            val hint = CliError.suggest(more.head, known).fold("")(s => s"; did you mean '$s'?")
            Left(CliError.BadToken(Some("run"), more.mkString(" "), s"stage ${i + 1} must be one address or 'mux [OPTIONS]'$hint", synopsis))
      }

  /** Splits into stages at unquoted '|', each stage into words at unquoted blanks. '...' quotes
    * literally, "..." quotes with '\' escaping '"' and '\', and an unquoted '\' makes the blank, '|' or quote after
    * it ordinary (before anything else it is itself, so `file:a\,b` keeps its escaped comma).
    * An unquoted '#' that begins a word begins a comment, to the end of its line (as in a shell:
    * a '#' inside a word, `file:log#1`, is part of it).
    */
  def tokenize(text: String): Either[CliError, Vector[Vector[String]]] =
    val stages = Vector.newBuilder[Vector[String]]
    var words = Vector.newBuilder[String]
    val word = StringBuilder()
    var inWord = false
    var i = 0
    def endWord(): Unit =
      if inWord then words += word.result()
      word.clear()
      inWord = false
    while i < text.length do
      val c = text(i)
      c match
        case '#' if !inWord =>
          while i + 1 < text.length && text(i + 1) != '\n' do i += 1
        case '|' =>
          endWord()
          stages += words.result()
          words = Vector.newBuilder[String]
        case ' ' | '\t' | '\n' | '\r' => endWord()
        case '\'' =>
          val end = text.indexOf('\'', i + 1)
          if end < 0 then return Left(CliError.BadToken(Some("run"), text.substring(i), "a ' quote is not closed", synopsis))
          word ++= text.substring(i + 1, end)
          inWord = true
          i = end
        case '"' =>
          i += 1
          while i < text.length && text(i) != '"' do
            if text(i) == '\\' && i + 1 < text.length && (text(i + 1) == '"' || text(i + 1) == '\\') then i += 1
            word += text(i)
            i += 1
          if i >= text.length then return Left(CliError.BadToken(Some("run"), text, "a \" quote is not closed", synopsis))
          inWord = true
        case '\\' if i + 1 < text.length && " \t|'\"".contains(text(i + 1)) =>
          i += 1
          word += text(i)
          inWord = true
        case other =>
          word += other
          inWord = true
      i += 1
    endWord()
    stages += words.result()
    Right(stages.result())
