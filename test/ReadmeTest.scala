package asyncpipe

import asyncpipe.async.*

/** The README's library snippets, kept in step by hand: if this changes, change the README too. */
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

  test("README: the channel snippet sums what was sent before the close, takes one raced value and selects a send"):
    val report = Async.blocking:
      val numbers = BufferedChannel[Int](16)
      Future { for i <- 1 to 100 do numbers.send(i); numbers.close() } // readers still drain after close
      val sum = Iterator.continually(numbers.read()).takeWhile(_.isSuccess).map(_.get).sum
      val (a, b) = (SyncChannel[String](), SyncChannel[String]())
      Future { b.send("b") }
      val picked = Async.await(Async.race(a.canRead, b.canRead)).get // exactly one value is taken
      val out = BufferedChannel[Int](1) // a select over a send and a read: out has room, so it sends
      val done = Async.select(out.canSend(sum).handle(_ => "sent"), a.canRead.handle(v => s"read ${v.get}"))
      s"$sum $picked $done"
    assertEquals(report, "5050 b sent")

  test("README: the parallelism snippet keeps input order, reads the values before the error, and times out"):
    import scala.concurrent.duration.*
    val summary = Async.blocking:
      val lengths = mapPar(2)(Seq("a", "bb", "ccc"))(s => { sleep(10.millis); s.length }) // input order
      val lines = BufferedChannel[String](8)
      Future { lines.send("ok"); lines.error(IllegalStateException("disk gone")) } // the producer fails
      val first = lines.read().get // values sent before the error are still read
      val why = lines.read().failed.get.getCause.getMessage // then the producer's error
      val late = withTimeoutOption(20.millis)(sleep(10.seconds)) // None: cancelled after 20 ms
      s"${lengths.mkString(",")} $first $why $late"
    assertEquals(summary, "1,2,3 ok disk gone None")

  test("README: the IO snippet writes, reads back in two parts and echoes over UDP"):
    import asyncpipe.io.*
    import java.nio.file.StandardOpenOption.{CREATE, TRUNCATE_EXISTING, WRITE}
    val received = Async.blocking:
      val path = java.nio.file.Files.createTempFile("readme", ".txt").toString
      PIOHelper.withFile(path, CREATE, TRUNCATE_EXISTING, WRITE)(_.writeString("héllo wörld").value)
      val text = PIOHelper.withFile(path)(f => f.readString(2).value + "|" + f.readString(100).value)
      PIOHelper.withSocketUDP(0): server => // port 0: the system picks a free one
        PIOHelper.withSocketUDP(): client =>
          client.send(java.nio.ByteBuffer.wrap(text.getBytes("UTF-8")), "127.0.0.1", server.localPort).value
          String(server.receive().value.getData, "UTF-8") // a datagram arrives whole
    assertEquals(received, "h|éllo wörld")

  test("README: the snippets in the README are the ones tested here"):
    val readme = os.read(os.Path(sys.env("ASYNCPIPE_ROOT")) / "README.md")
    val tested = os.read(os.Path(sys.env("ASYNCPIPE_ROOT")) / "test" / "ReadmeTest.scala")
    val snippets = readme.split("```scala\n").drop(1).map(_.split("```")(0)).toSeq
    assertEquals(snippets.size, 4, "README scala snippets")
    for snippet <- snippets; line <- snippet.linesIterator.drop(2).map(_.trim).filter(_.nonEmpty) do // after the import
      assert(tested.contains(line), s"README line not in ReadmeTest: $line")
