/* bfc_log.c: the `tf_bfc_dump` importer: TensorFlow's BFC allocator state, dumped to a log when it ran out of memory. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/jsonw.h"
#include "sim/hashmap.h"
#include "importer.h"

/*
 * When TensorFlow's BFCAllocator cannot place a request it logs a warning ("Allocator (GPU_0_bfc)
 * ran out of memory trying to allocate 3.07GiB (rounded to 3300000000)requested by op X") and
 * then its whole state (BFCAllocator::DumpMemoryLog): a summary line per bin, the chunks of the
 * bin the request would have used, every region ("Next region of size N") with every chunk in
 * address order ("InUse at ADDR of size N next K", "Free  at ADDR ..."), a summary of the chunks
 * in use by size ("K Chunks of size N totalling H"), the pool's totals and its Stats (Limit,
 * InUse, MaxInUse, ...). A log may hold several such dumps; each becomes a trace of its own
 * (docs/formats.md, "TensorFlow BFC out-of-memory dumps"): the chunks in use as allocations live
 * at the start, then the failed request; the regions and chunks as the final state; recorded
 * allocator bfc with memory_limit = Limit.
 */

#define BFC_BINS 21

typedef struct dump_chunk {
  uint64_t addr, size;
  int in_use;
} dump_chunk;

typedef struct dump_region {
  uint64_t size;
  size_t first, n; /* chunks */
  long line;
} dump_region;

typedef struct dump_bin {
  uint64_t bin_size, total, in_use;
  char allocated[24], in_use_bytes[24], requested[24];
} dump_bin;

typedef struct dump_sizes {
  uint64_t count, size;
} dump_sizes;

typedef struct dump {
  int open;               /* a dump is being read */
  long line;              /* where it began */
  char allocator[64];     /* GPU_0_bfc */
  int device;
  uint64_t rounded;       /* the failed request, rounded (0: no warning seen) */
  char request_text[32], op[160];
  dump_bin bins[BFC_BINS];
  size_t nbins;
  dump_region *regions;
  size_t nregions, rcap;
  dump_chunk *chunks;
  size_t nchunks, ccap;
  dump_sizes *sizes;
  size_t nsizes, scap;
  char sum_in_use[32];
  int64_t pool_total, pool_limit, pool_available, pool_curr; /* -1: not logged */
  int64_t stats[8];       /* Limit, InUse, MaxInUse, NumAllocs, MaxAllocSize, Reserved, PeakReserved, LargestFreeBlock */
  int in_stats;
} dump;

static const char *const stat_names[8] = {"Limit", "InUse", "MaxInUse", "NumAllocs",
                                          "MaxAllocSize", "Reserved", "PeakReserved", "LargestFreeBlock"};

typedef struct bfc_state {
  import_ctx *ic;
  long line;
  int ndumps;
  char device_name[128];
  dump d;
  uint64_t pending_rounded; /* a warning seen before its dump */
  char pending_text[32], pending_op[160], pending_alloc[64];
} bfc_state;

static int fail(bfc_state *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(bfc_state *b, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!b->ic->err[0]) import_error(b->ic, "cannot import '%s': line %ld: %s", b->ic->path, b->line, msg);
  return -1;
}

/* An unsigned decimal (or hexadecimal with base 16) right at s; *end after it. 0, or -1. */
static int num_at(const char *s, int base, uint64_t *out, const char **end) {
  char *e;
  if (*s == '-' || *s == '+' || *s == ' ') return -1;
  unsigned long long v = strtoull(s, &e, base);
  if (e == s) return -1;
  *out = v;
  if (end) *end = e;
  return 0;
}

/* The number after `key` in line, or -1 when the key is absent or no number follows. */
static int num_after(const char *line, const char *key, int base, uint64_t *out) {
  const char *p = strstr(line, key);
  if (!p) return -1;
  p += strlen(key);
  while (*p == ' ' || *p == '\t') p++;
  return num_at(p, base, out, NULL);
}

/* A word of line after key, up to one of the stop characters, into buf. */
static void word_after(const char *line, const char *key, const char *stops, char *buf, size_t n) {
  const char *p = strstr(line, key);
  buf[0] = 0;
  if (!p) return;
  p += strlen(key);
  size_t k = strcspn(p, stops);
  snprintf(buf, n, "%.*s", (int)(k < n - 1 ? k : n - 1), p);
}

static void dump_clear(dump *d) {
  free(d->regions);
  free(d->chunks);
  free(d->sizes);
  memset(d, 0, sizeof *d);
}

