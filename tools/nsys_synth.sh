#!/usr/bin/env bash
# Writes a synthetic Nsight Systems SQLite export (the schema of nsys 2024.5, with
# --cuda-memory-usage=true) for the import benchmark in docs/performance.md.
#
#   tools/nsys_synth.sh [--shuffled] [ITERATIONS] OUT.sqlite
#
# Each iteration is one step of a program that calls cudaMalloc directly: a cudaMalloc (with its
# memory usage row), a kernel launch (with its kernel), every 4th a cudaMemcpyAsync (with its
# copy), from the 32nd on a cudaFree of the block allocated 32 iterations earlier, every 16th a
# cudaStreamSynchronize (with its synchronization row), every 8th a cudaEventRecord and a
# cudaMemsetAsync. Addresses are reused the way the driver reuses them (64 slots). About 7 rows
# and 3.6 memplay events per iteration; the default of 1,000,000 iterations gives ~7 M rows.
# --shuffled writes the calls and the kernels in random order (as no nsys version does), so
# that the import must sort them.
set -euo pipefail
order="ORDER BY 1"
korder="ORDER BY i"
if [ "${1:-}" = --shuffled ]; then
  order="ORDER BY random()"
  korder="ORDER BY random()"
  shift
fi
if [ $# -eq 1 ]; then n=1000000; out=$1; elif [ $# -eq 2 ]; then n=$1; out=$2; else
  echo "usage: tools/nsys_synth.sh [ITERATIONS] OUT.sqlite" >&2
  exit 2
fi
case $n in '' | *[!0-9]*) echo "nsys_synth: ITERATIONS must be a number, not '$n'" >&2; exit 2 ;; esac
rm -f "$out"
sqlite3 "$out" >/dev/null <<SQL
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_NSYS_EVENT_CLASS (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT,
  isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER,
  smCount INTEGER, uuid TEXT, chipName TEXT, cuDevice INTEGER, computeMajor INTEGER, computeMinor INTEGER);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
  globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
  launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL,
  gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
  blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
  localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL,
  sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
  globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER,
  dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER,
  migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
  globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,
  correlationId INTEGER, globalPid INTEGER, syncType INTEGER NOT NULL, eventId INTEGER NOT NULL);
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL,
  bytes INTEGER NOT NULL, memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, name TEXT,
  correlationId INTEGER, streamId INTEGER, localMemoryPoolAddress INTEGER, localMemoryPoolReleaseThreshold INTEGER,
  localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER, importedMemoryPoolAddress INTEGER,
  importedMemoryPoolProcessId INTEGER);

INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_NAME', 'NVIDIA Nsight Systems'),
  ('EXPORT_PRODUCT_VERSION', '2024.5.1.113'), ('EXPORT_SCHEMA_VERSION', '3.13.2');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0,'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE','Pageable'),
  (1,'CUDA_MEMOPR_MEMORY_KIND_PINNED','Pinned'), (2,'CUDA_MEMOPR_MEMORY_KIND_DEVICE','Device'),
  (3,'CUDA_MEMOPR_MEMORY_KIND_ARRAY','Array'), (4,'CUDA_MEMOPR_MEMORY_KIND_MANAGED','Managed'),
  (5,'CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC','Device Static'),
  (6,'CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC','Managed Static'), (7,'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN','Unknown');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (0,'CUDA_MEMCPY_KIND_UNKNOWN','Unknown'),
  (1,'CUDA_MEMCPY_KIND_HTOD','Host-to-Device'), (2,'CUDA_MEMCPY_KIND_DTOH','Device-to-Host'),
  (3,'CUDA_MEMCPY_KIND_HTOA','Host-to-Array'), (4,'CUDA_MEMCPY_KIND_ATOH','Array-to-Host'),
  (5,'CUDA_MEMCPY_KIND_ATOA','Array-to-Array'), (6,'CUDA_MEMCPY_KIND_ATOD','Array-to-Device'),
  (7,'CUDA_MEMCPY_KIND_DTOA','Device-to-Array'), (8,'CUDA_MEMCPY_KIND_DTOD','Device-to-Device'),
  (9,'CUDA_MEMCPY_KIND_HTOH','Host-to-Host'), (10,'CUDA_MEMCPY_KIND_PTOP','Peer-to-Peer'),
  (11,'CUDA_MEMCPY_KIND_UVM_HTOD','Unified Host-to-Device'), (12,'CUDA_MEMCPY_KIND_UVM_DTOH','Unified Device-to-Host'),
  (13,'CUDA_MEMCPY_KIND_UVM_DTOD','Unified Device-to-Device');
INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES (0,'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION','Allocation'),
  (1,'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION','Deallocation');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (0,'TRACE_PROCESS_EVENT_CUDA_RUNTIME','CUDA runtime'),
  (1,'TRACE_PROCESS_EVENT_CUDA_DRIVER','CUDA driver'), (67,'TRACE_PROCESS_EVENT_CUDABACKTRACE','CUDA backtrace');
INSERT INTO TARGET_INFO_GPU VALUES (281474976710656, 0, 'NVIDIA A100-SXM4-80GB', '0000:07:00.0', 1, 41943040,
  84990623744, 2039000000000, 1410000000, 108, 'GPU-0', 'GA100', 0, 8, 0);
