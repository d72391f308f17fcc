local t = memplay.trace and memplay.store():trace(1)
for _, a in ipairs(memplay.allocators()) do
  local r = t:replay{allocator = a.name, capacity = memplay.parse_size("1GiB")}
  print(a.name, memplay.bytes(r.peak_reserved), memplay.duration(1e-3))
end
print(memplay.json({a = 1, b = {1, 2, "x"}}), memplay.param("k", 3), memplay.size_param("m", "2MiB"))
print(memplay.device(), memplay.device_memory("A100-80GB"), #memplay.devices(), memplay.kernel_class("gemm"))
memplay.assume("a test"); print(#memplay.assumptions(), #memplay.variants(), memplay.scenario())
local rows = {{a = 1, b = "x"}, {a = 2, b = "y"}}
memplay.print_table(rows, {"a", "b"}); print(memplay.format_table(rows))
print(memplay.sweep({1, 2}, function(x) return x * 2 end))
print(memplay.search{lo = 1, hi = 100, test = function(x) return x < 40 end, integer = true})
