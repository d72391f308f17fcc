/* categorize.h: what each allocation holds, decided from the source, the call stack or the lifetime. */
#ifndef REPLAY_CATEGORIZE_H
#define REPLAY_CATEGORIZE_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/*
 * A pass over a stored trace, run by the import driver for every trace it imports (inside the
 * import's transaction), that gives a category to each allocation (device and host) whose
 * category is still unknown. Categories a source gave (SIM_CATSRC_SOURCE) or a user set are
 * never changed. The rules, in the order they are tried (docs/formats.md, "Categories"):
 *
 *   stack     the allocation's call stack (snapshot frames, or for Kineto the operators open
 *             around the memory event) says which code made it: gradient accumulation and
 *             zero_grad -> gradient; optimizer code -> optimizer_state when it outlives the
 *             optimizer phase, else temporary; backward code -> gradient when it outlives the
 *             backward phase, else temporary; module construction or moving a model ->
 *             parameter; data loading or a top-level copy to the device -> input; forward
 *             code -> activation when it lives into the backward pass, else temporary.
 *   lifetime  otherwise: live across two step boundaries, or from the start of the trace to
 *             its end -> parameter (persistent); live into a backward pass that began after it
 *             was made -> activation; freed otherwise -> temporary; still live at the end
 *             without any of these -> unknown.
 *
 * Steps come from step markers (and, in traces without them, from forward code that follows
 * optimizer code); phases from phase markers and from the stacks of the allocations.
 */
typedef struct categorize_stats {
  int64_t allocations;                 /* allocation events (device and host), pre-existing included */
  int64_t changed;                     /* allocations this pass gave a category */
  int64_t count[SIM_CATSRC__COUNT];    /* allocations by how their category is decided, after the pass */
  int64_t bytes[SIM_CATSRC__COUNT];
  int64_t by_category[SIM_CAT__COUNT]; /* allocations by category, after the pass */
} categorize_stats;

/* Runs the pass on one trace and stores its counts as import notes (trace_stats). Returns 0, or
 * -1 with a message in err. stats may be NULL. */
int categorize_trace(store *s, int64_t trace_id, categorize_stats *stats, char *err, size_t errlen);

/* For the import driver: categorize_mark before an import, categorize_since after it runs the
 * pass on every trace added in between. -1 / -1 with a message on error. */
int64_t categorize_mark(store *s);
int categorize_since(store *s, int64_t mark, char *err, size_t errlen);

/* Sets the category of event seq of a trace (an importer that learns it after writing the event). */
int categorize_set(store *s, int64_t trace_id, int64_t seq, int category, int cat_source);

#endif
