package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.frames.*
import asyncpipe.cli.system.*

import asyncpipe.async.*
import java.io.IOException
import java.nio.channels.WritableByteChannel
import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.atomic.AtomicInteger
import scala.jdk.CollectionConverters.*
import scala.util.{Failure, Success, Try}

/** Runs stages joined by channels: the engine behind `asyncpipe FROM TO`, `mux` and `run`.
  *
  * ==Shape==
  * A [[Flow.Stage]] has endpoint inputs and outputs. Stages form a chain: the output of stage k is
  * also a channel into stage k+1 (in one JVM, messages pass as they are, no framing). Every input
  * of a stage (an endpoint, or the channel from the stage before) is a channel of `--buffer`
  * messages that ends with one [[Message.End]]. A stage with one input and one output reads that
  * channel directly, or, when the input reads on a thread of its own (a stream, a UDP socket),
  * that thread writes each message itself (a direct copy, no channel: ADR 0009); any other is a
  * [[ChannelMultiplexer]]: every output receives every message, in order per input, each output
  * from its own queue (so one slow output delays the others only once its queue is full). An
  * output has finished when it has seen the End of every input of its stage; then it flushes and
  * closes (or passes one End on to the next stage).
  *
  * ==Ending== (exit status, first that applies)
  *   - A signal (SIGINT/SIGTERM/SIGHUP): inputs stop at once (what they had sent is still
  *     delivered), outputs flush whole frames and close; 130/143/129. A second signal ends the
  *     process once the writes in progress are done, never inside a frame (ADR 0021).
  *   - A failed input or output (a missing file, a framing error, a full disk): it is reported
  *     with its address and reason, the inputs stop, the rest is flushed; 1.
  *   - The reader of stdout went away: the inputs stop quietly; 141.
  *   - Every input ended: everything is flushed; 0.
  * `mux --output-error warn` keeps going when one of several outputs fails, or cannot be opened
  * (see [[OutputError]]).
  */
