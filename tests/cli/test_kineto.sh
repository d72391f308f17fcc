#!/usr/bin/env bash
# test_kineto.sh: profiler traces and memory timelines from the command line: detection, --format, bad input, info.
set -u
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db="$tmp/store.db"
mp() { "$MEMPLAY" --db "$db" "$@"; }

cat >"$tmp/step.json" <<'JSON'
{
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "Test GPU", "totalGlobalMem": 1048576}],
  "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 10, "dur": 100},
  {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 11, "dur": 2},
  {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: AddBackward0", "pid": 1, "tid": 1, "ts": 50, "dur": 9},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12,
   "args": {"Addr": 4096, "Bytes": 1024, "Total Allocated": 3072, "Total Reserved": 2097152, "Device Type": 1, "Device Id": 0}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 55,
   "args": {"Addr": 4096, "Bytes": -1024, "Total Allocated": 2048, "Total Reserved": 2097152, "Device Type": 1, "Device Id": 0}},
  {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 5,
   "args": {"device": 0, "stream": 7, "correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12.5, "dur": 3,
   "args": {"correlation": 1}}
  ]
}
JSON
printf '[[-1, 1, 2048, 0], [5, 2, 1024, 4], [9, 4, -1024, 4]]\n' >"$tmp/mem.raw.json"

# Detection from the content, whatever the file is called.
cp "$tmp/step.json" "$tmp/a.data"
mp import --json "$tmp/a.data" >"$tmp/out" || fail "a Kineto trace named a.data does not import"
grep -q '"format":"kineto"' "$tmp/out" || fail "a.data not detected as kineto: $(cat "$tmp/out")"
mp import --json "$tmp/mem.raw.json" >"$tmp/out" || fail "a raw memory timeline does not import"
grep -q '"format":"memory_timeline"' "$tmp/out" || fail "timeline not detected: $(cat "$tmp/out")"
gzip -c "$tmp/step.json" >"$tmp/step.json.gz"
mp import --name gz "$tmp/step.json.gz" >/dev/null || fail "a gzipped trace does not import"

# info: live memory at the peak by category, and how each category was decided.
mp info a.data >"$tmp/info" || fail "info a.data"
grep -q "parameter" "$tmp/info" || fail "info does not show the pre-existing memory as parameter: $(cat "$tmp/info")"
grep -q "activation" "$tmp/info" || fail "info does not show the activation"
grep -q "lifetime" "$tmp/info" || fail "info does not say how categories were decided"
mp info --json a.data >"$tmp/info.json" || fail "info --json"
grep -q '"at_peak_by_category":{"parameter":2048,"activation":1024}' "$tmp/info.json" ||
  fail "info --json peak by category: $(cat "$tmp/info.json")"

# Bad input: exit 1, the file and the place named, the store left as it was.
state() { sqlite3 "$db" "SELECT (SELECT count(*) FROM traces), (SELECT count(*) FROM events), (SELECT count(*) FROM strings), (SELECT count(*) FROM recorded), (SELECT count(*) FROM trace_stats)"; }
before=$(state)
expect_failure() { # pattern file [import options]
  local pattern=$1
  shift
  mp import "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq 1 ] || fail "import $* exited $rc, not 1"
  grep -q -- "$pattern" "$tmp/err" || fail "import $*: the message does not say '$pattern': $(cat "$tmp/err")"
  [ ! -s "$tmp/out" ] || fail "import $* printed on stdout: $(cat "$tmp/out")"
}
printf 'this is not a trace\n' >"$tmp/notes.txt"
expect_failure "not a trace format" "$tmp/notes.txt"
grep -q "notes.txt" "$tmp/err" || fail "the message does not name the file"
printf '[{"name": "x"}, {"name": "y"}]\n' >"$tmp/array.json"
expect_failure "not a trace format" "$tmp/array.json"
expect_failure "JSON array" "$tmp/array.json" --format kineto
printf '{"name": "not a trace", "values": [1, 2]}\n' >"$tmp/object.json"
expect_failure "not a trace format" "$tmp/object.json"
expect_failure "no traceEvents" "$tmp/object.json" --format kineto
head -c 300 "$tmp/step.json.gz" >"$tmp/cut.json.gz"
expect_failure "truncated" "$tmp/cut.json.gz"
head -c 600 "$tmp/step.json" >"$tmp/cut.json"
expect_failure "truncated" "$tmp/cut.json"
sed 's/"Bytes": -1024/"Bytes": "lots"/' "$tmp/step.json" >"$tmp/malformed.json"
expect_failure "line 11 (byte [0-9]*): traceEvents\[4\] (\[memory\]): field 'Bytes' must be an integer" "$tmp/malformed.json"
expect_failure "JSON object" "$tmp/step.json" --format memory_timeline
printf '[[1, 2, 3, 4, 5]]\n' >"$tmp/five.json"
expect_failure "row 0 has 5 values" "$tmp/five.json"
[ "$(state)" = "$before" ] || fail "a failed import changed the store: $before -> $(state)"

# Usage errors exit 2.
mp import --format nosuch "$tmp/step.json" 2>/dev/null
[ $? -eq 2 ] || fail "an unknown --format is not a usage error"
mp import --set sort_memory=1 --name tiny "$tmp/step.json" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "sort_memory" "$tmp/err" || fail "a bad sort_memory is not reported"
exit 0
