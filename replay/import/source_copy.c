/* source_copy.c: a private copy of an input a SQLite importer cannot open in place (a pipe, or a WAL beside it). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/hashmap.h"
#include "source_copy.h"

/* Copies from (an input, so a FIFO or a gzip stream reads whole) to the file to. 0 or -1. */
static int copy_input(input *from, const char *to, char *err, size_t errlen) {
  int fd = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(err, errlen, "cannot make a private copy of '%s': %s", input_path(from), strerror(errno));
    return -1;
  }
  char *buf = sim_xmalloc(1 << 16);
  int rc = 0;
  for (;;) {
    ssize_t n = input_read(from, buf, 1 << 16);
    if (n < 0) {
      snprintf(err, errlen, "%s", input_error(from));
      rc = -1;
      break;
    }
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(fd, buf + off, (size_t)(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        snprintf(err, errlen, "cannot make a private copy of '%s': %s", input_path(from), strerror(errno));
        rc = -1;
        break;
      }
      off += w;
    }
    if (rc) break;
  }
  free(buf);
  if (close(fd) != 0 && !rc) {
    snprintf(err, errlen, "cannot make a private copy of '%s': %s", input_path(from), strerror(errno));
    rc = -1;
  }
  return rc;
}

/* A plain byte copy of an existing file (the WAL), opened read-only. */
static int copy_plain(const char *from, const char *to, char *err, size_t errlen) {
  input *in = input_open(from, err, errlen);
  if (!in) return -1;
  int rc = copy_input(in, to, err, errlen);
  input_close(in);
  return rc;
}

static int has_wal(const char *path) {
  size_t n = strlen(path) + 8;
  char *wal = sim_xmalloc(n);
  snprintf(wal, n, "%s-wal", path);
  struct stat st;
  int yes = stat(wal, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
  free(wal);
  return yes;
}

int source_copy_needed(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return 0; /* the importer says why it cannot open it */
  return !S_ISREG(st.st_mode) || has_wal(path);
}

char *source_copy_make(const char *path, input *in, char *err, size_t errlen) {
  const char *tmp = getenv("TMPDIR");
  size_t n = strlen(tmp && *tmp ? tmp : P_tmpdir) + 64;
  char *dir = sim_xmalloc(n);
  snprintf(dir, n, "%s/memplay-source-XXXXXX", tmp && *tmp ? tmp : P_tmpdir);
  if (!mkdtemp(dir)) {
    snprintf(err, errlen, "cannot make a private copy of '%s': %s", path, strerror(errno));
    free(dir);
    return NULL;
  }
  size_t m = n + 32;
  char *copy = sim_xmalloc(m), *wal = sim_xmalloc(m), *src_wal = sim_xmalloc(strlen(path) + 8);
  snprintf(copy, m, "%s/source.sqlite", dir);
  snprintf(wal, m, "%s/source.sqlite-wal", dir);
  sprintf(src_wal, "%s-wal", path);
  free(dir);
  int rc;
  input *own = NULL;
  if (!in) in = own = input_open(path, err, errlen);
  rc = in ? copy_input(in, copy, err, errlen) : -1;
  input_close(own);
  if (!rc && has_wal(path)) rc = copy_plain(src_wal, wal, err, errlen);
  free(wal);
  free(src_wal);
  if (rc) {
    source_copy_remove(copy);
    return NULL;
  }
  return copy;
}

void source_copy_remove(char *copy) {
  if (!copy) return;
  char *slash = strrchr(copy, '/');
  static const char *const sfx[] = {"", "-wal", "-shm", "-journal", NULL};
  size_t n = strlen(copy) + 16;
  char *p = sim_xmalloc(n);
  for (size_t i = 0; sfx[i]; i++) {
    snprintf(p, n, "%s%s", copy, sfx[i]);
    unlink(p);
  }
  free(p);
  if (slash) {
    *slash = 0;
    rmdir(copy);
  }
  free(copy);
}
