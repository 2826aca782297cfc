package asyncpipe.cli.system

import asyncpipe.async.Watchdog
import java.nio.charset.Charset
import java.nio.file.Files

/** [[Inotify]] on a real directory: the events a follower acts on come out of one read, in order,
  * with their watch, mask, cookie and name as the kernel gave them (names of any length, a
  * non-ASCII one, many events in one read), and an unwatched watch is reported ignored.
  */
class InotifyTest extends munit.FunSuite with Watchdog:
  import Inotify.*

  /** An inotify instance watching a new directory for entries created, renamed and deleted. */
  private val watched = FunFixture[(Inotify, os.Path, Int)](
    _ =>
      val i = Inotify.open()
      assume(i.isDefined, "no inotify here (not Linux, or no native access)")
      val dir = os.temp.dir(prefix = "asyncpipe-inotify-")
      val wd = i.get.watch(dir.toNIO, Create | Delete | MovedFrom | MovedTo | OnlyDir)
      assert(wd >= 0, s"watch of $dir: $wd")
      (i.get, dir, wd),
    (i, dir, _) => { i.close(); os.remove.all(dir) })

  /** The events that come within a bounded wait, until `count` have come. */
  private def events(i: Inotify, count: Int): Seq[Event] =
    val deadline = System.nanoTime() + 10_000_000_000L
    var got = Vector.empty[Event]
    while got.size < count && System.nanoTime() < deadline do got ++= i.await(100)
    got

  watched.test("a create, a rename and a delete come in order, each with its watch, mask and name; the rename's two halves share a cookie"): (i, dir, wd) =>
    os.write(dir / "app.log", "x")
    os.move(dir / "app.log", dir / "app.log.1")
    os.remove(dir / "app.log.1")
    val got = events(i, 4)
    assertEquals(got.map(e => (e.wd, e.mask & ~0x40000000, e.name)), // (IN_ISDIR is not set: files)
      Seq((wd, Create, "app.log"), (wd, MovedFrom, "app.log"), (wd, MovedTo, "app.log.1"), (wd, Delete, "app.log.1")))
    assertEquals(got(1).cookie, got(2).cookie)
    assertNotEquals(got(1).cookie, 0)
    assert(!got.exists(e => e.overflowed || e.ignored), got.toString)

  watched.test("names of every length up to 255 bytes, and a non-ASCII one, come whole from one read of many events"): (i, dir, _) =>
    // (The non-ASCII name only where this JVM can make it: under the C locale its file names are ASCII.)
    val nonAscii = Seq("journal-ÿ-€.log").filter(n => Charset.forName(System.getProperty("sun.jnu.encoding", "UTF-8")).newEncoder.canEncode(n))
    val names = (1 to 255 by 7).map(n => "n" * n) ++ nonAscii
    for n <- names do os.write(dir / n, "")
    val got = events(i, names.size)
    assertEquals(got.map(_.name), names)
    assert(got.forall(_.mask == Create), got.map(_.mask).distinct.toString)

  watched.test("an unwatched directory's watch is reported ignored, and its events stop"): (i, dir, wd) =>
    i.unwatch(wd)
    val got = events(i, 1)
    assertEquals(got.map(e => (e.wd, e.ignored)), Seq((wd, true)))
    os.write(dir / "after", "")
    assertEquals(i.await(200), Nil)

  test("a file watched through /proc/self/fd reports writes to it under any name"):
    val i = Inotify.open()
    assume(i.isDefined, "no inotify here (not Linux, or no native access)")
    val dir = os.temp.dir(prefix = "asyncpipe-inotify-")
    val file = dir / "app.log"
    os.write(file, "")
    val channel = java.nio.channels.FileChannel.open(file.toNIO)
    try
      val fd = Splice.descriptor(channel)
      assume(fd >= 0, "the descriptor of a FileChannel cannot be read here")
      val wd = i.get.watch(java.nio.file.Path.of(s"/proc/self/fd/$fd"), Modify)
      assert(wd >= 0)
      Files.move(file.toNIO, (dir / "app.log.1").toNIO)
      os.write.append(dir / "app.log.1", "more\n")
      assertEquals(events(i.get, 1).map(e => (e.wd, e.mask, e.name)), Seq((wd, Modify, "")))
    finally
      channel.close()
      i.get.close()
      os.remove.all(dir)
