/* import_snapshot.c: PyTorch memory snapshots (torch.cuda.memory._dump_snapshot() pickles), read without Python. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../sim/hashmap.h"
#include "categorize.h"
#include "importer.h"
#include "jsonw.h"
#include "pickle.h"

/*
 * The pickle is read once, by the safe unpickler (pickle.h), which hands over every trace entry
 * as soon as it is complete. An entry is checked, its call stack interned, and it is written to a
 * spool file (a few bytes, in file order); the unpickler then drops it. Segments are taken the
 * same way. What stays in memory
 * is the final state (segments and blocks), the memo's shared frames and strings, and per device
 * the addresses seen (to rebuild the blocks live before a ring-buffer window, which come first
 * in the trace). At the end each device's trace is written from the spool: the rebuilt live
 * blocks, the requests and recorded allocator actions in file order, the final segments and
 * blocks, and the import notes. The allocations' categories are decided first, by the rules of
 * categorize.h fed the events as they will be written (a pass over the spool that keeps a byte
 * per event), so the trace is written categorized and the import driver's pass has nothing left
 * to do. docs/formats.md describes what is kept.
 */

#define SNAP_MAX_ANNOTATIONS 10000        /* external annotations kept per trace (in attrs) */
#define SNAP_STACK_CACHE_WORDS (1u << 24) /* frame indices held by the call-stack cache */
#define SNAP_MAX_FRAMES (1u << 22)        /* distinct frames before the caches start over */
#define SNAP_JSON_DEPTH 32

/* Kinds of cached results in pk_obj.aux (top byte). */
#define AUX_KIND(a) ((uint64_t)(a) >> 56)
#define AUX_VALUE(a) ((uint64_t)(a) & ((UINT64_C(1) << 56) - 1))
#define AUX_MAKE(k, v) ((int64_t)((uint64_t)(k) << 56 | (v)))
enum { AUX_NONE, AUX_CAND, AUX_STACK, AUX_FRAME, AUX_STR, AUX_SEGS };

/* Trace entry fields. */
enum {
  F_ACTION, F_ADDR, F_SIZE, F_STREAM, F_TIME_US, F_FRAMES, F_DEVICE_FREE, F_COMPILE_CONTEXT, F_USER_METADATA, F__COUNT
};
static const char *const field_names[F__COUNT] = {"action", "addr", "size", "stream", "time_us", "frames",
                                                  "device_free", "compile_context", "user_metadata"};

/* Trace entry actions: requests first, then what the recorded allocator did. */
enum { A_ALLOC, A_FREE_REQUESTED, A_FREE_COMPLETED, A_SEGMENT_ALLOC, A_SEGMENT_FREE, A_SEGMENT_MAP, A_SEGMENT_UNMAP,
       A_OOM, A_SNAPSHOT, A__COUNT };
static const char *const action_names[A__COUNT] = {"alloc", "free_requested", "free_completed", "segment_alloc",
                                                   "segment_free", "segment_map", "segment_unmap", "oom", "snapshot"};
#define A_IS_REQUEST(a) ((a) <= A_FREE_COMPLETED)

/*
 * Spool records, in file order. A record starts with a byte: the action (or an R_ARG's field)
 * in bits 0-3, the kind in bits 4-5, and bit 6 when the list (candidate) number follows, which
 * it does whenever it differs from the record before. Then LEB128 numbers: events and recorded
 * actions give addr, size, zigzag(stream), zigzag(ts - the previous record's ts), stack, and for
 * oom zigzag(device_free); an R_ARG gives its length and then its text.
 */
enum { R_EVENT = 1, R_RECORDED = 2, R_ARG = 3 };
#define R_HAS_CAND 0x40
typedef struct spool_rec {
  uint32_t cand;
  uint8_t kind, code; /* R_*, and the action (or the field of an R_ARG) */
  uint32_t arglen;    /* R_ARG: bytes of text */
  uint64_t addr, size;
  int64_t stream, ts, stack, device_free;
} spool_rec;

#define SPOOL_BUF (1u << 16)
typedef struct spool {
  FILE *f;
  unsigned char buf[SPOOL_BUF];
  size_t n;     /* bytes in buf */
  uint64_t off; /* bytes written in all */
  int64_t prev_ts;
  uint32_t prev_cand;
} spool;

/* An address's history within one device's trace. */
enum { ADDR_ALLOCATED = 1, ADDR_FREED_FIRST = 2 };

typedef struct pre_block {
  uint64_t addr, size;
  int64_t stream, stack;
} pre_block;

/* One streamed list of trace entries: a device's trace once device_traces says which. */
typedef struct snap_cand {
  uint64_t offset; /* byte where the list was made */
  int device;      /* -1 until matched */
  uint64_t entries, by_action[A__COUNT];
  uint64_t unknown_actions, dropped_fields, without_time;
  char unknown_names[160], dropped_names[160];
  int has_time;
  int64_t first_ts, last_ts;
  int have_first;
  uint64_t spool_first, spool_end;
  int64_t spool_ts0; /* the ts its first record is relative to */
  sim_map addrs;     /* address -> ADDR_* bits | pre index << 2 */
  pre_block *pre;    /* freed before any allocation */
  size_t npre, precap;
  sim_map segs;      /* segment addresses created by the trace (segment_alloc) */
  sim_map pages;     /* 2 MiB pages of expandable segments mapped by the trace (segment_map) */
  uint64_t seg_gone; /* segment_free/unmap of memory the trace did not create */
} snap_cand;

typedef struct seg_rec {
  store_segment s;
  uint64_t offset;
  size_t first_block, nblocks;
  int private_pool; /* segment_pool_id other than (0, 0): a CUDA graph's pool */
} seg_rec;

typedef struct frame_key {
  int64_t name, file, line;
  unsigned flags; /* categorize_frame_flags of its name and file */
} frame_key;

typedef struct stack_ent {
  int64_t id;
  uint32_t off, n;
} stack_ent;

typedef struct snap {
  import_ctx *ic;
  pickle *p;
  char read_err[512];
  spool *sp;
  snap_cand *cands;
  size_t ncand, candcap;
  /* call stacks: frames by content, stacks by their frames */
  frame_key *frames;
  size_t nframes, framecap;
  sim_map fmap;
  uint32_t gen;
  stack_ent *stacks;
  size_t nstacks, stackcap;
  uint32_t *words;
  size_t nwords, wordcap;
  sim_map smap;
  sim_map stack_flags; /* call stack id -> categorize_frame_flags of all its frames + 1 */
  uint32_t *tmp;
  size_t tmpcap;
  store_frame *sf;
  size_t sfcap;
  /* final state */
  seg_rec *segs;
  size_t nsegs, segcap;
  store_block *blocks;
  size_t nblocks, blockcap;
  int have_seglist; /* a list of segments was streamed */
  uint64_t seglist_offset;
} snap;

/* ---- small helpers ---------------------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v * UINT64_C(0x9E3779B97F4A7C15);
  h = (h ^ (h >> 31)) * UINT64_C(0xBF58476D1CE4E5B9);
  return h ^ (h >> 29);
}

/* Adds a name to a comma-separated list of names (each once, while there is room). */
static void add_name(char *list, size_t cap, const char *name, size_t n) {
  char one[48];
  if (n == 0) name = "''", n = 2; /* an empty name, shown as such */
  snprintf(one, sizeof one, "%.*s", (int)(n > 40 ? 40 : n), name);
  size_t ol = strlen(one), l = strlen(list);
  for (const char *q = list; *q;) {
    const char *e = strstr(q, ", ");
    size_t ql = e ? (size_t)(e - q) : strlen(q);
    if (ql == ol && !memcmp(q, one, ol)) return;
    if (!e) break;
    q = e + 2;
  }
  if (l + ol + 3 < cap) snprintf(list + l, cap - l, "%s%s", l ? ", " : "", one);
}

static uint64_t where(snap *st, pk_val v) { return pk_is_heap(v) ? v.u.o->offset : pickle_offset(st->p); }

/* The str classification cached on a str object: field id + 1 in bits 0-7, action id + 1 in 8-15. */
static uint64_t str_class(pk_obj *o) {
  if (AUX_KIND(o->aux) == AUX_STR) return AUX_VALUE(o->aux);
  uint64_t c = 0;
  for (int i = 0; i < F__COUNT; i++)
    if (strlen(field_names[i]) == o->len && !memcmp(field_names[i], o->data, o->len)) c |= (uint64_t)(i + 1);
  for (int i = 0; i < A__COUNT; i++)
    if (strlen(action_names[i]) == o->len && !memcmp(action_names[i], o->data, o->len)) c |= (uint64_t)(i + 1) << 8;
  o->aux = AUX_MAKE(AUX_STR, c);
  return c;
}

/* ---- typed field access ----------------------------------------------------------------- */

/* Messages say where: "byte N: <what>: field 'f' ...". */
typedef struct place {
  snap *st;
  uint64_t byte;
  const char *what; /* printf format of what it is, with up to two numbers: a, b */
  unsigned long long a, b;
  long long frame; /* >= 0: this frame of its call stack */
} place;

