#!/usr/bin/env bash
# Runs memplay's fuzz harnesses one after another at low priority and prints what each reached.
#
#   tools/fuzz-campaign.sh [--runs N] [--time SECONDS] [--build DIR] [--corpus DIR] [HARNESS...]
#
# HARNESS: pickle snapshot jsonl kineto timeline nsys bfc_log spec restore timemodel lua chunk plan text_v6 results
# engine resume (default: all).
# Each runs until N executions (default 10,000,000) or SECONDS seconds (default 420), whichever comes first, under
# nice -n 19 on one core, with the ASan/UBSan build of tests/fuzz (configured into DIR, default
# build-fuzz, with clang, if it is not there yet). What each harness finds interesting is kept in
# CORPUS/HARNESS (default DIR/corpus), so a second campaign goes on from the first; the seeds in
# the source tree are only read. A finding is written to CORPUS/findings/HARNESS/ (crash-*,
# leak-*, timeout-*, oom-*): run the harness on that file alone to reproduce it. Prints one
# table row per harness (for docs/fuzzing.md), counting only what this campaign found (files an
# earlier one left there are not counted again), and exits 1 when anything was found.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
runs=10000000 secs=420 build="$src/build-fuzz" corpus=""
while [ $# -gt 0 ]; do
  case $1 in
  --runs) runs=$2; shift 2 ;;
  --time) secs=$2; shift 2 ;;
  --build) build=$2; shift 2 ;;
  --corpus) corpus=$2; shift 2 ;;
  -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "fuzz-campaign: unknown option '$1'" >&2; exit 2 ;;
  *) break ;;
  esac
done
case $runs$secs in *[!0-9]*) echo "fuzz-campaign: --runs and --time want whole numbers" >&2; exit 2 ;; esac
corpus=${corpus:-$build/corpus}
# A new importer's harness (tests/fuzz/CMakeLists.txt, MEMPLAY_FUZZ_IMPORTS) joins this list and
# seeds_of.
all="pickle snapshot jsonl kineto timeline nsys bfc_log spec restore timemodel lua chunk plan text_v6 results engine resume"
harnesses=${*:-$all}
seeds_of() {
  case $1 in
  pickle) echo "$src/tests/fuzz/corpus" ;;
  snapshot) echo "$src/tests/fuzz/corpus $src/tests/data/snapshots" ;;
  timeline) echo "$src/tests/fuzz/seeds/memory_timeline" ;;
  jsonl | kineto | nsys | bfc_log | spec | restore | timemodel | lua | chunk | plan | text_v6 | results | engine | resume) echo "$src/tests/fuzz/seeds/$1" ;;
  *) echo "fuzz-campaign: unknown harness '$1' (known: $all)" >&2; exit 2 ;;
  esac
}
maxlen_of() { case $1 in nsys) echo 65536 ;; engine) echo 2050 ;; resume) echo 4096 ;; snapshot | pickle | chunk) echo 262144 ;; timemodel) echo 4096 ;; *) echo 16384 ;; esac; }
for h in $harnesses; do seeds_of "$h" >/dev/null; done
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$src" -B "$build" -DCMAKE_C_COMPILER=clang -DMEMPLAY_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
targets=""
for h in $harnesses; do targets="$targets fuzz_$h"; done
# shellcheck disable=SC2086
nice -n 19 cmake --build "$build" -j1 --target $targets >/dev/null
found=0
printf '| harness | time | executions | per second | corpus at the end | coverage | findings |\n'
printf '|---|---:|---:|---:|---|---|---|\n'
for h in $harnesses; do
  mkdir -p "$corpus/$h" "$corpus/findings/$h"
  log="$corpus/$h.log"
  stamp="$corpus/$h.started" # what is newer than this was found by this run
  touch "$stamp"
  start=$(date +%s)
  # shellcheck disable=SC2046
  nice -n 19 "$build/tests/fuzz/fuzz_$h" -runs="$runs" -max_total_time="$secs" -max_len="$(maxlen_of "$h")" \
    -timeout=20 -rss_limit_mb=2560 -print_final_stats=1 -artifact_prefix="$corpus/findings/$h/" \
    "$corpus/$h" $(seeds_of "$h") >"$log" 2>&1 || true
  took=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 | sed 's/cov: \([0-9]*\) ft: \([0-9]*\)/\1 edges, \2 features/')
  files=$(find "$corpus/$h" -type f | wc -l)
  size=$(du -sh "$corpus/$h" | cut -f1)
  nfound=$(find "$corpus/findings/$h" -type f -newer "$stamp" | wc -l)
  [ "$nfound" -eq 0 ] || found=1
  printf '| fuzz_%s | %d min %02d s | %s | %s | %s inputs, %s | %s | %s |\n' "$h" $((took / 60)) $((took % 60)) \
    "${execs:-?}" "${rate:-?}" "$files" "$size" "${cov:-?}" \
    "$([ "$nfound" -eq 0 ] && echo none || echo "$nfound in $corpus/findings/$h")"
done
exit $found
