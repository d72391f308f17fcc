# B32: `export --format perfetto` of a trace of allocations alone (no kernel, copy, call or
# marker: nothing to draw as a slice) sorted its slices from a null array (undefined behaviour,
# which the sanitizer build stops on). Found by a sweep of random traces through every command.
. "$TESTS_DIR/cli/lib.sh"
printf '{"kind":"alloc","addr":1,"size":512}\n{"kind":"alloc","addr":2,"size":4096}\n{"kind":"free","addr":1}\n' >"$T/allocs.jsonl"
expect 0 import "$T/allocs.jsonl"
expect 0 export allocs --format perfetto -o "$T/allocs.json"
python3 - "$T/allocs.json" <<'PY' || fail "the export is not a Perfetto trace of 3 counter points"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
counters = [e for e in events if e.get("ph") == "C"]
assert len(counters) >= 3, events
assert not [e for e in events if e.get("ph") == "X"], events
PY
finish
