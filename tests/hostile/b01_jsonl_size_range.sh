# B01: JSONL sizes past memplay's limit (2^48 bytes), up to 2^63 and 2^64-1, are refused with the
# line and the field; times out of range too. Nothing wraps, the store is untouched.
. "$TESTS_DIR/cli/lib.sh"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
digest=$(store_digest)
n=0
bad() { # LINE FIELD
  n=$((n + 1))
  printf '%s\n%s\n' '{"memplay":1}' "$1" >"$T/b$n.jsonl"
  expect 1 import "$T/b$n.jsonl" && { has "$T/err" "b$n.jsonl:2:"; has "$T/err" "field '$2'"; }
  [ "$(store_digest)" = "$digest" ] || fail "store changed by $1"
}
bad '{"kind":"alloc","addr":1,"size":9223372036854775808}' size
bad '{"kind":"alloc","addr":1,"size":18446744073709551615}' size
bad '{"kind":"alloc","addr":1,"size":18446744073709551616}' size
bad '{"kind":"alloc","addr":1,"size":281474976710657}' size
bad '{"kind":"alloc","addr":1,"size":"16EiB"}' size
bad '{"kind":"alloc","addr":1,"size":8,"ts":9223372036854775807}' ts
bad '{"kind":"kernel","ts":0,"dur":4611686018427387905}' dur
# the largest size taken is replayed without wrapping
printf '%s\n%s\n%s\n' '{"memplay":1}' '{"kind":"alloc","addr":1,"size":281474976710656}' \
  '{"kind":"alloc","addr":2,"size":281474976710656}' >"$T/big.jsonl"
expect 0 import "$T/big.jsonl" --name big
expect 0 replay big --allocator ideal --json
has "$T/out" '"peak_allocated_bytes":562949953421312'
finish
