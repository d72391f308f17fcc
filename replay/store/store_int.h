/* store_int.h: what the store's own files share (not for other modules). */
#ifndef REPLAY_STORE_INT_H
#define REPLAY_STORE_INT_H

#include <pthread.h>
#include <sys/types.h>

#include "engine/source.h"
#include "sim/hashmap.h"
#include "chunk.h"
#include "store.h"

const char *store_migration(int version);
/* SQL that finishes migration version after its step in C (moving rows of the old layout), or NULL. */
const char *store_migration_after(int version);
/* Whether db's schema is exactly the one the migrations up to version make (SQLite's own
 * sqlite_* objects aside): 0 yes; 1 no, with the first object memplay did not make (or made
 * otherwise) described in what; -1 on an error (its message in what). */
int store_schema_check(sqlite3 *db, int version, char *what, size_t n);
/* The schema objects (type, name, SQL) of db, sorted, one per line of a single string (free it with
 * sqlite3_free), or NULL. */
char *store_schema_listing(sqlite3 *db);
/* Whether store_schema_listing(db) would be exactly want (1, else 0), compared row by row as
 * SQLite reads them, without building the listing. */
int store_schema_lists_as(sqlite3 *db, const char *want);

/* Interning of byte strings to ids, in memory, in front of the SQL tables. */
typedef struct intern_entry {
  uint64_t hash;
  int64_t id;
  size_t off;
  size_t len;
} intern_entry;

typedef struct intern_table {
  sim_map map; /* hash (+ probe) -> entry index */
  intern_entry *ents;
  size_t n, cap;
  char *arena;
  size_t alen, acap;
} intern_table;

struct store {
  sqlite3 *db;
  char *path;
  int readonly;
  char err[STORE_ERRLEN];
  sim_map stmts;      /* SQL text address -> sqlite3_stmt* */
  intern_table strings, frames, callsites;
  char *strbuf;       /* store_string's result */
  size_t strbuf_cap;
  int in_tx;
  int read_depth;     /* store_read_begin spans open */
  int read_tx;        /* the read transaction the outermost span began is open */
  int async;                /* writer threads running: the connection is shared, use conn_lock */
  pthread_mutex_t conn_lock;
  store_writer *writer;      /* the writer whose thread is running, if any (at most one runs) */
  int readers;               /* store_readers open: the page cache is small (store_readers_add) */
  int bulk;                  /* the open transaction has stored events through a writer's thread */
  int journal;               /* a store this connection created: in rollback-journal mode until its first
                              * import commits or it closes (open_for_writing), then in WAL mode */
};

/* path with suffix appended ("-wal", "-journal"): the name of a file SQLite keeps beside the
 * store. Caller frees. */
char *store_side_path(const char *path, const char *suffix);

