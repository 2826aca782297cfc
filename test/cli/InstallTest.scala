package asyncpipe.cli

import asyncpipe.cli.command.*

import scala.concurrent.duration.*

/** install.sh end to end: installs the prebuilt assembly (ASYNCPIPE_ASSEMBLY, set by build.mill)
  * twice into a temporary PREFIX and ASYNCPIPE_HOME, runs the installed launcher, then uninstalls.
  * `--jar` keeps install.sh from running Mill, which would wait for the lock held by the Mill that
  * runs this test. JAVA_HOME is the JDK this test runs on (the build picks one >= 25), so install.sh
  * never fetches a JDK here. Slow: each install makes a JDK AOT cache in a training run.
  */
class InstallTest extends munit.FunSuite:
  override val munitTimeout: Duration = 10.minutes

  private val root = sys.env.get("ASYNCPIPE_ROOT").map(os.Path(_))
  private val assembly = sys.env.get("ASYNCPIPE_ASSEMBLY").map(os.Path(_))

  test("install.sh twice into a temporary PREFIX is idempotent, and --uninstall removes it"):
    assume(root.isDefined && assembly.isDefined, "ASYNCPIPE_ROOT or ASYNCPIPE_ASSEMBLY is not set: run the tests through ./mill")
    assume(os.isFile(assembly.get), s"ASYNCPIPE_ASSEMBLY=${assembly.get} is not a file: run the tests through ./mill")
    val tmp = os.temp.dir(prefix = "asyncpipe-install-test")
    val (prefix, home) = (tmp / "prefix", tmp / "home")
    val launcher = prefix / "bin" / "asyncpipe"
    val env = Map(
      "PREFIX" -> prefix.toString,
      "ASYNCPIPE_HOME" -> home.toString,
      "JAVA_HOME" -> System.getProperty("java.home")
    )

    def installSh(args: String*): Unit =
      val r = os.proc("bash", root.get / "install.sh", args)
        .call(cwd = tmp, env = env, stdin = "", stderr = os.Pipe, check = false)
      assertEquals(r.exitCode, 0, s"install.sh ${args.mkString(" ")} failed:\n${r.err.text()}")

    /** Every file and symlink under tmp, with the bytes of those that must not change (an AOT cache
      * is retrained by every install, and its bytes vary from one training run to the next).
      */
    def installed(): Map[String, Option[Seq[Byte]]] =
      os.walk(tmp).filter(p => os.isLink(p) || os.isFile(p, followLinks = false)).map { p =>
        p.relativeTo(tmp).toString -> Option.when(p.ext != "aot" && !os.isLink(p))(os.read.bytes(p).toSeq)
      }.toMap

    def checkLauncher(when: String): Unit =
      assert(os.isFile(launcher), s"$when: no launcher at $launcher")
      val r = os.proc(launcher, "--version").call(stdin = "", stderr = os.Pipe, check = false)
      assertEquals(r.exitCode, 0, s"$when: asyncpipe --version failed:\n${r.err.text()}")
      assert(r.out.text().startsWith("asyncpipe "), s"$when: asyncpipe --version printed: ${r.out.text()}")
      assertEquals(r.err.text(), "", s"$when: asyncpipe --version wrote to stderr")

    /** The lambda classes of the jar's own code (asyncpipe's, Scala's, the libraries') that
      * `asyncpipe ARGS` made at run time rather than took from the AOT cache
      * (tools/ArchivableLambdas.java, README "Start-up"): each costs a cold JVM ~1 ms. The JDK's
      * own are left out: whether the cache keeps those can vary from one training run to the next
      * (once, in a CI run, `jdk.internal.foreign.MemorySessionImpl`'s static lambda was
      * made at run time; the same jar and training kept it in the other installs), and the build
      * cannot change that.
      */
    def spunLambdas(args: String*): Seq[String] =
      val log = tmp / s"class-load-${args.mkString("_").replaceAll("[^A-Za-z0-9_]", "")}.txt"
      // A file read gets no stdin (a single address with data on stdin would be its sink).
      val (stdin, expected) = if args.exists(_.startsWith("file:")) then (os.Path("/dev/null"): os.ProcessInput, "a\nb\n") else ("one line\n": os.ProcessInput, "one line\n")
      val r = os.proc(launcher, args).call(stdin = stdin, stderr = os.Pipe, check = false,
        env = Map("ASYNCPIPE_JAVA_OPTS" -> s"-Xlog:class+load=info:file=$log"))
      assertEquals(r.exitCode, 0, s"asyncpipe ${args.mkString(" ")} failed:\n${r.err.text()}")
      assertEquals(r.out.text(), expected, s"asyncpipe ${args.mkString(" ")}")
      val jdk = """\] (java|javax|jdk|sun|com\.sun)\.""".r // the class name follows "[class,load] "
      os.read.lines(log).filter(l => l.contains("$$Lambda") && !l.contains("shared objects file") && jdk.findFirstIn(l).isEmpty).toSeq

    try
      installSh("--jar", assembly.get.toString)
      checkLauncher("after the first install")
      val small = tmp / "small.txt"
      os.write(small, "a\nb\n")
      for args <- Seq(Seq("-", "-"), Seq("mux"), Seq("run", "- | mux | -"), Seq(s"file:$small", "-"), Seq(s"file:$small")) do
        val spun = spunLambdas(args*)
        assert(spun.isEmpty, s"asyncpipe ${args.mkString(" ")} spun ${spun.size} lambdas at run time:\n${spun.mkString("\n")}")
      // A kafka: command takes the second cache, which holds the Kafka client's classes (no broker
      // needed: one that never answers); --version takes the first, which holds none of them.
      def classesLoaded(args: String*): (os.CommandResult, Seq[String]) =
        val log = tmp / "class-load-kafka.txt"
        val r = os.proc(launcher, args).call(stdin = "", stderr = os.Pipe, check = false,
          env = Map("ASYNCPIPE_JAVA_OPTS" -> s"-Xlog:class+load=info:file=$log"))
        (r, os.read.lines(log).toSeq)
      val (unanswered, kafkaClasses) = classesLoaded("kafka:127.0.0.1:1/t,connect-timeout=200ms", "-")
      assertEquals(unanswered.exitCode, ExitCode.Runtime, unanswered.err.text())
      assert(kafkaClasses.exists(l => l.contains(" org.apache.kafka.clients.consumer.KafkaConsumer source: shared objects file")),
        kafkaClasses.filter(_.contains("KafkaConsumer ")).mkString("\n"))
      val (version, versionClasses) = classesLoaded("--version")
      assertEquals(version.exitCode, 0, version.err.text())
      assertEquals(versionClasses.filter(_.contains("org.apache.kafka")), Nil)
      // The JIT flags the launcher gives: C1 alone for a stage, C2 with the TLS flags for a
      // command with a TLS address (nothing listens on port 1: exit 1), the JDK's for bench.
      def jitFlags(args: String*): Seq[String] =
        val r = os.proc(launcher, args).call(stdin = "", stderr = os.Pipe, check = false,
          env = Map("ASYNCPIPE_JAVA_OPTS" -> "-XX:+PrintCommandLineFlags"))
        r.err.text().linesIterator.next().split(' ').toSeq
          .filter(f => f.startsWith("-XX:TieredStopAtLevel") || f.startsWith("-XX:CompileCommand="))
      assertEquals(jitFlags("file:/dev/null", "-"), Seq("-XX:TieredStopAtLevel=1"))
      assertEquals(jitFlags("file:/dev/null", "tls:127.0.0.1:1"), BuildInfo.tlsJvmFlags.filter(_.startsWith("-XX:CompileCommand=")))
      assertEquals(jitFlags("bench", "--help"), Nil)
      // Out of file descriptors, the installed launcher (whose classes come from the AOT
      // cache, the jar opened only for others) reported a NoClassDefFoundError, not the reason.
      val inputs = (1 to 80).map { i => val f = tmp / s"in$i"; os.write(f, s"$i\n"); s"--in file:$f" }.mkString(" ")
      val starved = os.proc("bash", "-c", s"ulimit -n 40; exec $launcher mux $inputs").call(stdin = "", stderr = os.Pipe, check = false)
      assertEquals(starved.exitCode, ExitCode.Runtime, starved.err.text())
      assert(starved.err.text().matches("(?s)asyncpipe: file:\\S+/in\\d+: open \\S+: too many open files\\s*"), starved.err.text())
      val completion = prefix / "share" / "bash-completion" / "completions" / "asyncpipe"
      val manPage = prefix / "share" / "man" / "man1" / "asyncpipe.1"
      assert(os.read(completion).contains("complete -F _asyncpipe asyncpipe"), "no bash completion installed")
      assert(os.read(manPage).startsWith(".TH ASYNCPIPE 1"), "no man page installed")
      if os.exists(os.Path("/usr/bin/man")) then
        // man finds the page through PATH: $PREFIX/bin on it means $PREFIX/share/man is looked at.
        val found = os.proc("man", "-w", "asyncpipe").call(env = Map("PATH" -> s"${prefix / "bin"}:/usr/bin:/bin", "MANPATH" -> ""),
          stderr = os.Pipe, check = false)
        assertEquals(found.out.text().trim, manPage.toString, found.err.text())
      val first = installed()
      assert(first.keys.exists(_.matches("""home/lib/asyncpipe-\w+\.jar""")), first.keys)
      assert(first.keys.exists(_.matches("""home/lib/asyncpipe-\w+\.aot""")), first.keys)
      assert(first.keys.exists(_.matches("""home/lib/asyncpipe-\w+\.kafka\.aot""")), first.keys)

      installSh("--jar", assembly.get.toString)
      checkLauncher("after the second install")
      val second = installed()
      assertEquals(second.keySet, first.keySet, "the second install left other files")
      for (path, bytes) <- first if bytes != second(path) do fail(s"the second install changed $path")

      installSh("--uninstall")
      assert(!os.exists(launcher), s"--uninstall left $launcher")
      assert(!os.exists(completion) && !os.exists(manPage), "--uninstall left the completion or the man page")
      assert(!os.exists(home), s"--uninstall left ${os.walk(home).mkString(", ")}")
    finally os.remove.all(tmp)
