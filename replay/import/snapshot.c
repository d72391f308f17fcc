/* import_snapshot.c: PyTorch memory snapshots (torch.cuda.memory._dump_snapshot() pickles), read without Python. */
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "categorize.h"
#include "importer.h"
#include "io/jsonw.h"
#include "io/pickle.h"

/*
 * The pickle is read once, by the safe unpickler (pickle.h), which hands over every trace entry
 * as soon as it is complete. An entry is checked, its call stack interned, and it goes straight
 * into its device's trace: requests as events (the store's writer thread inserts them while the
 * unpickler reads on), recorded allocator actions and extra fields as rows of their own; the
 * unpickler then drops it. The category rules (categorize.h) see each event as it is written and
 * set each allocation's category while it still waits to be inserted, or when the trace ends.
 * Segments are taken the same way. What stays in memory is the final state (segments and
 * blocks), the memo's shared frames and strings, and per device the addresses seen, to rebuild
 * the blocks live before a ring-buffer window. Those come first in the trace but are known only
 * at its end, so a trace leaves room before its events (store_writer_leave_room) and puts them
 * there when the pickle is read (store_writer_prepend); then come the final segments and blocks
 * and the import notes. Which device a list of entries belongs to is known only from where
 * device_traces holds it: a trace is written for the device it most likely is and moved when
 * device_traces says otherwise. docs/formats.md describes what is kept.
 */

#define SNAP_MAX_ANNOTATIONS 10000        /* external annotations kept per trace (in attrs) */
#define SNAP_STACK_CACHE_WORDS (1u << 24) /* frame indices held by the call-stack cache */
#define SNAP_MAX_FRAMES (1u << 22)        /* distinct frames before the caches start over */
#define SNAP_JSON_DEPTH 32
#define SNAP_MAX_DEVICES 32768

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

/* An address's history within one device's trace. */
enum { ADDR_ALLOCATED = 1, ADDR_FREED_FIRST = 2 };

