package asyncpipe

/** The `asyncpipe` command. This package holds only what sees every part: [[cli.Main]] (the verb
  * table and the dispatch), [[cli.Help]] (the top help), [[cli.Docs]] (completions and the man
  * page) and [[cli.AotTraining]]. The parts are its packages, each saying what it may import:
  *   - [[cli.command]]: the verb interface, the option system, errors, exit codes;
  *   - [[cli.frames]]: framings, batches, decoders and writers;
  *   - [[cli.system]]: foreign calls, pipes, splice, signals, owned standard output;
  *   - [[cli.stages]]: address kinds, endpoints, the stage engine, `FROM TO`, `mux`, `run`;
  *   - [[cli.tasks]]: `every`, `retry`, `repeat`, the runner and process groups.
  * Imports go one way: frames <- system <- command <- (stages, tasks) <- this package; stages and
  * tasks never import each other. The library (`asyncpipe.async`, `asyncpipe.io`) is a module of
  * its own below all of them, and the bench a module above.
  */
package object cli
