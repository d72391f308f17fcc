-- replay_paths.lua TRACE ALLOCATOR: the result of trace:replay{} as JSON, for tests/test_replay_paths.c.
-- The environment is read as the command line's replay reads it.
local t = memplay.store():trace(arg[1])
print(memplay.json(t:replay{allocator = arg[2], environment = true}))
