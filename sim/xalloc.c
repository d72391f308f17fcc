/* xalloc.c: allocation that never returns NULL, and large tables in huge pages. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "hashmap.h"

#define HUGE_PAGE ((size_t)2 << 20)

static void *checked(void *p) {
  if (!p) {
    fputs("memplay: out of memory\n", stderr);
    abort();
  }
  return p;
}

/* Asks the kernel to back the whole 2 MiB windows inside p[0 .. n) with huge pages; where the
 * advice is not taken the pages stay small. Only for blocks of their own, aligned, written through:
 * advising the blocks that realloc grows in the heap made an array grown to 93 MB slower, with more
 * faults, not fewer (a trial), so sim_xmalloc and sim_grow leave it alone. */
static void *advise(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
  uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
  uintptr_t hi = ((uintptr_t)p + n) & ~(uintptr_t)(HUGE_PAGE - 1);
  if (hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#endif
  return p;
}

void *sim_xmalloc(size_t n) { return checked(malloc(n ? n : 1)); }

void *sim_xcalloc(size_t n, size_t size) { return checked(calloc(n ? n : 1, size ? size : 1)); }

void *sim_xrealloc(void *p, size_t n) { return checked(realloc(p, n ? n : 1)); }

void *sim_xmalloc_huge(size_t n) {
  if (n < HUGE_PAGE) return sim_xmalloc(n); /* a huge page would stand mostly empty */
  size_t whole = (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
  void *p = aligned_alloc(HUGE_PAGE, whole);
  return p ? advise(p, whole) : sim_xmalloc(n);
}

void sim_grow(void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return;
  size_t n = *cap ? *cap : 16;
  while (n < need) n *= 2;
  *arr = sim_xrealloc(*arr, n * elem);
  *cap = n;
}
