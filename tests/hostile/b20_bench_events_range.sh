# B20: `bench --events` out of range is a usage error naming --events, with no temporary folder left.
. "$TESTS_DIR/cli/lib.sh"
export TMPDIR="$T"
for n in 9223372036854775807 18446744073709551616 1000000001 -5 0 12x; do
  expect 2 bench --events "$n" && has "$T/err" "--events"
done
[ -z "$(ls -d "$T"/memplay-bench-* 2>/dev/null)" ] || fail "temporary folders left: $(ls -d "$T"/memplay-bench-*)"
finish
