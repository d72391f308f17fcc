#!/usr/bin/env bash
# The real Nsight Systems exports in $MEMPLAY_TRACES/nsys import, and what memplay makes of them
# matches what sqlite3 queries on the export itself say: counts by kind, the device, and the peak
# of device memory in use (a running sum of the memory usage events, the recorded peak).
# Skipped (77) when the traces folder is absent.
. "$TESTS_DIR/cli/lib.sh"
need_traces
dir="$MEMPLAY_TRACES/nsys"
ls "$dir"/*.sqlite >/dev/null 2>&1 || { echo "skipped: no Nsight Systems exports in '$dir'"; exit 77; }
command -v sqlite3 >/dev/null || { echo "skipped: sqlite3 is not installed"; exit 77; }
set -e -o pipefail
tmp=$T db=$DB
check() { # what, expected, got
  if [ "$2" != "$3" ]; then fail "$1: expected $2, got $3"; else echo "ok: $1 = $3"; fi
}
# A query on the export, read-only.
q() { sqlite3 -readonly "file:$1?immutable=1" "$2"; }
# A value out of a JSON file (sqlite3's JSON functions: no other tool needed).
jget() { sqlite3 :memory: "SELECT coalesce(json_extract(readfile('$1'), '$2'), 0)"; }
has_table() { [ "$(q "$1" "SELECT count(*) FROM sqlite_master WHERE name = '$2'")" = 1 ]; }

for f in "$dir"/*.sqlite; do
  name=$(basename "$f" .sqlite)
  echo "== $name"
  if ! "$MEMPLAY" --db "$db" import "$f" >"$tmp/out" 2>"$tmp/err"; then
    fail "$name: import failed: $(cat "$tmp/err")"
    continue
  fi
  "$MEMPLAY" --db "$db" info --json "$name" >"$tmp/info.json"
  # device activity: one event per row
  for t in KERNEL:kernel MEMCPY:memcpy MEMSET:memset; do
    table=CUPTI_ACTIVITY_KIND_${t%%:*} kind=${t##*:}
    want=0
    has_table "$f" "$table" && want=$(q "$f" "SELECT count(*) FROM $table")
    check "$name: $kind events" "$want" "$(jget "$tmp/info.json" "\$.events_by_kind.$kind")"
  done
  # the device the kernels ran on, from TARGET_INFO_GPU
  dev=$(q "$f" "SELECT min(deviceId) FROM CUPTI_ACTIVITY_KIND_KERNEL")
  check "$name: device name" "$(q "$f" "SELECT name FROM TARGET_INFO_GPU WHERE id = $dev")" \
    "$(jget "$tmp/info.json" '$.device_name')"
  check "$name: device memory" "$(q "$f" "SELECT totalMemory FROM TARGET_INFO_GPU WHERE id = $dev")" \
    "$(jget "$tmp/info.json" '$.device_memory_bytes')"
  # synchronizations: the calls that block the host, by name (version suffix removed)
  sync_names="'cudaDeviceSynchronize','cudaThreadSynchronize','cuCtxSynchronize','cudaStreamSynchronize','cuStreamSynchronize','cudaEventSynchronize','cuEventSynchronize'"
  base="CASE WHEN s.value GLOB 'cuda*_v[0-9]*' THEN rtrim(rtrim(s.value, '0123456789'), '_v') ELSE s.value END"
  calls="CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId WHERE r.eventClass IN (0, 1)"
  check "$name: sync events" "$(q "$f" "SELECT count(*) FROM $calls AND $base IN ($sync_names)")" \
    "$(jget "$tmp/info.json" '$.events_by_kind.sync')"
  # every other call with no activity or memory event of its own is an api event
  owned="SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL UNION SELECT correlationId FROM CUPTI_ACTIVITY_KIND_MEMCPY"
  has_table "$f" CUPTI_ACTIVITY_KIND_MEMSET && owned="$owned UNION SELECT correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET"
  has_table "$f" CUDA_GPU_MEMORY_USAGE_EVENTS && owned="$owned UNION SELECT correlationId FROM CUDA_GPU_MEMORY_USAGE_EVENTS"
  check "$name: api events" \
    "$(q "$f" "SELECT count(*) FROM $calls AND $base NOT IN ($sync_names) AND r.correlationId NOT IN ($owned)")" \
    "$(jget "$tmp/info.json" '$.events_by_kind.api')"

  if has_table "$f" CUDA_GPU_MEMORY_USAGE_EVENTS; then
    # allocations and frees by kind (ENUM_CUDA_MEM_KIND names; the statics are not allocations)
    mem="CUDA_GPU_MEMORY_USAGE_EVENTS e JOIN ENUM_CUDA_MEM_KIND k ON k.id = e.memKind
         JOIN ENUM_CUDA_DEV_MEM_EVENT_OPER o ON o.id = e.memoryOperationType"
    dev_kinds="'CUDA_MEMOPR_MEMORY_KIND_DEVICE','CUDA_MEMOPR_MEMORY_KIND_ARRAY','CUDA_MEMOPR_MEMORY_KIND_MANAGED','CUDA_MEMOPR_MEMORY_KIND_UNKNOWN'"
    host_kinds="'CUDA_MEMOPR_MEMORY_KIND_PINNED','CUDA_MEMOPR_MEMORY_KIND_PAGEABLE'"
    for k in "alloc:$dev_kinds:ALLOCATION" "free:$dev_kinds:DEALLOCATION" "host_alloc:$host_kinds:ALLOCATION" \
             "host_free:$host_kinds:DEALLOCATION"; do
      IFS=: read -r kind kinds op <<<"$k"
      check "$name: $kind events" \
        "$(q "$f" "SELECT count(*) FROM $mem WHERE k.name IN ($kinds) AND o.name = 'CUDA_DEV_MEM_EVENT_OPR_$op'")" \
        "$(jget "$tmp/info.json" "\$.events_by_kind.$kind")"
    done
    statics=$(q "$f" "SELECT count(*) FROM $mem WHERE k.name LIKE '%STATIC' AND o.name LIKE '%_ALLOCATION'")
    check "$name: device statics" "$statics" "$(jget "$tmp/info.json" '$.attrs.device_static_count')"
    # the recorded peak: the doc's query, ordered by start, with a running sum
    peak() {
      q "$f" "SELECT coalesce(max(live), 0) FROM (SELECT sum(CASE WHEN o.name LIKE '%DEALLOCATION' THEN -e.bytes
              ELSE e.bytes END) OVER (ORDER BY e.start, e.rowid) AS live FROM $mem WHERE k.name IN ($1))"
    }
    dpeak=$(peak "$dev_kinds")
    ppeak=$(peak "'CUDA_MEMOPR_MEMORY_KIND_PINNED'")
    check "$name: peak live (info)" "$dpeak" "$(jget "$tmp/info.json" '$.peak_live_bytes')"
    for a in cuda ideal; do
      "$MEMPLAY" --db "$db" replay --json --no-save -a $a "$name" >"$tmp/replay.json"
      check "$name: peak allocated under $a" "$dpeak" "$(jget "$tmp/replay.json" '$.peak_allocated_bytes')"
      check "$name: pinned host peak under $a" "$ppeak" "$(jget "$tmp/replay.json" '$.host_pinned_peak_bytes')"
      check "$name: frees of unknown addresses under $a" 0 "$(jget "$tmp/replay.json" '$.skipped.unknown_frees')"
    done
    check "$name: recorded by" cuda "$(jget "$tmp/info.json" '$.allocator')"
  else
    # recorded without --cuda-memory-usage=true: imported, with a plain warning and a note
    check "$name: allocations" 0 "$(jget "$tmp/info.json" '$.events_by_kind.alloc')"
    grep -q -- "--cuda-memory-usage=true" "$tmp/err" && grep -q "no allocations or frees" "$tmp/err" &&
      echo "ok: $name: warns that it has no memory events" || fail "$name: no warning about memory events: $(cat "$tmp/err")"
    check "$name: note" 1 "$(jget "$tmp/info.json" '$.notes."nsys_no_memory_events (data_loss)"')"
  fi
  # device activities sit at their launch: host time = the launch call's start, device time = their own
  id=$(jget "$tmp/info.json" '$.id')
  ev="SELECT ts, dev_ts, dur, id FROM events WHERE id BETWEEN $id << 32 AND ($id << 32) + 4294967295 AND kind = 7"
  launch="SELECT sum(r.start), sum(k.start), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k
          JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId AND r.eventClass IN (0, 1)"
  check "$name: kernel launch, start and duration sums" "$(q "$f" "$launch")" \
    "$(sqlite3 "$db" "SELECT sum(ts), sum(dev_ts), sum(dur) FROM ($ev)")"
  check "$name: events out of time order" 0 "$(sqlite3 "$db" "SELECT count(*) FROM (SELECT ts < lag(ts) OVER (ORDER BY id)
    AS back FROM events WHERE id BETWEEN $id << 32 AND ($id << 32) + 4294967295) WHERE back")"
  # the careful pass (prescan, sorting) makes the same trace as the optimistic one
  "$MEMPLAY" --db "$db" import --name "$name-careful" --set prescan=1 "$f" >/dev/null 2>&1
  "$MEMPLAY" --db "$db" export "$name" -o "$tmp/a.jsonl" >/dev/null
  "$MEMPLAY" --db "$db" export "$name-careful" -o "$tmp/b.jsonl" >/dev/null
  if diff <(tail -n +2 "$tmp/a.jsonl" | grep -v "\"kind\":\"stat\"") <(tail -n +2 "$tmp/b.jsonl" | grep -v "\"kind\":\"stat\"") >/dev/null; then
    echo "ok: $name: both passes give the same events"
  else
    fail "$name: the careful pass differs from the optimistic one"
  fi
done
finish
