#!/usr/bin/env bash
# Installs what is missing, builds memplay, and runs its main job on the bundled sample trace:
# import it into a store, then replay it under every allocator model on a 24 GB card.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs" >/dev/null
memplay=build/memplay
db=build/quickstart.db
rm -f "$db" "$db-wal" "$db-shm"

echo "== import the sample trace"
$memplay --db "$db" import traces/sample.jsonl --name sample
echo
echo "== what it holds"
$memplay --db "$db" info sample
echo
echo "== replay under the allocator that recorded it"
$memplay --db "$db" replay sample
echo
echo "== every allocator model, on a card with 24 GB"
field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p"; }
printf '%-10s %16s %16s %6s %14s\n' allocator "peak allocated" "peak reserved" OOMs fragmentation
for a in $($memplay help allocators | sed -n 's/^  \([a-z]*\) .*/\1/p'); do
  out=$($memplay --db "$db" replay sample --allocator "$a" --capacity 24GB --no-save --json)
  awk -v a="$a" -v al="$(field peak_allocated_bytes <<<"$out")" -v re="$(field peak_reserved_bytes <<<"$out")" \
      -v oo="$(field ooms <<<"$out")" -v fr="$(field fragmentation <<<"$out")" \
      'BEGIN { printf "%-10s %12.2f GiB %12.2f GiB %6d %13.1f%%\n", a, al/2^30, re/2^30, oo, 100*fr }'
done
echo
echo "The store is $db. Next: $memplay --db $db help"