/* ---- lines ---------------------------------------------------------------------------------- */

/* "Allocator (GPU_0_bfc) ran out of memory trying to allocate 3.07GiB (rounded to 3300000000)requested by op X" */
static int on_warning(bfc_state *b, const char *line) {
  uint64_t r;
  if (num_after(line, "(rounded to", 10, &r)) return fail(b, "an out-of-memory warning without '(rounded to N)'");
  b->pending_rounded = r;
  word_after(line, "trying to allocate ", " (", b->pending_text, sizeof b->pending_text);
  word_after(line, "requested by op ", "\r\n", b->pending_op, sizeof b->pending_op);
  word_after(line, "Allocator (", ")", b->pending_alloc, sizeof b->pending_alloc);
  return 0;
}

static void on_dump_start(bfc_state *b, const char *line) {
  dump *d = &b->d;
  dump_clear(d);
  d->open = 1;
  d->line = b->line;
  for (int i = 0; i < 8; i++) d->stats[i] = -1;
  d->pool_total = d->pool_limit = d->pool_available = d->pool_curr = -1;
  word_after(line, "BFCAllocator dump for ", " \r\n", d->allocator, sizeof d->allocator);
  uint64_t dev = 0;
  d->device = num_after(d->allocator, "GPU_", 10, &dev) == 0 && dev < 32768 ? (int)dev : 0;
  d->rounded = b->pending_rounded;
  snprintf(d->request_text, sizeof d->request_text, "%s", b->pending_text);
  snprintf(d->op, sizeof d->op, "%s", b->pending_op);
  b->pending_rounded = 0;
}

/* "Bin (256): \tTotal Chunks: 68, Chunks in use: 66. 17.0KiB allocated for chunks. 16.5KiB in use
 * in bin. 1.4KiB client-requested in use in bin." */
static int on_bin(bfc_state *b, const char *line) {
  dump *d = &b->d;
  if (d->nbins >= BFC_BINS) return fail(b, "more than %d bin lines in one dump", BFC_BINS);
  dump_bin *x = &d->bins[d->nbins];
  if (num_after(line, "Bin (", 10, &x->bin_size) || num_after(line, "Total Chunks:", 10, &x->total) ||
      num_after(line, "Chunks in use:", 10, &x->in_use))
    return fail(b, "a bin line that is not 'Bin (N): Total Chunks: T, Chunks in use: U. ...'");
  const char *p = strstr(line, "Chunks in use:");
  p = strchr(p, '.');
  if (p) sscanf(p + 1, " %23s allocated for chunks. %23s in use in bin. %23s", x->allocated, x->in_use_bytes, x->requested);
  d->nbins++;
  return 0;
}

/* "InUse at 7f41b2000000 of size 256 next 1" or "Free  at ..." */
static int on_chunk(bfc_state *b, const char *line, int in_use) {
  dump *d = &b->d;
  uint64_t addr, size;
  if (num_after(line, " at ", 16, &addr) || num_after(line, "of size", 10, &size) || !size)
    return fail(b, "a chunk line that is not '%s at ADDRESS of size N'", in_use ? "InUse" : "Free");
  if (!d->nregions) return fail(b, "a chunk before any 'Next region of size N' line");
  dump_region *r = &d->regions[d->nregions - 1];
  if (r->n) {
    const dump_chunk *p = &d->chunks[d->nchunks - 1];
    if (p->addr + p->size != addr)
      return fail(b, "the chunk at %" PRIx64 " does not follow the one at %" PRIx64 " of size %" PRIu64, addr, p->addr,
                  p->size);
  }
  sim_grow((void **)&d->chunks, &d->ccap, d->nchunks + 1, sizeof *d->chunks);
  d->chunks[d->nchunks++] = (dump_chunk){addr, size, in_use};
  r->n++;
  return 0;
}

static int on_region(bfc_state *b, const char *line) {
  dump *d = &b->d;
  uint64_t size;
  if (num_after(line, "Next region of size", 10, &size) || !size) return fail(b, "a region line without its size");
  sim_grow((void **)&d->regions, &d->rcap, d->nregions + 1, sizeof *d->regions);
  d->regions[d->nregions++] = (dump_region){size, d->nchunks, 0, b->line};
  return 0;
}

