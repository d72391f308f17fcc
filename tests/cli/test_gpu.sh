#!/usr/bin/env bash
# The GPU commands where there is no GPU: `calibrate`, `record` and `replay --backend cuda` answer
# -h, reject bad usage with 2, and otherwise say plainly why they cannot run and exit 1, without
# running the program or touching the store. Works for builds with and without CUDA support.
set -euo pipefail
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
db="$T/memplay.db"
fail() { echo "FAIL: $*"; exit 1; }

# run EXPECTED_STATUS CMD...: runs memplay, keeping stdout and stderr apart.
run() {
  local want=$1
  shift
  set +e
  "$MEMPLAY" "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  set -e
  [ "$rc" = "$want" ] || { cat "$T/out" "$T/err"; fail "memplay $* exited $rc, expected $want"; }
}

for cmd in calibrate record; do
  run 0 $cmd -h
  grep -q "^usage: memplay $cmd" "$T/out" || fail "$cmd -h: no usage on stdout"
  [ ! -s "$T/err" ] || fail "$cmd -h wrote to stderr"
done
run 0 help replay
grep -q -- "--backend NAME" "$T/out" || fail "replay's help does not mention --backend"

# Usage errors come first and exit 2.
run 2 calibrate extra
run 2 calibrate --gpu x
run 2 record
run 2 record --bogus -- true
run 2 replay sample --backend tpu
run 2 replay sample --scale 0
run 2 replay sample --scale 1.5
run 2 replay sample --scale 0.5 # --scale is for --backend cuda only
grep -q "backend cuda" "$T/err" || fail "--scale without --backend cuda: $(cat "$T/err")"

"$MEMPLAY" --db "$db" import "$MEMPLAY_SRC/traces/sample.jsonl" >/dev/null
runs_before=$(sqlite3 "$db" "SELECT count(*) FROM runs" 2>/dev/null || echo skip)

# Without CUDA support built in, or without a GPU, each command says why and exits 1.
if [ "${MEMPLAY_HAVE_CUDA:-0}" = 1 ]; then
  if [ -e /dev/nvidiactl ]; then
    echo "ok: usage checked; this machine has an NVIDIA driver, so the no-GPU messages are not"
    exit 0
  fi
  why="no NVIDIA driver on this machine|no CUDA-capable GPU"
else
  why="built without CUDA support"
fi
run 1 --db "$db" calibrate
grep -Eq "$why" "$T/err" || fail "calibrate: $(cat "$T/err")"
[ ! -s "$T/out" ] || fail "calibrate printed to stdout"
run 1 --db "$db" replay sample --backend cuda
grep -Eq "$why" "$T/err" || fail "replay --backend cuda: $(cat "$T/err")"
run 1 --db "$db" replay sample --backend cuda --allocator async:release_threshold=1GiB --scale fit --pace
grep -Eq "$why" "$T/err" || fail "replay --backend cuda (async): $(cat "$T/err")"
run 1 --db "$T/other.db" record --name x -- touch "$T/ran"
grep -Eq "$why" "$T/err" || fail "record: $(cat "$T/err")"
[ ! -e "$T/ran" ] || fail "record ran the program without a GPU"
[ ! -e "$T/other.db" ] || fail "record created a store without a GPU"
if [ "$runs_before" != skip ]; then
  [ "$(sqlite3 "$db" "SELECT count(*) FROM runs")" = "$runs_before" ] || fail "a failed GPU replay stored a run"
fi
echo "ok: calibrate, record and replay --backend cuda fail cleanly ($why)"
