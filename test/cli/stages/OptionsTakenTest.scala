package asyncpipe.cli.stages

import asyncpipe.cli.Main
import asyncpipe.cli.command.*
import asyncpipe.cli.system.OwnedOutput
import java.io.{ByteArrayOutputStream, PrintStream}
import java.nio.channels.Channels

/** An option that only some endpoints take (`--count`, `--idle-timeout`, `--on-full`,
  * `--check-seq` for `udp:` sources, `--oversize` for `udp:` sinks) is refused with exit 2 where
  * no endpoint of the command takes it, naming the option and the addresses; never ignored.
  */
class OptionsTakenTest extends munit.FunSuite:
  private def run(args: String*): (Int, String) =
    val err = ByteArrayOutputStream()
    val status = Main.run(args, Io(OwnedOutput(Channels.newChannel(ByteArrayOutputStream())), PrintStream(err, true, "UTF-8")))
    (status, err.toString("UTF-8"))

  private def refused(args: String*)(parts: String*)(using munit.Location): Unit =
    val (status, err) = run(args*)
    assertEquals(status, ExitCode.Usage, s"${args.mkString(" ")}: $err")
    for p <- parts do assert(err.contains(p), s"${args.mkString(" ")}: [$p] not in\n$err")

  private val in = os.temp("a\nb\n", prefix = "asyncpipe-taken-")

  test("each source option on every source kind that does not take it, in each stage form"):
    val sources = Seq(s"file:$in", "tick:1ms,count=1", "null:")
    for
      (opt, value) <- Seq("--count" -> Some("2"), "--idle-timeout" -> Some("1s"), "--on-full" -> Some("drop"), "--check-seq" -> None)
      source <- sources
    do
      // --count and --idle-timeout also end a kafka: source.
      val kinds = if opt == "--count" || opt == "--idle-timeout" then "udp: or kafka:" else "udp:"
      val o = Seq(opt) ++ value
      refused((o ++ Seq(source, "null:"))*)(s"bad value '$opt'", s"$opt is for $kinds sources", source)
      refused((Seq("mux") ++ o ++ Seq("--in", source, "--out", "null:"))*)(s"$opt is for $kinds sources")
      refused((Seq("run") ++ o ++ Seq(s"$source | mux | null:"))*)(s"$opt is for $kinds sources", source)

  test("--oversize on sinks that are not udp: is refused"):
    for sink <- Seq("null:", s"file:$in.out") do
      refused("--oversize", "drop", s"file:$in", sink)("--oversize is for udp: sinks", sink)

  test("tick: is pointed to its own count"):
    refused("--count", "2", "tick:100ms", "null:")("tick: has its own: count=N")

  test("udp: endpoints take them: the check lets them through"):
    val udpIn = UdpAddress.AllHosts(0)
    val udpOut = UdpAddress.At(Host.IPv4("127.0.0.1"), 9)
    val udpOptions = StageOptions(givenOptions = Set("--count", "--idle-timeout", "--on-full", "--check-seq"))
    assertEquals(Stages.optionsTaken(Seq(Stages.StagePlan(Seq(udpIn), Seq(NullAddress), udpOptions))), Right(()))
    // in a pipeline, one stage that takes it is enough for an option given to all
    val two = Seq(Stages.StagePlan(Seq(udpIn), Nil, udpOptions), Stages.StagePlan(Nil, Seq(NullAddress), udpOptions))
    assertEquals(Stages.optionsTaken(two), Right(()))
    val oversize = StageOptions(givenOptions = Set("--oversize"))
    assertEquals(Stages.optionsTaken(Seq(Stages.StagePlan(Seq(StdAddress), Seq(udpOut), oversize))), Right(()))

  test("the options a command does not give are not looked at"):
    assertEquals(run(s"file:$in", "null:")._1, 0)

  test("--size is read as a size, for --progress: 100M, 1G, =VALUE; a bad one names the token and the form"):
    def size(args: String*) = StageOptions.parse(args, None, "SYN", mux = false).map(_.options.size)
    assertEquals(size("--size", "100M", "-"), Right(Some(100L << 20)))
    assertEquals(size("--size=1G", "-"), Right(Some(1L << 30)))
    assertEquals(size("--size", "12345", "-"), Right(Some(12345L)))
    assertEquals(size("-"), Right(None))
    for bad <- Seq("12x", "0", "1.5G", "-3") do
      val (status, err) = run("--progress", "--size", bad, s"file:$in", "null:")
      assertEquals(status, ExitCode.Usage, err)
      assert(err.contains(s"'$bad'") && err.contains("--size SIZE"), err)

  // (`mux` reads standard input too, which takes --size: `mux --size 1M --in tick:1s` is accepted.)
  test("--size on sources that have no bytes to count (tick:, null:) is refused, in the address form and in run"):
    for source <- Seq("tick:1ms,count=1", "null:") do
      refused("--progress", "--size", "1M", source, "null:")("--size is for - or file: or udp: sources", source)
      refused("run", "--progress", "--size", "1M", s"$source | mux | null:")("--size is for - or file: or udp: sources", source)

  test("--size without --progress is refused: nothing else shows it"):
    refused("--size", "1M", s"file:$in", "null:")("--size is the total that --progress measures against", "--progress --size SIZE")
    refused("mux", "--size", "1M", "--in", s"file:$in", "--out", "null:")("--progress is not given")
    refused("run", "--size", "1M", s"file:$in | mux | null:")("--progress is not given")

  test("--size with --progress and a source that takes it runs; a task verb does not know it"):
    assertEquals(run("--progress", "--size", "1K", s"file:$in", "null:")._1, 0)
    assertEquals(run("run", "--progress", "--size", "1K", s"file:$in | mux | null:")._1, 0)
    assertEquals(run("--progress", "--size", "1K", "udp:127.0.0.1:0", "null:", "--count", "1", "--idle-timeout", "1ms")._1, 0)
    val (status, err) = run("every", "--size", "1M", "1s", "--", "true")
    assertEquals(status, ExitCode.Usage, err)
    assert(err.contains("--size"), err)
