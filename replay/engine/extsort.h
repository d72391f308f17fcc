/* extsort.h: an external merge sort of fixed-size records in bounded memory (importers that must reorder). */
#ifndef REPLAY_EXTSORT_H
#define REPLAY_EXTSORT_H

#include <stddef.h>
#include <stdint.h>

/*
 * Records are added one at a time into a buffer of at most `memory` bytes. When the buffer is
 * full it is sorted (a natural merge sort, linear on input that is already in runs) and
 * written to a temporary file as one sorted run; at the end the runs (and the last buffer,
 * which stays in memory) are merged through a heap. Memory is the buffer plus one read
 * buffer per run, whatever the number of records; the temporary file is unlinked as soon as
 * it is created, so nothing is left behind. The order is total when cmp is (ties keep the
 * order records were added in, within a run).
 *
 * Usage: extsort_init, extsort_add..., extsort_finish, then extsort_rewind and extsort_next
 * until 0; the merged sequence can be read again after another extsort_rewind.
 */
typedef int (*extsort_cmp)(const void *a, const void *b);

typedef struct extsort extsort;

/* memory: bytes for the in-memory buffer (at least 64 records' worth is used). */
extsort *extsort_new(size_t rec_size, size_t memory, extsort_cmp cmp);
/* Copies rec in. 0, or -1 (a temporary file could not be written: extsort_error). */
int extsort_add(extsort *s, const void *rec);
/* No more records: sorts what is buffered and prepares the merge. 0 or -1. */
int extsort_finish(extsort *s);
/* Starts (again) at the smallest record. 0 or -1. */
int extsort_rewind(extsort *s);
/* *rec points at the next record in order (valid until the next call): 1, 0 at the end, -1. */
int extsort_next(extsort *s, const void **rec);
const char *extsort_error(const extsort *s);
uint64_t extsort_count(const extsort *s);
/* Sorted runs written to the temporary file (0 when everything fit in memory). */
size_t extsort_spilled_runs(const extsort *s);
void extsort_free(extsort *s);

#endif
