/* perfetto.c: a replay in the Trace Event Format: memory counters, slices per stream, instants for syncs and OOMs. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "io/decimal.h"
#include "io/jsonscan.h"
#include "sim/hashmap.h"
#include "plot.h"

/* What is kept of an event until the end, when the slices are written in each track's order. */
enum { PF_SLICE = 0, PF_SYNC = 1, PF_OOM = 2 };

typedef struct pf_item {
  int64_t seq, ts, dur;
  int64_t name;    /* string id (kernels) */
  uint64_t size;
  int32_t tid;     /* the stream's thread, 0: the process (device-wide) */
  uint8_t what, kind, dir;
} pf_item;

struct plot_perfetto {
  const replay_names *names;
  char *process;
  pf_item *items;
  size_t n, cap;
  int64_t *streams; /* tid - 1 -> stream handle */
  size_t nstreams, streams_cap;
  int64_t first_ts;
  int has_ts, any;
};

plot_perfetto *plot_perfetto_new(const replay_names *names, const char *process_name) {
  plot_perfetto *p = sim_xcalloc(1, sizeof *p);
  p->names = names;
  p->process = strdup(process_name ? process_name : "memplay");
  return p;
}

void plot_perfetto_free(plot_perfetto *p) {
  if (!p) return;
  free(p->process);
  free(p->items);
  free(p->streams);
  free(p);
}

static int32_t tid_of(plot_perfetto *p, int64_t stream) {
  for (size_t i = 0; i < p->nstreams; i++)
    if (p->streams[i] == stream) return (int32_t)i + 1;
  sim_grow((void **)&p->streams, &p->streams_cap, p->nstreams + 1, sizeof *p->streams);
  p->streams[p->nstreams++] = stream;
  return (int32_t)p->nstreams;
}

static void keep(plot_perfetto *p, const pf_item *it) {
  sim_grow((void **)&p->items, &p->cap, p->n + 1, sizeof *p->items);
  p->items[p->n++] = *it;
}

static void pf_event(void *ctx, const sim_event *ev, const replay_outcome *o) {
  plot_perfetto *p = ctx;
  if (!p->any) p->first_ts = ev->ts, p->any = 1;
  if (ev->ts != p->first_ts) p->has_ts = 1;
  pf_item it = {.seq = ev->seq, .ts = ev->ts, .name = ev->name, .size = ev->size, .kind = ev->kind, .dir = ev->dir};
  switch (ev->kind) {
  case SIM_EV_KERNEL:
  case SIM_EV_MEMCPY:
  case SIM_EV_MEMSET:
    it.what = PF_SLICE;
    if (ev->dev_ts >= 0) it.ts = ev->dev_ts;
    it.dur = ev->dur > 0 ? ev->dur : 0;
    it.tid = tid_of(p, ev->stream == SIM_NO_STREAM ? 0 : ev->stream);
    keep(p, &it);
    break;
  case SIM_EV_SYNC:
    it.what = PF_SYNC;
    it.dur = ev->dur > 0 ? ev->dur : 0;
    it.tid = ev->stream < 0 ? 0 : tid_of(p, ev->stream);
    keep(p, &it);
    break;
  case SIM_EV_ALLOC:
    if (o && o->oom) {
      it.what = PF_OOM;
      it.tid = 0;
      keep(p, &it);
    }
    break;
  default: break;
  }
}

void plot_perfetto_oom(plot_perfetto *p, int64_t seq, int64_t ts, uint64_t size) {
  keep(p, &(pf_item){.seq = seq, .ts = ts, .size = size, .what = PF_OOM, .kind = SIM_EV_ALLOC});
}

replay_observer plot_perfetto_observer(plot_perfetto *p) { return (replay_observer){.ctx = p, .event = pf_event}; }

/* ---- writing ------------------------------------------------------------------------------- */

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (size_t n = s ? strlen(s) : 0, i = 0; i < n; i++) {
    size_t run = jsonscan_plain_run(s + i, n - i, 0); /* written at once */
    fwrite(s + i, 1, run, f);
    i += run;
    if (i == n) break;
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else fprintf(f, "\\u%04x", c);
  }
  fputc('"', f);
}

/* Thousandths of a microsecond (nanoseconds) since the first event, or of the event index when the
 * trace has no times. */
static int64_t us_milli(const plot_perfetto *p, int64_t seq, int64_t ts) {
  return p->has_ts ? sim_ns_between(p->first_ts, ts) : seq * 1000;
}

/* v thousandths as printf's "%.3f" writes v / 1e3, into b (32 bytes): without floating-point
 * formatting, which took half an export's time, where that is exact (below 2^52 thousandths the
 * double is within half a thousandth of v / 1000, so "%.3f" gives its digits); printf's own beyond. */
static const char *milli_text(char *b, int64_t v) {
  if (v <= -(INT64_C(1) << 52) || v >= (INT64_C(1) << 52)) {
    snprintf(b, 32, "%.3f", (double)v / 1e3);
    return b;
  }
  char *o = b;
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  if (v < 0) *o++ = '-';
  o = decimal_u64(o, u / 1000);
  unsigned r = (unsigned)(u % 1000);
  o[0] = '.';
  o[1] = (char)('0' + r / 100);
  o[2] = (char)('0' + r / 10 % 10);
  o[3] = (char)('0' + r % 10);
  o[4] = 0;
  return b;
}

