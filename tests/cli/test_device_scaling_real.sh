# test_device_scaling_real.sh: time on the recorded machine with copy times fitted from the
# trace's own copies, and on another device with kernels scaled by what bounds them
# (docs/timemodel.md, "Copies fitted from the trace" and "Another device"; docs/accuracy.md).
. "$TESTS_DIR/cli/lib.sh"
need_traces
command -v sqlite3 >/dev/null || { echo "skipped: the sqlite3 shell is needed (tools/deps.sh installs it)"; exit 77; }
K="$MEMPLAY_TRACES/kineto"
[ -f "$K/hta_a100_pinned_pageable_memcpy.json.gz" ] || { echo "skipped: hta_a100 is not in MEMPLAY_TRACES"; exit 77; }
expect 0 import "$K/hta_a100_pinned_pageable_memcpy.json.gz" --name a100 || finish

# jx FILE PATH: a value from a JSON file, by SQLite's JSON path
jx() { sqlite3 :memory: "SELECT json_extract(readfile('$1'), '$2')"; }
# ok EXPR WHAT: an awk condition on numbers holds
ok() { awk "BEGIN { exit !($1) }" || fail "$2 ($1)"; }

# On the recorded device: the copies are fitted from the trace's own, every class within 10%
# of its recorded total, each fit with its residual; the steps within 5% of the recorded ones
expect 0 replay a100 --no-save --json
cp "$T/out" "$T/a100.json"
n=$(jx "$T/a100.json" '$.time.copies' | grep -o '"kind"' | wc -l)
[ "$n" -ge 6 ] || fail "a100: $n copy classes, expected 6"
for i in $(seq 0 $((n - 1))); do
  e=$(jx "$T/a100.json" "\$.time.copies[$i].total_error")
  ok "$e >= -0.10 && $e <= 0.10" "a100 copies $(jx "$T/a100.json" "\$.time.copies[$i].kind") $(jx "$T/a100.json" "\$.time.copies[$i].size"): total error $e"
done
[ "$(jx "$T/a100.json" '$.time.copy_fit[0].kind')" != "" ] || fail "a100: no copy fit reported"
# the large pinned host-to-device copies: the machine's 12 GB/s, not the profile's 25
bw=$(sqlite3 :memory: "SELECT json_extract(value, '\$.bandwidth_bytes_per_s') FROM json_each(json_extract(readfile('$T/a100.json'), '\$.time.copy_fit'))
  WHERE json_extract(value, '\$.kind') = 'h2d_pinned' AND json_extract(value, '\$.size') = 'at least 1 MiB'")
ok "$bw > 11.5e9 && $bw < 12.5e9" "a100 large pinned copies fitted at $bw B/s"
rms=$(sqlite3 :memory: "SELECT json_extract(value, '\$.rms_residual_s') FROM json_each(json_extract(readfile('$T/a100.json'), '\$.time.copy_fit'))
  WHERE json_extract(value, '\$.kind') = 'd2d' AND json_extract(value, '\$.size') = 'at least 1 MiB'")
ok "$rms > 0" "a100 large device copies: residual $rms"
a100=$(jx "$T/a100.json" '$.step_time_s')
rec=$(jx "$T/a100.json" '$.time.recorded_step_time_s')
ok "$a100 >= 0.95 * $rec && $a100 <= 1.05 * $rec" "a100 on its own device: step $a100 s, recorded $rec s"
[ "$(jx "$T/a100.json" '$.time.device_scaling')" = "" ] || fail "a100 on its own device: kernels scaled"
# naming the recorded card's profile is the same
expect 0 replay a100 --device A100-80GB --no-save --json
[ "$(json_get step_time_s)" = "$a100" ] || fail "a100 --device A100-80GB: $(json_get step_time_s), not $a100"

# On an L4: compute 2.6x (TF32), memory bandwidth 6.8x slower; the step is slower than the
# A100's, by a ratio inside the range printed beside it
expect 0 replay a100 --device L4 --no-save --json
cp "$T/out" "$T/l4.json"
l4=$(jx "$T/l4.json" '$.step_time_s')
lo=$(jx "$T/l4.json" '$.time.device_scaling.range.fastest_step_time_s')
hi=$(jx "$T/l4.json" '$.time.device_scaling.range.slowest_step_time_s')
ok "$l4 > $a100" "L4 step $l4 s is not slower than the A100's $a100 s"
ok "$lo <= $l4 && $l4 <= $hi" "L4 step $l4 s outside the printed range [$lo, $hi]"
ok "$lo > $a100" "L4 fastest bound $lo s not above the A100's $a100 s"
[ "$(jx "$T/l4.json" '$.time.device_scaling.recorded_device')" = A100-80GB ] || fail "L4: the recorded device is not A100-80GB"
mem=$(sqlite3 :memory: "SELECT json_extract(value, '\$.ratio') FROM json_each(json_extract(readfile('$T/l4.json'), '\$.time.device_scaling.bounds'))
  WHERE json_extract(value, '\$.bound') = 'memory bandwidth'")
ok "$mem > 6.7 && $mem < 6.9" "L4 memory ratio $mem"
expect 0 replay a100 --device L4 --no-save
has "$T/out" "kernels scaled      from A100-80GB"
has "$T/out" "range               step"
has "$T/out" "(all compute-bound to all memory-bound)"
# kept as recorded when asked (a GPU replay that spins for the recorded times)
expect 0 replay a100 --device L4 --timing kernels=recorded --no-save --json
[ "$(jx "$T/out" '$.time.device_scaling')" = "" ] || fail "kernels=recorded: kernels scaled"

# pinned_staging on the recorded machine checks itself against the trace's own pinned and
# pageable copies: the gain the variants predict for the pageable copies is the measured one
expect 0 whatif a100 pinned_staging --no-save
line=$(grep -o "checked against the trace's own copies: .*" "$T/out")
[ -n "$line" ] || fail "pinned_staging: no check against the trace's own copies: $(head -c 300 "$T/out")"
measured=$(echo "$line" | sed -n 's/.*a measured gain of \(.*\), against .*/\1/p')
predicted=$(echo "$line" | sed -n 's/.*, against \(.*\) predicted by the variants.*/\1/p')
[ -n "$measured" ] && [ "$measured" = "$predicted" ] || fail "pinned_staging: measured gain '$measured', predicted '$predicted'"
finish
