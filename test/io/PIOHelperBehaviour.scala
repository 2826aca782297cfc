package asyncpipe.io

import asyncpipe.async.*
import asyncpipe.async.Support.*
import java.nio.ByteBuffer
import java.nio.file.{Files, Path}
import java.nio.file.StandardOpenOption.*
import java.util.concurrent.CountDownLatch
import java.util.concurrent.atomic.AtomicReference
import scala.util.Success
import IoSupport.*

/** PIOHelper: the file or socket is open for the body and closed on every way out of it, a
  * return, a throw or a cancel.
  *
  * Not covered: a close that fails while the body's exception propagates (added as suppressed).
  * Neither a `FileChannel` nor a `DatagramChannel` can be made to fail its close without
  * replacing the class under test.
  */
abstract class PIOHelperBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog, TempDirs:
  given Runtime = runtime

  private final class BodyFailed extends RuntimeException("the body failed")

  /** How a body blocks until its future is cancelled: a JDK latch (interrupted) or an asyncpipe
    * promise (awaited, cancelled).
    */
  private val blockers: Seq[(String, Async => Unit)] = Seq(
    ("a JDK latch", (_: Async) => CountDownLatch(1).await()),
    ("an awaited promise", (a: Async) => Promise[Unit]().future.value(using a))
  )

  /** Runs `use` in a future, blocked in its body until the future is cancelled; returns the
    * future's result and the resource the body was given.
    */
  private def cancelledIn[R](what: String)(use: (R => Unit) => Async ?=> Any): R =
    val resource = AtomicReference[R]()
    val entered = CountDownLatch(1)
    Async.blocking:
      val f = Future:
        use { r =>
          resource.set(r)
          entered.countDown()
        }
      awaitLatch(entered, s"the body of $what to start")
      f.cancel()
      assertCancelled(resultWithin(f, s"the cancelled $what"))
    resource.get

  // ---------------------------------------------------------------------------------------------
  // withFile

  tempDir.test("withFile: the body gets the open file, its value is returned, and the file is closed after"): dir =>
    val p = dir.resolve("x.txt").toString
    val seen = AtomicReference[File]()
    Async.blocking:
      val n = PIOHelper.withFile(p, CREATE, TRUNCATE_EXISTING, WRITE) { f =>
        seen.set(f)
        assert(f.isOpened, "the file given to the body is not open")
        assertEquals(f.path, p)
        f.writeString("hello\n").value
      }
      assertEquals(n, 6)
      assert(!seen.get.isOpened, "withFile left the file open after the body returned")
      // the example of PosixLikeIO's doc: no options means READ
      assertEquals(PIOHelper.withFile(p)(_.readString(1024).await), Success("hello\n"))
      val e = intercept[PosixIOException](PIOHelper.withFile(p)(_.writeString("x").value))
      assertMentions(e, p, "not opened for writing")

  tempDir.test("withFile: when the body throws, the exception propagates unchanged and the file is closed"): dir =>
    val p = dir.resolve("throw.txt").toString
    Files.writeString(Path.of(p), "abc")
    val seen = AtomicReference[File]()
    val thrown = BodyFailed()
    val e = intercept[BodyFailed]:
      PIOHelper.withFile(p) { f =>
        seen.set(f)
        throw thrown
      }
    assert(e eq thrown, s"withFile rethrew $e, not the body's exception")
    assertEquals(e.getSuppressed.toList, Nil, "a clean close added suppressed exceptions")
    assert(!seen.get.isOpened, "withFile left the file open after the body threw")

  tempDir.test("withFile: a body that closed the file itself, then threw: the close again is harmless"): dir =>
    val p = dir.resolve("closed.txt").toString
    Files.writeString(Path.of(p), "abc")
    val e = intercept[BodyFailed]:
      PIOHelper.withFile(p) { f =>
        f.close()
        throw BodyFailed()
      }
    assertEquals(e.getSuppressed.toList, Nil)
    assertEquals(PIOHelper.withFile(p) { f => f.close(); 1 }, 1)

  tempDir.test("withFile: when the body is cancelled, the file is closed"): dir =>
    val p = dir.resolve("cancel.txt").toString
    Files.writeString(Path.of(p), "abc")
    for (how, block) <- blockers do
      val f = cancelledIn[File](s"withFile blocked on $how"): entered =>
        PIOHelper.withFile(p) { f =>
          entered(f)
          block(summon[Async])
        }
      assert(f != null)
      assert(!f.isOpened, s"withFile left the file open after its body, blocked on $how, was cancelled")

  tempDir.test("withFile: an open that fails throws PosixIOException and the body does not run"): dir =>
    val p = dir.resolve("missing.txt").toString
    var ran = false
    val e = intercept[PosixIOException](PIOHelper.withFile(p) { _ => ran = true })
    assertMentions(e, p, "no such file")
    assert(!ran, "the body ran although the open failed")
    val e2 = intercept[PosixIOException](PIOHelper.withFile(p, READ, APPEND) { _ => ran = true })
    assertMentions(e2, p, "READ", "APPEND")
    assert(!ran)

  // ---------------------------------------------------------------------------------------------
  // withSocketUDP

  test("withSocketUDP(0): a bound open socket for the body, closed after it returns"):
    val seen = AtomicReference[SocketUDP]()
    Async.blocking:
      PIOHelper.withSocketUDP(0) { server =>
        seen.set(server)
        assert(server.isOpened)
        assert(server.localPort > 0)
        PIOHelper.withSocketUDP() { client =>
          assert(client.isOpened)
          client.send(ByteBuffer.wrap(Array[Byte](1, 2, 3)), "127.0.0.1", server.localPort).value
          val p = server.receive().value
          assertEquals(p.getLength, 3)
          assertEquals(p.getPort, client.localPort)
        }
      }
      assert(!seen.get.isOpened, "withSocketUDP(0) left the socket open")

  test("withSocketUDP(port): binds that port; the port is free again after the body"):
    val port = PIOHelper.withSocketUDP(0)(_.localPort)
    // the port just released: bind it by number, twice in a row
    for _ <- 1 to 2 do
      PIOHelper.withSocketUDP(port) { s => assertEquals(s.localPort, port) }

  test("withSocketUDP() and withSocketUDP(port): closed when the body throws; the exception propagates unchanged"):
    for (name, use) <- Seq[(String, (SocketUDP => Nothing) => Nothing)](
        "withSocketUDP()" -> (b => PIOHelper.withSocketUDP()(b)),
        "withSocketUDP(0)" -> (b => PIOHelper.withSocketUDP(0)(b))
      )
    do
      val seen = AtomicReference[SocketUDP]()
      val thrown = BodyFailed()
      val e = intercept[BodyFailed](use { s => seen.set(s); throw thrown })
      assert(e eq thrown, s"$name rethrew $e")
      assertEquals(e.getSuppressed.toList, Nil)
      assert(!seen.get.isOpened, s"$name left the socket open after the body threw")

  test("withSocketUDP() and withSocketUDP(port): closed when the body is cancelled"):
    for (how, block) <- blockers do
      val unbound = cancelledIn[SocketUDP](s"withSocketUDP() blocked on $how"): entered =>
        PIOHelper.withSocketUDP() { s => entered(s); block(summon[Async]) }
      assert(!unbound.isOpened, s"withSocketUDP() left the socket open after its body, blocked on $how, was cancelled")
      val bound = cancelledIn[SocketUDP](s"withSocketUDP(0) blocked on $how"): entered =>
        PIOHelper.withSocketUDP(0) { s => entered(s); block(summon[Async]) }
      assert(!bound.isOpened, s"withSocketUDP(0) left the socket open after its body, blocked on $how, was cancelled")

  test("withSocketUDP(port): a body cancelled while waiting in a receive closes the socket"):
    val seen = cancelledIn[SocketUDP]("withSocketUDP(0) waiting in receive"): entered =>
      PIOHelper.withSocketUDP(0) { s =>
        entered(s)
        s.receive().value
      }
    assert(!seen.isOpened)

  test("withSocketUDP(port): a port in use throws PosixIOException and the body does not run"):
    PIOHelper.withSocketUDP(0) { taken =>
      var ran = false
      val e = intercept[PosixIOException](PIOHelper.withSocketUDP(taken.localPort) { _ => ran = true })
      assertMentions(e, s":${taken.localPort}", "address already in use")
      assert(!ran)
      assert(taken.isOpened)
    }

class PIOHelperOnVirtualThreads extends PIOHelperBehaviour(Runtime.VirtualThreads)
class PIOHelperOnPlatformThreads extends PIOHelperBehaviour(Runtime.PlatformThreads)
