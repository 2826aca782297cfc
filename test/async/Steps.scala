package asyncpipe.async

import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.atomic.AtomicInteger
import munit.Location

/** A step counter that asserts the order in which code runs, across threads, without sleeps
  * (after kotlinx.coroutines' TestBase): every `expect(n)` must be the n-th step reached, and
  * `finish(n)` is the last one. A step reached out of order fails where it happens, and, since a
  * failure on another thread may end up swallowed inside a Future's `Try`, it is also recorded
  * and rethrown by `finish` and `check`.
  */
final class Steps:
  private val counter = AtomicInteger(0)
  private val failures = ConcurrentLinkedQueue[AssertionError]()

  /** Asserts that this is step `n` (the first step is 1). */
  def expect(n: Int)(using Location): Unit =
    val actual = counter.incrementAndGet()
    if actual != n then fail(s"expected to be at step $n, but this is step $actual")

  /** The last step: as `expect(n)`, then rethrows any step failure seen on any thread. */
  def finish(n: Int)(using Location): Unit =
    expect(n)
    check()

  /** Marks a point that must never run. */
  def expectUnreached()(using Location): Nothing =
    fail(s"reached a point that must not be reached (after step ${counter.get})")

  /** How many steps have been reached so far. */
  def reached: Int = counter.get

  /** Rethrows the first step failure recorded on any thread. */
  def check(): Unit =
    val first = failures.peek()
    if first != null then throw first

  private def fail(message: String)(using loc: Location): Nothing =
    val e = AssertionError(s"$message (at ${loc.path}:${loc.line})")
    failures.add(e)
    throw e
