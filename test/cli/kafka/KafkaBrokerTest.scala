package asyncpipe.cli.kafka

import asyncpipe.async.Watchdog
import java.nio.charset.StandardCharsets.UTF_8
import java.util.Properties
import scala.concurrent.duration.{DurationInt, FiniteDuration}
import scala.util.{Random, Using}
import org.apache.kafka.clients.consumer.{ConsumerConfig, KafkaConsumer, OffsetAndMetadata}
import org.apache.kafka.common.TopicPartition
import org.apache.kafka.common.serialization.ByteArrayDeserializer

/** The Kafka test harness against itself: a real broker (KRaft, one node, a child JVM) that keeps
  * records byte for byte, survives a stop and a kill, and that Kafka's own console tools talk to.
  * Skipped without ASYNCPIPE_KAFKA_CLASSPATH (run through ./mill).
  */
class KafkaBrokerTest extends munit.FunSuite with WithKafkaBroker with Watchdog:
  override def watchdog: FiniteDuration = 45.seconds
  override def munitTimeout = watchdog + 10.seconds

  private def text(s: String): Array[Byte] = s.getBytes(UTF_8)
  private def show(b: Array[Byte] | Null): String = if b == null then "null" else b.toSeq.mkString("[", ",", "]")

  test("a topic of 3 partitions: 1,000 keyed records produced to explicit partitions come back byte-exact, in each partition's order"):
    val topic = "keyed"
    broker.createTopic(topic, partitions = 3)
    assertEquals(broker.partitions(topic), Seq(0, 1, 2))
    val random = Random(20_240_601)
    // Record i goes to partition i % 3; values of every length from 0 to 300 bytes, any byte; every
    // 50th key is null.
    val records = (0 until 1000).map { i =>
      val key: Array[Byte] | Null = if i % 50 == 7 then null else text(s"key-$i")
      val value = Array.ofDim[Byte](random.nextInt(301))
      random.nextBytes(value)
      (i % 3, key, value)
    }
    for p <- 0 until 3 do
      val mine = records.filter(_._1 == p)
      broker.produce(topic, mine.map(_._3), mine.map(_._2), Some(p))
    val got = broker.consumeAll(topic)
    assertEquals(got.size, records.size)
    for p <- 0 until 3 do
      val expected = records.filter(_._1 == p).map((_, k, v) => (show(k), show(v)))
      val read = got.filter(_.partition == p)
      assertEquals(read.map(_.offset), expected.indices.map(_.toLong), s"offsets of partition $p")
      assertEquals(read.map(r => (show(r.key), show(r.value))), expected, s"records of partition $p")
    assertEquals(broker.endOffsets(topic), Map(0 -> 334L, 1 -> 333L, 2 -> 333L))
    // Committed offsets: none for an unknown group; a group's commit on one partition.
    assertEquals(broker.committed("nobody", topic), Map.empty[Int, Long])
    val props = Properties()
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrap)
    props.put(ConsumerConfig.GROUP_ID_CONFIG, "committer")
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false")
    Using.resource(KafkaConsumer[Array[Byte], Array[Byte]](props, ByteArrayDeserializer(), ByteArrayDeserializer())) { c =>
      val tp = TopicPartition(topic, 1)
      c.assign(java.util.List.of(tp))
      c.commitSync(java.util.Map.of(tp, OffsetAndMetadata(10)), java.time.Duration.ofSeconds(30))
    }
    assertEquals(broker.committed("committer", topic), Map(1 -> 10L))

  test("stop() then restart(), and kill() then restart(): same port, the records still there, and new ones written"):
    val topic = "durable"
    broker.createTopic(topic, partitions = 2)
    val first = (0 until 100).map(i => text(s"before the stop $i"))
    broker.produce(topic, first)
    val port = broker.port
    val pid = broker.pid
    broker.stop()
    assert(!broker.alive, "alive after stop()")
    broker.restart()
    assert(broker.alive, "not alive after restart()")
    assertEquals(broker.port, port)
    assertNotEquals(broker.pid, pid)
    def values = broker.consumeAll(topic).map(r => String(r.value, UTF_8)).sorted
    assertEquals(values, first.map(String(_, UTF_8)).sorted)
    broker.produce(topic, Seq(text("after the restart")), partition = Some(1))
    assertEquals(broker.endOffsets(topic).values.sum, 101L)
    // SIGKILL: no controlled shutdown; the restart recovers the log as after a crash.
    broker.kill()
    assert(!broker.alive, "alive after kill()")
    broker.restart()
    assertEquals(values, (first.map(String(_, UTF_8)) :+ "after the restart").sorted)
    broker.produce(topic, Seq(text("after the kill")))
    assertEquals(broker.consumeAll(topic).size, 102)

  test("Kafka's console producer writes 3 lines, consumeAll reads them, and the console consumer prints them"):
    val topic = "console"
    broker.createTopic(topic)
    val produced = broker.tool("org.apache.kafka.tools.ConsoleProducer",
      Seq("--bootstrap-server", broker.bootstrap, "--topic", topic), stdin = text("one\ntwo\nthree\n"))
    assertEquals(produced.exitCode, 0, produced.err)
    assertEquals(broker.consumeAll(topic).map(r => String(r.value, UTF_8)), Seq("one", "two", "three"))
    val consumed = broker.tool("org.apache.kafka.tools.consumer.ConsoleConsumer",
      "--bootstrap-server", broker.bootstrap, "--topic", topic, "--from-beginning", "--max-messages", "3",
      "--timeout-ms", "30000")
    assertEquals(consumed.exitCode, 0, consumed.err)
    assertEquals(consumed.outText, "one\ntwo\nthree\n")
    assert(consumed.err.contains("Processed a total of 3 messages"), consumed.err)
