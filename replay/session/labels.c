/* labels.c: a store's strings and call-stack labels, each read from SQLite once and kept. */
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "sim/hashmap.h"
#include "store/store_runs.h"

/* The label store_stack_label gives a stack it cannot find: not kept (the stack may come later). */
#define LABELS_UNKNOWN_STACK "(unknown call stack)"

struct session_labels {
  store *s;
  replay_names from; /* the store's own names: what a miss reads */
  sim_map strings;   /* id -> index + 1 in texts */
  sim_map stacks;    /* stack id -> index + 1 in texts */
  char **texts;
  size_t ntexts, cap;
};

session_labels *session_labels_new(store *s) {
  session_labels *sl = sim_xcalloc(1, sizeof *sl);
  sl->s = s;
  sl->from = store_names(s);
  sim_map_init(&sl->strings);
  sim_map_init(&sl->stacks);
  return sl;
}

void session_labels_clear(session_labels *sl) {
  if (!sl) return;
  for (size_t i = 0; i < sl->ntexts; i++) free(sl->texts[i]);
  sl->ntexts = 0;
  sim_map_clear(&sl->strings);
  sim_map_clear(&sl->stacks);
}

void session_labels_free(session_labels *sl) {
  if (!sl) return;
  session_labels_clear(sl);
  free(sl->texts);
  sim_map_release(&sl->strings);
  sim_map_release(&sl->stacks);
  free(sl);
}

/* Keeps text (taken over) under id in map; returns it. */
static const char *labels_keep(session_labels *sl, sim_map *map, int64_t id, char *text) {
  sim_grow((void **)&sl->texts, &sl->cap, sl->ntexts + 1, sizeof *sl->texts);
  sl->texts[sl->ntexts++] = text;
  *sim_map_put(map, (uint64_t)id, NULL) = sl->ntexts;
  return text;
}

static const char *labels_string(void *ctx, int64_t id) {
  session_labels *sl = ctx;
  const uint64_t *at = sim_map_get(&sl->strings, (uint64_t)id);
  if (at) return sl->texts[*at - 1];
  const char *v = replay_name(&sl->from, id);
  return v ? labels_keep(sl, &sl->strings, id, strdup(v)) : NULL;
}

static char *labels_stack(void *ctx, int64_t stack) {
  session_labels *sl = ctx;
  const uint64_t *at = sim_map_get(&sl->stacks, (uint64_t)stack);
  if (at) return strdup(sl->texts[*at - 1]);
  char *label = replay_stack_label(&sl->from, stack);
  if (!label || !strcmp(label, LABELS_UNKNOWN_STACK)) return label;
  return strdup(labels_keep(sl, &sl->stacks, stack, label));
}

replay_names session_labels_names(session_labels *sl) {
  if (!sl || !sl->s) return (replay_names){0};
  return (replay_names){.ctx = sl, .string = labels_string, .stack_label = labels_stack};
}
