package asyncpipe.async

import java.util.concurrent.{ConcurrentLinkedQueue, CountDownLatch}
import java.util.concurrent.atomic.{AtomicInteger, AtomicReference}
import scala.util.{Success, Try}
import Support.*

/** Sources and listeners: the poll / onComplete / dropListener contract, derived sources (map,
  * filter) that neither consume nor leak, and races that take only what they return and leave
  * nothing registered behind (behaviours 20-22, 24 in the shape of this API).
  */
abstract class SourceBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog:
  given Runtime = runtime

  private def completed[T](v: T): Promise[T] =
    val p = Promise[T]()
    p.complete(Success(v))
    p

  // ---------------------------------------------------------------------------------------------
  // The listener contract (behaviour 20)

  test("poll() never blocks: empty before completion, the value afterwards, and again"):
    val p = Promise[Int]()
    assertEquals(p.poll(), None)
    p.complete(Success(1))
    assertEquals(p.poll(), Some(Success(1)))
    assertEquals(p.poll(), Some(Success(1)), "polling a future consumed its value")
    val gate = CountDownLatch(1)
    Async.blocking:
      val f = Future:
        gate.await()
        2
      assertEquals(f.poll(), None)
      gate.countDown()
      f.value
      assertEquals(f.poll(), Some(Success(2)))

  test("poll(k) hands the value to k only once it is available"):
    val p = Promise[Int]()
    val k = Recorder[Try[Int]]()
    assert(!p.poll(k), "poll(k) reported a value before completion")
    assertEquals(k.calls, 0)
    p.complete(Success(1))
    assert(p.poll(k))
    assertEquals(k.values, List(Success(1)))

  test("onComplete on a completed source runs the listener straight away"):
    val k = Recorder[Try[Int]]()
    completed(3).onComplete(k)
    assertEquals(k.values, List(Success(3)))
    val k2 = Recorder[Try[Int]]()
    Future.now(Success(4)).onComplete(k2)
    assertEquals(k2.values, List(Success(4)))

  test("every registered listener fires exactly once"):
    val p = Promise[Int]()
    val ks = Vector.fill(10)(Recorder[Try[Int]]())
    ks.foreach(p.onComplete)
    p.complete(Success(5))
    ks.foreach(k => awaitLatch(k.called, "a listener of the promise"))
    p.complete(Success(6))
    ks.foreach(k => assertEquals(k.values, List(Success(5))))

  test("every listener of a running future fires exactly once, from its completion"):
    val gate = CountDownLatch(1)
    val ks = Vector.fill(10)(Recorder[Try[Int]]())
    Async.blocking:
      val f = Future:
        gate.await()
        7
      ks.foreach(f.onComplete)
      gate.countDown()
      ks.foreach(k => awaitLatch(k.called, "a listener of the future"))
    ks.foreach(k => assertEquals(k.values, List(Success(7))))

  test("a dropped listener never fires; dropping an unknown listener is harmless"):
    val p = Promise[Int]()
    val kept = Recorder[Try[Int]]()
    val dropped = Recorder[Try[Int]]()
    p.onComplete(dropped)
    p.onComplete(kept)
    p.dropListener(dropped)
    p.dropListener(Recorder[Try[Int]]())
    p.complete(Success(1))
    awaitLatch(kept.called, "the listener that was kept")
    assertEquals(dropped.calls, 0, "a dropped listener fired")

  test("await and the extension await take the value of any source"):
    val src = ProbeSource.persistent[String]()
    Async.blocking:
      val f = Future(Async.await(src) + src.await)
      src.awaitRegistered(1, "(the awaiting future)")
      src.offer("x")
      assertEquals(f.value, "xx")
    assertEquals(src.registered, 0)

  // ---------------------------------------------------------------------------------------------
  // map and filter (behaviour 21)

  test("map does not consume the underlying source"):
    val p = completed(2)
    val src: Async.Source[Try[Int]] = p
    val mapped = src.map(_.map(_ * 10))
    assertEquals(mapped.poll(), Some(Success(20)))
    assertEquals(p.poll(), Some(Success(2)))
    Async.blocking:
      assertEquals(Async.await(mapped), Success(20))
      assertEquals(Async.await(p), Success(2))
      assertEquals(Async.await(mapped), Success(20))

  test("map delivers to a waiting listener once the source completes"):
    val p = Promise[Int]()
    val mapped = (p: Async.Source[Try[Int]]).map(_.get + 1)
    Async.blocking:
      val f = Future(Async.await(mapped))
      p.complete(Success(1))
      assertEquals(f.value, 2)

  test("dropListener on a mapped source unsubscribes from the base; registering again delivers"):
    val base = ProbeSource.persistent[Int]()
    val mapped = base.map(_ * 10)
    val k = Recorder[Int]()
    mapped.onComplete(k)
    assertEquals(base.registered, 1, "the mapped source did not register on its base")
    mapped.dropListener(k)
    assertEquals(base.registered, 0, "dropListener on the mapped source left a listener on the base")
    base.offer(4)
    assertEquals(k.calls, 0, "a listener dropped from a mapped source fired")
    mapped.onComplete(k)
    assertEquals(k.values, List(40))

  test("dropListener on a mapped promise: the listener is not called, registering again delivers"):
    val p = Promise[Int]()
    val mapped = (p: Async.Source[Try[Int]]).map(_.get * 10)
    val k = Recorder[Int]()
    mapped.onComplete(k)
    mapped.dropListener(k)
    p.complete(Success(4))
    assertEquals(k.calls, 0, "a listener dropped from a mapped source fired")
    mapped.onComplete(k)
    awaitLatch(k.called, "the listener registered again")
    assertEquals(k.values, List(40))

  test("dropListener on a filtered source unsubscribes from the base"):
    val base = ProbeSource.persistent[Int]()
    val filtered = base.filter(_ > 0)
    val k = Recorder[Int]()
    filtered.onComplete(k)
    assertEquals(base.registered, 1)
    filtered.dropListener(k)
    assertEquals(base.registered, 0, "dropListener on the filtered source left a listener on the base")
    base.offer(1)
    assertEquals(k.calls, 0)

  test("a race lost through two derived layers leaves no registration on the base"):
    // regression: forwarder equality compared the inner listener by identity, so dropping
    // map(filter(base)) built a new inner forwarder that matched nothing and leaked the original
    val base = ProbeSource.ephemeral[Int]()
    val other = ProbeSource.ephemeral[Int]()
    val race = Async.race(base.filter(_ > 0).map(_ * 10), other)
    val k = Recorder[Int]()
    race.onComplete(k)
    assertEquals(base.registered, 1, "the race did not register through the derived layers")
    other.offer(7)
    awaitLatch(k.called, "the race to be won by the other source")
    assertEquals(k.values, List(7))
    assertEquals(base.registered, 0, "the losing registration through filter and map stayed on the base")

  test("filter on a persistent source: only matching values pass, and the source keeps its value"):
    val p = completed(3)
    val src: Async.Source[Try[Int]] = p
    assertEquals(src.filter(_.get > 5).poll(), None)
    assertEquals(src.filter(_.get < 5).poll(), Some(Success(3)))
    assertEquals(p.poll(), Some(Success(3)))

  test("a value refused by filter stays in an ephemeral source (poll)"):
    val src = ProbeSource.ephemeral[Int]()
    src.offer(5)
    assertEquals(src.filter(_ > 10).poll(), None)
    assertEquals(src.pending, 1, "the filter took a value it refused")
    assertEquals(src.filter(_ < 10).poll(), Some(5))
    assertEquals(src.pending, 0)

  test("a value refused by a filtering reader goes to another reader of an ephemeral source"):
    val src = ProbeSource.ephemeral[Int]()
    Async.blocking:
      val picky = Future(Async.await(src.filter(_ > 10)))
      src.awaitRegistered(1, "(the filtering reader)")
      val plain = Future(Async.await(src))
      src.awaitRegistered(2, "(both readers)")
      src.offer(5) // offered to the filtering reader first, which must refuse it
      assertEquals(resultWithin(plain, "the plain reader to get the refused value"), Success(5))
      assert(!picky.isCompleted, "the filtering reader completed with a value it refused")
      src.offer(20)
      assertEquals(resultWithin(picky, "the filtering reader to get a matching value"), Success(20))
    assertEquals(src.pending, 0)
    assertEquals(src.registered, 0)

  // ---------------------------------------------------------------------------------------------
  // race and either (behaviour 22)

  test("race returns the value of the first source to complete"):
    val srcs = Vector.fill(3)(ProbeSource.persistent[Int]())
    Async.blocking:
      val r = Future(Async.await(Async.race(srcs*)))
      srcs.foreach(_.awaitRegistered(1, "(the race)"))
      srcs(1).offer(11)
      assertEquals(r.value, 11)
      srcs(0).offer(0)
      srcs(2).offer(2)
      assertEquals(r.value, 11)

  test("race of promises returns the first completed"):
    val ps = Vector.fill(3)(Promise[Int]())
    Async.blocking:
      val r = Future(Async.await(Async.race(ps.map(_.future)*)))
      ps(2).complete(Success(2))
      assertEquals(r.value, Success(2))
      ps(0).complete(Success(0))

  test("race of a pending and a completed source returns the completed one at once"):
    val pending = Promise[Int]()
    val race = Async.race(pending.future, Future.now(Success(3)))
    assertEquals(race.poll(), Some(Success(3)))
    Async.blocking:
      assertEquals(Async.await(race), Success(3))

  test("race reports a failure when it comes first"):
    val e = RuntimeException("first")
    val gate = CountDownLatch(1)
    Async.blocking:
      val slow = Future:
        gate.await()
        1
      val failing = Future[Int](throw e)
      assert(failureOf[RuntimeException](Async.await(Async.race(slow, failing))) eq e)
      gate.countDown()

  test("race does not consume persistent sources"):
    val a = completed(1)
    val b = Promise[Int]()
    Async.blocking:
      assertEquals(Async.await(Async.race(a.future, b.future)), Success(1))
      assertEquals(Async.await(Async.race(a.future, b.future)), Success(1))
    assertEquals(a.poll(), Some(Success(1)))

  test("either tells which side won, and the loser keeps running"):
    val gate = CountDownLatch(1)
    val effect = CountDownLatch(1)
    Async.blocking:
      val slow = Future:
        gate.await()
        effect.countDown()
        "slow"
      val fast = Future(1)
      assertEquals(Async.await(Async.either(fast, slow)), Left(Success(1)))
      assertEquals(Async.await(Async.either(slow, fast)), Right(Success(1)))
      gate.countDown()
      awaitLatch(effect, "the loser to run on")
      assertEquals(slow.value, "slow")

  test("a race over ephemeral sources takes exactly one value; the others keep theirs"):
    val srcs = Vector.fill(3)(ProbeSource.ephemeral[Int]())
    srcs.zipWithIndex.foreach((s, i) => s.offer(i))
    Async.blocking:
      val got = Async.await(Async.race(srcs*))
      assertEquals(srcs.map(_.pending), Vector.tabulate(3)(i => if i == got then 0 else 1))
    val waiting = Vector.fill(3)(ProbeSource.ephemeral[Int]())
    Async.blocking:
      val r = Future(Async.await(Async.race(waiting*)))
      waiting.foreach(_.awaitRegistered(1, "(the race)"))
      waiting(1).offer(10)
      assertEquals(r.value, 10)
      waiting(0).offer(0)
      waiting(2).offer(20)
    assertEquals(waiting.map(_.pending), Vector(1, 0, 1), "the race took more than the value it returned")
    assertEquals(waiting.map(_.registered), Vector(0, 0, 0))

  // ---------------------------------------------------------------------------------------------
  // Races leave nothing behind

  test("a race of 1,000 sources leaves no listener on the losers"):
    val n = 1000
    val winner = 537
    val srcs = Vector.fill(n)(ProbeSource.persistent[Int]())
    Async.blocking:
      val r = Future(Async.await(Async.race(srcs*)))
      srcs.foreach(_.awaitRegistered(1, "(the race)"))
      srcs(winner).offer(winner)
      assertEquals(r.value, winner)
    val holding = srcs.indices.filter(srcs(_).registered != 0)
    assert(holding.isEmpty, s"${holding.size} sources still hold a listener of the finished race, e.g. ${holding.take(5)}")
    srcs.indices.filter(_ != winner).foreach(i => srcs(i).offer(i))
    val called = srcs.indices.filter(i => i != winner && srcs(i).calls != 0)
    assert(called.isEmpty, s"completing ${called.size} losers called a listener of the finished race")

  test("a race of 1,000 promises returns the one completed; completing the losers later is harmless"):
    val ps = Vector.fill(1000)(Promise[Int]())
    Async.blocking:
      val r = Future(Async.await(Async.race(ps.map(_.future)*)))
      ps(999).complete(Success(999))
      assertEquals(r.value, Success(999))
      ps.init.zipWithIndex.foreach((p, i) => assert(p.complete(Success(i))))
      assert(Async.await(Async.race(ps.map(_.future)*)).isSuccess)

  test("nested races leave no listener behind"):
    val srcs = Vector.fill(100)(ProbeSource.persistent[Int]())
    val nested = Async.race(srcs.grouped(10).map(g => Async.race(g*)).toSeq*)
    Async.blocking:
      val r = Future(Async.await(nested))
      srcs.foreach(_.awaitRegistered(1, "(the nested race)"))
      srcs(42).offer(42)
      assertEquals(r.value, 42)
    val holding = srcs.indices.filter(srcs(_).registered != 0)
    assert(holding.isEmpty, s"${holding.size} sources still hold a listener of the finished nested race")

  test("a cancelled await of a race drops its listeners from every source"):
    val srcs = Vector.fill(10)(ProbeSource.persistent[Int]())
    val thread = AtomicReference[Thread]()
    Async.blocking:
      val r = Future:
        thread.set(Thread.currentThread())
        Async.await(Async.race(srcs*))
      srcs.foreach(_.awaitRegistered(1, "(the race)"))
      r.cancel()
      join(thread.get, "the cancelled racer")
      assertCancelledNow(r)
    assertEquals(srcs.map(_.registered).sum, 0, "a cancelled race left listeners registered")

  // ---------------------------------------------------------------------------------------------
  // Concurrency (behaviour 24 in this API's shape)

  test("32 concurrent awaiters of the same race all see the same winner (20 rounds)"):
    val rnd = scala.util.Random(31)
    for round <- 1 to 20 do
      val n = 50
      val srcs = Vector.fill(n)(ProbeSource.persistent[Int]())
      val first = rnd.nextInt(n)
      Async.blocking:
        val awaiters = Vector.fill(32)(Future(Async.await(Async.race(srcs*))))
        srcs.foreach(_.awaitRegistered(32, "(every awaiter)"))
        // From one thread, in index order from `first`: each awaiter's first completion is `first`.
        for i <- first until n do srcs(i).offer(i)
        val winners = awaiters.map(_.value)
        assert(winners.forall(_ == first), s"round $round: first completed $first, awaiters saw ${winners.distinct}")
      val holding = srcs.map(_.registered).sum
      assertEquals(holding, 0, s"round $round: listeners left behind")

  test("readers racing over ephemeral sources take every value exactly once"):
    val nSources = 10
    val perSource = 100
    val total = nSources * perSource
    val srcs = Vector.fill(nSources)(ProbeSource.ephemeral[Int]())
    val taken = ConcurrentLinkedQueue[Int]()
    val tickets = AtomicInteger(total)
    Async.blocking:
      val readers = Vector.fill(8):
        Future:
          while tickets.getAndDecrement() > 0 do taken.add(Async.await(Async.race(srcs*)))
      val producers = srcs.zipWithIndex.map: (s, j) =>
        Future:
          for i <- 0 until perSource do s.offer(j * perSource + i)
      producers.foreach(_.value)
      readers.foreach(_.value)
    val got = taken.toArray.toVector.map(_.asInstanceOf[Int]).sorted
    assertEquals(got.size, total, "values taken")
    assertEquals(got, (0 until total).toVector, "every value exactly once")
    assertEquals(srcs.map(_.pending).sum, 0)
    assertEquals(srcs.map(_.registered).sum, 0)

  test("a race hands one value to a listener registered on it, even when two sources fire at once (300 rounds)"):
    // The listener takes whatever it is offered, as the contract allows: only the race itself
    // can keep a second value from being taken.
    for round <- 1 to 300 do
      val a = ProbeSource.ephemeral[Int]()
      val b = ProbeSource.ephemeral[Int]()
      val k = Recorder[Int]()
      Async.race(a, b).onComplete(k)
      val barrier = java.util.concurrent.CyclicBarrier(2)
      val offerers = Vector(a -> 1, b -> 2).map: (src, v) =>
        Thread.ofPlatform().start(() => { barrier.await(); src.offer(v) })
      offerers.foreach(join(_, "an offering thread"))
      assertEquals(k.calls, 1, s"round $round: the race's listener took ${k.values}")
      assertEquals(a.pending + b.pending, 1, s"round $round: values left in the sources")

class SourceOnVirtualThreads extends SourceBehaviour(Runtime.VirtualThreads)
class SourceOnPlatformThreads extends SourceBehaviour(Runtime.PlatformThreads)