final class Flow(stages: Seq[Flow.Stage], io: Io, chained: Boolean = true):
  import Flow.*

  // One StageOptions for reporting: Stages gives every stage the same stats flags.
  private val json = stages.head.options.statsJson
  private val tell = Diagnostics(io.err, json)
  // In `run`, an endpoint's failure names its stage: "stage 2: file:x: ...".
  private val stageOf: java.util.IdentityHashMap[AnyRef, Int] =
    val m = java.util.IdentityHashMap[AnyRef, Int]()
    if chained && stages.size > 1 then
      for (s, k) <- stages.zipWithIndex; e <- s.inputs ++ s.outputs do m.put(e, k + 1)
    m
  private val control = FlowEnding(tell, e => if stageOf.containsKey(e) then s"stage ${stageOf.get(e)}: " else "")
  private val watches = ConcurrentLinkedQueue[ReaderWatch]()
  private val stats = StatsReporter(stages.flatMap(_.inputs), stages.flatMap(_.outputs), stages.head.options, io.err, tell)

  /** Opens every endpoint, moves the messages, and returns the exit status (or the error). Under
    * `--stats-json` the error is written here, as JSON, and returned as [[CliError.Reported]].
    */
  def run(): Either[CliError, Int] =
    flow() match
      case Left(error) if json && error.render.nonEmpty =>
        tell.error(error.render)
        Left(CliError.Reported(error))
      case outcome => outcome

  private def flow(): Either[CliError, Int] =
    val opened = scala.collection.mutable.ArrayBuffer.empty[() => Unit]
    val live = try // the stages, with the outputs that opened
      // Told where to say things first: a connect's retries are said while it opens.
      for s <- stages do { s.inputs.foreach(_.attach(tell)); s.outputs.foreach(_.attach(tell)) }
      // Every input before any output: an input that cannot be opened (a missing file, a port in
      // use) must not leave an output file truncated or created behind it.
      for s <- stages; i <- s.inputs do { i.open(); opened += (() => i.close()) }
      stages.zipWithIndex.map { (s, k) =>
        s.copy(outputs = openOutputs(s, chained = chained && k < stages.length - 1, o => opened += (() => o.abort())))
      }
    catch
      case e: CliError.Failed =>
        opened.foreach(close => Try(close()))
        return Left(e.error)
    for s <- live; i <- s.inputs do i.opened.foreach(tell.notice)
    for s <- live; o <- s.outputs do o.opened.foreach(tell.notice)
    control.outputs = live.flatMap(_.outputs)
    Signals.onStop(stop => control.stop(StopReason.Signalled(stop)))
    stats.start()
    Async.blocking {
      val last = live.length - 1
      var upstream: Option[Channel[FrameBatch]] = None
      // How many outputs read each message of stage k (its endpoints, and the next stage's channel).
      def consumers(k: Int) = live(k).outputs.size + (if chained && k < last then 1 else 0)
      val finished = live.zipWithIndex.flatMap { (stage, k) =>
        val next = if chained && k < last then Some(newChannel[FrameBatch](stage.options.buffer)) else None
        val outputs = stage.outputs ++ next.map(ChannelOutput(s"stage ${k + 2}", _, consumers(k + 1)))
        // A --buffer given asks for reading ahead, which only a queue between the two gives.
        val direct = upstream.isEmpty && outputs.size == 1 && stage.inputs.size == 1 &&
          stage.inputs.head.detached && !stage.inputs.head.dropsWhenFull && !stage.options.givenOptions(StageOptions.buffer.name)
        val sources = if direct then Nil else upstream.toSeq ++ stage.inputs.map(feed(_, stage.options, consumers(k)))
        upstream = next
        if direct then Seq(copy(stage.inputs.head, outputs.head, OutputGroup(1, stage.options.outputError), stage.options))
        else connect(sources, outputs, stage.options)
      }
      finished.foreach(_.await)
    }
    for s <- live; o <- s.outputs; note <- o.endNotes do tell.warning(note)
    watches.asScala.foreach(_.stop())
    val written = control.noOutputFailed
    live.foreach(_.inputs.foreach(i => Try(i.settle(written))))
    live.foreach(_.inputs.foreach(i => Try(i.close())))
    stats.finish()
    control.outcome

  /** Opens the outputs of `stage` (`opened` is told of each) and returns those that opened. Under
    * `--output-error warn` an output that cannot be opened is reported and left out, as long as
    * the stage keeps another output (one of its own, or the next stage when `chained`); else, and
    * under `exit`, its failure ends the flow before anything moves.
    */
  private def openOutputs(stage: Stage, chained: Boolean, opened: Output => Unit): Seq[Output] =
    val kept = scala.collection.mutable.ArrayBuffer.empty[Output]
    for (o, j) <- stage.outputs.zipWithIndex do
      try
        o.open()
        opened(o)
        kept += o
      catch
        case e: CliError.Failed if stage.options.outputError == OutputError.Warn &&
            (chained || kept.nonEmpty || j < stage.outputs.size - 1) =>
          control.warn(e.error)
    kept.toSeq

  /** A channel of `buffer` messages: a rendezvous for 0. */
  private def newChannel[T](buffer: Int): Channel[T] =
    if buffer == 0 then SyncChannel[T]() else BufferedChannel[T](buffer)

  /** Starts `input` and returns the channel of its messages, which ends with one End: after the
    * input ended or failed, or once the flow stops. A pump that may block in a system call runs on
    * a thread of its own, which a stop abandons (the process is about to exit); any other runs
    * in a group that a stop cancels and waits for, so that nothing of it follows the End.
    */
  private def feed(input: Input, options: StageOptions, consumers: Int)(using Async): ReadableChannel[FrameBatch] =
    val channel = newChannel[FrameBatch](options.buffer)
    val shared = if options.timestamp then Stamping(Sharing(channel, consumers)) else Sharing(channel, consumers)
    Future {
      val outcome: Option[Try[Unit]] =
        if input.detached then
          val done = detachedPump(input, shared)
          Async.await(Async.race(done, control.stopped))
          if done.isCompleted then Some(done.result) else None
        else
          Async.group {
            val done = Future(input.pump(shared))
            Async.await(Async.race(done, control.stopped))
            if done.isCompleted then Some(done.result) else None
          }
      outcome.foreach(control.inputEnded(input, _))
      channel.send(Message.End)
    }
    channel

  private def detachedPump(input: Input, channel: SendableChannel[FrameBatch]): Future[Unit] =
    val done = Promise[Unit]()
    Thread.ofPlatform().daemon().name(s"asyncpipe-read ${input.address.render}").start { () =>
      done.complete(Try(Async.blocking(input.pump(channel))))
    }
    done.future

  /** Copies a detached `input` (a stream, a UDP socket) to the stage's only `output` on the
    * input's own thread, as `cat` does: each message is written by the thread that read it, with
    * no channel and no second thread between (a hand-over costs two thread wake-ups per message, which made a copy stage
    * use twice the CPU of `cat`). The output is flushed whenever the input has nothing at hand.
    * The future ends when the input has ended (or failed, or the flow stopped) and the output has
    * finished; a stop waits for a write in progress, and what the input reads after it is dropped.
    */
  private def copy(input: Input, output: Output, group: OutputGroup, options: StageOptions)(using Async): Future[Unit] =
    watch(output, group)
    val sink = DirectSink(input, output, group, control, pacerFor(output, options), options.timestamp)
    Future {
      val done = detachedPump(input, sink)
      Async.await(Async.race(done, control.stopped))
      sink.halt()
      if done.isCompleted then control.inputEnded(input, done.result)
      sink.finish()
    }

  /** Joins `sources` to `outputs` and returns the futures that end when each output has finished. */
  private def connect(sources: Seq[ReadableChannel[FrameBatch]], outputs: Seq[Output], options: StageOptions)(using Async): Seq[Future[Unit]] =
    val group = OutputGroup(outputs.size, options.outputError)
    outputs.foreach(watch(_, group))
    if sources.size == 1 && outputs.size == 1 then
      Seq(Future(drain(outputs.head, Inbox.Direct(sources.head), 1, group, pacerFor(outputs.head, options))))
    else
      val mux = ChannelMultiplexer[FrameBatch](math.max(1, options.buffer))
      val queues = outputs.map { o =>
        val q = BufferedChannel[Try[FrameBatch]](math.max(1, options.buffer))
        mux.addSubscriber(q)
        o -> q
      }
      sources.foreach(mux.addPublisher)
      queues.map((o, q) => Future(drain(o, Inbox.Muxed(q), sources.size, group, pacerFor(o, options))))

  /** With `--rate-limit`, a pacer of its own for each output of a stage's endpoints (the channel
    * into the next stage of `run` is not one: that stage paces its own). Once the flow stops it
    * no longer waits: what was read goes out at once, as without a limit.
    */
  private def pacerFor(output: Output, options: StageOptions): Pacer | Null =
    options.rateLimit match
      case Some(limit) if !output.isInstanceOf[ChannelOutput] => Pacer(limit, sleep = control.pause)
      case _                                                   => null

  /** Ends `output` as a failed write would, when it fails while the flow is not writing it: its
    * idle flush failed ([[Output.onFailureAlone]]), or it writes into a pipe or socket whose
    * reader went away ([[ReaderWatch]], EPIPE).
    */
  private def watch(output: Output, group: OutputGroup): Unit =
    output.onFailureAlone(e => control.outputFailed(output, e, group))
    val fd = output.readerFd
    if fd >= 0 then watches.add(ReaderWatch.start(fd, () => output.counters.bytes)(() => control.readerGone(output, group)))

  /** Writes what comes in to `output` until the End of each of its `ends` inputs has come. After a
    * failure it goes on reading (and dropping, releasing each message), so that nothing upstream
    * waits for it.
    */
  private def drain(output: Output, inbox: Inbox, ends: Int, group: OutputGroup, pacer: Pacer | Null)(using Async): Unit =
    var seen = 0
    var ok = true
    def guarded(op: => Unit): Unit =
      if ok then
        try op
        catch case e: Exception if !cancelled(e) =>
          ok = false
          control.outputFailed(output, e, group)
    while seen < ends do
      val m = inbox.poll() match
        case Some(m) => m
        case None =>
          guarded(output.idle())
          inbox.take()
      if m == null then seen = ends // closed: nothing more will come
      else if Message.isEnd(m) then seen += 1
      else if m.isMark then { if ok then guarded(output.mark(m)) }
      else if ok then
        if pacer == null then guarded(output.write(m))
        else if pacer.whole(m) then
          val waited = pacer.admit(m.length)
          guarded { output.write(m); if waited then output.idle() }
        else pacer.pass(m)((piece, waited) => if ok then guarded { output.write(piece); if waited then output.idle() })
      else m.release()
    guarded(if control.hasFailed then output.finishFailed() else output.finish())

