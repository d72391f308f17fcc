/* plan.c: numbering an in-memory trace's allocations once, for the engine's dense table of live records. */
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "source.h"

/*
 * One pass, as the engine's live table would go: an allocation of an address not held takes a
 * record (the one freed last, else a new one), an allocation of an address held names that
 * address's record, a free names the record of its address, and a free that completes gives the
 * record back. Which events these are depends on the trace alone (source.h).
 */
int replay_plan_build(replay_plan *p, const sim_event *events, size_t n) {
  memset(p, 0, sizeof *p);
  sim_map held; /* address -> its record */
  sim_map_init(&held);
  uint32_t *spare = NULL; /* records given back, the last on top */
  size_t nspare = 0, cap_spare = 0;
  uint32_t next = 0;
  uint32_t *slot = sim_xmalloc((n ? n : 1) * sizeof *slot);
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    const sim_event *ev = &events[i];
    slot[i] = REPLAY_PLAN_NONE;
    if (ev->kind == SIM_EV_ALLOC) {
      int existed;
      uint64_t *v = sim_map_put(&held, ev->addr, &existed);
      if (!existed) {
        if (nspare) {
          *v = spare[--nspare];
        } else if (next < REPLAY_PLAN_NONE - 1) {
          *v = next++;
        } else {
          rc = -1;
        }
      }
      slot[i] = (uint32_t)*v;
    } else if (sim_kind_is_free(ev->kind)) {
      uint64_t *v = sim_map_get(&held, ev->addr);
      if (!v) continue;
      slot[i] = (uint32_t)*v;
      if (ev->kind == SIM_EV_FREE_REQUESTED) continue; /* still held until the free completes */
      if (nspare == cap_spare) sim_grow((void **)&spare, &cap_spare, nspare + 1, sizeof *spare);
      spare[nspare++] = slot[i];
      sim_map_del_slot(&held, v);
    }
  }
  sim_map_release(&held);
  free(spare);
  if (rc) {
    free(slot);
    return -1;
  }
  *p = (replay_plan){events, n, slot, next};
  return 0;
}

void replay_plan_release(replay_plan *p) {
  free(p->slot);
  memset(p, 0, sizeof *p);
}