#define PLACE(st, byte, what) ((place){(st), (byte), (what), 0, 0, -1})

static int bad(const place *pl, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(const place *pl, const char *field, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!pl->what) return pickle_fail(pl->st->p, "byte %llu: %s", (unsigned long long)pl->byte, msg);
  char what[160];
  int n = snprintf(what, sizeof what, pl->what, pl->a, pl->b);
  if (pl->frame >= 0 && n > 0 && (size_t)n < sizeof what)
    snprintf(what + n, sizeof what - (size_t)n, ", frame %lld of its call stack", pl->frame);
  if (field)
    return pickle_fail(pl->st->p, "byte %llu: %s: field '%s' %s", (unsigned long long)pl->byte, what, field, msg);
  return pickle_fail(pl->st->p, "byte %llu: %s: %s", (unsigned long long)pl->byte, what, msg);
}

/* What a value is, for messages: "an int", "a str", ... */
static const char *type_of(pk_val v) {
  if (v.type == PK_TOKEN) return "a list already read as a call stack";
  if (v.type == PK_BIGINT) return "an int beyond 64 bits";
  return pk_type_a(v.type);
}

/* An int field: absent leaves *out as it is (or fails when required). */
static int get_i64(const place *pl, const pk_val *v, const char *field, int required, int64_t *out) {
  if (!v) return required ? bad(pl, field, "is missing") : 0;
  if (v->type == PK_BIGINT) return bad(pl, field, "is out of range (more than 64 bits)");
  if (v->type != PK_INT) return bad(pl, field, "must be an int, not %s", type_of(*v));
  *out = v->u.i;
  return 0;
}

static int get_u64(const place *pl, const pk_val *v, const char *field, int required, uint64_t *out) {
  int64_t x = 0;
  if (!v) return required ? bad(pl, field, "is missing") : 0;
  if (get_i64(pl, v, field, required, &x)) return -1;
  if (x < 0) return bad(pl, field, "must not be negative (%" PRId64 ")", x);
  *out = (uint64_t)x;
  return 0;
}

/* A str field (None counts as absent): NUL-terminated text or NULL. */
static int get_str(const place *pl, const pk_val *v, const char *field, int required, const char **out) {
  if (!v || v->type == PK_NONE) return required ? bad(pl, field, "is missing") : 0;
  if (v->type != PK_STR) return bad(pl, field, "must be a str, not %s", type_of(*v));
  *out = v->u.o->data;
  return 0;
}

/* ---- call stacks ------------------------------------------------------------------------ */

static void caches_clear(snap *st) {
  st->nframes = st->nstacks = st->nwords = 0;
  sim_map_clear(&st->fmap);
  sim_map_clear(&st->smap);
  st->gen = (st->gen + 1) & 0xFFFFFF;
}

/* A frame dict's index in the frame table (content-deduplicated), cached on the dict. */
static int frame_index(snap *st, const place *pl, pk_val fv, size_t i, uint32_t *out) {
  if (fv.type != PK_DICT) return bad(pl, NULL, "frame %zu of its call stack is %s, not a dict", i, type_of(fv));
  pk_obj *d = fv.u.o;
  if (AUX_KIND(d->aux) == AUX_FRAME && (AUX_VALUE(d->aux) >> 32) == st->gen) {
    *out = (uint32_t)AUX_VALUE(d->aux);
    return 0;
  }
  const char *name = "", *file = "";
  int64_t line = 0;
  place fp = *pl;
  fp.frame = (long long)i;
  if (get_str(&fp, pk_dict_get(d, "name"), "name", 0, &name) ||
      get_str(&fp, pk_dict_get(d, "filename"), "filename", 0, &file) ||
      get_i64(&fp, pk_dict_get(d, "line"), "line", 0, &line))
    return -1;
  const pk_val *nv = pk_dict_get(d, "name"), *fl = pk_dict_get(d, "filename");
  size_t nl = nv && nv->type == PK_STR ? nv->u.o->len : 0, fll = fl && fl->type == PK_STR ? fl->u.o->len : 0;
  frame_key k = {store_intern_string(st->ic->s, name, nl), store_intern_string(st->ic->s, file, fll), line, 0};
  if (k.name < 0 || k.file < 0) return pickle_fail(st->p, "%s", store_error(st->ic->s));
  uint64_t h = mix(mix(mix(1, (uint64_t)k.name), (uint64_t)k.file), (uint64_t)k.line);
  for (uint64_t probe = h;; probe++) {
    uint64_t *slot = sim_map_get(&st->fmap, probe);
    if (!slot) {
      if (st->nframes >= SNAP_MAX_FRAMES) {
        caches_clear(st);
        return frame_index(st, pl, fv, i, out);
      }
      sim_grow((void **)&st->frames, &st->framecap, st->nframes + 1, sizeof *st->frames);
      k.flags = categorize_frame_flags(name, file);
      st->frames[st->nframes] = k;
      *sim_map_put(&st->fmap, probe, NULL) = st->nframes;
      *out = (uint32_t)st->nframes++;
      break;
    }
    const frame_key *e = &st->frames[*slot];
    if (e->name == k.name && e->file == k.file && e->line == k.line) {
      *out = (uint32_t)*slot;
      break;
    }
  }
  d->aux = AUX_MAKE(AUX_FRAME, (uint64_t)st->gen << 32 | *out);
  return 0;
}

/* The callsite id of a frames value (innermost frame first): 0 for none. */
static int frames_stack(snap *st, const place *pl, const pk_val *v, int64_t *out) {
  *out = 0;
  if (!v || v->type == PK_NONE) return 0;
  if (v->type == PK_TOKEN) {
    *out = v->u.i;
    return 0;
  }
  if (v->type != PK_LIST && v->type != PK_TUPLE) return bad(pl, "frames", "must be a list, not %s", type_of(*v));
  pk_obj *l = v->u.o;
  if (AUX_KIND(l->aux) == AUX_STACK) {
    *out = (int64_t)AUX_VALUE(l->aux);
    return 0;
  }
  if (l->taken || AUX_KIND(l->aux) == AUX_CAND) return bad(pl, "frames", "is a list of trace entries");
  if (l->len == 0) return 0;
  if (l->len > UINT32_MAX) return bad(pl, "frames", "is too long");
  sim_grow((void **)&st->tmp, &st->tmpcap, l->len, sizeof *st->tmp);
  uint32_t gen = st->gen;
  /* The hot loop of the import: every entry's frames. A frame seen before carries its index
   * (aux: AUX_FRAME, gen, index); the hash is a multiply per frame, mixed at the end. */
  const uint64_t seen = (uint64_t)AUX_FRAME << 24 | gen;
  uint64_t h = 2;
  for (size_t i = 0; i < l->len; i++) {
    pk_val fv = l->items[i];
    uint32_t fi = 0;
    if (fv.type == PK_DICT && (uint64_t)fv.u.o->aux >> 32 == seen) {
      fi = (uint32_t)fv.u.o->aux;
    } else {
      if (frame_index(st, pl, fv, i, &fi)) return -1;
      if (st->gen != gen) return frames_stack(st, pl, v, out); /* the caches started over */
    }
    st->tmp[i] = fi;
    h = (h + fi) * UINT64_C(0x9E3779B97F4A7C15);
  }
  h = mix(h, l->len);
  uint64_t probe = h;
  for (;; probe++) {
    uint64_t *slot = sim_map_get(&st->smap, probe);
    if (!slot) break;
    const stack_ent *e = &st->stacks[*slot];
    if (e->n == l->len && !memcmp(st->words + e->off, st->tmp, l->len * sizeof *st->tmp)) {
      *out = e->id;
      l->aux = AUX_MAKE(AUX_STACK, (uint64_t)e->id);
      return 0;
    }
  }
  sim_grow((void **)&st->sf, &st->sfcap, l->len, sizeof *st->sf);
  for (size_t i = 0; i < l->len; i++) {
    const pk_val *n = pk_dict_get(l->items[i].u.o, "name"), *f = pk_dict_get(l->items[i].u.o, "filename");
    const pk_val *ln = pk_dict_get(l->items[i].u.o, "line");
    st->sf[i].name = n && n->type == PK_STR ? n->u.o->data : "";
    st->sf[i].file = f && f->type == PK_STR ? f->u.o->data : "";
    st->sf[i].line = ln && ln->type == PK_INT ? ln->u.i : 0;
  }
  int64_t id = store_intern_stack(st->ic->s, st->sf, l->len);
  if (id < 0) return pickle_fail(st->p, "%s", store_error(st->ic->s));
  /* What the frames say about the code that made the allocation, as the category rules read
   * the stored call stack (the stored strings end at a NUL, as these do). */
  int known;
  uint64_t *fl = sim_map_put(&st->stack_flags, (uint64_t)id, &known);
  if (!known) {
    unsigned f = 0;
    for (size_t i = 0; i < l->len; i++) f |= st->frames[st->tmp[i]].flags;
    *fl = (uint64_t)f + 1;
  }
  if (st->nwords + l->len > SNAP_STACK_CACHE_WORDS) {
    st->nstacks = st->nwords = 0;
    sim_map_clear(&st->smap);
    probe = h;
  }
  sim_grow((void **)&st->words, &st->wordcap, st->nwords + l->len, sizeof *st->words);
  memcpy(st->words + st->nwords, st->tmp, l->len * sizeof *st->tmp);
  sim_grow((void **)&st->stacks, &st->stackcap, st->nstacks + 1, sizeof *st->stacks);
  st->stacks[st->nstacks] = (stack_ent){id, (uint32_t)st->nwords, (uint32_t)l->len};
  st->nwords += l->len;
  *sim_map_put(&st->smap, probe, NULL) = st->nstacks++;
  l->aux = AUX_MAKE(AUX_STACK, (uint64_t)id);
  *out = id;
  return 0;
}

