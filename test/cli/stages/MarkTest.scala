package asyncpipe.cli.stages

import asyncpipe.async.*
import asyncpipe.cli.command.Io
import asyncpipe.cli.frames.*
import asyncpipe.cli.system.OwnedOutput
import java.io.{ByteArrayOutputStream, PrintStream}
import java.nio.channels.Channels
import java.util.concurrent.ConcurrentLinkedQueue
import scala.jdk.CollectionConverters.*

/** Marks ([[FrameBatch.mark]]) through a [[Flow]]: a mark's receipt completes only once every
  * output it reached has handed off every frame sent before it, through fan-out, chained stages and
  * a direct copy; never when an output cannot hand off for good or has failed.
  */
class MarkTest extends munit.FunSuite with Watchdog:
  private val address = Address.parse("null:").toOption.get

  /** Sends `batches` frames, a mark after every `every` of them. */
  private final class Marking(batches: Int, every: Int, override val detached: Boolean) extends Input:
    def address: Address = MarkTest.this.address
    val marks = ConcurrentLinkedQueue[Sent]()
    @volatile var outputs: Seq[Handing] = Nil
    def open(): Unit = ()
    def close(): Unit = ()
    def pump(out: SendableChannel[FrameBatch])(using Async): Unit =
      for i <- 1 to batches do
        out.send(FrameBatch.single(s"f$i".getBytes, 0, s"f$i".length))
        if i % every == 0 then
          val sent = Sent(i)
          marks.add(sent)
          out.send(FrameBatch.mark(sent.receipt))

    /** A mark sent after `before` frames; `seen`: what each output had handed off when it completed. */
    final class Sent(val before: Int):
      @volatile var seen: Map[String, Long] = Map.empty
      val receipt: HandOffReceipt = HandOffReceipt(() => seen = outputs.map(o => o.name -> o.handed).toMap)

  /** Counts frames written and, at each hand-off, frames handed off; optionally fails on a write. */
  private final class Handing(val name: String, override val handsOff: Boolean, failAt: Int = -1) extends Output:
    @volatile var written = 0L
    @volatile var handed = 0L
    def open(): Unit = ()
    def write(batch: FrameBatch)(using Async): Unit =
      written += batch.frameCount
      if written == failAt then throw java.io.IOException(s"$name fails")
    def idle()(using Async): Unit = ()
    override def handOff()(using Async): Unit = handed = written
    def finish()(using Async): Unit = handed = written
    def abort(): Unit = ()

  private def flow(stages: Seq[Flow.Stage]): Int =
    val err = ByteArrayOutputStream()
    val io = Io(OwnedOutput(Channels.newChannel(ByteArrayOutputStream())), PrintStream(err, true, "UTF-8"))
    Flow(stages, io).run().getOrElse(-1)

  private def stage(inputs: Seq[Input], outputs: Seq[Output]) = Flow.Stage(inputs, outputs, StageOptions())

  private def checkComplete(input: Marking, names: Seq[String]): Unit =
    assert(input.marks.size > 0)
    for sent <- input.marks.asScala do
      assert(sent.receipt.isComplete, s"the mark after ${sent.before} frames was not acknowledged")
      for n <- names do
        assert(sent.seen(n) >= sent.before, s"$n had handed off ${sent.seen(n)} frames when the mark after ${sent.before} completed")

  test("one stage, two outputs: a mark completes once both handed off what came before it"):
    for detached <- Seq(false, true) do
      val in = Marking(200, 10, detached)
      val a = Handing("a", true)
      val b = Handing("b", true)
      in.outputs = Seq(a, b)
      assertEquals(flow(Seq(stage(Seq(in), Seq(a, b)))), 0)
      checkComplete(in, Seq("a", "b"))

  test("a direct copy (one detached input, one output): each mark completes"):
    val in = Marking(100, 7, detached = true)
    val a = Handing("a", true)
    in.outputs = Seq(a)
    assertEquals(flow(Seq(stage(Seq(in), Seq(a)))), 0)
    checkComplete(in, Seq("a"))

  test("two chained stages: a mark passes the channel between them and completes at the second stage's two outputs"):
    val in = Marking(300, 25, detached = true)
    val a = Handing("a", true)
    val b = Handing("b", true)
    in.outputs = Seq(a, b)
    assertEquals(flow(Seq(stage(Seq(in), Nil), stage(Nil, Seq(a, b)))), 0)
    checkComplete(in, Seq("a", "b"))

  test("an output that cannot hand off for good, or a failed one, keeps every mark from completing"):
    val in = Marking(100, 10, detached = false)
    val a = Handing("a", true)
    val queues = Handing("queues", handsOff = false)
    assertEquals(flow(Seq(stage(Seq(in), Seq(a, queues)))), 0)
    assert(in.marks.asScala.forall(!_.receipt.isComplete), "a mark completed past an output that does not hand off")
    val in2 = Marking(100, 10, detached = false)
    val b = Handing("b", true)
    val failing = Handing("failing", true, failAt = 5)
    flow(Seq(stage(Seq(in2), Seq(b, failing))))
    assert(in2.marks.asScala.forall(!_.receipt.isComplete), "a mark completed past a failed output")
