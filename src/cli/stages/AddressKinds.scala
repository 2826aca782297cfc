package asyncpipe.cli.stages

/** The registry of address kinds: help lists them in this order, and [[Address.parse]] finds a
  * token's kind here. Adding a kind is its file and one line below.
  */
object AddressKinds:
  val all: Seq[AddressKind] = Seq(
    StdKind,
    FileKind,
    UdpKind,
    TcpKind,
    TcpListenKind,
    UnixKind,
    UnixListenKind,
    TlsKind,
    TlsListenKind,
    KafkaKind,
    TickKind,
    NullKind
  )

  /** The kind of `scheme` (`-` for the standard streams). */
  def named(scheme: String): Option[AddressKind] =
    val it = all.iterator
    while it.hasNext do
      val k = it.next()
      if k.scheme == scheme then return Some(k)
    None
