# B25: a device profile as a store keeps it (device_profiles.params, JSON) is input too: a store made
# elsewhere or edited by hand held a bandwidth of 0, a memory of 1e300 bytes (cast to garbage), no
# copy engine or a context larger than the memory, and replays used it without a word (a context
# of 1e19 bytes made every allocation an OOM, exit 3). Each field is now held to the range
# `devices --set` holds it to, and the profile to the same check, when it is read: exit 1, naming
# the profile, the table and the field.
. "$TESTS_DIR/cli/lib.sh"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
expect 0 devices mine --from H100
# edit '"KEY":VALUE': the profile's params with that member's value replaced, as text (1e400 too)
edit() {
  python3 - "$DB" "$1" <<'PY'
import re, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
p = c.execute("SELECT params FROM device_profiles WHERE name = 'mine'").fetchone()[0]
key = sys.argv[2].split(":")[0]
p, n = re.subn(re.escape(key) + r":[^,}]*", sys.argv[2], p)
assert n == 1, (key, p)
c.execute("UPDATE device_profiles SET params = ? WHERE name = 'mine'", (p,))
c.commit()
PY
}
expect 0 replay s --device mine --no-save
good=$(sqlite3 "$DB" "SELECT params FROM device_profiles WHERE name = 'mine'")
for bad in '"mem_bw":0|'"device 'mine': 'mem_bw' must be greater than zero" \
  '"total_memory":1e300|'"field 'total_memory' is out of range (1e300)" \
  '"copy_engines":0|'"device 'mine': 'copy_engines' must be greater than zero" \
  '"copy_engines":2.5|'"field 'copy_engines' is out of range (2.5)" \
  '"launch_overhead":1e400|'"field 'launch_overhead' is out of range (1e400)" \
  '"context_bytes":1e15|'"device 'mine': 'context_bytes' must be less than 'total_memory'"; do
  edit "${bad%%|*}"
  expect 1 replay s --device mine --no-save &&
    has "$T/err" "cannot read device profile 'mine' (table device_profiles, column params): ${bad#*|}"
  expect 1 devices mine && has "$T/err" "${bad#*|}"
  sqlite3 "$DB" "UPDATE device_profiles SET params = '$good' WHERE name = 'mine'"
done
expect 0 replay s --device mine --no-save
finish
