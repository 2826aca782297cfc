package asyncpipe.cli.stages

import asyncpipe.cli.Main
import asyncpipe.cli.command.*
import asyncpipe.cli.system.OwnedOutput
import java.io.{ByteArrayOutputStream, PrintStream}
import java.nio.channels.Channels

/** `null:`, the kind added as one file and one registry line: parsed, rendered, both roles, in help. */
class NullKindTest extends munit.FunSuite:
  private def run(args: String*): (Int, String, String) =
    val (out, err) = (ByteArrayOutputStream(), ByteArrayOutputStream())
    val status = Main.run(args, Io(OwnedOutput(Channels.newChannel(out)), PrintStream(err, true, "UTF-8")))
    (status, out.toString("UTF-8"), err.toString("UTF-8"))

  test("null: parses and renders, plays both roles, and refuses anything after the ':'"):
    assertEquals(Address.parse("null:"), Right(NullAddress))
    assertEquals(NullAddress.render, "null:")
    assertEquals(NullAddress.roles, Set(Role.Source, Role.Sink))
    val bad = Address.parse("null:x")
    assert(bad.left.exists(_.render.contains("null: takes nothing after the ':'")), bad)

  test("as a sink it takes every frame and writes nothing; as a source it ends at once"):
    val (s1, out1, err1) = run("--stats", "tick:1ms,count=5", "null:")
    assertEquals((s1, out1), (0, ""), err1)
    assert(err1.contains("5 frames out"), err1)
    val (s2, out2, err2) = run("null:", "-")
    assertEquals((s2, out2), (0, ""), err2)

  test("help lists it with the other kinds, from the registry"):
    val (_, out, _) = run("--help")
    for k <- AddressKinds.all; (form, _) <- k.forms do assert(out.contains(form), s"$form missing from help")
