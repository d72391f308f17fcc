-- max_batch.lua: the largest batch that fits a device, under a given allocator and settings.
--
-- Model: the batch model of batch_size.lua (activation-like memory and kernel time scale with
-- the batch; parameters, gradients and optimizer state do not), replayed through the allocator
-- against the device's memory for each batch tried. A batch fits when no allocation fails
-- (the allocator's own recovery, such as freeing its cache and retrying, included). Memory
-- only grows with the batch, so the search doubles from the recorded batch until a batch does
-- not fit, then bisects: about 2 log2(answer) replays, each stopped at its first failure.
-- Parameters (--set):
--   batch=N       samples per step in the trace as recorded (default: the trace's batch size)
--   max=N         the largest batch to try (default 65536)
--   multiple=N    only try multiples of N (default 1)
--   floor_us=X    launch-bound kernel time that does not scale (default 3)
--   capacity=SIZE the memory to fit in (default: the --device profile's, else the recorded device's)
--   allocator=SPEC  as for every scenario
local S = memplay.scenario_context()
if not S.capacity then
  error('max_batch needs a capacity: --device NAME or --set capacity=SIZE (e.g. 24GB)')
end
local old = S.batch or 1
if not S.batch then memplay.assume('the trace does not say its batch size: --set batch=N; taken as 1') end
local max = memplay.param('max', 65536)
local multiple = memplay.param('multiple', 1)
local floor_us = memplay.param('floor_us', 3.0)
if multiple < 1 or max < multiple then error('--set multiple and max must be at least 1, with max >= multiple') end

-- The base trace is read once into memory: every probe replays it through a fresh chain.
local t = S.trace:cache()
t:lifetimes() -- computed once here, shared by every probe's filters

local function at_batch(b)
  local f = b / old
  if f == 1 then return t end
  local a = memplay.activation_filter{factor = f}
  return t:scale(a)
    :scale{kind = 'memcpy', dir = 'h2d', factor = f}
    :scale_time{class = {'matmul', 'conv', 'attention', 'norm', 'softmax', 'reduction', 'elementwise', 'copy', 'other'},
                factor = f, fixed_ns = math.floor(floor_us * 1000)}
end

local function fits(b)
  local r = S:replay(at_batch(b), {stop_at_oom = true, timeline_points = 2, top_sites = 1, max_ooms = 1, device = false})
  return r.fits, r
end

local probes_made = 0
local best = memplay.search{
  lo = multiple, hi = max // multiple * multiple, start = math.max(multiple, old // multiple * multiple),
  test = function(b)
    probes_made = probes_made + 1
    return fits(b // multiple * multiple)
  end,
}
if best then best = best // multiple * multiple end

local base = S:replay(t)
S:record(string.format('batch %d (recorded)', old), base, {batch = old})
if best then
  -- the first batch that does not fit, to show why
  local over = best + multiple
  if over <= max then
    local r = S:replay(at_batch(over))
    S:record(string.format('batch %d (does not fit)', over), r, {batch = over})
  end
  local r = S:replay(at_batch(best))
  S:record(string.format('batch %d (largest that fits)', best), r, {batch = best})
else
  local r = S:replay(at_batch(multiple))
  S:record(string.format('batch %d (does not fit)', multiple), r, {batch = multiple})
end

memplay.assume(string.format('searched batches %d..%d in multiples of %d with %d replays', multiple, max, multiple, probes_made))
memplay.assume('activation-like memory scales with the batch; parameters, gradients and optimizer state do not (batch_size.lua)')
S:report{
  title = best and string.format('largest batch on %s under %s: %d', S.capacity_label, S.allocator, best)
    or string.format('no batch fits %s under %s, not even %d', S.capacity_label, S.allocator, multiple),
  before = {{key = 'batch', title = 'batch'}},
}
