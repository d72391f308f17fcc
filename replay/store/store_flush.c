/* store_flush.c: a large import's log handed to the disk while it runs, not all at its commit's fsync. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store_int.h"

/*
 * An import writes its pages into the write-ahead log; its commit makes them durable there
 * (fsync) before it copies them into the database file. Left alone, the kernel keeps almost all of
 * the log in its cache until that fsync, and the commit then waits for the disk to take it all at
 * once. Instead the writer thread asks the kernel to start writing the log out after each chunk it
 * stores (Linux's sync_file_range with SYNC_FILE_RANGE_WRITE, which starts the writes and waits
 * for nothing): the disk works while the import parses, and the fsync finds little left to do.
 * The fsyncs are SQLite's as before, so durability is unchanged; where the call is missing or
 * fails, nothing changes.
 *
 * Only the log is opened so: SQLite takes no locks on it. The database file is left alone: closing
 * any descriptor of a file drops every POSIX lock the process holds on it, SQLite's included.
 */

int store_flush_open_wal(const store *s) {
#ifdef SYNC_FILE_RANGE_WRITE
  size_t n = strlen(s->path) + 5;
  char *p = sim_xmalloc(n);
  snprintf(p, n, "%s-wal", s->path);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  free(p);
  return fd;
#else
  (void)s;
  return -1;
#endif
}

void store_flush_start(int fd) {
#ifdef SYNC_FILE_RANGE_WRITE
  if (fd >= 0) sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#else
  (void)fd;
#endif
}

void store_flush_close(int fd) {
  if (fd >= 0) close(fd);
}
