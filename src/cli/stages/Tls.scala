package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.io.IoFailure

import java.io.{ByteArrayInputStream, EOFException, IOException, InputStream, OutputStream}
import java.net.{Socket, SocketException, SocketTimeoutException}
import java.nio.ByteBuffer
import java.nio.channels.{ReadableByteChannel, SocketChannel, WritableByteChannel}
import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path}
import java.security.{GeneralSecurityException, KeyFactory, KeyStore, Principal, PrivateKey, Signature}
import java.security.cert.{
  CertPathBuilderException, CertPathValidatorException, CertificateException, CertificateExpiredException, CertificateFactory,
  CertificateNotYetValidException, PKIXReason, X509Certificate
}
import java.security.spec.PKCS8EncodedKeySpec
import java.time.ZoneOffset
import java.time.format.DateTimeFormatter
import java.util.concurrent.ConcurrentHashMap
import javax.net.ssl.{
  KeyManager, SNIHostName, SSLContext, SSLEngine, SSLException, SSLHandshakeException, SSLSocket, TrustManager,
  TrustManagerFactory, X509ExtendedKeyManager, X509ExtendedTrustManager
}
import scala.concurrent.duration.FiniteDuration
import scala.jdk.CollectionConverters.*

/** A TLS failure, its reason in words: a handshake refused or broken (`inHandshake`), or an alert
  * the peer sent after it (a client certificate refused under TLS 1.3 arrives so).
  */
final class TlsFailed(reason: String, val inHandshake: Boolean, cause: Throwable | Null = null) extends IOException(reason, cause)

/** TLS for `tls:` and `tls-listen:` (JDK's javax.net.ssl, TLS 1.3 and 1.2 only): contexts made from
  * PEM files, the handshake, and the reasons a handshake fails, in words.
  *
  *   - A client verifies the server's certificate against the system's trust store (the JDK's
  *     default: `javax.net.ssl.trustStore`, else its `lib/security/cacerts`), or the CAs of
  *     `ca=FILE`; and its name, HTTPS-style, against `sni=NAME`, else HOST (a name is also sent as
  *     SNI; an address is checked against the certificate's IP addresses). `insecure` checks
  *     nothing, and says so on stderr once.
  *   - Files are read when the endpoint opens (the parse stays pure): a file that cannot be read,
  *     is not PEM, or holds no certificate or key is a runtime error naming it. A key is PKCS#8
  *     (`BEGIN PRIVATE KEY`: RSA, EC, Ed25519), or a traditional `BEGIN RSA PRIVATE KEY` or
  *     `BEGIN EC PRIVATE KEY` (made into PKCS#8 here); encrypted keys are refused, naming the
  *     `openssl` command that writes a plain one. The key must belong to the certificate.
  *   - A client's handshake is part of its connect (within `connect-timeout`), so a certificate it
  *     refuses fails the open, before any data moves. A listener's handshakes happen on each
  *     connection's own thread ([[Connection.ready]]), within [[HandshakeLimit]].
  */
