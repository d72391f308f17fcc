/* exporter.h: writing a stored trace out in another format. */
#ifndef REPLAY_EXPORTER_H
#define REPLAY_EXPORTER_H

#include <stdio.h>

#include "store/store.h"

/*
 * Adding a format: write replay/export_<name>.c with an `exporter`, add it to the list in
 * exporter.c, and document it in docs/formats.md.
 */
typedef struct exporter {
  const char *name;
  const char *summary;
  int (*write)(store *s, const store_trace *t, FILE *out, char *err, size_t errlen);
} exporter;

extern const exporter *const exporters[];
const exporter *exporter_find(const char *name);

#endif
