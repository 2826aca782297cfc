package asyncpipe.cli.tasks

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
