/* frames_label.c: a stored call stack as the frames a user is shown in hover details. */
#include <stdlib.h>
#include <string.h>

#include "io/frames.h"
#include "store/store.h"
#include "plot.h"

#define FRAMES_SHOWN 12

typedef struct frames_buf {
  char *text;
  size_t len, cap;
  int n;
} frames_buf;

static int add_frame(void *arg, const store_frame *f) {
  frames_buf *b = arg;
  if (frames_hidden(f->name, f->file)) return 0;
  char line[600];
  const char *file = f->file ? f->file : "";
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  if (*base && f->line) snprintf(line, sizeof line, "%s:%lld %s\n", base, (long long)f->line, f->name ? f->name : "?");
  else if (*base && strcmp(base, "??")) snprintf(line, sizeof line, "%s %s\n", base, f->name ? f->name : "?");
  else snprintf(line, sizeof line, "%s\n", f->name ? f->name : "?");
  size_t n = strlen(line);
  if (b->len + n + 1 > b->cap) {
    b->cap = (b->len + n + 1) * 2;
    char *t = realloc(b->text, b->cap);
    if (!t) return 1;
    b->text = t;
  }
  memcpy(b->text + b->len, line, n + 1);
  b->len += n;
  return ++b->n >= FRAMES_SHOWN;
}

char *plot_store_frames(void *store_arg, int64_t stack) {
  if (!store_arg || stack <= 0) return NULL;
  frames_buf b = {0};
  store_stack_frames(store_arg, stack, add_frame, &b);
  if (b.len && b.text[b.len - 1] == '\n') b.text[--b.len] = 0;
  return b.text;
}
