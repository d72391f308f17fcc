#!/usr/bin/env bash
# Nsight Systems exports built here with sqlite3, one per difference between nsys versions
# (docs/formats.md, "Nsight Systems SQLite exports"), per rule of the importer, and per kind of
# bad input. Each case states what the export holds and checks what memplay made of it.
. "$TESTS_DIR/cli/lib.sh"
command -v sqlite3 >/dev/null || { echo "skipped: sqlite3 is not installed"; exit 77; }
set -e -o pipefail
tmp=$T db=$DB
check() { if [ "$2" != "$3" ]; then fail "$1: expected '$2', got '$3'"; else echo "ok: $1"; fi; }
jget() { sqlite3 :memory: "SELECT coalesce(json_extract(readfile('$1'), '$2'), 0)"; }
# Events of a trace as JSON Lines (without the header line).
# (The categories the import driver's category pass gives are left out: they are not this importer's.)
events() { "$MEMPLAY" --db "$db" export "$1" -o "$tmp/ev.jsonl" >/dev/null && tail -n +2 "$tmp/ev.jsonl" |
  grep -v '"kind":"stat"' | sed 's/"category":"[a-z_]*",//; s/"cat_source":"[a-z_]*",//'; }
note() { "$MEMPLAY" --db "$db" export "$1" -o "$tmp/ev.jsonl" >/dev/null && grep "\"name\":\"$2\"" "$tmp/ev.jsonl" |
  sed 's/.*"detail":"\([^"]*\)".*/\1/'; }
import_ok() { # name file [args]: imports, keeps stderr in $tmp/err
  local n=$1 f=$2
  shift 2
  if "$MEMPLAY" --db "$db" import --name "$n" "$@" "$f" >"$tmp/out" 2>"$tmp/err"; then
    "$MEMPLAY" --db "$db" info --json "$n" >"$tmp/$n.json"
    return 0
  fi
  fail "$n: import failed: $(cat "$tmp/err")"
  return 1
}
expect_fail() { # what file pattern [args]: the import must fail with exit 1, a message matching, the store untouched
  local what=$1 f=$2 pat=$3
  shift 3
  local before rc=0
  before=$(store_digest)
  "$MEMPLAY" --db "$db" import "$@" "$f" >"$tmp/out" 2>"$tmp/err" || rc=$?
  check "$what: exit status" 1 "$rc"
  if grep -q -- "$pat" "$tmp/err"; then echo "ok: $what: says '$pat'"; else fail "$what: message: $(cat "$tmp/err")"; fi
  check "$what: store unchanged" "$before" "$(store_digest)"
}
kinds() { # trace: "alloc free host_alloc host_free memcpy memset kernel sync api" counts
  local j="$tmp/$1.json" out="" k
  for k in alloc free host_alloc host_free memcpy memset kernel sync api; do out="$out $(jget "$j" "\$.events_by_kind.$k")"; done
  echo "${out# }"
}

# ---- the schema of recent versions (nsys 2024.5, export schema 3.13), with the enums of §4.2 ----
P1=1677721600 T1=1677721700 # process 100: globalPid = 100 << 24; its thread
P2=3355443200 T2=3355443400 # process 200
schema_recent() { # file [memory-table: yes|no] [memory streamId: yes|no]
  local mem=${2:-yes} mstream=${3:-yes} streamcol=""
  [ "$mstream" = yes ] && streamcol="streamId INTEGER,"
  sqlite3 "$1" <<SQL
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_VERSION', '2024.5.1.113'), ('EXPORT_SCHEMA_VERSION', '3.13.2');
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0,'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE','Pageable'),
  (1,'CUDA_MEMOPR_MEMORY_KIND_PINNED','Pinned'), (2,'CUDA_MEMOPR_MEMORY_KIND_DEVICE','Device'),
  (3,'CUDA_MEMOPR_MEMORY_KIND_ARRAY','Array'), (4,'CUDA_MEMOPR_MEMORY_KIND_MANAGED','Managed'),
  (5,'CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC','Device Static'),
  (6,'CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC','Managed Static'), (7,'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN','Unknown');
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (0,'CUDA_MEMCPY_KIND_UNKNOWN','Unknown'), (1,'CUDA_MEMCPY_KIND_HTOD','Host-to-Device'),
  (2,'CUDA_MEMCPY_KIND_DTOH','Device-to-Host'), (8,'CUDA_MEMCPY_KIND_DTOD','Device-to-Device'),
  (10,'CUDA_MEMCPY_KIND_PTOP','Peer-to-Peer');
CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES (0,'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION','Allocation'),
  (1,'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION','Deallocation');
CREATE TABLE ENUM_NSYS_EVENT_CLASS (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (0,'TRACE_PROCESS_EVENT_CUDA_RUNTIME','CUDA runtime'),
  (1,'TRACE_PROCESS_EVENT_CUDA_DRIVER','CUDA driver'), (67,'TRACE_PROCESS_EVENT_CUDABACKTRACE','CUDA backtrace');
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, totalMemory INTEGER, cuDevice INTEGER);
INSERT INTO TARGET_INFO_GPU VALUES (1, 0, 'NVIDIA H100 80GB HBM3', 85520809984, 0), (1, 1, 'NVIDIA H100 80GB HBM3', 85520809984, 1);
CREATE TABLE TARGET_INFO_CUDA_CONTEXT_INFO (nullStreamId INTEGER NOT NULL, hwId INTEGER NOT NULL, vmId INTEGER NOT NULL,
  processId INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, parentContextId INTEGER, isGreenContext INTEGER);
INSERT INTO TARGET_INFO_CUDA_CONTEXT_INFO VALUES (7, 0, 1, 100, 0, 1, NULL, 0);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
INSERT INTO PROCESSES VALUES ($P1, 100, 'train.py'), ($P2, 200, 'eval.py');
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, gridId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER,
  srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER,
  graphNodeId INTEGER, virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  syncType INTEGER NOT NULL, eventId INTEGER NOT NULL);
INSERT INTO StringIds VALUES (1,'cudaMalloc_v3020'), (2,'cudaFree_v3020'), (3,'cudaLaunchKernel_v7000'),
  (4,'cudaMemcpyAsync_v3020'), (5,'cudaMemcpy_v3020'), (6,'cudaDeviceSynchronize_v3020'), (7,'cudaStreamSynchronize_v3020'),
  (8,'cudaEventSynchronize_v3020'), (9,'cudaHostAlloc_v3020'), (10,'cudaFreeHost_v3020'), (11,'cudaGraphLaunch_v10000'),
  (12,'cudaMemsetAsync_v3020'), (13,'cudaEventRecord_v3020'), (14,'cuLaunchKernel'), (15,'cudaMallocManaged_v6000'),
  (16,'cudaMalloc'), (17,'cudaLaunchKernel'),
  (100,'void gemm<float>(float const*, float*)'), (101,'gemm'), (102,'void relu(float*)'), (103,'relu');
SQL
  [ "$mem" = yes ] && sqlite3 "$1" <<SQL
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL, bytes INTEGER NOT NULL, memKind INTEGER NOT NULL,
  memoryOperationType INTEGER NOT NULL, name TEXT, correlationId INTEGER, $streamcol localMemoryPoolAddress INTEGER,
  localMemoryPoolReleaseThreshold INTEGER, localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER,
  importedMemoryPoolAddress INTEGER, importedMemoryPoolProcessId INTEGER);
SQL
  return 0
}
# Helpers to add rows: call START END CORR NAMEID [CLASS] [TID]; mem START ADDR BYTES KIND OP CORR [DEV] [PID]
call() { echo "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES ($1, $2, ${5:-0}, ${6:-$T1}, $3, $4, 0, NULL);"; }
mem() { echo "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, globalPid, deviceId, contextId, address, pc, bytes, memKind,
  memoryOperationType, name, correlationId) VALUES ($1, ${8:-$P1}, ${7:-0}, 1, $2, 0, $3, $4, $5, NULL, $6);"; }
kernel() { echo "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, greenContextId, streamId,
  correlationId, globalPid, demangledName, shortName, mangledName, gridId) VALUES ($1, $2, ${5:-0}, 1, NULL, ${4:-7}, $3, ${6:-$P1}, 100, 101, NULL, 0);"; }

