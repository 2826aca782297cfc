package asyncpipe.cli.system

import java.lang.foreign.{Arena, FunctionDescriptor, Linker, MemoryLayout, MemorySegment}
import java.lang.invoke.{MethodHandle, VarHandle}

/** The system calls the JDK has no API for ([[PipeSize]]'s fcntl, [[Splice]]'s splice and tee,
  * [[ReaderWatch]]'s poll, [[ioctl]] for [[TerminalWidth]] and [[Readable]]), linked through the
  * foreign function interface: the one place that says when linking is allowed and how errno is
  * read back.
  */
object Foreign:
  /** Whether this JVM grants native access (`--enable-native-access=ALL-UNNAMED`, as the launcher,
    * the AOT training and the tests do). Without it a foreign call would make the JDK print a
    * warning on stderr, which a stage must not: callers then do without.
    */
  def permitted: Boolean = Foreign.getClass.getModule.isNativeAccessEnabled

  /** `int ioctl(int fd, unsigned long request, void *arg)`, when linking is allowed and the C
    * library has it; None elsewhere (callers then do without).
    */
  lazy val ioctl: Option[MethodHandle] =
    if !permitted then None
    else try
      val int = java.lang.foreign.ValueLayout.JAVA_INT
      Some(link("ioctl", FunctionDescriptor.of(int, int, java.lang.foreign.ValueLayout.JAVA_LONG, java.lang.foreign.ValueLayout.ADDRESS),
        Linker.Option.firstVariadicArg(2)))
    catch case _: Throwable => None

  /** A handle on the C library's `name`; throws if there is none. */
  def link(name: String, descriptor: FunctionDescriptor, options: Linker.Option*): MethodHandle =
    val linker = Linker.nativeLinker()
    linker.downcallHandle(linker.defaultLookup().find(name).orElseThrow(), descriptor, options*)

  /** As [[link]], with errno captured: the handle takes a [[newCallState]] segment first. */
  def linkWithErrno(name: String, descriptor: FunctionDescriptor): MethodHandle =
    link(name, descriptor, Linker.Option.captureCallState("errno"))

  /** Where a handle of [[linkWithErrno]] leaves errno; one per thread that calls. */
  def newCallState(arena: Arena): MemorySegment = arena.allocate(Linker.Option.captureStateLayout())

  private lazy val errnoField: VarHandle =
    Linker.Option.captureStateLayout().varHandle(MemoryLayout.PathElement.groupElement("errno"))

  /** The errno the last call with `state` left. */
  def errno(state: MemorySegment): Int = errnoField.get(state, 0L).asInstanceOf[Int]
