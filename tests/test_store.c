/* test_store.c: the trace store: creation, header checks, migrations, writing, reading, interning, rollback. */
#include <unistd.h>

#include "store/store.h"
#include "store/store_int.h"
#include "store_schema_ref.h" /* the listing the build made (replay/store/schema_ref_gen.c) */
#include "test.h"

int test_failures;

static char dir[256];

static void path_of(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static store *open_new(const char *name) {
  char p[512], err[STORE_ERRLEN];
  path_of(p, sizeof p, name);
  unlink(p);
  store *s = NULL;
  if (store_open(&s, p, STORE_CREATE, err, sizeof err)) fprintf(stderr, "%s\n", err);
  /* the tests read the events view as a user's sqlite3 does (its JSON functions need a trusted schema) */
  else sqlite3_db_config(store_db(s), SQLITE_DBCONFIG_TRUSTED_SCHEMA, 1, NULL);
  return s;
}

static int64_t pragma(store *s, const char *sql) {
  sqlite3_stmt *q;
  sqlite3_prepare_v2(store_db(s), sql, -1, &q, NULL);
  int64_t v = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : -1;
  sqlite3_finalize(q);
  return v;
}

static void print_fault(void *arg, const char *msg) {
  (void)arg;
  fprintf(stderr, "fault: %s\n", msg);
}

/* The trace's kept plan, as its reader lends it view by view, is the plan of its events read back
 * (engine/source.h), for every event; and check-store finds no fault in it. */
static void plan_kept_is_the_events(store *s, const char *name) {
  store_trace t;
  CHECK_EQ(store_trace_find(s, name, &t), 0);
  CHECK(pragma(s, "SELECT count(*) FROM event_plans") > 0);
  store_reader *r;
  CHECK_EQ(store_reader_open(s, t.id, &r), 0);
  size_t n = 0, cap = 0, unplanned = 0;
  sim_event *evs = NULL;
  uint32_t *kept = NULL;
  const sim_event *v;
  ptrdiff_t k;
  while ((k = store_reader_view(r, &v)) > 0) {
    const uint32_t *sl = store_reader_slots(r);
    sim_grow((void **)&evs, &cap, n + (size_t)k, sizeof *evs);
    kept = sim_xrealloc(kept, cap * sizeof *kept);
    memcpy(evs + n, v, (size_t)k * sizeof *v);
    for (ptrdiff_t i = 0; i < k; i++) kept[n + (size_t)i] = sl ? sl[i] : REPLAY_PLAN_NONE - 1;
    unplanned += !sl;
    n += (size_t)k;
    store_reader_advance(r, (size_t)k);
  }
  CHECK_EQ(k, 0);
  store_reader_close(r);
  CHECK_EQ(unplanned, 0);
  CHECK_EQ((int64_t)n, t.event_count);
  replay_plan p;
  CHECK_EQ(replay_plan_build(&p, evs, n), 0);
  size_t differ = 0;
  for (size_t i = 0; i < n; i++) differ += p.slot[i] != kept[i];
  CHECK_EQ(differ, 0);
  store_check_totals tot = {0};
  CHECK_EQ(store_check_trace(s, &t, print_fault, NULL, &tot), 0);
  CHECK_EQ(tot.faults, 0);
  replay_plan_release(&p);
  free(evs);
  free(kept);
  store_trace_clear(&t);
}

/* Opening a store compares its schema with the listing the build made (a store that differs, or
 * an older one, takes the full check): a new store lists exactly that, and the full check agrees. */
static void schema_listed_at_build_is_a_new_stores(void) {
  store *s = open_new("ref.db");
  CHECK(s != NULL);
  if (!s) return;
  CHECK_EQ(STORE_SCHEMA_REF_VERSION, store_schema_version);
  char *listing = store_schema_listing(store_db(s));
  CHECK(listing && !strcmp(listing, STORE_SCHEMA_REF));
  sqlite3_free(listing);
  char what[256];
  CHECK_EQ(store_schema_check(store_db(s), store_schema_version, what, sizeof what), 0);
  /* what opening compares, row by row: the same answer as the listing, and no for any other */
  CHECK_EQ(store_schema_lists_as(store_db(s), STORE_SCHEMA_REF), 1);
  char *part = strdup(STORE_SCHEMA_REF);
  part[strlen(part) - 1] = 0;
  CHECK_EQ(store_schema_lists_as(store_db(s), part), 0);
  free(part);
  size_t n = strlen(STORE_SCHEMA_REF);
  char *more = malloc(n + 2);
  snprintf(more, n + 2, "%s\n", STORE_SCHEMA_REF);
  CHECK_EQ(store_schema_lists_as(store_db(s), more), 0);
  free(more);
  CHECK_EQ(store_schema_lists_as(store_db(s), ""), 0);
  CHECK_EQ(store_exec(s, "CREATE VIEW zz_extra AS SELECT 1"), 0);
  CHECK_EQ(store_schema_lists_as(store_db(s), STORE_SCHEMA_REF), 0);
  listing = store_schema_listing(store_db(s));
  CHECK_EQ(store_schema_lists_as(store_db(s), listing), 1);
  sqlite3_free(listing);
  store_close(s);
}

static void new_store_has_header_and_schema(void) {
  store *s = open_new("a.db");
  CHECK(s != NULL);
  if (!s) return;
  CHECK_EQ(pragma(s, "PRAGMA application_id"), STORE_APPLICATION_ID);
  CHECK_EQ(pragma(s, "PRAGMA user_version"), store_schema_version);
  CHECK_EQ(pragma(s, "SELECT count(*) FROM sqlite_schema WHERE name IN ('traces','events','recorded','runs',"
                     "'device_profiles','strings','callsites','frames','segments','blocks','trace_stats')"),
           11);
  CHECK_EQ(pragma(s, "PRAGMA page_size"), 16384);
  store_close(s);
}

static void refuses_foreign_and_newer_files(void) {
  char p[512], err[STORE_ERRLEN];
  store *s;
  /* a file that is not SQLite */
  path_of(p, sizeof p, "junk.db");
  FILE *f = fopen(p, "w");
  fputs("this is not a database, not at all, it just sits here being text\n", f);
  fclose(f);
  CHECK_EQ(store_open(&s, p, STORE_CREATE, err, sizeof err), -1);
  CHECK(strstr(err, "not a memplay store") != NULL);
  /* an SQLite database of another application */
  path_of(p, sizeof p, "other.db");
  unlink(p);
  sqlite3 *db;
  sqlite3_open(p, &db);
  sqlite3_exec(db, "CREATE TABLE t(x); PRAGMA application_id = 7", NULL, NULL, NULL);
  sqlite3_close(db);
  CHECK_EQ(store_open(&s, p, STORE_CREATE, err, sizeof err), -1);
  CHECK(strstr(err, "not a memplay store") != NULL);
  /* a store written by a newer memplay */
  s = open_new("newer.db");
  sqlite3_exec(store_db(s), "PRAGMA user_version = 999", NULL, NULL, NULL);
  store_close(s);
  path_of(p, sizeof p, "newer.db");
  CHECK_EQ(store_open(&s, p, 0, err, sizeof err), -1);
  CHECK(strstr(err, "newer memplay") != NULL && strstr(err, "999") != NULL);
}

static void migrates_an_empty_versioned_store(void) {
  /* A store at version 0 with memplay's application_id is brought up to date in one step. */
  char p[512], err[STORE_ERRLEN];
  path_of(p, sizeof p, "v0.db");
  unlink(p);
  sqlite3 *db;
  sqlite3_open(p, &db);
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA application_id = %d", STORE_APPLICATION_ID);
  sqlite3_exec(db, sql, NULL, NULL, NULL);
  sqlite3_close(db);
  store *s;
  CHECK_EQ(store_open(&s, p, STORE_CREATE, err, sizeof err), 0);
  if (!s) return;
  CHECK_EQ(pragma(s, "PRAGMA user_version"), store_schema_version);
  store_close(s);
}

static int64_t write_trace(store *s, const char *name, int n, int fail_at) {
  store_trace m = {.name = (char *)name, .source_format = (char *)"jsonl", .device_index = 0, .batch_size = 8};
  store_writer *w;
  if (store_writer_begin(s, &m, &w)) return -1;
  store_frame fr[2] = {{"inner", "a.py", 3}, {"outer", "b.py", 9}};
  int64_t stack = store_intern_stack(s, fr, 2);
  for (int i = 0; i < n; i++) {
    if (i == fail_at) {
      store_writer_abort(w);
      return -1;
    }
    sim_event ev;
    sim_event_init(&ev);
    ev.kind = i % 2 ? SIM_EV_FREE : SIM_EV_ALLOC;
    ev.addr = (uint64_t)(i / 2 + 1) << 40; /* large addresses survive the signed column */
    ev.size = 1000 + (uint64_t)i;
    ev.ts = i * 10;
    ev.stream = 7;
    ev.device = 1;
    ev.category = SIM_CAT_ACTIVATION;
    ev.cat_source = SIM_CATSRC_STACK;
    ev.stack = stack;
    ev.step = i / 100;
    ev.flags = SIM_EVF_ASYNC;
    if (store_writer_event(w, &ev)) return -1;
  }
  store_recorded r = {.before_seq = 1, .ts = 5, .action = "segment_alloc", .addr = 1u << 20, .size = 2u << 20,
                      .allocated = -1, .reserved = -1, .device_free = -1};
  if (store_writer_recorded(w, &r) || store_writer_stat(w, "notes", "info", 2, NULL) ||
      store_writer_stat(w, "notes", "info", 3, "five in all"))
    return -1;
  int64_t id = store_writer_trace_id(w);
  return store_writer_end(w) ? -1 : id;
}

static void writes_and_reads_back(void) {
  store *s = open_new("rw.db");
  if (!s) return;
  CHECK_EQ(store_begin(s), 0);
  int64_t id = write_trace(s, "t1", 20001, -1); /* more than one writer batch */
  CHECK(id > 0);
  CHECK_EQ(store_commit(s), 0);
  store_trace t;
  CHECK_EQ(store_trace_find(s, "t1", &t), 0);
  CHECK_EQ(t.event_count, 20001);
  CHECK_EQ(t.first_ts, 0);
  CHECK_EQ(t.last_ts, 200000);
  CHECK_EQ(t.batch_size, 8);
  store_trace_clear(&t);
  char ref[32];
  snprintf(ref, sizeof ref, "%lld", (long long)id);
  CHECK_EQ(store_trace_find(s, ref, &t), 0); /* by id */
  store_trace_clear(&t);
  CHECK_EQ(store_trace_find(s, "nope", &t), 1);
  store_reader *r;
  CHECK_EQ(store_reader_open(s, id, &r), 0);
  sim_event ev;
  int64_t n = 0;
  int ok = 1;
  while (store_reader_next(r, &ev) > 0) {
    ok &= ev.seq == n && ev.kind == (n % 2 ? SIM_EV_FREE : SIM_EV_ALLOC) && ev.addr == (uint64_t)(n / 2 + 1) << 40 &&
          ev.size == 1000 + (uint64_t)n && ev.stream == 7 && ev.device == 1 && ev.category == SIM_CAT_ACTIVATION &&
          ev.cat_source == SIM_CATSRC_STACK && ev.step == n / 100 && ev.flags == SIM_EVF_ASYNC && ev.dev_ts == -1 &&
          ev.api_dur == -1 && ev.stack > 0;
    n++;
  }
  store_reader_close(r);
  CHECK_EQ(n, 20001);
  CHECK(ok);
  /* a range */
  CHECK_EQ(store_reader_range(s, id, 100, 105, &r), 0);
  n = 0;
  while (store_reader_next(r, &ev) > 0) CHECK_EQ(ev.seq, 100 + n++);
  store_reader_close(r);
  CHECK_EQ(n, 5);
  /* what SQL users see through the virtual columns */
  CHECK_EQ(pragma(s, "SELECT count(*) FROM events WHERE trace_id = 1 AND kind = 1 AND device = 1 AND category = 4"),
           10001);
  CHECK_EQ(pragma(s, "SELECT count(*) FROM events_named WHERE kind = 'free' AND category = 'activation'"), 10000);
  CHECK_EQ(pragma(s, "SELECT value FROM trace_stats WHERE name = 'notes'"), 5);
  CHECK_EQ(pragma(s, "SELECT before_seq FROM recorded"), 1);
  /* the stack: interned once, labelled by its innermost Python frame */
  CHECK_EQ(pragma(s, "SELECT count(*) FROM callsites"), 2);
  char *label = store_stack_label(s, pragma(s, "SELECT max(stack_id) FROM events"));
  CHECK_STR(label, "inner (a.py:3)");
  free(label);
  store_close(s);
}

static void failed_write_leaves_store_as_it_was(void) {
  store *s = open_new("rb.db");
  if (!s) return;
  store_begin(s);
  CHECK(write_trace(s, "keep", 10, -1) > 0);
  store_commit(s);
  int64_t before = pragma(s, "SELECT count(*) FROM events") + pragma(s, "SELECT count(*) FROM strings");
  store_begin(s);
  CHECK_EQ(write_trace(s, "lost", 30000, 25000), -1);
  store_rollback(s);
  CHECK_EQ(pragma(s, "SELECT count(*) FROM traces"), 1);
  CHECK_EQ(pragma(s, "SELECT count(*) FROM events") + pragma(s, "SELECT count(*) FROM strings"), before);
  /* interning works again after a rollback (its cache was dropped) */
  store_begin(s);
  CHECK(write_trace(s, "again", 10, -1) > 0);
  CHECK_EQ(store_commit(s), 0);
  CHECK_EQ(pragma(s, "SELECT count(*) FROM callsites"), 2);
  /* a name can only be used once */
  store_begin(s);
  CHECK_EQ(write_trace(s, "keep", 1, -1), -1);
  CHECK(strstr(store_error(s), "already exists") != NULL);
  store_rollback(s);
  char *u = store_unique_name(s, "keep");
  CHECK_STR(u, "keep-2");
  free(u);
  /* deleting a trace removes its events */
  store_begin(s);
  CHECK_EQ(store_trace_delete(s, 1), 0);
  store_commit(s);
  CHECK_EQ(pragma(s, "SELECT count(*) FROM events WHERE trace_id = 1"), 0);
  CHECK_EQ(pragma(s, "SELECT count(*) FROM events"), 10);
  store_close(s);
}

/* The importer's thread may look names up and intern while the writer thread inserts. */
static void lookups_while_the_writer_runs(void) {
  store *s = open_new("busy.db");
  if (!s) return;
  store_begin(s);
  CHECK(write_trace(s, "first", 10, -1) > 0);
  store_trace m = {.name = (char *)"busy", .source_format = (char *)"jsonl", .device_index = -1};
  store_writer *w;
  CHECK_EQ(store_writer_begin(s, &m, &w), 0);
  int ok = 1;
  for (int i = 0; i < 60000; i++) {
    sim_event ev;
    sim_event_init(&ev);
    ev.kind = SIM_EV_KERNEL;
    ev.ts = i;
    if (i % 997 == 0) {
      char name[32];
      snprintf(name, sizeof name, "kernel-%d", i % 5);
      ev.name = store_intern_string(s, name, strlen(name));
      char *u = store_unique_name(s, "first");
      ok &= u && !strcmp(u, "first-2");
      free(u);
      store_trace t;
      ok &= store_trace_find(s, "first", &t) == 0;
      store_trace_clear(&t);
    }
    ok &= store_writer_event(w, &ev) == 0;
  }
  CHECK(ok);
  CHECK_EQ(store_writer_end(w), 0);
  CHECK_EQ(store_commit(s), 0);
  CHECK_EQ(pragma(s, "SELECT count(*) FROM events WHERE trace_id = 2"), 60000);
  CHECK_EQ(pragma(s, "SELECT count(DISTINCT name_id) FROM events WHERE trace_id = 2"), 5);
  store_close(s);
}

/* Events put before the others at the end, and two traces written turn about (one writer
 * thread runs at a time): readers count from each trace's first event. */
static void room_before_and_writers_in_turn(void) {
  store *s = open_new("room.db");
  if (!s) return;
  store_begin(s);
  store_trace ma = {.name = (char *)"a", .source_format = (char *)"jsonl", .device_index = -1};
  store_trace mb = {.name = (char *)"b", .source_format = (char *)"jsonl", .device_index = -1};
  store_writer *a, *b;
  CHECK_EQ(store_writer_begin(s, &ma, &a), 0);
  CHECK_EQ(store_writer_begin(s, &mb, &b), 0);
  CHECK_EQ(store_writer_leave_room(a), 0);
  int ok = 1;
  int64_t last_a = -1;
  for (int i = 0; i < 50000; i++) { /* alternating runs of events, in batches and across them */
    sim_event ev;
    sim_event_init(&ev);
    ev.kind = SIM_EV_ALLOC;
    ev.addr = (uint64_t)i + 1;
    ev.size = (uint64_t)i;
    ev.ts = 100 + i;
    store_writer *w = (i / 7000) % 2 ? b : a;
    ok &= store_writer_event(w, &ev) == 0;
    if (w == a) last_a = ev.seq;
    if (i == 20000) { /* a recorded action and a category while the other writer's thread ran */
      store_recorded r = {.before_seq = last_a + 1, .ts = 5, .action = "segment_alloc", .allocated = -1,
                          .reserved = -1, .device_free = -1};
      ok &= store_writer_recorded(a, &r) == 0;
      store_writer_set_category(a, STORE_ROOM, SIM_CAT_PARAMETER, SIM_CATSRC_LIFETIME);
    }
  }
  CHECK(ok);
  CHECK_EQ(last_a, STORE_ROOM + 27999); /* 28,000 of the 50,000 went to a */
  sim_event ev;
  sim_event_init(&ev);
  ev.kind = SIM_EV_ALLOC;
  CHECK(store_writer_leave_room(a) != 0); /* too late */
  CHECK(store_writer_prepend(b, &ev) != 0); /* b left no room */
  for (int i = 0; i < 3; i++) { /* each before the one prepended last */
    sim_event_init(&ev);
    ev.kind = SIM_EV_ALLOC;
    ev.flags = SIM_EVF_PREEXISTING;
    ev.addr = UINT64_C(1) << 40 | (uint64_t)(2 - i);
    ev.ts = 50;
    CHECK_EQ(store_writer_prepend(a, &ev), 0);
    CHECK_EQ(ev.seq, STORE_ROOM - 1 - i);
  }
  CHECK_EQ(store_writer_events(a), 28003);
  CHECK_EQ(store_writer_end(a), 0);
  CHECK_EQ(store_writer_end(b), 0);
  CHECK_EQ(store_commit(s), 0);
  store_trace t;
  CHECK_EQ(store_trace_find(s, "a", &t), 0);
  CHECK_EQ(t.first_seq, STORE_ROOM - 3);
  CHECK_EQ(t.event_count, 28003);
  CHECK_EQ(t.first_ts, 50);
  store_reader *r;
  CHECK_EQ(store_reader_open(s, t.id, &r), 0);
  int64_t n = 0, bad = 0;
  while (store_reader_next(r, &ev) == 1) {
    int64_t want_addr = n < 3 ? (int64_t)(UINT64_C(1) << 40 | (uint64_t)n) : -1;
    if (ev.seq != n || (n < 3 && (int64_t)ev.addr != want_addr) || (n == 3 && ev.category != SIM_CAT_PARAMETER))
      bad++;
    n++;
  }
  store_reader_close(r);
  CHECK_EQ(n, 28003);
  CHECK_EQ(bad, 0);
  CHECK_EQ(store_reader_range(s, t.id, 2, 5, &r), 0); /* the last rebuilt event and the first two after */
  int64_t seqs[4] = {0}, k = 0;
  while (k < 4 && store_reader_next(r, &ev) == 1) seqs[k++] = ev.seq;
  store_reader_close(r);
  CHECK_EQ(k, 3);
  CHECK_EQ(seqs[0] * 100 + seqs[1] * 10 + seqs[2], 234);
  CHECK_EQ(pragma(s, "SELECT before_seq - (SELECT first_seq FROM traces WHERE name = 'a') FROM recorded"), 3 + 13001); /* after 13,001 events of a */
  CHECK_EQ(pragma(s, "SELECT min(seq) FROM events_named WHERE trace_id = 1"), 0);
  store_trace_clear(&t);
  CHECK_EQ(store_trace_find(s, "b", &t), 0);
  CHECK_EQ(t.first_seq, 0);
  CHECK_EQ(t.event_count, 22000);
  CHECK_EQ(pragma(s, "SELECT count(*) FROM events WHERE trace_id = 2 AND seq = size - 7000 * (size / 14000 + 1)"), 22000);
  store_trace_clear(&t);
  plan_kept_is_the_events(s, "a"); /* numbered again at the end: events were put before the others */
  plan_kept_is_the_events(s, "b"); /* numbered as its chunks were stored, between a's */
  store_close(s);
}

/* Each chunk's two forms are made by different threads (the text form for the events view, the
 * packed form replay reads): over several chunks, a stop and restart of the writer in the middle of
 * one, and category changes to events already handed over, every event reads back the same both
 * ways. */
static void text_and_packed_forms_agree(void) {
  store *s = open_new("forms.db");
  if (!s) return;
  store_begin(s);
  store_trace m = {.name = (char *)"forms", .source_format = (char *)"jsonl", .device_index = -1};
  store_writer *w;
  CHECK_EQ(store_writer_begin(s, &m, &w), 0);
  enum { N = 3 * 16384 + 1234 };
  int ok = 1;
  for (int i = 0; i < N; i++) {
    sim_event ev;
    sim_event_init(&ev);
    ev.kind = (uint8_t)(i % 3 ? SIM_EV_ALLOC : SIM_EV_FREE);
    ev.ts = (int64_t)i * 1000 + (i % 7);
    ev.size = (uint64_t)4096 << (i % 17);
    ev.addr = 0x7f0000000000ULL + (uint64_t)(i % 5000) * 512;
    ev.stream = i % 4;
    ev.dur = i % 11 ? 0 : i;
    ev.step = i % 13 ? i / 1000 : -1;
    ev.device = (int16_t)(i % 29 ? 0 : -1);
    ev.dev_ts = i % 5 ? -1 : ev.ts + 3;
    ev.api_dur = i % 9 ? -1 : 17;
    ok &= store_writer_event(w, &ev) == 0;
    if (i == 20000) ok &= store_writer_flush(w) == 0; /* the part-filled chunk is stored, then resumed */
  }
  CHECK(ok);
  for (int64_t seq = 5; seq < N; seq += 4099) store_writer_set_category(w, seq, 4, 1);
  CHECK_EQ(store_writer_end(w), 0);
  CHECK_EQ(store_commit(s), 0);
  store_reader *r;
  sqlite3_stmt *q;
  CHECK_EQ(store_reader_open(s, 1, &r), 0);
  CHECK_EQ(sqlite3_prepare_v2(store_db(s),
                              "SELECT seq, ts, coalesce(size, 0), coalesce(addr, 0), coalesce(stream, 0), "
                              "coalesce(dur, 0), coalesce(step, -1), device, coalesce(dev_ts, -1), "
                              "coalesce(api_dur, -1), kind, category, cat_source FROM events WHERE trace_id = 1 "
                              "ORDER BY seq",
                              -1, &q, NULL),
           SQLITE_OK);
  sim_event ev;
  int64_t n = 0, bad = 0;
  while (store_reader_next(r, &ev) == 1 && sqlite3_step(q) == SQLITE_ROW) {
    int64_t want[13] = {ev.seq, ev.ts, (int64_t)ev.size, (int64_t)ev.addr, ev.stream, ev.dur, ev.step, ev.device,
                        ev.dev_ts, ev.api_dur, ev.kind, ev.category, ev.cat_source};
    for (int k = 0; k < 13; k++) bad += sqlite3_column_int64(q, k) != want[k];
    n++;
  }
  CHECK_EQ(n, N);
  CHECK_EQ(bad, 0);
  CHECK_EQ(pragma(s, "SELECT count(*) FROM events WHERE trace_id = 1 AND category = 4 AND cat_source = 1"),
           (N - 5 + 4098) / 4099);
  sqlite3_finalize(q);
  store_reader_close(r);
  plan_kept_is_the_events(s, "forms"); /* a chunk stored part-filled, then whole: its plan too */
  store_close(s);
}

/* A chunk's plan takes one, two or four bytes a number as the trace's records need: a trace of
 * each, the third changing width between chunks (16,384 records, then 70,000), each read back as
 * the plan of its events, through the loops that widen many numbers at a time and their tails. */
static void plans_of_every_width(void) {
  store *s = open_new("widths.db");
  if (!s) return;
  store_begin(s);
  const char *names[] = {"w1", "w2", "w4"};
  const int events[] = {1000, 40000, 70000}, live[] = {250, 60000, 70000};
  for (int t = 0; t < 3; t++) {
    store_trace m = {.name = (char *)names[t], .source_format = (char *)"jsonl", .device_index = -1};
    store_writer *w;
    CHECK_EQ(store_writer_begin(s, &m, &w), 0);
    int ok = 1;
    for (int i = 0; i < events[t]; i++) { /* allocations of `live` addresses in turn, each freed before it comes again */
      sim_event ev;
      sim_event_init(&ev);
      int round = i / live[t];
      ev.kind = (uint8_t)(round % 2 ? SIM_EV_FREE : SIM_EV_ALLOC);
      ev.addr = 0x1000 + (uint64_t)(i % live[t]) * 16;
      ev.size = 64;
      ev.ts = i;
      if (i % 97 == 0) ev.kind = SIM_EV_KERNEL, ev.addr = 0, ev.size = 0;
      ok &= store_writer_event(w, &ev) == 0;
    }
    CHECK(ok);
    CHECK_EQ(store_writer_end(w), 0);
  }
  CHECK_EQ(store_commit(s), 0);
  CHECK_EQ(pragma(s, "SELECT max(records) BETWEEN 200 AND 254 FROM event_plans WHERE trace_id = 1"), 1); /* one byte */
  CHECK_EQ(pragma(s, "SELECT count(DISTINCT length(data) / (SELECT n FROM event_chunks c WHERE c.trace_id = 3 AND "
                     "c.chunk = p.chunk)) FROM event_plans p WHERE trace_id = 3"), 2); /* two bytes, then four */
  for (int t = 0; t < 3; t++) plan_kept_is_the_events(s, names[t]);
  store_close(s);
}

/* A read span is one snapshot; nested spans share it; a write inside one (store_begin) first ends
 * it, so the write does not fail because another connection committed since the span began (as
 * it would, SQLITE_BUSY_SNAPSHOT, from a read transaction upgraded in place); and inside a
 * transaction already open a span changes nothing. */
static void read_spans_share_a_snapshot_and_yield_to_writes(void) {
  store *a = open_new("span.db"), *b = NULL;
  char p[512], err[STORE_ERRLEN];
  path_of(p, sizeof p, "span.db");
  CHECK(a != NULL);
  if (!a || store_open(&b, p, 0, err, sizeof err)) {
    store_close(a);
    CHECK(0);
    return;
  }
  CHECK_EQ(store_exec(a, "INSERT INTO strings(value) VALUES ('one')"), 0);
  CHECK_EQ(store_read_begin(a), 0);
  CHECK_EQ(pragma(a, "SELECT count(*) FROM strings"), 1);
  CHECK_EQ(store_exec(b, "INSERT INTO strings(value) VALUES ('two')"), 0);
  CHECK_EQ(store_read_begin(a), 0); /* nested: the same snapshot */
  CHECK_EQ(pragma(a, "SELECT count(*) FROM strings"), 1);
  store_read_end(a);
  CHECK_EQ(sqlite3_get_autocommit(store_db(a)), 0);
  CHECK_EQ(pragma(a, "SELECT count(*) FROM strings"), 1);
  CHECK_EQ(store_begin(a), 0);
  CHECK_EQ(store_exec(a, "INSERT INTO strings(value) VALUES ('three')"), 0);
  CHECK_EQ(store_commit(a), 0);
  CHECK_EQ(pragma(a, "SELECT count(*) FROM strings"), 3);
  store_read_end(a);
  CHECK_EQ(sqlite3_get_autocommit(store_db(a)), 1);
  CHECK_EQ(store_begin(a), 0);
  CHECK_EQ(store_read_begin(a), 0);
  store_read_end(a);
  CHECK_EQ(sqlite3_get_autocommit(store_db(a)), 0);
  CHECK_EQ(store_commit(a), 0);
  store_close(b);
  store_close(a);
}

/* SQLite's allocations are counted by memplay (sqlmem.c), not under SQLite's process-wide lock:
 * its own statistic stays at 0, and the count follows what a statement holds. */
static void sqlite_memory_counted_without_its_lock(void) {
  store *s = open_new("mem.db");
  CHECK(s != NULL);
  int64_t base = store_sqlite_memory_used();
  CHECK(base > 0);
  CHECK_EQ(sqlite3_memory_used(), 0);
  sqlite3_stmt *q;
  CHECK_EQ(sqlite3_prepare_v2(store_db(s), "SELECT randomblob(20000000)", -1, &q, NULL), SQLITE_OK);
  CHECK_EQ(sqlite3_step(q), SQLITE_ROW);
  CHECK_EQ(sqlite3_column_bytes(q, 0), 20000000);
  CHECK(store_sqlite_memory_used() >= base + 20000000);
  sqlite3_finalize(q);
  CHECK(store_sqlite_memory_used() < base + 1000000);
  store_close(s);
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/memplay-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return 1;
  RUN(sqlite_memory_counted_without_its_lock);
  RUN(new_store_has_header_and_schema);
  RUN(refuses_foreign_and_newer_files);
  RUN(migrates_an_empty_versioned_store);
  RUN(schema_listed_at_build_is_a_new_stores);
  RUN(writes_and_reads_back);
  RUN(failed_write_leaves_store_as_it_was);
  RUN(lookups_while_the_writer_runs);
  RUN(room_before_and_writers_in_turn);
  RUN(text_and_packed_forms_agree);
  RUN(plans_of_every_width);
  RUN(read_spans_share_a_snapshot_and_yield_to_writes);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) return 1;
  TEST_MAIN_END();
}