void store_seterr(store *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The connection lock, taken only while a writer thread runs; the token says whether it was. */
int store_lock(store *s);
void store_unlock(store *s, int token);

/* A trace's reader opened (delta 1) or closed (-1): while any is open the connection's page
 * cache is small, its pages reused. Called with the connection's lock held. */
void store_readers_add(store *s, int delta);

/* ---- the log's and the database file's writes started early (store_flush.c) ---- */

/* A thread that starts the writes of the log and of the database file every two milliseconds, and
 * every sync_ms milliseconds (0: never) waits for them to reach the disk (fdatasync), while a large
 * import writes its chunks and while its transaction commits (the commit's copy of the log into the
 * database file included). */
typedef struct store_flusher {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int stop;
  int sync_ms;
  int wal_fd; /* the log, opened here (never the database file), or -1 */
  int db_fd;  /* SQLite's own descriptor of the database file (never closed here), or -1 */
  dev_t dev;  /* the database file's device and inode */
  ino_t ino;
} store_flusher;

/* 0 with the thread running (stop it with store_flusher_stop), or -1: nothing to do here. */
int store_flusher_start(store_flusher *f, const store *s, int sync_ms);
void store_flusher_stop(store_flusher *f);

/* ---- chunks (store_chunks.c) ---- */

/* What reading and writing chunks keeps between them: the encoder, a chunk's packed and text
 * forms, and room for a chunk's events. */
typedef struct chunk_io {
  store_chunk_enc enc;
  store_bytes blob;
  store_text text;
  uint32_t crc;
  sim_event *ev; /* STORE_CHUNK_EVENTS */
} chunk_io;
void chunk_io_release(chunk_io *io);

typedef struct chunk_meta {
  int64_t chunk, seq0; /* seq0: the stored seq of its first event */
  size_t n;
} chunk_meta;

/* Packs n events into io's blob and its checksum (no SQL: the writer thread does this without the
 * lock). Their text form (store_chunk_text) is made apart: the writer's importer makes it. */
int chunk_pack(chunk_io *io, const sim_event *ev, size_t n);
/* Stores what chunk_pack made, with the same events' text form, as the chunk of stored seqs
 * seq0 .. seq0 + n - 1, replacing it. */
int chunk_store(store *s, chunk_io *io, const store_text *text, int64_t trace_id, int64_t seq0, size_t n);
/* Stores the text form of chunk `chunk` alone (event_rows), its first stored seq seq0, replacing it. */
int chunk_store_text(store *s, const store_text *text, int64_t trace_id, int64_t chunk, int64_t seq0);
/* Packs, writes as text and stores n events (chunk_pack, store_chunk_text, chunk_store). */
int chunk_put(store *s, chunk_io *io, int64_t trace_id, int64_t seq0, const sim_event *ev, size_t n);
/* Reads the first chunk of trace_id at or after from_chunk into io->ev, its seqs counted from
 * base: 1, 0 when there is none, -1 (a chunk that fails its checks is an error naming the trace
 * and the chunk). */
int chunk_get(store *s, chunk_io *io, int64_t trace_id, int64_t from_chunk, int64_t base, chunk_meta *m);
/* Checks and decodes the chunk row q holds (chunk, first_seq, n, codec, crc32, data) into io->ev,
 * seqs counted from base. 0, or -1 with an error naming the trace and the chunk. */
int chunk_decode_row(store *s, sqlite3_stmt *q, int64_t trace_id, int64_t base, chunk_io *io, chunk_meta *m);
/* The trace's name for a message ("trace 'NAME'", or its id when it has none). */
void trace_words(store *s, int64_t trace_id, char *out, size_t n);
/* Category changes (seq << 8 | category | cat_source << 4, stored seqs, sorted), chunk by chunk. */
int chunk_set_categories(store *s, int64_t trace_id, const uint64_t *changes, size_t n);
/* Moves the trace's device events to device. */
int chunk_set_device(store *s, int64_t trace_id, int device);
/* Migration 4: the rows of schema 3's events table (renamed events_v3) into chunks. */
int chunk_migrate_rows(store *s);
/* Migration 7: every chunk's text form of schema 6 written again in the shorter form
 * (store_text_upgrade.c). */
int text_migrate(store *s);
/* Schema 6's text of a chunk, len bytes, into ev (room for STORE_CHUNK_EVENTS): its events, or -1
 * for a text that is not as schema 6 wrote it. */
long store_text_v6_read(const unsigned char *text, size_t len, sim_event *ev);

/* ---- the copy fit's sums (store_copysums.c) ---- */

/* Every chunk write keeps the events' kind, direction, memory kind, size and duration as the trace's
 * writer stored them (category and device changes touch neither), so the sums the writer kept as
 * it stored them stay true. */
struct sim_copy_fit;
/* Keeps f's sums (unsolved) as trace_id's: copy_sums and traces.timed_copies, replacing any. 0, or -1. */
int copy_sums_put(store *s, int64_t trace_id, const struct sim_copy_fit *f);
/* The sums of trace_id's stored copies, by a pass over its chunks, kept (copy_sums_put). 0, or -1. */
int copy_sums_of_trace(store *s, int64_t trace_id);
/* Migration 5: the sums of every trace already stored (one whose chunks cannot be read keeps none). */
int copy_sums_migrate(store *s);
/* Checks t's kept sums against events (the sums of its decoded events, in order): a fault when they
 * differ or do not add up; none when no sums are kept. 0, or -1 when the store cannot be read. */
int copy_sums_check(store *s, const store_trace *t, const struct sim_copy_fit *events, store_fault_fn fault, void *arg,
                    store_check_totals *tot);

/* ---- the trace's plan (store_plans.c; engine/source.h's replay_plan) ---- */

/* The writer thread's numbering of a trace as it stores its chunks, in seq order. */
typedef struct plan_writer {
  replay_planner planner;
  uint32_t *slots; /* the numbers of the chunk being stored (STORE_CHUNK_EVENTS) */
  int64_t seq0;    /* its first stored seq */
  size_t n;        /* its events numbered */
  int redo;        /* the chunks came out of order: numbered again from the stored chunks at the end */
  store_bytes blob; /* the chunk's plan, packed */
} plan_writer;
void plan_writer_release(plan_writer *pw);
/* Numbers a batch's events (the chunk from seq0, n events): 1 with its plan packed in pw->blob, 0
 * when the trace must be numbered again at the end (redo). No SQL. */
int plan_writer_batch(plan_writer *pw, const sim_event *ev, int64_t seq0, size_t n);
/* Stores what plan_writer_batch packed as the plan of its chunk (under the connection's lock). */
int plan_writer_store(store *s, const plan_writer *pw, int64_t trace_id);
/* The trace's plan made again from its stored chunks, replacing any (a trace whose chunks cannot
 * be read keeps none). 0, or -1. */
int plans_of_trace(store *s, int64_t trace_id);
/* Migration 6: the plan of every trace already stored. */
int plans_migrate(store *s);
/* The plan row of (trace_id, chunk) into b: 1 with its records and crc, 0 when there is none, -1. */
int plan_get(store *s, int64_t trace_id, int64_t chunk, store_bytes *b, int64_t *records, uint32_t *crc);
/* Reading a chunk's plan: open checks its checksum; slots gives the numbers of the next k of the
 * chunk's n events; done, after the last, checks that nothing is left. 0, or -1 with why. */
typedef struct plan_cursor {
  const unsigned char *p, *end;
  size_t size, n; /* the plan's bytes; the chunk's events */
  uint32_t records;
  unsigned width; /* bytes a number takes */
} plan_cursor;
int plan_cursor_open(plan_cursor *c, const store_bytes *b, uint32_t crc, uint32_t records, size_t n, char *why,
                     size_t whylen);
int plan_cursor_slots(plan_cursor *c, size_t k, uint32_t *slots, char *why, size_t whylen);
int plan_cursor_done(const plan_cursor *c, char *why, size_t whylen);
/* Checks t's kept plan against its events (none kept: nothing to check). 0, or -1 when the store
 * cannot be read. */
int plans_check(store *s, const store_trace *t, store_fault_fn fault, void *arg, store_check_totals *tot);

#endif
