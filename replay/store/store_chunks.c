/* store_chunks.c: a trace's events in the store's chunks: writing, reading, patching, moving schema-3 rows, checking. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checksum.h"
#include "store_int.h"

#define CHUNK_MASK ((int64_t)STORE_CHUNK_EVENTS - 1)

void chunk_io_release(chunk_io *io) {
  store_chunk_enc_release(&io->enc);
  store_bytes_release(&io->blob);
  store_text_release(&io->text);
  free(io->ev);
  memset(io, 0, sizeof *io);
}

static void chunk_io_room(chunk_io *io) {
  if (!io->ev) io->ev = sim_xmalloc(STORE_CHUNK_EVENTS * sizeof *io->ev);
}

int chunk_pack(chunk_io *io, const sim_event *ev, size_t n) {
  store_chunk_encode(&io->enc, ev, n, &io->blob);
  io->crc = io_crc32(io->blob.p, io->blob.n);
  return 0;
}

/* The packed form chunk_pack made, as the chunk of stored seqs seq0 .. seq0 + n - 1. */
static int chunk_store_packed(store *s, chunk_io *io, int64_t trace_id, int64_t seq0, size_t n) {
  sqlite3_stmt *q = store_stmt(s, "INSERT OR REPLACE INTO event_chunks(trace_id, chunk, first_seq, n, codec, crc32, data) "
                                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  sqlite3_bind_int64(q, 2, seq0 >> STORE_CHUNK_SHIFT);
  sqlite3_bind_int64(q, 3, seq0);
  sqlite3_bind_int64(q, 4, (int64_t)n);
  sqlite3_bind_int(q, 5, STORE_CHUNK_CODEC);
  sqlite3_bind_int64(q, 6, io->crc);
  sqlite3_bind_blob(q, 7, io->blob.p, (int)io->blob.n, SQLITE_STATIC);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(s, q, "cannot store events");
  sqlite3_reset(q);
  return 0;
}

int chunk_store_text(store *s, const store_text *text, int64_t trace_id, int64_t chunk, int64_t seq0) {
  sqlite3_stmt *q = store_stmt(s, "INSERT OR REPLACE INTO event_rows(trace_id, chunk, first_seq, ts0, addr0, rows) "
                                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  sqlite3_bind_int64(q, 2, chunk);
  sqlite3_bind_int64(q, 3, seq0);
  sqlite3_bind_int64(q, 4, text->ts0);
  sqlite3_bind_int64(q, 5, text->addr0);
  sqlite3_bind_text(q, 6, (const char *)text->rows.p, (int)text->rows.n, SQLITE_STATIC);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(s, q, "cannot store events");
  sqlite3_reset(q);
  return 0;
}

int chunk_store(store *s, chunk_io *io, const store_text *text, int64_t trace_id, int64_t seq0, size_t n) {
  if (chunk_store_packed(s, io, trace_id, seq0, n)) return -1;
  return chunk_store_text(s, text, trace_id, seq0 >> STORE_CHUNK_SHIFT, seq0);
}

int chunk_put(store *s, chunk_io *io, int64_t trace_id, int64_t seq0, const sim_event *ev, size_t n) {
  chunk_pack(io, ev, n);
  store_chunk_text(ev, n, &io->text);
  return chunk_store(s, io, &io->text, trace_id, seq0, n);
}

/* ---- reading one chunk -------------------------------------------------------------------------- */

void trace_words(store *s, int64_t trace_id, char *out, size_t n) {
  sqlite3_stmt *q = store_stmt(s, "SELECT name FROM traces WHERE id = ?1");
  const unsigned char *name = NULL;
  if (q) {
    sqlite3_bind_int64(q, 1, trace_id);
    if (sqlite3_step(q) == SQLITE_ROW) name = sqlite3_column_text(q, 0);
  }
  if (name) snprintf(out, n, "trace '%.200s'", (const char *)name);
  else snprintf(out, n, "trace %lld", (long long)trace_id);
  if (q) sqlite3_reset(q);
}

/* A damaged chunk: the error names the trace and the chunk. Returns -1. */
static int chunk_fault(store *s, int64_t trace_id, int64_t chunk, const char *fmt, ...)
  __attribute__((format(printf, 4, 5)));
static int chunk_fault(store *s, int64_t trace_id, int64_t chunk, const char *fmt, ...) {
  char what[512], who[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  trace_words(s, trace_id, who, sizeof who);
  store_seterr(s, "%s in store '%s' is damaged: its chunk %lld %s", who, s->path, (long long)chunk, what);
  return -1;
}

/* The packed bytes of the chunk in row rowid, read into b (kept between chunks). SQLite's own
 * copy of a large value (sqlite3_column_blob) is a new allocation each time, a quarter megabyte
 * whose pages the kernel faults in and zeroes anew: a tenth of a replay from the store. 0, or -1
 * (a row whose data is not a blob is a damaged chunk). */
static int chunk_blob_read(store *s, int64_t trace_id, int64_t chunk, int64_t rowid, store_bytes *b) {
  sqlite3_blob *h;
  if (sqlite3_blob_open(s->db, "main", "event_chunks", "data", rowid, 0, &h) != SQLITE_OK) {
    char why[256];
    snprintf(why, sizeof why, "%s", sqlite3_errmsg(s->db));
    sqlite3_blob_close(h);
    return chunk_fault(s, trace_id, chunk, "has no packed data to read (%s)", why);
  }
  size_t len = (size_t)sqlite3_blob_bytes(h);
  sim_grow((void **)&b->p, &b->cap, len, 1);
  b->n = len;
  int rc = len ? sqlite3_blob_read(h, b->p, (int)len, 0) : SQLITE_OK;
  sqlite3_blob_close(h);
  return rc == SQLITE_OK ? 0 : store_fail(s, NULL, "cannot read events");
}

/* Checks a chunk whose row said n, codec and crc, its bytes p[0..len): 0, or -1. */
static int chunk_check_bytes(store *s, int64_t trace_id, const chunk_meta *m, int64_t n, int codec, uint32_t crc,
                             const unsigned char *p, size_t len) {
  if (codec != STORE_CHUNK_CODEC)
    return chunk_fault(s, trace_id, m->chunk, "is of codec %d, which this memplay does not know", codec);
  if (n < 1 || n > STORE_CHUNK_EVENTS || m->seq0 >> STORE_CHUNK_SHIFT != m->chunk ||
      (m->seq0 + n - 1) >> STORE_CHUNK_SHIFT != m->chunk)
    return chunk_fault(s, trace_id, m->chunk, "claims %lld events from seq %lld, which do not fit the chunk",
                       (long long)n, (long long)m->seq0);
  uint32_t got = io_crc32(p, len);
  if (got != crc)
    return chunk_fault(s, trace_id, m->chunk, "fails its checksum (CRC-32 %08x stored, %08x computed)", crc, got);
  return 0;
}

/* Checks and decodes a chunk whose row said n, codec and crc, its bytes p[0..len). */
static int chunk_decode_bytes(store *s, int64_t trace_id, int64_t base, chunk_io *io, chunk_meta *m, int64_t n,
                              int codec, uint32_t crc, const unsigned char *p, size_t len) {
  if (chunk_check_bytes(s, trace_id, m, n, codec, crc, p, len)) return -1;
  chunk_io_room(io);
  char why[256];
  if (store_chunk_decode(p, len, (size_t)n, m->seq0 - base, io->ev, why, sizeof why))
    return chunk_fault(s, trace_id, m->chunk, "does not decode to its %lld events: %s", (long long)n, why);
  m->n = (size_t)n;
  return 0;
}

int chunk_decode_row(store *s, sqlite3_stmt *q, int64_t trace_id, int64_t base, chunk_io *io, chunk_meta *m) {
  m->chunk = sqlite3_column_int64(q, 0);
  m->seq0 = sqlite3_column_int64(q, 1);
  const unsigned char *p = sqlite3_column_blob(q, 5);
  return chunk_decode_bytes(s, trace_id, base, io, m, sqlite3_column_int64(q, 2), sqlite3_column_int(q, 3),
                            (uint32_t)sqlite3_column_int64(q, 4), p, (size_t)sqlite3_column_bytes(q, 5));
}

/* The first chunk of the trace from from_chunk on, its bytes read into io->blob and checked (not
 * decoded): 1 with m (its n too), 0 when there is none, -1 on error. */
static int chunk_fetch(store *s, chunk_io *io, int64_t trace_id, int64_t from_chunk, chunk_meta *m) {
  sqlite3_stmt *q = store_stmt(s, "SELECT chunk, first_seq, n, codec, crc32, rowid FROM event_chunks "
                                  "WHERE trace_id = ?1 AND chunk >= ?2 ORDER BY chunk LIMIT 1");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  sqlite3_bind_int64(q, 2, from_chunk);
  int rc = sqlite3_step(q);
  if (rc == SQLITE_DONE) {
    sqlite3_reset(q);
    return 0;
  }
  if (rc != SQLITE_ROW) return store_fail(s, q, "cannot read events");
  m->chunk = sqlite3_column_int64(q, 0);
  m->seq0 = sqlite3_column_int64(q, 1);
  int64_t n = sqlite3_column_int64(q, 2), rowid = sqlite3_column_int64(q, 5);
  int codec = sqlite3_column_int(q, 3);
  uint32_t crc = (uint32_t)sqlite3_column_int64(q, 4);
  sqlite3_reset(q); /* the blob is read by a handle of its own */
  if (chunk_blob_read(s, trace_id, m->chunk, rowid, &io->blob) ||
      chunk_check_bytes(s, trace_id, m, n, codec, crc, io->blob.p, io->blob.n))
    return -1;
  m->n = (size_t)n;
  return 1;
}

int chunk_get(store *s, chunk_io *io, int64_t trace_id, int64_t from_chunk, int64_t base, chunk_meta *m) {
  int got = chunk_fetch(s, io, trace_id, from_chunk, m);
  if (got <= 0) return got;
  chunk_io_room(io);
  char why[256];
  if (store_chunk_decode(io->blob.p, io->blob.n, m->n, m->seq0 - base, io->ev, why, sizeof why))
    return chunk_fault(s, trace_id, m->chunk, "does not decode to its %lld events: %s", (long long)m->n, why);
  return 1;
}

/* ---- patching stored events ------------------------------------------------------------------- */

int chunk_set_categories(store *s, int64_t trace_id, const uint64_t *changes, size_t n) {
  chunk_io io = {0};
  int rc = 0;
  for (size_t i = 0; i < n && !rc;) {
    int64_t seq = (int64_t)(changes[i] >> 8), chunk = seq >> STORE_CHUNK_SHIFT;
    chunk_meta m;
    int got = chunk_get(s, &io, trace_id, chunk, 0, &m);
    if (got < 0) rc = -1;
    else if (!got || m.chunk != chunk) {
      char who[256];
      trace_words(s, trace_id, who, sizeof who);
      store_seterr(s, "cannot set the category of event %lld of %s: no such event", (long long)seq, who);
      rc = -1;
    }
    for (; !rc && i < n && (int64_t)(changes[i] >> 8) >> STORE_CHUNK_SHIFT == chunk; i++) {
      int64_t k = (int64_t)(changes[i] >> 8) - m.seq0;
      if (k < 0 || k >= (int64_t)m.n) continue; /* no such event: as an UPDATE of no row */
      io.ev[k].category = (uint8_t)(changes[i] & 15);
      io.ev[k].cat_source = (uint8_t)(changes[i] >> 4 & 15);
    }
    if (!rc) rc = chunk_put(s, &io, trace_id, m.seq0, io.ev, m.n);
  }
  chunk_io_release(&io);
  return rc;
}

int chunk_set_device(store *s, int64_t trace_id, int device) {
  chunk_io io = {0};
  chunk_meta m;
  int got;
  for (int64_t next = INT64_MIN; (got = chunk_get(s, &io, trace_id, next, 0, &m)) > 0; next = m.chunk + 1) {
    for (size_t i = 0; i < m.n; i++)
      if (io.ev[i].device >= 0) io.ev[i].device = (int16_t)device;
    if (chunk_put(s, &io, trace_id, m.seq0, io.ev, m.n)) {
      got = -1;
      break;
    }
  }
  chunk_io_release(&io);
  return got < 0 ? -1 : 0;
}

/* A change and its place in the caller's list: changes to one event keep their order. */
typedef struct change_at {
  uint64_t change;
  size_t at;
} change_at;

static int cmp_change(const void *a, const void *b) {
  const change_at *x = a, *y = b;
  uint64_t sx = x->change >> 8, sy = y->change >> 8;
  if (sx != sy) return (sx > sy) - (sx < sy);
  return (x->at > y->at) - (x->at < y->at);
}

int store_set_categories(store *s, int64_t trace_id, uint64_t *changes, size_t n) {
  change_at *v = sim_xmalloc((n ? n : 1) * sizeof *v);
  for (size_t i = 0; i < n; i++) v[i] = (change_at){changes[i], i};
  qsort(v, n, sizeof *v, cmp_change);
  for (size_t i = 0; i < n; i++) changes[i] = v[i].change;
  free(v);
  int t = store_lock(s);
  int rc = chunk_set_categories(s, trace_id, changes, n);
  store_unlock(s, t);
  return rc;
}

/* ---- the reader ------------------------------------------------------------------------------ */

struct store_reader {
  store *s;
  int64_t trace_id;
  int64_t first;       /* the trace's first_seq */
  int64_t lo, hi;      /* the stored seqs read: [lo, hi) */
  int64_t count;       /* the trace's event_count */
  int64_t next_chunk;  /* the chunk to read next */
  int64_t expect;      /* the stored seq the next chunk must start at (-1: any) */
  int done;
  chunk_io io;         /* the current chunk's bytes */
  store_chunk_dec dec; /* ... being decoded */
  int64_t chunk;       /* its number */
  int64_t next, stop;  /* the stored seqs of it still to decode for the range: [next, stop) */
  sim_event *slice;    /* STORE_READER_SLICE events */
  size_t pos, n;       /* slice[pos .. n) not yet read */
  /* the chunk's plan (store_plans.c), when it has one: its numbers decoded with the slice's events */
  int planned;
  store_bytes plan;
  plan_cursor pc;
  uint32_t *slots;     /* STORE_READER_SLICE numbers */
};

int store_reader_range(store *s, int64_t trace_id, int64_t from, int64_t to, store_reader **out) {
  *out = NULL;
  int tok = store_lock(s);
  int64_t first = 0, count = 0;
  sqlite3_stmt *fq = store_stmt(s, "SELECT first_seq, event_count FROM traces WHERE id = ?1");
  if (fq) {
    sqlite3_bind_int64(fq, 1, trace_id);
    if (sqlite3_step(fq) == SQLITE_ROW) {
      first = sqlite3_column_int64(fq, 0);
      count = sqlite3_column_int64(fq, 1);
    }
    sqlite3_reset(fq);
  }
  if (fq) store_readers_add(s, 1);
  store_unlock(s, tok);
  if (!fq) return -1;
  if (first < 0 || first >= STORE_MAX_EVENTS) first = 0;
  if (from < 0) from = 0;
  if (to < 0 || to > STORE_MAX_EVENTS - first) to = STORE_MAX_EVENTS - first;
  if (from > to) from = to;
  store_reader *r = sim_xcalloc(1, sizeof *r);
  r->s = s;
  r->trace_id = trace_id;
  r->first = first;
  r->lo = first + from;
  r->hi = first + to;
  r->count = count;
  r->next_chunk = r->lo >> STORE_CHUNK_SHIFT;
  r->expect = from == 0 ? first : -1;
  r->done = r->lo >= r->hi;
  *out = r;
  return 0;
}

int store_reader_open(store *s, int64_t trace_id, store_reader **r) { return store_reader_range(s, trace_id, 0, -1, r); }

/* The reader ran out of chunks at stored seq `at`: fine where the trace ends. */
static int reader_end(store_reader *r, int64_t at) {
  r->done = 1;
  int64_t end = r->first + r->count;
  if (r->count > 0 && at >= 0 && at < end && at < r->hi)
    return chunk_fault(r->s, r->trace_id, at >> STORE_CHUNK_SHIFT,
                       "is missing: the trace's %lld events end at seq %lld, its chunks at %lld",
                       (long long)r->count, (long long)(end - r->first), (long long)(at - r->first));
  return 0;
}

/* Decodes the current chunk's next events, up to the stored seq `to` and at most a slice's worth,
 * into the slice: 1, or -1. */
static int reader_decode(store_reader *r, int64_t to) {
  size_t k = to - r->next < STORE_READER_SLICE ? (size_t)(to - r->next) : STORE_READER_SLICE;
  char why[256];
  if (store_chunk_dec_next(&r->dec, k, r->next - r->first, r->slice, why, sizeof why)) {
    r->done = 1;
    r->next = r->stop;
    return chunk_fault(r->s, r->trace_id, r->chunk, "does not decode to its %lld events: %s", (long long)r->dec.n,
                       why);
  }
  if (r->planned && (plan_cursor_slots(&r->pc, k, r->slots, why, sizeof why) ||
                     (r->dec.done == r->dec.n && plan_cursor_done(&r->pc, why, sizeof why)))) {
    r->done = 1;
    r->next = r->stop;
    return chunk_fault(r->s, r->trace_id, r->chunk, "has a damaged plan (event_plans): it %s", why);
  }
  r->next += (int64_t)k;
  r->pos = 0;
  r->n = k;
  return 1;
}

/* Opens chunk m (its bytes in r->io.blob, its plan's in r->plan when r->planned) for decoding, and
 * decodes past its events before the range. 1, or -1 on error. */
static int reader_open_chunk(store_reader *r, const chunk_meta *m, int64_t records, uint32_t crc) {
  char why[256];
  if (store_chunk_dec_open(&r->dec, r->io.blob.p, r->io.blob.n, m->n, why, sizeof why))
    return chunk_fault(r->s, r->trace_id, m->chunk, "does not decode to its %lld events: %s", (long long)m->n, why);
  /* no more records than events up to the chunk's end: the dense table is never larger than its trace */
  int64_t upto = m->seq0 - r->first + (int64_t)m->n;
  if (r->planned && (records < 0 || records > upto || records >= REPLAY_PLAN_NONE))
    return chunk_fault(r->s, r->trace_id, m->chunk, "has a damaged plan (event_plans): it claims %lld records, more "
                       "than the trace's %lld events up to its end", (long long)records, (long long)upto);
  if (r->planned && plan_cursor_open(&r->pc, &r->plan, crc, (uint32_t)records, m->n, why, sizeof why))
    return chunk_fault(r->s, r->trace_id, m->chunk, "has a damaged plan (event_plans): it %s", why);
  if (!r->slice) r->slice = sim_xmalloc(STORE_READER_SLICE * sizeof *r->slice);
  if (r->planned && !r->slots) r->slots = sim_xmalloc(STORE_READER_SLICE * sizeof *r->slots);
  r->chunk = m->chunk;
  r->next = m->seq0;
  r->stop = m->seq0 + (int64_t)m->n < r->hi ? m->seq0 + (int64_t)m->n : r->hi;
  int64_t from = r->lo > r->next ? (r->lo < r->stop ? r->lo : r->stop) : r->next;
  while (r->next < from) /* the range starts inside the chunk */
    if (reader_decode(r, from) < 0) return -1;
  r->pos = r->n = 0;
  return 1;
}

/* Loads the next chunk that holds events of the range. 1, 0 at the end, -1 on error. */
static int reader_load(store_reader *r) {
  if (r->done) return 0;
  chunk_meta m;
  int64_t records = 0;
  uint32_t crc = 0;
  int tok = store_lock(r->s); /* a trace may be read while another is written (a derived trace saved) */
  int got = chunk_fetch(r->s, &r->io, r->trace_id, r->next_chunk, &m);
  int planned = got > 0 ? plan_get(r->s, r->trace_id, m.chunk, &r->plan, &records, &crc) : 0;
  store_unlock(r->s, tok);
  if (planned < 0) return -1;
  r->planned = planned;
  if (got <= 0) return got < 0 ? -1 : reader_end(r, r->expect);
  if (m.seq0 >= r->hi) return reader_end(r, r->expect);
  if (r->expect >= 0 && m.seq0 != r->expect)
    return chunk_fault(r->s, r->trace_id, m.chunk, "starts at seq %lld where seq %lld was due (events are missing)",
                       (long long)(m.seq0 - r->first), (long long)(r->expect - r->first));
  r->next_chunk = m.chunk + 1;
  r->expect = m.seq0 + (int64_t)m.n;
  if (r->expect >= r->hi) r->done = 1;
  return reader_open_chunk(r, &m, records, crc);
}

ptrdiff_t store_reader_view(store_reader *r, const sim_event **evs) {
  while (r->pos == r->n) {
    int rc = r->next < r->stop ? reader_decode(r, r->stop) : reader_load(r);
    if (rc <= 0) return rc;
  }
  *evs = r->slice + r->pos;
  return (ptrdiff_t)(r->n - r->pos);
}

void store_reader_advance(store_reader *r, size_t k) { r->pos += k; }

const uint32_t *store_reader_slots(const store_reader *r) { return r->planned ? r->slots + r->pos : NULL; }

size_t store_reader_length(const store_reader *r) {
  int64_t end = r->first + r->count < r->hi ? r->first + r->count : r->hi;
  return end > r->lo ? (size_t)(end - r->lo) : 0;
}

int store_reader_next(store_reader *r, sim_event *ev) {
  if (r->pos == r->n) {
    const sim_event *v;
    ptrdiff_t k = store_reader_view(r, &v);
    if (k <= 0) return (int)k;
  }
  *ev = r->slice[r->pos++];
  return 1;
}

void store_reader_close(store_reader *r) {
  if (!r) return;
  int tok = store_lock(r->s);
  store_readers_add(r->s, -1);
  store_unlock(r->s, tok);
  chunk_io_release(&r->io);
  store_chunk_dec_release(&r->dec);
  free(r->slice);
  free(r->slots);
  store_bytes_release(&r->plan);
  free(r);
}

/* Only the copies with a recorded duration and a size. */
typedef struct copy_filter {
  void (*fn)(void *arg, const sim_event *ev);
  void *arg;
} copy_filter;

static void copy_timed(void *arg, const sim_event *ev) {
  copy_filter *f = arg;
  if (ev->dur > 0 && ev->size > 0) f->fn(f->arg, ev);
}

/* The trace's timed copies (what the copy fit reads): each chunk's checksum checked, then only
 * its enums, dur and size columns decoded. */
static int copies_u(store *s, int64_t trace_id, void (*fn)(void *arg, const sim_event *ev), void *arg) {
  sqlite3_stmt *q = store_stmt(s, "SELECT chunk, n, crc32, rowid FROM event_chunks WHERE trace_id = ?1 AND chunk >= ?2 "
                                  "ORDER BY chunk LIMIT 1");
  if (!q) return -1;
  copy_filter f = {fn, arg};
  store_bytes b = {0};
  int err = 0;
  for (int64_t next = INT64_MIN; !err; ) {
    sqlite3_bind_int64(q, 1, trace_id);
    sqlite3_bind_int64(q, 2, next);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      err = store_fail(s, q, "cannot read the trace's copies");
      break;
    }
    int64_t chunk = sqlite3_column_int64(q, 0), n = sqlite3_column_int64(q, 1), rowid = sqlite3_column_int64(q, 3);
    uint32_t crc = (uint32_t)sqlite3_column_int64(q, 2);
    sqlite3_reset(q); /* the blob is read by a handle of its own */
    if (chunk_blob_read(s, trace_id, chunk, rowid, &b)) {
      err = -1;
      break;
    }
    uint32_t got = io_crc32(b.p, b.n);
    char why[256];
    if (got != crc)
      err = chunk_fault(s, trace_id, chunk, "fails its checksum (CRC-32 %08x stored, %08x computed)", crc, got);
    else if (n < 0 || store_chunk_copies(b.p, b.n, (size_t)n, copy_timed, &f, why, sizeof why))
      err = chunk_fault(s, trace_id, chunk, "does not decode to its %lld events: %s", (long long)n,
                        n < 0 ? "a negative count" : why);
    next = chunk + 1;
  }
  sqlite3_reset(q);
  store_bytes_release(&b);
  return err;
}

int store_trace_copies(store *s, int64_t trace_id, void (*fn)(void *arg, const sim_event *ev), void *arg) {
  int tok = store_lock(s);
  int rc = copies_u(s, trace_id, fn, arg);
  store_unlock(s, tok);
  return rc;
}

/* ---- schema 3's rows into chunks (migration 4) ------------------------------------------------ */

static void row_event(sqlite3_stmt *q, sim_event *ev) {
  int64_t info = sqlite3_column_int64(q, 6);
  sim_event_init(ev);
  ev->seq = sqlite3_column_int64(q, 0) & 0xffffffff;
  ev->ts = sqlite3_column_int64(q, 1);
  ev->dur = sqlite3_column_int64(q, 2);
  ev->addr = (uint64_t)sqlite3_column_int64(q, 3);
  ev->size = (uint64_t)sqlite3_column_int64(q, 4);
  ev->stream = sqlite3_column_int64(q, 5);
  ev->kind = (uint8_t)(info & 255);
  ev->mem = (uint8_t)(info >> 8 & 15);
  ev->dir = (uint8_t)(info >> 12 & 15);
  ev->category = (uint8_t)(info >> 16 & 15);
  ev->cat_source = (uint8_t)(info >> 20 & 15);
  ev->flags = (uint8_t)(info >> 24 & 255);
  ev->device = (int16_t)((info >> 32) - 1);
  ev->stack = sqlite3_column_int64(q, 7);
  ev->name = sqlite3_column_int64(q, 8);
  ev->step = sqlite3_column_type(q, 9) == SQLITE_NULL ? -1 : sqlite3_column_int(q, 9);
  ev->dev_ts = sqlite3_column_type(q, 10) == SQLITE_NULL ? -1 : sqlite3_column_int64(q, 10);
  ev->api_dur = sqlite3_column_type(q, 11) == SQLITE_NULL ? -1 : sqlite3_column_int64(q, 11);
}

/* A chunk as migration 4 leaves it: packed, and in the text table of its schema with no events, for
 * migration 7 to write from the packed form (store_text_upgrade.c; this memplay writes no other
 * text form). */
static int chunk_put_v4(store *s, chunk_io *io, int64_t trace_id, int64_t seq0, size_t n) {
  chunk_pack(io, io->ev, n);
  if (chunk_store_packed(s, io, trace_id, seq0, n)) return -1;
  sqlite3_stmt *q = store_stmt(s, "INSERT INTO event_rows(trace_id, chunk, first_seq, rows) VALUES (?1, ?2, ?3, '[]')");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  sqlite3_bind_int64(q, 2, seq0 >> STORE_CHUNK_SHIFT);
  sqlite3_bind_int64(q, 3, seq0);
  if (sqlite3_step(q) != SQLITE_DONE) return store_fail(s, q, "cannot store events");
  sqlite3_reset(q);
  return 0;
}

int chunk_migrate_rows(store *s) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(s->db,
                         "SELECT id, ts, dur, addr, size, stream, info, stack_id, name_id, step, dev_ts, api_dur "
                         "FROM events_v3 ORDER BY id",
                         -1, &q, NULL) != SQLITE_OK)
    return store_fail(s, NULL, "cannot read the events of schema 3");
  chunk_io io = {0};
  chunk_io_room(&io);
  int64_t trace = -1, seq0 = 0;
  size_t n = 0;
  int rc = 0, step;
  while (!rc && (step = sqlite3_step(q)) == SQLITE_ROW) {
    int64_t id = sqlite3_column_int64(q, 0), t = id >> 32, seq = id & 0xffffffff;
    if (n && (t != trace || seq != seq0 + (int64_t)n || !(seq & CHUNK_MASK))) {
      if (t == trace && seq >> STORE_CHUNK_SHIFT == seq0 >> STORE_CHUNK_SHIFT) {
        store_seterr(s, "trace %lld has no event %lld between events %lld and %lld: its events cannot be packed",
                     (long long)t, (long long)(seq0 + (int64_t)n), (long long)(seq0 + (int64_t)n - 1), (long long)seq);
        rc = -1;
        break;
      }
      rc = chunk_put_v4(s, &io, trace, seq0, n);
      n = 0;
    }
    if (!n) {
      trace = t;
      seq0 = seq;
    }
    row_event(q, &io.ev[n++]);
  }
  if (!rc && step != SQLITE_DONE) rc = store_fail(s, q, "cannot read the events of schema 3");
  if (!rc && n) rc = chunk_put_v4(s, &io, trace, seq0, n);
  sqlite3_finalize(q);
  chunk_io_release(&io);
  return rc;
}
