/* test_fitset.c: the red-black tree additions and the best-fit index behind the torch model's pools, against brute force. */
#include "sim/fitset.h"
#include "test.h"

int test_failures;

typedef struct item {
  int64_t stream;
  uint64_t size, addr;
  RB_ENTRY(item) link;
  uint16_t cls;
  int in;
} item;

static int cmp_item(const item *a, const item *b) {
  if (a->stream != b->stream) return (uint64_t)a->stream < (uint64_t)b->stream ? -1 : 1;
  if (a->size != b->size) return a->size < b->size ? -1 : 1;
  return (a->addr > b->addr) - (a->addr < b->addr);
}

RB_HEAD(itree, item);
SIM_RB_GENERATE(itree, item, link, cmp_item)
SIM_FITSET_DEFINE(iset, item, link, cls, stream, size, addr)

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

#define N 3000

/* The reference: the smallest present item not less than (stream, size, 0), by brute force. */
static item *ref_lower_bound(item *all, int64_t stream, uint64_t size) {
  item key = {.stream = stream, .size = size, .addr = 0}, *best = NULL;
  for (int i = 0; i < N; i++)
    if (all[i].in && all[i].stream == stream && cmp_item(&all[i], &key) >= 0 && (!best || cmp_item(&all[i], best) < 0))
      best = &all[i];
  return best;
}

static void randomize(item *x) {
  static const int64_t streams[] = {0, 7, -3, 1000};
  x->stream = streams[next_rand() % 4];
  /* sizes crowd a few values (equal sizes happen a lot) and spread over many powers of two */
  x->size = next_rand() % 3 ? (1 + next_rand() % 8) * 512 : (next_rand() % (UINT64_C(1) << (10 + next_rand() % 30))) + 16;
  x->addr = next_rand() % 100000 * 512;
}

/* The tree as the models use it (RB_INSERT, RB_REMOVE, RB_NFIND as the lower bound), with what
 * internal/rbtree.h adds: the validity walk and substitution. */
static void rbtree_matches_reference(void) {
  item *all = calloc(N, sizeof *all);
  struct itree t = RB_INITIALIZER(&t);
  for (int step = 0; step < 60000; step++) {
    item *x = &all[next_rand() % N];
    if (x->in) {
      RB_REMOVE(itree, &t, x);
      x->in = 0;
    } else {
      randomize(x);
      if (RB_INSERT(itree, &t, x) == NULL) x->in = 1;
    }
    if (step % 997 == 0) CHECK(itree_RB_VALID(&t));
    item key = {.stream = 7, .size = next_rand() % 5000, .addr = 0};
    item *want = NULL;
    for (int i = 0; i < N; i++)
      if (all[i].in && cmp_item(&all[i], &key) >= 0 && (!want || cmp_item(&all[i], want) < 0)) want = &all[i];
    if (step % 50 == 0) CHECK(RB_NFIND(itree, &t, &key) == want);
  }
  /* in-order walk both ways, and substitute */
  size_t n = 0;
  for (item *x = RB_MIN(itree, &t), *prev = NULL; x; prev = x, x = RB_NEXT(itree, &t, x), n++)
    if (prev) CHECK(cmp_item(prev, x) < 0);
  size_t m = 0;
  for (item *x = RB_MAX(itree, &t); x; x = RB_PREV(itree, &t, x)) m++;
  CHECK_EQ(n, m);
  item *first = RB_MIN(itree, &t), twin = *first;
  itree_RB_SUBSTITUTE(&t, first, &twin);
  CHECK(RB_MIN(itree, &t) == &twin);
  CHECK(itree_RB_VALID(&t));
  /* the validity walk notices a broken order and a broken colouring */
  item *root = RB_ROOT(&t), *low = RB_MIN(itree, &t);
  uint64_t size = low->size;
  low->size = UINT64_MAX;
  CHECK(!itree_RB_VALID(&t));
  low->size = size;
  RB_COLOR(root, link) = RB_RED;
  CHECK(!itree_RB_VALID(&t));
  RB_COLOR(root, link) = RB_BLACK;
  CHECK(itree_RB_VALID(&t));
  free(all);
}

