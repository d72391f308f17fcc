local t = memplay.store():trace("sample")
local u = t:scale{kind = "alloc", factor = 1.5, align = 512}:elem_size{from = 4, to = 2}
u = u:resize{[3] = 4096}:drop{kind = "kernel"}:drop_steps{1, 2}
u = u:insert{events = {{kind = "alloc", addr = memplay.fresh_addr(), size = 8192}}, at = "start"}
u = u:pin{kind = "memcpy", to = "pinned", async = true, duration_factor = 1}
u = u:scale_time{factor = 2, fixed_ns = 100}:repeat_steps{times = 2}
u = u:map(function(e) if e.size and e.size > 1000000 then return {} end return e end)
u = u:merge(t, {offset_s = 0.001, device = 1}):cache()
local r = u:replay{allocator = "torch:expandable_segments:True", capacity = "8GiB"}
print(r.peak_allocated, r.oom)
memplay.variant("a", r)
