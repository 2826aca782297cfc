package asyncpipe.cli.stages

import asyncpipe.cli.command.*

import scala.concurrent.duration.*

/** The grammar of the stream-socket kinds (StreamSocket.scala): every form, the defaults, the
  * round trip through `render`, the roles and the refusals (exit 2 naming the token and the rule).
  */
class StreamSocketTest extends munit.FunSuite:

  private def ok(token: String): StreamSocketAddress = Address.parse(token) match
    case Right(a: StreamSocketAddress) => a
    case other                         => fail(s"expected '$token' to parse as a stream socket, got $other")

  private def refused(token: String, parts: String*): Unit = Address.parse(token) match
    case Left(err @ CliError.BadToken(None, `token`, _, _)) =>
      for p <- parts do assert(err.render.contains(p), s"the message for '$token' should contain [$p]:\n${err.render}")
      assertEquals(err.exitCode, ExitCode.Usage)
    case other => fail(s"expected '$token' to be refused naming it, got $other")

  test("tcp:HOST:PORT connects: names, IPv4, [IPv6], with the defaults the help states"):
    val a = ok("tcp:example.org:80")
    assertEquals((a.family, a.listen, a.where), (SocketFamily.Tcp, false, SocketWhere.Port(Some(Host.Name("example.org")), 80)))
    assertEquals(a.settings, SocketSettings(connectTimeout = 30.seconds, retry = 0, interval = 1.second, linger = 30.seconds, maxConns = 1024))
    assertEquals(ok("tcp:127.0.0.1:9").where, SocketWhere.Port(Some(Host.IPv4("127.0.0.1")), 9))
    assertEquals(ok("tcp:[::1]:9000").where, SocketWhere.Port(Some(Host.IPv6("::1")), 9000))
    assert(ok("tcp:h:1").converses, "a single connecting address is a conversation")

  test("tcp-listen:[HOST:]PORT listens: every interface, one, or port 0"):
    assertEquals(ok("tcp-listen:9000").where, SocketWhere.Port(None, 9000))
    assertEquals(ok("tcp-listen:127.0.0.1:0").where, SocketWhere.Port(Some(Host.IPv4("127.0.0.1")), 0))
    assert(!ok("tcp-listen:9000").converses)
    assertEquals(ok("tcp-listen:0").roles, Set(Role.Source, Role.Sink))

  test("options are read, and render gives back the token"):
    for token <- Seq(
        "tcp:h:1,connect-timeout=2s,retry=3,interval=250ms,keepalive,nodelay",
        "tcp:h:1,linger=5s",
        "tcp-listen:9000,once,max-conns=10,on-slow=drop",
        "unix:/run/x.sock,retry=1",
        "unix-listen:/tmp/a\\,b.sock,once"
      )
    do assertEquals(Address.parse(ok(token).render), Right(ok(token)), token)
    val a = ok("tcp:h:1,connect-timeout=2s,retry=3,interval=250ms,keepalive,nodelay")
    assertEquals((a.settings.connectTimeout, a.settings.retry, a.settings.interval, a.settings.keepalive, a.settings.nodelay),
      (2.seconds, 3, 250.millis, true, true))
    val l = ok("tcp-listen:9000,once,max-conns=10,on-slow=drop")
    assertEquals((l.settings.once, l.settings.maxConns, l.settings.onSlow), (true, 10, OnSlow.Drop))
    assertEquals(ok("unix-listen:/tmp/a\\,b.sock,once").where, SocketWhere.Path("/tmp/a,b.sock"))

  test("roles: linger and on-slow are for a sink; port 0 is for listening"):
    assertEquals(ok("tcp:h:1,linger=1s").roles, Set(Role.Sink))
    assertEquals(ok("tcp-listen:1,on-slow=drop").roles, Set(Role.Sink))
    val zero = ok("tcp:127.0.0.1:0")
    assertEquals(zero.roles, Set.empty[Role])
    assert(zero.checkRole(Role.Source).left.exists(_.render.contains("port 0 (any free port) is for listening")))

  test("refusals name the token and the rule"):
    refused("tcp:", "the host and port are missing")
    refused("tcp:9000", "'9000' is a port without a host", "tcp:127.0.0.1:9000")
    refused("tcp:example.org", "'example.org' has no port", "tcp:example.org:80")
    refused("tcp:h:70000", "out of range")
    refused("tcp-listen:", "the port is missing")
    refused("tcp:h:1,lingr=1s", "unknown tcp option 'lingr'", "did you mean 'linger'?")
    refused("tcp:h:1,retry=-1", "tcp option 'retry'")
    refused("tcp-listen:1,max-conns=0", "tcp-listen option 'max-conns'")
    refused("tcp-listen:1,on-slow=wait", "'wait' is not one of block, drop")
    refused("tcp:h:1,once", "unknown tcp option 'once'")
    refused("unix:h:1,nodelay", "unknown unix option 'nodelay'")
    refused("unix:", "the socket's path is missing")
    refused("unix:/" + "x" * 120, "at most 107 bytes")
