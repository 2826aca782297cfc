package asyncpipe.cli.frames

/** Framing: how the messages (frames) that stages pass between processes are laid out on a byte
  * stream (a pipe, a file, a stream socket), chosen with `--frame lines|len|nul|raw`.
  *
  * Wire formats:
  *   - `lines` (the default): each frame is its payload followed by one `'\n'` (0x0A). The payload
  *     is every byte before the newline, `'\r'` included (a CRLF file stays byte-exact). An empty
  *     line is a frame of 0 bytes. The last frame of a stream may lack its newline: it is decoded
  *     with `terminated = false`, and written back without one.
  *   - `nul`: the same with the terminator 0x00 (as `find -print0`, `xargs -0`).
  *   - `len`: each frame is a 4-byte big-endian unsigned length, then that many payload bytes.
  *     Binary-safe (any byte may occur in a payload), keeps datagram boundaries, and has no
  *     unterminated form: a stream that ends inside a frame is an error.
  *   - `raw`: no boundaries at all. Every chunk read is one frame, as it came (split into pieces of
  *     at most `maxFrame` bytes, since a raw stream has no boundary to keep); writing appends the
  *     payloads as they are.
  *
  * Rules:
  *   - A frame boundary is never merged or split silently. Decoding: a frame longer than
  *     `maxFrame` is a [[FramingException]] naming the size, the limit and the framing, never two
  *     frames. Encoding: a frame that holds its own terminator (a `'\n'` under `lines`, a 0 under
  *     `nul`) would come out as two frames, so the [[FrameEncoder]] refuses it (use `len` for such
  *     data); and a frame written after an unterminated one first gets the terminator the earlier
  *     frame lacked, so two inputs' frames never run together.
  *   - A copy `file | stage | file` with the same framing in and out is byte-exact, including a
  *     last frame without terminator (no newline is added that was not there) and empty frames.
  *     (Through `len` the "unterminated" mark is lost: `lines -> len -> lines` ends with a newline.)
  */
enum Framing(val token: String):
  case Lines extends Framing("lines")
  case Len extends Framing("len")
  case Nul extends Framing("nul")
  case Raw extends Framing("raw")

  /** The terminator byte of `lines` and `nul`; -1 for the others. */
  def delimiter: Int = this match
    case Lines => '\n'
    case Nul   => 0
    case _     => -1

  /** The bytes a whole frame has on the wire besides its payload (its terminator or prefix). */
  def overhead: Int = this match
    case Lines | Nul => 1
    case Len         => 4
    case Raw         => 0

object Framing:
  /** The form a `--frame` value must have, for usage errors. */
  val Expected: String = "--frame lines|len|nul|raw"

  /** The default largest frame: 16 MiB. */
  val DefaultMaxFrame: Int = 16 * 1024 * 1024

  /** The largest array the JVM reliably allocates. */
  val MaxArray: Int = Int.MaxValue - 8

  /** The framing named `token`, if one is. */
  def named(token: String): Option[Framing] = values.find(_.token == token)

  /** The length in a `len` frame's 4-byte big-endian prefix at `a(i)`. */
  private[cli] def readLength(a: Array[Byte], i: Int): Long =
    (((a(i) & 0xff) << 24) | ((a(i + 1) & 0xff) << 16) | ((a(i + 2) & 0xff) << 8) | (a(i + 3) & 0xff)) & 0xffffffffL

  /** Writes a `len` frame's 4-byte big-endian length prefix at `a(i)`. */
  private[cli] def writeLength(a: Array[Byte], i: Int, length: Int): Unit =
    a(i) = (length >>> 24).toByte
    a(i + 1) = (length >>> 16).toByte
    a(i + 2) = (length >>> 8).toByte
    a(i + 3) = length.toByte
