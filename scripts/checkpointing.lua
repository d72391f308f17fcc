-- checkpointing.lua: activation checkpointing: fewer live activations, forward recomputation.
--
-- Model: in each training step, forward ends where live activation-like memory peaks; the
-- activations it saves for backward are those still live there. Forward is cut into
-- `segments` pieces of equal saved bytes (torch.utils.checkpoint around each). A checkpointed
-- segment keeps only its output (the next segment's input): its other saved activations are
-- freed as soon as the segment ends. When backward reaches the segment (just before its first
-- saved activation would be freed), the segment's forward runs again: its saved activations are
-- allocated again (and freed by backward as recorded), its temporaries come and go as in
-- forward, and its kernels run again: about one more forward of compute.
-- Activation-like: activations, inputs, temporaries by category; transient allocations where a
-- trace has no categories; never what the optimizer allocates.
-- Parameters (--set):
--   segments=N   checkpointed segments per step (default: the square root of the saved
--                activations' count, which minimizes memory for equal segments)
--   allocator=SPEC, capacity=SIZE, batch=N  as for every scenario
local S = memplay.scenario_context()
local t = S.trace:cache()
local want = memplay.param('segments', 0)

local a = t:allocations(memplay.activation_filter())
-- steps: ranges of seq (one range when the trace has no steps)
local steps = {}
for _, s in ipairs(t:steps()) do steps[#steps + 1] = {s.first_seq, s.last_seq} end
if #steps == 0 then steps[1] = {0, math.maxinteger} end

-- allocations in seq order (a recorded trace's are): each step's are read from its first
local sorted = true
for i = 2, a.n do if a.seq[i] < a.seq[i - 1] then sorted = false; break end end

local before, after = {}, {}
local function add(map, seq, ev)
  local l = map[seq]
  if not l then l = {}; map[seq] = l end
  l[#l + 1] = ev
end
local fresh = 0
local function fresh_addr()
  fresh = fresh + 1
  return memplay.fresh_addr(fresh)
end

local total_saved, total_freed, total_segments, recomputed_kernels = 0, 0, 0, 0
for _, range in ipairs(steps) do
  local lo, hi = range[1], range[2]
  -- live activation bytes over the step: where they peak, forward ends
  local dseq, dsize, nd, in_step = {}, {}, 0, {} -- each allocation's and free's seq (a stored trace's are unique), and its bytes
  for i = sorted and memplay.lower_bound(a.seq, lo) or 1, a.n do
    if a.seq[i] > hi then
      if sorted then break end
    elseif a.seq[i] >= lo then
      in_step[#in_step + 1] = i
      nd = nd + 1; dseq[nd], dsize[nd] = a.seq[i], a.size[i]
      if a.free_seq[i] >= 0 then nd = nd + 1; dseq[nd], dsize[nd] = a.free_seq[i], -a.size[i] end
    end
  end
  local step_seq = {} -- in_step's seqs: ascending when the allocations are
  for x, i in ipairs(in_step) do step_seq[x] = a.seq[i] end
  local live, peak, fend = 0, -1, nil
  for _, k in ipairs(memplay.order(dseq)) do
    live = live + dsize[k]
    if live > peak then peak, fend = live, dseq[k] end
  end
  if fend then
    -- saved: allocated in forward, still live when forward ends, freed later
    local saved = {}
    for _, i in ipairs(in_step) do
      if a.seq[i] <= fend and a.free_seq[i] > fend then saved[#saved + 1] = i end
    end
    local k = want > 0 and want or math.max(1, math.floor(math.sqrt(#saved) + 0.5))
    if #saved >= 2 and k >= 1 then
      k = math.min(k, #saved)
      local bytes = 0
      for _, i in ipairs(saved) do bytes = bytes + a.size[i] end
      -- cut forward into k segments of equal saved bytes
      local segs, acc, cur = {}, 0, {}
      for _, i in ipairs(saved) do
        cur[#cur + 1] = i
        acc = acc + a.size[i]
        if acc >= bytes * (#segs + 1) / k and #segs < k - 1 then
          segs[#segs + 1] = cur
          cur = {}
        end
      end
      if #cur > 0 then segs[#segs + 1] = cur end
      total_segments = total_segments + #segs
      for sj, seg in ipairs(segs) do
        local first_seq = a.seq[seg[1]]
        local last_seq = a.seq[seg[#seg]]
        local seg_end = sj < #segs and a.seq[segs[sj + 1][1]] - 1 or fend
        -- the segment's output stays; the rest is freed when the segment ends
        local drop, dropped, first_free = {}, {}, math.maxinteger
        for x = 1, #seg - 1 do
          local i = seg[x]
          drop[#drop + 1] = i
          dropped[i] = true
          if a.free_seq[i] < first_free then first_free = a.free_seq[i] end
        end
        if #drop > 0 then
          for _, i in ipairs(drop) do
            add(after, seg_end, {kind = 'free', addr = nil, seq_of = i})
            total_freed = total_freed + a.size[i]
          end
          total_saved = total_saved + bytes
          -- recomputation before backward needs them: the segment's allocations in order
          local rseq, redo, nr = {}, {}, 0 -- the events again, and their seqs
          for x = sorted and memplay.lower_bound(step_seq, first_seq) or 1, #in_step do
            local i = in_step[x]
            local s = a.seq[i]
            if s > seg_end then
              if sorted then break end
            elseif s >= first_seq then
              if dropped[i] then
                nr = nr + 1; rseq[nr], redo[nr] = s, {kind = 'alloc', seq_of = i}
              elseif a.free_seq[i] >= 0 and a.free_seq[i] <= seg_end then
                local addr = fresh_addr()
                nr = nr + 1; rseq[nr], redo[nr] = s, {kind = 'alloc', addr = addr, size = a.size[i], site = a.site[i], stream = a.stream[i]}
                nr = nr + 1; rseq[nr], redo[nr] = a.free_seq[i], {kind = 'free', addr = addr, stream = a.stream[i]}
              end
            end
          end
          for ev in t:events{kind = 'kernel', seq = {first_seq, seg_end}} do
            nr = nr + 1; rseq[nr], redo[nr] = ev.seq, {kind = 'kernel', dur = ev.dur, name_id = ev.name_id, stream = ev.stream}
            recomputed_kernels = recomputed_kernels + 1
          end
          for _, k in ipairs(memplay.order(rseq)) do add(before, first_free, redo[k]) end
        end
      end
    end
  end
end

-- the recorded allocations' own addresses, for the frees and re-allocations above
for _, map in ipairs{before, after} do
  for _, list in pairs(map) do
    for _, ev in ipairs(list) do
      if ev.seq_of then
        local i = ev.seq_of
        ev.addr = a.addr[i]
        ev.stream = a.stream[i]
        if ev.kind == 'alloc' then ev.size = a.size[i]; ev.site = a.site[i] end
        ev.seq_of = nil
      end
    end
  end
end

local ckpt = t:insert_at{before = before, after = after}
local base = S:replay(t)
S:record('as recorded', base, {segments = 0})
local r = S:replay(ckpt)
S:record(string.format('checkpointed (%d segments)', total_segments), r, {segments = total_segments})

memplay.assume(string.format('%d segments per step; %s of saved activations freed after their segment and recomputed in backward',
  total_segments // math.max(1, #steps), memplay.bytes(total_freed)))
memplay.assume(string.format('recomputation repeats each segment\'s forward: %d kernels run again', recomputed_kernels))
if t:lifetimes().categorized_allocs == 0 then
  memplay.assume('the trace has no categories: transient allocations stand for activations')
end
S:report{
  title = string.format('activation checkpointing on %s (allocator %s)', S.info.name, S.allocator),
}
