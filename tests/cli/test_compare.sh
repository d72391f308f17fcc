# test_compare.sh: `memplay compare` and `merge`: the matrix and its outputs, runs stored with a comparison id,
# --jobs, shards (by hand and through GNU parallel) merged equal to one run, regressions and exit statuses, progress.
. "$TESTS_DIR/cli/lib.sh"

for s in 1 2 3 4; do expect 0 gen --events 1500 --seed $s --name "job$s" || exit 1; done
expect 0 gen --events 500 --seed 9 --name other
P=(--policy torch --policy 'torch:expandable_segments:True' --policy 'bfc:allow_growth=true' --policy async)

# same_json A B: the two JSON files hold the same object (cell by cell, field by field).
same_json() {
  python3 - "$1" "$2" <<'PY' || fail "$1 and $2 differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for i, (x, y) in enumerate(zip(a["cells"], b["cells"])):
    if x != y:
        sys.exit("cell %d differs: %s vs %s" % (i, x, y))
if a != b:
    sys.exit("the results differ outside their cells")
PY
}

# The matrix: 'job*' matches four traces, not 'other'; 16 cells, each stored as a run of one comparison.
expect 0 compare 'job*' "${P[@]}" --json --quiet
cp "$T/out" "$T/saved.json"
python3 - "$T/saved.json" <<'PY' || fail "compare --json: $(head -c 300 "$T/saved.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["format"] == "memplay-compare" and r["format_version"] == 1 and r["memplay_version"], r
assert r["traces"] == ["job1", "job2", "job3", "job4"], r["traces"]
assert r["cells_total"] == 16 and len(r["cells"]) == 16 and r["reference"] == "torch"
keys = {"index", "trace", "policy", "status", "error", "allocator", "settings", "device", "capacity_bytes",
        "memplay_version", "events", "peak_allocated_bytes", "peak_reserved_bytes", "fragmentation",
        "device_mallocs", "device_maps", "ooms", "step_time_s", "samples_per_s", "fits", "vs_reference", "run_id"}
for i, c in enumerate(r["cells"]):
    assert set(c) == keys, set(c) ^ keys
    assert c["index"] == i and c["status"] == "ok" and c["run_id"] > 0
    assert c["trace"] == r["traces"][i // 4] and c["policy"] == r["policies"][i % 4]
    assert c["settings"]["model"] in ("torch", "bfc", "async"), c["settings"]
    assert c["peak_reserved_bytes"] >= c["peak_allocated_bytes"] > 0
    # gen records an H100: the time model runs on its profile
    assert c["device"] == "H100" and (c["step_time_s"] is None or c["step_time_s"] > 0), c
    if c["policy"] == "torch":
        assert c["vs_reference"]["peak_reserved"] == 0
assert r["cells"][5]["settings"]["options"] == {"expandable_segments": "True"}, r["cells"][5]["settings"]
assert r["summary"]["verdict"] == "pass" and r["comparison_id"]
PY
cid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["comparison_id"])' "$T/saved.json")
[ "$(sqlite3 "$DB" "SELECT count(*) FROM runs WHERE kind = 'compare' AND scenario = '$cid'")" = 16 ] ||
  fail "the 16 cells are not stored as runs of comparison $cid"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM runs WHERE json_extract(result, '\$.comparison_id') = '$cid' AND variant = 'bfc:allow_growth=true'")" = 4 ] ||
  fail "the runs' result JSON lacks the comparison id"

# Each cell's settings hold its own trace's recorded settings and window start: traces of different
# recorded settings (and one with none) in one comparison, read from one snapshot of the store
# (--no-save), whose worker keeps one trace's row and settings for the cells that follow.
sdb="$T/settings.db"
for f in expandable tiny_p4 interleaved; do
  expect 0 --db "$sdb" import "$MEMPLAY_SRC/tests/data/snapshots/$f.pickle" || exit 1
