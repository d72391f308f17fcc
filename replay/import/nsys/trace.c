/* trace.c: Nsight Systems: one process into one trace: merge, notes, attrs, or the fast pass giving way. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/jsonw.h"
#include "nsys_int.h"
#include "sim/allocator.h"

/* ---- what the trace ran on ------------------------------------------------------------------------ */

static const ngpu *gpu_of(const nsys *x, int64_t id) {
  for (size_t i = 0; i < x->ngpus; i++)
    if (x->gpus[i].id == id) return &x->gpus[i];
  return NULL;
}

static char *process_name(nsys *x, int64_t key) {
  int e = nsys_has_table(x->db, "PROCESSES");
  if (e <= 0) return NULL;
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(x->db, "SELECT name FROM PROCESSES WHERE globalPid >> 24 = ?1 AND name IS NOT NULL LIMIT 1", -1,
                         &q, NULL))
    return NULL;
  sqlite3_bind_int64(q, 1, key);
  char *n = NULL;
  if (sqlite3_step(q) == SQLITE_ROW) n = nsys_strdup((const char *)sqlite3_column_text(q, 0));
  sqlite3_finalize(q);
  return n;
}

/* Devices a process used: one (its name and memory), several alike, or several different. */
static void describe_devices(nsys *x, uint64_t mask, store_trace *meta, yajl_gen g) {
  jsonw_str(g, "devices");
  yajl_gen_array_open(g);
  int n = 0;
  const ngpu *first = NULL;
  int alike = 1;
  int64_t smallest = 0;
  for (int d = 0; d < 64; d++) {
    if (!(mask >> d & 1)) continue;
    n++;
    const ngpu *gp = gpu_of(x, d);
    yajl_gen_map_open(g);
    jsonw_kint(g, "id", d);
    if (gp) {
      jsonw_kstr(g, "name", gp->name);
      if (gp->total_memory > 0) jsonw_kint(g, "total_memory", gp->total_memory);
    }
    yajl_gen_map_close(g);
    if (!gp) {
      alike = 0;
      continue;
    }
    if (!first) first = gp;
    else if (!gp->name || !first->name || strcmp(gp->name, first->name) || gp->total_memory != first->total_memory)
      alike = 0;
    if (gp->total_memory > 0 && (!smallest || gp->total_memory < smallest)) smallest = gp->total_memory;
  }
  yajl_gen_array_close(g);
  meta->device_index = -1;
  if (n == 1) {
    for (int d = 0; d < 64; d++)
      if (mask >> d & 1) meta->device_index = d;
  }
  if (first && first->name) meta->device_name = nsys_strdup(first->name);
  if (first && !alike && n > 1) {
    /* different cards: name them all; the smallest bounds what fits on every one */
    free(meta->device_name);
    meta->device_name = NULL;
    for (int d = 0; d < 64; d++) {
      const ngpu *gp = (mask >> d & 1) ? gpu_of(x, d) : NULL;
      if (gp && gp->name && (!meta->device_name || !strstr(meta->device_name, gp->name)))
        nsys_append_list(&meta->device_name, gp->name);
    }
  }
  meta->device_memory = smallest;
}

/* What the trace ran on, and what else the export says about the process: the trace's attrs and
 * device columns. 0 or -1. */
static int trace_attrs(nsys *x, const nproc *p, const merge *m, store_writer *w) {
  yajl_gen g = jsonw_mem();
  yajl_gen_map_open(g);
  jsonw_kstr(g, "nsys_version", x->product_version);
  jsonw_kstr(g, "export_schema", x->schema_version);
  jsonw_kint(g, "pid", p->key & 0xFFFFFF);
  char *pname = process_name(x, p->key);
  jsonw_kstr(g, "process", pname);
  free(pname);
  store_trace dm;
  memset(&dm, 0, sizeof dm);
  describe_devices(x, m->devmask_used, &dm, g);
  jsonw_kbool(g, "memory_usage_events", m->counts[N_MEMORY_EVENTS] > 0);
  if (m->static_count) {
    jsonw_kint(g, "device_static_count", m->static_count);
    jsonw_kint(g, "device_static_bytes", m->static_bytes);
  }
  yajl_gen_map_close(g);
  int rc = 0;
  if (store_writer_set(w, "attrs", jsonw_text(g, NULL)) ||
      (dm.device_name && store_writer_set(w, "device_name", dm.device_name)) ||
      (dm.device_memory > 0 && store_writer_set_int(w, "device_memory", dm.device_memory)) ||
      store_writer_set_int(w, "device_index", dm.device_index))
    rc = nsys_fail(x, "%s", store_error(x->ic->s));
  free(dm.device_name);
  yajl_gen_free(g);
  return rc;
}

/* ---- one trace per process ------------------------------------------------------------------------ */

int nsys_import_process(nsys *x, nproc *p, int several) {
  import_ctx *ic = x->ic;
  int64_t pid = p->key & 0xFFFFFF;
  char suffix[48];
  snprintf(suffix, sizeof suffix, "-pid%" PRId64, pid);
  char *name = import_trace_name(ic, several ? suffix : NULL);
  if (!name) return nsys_fail(x, "%s", store_error(ic->s));
  if (!x->fast && x->tb[TB_MEMORY].usable && (!p->sim_valid || p->t[TB_MEMORY].mem_unsorted)) {
    if (nsys_presim_sorted(x, p, several)) {
      free(name);
      return -1;
    }
  }
  store_trace meta;
  memset(&meta, 0, sizeof meta);
  meta.name = name;
  meta.source_format = (char *)"nsys";
  meta.source_file = (char *)x->path;
  meta.device_index = -1;
  store_writer *w = NULL;
  merge m;
  memset(&m, 0, sizeof m);
  m.x = x;
  m.p = p;
  m.several = several;
  sim_map_init(&m.pending);
  sim_map_init(&m.seen);
  /* the devices and attrs are set once the merge has seen which devices the events name */
  int rc = import_begin_trace(ic, &meta, &w);
  if (rc) {
    nsys_fail(x, "%s", store_error(ic->s));
    goto out;
  }
  m.w = w;
  rc = nsys_merge_run(&m);
  if (!rc && x->fast && !x->fast_key_set) {
    x->restart = 1; /* nothing at all: the careful pass says so */
    snprintf(x->why, sizeof x->why, "no rows");
    rc = -1;
  }
  if (rc && x->restart) {
    /* an assumption of the optimistic pass failed: drop what it wrote, and say so to the caller */
    int64_t id = store_writer_trace_id(w);
    store_writer_abort(w);
    w = NULL;
    rc = store_trace_delete(ic->s, id) ? nsys_fail(x, "%s", store_error(ic->s)) : 1;
    if (rc < 0) x->restart = 0;
    goto out;
  }
  if (rc) goto out;
  if (x->fast) p->key = x->fast_key;
  if (m.counts[N_MEMORY_EVENTS] && store_writer_set(w, "allocator", sim_cuda_ops.name)) {
    rc = nsys_fail(x, "%s", store_error(ic->s));
    goto out;
  }
  rc = nsys_write_notes(x, p, &m, w, several, suffix);
  if (!rc && m.pool_allocs && !m.plain_allocs)
    rc = store_writer_set(w, "allocator", sim_async_ops.name) ? nsys_fail(x, "%s", store_error(ic->s)) : 0;
  if (!rc) rc = trace_attrs(x, p, &m, w);
  if (!rc) {
    rc = import_finish_trace(ic, w, name);
    w = NULL;
  }
out:
  if (w) store_writer_abort(w);
  nsys_merge_release(&m);
  free(name);
  return rc;
}
