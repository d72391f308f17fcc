-- allocator_settings.lua: allocator settings side by side on one trace.
--
-- Model: the same request stream replayed through each allocator model with each setting:
-- PyTorch's caching allocator as configured by PYTORCH_CUDA_ALLOC_CONF (expandable_segments,
-- max_split_size_mb, roundup_power2_divisions, garbage_collection_threshold, which acts only
-- with a per-process memory fraction), TensorFlow's BFC allocator (allow_growth, its
-- garbage collection) and cudaMallocAsync's pool, against the device's memory. Each model makes
-- the decisions the real allocator makes (docs/allocators.md); what differs between rows is only
-- the setting. The answer (last row) is the setting with the lowest peak reserved memory among
-- those under which nothing fails.
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
-- the answer: lowest peak reserved among those that fit
local best = nil
for i, r in ipairs(rows) do
  if r.result.ooms == 0 and (not best or r.result.peak_reserved_bytes < rows[best].result.peak_reserved_bytes) then best = i end
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
S:report{
  title = best and string.format('allocator settings on %s: lowest peak reserved with %s', S.info.name, rows[best].name)
    or string.format('allocator settings on %s: every setting fails on %s', S.info.name, S.capacity_label or 'the device'),
  columns = {{key = 'frag', title = 'fragmentation', format = 'percent'},
             {key = 'mallocs', title = 'driver allocations', format = 'int'}},
}
