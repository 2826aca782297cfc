package asyncpipe.cli.frames

/** Receives frames without a copy: `bytes[offset, offset + length)` is valid only during the call
  * (it may be a batch's own bytes, or a buffer the caller reuses), so a receiver that keeps a frame
  * copies it. [[FrameBatch.foreach]] hands its frames to one; [[FrameWriter.frameSink]] writes
  * each frame it receives.
  */
trait FrameSink:
  def frame(bytes: Array[Byte], offset: Int, length: Int, terminated: Boolean): Unit