# ==== the 2022.2 layout: EXPORT_META_DATA, no ENUM tables, short memory events, calls doubled as eventClass 67
f="$tmp/v2022.sqlite"
sqlite3 "$f" <<SQL
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE EXPORT_META_DATA (name TEXT NOT NULL, value TEXT);
INSERT INTO EXPORT_META_DATA VALUES ('EXPORT_PRODUCT_VERSION', '2022.2.1.31'), ('EXPORT_SCHEMA_VERSION', '2.9.1');
CREATE TABLE TARGET_INFO_GPU (id INTEGER NOT NULL, name TEXT, totalMemory INTEGER);
INSERT INTO TARGET_INFO_GPU VALUES (0, 'Tesla V100-SXM2-16GB', 16945512448);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL,
  copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER);
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL, bytes INTEGER NOT NULL,
  memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, name TEXT, correlationId INTEGER);
INSERT INTO StringIds VALUES (1,'cudaMalloc_v3020'), (2,'cudaFree_v3020'), (3,'cudaLaunchKernel_v7000'),
  (4,'cudaMemcpyAsync_v3020'), (5,'cudaHostAlloc_v3020'), (6,'cudaDeviceSynchronize_v3020'), (7,'cudaFreeHost_v3020'),
  (11,'cudaMalloc'), (13,'cudaLaunchKernel'), (14,'cudaMemcpyAsync'), (100,'void k1(int)'), (101,'k1');
$(call 1000 1100 1 1) $(call 1000 1100 1 11 67)
$(call 1200 1300 2 1) $(call 1200 1300 2 11 67)
$(call 1400 1500 3 3) $(call 1400 1500 3 13 67)
$(call 1600 1650 4 4) $(call 1600 1650 4 14 67)
$(call 1700 1800 5 5) $(call 3000 3100 6 2) $(call 3200 3900 7 6) $(call 4000 4100 8 2) $(call 4200 4300 9 7)
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (2000, 2600, 0, 1, 7, 3, $P1, 100, 101);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (2700, 2800, 0, 1, 7, 4, $P1, 4096, 1, 1, 2);
INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (1050, $P1, 0, 1, 4096, 0, 4096, 2, 0, NULL, 1),
  (1250, $P1, 0, 1, 12288, 0, 8192, 2, 0, NULL, 2), (1750, $P1, 0, 1, 65536, 0, 1000000, 1, 0, NULL, 5),
  (3050, $P1, 0, 1, 4096, 0, 4096, 2, 1, NULL, 6), (4050, $P1, 0, 1, 12288, 0, 8192, 2, 1, NULL, 8),
  (4250, $P1, 0, 1, 65536, 0, 1000000, 1, 1, NULL, 9);
SQL
echo "== nsys 2022.2 layout"
if import_ok v2022 "$f"; then
  check "v2022: events by kind (no ENUM tables: the hard-coded enums)" "2 2 1 1 1 0 1 1 0" "$(kinds v2022)"
  check "v2022: read once (rows in order)" "" "$(note v2022 nsys_careful_pass)"
  check "v2022: the eventClass 67 copies are left out" 4 "$(jget "$tmp/v2022.json" '$.notes."nsys_other_event_class_calls (info)"')"
  check "v2022: peak of device memory" 12288 "$(jget "$tmp/v2022.json" '$.peak_live_bytes')"
  check "v2022: pinned host memory" 1000000 "$(jget "$tmp/v2022.json" '$.host_pinned_peak_bytes')"
  check "v2022: version" "2022.2.1.31 2.9.1" "$(jget "$tmp/v2022.json" '$.attrs.nsys_version') $(jget "$tmp/v2022.json" '$.attrs.export_schema')"
  check "v2022: device" "Tesla V100-SXM2-16GB 16945512448" "$(jget "$tmp/v2022.json" '$.device_name') $(jget "$tmp/v2022.json" '$.device_memory_bytes')"
  events v2022 >"$tmp/v2022.jsonl"
  check "v2022: the kernel at its launch (ts 1400), its device start, duration and launch cost" \
    '{"kind":"kernel","ts":1400,"dur":600,"dev_ts":2000,"api_dur":100,"stream":7,"name":"void k1(int)"}' \
    "$(grep '"kernel"' "$tmp/v2022.jsonl")"
  check "v2022: an asynchronous copy from pinned memory" \
    '{"kind":"memcpy","ts":1600,"dur":100,"dev_ts":2700,"api_dur":50,"stream":7,"size":4096,"mem":"pinned","dir":"h2d","name":"Memcpy HtoD (Pinned -> Device)","flags":["async"]}' \
    "$(grep '"memcpy"' "$tmp/v2022.jsonl")"
  check "v2022: an allocation at the driver's time, with its call's name and cost" \
    '{"kind":"alloc","ts":1050,"api_dur":100,"addr":4096,"size":4096,"name":"cudaMalloc","flags":["device_api"]}' \
    "$(grep '"alloc"' "$tmp/v2022.jsonl" | head -1)"
  check "v2022: a free is matched to its allocation" \
    '{"kind":"free","ts":3050,"api_dur":100,"addr":4096,"size":4096,"mem":"device","name":"cudaFree","flags":["device_api"]}' \
    "$(grep '"free"' "$tmp/v2022.jsonl" | head -1)"
  check "v2022: a device-wide sync (no SYNCHRONIZATION table)" \
    '{"kind":"sync","ts":3200,"dur":700,"device":-1,"name":"cudaDeviceSynchronize"}' "$(grep '"sync"' "$tmp/v2022.jsonl")"
