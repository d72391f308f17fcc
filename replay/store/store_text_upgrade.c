/* store_text_upgrade.c: migration 7: each chunk's text form of schema 6 read back and written again in the shorter form. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "store_int.h"

/*
 * Schema 6 wrote a chunk's text as [[ts, info & 0xFFFFFFFF, device, size, addr, stream, dur,
 * stack_id, name_id, step, dev_ts, api_dur], ...], absent values 0 (size to name_id) or -1 (step,
 * dev_ts, api_dur), left off at the end of an array. The upgrade reads that text back into events
 * and writes it again (store_chunk_text), so that SQL answers exactly as before. A text that is
 * not what memplay wrote (not JSON, other values, more events than a chunk holds, another count
 * than the packed chunk's; migration 4 leaves "[]") is written again from the packed form
 * instead, unless that is damaged too: then a text that could be read is kept, and one that could
 * not is left as it is, for `memplay check-store` to report.
 */
enum { V6_FIELDS = 12 };
static const int64_t v6_absent[V6_FIELDS] = {0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1};

typedef struct v6_reader {
  sim_event *ev; /* STORE_CHUNK_EVENTS */
  size_t n;
  int depth, nf;
  int64_t f[V6_FIELDS];
} v6_reader;

/* The fields of one event as schema 6 wrote them into ev; 0, or -1 for values it never wrote. */
static int v6_event(const int64_t *f, int nf, sim_event *ev) {
  if (nf < 3 || f[1] < 0 || f[1] > UINT32_MAX || f[2] < INT16_MIN || f[2] > INT16_MAX || f[7] < 0 || f[8] < 0 ||
      f[9] < -1 || f[9] > INT32_MAX || f[10] < -1 || f[11] < -1)
    return -1;
  sim_event_init(ev);
  ev->ts = f[0];
  ev->kind = (uint8_t)(f[1] & 255);
  ev->mem = (uint8_t)(f[1] >> 8 & 15);
  ev->dir = (uint8_t)(f[1] >> 12 & 15);
  ev->category = (uint8_t)(f[1] >> 16 & 15);
  ev->cat_source = (uint8_t)(f[1] >> 20 & 15);
  ev->flags = (uint8_t)(f[1] >> 24 & 255);
  ev->device = (int16_t)f[2];
  ev->size = (uint64_t)f[3];
  ev->addr = (uint64_t)f[4];
  ev->stream = f[5];
  ev->dur = f[6];
  ev->stack = f[7];
  ev->name = f[8];
  ev->step = (int32_t)f[9];
  ev->dev_ts = f[10];
  ev->api_dur = f[11];
  return 0;
}

static int on_start_array(void *ctx) {
  v6_reader *r = ctx;
  if (++r->depth > 2 || (r->depth == 2 && r->n == STORE_CHUNK_EVENTS)) return 0;
  if (r->depth == 2) memcpy(r->f, v6_absent, sizeof r->f), r->nf = 0;
  return 1;
}

static int on_end_array(void *ctx) {
  v6_reader *r = ctx;
  if (r->depth-- == 2 && v6_event(r->f, r->nf, &r->ev[r->n++])) return 0;
  return 1;
}

static int on_integer(void *ctx, long long v) {
  v6_reader *r = ctx;
  if (r->depth != 2 || r->nf == V6_FIELDS) return 0;
  r->f[r->nf++] = v;
  return 1;
}

/* Anything but integers in arrays is not schema 6's text: the parse stops. */
static int refuse(void *ctx) {
  (void)ctx;
  return 0;
}
static int refuse_bool(void *ctx, int b) {
  (void)b;
  return refuse(ctx);
}
static int refuse_double(void *ctx, double d) {
  (void)d;
  return refuse(ctx);
}
static int refuse_string(void *ctx, const unsigned char *s, size_t n) {
  (void)s, (void)n;
  return refuse(ctx);
}

static const yajl_callbacks v6_callbacks = {
  .yajl_null = refuse,
  .yajl_boolean = refuse_bool,
  .yajl_integer = on_integer,
  .yajl_double = refuse_double,
  .yajl_string = refuse_string,
  .yajl_start_map = refuse,
  .yajl_map_key = refuse_string,
  .yajl_end_map = refuse,
  .yajl_start_array = on_start_array,
  .yajl_end_array = on_end_array,
};

long store_text_v6_read(const unsigned char *text, size_t len, sim_event *ev) {
  v6_reader r = {.ev = ev};
  yajl_handle h = yajl_alloc(&v6_callbacks, NULL, &r);
  int ok = h && yajl_parse(h, text, len) == yajl_status_ok && yajl_complete_parse(h) == yajl_status_ok;
  if (h) yajl_free(h);
  return ok && r.depth == 0 ? (long)r.n : -1;
}

/* One chunk's text rewritten (see above); tev: room for STORE_CHUNK_EVENTS. 0, or -1 on an SQL
 * error. */
static int upgrade_chunk(store *s, chunk_io *io, sim_event *tev, int64_t trace_id, int64_t chunk) {
  sqlite3_stmt *q = store_stmt(s, "SELECT r.rows, c.n, r.first_seq FROM event_rows r "
                                  "LEFT JOIN event_chunks c USING (trace_id, chunk) WHERE r.trace_id = ?1 AND r.chunk = ?2");
  if (!q) return -1;
  sqlite3_bind_int64(q, 1, trace_id);
  sqlite3_bind_int64(q, 2, chunk);
  if (sqlite3_step(q) != SQLITE_ROW) return store_fail(s, q, "cannot read the events' text");
  long n = store_text_v6_read(sqlite3_column_text(q, 0), (size_t)sqlite3_column_bytes(q, 0), tev);
  int agrees = n >= 0 && (sqlite3_column_type(q, 1) == SQLITE_NULL || sqlite3_column_int64(q, 1) == n);
  int64_t seq0 = sqlite3_column_int64(q, 2);
  sqlite3_reset(q);
  const sim_event *ev = tev;
  chunk_meta m;
  if (!agrees && chunk_get(s, io, trace_id, chunk, 0, &m) > 0 && m.chunk == chunk) {
    ev = io->ev;
    n = (long)m.n;
  } else if (n < 0) {
    return 0; /* damaged both ways: left for check-store to report */
  }
  store_chunk_text(ev, (size_t)n, &io->text);
  return chunk_store_text(s, &io->text, trace_id, chunk, seq0); /* the row's own key and first seq */
}

int text_migrate(store *s) {
  /* the chunks' keys first: the table is not rewritten under a statement reading it */
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(s->db, "SELECT trace_id, chunk FROM event_rows ORDER BY trace_id, chunk", -1, &q, NULL) !=
      SQLITE_OK)
    return store_fail(s, NULL, "cannot read the events' text");
  int64_t *keys = NULL;
  size_t n = 0, cap = 0;
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    sim_grow((void **)&keys, &cap, n + 2, sizeof *keys);
    keys[n++] = sqlite3_column_int64(q, 0);
    keys[n++] = sqlite3_column_int64(q, 1);
  }
  sqlite3_finalize(q);
  int err = rc != SQLITE_DONE ? store_fail(s, NULL, "cannot read the events' text") : 0;
  chunk_io io = {0};
  sim_event *tev = sim_xmalloc(STORE_CHUNK_EVENTS * sizeof *tev);
  for (size_t i = 0; !err && i < n; i += 2) err = upgrade_chunk(s, &io, tev, keys[i], keys[i + 1]);
  free(tev);
  chunk_io_release(&io);
  free(keys);
  return err;
}
