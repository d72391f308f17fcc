-- scale_fit.lua: predict a job's memory at another size (sequence length or batch) from traces
-- of the same job at two sizes.
--
-- Model (two traces, --set other=TRACE):
--   * allocations are matched across the traces by call site and order: the k-th allocation
--     made at a call site in one trace is the k-th made there in the other; a call site found in
--     one trace only is paired with the other's whose frames agree with it longest, innermost
--     first (the same code reached from another line of the driver);
--   * each matched allocation's growth is fitted from its two sizes: constant, linear or
--     quadratic in the size when the ratio says so (within 2%), otherwise a power law through
--     both points;
--   * the trace nearer the target size is resized allocation by allocation (an allocation
--     without a match takes the growth most allocations at its call site have, else constant)
--     and replayed through the allocator, so peak reserved memory comes from the allocator's
--     own decisions; kernels are matched by name and order and their durations fitted alike;
--   * allocations the larger trace makes that the smaller one does not (a size-dependent
--     number of chunks) are kept as the base trace has them.
-- Model (one trace): persistent memory (what lives across the trace: parameters, optimizer
--   state, gradients), parameter-shaped memory wherever the categories say so (gradients made
--   in the backward) and the optimizer's own allocations are constant; attention scores are
--   quadratic in a sequence length. The scores are batch x heads x size^2 elements: with
--   --set heads=N and the batch, of --set elem bytes (default 4); otherwise the size most
--   allocations made by a softmax have, when it is a whole multiple of size^2 bytes (none when
--   attention never materializes its scores, as fused attention kernels do not). Quadratic
--   too: size^2 bytes (a causal mask, unless its call stack names a reduction) and booleans of
--   the scores' shape when the call stack names an operator returning booleans (a
--   comparison's mask, a dropout's). All other transient allocations are linear. When the
--   scores' size is also a feed-forward activation's (heads x size = the feed-forward width),
--   each allocation of that size is decided by what its call stack says (softmax, masking,
--   attention: scores; an activation function, a feed-forward or MLP function: linear), and
--   one whose stack says neither takes the answer of the nearest one that does, in events.
--   With --set unit=batch nothing is quadratic.
-- Parameters (--set):
--   size=N        the size of this trace (required: e.g. its sequence length)
--   at=N          the size to predict (default: 2 * the larger known size)
--   other=TRACE   the same job recorded at another size (name or id)
--   other_size=N  that trace's size (required with other)
--   unit=NAME     sequence (default) or batch: what the size counts
--   heads=N       attention heads (one trace, sequence: with batch, gives the scores' size;
--                 without, the softmax finds it)
--   elem=N        bytes per element of the scores and of the activations (default 4: fp32)
--   allocator=SPEC, capacity=SIZE, batch=N  as for every scenario
local S = memplay.scenario_context()
local size = memplay.param('size', 0)
if size <= 0 then error('--set size=N: the size (sequence length or batch) this trace was recorded at is required') end
local other_name = memplay.param('other', '')
local other_size = memplay.param('other_size', 0)
local unit = memplay.param('unit', 'sequence')
if unit ~= 'sequence' and unit ~= 'batch' then error('--set unit: sequence or batch, not ' .. unit) end
if other_name ~= '' and other_size <= 0 then error('--set other_size=N is required with other') end
local at = memplay.param('at', 2 * math.max(size, other_size))
if at <= 0 then error('--set at=N must be at least 1') end

local A = S.trace
local B = other_name ~= '' and memplay.store():trace(other_name) or nil

local TOL = 0.02
-- operators whose result is boolean (as named in a C++ frame: at::_ops::eq_Scalar::call)
local BOOL_OPS = {'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'logical_not', 'logical_and', 'logical_or',
                  'logical_xor', 'isnan', 'isinf', 'isfinite', 'native_dropout', 'bernoulli'}
-- what marks attention scores (softmax, masking) and feed-forward activations in a call stack:
-- operators, autograd nodes, and (lowercased) parts of Python function names
local REDUCE_OPS = {'sum', 'sum_dim', 'max', 'max_dim', 'amax', 'min', 'min_dim', 'amin', 'mean', 'mean_dim',
                    'logsumexp', 'norm', 'linalg_vector_norm', 'var', 'std'}
