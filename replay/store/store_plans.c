/* store_plans.c: each trace's plan (engine/source.h) kept beside its chunks: numbered as they are written, read as they are, checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checksum.h"
#include "store_int.h"

/*
 * A chunk's plan (docs/trace-store.md, event_plans): for each of its events that allocates or frees,
 * in order, the event's number plus one (0: none), little-endian in as many bytes as the largest
 * such value of the trace up to there needs: one byte while `records` (how many records the trace
 * has numbered up to the chunk's end) is below 256, two below 65,536, else four. A fixed width is
 * read without a test per event. Chunks are numbered in seq order; a trace whose chunks were written
 * out of order, or before others (prepended events), is numbered again from its stored chunks once
 * it is written.
 */

/* Which kinds name a record: allocations and the three frees. */
static const uint8_t names_record[256] = {
  [SIM_EV_ALLOC] = 1, [SIM_EV_FREE] = 1, [SIM_EV_FREE_REQUESTED] = 1, [SIM_EV_FREE_COMPLETED] = 1,
};

static unsigned plan_width(uint32_t records) { return records < 255 ? 1 : records < 65535 ? 2 : 4; }

/* The plan of n events whose numbers are slots, of a trace with `records` records up to there,
 * into out (replacing its contents). */
static void plan_pack(const sim_event *ev, const uint32_t *slots, size_t n, uint32_t records, store_bytes *out) {
  unsigned w = plan_width(records);
  sim_grow((void **)&out->p, &out->cap, n * w + 1, 1);
  unsigned char *o = out->p;
  for (size_t i = 0; i < n; i++) {
    if (!names_record[ev[i].kind]) continue;
    uint32_t v = slots[i] == REPLAY_PLAN_NONE ? 0 : slots[i] + 1;
    for (unsigned k = 0; k < w; k++) *o++ = (unsigned char)(v >> (8 * k));
  }
  out->n = (size_t)(o - out->p);
}

static int plan_store(store *s, int64_t trace_id, int64_t chunk, uint32_t records, const store_bytes *b) {
  sqlite3_stmt *q = store_stmt(s, "INSERT OR REPLACE INTO event_plans(trace_id, chunk, records, crc32, data) "
                                  "VALUES (?1, ?2, ?3, ?4, ?5)");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  sqlite3_bind_int64(q, 2, chunk);
  sqlite3_bind_int64(q, 3, records);
  sqlite3_bind_int64(q, 4, io_crc32(b->p, b->n));
  sqlite3_bind_blob(q, 5, b->n ? (const void *)b->p : "", (int)b->n, SQLITE_STATIC);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(s, q, "cannot store the trace's plan");
  sqlite3_reset(q);
  return 0;
}

/* ---- numbering as the writer stores chunks ----------------------------------------------------- */

void plan_writer_release(plan_writer *pw) {
  replay_planner_release(&pw->planner);
  free(pw->slots);
  store_bytes_release(&pw->blob);
  memset(pw, 0, sizeof *pw);
}

int plan_writer_batch(plan_writer *pw, const sim_event *ev, int64_t seq0, size_t n) {
  if (pw->redo) return 0;
  if (!pw->slots) { /* the first chunk */
    replay_planner_init(&pw->planner);
    pw->slots = sim_xmalloc(STORE_CHUNK_EVENTS * sizeof *pw->slots);
    pw->seq0 = seq0;
  } else if (seq0 == pw->seq0 + (int64_t)pw->n && seq0 >> STORE_CHUNK_SHIFT != pw->seq0 >> STORE_CHUNK_SHIFT) {
    pw->seq0 = seq0, pw->n = 0; /* the next chunk */
  } else if (seq0 != pw->seq0 || n < pw->n) {
    pw->redo = 1; /* neither the next chunk nor the same one again, longer (a stop stored it part-filled) */
    return 0;
  }
  for (size_t i = pw->n; i < n; i++) pw->slots[i] = replay_planner_step(&pw->planner, &ev[i]);
  pw->n = n;
  if (pw->planner.full) {
    pw->redo = 1;
    return 0;
  }
  plan_pack(ev, pw->slots, n, pw->planner.next, &pw->blob);
  return 1;
}

int plan_writer_store(store *s, const plan_writer *pw, int64_t trace_id) {
  return plan_store(s, trace_id, pw->seq0 >> STORE_CHUNK_SHIFT, pw->planner.next, &pw->blob);
}

/* ---- numbering a stored trace ------------------------------------------------------------------ */

