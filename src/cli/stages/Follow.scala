package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.frames.*
import asyncpipe.cli.system.*

import asyncpipe.async.*
import java.io.IOException
import java.nio.ByteBuffer
import java.nio.channels.FileChannel
import java.nio.file.{Files, NoSuchFileException, Path, StandardOpenOption}
import java.nio.file.attribute.BasicFileAttributes
import java.util.concurrent.TimeUnit
import java.util.concurrent.locks.ReentrantLock

/** `file:PATH,follow`: the file at PATH read from its start and on as it grows, across rotations
  * (the file renamed or deleted, and a new one created at PATH) and truncations, as `tail -F`
  * follows a name. Every frame comes out whole and once, in the order of the files.
  *
  * ==How==
  *   - '''Finding files.''' A thread of its own, the ''finder'', waits on [[Inotify]] for the
  *     entries of PATH's directory to change (and of the directory of the file PATH leads to
  *     through symbolic links). At every change of the entry PATH (or of its link's target), and
  *     at a queue overflow, it looks at what PATH names now; if that is a file not seen before, it
  *     opens it at once, while it still has the name, and queues it. Its descriptor then keeps the
  *     file whatever becomes of the name (renamed along `file.1 -> file.2`, deleted). The finder
  *     also watches the file being read, for writes (and truncations) to it.
  *   - '''Reading.''' The reader (`pump`) reads the file in hand to its end. Then, if a newer file
  *     is queued, it reads the old one to its end once more (what a writer added to it until the
  *     newer one was opened), ends it (below), closes it, and goes on with the newer one from its
  *     start. Else it waits for the finder's signal.
  *   - '''Ending a file.''' An unterminated last frame (`lines`, `nul`) becomes a frame of its own
  *     (the output owes it its terminator only if another frame follows, see [[FrameWriter]]), and
  *     is counted in `Counters.unterminated`; an incomplete `len` frame fails the input, as at the
  *     end of a stream.
  *   - '''The poll.''' The wait for a signal lasts at most [[Endpoints.FollowPollMillis]]; when it
  *     passes without one, the reader looks at PATH itself and watches the directories again: for
  *     what notification does not tell (a directory that appears later or is replaced, a change
  *     to a renamed file, no inotify at all).
  *   - '''Truncation.''' A file in hand that is truncated (and perhaps written again) is read anew
  *     from its start, its unterminated last frame ended first as at a rotation. It is noticed by
  *     its size falling below what was read, at every end of the file reached; and, as a regrowth
  *     may outrun any look at the size, by content: before the bytes of a read are taken, the
  *     last [[Follow.AnchorSize]] bytes read before them are read again, and if they changed, the
  *     file was rewritten, and what the read gave is dropped and read again from the start (a log
  *     is only ever appended to). A rewrite that puts the very same bytes back there is not seen.
  *   - '''Stopping.''' `close` (the flow stopping) wakes the reader and closes the files held; the
  *     finder ends within its poll period and closes the inotify descriptor.
  *
  * ==Compared with GNU tail -F== (the algorithm of coreutils' tail.c, `tail_forever_inotify`,
  * learned from its description; no code of it)
  *   - Both watch the directory for the name and the file in hand for writes, keep the file in hand
  *     open across a rename, and read it to its end at the switch.
  *   - tail opens a new file when its one loop gets to the event; here the finder opens it while
  *     the reader may still be busy (with a large file, or blocked by a slow next stage), so that
  *     rotations faster than the reading keep every file, up to [[Follow.MaxQueued]] waiting.
  *   - tail notices a truncation by the size only; here also by content.
  *   - As with tail, what a writer adds to a renamed file after the switch is not read (a
  *     rotation's writer reopens the name), and a file created and renamed away again before it
  *     could be opened is lost: a rotation faster than a thread wake-up, or a follower kept off
  *     the CPU for longer than the rotations are apart.
  */
