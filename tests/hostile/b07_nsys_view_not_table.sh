# B07: an nsys export whose kernel table is replaced by a recursive VIEW is refused (memplay reads
# tables only), quickly and in bounded memory, the store and the export untouched.
. "$TESTS_DIR/cli/lib.sh"
command -v sqlite3 >/dev/null || { echo "skipped: sqlite3 is not installed"; exit 77; }
bash "$MEMPLAY_SRC/tools/nsys_synth.sh" 20 "$T/x.sqlite" >/dev/null
sqlite3 "$T/x.sqlite" "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL; CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS
  WITH RECURSIVE r(start) AS (SELECT 1 UNION ALL SELECT start + 1 FROM r) SELECT start, start AS end FROM r;"
sum=$(md5sum <"$T/x.sqlite")
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
digest=$(store_digest)
timeout 60 "$MEMPLAY" import "$T/x.sqlite" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] || fail "exit $rc: $(head -c 300 "$T/err")"
has "$T/err" "x.sqlite"
has "$T/err" "'CUPTI_ACTIVITY_KIND_KERNEL' is a view, not a table"
[ "$(store_digest)" = "$digest" ] || fail "store changed"
[ "$(md5sum <"$T/x.sqlite")" = "$sum" ] || fail "the export changed"
finish
