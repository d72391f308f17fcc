# B24: a comparison's results file (--baseline, merge) with a metric no replay can give: a number
# too large for the 64-bit integers bytes and counts are printed as (1e70 bytes was cast to an
# integer, undefined behaviour), a negative one, or one past a double's range. Each is refused
# with the file, the cell and the field (exit 1), as a missing field is; found by fuzz_results.
# And a shard that --shard cannot give: a count of 4294967295 made merge loop for ever (its
# check of the missing shards counted up to the count, an unsigned that wrapped).
. "$TESTS_DIR/cli/lib.sh"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
expect 0 compare s --policy torch --policy ideal --no-save --json && cp "$T/out" "$T/good.json"
# edit FIELD VALUE OUT: the first cell's FIELD set to the text VALUE
edit() {
  python3 - "$T/good.json" "$1" "$2" "$3" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
i = text.index('"cells"')
j = text.index('"%s"' % sys.argv[2], i)
k = re.compile(r'[,}]').search(text, j).start()
open(sys.argv[4], "w").write(text[:j] + '"%s": %s' % (sys.argv[2], sys.argv[3]) + text[k:])
PY
}
for bad in "peak_reserved_bytes 1e70" "peak_allocated_bytes -1" "device_mallocs 9223372036854775808" \
  "fragmentation 1e400" "step_time_s -0.5"; do
  set -- $bad
  edit "$1" "$2" "$T/bad.json"
  expect 1 compare s --policy torch --policy ideal --no-save --baseline "$T/bad.json" --fail-if 'peak_reserved > +2%' &&
    has "$T/err" "bad.json': cells[0]: '$1' is out of range ($2): a metric is from 0 to 2^63"
  expect 1 merge "$T/bad.json" && has "$T/err" "'$1' is out of range"
done
# shards: K/N as --shard gives them (1 <= K <= N <= 1,000,000), else refused at once
expect 0 compare s --policy torch --policy ideal --shard 1/2 --results "$T/shard.json"
for kn in "1 4294967295" "0 2" "3 2" "1 1000001"; do
  set -- $kn
  sed "s/\"shard\":{\"index\":1,\"count\":2}/\"shard\":{\"index\":$1,\"count\":$2}/" "$T/shard.json" >"$T/bad.json"
  grep -q "\"count\":$2}" "$T/bad.json" || fail "the shard was not edited"
  expect 1 merge "$T/bad.json" && has "$T/err" "shard $1/$2 is not a share --shard gives (1 <= K <= N <= 1000000)"
done
expect 1 merge "$T/shard.json" && has "$T/err" "missing shard 2/2"
# the largest value memplay writes reads back
edit peak_reserved_bytes 9223372036854774784 "$T/big.json"
expect 0 compare s --policy torch --policy ideal --no-save --baseline "$T/big.json" --fail-if 'peak_reserved > +2%'
finish
