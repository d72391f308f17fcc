#!/usr/bin/env bash
# Snapshot import speed: imports the real PyTorch snapshots and two large synthetic ones (Python's
# pickle layout and PyTorch's C++ pickler layout, made by gen_snapshot) into fresh stores, and
# prints a table of MB of pickle per second and peak memory. Each import runs --repeat times;
# the table shows the fastest run (the machine may be shared).
#
# usage: tools/bench_snapshot.sh [--build DIR] [--entries N] [--repeat R] [--traces DIR] [--keep DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build entries=1500000 repeat=3 traces=../shared/traces keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --entries) entries=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --traces) traces=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_snapshot: unknown option '$1'" >&2; exit 2 ;;
  esac
done
memplay="$build/memplay"
gen="$build/gen_snapshot"
for t in "$memplay" "$gen"; do
  [ -x "$t" ] || { echo "bench_snapshot: no '$t': build first (cmake --build $build)" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "bench_snapshot: needs /usr/bin/time (Debian package 'time')" >&2; exit 1; }
work=${keep:-$(mktemp -d)}
mkdir -p "$work"
[ -n "$keep" ] || trap 'rm -rf "$work"' EXIT

files=()
if [ -d "$traces/pytorch" ]; then
  for f in "$traces"/pytorch/*.pickle; do files+=("$f"); done
fi
for layout in python cpp; do
  f="$work/synthetic_${layout}_$entries.pickle"
  [ -f "$f" ] || "$gen" --entries "$entries" --layout "$layout" "$f" 2>/dev/null
  files+=("$f")
done

printf '%-34s %9s %10s %8s %8s %9s\n' "file" "MB" "events" "seconds" "MB/s" "peak MiB"
for f in "${files[@]}"; do
  bytes=$(wc -c <"$f")
  runs=""
  for _ in $(seq "$repeat"); do
    rm -f "$work/bench.db" "$work/bench.db-wal" "$work/bench.db-shm"
    out=$(/usr/bin/time -f 'TIME %e %M' "$memplay" import --db "$work/bench.db" --json "$f" 2>&1 >"$work/out.json")
    events=$(grep -o '"events":[0-9]*' "$work/out.json" | cut -d: -f2 | awk '{s += $1} END {print s}')
    runs="$runs$(sed -n 's/^TIME //p' <<<"$out") $events
"
  done
  # the fastest run's time, the largest peak memory
  printf '%s' "$runs" | awk -v name="$(basename "$f")" -v bytes="$bytes" '
    NF == 3 { if (best == "" || $1 < best) best = $1; if ($2 > rss) rss = $2; events = $3 }
    END { if (best < 0.01) best = 0.01
          printf "%-34s %9.1f %10d %8.2f %8.0f %9.0f\n", name, bytes / 1e6, events, best, bytes / 1e6 / best, rss / 1024 }'
done
