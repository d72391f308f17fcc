/* devices_store.c: device profiles in the store's device_profiles table, with the built-ins behind them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <yajl/yajl_tree.h>

#include "devices_store.h"
#include "io/jsonscan.h"
#include "io/jsonw.h"

const char *const devices_sources[] = {"builtin", "user", "calibrated", NULL};

static int source_ok(const char *s) {
  for (int i = 0; devices_sources[i]; i++)
    if (!strcmp(devices_sources[i], s)) return 1;
  return 0;
}

static int fail(store *s, char *err, size_t errlen) {
  snprintf(err, errlen, "%s", store_error(s));
  return -1;
}

static void now_utc(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

void devices_profile_json(yajl_gen g, const sim_device_profile *p) {
  for (size_t i = 0; i < sim_device_nfields; i++) {
    const sim_device_field *f = &sim_device_fields[i];
    double v = sim_device_get_number(p, f);
    switch (f->kind) {
    case SIM_DF_TEXT: jsonw_kstr(g, f->key, sim_device_get_text(p, f)); break;
    case SIM_DF_BYTES: jsonw_kuint(g, f->key, (uint64_t)v); break;
    case SIM_DF_INT:
    case SIM_DF_TIME:
    case SIM_DF_PER_GIB: jsonw_kint(g, f->key, (int64_t)v); break;
    default: jsonw_kdouble(g, f->key, v);
    }
  }
}

int devices_profile_from_json(const char *json, sim_device_profile *p, char *err, size_t errlen) {
  char perr[256];
  yajl_val root = jsonscan_tree(json, perr, sizeof perr);
  if (!root || !YAJL_IS_OBJECT(root)) {
    snprintf(err, errlen, "not a JSON object%s%s", root ? "" : ": ", root ? "" : perr);
    yajl_tree_free(root);
    return -1;
  }
  int rc = 0;
  for (size_t i = 0; i < root->u.object.len && !rc; i++) {
    const sim_device_field *f = sim_device_field_find(root->u.object.keys[i]);
    yajl_val v = root->u.object.values[i];
    if (!f) continue; /* a field of a later memplay */
    const char *why = "has a value of the wrong kind";
    if (f->kind == SIM_DF_TEXT) {
      char e2[64];
      if (YAJL_IS_STRING(v) && !sim_device_set(p, f->key, YAJL_GET_STRING(v), e2, sizeof e2)) continue;
    } else if (YAJL_IS_NUMBER(v)) {
      double d = YAJL_IS_INTEGER(v) ? (double)YAJL_GET_INTEGER(v) : YAJL_IS_DOUBLE(v) ? YAJL_GET_DOUBLE(v) : -1;
      if (sim_device_number_ok(f, d)) {
        sim_device_set_number(p, f, d);
        continue;
      }
      why = "is out of range";
    }
    if (YAJL_IS_NUMBER(v)) snprintf(err, errlen, "field '%s' %s (%s)", f->key, why, v->u.number.r);
    else snprintf(err, errlen, "field '%s' %s", f->key, why);
    rc = -1;
  }
  yajl_tree_free(root);
  return rc;
}

static char *profile_text(const sim_device_profile *p, size_t *len) {
  yajl_gen g = jsonw_mem();
  yajl_gen_map_open(g);
  devices_profile_json(g, p);
  yajl_gen_map_close(g);
  const char *t = jsonw_text(g, len);
  char *copy = malloc(*len + 1);
  if (copy) {
    memcpy(copy, t, *len);
    copy[*len] = 0;
  }
  yajl_gen_free(g);
  return copy;
}

/* ---- rows -------------------------------------------------------------------------------------- */

/* Reads the current row of q (name, source, params, updated_at) into e. */
static int entry_from_row(sqlite3_stmt *q, devices_entry *e, char *err, size_t errlen) {
  const char *name = (const char *)sqlite3_column_text(q, 0);
  const char *source = (const char *)sqlite3_column_text(q, 1);
  const char *params = (const char *)sqlite3_column_text(q, 2);
  const char *updated = (const char *)sqlite3_column_text(q, 3);
  memset(e, 0, sizeof *e);
  const sim_device_profile *b = sim_device_builtin(name ? name : "");
  if (b) e->p = *b;
  else sim_device_defaults(&e->p);
  snprintf(e->p.name, sizeof e->p.name, "%s", name ? name : "");
  snprintf(e->source, sizeof e->source, "%s", source ? source : "");
  snprintf(e->updated_at, sizeof e->updated_at, "%s", updated ? updated : "");
  char perr[200];
  if (devices_profile_from_json(params ? params : "", &e->p, perr, sizeof perr) ||
      sim_device_check(&e->p, perr, sizeof perr)) { /* a store made elsewhere: what --set refuses */
    snprintf(err, errlen, "cannot read device profile '%s' (table device_profiles, column params): %s", e->p.name, perr);
    return -1;
  }
  return 0;
}

