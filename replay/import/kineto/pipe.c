/* pipe.c: Kineto: elements from the parser thread to the handler, in batches, in file order. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kineto_int.h"

/*
 * With the scanner, parsing and handling run on two threads: a parser thread (reader, scanner,
 * yajl, the callbacks of parse.c) packs each element into a batch, and the importer's thread
 * unpacks and handles them (records, interning, the join window, the sorts) in file order.
 * An element's position in the file travels with it, for the handler's messages. When the
 * parser leaves the scanner's loop (at the end of traceEvents, or for something the scanner
 * does not take) it first waits until every element sent has been handled, then handles what
 * remains itself while the importer's thread waits for it: so there is always one handler,
 * and the order is the file's.
 */
#define KBATCH_BYTES (1u << 20)
#define KBATCHES 4

/* An element in a batch: this, then its name, category text and mistyped field, each ending in
 * a NUL, the whole padded to 8 bytes. */
typedef struct kitem {
  uint32_t size, name_len, cat_len, bad_len;
  int64_t nelem;
  uint64_t end_off, end_line; /* just past the element: byte offset and line */
  kelem e;
} kitem;

enum { BATCH_ITEMS, BATCH_DRAIN, BATCH_END };

typedef struct kbatch {
  char *data;
  size_t len, cap;
  int kind;
} kbatch;

struct kpipe {
  kparse *p;
  pthread_t thread;
  int running;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  kbatch b[KBATCHES];
  size_t queue[KBATCHES], qhead, qlen; /* batches for the handler, in order */
  size_t free_list[KBATCHES], nfree;
  long cur;       /* the parser's batch, -1 none */
  size_t pending; /* offset of the element in cur whose position is not known yet, SIZE_MAX none */
  int stop;       /* the handler failed: the parser stops */
  int drained;    /* the handler handled everything sent before a drain */
  int direct;     /* the parser handles elements itself */
  int rc;         /* the parser's result */
};

int kineto_element_done(kparse *p) {
  kview v = {&p->e, p->name_len ? p->name : "", p->cat_len ? p->cat_text : "", p->bad, p->name_len, p->cat_len,
             p->nelem};
  kpipe *pp = p->pipe;
  if (!pp || pp->direct) return kineto_handle_element(p, &v);
  size_t need = (sizeof(kitem) + v.name_len + v.cat_len + strlen(v.bad) + 3 + 7) & ~(size_t)7;
  kbatch *b = pp->cur >= 0 ? &pp->b[pp->cur] : NULL;
  if (!b || b->len + need > b->cap) {
    pthread_mutex_lock(&pp->lock);
    if (b) { /* full: to the handler */
      b->kind = BATCH_ITEMS;
      pp->queue[(pp->qhead + pp->qlen++) % KBATCHES] = (size_t)pp->cur;
      pthread_cond_broadcast(&pp->cond);
    }
    while (!pp->nfree && !pp->stop) pthread_cond_wait(&pp->cond, &pp->lock);
    int stop = pp->stop;
    if (!stop) pp->cur = (long)pp->free_list[--pp->nfree];
    else pp->cur = -1;
    pthread_mutex_unlock(&pp->lock);
    if (stop) return 0;
    b = &pp->b[pp->cur];
    b->len = 0;
    if (need > b->cap) {
      b->cap = need;
      b->data = sim_xrealloc(b->data, need);
    }
  }
  kitem *it = (kitem *)(void *)(b->data + b->len);
  it->size = (uint32_t)need;
  it->name_len = (uint32_t)v.name_len;
  it->cat_len = (uint32_t)v.cat_len;
  it->bad_len = (uint32_t)strlen(v.bad);
  it->nelem = v.nelem;
  it->end_off = it->end_line = 0;
  it->e = p->e;
  char *t = (char *)(it + 1);
  memcpy(t, v.name, v.name_len + 1);
  memcpy(t + v.name_len + 1, v.cat, v.cat_len + 1);
  memcpy(t + v.name_len + v.cat_len + 2, v.bad, it->bad_len + 1);
  pp->pending = b->len;
  b->len += need;
  return 1;
}

/* The element just sent ended at this position. */
void kineto_pipe_commit(kpipe *pp, uint64_t off, uint64_t line) {
  if (!pp || pp->pending == SIZE_MAX || pp->cur < 0) return;
  kitem *it = (kitem *)(void *)(pp->b[pp->cur].data + pp->pending);
  it->end_off = off;
  it->end_line = line;
  pp->pending = SIZE_MAX;
}

/* Hands the current batch over as the last (kind BATCH_DRAIN: and waits until it is handled,
 * to handle the rest itself). 0, or -1 when the handler stopped. */
