/* outfile.c: an output file written beside its path and renamed into place. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

/* 0 when path names nothing or a regular file, else -1 with a message. */
static int check_target(const char *path, char *err, size_t errlen) {
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT) return 0;
    snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
    return -1;
  }
  if (S_ISREG(st.st_mode)) return 0;
  const char *what = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISLNK(st.st_mode)  ? "a symbolic link"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "a device";
  snprintf(err, errlen, "cannot write '%s': it is %s, not a regular file", path, what);
  return -1;
}

int io_outfile_open(io_outfile *o, const char *path, char *err, size_t errlen) {
  memset(o, 0, sizeof *o);
  if (!path || !*path) {
    snprintf(err, errlen, "no output file named");
    return -1;
  }
  size_t n = strlen(path);
  if (path[n - 1] == '/') {
    snprintf(err, errlen, "cannot write '%s': it names a directory", path);
    return -1;
  }
  if (check_target(path, err, errlen)) return -1;
  o->path = strdup(path);
  o->tmp = malloc(n + 16);
  if (!o->path || !o->tmp) {
    snprintf(err, errlen, "out of memory");
    io_outfile_abort(o);
    return -1;
  }
  snprintf(o->tmp, n + 16, "%s.tmpXXXXXX", path);
  int fd = mkstemp(o->tmp);
  if (fd < 0) {
    snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
    free(o->tmp);
    o->tmp = NULL;
    io_outfile_abort(o);
    return -1;
  }
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  o->f = fdopen(fd, "w");
  if (!o->f) {
    snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
    close(fd);
    io_outfile_abort(o);
    return -1;
  }
  return 0;
}

int io_outfile_commit(io_outfile *o, char *err, size_t errlen) {
  int bad = ferror(o->f);
  int saved = errno;
  if (fclose(o->f) != 0 && !bad) bad = 1, saved = errno;
  o->f = NULL;
  if (bad) {
    snprintf(err, errlen, "cannot write '%s': %s", o->path, strerror(saved ? saved : EIO));
    io_outfile_abort(o);
    return -1;
  }
  if (check_target(o->path, err, errlen)) {
    io_outfile_abort(o);
    return -1;
  }
  if (rename(o->tmp, o->path) != 0) {
    snprintf(err, errlen, "cannot write '%s': %s", o->path, strerror(errno));
    io_outfile_abort(o);
    return -1;
  }
  free(o->tmp);
  free(o->path);
  memset(o, 0, sizeof *o);
  return 0;
}

void io_outfile_abort(io_outfile *o) {
  if (o->f) fclose(o->f);
  if (o->tmp) unlink(o->tmp);
  free(o->tmp);
  free(o->path);
  memset(o, 0, sizeof *o);
}