static void fitset_matches_reference(void) {
  item *all = calloc(N, sizeof *all);
  struct iset s;
  iset_init(&s);
  size_t count = 0;
  for (int step = 0; step < 60000; step++) {
    item *x = &all[next_rand() % N];
    int op = (int)(next_rand() % 10);
    if (x->in && op < 2) { /* change its key, keeping its place when it can */
      uint64_t size = x->size > 1024 ? x->size - 512 * (next_rand() % 2) : x->size + 512;
      uint64_t addr = x->addr + 512;
      item probe = *x;
      probe.size = size;
      probe.addr = addr;
      int clash = 0;
      for (int i = 0; i < N; i++)
        if (&all[i] != x && all[i].in && cmp_item(&all[i], &probe) == 0) clash = 1;
      if (!clash) iset_rekey(&s, x, size, addr);
    } else if (x->in && op < 3) { /* replace it with a copy of itself under another key */
      item *y = NULL;
      for (int i = 0; i < N && !y; i++)
        if (!all[i].in) y = &all[i];
      if (y) {
        *y = *x;
        y->in = 0;
        y->size = x->size + 512;
        int clash = 0;
        for (int i = 0; i < N; i++)
          if (all[i].in && &all[i] != x && cmp_item(&all[i], y) == 0) clash = 1;
        if (!clash) {
          y->in = 1;
          iset_replace(&s, x, y);
          x->in = 0;
        }
      }
    } else if (x->in) {
      iset_remove(&s, x);
      x->in = 0;
      count--;
    } else {
      randomize(x);
      if (iset_insert(&s, x) == 0) {
        x->in = 1;
        count++;
      }
    }
    if (step % 1999 == 0) CHECK(iset_check(&s));
    if (step % 20 == 0) {
      int64_t stream = step % 40 ? 0 : 1000;
      uint64_t size = next_rand() % 3 ? (1 + next_rand() % 9) * 512 : next_rand() % (UINT64_C(1) << 36);
      CHECK(iset_lower_bound(&s, stream, size) == ref_lower_bound(all, stream, size));
    }
  }
  CHECK(iset_check(&s));
  /* the whole set in (stream, size, address) order, streams compared unsigned */
  size_t n = 0;
  for (item *x = iset_first(&s), *prev = NULL; x; prev = x, x = iset_next(&s, x), n++)
    if (prev) CHECK(cmp_item(prev, x) < 0);
  size_t present = 0;
  for (int i = 0; i < N; i++) present += all[i].in;
  CHECK_EQ(n, present);
  CHECK_EQ(s.count, present);
  /* walking one stream backwards from its largest block */
  size_t back = 0, fwd = 0;
  for (item *x = iset_last_in_stream(&s, 7); x; x = iset_prev_in_stream(&s, x)) back++;
  for (item *x = iset_lower_bound(&s, 7, 0); x; x = iset_next_in_stream(&s, x)) fwd++;
  CHECK_EQ(back, fwd);
  CHECK(iset_lower_bound(&s, 12345, 0) == NULL); /* a stream it never saw */
  /* emptied (as a reset empties a pool), it answers as a new set does, and takes blocks again */
  iset_clear(&s);
  for (int i = 0; i < N; i++) all[i].in = 0;
  CHECK(iset_check(&s));
  CHECK_EQ(s.count, 0);
  CHECK(iset_first(&s) == NULL);
  CHECK(iset_lower_bound(&s, 7, 0) == NULL);
  CHECK(iset_last_in_stream(&s, 0) == NULL);
  all[0] = (item){.stream = 7, .size = 4096, .addr = 512};
  CHECK_EQ(iset_insert(&s, &all[0]), 0);
  CHECK(iset_lower_bound(&s, 7, 100) == &all[0]);
  CHECK(iset_first(&s) == &all[0]);
  CHECK(iset_check(&s));
  iset_release(&s);
  free(all);
}

static void classes_are_monotone(void) {
  unsigned last = 0;
  for (uint64_t v = 1; v < (UINT64_C(1) << 40); v += v / 7 + 1) {
    unsigned c = sim_fitset_class(v);
    CHECK(c >= last);
    CHECK(c < SIM_FITSET_CLASSES);
    last = c;
  }
  CHECK(sim_fitset_class(UINT64_MAX) < SIM_FITSET_CLASSES);
  CHECK(sim_fitset_class(1024) < sim_fitset_class(1024 + 64));
}

int main(void) {
  RUN(rbtree_matches_reference);
  RUN(fitset_matches_reference);
  RUN(classes_are_monotone);
  TEST_MAIN_END();
}
