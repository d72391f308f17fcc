#!/usr/bin/env bash
# bench-parallel.sh: how a machine's cores scale on memplay's work when nothing is shared: the lean Lua loop of
# kk_ctx128_fullstep (bench-session.sh's "a Lua loop, lean") run by 1, 2, 4, ... MAX processes at once, each on
# its own copy of the store. Prints a table: processes, CPU per replay (each process's loop, by os.clock), its
# spread, and the ratio to one process. A comparison's workers are threads of one process; when separate
# processes slow down as much as they do, the cause is the machine (shared caches, memory, clock), not memplay.
#
# usage: tools/bench-parallel.sh [MEMPLAY] [MAX] [REPLAYS]   (default build/memplay, the machine's cores, 1000)
# environment: TRACES: the shared traces folder (default ../shared/traces beside the source tree)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
M=$(realpath "${1:-$here/build/memplay}")
max=${2:-$(nproc)}
replays=${3:-1000}
traces=${TRACES:-$here/../shared/traces}
[ -x "$M" ] || { echo "error: no memplay at '$M'" >&2; exit 1; }
[ -e "$traces/pytorch/kk_ctx128_fullstep.pickle" ] || { echo "error: no kk_ctx128_fullstep.pickle under '$traces/pytorch' (set TRACES)" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/memplay-bench-parallel.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$M" --db "$dir/base.db" import "$traces/pytorch/kk_ctx128_fullstep.pickle" >/dev/null
"$M" --db "$dir/base.db" replay kk_ctx128_fullstep --no-save >/dev/null # keeps the window's start
cat >"$dir/loop.lua" <<EOF
local t = memplay.store():trace('kk_ctx128_fullstep'):cache()
t:replay{allocator = 'torch', lean = true}
local c0 = os.clock()
for i = 1, $replays do t:replay{allocator = 'torch', lean = true} end
print(string.format('%.3f', (os.clock() - c0) / $replays * 1e6))
EOF
for ((k = 1; k <= max; k++)); do cp "$dir/base.db" "$dir/p$k.db"; done

echo "$(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); $replays lean torch replays of kk_ctx128_fullstep a process"
printf '%-10s %14s %14s %14s %10s\n' processes "us/replay" "min" "max" "x one"
one=
n=1
while [ "$n" -le "$max" ]; do
  for ((k = 1; k <= n; k++)); do "$M" --db "$dir/p$k.db" run "$dir/loop.lua" >"$dir/out$k" & done
  wait
  read -r mean lo hi < <(for ((k = 1; k <= n; k++)); do cat "$dir/out$k"; done | sort -n | awk '{s += $1; v[NR] = $1} END {printf "%.1f %.1f %.1f\n", s / NR, v[1], v[NR]}')
  rm -f "$dir"/out*
  [ -n "$one" ] || one=$mean
  printf '%-10s %14s %14s %14s %10s\n' "$n" "$mean" "$lo" "$hi" "$(awk -v a="$mean" -v b="$one" 'BEGIN {printf "%.2f", a / b}')"
  if [ "$n" -lt "$max" ] && [ $((n * 2)) -gt "$max" ]; then n=$max; else n=$((n * 2)); fi
done
