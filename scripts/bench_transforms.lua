-- bench_transforms.lua: what streaming transforms cost over a plain replay (a benchmark, not a scenario).
--
--   memplay gen --events 1000000 --seed 1 --name big
--   memplay run scripts/bench_transforms.lua big [ALLOCATOR] [REPEATS] [timed]
--
-- The trace is read into memory once; each row replays it through one transform chain (the
-- best of REPEATS runs, CPU time) and compares with the plain replay. The transforms are given
-- neutral values (factors of 1, copies pinned to where they are), so that every row replays
-- the same requests and the difference is the transforms' own cost: filters evaluated, sizes
-- and durations computed, one more source per event. The last row replays the batch model at
-- twice the batch: a different workload, for the cost of a scenario's replay as a whole.
-- Replays are of memory only (device = false), as a search's probes are: no time prediction;
-- with `timed`, they also predict the time on the trace's device, as a scenario's variants do.
local name, allocator, repeats, timed = ...
if not name then error('usage: memplay run scripts/bench_transforms.lua TRACE [ALLOCATOR] [REPEATS] [timed]') end
if timed ~= nil and timed ~= 'timed' then error("bench_transforms.lua: the fourth argument is 'timed' or nothing") end
allocator = allocator or 'cuda'
repeats = math.tointeger(tonumber(repeats or '3')) or 3
local t = memplay.store():trace(name):cache()
local n = t:summary().events
t:lifetimes()

local function best(tr)
  local b = math.huge
  for _ = 1, repeats do
    local c0 = os.clock()
    if timed then tr:replay{allocator = allocator, timeline_points = 100}
    else tr:replay{allocator = allocator, timeline_points = 100, device = false} end
    local c = os.clock() - c0
    if c < b then b = c end
  end
  return b
end

local function batch_model(f)
  return t:scale(memplay.activation_filter{factor = f})
    :scale{kind = 'memcpy', dir = 'h2d', factor = f}
    :scale_time{class = {'matmul', 'conv', 'attention', 'norm', 'softmax', 'reduction', 'elementwise', 'copy', 'other'},
                factor = f, fixed_ns = 3000}
end
local chains = {
  {'plain replay', t},
  {'scale (categories)', t:scale{category = 'activation', factor = 1}},
  {'scale (lifetimes)', t:scale{lifetime = 'transient', factor = 1}},
  {'scale_time (kernels)', t:scale_time{factor = 1}},
  {'pin (copies)', t:pin{mem = {'pinned', 'pageable'}, to = 'pinned', async = true}},
  {'drop (nothing matches)', t:drop{kind = 'kernel', name = 'no such kernel'}},
  {'batch model, factor 1 (3 transforms)', batch_model(1.0)},
  {'batch model at 2x (another workload)', batch_model(2.0)},
}
local rows = {}
local plain
for _, c in ipairs(chains) do
  local s = best(c[2])
  plain = plain or s
  rows[#rows + 1] = {chain = c[1], seconds = s, rate = n / s / 1e6, overhead = s / plain - 1}
end
memplay.print_table(rows, {{key = 'chain', title = 'transform chain'}, {key = 'seconds', title = 'seconds', format = '%.3f'},
  {key = 'rate', title = 'M events/s', format = '%.1f'}, {key = 'overhead', title = 'over plain', format = 'percent'}})
print(string.format('%d events, allocator %s, best of %d%s', n, allocator, repeats,
  timed and ', with the time model' or ', memory only'))
