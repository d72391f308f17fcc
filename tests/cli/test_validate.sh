# Every real PyTorch snapshot in MEMPLAY_TRACES/pytorch, imported by memplay and validated
# through the torch model: every allocation at its recorded address, every segment event
# reproduced, every OOM, and the final segments and blocks equal to the snapshot's.
. "$TESTS_DIR/cli/lib.sh"
need_traces
shopt -s nullglob
pickles=("$MEMPLAY_TRACES"/pytorch/*.pickle)
[ ${#pickles[@]} -gt 0 ] || { echo "skipped: no pickles in $MEMPLAY_TRACES/pytorch"; exit 77; }
for p in "${pickles[@]}"; do
  name=$(basename "$p" .pickle)
  expect 0 import "$p" --name "$name" || continue
  # one trace per device that has entries: validate each
  traces=$(sqlite3 "$DB" "SELECT name FROM traces WHERE name = '$name' OR name GLOB '$name-dev[0-9]*' ORDER BY id")
  [ -n "$traces" ] || fail "$name: the import made no trace"
  for t in $traces; do
    if expect 0 validate "$t" --json; then
      a=$(json_get allocs) m=$(json_get address_matches) e=$(json_get segment_events) s=$(json_get segment_matches)
      echo "$t: $m/$a addresses, $s/$e segment events, final state $(json_get final_state_match)"
      [ "$a" = "$m" ] || fail "$t: $m of $a allocations at the recorded address"
      [ "$e" = "$s" ] || fail "$t: $s of $e segment events"
      [ "$(json_get final_state_match)" = true ] || fail "$t: the final state differs"
    else
      fail "$t: $(head -c 600 "$T/out") $(head -c 300 "$T/err")"
    fi
  done
done
finish
