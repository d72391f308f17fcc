# JSON Lines round-trips without loss: import, export, import the export, export again.
. "$TESTS_DIR/cli/lib.sh"

roundtrip() { # FILE NAME
  expect 0 import "$1" --name "$2-a" || return
  expect 0 export "$2-a" --format jsonl -o "$T/$2-a.jsonl" || return
  expect 0 import "$T/$2-a.jsonl" --name "$2-b" || return
  expect 0 export "$2-b" -o "$T/$2-b.jsonl" || return
  # Identical but for the trace's name in the header line.
  diff <(tail -n +2 "$T/$2-a.jsonl") <(tail -n +2 "$T/$2-b.jsonl") >/dev/null || fail "$2: exports differ"
  diff <(head -1 "$T/$2-a.jsonl" | sed 's/"name":"[^"]*"//') <(head -1 "$T/$2-b.jsonl" | sed 's/"name":"[^"]*"//') \
    >/dev/null || fail "$2: headers differ beyond the name"
  # The stored rows are the same too.
  local q="SELECT seq, ts, kind, dur, dev_ts, api_dur, device, stream, addr, size, mem, dir, category, cat_source, step, name, flags FROM events_named WHERE trace_id = (SELECT id FROM traces WHERE name = '%s') ORDER BY seq"
  [ "$(sqlite3 "$DB" "$(printf "$q" "$2-a")" | md5sum)" = "$(sqlite3 "$DB" "$(printf "$q" "$2-b")" | md5sum)" ] ||
    fail "$2: stored events differ"
}

roundtrip "$MEMPLAY_SRC/traces/sample.jsonl" sample

# Every kind and field of the format, written by hand.
cat >"$T/all.jsonl" <<'JSONL'
{"memplay":1,"name":"all","device_name":"H100","device_memory":85520809984,"framework":"pytorch","allocator":"torch","allocator_settings":{"expandable_segments":false,"max_split_size":-1},"batch_size":32,"attrs":{"note":"every field"}}
{"kind":"stack","id":1,"frames":[{"name":"inner","file":"m.py","line":3},{"name":"outer","file":"t.py","line":9}]}
{"kind":"marker","ts":0,"name":"ProfilerStep#1","flags":["step_begin"],"step":1,"dur":5000}
{"kind":"segment_alloc","ts":5,"addr":"0x7f0000000000","size":2097152}
{"kind":"alloc","ts":10,"addr":"0x7f0000000000","size":"4KiB","stream":3,"category":"activation","stack":1,"step":1,"api_dur":3}
{"kind":"host_alloc","ts":20,"addr":42,"size":1048576,"mem":"pinned"}
{"kind":"memcpy","ts":30,"dir":"h2d","mem":"pinned","size":1048576,"dur":100,"dev_ts":35,"stream":3,"flags":["async"],"args":{"correlation":77,"bw":{"gbps":10.5}}}
{"kind":"memset","ts":40,"size":4096,"dur":3,"dev_ts":140}
{"kind":"kernel","ts":50,"name":"gemm","dur":1000,"dev_ts":150,"api_dur":4,"stream":3,"device":0}
{"kind":"sync","ts":60,"stream":3,"dur":1100,"flags":["sync_event"]}
{"kind":"api","ts":70,"name":"cudaGetDevice","dur":1}
{"kind":"kernel","ts":75,"name":"k\"q\\\t\u0001é/","dur":2}
{"kind":"totals","ts":80,"allocated":4096,"reserved":2097152}
{"kind":"free_requested","ts":90,"addr":139637976727552,"stream":3}
{"kind":"free_completed","ts":95,"addr":139637976727552,"stream":3}
{"kind":"host_free","ts":99,"addr":42}
{"kind":"empty_cache","ts":100}
{"kind":"alloc","ts":110,"addr":9,"size":0,"mem":"managed","category":"workspace","cat_source":"user","flags":["preexisting"]}
{"kind":"free","ts":120,"addr":9}
{"kind":"segment_free","ts":130,"addr":"0x7f0000000000","size":2097152}
{"kind":"oom","ts":140,"size":1073741824,"device_free":1024}
{"kind":"segment","addr":139637976727552,"size":2097152,"pool":"small","expandable":false,"allocated_size":0,"requested_size":0,"active_size":0,"stack":1}
{"kind":"block","segment":139637976727552,"addr":139637976727552,"size":2097152,"state":"inactive"}
{"kind":"stat","name":"kept_by_hand","severity":"info","value":3,"detail":"a note"}
JSONL
roundtrip "$T/all.jsonl" all
# The export's lines, byte for byte as the JSON generator wrote them before event lines were built
# by hand: flags, args (their keys in order), and a name with escapes and UTF-8.
has "$T/all-a.jsonl" '{"kind":"memcpy","ts":30,"dur":100,"dev_ts":35,"stream":3,"size":1048576,"mem":"pinned","dir":"h2d","flags":["async"],"args":{"bw":{"gbps":10.5},"correlation":77}}'
has "$T/all-a.jsonl" '{"kind":"kernel","ts":75,"dur":2,"name":"k\"q\\\t\u0001é/"}'
has "$T/all-a.jsonl" '{"kind":"free_requested","ts":90,"stream":3,"addr":139637976727552}'
expect 0 info all-a --json
for k in '"events":15' '"name":"all-a"' '"batch_size":32' '"segment_alloc":1' '"kept_by_hand (info)":3'; do has "$T/out" "$k"; done
# The hand-written address forms all name one allocation.
[ "$(sqlite3 "$DB" "SELECT count(DISTINCT addr) FROM events WHERE trace_id = (SELECT id FROM traces WHERE name = 'all-a') AND kind IN (1,2,3) AND addr != 9")" = 1 ] ||
  fail "hex and decimal addresses differ"
[ "$(sqlite3 "$DB" "SELECT value FROM event_args WHERE key = 'bw' LIMIT 1")" = '{"gbps":10.5}' ] || fail "args lost"

# The smallest useful trace.
printf '{"kind":"alloc","addr":1,"size":4096}\n{"kind":"free","addr":1}\n' >"$T/min.jsonl"
roundtrip "$T/min.jsonl" min
expect 0 replay min-a --json && [ "$(json_get peak_requested_bytes)" = 4096 ] || fail "minimal trace peak"

# A generated trace with stacks, names, steps, copies and syncs.
expect 0 gen --events 5000 --seed 11 --name g
expect 0 export g -o "$T/g.jsonl"
roundtrip "$T/g.jsonl" gen
finish
