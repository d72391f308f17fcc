-- peak_by_allocator.lua: one trace through every allocator model, side by side; an example of a
-- study script of your own (docs/lua-api.md documents the library it uses).
--
-- memplay run scripts/examples/peak_by_allocator.lua TRACE [CAPACITY]
--   TRACE     a trace in the store, by name or id
--   CAPACITY  the memory to fit in, e.g. 24GB (default: unlimited)
-- Every replay is stored as a run of the script, like a scenario's variants.
local name, capacity = ...
if not name then error('usage: memplay run scripts/examples/peak_by_allocator.lua TRACE [CAPACITY]', 0) end
local t = memplay.store():trace(name)
local rows = {}
for _, a in ipairs(memplay.allocators()) do
  local r = t:replay{allocator = a.name, capacity = capacity}
  memplay.variant(a.name, r)
  rows[#rows + 1] = {
    allocator = a.name,
    peak_allocated = r.peak_allocated_bytes,
    peak_reserved = r.peak_reserved_bytes,
    fragmentation = r.fragmentation,
    ooms = r.ooms,
  }
end
table.sort(rows, function(a, b) return a.peak_reserved < b.peak_reserved end)
print(string.format('%s under every allocator model%s', name, capacity and (' on ' .. capacity) or ''))
memplay.print_table(rows, {
  {key = 'allocator', title = 'allocator'},
  {key = 'peak_allocated', title = 'peak allocated', format = 'bytes'},
  {key = 'peak_reserved', title = 'peak reserved', format = 'bytes'},
  {key = 'fragmentation', title = 'fragmentation', format = 'percent'},
  {key = 'ooms', title = 'OOMs', format = 'int'},
})
