/* store.h: the SQLite trace store: traces, events, call stacks, recorded allocator actions, devices, runs. */
#ifndef REPLAY_STORE_H
#define REPLAY_STORE_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/event.h"

/* 'MPLY': the application_id that marks a memplay store (PRAGMA application_id). */
#define STORE_APPLICATION_ID 0x4D504C59
/* Schema version this build writes (PRAGMA user_version); see store_schema.c. */
extern const int store_schema_version;

#define STORE_ERRLEN 1024
/* Events per trace (an event's id is trace_id << 32 | seq). */
#define STORE_MAX_EVENTS (INT64_C(1) << 32)

typedef struct store store;

/* STORE_IMMUTABLE (with STORE_READONLY): open the file as immutable, taking no locks and making
 * no -wal or -shm files: for a store on a shared filesystem that nothing writes while it is read. */
enum { STORE_CREATE = 1, STORE_READONLY = 2, STORE_IMMUTABLE = 4 };

/* SQLite's allocations counted without its process-wide lock (sqlmem.c): called before any
 * connection is opened (store_open does). */
void store_sqlite_init(void);
/* The bytes SQLite holds in the whole process: what every connection's bound is checked against. */
int64_t store_sqlite_memory_used(void);

/* Opens (and with STORE_CREATE creates or migrates) the store at path. */
int store_open(store **s, const char *path, int flags, char *err, size_t errlen);
void store_close(store *s);
/* Deletes the store at path and the files SQLite keeps beside it (its log, the log's index, a
 * rollback journal): for temporary stores. */
void store_remove_files(const char *path);
sqlite3 *store_db(store *s);
const char *store_path(const store *s);
/* The last error, with the SQL that failed when there is one. */
const char *store_error(const store *s);

/*
 * Statements are prepared once per connection and kept, keyed by the address of their SQL
 * text (so pass a string literal or other text that lives as long as the store). The statement
 * comes back reset, with its bindings cleared. NULL on error (store_error says why).
 */
sqlite3_stmt *store_stmt(store *s, const char *sql);
/* With on, error messages include SQLite's own wording and the SQL that failed (--verbose);
 * otherwise they say in words what went wrong and what to do. For the whole process. */
void store_set_verbose(int on);
/* An SQLite result code in words, with what to do (what store errors say without --verbose). */
const char *store_reason(int code);
/* Sets store_error's message (for modules that check their own input before writing). */
void store_seterr_text(store *s, const char *msg);
/* Records a failure of the statement stmt in store_error, with its SQL. Returns -1. */
int store_fail(store *s, sqlite3_stmt *stmt, const char *what);
/* Runs one statement with no results; returns 0 or -1 (store_error says why). */
int store_exec(store *s, const char *sql);

/* Transactions: one per import, so a failed import leaves the store as it was. */
int store_begin(store *s);
int store_commit(store *s);
void store_rollback(store *s);

/*
 * Reads that belong together, in one read transaction: one snapshot of the store, and its locks
 * taken once rather than around every statement (in autocommit each statement is a read
 * transaction of its own). Spans nest: inside a transaction already open (an outer span's, or
 * store_begin's) a span adds nothing, and the outermost end closes the read transaction. A span
 * holds no write lock and writes nothing itself: store_begin inside one first ends its read
 * transaction (a write must not fail because the snapshot it read has gone stale), and a span
 * begun after that begins a new one. While a snapshot is held, other connections' commits wait
 * in the log for it to end before they reach the database file. 0, or -1 (store_error says
 * why; the reads then go statement by statement, and the span is ended all the same).
 */
int store_read_begin(store *s);
void store_read_end(store *s);

/* Strings and call stacks are stored once. Ids are > 0; 0 means none. */
int64_t store_intern_string(store *s, const char *str, size_t len);
typedef struct store_frame {
  const char *name, *file;
  int64_t line;
} store_frame;
/* Interns a call stack given innermost frame first; returns its callsite id. */
int64_t store_intern_stack(store *s, const store_frame *frames, size_t n);
/* Calls fn for each frame of call stack id, innermost first; stops when fn returns non-zero. */
int store_stack_frames(store *s, int64_t id, int (*fn)(void *arg, const store_frame *f), void *arg);
/* A short label for a call stack: the innermost frame of the program's own Python code when
 * there is one ("forward (model.py:22)"), else the innermost frame. Caller frees. */
