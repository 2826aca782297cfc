package asyncpipe.async

import java.lang.management.ManagementFactory
import java.nio.file.Files
import java.util.concurrent.{CancellationException, CountDownLatch, TimeUnit}
import java.util.concurrent.atomic.AtomicReference
import scala.collection.mutable
import scala.concurrent.duration.{Duration, FiniteDuration}
import scala.reflect.ClassTag
import scala.util.{Failure, Success, Try}
import com.sun.management.HotSpotDiagnosticMXBean
import munit.{Assertions, Location}

/** Helpers shared by the async suites. Every wait here is bounded by `Patience`: a test of
  * concurrency that fails should fail with a message, not hang the build. Nothing here waits by
  * sleeping: latches, joins and condition polls only.
  */
object Support:
  /** Upper bound for "does not hang" and "promptly". Far above any expected duration. */
  val Patience: Long = 5000

  /** Waits for `latch`, bounded. The wait is made before `assert`, not inside its condition:
    * munit evaluates an assertion's condition holding one lock for every thread
    * (`munitCaptureClues`), so a wait inside it would stall every other thread's assertion
    * (a listener blocked on a latch held up the test thread that was to open it).
    */
  def awaitLatch(latch: CountDownLatch, what: String)(using Location): Unit =
    val opened = latch.await(Patience, TimeUnit.MILLISECONDS)
    Assertions.assert(opened, s"timed out after $Patience ms waiting for $what")

  /** Waits until `cond` holds, polling; fails after `bound` ms (`Patience` by default). For states
    * that have no latch, such as "that thread is now parked".
    */
  def eventually(what: String, bound: Long = Patience)(cond: => Boolean)(using Location): Unit =
    val deadline = System.nanoTime() + bound * 1_000_000
    while !cond do
      if System.nanoTime() > deadline then Assertions.fail(s"timed out after $bound ms waiting for $what")
      java.util.concurrent.locks.LockSupport.parkNanos(200_000)

  /** Waits until `t` is blocked (parked, sleeping or waiting on a monitor or lock). */
  def awaitBlocked(t: Thread)(using Location): Unit =
    eventually(s"$t to block") {
      val s = t.getState
      s == Thread.State.WAITING || s == Thread.State.TIMED_WAITING || s == Thread.State.BLOCKED
    }

  def join(t: Thread, what: String)(using Location): Unit =
    val ended = t.join(java.time.Duration.ofMillis(Patience)) // outside `assert`, as in awaitLatch
    Assertions.assert(ended, s"$what: thread $t still alive after $Patience ms")

  /** A test thread's pause while it polls for something another thread does: a 20 µs park, not
    * Thread.yield. On JDK 25 with one carrier, a virtual thread that yields in a loop keeps a
    * virtual thread started from a platform thread (a test's `Future`s) off the carrier for good:
    * such a loop hung the tests that had one (-Djdk.virtualThreadScheduler.parallelism=1).
    */
  def pause(): Unit = java.util.concurrent.locks.LockSupport.parkNanos(20_000)

  def millisSince(startNanos: Long): Long = (System.nanoTime() - startNanos) / 1_000_000

  /** The failure inside `t`, which must be a failure with an exception of type E. */
  def failureOf[E <: Throwable](t: Try[?])(using ct: ClassTag[E], loc: Location): E = t match
    case Failure(e: E) => e
    case Failure(e)    => Assertions.fail(s"expected a Failure(${ct.runtimeClass.getSimpleName}), got Failure($e)", e)
    case Success(v)    => Assertions.fail(s"expected a Failure(${ct.runtimeClass.getSimpleName}), got Success($v)")

  def assertCancelled(t: Try[?])(using Location): Unit = failureOf[CancellationException](t)

  /** `Some(result)` of a completed future, checked without blocking and without an Async. */
  def assertCancelledNow(f: Future[?])(using Location): Unit = f.poll() match
    case Some(r) => assertCancelled(r)
    case None    => Assertions.fail(s"expected the future to be completed with a CancellationException, but it is pending")

  /** The result of `f`, waited for with a listener and a bounded latch rather than an Async. */
  def resultWithin[T](f: Future[T], what: String)(using Location): Try[T] =
    val done = CountDownLatch(1)
    f.onComplete(Listener[Try[T]] { _ => done.countDown(); true })
    awaitLatch(done, what)
    f.poll().getOrElse(Assertions.fail(s"$what: a listener fired but poll() gives nothing"))

  /** Starts a future blocked in `blockingCall`, cancels it, and checks that its thread ends
    * promptly (well before the scope's exit would cancel it anyway), with the exception that
    * `blockingCall` throws when interrupted or cancelled.
    */
  def checkCancelEndsBlockedBody(expected: Class[?])(blockingCall: Async ?=> Any)(using Runtime, Location): Unit =
    val started = CountDownLatch(1)
    val seen = AtomicReference[Throwable]()
    val thread = AtomicReference[Thread]()
    Async.blocking:
      val f = Future:
        thread.set(Thread.currentThread())
        started.countDown()
        try blockingCall
        catch
          case e: Throwable =>
            seen.set(e)
            throw e
      awaitLatch(started, "the body to start")
      awaitBlocked(thread.get)
      f.cancel()
      join(thread.get, "the cancelled body")
      assertCancelledNow(f)
    Assertions.assert(expected.isInstance(seen.get), s"the blocked call ended with ${seen.get}, expected a ${expected.getSimpleName}")

  /** A listener that records every value it is called with and accepts it, or not. */
  final class Recorder[T](accept: T => Boolean = (_: T) => true) extends Listener[T]:
    private val seen = java.util.concurrent.ConcurrentLinkedQueue[T]()
    val called = CountDownLatch(1)
    def apply(v: T): Boolean =
      seen.add(v)
      called.countDown()
      accept(v)
    def values: List[T] = seen.toArray.toList.asInstanceOf[List[T]]
    def calls: Int = seen.size

  /** Every live thread of the JVM, virtual ones included, from a JSON thread dump:
    * `Thread.getAllStackTraces` and ThreadMXBean see platform threads only.
    */
  def liveThreadCount(): Int =
    val bean = ManagementFactory.getPlatformMXBean(classOf[HotSpotDiagnosticMXBean])
    val dir = Files.createTempDirectory("asyncpipe-threads")
    val file = dir.resolve("dump.json")
    try
      bean.dumpThreads(file.toString, HotSpotDiagnosticMXBean.ThreadDumpFormat.JSON)
      "\"tid\"".r.findAllMatchIn(Files.readString(file)).size
    finally
      Files.deleteIfExists(file)
      Files.deleteIfExists(dir)

  /** Whether the runtime runs bodies on virtual threads. */
  def isVirtual(runtime: Runtime): Boolean = runtime eq Runtime.VirtualThreads

