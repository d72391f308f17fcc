# A cached trace replayed again follows its plan (the engine's dense table of live records), and so
# do a comparison's cells after the first of each trace: every result must be the one the stored
# trace's replay gives, on real snapshots (one that grows from empty, a recorded window that starts
# from its rebuilt state, expandable segments), under every model.
. "$TESTS_DIR/cli/lib.sh"
need_traces

traces="kk_ctx128_fullstep bcrafton_warm_window bolong_expandable_fwd_ctx128_fp32 maph_single_stream"
for t in $traces; do expect 0 import "$MEMPLAY_TRACES/pytorch/$t.pickle"; done
cat >"$T/same.lua" <<'LUA'
-- the result's JSON less its clock
local function figures(r) return (memplay.json(r):gsub('"elapsed_s":[^,}]*', '')) end
local checked = 0
for _, name in ipairs{...} do
  local t = memplay.store():trace(name)
  local c = t:cache()
  for _, a in ipairs{'torch', 'torch:expandable_segments:True', 'bfc', 'async', 'cuda', 'ideal'} do
    local want = figures(t:replay{allocator = a})
    for k = 1, 3 do -- the first replay of the cached trace unplanned, the next ones planned
      local got = figures(c:replay{allocator = a})
      if got ~= want then error(name .. ' under ' .. a .. ', cached replay ' .. k .. ' differs from the stored trace\'s') end
      checked = checked + 1
    end
  end
  -- a capacity that runs out: the allocations dropped hold their addresses until freed
  local small = t:replay{allocator = 'torch'}.peak_reserved_bytes // 2
  local want = figures(t:replay{allocator = 'torch', capacity = small})
  for k = 1, 2 do
    if figures(c:replay{allocator = 'torch', capacity = small}) ~= want then error(name .. ': OOM replay differs') end
  end
  -- one-to-one transforms of the cached trace lend its plan (sizes, times and copies changed,
  -- kinds and addresses kept); the same transforms of the stored trace are replayed without one
  local function chain(x)
    return x:scale{factor = 1.5}:scale{kind = 'memcpy', factor = 2}:scale_time{factor = 0.5}
  end
  for _, a in ipairs{'torch', 'bfc', 'cuda'} do
    local want = figures(chain(t):replay{allocator = a, capacity = small})
    if figures(chain(c):replay{allocator = a, capacity = small}) ~= want then
      error(name .. ' under ' .. a .. ': the transformed cached trace differs from the transformed stored trace')
    end
    checked = checked + 1
  end
end
print('checked ' .. checked)
LUA
# shellcheck disable=SC2086
expect 0 run --no-save "$T/same.lua" $traces
has "$T/out" "checked 84"

# a comparison's cells: each model under two capacities that both hold the peak, so that the second
# cell of a model (planned) must give the first's figures
expect 0 compare kk_ctx128_fullstep bcrafton_warm_window --policy torch@100GiB --policy torch@101GiB \
  --policy cuda@100GiB --policy cuda@101GiB --jobs 1 --no-save --format csv
awk -F, 'NR > 1 { key = $2 FS $5; row = $4; for (i = 8; i <= 14; i++) row = row FS $i
                  if (key in seen && seen[key] != row) bad = bad $0 "\n"; seen[key] = row; n++ }
         END { printf "%s", bad; if (n != 8) print "expected 8 cells, got " n }' "$T/out" >"$T/bad"
[ -s "$T/bad" ] && fail "a planned cell differs from the unplanned one: $(cat "$T/bad")"
# a comparison's scenario cells replay the cached events, and transforms of them, with the
# comparison's plan (the store's): the same cells as from a copy of the store without plans
cp "$DB" "$T/noplan.db"
sqlite3 "$T/noplan.db" "DELETE FROM event_plans"
for db in "$DB" "$T/noplan.db"; do
  expect 0 --db "$db" compare kk_ctx128_fullstep bcrafton_warm_window --policy torch --policy bfc --scenario batch_size \
    --set new_batch=16 --set batch=4 --jobs 1 --no-save --format csv
  cut -d, -f1-15 "$T/out" >"$db.cells"
done
cmp -s "$DB.cells" "$T/noplan.db.cells" ||
  fail "scenario cells differ with the store's plan: $(diff "$DB.cells" "$T/noplan.db.cells" | head -c 600)"
grep -c '^[0-9]' "$DB.cells" | grep -qx 4 || fail "expected 4 scenario cells: $(cat "$DB.cells")"
finish
