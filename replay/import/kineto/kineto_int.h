/* kineto_int.h: what the Kineto importer's files share: records, parse state, join, baseline, walks. */
#ifndef REPLAY_IMPORT_KINETO_INT_H
#define REPLAY_IMPORT_KINETO_INT_H

#include <stddef.h>
#include <stdint.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>

#include "engine/extsort.h"
#include "import/categorize.h"
#include "import/importer.h"
#include "sim/allocator.h"
#include "sim/hashmap.h"

/*
 * How a trace is read (docs/formats.md, "PyTorch profiler (Kineto) traces"):
 *
 *   parse    The file is streamed, never held whole nor made into a tree. yajl's event parser
 *            reads what lies outside traceEvents; the elements of traceEvents go through a
 *            strict scanner in front of yajl (jsonscan.h), which calls the same callbacks and
 *            hands yajl whatever it does not take. A reading thread feeds a parser thread,
 *            which packs each element into batches that this thread handles in file order.
 *            (reader.c, parse.c, pipe.c)
 *   records  Each element becomes a fixed-size record. Kineto does not write events in time
 *            order (each thread's operators, then its memory events, then each GPU activity
 *            next to its runtime call), and memplay stores them in host issue order, so they
 *            are reordered in bounded memory by external sorts (extsort.h):
 *              1. runtime calls and device activities meet by correlation id -- most in a small
 *                 window while reading, the rest in a sort -- and each activity takes its
 *                 launch's host time (ts) and duration (api_dur);
 *              2. everything by host time: operators (the call stacks of the events inside
 *                 them, and the step and phase markers), memory events, joined activities.
 *            (records.c, join.c)
 *   walks    Sort 2 is read three times: for the memory allocated before the window (the
 *            baseline that makes replayed totals absolute), for the categories (categorize.h:
 *            the rules need to know when each allocation is freed), and to write the events,
 *            each allocation with its category. (baseline.c, categories.c, walk.c)
 *   trace    The trace row takes the file's top-level metadata, and what the import merged,
 *            counted or dropped becomes the trace's notes. (meta.c, notes.c)
 *
 * kineto.c runs the steps in this order and is the importer's entry in the registry.
 */

/* Memory for reordering, whatever the size of the file: half for the join's sort (then for the
 * categories' decisions), three eighths for the events' sort, an eighth for memory events'. */
#define KINETO_SORT_MEMORY (64u << 20)
#define KINETO_MAX_CAPTURE (8u << 20) /* top-level metadata kept as JSON text */
#define KINETO_MAX_DROPPED_KINDS 24

/* ---- the records the sorts carry ---------------------------------------------------------- */

enum { R_RUNTIME = 1, R_ACTIVITY, R_OP, R_MEMORY, R_OOM, R_EVENT };
/* Device activity kinds (krec.sub for R_ACTIVITY). */
enum { ACT_KERNEL = 1, ACT_MEMCPY, ACT_MEMSET, ACT_SYNC, ACT_EVENT };
/* Runtime call kinds (krec.sub for R_RUNTIME). */
enum { RT_OTHER = 0, RT_SYNC_DEVICE, RT_SYNC_STREAM, RT_SYNC_EVENT, RT_QUERY };
/* Operator classes (krec.sub for R_OP, a bit set). */
enum { OP_STEP = 1, OP_OPTIMIZER = 2, OP_ZERO_GRAD = 4, OP_BACKWARD = 8, OP_PYTHON = 16 };
/* Runtime call flags (krec.flags for R_RUNTIME). */
enum { RTF_ASYNC = 1 };

#define NO_THREAD INT64_MIN

/* One record: 96 bytes whatever its type, fields shared where types never need both. */
typedef struct krec {
  int64_t ts, dur;  /* ns, as written (relative to baseTimeNanoseconds when the file has it) */
  int64_t idx;      /* position in traceEvents (R_EVENT: its launch's) */
  int64_t tid;      /* host thread, NO_THREAD when none */
  union {
    int64_t corr;   /* R_RUNTIME, R_ACTIVITY: correlation id, -1 none */
    int64_t dev_ts; /* R_EVENT: start on the device, -1 unknown */
    int64_t addr;   /* R_MEMORY */
    int64_t file;   /* R_OP: python_function file (string id) */
  };
  union {
    int64_t total_alloc; /* R_MEMORY, R_OOM: -1 unknown */
    int64_t api_dur;     /* R_EVENT */
  };
  union {
    int64_t total_res; /* R_MEMORY, R_OOM */
    int64_t stream;    /* R_ACTIVITY, R_EVENT */
  };
  int64_t bytes;    /* R_MEMORY: signed Bytes; R_ACTIVITY, R_EVENT: bytes; R_OP step: the step number */
  int64_t name;     /* string id */
  int32_t device, line;
  int64_t ord;      /* R_EVENT: the activity's own position in traceEvents (its launch's come in file order) */
  uint8_t type, sub;
  uint8_t kind; /* R_EVENT: sim_event_kind; R_ACTIVITY sync: which; R_OP: categorize_frame_flags of the frame */
  uint8_t mem, dir, flags, devtype, rtflags;
} krec;

