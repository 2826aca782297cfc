package asyncpipe.cli

/** The task runner: `every`, `retry` and `repeat` run a command on a schedule.
  *
  * What lives here: the verbs ([[TaskVerb]], [[TaskVerbs]]) and their options ([[TaskOptions]]),
  * the runner ([[TaskRunner]]) and one run of the command ([[Attempt]]), the process groups and
  * sessions a run's processes live in ([[ProcessGroup]]), and the command's output passed on as
  * whole lines ([[Records]]).
  *
  * What it may import: the library, `command`, `frames` and `system`; never `stages`.
  */
package object tasks
