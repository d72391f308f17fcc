# Scenario answers that do not mislead: max_batch's first batch that does not fit shows the peak it
# would need and by how much it misses (not a peak capped at the capacity); allocator_settings
# weighs fit first, then peak reserved, then predicted time, and says why the winner won.
. "$TESTS_DIR/cli/lib.sh"

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl"
expect 0 whatif sample max_batch --set capacity=40GiB
row=$(grep "(does not fit)" "$T/out")
[ -n "$row" ] || fail "no row for the batch that does not fit: $(cat "$T/out")"
echo "$row" | grep -qE "no: [0-9.]+ [KMG]iB short" || fail "the missing row says no shortfall: $row"
need=$(echo "$row" | awk '{print $(NF-7)}')
unit=$(echo "$row" | awk '{print $(NF-6)}')
[ "$unit" = GiB ] && awk -v n="$need" 'BEGIN { exit !(n > 40) }' || fail "the missing row's peak reserved ($need $unit) is not above the capacity: $row"
grep -q "would need .* reserved .* with unlimited memory" "$T/out" || fail "no assumption for the missing row"

# allocator_settings: time decides between settings of equal fit and peaks within 1%
expect 0 whatif sample allocator_settings --device A100-40GB
head -1 "$T/out" | grep -qE "recommended torch expandable_segments \(peak reserved within 1% of [^']+'s \([0-9.]+ GiB against [0-9.]+ GiB\), and faster:" ||
  fail "time did not decide between equal peaks: $(head -1 "$T/out")"
# fit decides first: at 19 GiB the lowest peak (bfc's) fails, and is not recommended
expect 0 whatif sample allocator_settings --set capacity=19GiB --set 'settings=tensorflow bfc;torch default'
head -1 "$T/out" | grep -q "recommended torch default (it fits, and the next best, tensorflow bfc, fails" ||
  fail "fit did not decide first: $(head -1 "$T/out")"
# peak decides between settings that fit
expect 0 whatif sample allocator_settings --set capacity=40GiB --set 'settings=torch default;tensorflow bfc'
head -1 "$T/out" | grep -q "recommended torch default (of the settings that fit: the lowest peak reserved" ||
  fail "peak did not decide: $(head -1 "$T/out")"
# nothing fits: the fewest failures, said so
expect 3 whatif sample allocator_settings --set capacity=17GiB
head -1 "$T/out" | grep -q "it fails the fewest allocations" || fail "no fewest-failures answer: $(head -1 "$T/out")"
head -1 "$T/out" | grep -q "every setting fails on 17.00 GiB" || fail "does not say that every setting fails"
finish