/* "3 Chunks of size 4194304 totalling 12.00MiB" */
static int on_sizes(bfc_state *b, const char *line) {
  dump *d = &b->d;
  uint64_t count, size;
  const char *p = line + strcspn(line, "]");
  p = *p ? p + 1 : line;
  while (*p == ' ') p++;
  if (num_at(p, 10, &count, NULL) || num_after(line, "Chunks of size", 10, &size))
    return fail(b, "a summary line that is not 'K Chunks of size N totalling H'");
  sim_grow((void **)&d->sizes, &d->scap, d->nsizes + 1, sizeof *d->sizes);
  d->sizes[d->nsizes++] = (dump_sizes){count, size};
  return 0;
}

static void on_pool(bfc_state *b, const char *line) {
  dump *d = &b->d;
  uint64_t v;
  if (!num_after(line, "Total bytes in pool:", 10, &v)) d->pool_total = (int64_t)v;
  if (!num_after(line, "memory_limit_:", 10, &v)) d->pool_limit = (int64_t)v;
  if (!num_after(line, "available bytes:", 10, &v)) d->pool_available = (int64_t)v;
  if (!num_after(line, "curr_region_allocation_bytes_:", 10, &v)) d->pool_curr = (int64_t)v;
}

/* A line of the Stats block ("Limit:   40231108608"): 1 taken, 0 not such a line. */
static int on_stat(bfc_state *b, const char *line) {
  for (int i = 0; i < 8; i++) {
    size_t k = strlen(stat_names[i]);
    uint64_t v;
    if (!strncmp(line, stat_names[i], k) && line[k] == ':' && !num_after(line + k, ":", 10, &v)) {
      b->d.stats[i] = v > INT64_MAX ? INT64_MAX : (int64_t)v;
      return 1;
    }
  }
  return 0;
}

/* ---- one dump into a trace ------------------------------------------------------------------ */

/* The dump holds what a trace needs: regions that its chunks cover, and the figures. */
static int dump_check(bfc_state *b) {
  dump *d = &b->d;
  if (!d->nregions || !d->nchunks) return fail(b, "the dump that begins at line %ld lists no region and no chunk", d->line);
  for (size_t i = 0; i < d->nregions; i++) {
    const dump_region *r = &d->regions[i];
    uint64_t sum = 0;
    for (size_t k = 0; k < r->n; k++) sum += d->chunks[r->first + k].size;
    if (!r->n || sum != r->size)
      return fail(b, "the region of line %ld holds chunks of %" PRIu64 " bytes, not its %" PRIu64, r->line, sum, r->size);
  }
  if (!d->rounded) return fail(b, "the dump that begins at line %ld follows no out-of-memory warning", d->line);
  return 0;
}

static void attrs_bins(yajl_gen g, const dump *d) {
  jsonw_str(g, "bins");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < d->nbins; i++) {
    const dump_bin *x = &d->bins[i];
    yajl_gen_map_open(g);
    jsonw_kuint(g, "bin_size", x->bin_size);
    jsonw_kuint(g, "total_chunks", x->total);
    jsonw_kuint(g, "chunks_in_use", x->in_use);
    jsonw_kstr(g, "allocated", x->allocated);
    jsonw_kstr(g, "in_use", x->in_use_bytes);
    jsonw_kstr(g, "client_requested", x->requested);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
  jsonw_str(g, "chunk_sizes_in_use");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < d->nsizes; i++) {
    yajl_gen_array_open(g);
    jsonw_uint(g, d->sizes[i].count);
    jsonw_uint(g, d->sizes[i].size);
    yajl_gen_array_close(g);
  }
  yajl_gen_array_close(g);
}

