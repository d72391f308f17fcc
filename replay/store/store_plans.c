/* store_plans.c: each trace's plan (engine/source.h) kept beside its chunks: numbered as they are written, read as they are, checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "io/checksum.h"
#include "store_int.h"

/*
 * A chunk's plan (docs/trace-store.md, event_plans): for each of its events, in order, the event's
 * number plus one (0: none), little-endian in as many bytes as the trace's numbers up to there need:
 * one byte while `records` (how many records the trace has numbered up to the chunk's end) is below
 * 255, two below 65,535, else four. Every event has its place, so that reading the numbers is a
 * widening copy, with no test of each event's kind. Chunks are numbered in seq order; a trace whose
 * chunks were written out of order, or before others (prepended events), is numbered again from its
 * stored chunks once it is written.
 */

static unsigned plan_width(uint32_t records) { return records < 255 ? 1 : records < 65535 ? 2 : 4; }

/* The plan of n events whose numbers are slots, of a trace with `records` records up to there,
 * into out (replacing its contents). */
static void plan_pack(const uint32_t *slots, size_t n, uint32_t records, store_bytes *out) {
  unsigned w = plan_width(records);
  sim_grow((void **)&out->p, &out->cap, n * w + 1, 1);
  unsigned char *o = out->p;
  for (size_t i = 0; i < n; i++) {
    uint32_t v = slots[i] + 1; /* REPLAY_PLAN_NONE + 1: 0 */
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
  plan_pack(pw->slots, n, pw->planner.next, &pw->blob);
  return 1;
}

int plan_writer_store(store *s, const plan_writer *pw, int64_t trace_id) {
  return plan_store(s, trace_id, pw->seq0 >> STORE_CHUNK_SHIFT, pw->planner.next, &pw->blob);
}

/* ---- numbering a stored trace ------------------------------------------------------------------ */

/* The trace's plan rows removed: 0, or -1. */
static int plans_delete(store *s, int64_t trace_id) {
  sqlite3_stmt *q = store_stmt(s, "DELETE FROM event_plans WHERE trace_id = ?1");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(s, q, "cannot store the trace's plan");
  sqlite3_reset(q);
  return 0;
}

int plans_of_trace(store *s, int64_t trace_id) {
  if (plans_delete(s, trace_id)) return -1;
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
    plan_pack(slots, m.n, pl.next, &b);
    rc = plan_store(s, trace_id, m.chunk, pl.next, &b);
  }
  if (!rc && (got < 0 || pl.full)) rc = plans_delete(s, trace_id); /* a damaged trace keeps no plan (its replays say
                                                                        what is damaged) */
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

int plan_cursor_open(plan_cursor *c, const store_bytes *b, uint32_t crc, uint32_t records, size_t n, char *why,
                     size_t whylen) {
  uint32_t got = io_crc32(b->p, b->n);
  if (got != crc) return snprintf(why, whylen, "fails its checksum (CRC-32 %08x stored, %08x computed)", crc, got), -1;
  c->width = plan_width(records);
  c->p = b->p;
  c->end = b->p + b->n;
  c->size = b->n;
  c->n = n;
  c->records = records;
  return 0;
}

/* The numbers of k events from p, each w bytes: the largest value read (a number plus one). One
 * loop per width; on x86, the one- and two-byte widths (every trace under 65,535 records) widen
 * sixteen or eight values at a time. */
static uint32_t widen1(const unsigned char *p, size_t k, uint32_t *slots) {
  size_t i = 0;
  uint32_t most = 0;
#ifdef __SSE2__
  const __m128i zero = _mm_setzero_si128(), one = _mm_set1_epi32(1);
  __m128i top = zero;
  for (; i + 16 <= k; i += 16) {
    __m128i v = _mm_loadu_si128((const __m128i *)(p + i));
    top = _mm_max_epu8(top, v);
    __m128i lo = _mm_unpacklo_epi8(v, zero), hi = _mm_unpackhi_epi8(v, zero);
    _mm_storeu_si128((__m128i *)(slots + i), _mm_sub_epi32(_mm_unpacklo_epi16(lo, zero), one));
    _mm_storeu_si128((__m128i *)(slots + i + 4), _mm_sub_epi32(_mm_unpackhi_epi16(lo, zero), one));
    _mm_storeu_si128((__m128i *)(slots + i + 8), _mm_sub_epi32(_mm_unpacklo_epi16(hi, zero), one));
    _mm_storeu_si128((__m128i *)(slots + i + 12), _mm_sub_epi32(_mm_unpackhi_epi16(hi, zero), one));
  }
  unsigned char lanes[16];
  _mm_storeu_si128((__m128i *)lanes, top);
  for (int j = 0; j < 16; j++) most = lanes[j] > most ? lanes[j] : most;
#endif
  for (; i < k; i++) {
    uint32_t v = p[i];
    slots[i] = v - 1;
    most = v > most ? v : most;
  }
  return most;
}

static uint32_t widen2(const unsigned char *p, size_t k, uint32_t *slots) {
  size_t i = 0;
  uint32_t most = 0;
#ifdef __SSE2__
  const __m128i zero = _mm_setzero_si128(), one = _mm_set1_epi32(1), flip = _mm_set1_epi16((short)0x8000);
  __m128i top = flip; /* the largest value, its top bit flipped: SSE2 compares 16 bits signed only */
  for (; i + 8 <= k; i += 8) {
    __m128i v = _mm_loadu_si128((const __m128i *)(p + 2 * i)); /* little-endian, as the plan is */
    top = _mm_max_epi16(top, _mm_xor_si128(v, flip));
    _mm_storeu_si128((__m128i *)(slots + i), _mm_sub_epi32(_mm_unpacklo_epi16(v, zero), one));
    _mm_storeu_si128((__m128i *)(slots + i + 4), _mm_sub_epi32(_mm_unpackhi_epi16(v, zero), one));
  }
  uint16_t lanes[8];
  _mm_storeu_si128((__m128i *)lanes, _mm_xor_si128(top, flip));
  for (int j = 0; j < 8; j++) most = lanes[j] > most ? lanes[j] : most;
#endif
  for (; i < k; i++) {
    uint32_t v = (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
    slots[i] = v - 1;
    most = v > most ? v : most;
  }
  return most;
}

static uint32_t widen4(const unsigned char *p, size_t k, uint32_t *slots) {
  uint32_t most = 0;
  for (size_t i = 0; i < k; i++) {
    uint32_t v = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                 (uint32_t)p[4 * i + 3] << 24;
    slots[i] = v - 1;
    most = v > most ? v : most;
  }
  return most;
}

static int plan_size_wrong(const plan_cursor *c, char *why, size_t whylen) {
  snprintf(why, whylen, "holds %zu bytes, not the %zu of its %zu events' numbers", c->size, c->n * c->width, c->n);
  return -1;
}

int plan_cursor_slots(plan_cursor *c, size_t k, uint32_t *slots, char *why, size_t whylen) {
  if (k * c->width > (size_t)(c->end - c->p)) return plan_size_wrong(c, why, whylen);
  uint32_t most = c->width == 1 ? widen1(c->p, k, slots) : c->width == 2 ? widen2(c->p, k, slots) : widen4(c->p, k, slots);
  if (most > c->records) return snprintf(why, whylen, "numbers an event past the %u records numbered", c->records), -1;
  c->p += k * c->width;
  return 0;
}

int plan_cursor_done(const plan_cursor *c, char *why, size_t whylen) {
  return c->p == c->end ? 0 : plan_size_wrong(c, why, whylen);
}

/* ---- checking ---------------------------------------------------------------------------------- */

int plan_get(store *s, int64_t trace_id, int64_t chunk, store_bytes *b, int64_t *records, uint32_t *crc) {
  sqlite3_stmt *q = store_stmt(s, "SELECT records, crc32, data FROM event_plans WHERE trace_id = ?1 AND chunk = ?2");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  sqlite3_bind_int64(q, 2, chunk);
  int rc = sqlite3_step(q);
  if (rc == SQLITE_ROW) {
    *records = sqlite3_column_int64(q, 0);
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
static int plan_check_chunk(store *s, const store_trace *t, const chunk_meta *m, const uint32_t *want, uint32_t records, store_bytes *b, uint32_t *got,
                            store_fault_fn fault, void *arg, store_check_totals *tot) {
  int64_t kept_records = 0;
  uint32_t crc = 0;
  char why[256], msg[512];
  int row = plan_get(s, t->id, m->chunk, b, &kept_records, &crc);
  if (row < 0) return -1;
  plan_cursor c;
  if (!row) snprintf(why, sizeof why, "is missing");
  else if (kept_records != records) snprintf(why, sizeof why, "says %lld records, where its events number %u",
                                             (long long)kept_records, records);
  else if (plan_cursor_open(&c, b, crc, records, m->n, why, sizeof why) ||
           plan_cursor_slots(&c, m->n, got, why, sizeof why) || plan_cursor_done(&c, why, sizeof why)) {}
  else if (memcmp(got, want, m->n * sizeof *got))
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
  int n, rc = 0;
  for (int64_t next = INT64_MIN; !rc && (n = chunk_get(s, &io, t->id, next, 0, &m)) > 0; next = m.chunk + 1) {
    for (size_t i = 0; i < m.n; i++) want[i] = replay_planner_step(&pl, &io.ev[i]);
    rc = plan_check_chunk(s, t, &m, want, pl.next, &b, got, fault, arg, tot);
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
  free(want);
  free(got);
  store_bytes_release(&b);
  replay_planner_release(&pl);
  chunk_io_release(&io);
  return rc;
}
