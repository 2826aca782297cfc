package asyncpipe.cli.kafka

import asyncpipe.cli.Launch
import asyncpipe.cli.command.ExitCode
import asyncpipe.cli.stages.FollowTest
import asyncpipe.async.{Support, Watchdog}
import java.lang.ProcessBuilder.Redirect
import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.TimeUnit
import scala.concurrent.duration.{DurationInt, FiniteDuration}
import scala.util.Random

/** `kafka:` end to end: the built tool as real processes (the launcher's JVM flags) against a real
  * broker (KRaft, one node: [[KafkaBroker]]), its records checked with the official client and with
  * Kafka's own console tools. Skipped without ASYNCPIPE_KAFKA_CLASSPATH (run through ./mill).
  */
class KafkaE2ETest extends munit.FunSuite with WithKafkaBroker with Watchdog:
  override def watchdog: FiniteDuration = 120.seconds
  override def munitTimeout = watchdog + 10.seconds

  private def ap(args: String*): Seq[String] = FollowTest.follower(args*)
  private def text(s: String): Array[Byte] = s.getBytes(UTF_8)
  private def str(b: Array[Byte] | Null): String = if b == null then "<null>" else String(b, UTF_8)

  /** Runs the tool to its end: exit status, stdout bytes, stderr text. */
  private def run(args: Seq[String], stdin: Array[Byte] = Array.emptyByteArray, env: Map[String, String] = Map.empty): (Int, Array[Byte], String) =
    val r = os.proc(ap(args*)).call(check = false, stdin = stdin, stderr = os.Pipe, env = env, timeout = 60_000)
    (r.exitCode, r.out.bytes, r.err.text())

  private val dir = FunFixture[os.Path](_ => os.temp.dir(prefix = "asyncpipe-kafka-"), os.remove.all(_))

  private def k(topic: String, options: String*): String = s"kafka:${broker.bootstrap}/$topic${options.map("," + _).mkString}"

  dir.test("100,000 lines into a topic and back, byte for byte; Kafka's console consumer reads the same records"): d =>
    val lines = (1 to 100_000).map(i => s"line $i ${"x" * (i % 37)}\n").mkString
    val in = d / "in.txt"
    os.write(in, lines)
    val (produced, _, perr) = run(Seq(s"file:$in", k("lines")))
    assertEquals((produced, perr), (0, ""))
    val records = broker.consumeAll("lines")
    assertEquals(records.size, 100_000)
    assertEquals(str(records(41).value), "line 42 " + "x" * 5)
    val out = d / "out.txt"
    val (consumed, _, cerr) = run(Seq(k("lines", "until=end"), s"file:$out"))
    assertEquals((consumed, cerr), (0, ""))
    assert(os.read(out) == lines, "the lines read back differ from those written")
    val console = broker.tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", broker.bootstrap,
      "--topic", "lines", "--from-beginning", "--max-messages", "100000", "--timeout-ms", "30000")
    assertEquals(console.exitCode, 0, console.err)
    assert(console.outText == lines, "Kafka's console consumer read other records")

  dir.test("--frame len: binary values (any byte, newlines, empty ones) round trip exactly"): d =>
    val random = Random(7)
    val values = (0 until 5_000).map(i => Array.tabulate[Byte](if i % 100 == 0 then 0 else random.nextInt(400))(_ => random.nextInt(256).toByte))
    val wire = java.io.ByteArrayOutputStream()
    values.foreach { v =>
      wire.write(java.nio.ByteBuffer.allocate(4).putInt(v.length).array)
      wire.write(v)
    }
    val (produced, _, perr) = run(Seq("--frame", "len", "-", k("binary")), stdin = wire.toByteArray)
    assertEquals((produced, perr), (0, ""))
    assertEquals(broker.consumeAll("binary").map(r => r.value.toSeq), values.map(_.toSeq))
    val (consumed, out, cerr) = run(Seq("--frame", "len", k("binary", "until=end"), "-"))
    assertEquals((consumed, cerr), (0, ""))
    assert(java.util.Arrays.equals(out, wire.toByteArray), "the len stream read back differs")

  test("until=end over 3 partitions ends by itself with every record once, each partition in order; partition= reads one"):
    broker.createTopic("three", partitions = 3)
    for p <- 0 until 3 do broker.produce("three", (0 until 500).map(i => text(s"p$p-$i")), partition = Some(p))
    val (status, out, err) = run(Seq(k("three", "until=end"), "-"))
    assertEquals((status, err), (0, ""))
    val got = str(out).linesIterator.toSeq
    assertEquals(got.size, 1500)
    for p <- 0 until 3 do assertEquals(got.filter(_.startsWith(s"p$p-")), (0 until 500).map(i => s"p$p-$i"))
    val (one, only, _) = run(Seq(k("three", "until=end", "partition=1"), "-"))
    assertEquals((one, str(only)), (0, (0 until 500).map(i => s"p1-$i\n").mkString))

  test("keys: a source writes KEY<sep>VALUE (an empty key for none); a sink with keysep= splits each line at its first separator"):
    val (status, _, err) = run(Seq("-", k("keyed", "keysep=:")), stdin = text("a:1\nb:2:3\nnokey\n:empty\n"))
    assertEquals((status, err), (0, ""))
    val records = broker.consumeAll("keyed")
    assertEquals(records.map(r => (str(r.key), str(r.value))), Seq(("a", "1"), ("b", "2:3"), ("<null>", "nokey"), ("", "empty")))
    val (read, out, rerr) = run(Seq(k("keyed", "until=end", "keys"), "-"))
    assertEquals((read, rerr), (0, ""))
    assertEquals(str(out), "a\t1\nb\t2:3\n\tnokey\n\tempty\n")
    val (fixed, _, ferr) = run(Seq("-", k("fixed", "key=tenant-7")), stdin = text("x\ny\n"))
    assertEquals((fixed, ferr), (0, ""))
    assertEquals(broker.consumeAll("fixed").map(r => (str(r.key), str(r.value))), Seq(("tenant-7", "x"), ("tenant-7", "y")))

  test("from=: -N takes each partition's last N, OFFSET starts there, @TIME at the first record at or after it, end reads nothing old"):
    broker.produce("from", (0 until 10).map(i => text(s"old-$i")))
    val cut = broker.consumeAll("from").map(_.timestamp).max + 1
    // Records made after `cut` (the producer stamps its clock, which has passed it by now).
    Support.eventually("the clock to pass the last old record") { System.currentTimeMillis() > cut }
    broker.produce("from", (0 until 5).map(i => text(s"new-$i")))
    def read(options: String*): String =
      val (status, out, err) = run(Seq(k("from", ("until=end" +: options)*), "-"))
      assertEquals((status, err), (0, ""), options.mkString(","))
      str(out)
    assertEquals(read("from=-3"), "new-2\nnew-3\nnew-4\n")
    assertEquals(read("from=8"), "old-8\nold-9\n" + (0 until 5).map(i => s"new-$i\n").mkString)
    assertEquals(read(s"from=@$cut"), (0 until 5).map(i => s"new-$i\n").mkString)
    assertEquals(read("from=end"), "")
    val iso = java.time.Instant.ofEpochMilli(cut).toString
    assertEquals(read(s"from=@$iso"), (0 until 5).map(i => s"new-$i\n").mkString)

  test("--count N ends a source after N records; Kafka's console producer writes what asyncpipe reads"):
    val produced = broker.tool("org.apache.kafka.tools.ConsoleProducer", Seq("--bootstrap-server", broker.bootstrap, "--topic", "console"),
      text("one\ntwo\nthree\n"))
    assertEquals(produced.exitCode, 0, produced.err)
    val (status, out, err) = run(Seq("--count", "2", k("console"), "-"))
    assertEquals((status, str(out), err), (0, "one\ntwo\n", ""))

  test("a source of a topic that does not exist: exit 1 naming it and the brokers; the topic is not created"):
    val (status, _, err) = run(Seq(k("no-such-topic", "connect-timeout=5s"), "-"))
    assertEquals(status, ExitCode.Runtime, err)
    assert(err.contains(s"no topic 'no-such-topic' at ${broker.bootstrap}"), err)
    assert(!broker.admin.listTopics().names().get().contains("no-such-topic"), "the source created the topic")

  test("kcat, where installed: what kcat -P writes asyncpipe reads, and what asyncpipe writes kcat -C reads, keys and values"):
    assume(sys.env.getOrElse("PATH", "").split(':').exists(d => java.nio.file.Files.isExecutable(java.nio.file.Path.of(d, "kcat"))),
      "kcat is not installed (apt-get install kcat)")
    broker.createTopic("kcat-in")
    val lines = (1 to 1000).map(i => s"k$i:value $i\n").mkString
    val produced = os.proc("kcat", "-P", "-b", broker.bootstrap, "-t", "kcat-in", "-K", ":").call(check = false, stdin = lines, stderr = os.Pipe)
    assertEquals(produced.exitCode, 0, produced.err.text())
    val (status, out, err) = run(Seq(k("kcat-in", "until=end", "keys", "keysep=:"), "-"))
    assertEquals((status, err), (0, ""))
    assertEquals(str(out), lines)
    val (wrote, _, werr) = run(Seq("-", k("kcat-out", "keysep=:")), stdin = text(lines))
    assertEquals((wrote, werr), (0, ""))
    val consumed = os.proc("kcat", "-C", "-b", broker.bootstrap, "-t", "kcat-out", "-e", "-q", "-K", ":").call(check = false, stderr = os.Pipe, timeout = 60_000)
    assertEquals(consumed.exitCode, 0, consumed.err.text())
    assertEquals(consumed.out.text(), lines)

  test("the brokers from ASYNCPIPE_KAFKA_BROKERS when the token names none"):
    val (status, _, err) = run(Seq("-", "kafka:envtopic"), stdin = text("via env\n"), env = Map("ASYNCPIPE_KAFKA_BROKERS" -> broker.bootstrap))
    assertEquals((status, err), (0, ""))
    assertEquals(broker.consumeAll("envtopic").map(r => str(r.value)), Seq("via env"))

  test("no broker answers: exit 1 within connect-timeout, naming the brokers and the timeout, as a source and as a sink"):
    val dead = { val s = java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress); try s.getLocalPort finally s.close() }
    for args <- Seq(Seq(s"kafka:127.0.0.1:$dead/t,connect-timeout=1s", "-"), Seq("-", s"kafka:127.0.0.1:$dead/t,connect-timeout=1s")) do
      val (status, _, err) = run(args, stdin = text("x\n"))
      assertEquals(status, ExitCode.Runtime, err)
      assert(err.contains(s"no answer from the brokers (127.0.0.1:$dead) within 1s (connect-timeout)"), err)

  test("a malformed address is a usage error (exit 2) naming the token and the rule"):
    val cases = Seq(
      s"kafka:${"127.0.0.1:9092"}/bad topic" -> "is not a topic name",
      "kafka:127.0.0.1:9092/" -> "the topic is missing",
      "kafka:/t" -> "the brokers before '/' are missing",
      "kafka:127.0.0.1:9092/t,from=yesterday" -> "none of beginning, end",
      "kafka:127.0.0.1:9092/t,acks=2" -> "'2' is not one of all, 1, 0",
      "kafka:127.0.0.1:9092/t,grup=g" -> "unknown kafka option 'grup'"
    )
    for (token, says) <- cases do
      val (status, _, err) = run(Seq(token, "-"), env = Map("ASYNCPIPE_KAFKA_BROKERS" -> ""))
      assertEquals(status, ExitCode.Usage, s"$token: $err")
      assert(err.contains(token) && err.contains(says), s"$token: expected '$says' in $err")

  test("no class of the Kafka client is loaded by --version or by a file copy (-verbose:class)"):
    for args <- Seq(Seq("--version"), Seq("file:/dev/null", "file:/dev/null")) do
      val cmd = ap(args*)
      val r = os.proc(cmd.head +: "-verbose:class" +: cmd.tail).call(check = false, stderr = os.Pipe)
      assertEquals(r.exitCode, 0, r.err.text())
      val loaded = r.out.text().linesIterator.filter(l => l.contains("org.apache.kafka") || l.contains("org.slf4j")).toSeq
      assertEquals(loaded, Nil, args.mkString(" "))

  test("SIGTERM on a sink fed without end: exit 143, every line it took is in the topic once, in order"):
    broker.createTopic("term")
    val p = ProcessBuilder(ap("-", k("term"))*).redirectError(Redirect.PIPE).start()
    val in = p.getOutputStream
    (1 to 20_000).foreach(i => in.write(text(s"t$i\n")))
    in.flush()
    Support.eventually("the first records in the topic", bound = 30_000) { broker.endOffsets("term").values.sum > 0 }
    Launch.assertDeliverable("TERM")
    p.destroy() // SIGTERM
    assert(p.waitFor(30, TimeUnit.SECONDS), "the sink did not end after SIGTERM")
    assertEquals(p.exitValue, 143, String(p.getErrorStream.readAllBytes, UTF_8))
    val got = broker.consumeAll("term").map(r => str(r.value))
    assertEquals(got, (1 to got.size).map(i => s"t$i"))

  // -----------------------------------------------------------------------------------------------
  // Consumer groups: at least once

  test("group=: until=end reads everything and commits the end; the next run starts there (from=stored) and reads nothing"):
    broker.createTopic("g-basic", partitions = 2)
    for p <- 0 until 2 do broker.produce("g-basic", (0 until 300).map(i => text(s"p$p-$i")), partition = Some(p))
    val (status, out, err) = run(Seq(k("g-basic", "group=g1", "until=end"), "-"))
    assertEquals((status, err), (0, ""))
    assertEquals(str(out).linesIterator.size, 600)
    assertEquals(broker.committed("g1", "g-basic"), Map(0 -> 300L, 1 -> 300L))
    broker.produce("g-basic", Seq(text("later")), partition = Some(1))
    broker.produce("g-basic", Seq(text("not read")), partition = Some(0))
    val (counted, _, said) = run(Seq("--stats", k("g-basic", "group=g1", "partition=1", "until=end"), "file:/dev/null"))
    assertEquals(counted, 0, said)
    assert(said.contains("group g1: lag 0 at the end (partition 1: 0)"), said)
    val (status1, _, said1) = run(Seq("--stats", k("g-basic", "group=g-other", "partition=0", "from=end", "until=end"), "file:/dev/null"))
    assertEquals(status1, 0, said1)
    assert(said1.contains("group g-other: lag 301 at the end (partition 0: 301)"), said1)
    val (again, more, aerr) = run(Seq(k("g-basic", "group=g1", "until=end"), "-"))
    assertEquals((again, str(more), aerr), (0, "not read\n", ""))
    assertEquals(broker.committed("g1", "g-basic"), Map(0 -> 301L, 1 -> 301L))

  test("--stats-json: a sink's acknowledged records per partition and a group source's records and lag per partition, as the broker has them"):
    broker.createTopic("counted", partitions = 3)
    val lines = (1 to 3_000).map(i => s"k${i % 17}:v$i\n").mkString
    def kafkaRecord(err: String): ujson.Value =
      val records = err.linesIterator.map(ujson.read(_)).toSeq // every line of stderr is JSON
      records.find(_.obj.contains("kafka")).getOrElse(fail(s"no kafka record in $err"))("kafka")
    def perPartition(v: ujson.Value, field: String): Map[Int, Long] =
      v.arr.map(p => p("partition").num.toInt -> p(field).num.toLong).toMap
    val (produced, _, perr) = run(Seq("--stats-json", "-", k("counted", "keysep=:")), stdin = text(lines))
    assertEquals(produced, 0, perr)
    val sink = kafkaRecord(perr)
    val ends = broker.endOffsets("counted")
    assertEquals(ends.values.sum, 3_000L)
    assert(ends.values.count(_ > 0) > 1, s"17 keys all went to one partition: $ends")
    assertEquals((sink("acknowledged").num.toLong, sink("failed").num.toLong, sink("unacknowledged").num.toLong), (3_000L, 0L, 0L))
    assertEquals(perPartition(sink("partitions"), "records"), ends.filter(_._2 > 0))
    val (consumed, _, cerr) = run(Seq("--stats-json", k("counted", "group=counter", "until=end"), "file:/dev/null"))
    assertEquals(consumed, 0, cerr)
    val source = kafkaRecord(cerr)
    assertEquals(source("records").num.toLong, 3_000L)
    assertEquals(perPartition(source("partitions"), "records"), ends)
    assertEquals((source("group").str, source("lag").num.toLong), ("counter", 0L))
    assertEquals(perPartition(source("lag_by_partition"), "lag"), ends.map((p, _) => p -> 0L))

  test("group=: SIGTERM commits exactly what was written (the committed offset is the number of lines in the file)"):
    broker.createTopic("g-term")
    broker.produce("g-term", (0 until 200_000).map(i => text(f"r$i%06d")))
    val out = os.temp(prefix = "asyncpipe-kafka-term-")
    val p = ProcessBuilder(ap(k("g-term", "group=g2"), s"file:$out")*).redirectError(Redirect.PIPE).start()
    Support.eventually("the first lines in the file", bound = 30_000) { os.size(out) > 0 }
    Launch.assertDeliverable("TERM")
    p.destroy() // SIGTERM
    assert(p.waitFor(30, TimeUnit.SECONDS), "the source did not end after SIGTERM")
    assertEquals(p.exitValue, 143, String(p.getErrorStream.readAllBytes, UTF_8))
    val lines = os.read.lines(out)
    assertEquals(lines, (0 until lines.size).map(i => f"r$i%06d"))
    assertEquals(broker.committed("g2", "g-term"), Map(0 -> lines.size.toLong))

  test("group=: a source killed with SIGKILL mid-stream loses nothing: the restarted one reads on from the last commit"):
    broker.createTopic("g-kill")
    val total = 300_000
    broker.produce("g-kill", (0 until total).map(i => text(f"k$i%06d")))
    val first = os.temp(prefix = "asyncpipe-kafka-kill-")
    // Slowed (2.4 MB at 200 kB/s, 12 s), so that the kill comes in the middle even on a loaded
    // machine, where the start, the group's join and the first commit took more than 5 s.
    val p = ProcessBuilder(ap("--rate-limit", "200K", k("g-kill", "group=g3"), s"file:$first")*).redirectError(Redirect.DISCARD).start()
    Support.eventually("some lines in the file and a first commit", bound = 30_000) { os.size(first) > 0 && broker.committed("g3", "g-kill").nonEmpty }
    p.destroyForcibly() // SIGKILL
    assert(p.waitFor(30, TimeUnit.SECONDS))
    val before = os.read.lines(first)
    val committed = broker.committed("g3", "g-kill")(0)
    assert(committed <= before.size, s"committed $committed, but only ${before.size} lines were written")
    val (status, out, err) = run(Seq(k("g-kill", "group=g3", "until=end"), "-"))
    assertEquals((status, err), (0, ""))
    val after = str(out).linesIterator.toSeq
    assert(committed < total, s"the first run committed all $total records before it was killed: slow it down")
    assertEquals(after.headOption, Some(f"k$committed%06d"))
    assertEquals(after.last, f"k${total - 1}%06d")
    assertEquals((before.toSet ++ after).size, total)

  test("group= in run, killed with SIGKILL mid-stream and restarted: both outputs end up with every record (commits made while it ran named only what both had)"):
    broker.createTopic("rk-in")
    broker.createTopic("rk-out")
    // Records arrive while the pipeline runs, 10,000 at a time, until it has been killed: its
    // commits (about every second) fall in the middle of what the topic will hold.
    val killed = java.util.concurrent.atomic.AtomicBoolean(false)
    val produced = java.util.concurrent.atomic.AtomicInteger(0)
    def batch(): Unit =
      val from = produced.get
      broker.produce("rk-in", (from until from + 10_000).map(i => text(f"q$i%07d")))
      produced.addAndGet(10_000)
    val producing = Thread.ofPlatform().start { () =>
      while !killed.get || produced.get < 30_000 do
        batch()
        if !killed.get then java.util.concurrent.locks.LockSupport.parkNanos(300_000_000L)
      batch() // after the kill: what the killed run cannot have committed
    }
    val audit1 = os.temp(prefix = "asyncpipe-kafka-rk-")
    val p = ProcessBuilder(ap("run", s"${k("rk-in", "group=g-rk")} | mux --out file:$audit1 | ${k("rk-out")}")*)
      .redirectError(Redirect.DISCARD).start()
    Support.eventually("a commit while the pipeline runs", bound = 60_000) { broker.committed("g-rk", "rk-in").getOrElse(0, 0L) > 0 }
    p.destroyForcibly() // SIGKILL
    killed.set(true)
    assert(p.waitFor(30, TimeUnit.SECONDS))
    producing.join()
    val total = produced.get
    val committed = broker.committed("g-rk", "rk-in")(0)
    val first = os.read.lines(audit1)
    assert(committed <= first.size, s"committed $committed, but the audit had only ${first.size} lines")
    assert(committed < total, s"the first run committed all $total records before it was killed")
    val audit2 = os.temp(prefix = "asyncpipe-kafka-rk-")
    val (status, _, err) = run(Seq("run", s"${k("rk-in", "group=g-rk", "until=end")} | mux --out file:$audit2 | ${k("rk-out")}"))
    assertEquals((status, err), (0, ""))
    val second = os.read.lines(audit2)
    assertEquals(second.headOption, Some(f"q$committed%07d"), "the restart did not begin at the commit")
    val all = (0 until total).map(i => f"q$i%07d").toSet
    assertEquals((first ++ second).toSet, all, "the audit lost records")
    assertEquals(broker.consumeAll("rk-out").map(r => str(r.value)).toSet, all, "the output topic lost records")

  test("group= in run: 'kafka:in,group | mux --out file:AUDIT | kafka:out' commits the input only once both outputs have every record"):
    broker.createTopic("r-in")
    broker.produce("r-in", (0 until 5_000).map(i => text(s"m$i")))
    val audit = os.temp(prefix = "asyncpipe-kafka-audit-")
    val (status, _, err) = run(Seq("run", s"${k("r-in", "group=g4", "until=end")} | mux --out file:$audit | ${k("r-out")}"))
    assertEquals((status, err), (0, ""))
    assertEquals(os.read.lines(audit), (0 until 5_000).map(i => s"m$i"))
    assertEquals(broker.consumeAll("r-out").map(r => str(r.value)), (0 until 5_000).map(i => s"m$i"))
    assertEquals(broker.committed("g4", "r-in"), Map(0 -> 5_000L))

  test("group= in run: while 'kafka:in,group | mux --out file:AUDIT | kafka:out' runs (no end), its commits follow what both outputs have"):
    broker.createTopic("live-in")
    broker.createTopic("live-out")
    broker.produce("live-in", (0 until 20_000).map(i => text(s"l$i")))
    val audit = os.temp(prefix = "asyncpipe-kafka-live-")
    val p = ProcessBuilder(ap("run", s"${k("live-in", "group=g-live")} | mux --out file:$audit | ${k("live-out")}")*)
      .redirectError(Redirect.DISCARD).start()
    /** Until the group's commit reaches `n`, checking on the way that it never names more than
      * either output has (read after the commit, so each output's count can only be larger).
      */
    def committedUpTo(n: Long): Unit =
      Support.eventually(s"a commit of $n while the pipeline runs", bound = 60_000) {
        val committed = broker.committed("g-live", "live-in").getOrElse(0, 0L)
        val inAudit = os.read.lines(audit).size.toLong
        // Listing offsets right after the topic was made can fail for a moment: asked again.
        scala.util.Try(broker.endOffsets("live-out").values.sum).toOption.exists { inTopic =>
          assert(committed <= inAudit && committed <= inTopic, s"committed $committed; the audit has $inAudit, the topic $inTopic")
          committed == n
        }
      }
      assert(p.isAlive, "the pipeline ended by itself")
    try
      committedUpTo(20_000)
      broker.produce("live-in", (20_000 until 25_000).map(i => text(s"l$i")))
      committedUpTo(25_000)
      assertEquals(os.read.lines(audit), (0 until 25_000).map(i => s"l$i"))
    finally
      p.destroy()
      p.waitFor(30, TimeUnit.SECONDS)

  test("group= in run with a slow next stage: nothing is committed that the outputs have not written (SIGKILL, then the pipe drained)"):
    broker.createTopic("r-stuck")
    // 20 MB: far more than the pipe (grown to 1 MiB) and the channel hold.
    broker.produce("r-stuck", (0 until 100_000).map(i => text(f"s$i%06d" + "y" * 193)))
    // Its stdout a FIFO this test reads: a kill does not close it (as it would the process's stream).
    val fifo = os.temp.dir(prefix = "asyncpipe-kafka-fifo-") / "out"
    os.proc("mkfifo", fifo).call()
    def q(s: String) = "'" + s.replace("'", "'\\''") + "'"
    val command = ap("run", s"${k("r-stuck", "group=g5")} | -").map(q).mkString(" ")
    val p = ProcessBuilder("sh", "-c", s"exec $command > ${q(fifo.toString)}").redirectError(Redirect.DISCARD).start()
    val lines = java.io.BufferedReader(java.io.InputStreamReader(java.io.FileInputStream(fifo.toIO), UTF_8))
    // Read slowly (about 10,000 lines a second) for three of stage 1's one-second commit periods:
    // stage 2 waits on this reader, stage 1 keeps the channel between them full, and a commit may
    // only name what reached stage 2's output, never what waits in the channel.
    val until = System.nanoTime() + 3_000_000_000L
    var written = 0L // what reached stdout: read, then what is still in the pipe
    while System.nanoTime() < until && lines.readLine() != null do
      written += 1
      if written % 10 == 0 then java.util.concurrent.locks.LockSupport.parkNanos(1_000_000)
    p.destroyForcibly() // SIGKILL
    assert(p.waitFor(30, TimeUnit.SECONDS))
    while lines.readLine() != null do written += 1
    val committed = broker.committed("g5", "r-stuck").getOrElse(0, 0L)
    assert(committed <= written, s"committed $committed, but only $written records reached the output")

  test("a sink whose broker stops mid-stream: exit 1 with how many records were not acknowledged (the broker then restarts)"):
    broker.createTopic("stopped")
    val p = ProcessBuilder(ap("--stats", "-", k("stopped", "connect-timeout=2s"))*).redirectError(Redirect.PIPE).start()
    val in = p.getOutputStream
    (1 to 100).foreach(i => in.write(text(s"before $i\n")))
    in.flush()
    Support.eventually("the first 100 records in the topic", bound = 30_000) { broker.endOffsets("stopped").values.sum == 100 }
    broker.stop()
    try
      (1 to 10).foreach(i => in.write(text(s"after $i\n")))
      in.close()
      assert(p.waitFor(60, TimeUnit.SECONDS), "the sink did not end")
      val err = String(p.getErrorStream.readAllBytes, UTF_8)
      assertEquals(p.exitValue, ExitCode.Runtime, err)
      assert(err.contains("10 of 110 records were not acknowledged"), err)
      assert(err.contains(s"${k("stopped", "connect-timeout=2s")}: 100 records acknowledged (partition 0: 100), 10 failed\n"), err)
    finally broker.restart()
    assertEquals(broker.consumeAll("stopped").map(r => str(r.value)), (1 to 100).map(i => s"before $i"))
