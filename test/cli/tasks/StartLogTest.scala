package asyncpipe.cli.tasks

/** The silent process-start logger: set only when it changes nothing the user sees. (The tests
  * run with the launcher's `--add-opens`, project.scala; the end-to-end tests start the tool
  * without it, so they run the other way, with the JDK's own logger.)
  */
class StartLogTest extends munit.FunSuite:
  private def loggerField =
    val f = classOf[ProcessBuilder].getDeclaredField("LOGGER")
    f.setAccessible(true)
    f

  test("JDK logging counts as configured when any of its properties is set, and only then") {
    assert(!StartLog.configured(_ => null))
    for p <- StartLog.Properties do
      assert(StartLog.configured(k => if k == p then "x" else null), s"$p set")
  }

  test("before the first start, silence gives the JDK the silent logger; a process still starts and is waited for") {
    val field = loggerField
    val before = field.get(null) // another test of this JVM may have started a process already
    field.set(null, null)
    try
      assert(StartLog.silence(), "java.lang is open to the tests (project.scala's --add-opens)")
      assert(field.get(null) eq StartLog.Silent)
      assert(!StartLog.Silent.isLoggable(System.Logger.Level.DEBUG))
      assert(!StartLog.Silent.isLoggable(System.Logger.Level.ERROR))
      val p = ProcessBuilder("true").start()
      assertEquals(p.waitFor(), 0)
      assert(field.get(null) eq StartLog.Silent, "the start kept the silent logger")
    finally field.set(null, before)
  }

  test("a logger the JDK found already is kept") {
    val field = loggerField
    val before = field.get(null)
    val found = System.getLogger("asyncpipe.test")
    field.set(null, found)
    try
      assert(!StartLog.silence(), "silence must report that the JDK's logger is not the silent one")
      assert(field.get(null) eq found)
    finally field.set(null, before)
  }
