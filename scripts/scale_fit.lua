-- scale_fit.lua: predict a job's memory at another size (sequence length or batch) from traces
-- of the same job at one or more sizes, with an error band that was measured.
--
-- Model (several traces: --set others=TRACE:SIZE,... and/or other=TRACE, other_size=N):
--   * the trace nearest the target size (in ratio) is the base, resized allocation by
--     allocation and replayed through the allocator, so peak reserved memory comes from the
--     allocator's own decisions; its growths are fitted against the next nearest trace;
--   * allocations are matched across the two by call site and order: the k-th allocation made
--     at a call site in one trace is the k-th made there in the other; a call site found in one
--     trace only is paired with the other's whose frames agree with it longest, innermost first
--     (the same code reached from another line of the driver);
--   * a matched allocation's growth is fitted from its two sizes when the ratio says constant,
--     linear or quadratic (within 2%); with a third trace the fit is checked against it, and an
--     allocation whose growth to it is of another class, one whose ratio fits no class, and one
--     the other trace does not make (made only at some sizes) take the one-trace rules below;
--   * kernels are matched by name and order and their durations fitted as a power law; a
--     kernel the other trace does not run takes the median exponent of the matched ones;
--   * error band: with three or more traces each is left out and predicted from the others,
--     against its own replay, and the largest error is the band; with one or two, the method's
--     largest error on the real pairs of docs/accuracy.md (DOC_BAND below).
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
--   at=N          the size to predict (default: 2 * the largest known size)
--   others=LIST   the same job recorded at other sizes: TRACE:SIZE,TRACE:SIZE,...
--   other=TRACE   one more, the same as others=TRACE:other_size
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
local others = memplay.param('others', '')
local unit = memplay.param('unit', 'sequence')
if unit ~= 'sequence' and unit ~= 'batch' then error('--set unit: sequence or batch, not ' .. unit) end
if other_name ~= '' and other_size <= 0 then error('--set other_size=N is required with other') end

