/* store_starts.c: a recorded window's start state, rebuilt once and kept beside its trace (window_starts). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checksum.h"
#include "store_int.h"
#include "store_starts.h"

/*
 * A replay of a recorded window under its allocator starts from the state `memplay validate`
 * rebuilds (session/window_start.c): a full validate pass, most of the work of such a replay. The
 * state is a function of the trace, which does not change once stored, and of the code that
 * rebuilds it, which the caller names by its key (a digest of those sources: validate.h). So it is
 * kept in `window_starts`, one row per trace, and taken again while the key is the same. A change
 * to what it was rebuilt from (the trace's row, its recorded actions, segments and blocks, its
 * chunks: SQL can edit any of them) deletes the row, by the schema's triggers. The row is derived
 * data: a row made by other code, or one that does not decode, is rebuilt and written over, never
 * believed.
 *
 * `data` is, little-endian: the device (4 bytes), the item count n (4 bytes), then n items of
 * START_ITEM_BYTES each: flags (is_segment | expandable << 1 | pool << 8 | state << 16, 4 bytes),
 * 4 zero bytes, then addr, size, requested, stream, handle, trace_addr (8 bytes each). `crc32` is
 * the CRC-32 of `data`, as for event_chunks.
 */

enum { START_HEAD_BYTES = 8, START_ITEM_BYTES = 56 };

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const unsigned char *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

/* The state as a row's data (caller frees), its length in *len. */
static unsigned char *start_pack(const replay_start *st, size_t *len) {
  *len = START_HEAD_BYTES + st->n * START_ITEM_BYTES;
  unsigned char *b = sim_xcalloc(1, *len), *p = b + START_HEAD_BYTES;
  put32(b, (uint32_t)st->device);
  put32(b + 4, (uint32_t)st->n);
  for (size_t i = 0; i < st->n; i++, p += START_ITEM_BYTES) {
    const sim_walk_item *it = &st->items[i];
    uint32_t flags = (it->is_segment ? 1u : 0u) | (it->expandable ? 2u : 0u);
    put32(p, flags | (uint32_t)(it->pool & 0xFF) << 8 | (uint32_t)(it->state & 0xFF) << 16);
    put64(p + 8, it->addr);
    put64(p + 16, it->size);
    put64(p + 24, it->requested);
    put64(p + 32, (uint64_t)it->stream);
    put64(p + 40, (uint64_t)it->handle);
    put64(p + 48, st->trace_addr ? st->trace_addr[i] : 0);
  }
  return b;
}

static int by_addr(const void *a, const void *b) {
  const sim_walk_item *x = *(const sim_walk_item *const *)a, *y = *(const sim_walk_item *const *)b;
  return (x->addr > y->addr) - (x->addr < y->addr);
}

/* What the rebuild guarantees of a state, and a model's restore assumes (sim/allocator.h), held
 * to a row that may have been written by hand: each segment's range within the address space and
 * apart from every other; each block inside its segment after the one before it, live. NULL, or
 * what is wrong. */
static const char *start_fault(const replay_start *st) {
  const sim_walk_item **segs = sim_xmalloc((st->nsegments ? st->nsegments : 1) * sizeof *segs);
  const char *why = NULL;
  size_t ns = 0;
  uint64_t end = 0; /* the end of the last segment's last block */
  const sim_walk_item *seg = NULL;
  for (size_t i = 0; i < st->n && !why; i++) {
    const sim_walk_item *it = &st->items[i];
    if (it->is_segment) {
      if (!it->size || it->addr + it->size < it->addr) why = "a segment runs past the end of the address space";
      seg = segs[ns++] = it;
      end = it->addr;
    } else if (!seg) {
      why = "its first item is a block, not a segment";
    } else if (it->state != SIM_BLOCK_ALLOCATED && it->state != SIM_BLOCK_PENDING_FREE) {
      why = "a block is neither allocated nor waiting to be freed";
    } else if (it->addr < end || it->addr + it->size < it->addr || it->addr + it->size > seg->addr + seg->size) {
      why = "a block lies outside its segment or over the block before it";
    } else {
      end = it->addr + it->size;
    }
  }
  if (!why) {
    qsort(segs, ns, sizeof *segs, by_addr);
    for (size_t k = 1; k < ns && !why; k++)
      if (segs[k]->addr < segs[k - 1]->addr + segs[k - 1]->size) why = "two segments overlap";
  }
  free(segs);
  return why;
}

/* The state a row's data holds: 0, or -1 with why (then *out is empty). */
static int start_unpack(const unsigned char *b, size_t len, replay_start *out, char *why, size_t whylen) {
  memset(out, 0, sizeof *out);
  if (len < START_HEAD_BYTES) return snprintf(why, whylen, "it is %zu bytes long, shorter than its header", len), -1;
  size_t n = get32(b + 4);
  if ((len - START_HEAD_BYTES) / START_ITEM_BYTES != n || (len - START_HEAD_BYTES) % START_ITEM_BYTES)
    return snprintf(why, whylen, "it is %zu bytes long, not the length of the %zu items it claims", len, n), -1;
  out->device = (int)get32(b);
  out->items = sim_xcalloc(n ? n : 1, sizeof *out->items);
  out->trace_addr = sim_xcalloc(n ? n : 1, sizeof *out->trace_addr);
  const unsigned char *p = b + START_HEAD_BYTES;
  for (size_t i = 0; i < n; i++, p += START_ITEM_BYTES) {
    uint32_t f = get32(p);
    sim_walk_item *it = &out->items[i];
    it->is_segment = f & 1;
    it->expandable = f >> 1 & 1;
    it->pool = (int)(f >> 8 & 0xFF);
    it->state = (int)(f >> 16 & 0xFF);
    it->addr = get64(p + 8);
    it->size = get64(p + 16);
    it->requested = get64(p + 24);
    it->stream = (int64_t)get64(p + 32);
    it->handle = (uintptr_t)get64(p + 40);
    out->trace_addr[i] = get64(p + 48);
    if (it->is_segment) out->nsegments++;
    else out->nblocks++;
  }
  out->n = n;
  const char *fault = start_fault(out);
  if (fault) {
    replay_start_release(out);
    return snprintf(why, whylen, "does not hold a state the rebuild makes: %s", fault), -1;
  }
  return 0;
}

