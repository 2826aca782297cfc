package asyncpipe.cli

/** The operating system, as the command line needs it beyond the JDK.
  *
  * What lives here: foreign calls ([[Foreign]]: fcntl, splice, inotify, poll through the JDK's
  * foreign function interface), pipe sizes ([[PipeSize]]), kernel copies ([[Splice]],
  * [[KernelCopy]]), what a descriptor is ([[StreamKind]]), the watch for a reader that went away
  * ([[ReaderWatch]]), standard output written in whole frames ([[OwnedOutput]]), the signals that
  * stop a command ([[Signals]]) and the descriptors held back for bad days ([[FdReserve]]).
  *
  * What it may import: the library and [[asyncpipe.cli.frames]] (an output is cut back to a whole
  * frame); nothing of `command`, `stages` or `tasks`.
  */
package object system
