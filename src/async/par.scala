package asyncpipe.async

import java.util.concurrent.atomic.{AtomicBoolean, AtomicInteger}
import scala.annotation.targetName
import scala.collection.immutable.ArraySeq

/* Bounded parallelism: `par`, `parLimit` and `mapPar` run bodies on threads other than the caller's,
 * each body with an `Async` (a scope) of its own, and return their values in input order. Shared by
 * all three:
 *
 *  - Structured: the bodies run in a nested group of the caller's scope (`Async.group`), so a cancel
 *    of the caller reaches them, and the call returns (or throws) only once every thread it started
 *    has ended. Nothing outlives the call.
 *  - First failure: the first body to fail (a `CancellationException` of its own included) cancels
 *    every other running body, and no body starts after its failure (a body that took its index
 *    before runs, and is cancelled); its exception, the same object, is rethrown once every started
 *    body has ended (`Future.awaitAll`).
 *  - `par` starts one future per body, all at once.
 *  - Bounded: `parLimit(n)` and `mapPar(n)` start at most `n` worker threads, each of which takes
 *    the next index not yet taken, runs its body in a scope of its own (`Async.group`: a future
 *    the body starts ends with the body), and repeats; so at most `n` bodies run at once, they
 *    start in input order, and a worker that has been cancelled takes no further index.
 *
 * See doc/adr/0026-bounded-parallelism-and-durations.md.
 */

/** Runs every body at once, each as a future of its own (on a thread of its own, with an `Async`
  * of its own), and returns their values in argument order; the first failure cancels the others
  * and is rethrown once they have ended. The bodies belong to the caller's scope: none outlives
  * the call.
  *
  * {{{
  * Async.blocking:
  *   val pages = par(fetch(primary), fetch(mirror)) // both at once: Seq(page of primary, page of mirror)
  * }}}
  */
def par[T](bodies: (Async ?=> T)*)(using Async): Seq[T] = parAll(bodies)

/** `par` of a sequence of bodies. The sequence must have the type `Seq[Async ?=> T]`, so that each
  * body is typed with its own `Async` (a plain `Seq[T]` is refused: it would be one body computed
  * before the call):
  * {{{
  * Async.blocking:
  *   val checks: Seq[Async ?=> Boolean] = hosts.map(host => ping(host)) // each ping with its own Async
  *   val up = par(checks) // up(i): whether hosts(i) answered
  * }}}
  */
@targetName("parSeq")
def par[T](bodies: Seq[Async ?=> T])(using Async): Seq[T] = parAll(bodies)

private def parAll[T](bodies: Seq[Async ?=> T])(using Async): Seq[T] =
  if bodies.isEmpty then Vector.empty
  else Async.group(Future.awaitAll(bodies.map(body => Future(body))))

/** Runs `bodies` with at most `n` of them running at once, and returns their values in input
  * order. They start in input order, as running ones end; the first failure cancels the running
  * ones, starts no other, and is rethrown once every started body has ended. The bodies belong to
  * the caller's scope: none outlives the call.
  *
  * {{{
  * Async.blocking:
  *   val downloads: Seq[Async ?=> Array[Byte]] = urls.map(url => fetch(url))
  *   val bodies = parLimit(4)(downloads) // never more than 4 connections at once
  * }}}
  * @throws IllegalArgumentException if `n` is not above zero
  */
def parLimit[T](n: Int)(bodies: Seq[Async ?=> T])(using Async): Seq[T] =
  check(n > 0, s"parallelism n was $n, must be > 0")
  val all = bodies.toIndexedSeq
  runLimited(n, all.size, i => all(i))

/** `f` applied to every item, with at most `n` applications running at once, each on a thread of
  * its own with its own `Async`; the results in input order. The first failure cancels the
  * running applications, starts no other, and is rethrown once every started one has ended. The
  * applications belong to the caller's scope: none outlives the call.
  *
  * {{{
  * Async.blocking:
  *   val pages = mapPar(4)(urls)(url => fetch(url)) // pages(i) is the page of urls(i)
  * }}}
  * @throws IllegalArgumentException if `n` is not above zero
  */
def mapPar[A, B](n: Int)(items: Iterable[A])(f: A => Async ?=> B)(using Async): Seq[B] =
  check(n > 0, s"parallelism n was $n, must be > 0")
  val all = items.toIndexedSeq
  runLimited(n, all.size, i => f(all(i)))

/** The loop behind `parLimit` and `mapPar`: `min(n, count)` workers in a nested group, each
  * taking the next index, running `body(i)` in a scope of its own and storing its value at `i`,
  * until the indices run out, a body has failed (`stopped`, set before the failure is seen
  * anywhere), or the worker is cancelled. The values are read only after `awaitAll` has seen
  * every worker succeed, which orders every store before the reads.
  */
private def runLimited[T](n: Int, count: Int, body: Int => Async ?=> T)(using Async): Seq[T] =
  if count == 0 then return Vector.empty
  val results = new Array[Any](count)
  val next = AtomicInteger(0)
  val stopped = AtomicBoolean(false)
  Async.group:
    val workers = Vector.fill(n.min(count)):
      Future:
        var i = 0
        while
          Async.checkCancelled(Async.current, "starting a parallel body") // a cancelled worker starts no other
          !stopped.get && { i = next.getAndIncrement(); i < count }
        do
          try results(i) = Async.group(body(i))
          catch
            case e: Throwable =>
              stopped.set(true) // before the failure completes the worker: no worker starts a body after it
              throw e
    Future.awaitAll(workers)
  ArraySeq.unsafeWrapArray(results).asInstanceOf[Seq[T]]