typedef struct pre_block {
  uint64_t addr, size;
  int64_t stream, stack;
  uint8_t cat; /* its category | cat_source << 4, as the rules decide it */
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
  store_writer *w;   /* its trace, written as the entries come */
  int guess;         /* the device its events are written for until device_traces says */
  int64_t last_seq;  /* seq of its latest event, -1 before the first */
  categorizer *cz;   /* the category rules, fed its events as they are written */
  categorize_tally tally; /* its allocations by how their category was decided */
  sim_map addrs;     /* address -> ADDR_* bits | pre index << 2 */
  pre_block *pre;    /* freed before any allocation */
  size_t npre, precap;
  sim_map segs;      /* segment addresses created by the trace (segment_alloc) */
  sim_map pages;     /* 2 MiB pages of expandable segments mapped by the trace (segment_map) */
  uint64_t seg_gone; /* segment_free/unmap of memory the trace did not create */
  uint64_t burst, burst_bytes; /* segment_free/unmap entries since the last request or segment made */
  int64_t burst_ts, burst_stream, burst_stack;
  uint64_t empty_caches; /* empty_cache events written */
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
  yajl_gen arg; /* an extra field's value as JSON */
  snap_cand **cands; /* each list of trace entries, in file order */
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

/* The low 64 bits of a big int (little-endian two's complement), and whether it fits in 64 unsigned
 * bits (2^63 to 2^64-1: a C++ size_t or pointer written by Python as an int). */
static int bigint_low64(const pk_val *v, uint64_t *low) {
  const pk_obj *o = v->u.o;
  uint64_t x = 0;
  for (size_t i = 0; i < o->len && i < 8; i++) x |= (uint64_t)(unsigned char)o->data[i] << (8 * i);
  *low = x;
  int fits = o->len <= 9 && !(o->data[o->len - 1] & 0x80);
  for (size_t i = 8; i < o->len && fits; i++) fits = o->data[i] == 0;
  return fits;
}

/* A metadata int (a frame's line number, a stream handle): never a reason to refuse the file. Beyond
 * int64 it keeps its bits when it fits in 64 unsigned bits (a handle stays distinct from every
 * other), and is otherwise `unknown`. Other types are still errors. */
static int get_meta_i64(const place *pl, const pk_val *v, const char *field, int64_t unknown, int64_t *out) {
  if (v && v->type == PK_BIGINT) {
    uint64_t low;
    *out = bigint_low64(v, &low) ? (int64_t)low : unknown;
    return 0;
  }
  return get_i64(pl, v, field, 0, out);
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
      get_meta_i64(&fp, pk_dict_get(d, "line"), "line", 0, &line))
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

static unsigned stack_flags_of(const snap *st, int64_t stack) {
  const uint64_t *f = stack > 0 ? sim_map_get((sim_map *)&st->stack_flags, (uint64_t)stack) : NULL;
  return f ? (unsigned)(*f - 1) : 0;
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

/* A block live before the window as an event: the rules know it by seq -1 - its index among
 * them until it is written. */
static void pre_event(const snap_cand *c, size_t i, int device, sim_event *ev) {
  const pre_block *b = &c->pre[i];
  device_event(ev, SIM_EV_ALLOC, c->first_ts, b->addr, b->size, b->stream, b->stack, device);
  ev->flags = SIM_EVF_PREEXISTING;
  ev->seq = -1 - (int64_t)i;
}

/* The rules decided an allocation's category: a block live before the window keeps it until it
 * is written; any other allocation has it set in the store. */
static int cand_decided(void *arg, int64_t seq, int category, int cat_source) {
  snap_cand *c = arg;
  if (seq < 0) {
    if ((uint64_t)(-1 - seq) >= c->npre) return -1;
    c->pre[-1 - seq].cat = (uint8_t)((category & 15) | (cat_source & 15) << 4);
    return 0;
  }
  categorize_tally_decided(&c->tally, seq, cat_source);
  store_writer_set_category(c->w, seq, category, cat_source);
  return 0;
}

/* Feeds an event to the rules (a written allocation is counted, undecided until they decide). */
static int cand_feed(snap *st, snap_cand *c, const sim_event *ev) {
  if (ev->kind == SIM_EV_ALLOC && ev->seq >= 0) categorize_tally_alloc(&c->tally, ev);
  if (categorizer_event(c->cz, ev, stack_flags_of(st, ev->stack)))
    return pickle_fail(st->p, "cannot categorize the allocations");
  return 0;
}

static int store_failed(snap *st) { return pickle_fail(st->p, "%s", store_error(st->ic->s)); }

/* An extra field of the entry that made the trace's latest event. */
static int entry_arg(snap *st, snap_cand *c, int field, const char *text, size_t len) {
  if (c->last_seq < STORE_ROOM) return 0; /* follows no event */
  yajl_gen_clear(st->arg);
  yajl_gen_reset(st->arg, NULL);
  jsonw_strn(st->arg, text, len);
  if (store_writer_arg(c->w, c->last_seq, field_names[field], jsonw_text(st->arg, NULL))) return store_failed(st);
  return 0;
}

/* A trace entry's values, read and checked. */
typedef struct snap_entry {
  int action;
  uint64_t addr, size;
  int64_t stream, ts, stack, device_free;
  const char *cc, *um; /* compile_context, user_metadata */
} snap_entry;

/* The entry's fields by id; fields memplay does not know are counted and named. */
static inline void entry_fields(snap_cand *c, const pk_obj *d, const pk_val **f) {
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
}

/* The entry's action in *action: -1 for one memplay does not know (counted and named). */
static inline int entry_action(const place *pl, snap_cand *c, const pk_val *v, int *action) {
  if (!v) return bad(pl, "action", "is missing");
  if (v->type != PK_STR) return bad(pl, "action", "must be a str, not %s", type_of(*v));
  pk_obj *as = v->u.o;
  *action = (int)(str_class(as) >> 8 & 0xFF) - 1;
  if (*action < 0) {
    c->unknown_actions++;
    add_name(c->unknown_names, sizeof c->unknown_names, as->data, as->len);
  }
  return 0;
}

/* The entry's time: time_us, else the time of the entry before it. */
static inline int entry_time(const place *pl, snap_cand *c, const pk_val *v, int64_t *ts) {
  if (v && v->type != PK_NONE) {
    uint64_t us = 0;
    if (get_u64(pl, v, "time_us", 1, &us)) return -1;
    if (us > (uint64_t)INT64_MAX / 1000) return bad(pl, "time_us", "is out of range (%" PRIu64 ")", us);
    *ts = (int64_t)us * 1000;
    c->has_time = 1;
  } else {
    *ts = c->last_ts;
    c->without_time++;
  }
  if (!c->have_first) {
    c->first_ts = *ts;
    c->have_first = 1;
  }
  c->last_ts = *ts;
  return 0;
}

/* The entry's numbers, time, call stack and texts. */
static inline int entry_values(snap *st, snap_cand *c, const place *pl, const pk_val **f, snap_entry *e) {
  int action = e->action;
  int needs_addr = action != A_OOM && action != A_SNAPSHOT;
  if (action != A_OOM && get_u64(pl, f[F_ADDR], "addr", needs_addr, &e->addr)) return -1;
  if (get_u64(pl, f[F_SIZE], "size", 1, &e->size) || get_meta_i64(pl, f[F_STREAM], "stream", 0, &e->stream)) return -1;
  if (action == A_OOM && f[F_DEVICE_FREE]) {
    uint64_t df = 0;
    if (get_u64(pl, f[F_DEVICE_FREE], "device_free", 0, &df)) return -1;
    e->device_free = df > INT64_MAX ? INT64_MAX : (int64_t)df;
  }
  if (entry_time(pl, c, f[F_TIME_US], &e->ts)) return -1;
  if (frames_stack(st, pl, f[F_FRAMES], &e->stack)) return -1;
  /* The memo now holds the stack's id where it held the frames list, so the list can go. */
  if (f[F_FRAMES] && f[F_FRAMES]->type == PK_LIST) pickle_memo_replace(st->p, *f[F_FRAMES], e->stack);
  if (get_str(pl, f[F_COMPILE_CONTEXT], "compile_context", 0, &e->cc) ||
      get_str(pl, f[F_USER_METADATA], "user_metadata", 0, &e->um))
    return -1;
  return 0;
}

/* A burst of releases (segment_free, segment_unmap) that no oom entry follows is the program's
 * torch.cuda.empty_cache(), or the releases of a request's retry that then got its memory
 * (docs/formats.md): an empty_cache event (size: the bytes the burst released) is written where it
 * ends, before the request or the segment that follows it (its stream and call stack: the last
 * release's). A burst that an oom entry follows is
 * the failing request's own retry and writes nothing. */
static int burst_end(snap *st, snap_cand *c, int is_oom) {
  if (!c->burst) return 0;
  uint64_t bytes = c->burst_bytes;
  c->burst = c->burst_bytes = 0;
  if (is_oom) return 0;
  sim_event ev;
  device_event(&ev, SIM_EV_EMPTY_CACHE, c->burst_ts, 0, bytes, c->burst_stream, c->burst_stack, c->guess);
  ev.mem = SIM_MEM_UNKNOWN;
  if (store_writer_event(c->w, &ev)) return store_failed(st);
  c->last_seq = ev.seq;
  c->empty_caches++;
  return 0;
}

/* A request: an event of the trace. */
static inline int entry_request(snap *st, snap_cand *c, const snap_entry *e) {
  if (burst_end(st, c, 0)) return -1;
  /* What the address was before this entry: freed first, it was live before the window, and
   * the rules learn of it now (as made at the trace's start). */
  int existed;
  uint64_t *s = sim_map_put(&c->addrs, e->addr, &existed);
  if (e->action == A_ALLOC) {
    *s |= ADDR_ALLOCATED;
  } else if (!existed) {
    sim_grow((void **)&c->pre, &c->precap, c->npre + 1, sizeof *c->pre);
    c->pre[c->npre] = (pre_block){e->addr, e->size, e->stream, 0, 0};
    *s = ADDR_FREED_FIRST | (uint64_t)c->npre << 2;
    sim_event pe;
    pre_event(c, c->npre++, c->guess, &pe);
    if (cand_feed(st, c, &pe)) return -1;
  }
  static const uint8_t kinds[] = {SIM_EV_ALLOC, SIM_EV_FREE_REQUESTED, SIM_EV_FREE_COMPLETED};
  sim_event ev;
  device_event(&ev, kinds[e->action], e->ts, e->addr, e->size, e->stream, e->stack, c->guess);
  if (store_writer_event(c->w, &ev)) return store_failed(st);
  c->last_seq = ev.seq;
  return cand_feed(st, c, &ev);
}

/* What the recorded allocator did: a row of its own, before the trace's next event. */
static inline int entry_recorded(snap *st, snap_cand *c, const snap_entry *e) {
  int action = e->action;
  uint64_t addr = e->addr, size = e->size;
  if ((action == A_SEGMENT_ALLOC || action == A_SEGMENT_MAP || action == A_OOM) && burst_end(st, c, action == A_OOM))
    return -1;
  if (action == A_SEGMENT_ALLOC) {
    *sim_map_put(&c->segs, addr, NULL) = 1;
  } else if (action == A_SEGMENT_FREE && !sim_map_get(&c->segs, addr)) {
    c->seg_gone++;
  } else if (action == A_SEGMENT_MAP) {
    /* expandable segments map and unmap page ranges, not whole segments */
    for (uint64_t pg = addr >> 21, n = 0; pg <= (addr + (size ? size - 1 : 0)) >> 21 && n < 65536; pg++, n++)
      *sim_map_put(&c->pages, pg, NULL) = 1;
  } else if (action == A_SEGMENT_UNMAP && !sim_map_get(&c->pages, addr >> 21)) {
    c->seg_gone++;
  }
  store_recorded rec = {.before_seq = c->last_seq + 1, .ts = e->ts, .action = action_names[action],
                        .device = c->guess, .stream = e->stream, .addr = addr, .size = size, .allocated = -1,
                        .reserved = -1, .device_free = e->device_free, .stack = e->stack};
  if (store_writer_recorded(c->w, &rec)) return store_failed(st);
  if (action == A_SEGMENT_FREE || action == A_SEGMENT_UNMAP) {
    c->burst++;
    c->burst_bytes += size;
    c->burst_ts = e->ts;
    c->burst_stream = e->stream; /* the device's whole cache goes: the stream only says whose release came last */
    c->burst_stack = e->stack;   /* where the program called empty_cache() */
  }
  return 0;
}

/* compile_context and user_metadata, as args of the trace's latest event. */
static inline int entry_extras(snap *st, snap_cand *c, const pk_val **f, const snap_entry *e) {
  const char *cc = e->cc, *um = e->um;
  if (cc && strcmp(cc, "N/A") && *cc && entry_arg(st, c, F_COMPILE_CONTEXT, cc, f[F_COMPILE_CONTEXT]->u.o->len))
    return -1;
  if (um && *um && entry_arg(st, c, F_USER_METADATA, um, f[F_USER_METADATA]->u.o->len)) return -1;
  return 0;
}

static int take_entry(snap *st, snap_cand *c, uint64_t index, pk_val item) {
  place pl = PLACE(st, where(st, item), "trace entry %llu");
  pl.a = index;
  if (item.type != PK_DICT) return bad(&pl, NULL, "is %s, not a dict", type_of(item));
  const pk_val *f[F__COUNT] = {0};
  entry_fields(c, item.u.o, f);
  c->entries++;
  snap_entry e = {.device_free = -1};
  if (entry_action(&pl, c, f[F_ACTION], &e.action)) return -1;
  if (e.action < 0) return 0;
  if (entry_values(st, c, &pl, f, &e)) return -1;
  if (A_IS_REQUEST(e.action) ? entry_request(st, c, &e) : entry_recorded(st, c, &e)) return -1;
  c->by_action[e.action]++;
  return entry_extras(st, c, f, &e);
}

/* The device a new list of entries most likely belongs to: the k-th of the devices the final
 * state has segments on (they come first in a snapshot), else the k-th device. */
static int guess_device(const snap *st, size_t k) {
  int devs[64];
  size_t n = 0;
  for (size_t i = 0; i < st->nsegs && n < 64; i++) {
    int d = st->segs[i].s.device, seen = 0;
    for (size_t j = 0; j < n && !seen; j++) seen = devs[j] == d;
    if (!seen) devs[n++] = d;
  }
  if (k >= n) return k > 32767 ? 32767 : (int)k;
  for (size_t i = 1; i < n; i++) /* a few devices: insertion sort */
    for (size_t j = i; j > 0 && devs[j - 1] > devs[j]; j--) {
      int t = devs[j];
      devs[j] = devs[j - 1];
      devs[j - 1] = t;
    }
  return devs[k];
}

/* A new list of trace entries: its trace begins (named when the pickle is read). */
static int cand_begin(snap *st, snap_cand *c) {
  static const int64_t no_names[4] = {0, 0, 0, 0}; /* snapshots have no phase markers */
  import_ctx *ic = st->ic;
  c->guess = guess_device(st, st->ncand - 1);
  c->last_seq = STORE_ROOM - 1;
  sim_map_init(&c->addrs);
  sim_map_init(&c->segs);
  sim_map_init(&c->pages);
  sim_map_init(&c->tally.pending);
  c->cz = categorizer_new(no_names, cand_decided, c);
  char *tmp = store_unique_name(ic->s, "(snapshot being imported)");
  store_trace meta = {.name = tmp, .source_format = (char *)"pytorch_snapshot", .source_file = (char *)ic->path,
                      .device_index = c->guess, .framework = (char *)"pytorch", .allocator = (char *)"torch"};
  int rc = !tmp || store_writer_begin(ic->s, &meta, &c->w) || store_writer_leave_room(c->w);
  free(tmp);
  return rc ? store_failed(st) : 0;
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
    if (st->ncand >= SNAP_MAX_DEVICES)
      return pickle_fail(st->p, "byte %llu: more than %d lists of trace entries (a snapshot has one per device)",
                         (unsigned long long)list->offset, SNAP_MAX_DEVICES);
    sim_grow((void **)&st->cands, &st->candcap, st->ncand + 1, sizeof *st->cands);
    snap_cand *c = st->cands[st->ncand++] = sim_xcalloc(1, sizeof *c);
    c->offset = list->offset;
    c->device = -1;
    list->aux = AUX_MAKE(AUX_CAND, st->ncand - 1);
    if (cand_begin(st, c)) return -1;
  }
  snap_cand *c = st->cands[AUX_VALUE(list->aux)];
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
      get_meta_i64(&pl, pk_dict_get(d, "stream"), "stream", 0, &g.s.stream) ||
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

/* What a device's trace holds beyond its entries, counted as it is written. */
typedef struct trace_shape {
  size_t s0, s1;      /* the device's final segments: st->segs[s0, s1) */
  size_t nblk;        /* their blocks */
  size_t priv;        /* of them in private pools */
  size_t npre;        /* blocks live before the first entry */
  size_t from_free;   /* of them, freed before any allocation */
  size_t from_final;  /* of them, live in the final state and never allocated */
  uint64_t seg_start; /* segments the trace did not create */
} trace_shape;

/* The device's final segments (sorted by device, then address). */
static void device_segments(const snap *st, int device, trace_shape *sh) {
  size_t s0 = 0, s1;
  while (s0 < st->nsegs && st->segs[s0].s.device < device) s0++;
  for (s1 = s0; s1 < st->nsegs && st->segs[s1].s.device == device;) s1++;
  sh->s0 = s0;
  sh->s1 = s1;
}

/* Blocks live before the first entry: freed before any allocation in the trace (the rules know
 * them already), and blocks of the final state that the trace never allocated
 * (pytorch-caching-allocator.md, section 2). The rules then decide what is still live. */
static int rebuild_preexisting(snap *st, const trace_job *j, trace_shape *sh) {
  snap_cand *c = j->c;
  int rc = 0;
  sh->nblk = 0;
  sh->from_free = c->npre;
  sh->priv = 0;
  sh->seg_start = c->seg_gone;
  for (size_t i = sh->s0; i < sh->s1 && !rc; i++) {
    const seg_rec *g = &st->segs[i];
    if (!sim_map_get(g->s.expandable ? &c->pages : &c->segs, g->s.expandable ? g->s.address >> 21 : g->s.address))
      sh->seg_start++;
    sh->priv += g->private_pool;
    for (size_t b = g->first_block; b < g->first_block + g->nblocks && !rc; b++) {
      const store_block *bl = &st->blocks[b];
      sh->nblk++;
      if (bl->state[0] != 'a' || sim_map_get(&c->addrs, bl->address)) continue;
      sim_grow((void **)&c->pre, &c->precap, c->npre + 1, sizeof *c->pre);
      uint64_t size = bl->requested_size ? bl->requested_size : bl->size;
      c->pre[c->npre] = (pre_block){bl->address, size, g->s.stream, bl->stack, 0};
      sim_event pe;
      pre_event(c, c->npre++, j->device, &pe);
      rc = cand_feed(st, c, &pe);
    }
  }
  sh->npre = c->npre;
  sh->from_final = sh->npre - sh->from_free;
  if (!rc && categorizer_finish(c->cz)) rc = pickle_fail(st->p, "cannot categorize the allocations");
  return rc ? -1 : 0;
}

/* The rebuilt blocks go before the trace's first event, in address order, and the trace moves
 * to its device if it was written for another. */
static int prepend_preexisting(snap *st, const trace_job *j, size_t npre) {
  snap_cand *c = j->c;
  store_writer *w = c->w;
  if (npre) qsort(c->pre, npre, sizeof *c->pre, cmp_pre);
  if (j->device != c->guess &&
      (store_writer_set_device(w, j->device) || store_writer_set_int(w, "device_index", j->device)))
    return store_fail_at(st);
  for (size_t i = npre; i-- > 0;) {
    sim_event ev;
    pre_event(c, i, j->device, &ev);
    ev.category = c->pre[i].cat & 15;
    ev.cat_source = c->pre[i].cat >> 4;
    if (store_writer_prepend(w, &ev)) return store_fail_at(st);
    categorize_tally_alloc(&c->tally, &ev);
  }
  return 0;
}

static int write_final_state(snap *st, store_writer *w, const trace_shape *sh) {
  for (size_t i = sh->s0; i < sh->s1; i++) {
    const seg_rec *g = &st->segs[i];
    if (store_writer_segment(w, &g->s)) return store_fail_at(st);
    for (size_t b = g->first_block; b < g->first_block + g->nblocks; b++)
      if (store_writer_block(w, &st->blocks[b])) return store_fail_at(st);
  }
  return 0;
}

/* Import notes on what the trace's entries left out or left open. */
static int write_entry_notes(snap *st, const trace_job *j, const trace_shape *sh) {
  import_ctx *ic = st->ic;
  snap_cand *c = j->c;
  store_writer *w = c->w;
  char detail[256];
  if (sh->npre) {
    snprintf(detail, sizeof detail,
             "%zu live in the final state and never allocated in the trace, %zu freed before any allocation",
             sh->from_final, sh->from_free);
    if (store_writer_stat(w, "preexisting_blocks", "info", (int64_t)sh->npre, detail)) return store_fail_at(st);
  }
  if (c->without_time &&
      store_writer_stat(w, "entries_without_time", "info", (int64_t)c->without_time,
                        c->has_time ? "these entries take the time of the entry before them"
                                    : "the snapshot has no time_us: every timestamp is 0"))
    return store_fail_at(st);
  if (c->unknown_actions) {
    if (store_writer_stat(w, "unknown_actions", "warning", (int64_t)c->unknown_actions, c->unknown_names))
      return store_fail_at(st);
    import_warn(ic, "'%s': %" PRIu64 " trace entries with actions memplay does not know were skipped (%s)", ic->path,
                c->unknown_actions, c->unknown_names);
  }
  if (c->dropped_fields &&
      store_writer_stat(w, "dropped_entry_fields", "data_loss", (int64_t)c->dropped_fields, c->dropped_names))
    return store_fail_at(st);
  return 0;
}

/* Import notes on what the file held that the trace does not keep: -1 when one cannot be stored. */
static int write_loss_notes(const trace_job *j, uint64_t ann_dropped, size_t priv) {
  store_writer *w = j->c->w;
  char detail[256];
  int rc = 0;
  if (ann_dropped) {
    snprintf(detail, sizeof detail, "only the first %d external annotations are kept", SNAP_MAX_ANNOTATIONS);
    if (store_writer_stat(w, "external_annotations_dropped", "data_loss", (int64_t)ann_dropped, detail)) rc = -1;
  }
  if (!rc && j->dropped_segments) {
    snprintf(detail, sizeof detail, "segments of devices without trace entries: %s", j->dropped_devices);
    if (store_writer_stat(w, "segments_of_other_devices", "data_loss", (int64_t)j->dropped_segments, detail)) rc = -1;
  }
  if (!rc && priv &&
      store_writer_stat(w, "private_pool_segments", "warning", (int64_t)priv,
                        "final segments in private (CUDA graph) memory pools"))
    rc = -1;
  return rc;
}

/* What the whole file says about the trace, and its name; then the trace is finished (rc: what
 * the steps before left, -1 to fail it). */
static int name_and_finish(snap *st, const trace_job *j, const char *attrs, int rc) {
  import_ctx *ic = st->ic;
  snap_cand *c = j->c;
  store_writer *w = c->w;
  char *settings = NULL;
  if (j->settings && j->settings->type != PK_NONE) {
    yajl_gen g = jsonw_mem();
    json_value(g, *j->settings, 0);
    settings = strdup(jsonw_text(g, NULL));
    yajl_gen_free(g);
  }
  char suffix[32];
  snprintf(suffix, sizeof suffix, "-dev%d", j->device);
  char *name = rc ? NULL : import_trace_name(ic, j->multi ? suffix : NULL);
  if (!rc && (!name || store_writer_set(w, "name", name) || store_writer_set(w, "attrs", attrs) ||
              (settings && store_writer_set(w, "allocator_settings", settings))))
    rc = -1;
  if (rc) {
    store_fail_at(st);
  } else {
    int64_t id = store_writer_trace_id(w);
    c->w = NULL; /* import_finish_trace frees it, whatever happens */
    rc = import_finish_trace(ic, w, name);
    /* how the categories were decided: the notes the import driver's pass would leave */
    if (!rc && categorize_note(ic->s, id, c->tally.count, c->tally.bytes)) rc = store_fail_at(st);
  }
  free(name);
  free(settings);
  return rc;
}

static int write_trace(snap *st, const trace_job *j) {
  trace_shape sh;
  device_segments(st, j->device, &sh);
  if (burst_end(st, j->c, 0)) return -1; /* releases at the trace's end */
  if (rebuild_preexisting(st, j, &sh) || prepend_preexisting(st, j, sh.npre) || write_final_state(st, j->c->w, &sh) ||
      write_entry_notes(st, j, &sh))
    return -1;
  uint64_t ann_dropped = 0;
  char *attrs = trace_attrs(st, j, sh.s1 - sh.s0, sh.nblk, sh.npre, sh.from_final, sh.seg_start, &ann_dropped);
  int rc = write_loss_notes(j, ann_dropped, sh.priv);
  rc = name_and_finish(st, j, attrs, rc);
  free(attrs);
  return rc;
}

/* ---- the whole file --------------------------------------------------------------------- */

static ssize_t read_input(void *arg, void *buf, size_t n) {
  snap *st = arg;
  ssize_t r = input_read(st->ic->in, buf, n);
  if (r < 0) snprintf(st->read_err, sizeof st->read_err, "%s", input_error(st->ic->in));
  return r;
}

/* The root is a snapshot: a dict with 'device_traces' (and 'segments'). */
static int check_root(snap *st, pk_val root, place *pl, const pk_val **traces, const pk_val **segs) {
  if (root.type != PK_DICT) {
    if (root.type == PK_LIST)
      return bad(pl, NULL,
                 "the pickle holds a list, not a memory snapshot (torch.cuda.memory._dump_snapshot() writes a dict "
                 "with 'segments' and 'device_traces'; a list of segments has no trace to import)");
    return bad(pl, NULL, "the pickle holds %s, not a memory snapshot (a dict with 'segments' and 'device_traces')",
               type_of(root));
  }
  *traces = pk_dict_get(root.u.o, "device_traces");
  *segs = pk_dict_get(root.u.o, "segments");
  if (!*traces && !*segs)
    return bad(pl, NULL, "the pickle holds a dict without 'segments' and 'device_traces', not a memory snapshot");
  pl->what = "the snapshot";
  if (!*traces) {
    if (st->ncand) {
      pl->byte = st->cands[0]->offset;
      return bad(pl, NULL, "a list of trace entries that is not in 'device_traces'");
    }
    return bad(pl, "device_traces", "is missing: the snapshot has no trace (record one with "
                                    "torch.cuda.memory._record_memory_history() before dumping)");
  }
  pl->byte = where(st, **traces);
  if ((*traces)->type != PK_LIST) return bad(pl, "device_traces", "must be a list, not %s", type_of(**traces));
  return 0;
}

/* Each list of entries read learns its device from its place in device_traces; every one must
 * have a place there, and every list there must be one. */
static int match_devices(snap *st, place *pl, const pk_obj *tl) {
  size_t ndev = tl->len;
  if (ndev > SNAP_MAX_DEVICES) return bad(pl, "device_traces", "has %zu devices", ndev);
  for (size_t i = 0; i < ndev; i++) {
    pk_val dv = tl->items[i];
    place dp = PLACE(st, where(st, dv), "device_traces[%llu]");
    dp.a = i;
    if (dv.type != PK_LIST) return bad(&dp, NULL, "is %s, not a list of trace entries", type_of(dv));
    pk_obj *l = dv.u.o;
    if (AUX_KIND(l->aux) == AUX_CAND) {
      snap_cand *c = st->cands[AUX_VALUE(l->aux)];
      if (c->device >= 0) return bad(&dp, NULL, "is the same list as device_traces[%d]", c->device);
      c->device = (int)i;
    } else if (l->len) {
      pk_val e = l->items[0];
      dp.byte = where(st, e);
      return bad(&dp, NULL, "holds %s, not a trace entry (a dict with 'action')", type_of(e));
    }
  }
  for (size_t i = 0; i < st->ncand; i++)
    if (st->cands[i]->device < 0) {
      pl->byte = st->cands[i]->offset;
      return bad(pl, NULL, "a list of trace entries that is not in 'device_traces'");
    }
  return 0;
}

/* The segments, allocator_settings and external_annotations have the types a snapshot gives them. */
static int check_extras(snap *st, pk_val root, place *pl, const pk_val *segs, const pk_val **settings,
                        const pk_val **ann) {
  if (check_segments(st, segs)) return -1;
  *settings = pk_dict_get(root.u.o, "allocator_settings");
  *ann = pk_dict_get(root.u.o, "external_annotations");
  if (*settings && (*settings)->type != PK_DICT && (*settings)->type != PK_NONE) {
    pl->byte = where(st, **settings);
    return bad(pl, "allocator_settings", "must be a dict, not %s", type_of(**settings));
  }
  if (*ann && (*ann)->type != PK_LIST && (*ann)->type != PK_NONE) {
    pl->byte = where(st, **ann);
    return bad(pl, "external_annotations", "must be a list, not %s", type_of(**ann));
  }
  return 0;
}

/* Final segments of devices that have no trace cannot be stored anywhere: their devices go in
 * dropped ("1, 2"), and the user is told. The number of such segments. */
static uint64_t drop_traceless_segments(snap *st, size_t ndev, snap_cand *const *by_dev, char *dropped, size_t cap) {
  import_ctx *ic = st->ic;
  uint64_t ndropped = 0;
  for (size_t i = 0; i < st->nsegs; i++) {
    int d = st->segs[i].s.device;
    if ((size_t)d < ndev && by_dev[d]) continue;
    ndropped++;
    char num[16];
    snprintf(num, sizeof num, "%d", d);
    add_name(dropped, cap, num, strlen(num));
  }
  if (ndropped)
    import_warn(ic, "'%s': %" PRIu64 " final segment%s of device%s %s, which %s no trace entries, %s not imported",
                ic->path, ndropped, ndropped == 1 ? "" : "s", strchr(dropped, ',') ? "s" : "", dropped,
                strchr(dropped, ',') ? "have" : "has", ndropped == 1 ? "is" : "are");
  return ndropped;
}

/* After the pickle is read: its structure, then one trace per device with entries. */
static int finish(snap *st, pk_val root) {
  place pl = PLACE(st, where(st, root), NULL);
  const pk_val *traces = NULL, *segs = NULL, *settings = NULL, *ann = NULL;
  if (check_root(st, root, &pl, &traces, &segs) || match_devices(st, &pl, traces->u.o) ||
      check_extras(st, root, &pl, segs, &settings, &ann))
    return -1;
  size_t ndev = traces->u.o->len;

  /* Devices with entries, in device order. */
  size_t with_entries = 0;
  snap_cand **by_dev = sim_xcalloc(ndev + 1, sizeof *by_dev);
  for (size_t i = 0; i < st->ncand; i++) {
    by_dev[st->cands[i]->device] = st->cands[i];
    with_entries++;
  }
  if (!with_entries) {
    free(by_dev);
    pl.byte = where(st, *traces);
    return bad(&pl, "device_traces", "has no trace entries: record them with "
                                     "torch.cuda.memory._record_memory_history() before dumping");
  }
  char dropped[128] = "";
  uint64_t ndropped = drop_traceless_segments(st, ndev, by_dev, dropped, sizeof dropped);
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
  st->arg = jsonw_mem();
  st->p = pickle_new(read_input, st, NULL);
  if (!st->p) {
    import_error(ic, "cannot import '%s': out of memory", ic->path);
    goto out;
  }
  if (!input_is_gzip(ic->in)) pickle_set_size(st->p, input_file_size(ic->in));
  pickle_set_consumer(st->p, on_item, st);
  pk_val root;
  int lrc = pickle_load(st->p, &root);
  /* Every event is in: the writer threads stop, and the traces are finished one by one. */
  for (size_t i = 0; i < st->ncand && !lrc; i++)
    if (store_writer_flush(st->cands[i]->w)) lrc = store_failed(st);
  if (lrc || finish(st, root)) {
    if (ic->err[0]) goto out;
    if (st->read_err[0]) import_error(ic, "%s", st->read_err); /* names the file and the place */
    else import_error(ic, "cannot import '%s': %s", ic->path, pickle_error(st->p));
    goto out;
  }
  rc = 0;
out:
  for (size_t i = 0; i < st->ncand; i++) {
    snap_cand *c = st->cands[i];
    store_writer_abort(c->w); /* a trace left unfinished: the import fails and is rolled back */
    categorizer_free(c->cz);
    sim_map_release(&c->addrs);
    sim_map_release(&c->segs);
    sim_map_release(&c->pages);
    sim_map_release(&c->tally.pending);
    free(c->pre);
    free(c);
  }
  free(st->cands);
  pickle_free(st->p);
  if (st->arg) yajl_gen_free(st->arg);
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
