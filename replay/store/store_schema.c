/* store_schema.c: the store's schema as a list of migrations, one per user_version (docs/trace-store.md). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "store_int.h"

/*
 * migrations[v] takes a store from version v-1 to version v. They run in order, all in one
 * transaction, when a store is opened for writing. Never edit a migration that has shipped:
 * add the next one, bump nothing else (store_schema_version follows the array), and describe
 * the change in docs/trace-store.md.
 */
/* events_named as migrations 2 and 4 create it: seq counted from the trace's first event, as
 * memplay's readers count it (4 recreates it over the events view). */
#define EVENTS_NAMED_SINCE_2 \
  "CREATE VIEW events_named AS\n" \
  "  SELECT e.trace_id, e.seq - t.first_seq AS seq, e.ts, k.name AS kind, coalesce(e.dur, 0) AS dur, e.dev_ts,\n" \
  "         e.api_dur, e.device, coalesce(e.stream, 0) AS stream, coalesce(e.addr, 0) AS addr,\n" \
  "         coalesce(e.size, 0) AS size, m.name AS mem, d.name AS dir, c.name AS category, cs.name AS cat_source,\n" \
  "         e.stack_id, e.step, s.value AS name, e.flags\n" \
  "  FROM events e JOIN traces t ON t.id = e.trace_id JOIN event_kinds k ON k.id = e.kind\n" \
  "       JOIN mem_kinds m ON m.id = e.mem JOIN copy_dirs d ON d.id = e.dir JOIN categories c ON c.id = e.category\n" \
  "       JOIN cat_sources cs ON cs.id = e.cat_source LEFT JOIN strings s ON s.id = e.name_id;\n"

/* Triggers that delete a kept window start (window_starts, migration 8) when a row of table that
 * its rebuild read is added, changed or removed. */
#define STARTS_FOLLOW(table)                                                                         \
  "CREATE TRIGGER window_starts_" table "_insert AFTER INSERT ON " table " BEGIN\n"                  \
  "  DELETE FROM window_starts WHERE trace_id = NEW.trace_id;\n"                                     \
  "END;\n"                                                                                          \
  "CREATE TRIGGER window_starts_" table "_update AFTER UPDATE ON " table " BEGIN\n"                  \
  "  DELETE FROM window_starts WHERE trace_id IN (OLD.trace_id, NEW.trace_id);\n"                   \
  "END;\n"                                                                                          \
  "CREATE TRIGGER window_starts_" table "_delete AFTER DELETE ON " table " BEGIN\n"                  \
  "  DELETE FROM window_starts WHERE trace_id = OLD.trace_id;\n"                                     \
  "END;\n"

