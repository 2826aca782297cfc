package asyncpipe.cli

/** The built tool as a real process: statuses, streams, and a closed downstream pipe. */
class LauncherTest extends munit.FunSuite:
  override def beforeAll(): Unit =
    assume(Launch.assembly.isDefined, "ASYNCPIPE_ASSEMBLY not set: run through ./mill")

  test("--version: exit 0, the version on stdout, nothing on stderr"):
    assertEquals(Launch("--version"), Launch.Outcome(0, s"asyncpipe ${BuildInfo.version}\n", ""))

  test("--help: exit 0, nothing on stderr"):
    val r = Launch("--help")
    assertEquals((r.exitCode, r.err), (0, ""))
    assert(r.out.contains("Verbs:"), r.out)

  test("an unknown verb: exit 2 and a message that names it"):
    val r = Launch("frobnicate")
    assertEquals(r.exitCode, 2)
    assertEquals(r.out, "")
    assert(r.err.contains("unknown verb or address 'frobnicate'"), r.err)

  test("an unknown option: exit 2 and a message that names it"):
    val r = Launch("--frobnicate")
    assertEquals(r.exitCode, 2)
    assert(r.err.contains("'--frobnicate'"), r.err)

  test("stdout into a pipe with no reader: exit 141, no stack trace"):
    // A FIFO opened for writing while its only reader is already closed: the first write gets EPIPE.
    val dir = os.temp.dir(prefix = "asyncpipe-launcher-test")
    try
      val cmd = asyncpipe.cli.stages.StageE2ETest.shellCommand("--help")
      val script =
        s"""mkfifo "$dir/p"
           |exec 4<>"$dir/p"   # a reader and writer, so the next open does not block
           |exec 5>"$dir/p"    # our writer
           |exec 4<&-          # the last reader goes away
           |$cmd >&5 2>"$dir/err"
           |echo "status=$$?"
           |cat "$dir/err"
           |""".stripMargin
      val r = os.proc("bash", "-c", script).call(check = false)
      assertEquals(r.out.text(), "status=141\n")
    finally os.remove.all(dir)

  test("the JVM's own warnings go to stderr, never into the data a stage writes on stdout"):
    // An AOT cache that is not there makes the JVM log three lines through its unified logging,
    // which writes to stdout unless told otherwise (as a compiler thread that cannot start under a
    // low `ulimit -u` does, at byte 0 of the output).
    val dir = os.temp.dir(prefix = "asyncpipe-launcher-test")
    try
      val data = Array.tabulate[Byte](100_000)(i => (i * 31 + i / 7).toByte)
      os.write(dir / "in.bin", data)
      val cmd = Launch.command("--frame", "raw", s"file:${dir / "in.bin"}", "-")
      val (jvm, rest) = cmd.splitAt(1 + Launch.runtimeFlags.size)
      val r = os.proc(jvm ++ Seq(s"-XX:AOTCache=${dir / "absent.aot"}") ++ rest).call(check = false, stdin = os.Inherit, stderr = os.Pipe)
      assertEquals(r.exitCode, 0, r.err.text())
      assert(r.err.text().contains("[aot]"), s"the JVM logged nothing about the missing cache: ${r.err.text()}")
      assert(java.util.Arrays.equals(r.out.bytes, data), s"stdout is not the file: ${r.out.bytes.length} bytes, starting ${r.out.text().take(80)}")
    finally os.remove.all(dir)
