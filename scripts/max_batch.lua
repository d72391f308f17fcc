-- max_batch.lua: the largest batch that fits a device, under a given allocator and settings.
--
-- Model: the batch model of batch_size.lua (activation-like memory and kernel time scale with
-- the batch; parameters, gradients and optimizer state do not), replayed through the allocator
-- against the device's memory for each batch tried. A batch fits when no allocation fails
-- (the allocator's own recovery, such as freeing its cache and retrying, included). Memory
-- only grows with the batch, so the search brackets the answer around a first guess (the
-- recorded batch scaled by the free memory over the memory that scales with the batch) and
-- bisects; every replay tried stops at its first failed allocation.
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

local probes = {}
local function fits(b)
  if probes[b] then return probes[b].fits, probes[b] end
  local r = S:replay(at_batch(b), {stop_at_oom = true, timeline_points = 2, top_sites = 1, max_ooms = 1, device = false})
  probes[b] = r
  return r.fits, r
end

-- A first guess from the recorded batch: the memory that scales with the batch, at the peak.
local base = S:replay(t)
local lt = t:lifetimes()
local scaling = 0
if lt.categorized_allocs > 0 then
  for _, c in ipairs{'activation', 'input', 'temporary'} do scaling = scaling + (base.at_peak.by_category[c] or 0) end
else
  scaling = base.peak_allocated_bytes - lt.persistent_bytes
end
local guess = old
if scaling > 0 and base.peak_allocated_bytes < S.capacity then
  -- what the allocator holds beyond what is allocated grows with the batch too: leave it room
  local overhead = math.max(1.0, math.min(1.5, base.peak_reserved_bytes / base.peak_allocated_bytes))
  guess = math.floor(old * (1 + (S.capacity / overhead - base.peak_allocated_bytes) / scaling))
end
guess = math.max(multiple, math.min(max, guess // multiple * multiple))

-- bracket the answer around the guess (steps of 1/8, growing), then bisect
local lo_ok, hi_bad = nil, nil
local step = math.max(multiple, guess // 8 // multiple * multiple)
if fits(guess) then
  lo_ok = guess
  while not hi_bad do
    local b = math.min(max, lo_ok + step)
    if b <= lo_ok then break end
    if fits(b) then lo_ok = b; step = step * 2 else hi_bad = b end
  end
else
  hi_bad = guess
  while not lo_ok and hi_bad > multiple do
    local b = math.max(multiple, hi_bad - step)
    if fits(b) then lo_ok = b else hi_bad = b; step = step * 2 end
    if b == multiple and not lo_ok then break end
  end
end
while lo_ok and hi_bad and hi_bad - lo_ok > multiple do
  local mid = (lo_ok + (hi_bad - lo_ok) // 2) // multiple * multiple
  if mid <= lo_ok then break end
  if fits(mid) then lo_ok = mid else hi_bad = mid end
end
local best = lo_ok
local probes_made = 0
for _ in pairs(probes) do probes_made = probes_made + 1 end

-- A batch that does not fit: its row shows the peak it would need (replayed again without a
-- capacity, the probe having stopped at its first failed allocation) and by how much it misses.
local function record_miss(b)
  local need = S:replay(at_batch(b), {capacity = false, device = false, timeline_points = 2, top_sites = 1})
  local short = need.peak_reserved_bytes - S.capacity
  local fits = short > 0 and string.format('no: %s short', memplay.bytes(short))
    or 'no: fragmentation (needs less than the capacity in all)'
  S:record(string.format('batch %d (does not fit)', b), probes[b],
    {batch = b, peak_allocated = need.peak_allocated_bytes, peak_reserved = need.peak_reserved_bytes, fits = fits})
  memplay.assume(string.format('batch %d would need %s reserved (%s allocated) with unlimited memory: %s more than %s',
    b, memplay.bytes(need.peak_reserved_bytes), memplay.bytes(need.peak_allocated_bytes),
    memplay.bytes(math.max(0, short)), memplay.bytes(S.capacity)))
end

S:record(string.format('batch %d (recorded)', old), base, {batch = old})
if best then
  if hi_bad then record_miss(hi_bad) end
  local r = S:replay(at_batch(best))
  S:record(string.format('batch %d (largest that fits)', best), r, {batch = best})
else
  record_miss(multiple)
end

memplay.assume(string.format('searched batches %d..%d in multiples of %d from a first guess of %d: %d replays, each stopped at its first failed allocation', multiple, max, multiple, guess, probes_made))
memplay.assume('activation-like memory scales with the batch; parameters, gradients and optimizer state do not (batch_size.lua)')
if best == max and S.trace:summary().allocs == 0 then
  memplay.assume('the trace records no allocations: every batch fits, and the answer is only the search\'s upper bound (--set max)')
end
S:report{
  title = best and string.format('largest batch on %s under %s: %d', S.capacity_label, S.allocator, best)
    or string.format('no batch fits %s under %s, not even %d', S.capacity_label, S.allocator, multiple),
  before = {{key = 'batch', title = 'batch'}},
}
