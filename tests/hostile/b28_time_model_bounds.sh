# B28: durations the time model adds up, at the edges of what a trace and a profile may hold: copies
# recorded as lasting 2^56 ns (the longest the time model follows; they were 2^62 ns, the
# importers' bound, which it now refuses: b29), a profile edited to move 1 byte a second or to
# take 50 days a call. The copy durations, the modelled copy times and the costs of allocation
# calls overflowed 64 bits (undefined behaviour, which the sanitizer build stops on). Each
# operation's time is now held to the time model's bound on one operation (4.5e15 ns, as a
# kernel's was), and a profile's times to that bound (`devices --set` refuses more). And a staged
# copy was simulated chunk by chunk: 2^47 bytes through a buffer of 1 byte never ended; a copy is
# now simulated in at most 4,096 chunks.
. "$TESTS_DIR/cli/lib.sh"
python3 - "$T/long.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    print(json.dumps({"memplay": 1, "name": "long", "device_name": "H100"}), file=f)
    for i in range(4):
        print(json.dumps({"kind": "memcpy", "ts": i * 10, "dur": (1 << 56) - 1, "stream": 7, "size": 1 << 47,
                          "dir": "h2d", "mem": "pinned" if i % 2 else "pageable"}), file=f)
    print(json.dumps({"kind": "alloc", "ts": 100, "addr": 1, "size": 512}), file=f)
PY
expect 0 import "$T/long.jsonl"
for timing in "" "--timing copies=recorded" "--timing copies=profile"; do
  # shellcheck disable=SC2086
  expect 0 replay long --no-save --device H100 $timing && has "$T/out" "predicted"
done
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
expect 0 devices slow --from H100 --set h2d_pinned_bw=1B/s --set h2d_pageable_bw=1B/s --set d2h_pinned_bw=1B/s \
  --set d2h_pageable_bw=1B/s --set staging_buffer=1B --set malloc_per_gib=4320000s --set copy_latency=4320000s
expect 0 replay s --device slow --no-save && has "$T/out" "predicted"
expect 0 replay long --device slow --no-save && has "$T/out" "predicted"
expect 2 devices slow --set launch_latency=5184000s && has "$T/err" "'launch_latency' wants a time such as 5us, 1.5ms or 2s"
finish