char *store_stack_label(store *s, int64_t id);
/* Looks a string up by id; returns a pointer valid until the next call, or NULL. */
const char *store_string(store *s, int64_t id);

/* ---------------------------------------------------------------------------------------- */

typedef struct store_trace {
  int64_t id;
  char *name;
  char *source_format; /* jsonl, pytorch_snapshot, kineto, memory_timeline, nsys, generated, recorded, derived */
  char *source_file;
  char *device_name;
  int64_t device_memory; /* bytes, 0 unknown */
  int device_index;      /* -1 unknown */
  char *framework;
  char *allocator;          /* the allocator that recorded it: torch, bfc, cuda, async; NULL unknown */
  char *allocator_settings; /* JSON object text, NULL unknown */
  int64_t batch_size;       /* 0 unknown */
  char *imported_at;
  int64_t event_count;
  int64_t first_ts, last_ts;
  char *attrs;       /* JSON object text with anything else from the source */
  int64_t first_seq; /* the seq its events start at (0 unless its importer left room, see below) */
  char *stored_at;     /* when it came into this store (imported_at is the source's own time); NULL in
                          stores older than schema 3 */
  char *source_digest; /* a digest of the file it was imported from, or NULL */
} store_trace;

void store_trace_clear(store_trace *t);
/* Finds a trace by name, or by id when ref is a number. Returns 0, 1 when absent, -1 on error. */
int store_trace_find(store *s, const char *ref, store_trace *t);
/* Calls fn for every trace in id order; stops early when fn returns non-zero. */
int store_trace_each(store *s, int (*fn)(void *arg, const store_trace *t), void *arg);
/* Deletes a trace with everything that belongs to it (inside the caller's transaction). */
int store_trace_delete(store *s, int64_t id);
/* The first trace imported from a file with this digest: 0 found, 1 none, -1 error. */
int store_trace_find_digest(store *s, const char *digest, store_trace *t);
/* Marks the traces with ids above after_id (those an import added) as imported from a file with
 * this digest (inside the caller's transaction). 0, or -1 (store_error says why). */
int store_traces_set_digest(store *s, int64_t after_id, const char *digest);
/* A name not yet taken: base, or base-2, base-3, ... */
char *store_unique_name(store *s, const char *base);

/* ---------------------------------------------------------------------------------------- */
/* Writing a trace: importers call these inside one transaction. */

/* A recorded allocator action, kept apart from the requests. */
typedef struct store_recorded {
  int64_t before_seq; /* index of the first request event after it */
  int64_t ts;
  const char *action; /* segment_alloc, segment_free, segment_map, segment_unmap, oom, snapshot, totals */
  int device;
  int64_t stream;
  uint64_t addr, size;
  int64_t allocated, reserved; /* totals the allocator reported (Kineto), -1 unknown */
  int64_t device_free;         /* oom: free device memory it saw, -1 unknown */
  int64_t stack;
} store_recorded;

/* The allocator's final state, from a snapshot. */
typedef struct store_segment {
  int device;
  uint64_t address, total_size;
  int64_t stream;
  const char *pool; /* small, large */
  int expandable;
  int64_t allocated_size, requested_size, active_size;
  int64_t stack;
} store_segment;

typedef struct store_block {
  uint64_t segment_address, address, size, requested_size;
  const char *state; /* active_allocated, active_pending_free, inactive */
  int64_t stack;
} store_block;

typedef struct store_writer store_writer;

/* Inserts the trace row (name must be free) and returns a writer for its contents. */
int store_writer_begin(store *s, const store_trace *meta, store_writer **w);
/* Appends an event; ev->seq is assigned. */
int store_writer_event(store_writer *w, sim_event *ev);
/*
 * For importers that learn only at the end what comes first (the blocks live before a PyTorch
 * snapshot's window): before the first event, store_writer_leave_room numbers the events that
 * follow from the middle of the trace's range (STORE_ROOM), so that store_writer_prepend can
 * put up to that many events before all the others later, each before the one prepended last.
 * The seqs the writer hands out and takes (args, recorded actions, categories) are the stored
 * ones; the trace's first_seq says where its events start, and readers (store_reader) count
 * from there, so that a reader sees seq 0, 1, 2, ... as for every other trace.
 */
