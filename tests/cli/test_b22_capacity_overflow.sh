# A size past what any device could have is refused where it is parsed, naming the option, and no
# formatted size ever prints a negative overflow ("--9223372036854775808 B"): --capacity on the
# command line, an allocator option, a device profile's figure, a script's capacity and --set.
. "$TESTS_DIR/cli/lib.sh"

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
before=$(store_digest)
for size in 9223372036854775807 9223372036854775808 18446744073709551615 8EiB 2PiB 1e30 16777216TiB; do
  mp replay sample --capacity "$size"
  [ "$rc" = 2 ] || fail "--capacity $size exited $rc, wanted 2 (usage)"
  grep -q -- "--capacity" "$T/err" || grep -q "wants a size" "$T/err" || fail "--capacity $size: the option is not named: $(cat "$T/err")"
  grep -q -- "--9223372036854775808" "$T/out" "$T/err" && fail "--capacity $size printed an overflowed size"
done
expect 2 replay sample --capacity 9223372036854775807
has "$T/err" "--capacity is '9223372036854775807', more than a device could have"
# the largest accepted capacity prints as itself
expect 0 replay sample --capacity 1024TiB --no-save
has "$T/out" "1.00 PiB (1.13 PB), as given"
grep -q -- "--" "$T/out" && grep -q -- "-9223372036854775808" "$T/out" && fail "an overflowed size in $(cat "$T/out")"
# an allocator option
expect 1 replay sample --allocator bfc:memory_limit=9223372036854775807B --no-save
has "$T/err" "option 'memory_limit' is '9223372036854775807B', more than a device could have"
mp replay sample --allocator torch:max_split_size_mb:9223372036854775807 --no-save
grep -q -- "-9223372036854775808" "$T/out" "$T/err" && fail "max_split_size_mb overflowed: $(cat "$T/err")"
# a device profile's memory
expect 2 devices Big --from H100 --set total_memory=9223372036854775807
grep -q "'total_memory' is '9223372036854775807', more than a device could have" "$T/err" || fail "devices --set total_memory: the option is not named: $(cat "$T/err")"
# a scenario's --set capacity
expect 1 whatif sample max_batch --set capacity=9223372036854775807
has "$T/err" "capacity"
has "$T/err" "more than a device could have"
[ "$(store_digest)" = "$before" ] || fail "a refused size changed the store"
finish
