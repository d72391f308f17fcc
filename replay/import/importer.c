/* importer.c: the registry of importers, format detection, and the transaction around every import. */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sim/hashmap.h"
#include "categorize.h"
#include "importer.h"
#include "source_copy.h"

extern const importer import_jsonl;
extern const importer import_kineto;
extern const importer import_timeline;
extern const importer import_pytorch_snapshot;
extern const importer import_nsys;
extern const importer import_bfc_dump;

const importer *const importers[] = {
  &import_jsonl,
  &import_kineto,
  &import_timeline,
  &import_pytorch_snapshot,
  &import_nsys,
  &import_bfc_dump,
  NULL,
};

const importer *importer_find(const char *name) {
  for (size_t i = 0; importers[i]; i++)
    if (!strcmp(importers[i]->name, name)) return importers[i];
  return NULL;
}

static void list_formats(char *buf, size_t n) {
  size_t off = 0;
  buf[0] = 0;
  for (size_t i = 0; importers[i] && off < n; i++)
    off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? ", " : "", importers[i]->name);
}

const importer *importer_detect(input *in, const char *path, char *err, size_t errlen) {
  const unsigned char *head = (const unsigned char *)"";
  size_t n = in ? input_peek(in, &head) : 0;
  const importer *best = NULL;
  int best_score = 0;
  for (size_t i = 0; importers[i]; i++) {
    int sc = importers[i]->detect(head, n, path);
    if (sc > best_score) {
      best_score = sc;
      best = importers[i];
    }
  }
  if (!best) {
    char formats[256];
    list_formats(formats, sizeof formats);
    if (n == 0) snprintf(err, errlen, "cannot import '%s': the file is empty", path);
    else
      snprintf(err, errlen, "cannot import '%s': not a trace format memplay knows (known: %s; use --format to force one)",
               path, formats);
  }
  return best;
}

void import_error(import_ctx *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
  va_end(ap);
}