object Tls:
  val Protocols: Array[String] = Array("TLSv1.3", "TLSv1.2")

  /** How long a listener waits for a client to complete its handshake. */
  val HandshakeLimit: FiniteDuration = SocketSettings.DefaultConnectTimeout

  // The largest PEM file read: far more than any certificate chain or key.
  private val MaxPem = 4 << 20

  // ---------------------------------------------------------------------------------------------
  // Contexts

  /** A client's context, made once per process for each set of options (the files read then). */
  private val clients = ConcurrentHashMap[TlsSettings, ClientSide]()

  private final class ClientSide(val context: SSLContext, val keys: Keys)

  /** The client context of `a`, made (its files read) the first time; `say` tells, then, that
    * `insecure` verifies nothing. Throws [[CliError.Failed]] for a file that will not do.
    */
  def prepareClient(a: StreamSocketAddress, say: String => Unit): Unit = clientSide(a, say)

  private def clientSide(a: StreamSocketAddress, say: String => Unit): ClientSide =
    clients.computeIfAbsent(a.settings.tls, t => {
      val side = makeClient(a, t)
      if t.insecure then
        say(s"asyncpipe: ${a.render}: insecure: the server's certificate is not verified; anyone on the path could read and change the data")
      side
    })

  private def makeClient(a: StreamSocketAddress, t: TlsSettings): ClientSide =
    val keys = Keys(t.cert.map(c => identity(a, c, t.key.get)))
    val trust: X509ExtendedTrustManager =
      if t.insecure then TrustAll
      else Explained(trustOf(a, t.ca.map(certificates(a, "ca", _))), t.ca.fold("the system's; ca=FILE trusts others")(p => s"those of ca=$p"))
    ClientSide(context(a, keys, trust), keys)

  /** The server context of `a` (its files read); throws [[CliError.Failed]] for a file that will not do. */
  def server(a: StreamSocketAddress): SSLContext =
    val t = a.settings.tls
    val keys = Keys(Some(identity(a, t.cert.get, t.key.get)))
    val trust: X509ExtendedTrustManager =
      if t.verify then Explained(trustOf(a, t.ca.map(certificates(a, "ca", _))), s"those of ca=${t.ca.get}")
      else TrustAll // never asked: no client certificate is requested without verify
    context(a, keys, trust)

  private def context(a: StreamSocketAddress, keys: KeyManager, trust: TrustManager): SSLContext =
    try
      val c = SSLContext.getInstance("TLS")
      c.init(Array(keys), Array(trust), null)
      c
    catch case e: GeneralSecurityException => throw CliError.Failed(CliError.Runtime(a.render, s"TLS: ${cleaned(e)}"))

  private def trustOf(a: StreamSocketAddress, cas: Option[Seq[X509Certificate]]): X509ExtendedTrustManager =
    val tmf = TrustManagerFactory.getInstance("PKIX")
    cas match
      case None =>
        try tmf.init(null: KeyStore | Null)
        catch case e: GeneralSecurityException =>
          throw CliError.Failed(CliError.Runtime(a.render, s"the system's trust store cannot be read (ca=FILE names CAs instead): ${cleaned(e)}"))
      case Some(cs) =>
        val store = KeyStore.getInstance(KeyStore.getDefaultType)
        store.load(null, null)
        cs.zipWithIndex.foreach((c, i) => store.setCertificateEntry(s"ca-$i", c))
        tmf.init(store)
    tmf.getTrustManagers.collectFirst { case x: X509ExtendedTrustManager => x }
      .getOrElse(throw IllegalStateException("the JDK's PKIX trust manager factory gave no X509ExtendedTrustManager"))

  // ---------------------------------------------------------------------------------------------
  // Connections

  /** TLS as the client over `channel`, connected to `a`: the handshake within `limitMillis`
    * (past it: [[ConnectTimedOut]]); a refusal is a [[TlsFailed]].
    */
  def connect(a: StreamSocketAddress, channel: SocketChannel, limitMillis: Int, say: String => Unit): Connection =
    val t = a.settings.tls
    val (host, port) = a.where match
      case SocketWhere.Port(Some(h), port) => (h, port)
      case other                           => throw IllegalStateException(s"tls: connects to a host and port, not $other")
    // The name verified: sni=, else HOST. It is the socket's peer host, so that the JDK checks it
    // (and nothing else: given an SNI name that differs from the peer host, it falls back to the latter).
    val name = t.sni.getOrElse(host.literal)
    val side = clientSide(a, say)
    val socket = side.context.getSocketFactory.createSocket(channel.socket(), name, port, true).asInstanceOf[SSLSocket]
    val params = socket.getSSLParameters
    params.setProtocols(Protocols)
    if !t.insecure then params.setEndpointIdentificationAlgorithm("HTTPS")
    host match
      case _ if t.sni.isDefined => params.setServerNames(java.util.List.of(SNIHostName(name)))
      case Host.Name(n)         => params.setServerNames(java.util.List.of(SNIHostName(n.stripSuffix("."))))
      case _                    => params.setServerNames(java.util.List.of()) // an address is no server name
    socket.setSSLParameters(params)
    val c = TlsConnection(socket, channel, a.where.render, client = true, t, side.keys)
    try c.handshake(limitMillis, Some(a.settings.connectTimeout))
    catch
      case e: Throwable =>
        c.close()
        throw e
    c

  /** TLS as the server over an accepted `channel`; the handshake is the connection's [[Connection.ready]]. */
  def accept(context: SSLContext, a: StreamSocketAddress, channel: SocketChannel, peer: String): Connection =
    val socket = context.getSocketFactory.createSocket(channel.socket(), null, true).asInstanceOf[SSLSocket]
    val params = socket.getSSLParameters
    params.setProtocols(Protocols)
    params.setNeedClientAuth(a.settings.tls.verify)
    socket.setSSLParameters(params)
    socket.setUseClientMode(false)
    TlsConnection(socket, channel, peer, client = false, a.settings.tls, null)

  // ---------------------------------------------------------------------------------------------
  // Reasons

  /** Why the handshake (or the connection after it) failed, in words; `peer` is "server" or
    * "client", the other side's role.
    */
  def reason(e: Throwable, peer: String, t: TlsSettings): String =
    val chain = causes(e)
    chain.collectFirst { case r: Refused => r.getMessage.nn }.getOrElse {
      val messages = chain.flatMap(c => Option(c.getMessage)).mkString("\n")
      def has(text: String) = messages.contains(text)
      messages match
        case Alert(name) => alertReason(name, peer, t)
        case _ if has("Empty client certificate chain") => "the client sent no certificate, and verify requires one"
        case _ if has("Empty server certificate chain") => "the server sent no certificate"
        case _ if has("Unsupported or unrecognized SSL message") => s"the $peer does not speak TLS (what it sent is not a TLS record)"
        case _ if has("Remote host terminated") || chain.exists(_.isInstanceOf[EOFException]) =>
          s"the $peer closed the connection during the handshake"
        case ServerChose(v) => s"the server chose $v, and asyncpipe speaks TLS 1.3 and 1.2 only"
        case ClientOffered(v) => s"the client offered $v, and asyncpipe speaks TLS 1.3 and 1.2 only"
        case _ if has("No appropriate protocol") || has("no cipher suites in common") =>
          s"no TLS version or cipher suite in common with the $peer (asyncpipe offers TLS 1.3 and 1.2)"
        case _ => chain.last match
          case s: SocketException => IoFailure.reason(s)
          case _                  => cleaned(e)
    }

  private val Alert = """(?s).*Received fatal alert: (\w+).*""".r
  private val ServerChose = """(?s).*selected protocol version (\S+) is not accepted.*""".r
  private val ClientOffered = """(?s).*requested protocol (\S+) is not enabled.*""".r

  private def alertReason(name: String, peer: String, t: TlsSettings): String =
    val certificateAlerts = Set("bad_certificate", "certificate_unknown", "unknown_ca", "unsupported_certificate",
      "certificate_revoked", "certificate_expired", "access_denied")
    name match
      case "certificate_required" =>
        if peer == "server" then "the server requires a client certificate: give one with cert=FILE,key=FILE"
        else "the client requires a certificate (certificate_required)"
      case _ if certificateAlerts(name) =>
        if peer == "client" then s"the client refused the server's certificate ($name)"
        else if t.cert.isEmpty then s"the server refused the connection ($name); if it wants a client certificate, give one with cert=FILE,key=FILE"
        else s"the server refused our client certificate, cert=${t.cert.get} ($name)"
      case "handshake_failure" =>
        val hint = if peer == "server" && t.cert.isEmpty then "; if it wants a client certificate, give one with cert=FILE,key=FILE" else ""
        s"the $peer refused the handshake (handshake_failure: no cipher suite or certificate it accepts)$hint"
      case "protocol_version" => s"the $peer speaks no TLS version asyncpipe does (TLS 1.3, 1.2)"
      case "unrecognized_name" => s"the server does not serve the name ${t.sni.fold("asked for")(n => s"'$n'")} (unrecognized_name; sni=NAME sends another)"
      case other => s"the $peer ended the connection with the TLS alert $other"

  /** The JDK's message of `e`, without the class names it puts in front. */
  private def cleaned(e: Throwable): String =
    val m = Option(e.getMessage).getOrElse(e.getClass.getSimpleName).nn
      .replaceAll("""(?:[a-z][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error): """, "")
      .stripSuffix(".")
    if m.isEmpty then "unknown reason" else m.substring(0, 1).toLowerCase + m.substring(1)

  private def causes(e: Throwable): List[Throwable] =
    var out = List.empty[Throwable]
    var c: Throwable | Null = e
    while c != null && !out.exists(_ eq c) do
      out = c.nn :: out
      c = c.nn.getCause
    out.reverse

  /** A certificate refused by [[Explained]], its reason in words. */
  private final class Refused(reason: String, cause: Throwable) extends CertificateException(reason, cause)

  private val Day = DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss 'UTC'").withZone(ZoneOffset.UTC)

  /** Why `chain`, the certificates of the `side` ("server" or "client"), was refused; `trusted`
    * says which CAs were trusted; `socket` is the connection (its peer host is the name checked).
    */
  private def why(e: CertificateException, chain: Array[X509Certificate], side: String, trusted: String, socket: Socket | Null): String =
    val all = causes(e)
    val leaf = chain.headOption
    val now = java.util.Date()
    def whose(c: X509Certificate) =
      if leaf.exists(_ eq c) then s"the $side's certificate" else s"a certificate of the $side's chain (${c.getSubjectX500Principal.getName})"
    def reasonIs(r: CertPathValidatorException.Reason) = all.exists {
      case v: CertPathValidatorException => v.getReason == r
      case _                             => false
    }
    val messages = all.flatMap(c => Option(c.getMessage)).mkString("\n")
    if all.exists(_.isInstanceOf[CertificateExpiredException]) || reasonIs(CertPathValidatorException.BasicReason.EXPIRED) then
      chain.find(_.getNotAfter.before(now)).orElse(leaf)
        .fold(s"the $side's certificate has expired")(c => s"${whose(c)} expired on ${Day.format(c.getNotAfter.toInstant)}")
    else if all.exists(_.isInstanceOf[CertificateNotYetValidException]) || reasonIs(CertPathValidatorException.BasicReason.NOT_YET_VALID) then
      chain.find(_.getNotBefore.after(now)).orElse(leaf)
        .fold(s"the $side's certificate is not valid yet")(c => s"${whose(c)} is not valid until ${Day.format(c.getNotBefore.toInstant)}")
    else if messages.contains("No subject alternative") || messages.contains("No name matching") then
      val expected = socket match
        case s: SSLSocket => Option(s.getHandshakeSession).flatMap(h => Option(h.getPeerHost))
        case _            => None
      val names = leaf.map(namesOf).filter(_.nonEmpty).fold("no name")(_.mkString(", "))
      s"the $side's certificate is for $names, not ${expected.getOrElse("the name asked for")}"
    else if all.exists(_.isInstanceOf[CertPathBuilderException]) || reasonIs(PKIXReason.NO_TRUST_ANCHOR) ||
        messages.contains("unable to find valid certification path") then
      s"the $side's certificate is not signed by a trusted CA ($trusted)"
    else s"the $side's certificate was refused: ${cleaned(e)}"

  /** The DNS names and IP addresses a certificate is for (its subject's CN when it has none). */
  private def namesOf(c: X509Certificate): Seq[String] =
    val alternatives =
      try Option(c.getSubjectAlternativeNames).fold(Seq.empty[String])(_.asScala.toSeq.collect {
        case l if l.size >= 2 && (l.get(0) == 2 || l.get(0) == 7) => String.valueOf(l.get(1))
      })
      catch case _: CertificateException => Seq.empty
    if alternatives.nonEmpty then alternatives
    else """(?:^|,)\s*CN=([^,]+)""".r.findFirstMatchIn(c.getSubjectX500Principal.getName).map(_.group(1)).toSeq

  /** The JDK's checks, their refusals given reasons in words ([[why]]). */
  private final class Explained(delegate: X509ExtendedTrustManager, trusted: String) extends X509ExtendedTrustManager:
    private def explained(chain: Array[X509Certificate], side: String, socket: Socket | Null)(check: => Unit): Unit =
      try check
      catch case e: CertificateException => throw Refused(why(e, chain, side, trusted, socket), e)
    def checkClientTrusted(chain: Array[X509Certificate], authType: String): Unit =
      explained(chain, "client", null)(delegate.checkClientTrusted(chain, authType))
    def checkServerTrusted(chain: Array[X509Certificate], authType: String): Unit =
      explained(chain, "server", null)(delegate.checkServerTrusted(chain, authType))
    def checkClientTrusted(chain: Array[X509Certificate], authType: String, socket: Socket): Unit =
      explained(chain, "client", socket)(delegate.checkClientTrusted(chain, authType, socket))
    def checkServerTrusted(chain: Array[X509Certificate], authType: String, socket: Socket): Unit =
      explained(chain, "server", socket)(delegate.checkServerTrusted(chain, authType, socket))
    def checkClientTrusted(chain: Array[X509Certificate], authType: String, engine: SSLEngine): Unit =
      explained(chain, "client", null)(delegate.checkClientTrusted(chain, authType, engine))
    def checkServerTrusted(chain: Array[X509Certificate], authType: String, engine: SSLEngine): Unit =
      explained(chain, "server", null)(delegate.checkServerTrusted(chain, authType, engine))
    def getAcceptedIssuers: Array[X509Certificate] = delegate.getAcceptedIssuers

  /** `insecure`: every certificate accepted, no name checked. */
  private object TrustAll extends X509ExtendedTrustManager:
    def checkClientTrusted(chain: Array[X509Certificate], authType: String): Unit = ()
    def checkServerTrusted(chain: Array[X509Certificate], authType: String): Unit = ()
    def checkClientTrusted(chain: Array[X509Certificate], authType: String, socket: Socket): Unit = ()
    def checkServerTrusted(chain: Array[X509Certificate], authType: String, socket: Socket): Unit = ()
    def checkClientTrusted(chain: Array[X509Certificate], authType: String, engine: SSLEngine): Unit = ()
    def checkServerTrusted(chain: Array[X509Certificate], authType: String, engine: SSLEngine): Unit = ()
    def getAcceptedIssuers: Array[X509Certificate] = Array.empty

  /** The one certificate and key of an endpoint (a client may have none), given whatever the peer
    * asks for (as curl and openssl do: the issuers a server names are not a filter). A client
    * notes which sockets a server asked for a certificate, for the reasons of a later failure.
    */
  private[stages] final class Keys(identity: Option[(Array[X509Certificate], PrivateKey)]) extends X509ExtendedKeyManager:
    private val Alias = "asyncpipe"
    private val asked = ConcurrentHashMap.newKeySet[Socket]()

    /** Whether the server asked `socket` for a client certificate (forgotten once told). */
    def askedOf(socket: Socket): Boolean = asked.remove(socket)
    def hasIdentity: Boolean = identity.isDefined

    private def fits(keyType: String | Null): Boolean = identity.exists { (_, key) =>
      (key.getAlgorithm, keyType) match
        case (_, null)                                        => false
        case ("RSA", t)                                       => t == "RSA" || t == "RSA_OR_PSS"
        case ("EdDSA" | "Ed25519" | "Ed448", t)               => t == "EdDSA" || t == "Ed25519" || t == "Ed448"
        case (alg, t)                                         => t == alg || t.startsWith(alg + "_")
    }
    private def one(keyType: String | Null): Array[String] | Null = if fits(keyType) then Array(Alias) else null

    def getClientAliases(keyType: String, issuers: Array[Principal]): Array[String] | Null = one(keyType)
    def chooseClientAlias(keyTypes: Array[String], issuers: Array[Principal], socket: Socket): String | Null =
      if socket != null then asked.add(socket)
      if keyTypes != null && keyTypes.exists(fits) then Alias else null
    override def chooseEngineClientAlias(keyTypes: Array[String], issuers: Array[Principal], engine: SSLEngine): String | Null =
      if keyTypes != null && keyTypes.exists(fits) then Alias else null
    def getServerAliases(keyType: String, issuers: Array[Principal]): Array[String] | Null = one(keyType)
    def chooseServerAlias(keyType: String, issuers: Array[Principal], socket: Socket): String | Null = if fits(keyType) then Alias else null
    override def chooseEngineServerAlias(keyType: String, issuers: Array[Principal], engine: SSLEngine): String | Null =
      if fits(keyType) then Alias else null
    def getCertificateChain(alias: String): Array[X509Certificate] | Null =
      if alias == Alias then identity.map(_._1.clone()).orNull else null
    def getPrivateKey(alias: String): PrivateKey | Null = if alias == Alias then identity.map(_._2).orNull else null

  // ---------------------------------------------------------------------------------------------
  // PEM files

  private def unusable(a: StreamSocketAddress, option: String, path: String, why: String): CliError.Failed =
    CliError.Failed(CliError.Runtime(a.render, s"$option=$path: $why"))

  /** One `-----BEGIN LABEL-----` block: its label, whether it has headers (`Proc-Type:`: an
    * encrypted traditional key), and its bytes.
    */
  private final case class Pem(label: String, headers: Boolean, der: Array[Byte])

  private val Block = """(?s)-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----""".r

  private def pems(a: StreamSocketAddress, option: String, path: String): Seq[Pem] =
    val bytes =
      try
        val in = Files.newInputStream(Path.of(path))
        try in.readNBytes(MaxPem + 1) finally in.close()
      catch
        case e: (IOException | java.nio.file.InvalidPathException) => throw unusable(a, option, path, s"cannot read it: ${IoFailure.reason(e)}")
    if bytes.length > MaxPem then throw unusable(a, option, path, s"more than ${MaxPem >> 20} MiB: not a PEM file of certificates or a key")
    val text = String(bytes, StandardCharsets.ISO_8859_1)
    val found = Block.findAllMatchIn(text).map { m =>
      val body = m.group(2)
      val headers = body.linesIterator.exists(_.contains(':'))
      val der =
        if headers then Array.emptyByteArray
        else
          try java.util.Base64.getMimeDecoder.decode(body.filterNot(_.isWhitespace))
          catch case _: IllegalArgumentException => throw unusable(a, option, path, s"its ${m.group(1)} block is not base64: not PEM")
      Pem(m.group(1), headers, der)
    }.toSeq
    if found.isEmpty then
      val der = bytes.nonEmpty && bytes(0) == 0x30
      throw unusable(a, option, path, "not PEM (no -----BEGIN ...----- block)" +
        (if der then "; it looks like DER: openssl x509 -inform der -in FILE -out FILE.pem writes PEM (a key: openssl pkey -inform der)" else ""))
    found

  /** The certificates of a PEM file, in order (for `cert=`: the certificate, then its chain). */
  private def certificates(a: StreamSocketAddress, option: String, path: String): Seq[X509Certificate] =
    val blocks = pems(a, option, path)
    val certs = blocks.filter(_.label == "CERTIFICATE")
    if certs.isEmpty then
      val hint = if blocks.exists(_.label.endsWith("PRIVATE KEY")) then "; it holds a private key, which goes to key=FILE" else ""
      throw unusable(a, option, path, s"holds no certificate (-----BEGIN CERTIFICATE-----)$hint")
    val factory = CertificateFactory.getInstance("X.509")
    certs.zipWithIndex.map { (p, i) =>
      try factory.generateCertificate(ByteArrayInputStream(p.der)).asInstanceOf[X509Certificate]
      catch case e: CertificateException =>
        throw unusable(a, option, path, s"certificate ${i + 1} of ${certs.size} cannot be read: ${cleaned(e)}")
    }

  /** `cert=` and `key=`: the certificate with its chain, and a key that belongs to it. */
  private def identity(a: StreamSocketAddress, certPath: String, keyPath: String): (Array[X509Certificate], PrivateKey) =
    val chain = certificates(a, "cert", certPath).toArray
    val key = privateKey(a, keyPath)
    if !belongs(key, chain(0)) then
      throw unusable(a, "key", keyPath, s"does not belong to the certificate of cert=$certPath (the certificate's public key is another key's)")
    (chain, key)

  private val Convert = "convert it with openssl pkcs8 -topk8 -nocrypt -in FILE -out FILE.pk8"

  private def privateKey(a: StreamSocketAddress, path: String): PrivateKey =
    val blocks = pems(a, "key", path)
    val keys = blocks.filter(_.label.endsWith("PRIVATE KEY"))
    def bad(why: String) = unusable(a, "key", path, why)
    keys match
      case Seq() =>
        val hint = if blocks.exists(_.label == "CERTIFICATE") then "; it holds a certificate, which goes to cert=FILE" else ""
        throw bad(s"holds no private key (-----BEGIN PRIVATE KEY-----)$hint")
      case Seq(k) =>
        k.label match
          case "ENCRYPTED PRIVATE KEY" => throw bad("is encrypted, and asyncpipe reads plain keys: openssl pkey -in FILE -out FILE.plain writes one (keep it private)")
          case _ if k.headers => throw bad("is encrypted (Proc-Type: 4,ENCRYPTED), and asyncpipe reads plain keys: openssl pkey -in FILE -out FILE.plain writes one (keep it private)")
          case "PRIVATE KEY"     => pkcs8(k.der).getOrElse(throw bad("holds a private key of a kind TLS here cannot use (RSA, EC and Ed25519 keys can)"))
          case "RSA PRIVATE KEY" => pkcs8(Der.rsaToPkcs8(k.der)).getOrElse(throw bad(s"is not an RSA private key asyncpipe can read; $Convert"))
          case "EC PRIVATE KEY" =>
            Der.ecToPkcs8(k.der).flatMap(pkcs8).getOrElse(throw bad(s"is not an EC private key asyncpipe can read (one with its named curve); $Convert"))
          case other => throw bad(s"holds a '$other', which asyncpipe does not read (PKCS#8 'PRIVATE KEY', 'RSA PRIVATE KEY', 'EC PRIVATE KEY'); $Convert")
      case _ => throw bad(s"holds ${keys.size} private keys: give a file with the one key of cert=FILE")

  /** A PKCS#8 key, of whichever algorithm reads it. */
  private def pkcs8(der: Array[Byte]): Option[PrivateKey] =
    Seq("RSA", "EC", "Ed25519", "Ed448", "RSASSA-PSS").iterator.flatMap { alg =>
      try Some(KeyFactory.getInstance(alg).generatePrivate(PKCS8EncodedKeySpec(der)))
      catch case _: GeneralSecurityException => None
    }.nextOption()

  /** Whether `key` signs what the public key of `cert` verifies (for the kinds this can try). */
  private def belongs(key: PrivateKey, cert: X509Certificate): Boolean =
    val algorithm = key.getAlgorithm match
      case "RSA"                         => Some("SHA256withRSA")
      case "EC"                          => Some("SHA256withECDSA")
      case "EdDSA" | "Ed25519" | "Ed448" => Some("EdDSA")
      case _                             => None
    algorithm.forall { alg =>
      try
        val probe = "asyncpipe: does this key belong to this certificate?".getBytes(StandardCharsets.US_ASCII)
        val signer = Signature.getInstance(alg)
        signer.initSign(key)
        signer.update(probe)
        val signature = signer.sign()
        val verifier = Signature.getInstance(alg)
        verifier.initVerify(cert.getPublicKey)
        verifier.update(probe)
        verifier.verify(signature)
      catch case _: GeneralSecurityException => false
    }

  /** Just enough DER to wrap a traditional (PKCS#1 RSA, SEC 1 EC) private key in PKCS#8. */
  private object Der:
    private val RsaEncryption = Array[Byte](0x06, 0x09, 0x2a, 0x86.toByte, 0x48, 0x86.toByte, 0xf7.toByte, 0x0d, 0x01, 0x01, 0x01)
    private val EcPublicKey = Array[Byte](0x06, 0x07, 0x2a, 0x86.toByte, 0x48, 0xce.toByte, 0x3d, 0x02, 0x01)
    private val Null = Array[Byte](0x05, 0x00)
    private val VersionZero = Array[Byte](0x02, 0x01, 0x00)

    private def tlv(tag: Int, content: Array[Byte]): Array[Byte] =
      val n = content.length
      val length =
        if n < 0x80 then Array(n.toByte)
        else
          val bytes = BigInt(n).toByteArray.dropWhile(_ == 0)
          (0x80 | bytes.length).toByte +: bytes
      (tag.toByte +: length) ++ content

    private def pkcs8(algorithm: Array[Byte], key: Array[Byte]): Array[Byte] =
      tlv(0x30, VersionZero ++ tlv(0x30, algorithm) ++ tlv(0x04, key))

    def rsaToPkcs8(pkcs1: Array[Byte]): Array[Byte] = pkcs8(RsaEncryption ++ Null, pkcs1)

    /** SEC 1's ECPrivateKey names its curve in `[0]`; without it there is nothing to wrap it with. */
    def ecToPkcs8(sec1: Array[Byte]): Option[Array[Byte]] =
      for
        (tag, from, to) <- read(sec1, 0) if tag == 0x30
        curve <- elements(sec1, from, to).collectFirst { case (0xa0, f, t) => sec1.slice(f, t) }
      yield pkcs8(EcPublicKey ++ curve, sec1)

    /** The element at `at`: its tag and where its content starts and ends. */
    private def read(b: Array[Byte], at: Int): Option[(Int, Int, Int)] =
      if at + 2 > b.length then None
      else
        val tag = b(at) & 0xff
        val first = b(at + 1) & 0xff
        if first < 0x80 then Option.when(at + 2 + first <= b.length)((tag, at + 2, at + 2 + first))
        else
          val count = first & 0x7f
          if count == 0 || count > 3 || at + 2 + count > b.length then None
          else
            val length = (0 until count).foldLeft(0)((n, i) => (n << 8) | (b(at + 2 + i) & 0xff))
            val from = at + 2 + count
            Option.when(from + length <= b.length)((tag, from, from + length))

    private def elements(b: Array[Byte], from: Int, to: Int): Seq[(Int, Int, Int)] =
      val out = Seq.newBuilder[(Int, Int, Int)]
      var at = from
      var ok = true
      while ok && at < to do
        read(b, at) match
          case Some(e @ (_, _, end)) if end <= to => { out += e; at = end }
          case _                                  => ok = false
      out.result()

