-- mixed_precision.lua: automatic mixed precision (torch.autocast to bf16 or fp16) as it really
-- behaves, from a trace recorded in fp32. A trace already under autocast (its call stacks pass
-- through at::autocast) is reported as it is, labelled so, and not converted again.
--
-- Model (memory):
--   * parameters stay fp32 (the master weights), and so do their gradients and the optimizer
--     state: none of that memory changes;
--   * autocast casts a weight to 16 bits the first time a matmul-class op uses it inside the
--     autocast region and keeps the copy (its cast cache) until the region ends; in training
--     the copy is also saved for backward, so it lives until backward is done. The copies add
--     half the bytes of the weights that matmuls use. Which weights: the parameters (category
--     parameter, else what lives before the trace starts, counted once when optimizer state
--     repeats their sizes) of at least 64 KiB, less an embedding table (the largest size when it
--     appears twice, embedding and output projection); the copies are spread over the forward's
--     weight matmuls in proportion to their output sizes;
--   * an fp32 activation fed to a matmul is cast too: a 16-bit copy made before the op and
--     dropped after it;
--   * outputs of matmul-class ops (mm, bmm, addmm, baddbmm, matmul, linear, einsum,
--     convolution) are 16-bit; ops on autocast's fp32 list (softmax, log_softmax, layer_norm,
--     exp, log, pow, sum, norms, losses, ...) output fp32; other ops output the widest type of
--     their inputs, taken as the tensors of the same size made last and still live (the same
--     shape, in an fp32 trace); in backward a gradient has the type of its tensor, by the same
--     rules applied to the backward op's name;
--   * ops are read from each allocation's call stack (ATen operator frames, autograd backward
--     nodes, Python function names); an allocation whose op cannot be read keeps fp32.
-- Model (time, when the trace has kernels and a device is given):
--   * matmul-class kernels run matmul_speedup times faster (default 8: fp32 CUDA cores against
--     16-bit tensor cores at the efficiencies public GEMM benchmarks reach, e.g. A100 19.5 vs
--     312 TFLOPS peak; 2 when the fp32 run already used TF32, --set tf32=true);
--   * elementwise and copy kernels run 0.75 of their time (memory bound, about half of their
--     traffic 16-bit); norms, softmax, reductions and the optimizer stay fp32 and keep theirs;
--   * each cast is a copy kernel moving its bytes at the device's memory bandwidth
--     (--set mem_bw_gbs, default 1500 GB/s).
-- Parameters (--set):
--   precision=bf16|fp16       the 16-bit type (the memory model is the same; fp16 adds a loss scaler's few bytes)
--   matmul_speedup=X, tf32=true|false, elementwise_factor=X, mem_bw_gbs=X   the time model's figures
--   training=true|false       whether the trace is a training step (default: it has a backward pass)
--   optimizer_copies=N        without categories: copies of each parameter's size alive before the
--                             trace (default 3 in training: the parameter and Adam's two moments; 1 in inference)
--   allocator=SPEC, capacity=SIZE, batch=N  as for every scenario
local S = memplay.scenario_context()
local t = S.trace:cache()
local precision = memplay.param('precision', 'bf16')
if precision ~= 'bf16' and precision ~= 'fp16' then error('--set precision: bf16 or fp16, not ' .. precision) end
local tf32 = memplay.param('tf32', false)
local matmul_speedup = memplay.param('matmul_speedup', tf32 and 2.0 or 8.0)
local elementwise_factor = memplay.param('elementwise_factor', 0.75)
local mem_bw = memplay.param('mem_bw_gbs', 1500.0) * 1e9
if matmul_speedup <= 0 or elementwise_factor <= 0 or mem_bw <= 0 then error('--set: the time figures must be positive') end

-- ---- is the trace already under autocast? ------------------------------------------------
-- A memory snapshot records no dtypes; what says a run was under autocast is its call stacks:
-- ops dispatched under autocast pass through at::autocast (WrapFunction_, cached_cast). Such a
-- trace is the baseline as it is: nothing in it is converted a second time.
local function autocast_frames(tr)
  local sites, n = 0, 0
  for _, s in ipairs(tr:sites()) do
    sites = sites + 1
    for _, f in ipairs(tr:frames(s.site)) do
      if f.name:find('at::autocast::', 1, true) then
        n = n + s.count
        break
      end
    end
  end
  return n, sites
end
local already, nsites = autocast_frames(S.trace)
if already > 0 then
  local base = S:replay(t)
  S:record('autocast (as recorded)', base, {})
  memplay.assume(string.format('the trace is already under autocast: %d allocations were made by ops its call stacks show dispatched through at::autocast; it is the baseline as recorded and nothing is converted twice (the %s asked for is not applied)',
    already, precision))
  S:report{title = string.format('mixed precision for %s (allocator %s): already under autocast', S.info.name, S.allocator)}
  return
end
if nsites == 0 then
  memplay.assume('the trace has no call stacks: taken to be fp32, as nothing says it ran under autocast')
end

-- ---- what op made each allocation --------------------------------------------------------

local MATMUL = {bmm = 1, mm = 1, addmm = 1, baddbmm = 1, addbmm = 1, matmul = 1, linear = 1, einsum = 1,
                convolution = 1, cudnn_convolution = 1, conv1d = 1, conv2d = 1, conv3d = 1, _convolution = 1,
                addmv = 1, mv = 1, dot = 1, chain_matmul = 1, prelu = 1}
local FP32 = {softmax = 1, _softmax = 1, log_softmax = 1, _log_softmax = 1, layer_norm = 1, native_layer_norm = 1,
              group_norm = 1, native_group_norm = 1, exp = 1, expm1 = 1, log = 1, log10 = 1, log2 = 1, log1p = 1,
              pow = 1, rsqrt = 1, reciprocal = 1, sum = 1, prod = 1, cumsum = 1, cumprod = 1, norm = 1,
              frobenius_norm = 1, nuclear_norm = 1, cross_entropy = 1, nll_loss = 1, nll_loss2d = 1, mse_loss = 1,
              l1_loss = 1, smooth_l1_loss = 1, huber_loss = 1, kl_div = 1, binary_cross_entropy_with_logits = 1,
              logsumexp = 1, acos = 1, asin = 1, cosh = 1, sinh = 1, tan = 1, erfinv = 1, softplus = 1,
              cosine_similarity = 1, dist = 1, cdist = 1, pdist = 1, renorm = 1, soft_margin_loss = 1,
              multi_margin_loss = 1, triplet_margin_loss = 1, margin_ranking_loss = 1, hinge_embedding_loss = 1,
              poisson_nll_loss = 1, cosine_embedding_loss = 1, multilabel_margin_loss = 1, rms_norm = 1}
local PROMOTE = {add = 1, sub = 1, mul = 1, div = 1, cat = 1, stack = 1, where = 1, addcmul = 1, addcdiv = 1,
                 masked_fill = 1, lerp = 1, maximum = 1, minimum = 1, atan2 = 1, index_put = 1}
local KNOWN = {}
for _, set in ipairs{MATMUL, FP32, PROMOTE} do for k in pairs(set) do KNOWN[#KNOWN + 1] = k end end
for _, k in ipairs{'neg', 'silu', 'gelu', 'relu', 'sqrt', 'tanh', 'sigmoid', 'dropout', 'clone', 'index', 'gather',
                   'embedding', 'max', 'min', 'mean', 'eq', 'ne', 'lt', 'gt', 'tril', 'triu', 'copy', 'contiguous',
                   'transpose', 'expand', 'empty', 'zeros', 'ones', 'full', 'arange', 'abs', 'sign', 'clamp',
                   'native_dropout', 'fill', 'resize', 'view', 'reshape', 'scatter', 'split', 'unsqueeze'} do
  KNOWN[#KNOWN + 1] = k
end
table.sort(KNOWN, function(a, b) return #a > #b end) -- longest first

local function known_prefix(s)
  s = s:lower():gsub('^_+', '')
  for _, k in ipairs(KNOWN) do
    local kk = k:gsub('^_+', '')
    if s:sub(1, #kk) == kk and (#s == #kk or not s:sub(#kk + 1, #kk + 1):match('%a')) then return k end
  end
  return nil
end

local function camel_to_snake(s) return (s:gsub('(%l)(%u)', '%1_%2'):lower()) end

-- Ops that only make room for another op's output: the op that called them says more.
local GENERIC = {empty = 1, empty_strided = 1, empty_like = 1, new_empty = 1, new_empty_strided = 1, zeros = 1,
                 zeros_like = 1, ones = 1, ones_like = 1, full = 1, full_like = 1, resize = 1, resize_ = 1,
                 to = 1, _to_copy = 1, copy = 1, copy_ = 1, contiguous = 1, clone = 1, view = 1, reshape = 1,
                 expand = 1, as_strided = 1}

-- {op = name, backward = bool, weight = bool (a matmul with a weight), attention = bool}
local site_info = {}
local function info_of(site)
  local c = site_info[site]
  if c then return c end
  c = {}
  local generic = nil
  if site and site > 0 then
    for _, f in ipairs(t:frames(site)) do
      local n, file = f.name or '', f.file or ''
      if not c.op then
        -- ATen operators: "wrapper_CUDA_mul_Tensor", "structured_mul_out", "aten::mul"; autograd
        -- nodes: "MulBackward0"
        local w = n:match('wrapper_[%w]*_([%w_]+)') or n:match('structured_([%w_]+)_out') or n:match('^aten::([%w_]+)')
        local bw = n:match('(%w+)Backward%d*')
        local op = nil
        if bw and not n:find('^torch::autograd::Engine') then
          op = known_prefix(camel_to_snake(bw)) or camel_to_snake(bw)
          c.backward = true
        elseif w then
          op = known_prefix(w) or w
        end
        if op then
          if GENERIC[op] or GENERIC[op:gsub('^_+', '')] then generic = generic or op
          else c.op = op end
        end
      end
      if n:find('Backward') or n:find('autograd::Engine') or n:find('evaluate_function') then c.backward = true end
      local lower = (n .. ' ' .. file):lower()
      if lower:find('attention') or lower:find('attn') or lower:find('sdpa') then c.attention = true end
      if lower:find('linear') then c.linear = true end
      if not c.py and (file:find('%.py$') or n:find('^torch%.')) then
        c.py = known_prefix((n:match('([%w_]+)$') or n))
      end
    end
    c.op = c.op or c.py or generic
    if c.op and not (MATMUL[c.op] or FP32[c.op] or PROMOTE[c.op]) and not known_prefix(c.op) then c.op = nil end
    if c.linear and (not c.op or MATMUL[c.op]) then c.op = c.op or 'linear' end
    c.weight = c.op ~= nil and MATMUL[c.op] ~= nil and not c.attention
  end
  site_info[site] = c
  return c
end

-- ---- the allocations, their types -------------------------------------------------------

local a = t:allocations()
local is_training = memplay.param('training', (function()
  for i = 1, math.min(a.n, 200000) do
    if info_of(a.site[i]).backward then return true end
  end
  return false
end)())

-- weights matmuls use: parameters >= 64 KiB, once each, less an embedding table
local params = {}
local by_cat = t:summary().by_category.parameter ~= nil
for i = 1, a.n do
  if (by_cat and a.category[i] == 'parameter') or (not by_cat and a.persistent[i] and a.site[i] == 0) then
    params[#params + 1] = a.size[i]
  end
end
local mult, total_param_bytes = {}, 0
for _, s in ipairs(params) do
  mult[s] = (mult[s] or 0) + 1
  total_param_bytes = total_param_bytes + s
end
-- Without categories, what lives before the trace is the parameters and, in training, the
-- optimizer's copies of them (Adam: two), so every parameter size repeats `copies` times.
local copies = 1
if not by_cat then
  copies = memplay.param('optimizer_copies', is_training and 3 or 1)
  if copies < 1 then error('--set optimizer_copies must be at least 1') end
  for s, m in pairs(mult) do
    if s >= (1 << 20) and m % copies ~= 0 then
      memplay.assume(string.format('%d allocations of %s live before the trace: not a multiple of %d copies (parameters and optimizer state); some are buffers', m, memplay.bytes(s), copies))
    end
  end
end
local weights, largest, largest_count, nparams = 0, 0, 0, 0
for s, m in pairs(mult) do
  local per = m // copies
  nparams = nparams + per
  if s >= 65536 then
    weights = weights + s * per
    if s > largest then largest, largest_count = s, per end
  end
end
if largest_count == 2 then weights = weights - largest end -- the embedding table is not cast
total_param_bytes = total_param_bytes // copies

-- the forward region per step: up to where live transient memory peaks (training), else all
local steps = {}
for _, s in ipairs(t:steps()) do steps[#steps + 1] = {s.first_seq, s.last_seq} end
if #steps == 0 then steps[1] = {0, math.maxinteger} end

local new_size, before, after = {}, {}, {}
local function add(map, seq, ev)
  local l = map[seq]
  if not l then l = {}; map[seq] = l end
  l[#l + 1] = ev
end
local fresh = 0
local function fresh_addr() fresh = fresh + 1; return memplay.fresh_addr(fresh) end
local n16, n32, bytes_saved, cache_bytes, cast_count, unknown_ops = 0, 0, 0, 0, 0, 0

-- allocations in seq order (a recorded trace's are): each step's are read from its first
local sorted = true
for i = 2, a.n do if a.seq[i] < a.seq[i - 1] then sorted = false; break end end

for _, range in ipairs(steps) do
  local lo, hi = range[1], range[2]
  local idx = {}
  for i = sorted and memplay.lower_bound(a.seq, lo) or 1, a.n do
    if a.seq[i] > hi then
      if sorted then break end
    elseif a.seq[i] >= lo then
      idx[#idx + 1] = i
    end
  end
  -- forward end and the step's end (where casts are dropped)
  local live, peak, fend, last = 0, -1, hi, lo
  local dseq, dsize, nd = {}, {}, 0 -- each allocation's and free's seq (a stored trace's are unique), and its bytes
  for _, i in ipairs(idx) do
    if not a.persistent[i] then
      nd = nd + 1; dseq[nd], dsize[nd] = a.seq[i], a.size[i]
      if a.free_seq[i] >= 0 then nd = nd + 1; dseq[nd], dsize[nd] = a.free_seq[i], -a.size[i] end
    end
    if a.seq[i] > last then last = a.seq[i] end
  end
  for _, k in ipairs(memplay.order(dseq)) do
    live = live + dsize[k]
    if live > peak then peak, fend = live, dseq[k] end
  end
  if not is_training then fend = last end
  local region_end = last -- casts and the cast cache go when the step's work is done
  for _, s in ipairs(dseq) do if s > region_end then region_end = s end end

  -- types, in order; live tensors by size for the "same shape" rule
  local dtype = {}
  local live_by_size = {}
  local eseq, eidx, ne = {}, {}, 0 -- the step's allocations (index i) and frees (-i) by seq
  for _, i in ipairs(idx) do
    ne = ne + 1; eseq[ne], eidx[ne] = a.seq[i], i
    if a.free_seq[i] >= 0 then ne = ne + 1; eseq[ne], eidx[ne] = a.free_seq[i], -i end
  end
  local eorder = memplay.order(eseq)
  local weight_calls, out_total = {}, 0
  for _, k in ipairs(eorder) do
    local i = math.abs(eidx[k])
    local size = a.size[i]
    if eidx[k] > 0 then
      local d
      if a.persistent[i] or a.site[i] == 0 then
        d = 32
      else
        local c = info_of(a.site[i])
        local l = live_by_size[size]
        local last1 = l and l[#l]
        local last2 = l and l[#l - 1]
        if c.op and MATMUL[c.op] and not c.backward then
          d = 16
          if c.weight and a.seq[i] <= fend then
            weight_calls[#weight_calls + 1] = i
            out_total = out_total + size
          end
        elseif c.op and FP32[c.op] then
          d = 32
        elseif c.op and MATMUL[c.op] and c.backward then
          d = last1 and dtype[last1] or 16 -- the gradient of a 16-bit matmul input
        elseif c.op and PROMOTE[c.op] then
          d = ((last1 and dtype[last1] == 32) or (last2 and dtype[last2] == 32) or not last1) and 32 or 16
        else
          if not c.op then unknown_ops = unknown_ops + 1 end
          d = last1 and dtype[last1] or 32
        end
      end
      dtype[i] = d
      local l = live_by_size[size]
      if not l then l = {}; live_by_size[size] = l end
      l[#l + 1] = i
      if d == 16 then
        n16 = n16 + 1
        local ns = (size + 1) // 2
        ns = ns + ns % 2
        new_size[a.seq[i]] = ns
        bytes_saved = bytes_saved + size - ns
      else
        n32 = n32 + 1
      end
    else
      local l = live_by_size[size]
      if l then
        for k = #l, 1, -1 do if l[k] == i then table.remove(l, k); break end end
      end
    end
  end

  -- the weight cache: copies made at the weight matmuls, dropped when the region ends
  if out_total > 0 and weights > 0 then
    local total_copy = weights // 2
    for _, i in ipairs(weight_calls) do
      local sz = math.max(2, math.floor(total_copy * a.size[i] / out_total + 0.5))
      local addr = fresh_addr()
      add(before, a.seq[i], {kind = 'alloc', addr = addr, size = sz, category = 'temporary', site = a.site[i], stream = a.stream[i]})
      add(after, region_end, {kind = 'free', addr = addr, stream = a.stream[i]})
      cache_bytes = cache_bytes + sz
    end
  end
  -- casts of fp32 activations fed to a matmul: the last fp32 transient tensor made before it
  local recent32 = nil
  for _, k in ipairs(eorder) do
    local i = math.abs(eidx[k])
    if eidx[k] > 0 and not a.persistent[i] and a.site[i] ~= 0 then
      local c = info_of(a.site[i])
      if c.op and MATMUL[c.op] and not c.backward and recent32 and a.seq[i] <= fend then
        local addr = fresh_addr()
        local sz = (a.size[recent32] + 1) // 2
        add(before, a.seq[i], {kind = 'alloc', addr = addr, size = sz, category = 'temporary', site = a.site[i], stream = a.stream[i]})
        add(after, a.seq[i], {kind = 'free', addr = addr, stream = a.stream[i]})
        add(before, a.seq[i], {kind = 'kernel', dur = math.floor(3 * sz / mem_bw * 1e9 + 0.5), stream = a.stream[i]})
        cast_count = cast_count + 1
        recent32 = nil
      elseif dtype[i] == 32 then
        recent32 = i
      end
    elseif eidx[k] < 0 and recent32 == i then
      recent32 = nil
    end
  end
end

-- the derived traces
local amp = t:resize(new_size):insert_at{before = before, after = after}
  :scale_time{class = 'matmul', factor = 1 / matmul_speedup}
  :scale_time{class = {'elementwise', 'copy'}, factor = elementwise_factor}
local naive = t:scale(memplay.activation_filter{factor = 0.5, align = 2})

local base = S:replay(t)
S:record('fp32 (as recorded)', base, {})
local rn = S:replay(naive)
S:record('naive: activations halved', rn, {})
local r = S:replay(amp)
S:record('autocast ' .. precision, r, {})

memplay.assume(string.format('%s: %s of the %s of parameters (%d) are weights matmuls use; their 16-bit copies: %s per step',
  is_training and 'training (the cast copies live until backward ends)' or 'inference (the cast copies live until the forward ends)',
  memplay.bytes(weights), memplay.bytes(total_param_bytes), nparams, memplay.bytes(weights // 2)))
memplay.assume(string.format('%d allocations become 16-bit (%s saved), %d stay fp32; %d casts of fp32 activations into matmuls',
  n16, memplay.bytes(bytes_saved), n32, cast_count))
if unknown_ops > 0 then
  memplay.assume(string.format('%d allocations with no op in their call stack take the type of the last live tensor of their size (or fp32)', unknown_ops))
end
if t:count{kind = 'kernel'} > 0 then
  memplay.assume(string.format('time: matmul kernels %.3gx faster%s, elementwise and copy kernels x%.3g, casts at %.0f GB/s',
    matmul_speedup, tf32 and ' (the fp32 run used TF32)' or '', elementwise_factor, mem_bw / 1e9))
end
-- the measured error of the model on real pairs (docs/accuracy.md, "mixed_precision: real
-- pairs"): the largest |error| of peak allocated and peak reserved
local DOC_BAND = 1.9
memplay.assume(string.format('error band: ±%.1f%% (the model\'s largest error on the real fp32/autocast pairs, docs/accuracy.md)', DOC_BAND))
S:report{
  title = string.format('mixed precision (%s autocast) for %s (allocator %s)', precision, S.info.name, S.allocator),
}
