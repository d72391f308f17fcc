/* transform.h: derived traces: streaming transforms in C over a replay_source, built as a tree of nodes. */
#ifndef REPLAY_TRANSFORM_H
#define REPLAY_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "sim/hashmap.h"
#include "source.h"

/*
 * A derived trace is a tree: leaves open a base trace (a stored trace, events in memory);
 * inner nodes transform one input (scale sizes, drop, insert, ...) or merge two. Nodes are
 * immutable and reference-counted, so `t2 = t1:scale(...)` shares t1's whole chain and costs
 * nothing until it is replayed. Opening a node opens its inputs and stacks one small source
 * per transform: events stream through, nothing is copied (repeat keeps one block in memory).
 *
 * Sequence numbers: events leave a base with their recorded seq, and transforms keep it, so
 * filters and positions (seq ranges, lifetimes) always refer to the base trace. Events a
 * transform creates carry seq -1. When a chain changes the number or order of events, the
 * opened source numbers its output 0, 1, 2, ... at the end, exactly as the trace would be
 * numbered once materialized into the store.
 *
 * Addresses a transform invents (inserted events, repeated copies, the second input of a
 * merge) are kept apart from recorded ones by the high bits below.
 */
#define XF_ADDR_INSERTED (UINT64_C(1) << 63)
#define XF_ADDR_COPY (UINT64_C(1) << 62)
#define XF_ADDR_MERGED (UINT64_C(1) << 61)

#define XF_ERRLEN 512

/* ---- lifetimes: which allocations persist (the fallback when a trace has no categories) ---- */

/*
 * An allocation is persistent when it is live before the trace begins (SIM_EVF_PREEXISTING),
 * never freed in the trace, or freed in a later step than the one that made it (when events
 * carry steps); every other allocation is transient. Parameters, optimizer state and
 * gradients are persistent by this rule; activations, inputs and temporaries transient.
 */
typedef struct xf_lifetime {
  int refs;
  uint64_t nseq;  /* base events covered */
  uint64_t *bits; /* bit seq set: the allocation at seq is persistent */
  uint64_t persistent_allocs, transient_allocs;
  uint64_t persistent_bytes, transient_bytes; /* requested bytes over all allocations */
  uint64_t categorized_allocs;                /* allocations with a category other than unknown */
} xf_lifetime;

/* Reads src to its end. Returns a lifetime table (one reference), or NULL with a message. */
xf_lifetime *xf_lifetime_compute(replay_source *src, char *err, size_t errlen);
void xf_lifetime_ref(xf_lifetime *lt);
void xf_lifetime_unref(xf_lifetime *lt);
static inline int xf_lifetime_persistent(const xf_lifetime *lt, int64_t seq) {
  return seq >= 0 && (uint64_t)seq < lt->nseq && (lt->bits[seq >> 6] >> (seq & 63)) & 1;
}

/* ---- filters: which events a transform touches ------------------------------------------- */

enum { XF_LIFE_ANY = 0, XF_LIFE_PERSISTENT = 1, XF_LIFE_TRANSIENT = 2 };

/* Categories that lifetimes stand in for. */
#define XF_CATS_PERSISTENT ((1u << SIM_CAT_PARAMETER) | (1u << SIM_CAT_OPTIMIZER_STATE) | (1u << SIM_CAT_GRADIENT))
#define XF_CATS_TRANSIENT                                                                             \
  ((1u << SIM_CAT_ACTIVATION) | (1u << SIM_CAT_INPUT) | (1u << SIM_CAT_TEMPORARY) | (1u << SIM_CAT_WORKSPACE))

/*
 * Every criterion that is set must hold (an empty filter matches every event). Masks have a
 * bit per enumeration value. Categories: an event whose category is unknown matches when the
 * filter has a lifetime table and the allocation's lifetime class stands for one of the
 * wanted categories (unless the mask names `unknown` itself).
 */