local SCORE_OPS = {'_softmax', 'softmax', '_softmax_backward_data', '_masked_softmax', 'masked_fill', 'where',
                   'exp', 'amax', 'max', 'baddbmm'}
local SCORE_NODES = {'SoftmaxBackward0', 'ExpBackward0', 'MaxBackward0', 'MaxBackward1', 'AmaxBackward0',
                     'WhereBackward0', 'MaskedFillBackward0', 'BaddbmmBackward0'}
local SCORE_FNS = {'softmax', 'attention', 'attn'}
local LINEAR_OPS = {'sigmoid', 'silu', 'gelu', 'relu', 'tanh', 'sigmoid_backward', 'silu_backward',
                    'gelu_backward', 'threshold_backward', 'tanh_backward'}
local LINEAR_NODES = {'SigmoidBackward0', 'SiluBackward0', 'GeluBackward0', 'ReluBackward0', 'TanhBackward0'}
local LINEAR_FNS = {'silu', 'gelu', 'swiglu', 'relu', 'mlp', 'ffn', 'feed_forward', 'feedforward'}
local function classify(r, x)
  if math.abs(r - 1) <= TOL then return 'constant', 0 end
  if math.abs(r - x) <= TOL * x then return 'linear', 1 end
  if math.abs(r - x * x) <= TOL * x * x then return 'quadratic', 2 end
  return 'power', math.log(r) / math.log(x)
end

