/* categorize.h: what each allocation holds, decided from the source, the call stack or the lifetime. */
#ifndef REPLAY_CATEGORIZE_H
#define REPLAY_CATEGORIZE_H

#include <stddef.h>
#include <stdint.h>

#include "sim/hashmap.h"
#include "store/store.h"

/*
 * Every allocation (device and host) gets one of the categories of sim/event.h and how it was
 * decided. Categories a source gave (SIM_CATSRC_SOURCE) or a user set are never changed; the
 * others are decided by the rules below, in this order (docs/formats.md, "Categories"):
 *
 *   stack     the allocation's call stack (snapshot frames, or for Kineto the operators open
 *             around the memory event) says which code made it: gradient accumulation and
 *             zero_grad -> gradient (also for what gradient accumulation frees); optimizer code
 *             -> optimizer_state when it outlives the optimizer phase, else temporary; backward
 *             code -> gradient when it outlives the backward phase, else temporary; module
 *             construction or moving a model -> parameter; data loading, or a conversion that
 *             copies from the host at the top level -> input; forward code -> activation when
 *             it lives into a backward pass, else temporary.
 *   lifetime  otherwise: live across two step boundaries, or from the start of the trace to
 *             its end -> parameter (persistent); live into a backward pass that began after it
 *             was made -> activation; freed otherwise -> temporary; still live at the end
 *             without any of these -> unknown (left undecided).
 *
 * Steps come from step markers (and, in traces without them, from forward code that follows
 * optimizer code); phases from phase markers ("backward", "optimizer", "zero_grad", "forward";
 * one with a duration ends with it) and from the stacks of the allocations made during the trace.
 * A block live before the trace began (flagged preexisting) counts as made at its start, before
 * any step or phase, and its stack does not move the phase.
 *
 * The rules are an engine fed events in recorded order (categorizer_*), so that an importer
 * that can give its events their categories before writing them uses the same rules; the pass
 * the import driver runs on every imported trace (categorize_since) feeds it from the store.
 */

/* What one frame of a call stack says (a bit set); a stack says what its frames say together. */
unsigned categorize_frame_flags(const char *name, const char *file);

typedef struct categorizer categorizer;

/* Receives each decision: the allocation's ev->seq as fed, its category and cat_source. 0 or -1. */
typedef int (*categorize_fn)(void *arg, int64_t seq, int category, int cat_source);

/* phase_names: the string ids of the phase marker names "backward", "optimizer", "zero_grad"
 * and "forward" (0 for a name the trace does not use). */
categorizer *categorizer_new(const int64_t phase_names[4], categorize_fn fn, void *arg);
/*
 * Feeds one event. stack_flags: the flags of the event's call stack (allocations, frees,
 * copies; 0 without a stack). ev->stack only has to identify the stack (equal stacks, equal
 * values). Allocations already decided (a category or a cat_source) are left alone. An
 * allocation flagged preexisting may be fed at any point before the next event at its address:
 * it counts as made at the trace's start all the same. 0 or -1 (the callback's -1).
 */
int categorizer_event(categorizer *c, const sim_event *ev, unsigned stack_flags);
/* The trace ends: decides what is still live. 0 or -1. */
int categorizer_finish(categorizer *c);
void categorizer_free(categorizer *c);

/* The import driver: categorize_mark before an import; categorize_since after it runs the pass
 * on every trace added in between and stores counts by method as import notes (trace_stats).
 * Returns -1 / -1 with a message on error. */
int64_t categorize_mark(store *s);
int categorize_since(store *s, int64_t mark, char *err, size_t errlen);

/* Allocations by how their category was decided (the counts categorize_note stores), kept by an
 * importer that feeds the rules as it writes: each allocation counts under its cat_source when
 * written, and an undecided one moves when the rules decide it. pending: sim_map_init/release. */
typedef struct categorize_tally {
  sim_map pending; /* seq of an undecided allocation -> its size */
  int64_t count[SIM_CATSRC__COUNT], bytes[SIM_CATSRC__COUNT];
} categorize_tally;
void categorize_tally_alloc(categorize_tally *t, const sim_event *ev);
void categorize_tally_decided(categorize_tally *t, int64_t seq, int cat_source);

/* The pass on one trace. A trace whose importer stored notes (categorize_note), having used
 * the rules while it wrote, is left as it is. */
int categorize_trace(store *s, int64_t trace_id, char *err, size_t errlen);

/* Stores the counts of allocations (and their bytes) by cat_source as import notes. */
int categorize_note(store *s, int64_t trace_id, const int64_t count[SIM_CATSRC__COUNT],
                    const int64_t bytes[SIM_CATSRC__COUNT]);

/*
 * The rules fed a trace's events as its importer writes them, so that the trace needs no pass
 * afterwards: categorize_online_begin observes the writer (store_writer_observe), sees each event
 * the pass would read, and sets each decision on the event while it still waits in the writer's
 * queue (else the writer updates it when the trace ends). categorize_online_finish decides what is
 * still live, before store_writer_end; categorize_online_note stores the counts the pass would
 * have stored, after it. categorize_online_free frees it at any point (on failure too).
 */
typedef struct categorize_online categorize_online;
categorize_online *categorize_online_begin(store *s, store_writer *w);
int categorize_online_finish(categorize_online *co);
int categorize_online_note(categorize_online *co, int64_t trace_id);
void categorize_online_free(categorize_online *co);

/* Sets the category of event seq of a trace (an importer that learns it after writing the event). */
int categorize_set(store *s, int64_t trace_id, int64_t seq, int category, int cat_source);

#endif
