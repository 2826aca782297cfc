package asyncpipe.cli.kafka

import java.lang.ProcessBuilder.Redirect
import java.net.{InetAddress, ServerSocket}
import java.util.Properties
import java.util.concurrent.{ConcurrentHashMap, ExecutionException, Future as JFuture, TimeUnit, TimeoutException}
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.locks.LockSupport
import scala.collection.mutable.ArrayBuffer
import scala.concurrent.duration.{DurationInt, FiniteDuration}
import scala.jdk.CollectionConverters.*
import scala.util.Using
import munit.Assertions
import org.apache.kafka.clients.admin.{Admin, AdminClientConfig, DescribeClusterOptions, DescribeTopicsOptions,
  ListTopicsOptions, NewTopic, OffsetSpec}
import org.apache.kafka.clients.consumer.{ConsumerConfig, ConsumerRecord, KafkaConsumer}
import org.apache.kafka.clients.producer.{KafkaProducer, ProducerConfig, ProducerRecord}
import org.apache.kafka.common.{KafkaFuture, TopicPartition, Uuid}
import org.apache.kafka.common.errors.GroupIdNotFoundException
import org.apache.kafka.common.serialization.{ByteArrayDeserializer, ByteArraySerializer}

/** A real Apache Kafka broker for the tests: one node in KRaft mode (broker and controller in one
  * process, no ZooKeeper, no container), started as a child JVM on a classpath of its own
  * (ASYNCPIPE_KAFKA_CLASSPATH, which build.mill sets; never the tests' classpath, since the broker
  * brings Scala 2.13), in a temporary directory that holds its configuration, its data and its log.
  *
  * The harness talks to it with the official client, which the tests' classpath has: an AdminClient
  * tells when it is ready and serves the helpers, a producer and a consumer write and read records.
  * Kafka's own command-line tools run with `tool`, as child processes on the broker's classpath.
  *
  * Nothing waits by sleeping: readiness is the broker answering requests (polled with a deadline,
  * while the process is watched for an early death), a stop is the process's exit. Every failure
  * says why, with the tail of the broker's log when the broker is the one failing.
  *
  * `stop` and `kill` leave the data in place for `restart` (same ports, same data); `close` stops
  * the broker for good and deletes the directory. A JVM shutdown hook stops any broker (and tool)
  * still running when the test JVM exits, so that a crashed run leaves none behind (a test JVM that
  * is SIGKILLed runs no hook: its broker stays, and ends with the machine or by hand).
  */
