package asyncpipe.cli

/** Frames: how the stages of the command line cut their byte streams into messages and write
  * them back (`--frame lines|len|nul|raw`; the formats and their rules are in [[Framing]]).
  *
  * What lives here: [[Framing]] (the four kinds, `--frame` parsing, the `len` prefix), [[Frame]]
  * (one payload), [[FrameBatch]] (a run of whole frames in wire form, on the heap or in a pooled
  * direct buffer) and [[FrameSink]] (a receiver of frames as slices), the two decoders
  * [[BatchReader]] (a stream read into the buffers of a [[BufferPool]]) and [[BatchDecoder]]
  * (bytes already in memory), both bytes -> batches, [[FrameEncoder]] (frame -> bytes in a
  * caller's buffer), [[FrameWriter]] (frames and batches -> a [[ByteSink]], in few writes) and
  * [[FramingException]]. Decoders, encoders and writers are single-threaded, one per stream.
  *
  * Which path for a stage, fastest first:
  *   - input and output framing the same (a copy, `mux`): batches from a [[BatchReader]] (or a
  *     [[BatchDecoder]]) are passed on as they are (they are immutable, so one may go to many
  *     outputs) and `FrameWriter.write(batch)` writes them as they are. The cost is per chunk, not
  *     per frame: from a pooled direct buffer no copy in user space, from an array one memory copy.
  *   - framing changed: the same batches, which `FrameWriter.write(batch)` re-encodes frame by
  *     frame (`FrameBatch.foreach` into its `frameSink`), with no allocation per frame.
  *   - frames that must outlive the call (queued, sent to another thread): `FrameBatch.frames`,
  *     one [[Frame]] and one array per frame.
  *
  * What it may import: the library (`asyncpipe.async`) and the JDK, nothing of the other
  * command-line packages (`asyncpipe.cli.command`, `stages`, `system`, `tasks`), which import it.
  */
package object frames
