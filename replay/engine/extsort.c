/* extsort.c: external merge sort: sorted runs spilled to an unlinked temporary file, merged through a heap. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/hashmap.h"
#include "extsort.h"

#define WRITE_BUFFER (1u << 20)
#define READ_BUFFER_MIN (16u << 10)
#define READ_BUFFER_MAX (256u << 10)

typedef struct run {
  uint64_t off;   /* byte offset in the temporary file */
  uint64_t count; /* records */
} run;

/* A position in one sorted run: a spilled run read through a buffer, or the last in-memory chunk. */
typedef struct cursor {
  int in_memory;
  uint64_t off, count, pos; /* pos: records consumed */
  char *buf;
  size_t bcap, blen, bpos;  /* records */
} cursor;

struct extsort {
  size_t rsz;
  extsort_cmp cmp;
  char *recs;       /* the buffer: cap records */
  uint32_t *idx, *tmp, *bounds;
  size_t cap, n;
  uint64_t count;
  int fd;
  uint64_t file_off;
  run *runs;
  size_t nruns, runs_cap;
  char *wbuf;
  size_t wlen;
  cursor *cur;
  size_t ncur;
  size_t *heap;
  size_t nheap;
  int finished;
  int advance; /* the top run's current record was handed out */
  char err[256];
};

static const void *rec_at(const extsort *s, uint32_t i) { return s->recs + (size_t)i * s->rsz; }

extsort *extsort_new(size_t rec_size, size_t memory, extsort_cmp cmp) {
  extsort *s = sim_xcalloc(1, sizeof *s);
  s->rsz = rec_size;
  s->cmp = cmp;
  s->fd = -1;
  size_t per = rec_size + 3 * sizeof(uint32_t);
  s->cap = memory / per;
  if (s->cap < 64) s->cap = 64;
  if (s->cap > UINT32_MAX - 1) s->cap = UINT32_MAX - 1;
  s->recs = sim_xmalloc(s->cap * rec_size);
  s->idx = sim_xmalloc(s->cap * sizeof *s->idx);
  s->tmp = sim_xmalloc(s->cap * sizeof *s->tmp);
  s->bounds = sim_xmalloc((s->cap + 1) * sizeof *s->bounds);
  return s;
}

const char *extsort_error(const extsort *s) { return s->err; }
uint64_t extsort_count(const extsort *s) { return s->count; }
size_t extsort_spilled_runs(const extsort *s) { return s->nruns; }

/* Stable natural merge sort of idx[0..n): ascending runs are found, then merged pairwise. */
static void sort_chunk(extsort *s) {
  size_t n = s->n, nb = 0;
  for (size_t i = 0; i < n; i++) s->idx[i] = (uint32_t)i;
  if (n < 2) return;
  s->bounds[nb++] = 0;
  for (size_t i = 1; i < n; i++)
    if (s->cmp(rec_at(s, (uint32_t)(i - 1)), rec_at(s, (uint32_t)i)) > 0) s->bounds[nb++] = (uint32_t)i;
  s->bounds[nb] = (uint32_t)n;
  uint32_t *a = s->idx, *b = s->tmp;
  while (nb > 1) {
    size_t out = 0;
    for (size_t r = 0; r < nb; r += 2) {
      uint32_t lo = s->bounds[r], mid = s->bounds[r + 1], hi = r + 2 <= nb ? s->bounds[r + 2] : mid;
      if (r + 1 >= nb) { /* an odd run out: copy it */
        memcpy(b + lo, a + lo, (size_t)(mid - lo) * sizeof *a);
        s->bounds[out++] = lo;
        continue;
      }
      uint32_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) b[k++] = s->cmp(rec_at(s, a[j]), rec_at(s, a[i])) < 0 ? a[j++] : a[i++];
      while (i < mid) b[k++] = a[i++];
      while (j < hi) b[k++] = a[j++];
      s->bounds[out++] = lo;
    }
    s->bounds[out] = (uint32_t)n;
    nb = out;
    uint32_t *t = a;
    a = b;
    b = t;
  }
  if (a != s->idx) memcpy(s->idx, a, n * sizeof *a);
}

static int fail_io(extsort *s, const char *what) {
  snprintf(s->err, sizeof s->err, "cannot %s the temporary sort file: %s", what, strerror(errno ? errno : EIO));
  return -1;
}

static int open_temp(extsort *s) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  char path[4096];
  snprintf(path, sizeof path, "%s/memplay-sort-XXXXXX", dir);
  s->fd = mkstemp(path);
  if (s->fd < 0) {
    snprintf(s->err, sizeof s->err, "cannot create a temporary sort file in '%s': %s", dir, strerror(errno));
    return -1;
  }
  unlink(path);
  s->wbuf = sim_xmalloc(WRITE_BUFFER);
  return 0;
}

