package asyncpipe.io

import asyncpipe.async.*
import asyncpipe.async.Support.*
import java.io.RandomAccessFile
import java.nio.ByteBuffer
import java.nio.charset.{Charset, StandardCharsets}
import java.nio.file.{Files, Path}
import java.nio.file.StandardOpenOption.*
import java.util.concurrent.{CancellationException, ConcurrentLinkedQueue, CountDownLatch, TimeUnit}
import java.util.concurrent.atomic.{AtomicInteger, AtomicReference}
import scala.util.{Failure, Random, Success, Try}
import scala.util.control.NonFatal
import munit.{Assertions, Location}

/** Helpers of the io suites (File, SocketUDP, PIOHelper). */
private[io] object IoSupport:
  /** A runtime that remembers the threads it starts, so that a test can see where a worker
    * future of the library is blocked (virtual threads are not in `Thread.getAllStackTraces`).
    */
  final class RecordingRuntime(base: Runtime) extends Runtime:
    private val started = ConcurrentLinkedQueue[Thread]()
    def name: String = s"${base.name} (recorded)"
    def start(task: Runnable): Thread = recorded(base.start(task))
    override def startForSystemCall(task: Runnable): Thread = recorded(base.startForSystemCall(task))
    private def recorded(t: Thread): Thread =
      started.add(t)
      t
    override def park(blocker: AnyRef): Unit = base.park(blocker)
    override def parkNanos(blocker: AnyRef, nanos: Long): Unit = base.parkNanos(blocker, nanos)
    override def unpark(thread: Thread): Unit = base.unpark(thread)
    override def interrupt(thread: Thread): Unit = base.interrupt(thread)
    def threads: List[Thread] = started.toArray(Array.empty[Thread]).toList

    /** Waits until a thread started here is inside a frame `frame` accepts (a blocking system
      * call, say), and returns it.
      */
    def awaitThreadIn(what: String)(frame: StackTraceElement => Boolean)(using Location): Thread =
      val found = AtomicReference[Thread]()
      eventually(s"a worker thread to be $what") {
        threads.find(t => t.isAlive && t.getStackTrace.exists(frame)) match
          case Some(t) => found.set(t); true
          case None    => false
      }
      found.get

  /** A frame of a blocking read of a file (a FIFO here) in the JDK's native dispatcher. */
  def inFileRead(e: StackTraceElement): Boolean =
    e.getClassName.contains("FileDispatcher") && e.getMethodName.startsWith("read")

  /** A frame of a selector waiting for readiness. */
  def inSelect(e: StackTraceElement): Boolean =
    e.getClassName.contains("SelectorImpl") && e.getMethodName == "doSelect"

  def blockingOn[T](runtime: Runtime)(body: Async ?=> T): T = Async.blocking(body)(using runtime)

  /** A fresh temporary directory per test, deleted with everything in it afterwards. */
  trait TempDirs extends munit.FunSuite:
    val tempDir: FunFixture[Path] = FunFixture[Path](
      setup = _ => Files.createTempDirectory("asyncpipe-io-test"),
      teardown = dir => deleteRecursively(dir)
    )

  def deleteRecursively(p: Path): Unit =
    if Files.isDirectory(p, java.nio.file.LinkOption.NOFOLLOW_LINKS) then
      val children = Files.list(p)
      try children.toArray.foreach(c => deleteRecursively(c.asInstanceOf[Path]))
      finally children.close()
    Files.deleteIfExists(p)

  /** The result of an IO operation, whether it failed in its future or by throwing at the call. */
  def outcome[T](op: => Future[T])(using Async): Try[T] =
    try op.result
    catch case NonFatal(e) => Failure(e)

  /** The result of a non-future operation (`position`, `size`, `localPort`). */
  def attempt[T](op: => T): Try[T] =
    try Success(op)
    catch case NonFatal(e) => Failure(e)

  def assertMentions(e: Throwable, parts: String*)(using Location): Unit =
    val m = String.valueOf(e.getMessage)
    parts.foreach: p =>
      Assertions.assert(m.toLowerCase.contains(p.toLowerCase), s"expected the message to mention '$p', got: $m")

  /** Where two long strings first differ, for a readable failure instead of a 20 MB diff. */
  def assertSameText(got: String, expected: String, what: String)(using Location): Unit =
    if got != expected then
      val i = (0 until math.min(got.length, expected.length)).find(i => got.charAt(i) != expected.charAt(i))
        .getOrElse(math.min(got.length, expected.length))
      def around(s: String) = s.slice(math.max(0, i - 10), i + 10).map(c => f"${c.toInt}%04x").mkString(" ")
      Assertions.fail(s"$what: lengths ${got.length} (got) vs ${expected.length} (expected); first difference at char $i: got [${around(got)}], expected [${around(expected)}]")

  def assertSameBytes(got: Array[Byte], expected: Array[Byte], what: String)(using Location): Unit =
    val i = java.util.Arrays.mismatch(got, expected)
    if i >= 0 then Assertions.fail(s"$what: ${got.length} bytes (got) vs ${expected.length} (expected); first difference at byte $i")

  /** Characters of 1, 2, 3 and 4 bytes in UTF-8 (the last ones are surrogate pairs in a String). */
  val OneByte: Vector[String] = Vector("a", "Z", "0", " ", "\n", "~")
  val TwoBytes: Vector[String] = Vector("é", "ß", "Ж", "ñ", "\u07ff")
  val ThreeBytes: Vector[String] = Vector("€", "中", "한", "\u0800", "\uffee")
  val FourBytes: Vector[String] = Vector("😀", "𝄞", "🎉", "\ud800\udc00", "\udbff\udfff")

  /** `chars` characters picked at random (seeded) from `palette`. */
  def mixedText(chars: Int, palette: Vector[String], seed: Long): String =
    val r = Random(seed)
    val b = java.lang.StringBuilder(chars * 2)
    var i = 0
    while i < chars do
      b.append(palette(r.nextInt(palette.size)))
      i += 1
    b.toString

  def randomBytes(n: Int, seed: Long): Array[Byte] =
    val a = new Array[Byte](n)
    Random(seed).nextBytes(a)
    a

  /** Makes a FIFO with `mkfifo`; the test is skipped where there is no mkfifo. */
  def makeFifo(at: Path)(using Location): Unit =
    val made =
      try
        val p = ProcessBuilder("mkfifo", at.toString).redirectErrorStream(true).start()
        p.waitFor(Patience, TimeUnit.MILLISECONDS) && p.exitValue == 0
      catch case _: java.io.IOException => false
    Assertions.assume(made, s"mkfifo $at failed or there is no mkfifo: FIFO tests skipped")

  /** The FIFO's other end, opened read-write so that neither end's open waits for the other
    * (Linux); write into it with `write`, close it to give the reader an end of file.
    */
  def fifoWriter(at: Path): RandomAccessFile = RandomAccessFile(at.toFile, "rw")

