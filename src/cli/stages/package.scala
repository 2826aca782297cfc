package asyncpipe.cli

/** Pipeline stages: the verbs that move frames (`asyncpipe FROM TO`, `mux`, `run`) and what they
  * are made of.
  *
  * What lives here: addresses ([[Address]]) and their kinds, one file each ([[StdKind]],
  * [[FileKind]], [[UdpKind]], [[TickKind]], [[NullKind]]) listed in the registry
  * [[AddressKinds]]; the endpoints the kinds open ([[Input]], [[Output]], [[StreamInput]],
  * [[StreamOutput]], [[UdpInput]], [[TickInput]], [[Follow]]); the stage engine ([[Flow]]) and
  * its statistics ([[StatsReporter]]); the stage options ([[StageOptions]]); the verbs
  * ([[StageVerb]], [[MuxVerb]], [[RunVerb]]) with what they share ([[Stages]]) and the pipeline
  * text of `run` ([[PipelineText]], [[PipeFile]]).
  *
  * What it may import: the library, `command`, `frames` and `system`; never `tasks`.
  */
package object stages