int plans_of_trace(store *s, int64_t trace_id) {
  sqlite3_stmt *q = store_stmt(s, "DELETE FROM event_plans WHERE trace_id = ?1");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(s, q, "cannot store the trace's plan");
  sqlite3_reset(q);
  chunk_io io = {0};
  replay_planner pl;
  replay_planner_init(&pl);
  uint32_t *slots = sim_xmalloc(STORE_CHUNK_EVENTS * sizeof *slots);
  store_bytes b = {0};
  chunk_meta m;
  int got, rc = 0;
  for (int64_t next = INT64_MIN; !rc && (got = chunk_get(s, &io, trace_id, next, 0, &m)) > 0; next = m.chunk + 1) {
    for (size_t i = 0; i < m.n; i++) slots[i] = replay_planner_step(&pl, &io.ev[i]);
    if (pl.full) break; /* too many records to number: the trace keeps no plan */
    plan_pack(io.ev, slots, m.n, pl.next, &b);
    rc = plan_store(s, trace_id, m.chunk, pl.next, &b);
  }
  if (!rc && (got < 0 || pl.full)) { /* a damaged trace keeps no plan (its replays say what is damaged) */
    q = store_stmt(s, "DELETE FROM event_plans WHERE trace_id = ?1");
    if (!q) rc = -1;
    else sqlite3_bind_int64(q, 1, trace_id), rc = sqlite3_step(q) == SQLITE_DONE ? 0 : store_fail(s, q, "cannot store the trace's plan");
    if (q) sqlite3_reset(q);
  }
  free(slots);
  store_bytes_release(&b);
  replay_planner_release(&pl);
  chunk_io_release(&io);
  return rc;
}

int plans_migrate(store *s) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(s->db, "SELECT id FROM traces ORDER BY id", -1, &q, NULL) != SQLITE_OK)
    return store_fail(s, NULL, "cannot read traces");
  int rc, err = 0;
  while (!err && (rc = sqlite3_step(q)) == SQLITE_ROW) err = plans_of_trace(s, sqlite3_column_int64(q, 0));
  sqlite3_finalize(q);
  if (err) return -1;
  return rc == SQLITE_DONE ? 0 : store_fail(s, NULL, "cannot read traces");
}

/* ---- reading ---------------------------------------------------------------------------------- */

int plan_cursor_open(plan_cursor *c, store_bytes *b, uint32_t crc, uint32_t records, char *why, size_t whylen) {
  uint32_t got = io_crc32(b->p, b->n);
  if (got != crc) return snprintf(why, whylen, "fails its checksum (CRC-32 %08x stored, %08x computed)", crc, got), -1;
  sim_grow((void **)&b->p, &b->cap, b->n + 4, 1); /* a value is loaded whole past the end */
  memset(b->p + b->n, 0, 4);
  c->p = b->p;
  c->end = b->p + b->n;
  c->records = records;
  c->width = plan_width(records);
  return 0;
}

static inline uint32_t load32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

int plan_cursor_slots(plan_cursor *c, const sim_event *ev, size_t k, uint32_t *slots, char *why, size_t whylen) {
  const unsigned char *p = c->p;
  const size_t w = c->width;
  const uint32_t mask = w == 4 ? UINT32_MAX : (UINT32_C(1) << (8 * w)) - 1;
  uint32_t past = 0; /* a value past the records numbered */
  for (size_t i = 0; i < k; i++) { /* no branch per event: the kinds come in no order a predictor learns */
    size_t named = names_record[ev[i].kind];
    uint32_t v = load32(p) & mask;
    past |= (uint32_t)named & (v > c->records);
    slots[i] = named ? v - 1 : REPLAY_PLAN_NONE; /* 0 - 1: none */
    p += named * w;
    if (p > c->end) return snprintf(why, whylen, "ends before the number of its event %zu", i), -1;
  }
  if (past) return snprintf(why, whylen, "numbers an event past the %u records numbered", c->records), -1;
  c->p = p;
  return 0;
}

int plan_cursor_done(const plan_cursor *c, char *why, size_t whylen) {
  if (c->p == c->end) return 0;
  return snprintf(why, whylen, "has %zu bytes past its last event's number", (size_t)(c->end - c->p)), -1;
}

/* ---- checking ---------------------------------------------------------------------------------- */