import IoSupport.*

/** The File half of PosixLikeIO: round trips, positions, text decoding, errors, and what a
  * cancel does (held on a regular file, closing a blocked FIFO read).
  */
abstract class FileBehaviour(runtime: Runtime) extends munit.FunSuite, Watchdog, TempDirs:
  given Runtime = runtime

  private val U8 = StandardCharsets.UTF_8

  private def fileWith(dir: Path, name: String, bytes: Array[Byte]): Path =
    val p = dir.resolve(name)
    Files.write(p, bytes)
    p

  private def bytesOf(s: String, cs: Charset = U8): Array[Byte] = s.getBytes(cs)

  /** Reads the channel to its end through `buffer`, sequentially. */
  private def readAll(f: File, buffer: ByteBuffer)(using Async): Array[Byte] =
    val out = java.io.ByteArrayOutputStream()
    var n = 0
    while n >= 0 do
      buffer.clear()
      n = f.read(buffer).value
      buffer.flip()
      val chunk = new Array[Byte](buffer.remaining)
      buffer.get(chunk)
      out.write(chunk)
    out.toByteArray

  private def writeAll(f: File, buffer: ByteBuffer)(using Async): Int =
    var total = 0
    while buffer.hasRemaining do
      val n = f.write(buffer).value
      assert(n >= 0, s"write returned $n")
      total += n
    total

  /** Successive readString(n) calls until "" (bounded by the byte count), each checked to be at
    * most n bytes.
    */
  private def readInPieces(f: File, n: Int, bytes: Long, cs: Charset = U8)(using Async, Location): String =
    val b = java.lang.StringBuilder()
    var piece = "x"
    var calls = 0L
    while piece.nonEmpty do
      piece = f.readString(n, cs).value
      assert(piece.getBytes(cs).length <= n, s"readString($n) gave ${piece.getBytes(cs).length} bytes: $piece")
      b.append(piece)
      calls += 1
      assert(calls <= bytes + 1, s"readString($n) did not reach the end after $calls calls over $bytes bytes")
    b.toString

  // ---------------------------------------------------------------------------------------------
  // Round trips

  tempDir.test("writeString then readString gives the text back, characters of 1 to 4 bytes"): dir =>
    val text = "hello, wörld: € 中 😀 𝄞\n" + mixedText(500, OneByte ++ TwoBytes ++ ThreeBytes ++ FourBytes, 1)
    val p = dir.resolve("t.txt").toString
    Async.blocking:
      val w = File(p).open(CREATE, WRITE)
      assertEquals(w.writeString(text).value, bytesOf(text).length, "writeString's count of bytes")
      assertEquals(w.position, bytesOf(text).length.toLong)
      w.close()
      assertSameBytes(Files.readAllBytes(Path.of(p)), bytesOf(text), "the file written")
      val r = File(p).open()
      assertSameText(r.readString(10_000).value, text, "readString of the whole file")
      r.close()

  tempDir.test("write(ByteBuffer) then read(ByteBuffer) gives the bytes back, heap and direct buffers"): dir =>
    val data = randomBytes(100_000, 2)
    def alloc(direct: Boolean, n: Int) = if direct then ByteBuffer.allocateDirect(n) else ByteBuffer.allocate(n)
    for writeDirect <- Seq(false, true); readDirect <- Seq(false, true) do
      val what = s"written from a ${if writeDirect then "direct" else "heap"} buffer, read into a ${if readDirect then "direct" else "heap"} one"
      val p = dir.resolve(s"b-$writeDirect-$readDirect.bin").toString
      Async.blocking:
        val w = File(p).open(CREATE_NEW, WRITE)
        val out = alloc(writeDirect, data.length).put(data).flip()
        assertEquals(writeAll(w, out), data.length, what)
        assertEquals(w.size, data.length.toLong, what)
        w.close()
        val r = File(p).open(READ)
        assertSameBytes(readAll(r, alloc(readDirect, 7_777)), data, what)
        r.close()

  tempDir.test("sequential reads continue from the position, which advances"): dir =>
    val p = fileWith(dir, "s.txt", bytesOf("hello world!")).toString
    Async.blocking:
      val f = File(p).open()
      assertEquals(f.position, 0L)
      assertEquals(f.readString(5).value, "hello")
      assertEquals(f.position, 5L)
      assertEquals(f.readString(6).value, " world")
      assertEquals(f.position, 11L)
      val buf = ByteBuffer.allocate(10)
      assertEquals(f.read(buf).value, 1)
      assertEquals(buf.get(0).toChar, '!')
      assertEquals(f.position, 12L)
      f.close()

  tempDir.test("positional read and write leave the sequential position alone"): dir =>
    val p = dir.resolve("pos.txt").toString
    Async.blocking:
      val f = File(p).open(CREATE, READ, WRITE)
      f.writeString("0123456789").value
      assertEquals(f.position, 10L)
      assertEquals(f.write(ByteBuffer.wrap(bytesOf("AB")), 2).value, 2)
      assertEquals(f.position, 10L, "after a positional write")
      val buf = ByteBuffer.allocate(3)
      assertEquals(f.read(buf, 5).value, 3)
      assertEquals(String(buf.array, U8), "567")
      assertEquals(f.position, 10L, "after a positional read")
      f.writeString("xy").value // sequential: at 10, not where the positional calls were
      f.close()
      assertEquals(Files.readString(Path.of(p)), "01AB456789xy")
      val r = File(p).open()
      assertEquals(r.read(ByteBuffer.allocate(4), 8).value, 4)
      assertEquals(r.readString(4).value, "01AB", "the sequential read starts at 0 after a positional read at 8")
      r.close()

  tempDir.test("APPEND writes at the end of the file"): dir =>
    val p = fileWith(dir, "a.txt", bytesOf("abc")).toString
    Async.blocking:
      val f = File(p).open(APPEND)
      f.writeString("def").value
      f.write(ByteBuffer.wrap(bytesOf("ghi"))).value
      f.close()
      assertEquals(Files.readString(Path.of(p)), "abcdefghi")
      val g = File(p).open(WRITE, APPEND)
      g.writeString("€").value
      g.close()
      assertEquals(Files.readString(Path.of(p)), "abcdefghi€")

  // ---------------------------------------------------------------------------------------------
  // Large files: more than one 1 MiB chunk (Chunks.Size), content that shows a misplaced chunk

  private val LargeBytes = 20 * 1024 * 1024

  tempDir.test("a 20 MB text round-trips through writeString and readString, whole and in odd pieces"): dir =>
    val palette = OneByte ++ TwoBytes ++ ThreeBytes ++ FourBytes
    val text = mixedText(LargeBytes / 2, palette, 3) // ~2.4 bytes a character: more than 20 MB
    val expected = bytesOf(text)
    assert(expected.length > LargeBytes, s"the text is ${expected.length} bytes")
    assert(expected.length > 8 * Chunks.Size)
    val p = dir.resolve("large.txt").toString
    Async.blocking:
      val w = File(p).open(CREATE_NEW, WRITE)
      assertEquals(w.writeString(text).value, expected.length)
      w.close()
      assertSameBytes(Files.readAllBytes(Path.of(p)), expected, "the file written by writeString")
      val r = File(p).open()
      assertSameText(r.readString(expected.length + 10).value, text, "one readString of the whole file")
      assertEquals(r.readString(10).value, "", "readString at the end")
      r.close()
      val pieces = File(p).open()
      assertSameText(readInPieces(pieces, 1_000_003, expected.length), text, "readString(1_000_003) pieces")
      pieces.close()

  tempDir.test("a 20 MB file round-trips byte for byte through write and read of heap and direct ByteBuffers"): dir =>
    val data = randomBytes(LargeBytes + 12_345, 4)
    Async.blocking:
      val heapFile = dir.resolve("heap.bin").toString
      val w = File(heapFile).open(CREATE_NEW, WRITE)
      assertEquals(writeAll(w, ByteBuffer.wrap(data)), data.length)
      w.close()
      assertSameBytes(Files.readAllBytes(Path.of(heapFile)), data, "written from one heap buffer")
      val r = File(heapFile).open()
      assertSameBytes(readAll(r, ByteBuffer.allocateDirect(data.length + 1)), data, "read into one direct buffer")
      r.close()

      val directFile = dir.resolve("direct.bin").toString
      val w2 = File(directFile).open(CREATE_NEW, WRITE)
      assertEquals(writeAll(w2, ByteBuffer.allocateDirect(data.length).put(data).flip()), data.length)
      w2.close()
      assertSameBytes(Files.readAllBytes(Path.of(directFile)), data, "written from one direct buffer")
      val r2 = File(directFile).open()
      assertSameBytes(readAll(r2, ByteBuffer.allocate(3 * 1024 * 1024 + 7)), data, "read into a 3 MiB heap buffer")
      r2.close()

  // ---------------------------------------------------------------------------------------------
  // Ends of files

  tempDir.test("an empty file: readString gives \"\", read gives -1"): dir =>
    val p = fileWith(dir, "empty", Array.emptyByteArray).toString
    Async.blocking:
      val f = File(p).open()
      assertEquals(f.readString(100).value, "")
      assertEquals(f.read(ByteBuffer.allocate(10)).value, -1)
      assertEquals(f.read(ByteBuffer.allocate(10), 0).value, -1)
      assertEquals(f.position, 0L)
      assertEquals(f.size, 0L)
      f.close()

  tempDir.test("reads past the end give -1 and \"\""): dir =>
    val p = fileWith(dir, "short", bytesOf("abc")).toString
    Async.blocking:
      val f = File(p).open()
      assertEquals(f.readString(100).value, "abc", "fewer bytes than asked at the end")
      assertEquals(f.readString(100).value, "")
      assertEquals(f.read(ByteBuffer.allocate(10)).value, -1)
      assertEquals(f.read(ByteBuffer.allocate(10), 3).value, -1, "positional read at the size")
      assertEquals(f.read(ByteBuffer.allocate(10), 1000).value, -1, "positional read beyond the size")
      assertEquals(f.readString(0).value, "", "readString(0)")
      f.close()

  // ---------------------------------------------------------------------------------------------
  // Text: cut characters, malformed input, unencodable text, other charsets

  tempDir.test("readString leaves a character cut by the size for the next read"): dir =>
    val p = fileWith(dir, "cut.txt", bytesOf("aé€😀z")).toString // 1 + 2 + 3 + 4 + 1 bytes
    Async.blocking:
      val f = File(p).open()
      assertEquals(f.readString(2).value, "a", "2 bytes cut é after a")
      assertEquals(f.position, 1L, "the cut byte is given back")
      assertEquals(f.readString(4).value, "é", "é and 2 bytes of €: € left")
      assertEquals(f.position, 3L)
      assertEquals(f.readString(6).value, "€", "€ and 3 bytes of 😀: 😀 left")
      assertEquals(f.position, 6L)
      assertEquals(f.readString(4).value, "😀")
      assertEquals(f.readString(4).value, "z")
      assertEquals(f.readString(4).value, "")
      f.close()

  tempDir.test("successive readString(n) reproduce a mixed text for n = 1 to 7 (n < 4 over characters of at most n bytes)"): dir =>
    Async.blocking:
      for n <- 1 to 7 do
        val palette = n match
          case 1 => OneByte
          case 2 => OneByte ++ TwoBytes
          case 3 => OneByte ++ TwoBytes ++ ThreeBytes
          case _ => OneByte ++ TwoBytes ++ ThreeBytes ++ FourBytes
        val text = mixedText(3000, palette, 10 + n)
        val p = fileWith(dir, s"pieces-$n.txt", bytesOf(text)).toString
        val f = File(p).open()
        assertSameText(readInPieces(f, n, bytesOf(text).length), text, s"readString($n) pieces")
        f.close()

  tempDir.test("readString smaller than the next character fails with a message naming the size"): dir =>
    val p = fileWith(dir, "big-char.txt", bytesOf("😀x")).toString
    Async.blocking:
      for n <- 1 to 3 do
        val f = File(p).open()
        val e = failureOf[PosixIOException](outcome(f.readString(n)))
        assertMentions(e, p, s"size $n", "smaller than the character")
        f.close()

  tempDir.test("a readString that failed for being smaller than the character takes nothing: the next read gets it"): dir =>
    val p = fileWith(dir, "big-char2.txt", bytesOf("é😀x")).toString
    Async.blocking:
      val f = File(p).open()
      failureOf[PosixIOException](outcome(f.readString(1)))
      assertEquals(f.position, 0L, "position after a readString that failed")
      assertEquals(f.readString(4).value, "é", "the read after the failed one")
      failureOf[PosixIOException](outcome(f.readString(3)))
      assertEquals(f.position, 2L, "position after a second readString that failed")
      assertEquals(f.readString(4).value, "😀")
      f.close()

  tempDir.test("malformed UTF-8 fails with a message naming the byte offset in the file"): dir =>
    val bad = bytesOf("abc") ++ Array(0xff.toByte) ++ bytesOf("def")
    val p = fileWith(dir, "bad.txt", bad).toString
    Async.blocking:
      val f = File(p).open()
      val e = failureOf[PosixIOException](outcome(f.readString(100)))
      assertMentions(e, p, "malformed", "byte 3")
      f.close()
      val g = File(p).open()
      assertEquals(g.readString(2).value, "ab")
      val e2 = failureOf[PosixIOException](outcome(g.readString(100)))
      assertMentions(e2, "byte 3") // the offset in the file, not in this read
      g.close()
      // a character cut by the end of the file is malformed too
      val q = fileWith(dir, "truncated.txt", bytesOf("ab") ++ bytesOf("€").take(2)).toString
      val h = File(q).open()
      val e3 = failureOf[PosixIOException](outcome(h.readString(100)))
      assertMentions(e3, q, "malformed", "byte 2")
      h.close()
      // a lone continuation byte in the middle
      val c = fileWith(dir, "continuation.txt", bytesOf("0123456") ++ Array(0x80.toByte) ++ bytesOf("89")).toString
      val k = File(c).open()
      assertEquals(k.readString(5).value, "01234")
      assertMentions(failureOf[PosixIOException](outcome(k.readString(5))), c, "malformed", "byte 7")
      k.close()

  tempDir.test("a real U+FFFD in the file is text, not an error"): dir =>
    val p = fileWith(dir, "fffd.txt", bytesOf("a\ufffdb")).toString
    Async.blocking:
      val f = File(p).open()
      assertEquals(f.readString(100).value, "a\ufffdb")
      f.close()

  tempDir.test("writeString of text the charset cannot encode fails, naming the problem, and writes nothing"): dir =>
    val p = dir.resolve("w.txt").toString
    Async.blocking:
      val f = File(p).open(CREATE, READ, WRITE)
      val cases = Seq(
        ("ab\ud800cd", U8, Seq("surrogate", "U+D800")), // a lone high surrogate in ASCII text
        ("xyz\udc00", U8, Seq("surrogate", "U+DC00")), // a lone low surrogate at the end
        ("\ud83d", U8, Seq("surrogate", "U+D83D")), // half of an emoji, alone
        ("é \ud800 😀", U8, Seq("surrogate", "U+D800")), // among other non-ASCII characters
        ("price: 5€", StandardCharsets.ISO_8859_1, Seq("ISO-8859-1"))
      )
      val wrong = cases.flatMap: (text, cs, words) =>
        outcome(f.writeString(text, cs)) match
          case Failure(e: PosixIOException) =>
            assertMentions(e, (p +: words)*)
            None
          case other => Some(s"writeString(${text.map(c => f"U+${c.toInt}%04X").mkString(" ")}, ${cs.name}) gave $other")
      assert(wrong.isEmpty, s"expected every writeString to fail; these did not (the file now has ${f.size} bytes):\n${wrong.mkString("\n")}")
      assertEquals(f.size, 0L, "bytes written by the failed writeString calls")
      assertEquals(f.position, 0L)
      assertEquals(f.writeString("ok").value, 2, "a writeString after the failures")
      f.close()
      assertEquals(Files.readString(Path.of(p)), "ok")

  tempDir.test("UTF-16 and ISO-8859-1 round trips, and UTF-16 read in pieces that cut characters"): dir =>
    Async.blocking:
      val latin = "café, ÿ, ß, « » ½ \u00a0 \u0000 \u00ff"
      val lp = dir.resolve("latin1.txt").toString
      val l = File(lp).open(CREATE, READ, WRITE)
      assertEquals(l.writeString(latin, StandardCharsets.ISO_8859_1).value, latin.length)
      l.close()
      assertSameBytes(Files.readAllBytes(Path.of(lp)), latin.getBytes(StandardCharsets.ISO_8859_1), "ISO-8859-1 file")
      val lr = File(lp).open()
      assertEquals(lr.readString(1000, StandardCharsets.ISO_8859_1).value, latin)
      lr.close()

      val text = "UTF-16: é € 😀 𝄞 中 " + mixedText(300, OneByte ++ TwoBytes ++ ThreeBytes ++ FourBytes, 5)
      for cs <- Seq(StandardCharsets.UTF_16, StandardCharsets.UTF_16BE, StandardCharsets.UTF_16LE) do
        val up = dir.resolve(s"${cs.name}.txt").toString
        val u = File(up).open(CREATE, WRITE)
        assertEquals(u.writeString(text, cs).value, text.getBytes(cs).length, cs.name)
        u.close()
        assertSameBytes(Files.readAllBytes(Path.of(up)), text.getBytes(cs), s"${cs.name} file")
        val ur = File(up).open()
        assertSameText(ur.readString(100_000, cs).value, text, s"${cs.name} whole")
        ur.close()
        if cs != StandardCharsets.UTF_16 then // UTF-16 with a byte-order mark: only the first read has it
          for n <- Seq(4, 5, 6, 7) do
            val pr = File(up).open()
            assertSameText(readInPieces(pr, n, text.getBytes(cs).length, cs), text, s"${cs.name} in readString($n) pieces")
            pr.close()

  // ---------------------------------------------------------------------------------------------
  // Opening, closing, and errors

  tempDir.test("open with READ and APPEND fails with a PosixIOException naming the path and the options"): dir =>
    val p = fileWith(dir, "opts.txt", bytesOf("x")).toString
    val f = File(p)
    val e = intercept[PosixIOException](f.open(READ, APPEND))
    assertMentions(e, p, "READ", "APPEND", "bad options")
    assertEquals(e.operation, "open")
    assertEquals(e.target, p)
    assert(!f.isOpened)

  tempDir.test("open of a missing file fails: the message has the path and 'no such file'"): dir =>
    val p = dir.resolve("no-such-file.txt").toString
    val f = File(p)
    val e = intercept[PosixIOException](f.open())
    assertMentions(e, p, "no such file")
    assert(!f.isOpened)
    assert(!Files.exists(Path.of(p)), "a failed open created the file")
    val e2 = intercept[PosixIOException](File(dir.resolve("no-dir/x.txt").toString).open(CREATE, WRITE))
    assertMentions(e2, "no-dir/x.txt", "no such file")

  tempDir.test("open of a file without permission fails with 'permission denied'"): dir =>
    val path = fileWith(dir, "secret.txt", bytesOf("secret"))
    Files.setPosixFilePermissions(path, java.util.Set.of())
    val readable = try { Files.readAllBytes(path); true } catch case _: java.io.IOException => false
    assume(!readable, s"running as ${System.getProperty("user.name")}, who can read a file of mode 000: skipped")
    val e = intercept[PosixIOException](File(path.toString).open())
    assertMentions(e, path.toString, "permission denied")

  tempDir.test("opening an open File throws IllegalStateException and leaves it open and usable"): dir =>
    val p = fileWith(dir, "twice.txt", bytesOf("abc")).toString
    Async.blocking:
      val f = File(p).open()
      val e = intercept[IllegalStateException](f.open())
      assertMentions(e, p, "already open")
      assert(f.isOpened)
      assertEquals(f.readString(10).value, "abc")
      f.close()

  /** Every operation on `f` (at path `p`) fails with a PosixIOException naming the operation,
    * the path and `why`.
    */
  private def everyOperationFails(f: File, p: String, why: String)(using Async, Location): Unit =
    val failures = Seq[(String, Try[Any])](
      "read" -> outcome(f.read(ByteBuffer.allocate(1))),
      "read" -> outcome(f.read(ByteBuffer.allocate(1), 0)),
      "write" -> outcome(f.write(ByteBuffer.allocate(1))),
      "write" -> outcome(f.write(ByteBuffer.allocate(1), 0)),
      "read" -> outcome(f.readString(1)),
      "write" -> outcome(f.writeString("x")),
      "position" -> attempt(f.position),
      "size" -> attempt(f.size)
    )
    for (op, t) <- failures do assertMentions(failureOf[PosixIOException](t), op, p, why)

  tempDir.test("operations before open fail with messages naming the path and 'not open'"): dir =>
    val p = fileWith(dir, "unopened.txt", bytesOf("abc")).toString
    Async.blocking:
      val f = File(p)
      assert(!f.isOpened)
      everyOperationFails(f, p, "not open")
      f.close() // closing a never opened file does nothing
      assertEquals(Files.readString(Path.of(p)), "abc")

  tempDir.test("operations after close fail with messages naming the path and 'closed'; close is idempotent"): dir =>
    val p = fileWith(dir, "closed.txt", bytesOf("abc")).toString
    Async.blocking:
      val f = File(p).open(READ, WRITE)
      f.close()
      assert(!f.isOpened)
      f.close()
      f.close()
      everyOperationFails(f, p, "closed")
      assertEquals(Files.readString(Path.of(p)), "abc")

  tempDir.test("a closed File can be opened again, from the start"): dir =>
    val p = fileWith(dir, "again.txt", bytesOf("abcdef")).toString
    Async.blocking:
      val f = File(p).open()
      assertEquals(f.readString(3).value, "abc")
      f.close()
      f.open()
      assert(f.isOpened)
      assertEquals(f.position, 0L)
      assertEquals(f.readString(3).value, "abc")
      f.close()

  tempDir.test("reading a file opened only for writing, and writing one opened only for reading, fail with the reason"): dir =>
    val p = fileWith(dir, "mode.txt", bytesOf("abc")).toString
    Async.blocking:
      val w = File(p).open(WRITE)
      assertMentions(failureOf[PosixIOException](outcome(w.readString(3))), p, "not opened for reading")
      w.close()
      val r = File(p).open(READ)
      assertMentions(failureOf[PosixIOException](outcome(r.writeString("x"))), p, "not opened for writing")
      assert(r.isOpened, "a failed write closed the file")
      r.close()

  tempDir.test("a failed operation reports its failure in its future, not by throwing at the call (PosixLikeIO: Errors)"): dir =>
    val p = fileWith(dir, "future-failure.txt", bytesOf("abc")).toString
    Async.blocking:
      val f = File(p).open()
      f.close()
      def inFuture(what: String)(op: => Future[Any]): Unit =
        val fut =
          try op
          catch case NonFatal(e) => fail(s"$what on a closed file threw $e at the call; the contract says the future holds the failure")
        failureOf[PosixIOException](fut.result)
      inFuture("read")(f.read(ByteBuffer.allocate(1)))
      inFuture("positional read")(f.read(ByteBuffer.allocate(1), 0))
      inFuture("write")(f.write(ByteBuffer.allocate(1)))
      inFuture("readString")(f.readString(1))
      inFuture("writeString")(f.writeString("x"))

  test("invalid arguments throw IllegalArgumentException at the call"):
    Async.blocking:
      val f = File("/nonexistent-but-not-opened")
      intercept[IllegalArgumentException](f.readString(-1))
      intercept[IllegalArgumentException](f.read(ByteBuffer.allocate(1), -1))
      intercept[IllegalArgumentException](f.write(ByteBuffer.allocate(1), -1))

  test("open of an invalid path fails with a PosixIOException saying so"):
    val e = intercept[PosixIOException](File("bad\u0000path").open())
    assertMentions(e, "invalid path")

  // ---------------------------------------------------------------------------------------------
  // Cancelling the caller of an operation on a regular file: held, the file stays open

  tempDir.test("a cancel that arrives while a future reads a regular file is held: the file stays open"): dir =>
    val p = fileWith(dir, "busy.bin", randomBytes(2 * 1024 * 1024, 6)).toString
    val f = File(p).open()
    try
      for round <- 1 to 30 do
        val started = CountDownLatch(1)
        val last = AtomicReference[Try[Int]]()
        val reads = AtomicInteger()
        Async.blocking:
          val reader = Future:
            val buf = ByteBuffer.allocateDirect(1024 * 1024)
            var r: Try[Int] = Success(0)
            while r.isSuccess do
              buf.clear()
              // positional and sequential reads in turn; results taken without awaiting
              r = (if reads.get % 2 == 0 then f.read(buf, 0) else f.read(buf)).poll().get
              if reads.incrementAndGet() == 1 then started.countDown()
            last.set(r)
          awaitLatch(started, "the reader's first read")
          reader.cancel()
          assertCancelledNow(reader)
        assert(f.isOpened, s"round $round: the file was closed by a cancel during a read (after ${reads.get} reads)")
        assertCancelled(last.get)
        Async.blocking(assertEquals(f.read(ByteBuffer.allocate(4), 0).poll().get, Success(4), s"round $round: a read after the cancel"))
    finally f.close()

  tempDir.test("a cancel during a large writeString is held until it returns: the file stays open, with all of the text or none"): dir =>
    val text = mixedText(3 * 1024 * 1024, OneByte ++ TwoBytes ++ ThreeBytes ++ FourBytes, 7)
    val expected = bytesOf(text)
    for round <- 1 to 3 do
      val p = dir.resolve(s"w$round.txt").toString
      val f = File(p).open(CREATE_NEW, WRITE)
      val result = AtomicReference[Try[Int]]()
      val started = CountDownLatch(1)
      Async.blocking:
        val writer = Future:
          started.countDown()
          result.set(f.writeString(text).poll().get)
        awaitLatch(started, "the writer to start")
        writer.cancel()
      assert(f.isOpened, s"round $round: the cancel closed the file")
      val size = f.size
      result.get match
        case Success(n) => assertEquals(n, expected.length)
        case Failure(_: CancellationException) => ()
        case other => fail(s"round $round: writeString gave $other")
      assert(size == 0 || size == expected.length, s"round $round: $size bytes of ${expected.length} written: a partial write")
      f.close()
      if size > 0 then assertSameBytes(Files.readAllBytes(Path.of(p)), expected, s"round $round: the text written")

  tempDir.test("an operation in a cancelled future fails with CancellationException and leaves the file open"): dir =>
    val p = fileWith(dir, "cancelled.txt", bytesOf("abc")).toString
    val f = File(p).open(READ, WRITE)
    val results = ConcurrentLinkedQueue[Try[Any]]()
    val cancelled = CountDownLatch(1)
    val started = CountDownLatch(1)
    Async.blocking:
      val body = Future:
        started.countDown()
        var waited = false
        while !waited do // wait for the cancel without an Async, past its interrupt
          try { cancelled.await(); waited = true }
          catch case _: InterruptedException => ()
        results.add(f.readString(3).poll().get)
        results.add(f.read(ByteBuffer.allocate(3), 0).poll().get)
        results.add(f.writeString("zzz").poll().get)
      awaitLatch(started, "the body to start")
      body.cancel()
      cancelled.countDown()
    assertEquals(results.size, 3)
    results.forEach(r => assertCancelled(r))
    assert(f.isOpened)
    assertEquals(f.position, 0L, "a cancelled readString moved the position")
    f.close()
    assertEquals(Files.readString(Path.of(p)), "abc", "a cancelled writeString wrote")

  // ---------------------------------------------------------------------------------------------
  // FIFOs: operations that can block run in a future; a cancel closes the file

  /** A bound for "promptly": a cancel should take microseconds. */
  private val Prompt = 2000L

  /** Cancels `r` from another thread and checks that `cancel()` returns within `Prompt`. If it
    * does not (it is stuck closing the channel under the blocked read), a write into the FIFO
    * lets the read return, so that the test fails with a message instead of hanging.
    */
  private def cancelPromptly(r: Future[?], writer: RandomAccessFile, what: String)(using Location): Unit =
    val canceller = Thread.ofPlatform().daemon().name("canceller").start(() => r.cancel())
    if !canceller.join(java.time.Duration.ofMillis(Prompt)) then
      val stack = canceller.getStackTrace.take(12).mkString("\n    ")
      writer.write(bytesOf("unblock")) // the blocked read returns, and the cancel with it
      join(canceller, "the canceller after the FIFO got data")
      fail(s"cancel() of a $what blocked on an empty FIFO did not return within $Prompt ms ($runtime); it was at\n    $stack")

  tempDir.test("a FIFO: readString returns what one read gives, and waits for data that comes later"): dir =>
    val fifo = dir.resolve("fifo")
    makeFifo(fifo)
    val writer = fifoWriter(fifo)
    try
      val rec = RecordingRuntime(runtime)
      blockingOn(rec):
        val f = File(fifo.toString).open()
        writer.write(bytesOf("hello"))
        assertEquals(f.readString(100).value, "hello", "what one read gives, not 100 bytes")
        val later = f.readString(100)
        rec.awaitThreadIn("in a read of the FIFO")(inFileRead)
        assert(!later.isCompleted, "readString on an empty FIFO completed")
        writer.write(bytesOf("late €"))
        assertEquals(resultWithin(later, "the waiting readString"), Success("late €"))
        writer.write(bytesOf("bytes"))
        val buf = ByteBuffer.allocate(100)
        assertEquals(f.read(buf).value, 5)
        writer.close()
        assertEquals(f.readString(100).value, "", "readString at the end of the FIFO")
        assertEquals(f.read(ByteBuffer.allocate(10)).value, -1, "read at the end of the FIFO")
        f.close()
    finally writer.close()

  tempDir.test("a FIFO keeps a character cut by readString for the next read"): dir =>
    val fifo = dir.resolve("fifo")
    makeFifo(fifo)
    val writer = fifoWriter(fifo)
    try
      Async.blocking:
        val f = File(fifo.toString).open()
        writer.write(bytesOf("aé😀"))
        assertEquals(f.readString(2).value, "a")
        assertEquals(f.readString(4).value, "é")
        assertEquals(f.readString(4).value, "😀")
        writer.write(bytesOf("xyz"))
        assertEquals(f.readString(5).value, "xyz")
        f.close()
    finally writer.close()

  tempDir.test("a FIFO: readString smaller than the next character fails and loses no byte"): dir =>
    val fifo = dir.resolve("fifo")
    makeFifo(fifo)
    val writer = fifoWriter(fifo)
    try
      Async.blocking:
        val f = File(fifo.toString).open()
        writer.write(bytesOf("€x"))
        val e = failureOf[PosixIOException](outcome(f.readString(1)))
        assertMentions(e, "smaller than the character")
        assertEquals(outcome(f.readString(4)), Success("€x"), "the read after the failed one")
        f.close()
    finally writer.close()

  tempDir.test("a FIFO read with no data waits; cancelling it ends it promptly, closes the File, and later operations say 'cancelled'"): dir =>
    val fifo = dir.resolve("fifo")
    makeFifo(fifo)
    val writer = fifoWriter(fifo)
    try
      val rec = RecordingRuntime(runtime)
      val f = File(fifo.toString).open()
      val worker = AtomicReference[Thread]()
      val t0 = AtomicReference[Long]()
      blockingOn(rec):
        val r = f.read(ByteBuffer.allocate(16))
        worker.set(rec.awaitThreadIn("in a read of the FIFO")(inFileRead))
        assert(!r.isCompleted, "read on an empty FIFO completed")
        t0.set(System.nanoTime())
        cancelPromptly(r, writer, "read")
        assertCancelledNow(r)
        join(worker.get, "the cancelled FIFO read")
      val took = millisSince(t0.get)
      assert(took < Prompt, s"the cancelled read took $took ms to end")
      assert(!f.isOpened, "the File still reports open after its blocked read was cancelled")
      Async.blocking:
        for (op, t) <- Seq[(String, Try[Any])](
            "read" -> outcome(f.read(ByteBuffer.allocate(1))),
            "read" -> outcome(f.readString(1)),
            "write" -> outcome(f.writeString("x"))
          )
        do assertMentions(failureOf[PosixIOException](t), op, fifo.toString, "cancelled")
      // nothing else was closed: the other end still works, and the File opens again
      writer.write(bytesOf("again"))
      f.open()
      Async.blocking(assertEquals(f.readString(100).value, "again"))
      f.close()
    finally writer.close()

  tempDir.test("a FIFO readString with no data, cancelled, ends promptly too"): dir =>
    val fifo = dir.resolve("fifo")
    makeFifo(fifo)
    val writer = fifoWriter(fifo)
    try
      val rec = RecordingRuntime(runtime)
      val f = File(fifo.toString).open()
      val worker = AtomicReference[Thread]()
      blockingOn(rec):
        val r = f.readString(16)
        worker.set(rec.awaitThreadIn("in a read of the FIFO")(inFileRead))
        cancelPromptly(r, writer, "readString")
        assertCancelledNow(r)
        join(worker.get, "the cancelled FIFO readString")
      assert(!f.isOpened)
    finally writer.close()

class FileOnVirtualThreads extends FileBehaviour(Runtime.VirtualThreads)
class FileOnPlatformThreads extends FileBehaviour(Runtime.PlatformThreads)
