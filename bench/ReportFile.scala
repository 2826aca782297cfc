package asyncpipe.bench

import java.nio.file.{Files, Path}

/** A file the bench writes after its run (`--json`, `--plot`): checked when the options are read,
  * so that a path it could not write is a usage error before any suite runs, not an exception
  * after minutes of measuring. The directory must exist (nothing is created on the way) and the
  * path must not be a directory itself.
  */
object ReportFile:
  def check(text: String): Either[String, Path] =
    val path = Path.of(text).toAbsolutePath.normalize
    val dir = Option(path.getParent)
    if Files.isDirectory(path) then Left("it is a directory, not a file to write")
    else dir match
      case Some(d) if !Files.exists(d) => Left(s"the directory $d does not exist (none is created on the way)")
      case Some(d) if !Files.isDirectory(d) => Left(s"$d is not a directory")
      case _ => Right(path)

/** What `--plot` draws into: SVG or PNG, by the file's extension. */
enum ChartFormat(val extension: String):
  case Svg extends ChartFormat("svg")
  case Png extends ChartFormat("png")

/** The chart file of `--plot`: where, and in which format. */
final case class ChartFile(path: Path, format: ChartFormat):
  /** Lays the chart out for the format's text measure and writes it. */
  def write(results: Seq[SuiteResult], caption: String): Unit = format match
    case ChartFormat.Svg => Files.writeString(path, ChartSvg.render(Chart.layout(results, caption, ChartSvg.textWidth)))
    case ChartFormat.Png =>
      ChartPng.write(ChartPng.render(Chart.layout(results, caption, ChartPng.textWidth)), path)

object ChartFile:
  /** `text` as a chart file: [[ReportFile.check]] holds (checked first: "it is a directory" says
    * more than "no extension"), and the name ends in .svg or .png, in any case.
    */
  def read(text: String): Either[String, ChartFile] =
    ReportFile.check(text).flatMap { path =>
      val name = path.getFileName.toString
      val ext = name.lastIndexOf('.') match
        case -1 => ""
        case i  => name.substring(i + 1).toLowerCase(java.util.Locale.ROOT)
      val formats = ChartFormat.values.map(f => s".${f.extension}").mkString(" or ")
      ChartFormat.values.find(_.extension == ext).map(ChartFile(path, _)).toRight {
        val what = if ext.isEmpty then "a name without an extension" else s"'.$ext'"
        s"the chart is drawn as $formats, by the file's extension; $what is neither"
      }
    }
