package asyncpipe.io

import java.io.IOException
import java.nio.{ByteBuffer, CharBuffer}
import java.nio.charset.{Charset, CodingErrorAction, StandardCharsets}

/** Text that cannot be decoded or encoded in the charset asked for, and where. */
final class TextCodingException(message: String) extends IOException(message)

/** Bytes to text and back, strictly: malformed input and unencodable text are errors (as in
  * `java.nio.file.Files.readString` / `writeString`), never a silent replacement character.
  * UTF-8 and the single-byte charsets take the JDK's intrinsic `String` paths and are checked
  * afterwards only when a replacement character appears; other charsets use a strict coder.
  */
private[io] object Text:
  /** The text of `bytes[0, len)` and how many bytes it used: all of them, except that a
    * character cut off at the end is left over when `atEnd` is false.
    */
  final case class Decoded(text: String, consumed: Int)

  /** `offset` names where `bytes` started in the file, for the error message. */
  def decode(bytes: Array[Byte], len: Int, charset: Charset, atEnd: Boolean, offset: Long): Decoded =
    if charset == StandardCharsets.UTF_8 then
      val consumed = if atEnd then len else len - cutUtf8Tail(bytes, len)
      val s = String(bytes, 0, consumed, charset)
      if s.indexOf('\uFFFD') >= 0 then strictDecode(bytes, consumed, charset, atEnd = true, offset) // a real U+FFFD, or malformed
      Decoded(s, consumed)
    else if charset == StandardCharsets.ISO_8859_1 || charset == StandardCharsets.US_ASCII then
      val s = String(bytes, 0, len, charset)
      if s.indexOf('\uFFFD') >= 0 then strictDecode(bytes, len, charset, atEnd = true, offset)
      Decoded(s, len)
    else strictDecode(bytes, len, charset, atEnd, offset)

  /** Decodes with a reporting decoder: malformed or unmappable input throws, naming its offset. */
  private def strictDecode(bytes: Array[Byte], len: Int, charset: Charset, atEnd: Boolean, offset: Long): Decoded =
    val in = ByteBuffer.wrap(bytes, 0, len)
    val out = CharBuffer.allocate(math.ceil(len * charset.newDecoder().maxCharsPerByte).toInt + 1)
    val decoder = charset.newDecoder().onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)
    val r = decoder.decode(in, out, atEnd)
    if r.isError then
      throw TextCodingException(s"malformed ${charset.name} input at byte ${offset + in.position()} (${r.length} bytes)")
    if atEnd then
      val f = decoder.flush(out)
      if f.isError then throw TextCodingException(s"malformed ${charset.name} input at the end (byte ${offset + len})")
    Decoded(out.flip().toString, in.position())

  /** How many bytes at the end of `bytes[0, len)` begin a UTF-8 sequence that does not end there. */
  private def cutUtf8Tail(bytes: Array[Byte], len: Int): Int =
    var i = len - 1
    val stop = math.max(0, len - 4)
    while i >= stop && (bytes(i) & 0xc0) == 0x80 do i -= 1 // continuation bytes
    if i < stop then 0 // no lead byte in reach: malformed, left for the check
    else
      val lead = bytes(i) & 0xff
      val need = if lead < 0x80 then 1 else if lead >>> 5 == 0x6 then 2 else if lead >>> 4 == 0xe then 3 else if lead >>> 3 == 0x1e then 4 else 1
      if len - i < need then len - i else 0

  /** `s` encoded; text the charset cannot represent (an unpaired surrogate, say) throws, naming
    * the char index. One strict encoder for every charset, fed slices of `s` through a small char
    * array (`getChars` and the encoders' ASCII loops are vectorised), into one array sized for
    * single-byte text and grown only for text that needs more: as fast as `String.getBytes` here,
    * which would replace an unencodable char with '?' instead.
    */
  def encode(s: String, charset: Charset): Array[Byte] =
    val encoder = charset.newEncoder().onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)
    val slice = new Array[Char](math.min(math.max(s.length, 1), SliceChars))
    val in = CharBuffer.wrap(slice).limit(0) // empty, to be filled
    var out = ByteBuffer.wrap(new Array[Byte](math.max(s.length, 16)))
    var next = 0 // the first char of `s` not yet in `slice`
    var done = false
    while !done do
      in.compact() // keeps a high surrogate whose low half is in the next slice
      val take = math.min(in.remaining, s.length - next)
      s.getChars(next, next + take, slice, in.position())
      in.position(in.position() + take)
      next += take
      in.flip()
      val last = next == s.length
      var r = encoder.encode(in, out, last)
      while r.isOverflow do
        out = grow(out)
        r = encoder.encode(in, out, last)
      if r.isError then
        val at = next - in.limit() + in.position() // `slice` holds s[next - limit, next)
        throw TextCodingException(f"cannot encode the text as ${charset.name}: ${describe(r)} U+${s.charAt(at).toInt}%04X at char $at")
      done = last
    while encoder.flush(out).isOverflow do out = grow(out)
    val bytes = out.array
    if out.position() == bytes.length then bytes else java.util.Arrays.copyOf(bytes, out.position())

  private final val SliceChars = 64 * 1024

  private def grow(out: ByteBuffer): ByteBuffer =
    val bigger = ByteBuffer.wrap(java.util.Arrays.copyOf(out.array, out.capacity + out.capacity / 2 + 16))
    bigger.position(out.position())
    bigger

  private def describe(r: java.nio.charset.CoderResult): String =
    if r.isMalformed then "an unpaired surrogate" else s"a character it cannot represent"
