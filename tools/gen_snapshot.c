/* gen_snapshot.c: writes a synthetic PyTorch memory snapshot pickle of any size, for import benchmarks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The file has the structure and the byte layout of a real torch.cuda.memory._dump_snapshot():
 * a dict with 'segments', 'device_traces' and 'allocator_settings'; trace entries with action,
 * addr, size, stream, time_us and about 36 frames each, drawn from a few thousand call stacks
 * over a few thousand distinct frames. The trace comes from a small caching allocator (sizes
 * rounded to 512 bytes, freed blocks reused by size, a segment per new block, free_requested
 * then free_completed), so the final segments and blocks agree with it.
 *
 * Two layouts:
 *   python  what Python's pickle.dump writes (protocol 4): FRAME ops, every object memoized
 *           (MEMOIZE), lists and dicts in batches of 1000 (MARK ... APPENDS/SETITEMS).
 *   cpp     what PyTorch's C++ pickler writes (torch::cuda::_memory_snapshot_pickled(),
 *           protocol 2): one MARK ... APPENDS for a whole list, BINPUT only for shared objects,
 *           strings memoized by content.
 *
 * usage: gen_snapshot [--entries N] [--layout python|cpp] [--devices D] [--seed S] OUT
 */

#define NFRAMES 4000
#define NSTACKS 3000

/* ---- output ----------------------------------------------------------------------------- */

typedef struct out {
  FILE *f;
  int python;
  unsigned char *buf; /* the current frame (python) or a write buffer */
  size_t len, cap;
  uint64_t memo; /* next memo index */
} out;

static void put(out *o, const void *p, size_t n) {
  if (o->len + n > o->cap) {
    while (o->len + n > o->cap) o->cap = o->cap ? o->cap * 2 : 1 << 16;
    o->buf = realloc(o->buf, o->cap);
    if (!o->buf) exit(1);
  }
  memcpy(o->buf + o->len, p, n);
  o->len += n;
}

static void op(out *o, int c) {
  unsigned char b = (unsigned char)c;
  put(o, &b, 1);
}

static void le(out *o, uint64_t v, int n) {
  unsigned char b[8];
  for (int i = 0; i < n; i++) b[i] = (unsigned char)(v >> (8 * i));
  put(o, b, (size_t)n);
}

/* Ends a frame at a boundary between opcodes when it is large enough (python), or flushes. */
static void boundary(out *o, int force) {
  if (o->len < 65536 && !force) return;
  if (o->python && o->len >= 4) {
    unsigned char h[9] = {0x95};
    for (int i = 0; i < 8; i++) h[1 + i] = (unsigned char)((uint64_t)o->len >> (8 * i));
    fwrite(h, 1, 9, o->f);
  }
  fwrite(o->buf, 1, o->len, o->f);
  o->len = 0;
}

/* A new object's memo entry: MEMOIZE (python), BINPUT (cpp). Returns its index. */
static uint64_t memoize(out *o) {
  if (o->python) op(o, 0x94);
  else if (o->memo < 256) {
    op(o, 'q');
    le(o, o->memo, 1);
  } else {
    op(o, 'r');
    le(o, o->memo, 4);
  }
  return o->memo++;
}

static void get(out *o, uint64_t idx) {
  if (idx < 256) {
    op(o, 'h');
    le(o, idx, 1);
  } else {
    op(o, 'j');
    le(o, idx, 4);
  }
}

