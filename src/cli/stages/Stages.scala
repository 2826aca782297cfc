package asyncpipe.cli.stages

import asyncpipe.cli.command.*
import asyncpipe.cli.frames.Framing

import java.nio.file.Files

/** What the stage verbs (`FROM TO`, `mux`, `run`) share: their plans, the same-file check, and
  * running the plans as [[Flow.Stage]]s of a [[Flow]].
  */
object Stages:
  /** What one stage reads and writes, before anything is opened. */
  final case class StagePlan(inputs: Seq[Address], outputs: Seq[Address], options: StageOptions)

  /** Checks that no file is both read and written, then opens and runs the stages. */
  def run(plans: Seq[StagePlan], io: Io): Either[CliError, Int] =
    for
      _ <- optionsTaken(plans)
      _ <- sameFileCheck(plans)
      status <- Flow(reporting(plans).map(toStage(_, io)), io).run()
    yield status

  /** A single connecting address (`asyncpipe tcp:HOST:PORT`), a conversation as `nc` has: stdin
    * goes to the connection and what comes back to stdout, two stages side by side on one
    * connection (its input connects, its output shares it). Sending ends at stdin's end (FIN);
    * the whole ends when the peer has ended its side too.
    */
  def converse(address: StreamSocketAddress, options: StageOptions, io: Io): Either[CliError, Int] =
    val plans = Seq(StagePlan(Seq(address), Seq(StdAddress), options), StagePlan(Seq(StdAddress), Seq(address), options))
    optionsTaken(plans).flatMap { _ =>
      val o = reporting(plans).head.options
      val shared = SharedConnection()
      val stdout = StreamOutput(StdAddress, None, append = false, fsync = false, o.frame, io.out, o.countingFrames, flushWhenIdle = true)
      val receive = Flow.Stage(Seq(ConnectInput(address, o, shared)), Seq(stdout), o)
      val send = Flow.Stage(Seq(StdAddress.input(o)), Seq(ConnectOutput(address, o, shared)), o)
      Flow(Seq(receive, send), io, chained = false).run()
    }

  /** Every endpoint option given is taken by an endpoint of the command (`--count` by a `udp:`
    * source), and `--size` comes with the `--progress` it is for: an option that would be ignored
    * is refused, naming what it is for.
    */
  private[stages] def optionsTaken(plans: Seq[StagePlan]): Either[CliError, Unit] =
    val named = plans.flatMap(_.options.givenOptions).toSet
    val refused = StageOptions.forEndpoints.collectFirst {
      case (opt, role) if named(opt.name) && !plans.exists(p => ends(p, role).exists(_.kind.takes(role)(opt.name))) =>
        val takers = AddressKinds.all.filter(_.takes(role)(opt.name)).map(k => if k.scheme == "-" then "-" else k.scheme + ":")
          .mkString(" or ")
        val endpoints = plans.flatMap(ends(_, role)).distinct
        val here = endpoints.map(_.render).mkString(", ")
        // An address of a kind with an option of the same name (tick:...,count=N) has its own way.
        val own = endpoints.flatMap(a => a.kind.options.find(_.name == opt.name.drop(2)).map(o => s"; ${a.kind.scheme}: has its own: ${o.form}"))
        CliError.BadToken(None, opt.name, s"${opt.name} is for $takers ${role.noun}s, and the ${role.noun}s here are $here: it would do nothing${own.headOption.getOrElse("")}",
          s"${opt.form} with a $takers ${role.noun}")
    }.orElse(sizeWithoutProgress(plans, named))
    val unstamped = plans.map(_.options).find(o => o.timestamp && (o.frame == Framing.Len || o.frame == Framing.Raw))
    refused.orElse(unstamped.map(o => CliError.BadToken(None, "--timestamp",
      s"--timestamp prefixes lines and nul frames, not ${o.frame.token} ones (--frame ${o.frame.token}): a reader of those would not expect one",
      "--timestamp with --frame lines or nul"))).toLeft(())

  /** `--size` given where no `--progress` is: the total it sets is shown by nothing else. */
  private def sizeWithoutProgress(plans: Seq[StagePlan], named: Set[String]): Option[CliError] =
    val size = StageOptions.size
    Option.when(named(size.name) && !plans.exists(_.options.progress)) {
      CliError.BadToken(None, size.name, s"${size.name} is the total that --progress measures against, and --progress is not given: it would do nothing",
        s"--progress ${size.form}")
    }

  private def ends(p: StagePlan, role: Role): Seq[Address] = if role == Role.Source then p.inputs else p.outputs

  /** The statistics options are the command's, wherever in a pipeline they were given: every
    * stage counts, and the flow reports once (with the first `--size` given).
    */
  private def reporting(plans: Seq[StagePlan]): Seq[StagePlan] =
    val os = plans.map(_.options)
    def any(f: StageOptions => Boolean) = os.exists(f)
    val size = os.flatMap(_.size).headOption
    plans.map(p => p.copy(options = p.options.copy(stats = any(_.stats), statsJson = any(_.statsJson), progress = any(_.progress), size = size)))

  private def toStage(plan: StagePlan, io: Io): Flow.Stage =
    Flow.Stage(plan.inputs.map(Endpoints.input(_, plan.options)), plan.outputs.map(Endpoints.output(_, plan.options, io.out)), plan.options)

  /** Writing a file truncates (or grows) it before or while it is read: refused, as `cat` refuses
    * "input file is output file". Files are compared by device and inode, so the standard streams
    * count (`asyncpipe - file:x < x`, `asyncpipe file:y - >> y`), as do links and other names.
    */
  private def sameFileCheck(plans: Seq[StagePlan]): Either[CliError, Unit] =
    val reads = SameFile.all(plans, Role.Source)
    val writes = SameFile.all(plans, Role.Sink)
    var clash: CliError | Null = null
    var i = 0
    while clash == null && i < reads.length do
      var j = 0
      while clash == null && j < writes.length do
        val (r, w) = (reads(i), writes(j))
        if r.key == w.key then
          val loop = if w.address.isStandard then "grow it without end while it is read" else "destroy what is being read"
          clash = CliError.BadToken(None, w.address.render, s"${w.what} is the same file as ${r.what}: writing it would $loop",
            "a different file for the output")
        j += 1
      i += 1
    if clash == null then Right(()) else Left(clash.nn)

  /** A regular file a stage reads or writes: its device and inode (`key`), and how to name it. */
  private final case class SameFile(address: Address, key: AnyRef, what: String)

  private object SameFile:
    /** The regular files that `plans` read (`Role.Source`) or write. */
    def all(plans: Seq[StagePlan], role: Role): Vector[SameFile] =
      val found = Vector.newBuilder[SameFile]
      val stages = plans.iterator
      while stages.hasNext do
        val p = stages.next()
        val addresses = (if role == Role.Source then p.inputs else p.outputs).iterator
        while addresses.hasNext do
          val f = of(addresses.next(), role)
          if f.isDefined then found += f.get
      found.result()

    /** The file behind `address` in `role`, when it is a regular file that exists. */
    def of(address: Address, role: Role): Option[SameFile] =
      val local = address.localFile(role)
      if local.isEmpty then return None
      val (path, what) = local.get
      val attributes =
        try Files.readAttributes(path, classOf[java.nio.file.attribute.BasicFileAttributes])
        catch case _: java.io.IOException => null
      if attributes == null || !attributes.isRegularFile || attributes.fileKey == null then None
      else Some(SameFile(address, attributes.fileKey, what))
