# B05: Kineto numbers are range-checked before any arithmetic: a huge baseTimeNanoseconds (which
# made times negative), Bytes = 2^63 and a device id out of range are refused with the field.
. "$TESTS_DIR/cli/lib.sh"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
digest=$(store_digest)
k() { # BASE BYTES DEVICE_ID TS
  cat <<JSON
{"schemaVersion": 1, "baseTimeNanoseconds": $1,
 "deviceProperties": [{"id": 0, "name": "Test GPU", "totalGlobalMem": 1048576}],
 "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": $4, "dur": 100},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12,
   "args": {"Addr": 4096, "Bytes": $2, "Total Allocated": 3072, "Total Reserved": 2097152, "Device Type": 1, "Device Id": $3}},
  {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 5, "args": {"device": 0, "stream": 7}}
 ]}
JSON
}
n=0
bad() { # WHAT FIELD ARGS...
  n=$((n + 1))
  local what=$1 field=$2
  shift 2
  k "$@" >"$T/k$n.json"
  expect 1 import --format kineto "$T/k$n.json" && { has "$T/err" "k$n.json"; has "$T/err" "$field"; }
  [ "$(store_digest)" = "$digest" ] || fail "$what: the store changed"
}
bad "base 2^63-1" baseTimeNanoseconds 9223372036854775807 1024 0 10
bad "base 2^62+1" baseTimeNanoseconds 4611686018427387905 1024 0 10
bad "Bytes 2^63" Bytes 0 9223372036854775808 0 10
bad "Bytes -2^63" Bytes 0 -9223372036854775808 0 10
bad "Bytes 2^60" Bytes 0 1152921504606846976 0 10
bad "device -3" "Device Id" 0 1024 -3 10
bad "ts 2^62 us" ts 0 1024 0 4611686018427387904
k 1700000000000000000 1024 0 10 >"$T/ok.json"
expect 0 import --format kineto "$T/ok.json" --name ok
finish