static const char *const migrations[] = {
  NULL,
  /* 1: the first schema. */
  "CREATE TABLE strings(\n"
  "  id INTEGER PRIMARY KEY,\n"
  "  value TEXT NOT NULL UNIQUE\n"
  ");\n"
  "CREATE TABLE frames(\n"
  "  id INTEGER PRIMARY KEY,\n"
  "  name_id INTEGER NOT NULL REFERENCES strings(id),\n"
  "  file_id INTEGER NOT NULL REFERENCES strings(id),\n"
  "  line INTEGER NOT NULL,\n"
  "  UNIQUE(name_id, file_id, line)\n"
  ");\n"
  "CREATE TABLE callsites(\n"
  "  id INTEGER PRIMARY KEY,\n"
  "  parent_id INTEGER NOT NULL,\n" /* 0 for the outermost frame */
  "  frame_id INTEGER NOT NULL REFERENCES frames(id),\n"
  "  depth INTEGER NOT NULL,\n"
  "  UNIQUE(parent_id, frame_id)\n"
  ");\n"
  "CREATE TABLE traces(\n"
  "  id INTEGER PRIMARY KEY,\n"
  "  name TEXT NOT NULL UNIQUE,\n"
  "  source_format TEXT NOT NULL,\n"
  "  source_file TEXT,\n"
  "  device_name TEXT,\n"
  "  device_memory INTEGER,\n"
  "  device_index INTEGER,\n"
  "  framework TEXT,\n"
  "  allocator TEXT,\n"
  "  allocator_settings TEXT,\n"
  "  batch_size INTEGER,\n"
  "  imported_at TEXT NOT NULL,\n"
  "  event_count INTEGER NOT NULL DEFAULT 0,\n"
  "  first_ts INTEGER,\n"
  "  last_ts INTEGER,\n"
  "  attrs TEXT\n"
  ");\n"
  /* One row per event. The rowid packs the trace and the position (trace_id << 32 | seq), so a
   * trace's events are one contiguous range read in order; the small enumerations share one
   * integer (info) and are exposed as virtual columns, which keeps inserts and scans fast. */
  "CREATE TABLE events(\n"
  "  id INTEGER PRIMARY KEY,\n"
  "  ts INTEGER NOT NULL,\n"
  "  dur INTEGER,\n"
  "  addr INTEGER,\n"
  "  size INTEGER,\n"
  "  stream INTEGER,\n"
  "  info INTEGER NOT NULL,\n"
  "  stack_id INTEGER,\n"
  "  name_id INTEGER,\n"
  "  step INTEGER,\n"
  "  dev_ts INTEGER,\n"
  "  api_dur INTEGER,\n"
  "  trace_id INTEGER GENERATED ALWAYS AS (id >> 32) VIRTUAL,\n"
  "  seq INTEGER GENERATED ALWAYS AS (id & 4294967295) VIRTUAL,\n"
  "  kind INTEGER GENERATED ALWAYS AS (info & 255) VIRTUAL,\n"
  "  mem INTEGER GENERATED ALWAYS AS ((info >> 8) & 15) VIRTUAL,\n"
  "  dir INTEGER GENERATED ALWAYS AS ((info >> 12) & 15) VIRTUAL,\n"
  "  category INTEGER GENERATED ALWAYS AS ((info >> 16) & 15) VIRTUAL,\n"
  "  cat_source INTEGER GENERATED ALWAYS AS ((info >> 20) & 15) VIRTUAL,\n"
  "  flags INTEGER GENERATED ALWAYS AS ((info >> 24) & 255) VIRTUAL,\n"
  "  device INTEGER GENERATED ALWAYS AS ((info >> 32) - 1) VIRTUAL\n"
  ");\n"
  "CREATE TABLE event_args(\n"
  "  trace_id INTEGER NOT NULL,\n"
  "  seq INTEGER NOT NULL,\n"
  "  key TEXT NOT NULL,\n"
  "  value TEXT NOT NULL,\n"
  "  PRIMARY KEY(trace_id, seq, key)\n"
  ") WITHOUT ROWID;\n"
  "CREATE TABLE recorded(\n"
  "  trace_id INTEGER NOT NULL,\n"
  "  seq INTEGER NOT NULL,\n"
  "  before_seq INTEGER NOT NULL,\n"
  "  ts INTEGER,\n"
  "  action TEXT NOT NULL,\n"
  "  device INTEGER NOT NULL DEFAULT 0,\n"
  "  stream INTEGER NOT NULL DEFAULT 0,\n"
  "  addr INTEGER NOT NULL DEFAULT 0,\n"
  "  size INTEGER NOT NULL DEFAULT 0,\n"
  "  allocated INTEGER,\n"
  "  reserved INTEGER,\n"
  "  device_free INTEGER,\n"
  "  stack_id INTEGER,\n"
  "  PRIMARY KEY(trace_id, seq)\n"
  ") WITHOUT ROWID;\n"
  "CREATE TABLE segments(\n"
  "  trace_id INTEGER NOT NULL,\n"
  "  device INTEGER NOT NULL DEFAULT 0,\n"
  "  address INTEGER NOT NULL,\n"
  "  total_size INTEGER NOT NULL,\n"
  "  stream INTEGER NOT NULL DEFAULT 0,\n"
  "  pool TEXT,\n"
  "  expandable INTEGER NOT NULL DEFAULT 0,\n"
  "  allocated_size INTEGER,\n"
  "  requested_size INTEGER,\n"
  "  active_size INTEGER,\n"
  "  stack_id INTEGER,\n"
  "  PRIMARY KEY(trace_id, device, address)\n"
  ") WITHOUT ROWID;\n"
  "CREATE TABLE blocks(\n"
  "  trace_id INTEGER NOT NULL,\n"
  "  segment_address INTEGER NOT NULL,\n"
  "  address INTEGER NOT NULL,\n"
  "  size INTEGER NOT NULL,\n"
  "  requested_size INTEGER NOT NULL DEFAULT 0,\n"
  "  state TEXT NOT NULL,\n"
  "  stack_id INTEGER,\n"
  "  PRIMARY KEY(trace_id, segment_address, address)\n"
  ") WITHOUT ROWID;\n"
  "CREATE TABLE trace_stats(\n"
  "  trace_id INTEGER NOT NULL,\n"
  "  name TEXT NOT NULL,\n"
  "  severity TEXT NOT NULL,\n"
  "  value INTEGER NOT NULL,\n"
  "  detail TEXT,\n"
  "  PRIMARY KEY(trace_id, name)\n"
  ") WITHOUT ROWID;\n"
  "CREATE TABLE device_profiles(\n"
  "  name TEXT PRIMARY KEY,\n"
  "  source TEXT NOT NULL,\n" /* builtin, user, calibrated */
  "  total_memory INTEGER NOT NULL,\n"
  "  params TEXT NOT NULL,\n" /* JSON object: see docs/devices.md */
  "  updated_at TEXT NOT NULL\n"
  ");\n"
  "CREATE TABLE runs(\n"
  "  id INTEGER PRIMARY KEY,\n"
  "  trace_id INTEGER,\n"
  "  trace_name TEXT,\n"
  "  created_at TEXT NOT NULL,\n"
  "  kind TEXT NOT NULL,\n" /* replay, whatif, validate, backend */
  "  allocator TEXT,\n"
  "  capacity INTEGER,\n"
  "  device TEXT,\n"
  "  backend TEXT NOT NULL DEFAULT 'sim',\n"
  "  scenario TEXT,\n"
  "  variant TEXT,\n"
  "  events INTEGER,\n"
  "  peak_allocated INTEGER,\n"
  "  peak_reserved INTEGER,\n"
  "  peak_requested INTEGER,\n"
  "  device_mallocs INTEGER,\n"
  "  device_frees INTEGER,\n"
  "  ooms INTEGER,\n"
  "  fragmentation REAL,\n"
  "  step_time_s REAL,\n"
  "  samples_per_s REAL,\n"
  "  result TEXT\n" /* JSON: the whole result, as `replay --json` prints it */
  ");\n"
  "CREATE INDEX runs_by_trace ON runs(trace_id);\n"
  "CREATE TABLE run_timeline(\n"
  "  run_id INTEGER NOT NULL,\n"
  "  idx INTEGER NOT NULL,\n"
  "  seq INTEGER NOT NULL,\n"
  "  ts INTEGER NOT NULL,\n"
  "  allocated INTEGER NOT NULL,\n"
  "  reserved INTEGER NOT NULL,\n"
  "  requested INTEGER NOT NULL,\n"
  "  PRIMARY KEY(run_id, idx)\n"
  ") WITHOUT ROWID;\n"
  "CREATE TABLE run_ooms(\n"
  "  run_id INTEGER NOT NULL,\n"
  "  idx INTEGER NOT NULL,\n"
  "  seq INTEGER NOT NULL,\n"
  "  device INTEGER NOT NULL,\n"
  "  stream INTEGER NOT NULL,\n"
  "  size INTEGER NOT NULL,\n"
  "  allocated INTEGER NOT NULL,\n"
  "  reserved INTEGER NOT NULL,\n"
  "  largest_free INTEGER NOT NULL,\n"
  "  message TEXT,\n"
  "  PRIMARY KEY(run_id, idx)\n"
  ") WITHOUT ROWID;\n"
  "CREATE TABLE run_composition(\n"
  "  run_id INTEGER NOT NULL,\n"
  "  by TEXT NOT NULL,\n" /* category, callsite */
  "  key TEXT NOT NULL,\n"
  "  stack_id INTEGER,\n"
  "  bytes INTEGER NOT NULL,\n"
  "  count INTEGER NOT NULL,\n"
  "  PRIMARY KEY(run_id, by, key)\n"
  ") WITHOUT ROWID;\n"
  /* Names of the integer codes, for people writing SQL. */
  "CREATE TABLE event_kinds(id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"
  "INSERT INTO event_kinds VALUES (1,'alloc'),(2,'free_requested'),(3,'free_completed'),(4,'free'),\n"
  "  (5,'memcpy'),(6,'memset'),(7,'kernel'),(8,'sync'),(9,'marker'),(10,'host_alloc'),(11,'host_free'),\n"
  "  (12,'api'),(13,'empty_cache');\n"
  "CREATE TABLE mem_kinds(id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"
  "INSERT INTO mem_kinds VALUES (0,'unknown'),(1,'device'),(2,'pinned'),(3,'pageable'),(4,'managed');\n"
  "CREATE TABLE copy_dirs(id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"
  "INSERT INTO copy_dirs VALUES (0,'none'),(1,'h2d'),(2,'d2h'),(3,'d2d'),(4,'h2h'),(5,'p2p');\n"
  "CREATE TABLE categories(id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"
  "INSERT INTO categories VALUES (0,'unknown'),(1,'parameter'),(2,'optimizer_state'),(3,'gradient'),\n"
  "  (4,'activation'),(5,'input'),(6,'temporary'),(7,'workspace');\n"
  "CREATE TABLE cat_sources(id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"
  "INSERT INTO cat_sources VALUES (0,'none'),(1,'source'),(2,'stack'),(3,'lifetime'),(4,'user');\n"
  "CREATE VIEW events_named AS\n"
  "  SELECT e.trace_id, e.seq, e.ts, k.name AS kind, coalesce(e.dur, 0) AS dur, e.dev_ts, e.api_dur, e.device,\n"
  "         coalesce(e.stream, 0) AS stream, coalesce(e.addr, 0) AS addr, coalesce(e.size, 0) AS size,\n"
  "         m.name AS mem, d.name AS dir, c.name AS category, cs.name AS cat_source,\n"
  "         e.stack_id, e.step, s.value AS name, e.flags\n"
  "  FROM events e JOIN event_kinds k ON k.id = e.kind JOIN mem_kinds m ON m.id = e.mem\n"
  "       JOIN copy_dirs d ON d.id = e.dir JOIN categories c ON c.id = e.category\n"
  "       JOIN cat_sources cs ON cs.id = e.cat_source LEFT JOIN strings s ON s.id = e.name_id;\n"
  "CREATE VIEW callsite_frames AS\n"
  "  SELECT c.id AS callsite_id, c.parent_id, c.depth, n.value AS name, f.value AS file, fr.line\n"
  "  FROM callsites c JOIN frames fr ON fr.id = c.frame_id JOIN strings n ON n.id = fr.name_id\n"
  "       JOIN strings f ON f.id = fr.file_id;\n",
  /* 2: a trace's events may start at a seq other than 0 (an importer that learns only at the end
   * what comes first numbers the rest from the middle of the range and puts that before them). */
  "ALTER TABLE traces ADD COLUMN first_seq INTEGER NOT NULL DEFAULT 0;\n"
  /* events_named counts seq from the trace's first event, as memplay's readers do. */
  "DROP VIEW events_named;\n"
  EVENTS_NAMED_SINCE_2,
  /* 3: when the trace came into this store (imported_at is the source's own time, kept across
   * exports), and a digest of the file it was imported from (an import of the same file again
   * names the trace it already has). */
  "ALTER TABLE traces ADD COLUMN stored_at TEXT;\n"
  "ALTER TABLE traces ADD COLUMN source_digest TEXT;\n"
  "CREATE INDEX traces_by_digest ON traces(source_digest);\n",
  /* 4: events stored in chunks (chunk.h): the packed, checksummed form replay reads, and beside it
   * the same events as JSON text that the events view reads, so that plain SQL answers as before.
   * The rows of schema 3 are moved into chunks between this SQL and migrations_after[4]
   * (store.c). Both are rowid tables with their key in a small index: in a WITHOUT ROWID table
   * the whole row is the key, and a look-up compares (and so copies) every large row it passes. */
  "DROP VIEW events_named;\n"
  "ALTER TABLE events RENAME TO events_v3;\n"
  "CREATE TABLE event_chunks(\n"
  "  trace_id INTEGER NOT NULL,\n"
  "  chunk INTEGER NOT NULL,\n" /* the stored seqs chunk << 14 .. (chunk << 14) + 16383 */
  "  first_seq INTEGER NOT NULL,\n"
  "  n INTEGER NOT NULL,\n"
  "  codec INTEGER NOT NULL,\n"
  "  crc32 INTEGER NOT NULL,\n"
  "  data BLOB NOT NULL,\n"
  "  PRIMARY KEY(trace_id, chunk)\n"
  ");\n"
  "CREATE TABLE event_rows(\n"
  "  trace_id INTEGER NOT NULL,\n"
  "  chunk INTEGER NOT NULL,\n"
  "  first_seq INTEGER NOT NULL,\n"
  "  rows TEXT NOT NULL,\n" /* [[ts, info & 0xFFFFFFFF, device, size, addr, stream, dur, stack_id, name_id, step,
                               dev_ts, api_dur], ...] */
  "  PRIMARY KEY(trace_id, chunk)\n"
  ");\n"
  "CREATE VIEW events AS\n"
  "  SELECT (r.trace_id << 32) + r.first_seq + j.key AS id, r.trace_id AS trace_id, r.first_seq + j.key AS seq,\n"
  "         j.value ->> 0 AS ts, nullif(j.value ->> 6, 0) AS dur, nullif(j.value ->> 4, 0) AS addr,\n"
  "         nullif(j.value ->> 3, 0) AS size, nullif(j.value ->> 5, 0) AS stream,\n"
  "         (j.value ->> 1) | (((j.value ->> 2) + 1) << 32) AS info, (j.value ->> 1) & 255 AS kind,\n"
  "         ((j.value ->> 1) >> 8) & 15 AS mem, ((j.value ->> 1) >> 12) & 15 AS dir,\n"
  "         ((j.value ->> 1) >> 16) & 15 AS category, ((j.value ->> 1) >> 20) & 15 AS cat_source,\n"
  "         ((j.value ->> 1) >> 24) & 255 AS flags, j.value ->> 2 AS device, nullif(j.value ->> 7, 0) AS stack_id,\n"
  "         nullif(j.value ->> 8, 0) AS name_id, nullif(j.value ->> 9, -1) AS step, nullif(j.value ->> 10, -1) AS dev_ts,\n"
  "         nullif(j.value ->> 11, -1) AS api_dur\n"
  "  FROM event_rows r, json_each(r.rows) j;\n"
  EVENTS_NAMED_SINCE_2,
  /* 5: the copy fit's sums (sim/copyfit.h) of each trace's timed copies, kept when its events are
   * written, so that a replay on the recorded device reads a few rows instead of every chunk's
   * copies. timed_copies counts the copies summed; NULL: no sums kept (a replay reads the copies).
   * store.c fills both for the traces already stored, between this SQL and the version's bump. */
  "ALTER TABLE traces ADD COLUMN timed_copies INTEGER;\n"
  "CREATE TABLE copy_sums(\n"
  "  trace_id INTEGER NOT NULL,\n"
  "  kind TEXT NOT NULL,\n" /* the time model's copy class: h2d_pinned, h2d_pageable, d2h_pinned, ... */
  "  large INTEGER NOT NULL,\n" /* 0: below 1 MiB, 1: at least */
  "  n INTEGER NOT NULL,\n"
  "  sx REAL NOT NULL,\n" /* sums over the class's copies of bytes x and durations y (ns) */
  "  sy REAL NOT NULL,\n"
  "  sxx REAL NOT NULL,\n"
  "  sxy REAL NOT NULL,\n"
  "  syy REAL NOT NULL,\n"
  "  PRIMARY KEY(trace_id, kind, large)\n"
  ") WITHOUT ROWID;\n",
  /* 6: each chunk's plan (engine/source.h: which record of the engine's live allocations each
   * event names), kept when its events are written, so that a replay from the store keeps its live
   * allocations in a dense table instead of looking each address up: for each event of the chunk
   * that allocates or frees, a varint of its number plus one (0: none); records: how many records
   * the trace has numbered up to the chunk's end. store.c numbers the traces already stored. */
  "CREATE TABLE event_plans(\n"
  "  trace_id INTEGER NOT NULL,\n"
  "  chunk INTEGER NOT NULL,\n"
  "  records INTEGER NOT NULL,\n"
  "  crc32 INTEGER NOT NULL,\n"
  "  data BLOB NOT NULL,\n"
  "  PRIMARY KEY(trace_id, chunk)\n"
  ");\n",
  /* 7: a shorter text form (chunk.h, store_text): times and addresses count from the chunk's ts0
   * and addr0, every absent value is 0, and the fields most often absent come last, where they are
   * left off; the events view reads the same columns from it. store.c writes the stored texts
   * again between this SQL and the version's bump (text_migrate). */
  "DROP VIEW events_named;\n"
  "DROP VIEW events;\n"
  "ALTER TABLE event_rows ADD COLUMN ts0 INTEGER NOT NULL DEFAULT 0;\n"
  "ALTER TABLE event_rows ADD COLUMN addr0 INTEGER NOT NULL DEFAULT 0;\n"
  "CREATE VIEW events AS\n"
  "  SELECT (r.trace_id << 32) + r.first_seq + j.key AS id, r.trace_id AS trace_id, r.first_seq + j.key AS seq,\n"
  "         r.ts0 + (j.value ->> 0) AS ts, nullif(j.value ->> 8, 0) AS dur,\n"
  "         nullif(r.addr0 + (j.value ->> 3), r.addr0) AS addr, nullif(j.value ->> 2, 0) AS size,\n"
  "         nullif(j.value ->> 10, 0) AS stream, (j.value ->> 1) | ((coalesce(j.value ->> 7, 0) + 1) << 32) AS info,\n"
  "         (j.value ->> 1) & 255 AS kind, ((j.value ->> 1) >> 8) & 15 AS mem, ((j.value ->> 1) >> 12) & 15 AS dir,\n"
  "         ((j.value ->> 1) >> 16) & 15 AS category, ((j.value ->> 1) >> 20) & 15 AS cat_source,\n"
  "         ((j.value ->> 1) >> 24) & 255 AS flags, coalesce(j.value ->> 7, 0) AS device,\n"
  "         nullif(j.value ->> 4, 0) AS stack_id, nullif(j.value ->> 9, 0) AS name_id,\n"
  "         nullif(j.value ->> 5, 0) - 1 AS step, r.ts0 + (j.value ->> 11) AS dev_ts,\n"
  "         nullif(j.value ->> 6, 0) - 1 AS api_dur\n"
  "  FROM event_rows r, json_each(r.rows) j;\n"
  EVENTS_NAMED_SINCE_2,
  /* 8: a recorded window's start state as validate rebuilds it, kept once made (store_starts.c):
   * rules names the code that rebuilt it (a row of other rules is rebuilt), data the segments and
   * blocks packed, crc32 its CRC-32. A change to anything it was rebuilt from (the trace's row, its
   * recorded actions, segments, blocks and chunks), by memplay or by hand, deletes it. */
  "CREATE TABLE window_starts(\n"
  "  trace_id INTEGER PRIMARY KEY,\n"
  "  rules TEXT NOT NULL,\n"
  "  agrees INTEGER NOT NULL,\n"
  "  crc32 INTEGER NOT NULL,\n"
  "  data BLOB NOT NULL\n"
  ");\n"
  "CREATE TRIGGER window_starts_traces AFTER UPDATE ON traces BEGIN\n"
  "  DELETE FROM window_starts WHERE trace_id IN (OLD.id, NEW.id);\n"
  "END;\n"
  STARTS_FOLLOW("recorded") STARTS_FOLLOW("segments") STARTS_FOLLOW("blocks") STARTS_FOLLOW("event_chunks"),
};

