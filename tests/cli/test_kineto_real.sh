#!/usr/bin/env bash
# test_kineto_real.sh: the real profiler traces and memory timeline import from the command line and describe themselves.
set -u
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
dir="${MEMPLAY_TRACES:-}/kineto"
[ -n "${MEMPLAY_TRACES:-}" ] && [ -d "$dir" ] || exit 77
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db="$tmp/store.db"
mp() { "$MEMPLAY" --db "$db" "$@"; }

n=0
for f in "$dir"/*; do
  case "$f" in *README*) continue ;; esac
  mp import --json "$f" >"$tmp/out" || fail "cannot import $f"
  n=$((n + 1))
done
[ "$n" -ge 3 ] || fail "only $n files in $dir"

mp info --json hta_v100_training_memory >"$tmp/v100.json" || fail "info v100"
for want in '"kernel":19370' '"memcpy":2040' '"memset":880' '"totals":28010' '"device_name":"Tesla V100-SXM2-32GB"' \
  '"peak_live_bytes":6629508096' '"parameter":4096614400' '"host_pageable_peak_bytes":8'; do
  grep -q "$want" "$tmp/v100.json" || fail "info v100 lacks $want: $(cat "$tmp/v100.json")"
done
mp info --json hta_memory_timeline >"$tmp/tl.json" || fail "info timeline"
grep -q '"peak_live_bytes":3082832104' "$tmp/tl.json" || fail "timeline peak: $(cat "$tmp/tl.json")"
grep -q '"source":' "$tmp/tl.json" || fail "timeline categories are not from the source"
mp info hta_a100_pinned_pageable_memcpy >"$tmp/a100" || fail "info a100"
grep -q "memcpy *1,390" "$tmp/a100" || fail "a100 copies: $(cat "$tmp/a100")"
mp replay --no-save hta_v100_training_memory >"$tmp/replay" || fail "replay v100"
exit 0
