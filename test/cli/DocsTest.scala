package asyncpipe.cli

import asyncpipe.cli.command.*
import asyncpipe.cli.stages.*
import asyncpipe.cli.system.OwnedOutput
import java.io.{ByteArrayOutputStream, PrintStream}
import java.nio.channels.Channels

/** Help, the shell completions and the man page come from the same declarations: every option a
  * user can type is in each of them, and bash really completes with the script.
  */
class DocsTest extends munit.FunSuite:
  private def run(args: String*): (Int, String, String) =
    val (out, err) = (ByteArrayOutputStream(), ByteArrayOutputStream())
    val status = Main.run(args, Io(OwnedOutput(Channels.newChannel(out)), PrintStream(err, true, "UTF-8")))
    (status, out.toString("UTF-8"), err.toString("UTF-8"))

  private def output(args: String*): String =
    val (status, out, err) = run(args*)
    assertEquals(status, 0, err)
    out

  private lazy val scripts: Map[String, String] =
    Seq("bash", "zsh", "fish").map(s => s -> output("completions", s)).toMap
  private lazy val manPage = output("manpage")
  /** Every verb a user can type, and the FROM TO form. */
  private def verbs: Seq[Verb] = Main.verbs.filter(v => v.listed || v == StageVerb)

  test("every declared option is in its verb's help, in each completion script and in the man page"):
    val manText = manPage.replace("\\-", "-")
    for v <- verbs; o <- v.opts if !o.hidden do
      assert(v.help.contains(o.name), s"${v.name} --help lacks ${o.name}")
      for (shell, script) <- scripts do
        val name = if shell == "fish" then s"-l ${o.name.drop(2)}" else o.name
        assert(script.contains(name), s"the $shell script lacks ${o.name} of ${v.name}")
      assert(manText.contains(o.name), s"the man page lacks ${o.name} of ${v.name}")
    for v <- verbs; o <- v.opts if o.hidden do
      assert(!v.help.contains(o.name) && !manText.contains(o.name), s"hidden ${o.name} shown")

  test("every verb, address scheme and address option is in the completions and the man page"):
    val manText = manPage.replace("\\-", "-")
    for v <- Main.verbs if v.listed do
      for (shell, script) <- scripts do assert(script.contains(v.name), s"the $shell script lacks verb ${v.name}")
      assert(manText.contains(s".SS ${v.name}"), s"the man page lacks verb ${v.name}")
    for k <- AddressKinds.all do
      val start = if k.scheme == "-" then "-" else k.scheme + ":"
      for (shell, script) <- scripts do assert(script.contains(start), s"the $shell script lacks $start")
      for (form, _) <- k.forms do assert(manText.contains(form), s"the man page lacks $form")
      for o <- k.options do assert(manText.contains(o.form), s"the man page lacks ${k.scheme} option ${o.form}")

  test("word choices are offered as values"):
    for (shell, script) <- scripts do
      assert(script.contains("lines len nul raw"), s"$shell: --frame values")
      assert(script.contains("skip wait allow"), s"$shell: --overlap values")

  test("completions needs a shell it knows; manpage takes no arguments"):
    assertEquals(run("completions")._1, ExitCode.Usage)
    val (status, _, err) = run("completions", "bsh")
    assertEquals(status, ExitCode.Usage)
    assert(err.contains("'bsh'") && err.contains("did you mean 'bash'?"), err)
    assertEquals(run("manpage", "x")._1, ExitCode.Usage)

  test("bash, sourcing the script, completes verbs, addresses, options and option values"):
    val bash = java.nio.file.Path.of("/usr/bin/bash")
    assume(java.nio.file.Files.isExecutable(bash) || java.nio.file.Files.isExecutable(java.nio.file.Path.of("/bin/bash")), "bash is not installed")
    val dir = os.temp.dir(prefix = "asyncpipe-completion-")
    try
      os.write(dir / "asyncpipe.bash", scripts("bash"))
      os.write(dir / "data.txt", "x")
      val driver =
        """source "$1"
          |comp() {
          |  COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
          |  read -ra COMP_WORDS <<< "$COMP_LINE"
          |  [[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
          |  COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
          |  _asyncpipe
          |  echo "$1|${COMPREPLY[*]}"
          |}
          |comp "asyncpipe fi"
          |comp "asyncpipe --fr"
          |comp "asyncpipe every --over"
          |comp "asyncpipe every 1s --overlap "
          |comp "asyncpipe mux --output-error w"
          |comp "asyncpipe retry --max"
          |comp "asyncpipe file:$2/da"
          |""".stripMargin
      os.write(dir / "driver.sh", driver)
      val r = os.proc("bash", dir / "driver.sh", dir / "asyncpipe.bash", dir.toString).call(cwd = dir, stderr = os.Pipe, check = false)
      assertEquals(r.exitCode, 0, r.err.text())
      val got = r.out.lines().map { l => val i = l.indexOf('|'); l.take(i) -> l.drop(i + 1) }.toMap
      assertEquals(got("asyncpipe fi"), "file:")
      assertEquals(got("asyncpipe --fr"), "--frame")
      assertEquals(got("asyncpipe every --over"), "--overlap")
      assertEquals(got("asyncpipe every 1s --overlap "), "skip wait allow")
      assertEquals(got("asyncpipe mux --output-error w"), "warn")
      assertEquals(got("asyncpipe retry --max").split(" ").toSet, Set("--max-attempts", "--max-delay"))
      // bash breaks words at ':', so the reply is what follows it.
      assertEquals(got(s"asyncpipe file:$dir/da"), s"$dir/data.txt")
    finally os.remove.all(dir)

  test("the man page is roff that man formats without a warning"):
    assume(os.exists(os.Path("/usr/bin/groff")), "groff is not installed")
    val dir = os.temp.dir(prefix = "asyncpipe-man-")
    try
      os.write(dir / "asyncpipe.1", manPage)
      val r = os.proc("groff", "-man", "-Tutf8", "-ww", "-z", dir / "asyncpipe.1").call(stderr = os.Pipe, check = false)
      assertEquals((r.exitCode, r.err.text()), (0, ""))
    finally os.remove.all(dir)
