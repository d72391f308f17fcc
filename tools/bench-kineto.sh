#!/usr/bin/env bash
# bench-kineto.sh: how fast memplay imports PyTorch profiler (Kineto) traces, and in how much memory.
#
#   tools/bench-kineto.sh [--memplay PATH] [--events "1000000 3000000 10000000"] [--gzip] [--keep DIR]
#
# Generates a synthetic trace of each size with tools/gen-kineto-trace.py (the layout and event
# mix of a real Kineto trace), imports it into a fresh store, and prints one row per file:
# trace events, file size, wall and CPU seconds, events per second, MB per second and the
# largest resident memory. --gzip also imports each file gzipped. Files are generated once and
# kept in DIR (default: a temporary folder, removed at the end) so reruns can reuse them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
memplay="$here/../build/memplay"
sizes="1000000 3000000 10000000"
gz=0
keep=""
while [ $# -gt 0 ]; do
  case "$1" in
  --memplay) memplay=$2; shift 2 ;;
  --events) sizes=$2; shift 2 ;;
  --gzip) gz=1; shift ;;
  --keep) keep=$2; shift 2 ;;
  -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench-kineto.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$memplay" ] || { echo "bench-kineto.sh: no memplay at '$memplay' (build it, or give --memplay)" >&2; exit 1; }
if [ -n "$keep" ]; then
  dir=$keep
  mkdir -p "$dir"
else
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
fi

printf '%-22s %12s %9s %8s %8s %12s %12s %8s %9s\n' file "trace events" MB "wall s" "CPU s" "events/s" "ev/CPU-s" "MB/s" "max RSS"
for n in $sizes; do
  f="$dir/kineto-$n.json"
  [ -s "$f" ] || python3 "$here/gen-kineto-trace.py" --events "$n" --out "$f" 2>/dev/null
  files=("$f")
  if [ "$gz" = 1 ]; then
    [ -s "$f.gz" ] || gzip -1 -c "$f" >"$f.gz"
    files+=("$f.gz")
  fi
  events=$(python3 -c "
import json, sys
n = 0
for line in open(sys.argv[1]):
    if line.startswith('  {'): n += 1
print(n)" "$f")
  mb=$(($(stat -c %s "$f") / 1000000))
  for file in "${files[@]}"; do
    rm -f "$dir/bench.db" "$dir/bench.db-wal" "$dir/bench.db-shm"
    /usr/bin/time -f '%e %U %S %M' -o "$dir/time" "$memplay" --db "$dir/bench.db" import --name bench "$file" >/dev/null
    read -r wall user sys rss <"$dir/time"
    awk -v f="$(basename "$file")" -v n="$events" -v mb="$mb" -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" 'BEGIN {
      c = u + s; if (w <= 0) w = 0.01; if (c <= 0) c = 0.01
      printf "%-22s %12d %9d %8.2f %8.2f %12.0f %12.0f %8.0f %6.0f MiB\n", f, n, mb, w, c, n / w, n / c, mb / w, r / 1024 }'
  done
done