done
expect 0 --db "$sdb" compare '*' --policy torch --policy 'torch:max_split_size_mb=64' --policy bfc --no-save --json --quiet
sqlite3 -json "$sdb" "SELECT name, allocator_settings, attrs FROM traces" >"$T/traces.json"
python3 - "$T/out" "$T/traces.json" <<'PY' || fail "compare: a cell's settings are not its trace's: $(head -c 300 "$T/out")"
import json, sys
r = json.load(open(sys.argv[1]))
rows = {t["name"]: t for t in json.load(open(sys.argv[2]))}
assert len(r["traces"]) == 5 and len(r["cells"]) == 15, r["traces"]
seen = set()
for c in r["cells"]:
    t, s = rows[c["trace"]], c["settings"]
    mine = s["model"] == "torch"  # the recorded settings are the recording allocator's
    want = json.loads(t["allocator_settings"]) if mine and t["allocator_settings"] else None
    assert s["recorded"] == want, (c["trace"], c["policy"], s["recorded"], want)
    assert s["options"] == ({"max_split_size_mb": "64"} if c["policy"].startswith("torch:") else {}), s
    window = '"window":true' in t["attrs"].replace(" ", "")
    if mine and c["policy"] == "torch" and window:
        assert s["window_start"]["state"] in ("rebuilt", "live_set") and s["window_start"]["assumption"], s
    seen.add(json.dumps(s["recorded"], sort_keys=True))
assert len(seen) >= 3, seen  # expandable, max_split_size_mb:128, none
PY

# The table for people, Markdown, CSV.
expect 0 compare 'job*' "${P[@]}" --no-save --quiet
has "$T/out" "torch:expandable_segments:True"
has "$T/out" "16 cells (4 traces x 4 policies), reference policy 'torch'"
expect 0 compare 'job*' "${P[@]}" --no-save --quiet --format markdown
python3 - "$T/out" <<'PY' || fail "markdown is not a table: $(head -c 400 "$T/out")"
import re, sys
lines = open(sys.argv[1]).read().split("\n")
rows = lines[:18]
cells = lambda l: [c.strip() for c in re.split(r"(?<!\\)\|", l)[1:-1]]
head = cells(rows[0])
assert head[:2] == ["trace", "policy"], head
assert all(re.fullmatch(r":?-{3,}:?", c) for c in cells(rows[1])), rows[1]  # the delimiter row
assert all(l.startswith("|") and l.endswith("|") and len(cells(l)) == len(head) for l in rows), rows
assert lines[18] == "", "the table ends with a blank line"
PY
expect 0 compare 'job*' "${P[@]}" --no-save --quiet --format csv
[ "$(wc -l <"$T/out")" = 17 ] || fail "csv: not a header and 16 rows"
head -1 "$T/out" | grep -q '^index,trace,policy,status,allocator,device,capacity_bytes,events,peak_allocated_bytes,' ||
  fail "csv header: $(head -1 "$T/out")"

