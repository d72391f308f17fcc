/* store_flush.c: a large import's pages handed to the disk while it runs, not all at its commit's fsync. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"

/*
 * An import writes its pages into the write-ahead log; its commit makes them durable there
 * (fsync), copies them into the database file and makes that durable too (fsync). Left alone, the
 * kernel keeps almost all of those pages in its cache until the fsyncs, and the commit then waits
 * for the disk to take them all at once. Instead memplay asks the kernel to start writing them out
 * (Linux's sync_file_range with SYNC_FILE_RANGE_WRITE, which starts the writes and waits for
 * nothing): the log after each chunk the writer thread stores, and both files every few
 * milliseconds while the commit copies the log into the database. The disk then works while the
 * import parses and copies, and the fsyncs find little left to do. The fsyncs are SQLite's as
 * before, so durability is unchanged; where the call is missing or fails, nothing changes.
 */

int store_flush_open(const store *s, const char *suffix) {
#ifdef SYNC_FILE_RANGE_WRITE
  size_t n = strlen(s->path) + strlen(suffix) + 1;
  char *p = sim_xmalloc(n);
  snprintf(p, n, "%s%s", s->path, suffix);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  free(p);
  return fd;
#else
  (void)s;
  (void)suffix;
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

/* ---- while a commit runs ---------------------------------------------------------------------- */

#define FLUSH_PERIOD_NS 5000000 /* 5 ms: a few MB of copied pages at a time */

static void *flusher_main(void *arg) {
  store_flusher *f = arg;
  pthread_mutex_lock(&f->lock);
  while (!f->stop) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += FLUSH_PERIOD_NS;
    if (t.tv_nsec >= 1000000000) {
      t.tv_sec++;
      t.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&f->cond, &f->lock, &t);
    if (f->stop) break;
    pthread_mutex_unlock(&f->lock);
    store_flush_start(f->db_fd);
    store_flush_start(f->wal_fd);
    pthread_mutex_lock(&f->lock);
  }
  pthread_mutex_unlock(&f->lock);
  return NULL;
}

int store_flusher_start(store_flusher *f, const store *s) {
  memset(f, 0, sizeof *f);
  f->db_fd = store_flush_open(s, "");
  f->wal_fd = store_flush_open(s, "-wal");
  if (f->db_fd < 0 && f->wal_fd < 0) return -1;
  pthread_mutex_init(&f->lock, NULL);
  pthread_cond_init(&f->cond, NULL);
  if (pthread_create(&f->thread, NULL, flusher_main, f)) {
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->cond);
    store_flush_close(f->db_fd);
    store_flush_close(f->wal_fd);
    return -1;
  }
  return 0;
}

void store_flusher_stop(store_flusher *f) {
  pthread_mutex_lock(&f->lock);
  f->stop = 1;
  pthread_cond_signal(&f->cond);
  pthread_mutex_unlock(&f->lock);
  pthread_join(f->thread, NULL);
  pthread_mutex_destroy(&f->lock);
  pthread_cond_destroy(&f->cond);
  store_flush_close(f->db_fd);
  store_flush_close(f->wal_fd);
}
