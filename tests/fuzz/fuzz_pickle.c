/* fuzz_pickle.c: libFuzzer harness for the unpickler: whole-buffer and streamed reads, with and without a consumer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/pickle.h"

/*
 * Each input is read three ways: from memory with no consumer; from memory with a consumer
 * that behaves like the snapshot importer (takes the items of lists that start with a dict,
 * replaces frames lists in the memo by tokens, forgets other parts); and as a stream that
 * hands over a few bytes at a time (sizes taken from the input), to cross every buffer
 * boundary. Every value of the result is then visited.
 */

typedef struct chunks {
  const uint8_t *data;
  size_t n, pos;
} chunks;

static ssize_t read_chunks(void *arg, void *buf, size_t n) {
  chunks *c = arg;
  if (c->pos == c->n) return 0;
  size_t want = 1 + (c->data[c->pos] % 13);
  if (want > n) want = n;
  if (want > c->n - c->pos) want = c->n - c->pos;
  memcpy(buf, c->data + c->pos, want);
  c->pos += want;
  return (ssize_t)want;
}

static int consumer(void *arg, pickle *p, pk_obj *list, uint64_t index, pk_val item) {
  (void)arg;
  if (list->aux == 2) return PICKLE_KEEP_ALL;
  if (list->aux == 0) {
    if (index != 0 || item.type != PK_DICT) {
      list->aux = 2;
      return PICKLE_KEEP_ALL;
    }
    list->aux = 1;
  }
  if (item.type != PK_DICT) return pickle_fail(p, "not a dict");
  const pk_val *f = pk_dict_get(item.u.o, "frames");
  if (f && f->type == PK_LIST) pickle_memo_replace(p, *f, (int64_t)(f->u.o->len + 1));
  const pk_val *b = pk_dict_get(item.u.o, "blocks");
  if (b && b->type == PK_LIST) {
    for (size_t i = 0; i < b->u.o->len; i++) pickle_memo_forget(p, b->u.o->items[i]);
    pickle_memo_forget(p, *b);
  }
  if (pk_dict_get(item.u.o, "keep")) return PICKLE_KEEP;
  return PICKLE_TAKE;
}

/* Visits every value once (cycles and shared values are cut by the depth and count limits). */
static uint64_t walk(pk_val root) {
  pk_val *todo = malloc(4096 * sizeof *todo);
  size_t n = 0, visited = 0;
  uint64_t sum = 0;
  todo[n++] = root;
  while (n && visited < 100000) {
    pk_val v = todo[--n];
    visited++;
    sum += v.type;
    if (!pk_is_heap(v)) continue;
    pk_obj *o = v.u.o;
    sum += o->len + o->taken + (uint64_t)o->aux;
    if (o->type == PK_STR || o->type == PK_BYTES || o->type == PK_BIGINT) {
      for (size_t i = 0; i < o->len; i++) sum += (unsigned char)o->data[i];
      continue;
    }
    size_t items = o->type == PK_DICT ? 2 * o->len : o->len;
    for (size_t i = 0; i < items && n < 4096; i++) todo[n++] = o->items[i];
    if (o->type == PK_DICT) {
      const pk_val *a = pk_dict_get(o, "action");
      if (a) sum += pk_str_eq(*a, "alloc");
    }
  }
  free(todo);
  return sum;
}

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pickle_limits lim = {.max_memory = 64u << 20};
  for (int mode = 0; mode < 3; mode++) {
    chunks c = {data, size, 0};
    pickle *p = mode < 2 ? pickle_new_mem(data, size, &lim) : pickle_new(read_chunks, &c, &lim);
    if (!p) return 0;
    if (mode == 2) pickle_set_size(p, size);
    if (mode) pickle_set_consumer(p, consumer, NULL);
    pk_val v;
    if (pickle_load(p, &v) == 0) sink += walk(v);
    else sink += strlen(pickle_error(p)) + pickle_offset(p);
    pickle_free(p);
  }
  return 0;
}
