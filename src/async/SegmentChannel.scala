package asyncpipe.async

import scala.util.Try

// API stub for helpers; replaced by the implementation.
private[async] class SegmentChannel[T](val capacity: Int) extends Channel[T]:
  def send(x: T)(using Async): Unit = ???
  def trySend(x: T): Boolean = ???
  val canRead: Async.Source[Try[T]] = null
  def read()(using Async): Try[T] = ???
  def tryRead(): Option[Try[T]] = ???
  def close(): Unit = ???
  def isClosed: Boolean = ???
  /** Throws an AssertionError with `dump` in its message if an invariant is broken (quiescent channel only). */
  def checkInvariants(): Unit = ???
  /** A compact description of counters and cells, for failure messages. */
  def dump: String = ???

private[async] object SegmentChannel:
  final val Unbounded = -1
  final val SegmentSize = 32
