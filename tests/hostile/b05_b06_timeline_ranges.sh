# B05/B06 (every importer checks ranges before arithmetic): a memory timeline's times and byte
# counts past io/limits.h (2^62 ns, 2^48 bytes, either sign; -2^63 could not even be negated)
# are refused with the row.
. "$TESTS_DIR/cli/lib.sh"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
digest=$(store_digest)
n=0
for row in '[0, 1, 9223372036854775807, 4]' '[0, 1, -9223372036854775808, 4]' '[9223372036854775807, 1, 8, 4]' \
  '[-4611686018427387905, 1, 8, 4]'; do
  n=$((n + 1))
  printf '[[0, 1, 64, 4], %s]\n' "$row" >"$T/t$n.raw.json"
  expect 1 import --format memory_timeline "$T/t$n.raw.json" && { has "$T/err" "t$n.raw.json"; has "$T/err" "row 1:"; has "$T/err" "out of range"; }
  [ "$(store_digest)" = "$digest" ] || fail "row $row: the store changed"
done
finish
