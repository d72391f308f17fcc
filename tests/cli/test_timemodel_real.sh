# test_timemodel_real.sh: the time model against the real Kineto traces (docs/accuracy.md, "Time model").
# Replayed with their recorded durations they must reproduce their recorded ProfilerStep times;
# the bandwidth model's copy times are held to what docs/accuracy.md reports.
. "$TESTS_DIR/cli/lib.sh"
need_traces
K="$MEMPLAY_TRACES/kineto"

expect 0 import "$K/hta_a100_pinned_pageable_memcpy.json.gz" --name a100
expect 0 import "$K/hta_v100_training_memory.json.gz" --name v100

# |predicted - recorded| / recorded of each step, in percent, one per line
step_errors() {
  grep -o '"predicted_s":[^,]*,"recorded_s":[^,]*' "$T/out" |
    awk -F'[:,]' '{ e = ($2 - $4) / $4 * 100; if (e < 0) e = -e; printf "%.6f\n", e }'
}
# at_most LIMIT WHAT: every step error of $T/out is at most LIMIT percent
at_most() {
  local worst
  worst=$(step_errors | sort -g | tail -1)
  [ -n "$worst" ] || { fail "$2: no steps"; return; }
  awk -v w="$worst" -v l="$1" 'BEGIN { exit !(w <= l) }' || fail "$2: worst step off by $worst% (limit $1%)"
}
# copy_field KIND SIZE FIELD: a field of a copies entry of the time section
copy_field() {
  grep -o "{\"kind\":\"$1\",\"size\":\"$2\"[^}]*}" "$T/out" | sed -n "s/.*\"$3\":\([^,}]*\).*/\1/p"
}
within() { # VALUE LOW HIGH WHAT
  awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v != "" && v >= lo && v <= hi) }' || fail "$4: $1 not in [$2, $3]"
}

# The A100 trace: chosen by its recorded device; recorded durations reproduce its steps.
expect 0 replay a100 --no-save --json --timing copies=recorded
has "$T/out" '"device_chosen_by":"recorded"'
has "$T/out" '"device":"A100-80GB"'
[ "$(step_errors | wc -l)" = 5 ] || fail "a100: $(step_errors | wc -l) steps, not 5"
at_most 0.2 "a100, recorded durations"
# with the profile's bandwidths for the copies
expect 0 replay a100 --no-save --json --timing copies=profile
at_most 1.5 "a100, modeled copies"
# large pinned host-to-device copies: this busy 8-GPU server moved them at about half the
# profile's PCIe rate (the profile is the card's, not the server's)
within "$(copy_field h2d_pinned "at least 1 MiB" count)" 15 15 "a100 large pinned copies"
within "$(copy_field h2d_pinned "at least 1 MiB" total_error)" -0.56 -0.46 "a100 large pinned copies, total error"
within "$(copy_field d2d "at least 1 MiB" total_error)" -0.10 0.10 "a100 large device copies, total error"
within "$(copy_field h2d_pageable "below 1 MiB" total_error)" -0.3 0.3 "a100 small pageable host-to-device copies"
within "$(copy_field d2h_pageable "below 1 MiB" total_error)" -0.3 0.3 "a100 small pageable device-to-host copies"
# the device waits this trace cannot explain (peer GPUs): without them the steps are much shorter
expect 0 replay a100 --no-save --json --timing copies=recorded,device_waits=drop
for e in $(grep -o '"predicted_s":[^,]*,"recorded_s":[^,]*' "$T/out" | awk -F'[:,]' '{ print ($2 - $4) / $4 }'); do
  within "$e" -1 -0.10 "a100 without device waits: step"
done
# calibrated to the rate the trace shows, the large pinned copies agree
expect 0 devices busy-a100 --from A100-80GB --set h2d_pinned_bw=11.9GB/s --set h2d_pageable_bw=5.95GB/s
expect 0 replay a100 --device busy-a100 --no-save --json
within "$(copy_field h2d_pinned "at least 1 MiB" total_error)" -0.05 0.05 "a100 large pinned copies, calibrated"

# The V100 trace: the host never waits for the device inside a step, so any device model
# reproduces the steps exactly when the allocator makes no driver calls of its own (`ideal`:
# the trace's recorded cudaMalloc calls keep their recorded cost).
expect 0 replay v100 --allocator ideal --no-save --json --timing copies=recorded
has "$T/out" '"device":"V100-32GB"'
[ "$(step_errors | wc -l)" = 5 ] || fail "v100: $(step_errors | wc -l) steps, not 5"
at_most 0.01 "v100, recorded durations"
expect 0 replay v100 --allocator ideal --no-save --json --timing copies=model,device_waits=drop
at_most 0.01 "v100, the model alone"
# Under the allocator that recorded it, the model starts with an empty cache where the real
# process had a warm one: the first step pays for the segments it must cudaMalloc (each also
# synchronizes), and is slower; every later step is served from the cache and is exact.
expect 0 replay v100 --no-save --json --timing copies=recorded
has "$T/out" '"allocator":"torch"'
[ "$(json_get device_mallocs)" -gt 0 ] || fail "v100 under torch: no cudaMalloc"
first=$(step_errors | head -1)
within "$first" 1 30 "v100 under torch: first step (cold cache)"
[ "$(step_errors | tail -n +2 | sort -g | tail -1)" = 0.000000 ] || fail "v100 under torch: a later step differs"
within "$(copy_field d2d "at least 1 MiB" total_error)" -0.10 0.10 "v100 large device copies, total error"
finish
