package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.system.*

import java.time.Instant
import java.time.format.DateTimeParseException
import scala.concurrent.duration.*

/** `kafka:[BROKERS/]TOPIC{,OPT}`: records of an Apache Kafka topic, one record value a frame
  * ([[KafkaInput]], [[KafkaOutput]]; ADR 0025).
  * {{{
  * "kafka:" [ brokers "/" ] topic { "," option }
  * brokers = broker { "+" broker }        (a ',' starts the options); without: $ASYNCPIPE_KAFKA_BROKERS
  * broker  = host [ ":" port ]            (port 9092 when left out; [IPv6]:port)
  * topic   = 1 to 249 of [A-Za-z0-9._-], not "." or ".."
  * }}}
  * This file names no class of the Kafka client: the client is loaded only when an endpoint of
  * this kind opens, so that no other command pays for it.
  */
object KafkaKind extends AddressKind:
  val scheme = "kafka"
  val forms: Seq[(String, String)] = Seq(
    "kafka:[BROKERS/]TOPIC[,OPT...]" ->
      "a Kafka topic: its records' values as frames (a source), frames as records (a sink); BROKERS is host[:port] joined by '+' (default $ASYNCPIPE_KAFKA_BROKERS)"
  )
  /** Where brokers are read from when a token names none. */
  val BrokersVariable = "ASYNCPIPE_KAFKA_BROKERS"
  val DefaultPort = 9092
  val DefaultConnectTimeout: FiniteDuration = 30.seconds
  val DefaultKeySeparator: Byte = '\t'

  private val partitions: Reader[Seq[Int]] = new Reader[Seq[Int]]:
    def form: String = "P{+P}"
    def read(text: String): Either[String, Seq[Int]] =
      val parts = text.split("\\+", -1).toSeq
      val read = parts.map(p => Reader.wholeNumber(0, Int.MaxValue).read(p).map(_.toInt))
      read.collectFirst { case Left(rule) => rule } match
        case Some(rule) => Left(s"'$text': $rule (partitions are numbers from 0, joined by '+')")
        case None =>
          val ps = read.collect { case Right(p) => p }
          if ps.distinct.size != ps.size then Left(s"'$text' names a partition twice") else Right(ps)

  private val separator: Reader[Byte] = new Reader[Byte]:
    def form: String = "CHAR"
    def read(text: String): Either[String, Byte] = text match
      case "\\t" | "tab" => Right('\t')
      case "\\0" | "nul" => Right(0)
      case s if s.length == 1 && s.charAt(0) < 128 => Right(s.charAt(0).toByte)
      case s if s.matches("0x[0-9a-fA-F]{2}") => Right(Integer.parseInt(s.drop(2), 16).toByte)
      case s => Left(s"'$s' is not one ASCII character ('\\t', 'tab', '\\0', 'nul' or 0xNN name the others)")

  private val from: Reader[KafkaFrom] = new Reader[KafkaFrom]:
    def form: String = "beginning|end|stored|OFFSET|-N|@TIME"
    def read(text: String): Either[String, KafkaFrom] = text match
      case "beginning" => Right(KafkaFrom.Beginning)
      case "stored"    => Right(KafkaFrom.Stored)
      case "end"       => Right(KafkaFrom.End)
      case s if s.startsWith("-") => Reader.wholeNumber(1, Long.MaxValue).read(s.drop(1)).map(KafkaFrom.Back(_))
          .left.map(rule => s"'$s': $rule (-N: the last N records of each partition)")
      case s if s.startsWith("@") => KafkaKind.time(s.drop(1)).map(KafkaFrom.At(_))
      case s if s.nonEmpty && s.forall(_.isDigit) => Reader.wholeNumber(0, Long.MaxValue).read(s).map(KafkaFrom.Offset(_))
      case s => Left(s"'$s' is none of beginning, end, stored, OFFSET (a number), -N (the last N) or @TIME")

  /** `@TIME`: milliseconds since the epoch, or an ISO-8601 instant (2026-11-27T10:00:00Z). */
  private def time(text: String): Either[String, Long] =
    if text.nonEmpty && text.forall(_.isDigit) then Reader.wholeNumber(0, Long.MaxValue).read(text)
    else
      try Right(Instant.parse(text).toEpochMilli)
      catch case _: DateTimeParseException =>
        Left(s"'@$text': a time is milliseconds since the epoch or an ISO-8601 instant such as @2026-11-27T10:00:00Z")

  val fromOption = AddressOption.valued("from", from,
    "where each partition is read from: beginning (the default without a group), stored (the group's offset, the default with one; " +
      "beginning where none is stored), end, an OFFSET, -N (its last N records), @TIME (the first record at or after it)",
    Some(Role.Source), "reading")
  val groupOption = AddressOption.valued("group", Reader.text("G"),
    "read as a member of consumer group G, committing what was written (at least once; without it nothing is committed)",
    Some(Role.Source), "reading")
  val untilOption = AddressOption.valued("until", Reader.choice(Seq("end"))(identity),
    "until=end: end once every partition reached the end it had when the source started", Some(Role.Source), "reading")
  val partitionOption = AddressOption.valued("partition", partitions,
    "a source reads these partitions only (P+P...); a sink writes every record to partition P (default: the client's partitioner)")
  val keysOption = AddressOption.flag("keys", "each frame is KEY<sep>VALUE (sep: keysep=, default a tab; a record without a key: an empty KEY)",
    Some(Role.Source), "reading")
  val keysepOption = AddressOption.valued("keysep", separator,
    "the separator of a key and its value: a source's 'keys' writes it, a sink splits each frame at its first one (the key before it)")
  val keyOption = AddressOption.valued("key", Reader.text("TEXT"), "every record's key (a sink)", Some(Role.Sink), "writing")
  val acksOption = AddressOption.valued("acks", Reader.choice(Seq("all", "1", "0"))(identity),
    "what the broker acknowledges before a record counts as written: all (the default: every in-sync replica), 1 (the leader), 0 (nothing)",
    Some(Role.Sink), "writing")
  val compressionOption = AddressOption.valued("compression", Reader.choice(Seq("none", "gzip", "snappy", "lz4", "zstd"))(identity),
    "the batches' compression (default none)", Some(Role.Sink), "writing")
  val lingerOption = AddressOption.valued("linger", Reader.duration(allowZero = true),
    "how long a batch waits for more records before it is sent (default 5ms)", Some(Role.Sink), "writing")
  val configOption = AddressOption.valued("config", Reader.path("FILE"),
    "client properties (Java .properties: SASL, SSL, anything else); an option of the address wins over the file")
  val clientIdOption = AddressOption.valued("client-id", Reader.text("NAME"), "the client id the brokers see (default asyncpipe)")
  val connectTimeoutOption = AddressOption.valued("connect-timeout", Reader.duration(),
    s"how long to wait for a broker to answer (default ${Durations.render(DefaultConnectTimeout)}); past it: exit 1 naming the brokers")

  override val options: Seq[AddressOption] = Seq(groupOption, fromOption, untilOption, partitionOption, keysOption, keysepOption, keyOption,
    acksOption, compressionOption, lingerOption, configOption, clientIdOption, connectTimeoutOption)

  override def takes(role: Role): Set[String] = if role == Role.Source then Set("--count", "--idle-timeout") else Set.empty

  private val topicName = "[A-Za-z0-9._-]{1,249}".r

  def parse(rest: String, p: AddressParser): Either[CliError, Address] =
    val segments = rest.split(",", -1).toSeq
    val main = segments.head
    val (brokersText, topic) = main.lastIndexOf('/') match
      case -1 => (None, main)
      case i  => (Some(main.take(i)), main.drop(i + 1))
    for
      brokers <- brokersText match
        case Some(text) => brokerList(text, p).map(Some(_))
        case None => Right(None)
      bootstrap <- brokers match
        case Some(bs) => Right(bs)
        case None =>
          sys.env.get(BrokersVariable).map(_.trim).filter(_.nonEmpty) match
            case Some(text) => brokerList(text.replace(',', '+'), p).left.map(_ =>
                CliError.BadToken(None, p.token, s"$$$BrokersVariable ('$text') is not a list of host[:port]", expected))
            case None => p.bad(s"no brokers: name them (kafka:HOST:PORT/$topic) or set $BrokersVariable")
      _ <- if topicName.matches(topic) && topic != "." && topic != ".." then Right(())
        else if topic.isEmpty then p.bad("the topic is missing: kafka:[BROKERS/]TOPIC")
        else p.bad(s"'$topic' is not a topic name (1 to 249 of letters, digits, '.', '_' and '-')")
      opts <- p.options(segments.tail)
      settings <- settingsOf(opts, p)
    yield KafkaAddress(brokersText, bootstrap, topic, segments.tail, settings)

  private def brokerList(text: String, p: AddressParser): Either[CliError, Seq[Broker]] =
    if text.isEmpty then p.bad("the brokers before '/' are missing: kafka:HOST[:PORT]/TOPIC, or leave out the '/'")
    else
      val parts = text.split("\\+", -1).toSeq
      val read = parts.map { part =>
        if part.isEmpty then p.bad(s"an empty broker in '$text' (brokers are joined by '+')")
        else if part.endsWith("]") || (!part.contains(':') && !part.startsWith("[")) then Hosts.host(part, p).map(Broker(_, DefaultPort))
        else if part.startsWith("[") || part.count(_ == ':') == 1 then Hosts.hostAndPort(part, p).map((h, n) => Broker(h, n))
        else Hosts.host(part, p).map(Broker(_, DefaultPort))
      }
      read.collectFirst { case Left(e) => e } match
        case Some(e) => Left(e)
        case None    => Right(read.collect { case Right(b) => b })

  private def settingsOf(o: AddressOptions, p: AddressParser): Either[CliError, KafkaSettings] =
    val s = KafkaSettings(
      group = o.value[String]("group"),
      from = o.value[KafkaFrom]("from"),
      untilEnd = o.value[String]("until").isDefined,
      partitions = o.value[Seq[Int]]("partition"),
      keys = o.flag("keys"),
      keySeparator = o.value[Byte]("keysep"),
      key = o.value[String]("key"),
      acks = o.value[String]("acks").getOrElse("all"),
      compression = o.value[String]("compression"),
      linger = o.value[FiniteDuration]("linger"),
      config = o.value[String]("config"),
      clientId = o.value[String]("client-id"),
      connectTimeout = o.value[FiniteDuration]("connect-timeout").getOrElse(DefaultConnectTimeout)
    )
    if s.from.contains(KafkaFrom.Stored) && s.group.isEmpty then
      p.bad("from=stored reads a consumer group's offsets: give the group (group=G)")
    else if s.group.exists(_.isEmpty) then p.bad("group= needs a name")
    else if s.key.isDefined && s.keySeparator.isDefined then
      p.bad("kafka options 'key' and 'keysep' both name the key: key=TEXT gives every record one key, keysep=CHAR takes it from each frame")
    else Right(s)

