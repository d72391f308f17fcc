-- grad_accumulation.lua: k micro-batches per optimizer step, the same samples per step.
--
-- Model: each micro-batch runs forward and backward on batch/k samples, so activation-like
-- memory and the kernels that scale with the batch shrink by k (the batch model of
-- batch_size.lua); forward and backward run k times; the optimizer runs once. Gradients are
-- made by the first micro-batch and kept: in the later ones each gradient is computed into a
-- fresh buffer and added in place (allocated and freed at once). Parameters and optimizer state
-- do not change.
-- The step transformed is the trace's last step (steps after it are dropped); forward and
-- backward are its events from its first that is not preexisting up to the optimizer's first
-- (an allocation at an optimizer call site or an optimizer kernel), or the whole step when the
-- optimizer cannot be found.
-- Parameters (--set):
--   k=N          micro-batches per step (default 4)
--   floor_us=X   launch-bound kernel time that does not scale (default 3)
--   allocator=SPEC, capacity=SIZE, batch=N  as for every scenario (batch: samples per step)
local S = memplay.scenario_context()
local t = S.trace:cache()
local k = memplay.param('k', 4)
local floor_us = memplay.param('floor_us', 3.0)
if k < 1 then error('--set k must be at least 1') end

-- the step: the last one with an optimizer in it (else the last one), or the whole trace
local pf = memplay.flags.preexisting
local function optimizer_in(lo, hi)
  local first = nil
  for ev in t:events{seq = {lo, hi}, site_match = memplay.optimizer_sites} do first = ev.seq; break end
  for ev in t:events{seq = {lo, hi}, kind = 'kernel', class = 'optimizer'} do
    if not first or ev.seq < first then first = ev.seq end
    break
  end
  return first
end
local steps = t:steps()
local lo, hi, step_no, opt = 0, math.maxinteger, nil, nil
for i = #steps, 1, -1 do
  local o = optimizer_in(steps[i].first_seq, steps[i].last_seq)
  if o or i == #steps then
    lo, hi, step_no, opt = steps[i].first_seq, steps[i].last_seq, steps[i].step, o
    if o then break end
  end
end
if #steps == 0 then opt = optimizer_in(lo, hi) end
local from = nil
for ev in t:events{seq = {lo, hi}} do
  if ev.flags & pf == 0 then from = ev.seq; break end
end
if not from then error('the trace has no events to accumulate over') end
if opt and opt <= from then opt = nil end
local to = opt or (hi == math.maxinteger and t:summary().events or hi + 1)
if not opt then memplay.assume('no optimizer found in the step: the whole step repeats, the optimizer included') end

local trimmed = t
if step_no and step_no < steps[#steps].step then trimmed = t:drop_steps{step_no + 1, math.maxinteger} end
local f = 1 / k
local micro = trimmed:scale(memplay.activation_filter{factor = f})
  :scale{kind = 'memcpy', dir = 'h2d', factor = f}
  :scale_time{class = {'matmul', 'conv', 'attention', 'norm', 'softmax', 'reduction', 'elementwise', 'copy', 'other'},
              exclude_site_match = memplay.optimizer_sites, factor = f, fixed_ns = math.floor(floor_us * 1000)}
local accumulated = micro:repeat_block{from = from, to = to, times = k, once = {category = 'gradient'},
                                       once_transient = true}

-- the step's own predicted time (the trace's other steps are not what changes)
local function step_time(r)
  if not r.time or not step_no then return nil end
  for _, st in ipairs(r.time.steps) do
    if st.step == step_no and st.complete then return st.predicted_s end
  end
  return nil
end

local base = S:replay(t)
S:record('as recorded (1 micro-batch)', base, {micro = S.batch, step_time = step_time(base)})
local r = S:replay(accumulated)
S:record(string.format('%d micro-batches', k), r, {micro = S.batch and S.batch / k, step_time = step_time(r)})

memplay.assume(string.format('the step transformed: %s, forward and backward = events %d..%d, repeated %d times',
  step_no and ('step ' .. step_no) or 'the whole trace', from, to - 1, k))
memplay.assume('gradients (by category, else allocations that outlive their step) are made once; later micro-batches add into them')
if step_no then memplay.assume(string.format('step time: step %d\'s, as predicted', step_no)) end
memplay.assume(string.format('activation-like memory and kernel time scale by 1/%d per micro-batch (batch_size.lua)', k))
S:report{
  title = string.format('gradient accumulation over %d micro-batches on %s (allocator %s)', k, S.info.name, S.allocator),
  before = {{key = 'micro', title = 'samples per micro-batch', format = '%.4g'}},
}