static int flush_write(extsort *s) {
  size_t done = 0;
  while (done < s->wlen) {
    ssize_t w = write(s->fd, s->wbuf + done, s->wlen - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return fail_io(s, "write");
    done += (size_t)w;
  }
  s->wlen = 0;
  return 0;
}

/* Sorts the buffer and appends it to the temporary file as one run. */
static int spill(extsort *s) {
  if (s->fd < 0 && open_temp(s)) return -1;
  sort_chunk(s);
  for (size_t i = 0; i < s->n; i++) {
    if (s->wlen + s->rsz > WRITE_BUFFER && flush_write(s)) return -1;
    memcpy(s->wbuf + s->wlen, rec_at(s, s->idx[i]), s->rsz);
    s->wlen += s->rsz;
  }
  if (flush_write(s)) return -1;
  sim_grow((void **)&s->runs, &s->runs_cap, s->nruns + 1, sizeof *s->runs);
  s->runs[s->nruns++] = (run){s->file_off, s->n};
  s->file_off += (uint64_t)s->n * s->rsz;
  s->n = 0;
  return 0;
}

int extsort_add(extsort *s, const void *rec) {
  if (s->n == s->cap && spill(s)) return -1;
  memcpy(s->recs + s->n * s->rsz, rec, s->rsz);
  s->n++;
  s->count++;
  return 0;
}

int extsort_finish(extsort *s) {
  if (s->finished) return 0;
  s->finished = 1;
  sort_chunk(s);
  s->ncur = s->nruns + 1;
  s->cur = sim_xcalloc(s->ncur, sizeof *s->cur);
  s->heap = sim_xmalloc(s->ncur * sizeof *s->heap);
  size_t bytes = s->nruns ? (s->cap * s->rsz) / s->nruns : 0;
  if (bytes < READ_BUFFER_MIN) bytes = READ_BUFFER_MIN;
  if (bytes > READ_BUFFER_MAX) bytes = READ_BUFFER_MAX;
  size_t bcap = bytes / s->rsz ? bytes / s->rsz : 1;
  for (size_t i = 0; i < s->nruns; i++) {
    cursor *c = &s->cur[i];
    c->off = s->runs[i].off;
    c->count = s->runs[i].count;
    c->bcap = bcap;
    c->buf = sim_xmalloc(bcap * s->rsz);
  }
  cursor *m = &s->cur[s->nruns];
  m->in_memory = 1;
  m->count = s->n;
  free(s->wbuf);
  s->wbuf = NULL;
  free(s->tmp);
  s->tmp = NULL;
  free(s->bounds);
  s->bounds = NULL;
  return 0;
}

static const void *cursor_rec(const extsort *s, const cursor *c) {
  return c->in_memory ? rec_at(s, s->idx[c->pos]) : c->buf + c->bpos * s->rsz;
}

/* Makes the cursor's current record available: 1, 0 when the run is done, -1 on error. */
static int cursor_load(extsort *s, cursor *c) {
  if (c->pos >= c->count) return 0;
  if (c->in_memory || c->bpos < c->blen) return 1;
  uint64_t left = c->count - c->pos;
  size_t want = left < c->bcap ? (size_t)left : c->bcap;
  size_t bytes = want * s->rsz, got = 0;
  off_t at = (off_t)(c->off + c->pos * s->rsz);
  while (got < bytes) {
    ssize_t r = pread(s->fd, c->buf + got, bytes - got, at + (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = EIO;
      return fail_io(s, "read");
    }
    got += (size_t)r;
  }
  c->blen = want;
  c->bpos = 0;
  return 1;
}

/* Heap order: the smaller record, then the earlier run (records added earlier come first). */
static int heap_less(const extsort *s, size_t a, size_t b) {
  int c = s->cmp(cursor_rec(s, &s->cur[a]), cursor_rec(s, &s->cur[b]));
  return c < 0 || (c == 0 && a < b);
}

static void sift_down(extsort *s, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < s->nheap && heap_less(s, s->heap[l], s->heap[m])) m = l;
    if (r < s->nheap && heap_less(s, s->heap[r], s->heap[m])) m = r;
    if (m == i) return;
    size_t t = s->heap[i];
    s->heap[i] = s->heap[m];
    s->heap[m] = t;
    i = m;
  }
}

int extsort_rewind(extsort *s) {
  if (!s->finished && extsort_finish(s)) return -1;
  s->nheap = 0;
  s->advance = 0;
  for (size_t i = 0; i < s->ncur; i++) {
    cursor *c = &s->cur[i];
    c->pos = 0;
    c->blen = c->bpos = 0;
    int r = cursor_load(s, c);
    if (r < 0) return -1;
    if (r) s->heap[s->nheap++] = i;
  }
  for (size_t i = s->nheap / 2; i-- > 0;) sift_down(s, i);
  return 0;
}

int extsort_next(extsort *s, const void **rec) {
  if (s->advance) {
    /* The record handed out last stayed valid until now: move its run on. */
    s->advance = 0;
    cursor *c = &s->cur[s->heap[0]];
    c->pos++;
    c->bpos++;
    int r = cursor_load(s, c);
    if (r < 0) return -1;
    if (!r) s->heap[0] = s->heap[--s->nheap];
    if (s->nheap) sift_down(s, 0);
  }
  if (!s->nheap) return 0;
  *rec = cursor_rec(s, &s->cur[s->heap[0]]);
  s->advance = 1;
  return 1;
}

void extsort_free(extsort *s) {
  if (!s) return;
  if (s->fd >= 0) close(s->fd);
  for (size_t i = 0; i < s->ncur; i++) free(s->cur[i].buf);
  free(s->cur);
  free(s->heap);
  free(s->runs);
  free(s->wbuf);
  free(s->recs);
  free(s->idx);
  free(s->tmp);
  free(s->bounds);
  free(s);
}
