#!/usr/bin/env bash
# The spin kernel is PTX the driver compiles at run time: check, without a GPU, that it assembles
# for every architecture the toolkit's ptxas knows from Turing on.
set -euo pipefail
[ -x "${PTXAS:-}" ] || { echo "skip: no ptxas"; exit 77; }
archs=$("$PTXAS" --help 2>/dev/null | grep -o "sm_[0-9]*[af]\?" | sort -u | grep -E "^sm_[0-9]+$" || true)
[ -n "$archs" ] || archs="sm_75 sm_80 sm_86 sm_89 sm_90"
n=0
for a in $archs; do
  num=${a#sm_}
  [ "$num" -ge 75 ] || continue
  "$PTXAS" -arch="$a" "$MEMPLAY_SRC/replay/cuda/spin.ptx" -o /dev/null || { echo "FAIL: spin.ptx does not assemble for $a"; exit 1; }
  n=$((n + 1))
done
[ "$n" -ge 3 ] || { echo "FAIL: only $n architectures tried"; exit 1; }
echo "ok: spin.ptx assembles for $n architectures ($(echo $archs))"
