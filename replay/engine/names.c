/* names.c: a cache in front of a names table: each string and call-stack label asked of it once. */
#include <stdlib.h>
#include <string.h>

#include "sim/hashmap.h"
#include "names.h"

/* One kind of answer (strings, or stack labels): id -> index + 1 into the answers, which may be
 * NULL (the inner table knows none). */
typedef struct answers {
  sim_map idx;
  char **text;
  size_t n, cap;
} answers;

struct replay_names_cache {
  replay_names inner;
  answers strings, labels;
};

static char *copy(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  return memcpy(sim_xmalloc(n), s, n);
}

static void answers_clear(answers *a) {
  for (size_t i = 0; i < a->n; i++) free(a->text[i]);
  a->n = 0;
  sim_map_clear(&a->idx);
}

/* The answer kept for id, or NULL with *slot set where a new one goes (index + 1 of it). */
static char **answers_find(answers *a, int64_t id, uint64_t **slot) {
  int existed;
  *slot = sim_map_put(&a->idx, (uint64_t)id, &existed);
  return existed ? &a->text[*(*slot) - 1] : NULL;
}

static char *answers_keep(answers *a, uint64_t *slot, char *text) {
  sim_grow((void **)&a->text, &a->cap, a->n + 1, sizeof *a->text);
  a->text[a->n++] = text;
  *slot = a->n;
  return text;
}

static const char *cached_string(void *ctx, int64_t id) {
  replay_names_cache *c = ctx;
  uint64_t *slot;
  char **kept = answers_find(&c->strings, id, &slot);
  if (kept) return *kept;
  const char *s = replay_name(&c->inner, id);
  return answers_keep(&c->strings, slot, copy(s));
}

static char *cached_stack_label(void *ctx, int64_t stack) {
  replay_names_cache *c = ctx;
  uint64_t *slot;
  char **kept = answers_find(&c->labels, stack, &slot);
  const char *s = kept ? *kept : answers_keep(&c->labels, slot, replay_stack_label(&c->inner, stack));
  return copy(s);
}

replay_names_cache *replay_names_cache_new(const replay_names *inner) {
  replay_names_cache *c = sim_xcalloc(1, sizeof *c);
  if (inner) c->inner = *inner;
  sim_map_init(&c->strings.idx);
  sim_map_init(&c->labels.idx);
  return c;
}

replay_names replay_names_cache_table(replay_names_cache *c) {
  return (replay_names){.ctx = c,
                        .string = c->inner.string ? cached_string : NULL,
                        .stack_label = c->inner.stack_label ? cached_stack_label : NULL};
}

void replay_names_cache_clear(replay_names_cache *c) {
  answers_clear(&c->strings);
  answers_clear(&c->labels);
}

void replay_names_cache_free(replay_names_cache *c) {
  if (!c) return;
  replay_names_cache_clear(c);
  free(c->strings.text);
  free(c->labels.text);
  sim_map_release(&c->strings.idx);
  sim_map_release(&c->labels.idx);
  free(c);
}
