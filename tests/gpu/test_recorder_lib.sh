#!/usr/bin/env bash
# The recorder library, without a GPU: it exports the injection entry point and nothing else of
# memplay's own, carries no sanitizer runtime, and every library and symbol it needs resolves.
set -euo pipefail
lib="$RECORDER"
[ -f "$lib" ] || { echo "FAIL: no recorder at $lib"; exit 1; }
command -v nm >/dev/null || { echo "skip: no nm"; exit 77; }
exports=$(nm -D --defined-only "$lib" | awk '$2 == "T" || $2 == "D" || $2 == "B" {print $3}')
echo "$exports" | grep -qx InitializeInjection || { echo "FAIL: InitializeInjection is not exported"; exit 1; }
if echo "$exports" | grep -E '^(rec_|sim_)' >/dev/null; then
  echo "FAIL: memplay's own symbols are exported:"; echo "$exports" | grep -E '^(rec_|sim_)'; exit 1
fi
if command -v ldd >/dev/null; then
  deps=$(ldd "$lib")
  if echo "$deps" | grep -q "not found"; then echo "FAIL: unresolved libraries:"; echo "$deps"; exit 1; fi
  if echo "$deps" | grep -Eq "libasan|libubsan"; then echo "FAIL: the recorder needs a sanitizer runtime"; exit 1; fi
  echo "$deps" | grep -q libcupti || { echo "FAIL: the recorder does not load CUPTI"; exit 1; }
  # Every symbol it uses resolves (the driver loads it and says nothing when it cannot).
  unresolved=$(ldd -r "$lib" 2>&1 | grep "undefined symbol" || true)
  [ -z "$unresolved" ] || { echo "FAIL: the recorder leaves symbols unresolved:"; echo "$unresolved"; exit 1; }
fi
echo "ok: $(basename "$lib") exports InitializeInjection; its libraries and symbols resolve"
