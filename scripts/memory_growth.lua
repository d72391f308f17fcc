-- memory_growth.lua: TensorFlow's allow_growth on and off, per_process_gpu_memory_fraction, and
-- two processes sharing one GPU.
--
-- Model: TensorFlow places tensors through its GPU BFC allocator (the bfc model). Without
-- allow_growth, its first allocation takes the whole memory limit in one region: the free
-- memory it saw at start-up minus what TensorFlow leaves the system (225 MiB to 1.8 GiB by
-- compute capability); with allow_growth, regions start at 2 MiB and double. With
-- per_process_gpu_memory_fraction F, the limit is F times the card's memory. Two processes on
-- one GPU each run their own allocator on one physical memory: the second starts offset_s
-- seconds after the first and sees only what the first has not taken, so without growth the
-- first takes nearly everything and the second fails.
-- The answer (last variant) is the first setting, in the order allow_growth, the fraction,
-- under which both processes run without a failed allocation.
-- Parameters (--set):
--   second=TRACE   the other process's trace (default: this trace again)
--   offset_s=X     when the second process starts, after the first (default 0.001)
--   fraction=F     per_process_gpu_memory_fraction for the fraction variants (default 0.45)
--   capacity=SIZE  the card's memory (default: the --device profile's, else the recorded device's)
--   allocator      ignored: this scenario is about TensorFlow's allocator (bfc)
local S = memplay.scenario_context{allocator = 'bfc'}
if not S.capacity then error('memory_growth needs the card\'s memory: --device NAME or --set capacity=SIZE') end
local second_name = memplay.param('second', '')
local offset = memplay.param('offset_s', 0.001)
local fraction = memplay.param('fraction', 0.45)
if fraction <= 0 or fraction > 1 then error('--set fraction must be in (0, 1]') end
local t = S.trace:cache()
local second = second_name ~= '' and memplay.store():trace(second_name):cache() or t
local two = t:merge(second, {device = 1, offset_s = offset})

local function run(trace, spec, shared)
  return trace:replay{allocator = spec, capacity = S.capacity, total_memory = S.capacity, shared_device = shared or nil}
end

local function procs(r)
  local out = {}
  for _, d in ipairs(r.devices) do
    out[#out + 1] = string.format('%s%s', memplay.bytes(d.peak_reserved_bytes), d.ooms > 0 and ' (OOM)' or '')
  end
  return table.concat(out, ' + ')
end

local frac = string.format('per_process_gpu_memory_fraction=%g', fraction)
local results = {
  {name = 'one process, growth off (TensorFlow default)', r = run(t, 'bfc')},
  {name = 'one process, allow_growth', r = run(t, 'bfc:allow_growth=true')},
  {name = 'one process, fraction ' .. fraction, r = run(t, 'bfc:' .. frac)},
  {name = 'two processes, growth off', r = run(two, 'bfc', true), two = true},
}
local candidates = {
  {name = 'two processes, allow_growth', spec = 'bfc:allow_growth=true'},
  {name = 'two processes, fraction ' .. fraction .. ' each', spec = 'bfc:' .. frac},
}
for _, c in ipairs(candidates) do c.r = run(two, c.spec, true); c.two = true end
-- the answer goes last: the first candidate under which both processes fit
local answer = nil
for i, c in ipairs(candidates) do
  if c.r.ooms == 0 then answer = i; break end
end
answer = answer or 1
for i, c in ipairs(candidates) do if i ~= answer then results[#results + 1] = c end end
results[#results + 1] = candidates[answer]

for _, v in ipairs(results) do
  S:record(v.name, v.r, {processes = procs(v.r)})
end

memplay.assume('TensorFlow\'s GPU allocator (bfc) for every variant; the recorded allocator is not used')
memplay.assume(string.format('the second process (%s) starts %g s after the first and sees the memory the first has not taken',
  second_name ~= '' and second_name or 'this trace again', offset))
S:report{
  title = string.format('TensorFlow memory growth on %s: %s', S.capacity_label,
    candidates[answer].r.ooms == 0 and ('both processes run with ' .. candidates[answer].name:gsub('^two processes, ', ''))
    or 'no setting lets both processes run'),
  columns = {{key = 'processes', title = 'reserved per process'}},
}
