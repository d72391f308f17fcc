/* exporter.c: the registry of export formats. */
#include <string.h>

#include "exporter.h"

extern const exporter export_jsonl;

const exporter *const exporters[] = {
  &export_jsonl,
  NULL,
};

const exporter *exporter_find(const char *name) {
  for (size_t i = 0; exporters[i]; i++)
    if (!strcmp(exporters[i]->name, name)) return exporters[i];
  return NULL;
}
