/* fitset.h: free blocks ordered by (stream, size, address), with an exact best-fit lookup in a few steps. */
#ifndef SIM_FITSET_H
#define SIM_FITSET_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "internal/rbtree.h"

/*
 * What std::set<Block*> ordered by (stream, size, address) gives a caching allocator, answered
 * faster: lower_bound(stream, size) is the first block of that stream not smaller than size,
 * the lowest address among equal sizes. Sizes fall into classes, sixteen per power of two (as
 * in TLSF), and two bitmaps say which classes hold any. Classes are in size order, so the answer
 * is in the request's own class or is the first block of the next class that holds any: a lookup
 * costs a search in one class and a bit scan, not a walk down a tree of every free block. Streams
 * are kept in their unsigned order (a program usually has one or two), so walking the whole set
 * visits blocks in exactly the (stream, size, address) order.
 *
 * A class keeps its blocks ordered by (size, address) in a doubly linked list while it holds
 * few, and in a red-black tree (internal/rbtree.h) once it holds more than SIM_FITSET_TREE_AT,
 * until it holds fewer than SIM_FITSET_LIST_AT again. Most classes hold a handful of blocks: a
 * list takes a block out, or puts a merged one in its neighbour's place, in a few stores where a
 * tree rebalances along branches the processor cannot predict (with trees only, the torch
 * model's replay of the generated trace mispredicted half again as many branches and took 15%
 * longer: docs/performance.md, round thirty-five). The tree keeps a class of many blocks (many
 * cached blocks of one shape) from costing a long walk. Each class also keeps its first and last
 * block, so the bit scan's answer is one load away in either form. A listed block is marked by
 * its link's colour (neither red nor black), so its neighbours are found without asking which
 * form its class is in.
 *
 * SIM_FITSET_DEFINE(name, type, link, cls, stream, size, addr) generates, for `struct name`:
 *   name_init(s), name_release(s)
 *   name_clear(s)                empties the set, keeping what it allocated (its streams)
 *   name_insert(s, x)            0, or -1 when an equal block is there
 *   name_remove(s, x)
 *   name_lower_bound(s, stream, size)     the first block of stream with size >= size, or NULL
 *   name_next_in_stream(s, x), name_prev_in_stream(s, x), name_last_in_stream(s, stream)
 *   name_first(s), name_next(s, x)        the whole set in order
 *   name_rekey(s, x, size, addr)          changes x's key, keeping its place when it can
 *   name_replace(s, x, y)                 y (its key set, same stream) takes x's place
 *   name_check(s)                         1 when consistent (tests, debug)
 *   name_stream_load(dst, src)            an emptied stream back to a copy of it (struct name_stream)
 *   name_cmp(a, b)                        -1, 0 or 1: a's key against b's within a stream (size, then address)
 * `link` is an RB_ENTRY(type) member; `cls` a uint16_t member the set keeps x's class in while x
 * is in it (so that a block whose key changes class moves in one step); stream is an int64_t,
 * size and addr uint64_t members.
 */
#define SIM_FITSET_SL_BITS 4 /* at most 6: a first level's classes fit one 64-bit map */
#define SIM_FITSET_SL (1u << SIM_FITSET_SL_BITS)
#define SIM_FITSET_FL 64
#define SIM_FITSET_CLASSES (SIM_FITSET_FL * SIM_FITSET_SL)
#define SIM_FITSET_TREE_AT 64 /* a listed class past this many blocks becomes a tree */
#define SIM_FITSET_LIST_AT 16  /* a tree below this many becomes a list again */
#define SIM_FITSET_LISTED 2   /* the colour of a listed block (RB_BLACK and RB_RED are 0 and 1) */

_Static_assert(SIM_FITSET_CLASSES <= 65536, "a block keeps its class in 16 bits");
_Static_assert(SIM_FITSET_LISTED != RB_BLACK && SIM_FITSET_LISTED != RB_RED, "a listed block's colour is neither");
_Static_assert(2 <= SIM_FITSET_LIST_AT && SIM_FITSET_LIST_AT <= SIM_FITSET_TREE_AT, "a tree is never empty");

