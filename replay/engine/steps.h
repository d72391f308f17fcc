/* steps.h: what an event asks of the engine (its op), and what it is to a planned replay's loop (its step). */
#ifndef REPLAY_STEPS_H
#define REPLAY_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "sim/event.h"
#include "source.h"

/* Private to the engine's files (engine.c, plan.c). */

/* What an event asks of the engine. */
enum { OP_NONE, OP_ALLOC, OP_FREE, OP_HOST, OP_DEVICE };

static const uint8_t kind_op[256] = {
  [SIM_EV_ALLOC] = OP_ALLOC,
  [SIM_EV_FREE] = OP_FREE,
  [SIM_EV_FREE_REQUESTED] = OP_FREE,
  [SIM_EV_FREE_COMPLETED] = OP_FREE,
  [SIM_EV_HOST_ALLOC] = OP_HOST,
  [SIM_EV_HOST_FREE] = OP_HOST,
  [SIM_EV_SYNC] = OP_DEVICE,
  [SIM_EV_EMPTY_CACHE] = OP_DEVICE,
};

/* Whether the free request ev[0] and ev[1] are a pair: the completion of the same address comes
 * next, of the same record where the events are numbered (slot: their numbers, or NULL). */
static inline int replay_is_pair(const sim_event *ev, const uint32_t *slot) {
  return ev[1].kind == SIM_EV_FREE_COMPLETED && ev[1].addr == ev->addr && (!slot || slot[1] == slot[0]);
}

/* Event i's step (source.h, REPLAY_STEP_*) among evs[0..n-1], numbered by slots (or NULL: not
 * numbered): a free request is a pair when its completion comes next (replay_is_pair). */
static inline uint8_t replay_step_of(const sim_event *evs, const uint32_t *slots, size_t i, size_t n) {
  const sim_event *ev = &evs[i];
  switch (kind_op[ev->kind]) {
  case OP_NONE:
    return REPLAY_STEP_NONE;
  case OP_ALLOC:
    return REPLAY_STEP_ALLOC;
  case OP_FREE:
    if (ev->kind != SIM_EV_FREE_REQUESTED) return REPLAY_STEP_FREE;
    return i + 1 < n && replay_is_pair(ev, slots ? &slots[i] : NULL) ? REPLAY_STEP_PAIR : REPLAY_STEP_REQUEST;
  default:
    return REPLAY_STEP_OTHER;
  }
}

#endif