/* SQL that ends a migration after the step in C that store.c runs between (NULL: none). */
static const char *const migrations_after[] = {
  [4] = "DROP TABLE events_v3;\n",
};

const int store_schema_version = (int)(sizeof migrations / sizeof migrations[0]) - 1;

const char *store_migration(int version) {
  return version >= 1 && version <= store_schema_version ? migrations[version] : NULL;
}

const char *store_migration_after(int version) {
  int n = (int)(sizeof migrations_after / sizeof migrations_after[0]);
  return version >= 1 && version < n ? migrations_after[version] : NULL;
}

/* ---- the schema a store may have ---------------------------------------------------------------- */

/* The objects a listing names, in its order (store_schema_listing, store_schema_lists_as). */
#define SCHEMA_OBJECTS "SELECT type, name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name"

char *store_schema_listing(sqlite3 *db) {
  sqlite3_stmt *q;
  const char *sql = "SELECT group_concat(type || ' ' || name || ' ' || coalesce(sql, ''), char(10)) FROM (" SCHEMA_OBJECTS ")";
  if (sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) return NULL;
  char *out = NULL;
  if (sqlite3_step(q) == SQLITE_ROW) {
    const char *t = (const char *)sqlite3_column_text(q, 0);
    out = sqlite3_mprintf("%s", t ? t : "");
  }
  sqlite3_finalize(q);
  return out;
}