final class Follow(path: Path, subject: String, framing: Framing, pool: BufferPool, counters: Counters, countFrames: Boolean):
  import Follow.*

  private val name: Path = path.toAbsolutePath
  private val lock = ReentrantLock()
  private val changed = lock.newCondition()
  // Under `lock`: files the finder opened that the reader has not taken yet, oldest first.
  private val queued = java.util.ArrayDeque[Opened]()
  // Under `lock`: the identity of the last file opened (in hand or queued). It is always held
  // open, so its inode cannot be freed and its number given to a new file meanwhile.
  private var newest: AnyRef | Null = null
  // Under `lock`: whether anything happened since the reader last looked.
  private var signalled = false
  // Under `lock`: the directories watched, the names that matter by watch, and the watch of the
  // file in hand (-1: none, and then the directories are watched for writes too).
  private var directories = Map.empty[Path, Int]
  private var names = Map.empty[Int, Set[String]]
  private var fileWatch = -1
  // Under `lock`: whether PATH was a symbolic link when last watched (it may lead elsewhere now).
  private var linked = false
  @volatile private var closed = false
  @volatile private var inHand: Opened | Null = null
  private var inotify: Inotify | Null = null
  private var absentAtStart = false

  /** Opens PATH if it names a file (a failure other than its absence is the endpoint's failure),
    * and starts watching for changes.
    */
  def open(): Unit =
    inotify = Inotify.open().orNull
    locked {
      watchDirectories()
      try find(atStart = true)
      catch case e: IOException =>
        val i = inotify
        if i != null then i.close() // no finder yet to close it
        throw CliError.Failed(EndpointFailure(subject, s"open $path", e))
      absentAtStart = queued.isEmpty
    }
    val i = inotify
    if i != null then Thread.ofPlatform().daemon().name(s"asyncpipe-follow $subject").start(() => findLoop(i))

  /** What the user is told once the input is open: that PATH does not name a file yet. */
  def notices: Seq[String] =
    if absentAtStart then Seq(s"asyncpipe: $subject: $path does not exist; waiting for it to appear") else Nil

  /** Reads the files that PATH names, one after the other, into `out` until `close`. */
  def pump(out: SendableChannel[FrameBatch])(using Async): Unit =
    val emit: FrameBatch => Unit = batch =>
      counters.add(batch, countFrames)
      out.send(batch)
    var reader = BatchReader(framing, pool)
    var current: Opened | Null = null
    try
      while !closed do
        if current != null then reader = readToEnd(current, reader, emit)
        val next = locked(queued.poll())
        if next != null then
          if current != null then
            // The newer file is open: what reaches the old one from now on is not read, and what
            // reached it until now is read here.
            reader = end(readToEnd(current, reader, emit), emit)
            current.close()
          current = next
          inHand = next
          watchFile(next)
        else if !awaitSignal() then
          locked {
            watchDirectories()
            find(atStart = false)
          }
    catch case _: IOException if closed => () // close() took the file from under a read
    finally if current != null then current.close()

  /** Stops following: wakes the reader and closes every file held; the finder ends within
    * [[Endpoints.FollowPollMillis]] and closes the inotify descriptor. Idempotent.
    */
  def close(): Unit =
    closed = true
    locked {
      signalled = true
      changed.signalAll()
      queued.forEach(_.close())
      queued.clear()
    }
    val h = inHand
    if h != null then h.close()

  // -----------------------------------------------------------------------------------------------
  // Reading

  /** Reads `f` to its end as it is now, from its start again when it was truncated or rewritten;
    * the reader to go on with.
    */
  private def readToEnd(f: Opened, from: BatchReader, emit: FrameBatch => Unit): BatchReader =
    var reader = from
    var more = true
    while more && !closed do
      val n = readOnce(f, reader, emit)
      if n == Rewritten || (n < 0 && f.shrunk) then
        reader = end(reader, emit)
        f.rewind()
      else if n <= 0 then more = false
    reader

  /** One read of `f` into `reader`, which emits the whole frames read so far: the bytes read,
    * -1 at the end, or [[Rewritten]] when the file no longer holds what was read before them
    * (and then what this read gave is dropped).
    */
  private def readOnce(f: Opened, reader: BatchReader, emit: FrameBatch => Unit): Int =
    val room = reader.room
    val start = room.position()
    val n = f.channel.read(room)
    if n > 0 && !f.intact then
      room.position(start)
      Rewritten
    else
      if n > 0 then
        f.advance(room, start, n)
        reader.filled(emit)
      n

  /** Ends the frames of a file (see "Ending a file"); the reader for the next one. */
  private def end(reader: BatchReader, emit: FrameBatch => Unit): BatchReader =
    val partial = reader.pending > 0
    try reader.finish(emit)
    catch case e: FramingException => throw FramingException(s"${e.getMessage} (the file was rotated or truncated there)")
    if partial then counters.unterminated += 1
    BatchReader(framing, pool)

  /** Waits for the finder's signal, at most [[Endpoints.FollowPollMillis]]; false if none came. */
  private def awaitSignal(): Boolean =
    locked {
      if !signalled && !closed then changed.await(Endpoints.FollowPollMillis, TimeUnit.MILLISECONDS)
      val was = signalled
      signalled = false
      was
    }

  // -----------------------------------------------------------------------------------------------
  // Finding

  /** The finder: when a file comes to the name PATH, opens it (see `find`); at that and at each
    * write to the file in hand, signals the reader. Closes `watch` once the input is closed.
    */
  private def findLoop(watch: Inotify): Unit =
    try
      while !closed do
        val events = watch.await(Endpoints.FollowPollMillis.toInt)
        if events.nonEmpty then
          locked {
            var arrived = false // a file came to the name PATH, or changes may have been missed
            var written = false
            for e <- events do
              if e.overflowed then arrived = true
              else if e.ignored then forget(e.wd) // the directory went: the poll watches it again once it is back
              else if e.wd == fileWatch then written = true
              else if names.get(e.wd).exists(_.contains(e.name)) then
                // A file that leaves the name is the reader's business no more than before.
                if (e.mask & (Inotify.Create | Inotify.MovedTo)) != 0 then arrived = true
                else if (e.mask & Inotify.Modify) != 0 then written = true
            if arrived then find(atStart = false)
            if arrived || written then
              signalled = true
              changed.signal()
          }
    finally locked(watch.close())

  /** Under `lock`: if PATH names a file other than the newest opened, opens it and queues it. At
    * the start, a failure other than PATH's absence is thrown; later, it is tried again at the next
    * event or poll (a file created before its permissions are set).
    */
  private def find(atStart: Boolean): Unit =
    if !closed && queued.size < MaxQueued then
      try
        identify(name) match
          case Some((key, regular)) if key != newest && (regular || atStart) =>
            openStable() match
              case Some(f) if f.key != newest =>
                queued.add(f)
                newest = f.key
                if linked then watchDirectories() // the link may lead elsewhere now
              case Some(f) => f.close()
              case None    => ()
          case _ => ()
      catch case _: IOException if !atStart => ()

  /** Opens PATH and returns it with its identity, checked to be the same before and after the
    * open (else PATH changed meanwhile, and the open is tried again); None if PATH does not name a
    * file now, or keeps changing.
    */
  private def openStable(): Option[Opened] =
    var result: Option[Opened] = None
    var gone = false
    var tries = 0
    while result.isEmpty && !gone && tries < 8 do
      tries += 1
      identify(name) match
        case None => gone = true
        case Some((before, regular)) =>
          val channel = try FileChannel.open(name, StandardOpenOption.READ) catch case _: NoSuchFileException => null
          if channel == null then gone = true
          else
            val same = try identify(name).exists(_._1 == before) catch case e: IOException => { channel.close(); throw e }
            if same then result = Some(Opened(channel, before, regular)) else channel.close()
    result

  /** Under `lock`: watches the directory of PATH and, if PATH leads elsewhere through symbolic
    * links, the directory of the file it leads to, each for the entry of that name. A directory
    * that does not exist yet is watched once it does (a later call, from the poll); a directory
    * replaced by another of its name is watched anew.
    */
  private def watchDirectories(): Unit =
    val i = inotify
    if i != null && !closed then
      val real = try Some(name.toRealPath()) catch case _: IOException => None
      linked = Files.isSymbolicLink(name)
      val wanted = (Seq(name) ++ real.filter(_ != name)).flatMap(p => Option(p.getParent).map(_ -> p.getFileName.toString))
      val events = DirectoryEvents | (if fileWatch < 0 then Inotify.Modify else 0)
      val now = wanted.map(_._1).distinct.map(dir => dir -> i.watch(dir, events)).filter(_._2 >= 0).toMap
      for wd <- directories.values.toSet -- now.values do i.unwatch(wd)
      directories = now
      names = wanted.flatMap((dir, file) => now.get(dir).map(_ -> file)).groupMap(_._1)(_._2).view.mapValues(_.toSet).toMap

  /** Watches `f`, the file now in hand, for writes, through its descriptor (whatever its name is
    * now), instead of the file before it; where its descriptor cannot be known, the directories
    * are watched for writes instead. The inotify calls are made outside `lock`: the finder, which
    * may have to open the next file within milliseconds, must not wait for them. A write the
    * finder does not take for the new file's, as the watch is not yet `fileWatch`, needs no
    * signal: the reader reads `f` to its end after this.
    */
  private def watchFile(f: Opened): Unit =
    val i = inotify
    if i != null && !closed then
      val fd = Splice.descriptor(f.channel)
      val wd = if fd >= 0 then i.watch(Path.of(s"/proc/self/fd/$fd"), Inotify.Modify) else -1
      val had = locked {
        val had = fileWatch
        fileWatch = wd
        if (had < 0) != (wd < 0) then watchDirectories()
        had
      }
      // (The same descriptor again if `f` is the file before it, reopened: that watch stays.)
      if had >= 0 && had != wd then i.unwatch(had)

  /** Under `lock`: watch `wd` is gone. */
  private def forget(wd: Int): Unit =
    names -= wd
    directories = directories.filter((_, d) => d != wd)
    if wd == fileWatch then fileWatch = -1

  private inline def locked[T](inline body: T): T =
    lock.lock()
    try body
    finally lock.unlock()

