package asyncpipe.cli.stages

import java.io.PrintStream

/** One line of a terminal rewritten in place (the `--progress` line): each draw returns to the
  * line's first column, writes the new text and erases what is left of the old, and leaves the
  * cursor at the first column again, so that whatever is written next (the `--stats` line, an
  * error) starts on a clean line once [[clear]] has run.
  *
  * Why the cursor goes back to the first column, and why the erase reaches past the line: a
  * terminal made narrower than the line rewraps it (tmux does, many others too), the tail going
  * to the row below. The cursor, at the first column, stays on the line's first row, and the
  * erase clears the rows below it as well; a cursor left at the end would move to the tail's row,
  * and the first row would stay behind.
  *
  * How it erases: `ESC [ J` (erase to the end of the screen: nothing is written below the line)
  * on a terminal that understands it, and spaces over the old text where TERM is unset, empty or
  * `dumb`, which moves nothing but the cursor and is limited to the width. Plain text otherwise:
  * no colour, no reverse video (NO_COLOR holds trivially).
  *
  * Writes bytes from an array it keeps (the line is ASCII), one write and one flush per draw.
  */
final class LiveLine(err: PrintStream, ansi: Boolean):
  private var bytes = new Array[Byte](256)
  private var drawn = 0 // characters the last draw left on the line

  /** Rewrites the line with `text` (at most `width - 1` characters: see [[ProgressLine]]). */
  def draw(text: CharSequence, width: Int): Unit =
    var n = 0
    n = put(n, '\r')
    var i = 0
    while i < text.length do
      n = put(n, text.charAt(i))
      i += 1
    n = erase(n, text.length, width)
    n = put(n, '\r')
    drawn = text.length
    send(n)

  /** Erases the line and leaves the cursor at its first column. */
  def clear(width: Int): Unit =
    var n = put(0, '\r')
    n = erase(n, 0, width)
    n = put(n, '\r')
    drawn = 0
    send(n)

  /** Erases from column `from` on, after `n` bytes; the bytes then. */
  private def erase(n: Int, from: Int, width: Int): Int =
    var m = n
    if ansi then
      m = put(m, '\u001b')
      m = put(m, '[')
      m = put(m, 'J')
    else
      var c = from
      while c < math.min(drawn, width - 1) do
        m = put(m, ' ')
        c += 1
    m

  private def put(n: Int, c: Char): Int =
    if n == bytes.length then bytes = java.util.Arrays.copyOf(bytes, 2 * n)
    bytes(n) = (if c < 128 then c else '?').toByte
    n + 1

  private def send(n: Int): Unit =
    err.write(bytes, 0, n)
    err.flush()

object LiveLine:
  /** Whether a terminal of type `term` (TERM) erases with ANSI sequences: not when TERM is unset,
    * empty or `dumb`.
    */
  def ansi(term: Option[String]): Boolean = term.exists(t => t.nonEmpty && t != "dumb")
