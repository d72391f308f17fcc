# B06: nsys rows are range-checked before any arithmetic: end = -2^63 (a kernel of ~2^63 ns),
# deviceId = -3, bytes of 2^63-1 are refused with the table, the row and the column.
. "$TESTS_DIR/cli/lib.sh"
command -v sqlite3 >/dev/null || { echo "skipped: sqlite3 is not installed"; exit 77; }
bash "$MEMPLAY_SRC/tools/nsys_synth.sh" 10 "$T/base.sqlite" >/dev/null
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
digest=$(store_digest)
n=0
bad() { # SQL TABLE COLUMN
  n=$((n + 1))
  cp "$T/base.sqlite" "$T/x$n.sqlite"
  sqlite3 "$T/x$n.sqlite" "$1"
  expect 1 import "$T/x$n.sqlite" && { has "$T/err" "x$n.sqlite"; has "$T/err" "table $2, row"; has "$T/err" "column $3"; }
  [ "$(store_digest)" = "$digest" ] || fail "$1: the store changed"
}
bad "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = -9223372036854775808 WHERE rowid = 3" CUPTI_ACTIVITY_KIND_KERNEL end
bad "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET deviceId = -3 WHERE rowid = 2" CUPTI_ACTIVITY_KIND_KERNEL deviceId
bad "UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET bytes = 9223372036854775807 WHERE rowid IN (1, 2)" CUDA_GPU_MEMORY_USAGE_EVENTS bytes
bad "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = 9223372036854775000, end = 9223372036854775807 WHERE rowid = 4" CUPTI_ACTIVITY_KIND_RUNTIME start
finish