-- The allocations of a trace grouped by call site, in order: site -> list of indices.
local function by_site(allocs)
  local sites = {}
  for i = 1, allocs.n do
    local l = sites[allocs.site[i]]
    if not l then
      l = {}
      sites[allocs.site[i]] = l
    end
    l[#l + 1] = i
  end
  return sites
end

-- A growth is plausible when it is one of the classes, or a power law of modest exponent.
local function plausible(r, x)
  local cls, p = classify(r, x)
  return cls ~= 'power' or (p >= -0.05 and p <= 2.5)
end

-- Pairs the call sites one trace has and the other does not: the same code reached from other
-- lines of the driver (a benchmark that runs each size from its own line) differs only in its
-- outermost frames. Each unshared site of the base is paired with the unshared site of the
-- reference whose frames agree with its own for the most frames, innermost first, when that
-- covers at least half of both stacks; each site is paired once, the closest pairs first.
local function pair_sites(tb, tr, sb, sr)
  local function frames(t, site)
    local out = {}
    for _, f in ipairs(t:frames(site)) do out[#out + 1] = f.name .. '\0' .. f.file .. '\0' .. f.line end
    return out
  end
  local ub, ur = {}, {}
  for site in pairs(sb) do if site ~= 0 and not sr[site] then ub[#ub + 1] = {site = site, f = frames(tb, site)} end end
  for site in pairs(sr) do if site ~= 0 and not sb[site] then ur[#ur + 1] = {site = site, f = frames(tr, site)} end end
  local cands = {}
  for _, b in ipairs(ub) do
    for _, r in ipairs(ur) do
      local n = 0
      while n < #b.f and n < #r.f and b.f[n + 1] == r.f[n + 1] do n = n + 1 end
      if n > 0 and 2 * n >= #b.f and 2 * n >= #r.f then cands[#cands + 1] = {b = b.site, r = r.site, n = n} end
    end
  end
  table.sort(cands, function(p, q)
    if p.n ~= q.n then return p.n > q.n end
    if p.b ~= q.b then return p.b < q.b end
    return p.r < q.r
  end)
  local map, used = {}, {}
  for _, c in ipairs(cands) do
    if not map[c.b] and not used[c.r] then
      map[c.b] = c.r
      used[c.r] = true
    end
  end
  return map
end

-- Matches the k-th allocation at a site with the k-th in the other trace; where one trace
-- makes more allocations at a site, an allocation whose growth is implausible is taken for
-- an extra one and skipped. Returns base index -> reference index, and the sites paired.
local function match(tb, tr, ab, ar, x)
  local pairs_, sb, sr = {}, by_site(ab), by_site(ar)
  local paired = pair_sites(tb, tr, sb, sr)
  for site, lb in pairs(sb) do
    local lr = sr[site] or sr[paired[site]]
    if lr and site ~= 0 then
      local i, j = 1, 1
      while i <= #lb and j <= #lr do
        local r = ar.size[lr[j]] / ab.size[lb[i]]
        if plausible(r, x) then
          pairs_[lb[i]] = lr[j]
          i, j = i + 1, j + 1
        elseif #lr - j > #lb - i then
          j = j + 1
        else
          i = i + 1
        end
      end
    end
  end
  local npaired = 0
  for _ in pairs(paired) do npaired = npaired + 1 end
  return pairs_, npaired
end

local counts = {constant = 0, linear = 0, quadratic = 0, power = 0, unmatched = 0}
local base, base_size, resize, exps = nil, nil, {}, {}
local nchanged = 0

if B then
  -- the base is the trace nearer the target (in ratio)
  local near_a = math.abs(math.log(at / size)) <= math.abs(math.log(at / other_size))
  base = near_a and A or B
  base_size = near_a and size or other_size
  local ref, ref_size = near_a and B or A, near_a and other_size or size
  local ab, ar = base:allocations(), ref:allocations()
  local x = ref_size / base_size
  local m, npaired = match(base, ref, ab, ar, x)
  local site_votes = {}
  local p_of = {}
  for i = 1, ab.n do
    local j = m[i]
    if j then
      local cls, p = classify(ar.size[j] / ab.size[i], x)
      counts[cls] = counts[cls] + 1
      p_of[i] = p
      local v = site_votes[ab.site[i]] or {}
      v[p] = (v[p] or 0) + 1
      site_votes[ab.site[i]] = v
    elseif ab.site[i] == 0 or ab.persistent[i] then
      -- live before the trace or without a call stack: nothing to match it by
      counts.constant = counts.constant + 1
      p_of[i] = 0
    end
  end
  for i = 1, ab.n do
    local p = p_of[i]
    if not p then
      counts.unmatched = counts.unmatched + 1
      local best, n = 0, 0
      for e, c in pairs(site_votes[ab.site[i]] or {}) do
        if c > n then best, n = e, c end
      end
      p = best
    end
    if p ~= 0 then
      local new = math.floor(ab.size[i] * (at / base_size) ^ p + 0.5)
      if new ~= ab.size[i] then
        resize[ab.seq[i]] = new
        nchanged = nchanged + 1
      end
    end
  end
  memplay.assume(string.format('allocations matched by call site and order between %s (%s %d) and %s (%s %d)',
    A:name(), unit, size, B:name(), unit, other_size))
  if npaired > 0 then
    memplay.assume(string.format('%d call sites found in one trace only paired with the other\'s by their innermost frames', npaired))
  end
else
  base, base_size = A, size
  local ab = A:allocations()
  -- optimizer call sites are constant
  local opt = {}
  for _, s in ipairs(A:sites{site_match = memplay.optimizer_sites}) do opt[s.site] = true end
  local quad_sizes, quad_ab = {}, {}
  -- what does not grow: memory that outlives the trace, the optimizer's, what has no call stack,
  -- and parameter-shaped memory wherever the categories say so (gradients made in the backward)
  local CONST_CATS = {parameter = true, gradient = true, optimizer_state = true}
  local function constant(i)
    return ab.persistent[i] or opt[ab.site[i]] or ab.site[i] == 0 or CONST_CATS[ab.category[i]] or false
  end
  -- what a call stack says about its allocation: the operators (at::_ops::NAME::), the
  -- autograd nodes (generated::NAME::apply) and the Python functions it passes through
  local said = {}
  local function says(site)
    local w = said[site]
    if w then return w end
    w = {op = {}, node = {}, fn = {}}
    for _, f in ipairs(A:frames(site)) do
      local op = f.name:match('_ops::([%w_]+)::')
      if op then
        w.op[op] = true
        w.op[op:match('^(.-)_[A-Z]') or op] = true -- eq_Scalar -> eq
      end
      local node = f.name:match('generated::([%w_]+)::apply')
      if node then w.node[node] = true end
      if f.file:match('%.py$') then w.fn[f.name:lower()] = true end
    end
    said[site] = w
    return w
  end
  local function any(w, ops, nodes, fns)
    for _, o in ipairs(ops) do if w.op[o] then return true end end
    for _, n in ipairs(nodes) do if w.node[n] then return true end end
    for f in pairs(w.fn) do
      for _, pat in ipairs(fns) do if f:find(pat, 1, true) then return true end end
    end
    return false
  end
  local function transient(i) return not constant(i) end

  -- attention scores: batch x heads x size^2 elements of elem bytes. With --set heads (and the
  -- batch) they are known; otherwise the softmax says: the size most transient allocations
  -- made by a softmax have, when it is a whole multiple of size^2 bytes (none when attention
  -- never materializes its scores, as fused attention kernels do not)
  local heads = memplay.param('heads', 0)
  local elem = memplay.param('elem', 4)
  local per = nil -- bytes of the scores per size^2: batch x heads x elem
  if unit == 'sequence' and heads > 0 and S.batch then
    per = S.batch * heads * elem
    memplay.assume(string.format('attention scores are %d x %d x %s^2 elements of %d bytes (batch x heads x sequence^2): quadratic',
      S.batch, heads, unit, elem))
  elseif unit == 'sequence' then
    local count = {}
    for i = 1, ab.n do
      local b = ab.size[i]
      if b % (size * size) == 0 and transient(i) and any(says(ab.site[i]), {'_softmax', 'softmax', '_softmax_backward_data'},
                                                          {'SoftmaxBackward0'}, {'softmax'}) then
        count[b] = (count[b] or 0) + 1
      end
    end
    local best, n = nil, 0
    for b, c in pairs(count) do
      if c > n or (c == n and b > best) then best, n = b, c end
    end
    if best then
      per = best // (size * size)
      memplay.assume(string.format('attention scores found by their softmax: %s at %s %d (%d allocations), that is %d bytes x %s^2 (batch x heads x bytes per element): quadratic',
        memplay.bytes(best), unit, size, n, per, unit))
    else
      memplay.assume('no allocation made by a softmax has a size of a whole multiple of ' .. unit .. '^2, and no --set heads=N: nothing is quadratic (right when attention never materializes its scores; give heads and batch otherwise)')
    end
  end
  if per then
    local scores = per // elem -- the scores' elements (bytes of a boolean tensor of their shape)
    if per % elem ~= 0 then scores = nil end
    quad_sizes[per * size * size] = true
    local score_bytes = per * size * size

    -- a size^2 boolean mask (a causal mask): quadratic, unless the stack names a reduction
    -- (a sum or max over the scores' last dimension is batch x heads x size elements, which is
    -- size^2 bytes when 4 x batch x heads = size)
    for i = 1, ab.n do
      if ab.size[i] == size * size and transient(i) and not any(says(ab.site[i]), REDUCE_OPS, {}, {}) then
        quad_ab[i] = true
      end
    end

    -- a boolean tensor of the scores' shape (a comparison's result: the mask a masked_fill
    -- reads; a dropout's mask) is quadratic too; the size alone does not say it is one (linear
    -- activations have that size when the sequence is a multiple of the head width), so only
    -- an allocation whose call stack names an operator that returns booleans counts
    if elem ~= 1 and scores then
      local nmasks = 0
      local bool_bytes = scores * size * size
      for i = 1, ab.n do
        if ab.size[i] == bool_bytes and transient(i) and any(says(ab.site[i]), BOOL_OPS, {}, {}) then
          quad_ab[i] = true
          nmasks = nmasks + 1
        end
      end
      if nmasks > 0 then
        memplay.assume(string.format('%d boolean tensors of the scores\' shape (%s, made by comparisons or dropout): quadratic', nmasks, memplay.bytes(bool_bytes)))
      end
    end

    -- The scores' size can be another tensor's too: the feed-forward layer's activations
    -- (batch x sequence x ffn width) have it when heads x sequence = ffn width. When an
    -- allocation of that size is made by a feed-forward operation, the size is shared: each
    -- allocation of it is decided by what its stack says (softmax, masking, attention: scores;
    -- an activation function, a feed-forward or MLP function: linear), and one whose stack
    -- says neither (a matmul, a product) takes the answer of the nearest one that does, in
    -- allocation order (a layer's attention and its feed-forward run apart, forward and back).
    local sized, shared = {}, false
    for i = 1, ab.n do
      if ab.size[i] == score_bytes and transient(i) then
        sized[#sized + 1] = i
        if any(says(ab.site[i]), LINEAR_OPS, LINEAR_NODES, LINEAR_FNS) then shared = true end
      end
    end
    if shared then
      quad_sizes[score_bytes] = nil
      local label = {}
      for k, i in ipairs(sized) do
        local w = says(ab.site[i])
        if any(w, LINEAR_OPS, LINEAR_NODES, LINEAR_FNS) then label[k] = 1
        elseif any(w, SCORE_OPS, SCORE_NODES, SCORE_FNS) then label[k] = 2 end
      end
      -- the nearest labelled allocation before and after each one, in events
      local prev, nxt = {}, {}
      local last = nil
      for k = 1, #sized do
        prev[k] = last
        if label[k] then last = k end
      end
      last = nil
      for k = #sized, 1, -1 do
        nxt[k] = last
        if label[k] then last = k end
      end
      local nq, nl = 0, 0
      for k, i in ipairs(sized) do
        local p = label[k]
        if not p then
          local b, a = prev[k], nxt[k]
          if b and a then
            p = (ab.seq[i] - ab.seq[sized[b]] <= ab.seq[sized[a]] - ab.seq[i]) and label[b] or label[a]
          else
            p = label[b or a or 0]
          end
        end
        if p == 2 then
          quad_ab[i] = true
          nq = nq + 1
        else
          nl = nl + 1
        end
      end
      memplay.assume(string.format('the scores\' size (%s) is a feed-forward activation\'s too: of its %d allocations, %d taken for scores (quadratic) and %d for activations (linear), by what their call stacks say',
        memplay.bytes(score_bytes), #sized, nq, nl))
    end
  end
  local x = at / size
  for i = 1, ab.n do
    local p
    if constant(i) then
      p = 0; counts.constant = counts.constant + 1
    elseif quad_sizes[ab.size[i]] or quad_ab[i] then
      p = 2; counts.quadratic = counts.quadratic + 1
    else
      p = 1; counts.linear = counts.linear + 1
    end
    if p ~= 0 then
      local new = math.floor(ab.size[i] * x ^ p + 0.5)
      if new ~= ab.size[i] then
        resize[ab.seq[i]] = new
        nchanged = nchanged + 1
      end
    end
  end
  memplay.assume('one trace: persistent and optimizer allocations constant, attention scores quadratic, other transient allocations linear in ' .. unit)
end

-- kernels: matched by name and order, durations fitted the same way
local retime = nil
if B then
  local function kernel_list(t)
    local list, count = {}, {}
    for ev in t:events{kind = 'kernel'} do
      local k = (count[ev.name_id or 0] or 0) + 1
      count[ev.name_id or 0] = k
      list[#list + 1] = {seq = ev.seq, key = (ev.name_id or 0) .. ':' .. k, dur = ev.dur}
    end
    return list
  end
  local kb = kernel_list(base)
  if #kb > 0 then
    local kr = {}
    for _, k in ipairs(kernel_list(base == A and B or A)) do kr[k.key] = k.dur end
    local ref_size = base == A and other_size or size
    retime = {}
    for _, k in ipairs(kb) do
      local d2 = kr[k.key]
      if d2 and k.dur > 0 and d2 > 0 then
        local p = math.log(d2 / k.dur) / math.log(ref_size / base_size)
        retime[k.seq] = math.floor(k.dur * (at / base_size) ^ p + 0.5)
      end
    end
  end
end

local predicted = base:resize(resize)
if retime then
  predicted = predicted:map(function(ev)
    local d = retime[ev.seq]
    if d then ev.dur = d end
  end, {kind = 'kernel'})
end

local function batch_at(n) return unit == 'batch' and n or S.batch end
local ra = S:replay(A)
S:record(string.format('%s (%s %d, recorded)', A:name(), unit, size), ra, {size = size, batch = batch_at(size)})
if B then
  local rb = S:replay(B)
  S:record(string.format('%s (%s %d, recorded)', B:name(), unit, other_size), rb, {size = other_size, batch = batch_at(other_size)})
end
local rp = S:replay(predicted)
S:record(string.format('predicted at %s %d', unit, at), rp, {size = at, batch = batch_at(at)})

memplay.assume(string.format('growth of %d allocations: %d constant, %d linear, %d quadratic, %d power law, %d without a match; %d resized',
  counts.constant + counts.linear + counts.quadratic + counts.power + counts.unmatched,
  counts.constant, counts.linear, counts.quadratic, counts.power, counts.unmatched, nchanged))
S:report{
  title = string.format('scale fit: %s at %s %d, from %s', A:name(), unit, at, B and (unit .. 's ' .. size .. ' and ' .. other_size) or (unit .. ' ' .. size)),
  before = {{key = 'size', title = unit}},
}
