-- batch_size.lua: the same training (or inference) step at another batch size.
--
-- Model:
--   * memory that holds per-sample data scales with the batch: activations, inputs and
--     temporaries (by category; where a trace has no categories, transient allocations, i.e.
--     those freed within the step that made them). Sizes scale by new/old batch.
--   * parameters, gradients and optimizer state do not change, nor does anything the optimizer's
--     own code allocates (its call sites: torch/optim, Adam, _foreach_, zero_grad, ...).
--   * kernels scale with the batch except optimizer kernels: the part of each kernel's time above
--     a fixed launch-bound floor (--set floor_us, default 3 us) scales by new/old batch. GPUs get
--     more efficient at larger batches, which this ignores: at larger batches the predicted step
--     time is an upper bound, at smaller ones a lower bound.
--   * input copies (host to device) scale in size and time.
--   * the allocator (torch by default for PyTorch traces) decides peak reserved memory, by replay.
-- Parameters (--set):
--   batch=N      samples per step in the trace as recorded (default: the trace's batch size)
--   new_batch=N  the batch to predict (default: twice the recorded one)
--   floor_us=X   launch-bound part of a kernel that does not scale (default 3)
--   allocator=SPEC, capacity=SIZE  as for every scenario (defaults: the recorded allocator, the device's memory)
local S = memplay.scenario_context()
local t = S.trace:cache()
local old = S.batch or 1
if not S.batch then
  memplay.assume('the trace does not say its batch size: --set batch=N; taken as 1, so new_batch is a multiple')
end
local new = memplay.param('new_batch', 2 * old)
local floor_us = memplay.param('floor_us', 3.0)
if new <= 0 then error('--set new_batch must be at least 1') end
local f = new / old

-- The trace at another batch: the model above as transforms.
local function at_batch(base, factor)
  if factor == 1 then return base end
  return base:scale(memplay.activation_filter{factor = factor})
    :scale{kind = 'memcpy', dir = 'h2d', factor = factor}
    :scale_time{class = {'matmul', 'conv', 'attention', 'norm', 'softmax', 'reduction', 'elementwise', 'copy', 'other'},
                exclude_site_match = memplay.optimizer_sites, factor = factor, fixed_ns = math.floor(floor_us * 1000)}
end

local function cat_bytes(r, names)
  local total = 0
  for _, c in ipairs(names) do total = total + (r.at_peak.by_category[c] or 0) end
  return total
end

local function row(r, b)
  return {batch = b, activation_bytes = cat_bytes(r, {'activation', 'input', 'temporary', 'unknown'}),
          parameter_bytes = cat_bytes(r, {'parameter', 'optimizer_state', 'gradient'})}
end

local base = S:replay(t)
S:record(string.format('batch %d (recorded)', old), base, row(base, old))
local scaled = S:replay(at_batch(t, f))
S:record(string.format('batch %d', new), scaled, row(scaled, new))

memplay.assume(string.format('activation-like memory and kernel time scale by %d/%d = %.3g; parameters, gradients and optimizer state do not', new, old, f))
memplay.assume(string.format('kernels keep a %.3g us launch-bound floor; larger batches are not assumed more efficient', floor_us))
local lt = t:lifetimes()
if lt.categorized_allocs == 0 then
  memplay.assume('the trace has no categories: transient allocations (freed in the step that made them) stand for activations')
end
S:report{
  title = string.format('batch size: %d -> %d on %s (allocator %s)', old, new, S.info.name, S.allocator),
  before = {{key = 'batch', title = 'batch'}},
  columns = {{key = 'activation_bytes', title = 'activations at peak', format = 'bytes'},
             {key = 'parameter_bytes', title = 'params+grads+optim at peak', format = 'bytes'}},
}
