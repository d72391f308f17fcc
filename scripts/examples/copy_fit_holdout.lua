-- copy_fit_holdout.lua: how well copy times fitted from a trace's own copies predict copies they
-- were not fitted to. Each class of copies (direction and host memory kind, below or at least
-- 1 MiB, as the time model groups them) is split in two by order (odd and even copies); each
-- half is fitted as latency + bytes / bandwidth, by the time model's rules (docs/timemodel.md,
-- "Copies fitted from the trace"), and predicts the other half's total.
--
-- memplay run scripts/examples/copy_fit_holdout.lua TRACE [DEVICE]
--   TRACE   a trace in the store that records its copies' durations
--   DEVICE  the profile whose bandwidths serve where the copies cannot (default: the profile
--           the trace's recorded device matches)
local name, device = ...
if not name then error('usage: memplay run scripts/examples/copy_fit_holdout.lua TRACE [DEVICE]', 0) end
local t = memplay.store():trace(name)
local r = t:replay{device = device}
if not r.time then error('no device profile for ' .. name .. ': give DEVICE', 0) end
local pf = memplay.device_profile(r.device)
local PROFILE_BW = {h2d_pinned = pf.h2d_pinned_bw, h2d_pageable = pf.h2d_pageable_bw, d2h_pinned = pf.d2h_pinned_bw,
                    d2h_pageable = pf.d2h_pageable_bw, d2d = pf.d2d_bw}

-- the classes: kind .. size -> list of {bytes, ns}
local classes, order = {}, {}
for ev in t:events{kind = 'memcpy'} do
  if ev.dur and ev.dur > 0 and ev.size > 0 then
    local mem = ev.mem == 'pinned' and 'pinned' or 'pageable'
    local kind = (ev.dir == 'h2d' or ev.dir == 'd2h') and (ev.dir .. '_' .. mem) or ev.dir
    local key = kind .. (ev.size >= 1048576 and ' >= 1 MiB' or ' < 1 MiB')
    if not classes[key] then
      classes[key] = {kind = kind, copies = {}}
      order[#order + 1] = key
    end
    local c = classes[key].copies
    c[#c + 1] = {ev.size, ev.dur}
  end
end

-- latency (ns) and ns per byte, by the time model's rules
local function fit(copies, bw_profile)
  local n, sx, sy, sxx, sxy = #copies, 0, 0, 0, 0
  for _, c in ipairs(copies) do
    sx, sy, sxx, sxy = sx + c[1], sy + c[2], sxx + c[1] * c[1], sxy + c[1] * c[2]
  end
  local mx, my = sx / n, sy / n
  local vx = sxx / n - mx * mx
  local b = (n >= 2 and vx > 1e-9 * mx * mx) and (sxy / n - mx * my) / vx or -1
  if b <= 0 then b = bw_profile and bw_profile > 0 and 1e9 / bw_profile or 0 end
  local a = my - b * mx
  if a < 0 then a, b = 0, sy / sx end
  return a, b
end

local rows = {}
for _, key in ipairs(order) do
  local cl = classes[key]
  local half = {{}, {}}
  for i, c in ipairs(cl.copies) do table.insert(half[i % 2 + 1], c) end
  if #half[1] > 0 and #half[2] > 0 then
    local rec, pred = 0, 0
    for h = 1, 2 do
      local a, b = fit(half[h], PROFILE_BW[cl.kind])
      for _, c in ipairs(half[3 - h]) do
        rec = rec + c[2]
        pred = pred + a + b * c[1]
      end
    end
    rows[#rows + 1] = {class = key, copies = #cl.copies, recorded = rec / 1e9, predicted = pred / 1e9,
                       error = (pred - rec) / rec}
  end
end
memplay.variant('replay', r)
print(string.format('copy times of %s, each half of every class predicted from a fit of the other half', name))
memplay.print_table(rows, {{key = 'class', title = 'class'}, {key = 'copies', title = 'copies'},
                           {key = 'recorded', title = 'recorded', format = 'time'},
                           {key = 'predicted', title = 'predicted', format = 'time'},
                           {key = 'error', title = 'error', format = 'percent'}})
