package asyncpipe.async

import java.util.concurrent.ThreadFactory
import java.util.concurrent.locks.LockSupport

/** The seam between the library and the thread system beneath it. Everything the library does
  * with threads goes through here: starting a body, parking and unparking a waiter, and
  * interrupting a cancelled body. On the JVM there are two implementations, virtual threads
  * (the default) and platform threads, and the test suite runs under both; another runtime
  * (Scala Native, say) would implement this trait and nothing else.
  */
trait Runtime:
  def name: String
  /** Starts `task` on a new thread of this runtime and returns that thread. */
  def start(task: Runnable): Thread
  /** Starts `task` on a thread that may block in a system call only a signal ends (a read of a
    * FIFO: a virtual thread blocked there cannot be interrupted out of it): a platform thread on
    * the JVM, whichever threads `start` makes.
    */
  def startForSystemCall(task: Runnable): Thread = Runtime.PlatformThreads.start(task)
  /** Blocks the current thread until unparked, interrupted, or spuriously. */
  def park(blocker: AnyRef): Unit = LockSupport.park(blocker)
  /** As `park`, for at most `nanos`. */
  def parkNanos(blocker: AnyRef, nanos: Long): Unit = LockSupport.parkNanos(blocker, nanos)
  def unpark(thread: Thread): Unit = LockSupport.unpark(thread)
  /** Interrupts a thread blocked in a cancelled body: blocking JDK calls end with an exception. */
  def interrupt(thread: Thread): Unit = thread.interrupt()
  override def toString: String = name

object Runtime:
  private final class OnFactory(val name: String, factory: ThreadFactory) extends Runtime:
    def start(task: Runnable): Thread =
      val t = factory.newThread(task)
      t.start()
      t

  /** One virtual thread per future (Project Loom). */
  val VirtualThreads: Runtime = OnFactory("virtual-threads", Thread.ofVirtual().factory())

  /** One daemon platform thread per future: proves the library does not depend on Loom. */
  val PlatformThreads: Runtime = OnFactory("platform-threads", Thread.ofPlatform().daemon().name("async-p-", 0).factory())

  /** Virtual threads, unless the system property `asyncpipe.runtime` says `platform`. */
  val default: Runtime = System.getProperty("asyncpipe.runtime") match
    case "platform" => PlatformThreads
    case _          => VirtualThreads
