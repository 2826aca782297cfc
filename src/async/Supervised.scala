package asyncpipe.async

import java.util.concurrent.{CancellationException, ConcurrentLinkedQueue}
import java.util.concurrent.atomic.{AtomicInteger, AtomicReference}
import scala.annotation.implicitNotFound
import scala.util.{Failure, Success, Try}
import scala.util.control.NonFatal

/** The capability of an [[Async.supervised]] body: an [[Async]] whose futures are supervised.
  *
  * A future started with it is a child of the supervised scope:
  *   - `Future { body }` starts a '''daemon''' child: the scope does not wait for it; once the
  *     body and every user child have completed, the scope cancels the daemons still running
  *     (and awaits their end), as `Async.blocking` and `Async.group` do with every future.
  *   - `Future.user { body }` starts a '''user''' child: the scope completes only once it has
  *     completed, as the body must.
  *   - Either kind that fails (ends with an exception of its own, not with the cancel of its
  *     future) fails the scope: every other child and the body are cancelled, and the scope
  *     rethrows that first failure once all have ended.
  *
  * Supervision belongs to the scope, not to the code inside it: a child's body is a scope of its
  * own (its futures end with it, unsupervised, as everywhere in the library), and so is an
  * `Async.group` opened inside the supervised body. Open `Async.supervised` there to supervise
  * them. See `doc/adr/0027-supervised-scopes.md`.
  */
@implicitNotFound("Future.user starts a user child of a supervised scope: call it inside Async.supervised { ... }")
sealed trait Supervised extends Async:
  private[async] def supervisor: Supervisor

/** How `Async.supervised`, `Future.user` and `Future.detached` work; the rules are at
  * [[Async.supervised]] and in `doc/adr/0027-supervised-scopes.md`.
  *
  * One [[Supervisor]] per scope holds the scope's completion group (the body's future, its
  * children, and whatever else the body starts: nested groups, IO workers, a `withTimeout`'s
  * work), a count of what must complete before the scope may end (the body and the user
  * children), and one word, `outcome`, that decides how the scope ends:
  *
  * {{{
  *   null ──a child or the body fails (not by a cancel)──▶ the failure (cancels the group)
  *     │
  *     └────the body and every user child have completed───▶ Ended
  * }}}
  *
  * Whichever compare-and-set from null comes first decides; a later failure is attached to the
  * first as suppressed, and after `Ended` a failure is ignored (only daemons still run then, and
  * they are being cancelled). Either move completes `ending`, which the calling thread awaits
  * before it cancels and awaits the group.
  */
private[async] object Supervision:

  /** `Async.supervised`: the body runs as a future of the scope (so that the supervisor can
    * cancel it as it cancels any child, with the library's cancellation of waits); the calling
    * thread waits for the scope's end, then cancels and awaits every member, then returns the
    * body's value or throws.
    */
  def run[T](body: Supervised ?=> T)(using outer: Async): T =
    val sup = Supervisor(outer.runtime)
    outer.group.add(sup.group) // a cancel of the enclosing scope reaches every member (false: cancelled already)
    var cutShort: CancellationException | Null = null // by a cancel of the enclosing scope
    val main = RunnableFuture[T]((a: Async) ?=> sup.guard(body(using Scope(a, sup))), sup)
    try
      main.onComplete(Watch(sup, main, counted = true))
      if sup.group.add(main) then main.start()
      try outer.await(sup.ending)
      catch case e: CancellationException => cutShort = e
      // the group was cancelled from outside (the enclosing scope, or `Async.current.group.cancel()`
      // in the body) if it is cancelled now with no failure: read before our own cancel below
      if cutShort == null && sup.group.isCancelled && !sup.failed then
        cutShort = CancellationException("the supervised scope was cancelled")
    finally
      sup.group.cancelAndAwait() // the daemons, and on a failure or a cancel everything else
      outer.group.remove(sup.group)
    sup.failure match
      case null =>
        if cutShort != null then throw cutShort
        main.poll() match
          case Some(Success(v)) => v
          case Some(Failure(e)) => throw e // cancelled with the group: cutShort said so already
          case None             => throw IllegalStateException("the body of a supervised scope ended without a value")
      case first => throw first

  /** `Future { }` (user = false) and `Future.user { }` (user = true) in a supervised scope. */
  def start[T](scope: Supervised, body: Async ?=> T, user: Boolean): Future[T] =
    val sup = scope.supervisor
    val f = RunnableFuture[T]((a: Async) ?=> sup.guard(body(using a)), scope)
    if user then sup.userStarted()
    f.onComplete(Watch(sup, f, counted = user)) // before it can complete: no end goes unseen
    if sup.group.add(f) then f.start()
    f

  /** `Future.detached`: a future of a root scope of its own, which nobody cancels or awaits. */
  def detached[T](body: Async ?=> T, runtime: Runtime): Future[T] =
    val root = Detached(runtime)
    val f = RunnableFuture[T](body, root)
    if root.group.add(f) then f.start()
    f

  /** What the body of a supervised scope holds: the body's own future for cancellation (its
    * waits, `uninterruptible`), the scope's group for the futures it starts.
    */
  private final class Scope(body: Async, val supervisor: Supervisor) extends Supervised:
    def group: CompletionGroup = supervisor.group
    def runtime: Runtime = supervisor.runtime
    def isCancelled: Boolean = body.isCancelled
    private[async] def owner: RunnableFuture[?] | Null = body.owner

  /** The root scope of one detached future: never cancelled, never awaited. */
  private final class Detached(val runtime: Runtime) extends Async:
    val group: CompletionGroup = CompletionGroup()
    def isCancelled: Boolean = false
    private[async] def owner: RunnableFuture[?] | Null = null

  /** Reports the end of the body or of a child to its supervisor: a failure (unless it is the
    * future's cancel, or a cancellation that the group's cancel caused), and, for the body and
    * user children (`counted`), that one fewer is running. A listener: quick, never blocks.
    */
  private final class Watch(sup: Supervisor, f: RunnableFuture[?], counted: Boolean) extends Listener[Try[Any]]:
    def apply(result: Try[Any]): Boolean =
      result match
        case Failure(_: Escaped) => () // a fatal error, reported by `guard` already
        case Failure(_: CancellationException) if f.isCancelled || sup.group.isCancelled =>
          () // its own cancel (by the scope, the enclosing scope, or its owner), or what a cancel
             // of the scope made it throw (it awaited a sibling cancelled a moment before it)
        case Failure(e) => sup.fail(e)
        case _          => ()
      if counted then sup.completed()
      true

  /** The failure of a future whose body threw an error that futures do not catch (not
    * `NonFatal`: a `StackOverflowError`, say): the error itself is the scope's to rethrow.
    */
  private[async] final class Escaped(cause: Throwable)
      extends Exception(s"the future ended with $cause, which its supervised scope rethrows", cause)

  /** The end decided without a failure (see the diagram above). */
  private[async] object Ended extends Throwable("ended", null, false, false)

