/* gen.c: the synthetic training-loop generator behind `memplay gen` (model in docs/formats.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "gen.h"

/*
 * The model: a decoder-only transformer trained with Adam in bf16 activations / fp32 weights.
 *  - start-up: every weight tensor is allocated (parameter), then the first step allocates
 *    gradients (gradient) in backward and Adam's two moments (optimizer_state) in step();
 *  - each step: a batch is copied in from pinned host memory (input); forward allocates the
 *    activations each layer saves for backward (activation) and frees short-lived temporaries
 *    (temporary, workspace); backward frees each layer's activations in reverse order while
 *    computing gradients; the optimizer updates every parameter; the step ends with a sync;
 *  - sequence length varies from step to step (padding to the longest sample, rounded to 64),
 *    so activation sizes change as they do in real language-model training;
 *  - times: kernels take time proportional to their work at a fixed throughput, the host
 *    spends a few microseconds per launch and waits at each synchronization.
 */

enum {
  S_WEIGHT = 1, S_GRAD, S_ADAM, S_INPUT, S_LN, S_QKV, S_SCORES, S_SOFTMAX, S_ATTN, S_PROJ, S_FC1, S_GELU, S_FC2,
  S_TMP_FWD, S_WORKSPACE, S_BWD_TMP, S_LOSS, S_OPT_TMP, S__COUNT
};

typedef struct site_def {
  const char *op, *func, *file;
  int line;
} site_def;

static const site_def sites[S__COUNT] = {
  [S_WEIGHT] = {"torch.nn.Linear.__init__", "Model.__init__", "model.py", 41},
  [S_GRAD] = {"torch.autograd.backward", "AccumulateGrad", "train.py", 88},
  [S_ADAM] = {"torch.optim.Adam._init_group", "Adam.step", "train.py", 91},
  [S_INPUT] = {"torch.Tensor.to", "load_batch", "train.py", 72},
  [S_LN] = {"torch.nn.functional.layer_norm", "Block.forward", "model.py", 63},
  [S_QKV] = {"torch.nn.functional.linear", "Attention.forward", "model.py", 22},
  [S_SCORES] = {"torch.matmul", "Attention.forward", "model.py", 25},
  [S_SOFTMAX] = {"torch.softmax", "Attention.forward", "model.py", 26},
  [S_ATTN] = {"torch.matmul", "Attention.forward", "model.py", 27},
  [S_PROJ] = {"torch.nn.functional.linear", "Attention.forward", "model.py", 28},
  [S_FC1] = {"torch.nn.functional.linear", "MLP.forward", "model.py", 35},
  [S_GELU] = {"torch.nn.functional.gelu", "MLP.forward", "model.py", 36},
  [S_FC2] = {"torch.nn.functional.linear", "MLP.forward", "model.py", 37},
  [S_TMP_FWD] = {"torch.Tensor.contiguous", "Attention.forward", "model.py", 24},
  [S_WORKSPACE] = {"cublasLtMatmul", "torch.nn.functional.linear", "model.py", 22},
  [S_BWD_TMP] = {"torch.autograd.backward", "LinearBackward", "train.py", 88},
  [S_LOSS] = {"torch.nn.functional.cross_entropy", "train_step", "train.py", 85},
  [S_OPT_TMP] = {"torch._foreach_mul", "Adam.step", "train.py", 91},
};

enum { N_GEMM = 1, N_ELEMWISE, N_SOFTMAX, N_LAYERNORM, N_ADAM, N_MEMCPY, N_STEP, N_SYNC, N__COUNT };
static const char *const names[N__COUNT] = {
  [N_GEMM] = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
  [N_ELEMWISE] = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
  [N_SOFTMAX] = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>",
  [N_LAYERNORM] = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>",
  [N_ADAM] = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>",
  [N_MEMCPY] = "Memcpy HtoD (Pinned -> Device)",
  [N_STEP] = "ProfilerStep",
  [N_SYNC] = "cudaStreamSynchronize",
};

int gen_nsites(void) { return S__COUNT - 1; }
int gen_nnames(void) { return N__COUNT - 1; }
const char *gen_name(int id) { return id > 0 && id < N__COUNT ? names[id] : NULL; }

typedef struct gen_param {
  uint64_t addr, size;
  uint64_t grad, m, v; /* 0 until created */
} gen_param;

struct gen {
  gen_config cfg;
  uint64_t rng;
  int layers, hidden, heads, batch, seq_max, vocab;
  gen_param *params;
  int nparams;
  uint64_t next_addr;
  int64_t clock;       /* host time, ns */
  int64_t stream_free; /* when the device stream is next idle, ns */
  int step;
  uint64_t emitted;
  sim_event *buf;      /* the current step's events */
  size_t n, cap, pos;
  int started;
  char desc[160];
};

