package asyncpipe.cli

import asyncpipe.cli.command.*
import asyncpipe.cli.stages.*

/** The shell completions and the man page, made from the same declarations as `--help`: the verbs,
  * their options ([[Opt]], with their readers' value words), and the address kinds.
  */
object Docs:
  /** The verbs a user types by name. */
  private def named(verbs: Seq[Verb]): Seq[Verb] = verbs.filter(_.listed)
  /** The options a user may type (hidden ones are asyncpipe's own). */
  private def visible(v: Verb): Seq[Opt[?]] = v.opts.filterNot(_.hidden)
  /** What an address operand starts with: `-` and every kind's `SCHEME:`. */
  private def addressStarts: Seq[String] = AddressKinds.all.map(k => if k.scheme == "-" then "-" else k.scheme + ":")
  private def words(o: Opt[?]): Seq[String] = o.reader.fold(Nil)(_.words)
  private def completesFiles(o: Opt[?]): Boolean = o.reader.exists(_.isPath)

  // ---------------------------------------------------------------------------------------------
  // bash

  /** A bash completion script: `source <(asyncpipe completions bash)`. */
  def bash(verbs: Seq[Verb], stage: Verb): String =
    def q(s: String) = "'" + s.replace("'", "'\\''") + "'"
    def valueCases(verb: String, v: Verb): Seq[String] = visible(v).filterNot(_.isFlag).map { o =>
      val reply =
        if words(o).nonEmpty then s"""COMPREPLY=($$(compgen -W ${q(words(o).mkString(" "))} -- "$$cur"))"""
        else if completesFiles(o) then s"""COMPREPLY=($$(compgen -f -- "$$cur"))"""
        else "COMPREPLY=()"
      s"""    ${q(verb + " " + o.name)}) $reply; return ;;"""
    }
    def optionList(v: Verb) = q(visible(v).flatMap(o => o.short.toSeq :+ o.name).mkString(" "))
    val all = named(verbs)
    s"""# bash completion for asyncpipe, made by 'asyncpipe completions bash' from its declarations.
       |_asyncpipe() {
       |  local line=$${COMP_LINE:0:$$COMP_POINT}
       |  local cur=$${line##*[[:space:]]}
       |  local prev=""
       |  (( COMP_CWORD > 0 )) && prev=$${COMP_WORDS[COMP_CWORD-1]}
       |  local verb="" i
       |  for (( i = 1; i < COMP_CWORD; i++ )); do
       |    case $${COMP_WORDS[i]} in
       |      --) return ;;
       |      ${all.map(_.name).mkString("|")}) verb=$${COMP_WORDS[i]}; break ;;
       |    esac
       |  done
       |  COMPREPLY=()
       |  case "$$verb $$prev" in
       |${(valueCases("", stage) ++ all.flatMap(v => valueCases(v.name, v))).mkString("\n")}
       |  esac
       |  local opts operands
       |  case $$verb in
       |${all.map(v => s"    ${v.name}) opts=${optionList(v)}; operands=${q(v.operandWords.mkString(" "))} ;;").mkString("\n")}
       |    *) opts=${optionList(stage)}; operands=${q((all.map(_.name) ++ Seq("help") ++ addressStarts).mkString(" "))} ;;
       |  esac
       |  if [[ $$cur == -* ]]; then
       |    COMPREPLY=($$(compgen -W "$$opts" -- "$$cur"))
       |    [[ -z $$verb && $$cur == - ]] && COMPREPLY+=(-)
       |  elif [[ -z $$verb && $$cur == file:* ]]; then
       |    COMPREPLY=($$(compgen -f -- "$${cur#file:}"))
       |    COMPREPLY=("$${COMPREPLY[@]/#/file:}")
       |  else
       |    COMPREPLY=($$(compgen -W "$$operands" -- "$$cur"))
       |  fi
       |  # bash splits words at ':' (COMP_WORDBREAKS): give back only what follows the last one.
       |  if [[ $$cur == *:* && $$COMP_WORDBREAKS == *:* ]]; then
       |    local colon=$${cur%"$${cur##*:}"} k
       |    for k in "$${!COMPREPLY[@]}"; do COMPREPLY[k]=$${COMPREPLY[k]#"$$colon"}; done
       |  fi
       |  if [[ $${#COMPREPLY[@]} -eq 1 && $${COMPREPLY[0]} == *: ]]; then compopt -o nospace 2>/dev/null; fi
       |  return 0
       |}
       |complete -F _asyncpipe asyncpipe
       |""".stripMargin

  // ---------------------------------------------------------------------------------------------
  // zsh

  /** A zsh completion function (`#compdef asyncpipe`): put it in a directory of `$fpath` as `_asyncpipe`. */
  def zsh(verbs: Seq[Verb], stage: Verb): String =
    def esc(s: String) = s.replace("\\", "\\\\").replace("'", "'\\''").replace("[", "\\[").replace("]", "\\]").replace(":", "\\:")
    def spec(o: Opt[?]): Seq[String] =
      val action =
        if o.isFlag then ""
        else if words(o).nonEmpty then s":${esc(o.reader.get.form)}:(${words(o).mkString(" ")})"
        else if completesFiles(o) then s":${esc(o.reader.get.form)}:_files"
        else s":${esc(o.reader.get.form)}: "
      val repeat = if o.repeatable then "*" else ""
      (o.short.toSeq :+ o.name).map(n => s"'$repeat$n[${esc(o.help)}]$action'")
    def specs(v: Verb) = visible(v).flatMap(spec).mkString(" \\\n        ")
    val all = named(verbs)
    s"""#compdef asyncpipe
       |# zsh completion for asyncpipe, made by 'asyncpipe completions zsh' from its declarations.
       |_asyncpipe_addresses() {
       |  local -a starts
       |  starts=(${addressStarts.map(s => s"'$s'").mkString(" ")})
       |  if [[ $$PREFIX == file:* ]]; then
       |    compset -P 'file:'
       |    _files
       |  else
       |    compadd -S '' -a starts
       |  fi
       |}
       |_asyncpipe() {
       |  local -a verbs
       |  verbs=(
       |${all.map(v => s"    '${v.name}:${esc(v.summary)}'").mkString("\n")}
       |  )
       |  local verb="" w
       |  for w in $${words[2,CURRENT-1]}; do
       |    case $$w in
       |      --) return ;;
       |      ${all.map(_.name).mkString("|")}) verb=$$w; break ;;
       |    esac
       |  done
       |  case $$verb in
       |${all.map(v => s"    ${v.name})\n      _arguments -s ${specs(v)} '*:operand:(${v.operandWords.mkString(" ")})' ;;").mkString("\n")}
       |    *)
       |      if [[ $$PREFIX != -* ]]; then
       |        _describe -t verbs verb verbs
       |        _asyncpipe_addresses
       |      else
       |        _arguments -s ${specs(stage)}
       |      fi ;;
       |  esac
       |}
       |_asyncpipe "$$@"
       |""".stripMargin

  // ---------------------------------------------------------------------------------------------
  // fish

  /** A fish completion script: put it in `~/.config/fish/completions/asyncpipe.fish`. */
  def fish(verbs: Seq[Verb], stage: Verb): String =
    def q(s: String) = "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
    val all = named(verbs)
    def line(condition: String, o: Opt[?]): String =
      val short = o.short.fold("")(s => s" -s ${s.drop(1)}")
      val value =
        if o.isFlag then ""
        else if words(o).nonEmpty then s" -x -a ${q(words(o).mkString(" "))}"
        else if completesFiles(o) then " -r -F"
        else " -x"
      s"complete -c asyncpipe -n ${q(condition)}$short -l ${o.name.drop(2)}$value -d ${q(o.help)}"
    val noVerb = s"not __fish_seen_subcommand_from ${all.map(_.name).mkString(" ")}"
    val lines =
      Seq("# fish completion for asyncpipe, made by 'asyncpipe completions fish' from its declarations.",
        "complete -c asyncpipe -f") ++
      all.map(v => s"complete -c asyncpipe -n ${q(noVerb)} -a ${v.name} -d ${q(v.summary)}") ++
      AddressKinds.all.flatMap(k => k.forms.map { (form, text) =>
        val start = if k.scheme == "-" then "-" else k.scheme + ":"
        s"complete -c asyncpipe -n ${q(noVerb)} -a ${q(start)} -d ${q(form)}"
      }).distinct ++
      visible(stage).map(line(noVerb, _)) ++
      all.flatMap { v =>
        val cond = s"__fish_seen_subcommand_from ${v.name}"
        visible(v).map(line(cond, _)) ++
          (if v.operandWords.isEmpty then Nil else Seq(s"complete -c asyncpipe -n ${q(cond)} -a ${q(v.operandWords.mkString(" "))}"))
      }
    lines.mkString("", "\n", "\n")

  // ---------------------------------------------------------------------------------------------
  // The man page

  /** `asyncpipe.1`, roff for man(1): the forms, the verbs, every option, the addresses. */
  def manPage(verbs: Seq[Verb], stage: Verb): String =
    def text(s: String): String =
      val escaped = s.replace("\\", "\\e").replace("-", "\\-")
      if escaped.startsWith(".") || escaped.startsWith("'") then "\\&" + escaped else escaped
    def options(v: Verb): Seq[String] = visible(v).flatMap { o =>
      val names = (o.short.toSeq :+ o.name).map(n => s"\\fB${text(n)}\\fR").mkString(", ")
      val value = o.reader.fold("")(r => s" \\fI${text(r.form)}\\fR")
      Seq(".TP", names + value, text(o.help))
    }
    val all = named(verbs)
    val lines = Seq(
      s""".TH ASYNCPIPE 1 "" "asyncpipe ${BuildInfo.version}" "User Commands"""",
      ".SH NAME",
      "asyncpipe \\- shell pipeline stages on a direct\\-style async library",
      ".SH SYNOPSIS",
      ".nf",
      text("asyncpipe [OPTIONS] FROM [TO]"),
      text("asyncpipe [OPTIONS] 'A | STAGE | B'"),
      text("asyncpipe VERB [OPTIONS] [ARGS]"),
      text("asyncpipe help VERB"),
      ".fi",
      ".SH DESCRIPTION",
      text("asyncpipe moves frames (lines, NUL-terminated records, length-prefixed records, or raw bytes) " +
        "between addresses: standard input and output, files, UDP sockets, timers. A stage never tears " +
        "or merges a frame. Verbs fan frames in and out (mux), run whole pipelines in one JVM (run), run " +
        "commands on schedules (every, retry, repeat) and measure the library (bench)."),
      ".SH ADDRESSES"
    ) ++ AddressKinds.all.flatMap { k =>
      k.forms.flatMap((form, what) => Seq(".TP", s"\\fB${text(form)}\\fR", text(what))) ++
        k.options.flatMap(o => Seq(".RS", ".TP", s"\\fB${text(o.form)}\\fR", text(o.help), ".RE"))
    } ++ Seq(".SH OPTIONS", text("Of FROM TO, and of every stage of run:")) ++ options(stage) ++
      Seq(".SH VERBS") ++ all.flatMap { v =>
        Seq(".SS " + text(v.name), ".nf", text(v.synopsis), ".fi", text(v.summary.capitalize + ".")) ++ options(v)
      } ++ Seq(
        ".SH EXIT STATUS",
        text("0 done, 1 runtime error, 2 usage error, 124 a run timed out, 126/127 a command cannot run / " +
          "was not found, 129 SIGHUP, 130 SIGINT, 141 downstream closed, 143 SIGTERM."),
        ".SH EXAMPLES",
        ".nf",
        text("asyncpipe file:access.log,follow - | grep ' 500 '"),
        text("asyncpipe udp:9000 | asyncpipe mux --out file:copy.log | grep ERROR"),
        text("asyncpipe run 'udp:9000 | mux --out file:all.log | file:copy.log'"),
        text("asyncpipe retry --max-attempts 5 --backoff 1s -- curl -fsS https://example.org/"),
        ".fi",
        ".SH SEE ALSO",
        text("asyncpipe VERB --help; socat(1), nc(1), pv(1), tee(1)")
      )
    lines.mkString("", "\n", "\n")