/* Sort 1: by correlation id, a launch before its activities. */
int kineto_cmp_corr(const void *a, const void *b);
/* Sort 2: by host time; at the same time operators first, outer (longer) ones before inner,
 * then everything else in file order (an activity at its launch's place, by rank). */
int kineto_cmp_time(const void *a, const void *b);

/* ---- the element being parsed ------------------------------------------------------------- */

enum {
  CAT_NONE = 0,
  CAT_CPU_OP,
  CAT_USER_ANNOTATION,
  CAT_PYTHON_FUNCTION,
  CAT_INSTANT,
  CAT_KERNEL,
  CAT_MEMCPY,
  CAT_MEMSET,
  CAT_CUDA_SYNC,
  CAT_CUDA_EVENT,
  CAT_RUNTIME,
  CAT_DRIVER,
  CAT_FLOW,
  CAT_OTHER,
};

/* Element keys and args keys (bit positions in kelem.have). */
enum { E_PH, E_CAT, E_NAME, E_PID, E_TID, E_TS, E_DUR, E_ARGS };
enum {
  A_ADDR,
  A_BYTES_SIGNED, /* "Bytes" of a memory event */
  A_TOTAL_ALLOC,
  A_TOTAL_RES,
  A_DEVTYPE,
  A_DEVID,
  A_DEVICE,
  A_STREAM,
  A_CORR,
  A_NBYTES, /* "bytes" of a copy or memset */
  A_SYNC_KIND,
  A__COUNT
};

typedef struct kelem {
  char ph;
  int cat;
  uint32_t have;     /* E_* bits */
  uint32_t args;     /* A_* bits */
  int64_t ts, dur, tid;
  int64_t a[A__COUNT];
  char sync_kind[24];
} kelem;

/* A parsed element as the handler sees it (from the parser's state, or from a batch). */
typedef struct kview {
  const kelem *e;
  const char *name, *cat, *bad; /* NUL-terminated; cat: the category's text when memplay does not know it;
                                   bad: the first field of a wrong type, or "" */
  size_t name_len, cat_len;
  int64_t nelem; /* its position in traceEvents */
} kview;

typedef struct top_value {
  char *key;
  char *json;
} top_value;

typedef struct dropped_kind {
  char name[48];
  int64_t n;
  int unknown;
} dropped_kind;

typedef struct joiner joiner;
typedef struct kpipe kpipe;

/*
 * The import's state. The parser thread owns the part from h to nelem (and perr, pmsg); the
 * handler (this thread) owns the rest; they meet only through the batches (kpipe).
 */
typedef struct kparse {
  import_ctx *ic;
  extsort *by_corr, *by_time, *by_time_mem; /* sort 2 keeps memory events apart (walk.c, merged_next) */
  joiner *join;
  /* the parser's: where it is */
  yajl_handle h;
  int depth;          /* open containers */
  int in_events;      /* inside traceEvents (the array is at depth 2) */
  int seen_events;    /* a traceEvents array was found */
  int elem_key;       /* current key in the element (E_*), -1 other */
  int args_key;       /* current key in args (A_*), -1 other */
  int ghost;          /* the next element is the reader's stand-in for ones the scanner read */
  int in_args;        /* the args object is open (depth 4) */
  /* top-level values other than traceEvents, captured as JSON */
  char *top_key;
  yajl_gen cap;
  int capturing;
  size_t captured;
  top_value *tops;
  size_t ntops, tops_cap;
  int64_t top_dropped;
  /* the element */
  kelem e;
  char bad[200]; /* the first field with a wrong type */
  char *name;
  size_t name_len, name_cap;
  char *cat_text; /* for unknown categories */
  size_t cat_len, cat_cap;
  int64_t nelem;
  char err[768];    /* the handler's failure (and everything after the parse) */
  int failed;
  char perr[768];   /* a failure of the parser's callbacks */
  int pfailed;
  char pmsg[IMPORT_ERRLEN]; /* the reader's message when the parse failed */
  kpipe *pipe;               /* elements go to the handler through it (NULL: handled at once) */
  /* the handler's: what was seen */
  int64_t n_ops, n_memory, n_runtime, n_activity, n_flow, n_meta, n_oom;
  dropped_kind dropped[KINETO_MAX_DROPPED_KINDS];
  size_t ndropped;
  int64_t dropped_other;
  uint64_t devices_used; /* bit per device index < 64 (the trace row's device; events keep any index) */
  int64_t non_cuda_memory;
  /* op name texts by string id, for interning call stacks */
  sim_map texts; /* string id -> offset + 1 in arena */
  sim_map frame_flags; /* name id << 32 ^ file id -> categorize_frame_flags */
  sim_map name_class;  /* name id | kind << 56 -> what the name says + 1 (kind 1: an operator's class, 2: a
                          runtime call's kind and flags, 3: a copy's direction and memory) */
  char *arena;
  size_t alen, acap;
} kparse;