INSERT INTO PROCESSES VALUES (71165608263680, 4242, 'synthetic');
INSERT INTO StringIds VALUES (1,'cudaMalloc_v3020'), (2,'cudaLaunchKernel_v7000'), (3,'cudaMemcpyAsync_v3020'),
  (4,'cudaFree_v3020'), (5,'cudaStreamSynchronize_v3020'), (6,'cudaEventRecord_v3020'),
  (7,'cudaMemsetAsync_v3020'),
  (10,'void gemm_kernel<float, 128>(float const*, float const*, float*)'), (11,'gemm_kernel'),
  (12,'void layer_norm_kernel<float>(float const*, float*, int)'), (13,'layer_norm_kernel'),
  (14,'void softmax_kernel<float>(float*, int)'), (15,'softmax_kernel'),
  (16,'void elementwise_add(float const*, float const*, float*, int)'), (17,'elementwise_add'),
  (18,'void reduce_sum<256>(float const*, float*, int)'), (19,'reduce_sum');

CREATE TEMP TABLE it(i INTEGER PRIMARY KEY);
WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < $n) INSERT INTO it SELECT i FROM c;

-- the process: globalPid = 4242 << 24, its main thread's globalTid adds the tid
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT * FROM (
  SELECT t, t + 2000, 0, 71165608267922, 8 * i + 1, 1, 0, NULL FROM (SELECT i, 1000000000 + 20000 * i AS t FROM it)
  UNION ALL SELECT t + 3000, t + 6000, 0, 71165608267922, 8 * i + 2, 2, 0, NULL FROM (SELECT i, 1000000000 + 20000 * i AS t FROM it)
  UNION ALL SELECT t + 7000, t + 9000, 0, 71165608267922, 8 * i + 3, 3, 0, NULL FROM (SELECT i, 1000000000 + 20000 * i AS t FROM it WHERE i % 4 = 0)
  UNION ALL SELECT t + 10000, t + 12000, 0, 71165608267922, 8 * i + 4, 4, 0, NULL FROM (SELECT i, 1000000000 + 20000 * i AS t FROM it WHERE i >= 32)
  UNION ALL SELECT t + 13000, t + 19000, 0, 71165608267922, 8 * i + 5, 5, 0, NULL FROM (SELECT i, 1000000000 + 20000 * i AS t FROM it WHERE i % 16 = 0)
  UNION ALL SELECT t + 14000, t + 14500, 0, 71165608267922, 8 * i + 6, 6, 0, NULL FROM (SELECT i, 1000000000 + 20000 * i AS t FROM it WHERE i % 8 = 1)
  UNION ALL SELECT t + 14600, t + 15000, 0, 71165608267922, 8 * i + 7, 7, 0, NULL FROM (SELECT i, 1000000000 + 20000 * i AS t FROM it WHERE i % 8 = 2))
  $order;
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL
  SELECT 1000000000 + 20000 * i + 8000, 1000000000 + 20000 * i + 15000, 0, 1, NULL, 7, 8 * i + 2, 71165608263680,
         10 + 2 * (i % 5), 11 + 2 * (i % 5), NULL, 1, 1, 32, 1024, 1, 1, 256, 1, 1, 0, 0, 0, 0, i, 0, NULL, 0
  FROM it $korder;
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY
  SELECT 1000000000 + 20000 * i + 16000, 1000000000 + 20000 * i + 18000, 0, 1, NULL, 7, 8 * i + 3, 71165608263680,
         65536, 1, NULL, 1, 2, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM it WHERE i % 4 = 0 ORDER BY i;
INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET
  SELECT 1000000000 + 20000 * i + 19000, 1000000000 + 20000 * i + 19500, 0, 1, NULL, 7, 8 * i + 7, 71165608263680,
         0, 4096, NULL, 2
  FROM it WHERE i % 8 = 2 ORDER BY i;
INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION
  SELECT 1000000000 + 20000 * i + 13500, 1000000000 + 20000 * i + 18900, 0, 1, NULL, 7, 8 * i + 5, 71165608263680,
         3, 4294967295
  FROM it WHERE i % 16 = 0 ORDER BY i;
-- block i: slot i % 64 (addresses 64 MiB apart), 1 MiB plus (i % 7) * 256 KiB, freed in iteration i + 32
INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS
  SELECT t, 71165608263680, 0, 1, a, 0, b, 2, op, NULL, c, 7, NULL, NULL, NULL, NULL, NULL, NULL FROM (
    SELECT 1000000000 + 20000 * i + 1500 AS t, 139637976727552 + (i % 64) * 67108864 AS a,
           1048576 + (i % 7) * 262144 AS b, 0 AS op, 8 * i + 1 AS c FROM it
    UNION ALL
    SELECT 1000000000 + 20000 * (i + 32) + 11000, 139637976727552 + (i % 64) * 67108864,
           1048576 + (i % 7) * 262144, 1, 8 * (i + 32) + 4 FROM it WHERE i + 32 < $n)
  ORDER BY t;
SQL
echo "nsys_synth: wrote $out ($n iterations)" >&2
