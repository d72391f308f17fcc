-- lua_prelude.lua: the memplay library's own Lua: tables for people, sweeps and searches, and
-- the kit the bundled scenarios share. Loaded into every script's sandbox before the script.
local memplay = memplay

-- ---- tables for people ---------------------------------------------------------------------

local function cell(v, fmt, row)
  if type(fmt) == 'function' then return tostring(fmt(v, row)) end
  if v == nil then return '-' end
  if fmt == 'bytes' then return memplay.bytes(v)
  elseif fmt == 'time' then return memplay.duration(v)
  elseif fmt == 'percent' then return string.format('%.1f%%', 100 * v)
  elseif fmt == 'ratio' then return string.format('%.2fx', v)
  elseif fmt == 'int' then return string.format('%d', math.tointeger(v) or math.floor(v + 0.5))
  elseif fmt == 'float' then return string.format('%.3f', v)
  elseif type(fmt) == 'string' and fmt:find('%%') then return string.format(fmt, v)
  elseif type(v) == 'boolean' then return v and 'yes' or 'no'
  end
  return tostring(v)
end

local function columns_of(rows, columns)
  if columns then
    local out = {}
    for i, c in ipairs(columns) do
      if type(c) == 'string' then out[i] = {key = c, title = c}
      elseif type(c) == 'table' and c.key ~= nil then
        out[i] = {key = c.key, title = c.title or tostring(c.key), format = c.format}
      else error('print_table: column ' .. i .. ' must be a key or {key = ..., title = ..., format = ...}', 3) end
    end
    return out
  end
  local keys, seen = {}, {}
  for _, r in ipairs(rows) do
    for k in pairs(r) do
      if not seen[k] and type(k) == 'string' then seen[k] = true; keys[#keys + 1] = k end
    end
  end
  table.sort(keys)
  local out = {}
  for i, k in ipairs(keys) do out[i] = {key = k, title = k} end
  return out
end

-- The rows as an aligned text table: columns are keys or {key=, title=, format=}; formats:
-- bytes, time, percent, ratio, int, float, a printf format, or a function(value, row).
function memplay.format_table(rows, columns)
  if type(rows) ~= 'table' then error('print_table: rows must be a table of rows', 2) end
  local cols = columns_of(rows, columns)
  local cells, width, right = {}, {}, {}
  for j, c in ipairs(cols) do width[j] = utf8.len(c.title) or #c.title; right[j] = true end
  for i, r in ipairs(rows) do
    if type(r) ~= 'table' then error('print_table: row ' .. i .. ' is not a table', 2) end
    cells[i] = {}
    for j, c in ipairs(cols) do
      local v = r[c.key]
      local s = cell(v, c.format, r)
      cells[i][j] = s
      if type(v) == 'string' then right[j] = false end
      local w = utf8.len(s) or #s
      if w > width[j] then width[j] = w end
    end
  end
  local function line(vals)
    local parts = {}
    for j, s in ipairs(vals) do
      local pad = string.rep(' ', width[j] - (utf8.len(s) or #s))
      parts[j] = right[j] and j > 1 and (pad .. s) or (s .. pad)
    end
    return (table.concat(parts, '  '):gsub('%s+$', ''))
  end
  local titles, rules = {}, {}
  for j, c in ipairs(cols) do titles[j] = c.title; rules[j] = string.rep('-', width[j]) end
  local out = {line(titles), line(rules)}
  for i = 1, #cells do out[#out + 1] = line(cells[i]) end
  return table.concat(out, '\n') .. '\n'
end

function memplay.print_table(rows, columns)
  memplay.write_out(memplay.format_table(rows, columns))
end

-- ---- sweeps and searches -------------------------------------------------------------------

-- fn(value, i) for each value; each result (a table, or a value kept as .result) gets .value.
function memplay.sweep(values, fn)
  if type(values) ~= 'table' then error('sweep: values must be a list', 2) end
  if type(fn) ~= 'function' then error('sweep: fn must be a function', 2) end
  local rows = {}
  for i, v in ipairs(values) do
    local r = fn(v, i)
    if type(r) ~= 'table' then r = {result = r} end
    if r.value == nil then r.value = v end
    rows[#rows + 1] = r
  end
  return rows
end

-- The largest x in [lo, hi] for which test(x) holds, test being true up to some x and false
-- after it: doubling from `start` (default lo) until it fails, then bisection. Returns x (nil
-- when test(lo) fails) and the probes made, each {value, ok, info}.
function memplay.search(o)
  if type(o) ~= 'table' then error('search: expects a table {lo = ..., hi = ..., test = function(x) ... end}', 2) end
  local lo, hi, test = o.lo, o.hi, o.test
  if type(lo) ~= 'number' or type(hi) ~= 'number' or lo > hi then
    error('search: lo and hi must be numbers with lo <= hi', 2)
  end
  if type(test) ~= 'function' then error('search: test must be a function', 2) end
  local integer = o.integer ~= false
  local tol = o.tolerance or (integer and 1 or (hi - lo) * 1e-3)
  local probes = {}
  local function t(x)
    if integer then x = math.floor(x) end
    local ok, info = test(x)
    probes[#probes + 1] = {value = x, ok = ok and true or false, info = info}
    return ok
  end
  if not t(lo) then return nil, probes end
  local good, bad = lo, nil
  local start = o.start or lo
  if start > lo and start <= hi then
    if t(start) then good = start else bad = start end
  end
  while not bad do
    if good >= hi then return good, probes end
    local nxt = math.min(hi, good == 0 and 1 or good * 2)
    if integer then nxt = math.floor(nxt) end
    if nxt <= good then nxt = hi end
    if t(nxt) then good = nxt else bad = nxt end
  end
  while bad - good > tol do
    local mid = good + (bad - good) / 2
    if integer then mid = math.floor(mid) end
    if mid <= good then break end
    if t(mid) then good = mid else bad = mid end
  end
  return good, probes
end

-- ---- the scenario kit ------------------------------------------------------------------------

-- Call sites of the optimizer and of gradient bookkeeping (what does not scale with a batch).
memplay.optimizer_sites = {'torch/optim', 'optimizer.py', 'optim.', 'Adam', 'SGD', 'zero_grad', '_foreach_',
                           'clip_grad', '_fused_', 'GradScaler'}

-- The filter of activation-like memory: what a forward pass makes and a backward pass frees,
-- or inputs. By category where the trace has them (activation, input, temporary), else by
-- lifetime (transient); never what the optimizer's own code allocates, nor what was live
-- before the trace began (a window's parameters and optimizer state).
function memplay.activation_filter(extra)
  local f = {category = {'activation', 'input', 'temporary'}, exclude_site_match = memplay.optimizer_sites,
             not_flags = 'preexisting'}
  for k, v in pairs(extra or {}) do f[k] = v end
  return f
end

local function allocator_known(spec)
  local name = spec:match('^[^:]+')
  for _, a in ipairs(memplay.allocators()) do
    if a.name == name then return true end
  end
  return false
end

local Scenario = {}
Scenario.__index = Scenario

-- The context of a bundled scenario: the trace, and the parameters every scenario takes:
--   allocator  SPEC (default: the allocator that recorded the trace, else o.allocator, else torch, else ideal)
--   capacity   device memory to fit in (default: the --device profile's, else the recorded device's)
--   batch      samples per step of the trace as recorded (default: the trace's batch_size)
function memplay.scenario_context(o)
  o = o or {}
  local t = memplay.trace()
  if not t then error('this scenario runs against a trace: memplay whatif TRACE ' .. memplay.scenario() .. '.lua', 2) end
  local info = t:info()
  local S = setmetatable({trace = t, info = info, rows = {}, notes = {}}, Scenario)
  local recorded = info.allocator and allocator_known(info.allocator) and info.allocator or nil
  local fallback = o.allocator or (allocator_known('torch') and 'torch' or 'ideal')
  S.allocator = memplay.param('allocator', recorded or fallback)
  if not allocator_known(S.allocator) then
    error(string.format("--set allocator=%s: unknown allocator model (see 'memplay help allocators')", S.allocator), 2)
  end
  S.device = memplay.device()
  local dev_memory = S.device and memplay.device_memory(S.device) or nil
  S.capacity = memplay.size_param('capacity', dev_memory or info.device_memory)
  S.capacity_label = memplay.params().capacity and memplay.bytes(S.capacity)
    or S.device or (info.device_name and S.capacity and info.device_name) or (S.capacity and memplay.bytes(S.capacity))
  S.batch = memplay.param('batch', info.batch_size or 0)
  if S.batch <= 0 then S.batch = nil end
  if S.capacity then
    memplay.assume(string.format('fits = no allocation fails on %s (%s = %.2f GB of device memory for this process%s)',
      S.capacity_label, memplay.bytes(S.capacity), S.capacity / 1e9,
      memplay.params().capacity and ', as given' or dev_memory and ': the profile\'s memory less its CUDA context' or ''))
  end
  return S
end

-- Replays t with the scenario's allocator, capacity and device; opts add to or override them.
function Scenario:replay(t, opts)
  -- live_start: every variant of a recorded window starts alike, from the blocks live then (a
  -- transformed trace cannot start from the recorded allocator's rebuilt state)
  local o = {allocator = self.allocator, capacity = self.capacity, device = self.device, live_start = true}
  for k, v in pairs(opts or {}) do o[k] = v end
  if o.capacity == false then o.capacity = nil end
  if o.device ~= false and o.timing == nil then
    -- A scenario changes durations: waits the trace recorded but cannot explain would be kept
    -- at their recorded length and undo the change, so the model alone decides when device
    -- work starts (in every variant alike).
    o.timing = 'device_waits=drop'
  end
  local r = t:replay(o)
  self.timed_on = self.timed_on or r.device -- the profile a time prediction was made on
  return r
end

-- Records a variant (stored as a run) and its row in the table; row holds extra columns,
-- batch (samples per step, for the throughput) and step_time (to use instead of the result's).
function Scenario:record(name, result, row)
  row = row or {}
  local batch = row.batch or self.batch
  local step = row.step_time or result.step_time_s
  memplay.variant(name, result, {batch = batch, step_time_s = step})
  local r = {
    variant = name,
    peak_allocated = result.peak_allocated_bytes,
    peak_reserved = result.peak_reserved_bytes,
    fits = self.capacity and (result.ooms == 0 and 'yes' or ('OOM (' .. result.ooms .. ')')) or nil,
    step_time = step,
    throughput = step and batch and step > 0 and batch / step or nil,
    result = result,
  }
  for k, v in pairs(row) do r[k] = v end
  self.rows[#self.rows + 1] = r
  return r
end

-- Prints the before/after table (extra columns after the standard ones) and the assumptions.
function Scenario:report(o)
  o = o or {}
  local cols = {{key = 'variant', title = 'variant'}}
  for _, c in ipairs(o.before or {}) do cols[#cols + 1] = c end
  cols[#cols + 1] = {key = 'peak_allocated', title = 'peak allocated', format = 'bytes'}
  cols[#cols + 1] = {key = 'peak_reserved', title = 'peak reserved', format = 'bytes'}
  cols[#cols + 1] = {key = 'fits', title = 'fits on ' .. (self.capacity_label or 'the device')}
  cols[#cols + 1] = {key = 'step_time', title = 'step time', format = 'time'}
  cols[#cols + 1] = {key = 'throughput', title = 'samples/s', format = '%.1f'}
  for _, c in ipairs(o.columns or {}) do cols[#cols + 1] = c end
  if o.title then memplay.write_out(o.title, '\n') end
  memplay.print_table(self.rows, cols)
  if not self.capacity then
    memplay.write_out('(no capacity: give --device NAME or --set capacity=SIZE to check fits)\n')
  end
  local any_time = false
  for _, r in ipairs(self.rows) do any_time = any_time or r.step_time ~= nil end
  if not any_time then
    memplay.write_out((self.device or self.timed_on) and '(no step time: the trace has no step markers or device activity)\n'
      or '(step time and throughput need --device NAME)\n')
  end
  local a = memplay.assumptions()
  if #a > 0 then
    memplay.write_out('assumptions:\n')
    for _, s in ipairs(a) do memplay.write_out('  - ', s, '\n') end
  end
end