# --jobs 2 gives the same result as --jobs 1, in the same order.
expect 0 compare 'job*' "${P[@]}" --no-save --quiet --json --jobs 1 && cp "$T/out" "$T/j1.json"
expect 0 compare 'job*' "${P[@]}" --no-save --quiet --json --jobs 2 && cp "$T/out" "$T/j2.json"
cmp -s "$T/j1.json" "$T/j2.json" || same_json "$T/j1.json" "$T/j2.json"
# More workers than traces: the cells of one trace are spread over the workers, which read its
# events once and share them; the same result as one worker, with a scenario too. A trace whose
# events cannot be read fails its own cells, each with the reason, whichever worker read it.
expect 0 compare job1 job2 "${P[@]}" --no-save --quiet --json --jobs 1 && cp "$T/out" "$T/few1.json"
expect 0 compare job1 job2 "${P[@]}" --no-save --quiet --json --jobs 5 && cp "$T/out" "$T/few5.json"
cmp -s "$T/few1.json" "$T/few5.json" || same_json "$T/few1.json" "$T/few5.json"
S=(job1 job2 --policy torch --policy async --scenario batch_size --set new_batch=16 --set batch=4 --no-save --quiet --json)
expect 0 compare "${S[@]}" --jobs 1 && cp "$T/out" "$T/sc1.json"
expect 0 compare "${S[@]}" --jobs 3 && cp "$T/out" "$T/sc3.json"
cmp -s "$T/sc1.json" "$T/sc3.json" || same_json "$T/sc1.json" "$T/sc3.json"
# A recorded window (a snapshot begun mid-run) replays from the state validate rebuilds at its
# start; the workers rebuild it once and share it: each cell as one worker makes it, and the
# recorded allocator's cell as `replay` (which differs from a start from the live blocks).
W="${MEMPLAY_TRACES:-}/pytorch/bcrafton_warm_window.pickle"
if [ -n "${MEMPLAY_TRACES:-}" ] && [ -f "$W" ]; then
  expect 0 import "$W" --name warm
  WP=(--policy torch --policy torch@8GiB --policy 'torch:expandable_segments:True' --no-save --quiet --json)
  expect 0 compare warm "${WP[@]}" --jobs 1 && cp "$T/out" "$T/w1.json"
  expect 0 compare warm "${WP[@]}" --jobs 3 && cp "$T/out" "$T/w3.json"
  cmp -s "$T/w1.json" "$T/w3.json" || same_json "$T/w1.json" "$T/w3.json"
  expect 0 replay warm --no-save --json && rebuilt=$(json_get peak_reserved_bytes)
  expect 0 replay warm --no-save --json --live-start && live=$(json_get peak_reserved_bytes)
  [ "$rebuilt" != "$live" ] || fail "warm: the rebuilt start and the live set give the same peak ($live)"
  python3 - "$T/w3.json" "$rebuilt" <<'PY' || fail "compare of a window on 3 workers: not replay's rebuilt start"
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
assert cells[0]["policy"] == "torch" and cells[0]["peak_reserved_bytes"] == int(sys.argv[2]), cells[0]
PY
fi
# Stored cells of one trace on two workers go in by batches of up to 64 a transaction: 140 cells
# (about 70 a worker, so each worker commits a full batch and then the rest), every one stored
# once, as the run its cell names, with the cell's figures.
BP=(); for k in $(seq 1 140); do BP+=(--policy "torch@$((60000 + k))MiB"); done
expect 0 compare job1 "${BP[@]}" --json --quiet --jobs 2 && cp "$T/out" "$T/batch.json"
python3 - "$T/batch.json" "$DB" <<'PY' || fail "140 stored cells on 2 workers: $(head -c 400 "$T/batch.json")"
import json, sqlite3, sys
r = json.load(open(sys.argv[1]))
cells = r["cells"]
assert len(cells) == 140 and all(c["status"] == "ok" and c["run_id"] > 0 for c in cells), cells[:2]
assert len({c["run_id"] for c in cells}) == 140, "two cells name one run"
db = sqlite3.connect(sys.argv[2])
rows = {i: (v, a, b) for i, v, a, b in db.execute(
    "SELECT id, variant, peak_allocated, peak_reserved FROM runs WHERE kind = 'compare' AND scenario = ?",
    (r["comparison_id"],))}
assert len(rows) == 140, len(rows)
for c in cells:
    assert rows[c["run_id"]] == (c["policy"], c["peak_allocated_bytes"], c["peak_reserved_bytes"]), (c, rows[c["run_id"]])
