/* reader.c: Kineto: reading the JSON: a prefetching thread, traceEvents through the scanner, the rest through yajl. */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/jsonscan.h"
#include "kineto_int.h"

/*
 * The reader. yajl parses the whole file, except the elements of traceEvents that the scanner
 * (jsonscan.h) reads itself: before the array, a bracket-matching pass finds where traceEvents
 * opens and yajl gets everything up to that point; then each element's extent is found and the
 * scanner parses it with the same callbacks; an element it declines, and everything after the
 * array, go to yajl. So that yajl's grammar state always matches the file, the first element
 * the scanner reads is stood in for by "{}" (p->ghost: no callbacks act on it). Errors carry
 * the byte offset and line in the (uncompressed) file, from yajl's position in what it was fed
 * or from the element the callbacks rejected.
 */
#define KINETO_BUFFER (4u << 20)
#define KINETO_MAX_ELEMENT (64u << 20)

/*
 * Reading (and for .gz, inflating) runs on a thread of its own, a few chunks ahead of the
 * parser, so that the two overlap.
 */
#define PREFETCH_CHUNKS 4
#define PREFETCH_CHUNK (1u << 20)

typedef struct prefetch {
  input *in;
  pthread_t thread;
  int running;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  char *chunk[PREFETCH_CHUNKS];
  size_t len[PREFETCH_CHUNKS];
  int full[PREFETCH_CHUNKS];
  size_t head, head_off, tail; /* the reader's chunk and offset in it; the thread's chunk */
  int done, failed, stop;      /* the thread reached the end / an error; the reader wants it to stop */
} prefetch;

static void *prefetch_main(void *arg) {
  prefetch *f = arg;
  for (;;) {
    pthread_mutex_lock(&f->lock);
    while (f->full[f->tail] && !f->stop) pthread_cond_wait(&f->cond, &f->lock);
    int stop = f->stop;
    pthread_mutex_unlock(&f->lock);
    if (stop) return NULL;
    char *b = f->chunk[f->tail];
    size_t n = 0;
    int end = 0, failed = 0;
    while (n < PREFETCH_CHUNK) {
      ssize_t got = input_read(f->in, b + n, PREFETCH_CHUNK - n);
      if (got < 0) failed = 1;
      if (got <= 0) {
        end = 1;
        break;
      }
      n += (size_t)got;
    }
    pthread_mutex_lock(&f->lock);
    f->len[f->tail] = n;
    f->full[f->tail] = 1;
    f->tail = (f->tail + 1) % PREFETCH_CHUNKS;
    if (end) f->done = 1, f->failed = failed;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    if (end) return NULL;
  }
}

static int prefetch_start(prefetch *f, input *in) {
  memset(f, 0, sizeof *f);
  f->in = in;
  for (int i = 0; i < PREFETCH_CHUNKS; i++) f->chunk[i] = sim_xmalloc(PREFETCH_CHUNK);
  pthread_mutex_init(&f->lock, NULL);
  pthread_cond_init(&f->cond, NULL);
  if (pthread_create(&f->thread, NULL, prefetch_main, f)) return -1;
  f->running = 1;
  return 0;
}

/* Copies up to n bytes: the count, 0 at the end, -1 when reading failed (input_error says why). */
static ssize_t prefetch_read(prefetch *f, char *dst, size_t n) {
  for (;;) {
    pthread_mutex_lock(&f->lock);
    while (!f->full[f->head] && !f->done) pthread_cond_wait(&f->cond, &f->lock);
    int full = f->full[f->head], failed = f->failed;
    pthread_mutex_unlock(&f->lock);
    if (!full) return failed ? -1 : 0; /* nothing left */
    size_t avail = f->len[f->head] - f->head_off, take = n < avail ? n : avail;
    memcpy(dst, f->chunk[f->head] + f->head_off, take);
    f->head_off += take;
    if (f->head_off == f->len[f->head]) { /* the chunk is used up: back to the thread */
      pthread_mutex_lock(&f->lock);
      f->full[f->head] = 0;
      f->head = (f->head + 1) % PREFETCH_CHUNKS;
      f->head_off = 0;
      pthread_cond_broadcast(&f->cond);
      pthread_mutex_unlock(&f->lock);
    }
    if (take || !n) return (ssize_t)take;
  }
}

static void prefetch_stop(prefetch *f) {
  if (f->running) {
    pthread_mutex_lock(&f->lock);
    f->stop = 1;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    pthread_join(f->thread, NULL);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->cond);
    f->running = 0;
  }
  for (int i = 0; i < PREFETCH_CHUNKS; i++) free(f->chunk[i]);
}

typedef struct kreader {
  kparse *p;
  prefetch *pf;
  char *buf;
  size_t cap, pos, len; /* buf[pos..len) not yet consumed */
  size_t mark;          /* bytes from here on are kept by a refill */
  uint64_t base_off;    /* file offset of buf[0] */
  uint64_t base_lines;  /* newlines before buf[0] */
  int eof;
  int yajl_has_elem;    /* yajl has seen an element of traceEvents (real or stand-in) */
  size_t lines_pos;     /* newlines in buf[0..lines_pos) are counted in lines */
  uint64_t lines;
} kreader;