fi

# ==== the 2024.2 layout: memory events without streamId; statics; graphs; syncs; a memset; a capture that
#      began after an allocation (its free comes first); an allocation at an address still live
f="$tmp/v2024_2.sqlite"
schema_recent "$f" yes no
sqlite3 "$f" <<SQL
UPDATE META_DATA_EXPORT SET value = '3.11.1' WHERE name = 'EXPORT_SCHEMA_VERSION';
UPDATE META_DATA_EXPORT SET value = '2024.2.3.38' WHERE name = 'EXPORT_PRODUCT_VERSION';
$(mem 500 1048576 144 5 0 0)
$(call 1000 1100 1 1) $(mem 1050 4194304 2097152 2 0 1)
$(call 1200 1300 2 3) $(kernel 1400 1500 2)
$(call 1600 1700 3 11) $(kernel 1800 1900 3 13) $(kernel 1950 2000 3 13)
$(call 2100 2200 4 12)
INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (2300, 2350, 0, 1, NULL, 13, 4, $P1, 0, 2097152, NULL, 2);
$(call 2400 2500 5 7)
INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (2410, 2490, 0, 1, NULL, 13, 5, $P1, 3, 4294967295);
$(call 2600 2700 6 8)
INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (2610, 2690, 0, 1, NULL, 4294967295, 6, $P1, 1, 12);
$(call 2800 2900 7 13)
$(call 3000 3100 8 2) $(mem 3050 8388608 1048576 2 1 8)
$(call 3200 3300 9 1) $(mem 3250 4194304 65536 2 0 9)
$(call 3400 3500 10 15) $(mem 3450 16777216 4096 4 0 10)
$(call 3600 3700 11 2) $(call 3800 3900 12 2) $(mem 3850 4194304 65536 2 1 12)
SQL
echo "== nsys 2024.2 layout and the importer's rules"
if import_ok v2024_2 "$f"; then
  j="$tmp/v2024_2.json"
  # alloc: the preexisting one, 2 MiB, the one at a live address, managed; free: 1 MiB (preexisting), the
  # one taken as freed, the last; the graph's two kernels; cudaFree(0) of call 11 is an api call
  check "v2024_2: events by kind" "4 3 0 0 0 1 3 2 2" "$(kinds v2024_2)"
  check "v2024_2: statics are not allocations" "1 144" "$(jget "$j" '$.attrs.device_static_count') $(jget "$j" '$.attrs.device_static_bytes')"
  check "v2024_2: a free before any allocation is an allocation older than the capture" 1 \
    "$(jget "$j" '$.notes."nsys_preexisting_allocations (info)"')"
  check "v2024_2: a free first makes the importer read the export twice" \
    "read with a prescan, and sorted by SQLite where needed: a free of an address with nothing live (allocated before the capture?)" \
    "$(note v2024_2 nsys_careful_pass)"
  check "v2024_2: an allocation at a live address frees the earlier one" 1 \
    "$(jget "$j" '$.notes."nsys_allocations_at_live_address (warning)"')"
  # live: 1 MiB (preexisting) + 2 MiB, then 1 MiB freed; the 2 MiB taken as freed for 64 KiB; + 4 KiB managed
  check "v2024_2: peak of device memory" 3145728 "$(jget "$j" '$.peak_live_bytes')"
  events v2024_2 >"$tmp/v2024_2.jsonl"
  check "v2024_2: the preexisting allocation comes first, at the export's first row" \
    '{"kind":"alloc","ts":500,"addr":8388608,"size":1048576,"flags":["device_api","preexisting"]}' "$(head -1 "$tmp/v2024_2.jsonl")"
  check "v2024_2: no stream column: stream 0" 0 "$(grep -c '"alloc".*"stream"' "$tmp/v2024_2.jsonl" || true)"
  check "v2024_2: the context's NULL stream is the default stream, 0" \
    '{"kind":"kernel","ts":1200,"dur":100,"dev_ts":1400,"api_dur":100,"name":"void gemm<float>(float const*, float*)"}' \
    "$(grep '"kernel"' "$tmp/v2024_2.jsonl" | head -1)"
  check "v2024_2: a graph launch: its kernels at the launch, the cost on the first" \
    '{"kind":"kernel","ts":1600,"dur":100,"dev_ts":1800,"api_dur":100,"stream":13,"name":"void gemm<float>(float const*, float*)"}
{"kind":"kernel","ts":1600,"dur":50,"dev_ts":1950,"stream":13,"name":"void gemm<float>(float const*, float*)"}' \
    "$(grep '"kernel"' "$tmp/v2024_2.jsonl" | tail -2)"
  check "v2024_2: a memset" \
    '{"kind":"memset","ts":2100,"dur":50,"dev_ts":2300,"api_dur":100,"stream":13,"size":2097152,"mem":"device","name":"Memset (Device)","flags":["async"]}' \
    "$(grep '"memset"' "$tmp/v2024_2.jsonl")"
  check "v2024_2: a stream sync waits for its stream (SYNCHRONIZATION)" \
    '{"kind":"sync","ts":2400,"dur":100,"stream":13,"name":"cudaStreamSynchronize"}' \
    "$(grep '"sync"' "$tmp/v2024_2.jsonl" | head -1)"
  check "v2024_2: an event sync" \
    '{"kind":"sync","ts":2600,"dur":100,"name":"cudaEventSynchronize","flags":["sync_event"]}' \
    "$(grep '"sync"' "$tmp/v2024_2.jsonl" | tail -1)"
  check "v2024_2: managed memory" '"mem":"managed"' "$(grep -o '"mem":"managed"' "$tmp/v2024_2.jsonl")"
  for a in cuda ideal; do
    "$MEMPLAY" --db "$db" replay --json --no-save -a $a v2024_2 >"$tmp/r.json"
    check "v2024_2: replay under $a: peak, nothing skipped" "3145728 0 0" \
      "$(jget "$tmp/r.json" '$.peak_allocated_bytes') $(jget "$tmp/r.json" '$.skipped.unknown_frees') $(jget "$tmp/r.json" '$.skipped.duplicate_allocs')"
  done
