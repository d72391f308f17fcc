/* store_flush.c: a large import's pages handed to the disk while it runs and while its commit copies
 * them, not all at the commit's fsyncs. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store_int.h"

/*
 * An import writes its pages into the write-ahead log; its commit makes them durable there
 * (fsync), copies them into the database file and makes that durable (fsync again). Left alone,
 * the kernel keeps almost all of both in its cache until each fsync, and the commit then waits
 * for the disk to take each file at once. Instead a thread of its own runs beside the import's
 * writer thread and beside the commit, and every two milliseconds asks the kernel to start
 * writing out the log and the database file (Linux's sync_file_range with SYNC_FILE_RANGE_WRITE,
 * which starts the writes and waits for nothing): the disk works while the import parses and
 * while the commit copies, and the fsyncs find little left to do. Started writes are not enough
 * where the disk is a virtual machine's: it takes them into the host's cache at once and makes
 * them durable only at an fsync, which then waits for all of them. So the thread also makes the
 * files durable (fdatasync) every few milliseconds: every 20 while the chunks are written, every 5
 * while the commit copies. The commit's own fsyncs are SQLite's as before, so durability is
 * unchanged (the extra ones only make durable sooner what is written anyway, and a log's frames
 * count only once the commit's frame is written); where a call is missing or fails, nothing
 * changes.
 *
 * The log is opened here: SQLite takes no locks on it. The database file is not: closing any
 * descriptor of a file drops every POSIX lock the process holds on it, SQLite's included. Its
 * writes are started through SQLite's own descriptor, found among the process's open files by
 * the file's device and inode, and never closed here. Starting writes is harmless on any file, so
 * a descriptor that has meanwhile come to name another file costs nothing but a useless request.
 */

static int store_flush_open_wal(const store *s) { /* -1: none, or no sync_file_range here */
#ifdef SYNC_FILE_RANGE_WRITE
  char *p = store_side_path(s->path, "-wal");
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  free(p);
  return fd;
#else
  (void)s;
  return -1;
#endif
}

static void store_flush_start(int fd) {
#ifdef SYNC_FILE_RANGE_WRITE
  if (fd >= 0) sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#else
  (void)fd;
#endif
}

static void store_flush_close(int fd) {
  if (fd >= 0) close(fd);
}

#ifdef SYNC_FILE_RANGE_WRITE
/* A descriptor this process already has open on the file at path (SQLite's), or -1. Linux's
 * /proc/self/fd lists them; elsewhere there is none to find. */
static int find_open_descriptor(const char *path, dev_t *dev, ino_t *ino) {
  struct stat want;
  if (stat(path, &want)) return -1;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int found = -1, self = dirfd(d);
  struct dirent *e;
  while (found < 0 && (e = readdir(d))) {
    char *end;
    long fd = strtol(e->d_name, &end, 10);
    struct stat st;
    if (*end || end == e->d_name || fd < 0 || fd == self) continue;
    if (!fstat((int)fd, &st) && S_ISREG(st.st_mode) && st.st_dev == want.st_dev && st.st_ino == want.st_ino)
      found = (int)fd;
  }
  closedir(d);
  *dev = want.st_dev;
  *ino = want.st_ino;
  return found;
}

/* Whether fd still names the database file it was found for. */
static int still_the_file(const store_flusher *f) {
  struct stat st;
  return !fstat(f->db_fd, &st) && st.st_dev == f->dev && st.st_ino == f->ino;
}

static void *flusher_main(void *arg) {
  store_flusher *f = arg;
  int tick = 0;
  pthread_mutex_lock(&f->lock);
  while (!f->stop) {
    pthread_mutex_unlock(&f->lock);
    int db = f->db_fd >= 0 && still_the_file(f);
    if (db) store_flush_start(f->db_fd);
    store_flush_start(f->wal_fd);
    if (f->sync_ms > 0 && ++tick * 2 >= f->sync_ms) { /* what is written so far, made durable now */
      tick = 0;
      if (db) fdatasync(f->db_fd);
      if (f->wal_fd >= 0) fdatasync(f->wal_fd);
    }
    pthread_mutex_lock(&f->lock);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 2000000;
    if (until.tv_nsec >= 1000000000) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000;
    }
    if (!f->stop) pthread_cond_timedwait(&f->cond, &f->lock, &until);
  }
  pthread_mutex_unlock(&f->lock);
  return NULL;
}

#endif

int store_flusher_start(store_flusher *f, const store *s, int sync_ms) {
#ifdef SYNC_FILE_RANGE_WRITE
  f->stop = 0;
  f->sync_ms = sync_ms;
  f->wal_fd = store_flush_open_wal(s);
  f->db_fd = find_open_descriptor(s->path, &f->dev, &f->ino);
  if (f->wal_fd < 0 && f->db_fd < 0) return -1;
  pthread_mutex_init(&f->lock, NULL);
  pthread_cond_init(&f->cond, NULL);
  if (pthread_create(&f->thread, NULL, flusher_main, f) == 0) return 0;
  pthread_mutex_destroy(&f->lock);
  pthread_cond_destroy(&f->cond);
  store_flush_close(f->wal_fd);
#else
  (void)f;
  (void)s;
  (void)sync_ms;
#endif
  return -1;
}

void store_flusher_stop(store_flusher *f) {
  pthread_mutex_lock(&f->lock);
  f->stop = 1;
  pthread_cond_signal(&f->cond);
  pthread_mutex_unlock(&f->lock);
  pthread_join(f->thread, NULL);
  pthread_mutex_destroy(&f->lock);
  pthread_cond_destroy(&f->cond);
  store_flush_close(f->wal_fd);
}
