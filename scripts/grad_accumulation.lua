-- grad_accumulation.lua: k micro-batches per optimizer step, the same samples per step.
--
-- Model: each micro-batch runs forward and backward on batch/k samples, so activation-like
-- memory and the kernels that scale with the batch shrink by k (the batch model of
-- batch_size.lua); forward and backward run k times; the optimizer runs once. Gradients are
-- made by the first micro-batch and kept: in the later ones each gradient is computed into a
-- fresh buffer and added in place (allocated and freed at once). Parameters and optimizer state
-- do not change.
-- The step transformed is the trace's last but one with an optimizer in it (one a later step
-- delimits; every step's activations shrink, only this one's forward and backward repeat, and
-- the step time is this step's); forward and backward are its events from the first after any
-- optimizer work that
-- precedes forward (zero_grad) up to the optimizer's first event after forward began (an
-- allocation at an optimizer call site or an optimizer kernel), or to the step's end when the
-- optimizer cannot be found. Forward begins at the step's first activation-like allocation, or
-- in a trace without allocations at its first kernel or input copy.
-- Parameters (--set):
--   k=N          micro-batches per step (default 4)
--   floor_us=X   launch-bound kernel time that does not scale (default 3)
--   allocator=SPEC, capacity=SIZE, batch=N  as for every scenario (batch: samples per step)
local S = memplay.scenario_context()
local t = S.trace:cache()
local k = memplay.param('k', 4)
local floor_us = memplay.param('floor_us', 3.0)
if k < 1 then error('--set k must be at least 1') end

-- The step: the last one with an optimizer in it (else the last one), or the whole trace.
-- Forward starts at the step's first activation-like allocation; the block repeated starts
-- after whatever optimizer work (zero_grad) comes before it, and ends at the optimizer's first
-- event after it.
local pf = memplay.flags.preexisting
local function first(filter)
  for ev in t:events(filter) do return ev.seq end
  return nil
end
local function last(filter)
  local seq = nil
  for ev in t:events(filter) do seq = ev.seq end
  return seq
end
local function optimizer_after(lo, hi)
  local a = first{seq = {lo, hi}, site_match = memplay.optimizer_sites}
  local b = first{seq = {lo, hi}, kind = 'kernel', class = 'optimizer'}
  if a and b then return math.min(a, b) end
  return a or b
end
-- forward's first event: the first activation-like allocation, else (a trace that records no
-- allocations, such as a profile of kernels and copies) the first kernel or input copy
local no_activations = false
local function forward_start(lo, hi)
  local a = first(memplay.activation_filter{kind = 'alloc', seq = {lo, hi}})
  if a then return a end
  local kern = first{seq = {lo, hi}, kind = 'kernel', exclude_site_match = memplay.optimizer_sites}
  local copy = first{seq = {lo, hi}, kind = 'memcpy', dir = 'h2d'}
  local b = kern and copy and math.min(kern, copy) or kern or copy
  if b then no_activations = true end
  return b
end
-- The step: the last but one with an optimizer in it (a step a later one delimits, so that
-- its predicted time is its own), else the last.
local steps = t:steps()
local lo, hi, step_no, fwd, opt = 0, math.maxinteger, nil, nil, nil
local order = {}
for i = #steps - 1, 1, -1 do order[#order + 1] = i end
if #steps > 0 then order[#order + 1] = #steps end
for _, i in ipairs(order) do
  local f = forward_start(steps[i].first_seq, steps[i].last_seq)
  local o = f and optimizer_after(f, steps[i].last_seq)
  if o or (not step_no and i == order[#order]) then
    lo, hi, step_no, fwd, opt = steps[i].first_seq, steps[i].last_seq, steps[i].step, f, o
    if o then break end
  end
end
if #steps == 0 then
  fwd = forward_start(lo, hi)
  opt = fwd and optimizer_after(fwd, hi)
end
if not fwd then error('the trace has no activation-like allocations, kernels or input copies to accumulate over') end
if no_activations then
  memplay.assume('the trace has no activation-like allocations: forward taken to begin at the step\'s first kernel or input copy, and memory does not change')
end
local lead = last{seq = {lo, fwd}, site_match = memplay.optimizer_sites}
local from = lead and lead + 1 or nil
if not from then
  for ev in t:events{seq = {lo, fwd}} do
    if ev.flags & pf == 0 then from = ev.seq; break end
  end
end
from = from or fwd
local to = opt or (hi == math.maxinteger and t:summary().events or hi + 1)
if not opt then memplay.assume('no optimizer found in the step: the whole step repeats, the optimizer included') end

local f = 1 / k
local micro = t:scale(memplay.activation_filter{factor = f})
  :scale{kind = 'memcpy', dir = 'h2d', factor = f}
  :scale_time{class = {'matmul', 'conv', 'attention', 'norm', 'softmax', 'reduction', 'elementwise', 'copy', 'other'},
              exclude_site_match = memplay.optimizer_sites, factor = f, fixed_ns = math.floor(floor_us * 1000)}
local accumulated = micro:repeat_block{from = from, to = to, times = k, once = {category = 'gradient'},
                                       once_transient = true}
-- A step marker that records the step's length (a profiler's span) is stretched by the copies.
local span_from, span_to = nil, nil
for ev in t:events{seq = {from, to}} do
  span_from = span_from or ev.ts
  span_to = ev.ts
end
local stretch = (k - 1) * ((span_to or 0) - (span_from or 0))
if step_no and stretch > 0 then
  accumulated = accumulated:map(function(ev)
    if ev.flags & memplay.flags.step_begin ~= 0 and ev.dur > 0 and ev.step == step_no then ev.dur = ev.dur + stretch end
  end, {kind = 'marker', seq = {lo, lo}})
end

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
