# memplay.write_csv with a table of 100,000 rows (it crashed past about 110): every row written and
# read back as it was, quoting included.
. "$TESTS_DIR/cli/lib.sh"

cat >"$T/many.lua" <<'LUA'
local rows = {}
for i = 1, 100000 do
  rows[i] = {n = i, size = i * 4096, label = (i % 7 == 0) and ('a,"b" ' .. i) or ('row' .. i), ok = i % 2 == 0}
end
memplay.write_csv('many.csv', rows, {'n', 'size', 'label', {key = 'ok', title = 'even'}})
memplay.write_csv('keys.csv', {rows[1], rows[2], rows[14]})
LUA
mkdir "$T/out.d"
expect 0 run --out "$T/out.d" "$T/many.lua"
csv="$T/out.d/many.csv"
[ -f "$csv" ] || fail "many.csv not written"
[ "$(wc -l <"$csv")" = 100001 ] || fail "many.csv has $(wc -l <"$csv") lines, wanted 100,001"
[ "$(head -1 "$csv")" = "n,size,label,even" ] || fail "header: $(head -1 "$csv")"
[ "$(sed -n 2p "$csv")" = "1,4096,row1,false" ] || fail "row 1: $(sed -n 2p "$csv")"
[ "$(sed -n 8p "$csv")" = '7,28672,"a,""b"" 7",false' ] || fail "row 7: $(sed -n 8p "$csv")"
[ "$(tail -1 "$csv")" = "100000,409600000,row100000,true" ] || fail "last row: $(tail -1 "$csv")"
# every row's number and size, in order
awk -F, 'NR > 1 && ($1 != NR - 1 || $2 != $1 * 4096) { bad++ } END { exit bad ? 1 : 0 }' "$csv" ||
  fail "rows out of order or changed"
[ "$(cat "$T/out.d/keys.csv" | head -1)" = "label,n,ok,size" ] || fail "keys.csv header: $(head -1 "$T/out.d/keys.csv")"
[ "$(sed -n 4p "$T/out.d/keys.csv")" = '"a,""b"" 14",14,true,57344' ] || fail "keys.csv row 3: $(sed -n 4p "$T/out.d/keys.csv")"
finish