/* The class of a size: monotone in size; SIM_FITSET_SL classes per power of two. */
static inline unsigned sim_fitset_class(uint64_t size) {
  if (size < SIM_FITSET_SL) return (unsigned)size;
  unsigned fl = 63u - (unsigned)__builtin_clzll(size);
  return fl * SIM_FITSET_SL + ((unsigned)(size >> (fl - SIM_FITSET_SL_BITS)) & (SIM_FITSET_SL - 1));
}

#define SIM_FITSET_DEFINE(name, type, link, cls_f, stream_f, size_f, addr_f)                                                     \
  __attribute__((unused)) static inline int name##_cmp(const type *a, const type *b) {                                           \
    if (a->size_f != b->size_f) return a->size_f < b->size_f ? -1 : 1;                                                           \
    return (a->addr_f > b->addr_f) - (a->addr_f < b->addr_f);                                                                    \
  }                                                                                                                              \
  /* x's key against (size, addr) */                                                                                             \
  __attribute__((unused)) static inline int name##_cmpk_(const type *x, uint64_t size, uint64_t addr) {                          \
    if (x->size_f != size) return x->size_f < size ? -1 : 1;                                                                     \
    return (x->addr_f > addr) - (x->addr_f < addr);                                                                              \
  }                                                                                                                              \
  RB_HEAD(name##_tree, type);                                                                                                    \
  SIM_RB_GENERATE(name##_tree, type, link, name##_cmp)                                                                           \
  struct name##_cls {                                                                                                            \
    type *first, *last;       /* its smallest and largest block (NULL: it holds none) */                                         \
    struct name##_tree tree;  /* its blocks once it holds many; empty while they are listed */                                   \
    uint32_t n;               /* blocks it holds */                                                                              \
  };                                                                                                                             \
  struct name##_stream {                                                                                                         \
    int64_t stream;                                                                                                              \
    uint64_t fl_map;                      /* first levels that hold any block */                                                 \
    uint64_t sl_map[SIM_FITSET_FL];       /* classes of each first level that hold any */                                        \
    size_t count;                                                                                                                \
    struct name##_cls cls[SIM_FITSET_CLASSES];                                                                                   \
  };                                                                                                                             \
  struct name {                                                                                                                  \
    struct name##_stream *last; /* the stream looked up last (most calls are on one stream) */                                   \
    int64_t last_stream;                                                                                                         \
    struct name##_stream **s;   /* by (uint64_t)stream */                                                                        \
    size_t n, cap, count;                                                                                                        \
  };                                                                                                                             \
  __attribute__((unused)) static inline void name##_init(struct name *s) { memset(s, 0, sizeof *s); }                            \
  __attribute__((unused)) static inline void name##_release(struct name *s) {                                                    \
    for (size_t i = 0; i < s->n; i++) free(s->s[i]);                                                                             \
    free(s->s);                                                                                                                  \
    memset(s, 0, sizeof *s);                                                                                                     \
  }                                                                                                                              \
  /* Only the classes the bitmaps name hold blocks: those are emptied, and the bitmaps. A stream                                 \
   * kept empty answers every query as a stream never met does. */                                                               \
  __attribute__((unused)) static inline void name##_clear(struct name *s) {                                                      \
    for (size_t i = 0; i < s->n; i++) {                                                                                          \
      struct name##_stream *st = s->s[i];                                                                                        \
      for (uint64_t f = st->fl_map; f; f &= f - 1) {                                                                             \
        unsigned fl = (unsigned)__builtin_ctzll(f);                                                                              \
        for (uint64_t m = st->sl_map[fl]; m; m &= m - 1)                                                                         \
          st->cls[fl * SIM_FITSET_SL + (unsigned)__builtin_ctzll(m)] = (struct name##_cls){0};                                   \
        st->sl_map[fl] = 0;                                                                                                      \
      }                                                                                                                          \
      st->fl_map = 0;                                                                                                            \
      st->count = 0;                                                                                                             \
    }                                                                                                                            \
    s->count = 0;                                                                                                                \
  }                                                                                                                              \
  /* dst, one of s's streams emptied by name_clear, as src (a copy of it taken earlier) was: only the                            \
   * classes src's bitmaps name are copied (every other class of either is empty), then the bitmaps                              \
   * and the count. */                                                                                                           \
  __attribute__((unused)) static inline void name##_stream_load(struct name##_stream *dst,                                       \
                                                                const struct name##_stream *src) {                               \
    for (uint64_t f = src->fl_map; f; f &= f - 1) {                                                                              \
      unsigned fl = (unsigned)__builtin_ctzll(f);                                                                                \
      for (uint64_t m = src->sl_map[fl]; m; m &= m - 1) {                                                                        \
        unsigned c = fl * SIM_FITSET_SL + (unsigned)__builtin_ctzll(m);                                                          \
        dst->cls[c] = src->cls[c];                                                                                               \
      }                                                                                                                          \
    }                                                                                                                            \
    dst->stream = src->stream;                                                                                                   \
    dst->fl_map = src->fl_map;                                                                                                   \
    memcpy(dst->sl_map, src->sl_map, sizeof dst->sl_map);                                                                        \
    dst->count = src->count;                                                                                                     \
  }                                                                                                                              \
  __attribute__((unused)) static inline struct name##_stream *name##_stream_(struct name *s, int64_t stream, int create) {       \
    if (s->last && s->last_stream == stream) return s->last;                                                                     \
    size_t lo = 0, hi = s->n;                                                                                                    \
    while (lo < hi) {                                                                                                            \
      size_t mid = (lo + hi) / 2;                                                                                                \
      if ((uint64_t)s->s[mid]->stream < (uint64_t)stream) lo = mid + 1;                                                          \
      else hi = mid;                                                                                                             \
    }                                                                                                                            \
    if (lo < s->n && s->s[lo]->stream == stream) {                                                                               \
      s->last = s->s[lo];                                                                                                        \
      s->last_stream = stream;                                                                                                   \
      return s->last;                                                                                                            \
    }                                                                                                                            \
    if (!create) return NULL;                                                                                                    \
    struct name##_stream *st = sim_xcalloc(1, sizeof *st);                                                                       \
    st->stream = stream;                                                                                                         \
    sim_grow((void **)&s->s, &s->cap, s->n + 1, sizeof *s->s);                                                                   \
    memmove(&s->s[lo + 1], &s->s[lo], (s->n - lo) * sizeof *s->s);                                                               \
    s->s[lo] = st;                                                                                                               \
    s->n++;                                                                                                                      \
    s->last = st;                                                                                                                \
    s->last_stream = stream;                                                                                                     \
    return st;                                                                                                                   \
  }                                                                                                                              \
  /* ---- one class: a list or a tree ---- */                                                                                    \
  __attribute__((unused)) static inline int name##_listed_(const type *x) {                                                      \
    return RB_COLOR(x, link) == SIM_FITSET_LISTED;                                                                               \
  }                                                                                                                              \
  /* The blocks after and before x in its class, or NULL. */                                                                     \
  __attribute__((unused)) static inline type *name##_after_(type *x) {                                                           \
    return name##_listed_(x) ? RB_RIGHT(x, link) : RB_NEXT(name##_tree, NULL, x);                                                \
  }                                                                                                                              \
  __attribute__((unused)) static inline type *name##_before_(type *x) {                                                          \
    return name##_listed_(x) ? RB_LEFT(x, link) : RB_PREV(name##_tree, NULL, x);                                                 \
  }                                                                                                                              \
  /* Links x into k's list between p and y (either NULL at an end). */                                                           \
  __attribute__((unused)) static inline void name##_link_(struct name##_cls *k, type *p, type *x, type *y) {                     \
    RB_LEFT(x, link) = p;                                                                                                        \
    RB_RIGHT(x, link) = y;                                                                                                       \
    RB_COLOR(x, link) = SIM_FITSET_LISTED;                                                                                       \
    if (p) RB_RIGHT(p, link) = x;                                                                                                \
    else k->first = x;                                                                                                           \
    if (y) RB_LEFT(y, link) = x;                                                                                                 \
    else k->last = x;                                                                                                            \
  }                                                                                                                              \
  /* A listed class grown past SIM_FITSET_TREE_AT: its blocks, in order, into its tree. */                                       \
  __attribute__((noinline, unused)) static void name##_to_tree_(struct name##_cls *k) {                                          \
    RB_INIT(&k->tree);                                                                                                           \
    for (type *x = k->first, *next; x; x = next) {                                                                               \
      next = RB_RIGHT(x, link);                                                                                                  \
      RB_INSERT(name##_tree, &k->tree, x);                                                                                       \
    }                                                                                                                            \
  }                                                                                                                              \
  /* A tree shrunk below SIM_FITSET_LIST_AT: its blocks, in order, into a list. */                                               \
  __attribute__((noinline, unused)) static void name##_to_list_(struct name##_cls *k) {                                          \
    type *in_order[SIM_FITSET_LIST_AT];                                                                                          \
    uint32_t n = 0;                                                                                                              \
    for (type *x = k->first; x; x = RB_NEXT(name##_tree, NULL, x)) in_order[n++] = x;                                            \
    RB_INIT(&k->tree);                                                                                                           \
    k->first = k->last = NULL;                                                                                                   \
    for (uint32_t i = 0; i < n; i++) name##_link_(k, k->last, in_order[i], NULL);                                                \
  }                                                                                                                              \
  /* The first block of class k not smaller than size, or NULL. */                                                               \
  __attribute__((unused)) static inline type *name##_class_lower_bound_(struct name##_cls *k, uint64_t size) {                   \
    if (!k->last || k->last->size_f < size) return NULL;                                                                         \
    if (RB_EMPTY(&k->tree)) {                                                                                                    \
      type *x = k->first;                                                                                                        \
      while (x->size_f < size) x = RB_RIGHT(x, link);                                                                            \
      return x;                                                                                                                  \
    }                                                                                                                            \
    type key;                                                                                                                    \
    key.size_f = size;                                                                                                           \
    key.addr_f = 0;                                                                                                              \
    return RB_NFIND(name##_tree, &k->tree, &key);                                                                                \
  }                                                                                                                              \
  /* The first block of the first class >= c that holds any. */                                                                  \
  __attribute__((unused)) static inline type *name##_from_class_(struct name##_stream *st, unsigned c) {                         \
    if (c >= SIM_FITSET_CLASSES) return NULL;                                                                                    \
    unsigned fl = c / SIM_FITSET_SL, sl = c % SIM_FITSET_SL;                                                                     \
    uint64_t m = st->sl_map[fl] & (~UINT64_C(0) << sl);                                                                          \
    if (!m) {                                                                                                                    \
      uint64_t f = fl + 1 < SIM_FITSET_FL ? st->fl_map & (~UINT64_C(0) << (fl + 1)) : 0;                                         \
      if (!f) return NULL;                                                                                                       \
      fl = (unsigned)__builtin_ctzll(f);                                                                                         \
      m = st->sl_map[fl];                                                                                                        \
    }                                                                                                                            \
    return st->cls[fl * SIM_FITSET_SL + (unsigned)__builtin_ctzll(m)].first;                                                     \
  }                                                                                                                              \
  /* The last block of the last class < c that holds any. */                                                                     \
  __attribute__((unused)) static inline type *name##_before_class_(struct name##_stream *st, unsigned c) {                       \
    unsigned fl = c / SIM_FITSET_SL, sl = c % SIM_FITSET_SL;                                                                     \
    uint64_t m = fl < SIM_FITSET_FL ? st->sl_map[fl] & ((UINT64_C(1) << sl) - 1) : 0;                                            \
    if (!m) {                                                                                                                    \
      uint64_t f = fl < SIM_FITSET_FL ? st->fl_map & ((UINT64_C(1) << fl) - 1) : st->fl_map;                                     \
      if (!f) return NULL;                                                                                                       \
      fl = 63u - (unsigned)__builtin_clzll(f);                                                                                   \
      m = st->sl_map[fl];                                                                                                        \
    }                                                                                                                            \
    return st->cls[fl * SIM_FITSET_SL + 63u - (unsigned)__builtin_clzll(m)].last;                                                \
  }                                                                                                                              \
  /* Links x into class c of st (x->cls_f keeps c while x is in the set): 0, or -1 when an equal                                 \
   * block is there. */                                                                                                          \
  __attribute__((unused, always_inline)) static inline int name##_put_(struct name##_stream *st, type *x, unsigned c) {          \
    struct name##_cls *k = &st->cls[c];                                                                                          \
    x->cls_f = (uint16_t)c;                                                                                                      \
    if (!k->first) { /* an empty class, the common case; the bitmaps learn it */                                                 \
      name##_link_(k, NULL, x, NULL);                                                                                            \
      k->n = 1;                                                                                                                  \
      st->sl_map[c / SIM_FITSET_SL] |= UINT64_C(1) << (c % SIM_FITSET_SL);                                                       \
      st->fl_map |= UINT64_C(1) << (c / SIM_FITSET_SL);                                                                          \
      return 0;                                                                                                                  \
    }                                                                                                                            \
    if (!RB_EMPTY(&k->tree)) {                                                                                                   \
      if (RB_INSERT(name##_tree, &k->tree, x)) return -1;                                                                        \
      if (name##_cmp(x, k->first) < 0) k->first = x;                                                                             \
      else if (name##_cmp(x, k->last) > 0) k->last = x;                                                                          \
      k->n++;                                                                                                                    \
      return 0;                                                                                                                  \
    }                                                                                                                            \
    /* At the end when it sorts after the last block (on the generated trace, 242 k of 800 k puts,                               \
     * which took 70% of a walk from the front's steps), else before the first block from the front                              \
     * that sorts after it */                                                                                                    \
    type *y = name##_cmp(x, k->last) > 0 ? NULL : k->first;                                                                      \
    int r = -1;                                                                                                                  \
    while (y && (r = name##_cmp(y, x)) < 0) y = RB_RIGHT(y, link);                                                               \
    if (r == 0) return -1;                                                                                                       \
    name##_link_(k, y ? RB_LEFT(y, link) : k->last, x, y);                                                                       \
    if (++k->n > SIM_FITSET_TREE_AT) name##_to_tree_(k);                                                                         \
    return 0;                                                                                                                    \
  }                                                                                                                              \
  /* Unlinks x from its class. */                                                                                                \
  __attribute__((unused, always_inline)) static inline void name##_take_(struct name##_stream *st, type *x) {                    \
    unsigned c = x->cls_f;                                                                                                       \
    struct name##_cls *k = &st->cls[c];                                                                                          \
    if (name##_listed_(x)) {                                                                                                     \
      type *p = RB_LEFT(x, link), *y = RB_RIGHT(x, link);                                                                        \
      if (p) RB_RIGHT(p, link) = y;                                                                                              \
      else k->first = y;                                                                                                         \
      if (y) RB_LEFT(y, link) = p;                                                                                               \
      else k->last = p;                                                                                                          \
    } else {                                                                                                                     \
      if (x == k->first) k->first = RB_NEXT(name##_tree, NULL, x);                                                               \
      if (x == k->last) k->last = RB_PREV(name##_tree, NULL, x);                                                                 \
      RB_REMOVE(name##_tree, &k->tree, x);                                                                                       \
      if (k->n - 1 < SIM_FITSET_LIST_AT) name##_to_list_(k);                                                                     \
    }                                                                                                                            \
    /* the bits of a class that empties, and of its first level, cleared by arithmetic: whether a                                \
     * class empties is as good as random to the processor's branch predictor */                                                 \
    uint64_t *sl = &st->sl_map[c / SIM_FITSET_SL];                                                                               \
    *sl &= ~((uint64_t)(--k->n == 0) << (c % SIM_FITSET_SL));                                                                    \
    st->fl_map &= ~((uint64_t)(*sl == 0) << (c / SIM_FITSET_SL));                                                                \
  }                                                                                                                              \
  /* ---- the set ---- */                                                                                                        \
  __attribute__((unused)) static inline int name##_insert(struct name *s, type *x) {                                             \
    struct name##_stream *st = name##_stream_(s, x->stream_f, 1);                                                                \
    if (name##_put_(st, x, sim_fitset_class(x->size_f))) return -1;                                                              \
    st->count++;                                                                                                                 \
    s->count++;                                                                                                                  \
    return 0;                                                                                                                    \
  }                                                                                                                              \
  __attribute__((unused)) static inline void name##_remove(struct name *s, type *x) {                                            \
    struct name##_stream *st = name##_stream_(s, x->stream_f, 0);                                                                \
    name##_take_(st, x);                                                                                                         \
    st->count--;                                                                                                                 \
    s->count--;                                                                                                                  \
  }                                                                                                                              \
  __attribute__((unused, always_inline)) static inline type *name##_lower_bound(struct name *s, int64_t stream, uint64_t size) { \
    struct name##_stream *st = name##_stream_(s, stream, 0);                                                                     \
    if (!st) return NULL;                                                                                                        \
    unsigned c = sim_fitset_class(size);                                                                                         \
    /* the bitmap first: an empty class costs no look at it */                                                                   \
    type *best = NULL;                                                                                                           \
    if (st->sl_map[c / SIM_FITSET_SL] >> (c % SIM_FITSET_SL) & 1) best = name##_class_lower_bound_(&st->cls[c], size);           \
    return best ? best : name##_from_class_(st, c + 1);                                                                          \
  }                                                                                                                              \
  __attribute__((unused)) static inline type *name##_next_in_stream(struct name *s, type *x) {                                   \
    type *y = name##_after_(x);                                                                                                  \
    if (y) return y;                                                                                                             \
    return name##_from_class_(name##_stream_(s, x->stream_f, 0), x->cls_f + 1u);                                                 \
  }                                                                                                                              \
  __attribute__((unused)) static inline type *name##_prev_in_stream(struct name *s, type *x) {                                   \
    type *y = name##_before_(x);                                                                                                 \
    if (y) return y;                                                                                                             \
    return name##_before_class_(name##_stream_(s, x->stream_f, 0), x->cls_f);                                                    \
  }                                                                                                                              \
  __attribute__((unused)) static inline type *name##_last_in_stream(struct name *s, int64_t stream) {                            \
    struct name##_stream *st = name##_stream_(s, stream, 0);                                                                     \
    return st ? name##_before_class_(st, SIM_FITSET_CLASSES) : NULL;                                                             \
  }                                                                                                                              \
  __attribute__((unused)) static inline type *name##_first(struct name *s) {                                                     \
    for (size_t i = 0; i < s->n; i++) {                                                                                          \
      type *x = name##_from_class_(s->s[i], 0);                                                                                  \
      if (x) return x;                                                                                                           \
    }                                                                                                                            \
    return NULL;                                                                                                                 \
  }                                                                                                                              \
  __attribute__((unused)) static inline type *name##_next(struct name *s, type *x) {                                             \
    type *y = name##_next_in_stream(s, x);                                                                                       \
    if (y) return y;                                                                                                             \
    for (size_t i = 0; i < s->n; i++)                                                                                            \
      if ((uint64_t)s->s[i]->stream > (uint64_t)x->stream_f && (y = name##_from_class_(s->s[i], 0)))                             \
        return y;                                                                                                                \
    return NULL;                                                                                                                 \
  }                                                                                                                              \
  /* Whether x, with the key (size, addr), would still sort between its class neighbours: a key that                             \
   * decreases (a block split, its front taken) passes no neighbour after x, one that increases (a                               \
   * block merged with its neighbours) none before it, so one side is looked at. */                                              \
  __attribute__((unused)) static inline int name##_in_place_(type *x, uint64_t size, uint64_t addr) {                            \
    int c = name##_cmpk_(x, size, addr);                                                                                         \
    if (c > 0) {                                                                                                                 \
      type *p = name##_before_(x);                                                                                               \
      return !p || name##_cmpk_(p, size, addr) < 0;                                                                              \
    }                                                                                                                            \
    type *q = c ? name##_after_(x) : NULL;                                                                                       \
    return !q || name##_cmpk_(q, size, addr) > 0;                                                                                \
  }                                                                                                                              \
  __attribute__((unused)) static inline void name##_rekey(struct name *s, type *x, uint64_t size, uint64_t addr) {               \
    unsigned c = sim_fitset_class(size);                                                                                         \
    if (c == x->cls_f && name##_in_place_(x, size, addr)) {                                                                      \
      x->size_f = size;                                                                                                          \
      x->addr_f = addr;                                                                                                          \
      return;                                                                                                                    \
    }                                                                                                                            \
    struct name##_stream *st = name##_stream_(s, x->stream_f, 0);                                                                \
    name##_take_(st, x);                                                                                                         \
    x->size_f = size;                                                                                                            \
    x->addr_f = addr;                                                                                                            \
    if (name##_put_(st, x, c)) { /* an equal block was there: x is out */                                                        \
      st->count--;                                                                                                               \
      s->count--;                                                                                                                \
    }                                                                                                                            \
  }                                                                                                                              \
  __attribute__((unused)) static inline void name##_replace(struct name *s, type *x, type *y) {                                  \
    unsigned c = sim_fitset_class(y->size_f);                                                                                    \
    struct name##_stream *st = name##_stream_(s, x->stream_f, 0);                                                                \
    if (c == x->cls_f && name##_in_place_(x, y->size_f, y->addr_f)) {                                                            \
      struct name##_cls *k = &st->cls[c];                                                                                        \
      y->cls_f = x->cls_f;                                                                                                       \
      if (name##_listed_(x)) {                                                                                                   \
        name##_link_(k, RB_LEFT(x, link), y, RB_RIGHT(x, link));                                                                 \
        RB_LEFT(x, link) = RB_RIGHT(x, link) = NULL;                                                                             \
      } else {                                                                                                                   \
        name##_tree_RB_SUBSTITUTE(&k->tree, x, y);                                                                               \
        if (k->first == x) k->first = y;                                                                                         \
        if (k->last == x) k->last = y;                                                                                           \
      }                                                                                                                          \
      return;                                                                                                                    \
    }                                                                                                                            \
    name##_take_(st, x);                                                                                                         \
    if (name##_put_(st, y, c)) {                                                                                                 \
      st->count--;                                                                                                               \
      s->count--;                                                                                                                \
    }                                                                                                                            \
  }                                                                                                                              \
  /* One class as the bitmaps, the form its size says and the order require; its blocks counted. */                              \
  __attribute__((unused)) static inline int name##_check_class_(struct name##_stream *st, unsigned c, size_t *count) {           \
    struct name##_cls *k = &st->cls[c];                                                                                          \
    unsigned fl = c / SIM_FITSET_SL, sl = c % SIM_FITSET_SL;                                                                     \
    if (!k->first != !(st->sl_map[fl] & (UINT64_C(1) << sl))) return 0;                                                          \
    if (!k->first != !k->last || !k->first != !k->n) return 0;                                                                   \
    int listed = RB_EMPTY(&k->tree);                                                                                             \
    if (listed ? k->n > SIM_FITSET_TREE_AT : k->n < SIM_FITSET_LIST_AT) return 0;                                                \
    if (!listed && !name##_tree_RB_VALID(&k->tree)) return 0;                                                                    \
    if (!listed && (k->first != RB_MIN(name##_tree, &k->tree) || k->last != RB_MAX(name##_tree, &k->tree))) return 0;            \
    uint32_t n = 0;                                                                                                              \
    type *prev = NULL;                                                                                                           \
    for (type *x = k->first; x; prev = x, x = name##_after_(x), n++) {                                                           \
      if (name##_listed_(x) != listed || (listed && RB_LEFT(x, link) != prev)) return 0;                                         \
      if (prev && name##_cmp(prev, x) >= 0) return 0;                                                                            \
      if (sim_fitset_class(x->size_f) != c || x->cls_f != c || x->stream_f != st->stream) return 0;                              \
    }                                                                                                                            \
    if (prev != k->last || n != k->n) return 0;                                                                                  \
    *count += n;                                                                                                                 \
    return 1;                                                                                                                    \
  }                                                                                                                              \
  __attribute__((unused)) static inline int name##_check(struct name *s) {                                                       \
    size_t total = 0;                                                                                                            \
    for (size_t i = 0; i < s->n; i++) {                                                                                          \
      struct name##_stream *st = s->s[i];                                                                                        \
      size_t count = 0;                                                                                                          \
      if (i && (uint64_t)s->s[i - 1]->stream >= (uint64_t)st->stream) return 0;                                                  \
      for (unsigned fl = 0; fl < SIM_FITSET_FL; fl++)                                                                            \
        if (!!st->sl_map[fl] != !!(st->fl_map & (UINT64_C(1) << fl))) return 0;                                                  \
      for (unsigned c = 0; c < SIM_FITSET_CLASSES; c++)                                                                          \
        if (!name##_check_class_(st, c, &count)) return 0;                                                                       \
      if (count != st->count) return 0;                                                                                          \
      total += count;                                                                                                            \
    }                                                                                                                            \
    return total == s->count;                                                                                                    \
  }

#endif