/* The reader's message when the parse fails (the import context is the handler's). */
static void reader_msg(kreader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reader_msg(kreader *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->p->pmsg, sizeof r->p->pmsg, fmt, ap);
  va_end(ap);
}

static uint64_t count_lines(const char *b, size_t n) {
  uint64_t c = 0;
  for (const char *e = b + n; (b = memchr(b, '\n', (size_t)(e - b))); b++) c++;
  return c;
}

/* Keeps buf[mark..len), reads more behind it: bytes read, 0 at the end, -1 on error. */
static ssize_t reader_fill(kreader *r) {
  if (r->mark) {
    r->base_lines += count_lines(r->buf, r->mark);
    r->lines_pos = 0;
    r->lines = 0;
    r->base_off += r->mark;
    memmove(r->buf, r->buf + r->mark, r->len - r->mark);
    r->len -= r->mark;
    r->pos -= r->mark;
    r->mark = 0;
  }
  if (r->len == r->cap) {
    if (r->cap >= KINETO_MAX_ELEMENT) return 0;
    r->cap *= 2;
    r->buf = sim_xrealloc(r->buf, r->cap);
  }
  ssize_t n = prefetch_read(r->pf, r->buf + r->len, r->cap - r->len);
  if (n < 0) {
    reader_msg(r, "cannot import '%s': %s", r->p->ic->path, input_error(r->p->ic->in));
    return -1;
  }
  if (n == 0) r->eof = 1;
  r->len += (size_t)n;
  return n;
}

static void reader_error_at(kreader *r, size_t at, const char *what) {
  import_ctx *ic = r->p->ic;
  unsigned long long byte = (unsigned long long)(r->base_off + at);
  unsigned long long line = (unsigned long long)(r->base_lines + count_lines(r->buf, at) + 1);
  reader_msg(r, "cannot import '%s': line %llu (byte %llu%s): %s", ic->path, line, byte,
             input_is_gzip(ic->in) ? " of the uncompressed JSON" : "", what);
}

/* Gives yajl buf[from..to) (or, with text, that text standing at position from). 0 or -1. */
static int reader_feed(kreader *r, size_t from, size_t to, const char *text) {
  kparse *p = r->p;
  const unsigned char *b = text ? (const unsigned char *)text : (const unsigned char *)r->buf + from;
  size_t n = text ? strlen(text) : to - from;
  yajl_status st = n ? yajl_parse(p->h, b, n) : yajl_complete_parse(p->h);
  if (st == yajl_status_ok) return 0;
  size_t used = yajl_get_bytes_consumed(p->h);
  if (text || used > n) used = 0;
  if (p->pfailed || p->failed) {
    reader_error_at(r, from + used, p->pfailed ? p->perr : p->err);
  } else if (!n) {
    import_ctx *ic = p->ic;
    reader_msg(r, "cannot import '%s': the JSON ends early at byte %llu%s (line %llu): the file is truncated",
               ic->path, (unsigned long long)(r->base_off + r->len), input_is_gzip(ic->in) ? " of the uncompressed JSON" : "",
               (unsigned long long)(r->base_lines + count_lines(r->buf, r->len) + 1));
  } else {
    unsigned char *m = yajl_get_error(p->h, 0, b, n);
    char *msg = (char *)m, *nl;
    if (!strncmp(msg, "parse error: ", 13)) msg += 13;
    if ((nl = strchr(msg, '\n'))) *nl = 0;
    char what[600];
    snprintf(what, sizeof what, "invalid JSON: %s", msg);
    yajl_free_error(p->h, m);
    reader_error_at(r, from + used, what);
  }
  return -1;
}

/* Everything from pos to the end of the file through yajl. */
static int reader_yajl_rest(kreader *r) {
  for (;;) {
    if (r->pos < r->len && reader_feed(r, r->pos, r->len, NULL)) return -1;
    r->pos = r->mark = r->len;
    if (r->eof) return reader_feed(r, r->len, r->len, NULL);
    if (reader_fill(r) < 0) return -1;
  }
}

/* Feeds yajl up to and including the '[' that opens the top-level traceEvents: 1 found, 0 the
 * file ended (or yajl stopped, *failed says), -1 on error. */