fi

# ==== nsys 2024.5 without --cuda-memory-usage=true: no memory table (tables are created lazily), no memsets
f="$tmp/nomem.sqlite"
schema_recent "$f" no
sqlite3 "$f" "DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET; $(call 1000 1100 1 1) $(call 1200 1300 2 3) $(kernel 1400 1500 2)
  $(call 1600 1700 3 5) INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId,
  globalPid, bytes, copyKind, srcKind, dstKind) VALUES (1800, 1900, 0, 1, 7, 3, $P1, 100, 2, 2, 0); $(call 2000 2100 4 2)"
echo "== no memory usage events"
if import_ok nomem "$f"; then
  check "nomem: events by kind (cudaMalloc and cudaFree are api calls)" "0 0 0 0 1 0 1 0 2" "$(kinds nomem)"
  if grep -q "without GPU memory tracking" "$tmp/err" && grep -q -- "nsys profile --cuda-memory-usage=true" "$tmp/err"; then
    echo "ok: nomem: warns plainly and says how to record them"
  else fail "nomem: warning: $(cat "$tmp/err")"; fi
  check "nomem: the note" 1 "$(jget "$tmp/nomem.json" '$.notes."nsys_no_memory_events (data_loss)"')"
  check "nomem: a synchronous copy to pageable memory" \
    '{"kind":"memcpy","ts":1600,"dur":100,"dev_ts":1800,"api_dur":100,"size":100,"mem":"pageable","dir":"d2h","name":"Memcpy DtoH (Device -> Pageable)"}' \
    "$(events nomem | grep '"memcpy"')"