object Follow:
  /** How many files found at PATH may wait, open, for the reader: a bound on the descriptors (and
    * on the disk space of deleted files) a stalled reader holds. Beyond it, no file is opened
    * until the reader catches up, and those renamed away meanwhile are lost.
    */
  val MaxQueued: Int = 64
  /** How many of the bytes read last are read again before the next read's bytes are taken, to
    * notice a file rewritten under the reader. Any size costs one pread(2) a read.
    */
  val AnchorSize: Int = 256
  /** What a read returns when the file was rewritten (see "Truncation" above). */
  private val Rewritten = -2
  /** What a directory is watched for: its entries created, deleted and renamed in or out; itself
    * deleted or renamed.
    */
  private val DirectoryEvents =
    Inotify.Create | Inotify.Delete | Inotify.MovedFrom | Inotify.MovedTo | Inotify.DeleteSelf | Inotify.MoveSelf | Inotify.OnlyDir

  /** The identity (device and inode) of what `p` names, links followed, and whether it is a
    * regular file; None if nothing is there (or a link there leads nowhere).
    * @throws IOException for another failure (no permission to look)
    */
  private def identify(p: Path): Option[(AnyRef, Boolean)] =
    try
      val a = Files.readAttributes(p, classOf[BasicFileAttributes])
      Some((a.fileKey, a.isRegularFile))
    catch case _: NoSuchFileException => None

  /** A file open for reading, with how far it was read and the last bytes read (its anchor). */
  private final class Opened(val channel: FileChannel, val key: AnyRef, val regular: Boolean):
    private var position = 0L
    private val anchor = new Array[Byte](AnchorSize)
    private var anchored = 0 // the anchor is anchor[0, anchored): the file's bytes [position - anchored, position)
    private val check = ByteBuffer.allocate(AnchorSize)

    /** Whether the file is now shorter than what was read of it (a regular file only). */
    def shrunk: Boolean = regular && channel.size() < position

    /** Whether the file still holds the anchor before `position` (true for what is not a regular file). */
    def intact: Boolean =
      if !regular || anchored == 0 then true
      else
        check.clear().limit(anchored)
        var at = position - anchored
        var end = false
        while check.hasRemaining && !end do
          val n = channel.read(check, at)
          if n < 0 then end = true else at += n
        !check.hasRemaining && java.util.Arrays.equals(check.array, 0, anchored, anchor, 0, anchored)

    /** Takes `n` bytes read into `b` at `from`: the position moves on, the anchor takes their end. */
    def advance(b: ByteBuffer, from: Int, n: Int): Unit =
      position += n
      if n >= AnchorSize then
        b.get(from + n - AnchorSize, anchor, 0, AnchorSize)
        anchored = AnchorSize
      else
        val kept = math.min(anchored, AnchorSize - n)
        System.arraycopy(anchor, anchored - kept, anchor, 0, kept)
        b.get(from, anchor, kept, n)
        anchored = kept + n

    /** Reads the file from its start again. */
    def rewind(): Unit =
      channel.position(0)
      position = 0
      anchored = 0

    def close(): Unit = try channel.close() catch case _: IOException => ()
