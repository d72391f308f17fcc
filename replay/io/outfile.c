/* outfile.c: writing an output file: rename over a regular file, write devices and FIFOs directly. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim/hashmap.h"
#include "outfile.h"

struct outfile {
  char *shown; /* the path as given, for messages */
  char *dest;  /* the path renamed to (the symlink's target resolved); NULL when direct */
  char *tmp;   /* the temporary file beside dest; NULL when direct */
  FILE *f;
  char *buf;   /* a file's stream buffer (freed after the stream is closed) */
  int is_stdout;
};

/* A file's stream writes this much at a time, not stdio's 4 KiB: an export of 125 MB made 30,442
 * write calls. */
#define OUTFILE_BUFFER (1u << 20)

static void outfile_free(outfile *o) {
  free(o->buf);
  free(o->shown);
  free(o->dest);
  free(o->tmp);
  free(o);
}

/* A temporary file in dest's folder, with the permission bits (and for root the owner) of the
 * file it will replace, or those a new file gets under the umask. */
static int open_temp(outfile *o, const struct stat *old, char *err, size_t errlen) {
  const char *slash = strrchr(o->dest, '/');
  size_t dirlen = slash ? (size_t)(slash - o->dest) + 1 : 0;
  size_t n = dirlen + 32;
  o->tmp = sim_xmalloc(n);
  snprintf(o->tmp, n, "%.*s.memplay-out-XXXXXX", (int)dirlen, o->dest);
  int fd = mkstemp(o->tmp);
  if (fd < 0) {
    snprintf(err, errlen, "cannot write '%s': %s", o->shown, strerror(errno));
    return -1;
  }
  if (old) {
    if (geteuid() == 0 && fchown(fd, old->st_uid, old->st_gid) != 0) { /* best effort */
    }
    fchmod(fd, old->st_mode & 07777);
  } else {
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
  }
  o->f = fdopen(fd, "w");
  if (!o->f) {
    snprintf(err, errlen, "cannot write '%s': %s", o->shown, strerror(errno));
    close(fd);
    unlink(o->tmp);
    return -1;
  }
  o->buf = sim_xmalloc(OUTFILE_BUFFER);
  setvbuf(o->f, o->buf, _IOFBF, OUTFILE_BUFFER);
  return 0;
}

/* A FIFO or a character device: opened as it is, never created, truncated or replaced. */
static int open_direct(outfile *o, const char *path, char *err, size_t errlen) {
  int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) {
      close(fd); /* it changed between the look and the open */
      snprintf(err, errlen, "cannot write '%s': it changed while being opened", o->shown);
      return -1;
    }
    o->f = fdopen(fd, "w");
    if (!o->f) close(fd);
  }
  if (!o->f) {
    snprintf(err, errlen, "cannot write '%s': %s", o->shown, strerror(errno));
    return -1;
  }
  return 0;
}

/* The final target of a symbolic link, which must exist. */
static char *resolve_link(const char *path, struct stat *st, char *err, size_t errlen, const char *shown) {
  char *real = realpath(path, NULL);
  if (!real || stat(real, st) != 0) {
    snprintf(err, errlen, "cannot write '%s': it is a symbolic link whose target %s", shown,
             errno == ENOENT ? "does not exist" : strerror(errno));
    free(real);
    return NULL;
  }
  return real;
}

outfile *outfile_open(const char *path, char *err, size_t errlen) {
  outfile *o = sim_xcalloc(1, sizeof *o);
  if (!path || !strcmp(path, "-")) {
    o->shown = strdup("standard output");
    o->f = stdout;
    o->is_stdout = 1;
    return o;
  }
  o->shown = strdup(path);
  struct stat st;
  int exists = lstat(path, &st) == 0;
  if (!exists && errno != ENOENT) {
    snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
    outfile_free(o);
    return NULL;
  }
  o->dest = strdup(path);
  if (exists && S_ISLNK(st.st_mode)) {
    free(o->dest);
    o->dest = resolve_link(path, &st, err, errlen, path);
    if (!o->dest) {
      outfile_free(o);
      return NULL;
    }
  }
  int rc;
  if (!exists || S_ISREG(st.st_mode)) {
    rc = open_temp(o, exists ? &st : NULL, err, errlen);
  } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
    rc = open_direct(o, o->dest, err, errlen);
    free(o->dest);
    o->dest = NULL;
  } else {
    snprintf(err, errlen, "cannot write '%s': it is %s, not a file", path,
             S_ISDIR(st.st_mode) ? "a directory" : S_ISSOCK(st.st_mode) ? "a socket" : "a block device or other special file");
    rc = -1;
  }
  if (rc) {
    outfile_free(o);
    return NULL;
  }
  return o;
}

FILE *outfile_stream(outfile *o) { return o->f; }

int outfile_is_direct(const outfile *o) { return o->tmp == NULL; }

int outfile_commit(outfile *o, char *err, size_t errlen) {
  int rc = 0;
  if (o->is_stdout) {
    if (fflush(stdout) != 0 || ferror(stdout)) rc = -1;
  } else if (fclose(o->f) != 0) {
    rc = -1;
  }
  if (rc) snprintf(err, errlen, "cannot write '%s': %s", o->shown, strerror(errno));
  if (o->tmp) {
    if (!rc && rename(o->tmp, o->dest) != 0) {
      snprintf(err, errlen, "cannot write '%s': %s", o->shown, strerror(errno));
      rc = -1;
    }
    if (rc) unlink(o->tmp);
  }
  outfile_free(o);
  return rc;
}

void outfile_abort(outfile *o) {
  if (!o) return;
  if (o->is_stdout) {
    fflush(stdout);
  } else {
    fclose(o->f);
  }
  if (o->tmp) unlink(o->tmp);
  outfile_free(o);
}

int outfile_write_all(const char *path, const void *data, size_t len, char *err, size_t errlen) {
  outfile *o = outfile_open(path, err, errlen);
  if (!o) return -1;
  if (len && fwrite(data, 1, len, o->f) != len) {
    snprintf(err, errlen, "cannot write '%s': %s", o->shown, strerror(errno));
    outfile_abort(o);
    return -1;
  }
  return outfile_commit(o, err, errlen);
}
