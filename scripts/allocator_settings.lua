-- allocator_settings.lua: allocator settings side by side on one trace.
--
-- Model: the same request stream replayed through each allocator model with each setting:
-- PyTorch's caching allocator as configured by PYTORCH_CUDA_ALLOC_CONF (expandable_segments,
-- max_split_size_mb, roundup_power2_divisions, garbage_collection_threshold, which acts only
-- with a per-process memory fraction), TensorFlow's BFC allocator (allow_growth, its
-- garbage collection) and cudaMallocAsync's pool, against the device's memory. Each model makes
-- the decisions the real allocator makes (docs/allocators.md); what differs between rows is only
-- the setting. The answer (last row) weighs, in this order: whether it fits (no failed
-- allocation; else fewer failures), then peak reserved memory (peaks within 1% of each other
-- count as equal), then the predicted step time (with --device: expandable segments map memory
-- and garbage collection frees it, which costs time); the report says which of these decided.
-- Parameters (--set):
--   max_split_mb=N       max_split_size_mb to try (default 256)
--   divisions=N          roundup_power2_divisions to try (default 4)
--   gc_threshold=X       garbage_collection_threshold to try (default 0.6), with fraction
--   fraction=X           per-process memory fraction for the threshold row (default 0.9)
--   settings=LIST        only these rows, by their names, separated by ';' (default: all)
--   capacity=SIZE        the memory to fit in (default: the --device profile's, else the recorded device's)
local S = memplay.scenario_context()
local t = S.trace:cache()
local max_split = memplay.param('max_split_mb', 256)
local divisions = memplay.param('divisions', 4)
local gc = memplay.param('gc_threshold', 0.6)
local fraction = memplay.param('fraction', 0.9)
local only = memplay.param('settings', '')

local models = {}
for _, a in ipairs(memplay.allocators()) do models[a.name] = a end

local rows = {}
local function add(name, spec)
  if models[spec:match('^[^:]+')] then rows[#rows + 1] = {name = name, spec = spec} end
end
add('torch default', 'torch')
add('torch expandable_segments', 'torch:expandable_segments:True')
add('torch max_split_size_mb=' .. max_split, 'torch:max_split_size_mb:' .. max_split)
add('torch roundup_power2_divisions=' .. divisions, 'torch:roundup_power2_divisions:' .. divisions)
add(string.format('torch gc threshold %g, fraction %g', gc, fraction),
    string.format('torch:garbage_collection_threshold:%g,per_process_memory_fraction:%g', gc, fraction))
add('tensorflow bfc', 'bfc')
add('tensorflow bfc allow_growth', 'bfc:allow_growth=true')
add('cudaMallocAsync', 'async')
add('cudaMallocAsync, pool kept', 'async:release_threshold=max')
add('cudaMalloc per tensor', 'cuda')

if only ~= '' then
  local keep = {}
  for name in only:gmatch('[^;]+') do keep[name:match('^%s*(.-)%s*$')] = true end
  local picked = {}
  for _, r in ipairs(rows) do if keep[r.name] then picked[#picked + 1] = r end end
  if #picked == 0 then error('--set settings: none of the names given is a row of this scenario') end
  rows = picked
end

-- the first row replays the trace under its own allocator, unchanged
local first = {name = 'as recorded (' .. S.allocator .. ')', spec = S.allocator}
for _, r in ipairs(rows) do
  r.result = S:replay(t, {allocator = r.spec})
end
first.result = S:replay(t, {allocator = first.spec})
-- the answer: fits (fewest failures) first, then peak reserved (within 1%: equal), then step time
local TOLERANCE = 0.01
local function close(a, b) return math.abs(a - b) <= TOLERANCE * math.max(a, b) end
-- which of the three decides between a and b (nil: nothing does); better(a, b) is a before b
local function decider(a, b)
  local ra, rb = a.result, b.result
  if ra.ooms ~= rb.ooms then return 'fits' end
  if not close(ra.peak_reserved_bytes, rb.peak_reserved_bytes) then return 'peak' end
  if ra.step_time_s and rb.step_time_s and ra.step_time_s ~= rb.step_time_s then return 'time' end
  return nil
end
local function better(a, b)
  local ra, rb = a.result, b.result
  local d = decider(a, b)
  if d == 'fits' then return ra.ooms < rb.ooms end
  if d == 'peak' then return ra.peak_reserved_bytes < rb.peak_reserved_bytes end
  if d == 'time' then return ra.step_time_s < rb.step_time_s end
  return false
end
local best = nil
for i, r in ipairs(rows) do
  if not best or better(r, rows[best]) then best = i end
end
-- why it won: what separates it from the runner-up
local why = nil
if best then
  local w, runner = rows[best], nil
  for i, r in ipairs(rows) do
    if i ~= best and (not runner or better(r, runner)) then runner = r end
  end
  local wr = w.result
  if not runner then
    why = 'the only setting tried'
  else
    local rr, d = runner.result, decider(w, runner)
    if d == 'fits' then
      why = wr.ooms == 0 and string.format('it fits, and the next best, %s, fails %d allocation%s', runner.name, rr.ooms, rr.ooms == 1 and '' or 's')
        or string.format('it fails the fewest allocations (%d; %s fails %d)', wr.ooms, runner.name, rr.ooms)
    elseif d == 'peak' then
      why = string.format('%s: the lowest peak reserved (%s; %s needs %s, %s more)',
        wr.ooms == 0 and 'of the settings that fit' or 'with as few failures as any', memplay.bytes(wr.peak_reserved_bytes),
        runner.name, memplay.bytes(rr.peak_reserved_bytes), memplay.bytes(rr.peak_reserved_bytes - wr.peak_reserved_bytes))
    elseif d == 'time' then
      why = string.format('peak reserved within 1%% of %s\'s (%s against %s), and faster: %.3f ms a step against %.3f ms',
        runner.name, memplay.bytes(wr.peak_reserved_bytes), memplay.bytes(rr.peak_reserved_bytes),
        wr.step_time_s * 1e3, rr.step_time_s * 1e3)
    else
      why = string.format('as good as %s on fit, peak reserved and time: listed first', runner.name)
    end
  end
end
local order = {first}
for i, r in ipairs(rows) do if i ~= best then order[#order + 1] = r end end
if best then order[#order + 1] = rows[best] end

for _, r in ipairs(order) do
  local res = r.result
  S:record(r.name, res, {spec = r.spec, frag = res.fragmentation_gmlake, mallocs = res.device_mallocs + res.device_maps})
end
memplay.assume('every model replays the same requests; recorded settings are used only by the model that recorded the trace')
if not models.torch then memplay.assume('the torch model is not in this build: its rows are left out') end
if not S.device then
  memplay.assume('no step time without --device NAME: settings of equal fit and peak are not told apart by their cost in time')
end
S:report{
  title = best and string.format('allocator settings on %s: recommended %s (%s)%s', S.info.name, rows[best].name, why,
      rows[best].result.ooms > 0 and string.format('; every setting fails on %s', S.capacity_label or 'the device') or '')
    or string.format('allocator settings on %s: no setting to compare', S.info.name),
  columns = {{key = 'frag', title = 'fragmentation', format = 'percent'},
             {key = 'mallocs', title = 'driver allocations', format = 'int'}},
}