/** A TLS connection: an [[SSLSocket]] over a connected [[SocketChannel]]'s socket, its blocking
  * streams as the channels of [[Connection]]. `shutdownOutput` sends close_notify, then FIN: with
  * TLS 1.3 the peer may still send (a half-close, as TCP's); with TLS 1.2 a close_notify ends the
  * connection's both directions for a JDK peer (asyncpipe's own listeners among them), which
  * answers with its own close_notify, while OpenSSL-based peers may still send.
  */
final class TlsConnection private[stages] (socket: SSLSocket, channel: SocketChannel, val peer: String, client: Boolean,
    settings: TlsSettings, keys: Tls.Keys | Null) extends Connection:
  private val peerRole = if client then "server" else "client"
  @volatile private var handshaken = false
  @volatile private var askedForCertificate = false
  private lazy val input: InputStream = socket.getInputStream
  private lazy val output: OutputStream = socket.getOutputStream

  /** The handshake, within `limitMillis`; past it, [[ConnectTimedOut]] for a client's connect
    * (`connectTimeout`), else a [[TlsFailed]].
    */
  def handshake(limitMillis: Int, connectTimeout: Option[FiniteDuration]): Unit =
    if !handshaken then
      try
        socket.setSoTimeout(limitMillis.max(1))
        socket.startHandshake()
        socket.setSoTimeout(0)
        handshaken = true
      catch
        case _: SocketTimeoutException =>
          throw connectTimeout.fold[IOException](
            TlsFailed(s"no handshake from the $peerRole within ${Durations.render(Tls.HandshakeLimit)}", inHandshake = true))(ConnectTimedOut(_))
        case e: IOException => throw TlsFailed(Tls.reason(e, peerRole, settings), inHandshake = true, e)
      finally
        if keys != null then askedForCertificate = keys.askedOf(socket)

  /** A server's handshake with the client it accepted, on the connection's own thread. */
  override def ready(): Unit = handshake(Tls.HandshakeLimit.toMillis.toInt, None)

  private def failed(e: IOException, writing: Boolean): IOException = e match
    case _: TlsFailed => e
    case s: SSLException => TlsFailed(Tls.reason(s, peerRole, settings), s.isInstanceOf[SSLHandshakeException], s)
    case _ if writing && askedForCertificate && keys != null =>
      // TLS 1.3: the server judges the client's certificate after the client's handshake is done,
      // and a refusal is an alert the client finds only when it reads; a write may fail first.
      val sent = if keys.hasIdentity then s"cert=${settings.cert.get}, which it may have refused" else "none was given (cert=FILE,key=FILE): it may want one"
      TlsFailed(s"${IoFailure.reason(e)} (the server asked for a client certificate in the handshake, and $sent)", inHandshake = false, e)
    case _ => e

  val in: ReadableByteChannel = new ReadableByteChannel:
    private val heap = new Array[Byte](TlsConnection.ReadSize)
    def read(dst: ByteBuffer): Int =
      if !dst.hasRemaining then 0
      else
        try
          if dst.hasArray then
            val n = input.read(dst.array, dst.arrayOffset + dst.position, dst.remaining)
            if n > 0 then dst.position(dst.position + n)
            n
          else
            val n = input.read(heap, 0, heap.length.min(dst.remaining))
            if n > 0 then dst.put(heap, 0, n)
            n
        catch case e: IOException => throw failed(e, writing = false)
    def isOpen: Boolean = !socket.isClosed
    def close(): Unit = TlsConnection.this.close()

  val out: WritableByteChannel = new WritableByteChannel:
    private var heap: Array[Byte] = Array.emptyByteArray
    def write(src: ByteBuffer): Int =
      val n = src.remaining
      try
        if src.hasArray then
          output.write(src.array, src.arrayOffset + src.position, n)
          src.position(src.limit)
        else
          if heap.isEmpty then heap = new Array[Byte](TlsConnection.WriteSize)
          while src.hasRemaining do
            val k = src.remaining.min(heap.length)
            src.get(heap, 0, k)
            output.write(heap, 0, k)
        n
      catch case e: IOException => throw failed(e, writing = true)
    def isOpen: Boolean = !socket.isClosed
    def close(): Unit = TlsConnection.this.close()

  /** close_notify, then FIN. A failure is thrown, unlike TCP's: the peer may not have had all the
    * data (with TLS, a connection that ends without close_notify may have been cut short).
    */
  def shutdownOutput(): Unit =
    try
      output.flush()
      socket.shutdownOutput()
    catch case e: IOException => throw failed(e, writing = true)

  def resetOnClose(): Unit = Sockets.resetOnClose(channel)

  /** close_notify (unless sent), then the socket closed. The JDK's close waits for a write in
    * progress, which a peer that reads nothing holds up for ever: past [[TlsConnection.CloseWait]]
    * the socket underneath is closed, which ends that write, and the close with it.
    */
  def close(): Unit =
    if closing.compareAndSet(false, true) then
      val closer = Thread.ofVirtual().name(s"asyncpipe-tls-close $peer").start(() => try socket.close() catch case _: IOException => ())
      val done =
        try closer.join(java.time.Duration.ofMillis(TlsConnection.CloseWait))
        catch case _: InterruptedException => { Thread.currentThread.interrupt(); false }
      if !done then try channel.close() catch case _: IOException => () // the closer ends soon after
  private val closing = java.util.concurrent.atomic.AtomicBoolean()

object TlsConnection:
  /** How long a close waits for its close_notify to go out before it closes the socket under it (ms). */
  val CloseWait: Long = 1000
  /** The most a read takes at once: a TLS record's plaintext is at most 16 KiB. */
  val ReadSize: Int = 16 * 1024 + 256
  /** What a write from a direct buffer copies at once (the JDK cuts it into records). */
  val WriteSize: Int = 64 * 1024
