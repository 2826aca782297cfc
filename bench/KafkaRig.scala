package asyncpipe.bench

import java.nio.file.{Files, Path}
import java.util.Properties
import java.util.concurrent.TimeUnit
import java.util.concurrent.locks.LockSupport
import org.apache.kafka.clients.admin.{Admin, AdminClientConfig, DescribeClusterOptions, NewTopic}
import org.apache.kafka.common.Uuid
import scala.jdk.CollectionConverters.*
import scala.util.Using

/** A real Apache Kafka broker (KRaft, one node: broker and controller in one JVM) started from the
  * classpath in ASYNCPIPE_KAFKA_CLASSPATH (build.mill's `kafkaBroker` module: kafka_2.13, its tools
  * and a logging binding; never this JVM's classpath, as it brings Scala 2.13): the one place its
  * configuration is written, for the `kafka` bench suite and the tests' harness
  * (test/cli/kafka/KafkaBroker.scala).
  */
object KafkaRig:
  /** The broker's classpath, if this run has one. */
  def classpath: Option[String] = Option(System.getenv("ASYNCPIPE_KAFKA_CLASSPATH")).filter(_.nonEmpty)

  /** This JVM's java (JDK 25), for the broker and Kafka's tools. */
  val java: String = ProcessHandle.current.info.command.orElse(System.getProperty("java.home") + "/bin/java")

  // JDK 25 warns about sun.misc.Unsafe, which the broker's libraries use.
  private val unsafeFlag = Seq("--sun-misc-unsafe-memory-access=allow")

  /** The broker's JVM: a small heap (128 MiB is enough for the tests' records; `heap` for more). */
  def brokerJvmFlags(heap: String = "128m"): Seq[String] = Seq(s"-Xmx$heap", s"-Xms$heap", "-XX:+UseSerialGC",
    "-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS") ++ unsafeFlag

  /** Kafka's short-lived tools (StorageTool, the console producer and consumer): C1, WARN logging. */
  val toolJvmFlags: Seq[String] = Seq("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn") ++ unsafeFlag

  /** A single-node KRaft broker's server.properties on 127.0.0.1 (clients on `port`, the quorum on
    * `controllerPort`), its data in `dataDir`.
    */
  def serverProperties(port: Int, controllerPort: Int, dataDir: String): String =
    Seq(
      "process.roles" -> "broker,controller",
      "node.id" -> "1",
      "controller.quorum.voters" -> s"1@127.0.0.1:$controllerPort",
      "listeners" -> s"PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controllerPort",
      "advertised.listeners" -> s"PLAINTEXT://127.0.0.1:$port",
      "controller.listener.names" -> "CONTROLLER",
      "inter.broker.listener.name" -> "PLAINTEXT",
      "listener.security.protocol.map" -> "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
      "log.dirs" -> dataDir,
      "num.partitions" -> "1",
      "default.replication.factor" -> "1",
      "min.insync.replicas" -> "1",
      // One partition of __consumer_offsets: the group coordinator loads it at once (50 by default).
      "offsets.topic.replication.factor" -> "1",
      "offsets.topic.num.partitions" -> "1",
      "transaction.state.log.replication.factor" -> "1",
      "transaction.state.log.min.isr" -> "1",
      "transaction.state.log.num.partitions" -> "1",
      "share.coordinator.state.topic.replication.factor" -> "1",
      "share.coordinator.state.topic.min.isr" -> "1",
      "share.coordinator.state.topic.num.partitions" -> "1",
      "group.initial.rebalance.delay.ms" -> "0",
      // After a SIGKILL the restarted broker cannot register until the controller expires the dead
      // one's session: 9 s by default (a kill-then-restart took 12.5 s); 3 s with heartbeats every
      // 500 ms, still far above a pause the broker would make on a busy machine.
      "broker.heartbeat.interval.ms" -> "500",
      "broker.session.timeout.ms" -> "3000",
      "auto.create.topics.enable" -> "true",
      // The cleaner's buffer is 128 MiB by default, too much for a 128 MiB heap (OutOfMemoryError);
      // the broker wants strictly more than 1 MiB per cleaner thread (1048576 is refused).
      "log.cleaner.dedupe.buffer.size" -> "2097152",
      // Fewer threads than the defaults: the broker idles most of the time in tests.
      "num.network.threads" -> "2",
      "num.io.threads" -> "4",
      "background.threads" -> "4"
    ).map((k, v) => s"$k=$v").mkString("", "\n", "\n")

  /** The command line of Kafka's tool `mainClass` (on `cp`) with `args`. */
  def tool(cp: String, mainClass: String, args: String*): Seq[String] = Seq(java) ++ toolJvmFlags ++ Seq("-cp", cp, mainClass) ++ args

  /** A broker for a bench suite, in `dir` (config, data, log): formatted, started, and answering
    * when this returns; `stop` ends it.
    */
  final class Broker(dir: Path, cp: String, heap: String):
    private def freePort(): Int = Using.resource(_root_.java.net.ServerSocket(0, 1, _root_.java.net.InetAddress.getLoopbackAddress))(_.getLocalPort)
    val port: Int = freePort()
    private val controllerPort = Iterator.continually(freePort()).find(_ != port).get
    def bootstrap: String = s"127.0.0.1:$port"
    private val config = dir.resolve("server.properties")
    private val log = dir.resolve("broker.log")
    Files.writeString(config, serverProperties(port, controllerPort, dir.resolve("data").toString))
    private val format = ProcessBuilder(tool(cp, "kafka.tools.StorageTool", "format", "--cluster-id", Uuid.randomUuid.toString,
      "--config", config.toString)*).redirectErrorStream(true).redirectOutput(log.toFile).start()
    if format.waitFor() != 0 then throw IllegalStateException(s"formatting the broker's storage failed: ${tail()}")
    private val process = ProcessBuilder((Seq(java) ++ brokerJvmFlags(heap) ++ Seq("-cp", cp, "kafka.Kafka", config.toString))*)
      .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile)).start()
    awaitReady()

    private def tail(): String = if Files.exists(log) then String(Files.readAllBytes(log)).takeRight(3000) else "(no log)"

    /** Until the broker describes its cluster (60 s at most), watching that it stays alive. */
    private def awaitReady(): Unit =
      val props = Properties()
      props.setProperty(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap)
      props.setProperty(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "1000")
      props.setProperty(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "2000")
      val deadline = System.nanoTime() + 60_000_000_000L
      Using.resource(Admin.create(props)) { admin =>
        var ready = false
        while !ready do
          if !process.isAlive then throw IllegalStateException(s"the broker exited with ${process.exitValue}: ${tail()}")
          if System.nanoTime() > deadline then { stop(); throw IllegalStateException(s"the broker was not ready in 60 s: ${tail()}") }
          ready =
            try !admin.describeCluster(DescribeClusterOptions().timeoutMs(1000)).nodes.get(2, TimeUnit.SECONDS).isEmpty
            catch case _: Exception => false
          if !ready then LockSupport.parkNanos(50_000_000) // a refused connection answers at once: poll, not spin
      }

    /** Creates `topics` (one partition each) and waits until they exist. */
    def createTopics(topics: Seq[String]): Unit =
      val props = Properties()
      props.setProperty(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap)
      Using.resource(Admin.create(props)) { admin =>
        admin.createTopics(topics.map(NewTopic(_, 1, 1.toShort)).asJava).all.get(60, TimeUnit.SECONDS)
      }

    def stop(): Unit =
      process.destroy()
      if !process.waitFor(30, TimeUnit.SECONDS) then process.destroyForcibly().waitFor()
