package asyncpipe.cli.frames

import java.io.IOException

/** A stream broke a framing rule: a frame over the size limit, a stream that ends inside a `len`
  * frame, or a frame that the output framing cannot represent. An `IOException`, so a stage
  * reports it like any other failure of its input or output. The message names the sizes, the
  * limit and the framing.
  */
final class FramingException(message: String) extends IOException(message)

/** The messages of the decoders' framing errors; `at` is the offset in the stream where the frame
  * starts.
  */
object FramingException:
  private[cli] def tooLongMessage(framing: Framing, size: Long, exact: Boolean, maxFrame: Int, at: Long): String =
    val what = if exact then s"of $size bytes" else s"of at least $size bytes (its end not yet read)"
    s"a ${framing.token} frame $what at byte $at of the stream exceeds the limit of $maxFrame bytes; frames are never split"

  private[cli] def truncatedPayload(got: Long, of: Long, at: Long): String =
    s"the stream ended inside a len frame at byte $at: $got of its $of payload bytes came"

  private[cli] def truncatedHeader(got: Int, at: Long): String =
    s"the stream ended inside a len frame header at byte $at: $got of its 4 length bytes came"
