package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.frames.*

import asyncpipe.async.*
import java.io.{FileInputStream, IOException}
import java.util.Properties
import java.util.concurrent.atomic.AtomicLong
import org.apache.kafka.clients.consumer.{CloseOptions, ConsumerConfig, ConsumerRebalanceListener, ConsumerRecord, KafkaConsumer, OffsetAndMetadata}
import org.apache.kafka.clients.producer.{Callback, KafkaProducer, ProducerConfig, ProducerRecord, RecordMetadata}
import org.apache.kafka.common.TopicPartition
import org.apache.kafka.common.errors.{TimeoutException, WakeupException}
import org.apache.kafka.common.serialization.{ByteArraySerializer, ByteBufferDeserializer}
import java.nio.ByteBuffer
import scala.jdk.CollectionConverters.*

/** What the `kafka:` endpoints share: the client's properties and the reasons of its failures. */
private[stages] object KafkaClients:
  /** The client's properties for `a`: ours, then the `config=` file's, then the address's own. */
  def properties(a: KafkaAddress, defaults: Map[String, String], own: Map[String, String]): Properties =
    val p = Properties()
    defaults.foreach((k, v) => p.setProperty(k, v))
    a.settings.config.foreach { file =>
      try
        val in = FileInputStream(file)
        try p.load(in) finally in.close()
      catch case e: IOException => throw CliError.Failed(CliError.Runtime(a.render, s"config=$file: ${asyncpipe.io.IoFailure.reason(e)}"))
    }
    p.setProperty("bootstrap.servers", a.servers)
    a.settings.clientId.foreach(p.setProperty("client.id", _))
    if !p.containsKey("client.id") then p.setProperty("client.id", "asyncpipe")
    own.foreach((k, v) => p.setProperty(k, v))
    p

  /** The failure of `a`, in words: a broker that never answered named by its list. */
  def failure(a: KafkaAddress, e: Throwable): CliError.Failed =
    val reason = e match
      case _: TimeoutException =>
        s"no answer from the brokers (${a.brokersSaid}) within ${Durations.render(a.settings.connectTimeout)} (connect-timeout)"
      case _ => Option(e.getMessage).getOrElse(e.getClass.getSimpleName).nn
    CliError.Failed(CliError.Runtime(a.render, reason))

/** `kafka:` as a source: the records of the topic's partitions, each record's value one frame
  * (with `keys`, its key, the separator and its value), in `len` form as a datagram's. From `from=`,
  * until `until=end`, `--count` records, or `--idle-timeout` without one; else for ever.
  *
  * Without a group it assigns the partitions itself (all, or `partition=`) and commits nothing.
  * With `group=G` it subscribes as a member of G (or, with `partition=`, assigns those and commits
  * to G) and commits at least once: an offset is committed only once every frame before it has
  * been written wherever it went. While the flow runs, every second (and before partitions are
  * taken away in a rebalance) it sends a mark behind the frames it passed on
  * ([[FrameBatch.mark]]); the mark follows them through every stage, and once every output it
  * reached has handed them off ([[Output.mark]]: in the OS, or acknowledged by Kafka) the offsets
  * it stands for are committed. At the end, once the flow has ended with no output failed
  * ([[settle]]: the end of input, `--count`, SIGINT, SIGTERM), everything passed on is committed.
  * A `kill -9` repeats at most what was passed on after the last completed mark.
  */