/* What the dump says beyond its chunks, as the trace's attrs. */
static char *dump_attrs(const dump *d) {
  yajl_gen g = jsonw_mem();
  yajl_gen_map_open(g);
  jsonw_kbool(g, "state_only", 1);
  jsonw_kint(g, "dump_line", d->line);
  jsonw_kstr(g, "allocator_name", d->allocator);
  jsonw_kuint(g, "oom_request_bytes", d->rounded);
  jsonw_kstr(g, "oom_request", d->request_text);
  jsonw_kstr(g, "op", d->op[0] ? d->op : NULL);
  uint64_t in_use = 0, free_n = 0, free_b = 0, largest = 0;
  for (size_t i = 0; i < d->nchunks; i++) {
    const dump_chunk *c = &d->chunks[i];
    if (c->in_use) in_use += c->size;
    else free_n++, free_b += c->size, largest = c->size > largest ? c->size : largest;
  }
  jsonw_kuint(g, "in_use_bytes", in_use);
  jsonw_kuint(g, "free_chunks", free_n);
  jsonw_kuint(g, "free_bytes", free_b);
  jsonw_kuint(g, "largest_free_chunk", largest);
  jsonw_kstr(g, "sum_in_use", d->sum_in_use[0] ? d->sum_in_use : NULL);
  jsonw_str(g, "stats");
  yajl_gen_map_open(g);
  for (int i = 0; i < 8; i++)
    if (d->stats[i] >= 0) jsonw_kint(g, stat_names[i], d->stats[i]);
  if (d->pool_total >= 0) jsonw_kint(g, "total_bytes_in_pool", d->pool_total);
  if (d->pool_available >= 0) jsonw_kint(g, "available_bytes", d->pool_available);
  if (d->pool_curr >= 0) jsonw_kint(g, "curr_region_allocation_bytes", d->pool_curr);
  yajl_gen_map_close(g);
  attrs_bins(g, d);
  yajl_gen_map_close(g);
  char *s = strdup(jsonw_text(g, NULL));
  yajl_gen_free(g);
  return s;
}

/* The regions and chunks as the final state. */
static int write_state(bfc_state *b, store_writer *w) {
  const dump *d = &b->d;
  for (size_t i = 0; i < d->nregions; i++) {
    const dump_region *r = &d->regions[i];
    uint64_t base = d->chunks[r->first].addr, used = 0;
    for (size_t k = 0; k < r->n; k++) used += d->chunks[r->first + k].in_use ? d->chunks[r->first + k].size : 0;
    store_segment s = {.device = d->device, .address = base, .total_size = r->size, .pool = "large",
                       .allocated_size = (int64_t)used, .requested_size = (int64_t)used, .active_size = (int64_t)used};
    if (store_writer_segment(w, &s)) return -1;
    for (size_t k = 0; k < r->n; k++) {
      const dump_chunk *c = &d->chunks[r->first + k];
      store_block bl = {.segment_address = base, .address = c->addr, .size = c->size,
                        .requested_size = c->in_use ? c->size : 0, .state = c->in_use ? "active_allocated" : "inactive"};
      if (store_writer_block(w, &bl)) return -1;
    }
  }
  return 0;
}

/* The chunks in use as allocations live at the start, then the request that failed. */
static int write_events(bfc_state *b, store_writer *w) {
  const dump *d = &b->d;
  for (size_t i = 0; i < d->nchunks; i++) {
    if (!d->chunks[i].in_use) continue;
    sim_event ev;
    sim_event_init(&ev);
    ev.kind = SIM_EV_ALLOC;
    ev.addr = d->chunks[i].addr;
    ev.size = d->chunks[i].size;
    ev.device = (int16_t)d->device;
    ev.mem = SIM_MEM_DEVICE;
    ev.flags = SIM_EVF_PREEXISTING;
    if (store_writer_event(w, &ev)) return -1;
  }
  sim_event ev;
  sim_event_init(&ev);
  ev.kind = SIM_EV_ALLOC;
  ev.addr = 1; /* no chunk's address: the request was never placed */
  ev.size = d->rounded;
  ev.device = (int16_t)d->device;
  ev.mem = SIM_MEM_DEVICE;
  int64_t seq = store_writer_events(w);
  store_recorded oom = {.before_seq = seq, .action = "oom", .device = d->device, .size = d->rounded,
                        .allocated = -1, .reserved = -1, .device_free = d->pool_available, .stack = 0};
  if (store_writer_recorded(w, &oom) || store_writer_event(w, &ev)) return -1;
  return 0;
}

static int dump_write(bfc_state *b) {
  dump *d = &b->d;
  import_ctx *ic = b->ic;
  if (dump_check(b)) return -1;
  b->ndumps++;
  char suffix[32], settings[96];
  snprintf(suffix, sizeof suffix, "-oom%d", b->ndumps);
  char *name = import_trace_name(ic, b->ndumps > 1 ? suffix : NULL);
  int64_t limit = d->stats[0] >= 0 ? d->stats[0] : d->pool_limit;
  if (limit >= 0) snprintf(settings, sizeof settings, "{\"memory_limit\":%" PRId64 "}", limit);
  char *attrs = dump_attrs(d);
  store_trace m = {.name = name, .source_format = (char *)"tf_bfc_dump", .source_file = (char *)ic->path,
                   .device_name = b->device_name[0] ? b->device_name : NULL, .device_index = d->device,
                   .framework = (char *)"tensorflow", .allocator = (char *)"bfc",
                   .allocator_settings = limit >= 0 ? settings : NULL, .attrs = attrs};
  store_writer *w = NULL;
  int rc = !name || store_writer_begin(ic->s, &m, &w) || write_events(b, w) || write_state(b, w) ? -1 : 0;
  if (rc) {
    if (w) store_writer_abort(w);
    if (!ic->err[0]) import_error(ic, "cannot import '%s': %s", ic->path, store_error(ic->s));
  } else {
    rc = import_finish_trace(ic, w, name);
  }
  free(name);
  free(attrs);
  dump_clear(d);
  return rc;
}