/* ---- trace entries (called by the unpickler as each one completes) ---------------------- */

static int spool_flush(snap *st) {
  spool *sp = st->sp;
  if (sp->n && fwrite(sp->buf, 1, sp->n, sp->f) != sp->n)
    return pickle_fail(st->p, "cannot write the import's spool file: %s", strerror(errno));
  sp->off += sp->n;
  sp->n = 0;
  return 0;
}

static void put_varint(spool *sp, uint64_t v) {
  while (v >= 0x80) {
    sp->buf[sp->n++] = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  sp->buf[sp->n++] = (unsigned char)v;
}

static uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static int64_t unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

static int spool_write(snap *st, const spool_rec *r, const void *text) {
  spool *sp = st->sp;
  if (sp->n + 80 > SPOOL_BUF && spool_flush(st)) return -1;
  int with_cand = r->cand != sp->prev_cand;
  sp->buf[sp->n++] = (unsigned char)(r->code | r->kind << 4 | (with_cand ? R_HAS_CAND : 0));
  if (with_cand) put_varint(sp, r->cand);
  sp->prev_cand = r->cand;
  if (r->kind == R_ARG) {
    put_varint(sp, r->arglen);
    if (spool_flush(st)) return -1;
    if (r->arglen && fwrite(text, 1, r->arglen, sp->f) != r->arglen)
      return pickle_fail(st->p, "cannot write the import's spool file: %s", strerror(errno));
    sp->off += r->arglen;
    return 0;
  }
  put_varint(sp, r->addr);
  put_varint(sp, r->size);
  put_varint(sp, zigzag(r->stream));
  put_varint(sp, zigzag((int64_t)((uint64_t)r->ts - (uint64_t)sp->prev_ts)));
  put_varint(sp, (uint64_t)r->stack);
  if (r->code == A_OOM) put_varint(sp, zigzag(r->device_free));
  sp->prev_ts = r->ts;
  return 0;
}

/* The spool's length so far (records in the buffer counted). */
static uint64_t spool_len(const snap *st) { return st->sp->off + st->sp->n; }

static int take_entry(snap *st, snap_cand *c, uint64_t index, pk_val item) {
  place pl = PLACE(st, where(st, item), "trace entry %llu");
  pl.a = index;
  if (item.type != PK_DICT) return bad(&pl, NULL, "is %s, not a dict", type_of(item));
  pk_obj *d = item.u.o;
  const pk_val *f[F__COUNT] = {0};
  for (size_t i = 0; i < d->len; i++) {
    pk_val k = d->items[2 * i];
    int id = k.type == PK_STR ? (int)(str_class(k.u.o) & 0xFF) - 1 : -1;
    if (id >= 0) {
      f[id] = &d->items[2 * i + 1];
      continue;
    }
    c->dropped_fields++;
    if (k.type == PK_STR) add_name(c->dropped_names, sizeof c->dropped_names, k.u.o->data, k.u.o->len);
    else add_name(c->dropped_names, sizeof c->dropped_names, pk_type_name(k.type), strlen(pk_type_name(k.type)));
  }
  c->entries++;
  if (!f[F_ACTION]) return bad(&pl, "action", "is missing");
  if (f[F_ACTION]->type != PK_STR) return bad(&pl, "action", "must be a str, not %s", type_of(*f[F_ACTION]));
  pk_obj *as = f[F_ACTION]->u.o;
  int action = (int)(str_class(as) >> 8 & 0xFF) - 1;
  if (action < 0) {
    c->unknown_actions++;
    add_name(c->unknown_names, sizeof c->unknown_names, as->data, as->len);
    return 0;
  }
  spool_rec r = {.cand = (uint32_t)(c - st->cands), .code = (uint8_t)action, .device_free = -1};
  r.kind = A_IS_REQUEST(action) ? R_EVENT : R_RECORDED;
  int needs_addr = action != A_OOM && action != A_SNAPSHOT;
  if (action != A_OOM && get_u64(&pl, f[F_ADDR], "addr", needs_addr, &r.addr)) return -1;
  if (get_u64(&pl, f[F_SIZE], "size", 1, &r.size) || get_i64(&pl, f[F_STREAM], "stream", 0, &r.stream)) return -1;
  if (action == A_OOM && f[F_DEVICE_FREE]) {
    uint64_t df = 0;
    if (get_u64(&pl, f[F_DEVICE_FREE], "device_free", 0, &df)) return -1;
    r.device_free = df > INT64_MAX ? INT64_MAX : (int64_t)df;
  }
  if (f[F_TIME_US] && f[F_TIME_US]->type != PK_NONE) {
    uint64_t us = 0;
    if (get_u64(&pl, f[F_TIME_US], "time_us", 1, &us)) return -1;
    if (us > (uint64_t)INT64_MAX / 1000) return bad(&pl, "time_us", "is out of range (%" PRIu64 ")", us);
    r.ts = (int64_t)us * 1000;
    c->has_time = 1;
  } else {
    r.ts = c->last_ts;
    c->without_time++;
  }
  if (!c->have_first) {
    c->first_ts = r.ts;
    c->have_first = 1;
  }
  c->last_ts = r.ts;
  if (frames_stack(st, &pl, f[F_FRAMES], &r.stack)) return -1;
  /* The memo now holds the stack's id where it held the frames list, so the list can go. */
  if (f[F_FRAMES] && f[F_FRAMES]->type == PK_LIST) pickle_memo_replace(st->p, *f[F_FRAMES], r.stack);
  const char *cc = NULL, *um = NULL;
  if (get_str(&pl, f[F_COMPILE_CONTEXT], "compile_context", 0, &cc) ||
      get_str(&pl, f[F_USER_METADATA], "user_metadata", 0, &um))
    return -1;

  /* What the address was before this entry. */
  if (A_IS_REQUEST(action)) {
    int existed;
    uint64_t *s = sim_map_put(&c->addrs, r.addr, &existed);
    if (action == A_ALLOC) {
      *s |= ADDR_ALLOCATED;
    } else if (!existed) {
      sim_grow((void **)&c->pre, &c->precap, c->npre + 1, sizeof *c->pre);
      c->pre[c->npre] = (pre_block){r.addr, r.size, r.stream, 0};
      *s = ADDR_FREED_FIRST | (uint64_t)c->npre++ << 2;
    }
  } else if (action == A_SEGMENT_ALLOC) {
    *sim_map_put(&c->segs, r.addr, NULL) = 1;
  } else if (action == A_SEGMENT_FREE && !sim_map_get(&c->segs, r.addr)) {
    c->seg_gone++;
  } else if (action == A_SEGMENT_MAP) {
    /* expandable segments map and unmap page ranges, not whole segments */
    for (uint64_t pg = r.addr >> 21, n = 0; pg <= (r.addr + (r.size ? r.size - 1 : 0)) >> 21 && n < 65536; pg++, n++)
      *sim_map_put(&c->pages, pg, NULL) = 1;
  } else if (action == A_SEGMENT_UNMAP && !sim_map_get(&c->pages, r.addr >> 21)) {
    c->seg_gone++;
  }
  c->by_action[action]++;
  if (c->spool_end == 0) {
    c->spool_first = spool_len(st);
    c->spool_ts0 = st->sp->prev_ts;
  }
  if (spool_write(st, &r, NULL)) return -1;
  if (cc && strcmp(cc, "N/A") && *cc) {
    spool_rec a = {.cand = r.cand, .kind = R_ARG, .code = F_COMPILE_CONTEXT,
                   .arglen = (uint32_t)f[F_COMPILE_CONTEXT]->u.o->len};
    if (spool_write(st, &a, cc)) return -1;
  }
  if (um && *um) {
    spool_rec a = {.cand = r.cand, .kind = R_ARG, .code = F_USER_METADATA,
                   .arglen = (uint32_t)f[F_USER_METADATA]->u.o->len};
    if (spool_write(st, &a, um)) return -1;
  }
  c->spool_end = spool_len(st);
  return 0;
}

static int read_segment(snap *st, size_t si, pk_val sv);

/*
 * The unpickler's consumer. A list whose first item is a dict with an 'action' is a trace: its
 * entries are taken as they complete. A list whose first item is a dict with 'blocks' is the
 * final state: its segments are taken too. finish() checks that they sit where a snapshot has
 * them. Every other list keeps its items.
 */
static int on_item(void *arg, pickle *p, pk_obj *list, uint64_t index, pk_val item) {
  (void)p;
  snap *st = arg;
  if (AUX_KIND(list->aux) == AUX_SEGS) return read_segment(st, (size_t)index, item) ? -1 : PICKLE_TAKE;
  if (AUX_KIND(list->aux) != AUX_CAND) {
    if (index != 0 || list->aux || item.type != PK_DICT) return PICKLE_KEEP_ALL;
    int is_entry = 0;
    for (size_t i = 0; i < item.u.o->len && !is_entry; i++) {
      pk_val k = item.u.o->items[2 * i];
      is_entry = k.type == PK_STR && (str_class(k.u.o) & 0xFF) == F_ACTION + 1;
    }
    if (!is_entry && pk_dict_get(item.u.o, "blocks") && pk_dict_get(item.u.o, "total_size")) {
      if (st->have_seglist)
        return pickle_fail(st->p, "byte %llu: a second list of segments (the snapshot has one, 'segments')",
                           (unsigned long long)list->offset);
      st->have_seglist = 1;
      st->seglist_offset = list->offset;
      list->aux = AUX_MAKE(AUX_SEGS, 0);
      return read_segment(st, 0, item) ? -1 : PICKLE_TAKE;
    }
    if (!is_entry) return PICKLE_KEEP_ALL;
    if (st->ncand >= UINT32_MAX) return pickle_fail(st->p, "byte %llu: too many lists of trace entries",
                                                    (unsigned long long)list->offset);
    sim_grow((void **)&st->cands, &st->candcap, st->ncand + 1, sizeof *st->cands);
    snap_cand *c = &st->cands[st->ncand];
    memset(c, 0, sizeof *c);
    c->offset = list->offset;
    c->device = -1;
    sim_map_init(&c->addrs);
    sim_map_init(&c->segs);
    sim_map_init(&c->pages);
    list->aux = AUX_MAKE(AUX_CAND, st->ncand++);
  }
  snap_cand *c = &st->cands[AUX_VALUE(list->aux)];
  return take_entry(st, c, index, item) ? -1 : PICKLE_TAKE;
}

/* ---- plain values as JSON (allocator settings, annotations) ----------------------------- */

static void json_value(yajl_gen g, pk_val v, int depth);

static void json_key(yajl_gen g, pk_val k) {
  char b[48];
  if (k.type == PK_STR) jsonw_strn(g, k.u.o->data, k.u.o->len);
  else if (k.type == PK_INT) {
    snprintf(b, sizeof b, "%" PRId64, k.u.i);
    jsonw_str(g, b);
  } else if (k.type == PK_BOOL) jsonw_str(g, k.u.i ? "True" : "False");
  else if (k.type == PK_NONE) jsonw_str(g, "None");
  else if (k.type == PK_FLOAT) {
    snprintf(b, sizeof b, "%.17g", k.u.f);
    jsonw_str(g, b);
  } else jsonw_str(g, pk_type_name(k.type));
}

static int same_key(pk_val a, pk_val b) {
  if (a.type != b.type) return 0;
  if (a.type == PK_STR) return a.u.o->len == b.u.o->len && !memcmp(a.u.o->data, b.u.o->data, a.u.o->len);
  if (a.type == PK_INT || a.type == PK_BOOL) return a.u.i == b.u.i;
  return 0;
}

static void json_value(yajl_gen g, pk_val v, int depth) {
  if (depth > SNAP_JSON_DEPTH) {
    jsonw_null(g);
    return;
  }
  switch (v.type) {
  case PK_NONE: jsonw_null(g); return;
  case PK_BOOL: jsonw_bool(g, (int)v.u.i); return;
  case PK_INT: jsonw_int(g, v.u.i); return;
  case PK_FLOAT: jsonw_double(g, v.u.f); return;
  case PK_STR: jsonw_strn(g, v.u.o->data, v.u.o->len); return;
  case PK_BYTES:
  case PK_BIGINT: {
    /* hex text: bytes in order; big ints most significant byte first */
    size_t n = v.u.o->len > 4096 ? 4096 : v.u.o->len;
    char *hex = sim_xmalloc(2 * n + 3);
    size_t o = 0;
    if (v.type == PK_BIGINT) {
      hex[o++] = '0';
      hex[o++] = 'x';
    }
    for (size_t i = 0; i < n; i++) {
      unsigned char c = (unsigned char)v.u.o->data[v.type == PK_BIGINT ? v.u.o->len - 1 - i : i];
      o += (size_t)snprintf(hex + o, 3, "%02x", c);
    }
    jsonw_strn(g, hex, o);
    free(hex);
    return;
  }
  case PK_LIST:
  case PK_TUPLE:
  case PK_SET:
  case PK_FROZENSET:
    yajl_gen_array_open(g);
    for (size_t i = 0; i < v.u.o->len; i++) json_value(g, v.u.o->items[i], depth + 1);
    yajl_gen_array_close(g);
    return;
  case PK_DICT:
    yajl_gen_map_open(g);
    for (size_t i = 0; i < v.u.o->len; i++) {
      int later = 0;
      for (size_t j = i + 1; j < v.u.o->len && v.u.o->len <= 1000 && !later; j++)
        later = same_key(v.u.o->items[2 * i], v.u.o->items[2 * j]);
      if (later) continue; /* Python keeps the last value of a repeated key */
      json_key(g, v.u.o->items[2 * i]);
      json_value(g, v.u.o->items[2 * i + 1], depth + 1);
    }
    yajl_gen_map_close(g);
    return;
  default: jsonw_null(g); return;
  }
}

/* ---- the final state: segments and their blocks ----------------------------------------- */

static int cmp_seg(const void *a, const void *b) {
  const seg_rec *x = a, *y = b;
  if (x->s.device != y->s.device) return x->s.device < y->s.device ? -1 : 1;
  if (x->s.address != y->s.address) return x->s.address < y->s.address ? -1 : 1;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static const char *block_state(const char *s) {
  static const char *const states[] = {"active_allocated", "active_pending_free", "inactive", NULL};
  for (size_t i = 0; states[i]; i++)
    if (!strcmp(states[i], s)) return states[i];
  return NULL;
}

static int read_block(snap *st, seg_rec *g, size_t si, size_t bi, pk_val bv, uint64_t *next) {
  place pl = PLACE(st, where(st, bv), "block %llu of segment %llu");
  pl.a = bi;
  pl.b = si;
  if (bv.type != PK_DICT) return bad(&pl, NULL, "is %s, not a dict", type_of(bv));
  pk_obj *d = bv.u.o;
  store_block b = {.segment_address = g->s.address, .address = *next};
  const char *state = NULL;
  if (get_u64(&pl, pk_dict_get(d, "size"), "size", 1, &b.size) ||
      get_u64(&pl, pk_dict_get(d, "address"), "address", 0, &b.address) ||
      get_str(&pl, pk_dict_get(d, "state"), "state", 1, &state))
    return -1;
  if (!(b.state = block_state(state)))
    return bad(&pl, "state", "must be active_allocated, active_pending_free or inactive, not '%.40s'", state);
  /* Older dumps have no requested_size or frames in a block, but a history of the allocations
   * that used it, the current one first. */
  const pk_val *hist = pk_dict_get(d, "history"), *frames = pk_dict_get(d, "frames");
  pk_obj *h0 = NULL;
  if (hist && hist->type != PK_NONE) {
    if (hist->type != PK_LIST) return bad(&pl, "history", "must be a list, not %s", type_of(*hist));
    if (hist->u.o->len) {
      if (hist->u.o->items[0].type != PK_DICT)
        return bad(&pl, "history", "must hold dicts, not %s", type_of(hist->u.o->items[0]));
      h0 = hist->u.o->items[0].u.o;
    }
  }
  int live = b.state[0] == 'a'; /* active_allocated, active_pending_free */
  b.requested_size = live ? b.size : 0;
  if (live && h0 && get_u64(&pl, pk_dict_get(h0, "real_size"), "history[0].real_size", 0, &b.requested_size))
    return -1;
  if (get_u64(&pl, pk_dict_get(d, "requested_size"), "requested_size", 0, &b.requested_size)) return -1;
  if (!frames && h0 && live) frames = pk_dict_get(h0, "frames");
  if (frames_stack(st, &pl, frames, &b.stack)) return -1;
  if (frames && frames->type == PK_LIST) pickle_memo_replace(st->p, *frames, b.stack);
  if (b.address > UINT64_MAX - b.size) return bad(&pl, "size", "runs past the end of the address space");
  /* Nothing refers to a block again: the memo lets it go with its segment. */
  if (hist && hist->type == PK_LIST) {
    for (size_t i = 0; i < hist->u.o->len; i++) pickle_memo_forget(st->p, hist->u.o->items[i]);
    pickle_memo_forget(st->p, *hist);
  }
  pickle_memo_forget(st->p, bv);
  *next = b.address + b.size;
  sim_grow((void **)&st->blocks, &st->blockcap, st->nblocks + 1, sizeof *st->blocks);
  st->blocks[st->nblocks++] = b;
  return 0;
}

static int read_segment(snap *st, size_t si, pk_val sv) {
  place pl = PLACE(st, where(st, sv), "segment %llu");
  pl.a = si;
  if (sv.type != PK_DICT) return bad(&pl, NULL, "is %s, not a dict", type_of(sv));
  pk_obj *d = sv.u.o;
  seg_rec g = {.offset = pl.byte, .first_block = st->nblocks};
  g.s.allocated_size = g.s.requested_size = g.s.active_size = -1;
  int64_t device = 0;
  const char *type = NULL;
  if (get_i64(&pl, pk_dict_get(d, "device"), "device", 1, &device) ||
      get_u64(&pl, pk_dict_get(d, "address"), "address", 1, &g.s.address) ||
      get_u64(&pl, pk_dict_get(d, "total_size"), "total_size", 1, &g.s.total_size) ||
      get_i64(&pl, pk_dict_get(d, "stream"), "stream", 0, &g.s.stream) ||
      get_str(&pl, pk_dict_get(d, "segment_type"), "segment_type", 0, &type) ||
      get_i64(&pl, pk_dict_get(d, "allocated_size"), "allocated_size", 0, &g.s.allocated_size) ||
      get_i64(&pl, pk_dict_get(d, "requested_size"), "requested_size", 0, &g.s.requested_size) ||
      get_i64(&pl, pk_dict_get(d, "active_size"), "active_size", 0, &g.s.active_size) ||
      frames_stack(st, &pl, pk_dict_get(d, "frames"), &g.s.stack))
    return -1;
  const pk_val *sframes = pk_dict_get(d, "frames");
  if (sframes && sframes->type == PK_LIST) pickle_memo_replace(st->p, *sframes, g.s.stack);
  if (device < 0 || device > 32767) return bad(&pl, "device", "must be a device index, not %" PRId64, device);
  g.s.device = (int)device;
  if (type) {
    if (!strcmp(type, "small")) g.s.pool = "small";
    else if (!strcmp(type, "large")) g.s.pool = "large";
    else return bad(&pl, "segment_type", "must be 'small' or 'large', not '%.40s'", type);
  }
  const pk_val *ex = pk_dict_get(d, "is_expandable");
  if (ex && ex->type != PK_NONE) {
    if (ex->type != PK_BOOL && ex->type != PK_INT)
      return bad(&pl, "is_expandable", "must be a bool, not %s", type_of(*ex));
    g.s.expandable = ex->u.i != 0;
  }
  const pk_val *pool = pk_dict_get(d, "segment_pool_id");
  if (pool && (pool->type == PK_TUPLE || pool->type == PK_LIST))
    for (size_t i = 0; i < pool->u.o->len; i++)
      if (pool->u.o->items[i].type != PK_INT || pool->u.o->items[i].u.i != 0) {
        g.private_pool = 1;
        break;
      }
  const pk_val *blocks = pk_dict_get(d, "blocks");
  if (!blocks) return bad(&pl, "blocks", "is missing");
  if (blocks->type != PK_LIST) return bad(&pl, "blocks", "must be a list, not %s", type_of(*blocks));
  uint64_t next = g.s.address;
  for (size_t i = 0; i < blocks->u.o->len; i++)
    if (read_block(st, &g, si, i, blocks->u.o->items[i], &next)) return -1;
  g.nblocks = st->nblocks - g.first_block;
  pickle_memo_forget(st->p, *blocks);
  /* Two blocks at one address would be one row in the store. */
  if (g.nblocks > 1) {
    uint64_t *a = sim_xmalloc(g.nblocks * sizeof *a);
    for (size_t i = 0; i < g.nblocks; i++) a[i] = st->blocks[g.first_block + i].address;
    qsort(a, g.nblocks, sizeof *a, cmp_u64);
    int dup = 0;
    uint64_t at = 0;
    for (size_t i = 1; i < g.nblocks && !dup; i++)
      if (a[i] == a[i - 1]) dup = 1, at = a[i];
    free(a);
    if (dup) return bad(&pl, "blocks", "has two blocks at address %" PRIu64, at);
  }
  sim_grow((void **)&st->segs, &st->segcap, st->nsegs + 1, sizeof *st->segs);
  st->segs[st->nsegs++] = g;
  return 0;
}

/* The snapshot's 'segments': streamed already (or empty, or a list that is not of segments). */
static int check_segments(snap *st, const pk_val *v) {
  place pl = PLACE(st, 0, "the snapshot");
  if (!v) return bad(&pl, "segments", "is missing");
  pl.byte = where(st, *v);
  if (v->type != PK_LIST) return bad(&pl, "segments", "must be a list, not %s", type_of(*v));
  if (AUX_KIND(v->u.o->aux) != AUX_SEGS) {
    if (v->u.o->len) {
      pl.byte = where(st, v->u.o->items[0]);
      pl.what = "segment 0";
      return bad(&pl, NULL, "is %s, not a segment (a dict with 'address', 'total_size' and 'blocks')",
                 type_of(v->u.o->items[0]));
    }
    if (st->have_seglist) {
      pl.byte = st->seglist_offset;
      return bad(&pl, NULL, "a list of segments that is not the snapshot's 'segments'");
    }
  }
  if (st->nsegs) qsort(st->segs, st->nsegs, sizeof *st->segs, cmp_seg);
  for (size_t i = 1; i < st->nsegs; i++)
    if (st->segs[i].s.device == st->segs[i - 1].s.device && st->segs[i].s.address == st->segs[i - 1].s.address) {
      pl.byte = st->segs[i].offset;
      pl.what = "a segment";
      return bad(&pl, NULL, "device %d has a second segment at address %" PRIu64, st->segs[i].s.device,
                 st->segs[i].s.address);
    }
  return 0;
}

/* ---- writing one device's trace --------------------------------------------------------- */

static int cmp_pre(const void *a, const void *b) {
  const pre_block *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

typedef struct trace_job {
  snap_cand *c;
  int device;
  int multi;
  const pk_val *settings, *annotations;
  size_t devices_in_file;
  const char *dropped_devices; /* "1, 2" or NULL */
  uint64_t dropped_segments;
} trace_job;

static int store_fail_at(snap *st) {
  import_error(st->ic, "cannot import '%s': %s", st->ic->path, store_error(st->ic->s));
  return -1;
}

static char *trace_attrs(snap *st, const trace_job *j, size_t nseg, size_t nblk, size_t npre, size_t from_final,
                         uint64_t seg_start, uint64_t *ann_dropped) {
  snap_cand *c = j->c;
  yajl_gen g = jsonw_mem();
  yajl_gen_map_open(g);
  jsonw_kint(g, "pickle_protocol", pickle_protocol(st->p));
  jsonw_kbool(g, "has_time_us", c->has_time);
  jsonw_kbool(g, "window", npre > 0 || seg_start > 0);
  jsonw_kuint(g, "trace_entries", c->entries);
  jsonw_kuint(g, "preexisting_blocks", npre);
  jsonw_kuint(g, "preexisting_from_final_state", from_final);
  jsonw_kuint(g, "segments_at_start", seg_start);
  jsonw_kuint(g, "final_segments", nseg);
  jsonw_kuint(g, "final_blocks", nblk);
  jsonw_kuint(g, "devices_in_file", j->devices_in_file);
  jsonw_str(g, "actions");
  yajl_gen_map_open(g);
  for (int a = 0; a < A__COUNT; a++)
    if (c->by_action[a]) jsonw_kuint(g, action_names[a], c->by_action[a]);
  yajl_gen_map_close(g);
  if (j->annotations && j->annotations->type == PK_LIST) {
    size_t kept = 0;
    pk_obj *l = j->annotations->u.o;
    for (size_t i = 0; i < l->len; i++) {
      pk_val a = l->items[i];
      const pk_val *dv = a.type == PK_DICT ? pk_dict_get(a.u.o, "device") : NULL;
      if (dv && dv->type == PK_INT && dv->u.i != j->device) continue;
      if (kept == SNAP_MAX_ANNOTATIONS) {
        (*ann_dropped)++;
        continue;
      }
      if (!kept++) {
        jsonw_str(g, "external_annotations");
        yajl_gen_array_open(g);
      }
      json_value(g, a, 0);
    }
    if (kept) yajl_gen_array_close(g);
  }
  yajl_gen_map_close(g);
  char *text = strdup(jsonw_text(g, NULL));
  yajl_gen_free(g);
  return text;
}

/*
 * Reading one list's records back from the spool. Each reader has its own buffer and reads
 * with pread, so that two can read at once.
 */
typedef struct spool_reader {
  snap *st;
  const snap_cand *c;
  uint32_t cand;
  int fd;
  unsigned char buf[SPOOL_BUF];
  size_t n, pos;
  uint64_t off; /* file offset of buf[n] */
  int64_t prev_ts;
  uint32_t prev_cand;
  char *text; /* an R_ARG's text */
  size_t textcap;
} spool_reader;

static spool_reader *spool_reader_new(snap *st, snap_cand *c) {
  spool_reader *rd = sim_xcalloc(1, sizeof *rd);
  rd->st = st;
  rd->c = c;
  rd->cand = (uint32_t)(c - st->cands);
  rd->fd = fileno(st->sp->f);
  rd->off = c->spool_first;
  rd->prev_ts = c->spool_ts0;
  rd->prev_cand = UINT32_MAX;
  return rd;
}

static void spool_reader_free(spool_reader *rd) {
  if (!rd) return;
  free(rd->text);
  free(rd);
}

/* 1 with a byte, 0 at the end of the file, -1 on error. */
static int spool_byte(spool_reader *rd, unsigned char *b) {
  if (rd->pos == rd->n) {
    ssize_t got;
    do got = pread(rd->fd, rd->buf, SPOOL_BUF, (off_t)rd->off);
    while (got < 0 && errno == EINTR);
    if (got <= 0) return got < 0 ? -1 : 0;
    rd->off += (uint64_t)got;
    rd->n = (size_t)got;
    rd->pos = 0;
  }
  *b = rd->buf[rd->pos++];
  return 1;
}

static int get_varint(spool_reader *rd, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    unsigned char b;
    if (spool_byte(rd, &b) != 1) return -1;
    *v |= (uint64_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) return 0;
  }
  return -1;
}

/* Reads the record at the reader's position (the text of an R_ARG into rd->text). */
static int spool_read(spool_reader *rd, spool_rec *r) {
  unsigned char h;
  uint64_t v;
  if (spool_byte(rd, &h) != 1) return -1;
  r->code = h & 15;
  r->kind = h >> 4 & 3;
  if (h & R_HAS_CAND) {
    if (get_varint(rd, &v)) return -1;
    rd->prev_cand = (uint32_t)v;
  }
  r->cand = rd->prev_cand;
  if (r->kind == R_ARG) {
    if (get_varint(rd, &v) || v > UINT32_MAX) return -1;
    r->arglen = (uint32_t)v;
    sim_grow((void **)&rd->text, &rd->textcap, r->arglen + 1, 1);
    for (uint32_t i = 0; i < r->arglen; i++)
      if (spool_byte(rd, (unsigned char *)rd->text + i) != 1) return -1;
    return 0;
  }
  uint64_t stream, dts, stack;
  if (get_varint(rd, &r->addr) || get_varint(rd, &r->size) || get_varint(rd, &stream) || get_varint(rd, &dts) ||
      get_varint(rd, &stack))
    return -1;
  r->stream = unzigzag(stream);
  r->ts = (int64_t)((uint64_t)rd->prev_ts + (uint64_t)unzigzag(dts));
  rd->prev_ts = r->ts;
  r->stack = (int64_t)stack;
  r->device_free = -1;
  if (r->code == A_OOM) {
    if (get_varint(rd, &v)) return -1;
    r->device_free = unzigzag(v);
  }
  return 0;
}

/* The list's next record: 1, 0 after its last, -1 on error (the message is the caller's). */
static int spool_next(spool_reader *rd, spool_rec *r) {
  while (rd->off - (rd->n - rd->pos) < rd->c->spool_end) {
    if (spool_read(rd, r)) return -1;
    if (r->cand == rd->cand) return 1;
  }
  return 0;
}

/* A request for device memory on device as an event. */
static void device_event(sim_event *ev, int kind, int64_t ts, uint64_t addr, uint64_t size, int64_t stream,
                         int64_t stack, int device) {
  sim_event_init(ev);
  ev->kind = (uint8_t)kind;
  ev->ts = ts;
  ev->addr = addr;
  ev->size = size;
  ev->stream = stream;
  ev->stack = stack;
  ev->device = (int16_t)device;
  ev->mem = SIM_MEM_DEVICE;
}

/* A preexisting block as the trace's event seq. */
static void pre_event(const pre_block *b, int64_t ts, int device, sim_event *ev) {
  device_event(ev, SIM_EV_ALLOC, ts, b->addr, b->size, b->stream, b->stack, device);
  ev->flags = SIM_EVF_PREEXISTING;
}

/* A request of the spool as an event. */
static void spool_event(const spool_rec *r, int device, sim_event *ev) {
  static const uint8_t kinds[] = {SIM_EV_ALLOC, SIM_EV_FREE_REQUESTED, SIM_EV_FREE_COMPLETED};
  device_event(ev, kinds[r->code], r->ts, r->addr, r->size, r->stream, r->stack, device);
}

static int spool_read_fail(snap *st) {
  import_error(st->ic, "cannot import '%s': cannot read the spool file back: %s", st->ic->path,
               errno ? strerror(errno) : "it ends early");
  return -1;
}

/* The categories of one trace's events, decided before they are written (categorize.h). */
typedef struct snap_cats {
  uint8_t *cat; /* by seq: category | cat_source << 4 */
  int64_t n;
} snap_cats;

static int cats_decided(void *arg, int64_t seq, int category, int cat_source) {
  snap_cats *sc = arg;
  if (seq < 0 || seq >= sc->n) return -1;
  sc->cat[seq] = (uint8_t)((category & 15) | (cat_source & 15) << 4);
  return 0;
}

static unsigned stack_flags_of(const snap *st, int64_t stack) {
  const uint64_t *f = stack > 0 ? sim_map_get((sim_map *)&st->stack_flags, (uint64_t)stack) : NULL;
  return f ? (unsigned)(*f - 1) : 0;
}

/*
 * Feeds the trace's events, as they will be written, to the category rules, which decide each
 * allocation's category as the import driver's pass would from the stored trace (snapshots
 * have no markers or copies: the rules see allocations, frees and call stacks). It runs on a
 * thread of its own while the recorded actions and the final state are stored: it reads only
 * the spool (with its own reader) and what the parse left, and writes only sc and err.
 */
typedef struct cat_job {
  snap *st;
  snap_cand *c;
  const pre_block *pre;
  size_t npre;
  int device;
  snap_cats *sc;
  int rc;
  char err[256];
} cat_job;

static void *categorize_events(void *arg) {
  cat_job *jb = arg;
  static const int64_t no_names[4] = {0, 0, 0, 0}; /* no phase markers */
  categorizer *cz = categorizer_new(no_names, cats_decided, jb->sc);
  spool_reader *rd = spool_reader_new(jb->st, jb->c);
  int rc = 0;
  int64_t seq = 0;
  sim_event ev;
  for (size_t i = 0; i < jb->npre && !rc; i++) {
    pre_event(&jb->pre[i], jb->c->first_ts, jb->device, &ev);
    ev.seq = seq++;
    rc = categorizer_event(cz, &ev, stack_flags_of(jb->st, ev.stack));
  }
  spool_rec r;
  int got = 0;
  while (!rc && (got = spool_next(rd, &r)) == 1) {
    if (r.kind != R_EVENT) continue;
    spool_event(&r, jb->device, &ev);
    ev.seq = seq++;
    rc = categorizer_event(cz, &ev, stack_flags_of(jb->st, ev.stack));
  }
  if (!rc && got < 0) {
    snprintf(jb->err, sizeof jb->err, "cannot read the spool file back: %s", errno ? strerror(errno) : "it ends early");
    rc = -1;
  } else if (!rc && categorizer_finish(cz)) {
    rc = -1;
  }
  if (rc && !jb->err[0]) snprintf(jb->err, sizeof jb->err, "cannot categorize its allocations");
  spool_reader_free(rd);
  categorizer_free(cz);
  jb->rc = rc;
  return NULL;
}

/*
 * Writes one device's events from the spool, each allocation with its category; the store's
 * writer thread inserts them while this one reads on. count and bytes: allocations by
 * cat_source. seq counts the events after the npre rebuilt ones.
 */
static int write_events(snap *st, store_writer *w, snap_cand *c, int device, const snap_cats *sc, int64_t npre,
                        int64_t count[SIM_CATSRC__COUNT], int64_t bytes[SIM_CATSRC__COUNT]) {
  spool_reader *rd = spool_reader_new(st, c);
  int rc = 0, got;
  int64_t seq = npre;
  spool_rec r;
  while (!rc && (got = spool_next(rd, &r)) != 0) {
    if (got < 0) {
      rc = spool_read_fail(st);
      break;
    }
    if (r.kind != R_EVENT) continue;
    sim_event ev;
    spool_event(&r, device, &ev);
    if (ev.kind == SIM_EV_ALLOC) {
      uint8_t k = seq < sc->n ? sc->cat[seq] : 0;
      ev.category = k & 15;
      ev.cat_source = k >> 4;
      count[ev.cat_source]++;
      bytes[ev.cat_source] += (int64_t)ev.size;
    }
    seq++;
    if (store_writer_event(w, &ev)) rc = store_fail_at(st);
  }
  spool_reader_free(rd);
  return rc;
}

/*
 * Writes one device's recorded allocator actions and the events' extra fields from the spool.
 * before_seq and seq count the events as write_events writes them (after the npre rebuilt ones).
 */
static int write_recorded(snap *st, store_writer *w, snap_cand *c, int device, int64_t npre) {
  spool_reader *rd = spool_reader_new(st, c);
  yajl_gen g = jsonw_mem();
  int rc = 0, got;
  int64_t events = npre; /* events of this trace so far */
  spool_rec r;
  while (!rc && (got = spool_next(rd, &r)) != 0) {
    if (got < 0) {
      rc = spool_read_fail(st);
      break;
    }
    if (r.kind == R_EVENT) {
      events++;
    } else if (r.kind == R_ARG) {
      if (events == npre) continue; /* follows no event */
      yajl_gen_clear(g);
      yajl_gen_reset(g, NULL);
      jsonw_strn(g, rd->text, r.arglen);
      if (store_writer_arg(w, events - 1, field_names[r.code], jsonw_text(g, NULL))) rc = store_fail_at(st);
    } else {
      store_recorded rec = {.before_seq = events, .ts = r.ts, .action = action_names[r.code], .device = device,
                            .stream = r.stream, .addr = r.addr, .size = r.size, .allocated = -1, .reserved = -1,
                            .device_free = r.device_free, .stack = r.stack};
      if (store_writer_recorded(w, &rec)) rc = store_fail_at(st);
    }
  }
  yajl_gen_free(g);
  spool_reader_free(rd);
  return rc;
}

static int write_trace(snap *st, const trace_job *j) {
  import_ctx *ic = st->ic;
  snap_cand *c = j->c;
  /* This device's final segments (sorted by device, then address). */
  size_t s0 = 0, s1;
  while (s0 < st->nsegs && st->segs[s0].s.device < j->device) s0++;
  for (s1 = s0; s1 < st->nsegs && st->segs[s1].s.device == j->device;) s1++;
  size_t nblk = 0;
  /* Blocks live before the first entry: freed before any allocation in the trace, and blocks
   * of the final state that the trace never allocated (pytorch-caching-allocator.md, section 2). */
  size_t npre = c->npre, from_final = 0, precap = npre + 1, priv = 0;
  pre_block *pre = sim_xmalloc(precap * sizeof *pre);
  if (npre) memcpy(pre, c->pre, npre * sizeof *pre);
  uint64_t seg_start = c->seg_gone;
  for (size_t i = s0; i < s1; i++) {
    const seg_rec *g = &st->segs[i];
    if (!sim_map_get(g->s.expandable ? &c->pages : &c->segs, g->s.expandable ? g->s.address >> 21 : g->s.address))
      seg_start++;
    priv += g->private_pool;
    for (size_t b = g->first_block; b < g->first_block + g->nblocks; b++) {
      const store_block *bl = &st->blocks[b];
      nblk++;
      if (bl->state[0] != 'a' || sim_map_get(&c->addrs, bl->address)) continue;
      sim_grow((void **)&pre, &precap, npre + 1, sizeof *pre);
      uint64_t size = bl->requested_size ? bl->requested_size : bl->size;
      pre[npre++] = (pre_block){bl->address, size, g->s.stream, bl->stack};
      from_final++;
    }
  }
  qsort(pre, npre, sizeof *pre, cmp_pre);

  char suffix[32];
  snprintf(suffix, sizeof suffix, "-dev%d", j->device);
  char *name = import_trace_name(ic, j->multi ? suffix : NULL);
  uint64_t ann_dropped = 0;
  char *attrs = trace_attrs(st, j, s1 - s0, nblk, npre, from_final, seg_start, &ann_dropped);
  char *settings = NULL;
  if (j->settings && j->settings->type != PK_NONE) {
    yajl_gen g = jsonw_mem();
    json_value(g, *j->settings, 0);
    settings = strdup(jsonw_text(g, NULL));
    yajl_gen_free(g);
  }
  store_trace meta = {.name = name, .source_format = (char *)"pytorch_snapshot", .source_file = (char *)ic->path,
                      .device_index = j->device, .framework = (char *)"pytorch", .allocator = (char *)"torch",
                      .allocator_settings = settings, .attrs = attrs};
  store_writer *w = NULL;
  int rc = 0;
  /* Categories first: an allocation's is known only when it is freed (or the trace ends). */
  snap_cats sc = {NULL, (int64_t)npre};
  for (int a = 0; a < A__COUNT; a++)
    if (A_IS_REQUEST(a)) sc.n += (int64_t)c->by_action[a];
  sc.cat = sim_xcalloc((size_t)sc.n + 1, 1);
  int64_t count[SIM_CATSRC__COUNT] = {0}, bytes[SIM_CATSRC__COUNT] = {0};
  cat_job cj = {st, c, pre, npre, j->device, &sc, 0, ""};
  pthread_t cat_thread;
  int threaded = 0;
  if (!name) rc = store_fail_at(st);
  else if (store_writer_begin(ic->s, &meta, &w)) rc = store_fail_at(st);
  else threaded = !pthread_create(&cat_thread, NULL, categorize_events, &cj);
  /* Meanwhile the recorded actions, the events' extra fields and the final state. */
  if (!rc) rc = write_recorded(st, w, c, j->device, (int64_t)npre);
  for (size_t i = s0; i < s1 && !rc; i++) {
    const seg_rec *g = &st->segs[i];
    if (store_writer_segment(w, &g->s)) rc = store_fail_at(st);
    for (size_t b = g->first_block; b < g->first_block + g->nblocks && !rc; b++)
      if (store_writer_block(w, &st->blocks[b])) rc = store_fail_at(st);
  }
  if (threaded) pthread_join(cat_thread, NULL);
  else if (!rc) categorize_events(&cj);
  if (!rc && cj.rc) {
    import_error(ic, "cannot import '%s': %s", ic->path, cj.err);
    rc = -1;
  }
  /* Then the events, each allocation with its category. */
  for (size_t i = 0; i < npre && !rc; i++) {
    sim_event ev;
    pre_event(&pre[i], c->first_ts, j->device, &ev);
    uint8_t k = sc.cat[i];
    ev.category = k & 15;
    ev.cat_source = k >> 4;
    count[ev.cat_source]++;
    bytes[ev.cat_source] += (int64_t)ev.size;
    if (store_writer_event(w, &ev)) rc = store_fail_at(st);
  }
  if (!rc) rc = write_events(st, w, c, j->device, &sc, (int64_t)npre, count, bytes);
  /* Import notes. */
  char detail[256];
  if (!rc && npre) {
    snprintf(detail, sizeof detail,
             "%zu live in the final state and never allocated in the trace, %zu freed before any allocation",
             from_final, npre - from_final);
    if (store_writer_stat(w, "preexisting_blocks", "info", (int64_t)npre, detail)) rc = store_fail_at(st);
  }
  if (!rc && c->without_time &&
      store_writer_stat(w, "entries_without_time", "info", (int64_t)c->without_time,
                        c->has_time ? "these entries take the time of the entry before them"
                                    : "the snapshot has no time_us: every timestamp is 0"))
    rc = store_fail_at(st);
  if (!rc && c->unknown_actions) {
    if (store_writer_stat(w, "unknown_actions", "warning", (int64_t)c->unknown_actions, c->unknown_names))
      rc = store_fail_at(st);
    import_warn(ic, "'%s': %" PRIu64 " trace entries with actions memplay does not know were skipped (%s)", ic->path,
                c->unknown_actions, c->unknown_names);
  }
  if (!rc && c->dropped_fields &&
      store_writer_stat(w, "dropped_entry_fields", "data_loss", (int64_t)c->dropped_fields, c->dropped_names))
    rc = store_fail_at(st);
  if (!rc && ann_dropped) {
    snprintf(detail, sizeof detail, "only the first %d external annotations are kept", SNAP_MAX_ANNOTATIONS);
    if (store_writer_stat(w, "external_annotations_dropped", "data_loss", (int64_t)ann_dropped, detail))
      rc = store_fail_at(st);
  }
  if (!rc && j->dropped_segments) {
    snprintf(detail, sizeof detail, "segments of devices without trace entries: %s", j->dropped_devices);
    if (store_writer_stat(w, "segments_of_other_devices", "data_loss", (int64_t)j->dropped_segments, detail))
      rc = store_fail_at(st);
  }
  if (!rc && priv &&
      store_writer_stat(w, "private_pool_segments", "warning", (int64_t)priv,
                        "final segments in private (CUDA graph) memory pools"))
    rc = store_fail_at(st);
  if (!rc) {
    int64_t id = store_writer_trace_id(w);
    rc = import_finish_trace(ic, w, name);
    w = NULL;
    /* how the categories were decided: the notes the import driver's pass would leave */
    if (!rc && categorize_note(ic->s, id, count, bytes)) rc = store_fail_at(st);
  }
  if (w) store_writer_abort(w);
  free(sc.cat);
  free(pre);
  free(name);
  free(attrs);
  free(settings);
  return rc;
}

/* ---- the whole file --------------------------------------------------------------------- */

static ssize_t read_input(void *arg, void *buf, size_t n) {
  snap *st = arg;
  ssize_t r = input_read(st->ic->in, buf, n);
  if (r < 0) snprintf(st->read_err, sizeof st->read_err, "%s", input_error(st->ic->in));
  return r;
}

static FILE *spool_file(snap *st) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = P_tmpdir;
  char path[4096];
  snprintf(path, sizeof path, "%s/memplay-spool-XXXXXX", dir);
  int fd = mkstemp(path);
  if (fd < 0) {
    import_error(st->ic, "cannot import '%s': cannot create a spool file in '%s': %s", st->ic->path, dir,
                 strerror(errno));
    return NULL;
  }
  unlink(path);
  FILE *f = fdopen(fd, "w+b");
  if (!f) {
    close(fd);
    import_error(st->ic, "cannot import '%s': cannot open the spool file: %s", st->ic->path, strerror(errno));
    return NULL;
  }
  return f;
}

/* After the pickle is read: its structure, then one trace per device with entries. */
static int finish(snap *st, pk_val root) {
  import_ctx *ic = st->ic;
  place pl = PLACE(st, where(st, root), NULL);
  if (root.type != PK_DICT) {
    if (root.type == PK_LIST)
      return bad(&pl, NULL,
                 "the pickle holds a list, not a memory snapshot (torch.cuda.memory._dump_snapshot() writes a dict "
                 "with 'segments' and 'device_traces'; a list of segments has no trace to import)");
    return bad(&pl, NULL, "the pickle holds %s, not a memory snapshot (a dict with 'segments' and 'device_traces')",
               type_of(root));
  }
  const pk_val *traces = pk_dict_get(root.u.o, "device_traces"), *segs = pk_dict_get(root.u.o, "segments");
  if (!traces && !segs)
    return bad(&pl, NULL, "the pickle holds a dict without 'segments' and 'device_traces', not a memory snapshot");
  pl.what = "the snapshot";
  if (!traces) {
    if (st->ncand) {
      pl.byte = st->cands[0].offset;
      return bad(&pl, NULL, "a list of trace entries that is not in 'device_traces'");
    }
    return bad(&pl, "device_traces", "is missing: the snapshot has no trace (record one with "
                                     "torch.cuda.memory._record_memory_history() before dumping)");
  }
  pl.byte = where(st, *traces);
  if (traces->type != PK_LIST) return bad(&pl, "device_traces", "must be a list, not %s", type_of(*traces));
  pk_obj *tl = traces->u.o;
  size_t ndev = tl->len;
  if (ndev > 32768) return bad(&pl, "device_traces", "has %zu devices", ndev);
  for (size_t i = 0; i < ndev; i++) {
    pk_val dv = tl->items[i];
    place dp = PLACE(st, where(st, dv), "device_traces[%llu]");
    dp.a = i;
    if (dv.type != PK_LIST) return bad(&dp, NULL, "is %s, not a list of trace entries", type_of(dv));
    pk_obj *l = dv.u.o;
    if (AUX_KIND(l->aux) == AUX_CAND) {
      snap_cand *c = &st->cands[AUX_VALUE(l->aux)];
      if (c->device >= 0) return bad(&dp, NULL, "is the same list as device_traces[%d]", c->device);
      c->device = (int)i;
    } else if (l->len) {
      pk_val e = l->items[0];
      dp.byte = where(st, e);
      return bad(&dp, NULL, "holds %s, not a trace entry (a dict with 'action')", type_of(e));
    }
  }
  for (size_t i = 0; i < st->ncand; i++)
    if (st->cands[i].device < 0) {
      pl.byte = st->cands[i].offset;
      return bad(&pl, NULL, "a list of trace entries that is not in 'device_traces'");
    }
  if (check_segments(st, segs)) return -1;
  const pk_val *settings = pk_dict_get(root.u.o, "allocator_settings");
  const pk_val *ann = pk_dict_get(root.u.o, "external_annotations");
  if (settings && settings->type != PK_DICT && settings->type != PK_NONE) {
    pl.byte = where(st, *settings);
    return bad(&pl, "allocator_settings", "must be a dict, not %s", type_of(*settings));
  }
  if (ann && ann->type != PK_LIST && ann->type != PK_NONE) {
    pl.byte = where(st, *ann);
    return bad(&pl, "external_annotations", "must be a list, not %s", type_of(*ann));
  }

  /* Devices with entries, in device order. */
  size_t with_entries = 0;
  snap_cand **by_dev = sim_xcalloc(ndev + 1, sizeof *by_dev);
  for (size_t i = 0; i < st->ncand; i++) {
    by_dev[st->cands[i].device] = &st->cands[i];
    with_entries++;
  }
  if (!with_entries) {
    free(by_dev);
    pl.byte = where(st, *traces);
    return bad(&pl, "device_traces", "has no trace entries: record them with "
                                     "torch.cuda.memory._record_memory_history() before dumping");
  }
  /* Final segments of devices that have no trace cannot be stored anywhere. */
  char dropped[128] = "";
  uint64_t ndropped = 0;
  for (size_t i = 0; i < st->nsegs; i++) {
    int d = st->segs[i].s.device;
    if ((size_t)d < ndev && by_dev[d]) continue;
    ndropped++;
    char num[16];
    snprintf(num, sizeof num, "%d", d);
    add_name(dropped, sizeof dropped, num, strlen(num));
  }
  if (ndropped)
    import_warn(ic, "'%s': %" PRIu64 " final segment%s of device%s %s, which %s no trace entries, %s not imported",
                ic->path, ndropped, ndropped == 1 ? "" : "s", strchr(dropped, ',') ? "s" : "", dropped,
                strchr(dropped, ',') ? "have" : "has", ndropped == 1 ? "is" : "are");
  int rc = 0;
  for (size_t d = 0; d < ndev && !rc; d++) {
    if (!by_dev[d]) continue;
    trace_job j = {by_dev[d], (int)d, with_entries > 1, settings, ann, ndev, dropped, ndropped};
    rc = write_trace(st, &j);
  }
  free(by_dev);
  return rc;
}

static int snap_import(import_ctx *ic) {
  snap *st = sim_xcalloc(1, sizeof *st);
  st->ic = ic;
  sim_map_init(&st->fmap);
  sim_map_init(&st->smap);
  sim_map_init(&st->stack_flags);
  int rc = -1;
  const unsigned char *head;
  size_t n = input_peek(ic->in, &head);
  if (n < 2 || head[0] != 0x80 || head[1] < 2 || head[1] > 5) {
    if (n >= 2 && head[0] == 0x80)
      import_error(ic, "cannot import '%s': byte 1: pickle protocol %d; memory snapshots are protocol 2 to 5",
                   ic->path, head[1]);
    else
      import_error(ic, "cannot import '%s': byte 0: not a pickle of protocol 2 to 5 (no PROTO opcode); "
                       "torch.cuda.memory._dump_snapshot() writes one",
                   ic->path);
    goto out;
  }
  st->sp = sim_xcalloc(1, sizeof *st->sp);
  st->sp->prev_cand = UINT32_MAX;
  if (!(st->sp->f = spool_file(st))) goto out;
  st->p = pickle_new(read_input, st, NULL);
  if (!st->p) {
    import_error(ic, "cannot import '%s': out of memory", ic->path);
    goto out;
  }
  if (!input_is_gzip(ic->in)) pickle_set_size(st->p, input_file_size(ic->in));
  pickle_set_consumer(st->p, on_item, st);
  pk_val root;
  int lrc = pickle_load(st->p, &root);
  if (!lrc && (spool_flush(st) || fflush(st->sp->f))) lrc = -1;
  if (lrc || finish(st, root)) {
    if (ic->err[0]) goto out;
    if (st->read_err[0]) import_error(ic, "%s", st->read_err); /* names the file and the place */
    else import_error(ic, "cannot import '%s': %s", ic->path, pickle_error(st->p));
    goto out;
  }
  rc = 0;
out:
  for (size_t i = 0; i < st->ncand; i++) {
    sim_map_release(&st->cands[i].addrs);
    sim_map_release(&st->cands[i].segs);
    sim_map_release(&st->cands[i].pages);
    free(st->cands[i].pre);
  }
  free(st->cands);
  pickle_free(st->p);
  if (st->sp && st->sp->f) fclose(st->sp->f);
  free(st->sp);
  sim_map_release(&st->fmap);
  sim_map_release(&st->smap);
  sim_map_release(&st->stack_flags);
  free(st->frames);
  free(st->stacks);
  free(st->words);
  free(st->tmp);
  free(st->sf);
  free(st->segs);
  free(st->blocks);
  free(st);
  return rc;
}

/* A pickle of protocol 2 to 5 whose first bytes name a snapshot's keys; any such pickle is ours
 * to read (and to explain when it is not a snapshot). */
static int snap_detect(const unsigned char *head, size_t n, const char *path) {
  (void)path;
  if (n < 2 || head[0] != 0x80 || head[1] < 2 || head[1] > 5) return 0;
  if (memmem(head, n, "segments", 8) || memmem(head, n, "device_traces", 13)) return 95;
  return 30;
}

const importer import_pytorch_snapshot = {
  .name = "pytorch_snapshot",
  .summary = "PyTorch memory snapshots from torch.cuda.memory._dump_snapshot() (pickle, read without running it)",
  .detect = snap_detect,
  .import = snap_import,
};