/* Whether the rest of a listing, [*at, end), begins with the n bytes at p: then *at moves past them. */
static int schema_takes(const char **at, const char *end, const char *p, size_t n) {
  if ((size_t)(end - *at) < n || (n && memcmp(*at, p, n))) return 0;
  *at += n;
  return 1;
}

int store_schema_lists_as(sqlite3 *db, const char *want) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(db, SCHEMA_OBJECTS, -1, &q, NULL) != SQLITE_OK) return 0;
  const char *at = want, *end = want + strlen(want);
  int same = 1, rows = 0, rc;
  while (same && (rc = sqlite3_step(q)) == SQLITE_ROW) {
    for (int i = 0; i < 3 && same; i++) {
      const char *sep = i ? " " : rows ? "\n" : "";
      const char *v = (const char *)sqlite3_column_text(q, i);
      size_t n = v ? (size_t)sqlite3_column_bytes(q, i) : 0;
      same = schema_takes(&at, end, sep, strlen(sep)) && schema_takes(&at, end, v, n);
    }
    rows++;
  }
  if (same && rc != SQLITE_DONE) same = 0;
  sqlite3_finalize(q);
  return same && at == end;
}

/* The first object of db that the reference schema lacks or defines otherwise, said as
 * "TYPE 'NAME'" followed by how: 1 found, 0 none. */
