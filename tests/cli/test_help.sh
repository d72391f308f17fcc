# Every command answers -h and `memplay help COMMAND` with its usage on stdout and nothing on
# stderr; unknown commands and options are usage errors (exit 2).
. "$TESTS_DIR/cli/lib.sh"

expect 0 help
has "$T/out" "usage: memplay"
commands=$(sed -n 's/^  \([a-z]\{2,\}\)  .*/\1/p' "$T/out")
[ -n "$commands" ] || fail "help lists no commands"
for c in $commands; do
  expect 0 "$c" -h && {
    head -1 "$T/out" | grep -q "^usage: memplay $c" || fail "$c -h: $(head -1 "$T/out")"
    [ -s "$T/err" ] && fail "$c -h wrote to stderr: $(cat "$T/err")"
  }
  expect 0 help "$c" && has "$T/out" "usage: memplay $c"
  expect 2 "$c" --no-such-option && has "$T/err" "--no-such-option"
done
expect 0 help allocators
has "$T/out" "ideal"
has "$T/out" "cuda"
expect 2
expect 2 frobnicate && has "$T/err" "unknown command 'frobnicate'"
expect 2 help frobnicate
expect 0 --version && has "$T/out" "memplay "
finish