fi

# ==== nsys 2022.2 without the flag: the memory table is there, and empty
cp "$tmp/v2022.sqlite" "$tmp/v2022_nomem.sqlite"
sqlite3 "$tmp/v2022_nomem.sqlite" "DELETE FROM CUDA_GPU_MEMORY_USAGE_EVENTS"
echo "== an empty memory table"
if import_ok v2022_nomem "$tmp/v2022_nomem.sqlite"; then
  check "v2022_nomem: cudaMalloc, cudaHostAlloc and the frees are api calls" "0 0 0 0 1 0 1 1 6" "$(kinds v2022_nomem)"
  grep -q "has no GPU memory usage events.*--cuda-memory-usage=true" "$tmp/err" && echo "ok: v2022_nomem: warns" ||
    fail "v2022_nomem: warning: $(cat "$tmp/err")"
fi

# ==== an export of a version memplay has not seen: an extra table and column, a newer schema
f="$tmp/future.sqlite"
schema_recent "$f" yes yes
sqlite3 "$f" "UPDATE META_DATA_EXPORT SET value = '4.1.0' WHERE name = 'EXPORT_SCHEMA_VERSION';
  ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN clusterX INTEGER;
  CREATE TABLE CUPTI_ACTIVITY_KIND_TENSOR_CORE (start INTEGER, end INTEGER); INSERT INTO CUPTI_ACTIVITY_KIND_TENSOR_CORE VALUES (1, 2);
  CREATE TABLE CUDA_NEW_EMPTY_THING (x INTEGER);
  $(call 1000 1100 1 1) $(mem 1050 4096 512 2 0 1) $(call 1200 1300 2 3) $(kernel 1400 1500 2)"
echo "== an unknown schema version"
if import_ok future "$f"; then
  grep -q "export schema 4.1.0.*newer" "$tmp/err" && echo "ok: future: warns about the version" || fail "future: version warning: $(cat "$tmp/err")"
  grep -q "CUPTI_ACTIVITY_KIND_KERNEL has columns memplay does not know.*clusterX" "$tmp/err" &&
    echo "ok: future: names the unknown column" || fail "future: column warning: $(cat "$tmp/err")"
  grep -q "table CUPTI_ACTIVITY_KIND_TENSOR_CORE (1 rows) is not imported" "$tmp/err" &&
    echo "ok: future: names the unknown table" || fail "future: table warning: $(cat "$tmp/err")"
  grep -q CUDA_NEW_EMPTY_THING "$tmp/err" && fail "future: warns about an empty table" || echo "ok: future: empty tables are not mentioned"
  check "future: what it recognises is imported" "1 0 0 0 0 0 1 0 0" "$(kinds future)"
fi

# ==== rows out of order (two streams, two threads): the careful pass sorts, and gives what the prescan gives
f="$tmp/unsorted.sqlite"
schema_recent "$f" yes yes
sqlite3 "$f" "$(call 1200 1300 2 3) $(call 1000 1100 1 1 0 $((P1 + 101))) $(call 1400 1500 3 3) $(call 1600 1700 4 2)
  $(kernel 3000 3100 3 14) $(kernel 1350 2500 2 13) $(mem 1650 4096 512 2 1 4) $(mem 1050 4096 512 2 0 1)"
echo "== rows out of order"
if import_ok unsorted "$f" && import_ok unsorted-careful "$f" --set prescan=1; then
  check "unsorted: events by kind" "1 1 0 0 0 0 2 0 0" "$(kinds unsorted)"
  check "unsorted: the same events either way" "$(events unsorted-careful)" "$(events unsorted)"
  check "unsorted: says why the rows were sorted" \
    "read with a prescan, and sorted by SQLite where needed: CUPTI_ACTIVITY_KIND_RUNTIME is not in start order" \
    "$(note unsorted nsys_careful_pass)"
  check "unsorted: in time order" "1050 1200 1400 1650" "$(events unsorted | grep -o '"ts":[0-9]*' | cut -d: -f2 | xargs)"
