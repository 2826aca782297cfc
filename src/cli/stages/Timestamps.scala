package asyncpipe.cli.stages

import asyncpipe.cli.frames.*

import java.nio.charset.StandardCharsets.US_ASCII
import java.time.ZoneOffset
import java.time.format.DateTimeFormatter

/** `--timestamp`: each frame of a batch prefixed with the UTC time the batch was read, to the
  * millisecond, and a space (`2026-11-27T10:12:13.123Z `): fixed width, so that logs sort and
  * line up. For `lines` and `nul` frames (a `len` frame's payload or a `raw` read has no place for
  * one that a reader would expect; [[Stages]] refuses those).
  */
object Timestamps:
  private val format = DateTimeFormatter.ofPattern("yyyy-MM-dd'T'HH:mm:ss.SSS'Z' ").withZone(ZoneOffset.UTC)
  /** The width of a prefix. */
  val Width: Int = 25

  /** The prefix for `millis` since the epoch. */
  def prefix(millis: Long): Array[Byte] = format.format(java.time.Instant.ofEpochMilli(millis)).getBytes(US_ASCII)

  /** A copy of `batch` with each frame prefixed by `prefix` (`batch` is the caller's to release). */
  def stamp(batch: FrameBatch, prefix: Array[Byte]): FrameBatch =
    val d = batch.framing.delimiter.toByte
    val out = new Array[Byte](batch.length + batch.frameCount * prefix.length)
    var at = 0
    batch.foreach { (bytes, offset, length, terminated) =>
      System.arraycopy(prefix, 0, out, at, prefix.length)
      at += prefix.length
      System.arraycopy(bytes, offset, out, at, length)
      at += length
      if terminated then
        out(at) = d
        at += 1
    }
    FrameBatch(batch.framing, out, at, batch.terminated)

  /** [[stamp]] with the time now, and `batch` released. */
  def stampNow(batch: FrameBatch): FrameBatch =
    val stamped = stamp(batch, prefix(System.currentTimeMillis()))
    batch.release()
    stamped