typedef struct xf_filter {
  uint32_t kinds;       /* 1 << sim_event_kind */
  uint32_t categories;  /* 1 << sim_category */
  uint32_t mems, dirs;  /* 1 << sim_mem_kind, 1 << sim_copy_dir */
  uint32_t flags_all;   /* SIM_EVF_* bits that must all be set */
  uint32_t flags_none;  /* SIM_EVF_* bits that must all be clear */
  int lifetime;         /* XF_LIFE_* */
  xf_lifetime *lt;      /* for lifetime and the category fallback (a reference is held) */
  int has_stream;
  int64_t stream;
  int device;           /* -2: any */
  int32_t step_min, step_max;
  uint64_t size_min, size_max;
  int64_t seq_min, seq_max; /* base sequence numbers, inclusive */
  int64_t *sites;       /* sorted call stack ids (owned) */
  size_t nsites;
  int64_t *names;       /* sorted name ids (owned) */
  size_t nnames;
  int64_t *xsites;      /* sorted call stack ids that never match (owned) */
  size_t nxsites;
  int rest;             /* the criteria beyond kind, category and lifetime in use (bits; all until known) */
  /* the id sets as bitmaps, when their ids are small (made once a transform holds the filter) */
  uint64_t *sites_bits, *names_bits, *xsites_bits;
  uint64_t sites_nbits, names_nbits, xsites_nbits;
} xf_filter;

void xf_filter_init(xf_filter *f);
void xf_filter_release(xf_filter *f);
/* Deep copy (sites, names, the lifetime reference). */
void xf_filter_copy(xf_filter *dst, const xf_filter *src);
/* Sets the sorted id lists (copied). */
void xf_filter_set_sites(xf_filter *f, const int64_t *ids, size_t n);
void xf_filter_set_names(xf_filter *f, const int64_t *ids, size_t n);
void xf_filter_set_excluded_sites(xf_filter *f, const int64_t *ids, size_t n);
void xf_filter_set_lifetime(xf_filter *f, xf_lifetime *lt);
int xf_filter_match(const xf_filter *f, const sim_event *ev);
/* True when the filter has a criterion of its own (not an empty filter). */
int xf_filter_is_set(const xf_filter *f);

/* ---- kernel classes ---------------------------------------------------------------------- */

#define XF_KERNEL_CLASSES(X)                                                                                  \
  X(matmul)      /* GEMM/GEMV, cuBLAS/CUTLASS: tensor-core work */                                         \
  X(conv)        /* convolutions (cuDNN) */                                                                   \
  X(attention)   /* fused attention (flash, memory-efficient, fmha) */                                       \
  X(norm)        /* layer/batch/group/RMS norm */                                                             \
  X(softmax)     /* softmax and log-softmax */                                                                \
  X(reduction)   /* reductions (sum, mean, max, cross entropy) */                                             \
  X(elementwise) /* pointwise kernels: activations, adds, casts */                                           \
  X(optimizer)   /* optimizer steps (multi_tensor_apply, Adam, SGD) */                                        \
  X(copy)        /* device copies and fills done by kernels */                                                \
  X(other)

typedef enum xf_kernel_class {
#define XF_X(n) XF_KERNEL_##n,
  XF_KERNEL_CLASSES(XF_X)
#undef XF_X
  XF_KERNEL__COUNT
} xf_kernel_class;

/* Classifies a kernel by its name (the rules are in transform.c and docs/lua-api.md). */
xf_kernel_class xf_kernel_class_of(const char *name);
const char *xf_kernel_class_name(int cls);
int xf_kernel_class_from_name(const char *name); /* -1 when unknown */

/* ---- nodes ------------------------------------------------------------------------------- */

typedef struct xf_node xf_node;

/* A leaf: opens a base trace. close is called when the node is freed. */
typedef int (*xf_open_fn)(void *arg, replay_source *out, char *err, size_t errlen);

/* What a per-event function (a Lua function) returns: it writes up to cap events to out and
 * sets *nout (0 drops the event); returns 0, or -1 with a message. */
typedef int (*xf_event_fn)(void *arg, const sim_event *in, sim_event *out, size_t cap, size_t *nout, char *err,
                           size_t errlen);

/* Where insert puts its events. */
typedef enum xf_where {
  XF_AT_START = 0,   /* before the first event */
  XF_AT_END = 1,     /* after the last event */
  XF_BEFORE_SEQ = 2, /* before the first event with base seq >= seq */
  XF_BEFORE_EACH = 3, /* before every event that matches the filter */
  XF_AFTER_EACH = 4,  /* after every event that matches the filter */
} xf_where;

/* Every constructor returns a new node holding one reference to its input (the caller keeps
 * its own), or NULL with a message for bad parameters. Filters are copied. */
xf_node *xf_base(xf_open_fn open, void *arg, void (*release)(void *arg));
/* A leaf over events held in memory (borrowed: arg's release frees them): one-to-one
 * transforms over it read the array themselves, without a source of its own between.
 *
 * plan (NULL: none) is where the array's owner keeps their plan (source.h): the sources opened
 * over the array itself, and over one-to-one transforms of it that change no kind or address
 * (scale, resize, set_copy, scale_time), lend their events a block at a time with the plan's
 * numbers, which are theirs too. */
