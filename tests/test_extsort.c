/* test_extsort.c: the external merge sort: order, stability, spilling, re-reading. */
#include "engine/extsort.h"
#include "test.h"

int test_failures;

typedef struct rec {
  int64_t key;
  int64_t added; /* order of addition, to check stability */
  char pad[40];
} rec;

static int cmp_rec(const void *a, const void *b) {
  const rec *x = a, *y = b;
  return (x->key > y->key) - (x->key < y->key);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Sorts n records whose keys come from gen, in `memory` bytes, and checks the merged sequence twice. */
static void sort_and_check(size_t n, size_t memory, int64_t (*gen)(size_t i), int expect_spill) {
  extsort *s = extsort_new(sizeof(rec), memory, cmp_rec);
  for (size_t i = 0; i < n; i++) {
    rec r = {gen(i), (int64_t)i, {0}};
    CHECK_EQ(extsort_add(s, &r), 0);
  }
  CHECK_EQ(extsort_finish(s), 0);
  CHECK_EQ(extsort_count(s), n);
  if (expect_spill) CHECK(extsort_spilled_runs(s) > 1);
  else CHECK_EQ(extsort_spilled_runs(s), 0);
  for (int pass = 0; pass < 2; pass++) {
    CHECK_EQ(extsort_rewind(s), 0);
    const void *v;
    size_t got = 0;
    int64_t prev_key = INT64_MIN, prev_added = -1, sum = 0;
    int ordered = 1, stable = 1;
    while (extsort_next(s, &v) == 1) {
      const rec *r = v;
      if (r->key < prev_key) ordered = 0;
      if (r->key == prev_key && r->added < prev_added) stable = 0;
      prev_key = r->key;
      prev_added = r->added;
      sum += r->added;
      got++;
    }
    CHECK_EQ(got, n);
    CHECK(ordered);
    CHECK(stable);
    CHECK_EQ(sum, n ? (int64_t)n * (int64_t)(n - 1) / 2 : 0); /* every record exactly once */
  }
  extsort_free(s);
}

static int64_t random_key(size_t i) {
  (void)i;
  return (int64_t)(next_rand() % 1000); /* many ties */
}
static int64_t sorted_key(size_t i) { return (int64_t)i; }
static int64_t reversed_key(size_t i) { return -(int64_t)i; }
/* Sorted runs one after another, as Kineto writes its threads. */
static int64_t runs_key(size_t i) { return (int64_t)(i % 997) * 1000 + (int64_t)(i / 997); }

static void in_memory(void) {
  sort_and_check(0, 1 << 20, random_key, 0);
  sort_and_check(1, 1 << 20, random_key, 0);
  sort_and_check(5000, 1 << 20, random_key, 0);
  sort_and_check(5000, 1 << 20, sorted_key, 0);
  sort_and_check(5000, 1 << 20, reversed_key, 0);
}

static void spilled(void) {
  /* 64 records of 56 bytes fit the smallest buffer: 20,000 records make hundreds of runs. */
  sort_and_check(20000, 4096, random_key, 1);
  sort_and_check(20000, 4096, runs_key, 1);
  sort_and_check(100000, 1 << 16, random_key, 1);
  sort_and_check(100000, 1 << 16, reversed_key, 1);
}

int main(void) {
  RUN(in_memory);
  RUN(spilled);
  TEST_MAIN_END();
}