final class KafkaInput(val address: KafkaAddress, options: StageOptions) extends Input:
  private val settings = address.settings
  private val group = settings.group
  @volatile private var consumer: KafkaConsumer[ByteBuffer, ByteBuffer] | Null = null
  @volatile private var closed = false
  // End offsets recorded at the start, for until=end: a partition is done once its position reaches it.
  private var ends = Map.empty[TopicPartition, Long]
  // What was handed on: per partition, the offset after the last record passed on (what a commit says).
  private val handed = java.util.concurrent.ConcurrentHashMap[TopicPartition, java.lang.Long]()
  // Partitions the `from=` seek was made for (with a group, once, on the first assignment).
  private val placed = java.util.concurrent.ConcurrentHashMap.newKeySet[TopicPartition]()
  private val pumped = java.util.concurrent.CountDownLatch(1)
  @volatile private var pumping = false
  // The pump's Async, for a mark sent from a rebalance callback (inside poll, on its thread).
  @volatile private var pumpAsync: Async | Null = null
  @volatile private var out: SendableChannel[FrameBatch] | Null = null
  // The offsets of the newest mark that every output acknowledged, for the pump to commit.
  private val confirmed = java.util.concurrent.atomic.AtomicReference[Marked | Null](null)
  private var marks = 0L
  private val timeout = java.time.Duration.ofMillis(settings.connectTimeout.toMillis)

  // Polls on a thread of its own; close() wakes it.
  override def detached: Boolean = true

  private val teller = Teller()
  override def attach(d: Diagnostics): Unit = teller.attach(d)
  // Records passed on, per partition (the pump's alone; read once it has stopped).
  private val read = scala.collection.mutable.HashMap.empty[Int, Long]

  def open(): Unit =
    val props = KafkaClients.properties(address,
      // A source never creates the topic it reads (a typo would make one): no topic is an error.
      // A poll hands on up to 10,000 records (the client's 500 made 2,000 batches of 1M small
      // records), and a fetch brings up to 8 MiB of a partition (1 MiB: 8 % more time for 1M
      // records of 100 bytes); a response stays within the client's fetch.max.bytes (50 MiB).
      Map("enable.auto.commit" -> "false", "auto.offset.reset" -> "earliest", "allow.auto.create.topics" -> "false",
        ConsumerConfig.MAX_POLL_RECORDS_CONFIG -> "10000", ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG -> (8 << 20).toString,
        // A member killed without leaving holds its partitions until its session expires: the
        // client's 45 s kept a restarted `kill -9`ed source waiting that long; 10 s (the client's
        // default before Kafka 3.0; heartbeats come from a thread of their own every 3 s).
        ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG -> "10000"),
      Map(
        // Views of the fetched bytes, copied once, into the batch (an array per record was a copy
        // and an allocation more).
        ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG -> classOf[ByteBufferDeserializer].getName,
        ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG -> classOf[ByteBufferDeserializer].getName,
        ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG -> settings.connectTimeout.toMillis.toString
      ) ++ group.map(ConsumerConfig.GROUP_ID_CONFIG -> _))
    val c = try KafkaConsumer[ByteBuffer, ByteBuffer](props) catch case e: Exception => throw KafkaClients.failure(address, e)
    consumer = c
    try
      val infos = Option(c.partitionsFor(address.topic, timeout)).map(_.asScala.toSeq).getOrElse(Nil)
      if infos.isEmpty then throw CliError.Failed(CliError.Runtime(address.render, s"no topic '${address.topic}' at ${address.brokersSaid}"))
      val all = infos.map(_.partition).sorted
      val chosen = settings.partitions.getOrElse(all)
      chosen.find(!all.contains(_)).foreach { p =>
        throw CliError.Failed(CliError.Runtime(address.render, s"topic '${address.topic}' has no partition $p (it has ${all.mkString(", ")})"))
      }
      if settings.untilEnd then
        ends = c.endOffsets(all.map(TopicPartition(address.topic, _)).asJava, timeout).asScala.map((tp, n) => tp -> n.longValue).toMap
      val parts = chosen.map(TopicPartition(address.topic, _))
      if group.isDefined && settings.partitions.isEmpty then c.subscribe(java.util.List.of(address.topic), Rebalances)
      else
        c.assign(parts.asJava)
        place(c, parts)
    catch
      case e: CliError.Failed => throw e
      case e: Exception       => throw KafkaClients.failure(address, e)

  /** Seeks `parts` to where `from=` says, once each; with a group and no `from=` (or `stored`),
    * they start at the group's offsets (the beginning where it has none).
    */
  private def place(c: KafkaConsumer[ByteBuffer, ByteBuffer], parts: Seq[TopicPartition]): Unit =
    val fresh = parts.filter(placed.add).asJava
    if !fresh.isEmpty then
      settings.from.getOrElse(if group.isDefined then KafkaFrom.Stored else KafkaFrom.Beginning) match
        case KafkaFrom.Stored    => ()
        case KafkaFrom.Beginning => c.seekToBeginning(fresh)
        case KafkaFrom.End       => c.seekToEnd(fresh)
        case KafkaFrom.Offset(n) => fresh.forEach(tp => c.seek(tp, n))
        case KafkaFrom.Back(n) =>
          val first = c.beginningOffsets(fresh, timeout).asScala
          val last = c.endOffsets(fresh, timeout).asScala
          fresh.forEach(tp => c.seek(tp, math.max(first(tp).longValue, last(tp).longValue - n)))
        case KafkaFrom.At(millis) =>
          val found = c.offsetsForTimes(fresh.asScala.map(tp => tp -> java.lang.Long.valueOf(millis)).toMap.asJava, timeout).asScala
          val last = c.endOffsets(fresh, timeout).asScala
          fresh.forEach(tp => c.seek(tp, Option(found.get(tp).orNull).fold(last(tp).longValue)(_.offset)))

  /** A group's partitions coming and going (inside `poll`, on the pump's thread). */
  private object Rebalances extends ConsumerRebalanceListener:
    def onPartitionsAssigned(parts: java.util.Collection[TopicPartition]): Unit = place(consumer.nn, parts.asScala.toSeq)
    // Before they go to another member: a mark, and what it confirms written is committed, so that
    // the next owner does not read it again (what it cannot confirm in time, the next owner will).
    def onPartitionsRevoked(parts: java.util.Collection[TopicPartition]): Unit =
      val a = pumpAsync
      if a != null then
        try
          mark()(using a).await(KafkaInput.RevokeWait)
          commitWritten(parts.asScala.toSet)
        catch case _: Exception => ()
      parts.forEach(tp => { handed.remove(tp); placed.remove(tp) })
    override def onPartitionsLost(parts: java.util.Collection[TopicPartition]): Unit =
      parts.forEach(tp => { handed.remove(tp); placed.remove(tp) })

  /** Sends a mark behind what was passed on so far, standing for the offsets after it. */
  private def mark()(using Async): HandOffReceipt =
    marks += 1
    val m = Marked(marks, handed.asScala.map((tp, n) => tp -> n.longValue).toMap)
    // Marks complete in the order they were sent (each output acknowledges them in order); the
    // newest completed one stands.
    val receipt = HandOffReceipt(() => confirmed.accumulateAndGet(m, (a, b) => if a == null || b.nn.seq > a.seq then b else a))
    out.nn.send(FrameBatch.mark(receipt))
    receipt

  /** Commits the offsets of the newest completed mark, of the partitions still assigned (of
    * `only`, when given).
    */
  private def commitWritten(only: Set[TopicPartition] = Set.empty): Unit =
    val m = confirmed.getAndSet(null)
    if m != null then
      val mine = consumer.nn.assignment().asScala
      commitOffsets(m.offsets.filter((tp, _) => mine(tp) && (only.isEmpty || only(tp))))

  private def commitOffsets(offsets: Map[TopicPartition, Long]): Unit =
    if offsets.nonEmpty then consumer.nn.commitSync(offsets.map((tp, n) => tp -> OffsetAndMetadata(n)).asJava, timeout)

  /** Everything passed on (at the end, once every output finished). */
  private def commitAll(): Unit = commitOffsets(handed.asScala.map((tp, n) => tp -> n.longValue).toMap)

  def pump(out: SendableChannel[FrameBatch])(using Async): Unit =
    pumping = true
    val c = consumer.nn
    this.out = out
    pumpAsync = summon[Async]
    val limit = options.count.getOrElse(Long.MaxValue)
    val idleNanos = options.idleTimeout.fold(Long.MaxValue)(_.toNanos)
    var received = 0L
    var lastRecord = System.nanoTime()
    var lastCommit = System.nanoTime()
    var uncommitted = false
    val frames = FrameBuilder()
    val next = scala.collection.mutable.HashMap.empty[TopicPartition, Long]
    var done = finished(c)
    try
      while !done && !closed do
        val records = c.poll(KafkaInput.Poll)
        if records.isEmpty then
          if System.nanoTime() - lastRecord >= idleNanos then done = true
        else
          lastRecord = System.nanoTime()
          frames.clear()
          // Partition by partition: where each one's records end, and the offset after its last.
          val parts = records.partitions().iterator()
          while parts.hasNext && received < limit do
            val tp = parts.next()
            val end = if settings.untilEnd then ends.getOrElse(tp, Long.MaxValue) else Long.MaxValue
            val it = records.records(tp).iterator()
            val before = received
            var after = -1L
            while it.hasNext && received < limit do
              val r = it.next()
              if r.offset < end then
                add(frames, r)
                after = r.offset + 1
                received += 1
            if after >= 0 then
              next(tp) = after
              read(tp.partition) = read.getOrElse(tp.partition, 0L) + (received - before)
          if frames.frames > 0 then
            counters.frames += frames.frames
            counters.bytes += frames.payloadBytes
            out.send(frames.result())
            next.foreach((tp, n) => handed.put(tp, n))
            uncommitted = true
          if received >= limit then done = true
        if group.isDefined then
          if uncommitted && System.nanoTime() - lastCommit >= KafkaInput.CommitEvery then
            mark()
            lastCommit = System.nanoTime()
            uncommitted = false
          try commitWritten()
          catch case _: org.apache.kafka.common.errors.RetriableException | _: org.apache.kafka.clients.consumer.CommitFailedException => ()
        if !done then done = finished(c)
    catch
      case _: WakeupException if closed => ()
      case e: CliError.Failed => throw e
      case e: org.apache.kafka.common.KafkaException => throw KafkaClients.failure(address, e)
    finally
      pumpAsync = null // no mark after the pump: the flow is ending (a close revokes, too)
      pumped.countDown()
      if group.isEmpty then
        if options.countingFrames then report(c, None)
        shut(c)

  /** With until=end: every partition this source reads (has been given, with a group) has reached
    * its recorded end.
    */
  private def finished(c: KafkaConsumer[ByteBuffer, ByteBuffer]): Boolean =
    settings.untilEnd && {
      val mine = c.assignment().asScala
      mine.nonEmpty && mine.forall(tp => c.position(tp) >= ends.getOrElse(tp, 0L))
    }

  /** The record's frame (its value; with `keys`, its key, the separator and its value; a null as
    * no bytes); [[pump]] counts them per poll.
    */
  private def add(frames: FrameBuilder, r: ConsumerRecord[ByteBuffer, ByteBuffer]): Unit =
    if settings.keys then frames.add3(r.key, settings.separator, r.value) else frames.add(r.value)

  /** With a group: once the pump has stopped, commits what was handed on if it was all written. */
  override def settle(written: Boolean): Unit =
    if group.isDefined then
      closed = true
      val c = consumer
      if c != null then
        if pumping && pumped.getCount > 0 then
          try c.wakeup() catch case _: Exception => ()
          val _ = pumped.await(KafkaInput.SettleWait, java.util.concurrent.TimeUnit.MILLISECONDS)
        // A wake-up that came after the pump left poll would end the commit's wait: the commit is
        // made again then (the wake-up is spent).
        try
          if written then try commitAll() catch case _: WakeupException => commitAll()
          if options.countingFrames then report(c, Some(lag(c)))
        catch case e: Exception =>
          teller.notice(s"asyncpipe: ${address.render}: the offsets of what was written could not be committed: ${KafkaClients.failure(address, e).error match
              case CliError.Runtime(_, reason) => reason
              case other                       => other.toString}")
        finally shut(c)

  /** Under `--stats`, at the end: the records passed on from each partition this source read (or
    * was given) and, with a group, its lag then. A line, or `{"kafka": {...}}` under `--stats-json`.
    */
  private def report(c: KafkaConsumer[ByteBuffer, ByteBuffer], lags: Option[Seq[(Int, Long)]]): Unit =
    val mine = try c.assignment().asScala.map(_.partition) catch case _: Exception => Set.empty[Int]
    val each = (mine ++ read.keySet).toSeq.sorted.map(p => p -> read.getOrElse(p, 0L))
    val total = each.map(_._2).sum
    def list(xs: Seq[(Int, Long)]) = xs.map((p, n) => s"partition $p: $n").mkString(", ")
    def jsonList(xs: Seq[(Int, Long)], field: String) =
      xs.map((p, n) => s"""{"partition":$p,"$field":$n}""").mkString("[", ",", "]")
    val q = StatsReporter.quote
    val text = s"asyncpipe: ${address.render}: $total record${if total == 1 then "" else "s"} (${list(each)})" +
      lags.fold("")(l => s"; group ${group.get}: lag ${l.map(_._2).sum} at the end (${list(l)})")
    val json = s"""{"address":${q(address.render)},"records":$total,"partitions":${jsonList(each, "records")}""" +
      lags.fold("")(l => s""","group":${q(group.get)},"lag":${l.map(_._2).sum},"lag_by_partition":${jsonList(l, "lag")}""") + "}"
    teller.record("kafka", json, text)

  /** The group's lag at the end, per partition of this source: its end offset less the group's
    * committed offset (all of it where the group has none).
    */
  private def lag(c: KafkaConsumer[ByteBuffer, ByteBuffer]): Seq[(Int, Long)] =
    val mine = c.assignment()
    if mine.isEmpty then Nil
    else
      val ends = c.endOffsets(mine, timeout).asScala
      val committed = c.committed(mine, timeout).asScala
      mine.asScala.toSeq.sortBy(_.partition).map { tp =>
        val at = Option(committed.get(tp).orNull).fold(0L)(_.offset)
        tp.partition -> math.max(0L, ends(tp).longValue - at)
      }

  private def shut(c: KafkaConsumer[ByteBuffer, ByteBuffer]): Unit =
    consumer = null
    try c.close(CloseOptions.timeout(java.time.Duration.ZERO)) catch case _: Exception => ()

  def close(): Unit =
    closed = true
    val c = consumer
    if c != null then
      if pumping then try c.wakeup() catch case _: Exception => ()
      else shut(c) // never pumped (another endpoint failed to open): nobody else uses it

