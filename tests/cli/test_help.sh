# Every command answers -h and `memplay help COMMAND` with its usage on stdout and nothing on
# stderr; unknown commands and options are usage errors (exit 2) that repeat the synopsis.
. "$TESTS_DIR/cli/lib.sh"

expect 0 help
has "$T/out" "usage: memplay"
cp "$T/out" "$T/overview"
commands=$(sed -n 's/^  \([a-z]\{2,\}\)  .*/\1/p' "$T/out")
[ -n "$commands" ] || fail "help lists no commands"
for c in $commands; do
  if expect 0 "$c" -h; then
    head -1 "$T/out" | grep -q "^usage: memplay $c" || fail "$c -h: $(head -1 "$T/out")"
    [ -s "$T/err" ] && fail "$c -h wrote to stderr: $(cat "$T/err")"
    cp "$T/out" "$T/usage"
    # the same usage from --help, and at the head of `memplay help COMMAND`, then the summary
    expect 0 "$c" --help && { cmp -s "$T/out" "$T/usage" || fail "$c --help differs from $c -h"; }
    if expect 0 help "$c"; then
      head -n "$(wc -l <"$T/usage")" "$T/out" | cmp -s - "$T/usage" || fail "help $c does not begin with $c -h"
      summary=$(grep "^  $c  " "$T/overview" | sed 's/^  [a-z]* *//')
      has "$T/out" "$summary."
      [ -s "$T/err" ] && fail "help $c wrote to stderr: $(cat "$T/err")"
    fi
    # a usage error names the option, then repeats the synopsis's first line
    if expect 2 "$c" --no-such-option; then
      has "$T/err" "--no-such-option"
      has "$T/err" "$(head -1 "$T/usage")"
      has "$T/err" "(see 'memplay $c -h')"
      [ -s "$T/out" ] && fail "$c --no-such-option wrote to stdout: $(head -c 200 "$T/out")"
    fi
  fi
done
# the commands that take an allocator SPEC list the models after their usage
expect 0 help replay && has "$T/out" "allocator models"
expect 0 help info && grep -q "allocator models" "$T/out" && fail "help info lists the allocator models"
expect 0 help allocators
has "$T/out" "ideal"
has "$T/out" "cuda"
expect 0 help formats && has "$T/out" "jsonl"
# memplay's own help: the same overview from -h and --help; on stderr without a command
expect 0 -h && { cmp -s "$T/out" "$T/overview" || fail "memplay -h differs from memplay help"; }
expect 0 --help && { cmp -s "$T/out" "$T/overview" || fail "memplay --help differs from memplay help"; }
expect 2 && { cmp -s "$T/err" "$T/overview" || fail "memplay without a command does not print the overview"; }
expect 2 --no-such-option && has "$T/err" "unknown option '--no-such-option'"
expect 2 frobnicate && has "$T/err" "unknown command 'frobnicate'"
expect 2 help frobnicate
expect 0 --version && has "$T/out" "memplay "
finish
