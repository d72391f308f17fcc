/* notes.c: Nsight Systems: what an import counted, inferred or dropped, kept as the trace's notes (store stats). */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "nsys_int.h"

typedef struct note_def {
  const char *name, *severity, *detail;
} note_def;

static const note_def notes[N__COUNT] = {
  [N_STATIC] = {"nsys_device_static_allocations", "info",
                "__device__ variables placed by the module loader (memKind Device/Managed Static): not allocations, "
                "left out of the events; their bytes are in the trace's attrs"},
  [N_PREEXISTING] = {"nsys_preexisting_allocations", "info",
                     "freed without being allocated during the capture: rebuilt as allocations live at its start"},
  [N_UNMATCHED_FREE] = {"nsys_unmatched_frees", "warning", "frees of an address with nothing live there: dropped"},
  [N_REALLOC] = {"nsys_allocations_at_live_address", "warning",
                 "an allocation at an address still live: the earlier allocation is taken as freed just before"},
  [N_SIZE_MISMATCH] = {"nsys_free_size_mismatch", "warning", "frees whose bytes differ from their allocation's"},
  [N_ORPHAN] = {"nsys_rows_without_call", "info",
                "activities or memory events whose API call is not in the export: timed by their own start"},
  [N_DUP_CALL] = {"nsys_duplicate_calls", "info", "calls recorded twice with one correlationId: kept once"},
  [N_BAD_ENUM] = {"nsys_unknown_enum_values", "warning", "rows with an enum value memplay does not know"},
  [N_SYNC_NO_STREAM] = {"nsys_stream_syncs_without_stream", "info",
                        "stream synchronizations whose stream is not recorded: taken as device-wide"},
  [N_NEG_DUR] = {"nsys_negative_durations", "warning", "rows ending before they start: taken as zero length"},
  [N_MEMORY_EVENTS] = {NULL, NULL, NULL},
  [N_UNCORRELATED] = {"nsys_uncorrelated_rows", "info",
                      "rows with no correlationId (module statics, migrations): timed by their own start"},
  [N_BATCHED_COPIES] = {"nsys_batched_copies", "info", "memcpy rows standing for several copies (copyCount > 1)"},
};

static int write_note(nsys *x, store_writer *w, const char *name, const char *sev, int64_t v, const char *detail) {
  if (store_writer_stat(w, name, sev, v, detail)) {
    import_error(x->ic, "cannot import '%s': %s", x->path, store_error(x->ic->s));
    return -1;
  }
  return 0;
}

static int64_t pool_event_rows(nsys *x, const nproc *p, int several) {
  if (nsys_has_table(x->db, "CUDA_GPU_MEMORY_POOL_EVENTS") <= 0) return 0;
  sqlite3_stmt *q;
  const char *sql = several ? "SELECT count(*) FROM CUDA_GPU_MEMORY_POOL_EVENTS WHERE globalPid >> 24 = ?1"
                            : "SELECT count(*) FROM CUDA_GPU_MEMORY_POOL_EVENTS";
  if (sqlite3_prepare_v2(x->db, sql, -1, &q, NULL)) return 0;
  sqlite3_bind_int64(q, 1, p->key);
  int64_t n = sqlite3_step(q) == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
  sqlite3_finalize(q);
  return n;
}

int nsys_write_notes(nsys *x, const nproc *p, const merge *m, store_writer *w, int several, const char *suffix) {
  int rc = 0;
  int64_t memory_rows = m->counts[N_MEMORY_EVENTS];
  for (int i = 0; i < N__COUNT && !rc; i++) {
    int64_t v = i == N_STATIC ? m->static_count : m->counts[i];
    if (notes[i].name && v) rc = write_note(x, w, notes[i].name, notes[i].severity, v, notes[i].detail);
  }
  if (!rc && x->other_class_rows)
    rc = write_note(x, w, "nsys_other_event_class_calls", "info", x->other_class_rows,
                    "rows of CUPTI_ACTIVITY_KIND_RUNTIME that are neither CUDA runtime nor driver calls (eventClass), "
                    "such as the backtrace copies of calls: not imported");
  if (!rc && !x->fast) {
    char detail[256];
    snprintf(detail, sizeof detail, "read with a prescan, and sorted by SQLite where needed: %s",
             x->why[0] ? x->why : "asked for with --set prescan=1");
    rc = write_note(x, w, "nsys_careful_pass", "info", 1, detail);
  }
  int64_t pool_rows = rc ? 0 : pool_event_rows(x, p, several);
  if (!rc && pool_rows)
    rc = write_note(x, w, "nsys_memory_pool_events", "info", pool_rows,
                    "CUDA_GPU_MEMORY_POOL_EVENTS rows (pool creation, trimming, destruction): not imported");
  if (!rc && !memory_rows) {
    const char *msg = x->have_memory_table
                        ? "the export has no GPU memory usage events for this process, so the trace has its kernels, "
                          "copies and calls but no allocations or frees; record them with `nsys profile "
                          "--cuda-memory-usage=true`"
                        : "the report was recorded without GPU memory tracking (no CUDA_GPU_MEMORY_USAGE_EVENTS table), "
                          "so the trace has its kernels, copies and calls but no allocations or frees; record them with "
                          "`nsys profile --cuda-memory-usage=true`";
    rc = write_note(x, w, "nsys_no_memory_events", "data_loss", 1, msg);
    if (!rc) import_warn(x->ic, "'%s'%s%s: %s", x->path, several ? " process " : "", several ? suffix + 4 : "", msg);
  }
  if (!rc && m->counts[N_UNMATCHED_FREE])
    import_warn(x->ic, "'%s': %" PRId64 " frees of addresses with nothing live were dropped (see `memplay info`)",
                x->path, m->counts[N_UNMATCHED_FREE]);
  return rc;
}