object KafkaInput:
  private val Poll = java.time.Duration.ofMillis(100)
  /** How often a source with a group sends a mark (ns). */
  private val CommitEvery = 1_000_000_000L
  /** How long a rebalance waits for a mark before the partitions go (ms). */
  private val RevokeWait = 5_000L
  /** How long `settle` waits for a stopped pump to leave `poll` (ms). */
  private val SettleWait = 10_000L

/** A mark's number (in the order sent) and the offsets it stands for. */
private final case class Marked(seq: Long, offsets: Map[TopicPartition, Long])

/** Frames in `len` form in one growing array; `result` copies them out as a message. */
private final class FrameBuilder:
  private var array = new Array[Byte](4096)
  private var size = 0
  var frames = 0

  /** The bytes of the frames' payloads (without their lengths). */
  def payloadBytes: Long = size - 4L * frames

  def clear(): Unit = { size = 0; frames = 0 }

  /** One frame of `value`'s remaining bytes (none for null); its length. */
  def add(value: ByteBuffer | Null): Int =
    val n = remaining(value)
    room(n)
    copy(value, size + 4)
    close(n)

  /** One frame of `key`, `sep` and `value` (null: no bytes); its length. */
  def add3(key: ByteBuffer | Null, sep: Byte, value: ByteBuffer | Null): Int =
    val k = remaining(key)
    val n = k + 1 + remaining(value)
    room(n)
    copy(key, size + 4)
    array(size + 4 + k) = sep
    copy(value, size + 5 + k)
    close(n)

  private def remaining(b: ByteBuffer | Null): Int = if b == null then 0 else b.remaining

  /** `b`'s remaining bytes into the array at `at`, leaving `b` as it was. */
  private def copy(b: ByteBuffer | Null, at: Int): Unit = if b != null then b.get(b.position, array, at, b.remaining)

  private def room(n: Int): Unit =
    if size + 4 + n > array.length then array = java.util.Arrays.copyOf(array, math.max(array.length * 2, size + 4 + n))

  private def close(n: Int): Int =
    Framing.writeLength(array, size, n)
    size += 4 + n
    frames += 1
    n

  /** The frames as a message: this array, handed on (no copy); the next frames go into a new one. */
  def result(): FrameBatch =
    val done = FrameBatch(Framing.Len, array, size, terminated = true)
    array = new Array[Byte](math.max(4096, size))
    done