static void entry_builtin(const sim_device_profile *b, devices_entry *e) {
  memset(e, 0, sizeof *e);
  e->p = *b;
  snprintf(e->source, sizeof e->source, "builtin");
}

int devices_store_get(store *s, const char *name, devices_entry *e, char *err, size_t errlen) {
  sqlite3_stmt *q = store_stmt(s, "SELECT name, source, params, updated_at FROM device_profiles "
                                  "WHERE name = ?1 COLLATE NOCASE");
  if (!q) return fail(s, err, errlen);
  sqlite3_bind_text(q, 1, name, -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(q);
  const sim_device_profile *b = sim_device_builtin(name);
  if (rc == SQLITE_ROW) {
    const char *src = (const char *)sqlite3_column_text(q, 1);
    if (!(b && src && !strcmp(src, "builtin"))) {
      int r = entry_from_row(q, e, err, errlen);
      sqlite3_reset(q);
      return r ? -1 : 0;
    }
    entry_builtin(b, e);
    const char *u = (const char *)sqlite3_column_text(q, 3);
    snprintf(e->updated_at, sizeof e->updated_at, "%s", u ? u : "");
    sqlite3_reset(q);
    return 0;
  }
  sqlite3_reset(q);
  if (rc != SQLITE_DONE) {
    store_fail(s, q, "cannot read device profiles");
    return fail(s, err, errlen);
  }
  if (!b) return 1;
  entry_builtin(b, e);
  return 0;
}

static int each_u(store *s, int (*fn)(void *arg, const devices_entry *e), void *arg, char *err, size_t errlen) {
  devices_entry e;
  for (size_t i = 0; i < sim_builtin_ndevices; i++) {
    int rc = devices_store_get(s, sim_builtin_devices[i].name, &e, err, errlen);
    if (rc < 0) return -1;
    if (rc == 0 && fn(arg, &e)) return 0;
  }
  sqlite3_stmt *q = store_stmt(s, "SELECT name, source, params, updated_at FROM device_profiles ORDER BY name");
  if (!q) return fail(s, err, errlen);
  int rc;
  while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(q, 0);
    if (name && sim_device_builtin(name)) continue;
    if (entry_from_row(q, &e, err, errlen)) {
      sqlite3_reset(q);
      return -1;
    }
    if (fn(arg, &e)) break;
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    store_fail(s, q, "cannot read device profiles");
    sqlite3_reset(q);
    return fail(s, err, errlen);
  }
  sqlite3_reset(q);
  return 0;
}

/* The built-in profiles, then the stored ones: a dozen statements, read in one read transaction
 * (where one cannot begin, statement by statement; the span is ended either way). */
int devices_store_each(store *s, int (*fn)(void *arg, const devices_entry *e), void *arg, char *err, size_t errlen) {
  store_read_begin(s);
  int rc = each_u(s, fn, arg, err, errlen);
  store_read_end(s);
  return rc;
}