/* ---- the log -------------------------------------------------------------------------------- */

/* One line of the log; a dump ends with its Stats block, or where another begins. */
static int on_line(bfc_state *b, const char *line) {
  dump *d = &b->d;
  if (d->open && d->in_stats) {
    if (on_stat(b, line)) return 0;
    d->open = 0;
    if (dump_write(b)) return -1;
  }
  if (strstr(line, "ran out of memory trying to allocate")) {
    if (d->open && dump_write(b)) return -1;
    d->open = 0;
    return on_warning(b, line);
  }
  if (strstr(line, "BFCAllocator dump for ")) {
    if (d->open && dump_write(b)) return -1;
    on_dump_start(b, line);
    return 0;
  }
  if (!b->device_name[0] && strstr(line, "Created device") && strstr(line, "name: "))
    word_after(line, "name: ", ",\r\n", b->device_name, sizeof b->device_name);
  if (!d->open) return 0;
  if (strstr(line, "Bin (") && strstr(line, "Total Chunks:")) return on_bin(b, line);
  if (strstr(line, "Next region of size")) return on_region(b, line);
  if (strstr(line, "] InUse at ") || !strncmp(line, "InUse at ", 9)) return on_chunk(b, line, 1);
  if (strstr(line, "] Free  at ") || strstr(line, "] Free at ") || !strncmp(line, "Free  at ", 9)) return on_chunk(b, line, 0);
  if (strstr(line, " Chunks of size ") && strstr(line, " totalling ")) return on_sizes(b, line);
  if (strstr(line, "Sum Total of in-use chunks:")) word_after(line, "in-use chunks: ", " \r\n", d->sum_in_use, sizeof d->sum_in_use);
  if (strstr(line, "Total bytes in pool:")) on_pool(b, line);
  if (strstr(line, "] Stats:") || !strncmp(line, "Stats:", 6)) d->in_stats = 1;
  return 0;
}

static int bfc_import(import_ctx *ic) {
  bfc_state *b = sim_xcalloc(1, sizeof *b);
  b->ic = ic;
  char *line;
  size_t len;
  int got, rc = 0;
  while (!rc && (got = input_line(ic->in, &line, &len)) > 0) {
    b->line++;
    if (memchr(line, 0, len)) {
      rc = fail(b, "a NUL byte: this is not a text log");
      break;
    }
    rc = on_line(b, line);
  }
  if (!rc && got < 0) {
    import_error(ic, "cannot import '%s': %s", ic->path, input_error(ic->in));
    rc = -1;
  }
  if (!rc && b->d.open) rc = dump_write(b);
  if (!rc && !b->ndumps)
    import_error(ic, "cannot import '%s': the log holds no BFCAllocator dump (TensorFlow writes one when a GPU allocation "
                     "runs out of memory)", ic->path), rc = -1;
  dump_clear(&b->d);
  free(b);
  return rc;
}

/* A TensorFlow log: its dump, else its allocator's lines; a .log file is tried last. */
static int bfc_detect(const unsigned char *head, size_t n, const char *path) {
  char buf[4097];
  size_t k = n < sizeof buf - 1 ? n : sizeof buf - 1;
  memcpy(buf, head, k);
  for (size_t i = 0; i < k; i++)
    if (!buf[i]) buf[i] = ' ';
  buf[k] = 0;
  if (strstr(buf, "BFCAllocator dump for ") || strstr(buf, "bfc_allocator.cc")) return 95;
  if (strstr(buf, "tensorflow/")) return 60;
  size_t pl = path ? strlen(path) : 0;
  return pl > 4 && !strcmp(path + pl - 4, ".log") ? 10 : 0;
}

const importer import_bfc_dump = {
  .name = "tf_bfc_dump",
  .summary = "TensorFlow log with BFC allocator out-of-memory dumps: the state at each OOM and the failed request",
  .detect = bfc_detect,
  .import = bfc_import,
};