/** `kafka:` as a sink: each frame one record (its payload the value; with `key=` that key, with
  * `keysep=` the frame split at its first separator). A frame counts once the broker acknowledged
  * it (`acks=all` by default, the producer idempotent: no duplicates within a run). At the end (and
  * on a stop) every record is flushed and waited for; any record that was not acknowledged makes
  * the stage fail, naming how many and why.
  */
final class KafkaOutput(address: KafkaAddress, options: StageOptions) extends Output:
  def name: String = address.render
  private val settings = address.settings
  private var producer: KafkaProducer[Array[Byte], Array[Byte]] | Null = null
  private val sent = AtomicLong()
  private val failed = AtomicLong()
  @volatile private var reported = false
  @volatile private var firstFailure: Exception | Null = null
  private val keyBytes = settings.key.map(_.getBytes(java.nio.charset.StandardCharsets.UTF_8))
  private val partition: java.lang.Integer | Null = settings.partitions.flatMap(_.headOption).map(Integer.valueOf).orNull

  def open(): Unit =
    val timeout = settings.connectTimeout.toMillis
    val linger = settings.linger.fold(5L)(_.toMillis)
    val own = Map(
      ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG -> classOf[ByteArraySerializer].getName,
      ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG -> classOf[ByteArraySerializer].getName,
      ProducerConfig.ACKS_CONFIG -> settings.acks,
      ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG -> (settings.acks == "all").toString
    ) ++ settings.compression.map(ProducerConfig.COMPRESSION_TYPE_CONFIG -> _) ++
      settings.linger.map(l => ProducerConfig.LINGER_MS_CONFIG -> l.toMillis.toString)
    val defaults = Map(
      ProducerConfig.LINGER_MS_CONFIG -> linger.toString,
      // Batches of up to 1 MiB, as librdkafka (kcat) makes, not the client's 16 KiB: a third less
      // CPU for 1M records of 100 bytes. At most buffer.memory (32 MiB) is held for them.
      ProducerConfig.BATCH_SIZE_CONFIG -> KafkaOutput.BatchSize.toString,
      ProducerConfig.MAX_BLOCK_MS_CONFIG -> timeout.toString,
      ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG -> timeout.toString,
      ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG -> (2 * timeout + linger).toString
    )
    val p = try KafkaProducer[Array[Byte], Array[Byte]](KafkaClients.properties(address, defaults, own))
      catch case e: Exception => throw KafkaClients.failure(address, e)
    producer = p
    try
      val infos = p.partitionsFor(address.topic).asScala.map(_.partition)
      Option(partition).foreach { n =>
        if !infos.contains(n.intValue) then
          throw CliError.Failed(CliError.Runtime(name, s"topic '${address.topic}' has no partition $n (it has ${infos.sorted.mkString(", ")})"))
      }
    catch
      case e: CliError.Failed => throw e
      case e: Exception =>
        p.close(java.time.Duration.ZERO)
        producer = null
        throw KafkaClients.failure(address, e)

  private val teller = Teller()
  override def attach(d: Diagnostics): Unit = teller.attach(d)
  // Acknowledged records per partition, under --stats.
  private val byPartition = java.util.concurrent.ConcurrentHashMap[Integer, java.util.concurrent.atomic.LongAdder]()

  // Successes are counted by the producer's I/O thread alone (it completes every batch), so the
  // counters need no lock; a failure may also be reported on the writer's thread.
  private val acked: Callback = new Callback:
    def onCompletion(metadata: RecordMetadata, e: Exception | Null): Unit =
      if e == null then
        counters.frames += 1
        counters.bytes += math.max(0, metadata.serializedValueSize)
        if options.countingFrames then byPartition.computeIfAbsent(metadata.partition, _ => java.util.concurrent.atomic.LongAdder()).increment()
      else
        if firstFailure == null then firstFailure = e
        failed.incrementAndGet()

  def write(batch: FrameBatch)(using Async): Unit =
    val p = producer.nn
    var n = 0L
    def send(key: Array[Byte] | Null, value: Array[Byte]): Unit =
      n += 1
      p.send(ProducerRecord[Array[Byte], Array[Byte]](address.topic, partition, key, value), acked)
    try settings.keySeparator match
      case Some(sep) =>
        batch.foreach { (bytes, offset, length, _) =>
          val end = offset + length
          var i = offset
          while i < end && bytes(i) != sep do i += 1
          if i < end then send(java.util.Arrays.copyOfRange(bytes, offset, i), java.util.Arrays.copyOfRange(bytes, i + 1, end))
          else send(null, java.util.Arrays.copyOfRange(bytes, offset, end))
        }
      case None =>
        val key = keyBytes.orNull
        batch.foreach((bytes, offset, length, _) => send(key, java.util.Arrays.copyOfRange(bytes, offset, offset + length)))
    catch case e: org.apache.kafka.common.KafkaException => throw KafkaClients.failure(address, e)
    finally
      sent.addAndGet(n)
      batch.release()
    failIfLost()

  /** Throws once a record was not acknowledged: the records after it would not be either. */
  private def failIfLost(): Unit =
    val n = failed.get
    if n > 0 then
      val why = Option(firstFailure).map(e => KafkaClients.failure(address, e.nn).error match
        case CliError.Runtime(_, reason) => reason
        case other                       => other.toString
      ).getOrElse("unknown")
      throw CliError.Failed(CliError.Runtime(name, s"$n of ${sent.get} records were not acknowledged: $why"))

  def idle()(using Async): Unit = ()

  // Every record sent so far acknowledged (or the stage fails, naming those that were not).
  override def handsOff: Boolean = true
  override def handOff()(using Async): Unit =
    val p = producer
    if p != null then
      try p.flush()
      catch case e: org.apache.kafka.common.KafkaException => throw KafkaClients.failure(address, e)
      failIfLost()

  def finish()(using Async): Unit =
    val p = producer
    if p != null then
      try
        try p.flush()
        catch case e: org.apache.kafka.common.KafkaException => throw KafkaClients.failure(address, e)
      finally report()
      failIfLost()
      p.close()
      producer = null

  def abort(): Unit =
    val p = producer
    if p != null then
      producer = null
      report()
      try p.close(java.time.Duration.ZERO) catch case _: Exception => ()

  /** Under `--stats`, once: the records acknowledged (per partition), failed, and still awaited
    * (sent, neither acknowledged nor failed: an abort does not wait for them). A line, or
    * `{"kafka": {...}}` under `--stats-json`.
    */
  private def report(): Unit =
    if options.countingFrames && !reported then
      reported = true
      val each = byPartition.asScala.toSeq.map((p, n) => p.intValue -> n.sum).sortBy(_._1)
      val ok = each.map(_._2).sum
      val lost = failed.get
      val awaited = math.max(0L, sent.get - ok - lost)
      val q = StatsReporter.quote
      val text = s"asyncpipe: $name: $ok record${if ok == 1 then "" else "s"} acknowledged" +
        (if each.isEmpty then "" else each.map((p, n) => s"partition $p: $n").mkString(" (", ", ", ")")) +
        s", $lost failed" + (if awaited > 0 then s", $awaited not acknowledged yet" else "")
      val json = s"""{"address":${q(name)},"acknowledged":$ok,"failed":$lost,"unacknowledged":$awaited,""" +
        s""""partitions":${each.map((p, n) => s"""{"partition":$p,"records":$n}""").mkString("[", ",", "]")}}"""
      teller.record("kafka", json, text)

object KafkaOutput:
  /** The producer's batch.size unless config= says otherwise (bytes). */
  val BatchSize: Int = 1 << 20
