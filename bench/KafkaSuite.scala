package asyncpipe.bench

import java.nio.file.{Files, Path}

/** `kafka:` against Kafka's own command-line clients and kcat, on a broker this suite starts
  * itself ([[KafkaRig]]: needs ASYNCPIPE_KAFKA_CLASSPATH, which `./mill` sets for the tests; without
  * it the suite measures nothing and says so). Whole processes, timed from start to exit (a JVM's
  * start is in each Java tool's time as in asyncpipe's), each side in turn within a round, after a
  * warm-up round:
  *   - produce 1,000,000 records of 100 bytes from a file (acks=all, idempotent, linger 5 ms,
  *     batches up to 1 MiB, no compression) into a topic made before the clock starts (auto-creation
  *     cost kcat a second of waiting for metadata): `asyncpipe file:IN kafka:B/T` against
  *     `kafka-console-producer` with the same settings, and `kcat -P` where installed;
  *   - consume them to /dev/null with a consumer group: `asyncpipe kafka:B/T,group=G,until=end`
  *     against `kafka-console-consumer --group` (`--max-messages N`), and `kcat -C -e` (without a
  *     group: kcat ends at the partition's end only so) where installed;
  *   - the start-up of a `kafka:` source to its first record, the broker up (`--count 1`).
  */
object KafkaSuite extends Suite:
  import Processes.{asyncpipeKafka as asyncpipe, onPath, q}
  val name = "kafka"
  val description = "kafka: produce and consume (group) 1M x 100 B vs Kafka's console producer/consumer and kcat; start-up to a first record"

  def run(h: Harness): SuiteResult = KafkaRig.classpath match
    case None =>
      h.progress("kafka: no broker (ASYNCPIPE_KAFKA_CLASSPATH is not set: ./mill show kafkaBroker.runClasspath gives one)")
      SuiteResult(name, Nil, Nil)
    case Some(cp) =>
      val dir = PipelineSuite.Workspace.create()
      try
        h.progress("kafka: starting a broker")
        val broker = KafkaRig.Broker(dir, cp, heap = "512m")
        try measure(h, dir, cp, broker)
        finally broker.stop()
      finally deleteTree(dir)

  /** `dir` and everything in it (the broker's data is a tree). */
  private def deleteTree(dir: Path): Unit =
    val all = Files.walk(dir)
    try all.sorted(java.util.Comparator.reverseOrder()).forEach(p => Files.deleteIfExists(p))
    finally all.close()

  private def measure(h: Harness, dir: Path, cp: String, broker: KafkaRig.Broker): SuiteResult =
    val b = broker.bootstrap
    val n = h.plan.ops(1_000_000)
    val in = dir.resolve("records.txt")
    Files.writeString(in, (0 until n).map(i => f"$i%010d" + "x" * 89 + "\n").mkString) // 100 bytes and a newline each
    val kcat = onPath("kcat")
    val batch = _root_.asyncpipe.cli.stages.KafkaOutput.BatchSize
    def tool(main: String, args: String*) = KafkaRig.tool(cp, main, args*).map(q).mkString(" ")
    val producers: Seq[(String, String => String)] = Seq(
      "asyncpipe file:IN kafka:B/T" -> ((t: String) => s"$asyncpipe file:${q(in)} kafka:$b/$t"),
      "kafka-console-producer (acks=all, linger.ms=5, idempotent)" -> ((t: String) =>
        tool("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", b, "--topic", t, "--command-property", "acks=all",
          "--command-property", "linger.ms=5", "--command-property", "enable.idempotence=true",
          "--command-property", s"batch.size=$batch") + s" < ${q(in)}")
    ) ++ Option.when(kcat)("kcat -P (acks=all, linger.ms=5, idempotent)" -> ((t: String) =>
      s"kcat -P -b $b -t $t -X acks=all -X linger.ms=5 -X enable.idempotence=true -X batch.size=$batch < ${q(in)}"))
    // One topic to consume, written once; each consumer a group of its own each round.
    broker.createTopics(Seq("consumed"))
    Processes.shell(s"$asyncpipe file:${q(in)} kafka:$b/consumed")
    val consumers: Seq[(String, String => String)] = Seq(
      "asyncpipe kafka:B/T,group=G,until=end file:/dev/null" -> ((g: String) => s"$asyncpipe kafka:$b/consumed,group=$g,until=end file:/dev/null"),
      "kafka-console-consumer --group G --from-beginning --max-messages N" -> ((g: String) =>
        tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", b, "--topic", "consumed", "--group", g,
          "--from-beginning", "--max-messages", n.toString) + " > /dev/null")
    ) ++ Option.when(kcat)("kcat -C -e -o beginning (no group)" -> ((_: String) =>
      s"kcat -C -b $b -t consumed -e -o beginning -q > /dev/null"))
    val sides = producers ++ consumers
    val rates = sides.map(_ => Seq.newBuilder[Double])
    // A warm-up round, then the plan's iterations, at most three (each round starts six JVMs).
    val rounds = 1 + math.min(h.plan.iterations, 3)
    def topic(i: Int, round: Int) = s"p$i-$round"
    broker.createTopics(for round <- 1 to rounds; i <- producers.indices yield topic(i, round))
    for round <- 1 to rounds do
      h.progress(s"kafka: round $round of $rounds${if round == 1 then " (warm-up)" else ""}")
      for ((label, command), i) <- sides.zipWithIndex do
        val t0 = System.nanoTime()
        Processes.shell(command(if i < producers.size then topic(i, round) else s"g$i-$round"))
        val seconds = (System.nanoTime() - t0) / 1e9
        if round > 1 then rates(i) += n / seconds
    def m(i: Int) = Measurement(sides(i)._1, rates(i).result(), None, 0, "records/s")
    val p = producers.size
    val comparisons = (1 until p).map(i => Comparison(m(0), m(i), Some(Target.atLeast(1.0)))) ++
      (p + 1 until sides.size).map(i => Comparison(m(p), m(i), Some(Target.atLeast(1.0))))
    h.progress("kafka: start-up to a first record")
    val startups = (1 to 5).map { _ =>
      val t0 = System.nanoTime()
      Processes.shell(s"$asyncpipe --count 1 kafka:$b/consumed -")
      (System.nanoTime() - t0) / 1e9
    }
    SuiteResult(name, comparisons, Seq(
      Figure("a kafka: source's start-up to its first record (the broker up), median of 5", startups.sorted.apply(2), "s", Some(Target.below(1.5)))
    ))
