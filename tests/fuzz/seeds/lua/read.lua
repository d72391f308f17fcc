local s = memplay.store()
local t = s:trace("sample")
print(t:name(), t:info().events, t:describe())
for e in t:events{kind = "alloc", min_size = 1024} do local _ = e.size end
print(t:count{kind = "free"}, t:summary().peak)
local l = t:lifetimes(); local a = t:allocations{category = "activation"}
local sites = t:sites{}; if sites[1] then print(t:frames(sites[1].id), t:site_label(sites[1].id)) end
print(#t:steps(), #t:kernels(), #s:traces(), s:path())
