package asyncpipe.async

import scala.concurrent.duration.FiniteDuration

/** One branch of a select ([[Async.select]]): a source, and what to do with its value. Made with
  * `source.handle(f)`:
  * {{{
  * Async.select(
  *   requests.canRead.handle(r => serve(r.get)),
  *   shutdown.handle(_ => "stopping")
  * )
  * }}}
  */
final class SelectCase[+R] private[async] (private[async] val source: Async.Source[() => R], private[async] val timer: StartableTimer | Null)

extension [T](src: Async.Source[T])
  /** A branch of a select: `f` runs with the value, on the selecting thread, once this branch won
    * (only the winner's value is taken: the other sources keep theirs).
    */
  def handle[R](f: T => R): SelectCase[R] =
    SelectCase[R](src.map(v => () => f(v)), src match
      case t: SelectTimer => t
      case _              => null)

/** A timer made for one select (`Async.after`): the select cancels it when another branch wins. A
  * timer made with `Timer(d)` is the caller's (a deadline shared by the selects of a loop must not
  * be cancelled by the first of them).
  */
private[async] final class SelectTimer(millis: Long) extends Timer(millis)

private[async] object Select:
  def select[R](branches: Seq[SelectCase[R]])(using Async): R =
    try Async.await(Async.race(branches.map(_.source)*))()
    finally cancelTimers(branches)

  def selectNow[R](branches: Seq[SelectCase[R]], otherwise: => R): R =
    try Async.race(branches.map(_.source)*).poll() match
      case Some(run) => run()
      case None      => otherwise
    finally cancelTimers(branches)

  def selectWithin[R](limit: FiniteDuration, branches: Seq[SelectCase[R]])(using Async): Option[R] =
    val wrapped = branches.map(b => SelectCase[Option[R]](b.source.map(run => () => Some(run())), null))
    try select(wrapped :+ Async.after(limit).handle(_ => Option.empty[R]))
    finally cancelTimers(branches)

  /** A select's own timer (`Async.after`) that lost leaves the scheduler now (one that rang is not
    * changed by a cancel).
    */
  private def cancelTimers(branches: Seq[SelectCase[?]]): Unit =
    branches.foreach(b => { val t = b.timer; if t != null then t.cancel() })