/** `asyncpipe completions bash|zsh|fish`: prints a completion script. */
final class CompletionsVerb(verbs: => Seq[Verb]) extends Verb:
  val name = "completions"
  val synopsis = "asyncpipe completions bash|zsh|fish"
  val summary = "print a shell completion script (install.sh installs the bash one)"
  private val shells = Seq("bash", "zsh", "fish")
  override def operandWords: Seq[String] = shells
  override def help: String =
    s"""${Options.usage(synopsis)}
       |
       |${Options.paragraph("Prints the completion script of a shell, made from the same declarations as the help: verbs, options, option values and address schemes.")}
       |
       |Examples:
       |  source <(asyncpipe completions bash)
       |  asyncpipe completions zsh > ~/.zfunc/_asyncpipe
       |  asyncpipe completions fish > ~/.config/fish/completions/asyncpipe.fish
       |""".stripMargin

  def run(args: Seq[String], io: Io): Either[CliError, Int] =
    val script: Either[CliError, String] = args match
      case Seq("bash") => Right(Docs.bash(verbs, StageVerb))
      case Seq("zsh")  => Right(Docs.zsh(verbs, StageVerb))
      case Seq("fish") => Right(Docs.fish(verbs, StageVerb))
      case Seq()       => Left(CliError.Missing(Some(name), "a shell: bash, zsh or fish", synopsis))
      case Seq(other, _*) =>
        val hint = CliError.suggest(other, shells).fold("")(s => s"; did you mean '$s'?")
        Left(CliError.BadToken(Some(name), other, s"not a shell asyncpipe completes (bash, zsh, fish)$hint", synopsis))
    script.map { s => io.out.write(s); ExitCode.Ok }

/** `asyncpipe manpage`: prints the man page (roff), as install.sh installs it. */
final class ManPageVerb(verbs: => Seq[Verb]) extends Verb:
  val name = "manpage"
  val synopsis = "asyncpipe manpage"
  val summary = "print the manual page (roff; 'man asyncpipe' after install.sh)"
  def run(args: Seq[String], io: Io): Either[CliError, Int] =
    if args.nonEmpty then Left(CliError.BadToken(Some(name), args.head, "manpage takes no arguments", synopsis))
    else { io.out.write(Docs.manPage(verbs, StageVerb)); Right(ExitCode.Ok) }
