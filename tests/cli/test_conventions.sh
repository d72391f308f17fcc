# What users expect of a command: shell completion for bash and zsh generated from the command
# table, a man page that `cmake --install` installs, --version with the store schema version,
# `memplay help` mentioning --json and the exit codes, `memplay help scenarios` and
# `memplay help SCENARIO` with each parameter's default and unit.
. "$TESTS_DIR/cli/lib.sh"

expect 0 --version
grep -qE "^memplay [0-9]+\.[0-9]+\.[0-9]+ \(store schema version [0-9]+\)$" "$T/out" || fail "--version: $(cat "$T/out")"
expect 0 help
has "$T/out" "--json"
has "$T/out" "  3  the answer is \"no\""
has "$T/out" "completion"

# bash: every command of the table, and a command's options, completed
expect 0 completion bash
cp "$T/out" "$T/memplay.bash"
bash -n "$T/memplay.bash" || fail "the bash completion does not parse"
complete_bash() {
  bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _memplay; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$T/memplay.bash" "$@"
}
commands=$(sed -n 's/^  \([a-z]\{2,\}\)  .*/\1/p' "$T/out" 2>/dev/null)
"$MEMPLAY" help | sed -n 's/^  \([a-z]\{2,\}\)  .*/\1/p' >"$T/commands"
[ -s "$T/commands" ] || fail "help lists no commands"
complete_bash memplay "" >"$T/all"
while read -r c; do grep -qx "$c" "$T/all" || fail "bash completion lacks command '$c'"; done <"$T/commands"
[ "$(complete_bash memplay rep)" = replay ] || fail "memplay rep<TAB>: $(complete_bash memplay rep)"
complete_bash memplay replay sample --all | grep -qx -- --allocator || fail "memplay replay sample --all<TAB>"
complete_bash memplay import --rep | grep -qx -- --replace || fail "memplay import --rep<TAB>"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl"
(cd "$T" && MEMPLAY_DB="$DB" PATH="$(dirname "$MEMPLAY"):$PATH" complete_bash memplay info sa) | grep -qx sample ||
  fail "memplay info sa<TAB> does not offer the trace"

# zsh: a completion function naming every command
expect 0 completion zsh
head -1 "$T/out" | grep -qx "#compdef memplay" || fail "zsh completion header: $(head -1 "$T/out")"
while read -r c; do grep -q "'$c:" "$T/out" || fail "zsh completion lacks command '$c'"; done <"$T/commands"
if command -v zsh >/dev/null; then zsh -n "$T/out" || fail "the zsh completion does not parse"; fi
expect 2 completion fish
has "$T/err" "bash, zsh or man"

# the man page, installed
build=$(dirname "$MEMPLAY")
if [ -f "$build/cmake_install.cmake" ]; then
  cmake --install "$build" --prefix "$T/prefix" >/dev/null 2>"$T/install.err" || fail "cmake --install: $(cat "$T/install.err")"
  man1=$(find "$T/prefix" -name memplay.1 | head -1)
  [ -n "$man1" ] || fail "cmake --install installed no memplay.1"
  [ -n "$(find "$T/prefix" -path '*bash-completion*' -name memplay)" ] || fail "no bash completion installed"
  [ -n "$(find "$T/prefix" -path '*site-functions*' -name _memplay)" ] || fail "no zsh completion installed"
  if [ -n "$man1" ]; then
    grep -q '^\.TH MEMPLAY 1' "$man1" || fail "memplay.1 is not a man page"
    while read -r c; do grep -q "^\.B $c\$" "$man1" || fail "memplay.1 lacks command '$c'"; done <"$T/commands"
    grep -q "EXIT STATUS" "$man1" || fail "memplay.1 has no EXIT STATUS"
    if command -v groff >/dev/null; then
      groff -man -Tutf8 -ww -z "$man1" 2>"$T/groff.err"; [ -s "$T/groff.err" ] && fail "groff: $(head -3 "$T/groff.err")"
    fi
  fi
fi

# scenarios: the list, and one's parameters with their defaults and units
expect 0 help scenarios
for s in memory_growth batch_size max_batch pinned_staging mixed_precision checkpointing grad_accumulation \
  allocator_settings scale_fit; do
  grep -q "^  $s " "$T/out" || fail "help scenarios lacks $s"
done
grep -q "^  bench_transforms " "$T/out" && fail "help scenarios lists a script that is not a scenario"
expect 0 help max_batch
has "$T/out" "memplay whatif TRACE max_batch"
has "$T/out" "max=N         the largest batch to try (default 65536)"
has "$T/out" "floor_us=X"
has "$T/out" "SIZE bytes with a unit"
expect 2 help no_such_scenario
has "$T/err" "unknown command or scenario 'no_such_scenario'"
finish