#define STORE_ROOM (INT64_C(1) << 31)
int store_writer_leave_room(store_writer *w);
int store_writer_prepend(store_writer *w, sim_event *ev);
int store_writer_recorded(store_writer *w, const store_recorded *r);
int store_writer_segment(store_writer *w, const store_segment *seg);
int store_writer_block(store_writer *w, const store_block *b);
/* Extra fields of an event that the event model has no column for (value: JSON text). */
int store_writer_arg(store_writer *w, int64_t seq, const char *key, const char *json_value);
/* An import note: a count of something dropped or guessed, kept as data (severity: info,
 * warning, data_loss). Repeated names add to the value. */
int store_writer_stat(store_writer *w, const char *name, const char *severity, int64_t value, const char *detail);
int64_t store_writer_trace_id(const store_writer *w);
/* Events written so far (the seq of the next appended one, for a writer that left no room). */
int64_t store_writer_events(const store_writer *w);
/* Sets a trace field after the fact (name, allocator_settings, attrs, ...): column must be a trace column. */
int store_writer_set(store_writer *w, const char *column, const char *text);
int store_writer_set_int(store_writer *w, const char *column, int64_t v);
/*
 * An observer sees each event store_writer_event takes, numbered (ev->seq), before it is
 * inserted; it returns 0, or -1 to fail the event (with store_error set). It may then change
 * the category of any event of the trace with store_writer_set_category: in place while the
 * event still waits to be handed to the writer thread, else by an UPDATE when the trace ends.
 */
typedef int (*store_event_fn)(void *arg, const sim_event *ev);
void store_writer_observe(store_writer *w, store_event_fn fn, void *arg);
void store_writer_set_category(store_writer *w, int64_t seq, int category, int cat_source);
/* Waits until the writer thread has inserted every event handed to it and stops it (it starts
 * again with the next event): the connection is then the caller's alone. */
int store_writer_flush(store_writer *w);
/* Moves the trace's device events and recorded actions written so far to device (an importer
 * that learns only at the end which device the trace is of). */
int store_writer_set_device(store_writer *w, int device);
/* Finishes the trace (counts, time span, the late category changes) and frees the writer. */
int store_writer_end(store_writer *w);
/* Frees the writer without finishing (the caller rolls back). */
void store_writer_abort(store_writer *w);

/* ---------------------------------------------------------------------------------------- */
/* Reading events in recorded order, without holding the trace in memory. */

typedef struct store_reader store_reader;
int store_reader_open(store *s, int64_t trace_id, store_reader **r);
/* Positions the reader at the first event with seq >= from (and stops before `to`, -1: end).
 * Readers count seq from the trace's first event (stored seq - first_seq). */
int store_reader_range(store *s, int64_t trace_id, int64_t from, int64_t to, store_reader **r);
/* 1 with an event, 0 at the end, -1 on error (store_error). */
int store_reader_next(store_reader *r, sim_event *ev);
/* The events are read a chunk at a time (docs/trace-store.md), decoded a slice of at most
 * STORE_READER_SLICE events of one chunk at a time (a slice stays in the processor's cache while
 * it is replayed) and lent without a copy: view points *evs at the events of the current slice
 * not yet read and returns how many (0 at the end, -1 on error); they stay valid until advance
 * marks k of them read (replay/engine/source.h). A chunk that fails its checksum is an error
 * naming the trace and the chunk before any of its events is lent; one that does not decode
 * (its checksum right: a chunk written wrongly) is such an error at the slice that does not. */
#define STORE_READER_SLICE 1024
ptrdiff_t store_reader_view(store_reader *r, const sim_event **evs);
void store_reader_advance(store_reader *r, size_t k);
/* The plan's numbers (engine/source.h) of the events the last view lent, or NULL when their chunk
 * keeps no plan. */
const uint32_t *store_reader_slots(const store_reader *r);
/* How many events the reader will hand out, as the trace records its count (a damaged trace may
 * end sooner, with an error). */
size_t store_reader_length(const store_reader *r);
void store_reader_close(store_reader *r);

/* ---------------------------------------------------------------------------------------- */
/* One trace described (store_info.c): its contents counted, for `memplay info`. */

