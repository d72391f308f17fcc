# test_devices_reset.sh: `memplay devices NAME --reset` prints the profile it gave back, as show does.
. "$TESTS_DIR/cli/lib.sh"

expect 0 devices T4 --set h2d_pinned_bw=8GB/s
expect 0 devices T4 --reset
head -1 "$T/out" | grep -qx "reset device profile 'T4' (builtin)" || fail "reset says: $(head -1 "$T/out")"
has "$T/out" "h2d_pinned_bw    9.70 GB/s"
expect 0 devices T4 --reset
sed '1d; s/, updated [^)]*//' "$T/out" >"$T/reset"
expect 0 devices T4
sed 's/, updated [^)]*//' "$T/out" | cmp -s - "$T/reset" || fail "reset and show print different profiles"
expect 0 devices T4 --reset --json
has "$T/out" '{"name":"T4","source":"builtin"'
expect 1 devices nothing-here --reset && has "$T/err" "not a built-in"
finish
