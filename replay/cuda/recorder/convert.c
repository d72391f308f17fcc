/* convert.c: CUPTI records to a memplay trace: issue order, frees matched to allocations, memory kinds. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"

/* ---- state ------------------------------------------------------------------------------------ */

void rec_init(rec_state *st) {
  memset(st, 0, sizeof *st);
  sim_map_init(&st->api_by_corr);
  sim_map_init(&st->str_by_hash);
  sim_map_init(&st->default_streams);
  sim_map_init(&st->context_device);
  sim_map_init(&st->call_addr);
}

void rec_release(rec_state *st) {
  free(st->recs);
  free(st->apis);
  for (size_t i = 0; i < st->nstr; i++) free(st->strs[i]);
  free(st->strs);
  sim_map_release(&st->api_by_corr);
  sim_map_release(&st->str_by_hash);
  sim_map_release(&st->default_streams);
  sim_map_release(&st->context_device);
  sim_map_release(&st->call_addr);
  memset(st, 0, sizeof *st);
}

static uint64_t fnv1a(const char *s) {
  uint64_t h = UINT64_C(14695981039346656037);
  for (; *s; s++) h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
  return h;
}

uint32_t rec_intern(rec_state *st, const char *s) {
  if (!s) s = "";
  /* Open addressing on the hash: a collision moves on to the next hash value. */
  for (uint64_t h = fnv1a(s);; h++) {
    uint64_t *id = sim_map_get(&st->str_by_hash, h);
    if (!id) {
      sim_grow((void **)&st->strs, &st->capstr, st->nstr + 1, sizeof *st->strs);
      size_t n = strlen(s) + 1;
      st->strs[st->nstr] = sim_xmalloc(n);
      memcpy(st->strs[st->nstr], s, n);
      st->nstr++;
      *sim_map_put(&st->str_by_hash, h, NULL) = st->nstr;
      return (uint32_t)st->nstr;
    }
    if (!strcmp(st->strs[*id - 1], s)) return (uint32_t)*id;
  }
}

const char *rec_string(const rec_state *st, uint32_t id) { return id && id <= st->nstr ? st->strs[id - 1] : NULL; }

void rec_add(rec_state *st, const rec_record *r) {
  sim_grow((void **)&st->recs, &st->cap, st->n + 1, sizeof *st->recs);
  st->recs[st->n++] = *r;
}

int rec_api_relevant(const char *name) {
  /* The calls that launch, copy, set, allocate, free or wait: every activity memplay keeps comes
   * from one of them. Other calls (cudaGetDevice, cudaGetLastError, ...) are counted, not kept. */
  static const char *const words[] = {"Launch", "Memcpy", "Memset", "Malloc", "Free", "Alloc", "Synchronize",
                                      "MemMap", "MemUnmap", "MemCreate", "MemRelease", "Graph", NULL};
  if (!name) return 0;
  for (size_t i = 0; words[i]; i++)
    if (strstr(name, words[i])) return 1;
  return 0;
}

uint32_t rec_api_name(rec_state *st, const char *name) { return rec_api_relevant(name) ? rec_intern(st, name) : 0; }

void rec_add_api(rec_state *st, uint32_t correlation, uint64_t start, uint64_t end, uint32_t name) {
  st->api_seen++;
  if (!correlation || !name) return;
  sim_grow((void **)&st->apis, &st->capapi, st->napi + 1, sizeof *st->apis);
  st->apis[st->napi] = (rec_api){start, end, name};
  *sim_map_put(&st->api_by_corr, correlation, NULL) = st->napi++;
}

void rec_add_call_addr(rec_state *st, uint32_t correlation, uint64_t addr) {
  if (correlation && addr) *sim_map_put(&st->call_addr, correlation, NULL) = addr;
}

void rec_default_stream(rec_state *st, uint32_t context, uint32_t stream) {
  *sim_map_put(&st->default_streams, (uint64_t)context << 32 | stream, NULL) = 1;
}

void rec_context(rec_state *st, uint32_t context, uint32_t device) {
  *sim_map_put(&st->context_device, context, NULL) = device;
}

