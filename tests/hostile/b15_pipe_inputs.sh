# B15: inputs that are not plain files (process substitution, FIFOs): a gzipped JSONL, a pickle
# and an nsys export import as from a file (detection reads from a buffer that is then replayed;
# an SQLite export is copied to a private temporary file). No hang, no temporary file left.
. "$TESTS_DIR/cli/lib.sh"
command -v sqlite3 >/dev/null || { echo "skipped: sqlite3 is not installed"; exit 77; }
export TMPDIR="$T"
bash "$MEMPLAY_SRC/tools/nsys_synth.sh" 20 "$T/x.sqlite" >/dev/null
gzip -c "$MEMPLAY_SRC/traces/sample.jsonl" >"$T/s.jsonl.gz"
run() { # NAME FILE [ARGS]: imports FILE through a FIFO
  local name=$1 file=$2
  shift 2
  rm -f "$T/fifo"
  mkfifo "$T/fifo"
  cat "$file" >"$T/fifo" &
  timeout 60 "$MEMPLAY" import --name "$name" "$@" "$T/fifo" >"$T/out" 2>"$T/err"
  rc=$?
  wait
  [ "$rc" = 0 ] || fail "$name through a FIFO: exit $rc: $(head -c 300 "$T/err")"
}
run gz "$T/s.jsonl.gz"
has "$T/out" "(4,000 events, jsonl)"
run pk "$MEMPLAY_SRC/tests/data/snapshots/tiny_p4.pickle"
has "$T/out" "pytorch_snapshot"
run nsys "$T/x.sqlite"
has "$T/out" "nsys"
run nsys_forced "$T/x.sqlite" --format nsys
has "$T/out" "nsys"
# process substitution (a pipe)
timeout 60 "$MEMPLAY" import --name sub <(gzip -c "$MEMPLAY_SRC/traces/sample.jsonl") >"$T/out" 2>"$T/err" ||
  fail "process substitution: $(cat "$T/err")"
[ -z "$(ls -d "$T"/memplay-source-* 2>/dev/null)" ] || fail "temporary copies left"
finish