static int schema_first_stranger(sqlite3 *db, sqlite3 *ref, const char *how, char *what, size_t n) {
  sqlite3_stmt *q;
  int any = 0;
  if (sqlite3_prepare_v2(db, "SELECT type, name, coalesce(sql, '') FROM sqlite_schema ORDER BY type, name", -1, &q,
                         NULL) != SQLITE_OK)
    return 0;
  sqlite3_stmt *r;
  if (sqlite3_prepare_v2(ref, "SELECT 1 FROM sqlite_schema WHERE type = ?1 AND name = ?2 AND coalesce(sql, '') = ?3",
                         -1, &r, NULL) != SQLITE_OK) {
    sqlite3_finalize(q);
    return 0;
  }
  while (sqlite3_step(q) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(q, 1);
    if (name && !strncmp(name, "sqlite_", 7)) continue;
    for (int i = 0; i < 3; i++) sqlite3_bind_value(r, i + 1, sqlite3_column_value(q, i));
    int found = sqlite3_step(r) == SQLITE_ROW;
    sqlite3_reset(r);
    if (!found) {
      snprintf(what, n, "%s '%.100s' %s", sqlite3_column_text(q, 0), name ? name : "", how);
      any = 1;
      break;
    }
  }
  sqlite3_finalize(r);
  sqlite3_finalize(q);
  return any;
}