void rec_device_info(rec_state *st, uint32_t device, const char *name, uint64_t total_memory, int cc_major,
                     int cc_minor) {
  if (device >= REC_MAX_DEVICES) return;
  rec_device *d = &st->devices[device];
  d->known = 1;
  d->name = rec_intern(st, name);
  d->total_memory = total_memory;
  d->cc_major = cc_major;
  d->cc_minor = cc_minor;
}

/* ---- ordering --------------------------------------------------------------------------------- */

typedef struct order {
  uint64_t key;   /* host issue time */
  uint64_t start; /* the record's own start */
  uint32_t corr;
  uint32_t idx;
  const rec_api *api;
} order;

static int cmp_order(const void *a, const void *b) {
  const order *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  if (x->corr != y->corr) return x->corr < y->corr ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* ---- writing ---------------------------------------------------------------------------------- */

static void put_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p == '\n') fputs("\\n", f);
    else if (*p == '\t') fputs("\\t", f);
    else if (*p == '\r') fputs("\\r", f);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

typedef struct wctx {
  rec_state *st;
  FILE *f;
  uint64_t origin;
  rec_counts *c;
  sim_map dev_live;  /* address -> size; bit 63 set for cuMemMap ranges */
  sim_map host_live; /* address -> size */
  sim_map unmapped;  /* address -> size: ranges freed at their cuMemUnmap, whose activity record may follow */
} wctx;

#define MAPPED (UINT64_C(1) << 63)

static int64_t rel(const wctx *w, uint64_t t) { return (int64_t)(t - w->origin); }

static int64_t stream_of(const rec_state *st, const rec_record *r) {
  if (r->stream == REC_INVALID_ID) return 0;
  if (r->context != REC_INVALID_ID && sim_map_get(&st->default_streams, (uint64_t)r->context << 32 | r->stream))
    return 0;
  return r->stream;
}

static int device_of(const rec_state *st, const rec_record *r) {
  if (r->device != REC_INVALID_ID) return (int)r->device;
  uint64_t *d = r->context != REC_INVALID_ID ? sim_map_get(&st->context_device, r->context) : NULL;
  return d ? (int)*d : 0;
}

/* Starts an event line with the fields every event has. */
static void begin(wctx *w, const char *kind, const order *o, int device) {
  fprintf(w->f, "{\"kind\":\"%s\",\"ts\":%" PRId64, kind, rel(w, o->key));
  if (o->api) fprintf(w->f, ",\"api_dur\":%" PRIu64, o->api->end > o->api->start ? o->api->end - o->api->start : 0);
  fprintf(w->f, ",\"device\":%d", device);
  w->c->events++;
}

static void end_with_api(wctx *w, const order *o) {
  const char *api = o->api ? rec_string(w->st, o->api->name) : NULL;
  if (api) {
    fputs(",\"args\":{\"api\":", w->f);
    put_str(w->f, api);
    fputc('}', w->f);
  }
  fputs("}\n", w->f);
}

static void free_event(wctx *w, const order *o, int device, uint64_t addr, uint64_t size, int64_t stream) {
  begin(w, "free", o, device);
  fprintf(w->f, ",\"stream\":%" PRId64 ",\"addr\":\"0x%" PRIx64 "\",\"size\":%" PRIu64 ",\"flags\":[\"device_api\"]",
          stream, addr, size);
  end_with_api(w, o);
  w->c->frees++;
}

static void alloc_event(wctx *w, const order *o, int device, uint64_t addr, uint64_t size, int64_t stream,
                        const char *mem, uint64_t tag) {
  int existed;
  uint64_t *slot = sim_map_put(&w->dev_live, addr, &existed);
  if (existed) { /* the release of the earlier allocation here was lost */
    w->c->unreleased_allocs++;
    free_event(w, o, device, addr, *slot & ~MAPPED, stream);
    slot = sim_map_get(&w->dev_live, addr);
  }
  *slot = size | tag;
  begin(w, "alloc", o, device);
  fprintf(w->f, ",\"stream\":%" PRId64 ",\"addr\":\"0x%" PRIx64 "\",\"size\":%" PRIu64 ",\"mem\":\"%s\"", stream, addr,
          size, mem);
  fputs(",\"flags\":[\"device_api\"]", w->f);
  end_with_api(w, o);
  w->c->allocs++;
}

/* A record left unwritten as a second report of what another record wrote: not counted as placed. */
static void duplicate(wctx *w, const order *o) {
  if (!o->api) w->c->uncorrelated--;
}