fi

# ==== rows without a correlation among the others (a static, a migration, a free at teardown): read
#      in line by the single pass, timed by themselves, the same as the careful pass makes them
f="$tmp/zeros.sqlite"
schema_recent "$f" yes yes
sqlite3 "$f" "$(call 1000 1100 1 1) $(mem 1050 4096 512 2 0 1) $(mem 1060 8192 64 5 0 0) $(call 1200 1300 2 3)
  $(kernel 1400 1500 2) $(call 1600 1700 3 3) $(kernel 1900 2000 3)
  INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, globalPid, bytes,
  copyKind, srcKind, dstKind) VALUES (1750, 1800, 0, 1, 7, 0, $P1, 65536, 1, 4, 4);
  $(call 2100 2200 4 13) $(mem 2300 4096 512 2 1 0)"
echo "== uncorrelated rows"
if import_ok zeros "$f" && import_ok zeros-careful "$f" --set prescan=1; then
  check "zeros: read once" "" "$(note zeros nsys_careful_pass)"
  check "zeros: the same events as the careful pass" "$(events zeros-careful)" "$(events zeros)"
  check "zeros: in time order, each at its own time" "1050 1200 1600 1750 2100 2300" \
    "$(events zeros | grep -o '"ts":[0-9]*' | cut -d: -f2 | xargs)"
  check "zeros: events by kind" "1 1 0 0 1 0 2 0 1" "$(kinds zeros)"
  check "zeros: noted" 2 "$(jget "$tmp/zeros.json" '$.notes."nsys_uncorrelated_rows (info)"')"
fi

# ==== two processes: one trace each
f="$tmp/two.sqlite"
schema_recent "$f" yes yes
sqlite3 "$f" "$(call 1000 1100 1 1) $(mem 1050 4096 512 2 0 1) $(call 1200 1300 2 3) $(kernel 1400 1500 2)
  $(call 1010 1110 1 1 0 $T2) $(mem 1060 4096 1024 2 0 1 1 $P2) $(call 1210 1310 2 3 0 $T2) $(kernel 1410 1510 2 9 1 $P2)"
echo "== two processes"
if "$MEMPLAY" --db "$db" import "$f" >"$tmp/out" 2>"$tmp/err"; then
  check "two: one trace per process" "imported 'two-pid100' (2 events, nsys) into $db
imported 'two-pid200' (2 events, nsys) into $db" "$(cat "$tmp/out")"
  "$MEMPLAY" --db "$db" info --json two-pid200 >"$tmp/two.json"
  check "two: the second process's allocation and device" "1024 1 eval.py" \
    "$(jget "$tmp/two.json" '$.peak_live_bytes') $(jget "$tmp/two.json" '$.attrs.devices[0].id') $(jget "$tmp/two.json" '$.attrs.process')"
else fail "two: import failed: $(cat "$tmp/err")"; fi

# ==== a call recorded twice in its own class, and two different calls sharing an id (as in a real export)
f="$tmp/dups.sqlite"
schema_recent "$f" yes yes
sqlite3 "$f" "$(call 1000 1100 1 13) $(call 1000 1100 1 13) $(call 1200 1300 2 6) $(call 1400 1500 2 13)"
echo "== duplicated calls"
if import_ok dups "$f"; then
  check "dups: the copy is dropped, the other call with the same id is kept" "0 0 0 0 0 0 0 1 2" "$(kinds dups)"
  check "dups: note" 1 "$(jget "$tmp/dups.json" '$.notes."nsys_duplicate_calls (info)"')"
fi

# ==== a double free: a warning, not an allocation older than the capture
f="$tmp/doublefree.sqlite"
schema_recent "$f" yes yes
sqlite3 "$f" "$(call 1000 1100 1 1) $(mem 1050 4096 512 2 0 1) $(call 1200 1300 2 2) $(mem 1250 4096 512 2 1 2)
  $(call 1400 1500 3 2) $(mem 1450 4096 512 2 1 3)"