static int reader_prefix(kreader *r) {
  static const char key[] = "traceEvents";
  int depth = 0, in_str = 0, esc = 0, match = 0, cand = 0;
  for (;;) {
    size_t i = r->pos;
    for (; i < r->len; i++) {
      char c = r->buf[i];
      if (in_str) {
        if (esc) esc = 0, match = -1;
        else if (c == '\\') esc = 1, match = -1;
        else if (c == '"') {
          in_str = 0;
          cand = depth == 1 && match == (int)sizeof key - 1;
        } else if (match >= 0) match = match < (int)sizeof key - 1 && key[match] == c ? match + 1 : -1;
        continue;
      }
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
      if (c == '"') {
        in_str = 1;
        match = 0;
        cand = 0;
      } else if (c == ':') {
        cand = cand == 1 ? 2 : 0;
      } else if (c == '[' && cand == 2) {
        if (reader_feed(r, r->pos, i + 1, NULL)) return -1;
        r->pos = r->mark = i + 1;
        return 1;
      } else {
        cand = 0;
        if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') depth--;
      }
    }
    if (reader_feed(r, r->pos, r->len, NULL)) return -1;
    r->pos = r->mark = r->len;
    if (r->eof) return 0;
    if (reader_fill(r) < 0) return -1;
  }
}

/* The elements of traceEvents, through the scanner while it can: 0 when the rest is yajl's. */
static int reader_events(kreader *r) {
  kparse *p = r->p;
  int need_comma = 0;
  for (;;) {
    size_t unit = r->pos; /* separator and element: what yajl gets if the scanner does not take it */
    r->mark = unit;
    size_t i = unit;
    char c = 0;
    for (;;) { /* whitespace, the comma, whitespace, '{' */
      while (i < r->len && (r->buf[i] == ' ' || r->buf[i] == '\n' || r->buf[i] == '\r' || r->buf[i] == '\t')) i++;
      if (i == r->len) {
        if (r->eof) return 0;
        size_t off = i - r->pos;
        ssize_t got = reader_fill(r);
        if (got < 0) return -1;
        unit = r->pos;
        i = unit + off;
        continue;
      }
      c = r->buf[i];
      if (need_comma && c == ',') {
        need_comma = 0;
        i++;
        continue;
      }
      break;
    }
    if (need_comma || c != '{') return 0; /* the end of the array, or something for yajl to judge */
    int depth = p->depth, rc;
    size_t used = 0;
    while ((rc = jsonscan_object(r->buf + i, r->len - i, &kineto_cbs, p, &used)) == JSONSCAN_MORE ||
           (rc == JSONSCAN_DECLINED && jsonscan_extent(r->buf + i, r->len - i) == 0)) {
      /* the element goes on past what has been read: read more and start it again */
      p->depth = depth;
      p->in_args = 0;
      if (r->eof) return 0;
      size_t off = i - r->pos;
      ssize_t got = reader_fill(r);
      if (got < 0) return -1;
      unit = r->pos;
      i = unit + off;
      if (got == 0 && !r->eof) return 0; /* larger than the largest buffer: yajl streams it */
    }
    size_t end;
    if (rc == JSONSCAN_CANCELED) {
      if (kineto_pipe_stopped(p->pipe)) return -1; /* the handler failed: its message stands */
      reader_error_at(r, i + used, p->pfailed ? p->perr : p->err);
      return -1;
    }
    if (rc == JSONSCAN_OK) {
      end = i + used;
      if (!r->yajl_has_elem) {
        p->ghost = 1;
        if (reader_feed(r, unit, unit, "{}")) return -1;
        r->yajl_has_elem = 1;
      }
    } else {
      end = i + (size_t)jsonscan_extent(r->buf + i, r->len - i);
      p->depth = depth; /* the scanner's callbacks went part of the way: yajl starts the element again */
      p->in_args = 0;
      if (reader_feed(r, unit, end, NULL)) return -1;
      r->yajl_has_elem = 1;
    }
    /* where the element ends, for the handler's messages */
    r->lines += count_lines(r->buf + r->lines_pos, end - r->lines_pos);
    r->lines_pos = end;
    kineto_pipe_commit(p->pipe, r->base_off + end, r->base_lines + r->lines + 1);
    r->pos = end;
    need_comma = 1;
  }
}

int kineto_read_file(kparse *p, int scanner) {
  import_ctx *ic = p->ic;
  prefetch pf;
  if (prefetch_start(&pf, ic->in)) {
    prefetch_stop(&pf);
    import_error(ic, "cannot import '%s': cannot start the reading thread", ic->path);
    return -1;
  }
  kreader r = {.p = p, .pf = &pf, .cap = KINETO_BUFFER};
  r.buf = sim_xmalloc(r.cap);
  int rc = reader_fill(&r) < 0 ? -1 : 0;
  if (!rc && scanner) {
    int found = reader_prefix(&r);
    if (found < 0) rc = -1;
    else if (found && reader_events(&r) < 0) rc = -1;
    /* the rest is yajl's, and its elements are this thread's to handle */
    if (!rc && p->pipe && kineto_pipe_drain(p->pipe)) rc = -1;
  }
  if (!rc && reader_yajl_rest(&r)) rc = -1;
  prefetch_stop(&pf);
  free(r.buf);
  if (!rc && !p->seen_events) {
    reader_msg(&r, "cannot import '%s': the JSON object has no traceEvents array (not a PyTorch profiler trace)",
               ic->path);
    rc = -1;
  }
  return rc;
}
