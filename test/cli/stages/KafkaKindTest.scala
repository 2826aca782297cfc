package asyncpipe.cli.stages

import asyncpipe.cli.command.*

import scala.concurrent.duration.*

/** The grammar of `kafka:` (KafkaKind.scala): brokers and topic, every option, the defaults, the
  * round trip through `render`, the roles, and the refusals (exit 2 naming the token and the rule).
  * Tokens name their brokers, so $ASYNCPIPE_KAFKA_BROKERS plays no part here (KafkaE2ETest has it).
  */
class KafkaKindTest extends munit.FunSuite:

  private def ok(token: String): KafkaAddress = Address.parse(token) match
    case Right(a: KafkaAddress) => a
    case other                  => fail(s"expected '$token' to parse as a kafka address, got $other")

  private def refused(token: String, parts: String*): Unit = Address.parse(token) match
    case Left(err @ CliError.BadToken(None, `token`, _, _)) =>
      for p <- parts do assert(err.render.contains(p), s"the message for '$token' should contain [$p]:\n${err.render}")
      assertEquals(err.exitCode, ExitCode.Usage)
    case other => fail(s"expected '$token' to be refused naming it, got $other")

  test("brokers joined by '+', port 9092 by default, [IPv6]; the topic after the last '/'"):
    val a = ok("kafka:k1:9093+k2+[::1]:9094/orders.v2")
    assertEquals(a.topic, "orders.v2")
    assertEquals(a.servers, "k1:9093,k2:9092,[::1]:9094")
    assertEquals(a.settings, KafkaSettings())
    assertEquals(a.settings.connectTimeout, 30.seconds)
    assertEquals(a.roles, Set(Role.Source, Role.Sink))

  test("options are read, and render gives back the token"):
    val tokens = Seq(
      "kafka:h/t,from=beginning,until=end,partition=0+2,keys,keysep=:",
      "kafka:h:1/t,from=-10",
      "kafka:h/t,from=42",
      "kafka:h/t,from=@1700000000000",
      "kafka:h/t,from=@2026-11-27T10:00:00Z",
      "kafka:h/t,key=k,acks=1,compression=zstd,linger=20ms,partition=3",
      "kafka:h/t,config=/etc/kafka.properties,client-id=me,connect-timeout=5s"
    )
    for token <- tokens do assertEquals(ok(token).render, token)
    val s = ok("kafka:h/t,from=-10,keysep=\\t,acks=0,linger=0ms").settings
    assertEquals((s.from, s.separator, s.acks, s.linger), (Some(KafkaFrom.Back(10)), '\t'.toByte, "0", Some(0.millis)))
    assertEquals(ok("kafka:h/t,from=@2026-11-27T10:00:00Z").settings.from, Some(KafkaFrom.At(1795773600000L)))
    assertEquals(ok("kafka:h/t,keysep=0x1f").settings.separator, 0x1f.toByte)

  test("a source's options on a sink and a sink's on a source are refused, naming the role"):
    assertEquals(ok("kafka:h/t,until=end").roles, Set(Role.Source))
    assertEquals(ok("kafka:h/t,acks=all").roles, Set(Role.Sink))
    assertEquals(ok("kafka:h/t,partition=0+1").roles, Set(Role.Source))
    assertEquals(ok("kafka:h/t,partition=1").roles, Set(Role.Source, Role.Sink))

  test("malformed tokens: exit 2 naming the token and the rule"):
    refused("kafka:h/", "the topic is missing")
    refused("kafka:/t", "the brokers before '/' are missing")
    refused("kafka:h+/t", "an empty broker")
    refused("kafka:h/a b", "'a b' is not a topic name")
    refused("kafka:h/..", "is not a topic name")
    refused("kafka:h/t,from=yesterday", "none of beginning, end")
    refused("kafka:h/t,from=-0", "from")
    refused("kafka:h/t,from=@noon", "ISO-8601")
    refused("kafka:h/t,partition=1+1", "names a partition twice")
    refused("kafka:h/t,keysep=ab", "not one ASCII character")
    refused("kafka:h/t,key=k,keysep=:", "both name the key")
    refused("kafka:h/t,acks=2", "'2' is not one of all, 1, 0")
    refused("kafka:h/t,acsk=all", "unknown kafka option 'acsk'", "did you mean 'acks'")
    refused("kafka:h/t,compression=brotli", "compression")