static void integer(out *o, int64_t v) {
  if (v >= 0 && v < 256) {
    op(o, 'K');
    le(o, (uint64_t)v, 1);
  } else if (v >= 0 && v < 65536) {
    op(o, 'M');
    le(o, (uint64_t)v, 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    op(o, 'J');
    le(o, (uint64_t)v, 4);
  } else {
    int n = 8;
    while (n > 1 && ((v >> (8 * (n - 1)) & 0xFF) == 0 && !((v >> (8 * (n - 2))) & 0x80))) n--;
    op(o, 0x8a);
    le(o, (uint64_t)n, 1);
    le(o, (uint64_t)v, n);
  }
}

/* Strings: python memoizes each new str object; cpp memoizes by content (a small table). */
typedef struct strtab {
  char **s;
  uint64_t *idx;
  size_t n, cap;
} strtab;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static void str_new(out *o, const char *s) {
  size_t n = strlen(s);
  if (n < 256 && o->python) {
    op(o, 0x8c);
    le(o, n, 1);
  } else {
    op(o, 'X');
    le(o, n, 4);
  }
  put(o, s, n);
}

/* A str that the writer shares (keys, actions): one memo entry reused by every later use. */
static void str_shared(out *o, strtab *t, const char *s) {
  uint64_t h = hash_str(s);
  if (!t->cap) {
    t->cap = 1 << 16;
    t->s = calloc(t->cap, sizeof *t->s);
    t->idx = calloc(t->cap, sizeof *t->idx);
  }
  size_t i = h & (t->cap - 1);
  while (t->s[i] && strcmp(t->s[i], s)) i = (i + 1) & (t->cap - 1);
  if (t->s[i]) {
    get(o, t->idx[i]);
    return;
  }
  str_new(o, s);
  t->s[i] = strdup(s);
  t->idx[i] = memoize(o);
  t->n++;
}

/* ---- the simulated program -------------------------------------------------------------- */

typedef struct entry {
  uint8_t action; /* 0 alloc, 1 free_requested, 2 free_completed, 3 segment_alloc */
  uint8_t device;
  uint16_t stack;
  uint64_t addr, size, time_us;
  uint32_t pair; /* free_completed: index of its free_requested (shares the frames list) */
} entry;

typedef struct block {
  uint64_t addr, size, req, seg, seg_size;
  uint16_t stack;
  int live;
  int device;
} block;

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static const char *const action_names[] = {"alloc", "free_requested", "free_completed", "segment_alloc"};

typedef struct gen {
  out o;
  strtab keys;
  int64_t frame_memo[NFRAMES]; /* memo index of each frame dict once written, -1 before */
  uint16_t *stacks[NSTACKS];
  int depth[NSTACKS];
  char frame_name[NFRAMES][48], frame_file[NFRAMES][64];
  int frame_line[NFRAMES];
} gen;

static void frame_dict(gen *g, int f) {
  out *o = &g->o;
  if (g->frame_memo[f] >= 0) {
    get(o, (uint64_t)g->frame_memo[f]);
    return;
  }
  op(o, '}');
  int64_t idx = o->python ? (int64_t)memoize(o) : -1;
  op(o, '(');
  str_shared(o, &g->keys, "name");
  str_new(o, g->frame_name[f]);
  if (o->python) memoize(o);
  str_shared(o, &g->keys, "filename");
  str_new(o, g->frame_file[f]);
  if (o->python) memoize(o);
  str_shared(o, &g->keys, "line");
  integer(o, g->frame_line[f]);
  op(o, 'u');
  g->frame_memo[f] = o->python ? idx : (int64_t)memoize(o); /* cpp: shared objects are memoized after */
}

/* A frames list for a stack; returns its memo index. */
static uint64_t frames_list(gen *g, int s) {
  out *o = &g->o;
  op(o, ']');
  uint64_t idx = o->python ? memoize(o) : 0;
  int n = g->depth[s];
  for (int start = 0; start < n; start += 1000) {
    int m = n - start < 1000 ? n - start : 1000;
    if (m > 1 || !o->python) op(o, '(');
    for (int i = 0; i < m; i++) frame_dict(g, g->stacks[s][start + i]);
    op(o, m > 1 || !o->python ? 'e' : 'a');
  }
  if (!o->python) idx = memoize(o); /* shared with the free_completed that follows */
  return idx;
}

/* Call stacks (innermost frame first) grow from each other as in a program: a stack is the outer
 * part of an earlier one with a few new frames inside; 20 to 52 frames, 36 on average. */
static void make_frames_and_stacks(gen *g) {
  for (int f = 0; f < NFRAMES; f++) {
    g->frame_memo[f] = -1;
    snprintf(g->frame_name[f], sizeof g->frame_name[f], f % 3 ? "forward_%d" : "at::native::op_%d", f);
    snprintf(g->frame_file[f], sizeof g->frame_file[f], f % 3 ? "/workspace/model/layer_%d.py" : "??", f / 7);
    g->frame_line[f] = f % 3 ? (int)(rnd() % 900 + 1) : 0;
  }
  for (int s = 0; s < NSTACKS; s++) {
    int depth = 20 + (int)(rnd() % 33), keep = 0, parent = s ? (int)(rnd() % (uint64_t)s) : -1;
    g->depth[s] = depth;
    g->stacks[s] = malloc((size_t)depth * sizeof *g->stacks[s]);
    if (parent >= 0) {
      keep = depth - 2 - (int)(rnd() % 9);
      if (keep > g->depth[parent]) keep = g->depth[parent];
      if (keep < 0) keep = 0;
      /* the parent's outermost `keep` frames become this stack's outermost frames */
      memcpy(g->stacks[s] + depth - keep, g->stacks[parent] + g->depth[parent] - keep,
             (size_t)keep * sizeof **g->stacks);
    }
    for (int i = 0; i < depth - keep; i++) g->stacks[s][i] = (uint16_t)(rnd() % NFRAMES);
  }
}

/* ---- the simulated caching allocator: a free list per rounded size ---------------------- */

typedef struct program {
  int devices;
  entry *ent; /* the trace */
  size_t n, cap;
  block *blocks; /* one per segment the program made */
  size_t nblocks, bcap;
  size_t *live, nlive, lcap;
  size_t *cache;      /* rounded size class -> block index + 1 (a stack) */
  size_t *cache_next; /* per block: the next in its class's stack */
  uint64_t next_seg[16], t;
} program;

/* A cached free block of exactly req bytes on device d, taken off its class's stack: index + 1, or 0. */
static size_t take_cached(program *p, uint64_t req, int d) {
  unsigned cls = (unsigned)((req / 512) & 0xFFFF);
  size_t prev = 0;
  for (size_t c = p->cache[cls]; c; prev = c, c = p->cache_next[c - 1])
    if (p->blocks[c - 1].size == req && p->blocks[c - 1].device == d) {
      if (prev) p->cache_next[prev - 1] = p->cache_next[c - 1];
      else p->cache[cls] = p->cache_next[c - 1];
      return c;
    }
  return 0;
}

/* A new segment holding a block of req bytes (the segment_alloc entry first): index + 1. */
static size_t new_segment(program *p, uint64_t req, uint64_t size, int d, uint16_t st) {
  if (p->nblocks == p->bcap) {
    p->bcap = p->bcap ? p->bcap * 2 : 4096;
    p->blocks = realloc(p->blocks, p->bcap * sizeof *p->blocks);
    p->cache_next = realloc(p->cache_next, p->bcap * sizeof *p->cache_next);
  }
  /* the caching allocator's segment sizes: 2 MiB, 20 MiB, or rounded up to 2 MiB */
  uint64_t seg_size = req <= (1u << 20)  ? 2u << 20
                      : req < (10u << 20) ? 20u << 20
                                          : (req + (2u << 20) - 1) / (2u << 20) * (2u << 20);
  p->blocks[p->nblocks] = (block){p->next_seg[d], req, size, p->next_seg[d], seg_size, st, 0, d};
  p->ent[p->n++] = (entry){3, (uint8_t)d, st, p->next_seg[d], seg_size, p->t, 0};
  p->next_seg[d] += seg_size;
  return ++p->nblocks;
}

static void program_alloc(program *p, int d) {
  uint64_t size = 1 + (rnd() % 4 ? rnd() % 65536 : rnd() % (64u << 20));
  uint64_t req = (size + 511) / 512 * 512;
  size_t bi = take_cached(p, req, d);
  uint16_t st = (uint16_t)(rnd() % NSTACKS);
  if (!bi) bi = new_segment(p, req, size, d, st);
  block *b = &p->blocks[bi - 1];
  b->live = 1;
  b->req = size;
  b->stack = st;
  if (p->nlive == p->lcap) {
    p->lcap = p->lcap ? p->lcap * 2 : 4096;
    p->live = realloc(p->live, p->lcap * sizeof *p->live);
  }
  p->live[p->nlive++] = bi - 1;
  p->ent[p->n++] = (entry){0, (uint8_t)d, st, b->addr, size, p->t, 0};
}

/* free_requested then free_completed of a live block drawn at random; the block is cached. */
static void program_free(program *p) {
  size_t k = rnd() % p->nlive, bi = p->live[k];
  p->live[k] = p->live[--p->nlive];
  block *b = &p->blocks[bi];
  b->live = 0;
  uint16_t st = (uint16_t)(rnd() % NSTACKS);
  p->ent[p->n] = (entry){1, (uint8_t)b->device, st, b->addr, b->req, p->t, 0};
  p->ent[p->n + 1] = (entry){2, (uint8_t)b->device, st, b->addr, b->req, p->t + 1, (uint32_t)p->n};
  p->n += 2;
  unsigned cls = (unsigned)((b->size / 512) & 0xFFFF);
  p->cache_next[bi] = p->cache[cls];
  p->cache[cls] = bi + 1;
}

/* Runs the program for up to nentries trace entries. */
static void program_run(program *p, uint64_t nentries, int devices) {
  memset(p, 0, sizeof *p);
  p->devices = devices;
  p->ent = malloc(nentries * sizeof *p->ent);
  p->cache = calloc(1 << 16, sizeof *p->cache);
  p->t = 1700000000000000ull;
  for (int d = 0; d < devices; d++) p->next_seg[d] = 0x7f0000000000ull + (uint64_t)d * 0x10000000000ull;
  while (p->n + 4 <= nentries) {
    int d = (int)(rnd() % (uint64_t)devices);
    p->t += 1 + rnd() % 50;
    if (p->nlive < 16 || (p->nlive < 4000 && rnd() % 2)) program_alloc(p, d);
    else program_free(p);
  }
}

/* ---- the snapshot ----------------------------------------------------------------------- */

/* A block dict of a segment: the block itself (k = 0) or the free rest after it (k = 1). */
static void write_block(gen *g, const block *b, int k) {
  out *o = &g->o;
  op(o, '}');
  if (o->python) memoize(o);
  op(o, '(');
  str_shared(o, &g->keys, "address");
  integer(o, (int64_t)(k ? b->addr + b->size : b->addr));
  str_shared(o, &g->keys, "size");
  integer(o, (int64_t)(k ? b->seg_size - b->size : b->size));
  str_shared(o, &g->keys, "requested_size");
  integer(o, (int64_t)(k || !b->live ? 0 : b->req));
  str_shared(o, &g->keys, "state");
  str_shared(o, &g->keys, k || !b->live ? "inactive" : "active_allocated");
  str_shared(o, &g->keys, "frames");
  if (!k && b->live) frames_list(g, b->stack);
  else {
    op(o, ']');
    if (o->python) memoize(o);
  }
  op(o, 'u');
}

static void write_segment(gen *g, const block *b) {
  out *o = &g->o;
  op(o, '}');
  if (o->python) memoize(o);
  op(o, '(');
  str_shared(o, &g->keys, "device");
  integer(o, b->device);
  str_shared(o, &g->keys, "address");
  integer(o, (int64_t)b->seg);
  str_shared(o, &g->keys, "total_size");
  integer(o, (int64_t)b->seg_size);
  str_shared(o, &g->keys, "allocated_size");
  integer(o, b->live ? (int64_t)b->size : 0);
  str_shared(o, &g->keys, "active_size");
  integer(o, b->live ? (int64_t)b->size : 0);
  str_shared(o, &g->keys, "requested_size");
  integer(o, b->live ? (int64_t)b->req : 0);
  str_shared(o, &g->keys, "stream");
  integer(o, 0);
  str_shared(o, &g->keys, "segment_type");
  str_shared(o, &g->keys, b->seg_size == (2u << 20) ? "small" : "large");
  str_shared(o, &g->keys, "is_expandable");
  op(o, 0x89);
  str_shared(o, &g->keys, "frames");
  op(o, ']');
  if (o->python) memoize(o);
  str_shared(o, &g->keys, "blocks");
  op(o, ']');
  if (o->python) memoize(o);
  int nb = b->seg_size > b->size ? 2 : 1;
  if (nb > 1 || !o->python) op(o, '(');
  for (int k = 0; k < nb; k++) write_block(g, b, k);
  op(o, nb > 1 || !o->python ? 'e' : 'a');
  op(o, 'u');
  boundary(o, 0);
}

/* segments: one per block the program made, with the block and the rest of the segment */
static void write_segments(gen *g, const program *p) {
  out *o = &g->o;
  str_shared(o, &g->keys, "segments");
  op(o, ']');
  if (o->python) memoize(o);
  for (size_t start = 0; start < p->nblocks; start += o->python ? 1000 : p->nblocks) {
    size_t m = o->python ? (p->nblocks - start < 1000 ? p->nblocks - start : 1000) : p->nblocks;
    op(o, '(');
    for (size_t i = start; i < start + m; i++) write_segment(g, &p->blocks[i]);
    op(o, 'e');
  }
}

/* One trace entry; fl_memo keeps each entry's frames list for the free_completed that shares it. */
static void write_entry(gen *g, const program *p, size_t i, uint64_t *fl_memo) {
  out *o = &g->o;
  const entry *e = &p->ent[i];
  op(o, '}');
  if (o->python) memoize(o);
  op(o, '(');
  str_shared(o, &g->keys, "action");
  str_shared(o, &g->keys, action_names[e->action]);
  str_shared(o, &g->keys, "addr");
  integer(o, (int64_t)e->addr);
  str_shared(o, &g->keys, "size");
  integer(o, (int64_t)e->size);
  str_shared(o, &g->keys, "stream");
  integer(o, 0);
  str_shared(o, &g->keys, "time_us");
  integer(o, (int64_t)e->time_us);
  str_shared(o, &g->keys, "frames");
  if (e->action == 2) get(o, fl_memo[e->pair]);
  else fl_memo[i] = frames_list(g, e->stack);
  op(o, 'u');
  boundary(o, 0);
}

/* device_traces: a list per device */
static void write_device_traces(gen *g, const program *p) {
  out *o = &g->o;
  str_shared(o, &g->keys, "device_traces");
  op(o, ']');
  if (o->python) memoize(o);
  if (p->devices > 1 || !o->python) op(o, '(');
  uint64_t *fl_memo = calloc(p->n, sizeof *fl_memo);
  for (int d = 0; d < p->devices; d++) {
    op(o, ']');
    if (o->python) memoize(o);
    uint64_t in_batch = 0;
    if (!o->python) op(o, '(');
    for (size_t i = 0; i < p->n; i++) {
      if (p->ent[i].device != d) continue;
      if (o->python && in_batch == 0) op(o, '(');
      write_entry(g, p, i, fl_memo);
      if (o->python && ++in_batch == 1000) {
        op(o, 'e');
        in_batch = 0;
      }
    }
    if (in_batch || !o->python) op(o, 'e');
  }
  free(fl_memo);
  if (p->devices > 1 || !o->python) op(o, 'e');
  else op(o, 'a');
}

static void write_settings(gen *g) {
  out *o = &g->o;
  str_shared(o, &g->keys, "allocator_settings");
  op(o, '}');
  if (o->python) memoize(o);
  op(o, '(');
  str_shared(o, &g->keys, "PYTORCH_CUDA_ALLOC_CONF");
  str_new(o, "");
  if (o->python) memoize(o);
  str_shared(o, &g->keys, "max_split_size");
  integer(o, -1);
  str_shared(o, &g->keys, "expandable_segments");
  op(o, 0x89);
  op(o, 'u');
}

/* The snapshot dict: segments, device_traces, allocator_settings. 0, or 1 when the file fails. */
static int write_snapshot(gen *g, const program *p, const char *path) {
  out *o = &g->o;
  o->f = fopen(path, "wb");
  if (!o->f) {
    perror(path);
    return 1;
  }
  unsigned char proto[2] = {0x80, (unsigned char)(o->python ? 4 : 2)};
  fwrite(proto, 1, 2, o->f);
  op(o, '}');
  if (o->python) memoize(o);
  op(o, '(');
  write_segments(g, p);
  write_device_traces(g, p);
  write_settings(g);
  op(o, 'u');
  op(o, '.');
  boundary(o, 1);
  if (fclose(o->f)) {
    perror(path);
    return 1;
  }
  return 0;
}

static int usage(void) {
  fprintf(stderr, "usage: gen_snapshot [--entries N] [--layout python|cpp] [--devices D] [--seed S] OUT\n");
  return 2;
}

int main(int argc, char **argv) {
  uint64_t nentries = 1000000;
  int python = 1, devices = 1;
  const char *path = NULL;
  rng_state = 0x9E3779B97F4A7C15ull;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--entries") && i + 1 < argc) nentries = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--layout") && i + 1 < argc) python = strcmp(argv[++i], "cpp") != 0;
    else if (!strcmp(argv[i], "--devices") && i + 1 < argc) devices = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
      rng_state ^= strtoull(argv[++i], NULL, 10) * 0x2545F4914F6CDD1Dull;
    else if (argv[i][0] != '-' && !path) path = argv[i];
    else return usage();
  }
  if (!path || devices < 1 || devices > 16) return usage();
  gen *g = calloc(1, sizeof *g);
  make_frames_and_stacks(g);
  program p;
  program_run(&p, nentries, devices);
  g->o.python = python;
  if (write_snapshot(g, &p, path)) return 1;
  fprintf(stderr, "gen_snapshot: %s: %llu trace entries on %d device%s, %zu segments\n", path,
          (unsigned long long)p.n, devices, devices > 1 ? "s" : "", p.nblocks);
  return 0;
}
