# The JSON Lines importer's parsers agree: a flat line of known keys goes through a pass of its own,
# another line of plain ASCII strings through the fast scanner, a line with escapes or other bytes
# through yajl, and the same trace written any of these ways is stored the same; yajl still checks UTF-8; a value after a line's object is refused, at the
# end of the file too. A large file is read and parsed on a thread of its own: the same trace as
# without it, and the same first failing line, whether the reading thread or the importer finds it.
. "$TESTS_DIR/cli/lib.sh"
S="$MEMPLAY_SRC/traces/sample.jsonl"

# every character of every string (keys too) as a \u escape: each line goes to yajl
python3 - "$S" "$T/escaped.jsonl" <<'EOF'
import json, sys
def enc(v):
    if isinstance(v, str):
        return '"' + ''.join('\\u%04x' % ord(c) for c in v) + '"'
    if isinstance(v, dict):
        return '{' + ','.join(enc(k) + ':' + enc(x) for k, x in v.items()) + '}'
    if isinstance(v, list):
        return '[' + ','.join(enc(x) for x in v) + ']'
    return json.dumps(v)
with open(sys.argv[1]) as f, open(sys.argv[2], 'w') as out:
    for line in f:
        out.write(enc(json.loads(line)) + '\n')
EOF
grep -q 'kind' "$T/escaped.jsonl" && fail "the escaped copy still has plain strings"
expect 0 import "$S" --name plain
expect 0 import "$T/escaped.jsonl" --name escaped
expect 0 export plain -o "$T/plain.out"
expect 0 export escaped -o "$T/escaped.out"
tail -n +2 "$T/plain.out" >"$T/plain.body"
tail -n +2 "$T/escaped.out" >"$T/escaped.body"
cmp -s "$T/plain.body" "$T/escaped.body" || fail "the scanner and yajl stored different traces: $(diff "$T/plain.body" "$T/escaped.body" | head -5)"
[ "$(wc -l <"$T/plain.body")" -gt 4000 ] || fail "the export is short: $(wc -l <"$T/plain.body") lines"

# the flat lines' own pass (every line of known keys and plain values): spaces after ',' and ':'
# (Python's json.dumps), tabs around the object and CRLF endings store the same trace
python3 - "$S" "$T/spaced.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1]) as f, open(sys.argv[2], 'w', newline='') as out:
    for i, line in enumerate(f):
        out.write(('\t' if i % 2 else '') + json.dumps(json.loads(line)) + (' \r\n' if i % 3 else '\n'))
EOF
grep -q '"kind": "alloc", "ts": ' "$T/spaced.jsonl" || fail "the spaced copy has no spaces"
expect 0 import "$T/spaced.jsonl" --name spaced
expect 0 export spaced -o "$T/spaced.out"
tail -n +2 "$T/spaced.out" >"$T/spaced.body"
cmp -s "$T/plain.body" "$T/spaced.body" || fail "the spaced copy stored another trace: $(diff "$T/plain.body" "$T/spaced.body" | head -5)"
# the flat pass guesses each key from the one before it on the last line: keys in another order
# on every line (so that most guesses miss, and some hit a name that only starts the same) store
# the same trace
python3 - "$S" "$T/shuffled.jsonl" <<'EOF'
import json, random, sys
rng = random.Random(7)
with open(sys.argv[1]) as f, open(sys.argv[2], 'w') as out:
    for i, line in enumerate(f):
        items = list(json.loads(line).items())
        if i % 4:
            rng.shuffle(items)
        out.write(json.dumps(dict(items), separators=(',', ':')) + '\n')
EOF
cmp -s "$S" "$T/shuffled.jsonl" && fail "the shuffled copy is the sample"
expect 0 import "$T/shuffled.jsonl" --name shuffled
expect 0 export shuffled -o "$T/shuffled.out"
tail -n +2 "$T/shuffled.out" >"$T/shuffled.body"
cmp -s "$T/plain.body" "$T/shuffled.body" || fail "the shuffled copy stored another trace: $(diff "$T/plain.body" "$T/shuffled.body" | head -5)"
# values that pass (booleans, null, an address of 20 digits, -0 for a time), and lines that fail,
# each with the message it had before the flat lines' pass
printf '%s\n' '{"kind":"segment","device":0,"addr":4096,"size":1048576,"expandable":true,"pool":"large","stack":null}' \
  '{"kind":"alloc","ts":-0,"addr":18446744073709551615,"size":8,"category":null}' \
  '{"kind":"free","ts":1,"addr":"0xffffffffffffffff"}' >"$T/values.jsonl"
