# Malformed input gets a clear error naming the file and the line, exit 1, and the store untouched.
. "$TESTS_DIR/cli/lib.sh"

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
digest=$(store_digest)

# bad FILE-CONTENT EXPECTED-MESSAGE [LINE]
n=0
bad() {
  n=$((n + 1))
  local f="$T/bad$n.jsonl" line=${3:-2}
  printf '%s\n' '{"kind":"alloc","addr":100,"size":64}' >"$f"
  printf '%s\n' "$1" >>"$f"
  if expect 1 import "$f"; then
    has "$T/err" "bad$n.jsonl:$line:"
    has "$T/err" "$2"
  fi
  [ "$(store_digest)" = "$digest" ] || fail "store changed after bad input $n ($1)"
}

bad '{"kind":"alloc","addr":1' "does not end on this line"
bad 'this is not JSON' "invalid JSON"
bad '[1,2,3]' "each line must be one JSON object"
bad '{"addr":1,"size":8}' "missing field 'kind'"
bad '{"kind":"allocate","addr":1,"size":8}' "unknown kind 'allocate'"
bad '{"kind":"alloc","addr":1}' "needs field 'size'"
bad '{"kind":"alloc","size":8}' "needs field 'addr'"
bad '{"kind":"alloc","addr":1,"size":-8}' "must not be negative"
bad '{"kind":"alloc","addr":1,"size":"lots"}' "field 'size'"
bad '{"kind":"alloc","addr":true,"size":8}' "field 'addr'"
bad '{"kind":"alloc","addr":-1,"size":8}' "field 'addr'"
bad '{"kind":"alloc","addr":1,"size":1.5}' "field 'size'"
bad '{"kind":"alloc","addr":1,"size":8,"ts":"now"}' "field 'ts' must be an integer"
bad '{"kind":"alloc","addr":1,"size":8,"szie":8}' "unknown field 'szie'"
bad '{"kind":"alloc","addr":1,"size":8,"size":9}' "appears twice"
bad '{"kind":"alloc","addr":1,"size":8,"category":"weights"}' "unknown value 'weights'"
bad '{"kind":"free","addr":7}' "never allocated"
bad '{"kind":"alloc","addr":100,"size":64}' "still live"
bad '{"kind":"free_completed","addr":100}' "without a free_requested"
bad '{"kind":"memcpy","size":8}' "needs field 'dir'"
bad '{"kind":"host_alloc","addr":1,"size":8,"mem":"device"}' "pinned or pageable"
bad '{"kind":"alloc","addr":1,"size":8,"stack":4}' "used before"
bad '{"kind":"alloc","addr":1,"size":8}{"kind":"free","addr":1}' "more than one JSON value"
bad '{"memplay":1}' "header line"
bad '{"kind":"alloc","addr":1,"size":8,"flags":["sideways"]}' "unknown flag"

# double free, at the line of the second free
printf '%s\n' '{"kind":"alloc","addr":5,"size":8}' '{"kind":"free","addr":5}' '{"kind":"free","addr":5}' >"$T/dbl.jsonl"
expect 1 import "$T/dbl.jsonl" && has "$T/err" "dbl.jsonl:3: double free"
# the importer remembers the last 65,536 frees: a double free within them is one, an older one
# is a free of an address it does not know; a host free is told apart from a device free
for k in 65535 65536; do
  awk -v k=$k 'BEGIN { print "{\"kind\":\"alloc\",\"addr\":5,\"size\":8}"; print "{\"kind\":\"free\",\"addr\":5}"
    for (i = 0; i < k; i++) { printf "{\"kind\":\"alloc\",\"addr\":%d,\"size\":8}\n{\"kind\":\"free\",\"addr\":%d}\n", 100 + i, 100 + i }
    print "{\"kind\":\"free\",\"addr\":5}" }' >"$T/window$k.jsonl"
done
expect 1 import "$T/window65535.jsonl" && has "$T/err" "window65535.jsonl:131073: double free: address 5 was already freed"
expect 1 import "$T/window65536.jsonl" && has "$T/err" "window65536.jsonl:131075: free of address 5, which was never allocated"
printf '%s\n' '{"kind":"alloc","addr":5,"size":8}' '{"kind":"free","addr":5}' '{"kind":"host_free","addr":5,"mem":"pinned"}' >"$T/hostdbl.jsonl"
expect 1 import "$T/hostdbl.jsonl" && has "$T/err" "hostdbl.jsonl:3: free of address 5, which was never allocated"
# a newer version of the format
printf '%s\n' '{"memplay":2}' >"$T/v2.jsonl"
expect 1 import "$T/v2.jsonl" && has "$T/err" "v2.jsonl:1: unsupported memplay trace version 2"
# no events at all
: >"$T/empty.jsonl"
expect 1 import "$T/empty.jsonl" --format jsonl && has "$T/err" "empty.jsonl"
# files that cannot be read
expect 1 import "$T/does-not-exist.jsonl" && has "$T/err" "cannot open '$T/does-not-exist.jsonl'"
expect 1 import "$T" && has "$T/err" "is a directory"
# a truncated gzip file
gzip -c "$MEMPLAY_SRC/traces/sample.jsonl" | head -c 20000 >"$T/cut.jsonl.gz"
expect 1 import "$T/cut.jsonl.gz" --name cut && has "$T/err" "truncated"
# a file of another kind
printf 'GIF89a\001\002' >"$T/pic.gif"
expect 1 import "$T/pic.gif" && has "$T/err" "not a trace format memplay knows"
[ "$(store_digest)" = "$digest" ] || fail "store changed after unreadable files"

# a store that is not a store, and one written by a newer memplay
echo "plain text" >"$T/text.db"
expect 1 --db "$T/text.db" list && has "$T/err" "not a memplay store"
cp "$DB" "$T/newer.db"
sqlite3 "$T/newer.db" "PRAGMA user_version = 99"
expect 1 --db "$T/newer.db" import "$MEMPLAY_SRC/traces/sample.jsonl" && has "$T/err" "newer memplay"
expect 1 --db "$T/newer.db" list && has "$T/err" "schema version 99"
expect 1 --db "$T/missing.db" list && has "$T/err" "no store at"
[ ! -e "$T/missing.db" ] || fail "list created a store"

# usage errors
expect 2 import && has "$T/err" "no FILE"
expect 2 import a b --name x && has "$T/err" "--name names one trace"
expect 2 import "$T/x" --format nosuch && has "$T/err" "unknown format 'nosuch'"
expect 2 import "$T/x" --name ""
finish
