#!/usr/bin/env bash
# bench-session.sh: the replay session's costs (a cached replay's fixed cost, scripts against the engine, replays of
# kk_ctx128_fullstep per second through Lua and compare). Prints a table (docs/performance.md).
#
# usage: tools/bench-session.sh [BUILD] [RUNS]    (default build, 5 rounds each, best kept)
# environment: TRACES: the shared traces folder (default ../shared/traces beside the source tree)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$here/build}")
runs=${2:-5}
traces=${TRACES:-$here/../shared/traces}
M=$build/memplay
dir=$(mktemp -d "${TMPDIR:-/tmp}/memplay-bench-session.XXXXXX")
trap 'rm -rf "$dir"' EXIT
db=$dir/bench.db
"$M" --db "$db" import "$traces/pytorch/sil_small_from_empty.pickle" >/dev/null
"$M" --db "$db" import "$traces/pytorch/kk_ctx128_fullstep.pickle" >/dev/null
"$M" --db "$db" gen --events 1000000 --seed 1 --name big >/dev/null
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"
"$build/tests/bench_session" "$db" "$runs"