final class KafkaBroker private (
    /** The temporary directory: server.properties, data/, broker.log, tools/. */
    val dir: os.Path,
    /** The PLAINTEXT listener, the one clients use. */
    val port: Int,
    /** The CONTROLLER listener (KRaft's quorum; clients never see it). */
    val controllerPort: Int,
    val clusterId: String,
    classpath: String
):
  import KafkaBroker.*

  def bootstrap: String = s"127.0.0.1:$port"
  def dataDir: os.Path = dir / "data"
  def configFile: os.Path = dir / "server.properties"
  /** The broker's stdout and stderr, every start appended (slf4j-simple, level INFO). */
  def logFile: os.Path = dir / "broker.log"

  // The running process, or null. Volatile: the shutdown hook reads it without the lock (a test
  // thread may hold the lock, blocked, while the JVM exits).
  @volatile private var process: Process | Null = null
  private var adminClient: Admin | Null = null
  private var closed = false
  private var starts = 0
  private val toolRuns = AtomicInteger()

  def alive: Boolean = process match
    case null       => false
    case p: Process => p.isAlive

  /** The broker's process id, when it runs. */
  def pid: Option[Long] = Option(process).map(_.nn.pid)

  /** The last `lines` lines of the broker's log. */
  def logTail(lines: Int = 60): String =
    if !os.exists(logFile) then "(no log)"
    else os.read.lines(logFile).takeRight(lines).mkString("\n")

  // -----------------------------------------------------------------------------------------------
  // Life cycle

  /** Stops the broker with SIGTERM (a controlled shutdown) and waits for it to exit: up to 30 s,
    * then SIGKILL. The data stays, for `restart`.
    */
  def stop(): Unit = synchronized {
    closeAdmin()
    process match
      case null => ()
      case p: Process =>
        p.destroy()
        if !p.waitFor(StopBound.toMillis, TimeUnit.MILLISECONDS) then
          p.destroyForcibly()
          p.waitFor(StopBound.toMillis, TimeUnit.MILLISECONDS)
        process = null
  }

  /** Kills the broker with SIGKILL (no shutdown at all) and waits for it to exit. The data stays:
    * `restart` recovers it as after a crash.
    */
  def kill(): Unit = synchronized {
    closeAdmin()
    process match
      case null => ()
      case p: Process =>
        p.destroyForcibly()
        if !p.waitFor(StopBound.toMillis, TimeUnit.MILLISECONDS) then
          fail(s"the broker (pid ${p.pid}) is still alive $StopBound after SIGKILL")
        process = null
  }

  /** Starts the broker again, on the same ports and the same data (stopping it first if it runs),
    * and waits until it is ready.
    */
  def restart(): Unit = synchronized {
    if closed then fail("restart() of a closed broker")
    if alive then stop()
    launch()
  }

  /** Stops the broker and deletes its directory. Idempotent. */
  def close(): Unit = synchronized {
    if !closed then
      closed = true
      try stop()
      finally
        live.remove(this)
        os.remove.all(dir)
  }

  private def launch(): Unit =
    starts += 1
    os.write.append(logFile, s"===== asyncpipe test harness: start $starts of the broker =====\n")
    val command = Seq(javaCommand) ++ BrokerJvmFlags ++ Seq("-cp", classpath, "kafka.Kafka", configFile.toString)
    val p = ProcessBuilder(command*)
      .directory(dir.toIO)
      .redirectErrorStream(true)
      .redirectOutput(Redirect.appendTo(logFile.toIO))
      .start()
    p.getOutputStream.close() // it reads no stdin
    process = p
    live.add(this)
    awaitReady(p)

  /** Waits until the broker answers: it describes the cluster with itself in it, and every partition
    * of every topic (internal ones too) has a leader, which after a restart takes the broker a moment
    * longer than answering. Fails, after killing it, if the process exits first or if `ReadyBound`
    * passes.
    */
  private def awaitReady(p: Process): Unit =
    val deadline = System.nanoTime() + ReadyBound.toNanos
    var last: Throwable | Null = null
    var ready = false
    Using.resource(newAdmin(requestTimeoutMs = 1000, apiTimeoutMs = 2000)) { admin =>
      while !ready do
        if !p.isAlive then
          process = null
          fail(s"the broker exited with status ${p.exitValue} before it was ready; the end of $logFile:\n${logTail()}")
        if System.nanoTime() > deadline then
          p.destroyForcibly()
          p.waitFor(StopBound.toMillis, TimeUnit.MILLISECONDS)
          process = null
          fail(s"the broker was not ready after $ReadyBound (last answer: $last); the end of $logFile:\n${logTail()}")
        try
          val nodes = admin.describeCluster(DescribeClusterOptions().timeoutMs(1000)).nodes.get(2, TimeUnit.SECONDS)
          ready = !nodes.isEmpty && everyPartitionLed(admin)
          if !ready then last = IllegalStateException(s"nodes $nodes; or a partition without a leader")
        catch
          case e @ (_: ExecutionException | _: TimeoutException) => last = Option(e.getCause).getOrElse(e)
        // An answer that comes fast (connection refused, no leader yet): poll, not spin.
        if !ready then LockSupport.parkNanos(50_000_000)
    }

  private def everyPartitionLed(admin: Admin): Boolean =
    val names = admin.listTopics(ListTopicsOptions().listInternal(true).timeoutMs(1000)).names.get(2, TimeUnit.SECONDS)
    names.isEmpty ||
      admin.describeTopics(names, DescribeTopicsOptions().timeoutMs(1000)).allTopicNames.get(2, TimeUnit.SECONDS)
        .values.asScala.forall(_.partitions.asScala.forall(p => p.leader != null && !p.leader.isEmpty))

  // -----------------------------------------------------------------------------------------------
  // Clients

  /** An AdminClient on this broker, made on first use and closed by `stop`, `kill` and `close`. */
  def admin: Admin = synchronized {
    if !alive then fail("the broker is not running")
    adminClient match
      case null =>
        val a = newAdmin(requestTimeoutMs = 10_000, apiTimeoutMs = OpBound.toMillis.toInt)
        adminClient = a
        a
      case a: Admin => a
  }

  private def closeAdmin(): Unit =
    adminClient match
      case null => ()
      case a: Admin =>
        adminClient = null
        a.close(java.time.Duration.ofSeconds(5))

  private def newAdmin(requestTimeoutMs: Int, apiTimeoutMs: Int): Admin =
    val props = Properties()
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap)
    props.put(AdminClientConfig.CLIENT_ID_CONFIG, "asyncpipe-test-admin")
    props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, requestTimeoutMs.toString)
    props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, apiTimeoutMs.toString)
    props.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "50")
    props.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "200")
    props.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "50")
    props.put(AdminClientConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "200")
    Admin.create(props)

  /** Creates a topic (replication factor 1) and waits until each of its partitions has a leader.
    * Fails if it exists.
    */
  def createTopic(name: String, partitions: Int = 1): Unit =
    val a = admin
    await(s"creating topic $name", a.createTopics(java.util.List.of(NewTopic(name, partitions, 1.toShort))).all)
    val deadline = System.nanoTime() + OpBound.toNanos
    // Right after it is made, describing the topic can fail for a moment ("This server does not
    // host this topic-partition"): asked again until the deadline.
    def led = try partitionsOf(name).forall(_._2) catch case _: munit.FailException if System.nanoTime() < deadline => false
    while !led do
      if System.nanoTime() > deadline then fail(s"topic $name: partitions without a leader after $OpBound")
      LockSupport.parkNanos(20_000_000)

  /** The partitions of a topic, each with whether it has a leader. Fails if the topic does not exist. */
  private def partitionsOf(topic: String): Seq[(Int, Boolean)] =
    val d = await(s"describing topic $topic", admin.describeTopics(java.util.List.of(topic)).allTopicNames).get(topic)
    d.partitions.asScala.toSeq.map(p => p.partition -> (p.leader != null && !p.leader.isEmpty)).sortBy(_._1)

  /** The partition numbers of a topic, in order. Fails if the topic does not exist. */
  def partitions(topic: String): Seq[Int] = partitionsOf(topic).map(_._1)

  /** Writes `values` (with `keys`, if given: as many as values, null for none) to `topic`, to
    * `partition` or where the producer's partitioner puts them, in order (an idempotent producer,
    * acks=all); returns once every record is acknowledged, and fails on the first that is not.
    */
  def produce(topic: String, values: Seq[Array[Byte]], keys: Seq[Array[Byte] | Null] = Nil, partition: Option[Int] = None): Unit =
    require(keys.isEmpty || keys.size == values.size, s"produce: ${keys.size} keys for ${values.size} values")
    val props = Properties()
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap)
    props.put(ProducerConfig.CLIENT_ID_CONFIG, "asyncpipe-test-producer")
    props.put(ProducerConfig.ACKS_CONFIG, "all")
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true")
    props.put(ProducerConfig.LINGER_MS_CONFIG, "5")
    props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000")
    props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, OpBound.toMillis.toString)
    props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, OpBound.toMillis.toString)
    val producer = KafkaProducer[Array[Byte], Array[Byte]](props, ByteArraySerializer(), ByteArraySerializer())
    try
      val to: Integer | Null = partition.map(Int.box).orNull
      val sent = values.indices.map { i =>
        val key: Array[Byte] | Null = if keys.isEmpty then null else keys(i)
        producer.send(ProducerRecord[Array[Byte], Array[Byte]](topic, to, key, values(i)))
      }
      producer.flush()
      for (f, i) <- sent.zipWithIndex do awaitJava(s"producing record $i of ${values.size} to $topic", f)
    finally producer.close(java.time.Duration.ofSeconds(10))

  /** Every record of `topic`, from the beginning of each partition to its end as it is when this
    * call starts (records written meanwhile are left out), ordered by partition, then offset. No
    * consumer group: the partitions are assigned, nothing is committed.
    */
  def consumeAll(topic: String): Seq[ConsumerRecord[Array[Byte], Array[Byte]]] =
    val tps = partitions(topic).map(TopicPartition(topic, _))
    val props = Properties()
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap)
    props.put(ConsumerConfig.CLIENT_ID_CONFIG, "asyncpipe-test-consumer")
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false")
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest")
    props.put(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, "false")
    props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000")
    props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, OpBound.toMillis.toString)
    Using.resource(KafkaConsumer[Array[Byte], Array[Byte]](props, ByteArrayDeserializer(), ByteArrayDeserializer())) { c =>
      c.assign(tps.asJava)
      c.seekToBeginning(tps.asJava)
      val end = c.endOffsets(tps.asJava).asScala.map((tp, o) => tp -> o.longValue).toMap
      val got = ArrayBuffer.empty[ConsumerRecord[Array[Byte], Array[Byte]]]
      val deadline = System.nanoTime() + OpBound.toNanos
      def behind = tps.filter(tp => c.position(tp) < end(tp))
      while behind.nonEmpty do
        if System.nanoTime() > deadline then
          fail(s"consumeAll($topic): after $OpBound, ${got.size} records read and still behind on " +
            behind.map(tp => s"${tp.partition} (at ${c.position(tp)} of ${end(tp)})").mkString(", "))
        got ++= c.poll(java.time.Duration.ofMillis(200)).asScala
      got.filter(r => r.offset < end(TopicPartition(topic, r.partition))).sortBy(r => (r.partition, r.offset)).toSeq
    }

  /** The offsets committed by consumer group `group` on `topic`'s partitions; a partition with no
    * commit is absent (and an unknown group commits nothing).
    */
  def committed(group: String, topic: String): Map[Int, Long] =
    val offsets =
      try await(s"offsets of group $group", admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata)
      catch case e: Throwable if causes(e).exists(_.isInstanceOf[GroupIdNotFoundException]) => java.util.Map.of()
    offsets.asScala.collect { case (tp, om) if tp.topic == topic && om != null => tp.partition -> om.offset }.toMap

  /** The end offset (the next offset to be written) of each partition of `topic`. */
  def endOffsets(topic: String): Map[Int, Long] =
    val spec = partitions(topic).map(p => TopicPartition(topic, p) -> OffsetSpec.latest()).toMap.asJava
    await(s"end offsets of $topic", admin.listOffsets(spec).all).asScala.map((tp, info) => tp.partition -> info.offset).toMap

  // -----------------------------------------------------------------------------------------------
  // Kafka's own tools

  /** Runs `mainClass` (one of Kafka's tools, e.g. "org.apache.kafka.tools.ConsoleProducer") on the
    * broker's classpath with `args`, no input, and a 60 s bound.
    */
  def tool(mainClass: String, args: String*): ToolResult = tool(mainClass, args, Array.emptyByteArray)

  /** Runs `mainClass` on the broker's classpath, as a child process, with `args` and `stdin` as its
    * input; its output and error go to files (under `dir`/tools/), so neither can fill a pipe.
    * Fails, after killing it, if it has not exited within `timeout`. The tool's logging is at WARN.
    */
  def tool(mainClass: String, args: Seq[String], stdin: Array[Byte], timeout: FiniteDuration = ToolBound): ToolResult =
    runTool(dir / "tools" / s"${toolRuns.incrementAndGet()}", classpath, mainClass, args, stdin, timeout)

