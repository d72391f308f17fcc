#!/usr/bin/env bash
# bench-start.sh: the fixed cost of a `memplay replay` process, what any replay pays whatever its length.
#
#   tools/bench-start.sh [--memplay PATH] [--against PATH] [--runs R] [--rounds K] [--keep DIR]
#
# Generates a trace of 1,000 events (`tiny`: so little work that the cost of starting, opening
# the store and printing is what shows) and one of 1,000,000 (`bench`) into a fresh store, then
# measures `memplay --version` (the program's start alone) and `memplay replay TRACE --allocator
# ideal --no-save`: CPU milliseconds (perf's task-clock, the mean of R runs, default 20; the best
# of K rounds, default 5), page faults, system calls (strace), and instructions (valgrind's
# callgrind, when installed). With --against OLD, the same for another memplay build, the two
# alternated round by round (a shared machine's speed drifts between runs: compare figures taken
# side by side, and trust the counts where times disagree). Needs perf (Debian package
# linux-perf); strace and valgrind are optional.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
memplay="$here/../build/memplay"
against=""
runs=20
rounds=5
keep=""
while [ $# -gt 0 ]; do
  case "$1" in
  --memplay) memplay=$2; shift 2 ;;
  --against) against=$2; shift 2 ;;
  --runs) runs=$2; shift 2 ;;
  --rounds) rounds=$2; shift 2 ;;
  --keep) keep=$2; shift 2 ;;
  -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench-start.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
for m in "$memplay" ${against:+"$against"}; do
  [ -x "$m" ] || { echo "bench-start.sh: no memplay at '$m' (build it, or give --memplay)" >&2; exit 1; }
done
command -v perf >/dev/null || { echo "bench-start.sh: needs perf (Debian package linux-perf)" >&2; exit 1; }
if [ -n "$keep" ]; then
  dir=$keep
  mkdir -p "$dir"
else
  dir=$(mktemp -d "${TMPDIR:-/tmp}/memplay-bench-start.XXXXXX")
  trap 'rm -rf "$dir"' EXIT
fi
db=$dir/store.db
if ! "$memplay" --db "$db" info tiny >/dev/null 2>&1; then
  "$memplay" --db "$db" gen --events 1000 --seed 1 --name tiny >/dev/null
  "$memplay" --db "$db" gen --events 1000000 --seed 1 --name bench >/dev/null
fi

# perf_stat R COMMAND...: "task_clock_ms page_faults", the means of R runs.
perf_stat() {
  local r=$1
  shift
  perf stat -x, -r "$r" -e task-clock,page-faults -o "$dir/perf" "$@" >/dev/null 2>"$dir/err" ||
    { cat "$dir/err" >&2; exit 1; }
  awk -F, '/task-clock/ { ms = $1 } /page-faults/ { pf = $1 } END { printf "%.2f %d\n", ms, pf }' "$dir/perf"
}

# The commands measured, by name.
cmd_args() {
  case "$1" in
  version) echo "--version" ;;
  tiny) echo "--db $db replay tiny --allocator ideal --no-save" ;;
  bench) echo "--db $db replay bench --allocator ideal --no-save" ;;
  esac
}

bins=("$memplay")
[ -n "$against" ] && bins=("$against" "$memplay")
declare -A best faults
for _ in $(seq "$rounds"); do
  for b in "${bins[@]}"; do
    for what in version tiny bench; do
      r=$runs
      [ "$what" = bench ] && r=$(( runs < 5 ? runs : 5 ))
      # shellcheck disable=SC2046
      read -r ms pf < <(perf_stat "$r" "$b" $(cmd_args "$what"))
      key="$b|$what"
      if [ -z "${best[$key]:-}" ] || awk -v a="$ms" -v b="${best[$key]}" 'BEGIN { exit !(a < b) }'; then best[$key]=$ms; fi
      faults[$key]=$pf
    done
  done
done

# counts COMMAND...: "syscalls instructions" of one run ("-" where the tool is missing).
counts() {
  local sc="-" ins="-"
  if command -v strace >/dev/null; then
    strace -f -c -o "$dir/strace" "$@" >/dev/null 2>&1 || true
    sc=$(awk '$NF == "total" { print $4 }' "$dir/strace")
  fi
  if command -v valgrind >/dev/null; then
    ins=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
      awk '/Collected/ { print $NF }')
  fi
  echo "$sc $ins"
}

printf '%-32s %-10s %12s %12s %10s %14s\n' "memplay" "command" "CPU ms" "page faults" "syscalls" "instructions"
for b in "${bins[@]}"; do
  for what in version tiny bench; do
    sc="-" ins="-"
    # shellcheck disable=SC2046
    [ "$what" != bench ] && read -r sc ins < <(counts "$b" $(cmd_args "$what"))
    key="$b|$what"
    printf '%-32s %-10s %12s %12s %10s %14s\n' "$(basename "$(dirname "$b")")/$(basename "$b")" "$what" \
      "${best[$key]}" "${faults[$key]}" "$sc" "$ins"
  done
done
echo "(CPU: the best of $rounds rounds, each the mean of $runs runs (5 for bench); version is 'memplay --version';"
echo " tiny and bench are 'replay TRACE --allocator ideal --no-save' of 1,000 and 1,000,000 generated events)"
