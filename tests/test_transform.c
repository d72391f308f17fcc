/* test_transform.c: each streaming transform against a materialized reference built by hand here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/transform.h"
#include "sim/allocator.h"
#include "test.h"

int test_failures;

/* ---- a small training-like trace -------------------------------------------------------- */

typedef struct evs {
  sim_event *a;
  size_t n, cap;
} evs;

static void push(evs *v, sim_event e) {
  sim_grow((void **)&v->a, &v->cap, v->n + 1, sizeof *v->a);
  e.seq = (int64_t)v->n;
  v->a[v->n++] = e;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

enum { NAME_GEMM = 1, NAME_GELU = 2, NAME_ADAM = 3, NAME_COPY = 4, NAME_STEP = 5 };

static sim_event ev0(int kind, int64_t ts, int step) {
  sim_event e;
  sim_event_init(&e);
  e.kind = (uint8_t)kind;
  e.ts = ts;
  e.step = step;
  e.device = 0;
  e.stream = 0;
  return e;
}

/* steps of: inputs copied in (pageable), forward activations, backward frees them and makes
 * gradients (kept until the next step), optimizer kernels. Parameters exist before. */
static evs make_trace(int steps) {
  evs v = {0};
  int64_t ts = 0;
  uint64_t addr = 0x1000;
  for (int i = 0; i < 6; i++) {
    sim_event e = ev0(SIM_EV_ALLOC, ts, -1);
    e.addr = addr++;
    e.size = 1000000 + 4096 * (uint64_t)i;
    e.category = SIM_CAT_PARAMETER;
    e.cat_source = SIM_CATSRC_SOURCE;
    e.flags = SIM_EVF_PREEXISTING;
    e.stack = 1;
    push(&v, e);
  }
  uint64_t grads[6] = {0};
  for (int s = 0; s < steps; s++) {
    sim_event m = ev0(SIM_EV_MARKER, ts += 10, s);
    m.flags = SIM_EVF_STEP_BEGIN;
    m.name = NAME_STEP;
    push(&v, m);
    sim_event c = ev0(SIM_EV_MEMCPY, ts += 10, s);
    c.size = 65536;
    c.dur = 40;
    c.dir = SIM_COPY_H2D;
    c.mem = SIM_MEM_PAGEABLE;
    c.name = NAME_COPY;
    push(&v, c);
    uint64_t acts[8];
    for (int k = 0; k < 8; k++) {
      sim_event a = ev0(SIM_EV_ALLOC, ts += 10, s);
      a.addr = acts[k] = addr++;
      a.size = 4096 * (1 + rnd() % 64);
      a.category = SIM_CAT_ACTIVATION;
      a.cat_source = SIM_CATSRC_STACK;
      a.stack = 2 + k % 3;
      push(&v, a);
      sim_event kk = ev0(SIM_EV_KERNEL, ts += 10, s);
      kk.name = k % 2 ? NAME_GEMM : NAME_GELU;
      kk.dur = 100 + (int64_t)(rnd() % 100);
      push(&v, kk);
      sim_event tmp = ev0(SIM_EV_ALLOC, ts += 10, s);
      tmp.addr = addr++;
      tmp.size = 512 + rnd() % 5000;
      tmp.stack = 7;
      push(&v, tmp); /* no category: lifetime decides (transient) */
      sim_event tf = ev0(SIM_EV_FREE, ts += 10, s);
      tf.addr = tmp.addr;
      tf.size = tmp.size;
      push(&v, tf);
    }
    for (int k = 0; k < 6; k++) {
      if (grads[k]) {
        sim_event f = ev0(SIM_EV_FREE, ts += 10, s);
        f.addr = grads[k];
        push(&v, f);
      }
      sim_event g = ev0(SIM_EV_ALLOC, ts += 10, s);
      g.addr = grads[k] = addr++;
      g.size = 1000000 + 4096 * (uint64_t)k;
      g.stack = 9; /* no category: crosses a step, so persistent */
      push(&v, g);
    }
    for (int k = 7; k >= 0; k--) {
      sim_event f = ev0(SIM_EV_FREE, ts += 10, s);
      f.addr = acts[k];
      f.size = 0;
      push(&v, f);
      sim_event kk = ev0(SIM_EV_KERNEL, ts += 10, s);
      kk.name = NAME_GEMM;
      kk.dur = 200;
      push(&v, kk);
    }
    sim_event o = ev0(SIM_EV_KERNEL, ts += 10, s);
    o.name = NAME_ADAM;
    o.dur = 300;
    push(&v, o);
    sim_event e = ev0(SIM_EV_MARKER, ts += 10, s);
    e.flags = SIM_EVF_STEP_END;
    e.name = NAME_STEP;
    push(&v, e);
  }
  return v;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static int open_array(void *arg, replay_source *out, char *err, size_t errlen) {
  (void)err, (void)errlen;
  evs *v = arg;
  replay_array_source *a = malloc(sizeof *a);
  *out = replay_array_source_init(a, v->a, v->n);
  out->close = free;
  return 0;
}

static xf_node *base_of(evs *v) { return xf_base(open_array, v, NULL); }

static evs drain(const xf_node *n) {
  evs out = {0};
  replay_source src;
  char err[XF_ERRLEN];
  if (xf_open(n, &src, err, sizeof err)) {
    fprintf(stderr, "xf_open: %s\n", err);
    test_failures++;
    return out;
  }
  sim_event e;
  int rc;
  while ((rc = replay_source_next(&src, &e)) > 0) {
    sim_grow((void **)&out.a, &out.cap, out.n + 1, sizeof *out.a);
    out.a[out.n++] = e;
  }
  if (rc < 0) {
    fprintf(stderr, "source: %s\n", src.error ? src.error(src.ctx) : "?");
    test_failures++;
  }
  replay_source_close(&src);
  return out;
}

static void renumber(evs *v) {
  for (size_t i = 0; i < v->n; i++) v->a[i].seq = (int64_t)i;
}

/* Compares two event lists field by field; reports the first difference. */
static int same_events(const evs *a, const evs *b, const char *what) {
  if (a->n != b->n) {
    fprintf(stderr, "%s: %zu events, reference has %zu\n", what, a->n, b->n);
    return 0;
  }
  for (size_t i = 0; i < a->n; i++) {
    const sim_event *x = &a->a[i], *y = &b->a[i];
    if (x->seq != y->seq || x->ts != y->ts || x->dur != y->dur || x->dev_ts != y->dev_ts || x->api_dur != y->api_dur ||
        x->addr != y->addr || x->size != y->size || x->stream != y->stream || x->stack != y->stack ||
        x->name != y->name || x->step != y->step || x->device != y->device || x->kind != y->kind || x->mem != y->mem ||
        x->dir != y->dir || x->category != y->category || x->cat_source != y->cat_source || x->flags != y->flags) {
      fprintf(stderr,
              "%s: event %zu differs: kind %d/%d seq %lld/%lld ts %lld/%lld size %llu/%llu addr %llx/%llx dur %lld/%lld "
              "mem %d/%d flags %d/%d\n",
              what, i, x->kind, y->kind, (long long)x->seq, (long long)y->seq, (long long)x->ts, (long long)y->ts,
              (unsigned long long)x->size, (unsigned long long)y->size, (unsigned long long)x->addr,
              (unsigned long long)y->addr, (long long)x->dur, (long long)y->dur, x->mem, y->mem, x->flags, y->flags);
      return 0;
    }
  }
  return 1;
}

/* Replays both and compares what the engine measured. */
static void same_replay(const xf_node *n, evs *ref, const char *what) {
  sim_spec spec;
  char err[512];
  sim_spec_parse(&spec, "cuda", err, sizeof err);
  replay_config cfg = {.spec = &spec, .capacity = UINT64_MAX};
  replay_source a, b;
  xf_open(n, &a, err, sizeof err);
  replay_array_source arr;
  b = replay_array_source_init(&arr, ref->a, ref->n);
  replay_result ra, rb;
  CHECK_EQ(replay_run(&cfg, &a, &ra, err, sizeof err), 0);
  CHECK_EQ(replay_run(&cfg, &b, &rb, err, sizeof err), 0);
  replay_source_close(&a);
  if (ra.peak_allocated != rb.peak_allocated || ra.peak_reserved != rb.peak_reserved || ra.events != rb.events ||
      ra.peak_allocated_seq != rb.peak_allocated_seq || ra.unknown_frees != rb.unknown_frees) {
    fprintf(stderr, "%s: replays differ: peak %lld/%lld reserved %lld/%lld events %llu/%llu at %lld/%lld\n", what,
            (long long)ra.peak_allocated, (long long)rb.peak_allocated, (long long)ra.peak_reserved,
            (long long)rb.peak_reserved, (unsigned long long)ra.events, (unsigned long long)rb.events,
            (long long)ra.peak_allocated_seq, (long long)rb.peak_allocated_seq);
    test_failures++;
  }
  replay_result_release(&ra);
  replay_result_release(&rb);
  sim_spec_release(&spec);
}

static evs copy_of(const evs *v) {
  evs c = {0};
  c.a = malloc((v->n ? v->n : 1) * sizeof *c.a);
  memcpy(c.a, v->a, v->n * sizeof *c.a);
  c.n = c.cap = v->n;
  return c;
}

static int is_free(int k) { return k == SIM_EV_FREE || k == SIM_EV_FREE_REQUESTED || k == SIM_EV_FREE_COMPLETED; }

/* ---- tests -------------------------------------------------------------------------------- */

/* The lifetime pass over a trace's events. */
static xf_lifetime *lifetimes_of(xf_node *b) {
  replay_source src;
  char err[XF_ERRLEN];
  xf_open(b, &src, err, sizeof err);
  xf_lifetime *lt = xf_lifetime_compute(&src, err, sizeof err);
  replay_source_close(&src);
  CHECK(lt != NULL);
  return lt;
}

/* Steps past 2^24: an allocation freed in its own step is transient, one freed in another step
 * persistent, whatever the step's width (the lifetime pass keeps a wide step apart). */
static void test_lifetimes_wide_steps(void) {
  static const int32_t steps[][2] = {
      {(1 << 24) + 5, (1 << 24) + 5}, /* transient */
      {(1 << 24) + 5, 5},             /* persistent: 24 bits of step + 1 would read 5 */
      {(1 << 24) - 1, (1 << 24) - 1}, /* transient: the first wide step + 1 */
      {(1 << 24) - 2, (1 << 24) - 2}, /* transient: the last narrow one */
      {INT32_MAX, INT32_MAX},         /* transient */
      {INT32_MAX, 0},                 /* persistent */
      {7, (1 << 24) + 7},             /* persistent */
  };
  enum { N = sizeof steps / sizeof steps[0] };
  evs v = {0};
  for (int i = 0; i < N; i++) { /* all live at once, then freed in reverse */
    sim_event e = ev0(SIM_EV_ALLOC, i, steps[i][0]);
    e.addr = 0x10000 + (uint64_t)i * 0x1000;
    e.size = 4096;
    push(&v, e);
  }
  for (int i = N - 1; i >= 0; i--) {
    sim_event e = ev0(SIM_EV_FREE, N + (N - i), steps[i][1]);
    e.addr = 0x10000 + (uint64_t)i * 0x1000;
    push(&v, e);
  }
  xf_node *b = base_of(&v);
  xf_lifetime *lt = lifetimes_of(b);
  for (int i = 0; i < N; i++) CHECK_EQ(xf_lifetime_persistent(lt, i), (steps[i][0] != steps[i][1]));
  CHECK_EQ(lt->persistent_allocs, 3);
  CHECK_EQ(lt->transient_allocs, 4);
  xf_lifetime_unref(lt);
  xf_node_unref(b);
  free(v.a);
}

static void test_lifetimes(void) {
  evs v = make_trace(3);
  xf_node *b = base_of(&v);
  xf_lifetime *lt = lifetimes_of(b);
  uint64_t pers = 0, trans = 0;
  for (size_t i = 0; i < v.n; i++) {
    const sim_event *e = &v.a[i];
    if (e->kind != SIM_EV_ALLOC) continue;
    int p = xf_lifetime_persistent(lt, e->seq);
    if (e->category == SIM_CAT_PARAMETER || e->stack == 9) CHECK(p); /* parameters, gradients */
    else CHECK(!p);                                                  /* activations, temporaries */
    if (p) pers++;
    else trans++;
  }
  CHECK_EQ(lt->persistent_allocs, pers);
  CHECK_EQ(lt->transient_allocs, trans);
  CHECK_EQ(lt->categorized_allocs, 6 + 3 * 8);
  xf_lifetime_unref(lt);
  xf_node_unref(b);
  free(v.a);
}

static void test_filter(void) {
  evs v = make_trace(2);
  xf_filter f;
  xf_filter_init(&f);
  size_t all = 0;
  for (size_t i = 0; i < v.n; i++) all += xf_filter_match(&f, &v.a[i]);
  CHECK_EQ(all, v.n);
  CHECK(!xf_filter_is_set(&f));
  f.kinds = 1u << SIM_EV_KERNEL;
  int64_t names[] = {NAME_GEMM};
  xf_filter_set_names(&f, names, 1);
  size_t gemm = 0, want = 0;
  for (size_t i = 0; i < v.n; i++) {
    gemm += xf_filter_match(&f, &v.a[i]);
    want += v.a[i].kind == SIM_EV_KERNEL && v.a[i].name == NAME_GEMM;
  }
  CHECK_EQ(gemm, want);
  xf_filter_release(&f);
  /* an empty set of names matches nothing, copied or not */
  xf_filter_init(&f);
  f.kinds = 1u << SIM_EV_KERNEL;
  xf_filter_set_names(&f, NULL, 0);
  xf_filter g;
  xf_filter_copy(&g, &f);
  for (size_t i = 0; i < v.n; i++) CHECK(!xf_filter_match(&f, &v.a[i]) && !xf_filter_match(&g, &v.a[i]));
  xf_filter_release(&f);
  xf_filter_release(&g);
  /* categories never match frees, even through the lifetime fallback */
  xf_filter_init(&f);
  f.categories = 1u << SIM_CAT_ACTIVATION;
  for (size_t i = 0; i < v.n; i++)
    if (is_free(v.a[i].kind)) CHECK(!xf_filter_match(&f, &v.a[i]));
  xf_filter_release(&f);
  free(v.a);
}

static void test_kernel_classes(void) {
  CHECK_EQ(xf_kernel_class_of("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"), XF_KERNEL_matmul);
  CHECK_EQ(xf_kernel_class_of("ampere_sgemm_128x64_tn"), XF_KERNEL_matmul);
  CHECK_EQ(xf_kernel_class_of("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>"),
           XF_KERNEL_elementwise);
  CHECK_EQ(xf_kernel_class_of("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>"), XF_KERNEL_softmax);
  CHECK_EQ(xf_kernel_class_of("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"),
           XF_KERNEL_norm);
  CHECK_EQ(xf_kernel_class_of("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>"),
           XF_KERNEL_optimizer);
  CHECK_EQ(xf_kernel_class_of("flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64>>"), XF_KERNEL_attention);
  CHECK_EQ(xf_kernel_class_of("sm80_xmma_fprop_implicit_gemm_f16f16_f16f32"), XF_KERNEL_conv);
  CHECK_EQ(xf_kernel_class_of("void at::native::reduce_kernel<512, 1>"), XF_KERNEL_reduction);
  CHECK_EQ(xf_kernel_class_of("something_unheard_of"), XF_KERNEL_other);
  /* a lambda in a templated name is not the LAMB optimizer */
  CHECK_EQ(xf_kernel_class_of("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::"
                              "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}>"),
           XF_KERNEL_copy);
  CHECK_EQ(xf_kernel_class_from_name("matmul"), XF_KERNEL_matmul);
  CHECK_EQ(xf_kernel_class_from_name("nope"), -1);
}

static void test_scale(void) {
  evs v = make_trace(3);
  xf_node *b = base_of(&v);
  char err[XF_ERRLEN];
  xf_lifetime *lt = lifetimes_of(b);
  /* activation-like memory doubled: categories where set, lifetimes where not */
  xf_filter f;
  xf_filter_init(&f);
  f.categories = (1u << SIM_CAT_ACTIVATION) | (1u << SIM_CAT_TEMPORARY);
  xf_filter_set_lifetime(&f, lt);
  xf_node *n = xf_scale(b, &f, 2.5, 512, err, sizeof err);
  CHECK(n != NULL);
  evs got = drain(n);
  evs ref = copy_of(&v);
  sim_map changed;
  sim_map_init(&changed);
  for (size_t i = 0; i < ref.n; i++) {
    sim_event *e = &ref.a[i];
    if (e->kind == SIM_EV_ALLOC) {
      int act = e->category == SIM_CAT_ACTIVATION || (e->category == SIM_CAT_UNKNOWN && e->stack == 7);
      if (act) {
        uint64_t s = (uint64_t)ceil((double)e->size * 2.5);
        s = (s + 511) / 512 * 512;
        e->size = s;
        *sim_map_put(&changed, e->addr, NULL) = s;
      }
    } else if (is_free(e->kind)) {
      uint64_t v2;
      if (sim_map_del(&changed, e->addr, &v2) && e->size) e->size = v2;
    }
  }
  CHECK(same_events(&got, &ref, "scale"));
  same_replay(n, &ref, "scale");
  sim_map_release(&changed);
  free(got.a);
  free(ref.a);
  xf_node_unref(n);
  xf_filter_release(&f);

  /* a factor of 1 changes nothing */
  xf_filter_init(&f);
  n = xf_scale(b, &f, 1.0, 1, err, sizeof err);
  got = drain(n);
  CHECK(same_events(&got, &v, "scale 1"));
  free(got.a);
  xf_node_unref(n);
  CHECK(xf_scale(b, &f, -1, 1, err, sizeof err) == NULL);
  CHECK(strstr(err, "factor") != NULL);
  xf_lifetime_unref(lt);
  xf_node_unref(b);
  free(v.a);
}

static void test_resize(void) {
  evs v = make_trace(2);
  xf_node *b = base_of(&v);
  sim_map sizes;
  sim_map_init(&sizes);
  evs ref = copy_of(&v);
  for (size_t i = 0; i < ref.n; i++)
    if (ref.a[i].kind == SIM_EV_ALLOC && i % 3 == 0) {
      ref.a[i].size = 777 + i;
      *sim_map_put(&sizes, (uint64_t)ref.a[i].seq, NULL) = 777 + i;
    }
  sim_map changed;
  sim_map_init(&changed);
  for (size_t i = 0; i < ref.n; i++) {
    sim_event *e = &ref.a[i];
    if (e->kind == SIM_EV_ALLOC && sim_map_get(&sizes, (uint64_t)e->seq)) *sim_map_put(&changed, e->addr, NULL) = e->size;
    else if (is_free(e->kind)) {
      uint64_t s;
      if (sim_map_del(&changed, e->addr, &s) && e->size) e->size = s;
    }
  }
  xf_node *n = xf_resize(b, &sizes);
  evs got = drain(n);
  CHECK(same_events(&got, &ref, "resize"));
  same_replay(n, &ref, "resize");
  free(got.a);
  free(ref.a);
  sim_map_release(&sizes);
  sim_map_release(&changed);
  xf_node_unref(n);
  xf_node_unref(b);
  free(v.a);
}

static void test_drop(void) {
  evs v = make_trace(3);
  xf_node *b = base_of(&v);
  xf_filter f;
  xf_filter_init(&f);
  f.categories = 1u << SIM_CAT_ACTIVATION; /* activations and their frees */
  xf_node *n = xf_drop(b, &f);
  evs got = drain(n);
  evs ref = {0};
  sim_map gone;
  sim_map_init(&gone);
  for (size_t i = 0; i < v.n; i++) {
    sim_event e = v.a[i];
    if (e.kind == SIM_EV_ALLOC && e.category == SIM_CAT_ACTIVATION) {
      *sim_map_put(&gone, e.addr, NULL) = 1;
      continue;
    }
    if (is_free(e.kind) && sim_map_del(&gone, e.addr, NULL)) continue;
    sim_grow((void **)&ref.a, &ref.cap, ref.n + 1, sizeof *ref.a);
    ref.a[ref.n++] = e;
  }
  renumber(&ref);
  CHECK(same_events(&got, &ref, "drop"));
  same_replay(n, &ref, "drop");
  free(got.a);
  free(ref.a);
  xf_node_unref(n);
  xf_filter_release(&f);

  /* dropping a step drops its events, and frees in later steps of what it allocated */
  xf_filter_init(&f);
  f.step_min = f.step_max = 1;
  n = xf_drop(b, &f);
  got = drain(n);
  ref.a = NULL;
  ref.n = ref.cap = 0;
  sim_map_clear(&gone);
  for (size_t i = 0; i < v.n; i++) {
    sim_event e = v.a[i];
    if (e.step == 1) {
      if (e.kind == SIM_EV_ALLOC) *sim_map_put(&gone, e.addr, NULL) = 1;
      continue;
    }
    if (is_free(e.kind) && sim_map_del(&gone, e.addr, NULL)) continue;
    sim_grow((void **)&ref.a, &ref.cap, ref.n + 1, sizeof *ref.a);
    ref.a[ref.n++] = e;
  }
  renumber(&ref);
  CHECK(same_events(&got, &ref, "drop step"));
  same_replay(n, &ref, "drop step");
  free(got.a);
  free(ref.a);
  sim_map_release(&gone);
  xf_node_unref(n);
  xf_filter_release(&f);
  xf_node_unref(b);
  free(v.a);
}

static void test_insert(void) {
  evs v = make_trace(2);
  xf_node *b = base_of(&v);
  sim_event ins[2];
  sim_event_init(&ins[0]);
  ins[0].kind = SIM_EV_HOST_ALLOC;
  ins[0].addr = 5;
  ins[0].size = 1 << 20;
  ins[0].mem = SIM_MEM_PINNED;
  ins[0].ts = -1;
  sim_event_init(&ins[1]);
  ins[1].kind = SIM_EV_KERNEL;
  ins[1].dur = 50;
  ins[1].ts = -1;
  char err[XF_ERRLEN];
  static const xf_where wheres[] = {XF_AT_START, XF_AT_END, XF_BEFORE_SEQ, XF_BEFORE_EACH, XF_AFTER_EACH};
  for (int w = 0; w < 5; w++) {
    xf_filter f;
    xf_filter_init(&f);
    if (wheres[w] >= XF_BEFORE_EACH) f.flags_all = SIM_EVF_STEP_BEGIN;
    xf_node *n = xf_insert(b, ins, 2, wheres[w], 40, &f, err, sizeof err);
    CHECK(n != NULL);
    evs got = drain(n);
    evs ref = {0};
    uint64_t occ = 0;
#define ADD(e)                                                           \
  do {                                                                   \
    sim_grow((void **)&ref.a, &ref.cap, ref.n + 1, sizeof *ref.a);       \
    ref.a[ref.n++] = (e);                                                \
  } while (0)
#define INSERT_AT(ts_)                                                                                  \
  do {                                                                                                  \
    for (int k = 0; k < 2; k++) {                                                                       \
      sim_event x_ = ins[k];                                                                            \
      x_.ts = (ts_);                                                                                    \
      if (x_.addr) {                                                                                    \
        x_.addr |= XF_ADDR_INSERTED;                                                                    \
        if (wheres[w] >= XF_BEFORE_EACH) x_.addr |= occ << 40;                                          \
      }                                                                                                 \
      ADD(x_);                                                                                          \
    }                                                                                                   \
    occ++;                                                                                              \
  } while (0)
    for (size_t i = 0; i < v.n; i++) {
      const sim_event *e = &v.a[i];
      int match = (e->flags & SIM_EVF_STEP_BEGIN) != 0;
      if ((wheres[w] == XF_AT_START && i == 0) || (wheres[w] == XF_BEFORE_SEQ && e->seq == 40) ||
          (wheres[w] == XF_BEFORE_EACH && match))
        INSERT_AT(e->ts);
      ADD(*e);
      if (wheres[w] == XF_AFTER_EACH && match) INSERT_AT(e->ts);
    }
    if (wheres[w] == XF_AT_END) INSERT_AT(v.a[v.n - 1].ts);
#undef INSERT_AT
#undef ADD
    renumber(&ref);
    char what[32];
    snprintf(what, sizeof what, "insert %d", w);
    CHECK(same_events(&got, &ref, what));
    same_replay(n, &ref, what);
    free(got.a);
    free(ref.a);
    xf_node_unref(n);
    xf_filter_release(&f);
  }
  xf_filter f;
  xf_filter_init(&f);
  CHECK(xf_insert(b, ins, 2, XF_BEFORE_EACH, 0, &f, err, sizeof err) == NULL);
  xf_node_unref(b);
  free(v.a);
}

static void test_insert_at(void) {
  evs v = make_trace(2);
  xf_node *b = base_of(&v);
  /* before seq 10: an alloc; after seq 10 and before seq 40: a free of it and a kernel */
  sim_event evs3[3];
  for (int i = 0; i < 3; i++) sim_event_init(&evs3[i]);
  evs3[0].kind = SIM_EV_ALLOC;
  evs3[0].addr = 0xabc;
  evs3[0].size = 4096;
  evs3[0].ts = -1;
  evs3[1].kind = SIM_EV_FREE;
  evs3[1].addr = 0xabc;
  evs3[1].ts = -1;
  evs3[2].kind = SIM_EV_KERNEL;
  evs3[2].dur = 77;
  evs3[2].ts = 5;
  xf_insert_group g[3] = {{40, 0, 2, 1}, {10, 1, 1, 1}, {10, 0, 0, 1}};
  xf_node *n = xf_insert_at(b, g, 3, evs3, 3);
  evs got = drain(n);
  evs ref = {0};
  for (size_t i = 0; i < v.n; i++) {
    sim_grow((void **)&ref.a, &ref.cap, ref.n + 3, sizeof *ref.a);
    if (v.a[i].seq == 10) {
      ref.a[ref.n] = evs3[0];
      ref.a[ref.n++].ts = v.a[i].ts;
    }
    if (v.a[i].seq == 40) ref.a[ref.n++] = evs3[2];
    ref.a[ref.n++] = v.a[i];
    if (v.a[i].seq == 10) {
      ref.a[ref.n] = evs3[1];
      ref.a[ref.n++].ts = v.a[i].ts;
    }
  }
  renumber(&ref);
  CHECK(same_events(&got, &ref, "insert_at"));
  same_replay(n, &ref, "insert_at");
  free(got.a);
  free(ref.a);
  xf_node_unref(n);
  xf_node_unref(b);
  free(v.a);
}

static void test_set_copy_and_time(void) {
  evs v = make_trace(2);
  xf_node *b = base_of(&v);
  char err[XF_ERRLEN];
  xf_filter f;
  xf_filter_init(&f);
  f.dirs = 1u << SIM_COPY_H2D;
  f.mems = 1u << SIM_MEM_PAGEABLE;
  xf_node *p = xf_set_copy(b, &f, SIM_MEM_PINNED, 1, 0.5, err, sizeof err);
  xf_filter_release(&f);
  xf_filter_init(&f);
  int64_t gemm[] = {NAME_GEMM};
  xf_filter_set_names(&f, gemm, 1);
  xf_node *n = xf_scale_time(p, &f, 0.25, 0, err, sizeof err);
  evs got = drain(n);
  evs ref = copy_of(&v);
  for (size_t i = 0; i < ref.n; i++) {
    sim_event *e = &ref.a[i];
    if (e->kind == SIM_EV_MEMCPY && e->mem == SIM_MEM_PAGEABLE && e->dir == SIM_COPY_H2D) {
      e->mem = SIM_MEM_PINNED;
      e->flags |= SIM_EVF_ASYNC;
      e->dur = llround((double)e->dur * 0.5);
    }
    if (e->kind == SIM_EV_KERNEL && e->name == NAME_GEMM) e->dur = llround((double)e->dur * 0.25);
  }
  CHECK(same_events(&got, &ref, "set_copy+scale_time"));
  free(got.a);
  free(ref.a);
  xf_node_unref(n);
  xf_node_unref(p);
  xf_filter_release(&f);
  xf_node_unref(b);
  free(v.a);
}

/* Repeat, checked on its documented rules rather than a second implementation. */
static void test_repeat(void) {
  evs v = make_trace(3);
  xf_node *b = base_of(&v);
  char err[XF_ERRLEN];
  /* the block: step 1 */
  int64_t from = -1, to = -1;
  for (size_t i = 0; i < v.n; i++)
    if (v.a[i].step == 1) {
      if (from < 0) from = v.a[i].seq;
      to = v.a[i].seq + 1;
    }
  xf_filter once;
  xf_filter_init(&once);
  xf_node *n = xf_repeat(b, from, to, 3, &once, 0, err, sizeof err);
  CHECK(n != NULL);
  evs got = drain(n);
  size_t block = (size_t)(to - from);
  /* each later copy skips the 6 frees of memory from before the block (the first copy made
   * them) and the step's two markers, and adds 6 frees of the previous copy's gradients
   * (rebound) */
  CHECK_EQ(got.n, v.n + 2 * (block - 2));
  size_t markers = 0;
  for (size_t i = 0; i < got.n; i++) markers += got.a[i].kind == SIM_EV_MARKER;
  CHECK_EQ(markers, 6);
  /* kernel time: the block's kernels three times */
  int64_t kt = 0, kref = 0;
  for (size_t i = 0; i < got.n; i++)
    if (got.a[i].kind == SIM_EV_KERNEL) kt += got.a[i].dur;
  for (size_t i = 0; i < v.n; i++)
    if (v.a[i].kind == SIM_EV_KERNEL) kref += v.a[i].dur * (v.a[i].step == 1 ? 3 : 1);
  CHECK_EQ(kt, kref);
  /* the replay is consistent: no frees of unknown memory; the peak exceeds the original's by
   * at most one gradient (a rebound variable: the new one is made before the old one goes) */
  sim_spec spec;
  sim_spec_parse(&spec, "ideal", err, sizeof err);
  replay_config cfg = {.spec = &spec, .capacity = UINT64_MAX};
  replay_source src;
  xf_open(n, &src, err, sizeof err);
  replay_result r;
  CHECK_EQ(replay_run(&cfg, &src, &r, err, sizeof err), 0);
  replay_source_close(&src);
  CHECK_EQ(r.unknown_frees, 0);
  CHECK_EQ(r.duplicate_allocs, 0);
  replay_array_source arr;
  replay_source s0 = replay_array_source_init(&arr, v.a, v.n);
  replay_result r0;
  replay_run(&cfg, &s0, &r0, err, sizeof err);
  CHECK(r.peak_allocated >= r0.peak_allocated);
  CHECK(r.peak_allocated <= r0.peak_allocated + 1000000 + 5 * 4096);
  CHECK_EQ(r.final_allocated, r0.final_allocated);
  /* times after the block are shifted by two block spans, and stay ordered */
  for (size_t i = 1; i < got.n; i++) CHECK(got.a[i].ts >= got.a[i - 1].ts);
  CHECK(got.a[got.n - 1].ts > v.a[v.n - 1].ts);
  replay_result_release(&r);
  free(got.a);
  xf_node_unref(n);

  /* once (gradients, transient in later copies): made once, then allocated and freed at once */
  once.categories = 0;
  int64_t gsite[] = {9};
  xf_filter_set_sites(&once, gsite, 1);
  once.kinds = 1u << SIM_EV_ALLOC;
  n = xf_repeat(b, from, to, 4, &once, 1, err, sizeof err);
  got = drain(n);
  xf_open(n, &src, err, sizeof err);
  CHECK_EQ(replay_run(&cfg, &src, &r, err, sizeof err), 0);
  replay_source_close(&src);
  CHECK_EQ(r.unknown_frees, 0);
  CHECK_EQ(r.final_allocated, r0.final_allocated);
  int transient_pairs = 0;
  for (size_t i = 1; i < got.n; i++)
    if (got.a[i].kind == SIM_EV_FREE && got.a[i - 1].kind == SIM_EV_ALLOC && got.a[i].addr == got.a[i - 1].addr &&
        got.a[i - 1].stack == 9)
      transient_pairs++;
  CHECK_EQ(transient_pairs, 3 * 6);
  replay_result_release(&r);
  free(got.a);
  xf_node_unref(n);

  /* times = 0 drops the block and whatever it allocated */
  n = xf_repeat(b, from, to, 0, NULL, 0, err, sizeof err);
  got = drain(n);
  for (size_t i = 0; i < got.n; i++) CHECK(got.a[i].step != 1);
  xf_open(n, &src, err, sizeof err);
  CHECK_EQ(replay_run(&cfg, &src, &r, err, sizeof err), 0);
  replay_source_close(&src);
  CHECK_EQ(r.unknown_frees, 0); /* step 2's frees of step 1's gradients go with the block */
  replay_result_release(&r);
  free(got.a);
  xf_node_unref(n);

  CHECK(xf_repeat(b, 10, 5, 2, NULL, 0, err, sizeof err) == NULL);
  xf_filter_release(&once);
  replay_result_release(&r0);
  sim_spec_release(&spec);
  xf_node_unref(b);
  free(v.a);
}

static int doubler(void *arg, const sim_event *in, sim_event *out, size_t cap, size_t *nout, char *err, size_t errlen) {
  (void)arg, (void)cap, (void)err, (void)errlen;
  *nout = 0;
  if (in->kind == SIM_EV_KERNEL) return 0; /* dropped */
  out[0] = *in;
  if (in->kind == SIM_EV_ALLOC) out[0].size *= 2;
  *nout = 1;
  if (in->kind == SIM_EV_MEMCPY) { /* split in two */
    out[0].size /= 2;
    out[1] = out[0];
    out[1].seq = -1;
    *nout = 2;
  }
  return 0;
}

static int failing(void *arg, const sim_event *in, sim_event *out, size_t cap, size_t *nout, char *err, size_t errlen) {
  (void)arg, (void)out, (void)cap, (void)nout;
  if (in->seq == 30) {
    snprintf(err, errlen, "no event 30, please");
    return -1;
  }
  out[0] = *in;
  *nout = 1;
  return 0;
}

static void test_map(void) {
  evs v = make_trace(2);
  xf_node *b = base_of(&v);
  xf_node *n = xf_map(b, NULL, doubler, NULL, NULL);
  evs got = drain(n);
  evs ref = {0};
  for (size_t i = 0; i < v.n; i++) {
    sim_event e = v.a[i];
    if (e.kind == SIM_EV_KERNEL) continue;
    if (e.kind == SIM_EV_ALLOC) e.size *= 2;
    sim_grow((void **)&ref.a, &ref.cap, ref.n + 2, sizeof *ref.a);
    if (e.kind == SIM_EV_MEMCPY) {
      e.size /= 2;
      ref.a[ref.n++] = e;
    }
    ref.a[ref.n++] = e;
  }
  renumber(&ref);
  CHECK(same_events(&got, &ref, "map"));
  same_replay(n, &ref, "map");
  free(got.a);
  free(ref.a);
  xf_node_unref(n);
  /* an error in the function stops the stream with its message */
  n = xf_map(b, NULL, failing, NULL, NULL);
  replay_source src;
  char err[XF_ERRLEN];
  xf_open(n, &src, err, sizeof err);
  sim_event e;
  int rc;
  while ((rc = replay_source_next(&src, &e)) > 0) {
  }
  CHECK_EQ(rc, -1);
  CHECK(strstr(src.error(src.ctx), "no event 30") != NULL);
  replay_source_close(&src);
  xf_node_unref(n);
  xf_node_unref(b);
  free(v.a);
}

static void test_merge(void) {
  evs a = make_trace(2), c = make_trace(2);
  for (size_t i = 0; i < c.n; i++) c.a[i].ts += 1000000; /* recorded at another time */
  xf_node *na = base_of(&a), *nc = base_of(&c);
  xf_node *n = xf_merge(na, nc, 55, 1);
  evs got = drain(n);
  evs ref = {0};
  size_t i = 0, j = 0;
  int64_t base_a = a.a[0].ts, base_c = c.a[0].ts;
  while (i < a.n || j < c.n) {
    sim_grow((void **)&ref.a, &ref.cap, ref.n + 1, sizeof *ref.a);
    int64_t tc = j < c.n ? c.a[j].ts - base_c + base_a + 55 : 0;
    if (i < a.n && (j >= c.n || a.a[i].ts <= tc)) {
      ref.a[ref.n++] = a.a[i++];
    } else {
      sim_event e = c.a[j++];
      if (e.dev_ts >= 0) e.dev_ts += tc - e.ts;
      e.ts = tc;
      e.device = 1;
      if (e.addr) e.addr |= XF_ADDR_MERGED;
      ref.a[ref.n++] = e;
    }
  }
  renumber(&ref);
  CHECK(same_events(&got, &ref, "merge"));
  same_replay(n, &ref, "merge");
  free(got.a);
  free(ref.a);
  xf_node_unref(n);
  xf_node_unref(na);
  xf_node_unref(nc);
  free(a.a);
  free(c.a);
}

static void test_chain_and_describe(void) {
  evs v = make_trace(2);
  xf_node *b = base_of(&v);
  char err[XF_ERRLEN];
  xf_filter f;
  xf_filter_init(&f);
  f.categories = 1u << SIM_CAT_ACTIVATION;
  xf_node *s = xf_scale(b, &f, 2, 1, err, sizeof err);
  xf_filter_release(&f);
  xf_filter_init(&f);
  f.kinds = 1u << SIM_EV_KERNEL;
  xf_node *d = xf_drop(s, &f);
  xf_filter_release(&f);
  CHECK_EQ(xf_node_depth(d), 2);
  CHECK(xf_node_is_base(b) && !xf_node_is_base(d));
  char *desc = xf_node_describe(d);
  CHECK(strstr(desc, "scale kinds=alloc categories=activation factor=2") != NULL);
  CHECK(strstr(desc, "drop kinds=kernel") != NULL);
  CHECK(strstr(desc, "scale") < strstr(desc, "drop"));
  free(desc);
  /* shared prefix: dropping the first handle keeps the chain alive */
  xf_node_unref(s);
  evs got = drain(d);
  size_t kernels = 0;
  for (size_t i = 0; i < got.n; i++) kernels += got.a[i].kind == SIM_EV_KERNEL;
  CHECK_EQ(kernels, 0);
  free(got.a);
  xf_node_unref(d);
  xf_node_unref(b);
  free(v.a);
}

int main(void) {
  RUN(test_lifetimes);
  RUN(test_lifetimes_wide_steps);
  RUN(test_filter);
  RUN(test_kernel_classes);
  RUN(test_scale);
  RUN(test_resize);
  RUN(test_drop);
  RUN(test_insert);
  RUN(test_insert_at);
  RUN(test_set_copy_and_time);
  RUN(test_repeat);
  RUN(test_map);
  RUN(test_merge);
  RUN(test_chain_and_describe);
  TEST_MAIN_END();
}