/** The state of one supervised scope (see [[Supervision]]); for the body's future, the parent
  * scope whose group it joins.
  */
private[async] final class Supervisor(val runtime: Runtime) extends Async:
  import Supervision.Ended

  val group: CompletionGroup = CompletionGroup()
  def isCancelled: Boolean = group.isCancelled
  private[async] def owner: RunnableFuture[?] | Null = null

  /** null, then the first failure or `Ended`: one compare-and-set decides. */
  private val outcome = AtomicReference[Throwable | Null](null)
  /** Failures after the first, to attach to it as suppressed. */
  private val later = ConcurrentLinkedQueue[Throwable]()
  /** The body (1) and the user children not yet ended. */
  private val running = AtomicInteger(1)
  /** Completed once `outcome` is decided: the calling thread waits for it. */
  val ending: Promise[Unit] = Promise[Unit]()

  def userStarted(): Unit = running.incrementAndGet()

  /** The body or a user child has ended; the last one ends the scope, unless a failure came first. */
  def completed(): Unit =
    if running.decrementAndGet() == 0 && outcome.compareAndSet(null, Ended) then ending.complete(Success(()))
    // else: others still run, or the outcome is decided (a failure; or a user child started by a
    // daemon after the end, which the group's cancel ends)

  /** A failure of the body or of a child: the first cancels the group (every child and the body). */
  def fail(e: Throwable): Unit =
    if outcome.compareAndSet(null, e) then
      group.cancel()
      ending.complete(Success(()))
    else if !e.isInstanceOf[CancellationException] && (outcome.get ne Ended) then later.add(e)
    // else: a cancellation in a failing scope is the supervision's doing; after Ended only
    // daemons run, being cancelled

  def failed: Boolean =
    val o = outcome.get
    o != null && (o ne Ended)

  /** The first failure, with the later ones attached as suppressed (each once), or null. Called
    * once, after every member has ended.
    */
  def failure: Throwable | Null =
    val first = outcome.get
    if first == null || (first eq Ended) then null
    else
      val seen = java.util.IdentityHashMap[Throwable, Unit]()
      val it = later.iterator() // a loop, not forEach: see CompletionGroup.cancel
      while it.hasNext do
        val e = it.next()
        if (e ne first) && !seen.containsKey(e) then
          seen.put(e, ())
          first.addSuppressed(e)
      first

  /** Runs a body of the scope, turning an error that a future would not catch (not `NonFatal`,
    * nor an `InterruptedException`) into a failure of the scope, so that the scope neither hangs
    * waiting for a user child that never completes nor loses the error.
    */
  def guard[T](body: => T): T =
    try body
    catch
      case t: Throwable if !NonFatal(t) && !t.isInstanceOf[InterruptedException] =>
        fail(t)
        throw Supervision.Escaped(t)
