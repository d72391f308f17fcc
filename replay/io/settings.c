/* settings.c: recorded allocator settings, from a JSON object to the key/value options models read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "jsonscan.h"
#include "settings.h"
#include "sim/hashmap.h"

#define SETTINGS_MAX_DEPTH 32

typedef struct settings_buf {
  char *p;
  size_t n, cap;
} settings_buf;

static void buf_put(settings_buf *b, const char *s) {
  size_t len = strlen(s);
  if (!len) return; /* an empty key or string: nothing to add (the buffer may not exist yet) */
  sim_grow((void **)&b->p, &b->cap, b->n + len, 1);
  memcpy(b->p + b->n, s, len);
  b->n += len;
}

/* Ends the current string with a NUL. */
static void buf_end(settings_buf *b) {
  sim_grow((void **)&b->p, &b->cap, b->n + 1, 1);
  b->p[b->n++] = 0;
}

/* Writes v as text, as settings.h describes. */
static void flatten(settings_buf *b, yajl_val v, int depth) {
  if (depth >= SETTINGS_MAX_DEPTH) {
    buf_put(b, "...");
    return;
  }
  switch (v->type) {
  case yajl_t_string: buf_put(b, v->u.string); break;
  case yajl_t_number: buf_put(b, v->u.number.r); break;
  case yajl_t_true: buf_put(b, "True"); break;
  case yajl_t_false: buf_put(b, "False"); break;
  case yajl_t_object:
    buf_put(b, "[");
    for (size_t i = 0; i < v->u.object.len; i++) {
      if (i) buf_put(b, ",");
      buf_put(b, v->u.object.keys[i]);
      buf_put(b, ":");
      flatten(b, v->u.object.values[i], depth + 1);
    }
    buf_put(b, "]");
    break;
  case yajl_t_array:
    buf_put(b, "[");
    for (size_t i = 0; i < v->u.array.len; i++) {
      if (i) buf_put(b, ",");
      flatten(b, v->u.array.values[i], depth + 1);
    }
    buf_put(b, "]");
    break;
  default: break; /* null: no text */
  }
}

int settings_init(settings *s, const char *json) {
  memset(s, 0, sizeof *s);
  if (!json || !*json) return 0;
  char perr[256];
  yajl_val root = jsonscan_tree(json, perr, sizeof perr);
  if (!root || !YAJL_IS_OBJECT(root)) {
    yajl_tree_free(root);
    if (!root && !strncmp(perr, "nested", 6)) snprintf(s->error, sizeof s->error, "the recorded allocator settings are %.56s", perr);
    else snprintf(s->error, sizeof s->error, "the recorded allocator settings are not a JSON object");
    s->recorded.error = s->error;
    return -1;
  }
  size_t n = root->u.object.len;
  size_t *at = sim_xmalloc(2 * (n ? n : 1) * sizeof *at); /* offsets of each key and value */
  settings_buf b = {NULL, 0, 0};
  for (size_t i = 0; i < n; i++) {
    at[2 * i] = b.n;
    buf_put(&b, root->u.object.keys[i]);
    buf_end(&b);
    at[2 * i + 1] = b.n;
    flatten(&b, root->u.object.values[i], 0);
    buf_end(&b);
  }
  yajl_tree_free(root);
  s->text = b.p;
  s->opts = sim_xmalloc((n ? n : 1) * sizeof *s->opts);
  for (size_t i = 0; i < n; i++) s->opts[i] = (sim_option){s->text + at[2 * i], s->text + at[2 * i + 1]};
  free(at);
  s->recorded.opts = s->opts;
  s->recorded.nopts = n;
  return 0;
}

void settings_release(settings *s) {
  free(s->opts);
  free(s->text);
  memset(s, 0, sizeof *s);
}