static void memory(wctx *w, const order *o, const rec_record *r) {
  int device = device_of(w->st, r);
  int64_t stream = stream_of(w->st, r);
  if (r->mem == REC_MEM_PINNED) {
    if (r->op == REC_OP_ALLOCATION) {
      int existed;
      uint64_t *slot = sim_map_put(&w->host_live, r->addr, &existed);
      if (existed) {
        w->c->unreleased_allocs++;
        begin(w, "host_free", o, -1);
        fprintf(w->f, ",\"addr\":\"0x%" PRIx64 "\",\"size\":%" PRIu64 ",\"mem\":\"pinned\"", r->addr, *slot);
        end_with_api(w, o);
        w->c->host_frees++;
        slot = sim_map_get(&w->host_live, r->addr);
      }
      *slot = r->bytes;
      begin(w, "host_alloc", o, -1);
      fprintf(w->f, ",\"addr\":\"0x%" PRIx64 "\",\"size\":%" PRIu64 ",\"mem\":\"pinned\"", r->addr, r->bytes);
      end_with_api(w, o);
      w->c->host_allocs++;
    } else {
      uint64_t size;
      if (!sim_map_del(&w->host_live, r->addr, &size)) {
        w->c->unmatched_releases++;
        return;
      }
      begin(w, "host_free", o, -1);
      fprintf(w->f, ",\"addr\":\"0x%" PRIx64 "\",\"size\":%" PRIu64 ",\"mem\":\"pinned\"", r->addr, size);
      end_with_api(w, o);
      w->c->host_frees++;
    }
    return;
  }
  if (r->mem != REC_MEM_DEVICE && r->mem != REC_MEM_MANAGED) {
    /* __device__ globals (DEVICE_STATIC, MANAGED_STATIC), arrays, registered host memory. */
    if (r->op == REC_OP_ALLOCATION) w->c->static_allocs++;
    return;
  }
  /* CUPTI may also report a mapped range (cuMemMap, cuMemUnmap) as an allocation and a release:
   * the same memory, written once, at its map and its unmap. */
  uint64_t *v = sim_map_get(&w->dev_live, r->addr);
  if (r->op == REC_OP_ALLOCATION) {
    if (v && (*v & MAPPED) && (*v & ~MAPPED) == r->bytes) {
      duplicate(w, o);
      return;
    }
    alloc_event(w, o, device, r->addr, r->bytes, stream, r->mem == REC_MEM_MANAGED ? "managed" : "device", 0);
    return;
  }
  if (v && (*v & MAPPED)) { /* freed at its unmap */
    duplicate(w, o);
    return;
  }
  if (!v) { /* a mapped range already unmapped, or allocated before recording began */
    if (sim_map_del(&w->unmapped, r->addr, NULL))
      duplicate(w, o);
    else
      w->c->unmatched_releases++;
    return;
  }
  uint64_t size = *v;
  sim_map_del(&w->dev_live, r->addr, NULL);
  free_event(w, o, device, r->addr, size, stream);
}

static void unmap(wctx *w, const order *o, const rec_record *r) {
  int device = device_of(w->st, r);
  for (uint64_t at = r->addr; at < r->addr + r->bytes;) {
    uint64_t *v = sim_map_get(&w->dev_live, at);
    if (!v || !(*v & MAPPED)) {
      w->c->unmatched_releases++;
      return;
    }
    uint64_t size = *v & ~MAPPED;
    sim_map_del(&w->dev_live, at, NULL);
    free_event(w, o, device, at, size, 0);
    *sim_map_put(&w->unmapped, at, NULL) = size;
    if (size == 0) return;
    at += size;
  }
}

static const char *host_kind(int k) {
  switch (k) {
  case REC_MEM_PINNED: return "pinned";
  case REC_MEM_PAGEABLE: return "pageable";
  case REC_MEM_MANAGED: return "managed";
  case REC_MEM_DEVICE: return "device";
  default: return "unknown";
  }
}

/* A copy's or memset's device address, when its call's arguments were seen. */
static void put_call_addr(wctx *w, const rec_record *r) {
  uint64_t *a = r->correlation ? sim_map_get(&w->st->call_addr, r->correlation) : NULL;
  uint64_t addr = r->addr ? r->addr : a ? *a : 0;
  if (addr) fprintf(w->f, ",\"addr\":\"0x%" PRIx64 "\"", addr);
}