object Flow:
  /** Whether `e` is a cancellation: the flow stopping a party, not a failure of an endpoint. */
  private def cancelled(e: Throwable): Boolean = e.isInstanceOf[java.util.concurrent.CancellationException]

  /** One stage: its own endpoints, and its options (framing, buffer, policies). */
  final case class Stage(inputs: Seq[Input], outputs: Seq[Output], options: StageOptions)

  /** The channel an input's pump sends into: each message is first shared among the `consumers`
    * outputs of the stage (see [[FrameBatch.share]]). A message `trySend` could not place stays
    * shared and is never returned to its pool, which only costs an allocation.
    */
  private final class Sharing(channel: SendableChannel[FrameBatch], consumers: Int) extends SendableChannel[FrameBatch]:
    def send(x: FrameBatch)(using Async): Unit =
      x.share(consumers)
      channel.send(x)
    def trySend(x: FrameBatch): Boolean =
      x.share(consumers)
      channel.trySend(x)

  /** `--timestamp`: each batch an input sends is stamped with the time it is sent, which is when
    * it was read ([[Timestamps]]).
    */
  private final class Stamping(channel: SendableChannel[FrameBatch]) extends SendableChannel[FrameBatch]:
    def send(x: FrameBatch)(using Async): Unit = channel.send(if x.isMark then x else Timestamps.stampNow(x))
    /** Refused, `x` stays the caller's, as it would be without the stamp. */
    def trySend(x: FrameBatch): Boolean =
      if x.isMark then return channel.trySend(x)
      val stamped = Timestamps.stamp(x, Timestamps.prefix(System.currentTimeMillis()))
      val sent = channel.trySend(stamped)
      if sent then x.release()
      sent

  /** What a directly copied input sends into (see `Flow.copy`): each message is written to
    * `output` at once, on the sender's thread. After the output fails, or after `halt`, a message
    * is dropped and `send` throws a `CancellationException`, which ends the input's pump.
    */
  private final class DirectSink(input: Input, output: Output, group: OutputGroup, control: FlowEnding, pacer: Pacer | Null,
      timestamp: Boolean) extends KernelSink:
    // Held while a message is written, so that `halt` waits for a write in progress.
    private val lock = java.util.concurrent.locks.ReentrantLock()
    private var open = true // under lock
    @volatile private var ok = true

    // Paced: each piece is written and flushed on its turn, the waits outside the lock.
    def send(batch: FrameBatch)(using Async): Unit =
      if batch.isMark then return marked(batch)
      val x = if timestamp then Timestamps.stampNow(batch) else batch
      if pacer == null then sendNow(x, flush = !input.atHand)
      else if pacer.whole(x) then
        val waited = pacer.admit(x.length)
        sendNow(x, flush = waited || !input.atHand)
      else pacer.pass(x)((piece, waited) => sendNow(piece, flush = waited || !input.atHand))

    private def sendNow(x: FrameBatch, flush: Boolean)(using Async): Unit =
      lock.lock()
      try
        if !open || !ok then
          x.release()
          throw java.util.concurrent.CancellationException("the output has stopped")
        try
          output.write(x)
          if flush then output.idle()
        catch case e: Exception if !cancelled(e) =>
          failed(e)
          throw java.util.concurrent.CancellationException("the output has failed")
      finally lock.unlock()

    /** A kernel copy under a limit of bytes moves at most a twentieth of a second's worth at a
      * time; a limit of frames, or a lower one, reads the usual way, where frames can be counted
      * and batches cut ([[Pacer]]).
      */
    def kernelTarget: KernelTarget | Null =
      if timestamp then null // each frame is changed on its way
      else if pacer == null || (!pacer.limit.frames && pacer.slice >= KernelCopy.Chunk) then output.kernelTarget
      else null

    /** A mark: the output hands off what it was sent before it (under the lock, as a write). */
    private def marked(m: FrameBatch)(using Async): Unit =
      lock.lock()
      try
        if !open || !ok then throw java.util.concurrent.CancellationException("the output has stopped")
        try output.mark(m)
        catch case e: Exception if !cancelled(e) =>
          failed(e)
          throw java.util.concurrent.CancellationException("the output has failed")
      finally lock.unlock()

    override def bytesTarget: WritableByteChannel | Null =
      if timestamp || pacer != null then null else output.bytesTarget

    def moveInKernel(n: Long)(move: Long => Long): Boolean =
      if pacer != null then pacer.admit(n)
      lock.lock()
      try
        if !open || !ok then throw java.util.concurrent.CancellationException("the output has stopped")
        try
          output.kernelMove {
            var left = n
            var refused = false
            while left > 0 && !refused do
              val m = move(left)
              if m == -Splice.EINVAL && left == n then refused = true
              else if m < 0 then throw Splice.failure(m)
              else if m == 0 then left = 0 // the input ended early (a file that shrank)
              else left -= m
            if !refused then output.movedInKernel(n - left)
            !refused
          }
        catch case e: Exception if !cancelled(e) =>
          failed(e)
          throw java.util.concurrent.CancellationException("the output has failed")
      finally lock.unlock()

    /** Not offered: only an input that must never wait calls it (`Input.dropsWhenFull`), and
      * such an input is never copied directly.
      */
    def trySend(x: FrameBatch): Boolean =
      throw UnsupportedOperationException("a direct copy's sink waits for its output; use send")

    /** After this, no message is written: waits for a write in progress. */
    def halt(): Unit =
      lock.lock()
      try open = false
      finally lock.unlock()

    /** Hands on everything written and releases the output (after `halt`). */
    def finish()(using Async): Unit =
      if ok then
        try if control.hasFailed then output.finishFailed() else output.finish()
        catch case e: Exception if !cancelled(e) => failed(e)

    private def failed(e: Exception): Unit =
      ok = false
      control.outputFailed(output, e, group)

  /** The messages an output reads: from one channel, or from its multiplexer queue. */
  private trait Inbox:
    /** The next message if one is ready, without waiting. */
    def poll(): Option[FrameBatch | Null]
    /** The next message; null once the channel is closed and empty. */
    def take()(using Async): FrameBatch | Null

  private object Inbox:
    final class Direct(c: ReadableChannel[FrameBatch]) extends Inbox:
      def poll() = c.tryRead().map(unwrap)
      def take()(using Async) = unwrap(c.read())
      private def unwrap(t: Try[FrameBatch]): FrameBatch | Null = t.getOrElse(null)

    final class Muxed(c: ReadableChannel[Try[FrameBatch]]) extends Inbox:
      def poll() = c.tryRead().map(unwrap)
      def take()(using Async) = unwrap(c.read())
      private def unwrap(t: Try[Try[FrameBatch]]): FrameBatch | Null = t.flatten.getOrElse(null)

  /** The outputs of one stage, for `--output-error`: how many are still working. */
  private final class OutputGroup(size: Int, val policy: OutputError):
    private val working = AtomicInteger(size)
    /** Counts a failure; true when it was the last working output. */
    def lost(): Boolean = working.decrementAndGet() == 0

  /** The shared state of a flow's ending: the stop, errors, and the status they make. */
  /** @param where what a failure of endpoint `e` is prefixed with: its stage in `run` */
  private final class FlowEnding(tell: Diagnostics, where: AnyRef => String):
    val stopped: Promise[Unit] = Promise[Unit]()
    @volatile private var ending: Option[StopReason] = None
    private val errors = ConcurrentLinkedQueue[CliError]()
    private val failedOutputs = java.util.concurrent.ConcurrentHashMap.newKeySet[Output]()
    /** No output has failed: every frame passed on was written. */
    def noOutputFailed: Boolean = failedOutputs.isEmpty
    @volatile private var warned = false

    // Opened with `stopped`: a paced output's waits end at a stop (the rest goes out at once).
    private val stopLatch = java.util.concurrent.CountDownLatch(1)

    // Told once, at the stop: outputs end their waits that are not writes ([[Output.stopping]]).
    @volatile var outputs: Seq[Output] = Nil

    def stop(why: StopReason): Unit =
      val first = synchronized { val f = ending.isEmpty; if f then ending = Some(why); f }
      stopped.complete(Success(()))
      stopLatch.countDown()
      if first then outputs.foreach(o => Try(o.stopping()))

    /** Waits `nanos`, or less if the flow stops meanwhile (or was stopped). */
    def pause(nanos: Long): Unit =
      try stopLatch.await(nanos, java.util.concurrent.TimeUnit.NANOSECONDS)
      catch case _: InterruptedException => Thread.currentThread.interrupt()

    def failed(error: CliError): Unit =
      errors.add(error)
      stop(StopReason.Failed(error))

    /** `error` of endpoint `e`, its subject prefixed with where `e` is (its stage in `run`). */
    private def named(e: AnyRef, error: CliError): CliError =
      val at = where(e)
      if at.isEmpty then error
      else error match
        case CliError.Runtime(subject, reason) => CliError.Runtime(at + subject, reason)
        case CliError.Expired(subject, reason) => CliError.Expired(at + subject, reason)
        case other                             => other

    /** An input or output failed: the flow ends with an error, not as a complete stream. */
    def hasFailed: Boolean = !errors.isEmpty

    /** Reports how an input's pump ended, if it failed (a cancellation is the flow stopping it). */
    def inputEnded(input: Input, outcome: Try[Unit]): Unit =
      input.endNotes.foreach(tell.warning)
      outcome match
        case Failure(e) if !cancelled(e) => failed(named(input, EndpointFailure(input.address.render, "read", e)))
        case _                           => ()

    /** The reader of `output` went away while it was idle: as a write that met EPIPE. */
    def readerGone(output: Output, group: OutputGroup): Unit =
      outputFailed(output, DownstreamGone(IOException("Broken pipe")), group)

    /** Releases `output`, whose write or finish failed with `e` (only its first failure counts:
      * a watched reader's going and the next write's EPIPE are one). Under `--output-error warn` the
      * failure is reported now (a closed pipe quietly) and the others go on, until none is left;
      * otherwise the flow stops.
      */
    def outputFailed(output: Output, e: Exception, group: OutputGroup): Unit =
      if failedOutputs.add(output) then lose(output, e, group)

    private def lose(output: Output, e: Exception, group: OutputGroup): Unit =
      Try(output.abort())
      val pipe = e match
        case io: IOException => OwnedOutput.isBrokenPipe(io)
        case _               => false
      val error = named(output, EndpointFailure(output.name, "write", e))
      val last = group.lost()
      if group.policy == OutputError.Exit || last then
        if pipe then stop(StopReason.PipeClosed) else failed(error)
      else if !pipe then warn(error)

    /** Reports a failed output under `--output-error warn`: the flow goes on, and ends with 1. */
    def warn(error: CliError): Unit =
      tell.warning(error.render + " (going on with the other outputs)")
      warned = true

    /** The status: a signal's (the first one's, [[Signals.received]]; also when the pipe closed
      * first, as when one signal stops this stage and the next), else the first error (the others
      * printed here), else 141 for a closed pipe, else 1 if a warned failure happened, else 0.
      */
    def outcome: Either[CliError, Int] =
      val all = errors.asScala.toList
      val pipe = ending.contains(StopReason.PipeClosed) && all.isEmpty
      val signal = (if pipe then Signals.receivedWithin(Signals.PipeGraceMillis) else Signals.received)
        .orElse(ending.collect { case StopReason.Signalled(stop) => stop })
      signal match
        case Some(stop) =>
          all.foreach(e => tell.error(e.render))
          Right(stop.exitCode)
        case None => settled(all)

    private def settled(all: List[CliError]): Either[CliError, Int] =
      ending match
        case _ if all.nonEmpty =>
          all.tail.foreach(e => tell.error(e.render))
          Left(all.head)
        case Some(StopReason.PipeClosed) => Left(CliError.DownstreamGone)
        case _ if warned             => Right(ExitCode.Runtime)
        case _                       => Right(ExitCode.Ok)