static int pipe_finish(kpipe *pp, int kind) {
  pthread_mutex_lock(&pp->lock);
  while (pp->cur < 0 && !pp->nfree && !pp->stop) pthread_cond_wait(&pp->cond, &pp->lock);
  if (!pp->stop) {
    if (pp->cur < 0) {
      pp->cur = (long)pp->free_list[--pp->nfree];
      pp->b[pp->cur].len = 0;
    }
    pp->b[pp->cur].kind = kind;
    pp->queue[(pp->qhead + pp->qlen++) % KBATCHES] = (size_t)pp->cur;
    pp->cur = -1;
    pthread_cond_broadcast(&pp->cond);
  }
  while (kind == BATCH_DRAIN && !pp->drained && !pp->stop) pthread_cond_wait(&pp->cond, &pp->lock);
  int stop = pp->stop;
  if (kind == BATCH_DRAIN && !stop) pp->direct = 1;
  pthread_mutex_unlock(&pp->lock);
  return stop ? -1 : 0;
}

int kineto_pipe_drain(kpipe *pp) { return pipe_finish(pp, BATCH_DRAIN); }

int kineto_pipe_stopped(const kpipe *pp) { return pp && pp->stop; }

/* The handler's loop on the importer's thread: 0 when the parser ended or took over, -1 when an
 * element could not be handled (the message is in the import context). */
static int pipe_handle(kpipe *pp) {
  kparse *p = pp->p;
  import_ctx *ic = p->ic;
  for (;;) {
    pthread_mutex_lock(&pp->lock);
    while (!pp->qlen) pthread_cond_wait(&pp->cond, &pp->lock);
    size_t bi = pp->queue[pp->qhead];
    pp->qhead = (pp->qhead + 1) % KBATCHES;
    pp->qlen--;
    pthread_mutex_unlock(&pp->lock);
    kbatch *b = &pp->b[bi];
    int failed = 0;
    for (size_t off = 0; off < b->len && !failed;) {
      const kitem *it = (const kitem *)(const void *)(b->data + off);
      const char *t = (const char *)(it + 1);
      kview v = {&it->e, t, t + it->name_len + 1, t + it->name_len + it->cat_len + 2, it->name_len, it->cat_len,
                 it->nelem};
      if (!kineto_handle_element(p, &v)) {
        import_error(ic, "cannot import '%s': line %llu (byte %llu%s): %s", ic->path, (unsigned long long)it->end_line,
                     (unsigned long long)it->end_off, input_is_gzip(ic->in) ? " of the uncompressed JSON" : "", p->err);
        failed = 1;
      }
      off += it->size;
    }
    int kind = b->kind;
    pthread_mutex_lock(&pp->lock);
    pp->free_list[pp->nfree++] = bi;
    if (failed) pp->stop = 1;
    else if (kind == BATCH_DRAIN) pp->drained = 1;
    pthread_cond_broadcast(&pp->cond);
    pthread_mutex_unlock(&pp->lock);
    if (failed) return -1;
    if (kind != BATCH_ITEMS) return 0;
  }
}

static void *parser_main(void *arg) {
  kpipe *pp = arg;
  pp->rc = kineto_read_file(pp->p, 1);
  if (!pp->direct) pipe_finish(pp, BATCH_END);
  return NULL;
}

/* Parses the file: with the scanner, on a parser thread while this one handles the elements. */
int kineto_parse(kparse *p, int scanner) {
  import_ctx *ic = p->ic;
  int rc;
  if (!scanner) {
    rc = kineto_read_file(p, 0);
  } else {
    kpipe pp;
    memset(&pp, 0, sizeof pp);
    pp.p = p;
    pp.cur = -1;
    pp.pending = SIZE_MAX;
    for (size_t i = 0; i < KBATCHES; i++) {
      pp.b[i].cap = KBATCH_BYTES;
      pp.b[i].data = sim_xmalloc(KBATCH_BYTES);
      pp.free_list[pp.nfree++] = i;
    }
    pthread_mutex_init(&pp.lock, NULL);
    pthread_cond_init(&pp.cond, NULL);
    p->pipe = &pp;
    int hrc = 0;
    if (pthread_create(&pp.thread, NULL, parser_main, &pp)) {
      pp.direct = 1; /* no thread: one thread does both */
      pp.rc = kineto_read_file(p, 1);
    } else {
      hrc = pipe_handle(&pp);
      pthread_join(pp.thread, NULL);
    }
    p->pipe = NULL;
    for (size_t i = 0; i < KBATCHES; i++) free(pp.b[i].data);
    pthread_mutex_destroy(&pp.lock);
    pthread_cond_destroy(&pp.cond);
    if (hrc) return -1; /* the handler's message is in the import context */
    rc = pp.rc;
  }
  if (rc && !ic->err[0]) import_error(ic, "%s", p->pmsg[0] ? p->pmsg : "cannot import");
  return rc;
}