static int cmp_item(const void *a, const void *b) {
  const pf_item *x = a, *y = b;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void write_names(const plot_perfetto *p, FILE *f) {
  fprintf(f, "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":");
  json_string(f, p->process);
  fprintf(f, "}},\n{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"thread_name\",\"args\":{\"name\":\"device\"}}");
  for (size_t i = 0; i < p->nstreams; i++)
    fprintf(f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%zu,\"name\":\"thread_name\",\"args\":{\"name\":\"stream %" PRId64 "\"}}",
            i + 1, p->streams[i]);
}

/* The slice's name: the kernel's, else what the copy or memset did. */
static void item_name(const plot_perfetto *p, const pf_item *it, FILE *f) {
  char buf[96], sz[32];
  const char *n = replay_name(p->names, it->name);
  if (it->kind == SIM_EV_KERNEL) {
    json_string(f, n ? n : "kernel");
    return;
  }
  plot_bytes(sz, sizeof sz, (double)it->size);
  if (it->kind == SIM_EV_MEMCPY) snprintf(buf, sizeof buf, "memcpy %s %s", sim_copy_dir_name(it->dir), sz);
  else snprintf(buf, sizeof buf, "memset %s", sz);
  json_string(f, buf);
}

static void write_items(const plot_perfetto *p, FILE *f) {
  char sz[32], t[32], d[32];
  for (size_t i = 0; i < p->n; i++) {
    const pf_item *it = &p->items[i];
    milli_text(t, us_milli(p, it->seq, it->ts));
    if (it->what == PF_SLICE) {
      fprintf(f, ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%s,\"dur\":%s,\"cat\":\"%s\",\"name\":", it->tid, t,
              milli_text(d, p->has_ts ? it->dur : 0), sim_event_kind_name(it->kind));
      item_name(p, it, f);
      fprintf(f, ",\"args\":{\"event\":%" PRId64 ",\"bytes\":%" PRIu64 "}}", it->seq, it->size);
    } else if (it->what == PF_SYNC) {
      fprintf(f, ",\n{\"ph\":\"i\",\"pid\":1,\"tid\":%d,\"ts\":%s,\"s\":\"%s\",\"cat\":\"sync\",\"name\":\"%s\","
                 "\"args\":{\"event\":%" PRId64 "}}",
              it->tid, t, it->tid ? "t" : "p", it->tid ? "stream synchronize" : "device synchronize", it->seq);
    } else {
      fprintf(f, ",\n{\"ph\":\"i\",\"pid\":1,\"tid\":0,\"ts\":%s,\"s\":\"p\",\"cat\":\"oom\",\"name\":\"OOM %s\","
                 "\"args\":{\"event\":%" PRId64 ",\"requested\":%" PRIu64 "}}",
              t, plot_bytes(sz, sizeof sz, (double)it->size), it->seq, it->size);
    }
  }
}

static void counter(const plot_perfetto *p, const plot_series *s, const plot_point *pt, int64_t *last, FILE *f) {
  int64_t v = us_milli(p, pt->seq, pt->ts);
  if (v < *last) v = *last; /* one track's samples in time order */
  *last = v;
  char tb[32];
  milli_text(tb, v);
  fprintf(f, ",\n{\"ph\":\"C\",\"pid\":1,\"tid\":0,\"ts\":%s,\"name\":\"memory\",\"args\":{\"allocated\":%" PRId64
             ",\"reserved\":%" PRId64 "}}",
          tb, pt->allocated, pt->reserved);
  if (!s->has_categories) return;
  fprintf(f, ",\n{\"ph\":\"C\",\"pid\":1,\"tid\":0,\"ts\":%s,\"name\":\"live by category\",\"args\":{", tb);
  for (int k = 0; k < SIM_CAT__COUNT; k++) fprintf(f, "%s\"%s\":%" PRId64, k ? "," : "", sim_category_name(k), pt->cat[k]);
  fprintf(f, "}}");
}

static void write_counters(const plot_perfetto *p, const plot_series *s, FILE *f) {
  int64_t last = 0;
  for (size_t i = 0; s && i < s->n; i++) {
    const plot_bucket *b = &s->buckets[i];
    const plot_point *a = b->lo.seq <= b->hi.seq ? &b->lo : &b->hi, *z = a == &b->lo ? &b->hi : &b->lo;
    counter(p, s, a, &last, f);
    if (z->seq != a->seq) counter(p, s, z, &last, f);
  }
}

int plot_perfetto_write(plot_perfetto *p, const plot_series *s, FILE *f) {
  if (p->n) qsort(p->items, p->n, sizeof *p->items, cmp_item); /* none: no array (qsort wants one) */
  fprintf(f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"source\":\"memplay\",\"time\":\"%s\"},\n\"traceEvents\":[\n",
          p->has_ts ? "microseconds since the trace's first event" : "the event index (the trace has no times)");
  write_names(p, f);
  write_counters(p, s, f);
  write_items(p, f);
  fprintf(f, "\n]}\n");
  return ferror(f) ? -1 : 0;
}