/** Runs each test body on its own daemon thread and fails the test if it has not ended within
  * `watchdog`: a hung implementation then fails one test instead of hanging the whole run. (munit's
  * own `munitTimeout` only bounds a body's returned Future, not a body that blocks.)
  */
trait Watchdog extends munit.FunSuite:
  def watchdog: FiniteDuration = Duration(30, TimeUnit.SECONDS)
  override def munitTestTransforms: List[TestTransform] =
    super.munitTestTransforms :+ new TestTransform(
      "watchdog",
      test =>
        test.withBody { () =>
          val done = scala.concurrent.Promise[Any]()
          val runner = Thread.ofPlatform().daemon().name(s"test: ${test.name}").start { () =>
            try done.completeWith(test.body())
            catch case e: Throwable => done.tryFailure(e)
          }
          Watchdog.timer.schedule(
            (() => {
              if done.tryFailure(java.util.concurrent.TimeoutException(
                  s"test still running after $watchdog (hung?); its thread:\n  ${runner.getStackTrace.mkString("\n  ")}"))
              then runner.interrupt()
            }): Runnable,
            watchdog.toMillis,
            TimeUnit.MILLISECONDS
          )
          done.future
        }
    )

object Watchdog:
  private[async] val timer = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r =>
    Thread.ofPlatform().daemon().name("test-watchdog").unstarted(r))

/** A source written against the public `Async.Source` contract only, so that a test can observe
  * what the library does with listeners: how many are registered right now, how many were ever
  * registered, and how often this source has called one.
  *
  *   - `ProbeSource.persistent` behaves like a future: `offer` sets its one value, which stays;
  *     every listener registered is called once with it.
  *   - `ProbeSource.ephemeral` behaves like a channel: each offered value goes to exactly one
  *     listener (or `poll`) that accepts it; a listener that refuses a value stays registered and
  *     the value stays in the source for someone else.
  *
  * Listeners are always called outside the source's lock (a library's listener may call back
  * into `dropListener` from any thread).
  */
