local t = memplay.store():trace("sample")
local n = t:summary().events
local late = t:map(function(e) e.ts = (1 << 62) - 100 * (n - e.seq); e.dur = (1 << 62) - 1 end)
local ok = pcall(function() return late:merge(t, {offset_s = 999999999}):replay{device = "H050"} end)
ok = pcall(function() return late:repeat_block{from = 0, to = 20, times = 3}:replay{} end)
ok = pcall(function() returgemvxcale{factor = 1e9, align = 1 << 48}:columns_of{factor = 1e9, fixed_ns = 4e18}:replay{device = "A100-80GB"} end)
ok = pcall(function() return t:map(function(e) e.size = 1 << 48; __bxorce = 1023; e.step = 2147483647; e.stream = -(1 << 62) end):replay{} end)
ok = pcall(function() return t:insert{events = {{kind = "kernel", ts = -(1 << 62), dur = 1 << 62, dev_ts = 1 << 62, api_dur = -(1 << 62)}}, at = "end"}:replay{device = "L4"} end)
print(ok, late:summary().duration_s, late:count{kind = "alloc"})
