/* importer.h: the importer interface, the registry of formats, and the one-transaction import driver. */
#ifndef REPLAY_IMPORTER_H
#define REPLAY_IMPORTER_H

#include <stddef.h>
#include <stdint.h>

#include "io/input.h"
#include "store/store.h"

#define IMPORT_ERRLEN 1024

typedef struct import_ctx import_ctx;

/*
 * An importer turns one file format into traces. It writes through the store_writer API; the
 * driver (import_file) wraps it in one transaction, so an importer simply returns -1 with a
 * message on any problem and the store is left exactly as it was.
 *
 * Adding a format: write replay/import/<name>.c (or a sub-folder with a private header, like
 * kineto/) with an `importer` filled in with designated initializers, add it to the list in
 * importer.c and to CMakeLists.txt here, and document it in docs/formats.md.
 */
typedef struct importer {
  const char *name;    /* as given to --format: jsonl, pytorch_snapshot, ... */
  const char *summary; /* one line for `memplay help import` */
  /* How sure the importer is that a file starting with head is its format: 0 (no) to 100.
   * The path is given for tie-breaking only; content decides. */
  int (*detect)(const unsigned char *head, size_t n, const char *path);
  /* Whether the importer reads the file itself by path (SQLite sources) rather than
   * through `input`. */
  int wants_path;
  int (*import)(import_ctx *ctx);
  /* What the format never records (IMPORT_LACKS_*): its traces' events all say device 0 or stream
   * 0, which `memplay info` then calls "not recorded". */
  unsigned lacks;
} importer;

enum { IMPORT_LACKS_DEVICE = 1u << 0, IMPORT_LACKS_STREAM = 1u << 1 };

struct import_ctx {
  store *s;
  const char *path;
  /* What an importer that wants_path opens: path itself, or a private copy of it (a pipe; a
   * WAL beside it: source_copy.h). Messages name path. Set by import_file. */
  const char *file;
  input *in;          /* NULL when the importer wants_path */
  const char *name;   /* --name, or NULL to derive one from the file name */
  const char *format; /* the importer's name */
  const char *const *params; /* key=value settings from --set, NULL-terminated (may be NULL) */
  /* Importers report each trace they finish and print warnings through these. */
  void (*on_trace)(void *arg, int64_t id, const char *name, int64_t events);
  void (*on_warning)(void *arg, const char *msg);
  void *arg;
  /* Optional: bytes read of the file so far and its size (UINT64_MAX: a pipe), as it is read (by
   * the thread that reads it: the JSON Lines importer reads a large file on a thread of its own). */
  void (*on_progress)(void *arg, uint64_t done, uint64_t total);
  void *progress_arg;
  char err[IMPORT_ERRLEN];
  struct import_online *online; /* the driver's: traces begun with import_begin_trace */
  /* The command line's rules (IMPORT_*; 0 elsewhere: names are made unique, files imported again). */
  unsigned policy;
  char existing[256]; /* IMPORT_SAME_FILE: the trace that holds the file already (import_file returned 1) */
};

enum {
  IMPORT_SAME_FILE = 1u << 0, /* a file whose content is in the store already is not imported again */
  IMPORT_NAMES = 1u << 1,     /* a name another trace has fails the import (not NAME-2) ... */
  IMPORT_REPLACE = 1u << 2,   /* ... unless this says to replace that trace */
};

extern const importer *const importers[];
const importer *importer_find(const char *name);

/* Picks the importer for a file from its content: returns it, or NULL with a message. */
const importer *importer_detect(input *in, const char *path, char *err, size_t errlen);

/*
 * Imports path into s in one transaction. forced_format may be NULL (detect). Returns 0, or
 * -1 with a message naming the file and the place in err, the store untouched; with
 * IMPORT_SAME_FILE, 1 when the store holds the file already (ctx->existing names the trace).
 */
int import_file(import_ctx *ctx, const char *forced_format);

/* Helpers for importers. */
void import_error(import_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void import_warn(import_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A trace name from --name or the file's base name, made unique when derived (IMPORT_NAMES: taken
 * as it is, failing when another trace has it, or replacing that trace with IMPORT_REPLACE).
 * Caller frees; NULL with store_error set. */
char *import_trace_name(import_ctx *ctx, const char *suffix);
/* The same for a name the file itself gives. */
char *import_given_name(import_ctx *ctx, const char *name);
/*
 * Begins a trace whose allocations the importer leaves for the category rules: they see its
 * events as they are written (categorize_online), so the driver's pass over the stored trace
 * has nothing left to do. An importer that decides categories itself, or changes them after
 * writing, begins with store_writer_begin and leaves the rest to the pass.
 */
int import_begin_trace(import_ctx *ctx, const store_trace *meta, store_writer **w);
/* Finishes a trace (begun either way) and reports it. */
int import_finish_trace(import_ctx *ctx, store_writer *w, const char *name);
/* The value of --set key, or NULL. */
const char *import_param(const import_ctx *ctx, const char *key);

#endif
