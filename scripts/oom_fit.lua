-- oom_fit.lua: what would have fitted the request an out-of-memory dump failed on.
--
-- Model: a state-only trace (TensorFlow's BFC out-of-memory dump, `memplay import job.log`: the
-- allocator's regions and chunks at the failure, and the request that failed) is replayed:
--   * as recorded: `bfc` from the recorded state with the recorded memory_limit (the OOM again);
--   * TF_GPU_ALLOCATOR=cuda_malloc_async: the driver's pool (`async`) holding the same live
--     allocations (allocated again in address order: a pool that had been there all along would
--     have placed them its own way), within the same limit;
--   * no fragmentation: the live bytes alone (`ideal`) within the same limit;
--   * a larger memory_limit: `bfc` from the recorded state with the smallest limit under which
--     BFC extends itself by a region for the request (the recorded limit plus the request).
-- The log's own advice ("If the cause is memory fragmentation maybe the environment variable
-- 'TF_GPU_ALLOCATOR=cuda_malloc_async' will improve the situation") is the first question.
-- Parameters (--set):
--   limit=SIZE   the memory limit to fit in (default: the recorded memory_limit, the dump's Limit)
local S = memplay.scenario_context{allocator = 'bfc'}
local info = S.info
local attrs = info.attrs or ''
if not attrs:find('"state_only":true', 1, true) then
  error('oom_fit answers for a state-only trace (an out-of-memory dump, imported from a TensorFlow log)')
end
local t = S.trace:cache()
local recorded_limit = tonumber((info.allocator_settings or ''):match('"memory_limit":(%d+)'))
local limit = memplay.size_param('limit', recorded_limit)
if not limit then error('the trace records no memory_limit: --set limit=SIZE') end
local request = tonumber(attrs:match('"oom_request_bytes":(%d+)')) or 0
local free_chunks = tonumber(attrs:match('"free_chunks":(%d+)')) or 0
local largest = tonumber(attrs:match('"largest_free_chunk":(%d+)')) or 0
S.capacity = limit
S.capacity_label = 'a memory limit of ' .. memplay.bytes(limit)

local function row(name, opts, extra)
  local r = S:replay(t, opts)
  return S:record(name, r, extra)
end
local rounded = (request + 255) // 256 * 256
local bigger = (recorded_limit or limit) + rounded
local rows = {
  row('as recorded (bfc)', {allocator = 'bfc', live_start = false, capacity = false}),
  row('TF_GPU_ALLOCATOR=cuda_malloc_async', {allocator = 'async', capacity = limit}),
  row('no fragmentation', {allocator = 'ideal', capacity = limit}),
}
local larger = S:replay(t, {allocator = 'bfc:memory_limit=' .. bigger .. 'B', live_start = false, capacity = false})
local lr = S:record('memory_limit ' .. memplay.bytes(bigger), larger, {fits = larger.ooms == 0 and 'yes' or 'OOM'})
rows[#rows + 1] = lr
if rows[1].result.ooms == 0 then rows[1].fits = 'yes' else rows[1].fits = 'OOM' end

memplay.assume(string.format('the request: %s (rounded); at the failure %d free chunks, the largest %s',
  memplay.bytes(rounded), free_chunks, memplay.bytes(largest)))
memplay.assume('cuda_malloc_async and no fragmentation hold the same live allocations, placed again in address order')
memplay.assume(string.format('a larger limit: BFC extends itself by a region beyond the recorded %s; the card must have the memory',
  memplay.bytes(recorded_limit or limit)))
local fitted = {}
for i = 2, #rows do if rows[i].fits == 'yes' then fitted[#fitted + 1] = rows[i].variant end end
S:report{
  title = string.format('out of memory on %s for %s: %s', info.name, memplay.bytes(rounded),
    #fitted > 0 and ('would have fitted with ' .. table.concat(fitted, '; ')) or 'nothing tried would have fitted'),
}