static int put_row(store *s, const sim_device_profile *p, const char *source, char *err, size_t errlen) {
  size_t len;
  char *json = profile_text(p, &len);
  if (!json) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  char now[32];
  now_utc(now, sizeof now);
  sqlite3_stmt *q = store_stmt(s, "DELETE FROM device_profiles WHERE name = ?1 COLLATE NOCASE");
  if (!q) goto db;
  sqlite3_bind_text(q, 1, p->name, -1, SQLITE_TRANSIENT);
  if (sqlite3_step(q) != SQLITE_DONE) {
    store_fail(s, q, "cannot replace device profile");
    goto db;
  }
  q = store_stmt(s, "INSERT INTO device_profiles(name, source, total_memory, params, updated_at) "
                    "VALUES (?1, ?2, ?3, ?4, ?5)");
  if (!q) goto db;
  sqlite3_bind_text(q, 1, p->name, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(q, 2, source, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(q, 3, (int64_t)p->total_memory);
  sqlite3_bind_text(q, 4, json, (int)len, SQLITE_TRANSIENT);
  sqlite3_bind_text(q, 5, now, -1, SQLITE_TRANSIENT);
  if (sqlite3_step(q) != SQLITE_DONE) {
    store_fail(s, q, "cannot store device profile");
    goto db;
  }
  free(json);
  return 0;
db:
  free(json);
  return fail(s, err, errlen);
}

int devices_store_put(store *s, const sim_device_profile *p, const char *source, char *err, size_t errlen) {
  if (!source_ok(source)) {
    snprintf(err, errlen, "unknown profile source '%s' (builtin, user or calibrated)", source);
    return -1;
  }
  if (sim_device_check(p, err, errlen)) return -1;
  return put_row(s, p, source, err, errlen);
}

int devices_store_seed(store *s, char *err, size_t errlen) {
  for (size_t i = 0; i < sim_builtin_ndevices; i++) {
    const sim_device_profile *b = &sim_builtin_devices[i];
    sqlite3_stmt *q = store_stmt(s, "SELECT name, source, params, updated_at FROM device_profiles "
                                    "WHERE name = ?1 COLLATE NOCASE");
    if (!q) return fail(s, err, errlen);
    sqlite3_bind_text(q, 1, b->name, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(q);
    int write = 0;
    if (rc == SQLITE_DONE) {
      write = 1;
    } else if (rc == SQLITE_ROW) {
      const char *src = (const char *)sqlite3_column_text(q, 1);
      const char *params = (const char *)sqlite3_column_text(q, 2);
      if (src && !strcmp(src, "builtin")) {
        size_t len;
        char *want = profile_text(b, &len);
        write = !want || !params || strcmp(want, params);
        free(want);
      }
    } else {
      store_fail(s, q, "cannot read device profiles");
      sqlite3_reset(q);
      return fail(s, err, errlen);
    }
    sqlite3_reset(q);
    if (write && put_row(s, b, "builtin", err, errlen)) return -1;
  }
  return 0;
}

int devices_store_delete(store *s, const char *name, char *err, size_t errlen) {
  if (sim_device_builtin(name)) {
    snprintf(err, errlen, "cannot delete the built-in device profile '%s' (--reset undoes edits to it)", name);
    return -1;
  }
  sqlite3_stmt *q = store_stmt(s, "DELETE FROM device_profiles WHERE name = ?1 COLLATE NOCASE");
  if (!q) return fail(s, err, errlen);
  sqlite3_bind_text(q, 1, name, -1, SQLITE_TRANSIENT);
  if (sqlite3_step(q) != SQLITE_DONE) {
    store_fail(s, q, "cannot delete device profile");
    return fail(s, err, errlen);
  }
  return sqlite3_changes(store_db(s)) ? 0 : 1;
}

int devices_store_reset(store *s, const char *name, char *err, size_t errlen) {
  const sim_device_profile *b = sim_device_builtin(name);
  if (!b) return 1;
  return put_row(s, b, "builtin", err, errlen);
}

typedef struct match_ctx {
  const char *name;
  uint64_t memory;
  devices_entry best;
  int best_score, found;
} match_ctx;

static int match_one(void *arg, const devices_entry *e) {
  match_ctx *m = arg;
  int score = sim_device_match(&e->p, m->name, m->memory);
  if (!score) return 0;
  if (!strcmp(e->source, "calibrated")) score += 10000;
  if (score > m->best_score) {
    m->best = *e;
    m->best_score = score;
    m->found = 1;
  }
  return 0;
}

int devices_store_match(store *s, const char *recorded_name, uint64_t recorded_memory, devices_entry *e, char *err,
                        size_t errlen) {
  if (!recorded_name || !*recorded_name) return 1;
  match_ctx *m = calloc(1, sizeof *m);
  if (!m) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  m->name = recorded_name;
  m->memory = recorded_memory;
  int rc = devices_store_each(s, match_one, m, err, errlen);
  if (rc == 0) {
    if (m->found) *e = m->best;
    rc = m->found ? 0 : 1;
  }
  free(m);
  return rc;
}
