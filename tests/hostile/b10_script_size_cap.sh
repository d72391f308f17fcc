# B10: a script is read with a bound (16 MiB): `memplay run /dev/zero` is a clean error, not a hang.
. "$TESTS_DIR/cli/lib.sh"
timeout 60 "$MEMPLAY" run /dev/zero >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] || fail "run /dev/zero: exit $rc: $(head -c 300 "$T/err")"
has "$T/err" "'/dev/zero'"
has "$T/err" "larger than 16 MiB"
{ printf -- '-- '; head -c $((17 << 20)) /dev/zero | tr '\0' 'x'; echo; } >"$T/big.lua"
expect 1 run "$T/big.lua" && has "$T/err" "larger than 16 MiB"
finish