static void memcpy_event(wctx *w, const order *o, const rec_record *r) {
  const char *dir, *mem;
  switch (r->copy_kind) {
  case REC_COPY_HTOD:
  case REC_COPY_HTOA: dir = "h2d", mem = host_kind(r->src_kind); break;
  case REC_COPY_DTOH:
  case REC_COPY_ATOH: dir = "d2h", mem = host_kind(r->dst_kind); break;
  case REC_COPY_DTOD:
  case REC_COPY_ATOD:
  case REC_COPY_DTOA:
  case REC_COPY_ATOA: dir = "d2d", mem = "device"; break;
  case REC_COPY_HTOH: dir = "h2h", mem = host_kind(r->src_kind); break;
  case REC_COPY_PTOP: dir = "p2p", mem = "device"; break;
  default: w->c->unknown_copies++; return;
  }
  begin(w, "memcpy", o, device_of(w->st, r));
  fprintf(w->f, ",\"stream\":%" PRId64 ",\"size\":%" PRIu64 ",\"dir\":\"%s\",\"mem\":\"%s\",\"dev_ts\":%" PRId64
                ",\"dur\":%" PRIu64,
          stream_of(w->st, r), r->bytes, dir, mem, rel(w, r->start), r->end > r->start ? r->end - r->start : 0);
  put_call_addr(w, r);
  if (r->flags & REC_F_ASYNC) fputs(",\"flags\":[\"async\"]", w->f);
  end_with_api(w, o);
  w->c->copies++;
}

static void memset_event(wctx *w, const order *o, const rec_record *r) {
  begin(w, "memset", o, device_of(w->st, r));
  fprintf(w->f, ",\"stream\":%" PRId64 ",\"size\":%" PRIu64 ",\"mem\":\"%s\",\"dev_ts\":%" PRId64 ",\"dur\":%" PRIu64,
          stream_of(w->st, r), r->bytes, r->mem == REC_MEM_MANAGED ? "managed" : r->mem == REC_MEM_PINNED ? "pinned" : "device",
          rel(w, r->start), r->end > r->start ? r->end - r->start : 0);
  put_call_addr(w, r);
  if (r->flags & REC_F_ASYNC) fputs(",\"flags\":[\"async\"]", w->f);
  end_with_api(w, o);
  w->c->memsets++;
}

static void kernel_event(wctx *w, const order *o, const rec_record *r) {
  begin(w, "kernel", o, device_of(w->st, r));
  fprintf(w->f, ",\"stream\":%" PRId64 ",\"dev_ts\":%" PRId64 ",\"dur\":%" PRIu64, stream_of(w->st, r),
          rel(w, r->start), r->end > r->start ? r->end - r->start : 0);
  const char *name = rec_string(w->st, r->name);
  if (name) {
    fputs(",\"name\":", w->f);
    put_str(w->f, name);
  }
  end_with_api(w, o);
  w->c->kernels++;
}

static void sync_event(wctx *w, const order *o, const rec_record *r) {
  if (r->op == REC_SYNC_STREAM_WAIT_EVENT) { /* a stream waits, not the host */
    w->c->stream_waits++;
    return;
  }
  int64_t stream = -1;
  const char *flags = "";
  if (r->op == REC_SYNC_STREAM) stream = stream_of(w->st, r);
  else if (r->op == REC_SYNC_EVENT) {
    flags = ",\"flags\":[\"sync_event\"]";
    if (r->stream != REC_INVALID_ID) stream = stream_of(w->st, r);
  }
  begin(w, "sync", o, device_of(w->st, r));
  fprintf(w->f, ",\"stream\":%" PRId64 ",\"dur\":%" PRIu64 "%s", stream, r->end > r->start ? r->end - r->start : 0,
          flags);
  end_with_api(w, o);
  w->c->syncs++;
}

static void stat_line(FILE *f, const char *name, const char *severity, uint64_t value, const char *detail) {
  if (!value) return;
  fprintf(f, "{\"kind\":\"stat\",\"name\":\"%s\",\"severity\":\"%s\",\"value\":%" PRIu64 ",\"detail\":", name, severity,
          value);
  put_str(f, detail);
  fputs("}\n", f);
}