xf_node *xf_base_array(const sim_event *evs, size_t n, void *arg, void (*release)(void *arg), replay_plan_kept *plan);
/* A replay of a trace whose base is `base` (xf_node_base's leaf) is about to run: counted towards
 * the base array's plan (replay_plan_kept_note). The plan when there is one, else NULL. */
const replay_plan *xf_plan_note(const xf_node *base);
/* The base array's plan when its owner has one, without counting a replay (NULL: none). */
const replay_plan *xf_base_plan(const xf_node *base);
/* Sizes of matching allocations (and their frees): ceil(size * factor) rounded up to align
 * bytes (align >= 1). Matching copies and memsets get their size and duration scaled too. */
xf_node *xf_scale(xf_node *in, const xf_filter *f, double factor, uint64_t align, char *err, size_t errlen);
/* Per-allocation sizes: sizes_by_seq maps a base seq to its new size (the map is copied). */
xf_node *xf_resize(xf_node *in, const sim_map *sizes_by_seq);
/* Drops matching events; the frees of dropped allocations go with them. */
xf_node *xf_drop(xf_node *in, const xf_filter *f);
/* Inserts events (copied). Their addresses get XF_ADDR_INSERTED (and the occurrence number
 * in bits 40..60 for BEFORE_EACH/AFTER_EACH); a ts of -1 takes the neighbour's time. */
xf_node *xf_insert(xf_node *in, const sim_event *evs, size_t n, xf_where where, int64_t seq, const xf_filter *f,
                   char *err, size_t errlen);
/* Inserts events around given base events: groups[i] events go before (after: after) every
 * event whose base seq is seqs[i]. Addresses are used as given; a ts of -1 takes the
 * anchor's time. */
typedef struct xf_insert_group {
  int64_t seq;
  int after;
  size_t first, count; /* into evs */
} xf_insert_group;
xf_node *xf_insert_at(xf_node *in, const xf_insert_group *groups, size_t ngroups, const sim_event *evs, size_t nevs);

/* Copies that match: host memory kind set to mem (SIM_MEM_PINNED ...), SIM_EVF_ASYNC set when
 * async, duration multiplied by dur_factor. */
xf_node *xf_set_copy(xf_node *in, const xf_filter *f, int mem, int async, double dur_factor, char *err,
                     size_t errlen);
/* Durations of matching events (kernels by default): the part above fixed_ns is multiplied
 * by factor (fixed_ns 0: the whole duration), as a launch-bound floor that does not scale. */
xf_node *xf_scale_time(xf_node *in, const xf_filter *f, double factor, int64_t fixed_ns, char *err, size_t errlen);
/*
 * Repeats the block of events with base seq in [from, to) `times` times (0 drops it). In the
 * copies after the first: allocations get fresh addresses; a copy's allocation that is still
 * live when the next copy makes it again is freed just after (a variable rebound each
 * micro-batch), and frees after the block free the newest copy; frees inside the block of
 * memory from before the block happen once; allocations matching `once` are made only by
 * the first copy (once_transient: later copies allocate and free them at once, as a gradient
 * computed into a buffer and added in place); step markers are not repeated. Times after the
 * block shift by the copies.
 */
xf_node *xf_repeat(xf_node *in, int64_t from, int64_t to, int times, const xf_filter *once, int once_transient,
                   char *err, size_t errlen);
/* Calls fn for every matching event (others pass untouched). */
xf_node *xf_map(xf_node *in, const xf_filter *f, xf_event_fn fn, void *arg, void (*release)(void *arg));
/* Interleaves b into a by time: b starts offset_ns after a's first event, its events get
 * device `device` (-1: as recorded) and addresses tagged XF_ADDR_MERGED. */
xf_node *xf_merge(xf_node *a, xf_node *b, int64_t offset_ns, int device);

void xf_node_ref(xf_node *n);
void xf_node_unref(xf_node *n);
/* 1 for a leaf. */
int xf_node_is_base(const xf_node *n);
/* Transforms between this node and its leaves (0 for a leaf). */
int xf_node_depth(const xf_node *n);
/* One line per transform, innermost first ("scale categories=activation factor=2"). Caller frees. */
char *xf_node_describe(const xf_node *n);

/* Opens the derived trace as a source (closing it closes everything it opened). */
int xf_open(const xf_node *n, replay_source *out, char *err, size_t errlen);

#endif
