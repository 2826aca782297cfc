package asyncpipe

import asyncpipe.async.*

/** The README's library snippet, kept in step by hand: if this changes, change the README too. */
class ReadmeTest extends munit.FunSuite:
  test("README: the library snippet runs and gives the first result and the retried value"):
    val answer = Async.blocking:
      val slow = Future { sleep(50); "slow" }
      val fast = Future { sleep(10); "fast" }
      val first = Async.await(Async.race(slow, fast)).get // the first result; `slow` keeps running
      val retried = Task { if math.random() < 0.5 then throw Exception("flaky") else 42 }
        .schedule(TaskSchedule.RepeatUntilSuccess(millis = 10, maxRepetitions = 20))
        .run.value
      s"$first $retried" // leaving the block cancels `slow` and waits for its thread to end
    assertEquals(answer, "fast 42")

  test("README: the snippet in the README is the one tested here"):
    val readme = os.read(os.Path(sys.env("ASYNCPIPE_ROOT")) / "README.md")
    val tested = os.read(os.Path(sys.env("ASYNCPIPE_ROOT")) / "test" / "ReadmeTest.scala")
    val snippet = readme.split("```scala\n")(1).split("```")(0)
    val body = snippet.linesIterator.drop(2).map(_.trim).filter(_.nonEmpty).toSeq // after the import
    for line <- body do assert(tested.contains(line), s"README line not in ReadmeTest: $line")
