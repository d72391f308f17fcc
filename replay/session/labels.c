/* labels.c: a store's strings and call-stack labels, each read from SQLite once and kept. */
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "sim/hashmap.h"
#include "store/store_runs.h"

/* The label store_stack_label gives a stack it cannot find: not kept (the stack may come later). */
#define LABELS_UNKNOWN_STACK "(unknown call stack)"

/* A call stack's frames, innermost first (the strings owned). */
typedef struct labels_frames {
  store_frame *frames;
  size_t n;
} labels_frames;

struct session_labels {
  store *s;
  replay_names from; /* the store's own names: what a miss reads */
  sim_map strings;   /* id -> index + 1 in texts */
  sim_map stacks;    /* stack id -> index + 1 in texts */
  char **texts;
  size_t ntexts, cap;
  sim_map frames;    /* stack id -> index + 1 in framesets */
  labels_frames *framesets;
  size_t nframesets, fcap;
};

session_labels *session_labels_new(store *s) {
  session_labels *sl = sim_xcalloc(1, sizeof *sl);
  sl->s = s;
  sl->from = store_names(s);
  sim_map_init(&sl->strings);
  sim_map_init(&sl->stacks);
  sim_map_init(&sl->frames);
  return sl;
}

void session_labels_clear(session_labels *sl) {
  if (!sl) return;
  for (size_t i = 0; i < sl->ntexts; i++) free(sl->texts[i]);
  sl->ntexts = 0;
  for (size_t i = 0; i < sl->nframesets; i++) {
    for (size_t k = 0; k < sl->framesets[i].n; k++) {
      free((char *)sl->framesets[i].frames[k].name);
      free((char *)sl->framesets[i].frames[k].file);
    }
    free(sl->framesets[i].frames);
  }
  sl->nframesets = 0;
  sim_map_clear(&sl->strings);
  sim_map_clear(&sl->stacks);
  sim_map_clear(&sl->frames);
}

void session_labels_free(session_labels *sl) {
  if (!sl) return;
  session_labels_clear(sl);
  free(sl->texts);
  free(sl->framesets);
  sim_map_release(&sl->strings);
  sim_map_release(&sl->stacks);
  sim_map_release(&sl->frames);
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

static int labels_collect(void *arg, const store_frame *f) {
  labels_frames *st = arg;
  st->frames = sim_xrealloc(st->frames, (st->n + 1) * sizeof *st->frames);
  st->frames[st->n++] = (store_frame){f->name ? strdup(f->name) : NULL, f->file ? strdup(f->file) : NULL, f->line};
  return 0;
}

int session_labels_frames(session_labels *sl, int64_t stack, int (*fn)(void *arg, const store_frame *f), void *arg) {
  if (!sl || !sl->s) return 0;
  uint64_t *at = sim_map_get(&sl->frames, (uint64_t)stack);
  if (!at) {
    labels_frames st = {0};
    if (store_stack_frames(sl->s, stack, labels_collect, &st)) {
      for (size_t k = 0; k < st.n; k++) free((char *)st.frames[k].name), free((char *)st.frames[k].file);
      free(st.frames);
      return -1;
    }
    if (!st.n) return 0; /* unknown: not kept */
    sim_grow((void **)&sl->framesets, &sl->fcap, sl->nframesets + 1, sizeof *sl->framesets);
    sl->framesets[sl->nframesets++] = st;
    at = sim_map_put(&sl->frames, (uint64_t)stack, NULL);
    *at = sl->nframesets;
  }
  const labels_frames *st = &sl->framesets[*at - 1];
  for (size_t k = 0; k < st->n; k++)
    if (fn(arg, &st->frames[k])) break;
  return 0;
}
