/* store_int.h: what the store's own files share (not for other modules). */
#ifndef REPLAY_STORE_INT_H
#define REPLAY_STORE_INT_H

#include <pthread.h>

#include "sim/hashmap.h"
#include "store.h"

const char *store_migration(int version);
/* Whether db's schema is exactly the one the migrations up to version make (SQLite's own
 * sqlite_* objects aside): 0 yes; 1 no, with the first object memplay did not make (or made
 * otherwise) described in what; -1 on an error (its message in what). */
int store_schema_check(sqlite3 *db, int version, char *what, size_t n);

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
  int async;                /* writer threads running: the connection is shared, use conn_lock */
  pthread_mutex_t conn_lock;
  store_writer *writer;      /* the writer whose thread is running, if any (at most one runs) */
};

void store_seterr(store *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