int plan_get(store *s, int64_t trace_id, int64_t chunk, store_bytes *b, uint32_t *records, uint32_t *crc) {
  sqlite3_stmt *q = store_stmt(s, "SELECT records, crc32, data FROM event_plans WHERE trace_id = ?1 AND chunk = ?2");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  sqlite3_bind_int64(q, 2, chunk);
  int rc = sqlite3_step(q);
  if (rc == SQLITE_ROW) {
    *records = (uint32_t)sqlite3_column_int64(q, 0);
    *crc = (uint32_t)sqlite3_column_int64(q, 1);
    size_t len = (size_t)sqlite3_column_bytes(q, 2);
    sim_grow((void **)&b->p, &b->cap, len + 1, 1);
    if (len) memcpy(b->p, sqlite3_column_blob(q, 2), len);
    b->n = len;
  }
  sqlite3_reset(q);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return store_fail(s, NULL, "cannot check the store");
  return rc == SQLITE_ROW;
}

/* Whether the trace keeps a plan: 1, 0, or -1. */
static int has_plan(store *s, int64_t trace_id) {
  sqlite3_stmt *q = store_stmt(s, "SELECT EXISTS (SELECT 1 FROM event_plans WHERE trace_id = ?1)");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  int rc = sqlite3_step(q), has = rc == SQLITE_ROW && sqlite3_column_int(q, 0);
  sqlite3_reset(q);
  return rc == SQLITE_ROW ? has : store_fail(s, NULL, "cannot check the store");
}

/* One chunk's kept plan against the numbers its events get (want): 0, or a fault reported (1). */
static int plan_check_chunk(store *s, const store_trace *t, const chunk_meta *m, const sim_event *ev,
                            const uint32_t *want, uint32_t records, store_bytes *b, uint32_t *got,
                            store_fault_fn fault, void *arg, store_check_totals *tot) {
  uint32_t kept_records = 0, crc = 0;
  char why[256], msg[512];
  int row = plan_get(s, t->id, m->chunk, b, &kept_records, &crc);
  if (row < 0) return -1;
  plan_cursor c;
  if (!row) snprintf(why, sizeof why, "is missing");
  else if (plan_cursor_open(&c, b, crc, kept_records, why, sizeof why) ||
           plan_cursor_slots(&c, ev, m->n, got, why, sizeof why) || plan_cursor_done(&c, why, sizeof why)) {}
  else if (kept_records != records || memcmp(got, want, m->n * sizeof *got))
    snprintf(why, sizeof why, "does not number the chunk's allocations as its events do");
  else return 0;
  snprintf(msg, sizeof msg, "trace '%s' chunk %lld: its plan (event_plans) %s", t->name, (long long)m->chunk, why);
  tot->faults++;
  fault(arg, msg);
  return 1;
}

int plans_check(store *s, const store_trace *t, store_fault_fn fault, void *arg, store_check_totals *tot) {
  int has = has_plan(s, t->id);
  if (has <= 0) return has; /* a trace without a plan is replayed through the engine's hash table */
  chunk_io io = {0};
  replay_planner pl;
  replay_planner_init(&pl);
  uint32_t *want = sim_xmalloc(STORE_CHUNK_EVENTS * sizeof *want), *got = sim_xmalloc(STORE_CHUNK_EVENTS * sizeof *got);
  store_bytes b = {0};
  chunk_meta m;
  int n, rc = 0, tok = store_lock(s);
  for (int64_t next = INT64_MIN; !rc && (n = chunk_get(s, &io, t->id, next, 0, &m)) > 0; next = m.chunk + 1) {
    for (size_t i = 0; i < m.n; i++) want[i] = replay_planner_step(&pl, &io.ev[i]);
    rc = plan_check_chunk(s, t, &m, io.ev, want, pl.next, &b, got, fault, arg, tot);
  }
  if (rc > 0) rc = 0; /* one fault said: the numbers after it follow from it */
  /* chunk_get's faults are the chunk check's to report (store_check_trace) */
  sqlite3_stmt *q = rc ? NULL : store_stmt(s, "SELECT chunk FROM event_plans p WHERE trace_id = ?1 AND NOT EXISTS "
                                              "(SELECT 1 FROM event_chunks c WHERE c.trace_id = p.trace_id AND c.chunk = p.chunk)");
  if (!rc && !q) rc = -1;
  if (q) {
    sqlite3_bind_int64(q, 1, t->id);
    int r;
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
      char msg[512];
      snprintf(msg, sizeof msg, "trace '%s' chunk %lld: a plan (event_plans) of no stored chunk", t->name,
               (long long)sqlite3_column_int64(q, 0));
      tot->faults++;
      fault(arg, msg);
    }
    rc = r == SQLITE_DONE ? 0 : store_fail(s, q, "cannot check the store");
    sqlite3_reset(q);
  }
  store_unlock(s, tok);
  free(want);
  free(got);
  store_bytes_release(&b);
  replay_planner_release(&pl);
  chunk_io_release(&io);
  return rc;
}
