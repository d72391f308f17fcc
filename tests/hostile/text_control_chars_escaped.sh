# Names with ESC, BEL or other control characters (from traces, stores, scripts) are printed
# escaped by import, list, info, replay, run and error messages: nothing reaches the terminal raw.
. "$TESTS_DIR/cli/lib.sh"
evil=$(printf 'ev\033]0;title\007il\033[2J')
cp "$MEMPLAY_SRC/traces/sample.jsonl" "$T/$evil.jsonl"
raw() { # any C0 control other than newline and tab, DEL, or a C1 control in FILE
  LC_ALL=C grep -q "$(printf '[\001-\010\013-\037\177]')" "$1" || LC_ALL=C grep -q "$(printf '\302[\200-\237]')" "$1"
}
check() { raw "$T/out" && fail "$1: raw control characters on stdout"; raw "$T/err" && fail "$1: raw control characters on stderr"; return 0; }
expect 0 import "$T/$evil.jsonl" --name "$evil" && check "import --name"
has "$T/out" '\x1b]0;title\x07il\x1b[2J'
cp "$MEMPLAY_SRC/traces/recorded_cuda_program.jsonl" "$T/other.jsonl"
expect 1 import "$T/other.jsonl" --name "$evil" && check "import of a name taken"
expect 0 list && check list
has "$T/out" 'ev\x1b]0;title'
expect 0 info "$evil" && check info
expect 0 replay "$evil" --allocator torch && check replay
expect 1 info "$evil$(printf '\033[5m')" && check "an error naming it"
has "$T/err" '\x1b[5m'
printf 'print("x\\27[31m\\7\\194\\155")\nerror("bad\\27[2J")\n' >"$T/s.lua"
expect 1 run "$T/s.lua" && check run
has "$T/out" 'x\x1b[31m\x07\u009b'
expect 0 --json info "$evil" && check "info --json"
finish