PY
cp "$DB" "$T/damaged.db"
python3 - "$T/damaged.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
tid, = db.execute("SELECT id FROM traces WHERE name = 'job2'").fetchone()
data, = db.execute("SELECT data FROM event_chunks WHERE trace_id = ? AND chunk = 0", (tid,)).fetchone()
b = bytearray(data)
b[len(b) // 2] ^= 0x10
db.execute("UPDATE event_chunks SET data = ? WHERE trace_id = ? AND chunk = 0", (bytes(b), tid))
db.commit()
PY
expect 1 --db "$T/damaged.db" compare job1 job2 "${P[@]}" --no-save --jobs 5 --json
python3 - "$T/out" <<'PY' || fail "compare of a damaged trace on 5 workers: $(head -c 400 "$T/out")"
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
assert [c["trace"] for c in cells] == ["job1"] * 4 + ["job2"] * 4, cells
assert all(not c.get("error") for c in cells[:4]), cells[:4]
assert all("trace 'job2'" in c["error"] and "chunk 0 fails its checksum" in c["error"] for c in cells[4:]), cells[4:]
PY

# Shards 1/3, 2/3, 3/3 read the store read-only (immutable: no lock, no -wal or -shm file, store
# unchanged) and merge into exactly the unsharded result.
mkdir "$T/ro" && cp "$DB" "$T/ro/store.db" && before=$(md5sum <"$T/ro/store.db")
for k in 1 2 3; do
  "$MEMPLAY" --db "$T/ro/store.db" compare 'job*' "${P[@]}" --shard $k/3 --results "$T/s$k.json" --quiet >/dev/null ||
    fail "shard $k/3"
done
[ "$(ls "$T/ro")" = store.db ] || fail "a shard left files beside the store: $(ls "$T/ro")"
[ "$(md5sum <"$T/ro/store.db")" = "$before" ] || fail "a shard changed the store"
expect 0 merge "$T/s3.json" "$T/s1.json" "$T/s2.json" --json && cp "$T/out" "$T/merged.json"
same_json "$T/j1.json" "$T/merged.json"
expect 0 merge "$T/s1.json" "$T/s2.json" "$T/s3.json" && has "$T/out" "16 cells (4 traces x 4 policies)"

# The same sweep through GNU parallel (tools/deps.sh installs it), then merged.
if ! command -v parallel >/dev/null; then
  fail "GNU parallel is not installed (tools/deps.sh installs it)"
else
  parallel --will-cite -j 3 "$MEMPLAY" --db "$DB" compare "'job*'" --policy torch --policy "'torch:expandable_segments:True'" \
    --policy "'bfc:allow_growth=true'" --policy async --shard {}/3 --results "$T/p{}.json" --quiet ::: 1 2 3 >/dev/null ||
    fail "the shards through GNU parallel failed"
  expect 0 merge "$T"/p*.json --json && same_json "$T/j1.json" "$T/out"
fi

# Missing, duplicate and foreign shards are errors that name them.
expect 1 merge "$T/s1.json" "$T/s3.json" && has "$T/err" "missing shard 2/3"
expect 1 merge "$T/s1.json" "$T/s2.json" "$T/s2.json" "$T/s3.json" && has "$T/err" "shard 2/3 given twice"
"$MEMPLAY" compare 'job*' --policy torch --shard 2/3 --results "$T/f2.json" --quiet >/dev/null
expect 1 merge "$T/s1.json" "$T/f2.json" "$T/s3.json" && has "$T/err" "shards of different comparisons"
expect 1 merge "$T/j1.json" && has "$T/err" "is not a shard"

# Regression mode: a baseline whose peak is 5% lower for one cell gives exit 3 and names the cell;
# the same check against the unchanged baseline passes.
python3 - "$T/j1.json" "$T/lowered.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["cells"][6]  # job2 under bfc:allow_growth=true
c["peak_reserved_bytes"] = int(c["peak_reserved_bytes"] * 0.95)
json.dump(r, open(sys.argv[2], "w"))
PY
expect 0 compare 'job*' "${P[@]}" --no-save --quiet --baseline "$T/j1.json" --fail-if 'peak_reserved > +2%' --fail-if 'ooms > 0'
has "$T/out" "0 regressions against"
expect 3 compare 'job*' "${P[@]}" --no-save --quiet --baseline "$T/lowered.json" --fail-if 'peak_reserved > +2%' --fail-if 'ooms > 0'
has "$T/out" "1 regression against"
has "$T/out" "job2 / bfc:allow_growth=true: peak_reserved"
has "$T/out" "+5.26%) crosses 'peak_reserved > +2%'"
expect 0 compare 'job*' "${P[@]}" --no-save --quiet --baseline "$T/lowered.json" --fail-if 'peak_reserved > +2%' --no-fail
expect 3 merge "$T/s1.json" "$T/s2.json" "$T/s3.json" --json --baseline "$T/lowered.json" --fail-if 'peak_reserved>+2%'
python3 - "$T/out" <<'PY' || fail "regression JSON: $(head -c 300 "$T/out")"
import json, sys
r = json.load(open(sys.argv[1]))
(g,) = r["check"]["regressions"]
assert (g["trace"], g["policy"], g["metric"], g["against"]) == ("job2", "bfc:allow_growth=true", "peak_reserved", "baseline"), g
assert g["after"] > g["before"] and r["summary"]["verdict"] == "regression"
PY
# --html: the same table (the regressed cell highlighted, the rest not) and, per trace, every
# policy's curves and its map at its peak; the same page with 1 and 2 threads, stdout unchanged.
REG=(compare 'job*' "${P[@]}" --no-save --quiet --baseline "$T/lowered.json" --fail-if 'peak_reserved > +2%')
expect 3 "${REG[@]}" --jobs 1 && cp "$T/out" "$T/plain.txt"
expect 3 "${REG[@]}" --jobs 1 --html "$T/r1.html" && cmp -s "$T/out" "$T/plain.txt" || fail "--html changed stdout"
expect 3 "${REG[@]}" --jobs 2 --html "$T/r2.html"
cmp -s "$T/r1.html" "$T/r2.html" || fail "--html: --jobs 1 and --jobs 2 wrote different pages"
expect 0 replay job2 --allocator 'bfc:allow_growth=true' --at peak --json
segs=$(grep -o '"blocks":' "$T/out" | wc -l)
python3 - "$T/r1.html" "$T/plain.txt" "$segs" <<'PY' || fail "compare --html: $(head -c 300 "$T/r1.html")"
import re, sys
h, plain, segs = open(sys.argv[1]).read(), open(sys.argv[2]).read(), int(sys.argv[3])
rows = re.findall(r'<tr class="cell( regressed)?" data-cell="(\d+)">(.*?)</tr>', h)
assert len(rows) == 16, len(rows)
assert [int(r[1]) for r in rows if r[0]] == [6], [r[1] for r in rows if r[0]]
cells = re.findall(r'<td class="([^"]*)">([^<]*)</td>', rows[6][2])
assert [c for c in cells if "regressed" in c[0]] == [("num regressed", cells[3][1]), ("regressed", "peak_reserved")], cells
# every table row shows the text table's cells
for r in rows:
    texts = [t for _, t in re.findall(r'<td class="([^"]*)">([^<]*)</td>', r[2])]
    line = next(l for l in plain.splitlines() if l.split()[:2] == texts[:2])
    assert line.split() == " ".join(texts).split(), (line, texts)
assert "1 regression against" in h and "crosses 'peak_reserved &gt; +2%'" in h
figs = h.split('<div class="figure">')[1:]
assert len(figs) == 4, len(figs)
for name, f in zip(["job1", "job2", "job3", "job4"], figs):
    assert f'>{name}: 4 policies, segment maps at each peak</text>' in f, name
    assert f.count('class="series"') == 8 and f.count('class="segment-map"') == 4, name
    for p in ["torch", "torch:expandable_segments:True", "bfc:allow_growth=true", "async"]:
        assert f'>{p} at the peak (event ' in f, (name, p)
assert f'data-segments="{segs}"' in figs[1].split('class="segment-map"')[3], "job2/bfc segments"
PY
expect 1 "${REG[@]}" --html "$T" && has "$T/err" "$T"
expect 2 merge "$T/s1.json" "$T/s2.json" "$T/s3.json" --html "$T/m.html" && has "$T/err" "--html needs the replays"
[ ! -e "$T/m.html" ] || fail "merge --html wrote a page"

# Cells on one side only are reported; without a baseline a relative threshold compares with the reference.
expect 0 compare 'job1' 'job2' --policy torch --policy async --no-save --quiet --baseline "$T/j1.json" --fail-if 'ooms > 0'
has "$T/out" "job3 / torch: in the baseline, not in this run"
expect 3 compare 'job1' --policy torch --policy 'bfc:allow_growth=true' --no-save --quiet --fail-if 'peak_reserved > +1%'
has "$T/out" "(reference policy"
# An absolute threshold, and a capacity that does not fit: exit 3 unless --no-fail.
expect 3 compare 'job1' --policy torch --no-save --quiet --fail-if 'fragmentation >= 0'
expect 3 compare 'job*' --policy torch --capacity 1GiB --no-save --quiet && has "$T/out" "4 do not fit"
expect 0 compare 'job*' --policy torch --capacity 1GiB --no-save --quiet --no-fail
expect 3 compare 'job1' --policy 'torch@1GiB' --policy torch --no-save --quiet --json
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert [c["fits"] for c in r["cells"]] == [False, True] and r["cells"][0]["capacity_bytes"] == 1 << 30, r' "$T/out" ||
  fail "a policy's own capacity"

# --scenario: each cell is the scenario's last variant under the cell's policy, as whatif computes it.
expect 0 compare job1 job2 --policy torch --policy 'torch:expandable_segments:True' --scenario batch_size \
  --set new_batch=16 --set batch=4 --quiet --json && cp "$T/out" "$T/scen.json"
expect 0 whatif job2 batch_size --set new_batch=16 --set batch=4 --set 'allocator=torch:expandable_segments:True' --no-save --json
python3 - "$T/scen.json" "$T/out" <<'PY' || fail "compare --scenario differs from whatif"
import json, sys
r, w = (json.load(open(p)) for p in sys.argv[1:3])
c, v = r["cells"][3], w["variants"][-1]
assert (r["scenario"], r["scenario_params"]) == ("batch_size", ["new_batch=16", "batch=4"]), r
assert (c["trace"], c["policy"]) == ("job2", "torch:expandable_segments:True"), c
for k in ("peak_allocated_bytes", "peak_reserved_bytes", "ooms", "step_time_s", "events"):
    assert c[k] == v[k], (k, c[k], v[k])
PY
expect 2 compare job1 --policy torch --scenario batch_size --set allocator=bfc && has "$T/err" "each policy gives the scenario"
expect 2 compare job1 --policy torch --set new_batch=2 && has "$T/err" "--set needs a --scenario"
expect 1 compare job1 --policy torch --scenario no_such_scenario && has "$T/err" "no_such_scenario"

# The exit status across commands: replay with a capacity that does not fit exits 3, --no-fail 0.
expect 3 replay job1 --capacity 1GiB --no-save && has "$T/out" "OOMs"
expect 0 replay job1 --capacity 1GiB --no-save --no-fail
expect 0 replay job1 --no-save
# whatif: 3 when no variant of the scenario fits.
expect 3 whatif job1 batch_size --set capacity=1GiB --no-save
expect 0 whatif job1 batch_size --set capacity=1GiB --no-save --no-fail

# A cell that fails does not stop the others: reported, exit 1.
# (the same traces, job3's first allocation moved to device 99)
expect 0 export job3 -o "$T/job3.jsonl"
python3 -c 'import json,sys
lines = [json.loads(l) for l in open(sys.argv[1])]
first = next(o for o in lines if o.get("kind") == "alloc")
first["device"] = 99
open(sys.argv[2], "w").write("".join(json.dumps(o) + "\n" for o in lines))' "$T/job3.jsonl" "$T/bad3.jsonl"
for s in 1 2 3 4; do
  if [ $s = 3 ]; then expect 0 --db "$T/bad.db" import "$T/bad3.jsonl" --name job3 || exit 1
  else expect 0 --db "$T/bad.db" gen --events 1500 --seed $s --name "job$s" || exit 1; fi
done
expect 1 --db "$T/bad.db" compare 'job*' --policy torch --policy async --no-save --quiet --json
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert [c["status"] for c in r["cells"]] == ["ok"]*4 + ["failed"]*2 + ["ok"]*2 and "out of range" in r["cells"][4]["error"], r["cells"]' "$T/out" ||
  fail "the failed cells: $(head -c 300 "$T/out")"

# Bad input: a clear message, exit 2 (usage) or 1 (a file), nothing written.
digest=$(store_digest)
expect 2 compare 'job*' --policy nosuch --results "$T/x.json" && has "$T/err" "nosuch"
expect 2 compare 'job*' --policy torch:no_such_option:1 && has "$T/err" "no_such_option"
expect 2 compare 'job*' --policy torch --fail-if 'peak > +x%' && has "$T/err" "unknown metric 'peak'"
expect 2 compare 'job*' --policy torch --fail-if 'peak_reserved > +x%' && has "$T/err" "is not a number"
expect 2 compare 'job*' --policy torch --fail-if 'peak_reserved = 3' && has "$T/err" "expected >, >=, < or <="
expect 2 compare 'nomatch*' --policy torch --results "$T/x.json" && has "$T/err" "no trace matches 'nomatch*'"
expect 2 compare 'job*' --policy torch --shard 3/2 && has "$T/err" "--shard wants K/N"
expect 2 compare 'job*' --policy torch --shard 0/0 && has "$T/err" "--shard wants K/N"
expect 2 compare 'job*' --policy torch --reference 2 && has "$T/err" "--reference 2"
expect 2 compare 'job*' --policy torch --format html
expect 2 compare 'job*' && has "$T/err" "no --policy"
expect 2 compare 'job*' --policy torch --device NoSuchGPU && has "$T/err" "no device profile 'NoSuchGPU'"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["format_version"] = 7; json.dump(r, open(sys.argv[2], "w"))' "$T/j1.json" "$T/v7.json"
expect 1 compare 'job*' --policy torch --baseline "$T/v7.json" --results "$T/x.json" && has "$T/err" "format version 7"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); [c.pop("peak_reserved_bytes") for c in r["cells"]]; json.dump(r, open(sys.argv[2], "w"))' "$T/j1.json" "$T/old.json"
expect 1 compare 'job*' --policy torch --baseline "$T/old.json" && has "$T/err" "cells[0]: 'peak_reserved_bytes' is missing"
expect 1 compare 'job*' --policy torch --baseline "$T/nosuch.json" && has "$T/err" "nosuch.json"
[ ! -e "$T/x.json" ] || fail "a refused compare wrote its results file"
[ "$(store_digest)" = "$digest" ] || fail "a refused compare changed the store"

