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
    else {
      fprintf(stderr, "usage: gen_snapshot [--entries N] [--layout python|cpp] [--devices D] [--seed S] OUT\n");
      return 2;
    }
  }
  if (!path || devices < 1 || devices > 16) {
    fprintf(stderr, "usage: gen_snapshot [--entries N] [--layout python|cpp] [--devices D] [--seed S] OUT\n");
    return 2;
  }
  gen *g = calloc(1, sizeof *g);
  for (int f = 0; f < NFRAMES; f++) {
    g->frame_memo[f] = -1;
    snprintf(g->frame_name[f], sizeof g->frame_name[f], f % 3 ? "forward_%d" : "at::native::op_%d", f);
    snprintf(g->frame_file[f], sizeof g->frame_file[f], f % 3 ? "/workspace/model/layer_%d.py" : "??", f / 7);
    g->frame_line[f] = f % 3 ? (int)(rnd() % 900 + 1) : 0;
  }
  /* Call stacks (innermost frame first) grow from each other as in a program: a stack is the
   * outer part of an earlier one with a few new frames inside; 20 to 52 frames, 36 on average. */
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

  /* Simulate: a caching allocator with a free list per rounded size. */
  entry *ent = malloc(nentries * sizeof *ent);
  block *blocks = NULL;
  size_t nblocks = 0, bcap = 0;
  size_t *live = NULL, nlive = 0, lcap = 0;
  size_t *cache = calloc(1 << 16, sizeof *cache); /* rounded size class -> block index + 1 (a stack) */
  size_t *cache_next = NULL;
  uint64_t next_seg[16], t = 1700000000000000ull, n = 0;
  for (int d = 0; d < devices; d++) next_seg[d] = 0x7f0000000000ull + (uint64_t)d * 0x10000000000ull;
  while (n + 4 <= nentries) {
    int d = (int)(rnd() % (uint64_t)devices);
    t += 1 + rnd() % 50;
    if (nlive < 16 || (nlive < 4000 && rnd() % 2)) {
      uint64_t size = 1 + (rnd() % 4 ? rnd() % 65536 : rnd() % (64u << 20));
      uint64_t req = (size + 511) / 512 * 512;
      unsigned cls = (unsigned)((req / 512) & 0xFFFF);
      size_t bi = 0, prev = 0;
      for (size_t c = cache[cls]; c; prev = c, c = cache_next[c - 1])
        if (blocks[c - 1].size == req && blocks[c - 1].device == d) {
          bi = c;
          if (prev) cache_next[prev - 1] = cache_next[c - 1];
          else cache[cls] = cache_next[c - 1];
          break;
        }
      uint16_t st = (uint16_t)(rnd() % NSTACKS);
      if (!bi) {
        if (nblocks == bcap) {
          bcap = bcap ? bcap * 2 : 4096;
          blocks = realloc(blocks, bcap * sizeof *blocks);
          cache_next = realloc(cache_next, bcap * sizeof *cache_next);
        }
        /* the caching allocator's segment sizes: 2 MiB, 20 MiB, or rounded up to 2 MiB */
        uint64_t seg_size = req <= (1u << 20)  ? 2u << 20
                            : req < (10u << 20) ? 20u << 20
                                                : (req + (2u << 20) - 1) / (2u << 20) * (2u << 20);
        blocks[nblocks] = (block){next_seg[d], req, size, next_seg[d], seg_size, st, 0, d};
        ent[n++] = (entry){3, (uint8_t)d, st, next_seg[d], seg_size, t, 0};
        next_seg[d] += seg_size;
        bi = ++nblocks;
      }
      block *b = &blocks[bi - 1];
      b->live = 1;
      b->req = size;
      b->stack = st;
      if (nlive == lcap) {
        lcap = lcap ? lcap * 2 : 4096;
        live = realloc(live, lcap * sizeof *live);
      }
      live[nlive++] = bi - 1;
      ent[n++] = (entry){0, (uint8_t)d, st, b->addr, size, t, 0};
    } else {
      size_t k = rnd() % nlive, bi = live[k];
      live[k] = live[--nlive];
      block *b = &blocks[bi];
      b->live = 0;
      uint16_t st = (uint16_t)(rnd() % NSTACKS);
      ent[n] = (entry){1, (uint8_t)b->device, st, b->addr, b->req, t, 0};
      ent[n + 1] = (entry){2, (uint8_t)b->device, st, b->addr, b->req, t + 1, (uint32_t)n};
      n += 2;
      unsigned cls = (unsigned)((b->size / 512) & 0xFFFF);
      cache_next[bi] = cache[cls];
      cache[cls] = bi + 1;
    }
  }
  nentries = n;

  out *o = &g->o;
  o->python = python;
  o->f = fopen(path, "wb");
  if (!o->f) {
    perror(path);
    return 1;
  }
  static unsigned char proto[2] = {0x80, 4};
  proto[1] = python ? 4 : 2;
  fwrite(proto, 1, 2, o->f);
  op(o, '}');
  if (python) memoize(o);
  op(o, '(');
  /* segments: one per block the simulation made, with the block and the rest of the segment */
  str_shared(o, &g->keys, "segments");
  op(o, ']');
  if (python) memoize(o);
  for (size_t start = 0; start < nblocks; start += python ? 1000 : nblocks) {
    size_t m = python ? (nblocks - start < 1000 ? nblocks - start : 1000) : nblocks;
    op(o, '(');
    for (size_t i = start; i < start + m; i++) {
      block *b = &blocks[i];
      op(o, '}');
      if (python) memoize(o);
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
      if (python) memoize(o);
      str_shared(o, &g->keys, "blocks");
      op(o, ']');
      if (python) memoize(o);
      int nb = b->seg_size > b->size ? 2 : 1;
      if (nb > 1 || !python) op(o, '(');
      for (int k = 0; k < nb; k++) {
        op(o, '}');
        if (python) memoize(o);
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
          if (python) memoize(o);
        }
        op(o, 'u');
      }
      op(o, nb > 1 || !python ? 'e' : 'a');
      op(o, 'u');
      boundary(o, 0);
    }
    op(o, 'e');
  }
  /* device_traces: a list per device */
  str_shared(o, &g->keys, "device_traces");
  op(o, ']');
  if (python) memoize(o);
  if (devices > 1 || !python) op(o, '(');
  uint64_t *fl_memo = calloc(nentries, sizeof *fl_memo);
  for (int d = 0; d < devices; d++) {
    op(o, ']');
    if (python) memoize(o);
    uint64_t in_batch = 0;
    if (!python) op(o, '(');
    for (uint64_t i = 0; i < nentries; i++) {
      if (ent[i].device != d) continue;
      if (python && in_batch == 0) op(o, '(');
      const entry *e = &ent[i];
      op(o, '}');
      if (python) memoize(o);
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
      if (python && ++in_batch == 1000) {
        op(o, 'e');
        in_batch = 0;
      }
    }
    if (in_batch || !python) op(o, 'e');
  }
  if (devices > 1 || !python) op(o, 'e');
  else op(o, 'a');
  str_shared(o, &g->keys, "allocator_settings");
  op(o, '}');
  if (python) memoize(o);
  op(o, '(');
  str_shared(o, &g->keys, "PYTORCH_CUDA_ALLOC_CONF");
  str_new(o, "");
  if (python) memoize(o);
  str_shared(o, &g->keys, "max_split_size");
  integer(o, -1);
  str_shared(o, &g->keys, "expandable_segments");
  op(o, 0x89);
  op(o, 'u');
  op(o, 'u');
  op(o, '.');
  boundary(o, 1);
  if (fclose(o->f)) {
    perror(path);
    return 1;
  }
  fprintf(stderr, "gen_snapshot: %s: %llu trace entries on %d device%s, %zu segments\n", path,
          (unsigned long long)nentries, devices, devices > 1 ? "s" : "", nblocks);
  return 0;
}
