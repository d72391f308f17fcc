/* test_hashmap.c: the open-addressing map against a plain reference, through many inserts and deletes. */
#include "sim/hashmap.h"
#include "sim/slab.h"
#include "test.h"

int test_failures;

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void random_ops_match_reference(void) {
  enum { N = 4096 };
  static uint64_t keys[N], vals[N];
  static int present[N];
  sim_map m;
  sim_map_init(&m);
  for (int i = 0; i < N; i++) keys[i] = (i % 7 == 0) ? (uint64_t)i << 21 : next(); /* aligned and random keys */
  keys[5] = UINT64_MAX; /* the key kept aside */
  keys[6] = 3; /* small, and distinct from the aligned keys (multiples of 2^21) */
  size_t live = 0;
  for (int round = 0; round < 200000; round++) {
    int i = (int)(next() % N);
    if (next() % 3) {
      int existed;
      uint64_t *v = sim_map_put(&m, keys[i], &existed);
      CHECK_EQ(existed, present[i]);
      if (!present[i]) live++;
      *v = vals[i] = next();
      present[i] = 1;
    } else if (round % 2) {
      uint64_t *slot = sim_map_get(&m, keys[i]);
      CHECK_EQ(slot != NULL, present[i]);
      if (slot) {
        CHECK_EQ(*slot, vals[i]);
        sim_map_del_slot(&m, slot);
        live--;
      }
      present[i] = 0;
    } else {
      uint64_t v = 0;
      int had = sim_map_del(&m, keys[i], &v);
      CHECK_EQ(had, present[i]);
      if (had) {
        CHECK_EQ(v, vals[i]);
        live--;
      }
      present[i] = 0;
    }
  }
  CHECK_EQ(m.len, live);
  for (int i = 0; i < N; i++) {
    uint64_t *v = sim_map_get(&m, keys[i]);
    CHECK_EQ(v != NULL, present[i]);
    if (v && present[i]) CHECK_EQ(*v, vals[i]);
  }
  size_t it = 0, seen = 0;
  uint64_t k, v;
  while (sim_map_next(&m, &it, &k, &v)) seen++;
  CHECK_EQ(seen, live);
  sim_map_release(&m);
}

/* A copy holds every key with its value, the aside key too, and changes apart from the original. */
static void copy_is_whole_and_apart(void) {
  sim_map a, b, empty;
  sim_map_init(&a);
  sim_map_init(&b);
  sim_map_init(&empty);
  enum { N = 50000 };
  for (uint64_t i = 0; i < N; i++) *sim_map_put(&a, i * 7919, NULL) = i + 1;
  *sim_map_put(&a, UINT64_MAX, NULL) = 99;
  *sim_map_put(&b, 123, NULL) = 5; /* what b held goes */
  sim_map_copy(&b, &a);
  CHECK_EQ(b.len, a.len);
  CHECK(sim_map_get(&b, 123) == NULL);
  for (uint64_t i = 0; i < N; i++) {
    uint64_t *v = sim_map_get(&b, i * 7919);
    CHECK(v != NULL && *v == i + 1);
  }
  CHECK(sim_map_get(&b, UINT64_MAX) != NULL && *sim_map_get(&b, UINT64_MAX) == 99);
  *sim_map_get(&b, 7919) = 0;
  CHECK(sim_map_del(&b, 0, NULL));
  CHECK_EQ(*sim_map_get(&a, 7919), 2);
  CHECK(sim_map_get(&a, 0) != NULL);
  CHECK_EQ(a.len, N + 1);
  sim_map_copy(&b, &empty);
  CHECK_EQ(b.len, 0);
  CHECK(sim_map_get(&b, 7919) == NULL);
  *sim_map_put(&b, 1, NULL) = 1; /* an empty copy takes keys */
  CHECK_EQ(*sim_map_get(&b, 1), 1);
  sim_map_release(&a);
  sim_map_release(&b);
}

static void slab_reuses_freed_indices(void) {
  sim_slab s;
  sim_slab_init(&s, sizeof(uint64_t) * 2);
  uint32_t a = sim_slab_new(&s), b = sim_slab_new(&s);
  CHECK_EQ(a, 1);
  CHECK_EQ(b, 2);
  *(uint64_t *)sim_slab_at(&s, b) = 42;
  sim_slab_free(&s, a);
  CHECK_EQ(sim_slab_new(&s), a);
  CHECK_EQ(*(uint64_t *)sim_slab_at(&s, b), 42);
  CHECK_EQ(s.live, 2);
  sim_slab_release(&s);
}

int main(void) {
  RUN(random_ops_match_reference);
  RUN(copy_is_whole_and_apart);
  RUN(slab_reuses_freed_indices);
  TEST_MAIN_END();
}