# A cell answers as replay does: the same peaks, fragmentation, driver calls, OOMs and step time
# (its copies fitted from the events the worker holds, replay's from the store). A cell that is not
# stored is a lean replay (no timeline, no state at the peak); on a device too small, with OOMs, too.
for cap in "" "--capacity 600MiB"; do
  want=0 && [ -n "$cap" ] && want=3 # a predicted OOM is the answer "no"
  # shellcheck disable=SC2086
  expect $want replay job2 --allocator torch --json --no-save $cap
  cp "$T/out" "$T/replay_job2.json"
  # shellcheck disable=SC2086
  expect $want compare job2 --policy torch --json --no-save $cap
  python3 - "$T/replay_job2.json" "$T/out" "$cap" <<'PY' || fail "a compare cell differs from replay ($cap)"
import json, sys
r = json.load(open(sys.argv[1]))
c = json.load(open(sys.argv[2]))["cells"][0]
for k in ("peak_allocated_bytes", "peak_reserved_bytes", "fragmentation", "device_mallocs", "ooms", "step_time_s"):
    assert r[k] == c[k], (k, r[k], c[k])
assert (r["ooms"] > 0) == bool(sys.argv[3]), r["ooms"]
PY
done

# Progress: one line redrawn on a terminal's stderr, nothing in a pipe.
expect 0 compare 'job*' --policy torch --no-save
[ ! -s "$T/err" ] || fail "progress in a pipe: $(head -c 200 "$T/err")"
# on_tty NAME [--both] ARGS...: memplay ARGS on a terminal; what the terminal got in $T/tty, the
# command's own stdout (when not on the terminal) in $T/tty.out
on_tty() {
  local name=$1
  shift
  local both=()
  [ "$1" = --both ] && both=(--both) && shift
  python3 "$TESTS_DIR/cli/pty_run.py" "${both[@]}" "$MEMPLAY" "$@" >"$T/tty" 2>"$T/tty.out" ||
    fail "$name: exit $? on a terminal"
}
# tty_has NAME PYTHON-BYTES-EXPRESSION: the terminal's bytes (b) satisfy the expression
tty_has() {
  python3 -c 'import sys; b = open(sys.argv[1], "rb").read(); sys.exit(0 if eval(sys.argv[2]) else 1)' "$T/tty" "$2" ||
    fail "$1: $(head -c 300 "$T/tty" | od -c | head -5)"
}
on_tty compare --db "$DB" compare 'job*' --policy torch --no-save
tty_has "compare progress" 'b"\rcompare: 4/4 cells (100%)" in b and b.endswith(b"\r\x1b[K")'
grep -q "compare:" "$T/tty.out" && fail "compare progress on stdout"
# whatif: replays done, the line erased before the scenario prints its table.
on_tty whatif --both --db "$DB" whatif job1 batch_size --no-save
tty_has "whatif progress" 'b"\rwhatif: 1 replays" in b and b"\r\x1b[Kbatch size: " in b'
expect 0 whatif job1 batch_size --no-save
[ ! -s "$T/err" ] || fail "whatif progress in a pipe: $(head -c 200 "$T/err")"
# import: the file read so far (KiB of KiB), the line erased before the summary.
on_tty import --db "$T/progress.db" import "$MEMPLAY_SRC/traces/sample.jsonl"
size=$(($(stat -c %s "$MEMPLAY_SRC/traces/sample.jsonl") / 1024))
tty_has "import progress" "b'\\rimport: ' in b and b'/$size KiB' in b and b.endswith(b'\\r\\x1b[K')"
grep -q "imported 'sample'" "$T/tty.out" || fail "import summary not on stdout: $(cat "$T/tty.out")"
expect 0 --db "$T/progress2.db" import "$MEMPLAY_SRC/traces/sample.jsonl"
[ ! -s "$T/err" ] || fail "import progress in a pipe: $(head -c 200 "$T/err")"

finish