object KafkaBroker:
  /** What a tool did: its exit status, its stdout (bytes, as written) and its stderr (text). */
  final case class ToolResult(exitCode: Int, out: Array[Byte], err: String):
    def outText: String = String(out, java.nio.charset.StandardCharsets.UTF_8)

  /** The broker's classpath (build.mill: the `kafkaBroker` module), or None outside ./mill. */
  def classpath: Option[String] = sys.env.get("ASYNCPIPE_KAFKA_CLASSPATH").filter(_.nonEmpty)

  /** The classpath, or an assumption that fails (the test is skipped, not failed) without it. */
  def requireClasspath()(using munit.Location): String =
    val cp = classpath
    Assertions.assume(cp.isDefined,
      "ASYNCPIPE_KAFKA_CLASSPATH is not set: no Kafka broker to start (run the tests through ./mill, which sets it)")
    cp.get

  /** The test JVM's own `java` (JDK 25 under ./mill), for the broker and the tools. */
  val javaCommand: String = ProcessHandle.current.info.command.orElse(System.getProperty("java.home") + "/bin/java")

  /** A start's readiness (measured: about 3 s; 5 s after a kill, the dead broker's session expiring). */
  val ReadyBound: FiniteDuration = 60.seconds
  /** A stop's SIGTERM, and a kill's SIGKILL, before giving up. */
  val StopBound: FiniteDuration = 30.seconds
  /** Each client operation (produce, consume, admin requests). */
  val OpBound: FiniteDuration = 30.seconds
  /** A tool run, by default. */
  val ToolBound: FiniteDuration = 60.seconds

  /** The broker's and the tools' JVM flags: asyncpipe.bench.KafkaRig's (a 128 MiB heap, measured at
    * about 170 MB of RSS; slf4j-simple at INFO with the time, so that a broker that fails says why).
    */
  private val BrokerJvmFlags: Seq[String] = asyncpipe.bench.KafkaRig.brokerJvmFlags()
  private val ToolJvmFlags: Seq[String] = asyncpipe.bench.KafkaRig.toolJvmFlags

  /** Starts a broker in a fresh temporary directory: free ports, server.properties, storage
    * formatted with a random cluster id, the broker started and waited for. Skips the test (an
    * assumption) without ASYNCPIPE_KAFKA_CLASSPATH.
    */
  def start()(using munit.Location): KafkaBroker =
    val cp = requireClasspath()
    val dir = os.temp.dir(prefix = "asyncpipe-kafka-", deleteOnExit = false)
    try
      val (port, controllerPort) = twoFreePorts()
      val broker = new KafkaBroker(dir, port, controllerPort, Uuid.randomUuid.toString, cp)
      os.write(broker.configFile, serverProperties(broker))
      val format = runTool(dir / "format", cp, "kafka.tools.StorageTool",
        Seq("format", "--cluster-id", broker.clusterId, "--config", broker.configFile.toString), Array.emptyByteArray, ToolBound)
      if format.exitCode != 0 then
        fail(s"kafka.tools.StorageTool format exited with ${format.exitCode}:\n${format.outText}${format.err}")
      installHook
      try broker.synchronized(broker.launch())
      catch
        case e: Throwable =>
          broker.close()
          throw e
      broker
    catch
      case e: Throwable =>
        os.remove.all(dir)
        throw e

  private def serverProperties(b: KafkaBroker): String =
    asyncpipe.bench.KafkaRig.serverProperties(b.port, b.controllerPort, b.dataDir.toString)

  /** Two distinct free ports on 127.0.0.1 (both held open while choosing, so they differ). Another
    * process may take one before the broker binds it: unlikely, and the broker then fails to start.
    */
  private def twoFreePorts(): (Int, Int) =
    val loopback = InetAddress.getLoopbackAddress
    Using.resources(ServerSocket(0, 1, loopback), ServerSocket(0, 1, loopback))((a, b) => (a.getLocalPort, b.getLocalPort))

  private def runTool(run: os.Path, classpath: String, mainClass: String, args: Seq[String], stdin: Array[Byte],
      timeout: FiniteDuration): ToolResult =
    os.makeDir.all(run)
    os.write.over(run / "stdin", stdin)
    val command = Seq(javaCommand) ++ ToolJvmFlags ++ Seq("-cp", classpath, mainClass) ++ args
    val p = ProcessBuilder(command*)
      .directory(run.toIO)
      .redirectInput((run / "stdin").toIO)
      .redirectOutput((run / "stdout").toIO)
      .redirectError((run / "stderr").toIO)
      .start()
    tools.add(p)
    try
      if !p.waitFor(timeout.toMillis, TimeUnit.MILLISECONDS) then
        p.destroyForcibly()
        p.waitFor(StopBound.toMillis, TimeUnit.MILLISECONDS)
        fail(s"$mainClass ${args.mkString(" ")}: still running after $timeout, killed; its stdout:\n" +
          s"${os.read(run / "stdout")}\nits stderr:\n${os.read(run / "stderr")}")
      ToolResult(p.exitValue, os.read.bytes(run / "stdout"), os.read(run / "stderr"))
    finally tools.remove(p)

  // -----------------------------------------------------------------------------------------------
  // What a dying test JVM stops

  private val live = ConcurrentHashMap.newKeySet[KafkaBroker]()
  private val tools = ConcurrentHashMap.newKeySet[Process]()

  /** Registered once, on the first start: at exit, every tool still running is killed, and every
    * broker not closed is stopped (SIGTERM, then SIGKILL after 10 s) and its directory deleted. It
    * takes no lock: a test thread may hold one while the JVM exits.
    */
  private lazy val installHook: Unit =
    Runtime.getRuntime.addShutdownHook(Thread.ofPlatform().name("asyncpipe-kafka-broker-reaper").unstarted { () =>
      tools.forEach(_.destroyForcibly())
      val running = live.asScala.toSeq
      running.foreach(b => Option(b.process).foreach(_.nn.destroy()))
      running.foreach { b =>
        Option(b.process).foreach { p =>
          if !p.nn.waitFor(10, TimeUnit.SECONDS) then p.nn.destroyForcibly()
        }
        try os.remove.all(b.dir)
        catch case _: Throwable => ()
      }
    })

  // -----------------------------------------------------------------------------------------------
  // Waiting on Kafka's futures

  private def await[T](what: String, f: KafkaFuture[T]): T = awaitJava(what, f)

  private def awaitJava[T](what: String, f: JFuture[T]): T =
    try f.get(OpBound.toMillis, TimeUnit.MILLISECONDS)
    catch
      case e: ExecutionException => fail(s"$what: ${e.getCause}", e.getCause)
      case _: TimeoutException   => fail(s"$what: no answer within $OpBound")

  private def causes(e: Throwable): Iterator[Throwable] = Iterator.iterate(e)(_.getCause).takeWhile(_ != null)

  private def fail(message: String, cause: Throwable | Null = null): Nothing = Assertions.fail(message, cause)

/** A suite with one broker for all its tests: started in `beforeAll`, closed in `afterAll`. Tests
  * share it: each should use topics and groups of its own. Without ASYNCPIPE_KAFKA_CLASSPATH no
  * broker starts and each test is skipped when it asks for `broker` (an assumption in `beforeAll`
  * would not do: munit 1.2.4 reports it as a failure of the suite).
  */
trait WithKafkaBroker extends munit.FunSuite:
  @volatile private var started: KafkaBroker | Null = null

  def broker(using munit.Location): KafkaBroker = started match
    case b: KafkaBroker => b
    case null =>
      KafkaBroker.requireClasspath()
      Assertions.fail("no Kafka broker: beforeAll did not start one")

  override def beforeAll(): Unit =
    super.beforeAll()
    if KafkaBroker.classpath.isDefined then started = KafkaBroker.start()

  override def afterAll(): Unit =
    try
      started match
        case null          => ()
        case b: KafkaBroker => b.close()
    finally
      started = null
      super.afterAll()
