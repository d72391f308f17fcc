#!/usr/bin/env bash
# Measures `memplay import` of Nsight Systems SQLite exports: synthetic exports of growing size
# (tools/nsys_synth.sh), each imported into a fresh store; prints a table of rows, events, time,
# rates and peak memory (docs/performance.md, "Nsight Systems import").
#
#   tools/bench_nsys.sh [--memplay PATH] [--dir DIR] [ITERATIONS | shuffled:ITERATIONS ...]
#
# Default: 250000 1000000 2000000 shuffled:1000000. "shuffled:" writes the calls and kernels in
# random order (nsys_synth.sh --shuffled), which makes the importer take its careful pass.
# The exports are kept in DIR (default: a temporary folder, removed at the end) and reused when
# present. Peak memory needs GNU time (/usr/bin/time, Debian package "time").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
memplay="$here/../build/memplay"
dir=""
sizes=()
while [ $# -gt 0 ]; do
  case $1 in
    --memplay) memplay=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) sizes+=("$1"); shift ;;
  esac
done
[ ${#sizes[@]} -gt 0 ] || sizes=(250000 1000000 2000000 shuffled:1000000)
[ -x "$memplay" ] || { echo "bench_nsys: no memplay at '$memplay' (build it, or pass --memplay)" >&2; exit 2; }
keep=1
if [ -z "$dir" ]; then dir=$(mktemp -d); keep=0; fi
mkdir -p "$dir"
cleanup() { rm -f "$dir"/bench-store.db*; [ $keep = 1 ] || rm -rf "$dir"; }
trap cleanup EXIT
gnutime=""
[ -x /usr/bin/time ] && /usr/bin/time -f %M true 2>/dev/null && gnutime=/usr/bin/time

echo "memplay import of synthetic Nsight Systems exports ($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo
printf '%20s %12s %12s %10s %14s %14s %10s %12s\n' iterations "export rows" events seconds "events/s" "rows/s" "CPU s" "max RSS"
for size in "${sizes[@]}"; do
  n=${size#shuffled:}
  opt=""
  [ "$n" = "$size" ] || opt=--shuffled
  f="$dir/synth-$n$opt.sqlite"
  [ -f "$f" ] || "$here/nsys_synth.sh" $opt "$n" "$f" 2>/dev/null
  rows=$(sqlite3 -readonly "$f" "SELECT (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME) +
    (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL) + (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY) +
    (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET) + (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) +
    (SELECT count(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS)")
  rm -f "$dir"/bench-store.db*
  cat "$f" >/dev/null # the export in the page cache, as after `nsys export`
  start=$(date +%s.%N)
  if [ -n "$gnutime" ]; then
    $gnutime -o "$dir/time.txt" -f "%M %U %S" "$memplay" --db "$dir/bench-store.db" import --json "$f" >"$dir/out.json"
    read -r kib user sys <"$dir/time.txt"
    rss="$((kib / 1024)) MiB"
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
  else
    "$memplay" --db "$dir/bench-store.db" import --json "$f" >"$dir/out.json"
    rss="n/a"
    cpu="n/a"
  fi
  end=$(date +%s.%N)
  events=$(sqlite3 :memory: "SELECT json_extract(readfile('$dir/out.json'), '\$.traces[0].events')")
  awk -v n="$size" -v r="$rows" -v e="$events" -v s="$start" -v t="$end" -v m="$rss" -v c="$cpu" 'BEGIN {
    d = t - s; printf "%20s %12d %12d %10.2f %14.0f %14.0f %10s %12s\n", n, r, e, d, e / d, r / d, c, m }'
done
echo
echo "CPU s: user + system time of both threads (the importer's and the store's writer)"
[ -n "$gnutime" ] || echo "(CPU time and max RSS need GNU time: apt-get install time)"