/* The row's fields checked and decoded: 0, or -1 with why. */
static int start_of_row(sqlite3_stmt *q, int col, replay_start *out, char *why, size_t whylen) {
  uint32_t crc = (uint32_t)sqlite3_column_int64(q, col);
  const unsigned char *b = sqlite3_column_blob(q, col + 1);
  size_t len = (size_t)sqlite3_column_bytes(q, col + 1);
  uint32_t got = io_crc32(b, len);
  if (got != crc) return snprintf(why, whylen, "fails its checksum (CRC-32 %08x stored, %08x computed)", crc, got), -1;
  return start_unpack(b ? b : (const unsigned char *)"", len, out, why, whylen);
}

/* ---- kept and taken ----------------------------------------------------------------------------- */

static int start_get_u(store *s, int64_t trace_id, const char *key, replay_start *out, int *agrees) {
  sqlite3_stmt *q = store_stmt(s, "SELECT agrees, crc32, data FROM window_starts WHERE trace_id = ?1 AND rules = ?2");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  sqlite3_bind_text(q, 2, key, -1, SQLITE_STATIC);
  int rc = sqlite3_step(q), got = 0;
  char why[256];
  if (rc == SQLITE_ROW) {
    got = !start_of_row(q, 1, out, why, sizeof why); /* a row that does not decode is rebuilt */
    if (got && agrees) *agrees = sqlite3_column_int(q, 0) != 0;
  } else if (rc != SQLITE_DONE) {
    got = store_fail(s, q, "cannot read the trace's window start");
  }
  sqlite3_reset(q);
  return got;
}

#define START_PUT_SQL \
  "INSERT OR REPLACE INTO window_starts(trace_id, rules, agrees, crc32, data) VALUES (?1, ?2, ?3, ?4, ?5)"

static void start_bind(sqlite3_stmt *q, int64_t trace_id, const char *key, int agrees, const unsigned char *b,
                       size_t len) {
  sqlite3_bind_int64(q, 1, trace_id);
  sqlite3_bind_text(q, 2, key, -1, SQLITE_STATIC);
  sqlite3_bind_int(q, 3, agrees != 0);
  sqlite3_bind_int64(q, 4, io_crc32(b, len));
  sqlite3_bind_blob(q, 5, b, (int)len, SQLITE_STATIC);
}

/* The row written by a connection of its own, in a transaction of its own: a replay reads its
 * trace in one read transaction (one snapshot), which a write would turn into a write transaction
 * that every other writer waits for until the replay ends. 0, or -1. */
static int start_put_aside(store *s, int64_t trace_id, const char *key, int agrees, const unsigned char *b,
                           size_t len) {
  sqlite3 *db = NULL;
  sqlite3_stmt *q = NULL;
  int rc = -1;
  if (sqlite3_open_v2(s->path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
      sqlite3_busy_timeout(db, 200) == SQLITE_OK && sqlite3_prepare_v2(db, START_PUT_SQL, -1, &q, NULL) == SQLITE_OK) {
    start_bind(q, trace_id, key, agrees, b, len);
    rc = sqlite3_step(q) == SQLITE_DONE ? 0 : -1; /* a store busy for long keeps none this time */
  }
  sqlite3_finalize(q);
  sqlite3_close(db);
  return rc;
}

static int start_put_u(store *s, int64_t trace_id, const char *key, const replay_start *st, int agrees) {
  if (s->readonly) return 0;
  size_t len;
  unsigned char *b = start_pack(st, &len);
  int rc = -1;
  if (s->read_tx && !sqlite3_get_autocommit(s->db)) {
    rc = start_put_aside(s, trace_id, key, agrees, b, len);
  } else { /* no transaction, or the caller's write transaction (a script's runs), which it joins */
    sqlite3_stmt *q = store_stmt(s, START_PUT_SQL);
    if (q) {
      start_bind(q, trace_id, key, agrees, b, len);
      rc = sqlite3_step(q) == SQLITE_DONE ? 0 : store_fail(s, q, "cannot keep the trace's window start");
      sqlite3_reset(q);
    }
  }
  free(b);
  return rc;
}

int store_window_start_get(store *s, int64_t trace_id, const char *key, replay_start *out, int *agrees) {
  int tok = store_lock(s);
  int rc = start_get_u(s, trace_id, key, out, agrees);
  store_unlock(s, tok);
  return rc;
}

int store_window_start_put(store *s, int64_t trace_id, const char *key, const replay_start *st, int agrees) {
  int tok = store_lock(s);
  int rc = start_put_u(s, trace_id, key, st, agrees);
  store_unlock(s, tok);
  return rc;
}

int store_window_start_fault(store *s, int64_t trace_id, char *why, size_t whylen) {
  sqlite3_stmt *q = store_stmt(s, "SELECT crc32, data FROM window_starts WHERE trace_id = ?1");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  int rc = sqlite3_step(q), faulty = 0;
  if (rc == SQLITE_ROW) {
    replay_start st;
    faulty = start_of_row(q, 0, &st, why, whylen) != 0;
    if (!faulty) replay_start_release(&st);
  } else if (rc != SQLITE_DONE) {
    faulty = store_fail(s, q, "cannot check the store");
  }
  sqlite3_reset(q);
  return faulty;
}