final class ProbeSource[T] private (val ephemeral: Boolean) extends Async.OriginalSource[T]:
  private val lock = Object()
  private var listeners = Vector.empty[Listener[T]]
  private val values = mutable.ArrayDeque.empty[T]
  private var version = 0L // bumped on every change to `listeners`
  private var everRegistered = 0
  private var callCount = 0

  /** Listeners registered and neither dropped nor served yet. */
  def registered: Int = lock.synchronized(listeners.size)
  def totalRegistrations: Int = lock.synchronized(everRegistered)
  /** How many times this source has invoked a listener (accepted or not). */
  def calls: Int = lock.synchronized(callCount)
  /** Values not taken yet (ephemeral), or whether the value is set (persistent: 0 or 1). */
  def pending: Int = lock.synchronized(values.size)

  /** Waits until at least `n` listeners are registered at once. */
  def awaitRegistered(n: Int, what: String = "")(using Location): Unit =
    val deadline = System.nanoTime() + Support.Patience * 1_000_000
    lock.synchronized {
      while listeners.size < n do
        val left = (deadline - System.nanoTime()) / 1_000_000
        if left <= 0 then Assertions.fail(s"timed out waiting for $n listeners on the source, ${listeners.size} registered $what")
        lock.wait(left)
    }

  def offer(v: T): Unit =
    if ephemeral then
      lock.synchronized(values.append(v))
      pump()
    else
      val toCall = lock.synchronized {
        require(values.isEmpty, s"a persistent ProbeSource takes one value; it already has ${values.head}, offered $v")
        values.append(v)
        val ls = listeners
        listeners = Vector.empty
        version += 1
        ls
      }
      toCall.foreach(call(_, v))

  override def poll(k: Listener[T]): Boolean =
    if ephemeral then
      claim() match
        case None => false
        case Some(v) =>
          if call(k, v) then true
          else
            unclaim(v)
            pump()
            false
    else
      lock.synchronized(values.headOption) match
        case None    => false
        case Some(v) => call(k, v)

  override def poll(): Option[T] =
    if ephemeral then claim() else lock.synchronized(values.headOption)

  override def onComplete(k: Listener[T]): Unit =
    if ephemeral then
      register(k)
      pump()
    else
      val now = lock.synchronized {
        if values.isEmpty then
          register(k)
          None
        else values.headOption
      }
      now.foreach(v => call(k, v))

  override def dropListener(k: Listener[T]): Unit = lock.synchronized {
    val before = listeners.size
    listeners = listeners.filterNot(_ == k)
    if listeners.size != before then version += 1
  }

  private def register(k: Listener[T]): Unit = lock.synchronized {
    listeners = listeners :+ k
    everRegistered += 1
    version += 1
    lock.notifyAll()
  }

  private def call(k: Listener[T], v: T): Boolean =
    lock.synchronized(callCount += 1)
    k(v)

  private def claim(): Option[T] = lock.synchronized(if values.isEmpty then None else Some(values.removeHead()))
  private def unclaim(v: T): Unit = lock.synchronized(values.prepend(v))

  // One delivery at a time: two threads pumping at once (an offer's, and a registration's) could
  // hand a later value to a listener while an earlier one, claimed by the other thread, was still
  // on its way to it: the listener got 2 and 1 went back (a FutureOnPlatformThreads failure).
  private val delivering = Object()

  /** Ephemeral delivery: offers the head value to the registered listeners in order until one
    * takes it; repeats while values and fresh listeners remain. Deliveries are one at a time, so
    * values reach listeners in the order they were offered.
    */
  private def pump(): Unit = delivering.synchronized {
    var again = true
    while again do
      again = false
      val attempt = lock.synchronized {
        if values.isEmpty || listeners.isEmpty then None
        else Some((values.removeHead(), listeners, version))
      }
      attempt.foreach { (v, ls, seen) =>
        val taker = ls.find(k => lock.synchronized(listeners.contains(k)) && !k.isDone && call(k, v))
        lock.synchronized {
          taker match
            case Some(k) =>
              listeners = listeners.filterNot(_ == k)
              version += 1
              again = true
            case None =>
              values.prepend(v)
              again = version != seen
        }
      }
  }

object ProbeSource:
  def persistent[T](): ProbeSource[T] = new ProbeSource[T](false)
  def ephemeral[T](): ProbeSource[T] = new ProbeSource[T](true)
