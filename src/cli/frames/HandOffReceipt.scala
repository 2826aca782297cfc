package asyncpipe.cli.frames

import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

/** What a mark ([[FrameBatch.mark]]) carries through a flow: it completes once every output the
  * mark reached has handed off everything written before it ([[asyncpipe.cli.stages.Output.mark]]).
  *
  * It counts the acknowledgements owed: one for the source that sends the mark; whoever hands the
  * mark to `n` consumers adds `n - 1` first (what [[FrameBatch.share]] does for a mark), so the
  * count never reaches zero while a copy of the mark is still on its way. An output that cannot
  * hand off for good (a channel passes the mark on instead; a broadcast's queues, a failed output
  * never acknowledge) keeps it from completing: then nothing is claimed written.
  *
  * @param done run once, by the thread of the last acknowledgement
  */
final class HandOffReceipt(done: () => Unit):
  private val owed = AtomicInteger(1)
  private val completed = CountDownLatch(1)

  /** `more` further acknowledgements are owed (the mark goes to that many more readers). */
  def hold(more: Int): Unit = if more > 0 then owed.addAndGet(more)

  /** One reader's outputs have handed off everything before the mark. */
  def ack(): Unit =
    if owed.decrementAndGet() == 0 then
      try done() finally completed.countDown()

  def isComplete: Boolean = completed.getCount == 0

  /** Waits up to `millis` for completion; whether it came. */
  def await(millis: Long): Boolean = completed.await(millis, TimeUnit.MILLISECONDS)
