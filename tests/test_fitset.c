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

/* The smallest item of all[0..n) in the set not less than (stream, size, 0), by brute force. */
static item *brute_lower_bound(item *all, int n, int64_t stream, uint64_t size) {
  item key = {.stream = stream, .size = size, .addr = 0}, *best = NULL;
  for (int i = 0; i < n; i++)
    if (all[i].in && all[i].stream == stream && cmp_item(&all[i], &key) >= 0 && (!best || cmp_item(&all[i], best) < 0))
      best = &all[i];
  return best;
}

/* The set against brute force after a change to one crowded class: its order both ways, lower
 * bounds inside and around it, its count. */
static void crowded_class_agrees(struct iset *s, item *all, int n, size_t present) {
  CHECK(iset_check(s));
  CHECK_EQ(s->count, present);
  size_t fwd = 0, back = 0;
  for (item *x = iset_first(s), *prev = NULL; x; prev = x, x = iset_next(s, x), fwd++)
    if (prev) CHECK(cmp_item(prev, x) < 0);
  for (item *x = iset_last_in_stream(s, 7); x; x = iset_prev_in_stream(s, x)) back++;
  CHECK_EQ(fwd, present);
  CHECK_EQ(back, present);
  for (int k = 0; k < 4; k++) {
    uint64_t size = 4000 + next_rand() % 400;
    CHECK(iset_lower_bound(s, 7, size) == brute_lower_bound(all, n, 7, size));
  }
}

/* A class holds its blocks in a list while it holds few and in a tree while it holds many: one
 * class filled past SIM_FITSET_TREE_AT, changed in its tree form, emptied below SIM_FITSET_LIST_AT,
 * agrees with brute force at every step, and takes the form its count says (a tree between the two
 * thresholds on the way down, a list on the way up). */
static void crowded_class_changes_form(void) {
  enum { M = 3 * SIM_FITSET_TREE_AT };
  item *all = calloc(M, sizeof *all);
  struct iset s;
  iset_init(&s);
  const unsigned c = sim_fitset_class(4096);
  size_t present = 0;
  for (int i = 0; i < M; i++) { /* sizes 4096..4351 share one class; many equal sizes */
    all[i] = (item){.stream = 7, .size = 4096 + 64 * (next_rand() % 4), .addr = (next_rand() % 1000000) * 512};
    if (iset_insert(&s, &all[i]) == 0) all[i].in = 1, present++;
    CHECK_EQ(sim_fitset_class(all[i].size), c);
    crowded_class_agrees(&s, all, M, present);
    CHECK_EQ(RB_EMPTY(&s.s[0]->cls[c].tree), present <= SIM_FITSET_TREE_AT);
  }
  item twin = *s.s[0]->cls[c].last; /* refused in the tree form too */
  CHECK_EQ(iset_insert(&s, &twin), -1);
  crowded_class_agrees(&s, all, M, present);
  /* in the tree form: keys changed within the class, and blocks replaced by copies */
  for (int i = 0; i < M; i += 3) {
    if (!all[i].in) continue;
    item probe = all[i];
    probe.addr += 512 * (1 + next_rand() % 3);
    int clash = 0;
    for (int j = 0; j < M; j++)
      if (all[j].in && cmp_item(&all[j], &probe) == 0) clash = 1;
    if (!clash) iset_rekey(&s, &all[i], probe.size, probe.addr);
    crowded_class_agrees(&s, all, M, present);
  }
  item spare = all[1];
  if (all[1].in) { /* a copy at an address no block has (all are multiples of 512) takes its place */
    spare.addr += 256;
    spare.in = 1;
    iset_replace(&s, &all[1], &spare);
    all[1].in = 0;
    CHECK(iset_check(&s));
    iset_replace(&s, &spare, &all[1]); /* and back */
    all[1].in = 1;
    crowded_class_agrees(&s, all, M, present);
  }
  /* emptied in a random order: a tree until fewer than SIM_FITSET_LIST_AT are left */
  int order[M];
  for (int i = 0; i < M; i++) order[i] = i;
  for (int i = M - 1; i > 0; i--) {
    int j = (int)(next_rand() % (uint64_t)(i + 1)), t = order[i];
    order[i] = order[j], order[j] = t;
  }
  for (int k = 0; k < M; k++) {
    item *x = &all[order[k]];
    if (!x->in) continue;
    iset_remove(&s, x);
    x->in = 0;
    present--;
    crowded_class_agrees(&s, all, M, present);
    CHECK_EQ(RB_EMPTY(&s.s[0]->cls[c].tree), present < SIM_FITSET_LIST_AT);
  }
  CHECK(!(s.s[0]->sl_map[c / SIM_FITSET_SL] >> (c % SIM_FITSET_SL) & 1)); /* the emptied class is out of the bitmap */
  /* filled again up to the threshold: still a list */
  for (int i = 0; i < SIM_FITSET_TREE_AT; i++) {
    all[i].addr = (uint64_t)i * 4096;
    if (iset_insert(&s, &all[i]) == 0) all[i].in = 1, present++;
  }
  crowded_class_agrees(&s, all, M, present);
  CHECK_EQ(present, SIM_FITSET_TREE_AT);
  CHECK(RB_EMPTY(&s.s[0]->cls[c].tree));
  /* a block equal to one there (its last, its first, one between) is refused, the set unchanged */
  item twins[3] = {*s.s[0]->cls[c].last, *s.s[0]->cls[c].first, all[SIM_FITSET_TREE_AT / 2]};
  for (int k = 0; k < 3; k++) {
    CHECK_EQ(iset_insert(&s, &twins[k]), -1);
    crowded_class_agrees(&s, all, M, present);
  }
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
  RUN(crowded_class_changes_form);
  RUN(classes_are_monotone);
  TEST_MAIN_END();
}