/* Whether a record can become an event (others only count). */
static int emits(const rec_record *r) {
  switch (r->kind) {
  case REC_MEMORY: return r->mem == REC_MEM_DEVICE || r->mem == REC_MEM_MANAGED || r->mem == REC_MEM_PINNED;
  case REC_SYNC: return r->op != REC_SYNC_STREAM_WAIT_EVENT;
  case REC_MEMCPY: return r->copy_kind != REC_COPY_UNKNOWN && r->copy_kind <= REC_COPY_PTOP;
  case REC_MEMSET:
  case REC_KERNEL:
  case REC_MAP:
  case REC_UNMAP: return 1;
  default: return 0;
  }
}

/* What the records say before any is written: the time origin, the devices used, the allocator. */
typedef struct rec_scan {
  uint64_t origin;
  int used[REC_MAX_DEVICES];
  uint64_t dev_allocs, async_allocs;
} rec_scan;

/* Each record's place in host issue order (its API call's start, else its own), and what the
 * emitting ones say about the trace. */
static void order_records(rec_state *st, order *ord, rec_counts *c, rec_scan *sc) {
  sc->origin = UINT64_MAX;
  for (size_t i = 0; i < st->n; i++) {
    const rec_record *r = &st->recs[i];
    order *o = &ord[i];
    uint64_t *a = r->correlation ? sim_map_get(&st->api_by_corr, r->correlation) : NULL;
    o->api = a ? &st->apis[*a] : NULL;
    o->key = o->api ? o->api->start : r->start;
    o->start = r->start;
    o->corr = r->correlation;
    o->idx = (uint32_t)i;
    if (!emits(r)) continue;
    if (!o->api && r->kind != REC_MAP && r->kind != REC_UNMAP && r->kind != REC_SYNC) c->uncorrelated++;
    if (o->key < sc->origin) sc->origin = o->key;
    int d = device_of(st, r);
    if (d >= 0 && d < REC_MAX_DEVICES && r->kind != REC_SYNC && !(r->kind == REC_MEMORY && r->mem == REC_MEM_PINNED))
      sc->used[d] = 1;
    if (r->kind == REC_MEMORY && r->op == REC_OP_ALLOCATION && r->mem == REC_MEM_DEVICE) {
      sc->dev_allocs++;
      if (r->stream != REC_INVALID_ID) sc->async_allocs++;
    }
  }
  qsort(ord, st->n, sizeof *ord, cmp_order);
  if (sc->origin == UINT64_MAX) sc->origin = 0;
}

/* The header: the device of the trace is the first one used. */
static void write_header(const rec_state *st, FILE *out, const rec_meta *meta, const rec_scan *sc) {
  int first = -1;
  for (int d = 0; d < REC_MAX_DEVICES && first < 0; d++)
    if (sc->used[d]) first = d;
  fputs("{\"memplay\":1", out);
  if (meta && meta->name) {
    fputs(",\"name\":", out);
    put_str(out, meta->name);
  }
  fputs(",\"source_format\":\"recorded\"", out);
  const rec_device *fd = first >= 0 && st->devices[first].known ? &st->devices[first] : NULL;
  if (fd) {
    fputs(",\"device_name\":", out);
    put_str(out, rec_string(st, fd->name));
    fprintf(out, ",\"device_memory\":%" PRIu64, fd->total_memory);
  }
  if (first >= 0) fprintf(out, ",\"device_index\":%d", first);
  /* The requests are the program's own driver calls: cudaMalloc, or the stream-ordered pool. The
   * names are the trace format's (docs/formats.md): the recorder, loaded into other programs,
   * carries none of the models whose ops tables hold them. */
  fprintf(out, ",\"allocator\":\"%s\"", sc->dev_allocs && sc->async_allocs == sc->dev_allocs ? "async" : "cuda");
  fputs(",\"attrs\":{\"recorder\":\"memplay record\"", out);
  if (meta && meta->command) {
    fputs(",\"command\":", out);
    put_str(out, meta->command);
  }
  if (meta) fprintf(out, ",\"pid\":%" PRId64 ",\"cupti_api_version\":%d", meta->pid, meta->cupti_version);
  fprintf(out, ",\"origin_ns\":%" PRIu64 ",\"devices\":[", sc->origin);
  int k = 0;
  for (int d = 0; d < REC_MAX_DEVICES; d++) {
    if (!sc->used[d]) continue;
    fprintf(out, "%s{\"index\":%d", k++ ? "," : "", d);
    if (st->devices[d].known) {
      fputs(",\"name\":", out);
      put_str(out, rec_string(st, st->devices[d].name));
      fprintf(out, ",\"total_memory\":%" PRIu64 ",\"compute_capability\":\"%d.%d\"", st->devices[d].total_memory,
              st->devices[d].cc_major, st->devices[d].cc_minor);
    }
    fputc('}', out);
  }
  fputs("]}}\n", out);
}

