/* debug.h: the models' internal asserts, by level: on in debug and sanitizer builds, compiled out in release builds. */
#ifndef SIM_INTERNAL_DEBUG_H
#define SIM_INTERNAL_DEBUG_H

#include <stdio.h>
#include <stdlib.h>

#include "sim/allocator.h"

/*
 * As mimalloc's mi_assert_internal and mi_assert_expensive. SIM_DEBUG is set for memplay_sim by
 * sim/CMakeLists.txt (MEMPLAY_SIM_DEBUG; by default 2 in Debug builds, which the sanitizer build
 * is, and 0 otherwise):
 *   0  nothing is checked, and the expressions are not evaluated;
 *   1  sim_assert_internal(e): the cheap facts each decision relies on, where it relies on them
 *      (a block being split is free and large enough, a freed block is allocated, pool and
 *      stream match, a counter never goes below zero);
 *   2  also sim_assert_expensive(e) and sim_assert_valid(check, ctx): a model's full check (its
 *      `check` op, O(blocks)), at the calls rare enough for it to cost little: when a model is
 *      destroyed, when its cache is emptied, after a restore.
 * A failed assert is a bug in the model, never in the trace: it prints where and what, and
 * aborts. (`memplay replay --check` runs the check op after every event, in any build.)
 */
#ifndef SIM_DEBUG
#define SIM_DEBUG 0
#endif

__attribute__((noreturn, cold)) static inline void sim_assert_fail(const char *file, int line, const char *func,
                                                                  const char *what, const char *detail) {
  fprintf(stderr, "memplay: internal error in the model: %s:%d: %s: '%s' does not hold%s%s\n", file, line, func, what,
          detail ? ": " : "", detail ? detail : "");
  abort();
}

#if SIM_DEBUG >= 1
#define sim_assert_internal(e) ((e) ? (void)0 : sim_assert_fail(__FILE__, __LINE__, __func__, #e, NULL))
#else
#define sim_assert_internal(e) ((void)0)
#endif

#if SIM_DEBUG >= 2
#define sim_assert_expensive(e) ((e) ? (void)0 : sim_assert_fail(__FILE__, __LINE__, __func__, #e, NULL))
/* check: a model's check op, int (*)(void *ctx, char *err, size_t errlen). */
#define sim_assert_valid(check, ctx)                                         \
  do {                                                                       \
    char sim_err_[SIM_ERRLEN];                                               \
    if ((check)((ctx), sim_err_, sizeof sim_err_))                           \
      sim_assert_fail(__FILE__, __LINE__, __func__, #check "() == 0", sim_err_); \
  } while (0)
#else
#define sim_assert_expensive(e) ((void)0)
#define sim_assert_valid(check, ctx) ((void)0)
#endif

#endif