echo "== a double free"
if import_ok doublefree "$f"; then
  check "doublefree: events by kind (the dropped free leaves its call an api event)" "1 1 0 0 0 0 0 0 1" "$(kinds doublefree)"
  check "doublefree: noted" "1 0" "$(jget "$tmp/doublefree.json" '$.notes."nsys_unmatched_frees (warning)"') $(jget "$tmp/doublefree.json" '$.notes."nsys_preexisting_allocations (info)"')"
  grep -q "1 frees of addresses with nothing live were dropped" "$tmp/err" && echo "ok: doublefree: warns" || fail "doublefree: warning: $(cat "$tmp/err")"
fi

# ==== no runtime table: device work timed by itself
f="$tmp/nocalls.sqlite"
schema_recent "$f" no
sqlite3 "$f" "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME; $(kernel 2000 2100 5) $(kernel 1000 1100 4 9)"
echo "== no calls"
if import_ok nocalls "$f"; then
  check "nocalls: kernels at their own start" "1000 2000" "$(events nocalls | grep -o '"ts":[0-9]*' | cut -d: -f2 | xargs)"
fi

# ==== found by content, whatever the file is called
cp "$tmp/v2022.sqlite" "$tmp/report.db"
echo "== detection"
if "$MEMPLAY" --db "$db" import --json "$tmp/report.db" --name report_db >"$tmp/out.json" 2>"$tmp/err"; then
  check "detect: an export named .db is an nsys export" nsys "$(jget "$tmp/out.json" '$.format')"
else fail "detect: $(cat "$tmp/err")"; fi

# ==== bad input: exit 1, the file and the place in the message, the store as it was
echo "== bad input"
sqlite3 "$tmp/other.sqlite" "CREATE TABLE t(x); INSERT INTO t VALUES (1);"
expect_fail "not nsys" "$tmp/other.sqlite" "other.sqlite': an SQLite database but not an Nsight Systems export"
expect_fail "a memplay store" "$db" "a memplay store, not an Nsight Systems export" --format nsys
printf '{"memplay":1}\n' >"$tmp/x.jsonl"
expect_fail "--format nsys on JSON" "$tmp/x.jsonl" "x.jsonl': not an SQLite database" --format nsys
gzip -c "$tmp/v2022.sqlite" >"$tmp/v.sqlite.gz"
expect_fail "gzip" "$tmp/v.sqlite.gz" "decompress the SQLite export first"
schema_recent "$tmp/empty.sqlite" yes yes
expect_fail "empty export" "$tmp/empty.sqlite" "empty.sqlite': the export holds no CUDA activity"
cp "$tmp/v2022.sqlite" "$tmp/badvalue.sqlite"
sqlite3 "$tmp/badvalue.sqlite" "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'soon'"
expect_fail "a text start" "$tmp/badvalue.sqlite" "table CUPTI_ACTIVITY_KIND_KERNEL, row 1: column start is 'soon', not an integer"
cp "$tmp/v2022.sqlite" "$tmp/negative.sqlite"
sqlite3 "$tmp/negative.sqlite" "UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET bytes = -5 WHERE rowid = 2"
expect_fail "negative bytes" "$tmp/negative.sqlite" "table CUDA_GPU_MEMORY_USAGE_EVENTS, row 2: bytes is negative (-5)"
# a corrupt file: the pages of the calls overwritten
cp "$tmp/v2022.sqlite" "$tmp/corrupt.sqlite"
page=$(sqlite3 "$tmp/corrupt.sqlite" "SELECT rootpage FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_RUNTIME'")
psize=$(sqlite3 "$tmp/corrupt.sqlite" "PRAGMA page_size")
head -c "$psize" /dev/zero | tr '\0' '\377' | dd of="$tmp/corrupt.sqlite" bs="$psize" seek=$((page - 1)) conv=notrunc 2>/dev/null
expect_fail "corrupt" "$tmp/corrupt.sqlite" "cannot read '.*corrupt.sqlite': table CUPTI_ACTIVITY_KIND_RUNTIME.*malformed"
expect_fail "missing file" "$tmp/nothere.sqlite" "nothere.sqlite" --format nsys

finish
