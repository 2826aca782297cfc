package asyncpipe.cli.frames

import java.nio.charset.StandardCharsets

/** A frame's payload is `bytes[0, length)`; `terminated` is false only for the last frame of a
  * `lines` or `nul` stream that ended without its terminator. [[FrameBatch.frames]] hands out a
  * fresh array per frame (`length == bytes.length`), which the receiver owns. Equality compares
  * the payload and `terminated`.
  */
final class Frame(val bytes: Array[Byte], val length: Int, val terminated: Boolean):
  if length < 0 || length > bytes.length then
    throw IllegalArgumentException(s"length was $length, must be in [0, ${bytes.length}]")

  /** The payload as an array of exactly `length` bytes (`bytes` itself when it is that already). */
  def payload: Array[Byte] = if length == bytes.length then bytes else java.util.Arrays.copyOf(bytes, length)

  /** The payload decoded as UTF-8 (malformed input replaced), for messages and tests. */
  def utf8: String = String(bytes, 0, length, StandardCharsets.UTF_8)

  override def equals(other: Any): Boolean = other match
    case f: Frame =>
      f.terminated == terminated && java.util.Arrays.equals(bytes, 0, length, f.bytes, 0, f.length)
    case _ => false

  override def hashCode: Int =
    var h = if terminated then 1 else 0
    var i = 0
    while i < length do
      h = 31 * h + bytes(i)
      i += 1
    h

  override def toString: String =
    val shown = 40
    val text = String(bytes, 0, math.min(length, shown), StandardCharsets.ISO_8859_1)
      .flatMap(c => if c >= ' ' && c < 0x7f && c != '\\' then c.toString else f"\\x${c.toInt}%02x")
    val more = if length > shown then "..." else ""
    val mark = if terminated then "" else ", unterminated"
    s"Frame($length bytes: \"$text$more\"$mark)"

object Frame:
  def apply(bytes: Array[Byte], terminated: Boolean = true): Frame = new Frame(bytes, bytes.length, terminated)
  def apply(text: String): Frame = apply(text.getBytes(StandardCharsets.UTF_8))
