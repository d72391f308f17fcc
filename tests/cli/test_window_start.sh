# One answer per question: on every shared PyTorch snapshot, `replay` under the recorded allocator
# and settings starts from the state `validate` rebuilds and reproduces the recorded peaks and
# validate's own; under another allocator, or asked to, a window starts from its live blocks and
# says so. A snapshot's empty_cache() bursts are events replay honours (kk_ctx512 opens with one).
. "$TESTS_DIR/cli/lib.sh"
need_traces
P="$MEMPLAY_TRACES/pytorch"
ls "$P"/*.pickle >/dev/null 2>&1 || { echo "skipped: no PyTorch snapshots in MEMPLAY_TRACES"; exit 77; }

# num KEY [FILE]: a top-level number of a JSON object
num() { sed -n "s/.*\"$1\":\([-0-9]*\).*/\1/p" "${2:-$T/out}" | head -1; }

n=0
for f in "$P"/*.pickle; do
  name=$(basename "$f" .pickle)
  expect 0 import "$f" --name "$name" || continue
  expect 0 validate "$name" --json --no-save || continue
  cp "$T/out" "$T/validate.json"
  grep -q '"agree":true' "$T/validate.json" || fail "$name: validate does not agree"
  expect 0 replay "$name" --json --no-save || continue
  for pair in "peak_reserved_bytes recorded_peak_reserved_bytes" "peak_reserved_bytes replayed_peak_reserved_bytes" \
    "peak_allocated_bytes replayed_peak_allocated_bytes" "peak_requested_bytes recorded_peak_requested_bytes"; do
    set -- $pair
    [ "$(num "$1")" = "$(num "$2" "$T/validate.json")" ] ||
      fail "$name: replay's $1 $(num "$1") is not validate's $2 $(num "$2" "$T/validate.json")"
  done
  if [ "$(num preexisting_blocks "$T/validate.json")" != 0 ]; then
    has "$T/out" '"window_start":{"state":"rebuilt"'
  else
    grep -q '"window_start"' "$T/out" && fail "$name: a trace recorded from empty has no window start"
  fi
  n=$((n + 1))
done
[ "$n" -gt 0 ] || fail "no snapshot replayed"

# compare answers as replay does: its cell of the recorded allocator starts from the rebuilt state.
if [ -f "$P/wed_medium_128_training.pickle" ]; then
  expect 0 replay wed_medium_128_training --allocator torch --json --no-save
  want=$(num peak_reserved_bytes)
  expect 0 compare wed_medium_128_training --policy torch --policy bfc --json --no-save
  python3 - "$T/out" "$want" <<'PY' || fail "compare's torch cell of a window is not replay's"
import json, sys
d = json.load(open(sys.argv[1]))
c = [c for c in d["cells"] if c["policy"] == "torch"][0]
assert c["settings"]["window_start"]["state"] == "rebuilt", c["settings"]
assert int(c["peak_reserved_bytes"]) == int(sys.argv[2]), (c["peak_reserved_bytes"], sys.argv[2])
b = [c for c in d["cells"] if c["policy"] == "bfc"][0]
assert b["settings"]["window_start"]["state"] == "live_set", b["settings"]
PY
fi

# Another allocator, or --live-start: the live blocks, in address order, and why.
if [ -f "$P/wed_medium_128_training.pickle" ]; then
  expect 0 replay wed_medium_128_training --allocator bfc --json --no-save
  has "$T/out" '"window_start":{"state":"live_set","segments":0,"blocks":0,"assumption":"assumed: an empty allocator at the window'"'"'s start, the blocks live then allocated first, in address order'
  has "$T/out" "(another allocator than the recorded one)"
  expect 0 replay wed_medium_128_training --allocator torch:expandable_segments:True --no-save
  has "$T/out" "window start        assumed: an empty allocator"
  has "$T/out" "(options other than the recorded settings)"
  expect 0 replay wed_medium_128_training --live-start --json --no-save
  has "$T/out" '"state":"live_set"'
  [ "$(num peak_reserved_bytes)" = 7218397184 ] || fail "wed_medium_128_training from its live blocks: $(num peak_reserved_bytes)"
  expect 0 replay wed_medium_128_training --no-save
  has "$T/out" "window start        the recorded state at the window's start, as validate rebuilds it: 377 segments holding 664 live blocks"
fi

# kk_ctx512 opens with torch.cuda.empty_cache() releasing 790 cached segments: replay releases
# them too (none without the rebuilt start, where nothing is cached yet).
if [ -f "$P/kk_ctx512_fullstep.pickle" ]; then
  expect 0 replay kk_ctx512_fullstep --json --no-save
  [ "$(num device_frees)" = 790 ] || fail "kk_ctx512: $(num device_frees) segments released, wanted 790"
  [ "$(num peak_reserved_bytes)" = 62830673920 ] || fail "kk_ctx512: peak reserved $(num peak_reserved_bytes)"
fi
finish
