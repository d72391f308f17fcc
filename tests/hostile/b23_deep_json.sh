# B23: JSON nested a million levels deep, wherever memplay reads JSON whole: yajl frees a tree,
# and memplay walks one, by recursion, so such a value overflowed the stack (a segmentation fault
# of `compare --baseline`, `merge` and of a replay of a store whose trace attrs held one). Every
# such reader now refuses text nested deeper than 64 levels (jsonscan_tree) with an error that
# names the file or the store's field, and a JSON Lines value as deep is refused at its line.
. "$TESTS_DIR/cli/lib.sh"
deep() { python3 -c "import sys; d=int(sys.argv[1]); print(sys.argv[2] + '[' * d + ']' * d + sys.argv[3])" "$@"; }
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
deep 300000 '{"x":' '}' >"$T/deep.json"

# a comparison's baseline and a shard's results file
expect 1 compare s --policy torch --policy ideal --baseline "$T/deep.json" --no-save &&
  has "$T/err" "'$T/deep.json' is not JSON: nested deeper than 64 levels"
expect 1 merge "$T/deep.json" "$T/deep.json" && has "$T/err" "nested deeper than 64 levels"

# a JSON Lines value, as attrs of the header and as an event's args: refused at its line, the
# store as it was
digest=$(store_digest)
{ deep 300000 '{"memplay":1,"name":"d1","attrs":{"a":' '}}'; echo '{"kind":"alloc","ts":1,"addr":1,"size":512}'; } >"$T/d1.jsonl"
{ echo '{"memplay":1,"name":"d2"}'; deep 300000 '{"kind":"alloc","ts":1,"addr":1,"size":512,"args":{"a":' '}}'; } >"$T/d2.jsonl"
expect 1 import "$T/d1.jsonl" && has "$T/err" "d1.jsonl:1: a value nested deeper than 64 levels"
expect 1 import "$T/d2.jsonl" && has "$T/err" "d2.jsonl:2: a value nested deeper than 64 levels"
[ "$(store_digest)" = "$digest" ] || fail "a refused import changed the store"
# 60 levels are read (and a value of the same depth in attrs keeps it whole)
{ deep 60 '{"memplay":1,"name":"d60","attrs":{"a":' '}}'; echo '{"kind":"alloc","ts":1,"addr":1,"size":512}'; } >"$T/d60.jsonl"
expect 0 import "$T/d60.jsonl"
expect 0 info d60 --json && has "$T/out" "$(deep 60 '"a":' '' | tr -d '\n')"

# a store whose JSON fields were edited by hand (its schema is memplay's: it opens)
# sql PREFIX SUFFIX STATEMENT: runs STATEMENT on the store with a deep value where it says \0 (a
# million-byte argument is too long for exec)
sql() { deep 300000 "$1" "$2" | sed "s/'/''/g; s/.*/$3/" | sqlite3 "$DB" || fail "cannot edit the store"; }
sql '{"address_order":"up","x":' '}' "UPDATE traces SET attrs = '\\0' WHERE name = 's';"
[ "$(sqlite3 "$DB" "SELECT length(attrs) > 600000 FROM traces WHERE name = 's'")" = 1 ] || fail "the attrs were not edited"
expect 0 replay s --allocator torch --no-save && has "$T/out" "addresses           down"
sql '{"x":' '}' "UPDATE traces SET allocator_settings = '\\0', allocator = 'torch' WHERE name = 's';"
expect 1 replay s --allocator torch --no-save &&
  has "$T/err" "the recorded allocator settings are nested deeper than 64 levels"
expect 0 devices mine --from H100
sql '{"x":' '}' "UPDATE device_profiles SET params = '\\0' WHERE name = 'mine';"
expect 1 devices mine && has "$T/err" "column params): not a JSON object: nested deeper than 64 levels"
finish
