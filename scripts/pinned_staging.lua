-- pinned_staging.lua: input copies from pageable memory, or through pinned staging buffers.
--
-- Model: a host-to-device copy from pageable memory is staged by the driver through a small
-- pinned bounce buffer, in chunks, and the host waits for it (cudaMemcpyAsync from pageable
-- memory is synchronous in effect); from pinned memory the copy is a DMA at the link's pinned
-- bandwidth and runs asynchronously, overlapping the kernels queued before it. Pinned staging
-- buffers (the DataLoader's pin_memory, or buffers of one's own) are allocated once with
-- cudaMallocHost, which costs time by size (pinning pages), and stay allocated: that host
-- memory is the price. Copying a batch into the staging buffer is the loader's work on its own
-- thread, off the training loop's critical path.
-- Variants: the trace as recorded; its copies all from pageable memory; its copies through
-- `buffers` pinned staging buffers (the answer).
-- Transfer times, overlap and the allocation cost come from the time model on the device
-- given with --device; without one, the table shows memory only.
-- Parameters (--set):
--   buffers=N          staging buffers (default 2: one filling while one is copied)
--   buffer_size=SIZE   each buffer's size (default: the largest input copy, rounded up to 2 MiB)
--   allocator=SPEC, capacity=SIZE, batch=N  as for every scenario
local S = memplay.scenario_context()
local t = S.trace:cache()
local buffers = memplay.param('buffers', 2)
if buffers < 1 then error('--set buffers must be at least 1') end

local largest, n_h2d, bytes_h2d, n_pageable = 0, 0, 0, 0
local pageable_copies = {} -- the recorded pageable copies with a duration: {size, dur}
for ev in t:events{kind = 'memcpy', dir = 'h2d'} do
  n_h2d = n_h2d + 1
  bytes_h2d = bytes_h2d + ev.size
  if ev.size > largest then largest = ev.size end
  if ev.mem == 'pageable' then
    n_pageable = n_pageable + 1
    if ev.dur and ev.dur > 0 then pageable_copies[#pageable_copies + 1] = {ev.size, ev.dur} end
  end
end
local two_mib = 2 * 1024 * 1024
local default_size = math.max(two_mib, (largest + two_mib - 1) // two_mib * two_mib)
local buffer_size = memplay.size_param('buffer_size', default_size)
if n_h2d > 0 and buffer_size < largest then
  memplay.assume(string.format('staging buffers of %s are smaller than the largest copy (%s): it is copied in pieces',
    memplay.bytes(buffer_size), memplay.bytes(largest)))
end

-- every host-to-device copy from pageable memory, synchronous
local pageable = t:pin{to = 'pageable', mem = {'pinned', 'pageable', 'unknown'}, async = false}
-- every host-to-device copy from pinned staging buffers allocated at the start
local staged = t:pin{mem = {'pageable', 'unknown', 'pinned'}, async = true}
local ins = {}
for i = 1, buffers do
  ins[i] = {kind = 'host_alloc', mem = 'pinned', addr = i, size = buffer_size, device = -1}
end
staged = staged:insert{events = ins, at = 'start'}

-- copy time on the critical path, and how much of the device's copy time other work hides
local function row(r)
  local tm = r.time
  if not tm then return {pinned = r.host_pinned_peak_bytes} end
  local on_path = tm.breakdown_s.copies
  local busy = tm.device_busy_s.copies
  return {pinned = r.host_pinned_peak_bytes, copy_time = on_path,
          overlap = busy > 0 and math.max(0, 1 - on_path / busy) or nil}
end

local base = S:replay(t)
S:record('as recorded', base, row(base))
local rp = S:replay(pageable)
S:record('pageable copies', rp, row(rp))
local rs = S:replay(staged)
S:record(string.format('%d pinned staging buffers', buffers), rs, row(rs))

-- The check against the trace's own copies (on the machine it was recorded on, where the time
-- model fits copy times from them): what its recorded pageable copies took, against what its
-- pinned copies' fit says the same copies would take pinned, and the gain the variants predict
-- for them (the pinned variant's pinned copy time less the recorded pinned copies', against
-- the recorded pageable copies' predicted time).
local function class(r, kind, large)
  for _, c in ipairs(r.time and r.time.copies or {}) do
    if c.kind == kind and (c.size == 'at least 1 MiB') == large then return c end
  end
  return nil
end
local function fit_of(r, kind, large)
  for _, c in ipairs(r.time and r.time.copy_fit or {}) do
    if c.kind == kind and (c.size == 'at least 1 MiB') == large then return c end
  end
  return nil
end
if base.time and base.time.copy_fit and #pageable_copies > 0 then
  local rec, pinned_fit, missing = 0, 0, false
  for _, c in ipairs(pageable_copies) do
    local f = fit_of(base, 'h2d_pinned', c[1] >= 1048576)
    if not f then missing = true break end
    rec = rec + c[2] / 1e9
    pinned_fit = pinned_fit + f.latency_s + c[1] / f.bandwidth_bytes_per_s
  end
  if not missing then
    local predicted = 0
    for _, large in ipairs{false, true} do
      local pg, sp, bp = class(base, 'h2d_pageable', large), class(rs, 'h2d_pinned', large), class(base, 'h2d_pinned', large)
      predicted = predicted + (pg and pg.predicted_s or 0) - ((sp and sp.predicted_s or 0) - (bp and bp.predicted_s or 0))
    end
    memplay.assume(string.format('checked against the trace\'s own copies: its %d pageable host-to-device copies took %s as recorded; at the latency and bandwidth its pinned copies show (fitted), the same copies pinned would take %s: a measured gain of %s, against %s predicted by the variants',
      #pageable_copies, memplay.duration(rec), memplay.duration(pinned_fit), memplay.duration(rec - pinned_fit), memplay.duration(predicted)))
  end
end

memplay.assume(string.format('%d host-to-device copies (%s in all, %d from pageable memory as recorded)', n_h2d,
  memplay.bytes(bytes_h2d), n_pageable))
memplay.assume(string.format('%d staging buffers of %s, pinned once at the start (cudaMallocHost)', buffers, memplay.bytes(buffer_size)))
memplay.assume('filling the staging buffer is the data loader\'s work on its own thread, off the critical path')
if n_h2d == 0 then memplay.assume('the trace has no host-to-device copies: the variants differ only by the staging buffers') end
S:report{
  title = string.format('pinned staging for %s (%d input copies)', S.info.name, n_h2d),
  columns = {{key = 'pinned', title = 'pinned host memory', format = 'bytes'},
             {key = 'copy_time', title = 'copy time on the critical path', format = 'time'},
             {key = 'overlap', title = 'copies overlapped', format = 'percent'}},
}
