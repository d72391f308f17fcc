# replay, list and info as scripts see them: the JSON keys are a contract; OOMs; runs stored.
. "$TESTS_DIR/cli/lib.sh"

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample

expect 0 replay sample --allocator cuda --json
for k in trace allocator events peak_allocated_bytes peak_reserved_bytes peak_requested_bytes device_mallocs \
  device_frees ooms fragmentation run_id; do
  grep -q "\"$k\":" "$T/out" || fail "replay --json lacks '$k'"
done
[ "$(json_get trace)" = sample ] || fail "trace name"
[ "$(json_get allocator)" = cuda ] || fail "allocator name"
[ "$(json_get events)" = 4000 ] || fail "event count: $(json_get events)"
peak_cuda=$(json_get peak_reserved_bytes)
mallocs=$(json_get device_mallocs)
allocs=$(sqlite3 "$DB" "SELECT count(*) FROM events WHERE kind = 1")
[ "$mallocs" = "$allocs" ] || fail "cuda makes one cudaMalloc per allocation ($mallocs vs $allocs)"
run=$(json_get run_id)
[ "$(sqlite3 "$DB" "SELECT peak_reserved FROM runs WHERE id = $run")" = "$peak_cuda" ] || fail "run not stored"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM run_timeline WHERE run_id = $run")" -gt 10 ] || fail "timeline not stored"
# The stored timeline is the run's, point for point (501 points: stored 64 a statement, the rest one
# by one).
expect 0 replay sample --allocator cuda --json --timeline && cp "$T/out" "$T/tl.json"
python3 - "$T/tl.json" "$DB" <<'PY' || fail "the stored timeline is not the run's"
import json, sqlite3, sys
r = json.load(open(sys.argv[1]))
want = [(i, p["event"], p["ts"], p["allocated_bytes"], p["reserved_bytes"], p["requested_bytes"]) for i, p in enumerate(r["timeline"])]
got = sqlite3.connect(sys.argv[2]).execute("SELECT idx, seq, ts, allocated, reserved, requested FROM run_timeline "
                                           "WHERE run_id = ? ORDER BY idx", (r["run_id"],)).fetchall()
assert len(want) > 64 and len(want) % 64, len(want)
assert got == want, next((g, w) for g, w in zip(got + [None] * len(want), want) if g != w)
PY

# The ideal peak equals the largest live sum, computed here with SQL over the stored events.
expect 0 replay sample --allocator ideal --json
ideal=$(json_get peak_allocated_bytes)
sqlpeak=$(sqlite3 "$DB" "WITH d AS (SELECT seq, CASE kind WHEN 1 THEN size ELSE -(SELECT a.size FROM events a WHERE a.kind = 1 AND a.addr = e.addr AND a.seq < e.seq ORDER BY a.seq DESC LIMIT 1) END AS delta FROM events e WHERE kind IN (1,4)) SELECT max(s) FROM (SELECT sum(delta) OVER (ORDER BY seq) AS s FROM d)")
[ "$ideal" = "$sqlpeak" ] || fail "ideal peak $ideal differs from SQL's $sqlpeak"
[ "$peak_cuda" -ge "$ideal" ] || fail "cuda reserved below the ideal"

# A capacity below the peak: OOMs, the replay goes on; --stop-at-oom stops at the first.
expect 3 replay sample --allocator ideal --capacity 16GiB --json
ooms=$(json_get ooms)
[ "$ooms" -gt 0 ] || fail "no OOM below the peak"
has "$T/out" '"oom_list":[{"event":'
has "$T/out" 'bytes requested with'
[ "$(json_get events)" = 4000 ] || fail "replay did not go on after the OOM"
expect 3 replay sample --allocator ideal --capacity 16GiB --stop-at-oom --json
[ "$(json_get ooms)" = 1 ] && has "$T/out" '"stopped_at_oom":true'
[ "$(json_get events)" -lt 4000 ] || fail "stop-at-oom read everything"
expect 0 replay sample --allocator ideal --capacity 1TiB --no-save --json
[ "$(json_get ooms)" = 0 ] || fail "OOM under a large capacity"
grep -q '"run_id"' "$T/out" && fail "--no-save stored a run"
expect 0 replay sample --allocator cuda --capacity 24GB
has "$T/out" "peak reserved"
has "$T/out" "live at the peak, by category"