/* A count under a name, with the bytes the counted events add up to where they have sizes. */
typedef struct store_tally {
  char *name;
  int64_t count, bytes;
} store_tally;

/* An import note (store_writer_stat): a count of something dropped or guessed. */
typedef struct store_note {
  char *name, *severity; /* severity: info, warning, data_loss */
  int64_t value;
} store_note;

typedef struct store_summary {
  store_tally *kinds; /* events by kind (alloc, free, memcpy, ...), in the order of their ids */
  size_t nkinds;
  int64_t *devices; /* the devices its events are on, ascending */
  size_t ndevices;
  int64_t *streams; /* the streams of its allocations, copies, memsets and kernels, ascending (0: none) */
  size_t nstreams;
  store_tally *recorded; /* recorded allocator actions by action, alphabetical */
  size_t nrecorded;
  store_tally *categories; /* allocations (device and host) by category, in the order of their ids */
  size_t ncategories;
  store_tally *cat_sources; /* the same allocations by how their category was decided ("none": undecided) */
  size_t ncat_sources;
  store_note *notes; /* by name */
  size_t nnotes;
} store_summary;

/* Counts what trace trace_id holds. 0, or -1 (store_error says why) with *sum cleared. */
int store_summary_read(store *s, int64_t trace_id, store_summary *sum);
void store_summary_clear(store_summary *sum);

/* Calls fn for each copy of trace_id that has a recorded duration and a size (SIM_EV_MEMCPY; only
 * its kind, dir, mem, size and dur are filled in): what the time model fits link speeds from, read
 * without decoding the trace's other events. 0, or -1 (store_error says why). */
int store_trace_copies(store *s, int64_t trace_id, void (*fn)(void *arg, const sim_event *ev), void *arg);
/* The copy fit's sums over trace_id's timed copies (sim_copy_fit_add of its events in order; f is
 * initialised here, nothing is solved): those the store kept when the events were written
 * (copy_sums, a few rows), else, where none are kept or they do not add up, a pass over its copies
 * (store_trace_copies). Either way the same bits. 1: the kept sums, 0: a pass, -1: an error
 * (store_error says why). */
struct sim_copy_fit;
int store_trace_copy_fit(store *s, int64_t trace_id, struct sim_copy_fit *f);

/* Calls fn for each segment_alloc (is_new 1) and segment_free (0) trace_id's allocator recorded, in
 * order, with the segment's address. 0, or -1 (store_error says why). */
int store_trace_segments(store *s, int64_t trace_id, void (*fn)(void *arg, uint64_t addr, int is_new), void *arg);

/* Sets the category of stored events: changes[i] = seq << 8 | category | cat_source << 4, seqs
 * as stored (not counted from first_seq), applied in order (of two changes to one event, the
 * later wins); sorts changes by seq. Each chunk touched is decoded, changed
 * and written again (inside the caller's transaction). 0, or -1 (store_error says why). */
int store_set_categories(store *s, int64_t trace_id, uint64_t *changes, size_t n);

/* ---------------------------------------------------------------------------------------- */
/* Checking a store (store_check.c, `memplay check-store`). */

typedef struct store_check_totals {
  int64_t traces, chunks, events, faults;
} store_check_totals;
/* Called with each fault found, in words naming the trace and the chunk. */
typedef void (*store_fault_fn)(void *arg, const char *msg);

/* PRAGMA integrity_check, and chunks (packed or text) that belong to no trace or lack their other
 * form. 0 (faults or not: counted in tot->faults), or -1 when the store cannot be read (store_error). */
int store_check_integrity(store *s, store_fault_fn fault, void *arg, store_check_totals *tot);
/* Every chunk of trace t decoded: its checksum, codec and count, the seqs continuing from one
 * chunk to the next from t->first_seq, the text form equal to the packed one, the events
 * adding up to t->event_count, and the copy fit's kept sums (copy_sums) equal, bit for bit, to
 * those of its decoded events. 0 (faults or not), or -1 when the store cannot be read. */
int store_check_trace(store *s, const store_trace *t, store_fault_fn fault, void *arg, store_check_totals *tot);

/* Sets the file a trace came from (NULL: none), e.g. when the file it was imported from is gone. */
int store_trace_set_source_file(store *s, int64_t trace_id, const char *path);

#endif