/** A broker of a `kafka:` address. */
final case class Broker(host: Host, port: Int):
  def render: String = s"${host.render}:$port"

/** Where a `kafka:` source starts in each partition. */
enum KafkaFrom:
  case Beginning, End, Stored
  case Offset(offset: Long)
  case Back(records: Long)
  case At(epochMillis: Long)

/** The options of a `kafka:` address, read. */
final case class KafkaSettings(
    group: Option[String] = None,
    from: Option[KafkaFrom] = None,
    untilEnd: Boolean = false,
    partitions: Option[Seq[Int]] = None,
    keys: Boolean = false,
    keySeparator: Option[Byte] = None,
    key: Option[String] = None,
    acks: String = "all",
    compression: Option[String] = None,
    linger: Option[FiniteDuration] = None,
    config: Option[String] = None,
    clientId: Option[String] = None,
    connectTimeout: FiniteDuration = KafkaKind.DefaultConnectTimeout
):
  def separator: Byte = keySeparator.getOrElse(KafkaKind.DefaultKeySeparator)

/** `kafka:[BROKERS/]TOPIC{,OPT}`: `written` the brokers as the token wrote them, `bootstrap` those used
  * (the token's, or $ASYNCPIPE_KAFKA_BROKERS's); `optionTexts` the options as written.
  */
final case class KafkaAddress(written: Option[String], bootstrap: Seq[Broker], topic: String, optionTexts: Seq[String],
    settings: KafkaSettings) extends Address:
  def kind: AddressKind = KafkaKind
  def render: String = s"kafka:${written.fold("")(_ + "/")}$topic${optionTexts.map("," + _).mkString}"
  /** The brokers as the Kafka client takes them (`bootstrap.servers`). */
  def servers: String = bootstrap.map(_.render).mkString(",")
  /** The brokers as a message names them. */
  def brokersSaid: String = bootstrap.map(_.render).mkString(", ")

  override def optionsGiven: Seq[String] = optionTexts.map(g => g.takeWhile(_ != '='))

  override protected def roleRule(role: Role): Option[String] = role match
    case Role.Sink if settings.partitions.exists(_.size > 1) =>
      Some(s"a sink writes to one partition (partition=P), not ${settings.partitions.get.mkString("+")}")
    case _ => None

  def input(options: StageOptions): Input = KafkaInput(this, options)
  def output(options: StageOptions, stdout: OwnedOutput): Output = KafkaOutput(this, options)
