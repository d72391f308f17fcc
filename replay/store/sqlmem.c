/* sqlmem.c: SQLite's memory, counted without a lock.
 *
 * Every connection memplay opens bounds what SQLite may hold (a progress handler interrupts a
 * statement past STORE_MAX_SQLITE_MEMORY, a crafted store or Nsight Systems export being the
 * danger). SQLite's own count, sqlite3_memory_used(), is kept under one process-wide mutex taken
 * by every allocation, and a comparison's workers, each opening its own connection and reading
 * its schema, queue on it: on 16 cores the opens took 21 ms each instead of 1 (docs/performance.md,
 * "Round twenty"). So SQLite's statistics are turned off and its allocations go through the
 * functions below, which count the bytes with one atomic addition: the same bound, no lock.
 *
 * The methods must be set before SQLite initializes itself, which its first connection does;
 * store_sqlite_init() is called before every connection memplay opens. When something else
 * initialized SQLite first (a program linking memplay's libraries that opened a database
 * itself), the count stays SQLite's own.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

/* Each allocation carries its size in a header of 8 bytes, as SQLite's own allocator does where
 * the C library cannot say how large a block is; SQLite asks for 8-byte alignment only. */
#define HDR 8

static _Atomic int64_t used;
static int counted; /* the methods below are SQLite's (set once, before any connection) */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *mem_malloc(int n) {
  if (n <= 0) return NULL;
  int64_t *p = malloc((size_t)n + HDR);
  if (!p) return NULL;
  *p = n;
  atomic_fetch_add_explicit(&used, n, memory_order_relaxed);
  return (char *)p + HDR;
}

static void mem_free(void *q) {
  if (!q) return;
  int64_t *p = (int64_t *)((char *)q - HDR);
  atomic_fetch_sub_explicit(&used, *p, memory_order_relaxed);
  free(p);
}

static void *mem_realloc(void *q, int n) {
  if (!q) return mem_malloc(n);
  if (n <= 0) return NULL; /* SQLite frees with xFree, never by a size of 0 */
  int64_t *p = (int64_t *)((char *)q - HDR), old = *p;
  int64_t *r = realloc(p, (size_t)n + HDR);
  if (!r) return NULL; /* the old block stays, and so does its count */
  *r = n;
  atomic_fetch_add_explicit(&used, n - old, memory_order_relaxed);
  return (char *)r + HDR;
}

static int mem_size(void *q) { return q ? (int)*(int64_t *)((char *)q - HDR) : 0; }

static int mem_roundup(int n) { return n > INT32_MAX - 7 ? n : (n + 7) & ~7; }

static int mem_init(void *arg) {
  (void)arg;
  return SQLITE_OK;
}

static void mem_shutdown(void *arg) { (void)arg; }

static void install(void) {
  static const sqlite3_mem_methods methods = {mem_malloc, mem_free, mem_realloc, mem_size, mem_roundup,
                                              mem_init,   mem_shutdown, NULL};
  /* SQLITE_MISUSE for both when SQLite is already initialized: its own count goes on */
  if (sqlite3_config(SQLITE_CONFIG_MALLOC, &methods) != SQLITE_OK) return;
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  counted = 1;
}

void store_sqlite_init(void) { pthread_once(&once, install); }

int64_t store_sqlite_memory_used(void) {
  return counted ? atomic_load_explicit(&used, memory_order_relaxed) : sqlite3_memory_used();
}