-- the input traces: this one, --set other, and each TRACE:SIZE of --set others
local inputs = {{trace = S.trace, size = size}}
if other_name ~= '' then inputs[#inputs + 1] = {trace = memplay.store():trace(other_name), size = other_size} end
for item in others:gmatch('[^,]+') do
  local name, n = item:match('^%s*(.-):(%d+)%s*$')
  if not name or name == '' or tonumber(n) <= 0 then
    error(string.format('--set others: "%s" is not TRACE:SIZE (a trace name or id, a colon, a size of at least 1)', item))
  end
  inputs[#inputs + 1] = {trace = memplay.store():trace(name), size = tonumber(n)}
end
local largest = 0
for k, a in ipairs(inputs) do
  largest = math.max(largest, a.size)
  for j = 1, k - 1 do
    if inputs[j].size == a.size then error(string.format('two input traces at %s %d: each size once', unit, a.size)) end
  end
end
local at = memplay.param('at', 2 * largest)
if at <= 0 then error('--set at=N must be at least 1') end

-- the measured error of the method on real pairs (docs/accuracy.md, "scale_fit: real pairs"):
-- the largest |error| of peak allocated and peak reserved over the pairs of the table, by the
-- number of input traces; with three or more, leave-one-out measures it on the inputs instead
local DOC_BAND = {[1] = 19.1, [2] = 19.0}

-- assumptions are recorded for the prediction itself, not for the leave-one-out refits
local quiet = false
local function note(s) if not quiet then memplay.assume(s) end end

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

-- One trace: each allocation's growth exponent by rule (0 constant, 1 linear, 2 quadratic).
local function one_growth(A, size)
  local ab = A:allocations()
  -- optimizer call sites are constant
  local opt = {}
  for _, s in ipairs(A:sites{site_match = memplay.optimizer_sites}) do opt[s.site] = true end
  local quad_sizes, quad_ab = {}, {}
  -- what does not grow: memory that outlives the trace, the optimizer's, what has no call stack,
  -- and parameter-shaped memory wherever the categories say so (gradients made in the backward)
  local CONST_CATS = {parameter = true, gradient = true, optimizer_state = true}
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
      if f.file:match('%.py$') then
        w.fn[f.name:lower()] = true
        -- the module that defines it counts too: forward in softmax.py is a softmax
        w.fn[(f.file:match('([^/\\]+)%.py$') or ''):lower() .. '.py'] = true
      end
    end
    said[site] = w
    return w
  end
  -- a model's construction (a never-freed allocation made inside an __init__: its weights, in
  -- a trace recorded from an empty allocator) does not grow either
  local function constant(i)
    return ab.persistent[i] or opt[ab.site[i]] or ab.site[i] == 0 or CONST_CATS[ab.category[i]]
      or (ab.free_seq[i] < 0 and says(ab.site[i]).fn.__init__) or false
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
    note(string.format('attention scores are %d x %d x %s^2 elements of %d bytes (batch x heads x sequence^2): quadratic',
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
      note(string.format('attention scores found by their softmax: %s at %s %d (%d allocations), that is %d bytes x %s^2 (batch x heads x bytes per element): quadratic',
        memplay.bytes(best), unit, size, n, per, unit))
    else
      note('no allocation made by a softmax has a size of a whole multiple of ' .. unit .. '^2, and no --set heads=N: nothing is quadratic (right when attention never materializes its scores; give heads and batch otherwise)')
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
        note(string.format('%d boolean tensors of the scores\' shape (%s, made by comparisons or dropout): quadratic', nmasks, memplay.bytes(bool_bytes)))
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
      note(string.format('the scores\' size (%s) is a feed-forward activation\'s too: of its %d allocations, %d taken for scores (quadratic) and %d for activations (linear), by what their call stacks say',
        memplay.bytes(score_bytes), #sized, nq, nl))
    end
  end
  local p_of = {}
  for i = 1, ab.n do
    if constant(i) then p_of[i] = 0
    elseif quad_sizes[ab.size[i]] or quad_ab[i] then p_of[i] = 2
    else p_of[i] = 1 end
  end
  return ab, p_of
end

-- Two traces: a matched allocation's growth is fitted from its two sizes when it is constant,
-- linear or quadratic (within 2%); an allocation the other trace does not make (one that exists
-- only at some sizes) and a match whose ratio is none of these take the one-trace rule.
local function two_growth(base, bsize, ref, rsize, check, csize)
  local ab, rule = one_growth(base, bsize)
  local ar = ref:allocations()
  local x = rsize / bsize
  local m, npaired = match(base, ref, ab, ar, x)
  -- a third size checks each fit: an allocation whose growth to it is of another class (its
  -- layer's shape changed between the sizes: a program configured per size) takes the rule
  local mc, ac, xc = nil, nil, nil
  if check then
    ac = check:allocations()
    xc = csize / bsize
    mc = match(base, check, ab, ac, xc)
  end
  local p_of = {}
  local c = {constant = 0, linear = 0, quadratic = 0, rule = 0, unmatched = 0, disagree = 0}
  for i = 1, ab.n do
    local j = m[i]
    if j then
      local cls, p = classify(ar.size[j] / ab.size[i], x)
      local jc = mc and mc[i]
      if cls ~= 'power' and jc and classify(ac.size[jc] / ab.size[i], xc) ~= cls then
        p_of[i] = rule[i]
        c.disagree = c.disagree + 1
      elseif cls == 'power' then
        p_of[i] = rule[i]
        c.rule = c.rule + 1
      else
        p_of[i] = p
        c[cls] = c[cls] + 1
      end
    elseif ab.site[i] == 0 or ab.persistent[i] then
      -- live before the trace or without a call stack: nothing to match it by
      p_of[i] = 0
      c.constant = c.constant + 1
    else
      p_of[i] = rule[i]
      c.unmatched = c.unmatched + 1
    end
  end
  note(string.format('allocations of %s (%s %d) matched by call site and order with %s (%s %d)%s',
    base:name(), unit, bsize, ref:name(), unit, rsize,
    npaired > 0 and string.format('; %d call sites found in one trace only paired by their innermost frames', npaired) or ''))
  note(string.format('growth of %d allocations: %d constant, %d linear, %d quadratic fitted from both sizes; %d whose ratio fits no class and %d the other trace does not make (made only at some sizes) take the one-trace rule',
    ab.n, c.constant, c.linear, c.quadratic, c.rule, c.unmatched))
  if check then
    note(string.format('checked against %s (%s %d): %d allocations whose growth to it is of another class take the one-trace rule',
      check:name(), unit, csize, c.disagree))
  end
  return ab, p_of
end

-- Kernels of the base matched by name and order with the reference's, durations fitted as a
-- power law through both; a kernel the reference does not run (chosen at this size only)
-- takes the median exponent of the matched ones.
local function retime_kernels(base, bsize, ref, rsize, target)
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
  if #kb == 0 then return nil end
  local kr = {}
  for _, k in ipairs(kernel_list(ref)) do kr[k.key] = k.dur end
  local exps, pk = {}, {}
  for _, k in ipairs(kb) do
    local d2 = kr[k.key]
    if d2 and k.dur > 0 and d2 > 0 then
      pk[k.seq] = math.log(d2 / k.dur) / math.log(rsize / bsize)
      exps[#exps + 1] = pk[k.seq]
    end
  end
  table.sort(exps)
  local median = exps[(#exps + 1) // 2] or 1
  local retime = {}
  for _, k in ipairs(kb) do
    if k.dur and k.dur > 0 then retime[k.seq] = math.floor(k.dur * (target / bsize) ^ (pk[k.seq] or median) + 0.5) end
  end
  return retime
end

-- Predicts the job at size target from a list of {trace, size}: the trace nearest the target
-- (in ratio) is resized allocation by allocation, its growths fitted against the next nearest.
local function predict(list, target)
  local order = {}
  for k, a in ipairs(list) do order[k] = a end
  table.sort(order, function(p, q)
    local dp, dq = math.abs(math.log(target / p.size)), math.abs(math.log(target / q.size))
    if dp ~= dq then return dp < dq end
    return p.size > q.size
  end)
  local b, r = order[1], order[2]
  local ab, p_of
  local k = order[3]
  if r then ab, p_of = two_growth(b.trace, b.size, r.trace, r.size, k and k.trace, k and k.size)
  else ab, p_of = one_growth(b.trace, b.size) end
  local resize = {}
  for i = 1, ab.n do
    local p = p_of[i]
    if p ~= 0 then
      local new = math.floor(ab.size[i] * (target / b.size) ^ p + 0.5)
      if new ~= ab.size[i] then resize[ab.seq[i]] = new end
    end
  end
  local t = b.trace:resize(resize)
  local retime = r and retime_kernels(b.trace, b.size, r.trace, r.size, target)
  if retime then
    t = t:map(function(ev)
      local d = retime[ev.seq]
      if d then ev.dur = d end
    end, {kind = 'kernel'})
  end
  return t, b
end

local function batch_at(n) return unit == 'batch' and n or S.batch end
local function pct(p, real) return 100 * (p - real) / real end

-- the recorded inputs
local real = {}
for k, a in ipairs(inputs) do
  real[k] = S:replay(a.trace)
  S:record(string.format('%s (%s %d, recorded)', a.trace:name(), unit, a.size), real[k], {size = a.size, batch = batch_at(a.size)})
end

-- leave one out: each input predicted from the others, against its own replay
local band, loo = nil, {}
if #inputs >= 3 then
  quiet = true
  band = 0
  for k, a in ipairs(inputs) do
    local rest = {}
    for j, o in ipairs(inputs) do if j ~= k then rest[#rest + 1] = o end end
    local t, b = predict(rest, a.size)
    local r = S:replay(t)
    local ea, er = pct(r.peak_allocated_bytes, real[k].peak_allocated_bytes), pct(r.peak_reserved_bytes, real[k].peak_reserved_bytes)
    band = math.max(band, math.abs(ea), math.abs(er))
    loo[#loo + 1] = string.format('%s %d from the others (base %s %d): peak allocated %+.2f%%, peak reserved %+.2f%%',
      unit, a.size, unit, b.size, ea, er)
    S:record(string.format('left out: %s at %s %d', a.trace:name(), unit, a.size), r,
      {size = a.size, batch = batch_at(a.size), error = string.format('%+.2f%% / %+.2f%%', ea, er)})
  end
  quiet = false
end

local predicted = predict(inputs, at)
local rp = S:replay(predicted)
local band_text
if band then
  band_text = string.format('error band: ±%.1f%% (the largest leave-one-out error of %d input sizes)', band, #inputs)
else
  band = DOC_BAND[#inputs]
  band_text = string.format('error band: ±%.1f%% (the method\'s largest error on real pairs with %d input trace%s, docs/accuracy.md)',
    band, #inputs, #inputs == 1 and '' or 's')
end
S:record(string.format('predicted at %s %d', unit, at), rp, {size = at, batch = batch_at(at),
  error = string.format('±%.1f%%', band)})
for _, s in ipairs(loo) do memplay.assume('leave one out: ' .. s) end
memplay.assume(band_text)
local names = {}
for _, a in ipairs(inputs) do names[#names + 1] = tostring(a.size) end
S:report{
  title = string.format('scale fit: %s at %s %d, from %s %s', S.trace:name(), unit, at, unit .. (#inputs > 1 and 's' or ''), table.concat(names, ', ')),
  before = {{key = 'size', title = unit}},
  columns = {{key = 'error', title = 'error (allocated / reserved)'}},
}
