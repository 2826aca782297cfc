package asyncpipe.cli.stages

import asyncpipe.cli.*

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*

import java.nio.channels.{DatagramChannel, FileChannel}
import java.nio.file.{Files, Path, StandardOpenOption}
import scala.concurrent.duration.*
import scala.jdk.CollectionConverters.*
import scala.util.Using

import Address.*
import StreamKind.*

class AddressTest extends munit.FunSuite:

  private def ok(token: String): Address = parse(token) match
    case Right(a)  => a
    case Left(err) => fail(s"expected '$token' to parse, got:\n${err.render}")

  /** Asserts that `token` is refused as a BadToken naming it, whose text contains every one of `parts`. */
  private def refused(token: String, parts: String*): CliError =
    parse(token) match
      case Right(a) => fail(s"expected '$token' to be refused, got $a")
      case Left(err @ CliError.BadToken(None, `token`, _, _)) =>
        val text = err.render
        assert(text.contains(s"bad value '$token'"), s"the message should quote the token '$token':\n$text")
        for p <- parts do assert(text.contains(p), s"the message for '$token' should contain [$p]:\n$text")
        assertEquals(err.exitCode, ExitCode.Usage)
        err
      case Left(other) => fail(s"expected a BadToken for '$token', got $other")

  private def expectedOf(err: CliError): String = err match
    case CliError.BadToken(_, _, _, expected) => expected
    case other                                => fail(s"not a BadToken: $other")

  // ---------------------------------------------------------------- parsing: every form

  test("'-' is standard input or output"):
    assertEquals(ok("-"), StdAddress)

  test("file: paths, with ':' inside, options in any order, escaped ',' and '\\'"):
    assertEquals(ok("file:out.txt"), FileAddress("out.txt"))
    assertEquals(ok("file:/tmp/a:b:c"), FileAddress("/tmp/a:b:c"))
    assertEquals(ok("file:C:x"), FileAddress("C:x"))
    assertEquals(ok("file:log,append"), FileAddress("log", append = true))
    assertEquals(ok("file:log,fsync,append"), FileAddress("log", append = true, fsync = true))
    assertEquals(ok("file:in,follow"), FileAddress("in", follow = true))
    assertEquals(ok("file:a\\,b,append"), FileAddress("a,b", append = true))
    assertEquals(ok("file:a\\\\,append"), FileAddress("a\\", append = true))
    assertEquals(ok("file:a\\b"), FileAddress("a\\b"), "a '\\' before anything but ',' or '\\' is itself")
    assertEquals(ok("file:-"), FileAddress("-"))
    assertEquals(ok("file:with space"), FileAddress("with space"))

  test("udp:PORT receives on all interfaces; port 0 means any free port"):
    assertEquals(ok("udp:9000"), UdpAddress.AllHosts(9000))
    assertEquals(ok("udp:1"), UdpAddress.AllHosts(1))
    assertEquals(ok("udp:65535"), UdpAddress.AllHosts(65535))
    assertEquals(ok("udp:0"), UdpAddress.AllHosts(0))
    assertEquals(ok("udp:9000,rcvbuf=4M"), UdpAddress.AllHosts(9000, Some(4 << 20)))

  test("udp:HOST:PORT with a name, an IPv4 address or a bracketed IPv6 address"):
    assertEquals(ok("udp:localhost:9000"), UdpAddress.At(Host.Name("localhost"), 9000))
    assertEquals(ok("udp:my_app-1.example.com:53"), UdpAddress.At(Host.Name("my_app-1.example.com"), 53))
    assertEquals(ok("udp:127.0.0.1:9000"), UdpAddress.At(Host.IPv4("127.0.0.1"), 9000))
    assertEquals(ok("udp:[::1]:9000"), UdpAddress.At(Host.IPv6("::1"), 9000))
    assertEquals(ok("udp:[fe80::1%eth0]:9000"), UdpAddress.At(Host.IPv6("fe80::1", Some("eth0")), 9000))
    assertEquals(ok("udp:[::ffff:1.2.3.4]:9000"), UdpAddress.At(Host.IPv6("::ffff:1.2.3.4"), 9000))
    assertEquals(ok("udp:127.0.0.1:9000,rcvbuf=65536"), UdpAddress.At(Host.IPv4("127.0.0.1"), 9000, Some(65536)))
    assertEquals(ok("udp:h:0"), UdpAddress.At(Host.Name("h"), 0))

  test("rcvbuf sizes: bytes with a binary K, M or G suffix"):
    def rcvbuf(s: String) = ok(s"udp:9000,rcvbuf=$s") match
      case UdpAddress.AllHosts(_, Some(n)) => n
      case other              => fail(s"unexpected $other")
    assertEquals(rcvbuf("1"), 1)
    assertEquals(rcvbuf("1000"), 1000)
    assertEquals(rcvbuf("4K"), 4096)
    assertEquals(rcvbuf("4k"), 4096)
    assertEquals(rcvbuf("4M"), 4 * 1024 * 1024)
    assertEquals(rcvbuf("1G"), 1 << 30)
    assertEquals(rcvbuf("2147483647"), Int.MaxValue)

  test("tick: durations in every unit, with decimals, and a count"):
    def every(s: String) = ok(s"tick:$s") match
      case TickAddress(d, None) => d
      case other         => fail(s"unexpected $other")
    assertEquals(every("250ns"), 250.nanos)
    assertEquals(every("10us"), 10.micros)
    assertEquals(every("500ms"), 500.millis)
    assertEquals(every("1s"), 1.second)
    assertEquals(every("1.5s"), 1500.millis)
    assertEquals(every("0.001s"), 1.milli)
    assertEquals(every("2m"), 2.minutes)
    assertEquals(every("1.25h"), 75.minutes)
    assertEquals(ok("tick:1s,count=3"), TickAddress(1.second, Some(3)))

  // ---------------------------------------------------------------- parsing: every error

  test("empty, bare and unknown-scheme tokens are refused with the forms"):
    refused("", "an empty address", "file:PATH")
    refused("out.txt", "'out.txt' is not an address", "file:out.txt")
    refused("--x", "'--x' is not an address")
    val e = refused("fiel:x", "unknown address scheme 'fiel:'", "known: file, kafka, null, tcp, tcp-listen, tick, tls, tls-listen, udp, unix, unix-listen", "did you mean 'file'?")
    assertEquals(expectedOf(e), Address.forms.map(_._1).mkString(", "))
    refused("FILE:x", "unknown address scheme 'FILE:'", "did you mean 'file'?")
    refused("sctp:localhost:80", "unknown address scheme 'sctp:'")

  test("file: errors name the rule, and show the file form"):
    val e = refused("file:", "the file path is empty")
    assertEquals(expectedOf(e), "file:PATH[,append][,follow][,fsync]")
    refused("file:,append", "the file path is empty")
    refused("file:x,apend", "unknown file option 'apend' (known: append, follow, fsync); did you mean 'append'?")
    refused("file:x,zzzzzz", "unknown file option 'zzzzzz' (known: append, follow, fsync)")
    refused("file:x,", "an empty file option")
    refused("file:x,,append", "an empty file option")
    refused("file:x,=1", "a file option without a name")
    refused("file:x,append=yes", "file option 'append' takes no value (got 'append=yes')")
    refused("file:x,append,append", "file option 'append' is given more than once")
    refused("file:x,follow,append", "'follow' is for reading a file and 'append' for writing one")
    refused("file:x,fsync,follow", "'follow' is for reading a file and 'fsync' for writing one")
    assert(!refused("file:x,zzzzzz").render.contains("did you mean"), "no suggestion for a far-off option")

  test("udp: port errors name the token and the range"):
    val e = refused("udp:70000", "port 70000 is out of range 1-65535")
    assertEquals(expectedOf(e), "udp:PORT[,rcvbuf=SIZE] | udp:HOST:PORT[,rcvbuf=SIZE]")
    refused("udp:99999999999999999999", "is out of range 1-65535")
    refused("udp:h:65536", "port 65536 is out of range 1-65535")
    refused("udp:-1", "port '-1' is not a number in 1-65535")
    refused("udp:http", "'http' is not a port", "udp:http:PORT")
    refused("udp:", "the port is missing")
    refused("udp:h:", "the port is missing after ':'")
    refused("udp:h:x9", "port 'x9' is not a number in 1-65535")

  test("udp: host errors: empty, bad names, bad IPv4, IPv6 without brackets or not IPv6"):
    refused("udp::9000", "the host is empty")
    refused("udp:bad!host:1", "'bad!host' is not a host name")
    refused("udp:-lead:1", "'-lead' is not a host name")
    refused("udp:a..b:1", "'a..b' is not a host name")
    refused(s"udp:${"a" * 64}:1", "is not a host name")
    refused("udp:1.2.3:1", "'1.2.3' is not an IPv4 address")
    refused("udp:256.0.0.1:1", "'256.0.0.1' is not an IPv4 address")
    refused("udp:::1:9000", "too many ':'", "in brackets, e.g. udp:[::1]:9000")
    refused("udp:[::1", "'[' without its ']'")
    refused("udp:[::1]", "after [::1] comes ':PORT'")
    refused("udp:[::1]9000", "after [::1] comes ':PORT'")
    refused("udp:[1.2.3.4]:1", "'1.2.3.4' in brackets is not an IPv6 address")
    refused("udp:[gg::1]:1", "'gg::1' in brackets is not an IPv6 address")
    refused("udp:[localhost]:1", "'localhost' in brackets is not an IPv6 address")
    refused("udp:[fe80::1%]:1", "'' is not an IPv6 zone")
    refused("udp:[fe80::1%a b]:1", "'a b' is not an IPv6 zone")

  test("udp: option errors"):
    refused("udp:9000,rcvbf=1M", "unknown udp option 'rcvbf' (known: rcvbuf); did you mean 'rcvbuf'?")
    refused("udp:9000,rcvbuf", "udp option 'rcvbuf' needs a value: rcvbuf=SIZE")
    refused("udp:9000,rcvbuf=", "udp option 'rcvbuf': '' is not a size")
    refused("udp:9000,rcvbuf=4X", "udp option 'rcvbuf': '4X' is not a size", "4M = 4 MiB")
    refused("udp:9000,rcvbuf=4MB", "udp option 'rcvbuf': '4MB' is not a size")
    refused("udp:9000,rcvbuf=0", "udp option 'rcvbuf': '0' is less than 1 byte")
    refused("udp:9000,rcvbuf=2G", "udp option 'rcvbuf': '2G' is more than 2147483647 bytes")
    refused("udp:9000,rcvbuf=1M,rcvbuf=2M", "udp option 'rcvbuf' is given more than once")

  test("tick: duration and count errors"):
    val e = refused("tick:10", "duration '10' needs a unit (ns, us, ms, s, m, h), e.g. 10ms or 10s")
    assertEquals(expectedOf(e), "tick:DURATION[,count=N]")
    refused("tick:", "the duration is missing")
    refused("tick:10q", "unknown duration unit 'q' in '10q' (known: ns, us, ms, s, m, h)")
    refused("tick:10sm", "unknown duration unit 'sm'", "did you mean '10ms'?")
    refused("tick:fast", "duration 'fast' is not a number with a unit")
    refused("tick:-1s", "duration '-1s' is not a number with a unit")
    refused("tick:.5s", "duration '.5s' is not a number with a unit")
    refused("tick:0s", "the duration must be more than zero (got '0s')")
    refused("tick:0.0001us", "is not a whole number of nanoseconds")
    refused("tick:1.5ns", "duration '1.5ns' is not a whole number of nanoseconds")
    refused("tick:9999999h", "is too long")
    refused("tick:1s,count=0", "tick option 'count': '0' is not a positive whole number")
    refused("tick:1s,count=-2", "tick option 'count': '-2' is not a positive whole number")
    refused("tick:1s,count=many", "tick option 'count': 'many' is not a positive whole number")
    refused("tick:1s,count", "tick option 'count' needs a value: count=N")
    refused("tick:1s,count=99999999999999999999", "tick option 'count': '99999999999999999999' is too large")
    refused("tick:1s,cuont=3", "unknown tick option 'cuont' (known: count); did you mean 'count'?")

  // ---------------------------------------------------------------- rendering

  private val samples: Seq[Address] = Seq(
    StdAddress,
    FileAddress("out"),
    FileAddress("/a:b/c,d\\e f"),
    FileAddress("\\,"),
    FileAddress("log", append = true, fsync = true),
    FileAddress("in", follow = true),
    FileAddress("x", fsync = true),
    UdpAddress.AllHosts(0),
    UdpAddress.AllHosts(9000, Some(4 << 20)),
    UdpAddress.AllHosts(9000, Some(1 << 30)),
    UdpAddress.AllHosts(9000, Some(3 << 10)),
    UdpAddress.AllHosts(9000, Some(1000)),
    UdpAddress.At(Host.Name("localhost"), 9000),
    UdpAddress.At(Host.IPv4("10.0.0.1"), 1, Some(1)),
    UdpAddress.At(Host.IPv6("::1"), 65535),
    UdpAddress.At(Host.IPv6("fe80::1", Some("eth0")), 5),
    TickAddress(1.second),
    TickAddress(1500.millis, Some(3)),
    TickAddress(90.seconds),
    TickAddress(7.nanos),
    TickAddress(2.hours, Some(Long.MaxValue))
  )

  test("render prints the canonical form"):
    assertEquals(
      samples.map(_.render),
      Seq(
        "-",
        "file:out",
        "file:/a:b/c\\,d\\\\e f",
        "file:\\\\\\,",
        "file:log,append,fsync",
        "file:in,follow",
        "file:x,fsync",
        "udp:0",
        "udp:9000,rcvbuf=4M",
        "udp:9000,rcvbuf=1G",
        "udp:9000,rcvbuf=3K",
        "udp:9000,rcvbuf=1000",
        "udp:localhost:9000",
        "udp:10.0.0.1:1,rcvbuf=1",
        "udp:[::1]:65535",
        "udp:[fe80::1%eth0]:5",
        "tick:1s",
        "tick:1500ms,count=3",
        "tick:90s",
        "tick:7ns",
        s"tick:2h,count=${Long.MaxValue}"
      )
    )
    assertEquals(TickAddress(60.seconds).toString, "tick:1m")

  test("parse(render(a)) == a for every sample, and render is a fixed point of parsing"):
    for a <- samples do
      assertEquals(parse(a.render), Right(a), s"round trip of ${a.render}")
    for t <- Seq("file:log,fsync,append", "udp:9000,rcvbuf=4096", "tick:1.5s", "tick:60s", "udp:09000") do
      val once = ok(t).render
      assertEquals(ok(once).render, once, s"rendering '$t' twice")

  // ---------------------------------------------------------------- roles

  test("checkRole: sink-only and source-only options, one-way addresses"):
    def rule(a: Address, role: Role): String = a.checkRole(role) match
      case Left(CliError.BadToken(None, token, rule, _)) =>
        assertEquals(token, a.render); rule
      case other => fail(s"expected $a to be refused as $role, got $other")
    assertEquals(StdAddress.roles, Set(Role.Source, Role.Sink))
    assertEquals(FileAddress("x").roles, Set(Role.Source, Role.Sink))
    assertEquals(UdpAddress.At(Host.Name("h"), 1).roles, Set(Role.Source, Role.Sink))
    assert(rule(FileAddress("x", follow = true), Role.Sink).contains("file option 'follow' is for reading (a source)"))
    assert(rule(FileAddress("x", append = true), Role.Source).contains("file option 'append' is for writing (a sink)"))
    assert(rule(FileAddress("x", fsync = true), Role.Source).contains("file option 'fsync' is for writing (a sink)"))
    assert(rule(UdpAddress.AllHosts(9000), Role.Sink).contains("udp:9000 only receives"))
    assert(rule(UdpAddress.At(Host.Name("h"), 0), Role.Sink).contains("port 0 (any free port) is for receiving only"))
    assert(rule(UdpAddress.At(Host.Name("h"), 1, Some(10)), Role.Sink).contains("udp option 'rcvbuf' is for receiving"))
    assert(rule(TickAddress(1.second), Role.Sink).contains("tick:1s is a timer: it can only be a source"))
    assertEquals(FileAddress("x", follow = true).checkRole(Role.Source), Right(()))
    assertEquals(FileAddress("x", append = true).checkRole(Role.Sink), Right(()))
    assertEquals(UdpAddress.AllHosts(0).checkRole(Role.Source), Right(()))
    assertEquals(TickAddress(1.second).checkRole(Role.Source), Right(()))

  private val kinds: Seq[StreamKind] = StreamKind.values.toSeq

  /** One representative of each kind of address, with its expected table (see [[twoWay]]). */
  private val twoWay =
    """             Terminal Pipe RegularFile NullDevice Socket Unknown
      |Terminal     Source   Source Source  Source     Source Refuse
      |Pipe         Sink     Refuse Refuse  Refuse     Refuse Refuse
      |RegularFile  Sink     Refuse Refuse  Refuse     Refuse Refuse
      |NullDevice   Source   Source Source  Source     Source Refuse
      |Socket       Sink     Refuse Refuse  Refuse     Refuse Refuse
      |Unknown      Refuse   Refuse Refuse  Refuse     Refuse Refuse""".stripMargin

  private val sinkOnly =
    """             Terminal Pipe RegularFile NullDevice Socket Unknown
      |Terminal     Refuse   Refuse Refuse  Refuse     Refuse Refuse
      |Pipe         Sink     Refuse Refuse  Refuse     Refuse Refuse
      |RegularFile  Sink     Refuse Refuse  Refuse     Refuse Refuse
      |NullDevice   Refuse   Refuse Refuse  Refuse     Refuse Refuse
      |Socket       Sink     Refuse Refuse  Refuse     Refuse Refuse
      |Unknown      Refuse   Refuse Refuse  Refuse     Refuse Refuse""".stripMargin

  /** `append`: appending destroys nothing, so data in makes it a sink whatever stdout is. */
  private val appendOnly =
    """             Terminal Pipe RegularFile NullDevice Socket Unknown
      |Terminal     Refuse   Refuse Refuse  Refuse     Refuse Refuse
      |Pipe         Sink     Sink   Sink    Sink       Sink   Sink
      |RegularFile  Sink     Sink   Sink    Sink       Sink   Sink
      |NullDevice   Refuse   Refuse Refuse  Refuse     Refuse Refuse
      |Socket       Sink     Sink   Sink    Sink       Sink   Sink
      |Unknown      Refuse   Refuse Refuse  Refuse     Refuse Refuse""".stripMargin

  /** A path with no file yet (or an empty one): data in writes it, whatever stdout is. */
  private val newFile =
    """             Terminal Pipe RegularFile NullDevice Socket Unknown
      |Terminal     Source   Source Source  Source     Source Refuse
      |Pipe         Sink     Sink   Sink    Sink       Sink   Sink
      |RegularFile  Sink     Sink   Sink    Sink       Sink   Sink
      |NullDevice   Source   Source Source  Source     Source Refuse
      |Socket       Sink     Sink   Sink    Sink       Sink   Sink
      |Unknown      Refuse   Refuse Refuse  Refuse     Refuse Refuse""".stripMargin

  /** A file that holds data is never overwritten by a single address. */
  private val dataFile =
    """             Terminal Pipe RegularFile NullDevice Socket Unknown
      |Terminal     Source   Source Source  Source     Source Refuse
      |Pipe         Refuse   Refuse Refuse  Refuse     Refuse Refuse
      |RegularFile  Refuse   Refuse Refuse  Refuse     Refuse Refuse
      |NullDevice   Source   Source Source  Source     Source Refuse
      |Socket       Refuse   Refuse Refuse  Refuse     Refuse Refuse
      |Unknown      Refuse   Refuse Refuse  Refuse     Refuse Refuse""".stripMargin

  private val neverWritten = sinkOnly.linesIterator.map(_.replace("Sink", "Refuse")).mkString("\n")

  private val alwaysSource = kinds.map(_ => kinds.map(_ => "Source").mkString(" ")).zip(kinds)
    .map((row, k) => s"$k $row").mkString("Terminal Pipe RegularFile NullDevice Socket Unknown\n", "\n", "")

  /** (stdin, stdout) -> "Source" | "Sink" | "Refuse", from a table whose rows are stdin and columns stdout. */
  private def table(text: String): Map[(StreamKind, StreamKind), String] =
    val lines = text.linesIterator.map(_.trim.split("\\s+").toSeq).toSeq
    val columns = lines.head.map(StreamKind.valueOf)
    assertEquals(columns, kinds, "the table's columns")
    val rows = lines.tail
    assertEquals(rows.map(r => StreamKind.valueOf(r.head)).toSet, kinds.toSet, "the table's rows")
    rows.flatMap(r => columns.zip(r.tail).map((out, cell) => (StreamKind.valueOf(r.head), out) -> cell)).toMap

  /** By address, with a file's path naming something other than a regular file (a FIFO, a
    * device: [[Present.Other]]), as for every address that is not a file.
    */
  private val byAddress: Seq[(Address, String)] = Seq(
    StdAddress                                   -> alwaysSource,
    FileAddress("x")                             -> twoWay,
    FileAddress("x", follow = true)              -> alwaysSource,
    FileAddress("x", append = true)              -> appendOnly,
    FileAddress("x", fsync = true)               -> sinkOnly,
    FileAddress("x", append = true, fsync = true) -> appendOnly,
    UdpAddress.AllHosts(9000)                          -> alwaysSource,
    UdpAddress.AllHosts(0, Some(1024))                 -> alwaysSource,
    UdpAddress.At(Host.IPv4("127.0.0.1"), 9000)     -> twoWay,
    UdpAddress.At(Host.IPv6("::1"), 9000)           -> twoWay,
    UdpAddress.At(Host.Name("h"), 0)                -> alwaysSource,
    UdpAddress.At(Host.Name("h"), 9000, Some(4096)) -> alwaysSource,
    TickAddress(1.second)                        -> alwaysSource,
    TickAddress(1.second, Some(5))               -> alwaysSource
  )

  private def outcome(r: Either[CliError, Role]): String = r.fold(_ => "Refuse", _.toString)

  test("inferRole follows the table for every address kind and every pair of streams"):
    val wrong = for
      (address, expected) <- byAddress
      want = table(expected)
      in <- kinds
      out <- kinds
      got = outcome(inferRole(address, in, out))
      if got != want((in, out))
    yield s"${address.render} with stdin $in, stdout $out: expected ${want((in, out))}, got $got"
    assert(wrong.isEmpty, wrong.mkString("\n"))

  test("by what a file's path names: a new or empty file is written, one holding data never, with append always"):
    val cases: Seq[(Address, Present, String)] = Seq(
      (FileAddress("x"), Present.Absent, newFile),
      (FileAddress("x"), Present.EmptyFile, newFile),
      (FileAddress("x"), Present.DataFile, dataFile),
      (FileAddress("x"), Present.Other, twoWay),
      (FileAddress("x", fsync = true), Present.Absent, appendOnly), // written when data comes in, as append is
      (FileAddress("x", fsync = true), Present.DataFile, neverWritten),
      (FileAddress("x", append = true), Present.DataFile, appendOnly),
      (FileAddress("x", append = true), Present.Absent, appendOnly)
    )
    val wrong = for
      (address, present, expected) <- cases
      want = table(expected)
      in <- kinds
      out <- kinds
      got = outcome(inferRole(address, in, out, present))
      if got != want((in, out))
    yield s"${address.render} ($present) with stdin $in, stdout $out: expected ${want((in, out))}, got $got"
    assert(wrong.isEmpty, wrong.mkString("\n"))

  test("safety: over all addresses, paths and stream pairs, nothing that holds data is overwritten, and nothing is read as written"):
    val files = for a <- Seq(false, true); f <- Seq(false, true); s <- Seq(false, true) yield FileAddress("x", a, f, s)
    val all = files ++ byAddress.map(_._1)
    var checked = 0
    for address <- all; present <- Present.values; in <- kinds; out <- kinds do
      val inferred = inferRole(address, in, out, present)
      checked += 1
      val shown = s"${address.render} ($present) with stdin $in, stdout $out"
      inferred match
        case Right(role) =>
          assertEquals(address.checkRole(role), Right(()), s"$shown inferred $role, a role it cannot play")
          if role == Role.Sink then
            assert(in.carriesData, s"$shown inferred a sink (nothing to write)")
            address match
              case f: FileAddress if !f.append =>
                assert(present != Present.DataFile, s"$shown would overwrite a file that holds data")
                if present == Present.Other then assertEquals(out, Terminal, s"$shown inferred a sink")
              case _: FileAddress => ()
              case _       => assertEquals(out, Terminal, s"$shown inferred a sink")
        case Left(e) => assertEquals(e.exitCode, ExitCode.Usage, e.render)
      if in == Unknown && address != StdAddress && address.roles.contains(Role.Sink) then
        assert(inferred.isLeft, s"$shown: an unknown stdin must be refused, got $inferred")
    assertEquals(checked, all.size * Present.values.length * 36)

  test("a file that holds data is refused as an inferred sink, naming the path and the explicit forms"):
    inferRole(FileAddress("k1"), Pipe, Terminal, Present.DataFile) match
      case Left(e @ CliError.BadToken(None, "file:k1", rule, expected)) =>
        assert(rule.contains("k1 exists and holds data, and a single address never overwrites a file"), rule)
        assert(rule.contains("only 'asyncpipe - file:k1' writes it"), rule)
        assertEquals(expected, "asyncpipe FROM TO, e.g. 'asyncpipe - file:k1' (write it) or 'asyncpipe file:k1 -' (read it)")
        assertEquals(e.exitCode, ExitCode.Usage)
      case other => fail(s"expected a refusal, got $other")

  test("a refusal names the address, what stdin and stdout are, and the explicit FROM TO form"):
    inferRole(FileAddress("data.txt"), Pipe, RegularFile) match
      case Left(e @ CliError.BadToken(None, "file:data.txt", rule, expected)) =>
        assertEquals(rule, "cannot tell whether file:data.txt is the source or the sink here (stdin is a pipe, stdout is a file)")
        assertEquals(
          expected,
          "asyncpipe FROM TO, e.g. 'asyncpipe - file:data.txt' (write it) or 'asyncpipe file:data.txt -' (read it)"
        )
        assert(e.render.startsWith("asyncpipe: bad value 'file:data.txt': cannot tell"), e.render)
      case other => fail(s"expected a refusal, got $other")
    val unknown = inferRole(UdpAddress.At(Host.Name("h"), 9), Socket, Unknown).left.map(_.render)
    assert(unknown.left.exists(_.contains("stdin is a socket, stdout is of a kind asyncpipe cannot tell")), unknown.toString)
    val devnull = inferRole(FileAddress("x"), Pipe, NullDevice).left.map(_.render)
    assert(devnull.left.exists(_.contains("stdin is a pipe, stdout is /dev/null")), devnull.toString)
    inferRole(FileAddress("log", append = true), Terminal, Terminal) match
      case Left(CliError.BadToken(None, "file:log,append", rule, expected)) =>
        assert(rule.contains("file:log,append can only be written"), rule)
        assert(rule.contains("(stdin is a terminal, stdout is a terminal)"), rule)
        assertEquals(expected, "asyncpipe FROM TO, e.g. 'asyncpipe - file:log,append' (write it)")
      case other => fail(s"expected a refusal, got $other")

  test("a contradictory address built by hand is refused, not given a role"):
    val both = FileAddress("x", append = true, follow = true)
    assertEquals(both.roles, Set.empty[Role])
    for in <- kinds; out <- kinds do assert(inferRole(both, in, out).isLeft, s"stdin $in, stdout $out")

  // ---------------------------------------------------------------- StreamKind

  test("StreamKind.fromLink maps the text of /proc/self/fd links"):
    val cases = Seq(
      ("pipe:[12345]", false) -> Pipe,
      ("socket:[678]", false) -> Socket,
      ("/dev/null", false) -> NullDevice,
      ("/dev/pts/0", false) -> Terminal,
      ("/dev/pts/17", false) -> Terminal,
      ("/dev/tty", false) -> Terminal,
      ("/dev/tty3", false) -> Terminal,
      ("/home/u/data.txt", true) -> RegularFile,
      ("/tmp/gone (deleted)", true) -> RegularFile,
      ("/home/u/dir", false) -> Unknown,
      ("/dev/sda", false) -> Unknown,
      ("/dev/ttyUSB0", false) -> Unknown,
      ("/dev/pts/ptmx", false) -> Unknown,
      ("anon_inode:[eventpoll]", false) -> Unknown,
      ("pipe:[1]x", false) -> Pipe,
      ("relative", true) -> Unknown,
      ("", false) -> Unknown
    )
    for ((link, regular), kind) <- cases do
      assertEquals(StreamKind.fromLink(link, regular), kind, s"link '$link' (regular file: $regular)")

  private val procFd = Path.of("/proc/self/fd")

  private def fds: Set[Int] = Using.resource(Files.list(procFd))(_.iterator.asScala.flatMap(_.getFileName.toString.toIntOption).toSet)

  private def link(fd: Int): Option[String] = scala.util.Try(Files.readSymbolicLink(procFd.resolve(fd.toString)).toString).toOption

  /** fd -> link text now. (Listing /proc/self/fd takes an fd, which later opens may reuse.) */
  private def links: Map[Int, Option[String]] = fds.toSeq.map(fd => fd -> link(fd)).toMap

  /** The fds whose link passes `keep` now but did not name the same thing in `before`. */
  private def fresh(before: Map[Int, Option[String]])(keep: String => Boolean): Set[Int] =
    fds.filter(fd => link(fd).exists(keep) && before.get(fd).flatten != link(fd))

  /** The fds `open` opens, by comparing /proc/self/fd before and after, kept to those whose link passes `keep`. */
  private def opened[A <: AutoCloseable](open: => A)(keep: String => Boolean)(check: Set[Int] => Unit): Unit =
    val before = links
    Using.resource(open) { _ =>
      val fresh = this.fresh(before)(keep)
      assert(fresh.nonEmpty, s"no new fd found in $procFd (links now: ${fds.toSeq.sorted.map(fd => fd -> link(fd))})")
      check(fresh)
    }

  test("StreamKind.of on this process's fds: a file, a directory, a pipe, a socket, /dev/null, a closed fd"):
    assume(Files.isDirectory(procFd), "needs /proc/self/fd (Linux)")
    val dir = Files.createTempDirectory("address-test")
    try
      val file = Files.write(dir.resolve("data.txt"), "hello".getBytes)
      opened(FileChannel.open(file, StandardOpenOption.READ))(_ == file.toRealPath().toString) { found =>
        for fd <- found do assertEquals(StreamKind.of(fd), RegularFile, s"fd $fd -> ${link(fd)}")
      }
      opened(Files.newDirectoryStream(dir))(_ == dir.toRealPath().toString) { found =>
        for fd <- found do assertEquals(StreamKind.of(fd), Unknown, s"a directory, fd $fd -> ${link(fd)}")
      }
      val before = links
      val pipe = java.nio.channels.Pipe.open()
      try
        val ends = fresh(before)(_.startsWith("pipe:["))
        assume(ends.nonEmpty, s"java.nio.channels.Pipe is not a pipe(2) here: ${links}")
        for fd <- ends do assertEquals(StreamKind.of(fd), Pipe, s"fd $fd -> ${link(fd)}")
      finally
        pipe.source.close(); pipe.sink.close()
      opened(DatagramChannel.open())(_.startsWith("socket:[")) { found =>
        for fd <- found do assertEquals(StreamKind.of(fd), Socket, s"fd $fd -> ${link(fd)}")
      }
      opened(java.io.FileInputStream("/dev/null"))(_ == "/dev/null") { found =>
        for fd <- found do assertEquals(StreamKind.of(fd), NullDevice, s"fd $fd -> ${link(fd)}")
      }
      val closed = (3 to 100000).find(fd => !fds.contains(fd)).get
      assertEquals(StreamKind.of(closed), Unknown, s"fd $closed is not open")
      assertEquals(StreamKind.of(-1), Unknown)
      // The standard streams: whatever the test runner gave, of() agrees with the link's text.
      for fd <- 0 to 2 do
        val expected = link(fd).fold(Unknown)(l => StreamKind.fromLink(l, Files.isRegularFile(procFd.resolve(fd.toString))))
        assertEquals(StreamKind.of(fd), expected, s"fd $fd -> ${link(fd)}")
    finally
      Using.resource(Files.walk(dir))(_.iterator.asScala.toSeq.reverse.foreach(Files.deleteIfExists))