# Defaults: the recorded allocator when it has a model, else ideal.
expect 0 replay sample --json --no-save
grep -q '"allocator":"\(torch\|ideal\)"' "$T/out" || fail "default allocator: $(json_get allocator)"

# list and info
expect 0 list --json
has "$T/out" '"traces":[{'
has "$T/out" '"name":"sample"'
has "$T/out" '"events":4000'
has "$T/out" '"device":"H100"'
expect 0 info sample --json
for k in '"name":"sample"' '"events":4000' '"events_by_kind":{' '"devices":[0]' '"streams":[' '"duration_ns":'; do
  has "$T/out" "$k"
done
kinds_total=$(sed -n 's/.*"events_by_kind":{\([^}]*\)}.*/\1/p' "$T/out" | tr ',' '\n' | sed 's/.*://' | paste -sd+ | bc)
[ "$kinds_total" = 4000 ] || fail "events_by_kind sums to $kinds_total"
expect 0 info sample
has "$T/out" "live at the peak, by category"

# --device-calls: every call the model made to its device, refused ones too, with the memory in use
# around each; its successful calls are the run's device calls, and the memory moves by whole pages.
expect 3 replay sample --allocator torch --capacity 16GiB --no-save --json --device-calls "$T/calls.txt"
mallocs=$(json_get device_mallocs)
frees=$(json_get device_frees)
[ "$(head -1 "$T/calls.txt")" = "# who device call op size addr stream result used_before used_after" ] ||
  fail "device calls: header $(head -1 "$T/calls.txt")"
[ "$(grep -c '^sim 0 [0-9]* malloc .* ok ' "$T/calls.txt")" = "$mallocs" ] || fail "device calls: not $mallocs mallocs"
[ "$(grep -c '^sim 0 [0-9]* free .* ok ' "$T/calls.txt")" = "$frees" ] || fail "device calls: not $frees frees"
[ "$(grep -c ' malloc .* oom ' "$T/calls.txt")" -gt 0 ] || fail "device calls: the refused mallocs are missing"
awk '!/^#/ { n++; if ($3 != n) { print "call " n " numbered " $3; bad = 1 }
             step = 2097152; want = int(($5 + step - 1) / step) * step
             if ($8 == "ok" && $4 == "malloc" && $10 - $9 != want) { print "malloc " $5 " moved " $10 - $9; bad = 1 }
             if ($8 == "ok" && $4 == "free" && $9 - $10 != want) { print "free " $5 " moved " $9 - $10; bad = 1 }
             if ($8 == "oom" && $10 != $9) { print "a refused call moved memory"; bad = 1 } }
     END { exit bad }' "$T/calls.txt" || fail "device calls: the memory in use does not follow the calls"
# expandable segments reserve address space and map pages: those calls are there too
expect 0 replay sample --allocator torch:expandable_segments:True --no-save --json --device-calls "$T/calls3.txt"
[ "$(grep -c '^sim 0 [0-9]* map .* ok ' "$T/calls3.txt")" = "$(json_get device_maps)" ] || fail "device calls: maps"
grep -q '^sim 0 1 reserve [0-9]* 0x[0-9a-f]* 0 ok 0 0$' "$T/calls3.txt" || fail "device calls: the first reservation"
expect 2 replay sample --at peak --device-calls "$T/calls2.txt" && has "$T/err" "--device-calls follows a whole replay"
expect 1 replay sample --no-save --device-calls "$T/nosuchdir/calls.txt" && has "$T/err" "--device-calls:"
[ ! -e "$T/calls2.txt" ] || fail "--at with --device-calls wrote a file"

# errors
expect 1 replay nosuch && has "$T/err" "no trace 'nosuch'"
expect 2 replay sample --allocator nosuch && has "$T/err" "accepted: ideal, cuda"
expect 2 replay sample --allocator cuda:bogus=1 && has "$T/err" "unknown option 'bogus'"
expect 2 replay sample --capacity lots && has "$T/err" "--capacity"
expect 2 replay && has "$T/err" "no TRACE"
expect 0 rm sample && expect 1 info sample
finish
