# B16: an nsys export with an uncheckpointed -wal file is read as SQLite would read it (the WAL's
# rows seen), without modifying the export or its WAL and without creating files beside them.
. "$TESTS_DIR/cli/lib.sh"
command -v python3 >/dev/null || { echo "skipped: python3 is not installed"; exit 77; }
bash "$MEMPLAY_SRC/tools/nsys_synth.sh" 20 "$T/x.sqlite" >/dev/null
# the kernels are deleted in the WAL, which the writer leaves behind (it exits without closing)
python3 - "$T/x.sqlite" <<'PY'
import os, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("PRAGMA journal_mode=WAL")
c.execute("PRAGMA wal_autocheckpoint=0")
c.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
c.commit()
os._exit(0)
PY
rm -f "$T/x.sqlite-shm"
[ -s "$T/x.sqlite-wal" ] || { echo "skipped: no WAL was left"; exit 77; }
before=$(cd "$T" && ls x.sqlite* && md5sum x.sqlite*)
expect 0 import "$T/x.sqlite" --name w
expect 0 info w --json
grep -q '"kernel"' "$T/out" && fail "the kernels deleted in the WAL were imported: $(head -c 300 "$T/out")"
[ "$(cd "$T" && ls x.sqlite* && md5sum x.sqlite*)" = "$before" ] || fail "the export or its WAL changed"
finish
