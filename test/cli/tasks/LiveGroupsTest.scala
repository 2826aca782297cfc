package asyncpipe.cli.tasks

import asyncpipe.cli.command.ExitCode

/** [[LiveGroups]]: once a halt has taken its list of commands to kill, no command starts (one
  * started between its start and its joining the list was left running by a second signal).
  */
class LiveGroupsTest extends munit.FunSuite:
  test("after killAll, start runs nothing and answers None"):
    val live = LiveGroups()
    live.killAll()
    var called = false
    assertEquals(live.start(() => { called = true; throw AssertionError("started after the halt") }), None)
    assert(!called)

  test("killAll waits for a start in progress, so that its command is in the list"):
    val live = LiveGroups()
    val inStart = java.util.concurrent.CountDownLatch(1)
    val release = java.util.concurrent.CountDownLatch(1)
    val starter = Thread.ofPlatform().start { () =>
      try live.start { () => inStart.countDown(); release.await(); throw IllegalStateException("no real command here") }
      catch case _: IllegalStateException => ()
    }
    inStart.await()
    val killer = Thread.ofPlatform().start(() => live.killAll())
    // killAll holds back while the start is in progress (up to its bound, far longer than this).
    killer.join(50)
    assert(killer.isAlive, "killAll did not wait for the start in progress")
    release.countDown()
    starter.join(5000)
    killer.join(5000)
    assert(!killer.isAlive)

  test("after a stop, start runs nothing and answers None"):
    val live = LiveGroups()
    live.stop("TERM")
    var called = false
    assertEquals(live.start(() => { called = true; throw AssertionError("started after the stop") }), None)
    assert(!called)

  test("a stop that comes during a start reaches the command as it joins, on a thread the stop interrupted"):
    // The stop cancels the run, which interrupts the thread that is starting the command: the
    // signal to the joining command must still be sent and waited for (it threw
    // InterruptedException before, and the run went on without ending its session).
    val tools = GroupTools.find() match
      case Right(t) => t
      case Left(why) => assume(false, why); throw IllegalStateException(why)
    val live = LiveGroups()
    val started = live.start { () =>
      val g = ProcessGroup.start(Seq("sleep", "60"), tools)
      live.stop("TERM")
      Thread.currentThread.interrupt() // as the stop's cancel of the run does
      g
    }
    assert(Thread.interrupted(), "the interrupt is kept for the caller")
    val g = started.getOrElse(fail("the start in progress was refused"))
    val ended = asyncpipe.async.Async.blocking(Attempt.within(g.exited, 10_000))
    assert(ended, "the command did not get the stop's signal")
    assertEquals(g.exited.poll().get.get, ExitCode.Terminated)
