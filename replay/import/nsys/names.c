/* names.c: Nsight Systems: string ids to names: kernels, calls (and what each call is), copies. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nsys_int.h"

/* The labels of memory kinds and copy kinds in copy names. */
static const char *const mk_labels[MK__COUNT] = {"Pageable", "Pinned",        "Device",         "Array",
                                                 "Managed",  "Device Static", "Managed Static", "Unknown"};
static const char *const ck_labels[CK__COUNT] = {"", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD",
                                                 "DtoA", "DtoD", "HtoH", "PtoP", "HtoD", "DtoH", "DtoD"};

/* The text of nsys string id (a pointer valid until the next call), or NULL. */
static const char *nsys_string(nsys *x, int64_t id, int *err) {
  *err = 0;
  if (!x->str_q && sqlite3_prepare_v3(x->db, "SELECT value FROM StringIds WHERE id = ?1", -1, SQLITE_PREPARE_PERSISTENT,
                                      &x->str_q, NULL)) {
    *err = nsys_dbfail(x, "StringIds", -1, NULL);
    return NULL;
  }
  sqlite3_reset(x->str_q);
  sqlite3_bind_int64(x->str_q, 1, id);
  int rc = sqlite3_step(x->str_q);
  if (rc == SQLITE_ROW) return (const char *)sqlite3_column_text(x->str_q, 0);
  if (rc != SQLITE_DONE) *err = nsys_dbfail(x, "StringIds", id, NULL);
  return NULL;
}

static int64_t intern(nsys *x, const char *s, size_t n) {
  int64_t id = store_intern_string(x->ic->s, s, n);
  if (id < 0) import_error(x->ic, "cannot import '%s': %s", x->path, store_error(x->ic->s));
  return id;
}

/* A kernel's name: its store string id (0 when StringIds lacks it), or -1 on error. */
int64_t nsys_kernel_name(nsys *x, int64_t sid) {
  uint64_t *v = sim_map_get(&x->kname, (uint64_t)sid);
  if (v) return (int64_t)*v;
  int err;
  const char *s = nsys_string(x, sid, &err);
  if (err) return -1;
  int64_t id = s ? intern(x, s, strlen(s)) : 0;
  if (id < 0) return -1;
  *sim_map_put(&x->kname, (uint64_t)sid, NULL) = (uint64_t)id;
  return id;
}

/* Runtime names carry the API version (cudaMalloc_v3020): memplay keeps the function's name. */
static size_t api_name_len(const char *s) {
  size_t n = strlen(s);
  if (strncmp(s, "cuda", 4)) return n;
  size_t i = n;
  while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') i--;
  if (i < n && i >= 2 && s[i - 1] == 'v' && s[i - 2] == '_') return i - 2;
  return n;
}

static int name_is(const char *s, size_t n, const char *want) { return strlen(want) == n && !memcmp(s, want, n); }

static int call_class(const char *s, size_t n) {
  /* per-thread default stream variants behave as the plain call */
  if (n > 5 && (!memcmp(s + n - 5, "_ptsz", 5) || !memcmp(s + n - 5, "_ptds", 5))) n -= 5;
  if (name_is(s, n, "cudaDeviceSynchronize") || name_is(s, n, "cudaThreadSynchronize") ||
      name_is(s, n, "cuCtxSynchronize"))
    return CALL_SYNC_DEVICE;
  if (name_is(s, n, "cudaStreamSynchronize") || name_is(s, n, "cuStreamSynchronize")) return CALL_SYNC_STREAM;
  if (name_is(s, n, "cudaEventSynchronize") || name_is(s, n, "cuEventSynchronize")) return CALL_SYNC_EVENT;
  return CALL_OTHER;
}

/* A call's name id in the store, its class and whether it is asynchronous, packed: id << 8 | async << 4 | class. */
int64_t nsys_call_info(nsys *x, int64_t sid) {
  uint64_t *v = sim_map_get(&x->cname, (uint64_t)sid);
  if (v) return (int64_t)*v;
  int err;
  const char *s = nsys_string(x, sid, &err);
  if (err) return -1;
  int64_t packed = 0;
  if (s) {
    size_t n = api_name_len(s);
    int64_t id = intern(x, s, n);
    if (id < 0) return -1;
    int async = memmem(s, n, "Async", 5) != NULL;
    packed = id << 8 | (int64_t)async << 4 | call_class(s, n);
  }
  *sim_map_put(&x->cname, (uint64_t)sid, NULL) = (uint64_t)packed;
  return packed;
}

/* "Memcpy HtoD (Pinned -> Device)", as the PyTorch profiler names copies; "Memset (Device)". */
int64_t nsys_copy_name(nsys *x, int memset, int ck, int sk, int dk) {
  uint64_t key = (uint64_t)memset << 24 | (uint64_t)(ck & 255) << 16 | (uint64_t)(sk & 255) << 8 | (uint64_t)(dk & 255);
  uint64_t *v = sim_map_get(&x->cpname, key);
  if (v) return (int64_t)*v;
  char buf[96];
  if (memset) snprintf(buf, sizeof buf, "Memset (%s)", dk < MK__COUNT ? mk_labels[dk] : "Unknown");
  else {
    int n = snprintf(buf, sizeof buf, "%sMemcpy %s", ck >= CK_UVM_HTOD && ck <= CK_UVM_DTOD ? "Unified " : "",
                     ck > 0 && ck < CK__COUNT ? ck_labels[ck] : "Unknown");
    if (sk < MK__COUNT && dk < MK__COUNT)
      snprintf(buf + n, sizeof buf - (size_t)n, " (%s -> %s)", mk_labels[sk], mk_labels[dk]);
  }
  int64_t id = intern(x, buf, strlen(buf));
  if (id < 0) return -1;
  *sim_map_put(&x->cpname, key, NULL) = (uint64_t)id;
  return id;
}