/* kineto.c: the handler's failure, kept in p->err (the first one only). */
void kineto_fail(kparse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- reading (reader.c, parse.c, pipe.c) ------------------------------------------------------ */

/* The parse callbacks (parse.c), for yajl and the scanner alike; the names of the args keys. */
extern const yajl_callbacks kineto_cbs;
extern const char *const kineto_args_names[A__COUNT];
/* Reads the whole file on this thread (with the scanner, or through yajl alone): 0, or -1 with
 * the message in p->pmsg or the import context. */
int kineto_read_file(kparse *p, int scanner);
/* Parses the file: with the scanner, on a parser thread while this one handles the elements. */
int kineto_parse(kparse *p, int scanner);
/* The element just parsed: to the handler, directly or in a batch. 0 stops the parse. */
int kineto_element_done(kparse *p);
/* The element just sent ended at this byte offset and line (pp may be NULL). */
void kineto_pipe_commit(kpipe *pp, uint64_t off, uint64_t line);
/* Hands over what the parser sent and waits until it is handled: from then on the parser
 * handles elements itself. 0, or -1 when the handler stopped. */
int kineto_pipe_drain(kpipe *pp);
/* Whether the handler has failed (pp may be NULL). */
int kineto_pipe_stopped(const kpipe *pp);

/* ---- elements into records (records.c) ----------------------------------------------------------- */

/* One element: a record for the sorts or the join, a count, or a failure (0). */
int kineto_handle_element(kparse *p, const kview *v);
/* Interns a string in the store (keeping its text for call stacks when keep_text): its id, or -1. */
int64_t kineto_intern(kparse *p, const char *s, size_t n, int keep_text);
/* The text of a string interned with keep_text, or "". */
const char *kineto_text(const kparse *p, int64_t id);
/* A record into sort 2 (memory events to their own part) or sort 1: 1, or 0 on failure. */
int kineto_add_time(kparse *p, const krec *r);
int kineto_add_corr(kparse *p, const krec *r);

/* ---- the join of launches and device activities (join.c) --------------------------------------- */

#define KINETO_JOIN_WINDOW 32 /* records in the window (--set join_window) */

typedef struct jwin_entry jwin_entry;

struct joiner {
  kparse *p;
  /* the window: a ring of recent runtime calls and one of unmatched activities, with their
   * correlation ids apart (-2: a free slot) so that a look-up is one short scan */
  jwin_entry *rts, *acts;
  int64_t *rt_corr, *act_corr;
  size_t size, rt_next, act_next;
  /* sort 1's groups */
  krec *group;
  size_t ngroup, cap;
  krec rt;
  int have_rt;
  int64_t rt_joined;
  int64_t corr;
  int64_t merged, before_window, extra_runtime, kernels;
  sim_map queries; /* name id -> calls not stored (runtime_kind) */
};

void kineto_joiner_init(joiner *j, kparse *p, size_t size);
void kineto_joiner_release(joiner *j);
/* A runtime call that is an event of its own (a query is only counted). 1, or 0 on failure. */
int kineto_emit_runtime(joiner *j, const krec *rt);
/* A runtime call, or a device activity, read: it meets its partners in the window, or goes on
 * to sort 1. 1, or 0 on failure. */
int kineto_window_runtime(joiner *j, const krec *rt);
int kineto_window_activity(joiner *j, const krec *act);
/* After the parse: the window emptied into sort 1, and sort 1's groups joined. 0 or -1. */
int kineto_join_by_correlation(kparse *p, joiner *j);

/* ---- memory that existed before the window (baseline.c) ---------------------------------------- */

typedef struct pre_block {
  uint64_t addr;
  int64_t size;
} pre_block;

/*
 * Per device (and the host, device -1): the recorded "Total Allocated" after the first memory
 * event that carries it, minus the bytes the window had allocated by then, is what was
 * allocated before profiling began. Blocks freed in the window but never allocated in it are
 * part of that baseline with a known address and size; the rest becomes one block of its own.
 */
typedef struct devbase {
  int device;
  int have_total;
  int64_t running;        /* bytes allocated in the window so far */
  int64_t baseline;
  int64_t explicit_bytes; /* in pre-existing blocks found through their frees */
  sim_map live;           /* addr -> size of blocks live in the window */
  sim_map pre_addrs;      /* addr -> 1 for pre-existing blocks */
  pre_block *pre;
  size_t npre, cap;
  int64_t duplicate_allocs, repeated_frees;
} devbase;

typedef struct kbase {
  devbase *d;
  size_t n, cap;
  int64_t first_ts;
  int any;
} kbase;

/* Reads sort 2's memory events once for the baseline of each device. 0 or -1. */
int kineto_find_baseline(kparse *p, kbase *b);
void kineto_base_release(kbase *b);

/* ---- the events, as the passes see them (walk.c, categories.c) ------------------------------------ */

/*
 * Sort 2 is walked twice more, making the same events each time: once feeding them to the
 * category rules (categorize.h), whose decisions go through a small sort of their own into
 * allocation order, and once writing them, each allocation with its decided category. So the
 * trace is written categorized, and the pass the import driver runs afterwards has nothing
 * left to decide (it counts). Call stacks are the operators open on the event's thread.
 */

typedef struct opframe {
  int64_t end, name, file;
  int32_t line;
  uint8_t cls;
  unsigned flags; /* categorize_frame_flags of this frame and the ones around it */
  uint64_t key;   /* identifies the chain of frames down to this one */
} opframe;

typedef struct tstack {
  int64_t tid;
  opframe *f;
  size_t n, cap;
  int64_t stack_id; /* the interned call stack of the open operators, when valid */
  int valid;
} tstack;

typedef struct kdecision kdecision;

typedef struct kwalk {
  kparse *p;
  int writing; /* 0: the pass that categorizes; 1: the pass that writes */
  int64_t base; /* baseTimeNanoseconds */
  tstack *threads;
  size_t nthreads, threads_cap;
  store_frame *frames;
  size_t frames_cap;
  int32_t step;
  int64_t step_end;
  int backward_marked;
  int64_t names[4]; /* backward, optimizer, zero_grad, forward */
  int64_t allocs;   /* allocations so far */
  categorizer *cat;
  extsort *decisions;
  store_writer *w;
  const kdecision *next; /* the next decision, in allocation order */
  int64_t n_steps, n_phases, totals, preexisting;
  int64_t by_method[SIM_CATSRC__COUNT], bytes_by_method[SIM_CATSRC__COUNT]; /* allocations written */
} kwalk;

/* One walk over sort 2: the categorizing pass (writing 0) or the writing pass. 0 or -1. */
int kineto_walk(kwalk *kw, const kbase *b);
void kineto_walk_release(kwalk *kw);
/* What a frame (operator name and python file ids) says to the category rules, once per frame. */
unsigned kineto_frame_flags(kparse *p, int64_t name, int64_t file);
/* The categorizing pass: the rules see every event; their decisions go to a sort by allocation. */
int kineto_categorize(kwalk *kw, const kbase *b, uint64_t memory);
/* The writing pass's start: the decisions, in allocation order, from the first. 0 or -1. */
int kineto_decisions_rewind(kwalk *kw);
/* Gives allocation number ordinal its decided category, and counts it by how it was decided. */
int kineto_decision_apply(kwalk *kw, sim_event *ev, int64_t ordinal);

/* ---- the trace (meta.c, notes.c) --------------------------------------------------------------- */

/* A top-level field's value as JSON text, or NULL. */
const char *kineto_top_json(const kparse *p, const char *key);
/* The trace's attrs (JSON text, caller frees), with its device name and memory set in m. */
char *kineto_trace_attrs(const kparse *p, const kbase *b, store_trace *m);
/* Counts an element memplay does not keep, by kind (unknown: a category it does not know). */
void kineto_drop(kparse *p, const char *what, size_t n, int unknown);
/* The trace's notes: what was merged, dropped, counted. 0 or -1. */
int kineto_write_notes(kwalk *kw, const kbase *b, const joiner *j);

#endif