expect 0 import "$T/values.jsonl" --name values
[ "$(sqlite3 "$DB" "SELECT expandable, pool FROM segments")" = "1|large" ] || fail "the segment: $(sqlite3 "$DB" "SELECT * FROM segments")"
bad_line() { # LINE MESSAGE: a file whose second line is LINE fails with MESSAGE
  printf '%s\n' '{"kind":"alloc","ts":1,"addr":1,"size":8}' "$1" >"$T/bad.jsonl"
  expect 1 import "$T/bad.jsonl"
  has "$T/err" "bad.jsonl:2: $2"
}
bad_line '{"kind":"alloc","ts":1234567890123456789012,"addr":2,"size":8}' "field 'ts' must be an integer, not '1234567890123456789012'"
bad_line '{"kind":"alloc","ts":2,"addr":2,"size":8,"addr":3}' "field 'addr' appears twice"
bad_line '{"kind":"alloc","ts":2,"addr":01,"size":8}' "invalid JSON: parse error: after key and value, inside map, I expect ',' or '}' (at column 32)"
bad_line '{"kind":"alloc","ts":2,"addr":-0,"size":8}' "field 'addr' must be a non-negative integer or a \"0x...\" string, not -0"
bad_line '{"kind":"alloc","ts":2,"addr":2,"size":1e3}' "field 'size' must be a whole number of bytes, not '1e3'"
bad_line '{"kind":"alloc","ts":2,"addr":2,"size":8,"bogus":1}' "unknown field 'bogus' in a 'alloc' line"
# a key that starts as the guess does (the first line had "ts" after "kind") is not taken for it
bad_line '{"kind":"alloc","tsx":2,"addr":2,"size":8}' "unknown field 'tsx' in a 'alloc' line"
bad_line '{"kind":"alloc","t":2,"addr":2,"size":8}' "unknown field 't' in a 'alloc' line"
# nor one of the same length that differs past its first eight bytes
printf '%s\n' '{"kind":"segment","device":0,"addr":4096,"size":1048576,"requested_size":0}' \
  '{"kind":"segment","device":0,"addr":8192,"size":1048576,"requested_sizX":0}' >"$T/guess.jsonl"
expect 1 import "$T/guess.jsonl"
has "$T/err" "guess.jsonl:2: unknown field 'requested_sizX' in a 'segment' line"

# a name in UTF-8 (yajl's, which checks it) is kept as it is
printf '%s\n' '{"kind":"alloc","addr":1,"size":8,"name":"caf\u00e9"}' '{"kind":"kernel","name":"gemm_café"}' >"$T/utf8.jsonl"
expect 0 import "$T/utf8.jsonl"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM strings WHERE value IN ('café', 'gemm_café')")" = 2 ] ||
  fail "the UTF-8 names were not stored: $(sqlite3 "$DB" "SELECT value FROM strings" | tail -3)"
# bytes that are not UTF-8 are an error at their line, as before
printf '{"kind":"alloc","addr":1,"size":8}\n{"kind":"kernel","name":"bad\377name"}\n' >"$T/notutf8.jsonl"
expect 1 import "$T/notutf8.jsonl"
has "$T/err" "notutf8.jsonl:2: invalid JSON"

# a number after the object: one value too many, whether a line follows or not
printf '%s\n' '{"kind":"alloc","addr":1,"size":8} 5' '{"kind":"free","addr":1}' >"$T/after.jsonl"
expect 1 import "$T/after.jsonl"
has "$T/err" "after.jsonl:1: more than one JSON value on one line"
printf '%s\n' '{"kind":"alloc","addr":1,"size":8}' '{"kind":"free","addr":1} 12' >"$T/last.jsonl"
expect 1 import "$T/last.jsonl"
has "$T/err" "last.jsonl:2: more than one JSON value on one line"

# the reading thread (a file of 4 MiB or more): the same trace as the same file read in the
# importer's thread (a pipe)
expect 0 gen --events 40000 --seed 3 --name big
expect 0 export big -o "$T/big.jsonl"
[ "$(wc -c <"$T/big.jsonl")" -ge $((4 << 20)) ] || fail "the big file is too small for the thread"
expect 0 import "$T/big.jsonl" --name threaded
cat "$T/big.jsonl" | "$MEMPLAY" import /dev/stdin --name piped >"$T/out" 2>"$T/err" || fail "the pipe: $(cat "$T/err")"
expect 0 export threaded -o "$T/threaded.out"
expect 0 export piped -o "$T/piped.out"
cmp -s <(tail -n +2 "$T/threaded.out") <(tail -n +2 "$T/piped.out") || fail "the threaded reader stored another trace"
digest=$(store_digest)
# a line the reader refuses, near the end: after every line before it was handled
{ cat "$T/big.jsonl"; echo '{"kind":"free","addr":1,"bogus":true'; } >"$T/late.jsonl"
lines=$(($(wc -l <"$T/big.jsonl") + 1))
expect 1 import "$T/late.jsonl" --name late
has "$T/err" "late.jsonl:$lines: the JSON object does not end on this line"
# a line the importer refuses (a double free) while the reader is ahead; a bad line later on
{ head -3 "$T/big.jsonl"; echo '{"kind":"free","addr":1}'; echo '{"kind":"free","addr":1}'; tail -n +4 "$T/big.jsonl"; echo 'not JSON'; } >"$T/early.jsonl"
expect 1 import "$T/early.jsonl" --name early
has "$T/err" "early.jsonl:5: double free"
[ "$(wc -l <"$T/err")" = 1 ] || fail "more than one message: $(cat "$T/err")"
[ "$(store_digest)" = "$digest" ] || fail "a failed import changed the store"
finish
