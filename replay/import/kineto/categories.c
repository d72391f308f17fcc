/* categories.c: Kineto: what operator frames tell the category rules, and their decisions in allocation order. */
#include <stdint.h>

#include "kineto_int.h"

/*
 * The rules (categorize.h) see the events of the categorizing pass in time order, each with
 * the flags of the operators open on its thread; they decide an allocation's category when
 * they know enough, often only at its free. The decisions go through a sort of their own into
 * allocation order, so that the writing pass, which makes the same allocations in the same
 * order, finds each one's decision as it writes it.
 */

struct kdecision {
  int64_t ordinal; /* the allocation's position among allocations */
  uint8_t cat, src;
};

static int cmp_decision(const void *a, const void *b) {
  int64_t x = ((const kdecision *)a)->ordinal, y = ((const kdecision *)b)->ordinal;
  return (x > y) - (x < y);
}

unsigned kineto_frame_flags(kparse *p, int64_t name, int64_t file) {
  uint64_t fkey = (uint64_t)name << 32 ^ (uint64_t)file;
  int known;
  uint64_t *fl = sim_map_put(&p->frame_flags, fkey, &known);
  if (!known) *fl = categorize_frame_flags(kineto_text(p, name), kineto_text(p, file));
  return (unsigned)*fl;
}

static int walk_decided(void *arg, int64_t ordinal, int category, int cat_source) {
  kwalk *kw = arg;
  kdecision d = {ordinal, (uint8_t)category, (uint8_t)cat_source};
  if (extsort_add(kw->decisions, &d)) {
    kineto_fail(kw->p, "%s", extsort_error(kw->decisions));
    return -1;
  }
  return 0;
}

int kineto_categorize(kwalk *kw, const kbase *b, uint64_t memory) {
  kw->decisions = extsort_new(sizeof(kdecision), (size_t)memory / 2, cmp_decision);
  kw->cat = categorizer_new(kw->names, walk_decided, kw);
  return kineto_walk(kw, b);
}

int kineto_decisions_rewind(kwalk *kw) {
  const void *v = NULL;
  int got = extsort_finish(kw->decisions) || extsort_rewind(kw->decisions) ? -1 : extsort_next(kw->decisions, &v);
  if (got < 0) {
    kineto_fail(kw->p, "%s", extsort_error(kw->decisions));
    return -1;
  }
  kw->next = got ? v : NULL;
  return 0;
}

int kineto_decision_apply(kwalk *kw, sim_event *ev, int64_t ordinal) {
  while (kw->next && kw->next->ordinal < ordinal) {
    const void *v;
    int got = extsort_next(kw->decisions, &v);
    if (got < 0) {
      kineto_fail(kw->p, "%s", extsort_error(kw->decisions));
      return -1;
    }
    kw->next = got ? v : NULL;
  }
  if (kw->next && kw->next->ordinal == ordinal) {
    ev->category = kw->next->cat;
    ev->cat_source = kw->next->src;
  }
  kw->by_method[ev->cat_source]++;
  sim_bytes_sum(&kw->bytes_by_method[ev->cat_source], ev->size);
  return 0;
}
