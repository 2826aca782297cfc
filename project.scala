// The one place where asyncpipe's Scala version, JVM and dependencies are declared, as scala-cli
// `//> using` directives. build.mill reads this file; nothing else names a version.
//> using scala 3.8.4
//> using jvm 25
//> using dep com.lihaoyi::os-lib:0.11.8
// `kafka:` (KafkaKind, KafkaEndpoints): the official client, loaded only when a kafka: address is
// used; its logging goes to slf4j (2.x: the client's 1.7 calls work with it), whose no-op provider
// keeps it, and slf4j's own warning, off stderr.
//> using dep org.apache.kafka:kafka-clients:4.4.0
//> using dep org.slf4j:slf4j-nop:2.0.17
//> using test.dep org.scalameta::munit:1.2.4
//> using test.dep com.lihaoyi::ujson:4.4.3
//> using test.dep org.jetbrains.lincheck:lincheck:3.7
// Compact object headers (JDK 25, JEP 519): 8-byte headers make a Promise 16 bytes and every
// small object smaller; the launcher, the AOT training run and the tests all use these flags.
//> using javaOpt -XX:+UseCompactObjectHeaders
// Stages resize their pipes with fcntl(2) through the foreign function interface (PipeSize.scala);
// without this the JDK prints a warning on stderr the first time.
//> using javaOpt --enable-native-access=ALL-UNNAMED
// The task runner gives the JDK's process-start logger a silent one (StartLog in ProcessGroup.scala).
//> using javaOpt --add-opens=java.base/java.lang=ALL-UNNAMED
// Kernel copies (Splice.scala) need the descriptor of a FileChannel, which is private to sun.nio.ch.
//> using javaOpt --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
// Nothing but data reaches stdout: the JVM's own output (the thread dump SIGQUIT asks for, among
// others) goes to stderr, and so do the warnings of its unified logging, which go to stdout by
// default (a compiler thread that cannot start, under a low `ulimit -u`, put its warning at byte 0
// of a stage's output).
//> using javaOpt -XX:+DisplayVMOutputToStderr
//> using javaOpt -Xlog:disable
//> using javaOpt -Xlog:all=warning:stderr
// JVM flags the launcher adds for every verb but `bench` (install.sh and BuildInfo read this line):
// stages and the task runner are short IO-bound processes, often three to a pipeline on shared
// cores, and C1 alone with the serial collector costs them far less CPU than C2 and G1.
// asyncpipe stage-jvm-flags: -XX:TieredStopAtLevel=1 -XX:+UseSerialGC
// JVM flags the launcher adds instead for a command with a TLS address (install.sh and BuildInfo
// read this line): such a command keeps C2, whose AES-GCM intrinsics are its speed, and C2 is
// asked to compile the TLS record layer and the JDK's ciphers after a tenth of the usual calls,
// since until it has, each record is sealed in Java code (1 GiB between two asyncpipe processes:
// medians of 3.05 s without, 2.74 s with; doc/adr/0024).
// asyncpipe tls-jvm-flags: -XX:CompileCommand=quiet -XX:CompileCommand=CompileThresholdScaling,sun.security.ssl.*::*,0.1 -XX:CompileCommand=CompileThresholdScaling,com.sun.crypto.provider.*::*,0.1
// A Kafka broker for the tests and the bench (KRaft, one node), on a classpath of its own, never the
// tests' (it brings Scala 2.13): the broker, its tools (console producer and consumer, perf tests)
// and a logging binding, so that a broker that fails says why (build.mill reads this line).
// asyncpipe kafka-broker: org.apache.kafka:kafka_2.13:4.4.0 org.apache.kafka:kafka-tools:4.4.0 org.slf4j:slf4j-simple:1.7.36
// Peers the bench measures against, on the bench's classpath only (build.mill reads this line),
// as jars by URL and SHA-256: jox 1.1.1, the JVM's other segment/FAA channel (bench channels,
// issue 41), whose POM names a parent POM that Maven Central mirrors here do not all serve (it
// has no dependencies, so the jar is all it needs).
// asyncpipe bench-jars: https://repo1.maven.org/maven2/com/softwaremill/jox/channels/1.1.1/channels-1.1.1.jar#b4d4a806c6a45e043723b3569c7818794e93bfa05384ed05c932947899a921e7
//> using publish.version 0.1.0