static uint64_t rnd(gen *g) { /* splitmix64 */
  uint64_t z = (g->rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static sim_event *push(gen *g, int kind) {
  sim_grow((void **)&g->buf, &g->cap, g->n + 1, sizeof *g->buf);
  sim_event *ev = &g->buf[g->n++];
  sim_event_init(ev);
  ev->kind = (uint8_t)kind;
  ev->ts = g->clock;
  ev->step = g->step;
  return ev;
}

static uint64_t alloc(gen *g, uint64_t size, int site, int cat) {
  sim_event *ev = push(g, SIM_EV_ALLOC);
  ev->addr = g->next_addr++;
  ev->size = size;
  ev->mem = SIM_MEM_DEVICE;
  ev->stack = site;
  ev->category = (uint8_t)cat;
  ev->cat_source = SIM_CATSRC_SOURCE;
  ev->api_dur = 0;
  g->clock += 1000;
  return ev->addr;
}

static void release(gen *g, uint64_t addr) {
  sim_event *ev = push(g, SIM_EV_FREE);
  ev->addr = addr;
  g->clock += 700;
}

/* A kernel doing `work` units (bytes touched or flops / 64) at the model's throughput. */
static void kernel(gen *g, int name, uint64_t work) {
  sim_event *ev = push(g, SIM_EV_KERNEL);
  ev->name = name;
  ev->api_dur = 4000;
  ev->dur = 2000 + (int64_t)(work / 1500);
  int64_t start = g->clock + 4000 > g->stream_free ? g->clock + 4000 : g->stream_free;
  ev->dev_ts = start;
  g->stream_free = start + ev->dur;
  g->clock += 5000;
}

static void sync_host(gen *g) {
  sim_event *ev = push(g, SIM_EV_SYNC);
  ev->stream = 0;
  ev->name = N_SYNC;
  int64_t wait = g->stream_free > g->clock ? g->stream_free - g->clock : 0;
  ev->dur = wait + 3000;
  g->clock += ev->dur;
}

static void build_model(gen *g) {
  int h = g->hidden;
  uint64_t w4 = 4; /* fp32 weights */
  free(g->params);
  g->params = sim_xcalloc((size_t)g->layers * 8 + 2, sizeof *g->params);
  g->nparams = 0;
  uint64_t shapes[8] = {(uint64_t)3 * h * h, (uint64_t)3 * h, (uint64_t)h * h, (uint64_t)h,
                        (uint64_t)4 * h * h, (uint64_t)4 * h, (uint64_t)4 * h * h, (uint64_t)2 * h};
  g->params[g->nparams++] = (gen_param){.size = (uint64_t)g->vocab * h * w4};
  for (int l = 0; l < g->layers; l++)
    for (int k = 0; k < 8; k++) g->params[g->nparams++] = (gen_param){.size = shapes[k] * w4};
  g->params[g->nparams++] = (gen_param){.size = (uint64_t)2 * h * w4};
  for (int i = 0; i < g->nparams; i++) {
    g->params[i].addr = alloc(g, g->params[i].size, S_WEIGHT, SIM_CAT_PARAMETER);
    g->buf[g->n - 1].step = -1;
  }
}

/* This step's sequence length: the longest sample, padded to a multiple of 64. */
static int step_seq(gen *g) {
  int seq = (int)(g->seq_max / 2 + rnd(g) % (uint64_t)(g->seq_max / 2 + 1));
  seq = (seq + 63) / 64 * 64;
  if (seq > g->seq_max) seq = g->seq_max;
  return seq;
}

/* The batch copied in from pinned host memory: its address. */
static uint64_t load_batch(gen *g, uint64_t tok) {
  uint64_t input = alloc(g, tok * 8, S_INPUT, SIM_CAT_INPUT);
  sim_event *cp = push(g, SIM_EV_MEMCPY);
  cp->dir = SIM_COPY_H2D;
  cp->mem = SIM_MEM_PINNED;
  cp->size = tok * 8;
  cp->flags = SIM_EVF_ASYNC;
  cp->name = N_MEMCPY;
  cp->dur = (int64_t)(cp->size / 20) + 2000;
  g->clock += 3000;
  return input;
}

/* One layer's forward pass: it saves 7 activations (in s); scores are the largest. */
static void forward_layer(gen *g, uint64_t *s, uint64_t act, int seq) {
  int h = g->hidden, b = g->batch;
  s[0] = alloc(g, act, S_LN, SIM_CAT_ACTIVATION);
  kernel(g, N_LAYERNORM, act);
  uint64_t ws = alloc(g, (uint64_t)4 << 20, S_WORKSPACE, SIM_CAT_WORKSPACE);
  s[1] = alloc(g, 3 * act, S_QKV, SIM_CAT_ACTIVATION);
  kernel(g, N_GEMM, 3 * act * h / 64);
  release(g, ws);
  uint64_t tmp = alloc(g, act, S_TMP_FWD, SIM_CAT_TEMPORARY);
  kernel(g, N_ELEMWISE, act);
  uint64_t scores_sz = (uint64_t)b * g->heads * seq * seq * 2;
  uint64_t scores = alloc(g, scores_sz, S_SCORES, SIM_CAT_TEMPORARY);
  kernel(g, N_GEMM, scores_sz * 64 / 64);
  release(g, tmp);
  s[2] = alloc(g, scores_sz, S_SOFTMAX, SIM_CAT_ACTIVATION);
  kernel(g, N_SOFTMAX, scores_sz);
  release(g, scores);
  s[3] = alloc(g, act, S_ATTN, SIM_CAT_ACTIVATION);
  kernel(g, N_GEMM, act * seq / 64);
  s[4] = alloc(g, act, S_PROJ, SIM_CAT_ACTIVATION);
  kernel(g, N_GEMM, act * h / 64);
  s[5] = alloc(g, 4 * act, S_FC1, SIM_CAT_ACTIVATION);
  kernel(g, N_GEMM, 4 * act * h / 64);
  s[6] = alloc(g, 4 * act, S_GELU, SIM_CAT_ACTIVATION);
  kernel(g, N_ELEMWISE, 4 * act);
  uint64_t out = alloc(g, act, S_FC2, SIM_CAT_TEMPORARY);
  kernel(g, N_GEMM, 4 * act * h / 64);
  release(g, out);
}

/* One layer's backward pass: its activations freed in reverse order, its weights' gradients
 * made on the first step. */
static void backward_layer(gen *g, int l, const uint64_t *s, uint64_t act) {
  int h = g->hidden;
  uint64_t dx = alloc(g, 4 * act, S_BWD_TMP, SIM_CAT_TEMPORARY);
  kernel(g, N_GEMM, 8 * act * h / 64);
  for (int k = 6; k >= 0; k--) {
    release(g, s[k]);
    if (k % 2 == 0) kernel(g, N_ELEMWISE, act);
  }
  for (int k = 0; k < 8; k++) {
    gen_param *p = &g->params[1 + l * 8 + k];
    if (!p->grad) p->grad = alloc(g, p->size, S_GRAD, SIM_CAT_GRADIENT);
  }
  kernel(g, N_GEMM, 8 * act * h / 64);
  release(g, dx);
}

/* Forward through every layer and the loss, then backward: the gradients of the logits, then
 * the layers in reverse. */
static void forward_backward(gen *g, uint64_t tok, uint64_t act, int seq) {
  int h = g->hidden, L = g->layers;
  uint64_t *saved = sim_xmalloc(sizeof(uint64_t) * (size_t)L * 7);
  for (int l = 0; l < L; l++) forward_layer(g, saved + l * 7, act, seq);
  uint64_t logits = alloc(g, tok * (uint64_t)g->vocab * 4, S_LOSS, SIM_CAT_ACTIVATION);
  kernel(g, N_GEMM, tok * (uint64_t)g->vocab * h / 64);
  uint64_t loss = alloc(g, 512, S_LOSS, SIM_CAT_TEMPORARY);
  kernel(g, N_SOFTMAX, tok * (uint64_t)g->vocab * 4);

  uint64_t dlogits = alloc(g, tok * (uint64_t)g->vocab * 4, S_BWD_TMP, SIM_CAT_TEMPORARY);
  release(g, logits);
  kernel(g, N_GEMM, tok * (uint64_t)g->vocab * h / 64);
  release(g, dlogits);
  for (int l = L - 1; l >= 0; l--) backward_layer(g, l, saved + l * 7, act);
  for (int i = 0; i < g->nparams; i++)
    if (!g->params[i].grad) g->params[i].grad = alloc(g, g->params[i].size, S_GRAD, SIM_CAT_GRADIENT);
  release(g, loss);
  free(saved);
}

/* The optimizer: Adam's moments on the first step, then a fused update per group. */
static void optimizer_step(gen *g) {
  uint64_t tmp = alloc(g, (uint64_t)g->nparams * 8, S_OPT_TMP, SIM_CAT_TEMPORARY);
  for (int i = 0; i < g->nparams; i++) {
    gen_param *p = &g->params[i];
    if (!p->m) {
      p->m = alloc(g, p->size, S_ADAM, SIM_CAT_OPTIMIZER_STATE);
      p->v = alloc(g, p->size, S_ADAM, SIM_CAT_OPTIMIZER_STATE);
    }
    if (i % 16 == 0) kernel(g, N_ADAM, 4 * p->size);
  }
  release(g, tmp);
}

/* One training step (the first also creates gradients and optimizer state). */
static void build_step(gen *g) {
  int seq = step_seq(g);
  uint64_t tok = (uint64_t)g->batch * seq, act = tok * g->hidden * 2; /* bf16 activations */
  sim_event *m = push(g, SIM_EV_MARKER);
  m->flags = SIM_EVF_STEP_BEGIN;
  m->name = N_STEP;
  int64_t step_start = g->clock;
  uint64_t input = load_batch(g, tok);
  forward_backward(g, tok, act, seq);
  optimizer_step(g);
  release(g, input);
  sync_host(g);
  g->clock += 20000 + (int64_t)(rnd(g) % 40000); /* data loading, Python */
  m = push(g, SIM_EV_MARKER);
  m->flags = SIM_EVF_STEP_END;
  m->name = N_STEP;
  m->dur = g->clock - step_start;
  g->step++;
}

gen *gen_new(const gen_config *cfg) {
  gen *g = sim_xcalloc(1, sizeof *g);
  g->cfg = *cfg;
  g->rng = cfg->seed * 0x2545F4914F6CDD1Dull + 1;
  g->layers = 8 + (int)(rnd(g) % 17);
  g->hidden = 512 * (2 + (int)(rnd(g) % 5));
  g->heads = g->hidden / 128;
  g->batch = cfg->batch > 0 ? cfg->batch : 4 << (rnd(g) % 3);
  g->seq_max = 512 << (rnd(g) % 2);
  g->vocab = 32000;
  g->next_addr = 1;
  snprintf(g->desc, sizeof g->desc,
           "transformer training: %d layers, hidden %d, %d heads, batch %d, sequence up to %d, Adam (seed %llu)",
           g->layers, g->hidden, g->heads, g->batch, g->seq_max, (unsigned long long)cfg->seed);
  return g;
}

void gen_free(gen *g) {
  if (!g) return;
  free(g->params);
  free(g->buf);
  free(g);
}

const char *gen_describe(const gen *g) { return g->desc; }
int gen_batch(const gen *g) { return g->batch; }

static int gen_next(void *ctx, sim_event *ev) {
  gen *g = ctx;
  if (g->emitted >= g->cfg.events) return 0;
  if (g->pos == g->n) {
    g->n = g->pos = 0;
    if (!g->started) {
      build_model(g);
      g->started = 1;
    } else {
      build_step(g);
    }
  }
  *ev = g->buf[g->pos++];
  ev->seq = (int64_t)g->emitted++;
  return 1;
}

replay_source gen_source(gen *g) { return (replay_source){.next = gen_next, .error = NULL, .close = NULL, .ctx = g}; }

int gen_write(store *s, const gen_config *cfg, const char *name, int64_t *trace_id, char *err, size_t errlen) {
  gen *g = gen_new(cfg);
  int64_t site_ids[S__COUNT] = {0}, name_ids[N__COUNT] = {0};
  for (int i = 1; i < S__COUNT; i++) {
    store_frame fr[3] = {{sites[i].op, "", 0}, {sites[i].func, sites[i].file, sites[i].line}, {"main", "train.py", 120}};
    site_ids[i] = store_intern_stack(s, fr, 3);
    if (site_ids[i] < 0) goto fail;
  }
  for (int i = 1; i < N__COUNT; i++) {
    name_ids[i] = store_intern_string(s, names[i], strlen(names[i]));
    if (name_ids[i] < 0) goto fail;
  }
  char attrs[256];
  snprintf(attrs, sizeof attrs, "{\"generator\":\"memplay gen\",\"seed\":%llu,\"model\":\"%s\"}",
           (unsigned long long)cfg->seed, gen_describe(g));
  store_trace meta = {.name = (char *)name, .source_format = (char *)"generated", .device_name = (char *)"H100",
                      .device_memory = INT64_C(85520809984), .device_index = 0, .framework = (char *)"pytorch",
                      .allocator = (char *)"torch", .batch_size = g->batch, .attrs = attrs};
  store_writer *w;
  if (store_writer_begin(s, &meta, &w)) goto fail;
  replay_source src = gen_source(g);
  sim_event ev;
  while (replay_source_next(&src, &ev) > 0) {
    ev.stack = ev.stack ? site_ids[ev.stack] : 0;
    ev.name = ev.name ? name_ids[ev.name] : 0;
    if (store_writer_event(w, &ev)) {
      store_writer_abort(w);
      goto fail;
    }
  }
  *trace_id = store_writer_trace_id(w);
  if (store_writer_end(w)) goto fail;
  gen_free(g);
  return 0;
fail:
  snprintf(err, errlen, "%s", store_error(s));
  gen_free(g);
  return -1;
}
