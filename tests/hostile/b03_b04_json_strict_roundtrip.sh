# B03, B04: names with invalid UTF-8 and UTF-16 surrogates (here kernel names of an nsys export)
# are written as strict JSON (each invalid byte becomes U+FFFD), and export -> import -> export
# gives the same events.
. "$TESTS_DIR/cli/lib.sh"
command -v sqlite3 >/dev/null && command -v python3 >/dev/null || { echo "skipped: needs sqlite3 and python3"; exit 77; }
bash "$MEMPLAY_SRC/tools/nsys_synth.sh" 5 "$T/x.sqlite" >/dev/null
# 0xFF, a surrogate (ED A0 80), ESC [31m, BEL, DEL, an emoji, U+009B
sqlite3 "$T/x.sqlite" "UPDATE StringIds SET value = CAST(X'6bff41eda0801b5b33316d077ff09f9880c29b' AS TEXT) || value
  WHERE id IN (SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL UNION SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL)"
expect 0 import "$T/x.sqlite" --name a
expect 0 export a -o "$T/a.jsonl"
strict() {
  python3 - "$1" <<'PY'
import json, sys
for n, line in enumerate(open(sys.argv[1], "rb"), 1):
    try:
        json.loads(line.decode("utf-8"))
    except ValueError as e:
        sys.exit("line %d: %s" % (n, e))
PY
}
strict "$T/a.jsonl" || fail "export is not strict JSON"
grep -q '\\u001B\[31m' "$T/a.jsonl" || fail "ESC not escaped in the export"
grep -q "k$(printf '\357\277\275')A" "$T/a.jsonl" || fail "invalid bytes not replaced by U+FFFD"
expect 0 import "$T/a.jsonl" --name b
expect 0 export b -o "$T/b.jsonl"
cmp -s <(tail -n +2 "$T/a.jsonl") <(tail -n +2 "$T/b.jsonl") || fail "export -> import -> export changed the events"
expect 0 --json info a
strict "$T/out" || fail "info --json is not strict JSON"
# on stdout too, through the filter that escapes DEL and C1 controls for terminals
expect 0 export a
strict "$T/out" || fail "export to stdout is not strict JSON"
tail -n +2 "$T/out" | cmp -s - <(tail -n +2 "$T/a.jsonl") || python3 - "$T/out" "$T/a.jsonl" <<'PY' || fail "export to stdout means something else than export -o"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1], "rb")][1:]
b = [json.loads(l) for l in open(sys.argv[2], "rb")][1:]
sys.exit(a != b)
PY
finish
