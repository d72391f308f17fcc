/* hashmap.h: an open-addressing map from 64-bit keys to 64-bit values, for hot paths. */
#ifndef SIM_HASHMAP_H
#define SIM_HASHMAP_H

#include <stddef.h>
#include <stdint.h>

/*
 * Linear probing with backward-shift deletion (no tombstones), so lookups stay short however
 * many keys come and go. Any key is allowed, including UINT64_MAX, which marks empty slots and
 * is therefore kept aside. Values are returned by pointer and stay valid until the next insert
 * or delete.
 */
typedef struct sim_map_entry {
  uint64_t key, val;
} sim_map_entry;

typedef struct sim_map {
  sim_map_entry *slots;
  size_t cap;  /* power of two, or 0 */
  size_t len;  /* keys held, the aside key included */
  int has_max; /* UINT64_MAX is a key */
  uint64_t max_val;
} sim_map;

void sim_map_init(sim_map *m);
void sim_map_release(sim_map *m);
void sim_map_clear(sim_map *m);
/* The value of key, or NULL. */
uint64_t *sim_map_get(const sim_map *m, uint64_t key);
/* The value slot of key, inserting it (value 0) when absent; *existed says which. */
uint64_t *sim_map_put(sim_map *m, uint64_t key, int *existed);
/* Removes key; returns 1 and its value in *val (if val), or 0 when absent. */
int sim_map_del(sim_map *m, uint64_t key, uint64_t *val);

/* Removes the key whose value slot (from sim_map_get/put, with no change since) is val. */
void sim_map_del_slot(sim_map *m, uint64_t *val);

/* Iteration: for (size_t i = 0; sim_map_next(m, &i, &k, &v);) ... (no changes while iterating).
 * The keys come in the order of their slots, which is that of their homes: put one by one into
 * another map, they crowd its first slots while it is smaller than this one (each insert then
 * probes past all the keys before it). To copy a map, use sim_map_copy. */
int sim_map_next(const sim_map *m, size_t *iter, uint64_t *key, uint64_t *val);
/* dst (released first) becomes a copy of src, slot for slot: linear in src's slots. */
void sim_map_copy(sim_map *dst, const sim_map *src);

/* Allocation that never returns NULL: memplay stops with a message when memory runs out (xalloc.c). */
void *sim_xmalloc(size_t n);
void *sim_xcalloc(size_t n, size_t size);
void *sim_xrealloc(void *p, size_t n);
/* n bytes for a table the caller will write all of (free with free()): from 2 MiB up, aligned to
 * 2 MiB and, where the system has them, in huge pages, so that writing it takes a page fault per
 * 2 MiB instead of one per 4 KiB (each costs microseconds, more on a virtual machine); a smaller
 * table as sim_xmalloc gives it. */
void *sim_xmalloc_huge(size_t n);
/* Grows *arr (of *cap elements of elem bytes) to hold at least need elements. */
void sim_grow(void **arr, size_t *cap, size_t need, size_t elem);

#endif