/* The records in order, each as the event it becomes (if any). */
static void write_events(wctx *w, const order *ord) {
  rec_state *st = w->st;
  for (size_t i = 0; i < st->n; i++) {
    const order *o = &ord[i];
    const rec_record *r = &st->recs[o->idx];
    switch (r->kind) {
    case REC_MEMORY: memory(w, o, r); break;
    case REC_MAP: {
      uint64_t *v = sim_map_get(&w->dev_live, r->addr);
      if (v && *v == r->bytes) { /* its activity record came first: the same memory, freed at its unmap */
        *v |= MAPPED;
        break;
      }
      if (v) { /* something else still live there: its release was lost */
        w->c->unreleased_allocs++;
        break;
      }
      alloc_event(w, o, device_of(st, r), r->addr, r->bytes, 0, "device", MAPPED);
      break;
    }
    case REC_UNMAP: unmap(w, o, r); break;
    case REC_MEMCPY: memcpy_event(w, o, r); break;
    case REC_MEMSET: memset_event(w, o, r); break;
    case REC_KERNEL: kernel_event(w, o, r); break;
    case REC_SYNC: sync_event(w, o, r); break;
    default: break;
    }
  }
}

/* The import notes: what was lost, left out or only counted. */
static void write_stats(const rec_state *st, FILE *out, const rec_counts *c) {
  stat_line(out, "cupti_dropped_records", "data_loss", st->dropped,
            "activity records CUPTI dropped because its buffers were full");
  stat_line(out, "releases_without_allocation", "warning", c->unmatched_releases,
            "frees of memory allocated before recording began (or whose allocation was not reported): left out");
  stat_line(out, "allocations_without_release", "warning", c->unreleased_allocs,
            "an address allocated again while still live: a free was written before it");
  stat_line(out, "static_allocations", "info", c->static_allocs,
            "__device__ globals, arrays and registered host memory: not allocations of the program's allocator");
  stat_line(out, "stream_wait_events", "info", c->stream_waits,
            "cudaStreamWaitEvent calls: a stream waits, not the host; no event");
  stat_line(out, "unknown_copies", "data_loss", c->unknown_copies, "copies of an unknown kind: left out");
  stat_line(out, "uncorrelated_activities", "info", c->uncorrelated,
            "activities whose API call was not recorded: placed at their own time");
  stat_line(out, "api_calls", "info", st->api_seen, "runtime and driver API calls the recorder saw");
}

int rec_write_jsonl(rec_state *st, FILE *out, const rec_meta *meta, rec_counts *counts, char *err, size_t errlen) {
  rec_counts local;
  rec_counts *c = counts ? counts : &local;
  memset(c, 0, sizeof *c);
  order *ord = sim_xmalloc((st->n ? st->n : 1) * sizeof *ord);
  rec_scan sc = {0};
  order_records(st, ord, c, &sc);
  write_header(st, out, meta, &sc);
  wctx w = {st, out, sc.origin, c, {0}, {0}, {0}};
  sim_map_init(&w.dev_live);
  sim_map_init(&w.host_live);
  sim_map_init(&w.unmapped);
  write_events(&w, ord);
  write_stats(st, out, c);
  sim_map_release(&w.dev_live);
  sim_map_release(&w.host_live);
  sim_map_release(&w.unmapped);
  free(ord);
  if (fflush(out) || ferror(out)) {
    snprintf(err, errlen, "cannot write the trace");
    return -1;
  }
  return 0;
}