void import_warn(import_ctx *ctx, const char *fmt, ...) {
  char msg[IMPORT_ERRLEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (ctx->on_warning) ctx->on_warning(ctx->arg, msg);
}

const char *import_param(const import_ctx *ctx, const char *key) {
  size_t k = strlen(key);
  for (size_t i = 0; ctx->params && ctx->params[i]; i++)
    if (!strncmp(ctx->params[i], key, k) && ctx->params[i][k] == '=') return ctx->params[i] + k + 1;
  return NULL;
}

/* IMPORT_NAMES: name as it is; another trace of that name fails the import, or is deleted (in
 * the import's transaction) with IMPORT_REPLACE. */
static char *claim_name(import_ctx *ctx, const char *name) {
  store_trace t;
  int rc = store_trace_find(ctx->s, name, &t);
  if (rc < 0) return NULL;
  int taken = rc == 0 && !strcmp(t.name, name);
  if (taken && !(ctx->policy & IMPORT_REPLACE)) {
    char msg[1024];
    snprintf(msg, sizeof msg,
             "a trace named '%s' already exists in %s (imported from '%s'): import this file under another name "
             "with --name NAME, or replace that trace with --replace",
             name, store_path(ctx->s), t.source_file ? t.source_file : t.source_format);
    store_seterr_text(ctx->s, msg);
    store_trace_clear(&t);
    return NULL;
  }
  if (taken) {
    import_warn(ctx, "replacing trace '%s' (id %lld, imported from '%s')", name, (long long)t.id,
                t.source_file ? t.source_file : t.source_format);
    if (store_trace_delete(ctx->s, t.id)) {
      store_trace_clear(&t);
      return NULL;
    }
  }
  if (rc == 0) store_trace_clear(&t);
  char *n = sim_xmalloc(strlen(name) + 1);
  return strcpy(n, name);
}

char *import_given_name(import_ctx *ctx, const char *name) {
  return ctx->policy & IMPORT_NAMES ? claim_name(ctx, name) : store_unique_name(ctx->s, name);
}

char *import_trace_name(import_ctx *ctx, const char *suffix) {
  char base[512];
  if (ctx->name) {
    snprintf(base, sizeof base, "%s%s", ctx->name, suffix ? suffix : "");
    if (ctx->policy & IMPORT_NAMES) return claim_name(ctx, base);
    char *n = sim_xmalloc(strlen(base) + 1);
    strcpy(n, base);
    return n; /* a name the user chose is taken as given: a clash is an error */
  }
  const char *b = strrchr(ctx->path, '/');
  b = b ? b + 1 : ctx->path;
  snprintf(base, sizeof base, "%s", b);
  static const char *const exts[] = {".gz", ".json", ".jsonl", ".raw", ".pickle", ".pkl", ".sqlite", ".db", ".log", NULL};
  for (int again = 1; again;) {
    again = 0;
    size_t bl = strlen(base);
    for (size_t i = 0; exts[i]; i++) {
      size_t el = strlen(exts[i]);
      if (bl > el && !strcmp(base + bl - el, exts[i])) {
        base[bl - el] = 0;
        again = 1;
        break;
      }
    }
  }
  if (suffix) strncat(base, suffix, sizeof base - strlen(base) - 1);
  return import_given_name(ctx, base);
}

struct import_online {
  store_writer *w;
  categorize_online *co;
  struct import_online *next;
};

int import_begin_trace(import_ctx *ctx, const store_trace *meta, store_writer **w) {
  if (store_writer_begin(ctx->s, meta, w)) return -1;
  categorize_online *co = categorize_online_begin(ctx->s, *w);
  if (!co) {
    store_writer_abort(*w);
    *w = NULL;
    return -1;
  }
  struct import_online *o = sim_xmalloc(sizeof *o);
  *o = (struct import_online){*w, co, ctx->online};
  ctx->online = o;
  return 0;
}

/* Takes the online categorization of w off the list (NULL when w has none). */
static categorize_online *online_take(import_ctx *ctx, store_writer *w) {
  for (struct import_online **p = &ctx->online; *p; p = &(*p)->next)
    if ((*p)->w == w) {
      struct import_online *o = *p;
      categorize_online *co = o->co;
      *p = o->next;
      free(o);
      return co;
    }
  return NULL;
}

int import_finish_trace(import_ctx *ctx, store_writer *w, const char *name) {
  int64_t id = store_writer_trace_id(w), n = store_writer_events(w);
  categorize_online *co = online_take(ctx, w);
  /* One rule for every format: a trace with no events is refused (there is nothing to replay),
   * whatever else the file held (a header, metadata, empty lists). */
  if (n == 0) {
    categorize_online_free(co);
    store_writer_abort(w);
    import_error(ctx, "cannot import '%s': it holds no events%s%s%s (nothing to replay)", ctx->path,
                 name ? " for trace '" : "", name ? name : "", name ? "'" : "");
    return -1;
  }
  int rc = co ? categorize_online_finish(co) : 0;
  if (rc) store_writer_abort(w);
  else rc = store_writer_end(w);
  if (!rc && co) rc = categorize_online_note(co, id);
  categorize_online_free(co);
  if (rc) {
    import_error(ctx, "cannot import '%s': %s", ctx->path, store_error(ctx->s));
    return -1;
  }
  if (ctx->on_trace) ctx->on_trace(ctx->arg, id, name, n);
  return 0;
}

/* IMPORT_SAME_FILE: 1 when a trace holds the file already (ctx->existing names it) and the import
 * asks for nothing else (no other format, no --set, no other --name), 0 otherwise, -1 on error. */
static int same_file(import_ctx *ctx, const char *digest, const char *forced) {
  store_trace t;
  int rc = store_trace_find_digest(ctx->s, digest, &t);
  if (rc < 0) import_error(ctx, "cannot import '%s': %s", ctx->path, store_error(ctx->s));
  if (rc != 0) return rc < 0 ? -1 : 0;
  /* a copy asked for: read as another format, with other settings, or under another name */
  if ((forced && strcmp(forced, t.source_format)) || (ctx->params && ctx->params[0]) ||
      (ctx->name && strcmp(ctx->name, t.name))) {
    store_trace_clear(&t);
    return 0;
  }
  snprintf(ctx->existing, sizeof ctx->existing, "%s", t.name);
  store_trace_clear(&t);
  return 1;
}

/* The importer for the file (the forced one, or detected from its content) and, unless it reads
 * the file by path, the input it reads (*in); *copy, a private copy for an importer that reads by
 * path a file it cannot open in place. The importer, or NULL with ctx->err set. */
static const importer *import_open(import_ctx *ctx, const char *forced, input **in, char **copy) {
  const importer *imp = NULL;
  *in = NULL;
  *copy = NULL;
  if (forced) {
    imp = importer_find(forced);
    if (!imp) {
      char formats[256];
      list_formats(formats, sizeof formats);
      import_error(ctx, "unknown format '%s' (known: %s)", forced, formats);
      return NULL;
    }
  }
  if (!imp || !imp->wants_path) {
    *in = input_open(ctx->path, ctx->err, sizeof ctx->err);
    if (!*in) return NULL;
    if (ctx->on_progress) input_on_progress(*in, ctx->on_progress, ctx->progress_arg);
  }
  if (!imp) imp = importer_detect(*in, ctx->path, ctx->err, sizeof ctx->err);
  if (imp && imp->wants_path && source_copy_needed(ctx->path)) {
    *copy = source_copy_make(ctx->path, *in, ctx->err, sizeof ctx->err);
    if (!*copy) imp = NULL;
  }
  if (!imp || imp->wants_path) {
    input_close(*in);
    *in = NULL;
  }
  return imp;
}

/*
 * The file's digest (input_digest: its size first) is computed before the import only when a
 * stored trace came from a file of the same size, which alone can hold the same content; else on
 * a thread of its own while the import reads the file, to be stored with the trace at the end.
 */
typedef struct digest_job {
  pthread_t thread;
  int running;
  const char *path;
  char out[80];
  int rc;
} digest_job;

static void *digest_main(void *arg) {
  digest_job *d = arg;
  pthread_setname_np(pthread_self(), "memplay-digest");
  d->rc = input_digest(d->path, d->out, sizeof d->out);
  return NULL;
}

/* The digest the job computed into digest (left empty when the file could not be read). */
static void digest_wait(digest_job *d, char *digest, size_t n) {
  if (!d->running) return;
  pthread_join(d->thread, NULL);
  d->running = 0;
  if (d->rc == 0) snprintf(digest, n, "%s", d->out);
}

typedef struct size_probe {
  char prefix[32];
  size_t n;
  int found;
} size_probe;

static int probe_trace(void *arg, const store_trace *t) {
  size_probe *p = arg;
  if (t->source_digest && !strncmp(t->source_digest, p->prefix, p->n)) p->found = 1;
  return p->found;
}

/* IMPORT_SAME_FILE: the digest now, and the trace that holds the file already (1) if any; or the
 * digest left to job when no stored trace came from a file of this size (0). -1 on error. */
static int same_file_check(import_ctx *ctx, const char *forced, char *digest, size_t n, digest_job *job) {
  struct stat st;
  if (stat(ctx->path, &st) || !S_ISREG(st.st_mode)) return 0; /* left to the importer to read or report */
  size_probe p = {.found = 0};
  p.n = (size_t)snprintf(p.prefix, sizeof p.prefix, "%" PRIu64 "-", (uint64_t)st.st_size);
  if (store_trace_each(ctx->s, probe_trace, &p) < 0) p.found = 1; /* cannot tell: look now */
  if (!p.found) {
    job->path = ctx->path;
    job->running = pthread_create(&job->thread, NULL, digest_main, job) == 0;
    if (job->running) return 0;
  }
  if (input_digest(ctx->path, digest, n)) return 0;
  return same_file(ctx, digest, forced);
}

/* The import itself, in one transaction: the importer, the categories of what it added, the
 * file's digest (job's, when it computes it); committed, or rolled back with ctx->err set. 0 or -1. */
static int import_transaction(import_ctx *ctx, const importer *imp, char *digest, size_t dn, digest_job *job) {
  if (store_begin(ctx->s)) {
    import_error(ctx, "cannot import '%s': %s", ctx->path, store_error(ctx->s));
    return -1;
  }
  /* Every trace the import adds gets its allocations' categories, in the same transaction. */
  int64_t mark = categorize_mark(ctx->s);
  if (mark < 0) import_error(ctx, "cannot import '%s': %s", ctx->path, store_error(ctx->s));
  int rc = mark < 0 ? -1 : imp->import(ctx);
  char cerr[512];
  if (rc == 0 && categorize_since(ctx->s, mark, cerr, sizeof cerr)) {
    import_error(ctx, "cannot import '%s': cannot categorize its allocations: %s", ctx->path, cerr);
    rc = -1;
  }
  if (rc == 0) digest_wait(job, digest, dn);
  if (rc == 0 && digest[0] && store_traces_set_digest(ctx->s, mark, digest)) {
    import_error(ctx, "cannot import '%s': %s", ctx->path, store_error(ctx->s));
    rc = -1;
  }
  if (rc == 0 && store_commit(ctx->s)) {
    import_error(ctx, "cannot import '%s': %s", ctx->path, store_error(ctx->s));
    rc = -1;
  }
  if (rc) {
    store_rollback(ctx->s);
    if (!ctx->err[0]) import_error(ctx, "cannot import '%s'", ctx->path);
  }
  while (ctx->online) { /* traces a failed import left unfinished (their writers are the importer's) */
    struct import_online *o = ctx->online;
    ctx->online = o->next;
    categorize_online_free(o->co);
    free(o);
  }
  return rc;
}

int import_file(import_ctx *ctx, const char *forced) {
  ctx->err[0] = 0;
  ctx->existing[0] = 0;
  char digest[80] = "";
  digest_job job = {.running = 0};
  if (ctx->policy & IMPORT_SAME_FILE) {
    int rc = same_file_check(ctx, forced, digest, sizeof digest, &job);
    if (rc) return rc;
  }
  input *in;
  char *copy;
  const importer *imp = import_open(ctx, forced, &in, &copy);
  int rc = -1;
  if (imp) {
    ctx->file = copy ? copy : ctx->path;
    ctx->in = in;
    ctx->format = imp->name;
    rc = import_transaction(ctx, imp, digest, sizeof digest, &job);
    input_close(in);
    ctx->in = NULL;
    source_copy_remove(copy);
    ctx->file = NULL;
  }
  digest_wait(&job, digest, sizeof digest);
  return rc;
}