int store_schema_check(sqlite3 *db, int version, char *what, size_t n) {
  sqlite3 *ref = NULL;
  if (sqlite3_open_v2(":memory:", &ref, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, NULL) != SQLITE_OK) {
    sqlite3_close(ref);
    snprintf(what, n, "out of memory");
    return -1;
  }
  int rc = 0;
  for (int v = 1; v <= version && !rc; v++)
    rc = sqlite3_exec(ref, store_migration(v), NULL, NULL, NULL) != SQLITE_OK ||
         (store_migration_after(v) && sqlite3_exec(ref, store_migration_after(v), NULL, NULL, NULL) != SQLITE_OK);
  char *mine = rc ? NULL : store_schema_listing(db), *want = rc ? NULL : store_schema_listing(ref);
  if (rc || !mine || !want) {
    snprintf(what, n, "%s", rc ? "cannot build the reference schema" : sqlite3_errmsg(mine ? ref : db));
    rc = -1;
  } else if (strcmp(mine, want)) {
    /* an object memplay did not make (or made otherwise), else one of its own that is gone */
    if (!schema_first_stranger(db, ref, "is not one memplay made", what, n) &&
        !schema_first_stranger(ref, db, "is missing", what, n))
      snprintf(what, n, "its objects differ from memplay's");
    rc = 1;
  }
  sqlite3_free(mine);
  sqlite3_free(want);
  sqlite3_close(ref);
  return rc;
}
