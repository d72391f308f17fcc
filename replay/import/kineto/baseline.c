/* baseline.c: Kineto: the memory each device held before profiling began, from recorded totals and frees. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kineto_int.h"

static devbase *devbase_get(kbase *b, int device) {
  for (size_t i = 0; i < b->n; i++)
    if (b->d[i].device == device) return &b->d[i];
  sim_grow((void **)&b->d, &b->cap, b->n + 1, sizeof *b->d);
  devbase *d = &b->d[b->n++];
  memset(d, 0, sizeof *d);
  d->device = device;
  sim_map_init(&d->live);
  sim_map_init(&d->pre_addrs);
  return d;
}

void kineto_base_release(kbase *b) {
  for (size_t i = 0; i < b->n; i++) {
    sim_map_release(&b->d[i].live);
    sim_map_release(&b->d[i].pre_addrs);
    free(b->d[i].pre);
  }
  free(b->d);
  memset(b, 0, sizeof *b);
}

static int cmp_devbase(const void *a, const void *b) {
  const devbase *x = a, *y = b;
  return (x->device > y->device) - (x->device < y->device);
}

int kineto_find_baseline(kparse *p, kbase *b) {
  /* The first event of the trace: the first of either sort. */
  const void *v;
  int got;
  if (extsort_rewind(p->by_time) || (got = extsort_next(p->by_time, &v)) < 0) {
    kineto_fail(p, "%s", extsort_error(p->by_time));
    return -1;
  }
  if (got) {
    b->any = 1;
    b->first_ts = ((const krec *)v)->ts;
  }
  if (extsort_rewind(p->by_time_mem)) {
    kineto_fail(p, "%s", extsort_error(p->by_time_mem));
    return -1;
  }
  while ((got = extsort_next(p->by_time_mem, &v)) == 1) {
    const krec *r = v;
    if (!b->any || r->ts < b->first_ts) {
      b->any = 1;
      b->first_ts = r->ts;
    }
    if (r->type != R_MEMORY) continue;
    devbase *d = devbase_get(b, r->device);
    uint64_t addr = (uint64_t)r->addr;
    if (r->bytes > 0) {
      int existed;
      uint64_t *slot = sim_map_put(&d->live, addr, &existed);
      if (existed) d->duplicate_allocs++;
      *slot = (uint64_t)r->bytes;
    } else if (!sim_map_del(&d->live, addr, NULL)) {
      int existed;
      sim_map_put(&d->pre_addrs, addr, &existed);
      if (existed) {
        d->repeated_frees++;
      } else {
        sim_grow((void **)&d->pre, &d->cap, d->npre + 1, sizeof *d->pre);
        d->pre[d->npre++] = (pre_block){addr, -r->bytes};
        d->explicit_bytes += -r->bytes;
      }
    }
    d->running += r->bytes;
    if (!d->have_total && r->total_alloc >= 0) {
      d->have_total = 1;
      d->baseline = r->total_alloc - d->running;
    }
  }
  if (got < 0) {
    kineto_fail(p, "%s", extsort_error(p->by_time_mem));
    return -1;
  }
  if (b->n > 1) qsort(b->d, b->n, sizeof *b->d, cmp_devbase);
  for (size_t i = 0; i < b->n; i++) sim_map_release(&b->d[i].live);
  return 0;
}
