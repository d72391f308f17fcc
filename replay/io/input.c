/* input.c: buffered reading of plain and gzip files through zlib, with honest truncation errors. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "sim/hashmap.h"
#include "checksum.h"
#include "input.h"

#define BUFSZ (1u << 18)

struct input {
  char *path;
  int fd;
  int gz;
  z_stream zs;
  unsigned char *raw; /* compressed bytes (gzip only) */
  unsigned char *buf; /* decompressed bytes */
  size_t pos, len;    /* unread part of buf: [pos, len) */
  int eof, zdone;
  uint64_t consumed;
  uint64_t fsize;
  uint64_t disk_read; /* bytes read from the file itself (compressed, for gzip) */
  void (*progress)(void *arg, uint64_t done, uint64_t total);
  void *progress_arg;
  char *line;
  size_t line_cap;
  char err[512];
};

static int fill_raw(input *in) {
  ssize_t n;
  do n = read(in->fd, in->raw, BUFSZ);
  while (n < 0 && errno == EINTR);
  if (n < 0) {
    snprintf(in->err, sizeof in->err, "cannot read '%s': %s", in->path, strerror(errno));
    return -1;
  }
  in->zs.next_in = in->raw;
  in->zs.avail_in = (uInt)n;
  in->disk_read += (uint64_t)n;
  if (in->progress) in->progress(in->progress_arg, in->disk_read, in->fsize);
  return (int)(n > 0);
}

/* Refills buf after moving the unread tail to its front. Returns bytes added, 0 at the end. */
static ssize_t refill(input *in) {
  if (in->pos > 0) {
    memmove(in->buf, in->buf + in->pos, in->len - in->pos);
    in->len -= in->pos;
    in->pos = 0;
  }
  if (in->eof || in->len == BUFSZ) return 0;
  if (!in->gz) {
    ssize_t n;
    do n = read(in->fd, in->buf + in->len, BUFSZ - in->len);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
      snprintf(in->err, sizeof in->err, "cannot read '%s': %s", in->path, strerror(errno));
      return -1;
    }
    if (n == 0) in->eof = 1;
    in->len += (size_t)n;
    in->disk_read += (uint64_t)n;
    if (in->progress) in->progress(in->progress_arg, in->disk_read, in->fsize);
    return n;
  }
  size_t before = in->len;
  while (in->len == before && !in->eof) {
    if (in->zdone) {
      /* A gzip file may hold several members; anything after them must be another member. */
      if (in->zs.avail_in == 0) {
        int r = fill_raw(in);
        if (r < 0) return -1;
        if (r == 0) {
          in->eof = 1;
          break;
        }
      }
      inflateReset(&in->zs);
      in->zdone = 0;
    }
    if (in->zs.avail_in == 0) {
      int r = fill_raw(in);
      if (r < 0) return -1;
      if (r == 0) {
        snprintf(in->err, sizeof in->err, "'%s' is truncated: the gzip stream ends early (after %llu bytes of content)",
                 in->path, (unsigned long long)(in->consumed + in->len));
        return -1;
      }
    }
    in->zs.next_out = in->buf + in->len;
    in->zs.avail_out = (uInt)(BUFSZ - in->len);
    int rc = inflate(&in->zs, Z_NO_FLUSH);
    in->len = BUFSZ - in->zs.avail_out;
    if (rc == Z_STREAM_END) {
      in->zdone = 1;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      snprintf(in->err, sizeof in->err, "'%s' is not a valid gzip file: %s (after %llu bytes of content)", in->path,
               in->zs.msg ? in->zs.msg : "corrupt data", (unsigned long long)(in->consumed + in->len));
      return -1;
    }
  }
  return (ssize_t)(in->len - before);
}

input *input_open(const char *path, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
    return NULL;
  }
  struct stat stt;
  if (fstat(fd, &stt) == 0 && S_ISDIR(stt.st_mode)) {
    snprintf(err, errlen, "cannot read '%s': it is a directory", path);
    close(fd);
    return NULL;
  }
  input *in = sim_xcalloc(1, sizeof *in);
  in->path = strdup(path);
  in->fd = fd;
  in->fsize = S_ISREG(stt.st_mode) ? (uint64_t)stt.st_size : UINT64_MAX;
  in->buf = sim_xmalloc(BUFSZ);
  /* The magic bytes: looked at in place in a file; read and kept (then replayed) from a pipe, a
   * FIFO or a terminal, which cannot be read twice. */
  unsigned char magic[2] = {0, 0};
  ssize_t n = pread(fd, magic, 2, 0);
  size_t kept = 0;
  if (n < 0 && errno == ESPIPE) {
    while (kept < 2) {
      ssize_t r = read(fd, magic + kept, 2 - kept);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      kept += (size_t)r;
    }
    n = (ssize_t)kept;
  }
  if (n == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    in->gz = 1;
    in->raw = sim_xmalloc(BUFSZ);
    if (inflateInit2(&in->zs, 15 + 16) != Z_OK) {
      snprintf(err, errlen, "cannot read '%s': zlib failed to start", path);
      input_close(in);
      return NULL;
    }
    memcpy(in->raw, magic, kept);
    in->zs.next_in = in->raw;
    in->zs.avail_in = (uInt)kept;
  } else {
    memcpy(in->buf, magic, kept);
    in->len = kept;
  }
  if (refill(in) < 0) {
    snprintf(err, errlen, "%s", in->err);
    input_close(in);
    return NULL;
  }
  return in;
}

ssize_t input_read(input *in, void *out, size_t n) {
  if (in->pos == in->len) {
    ssize_t r = refill(in);
    if (r < 0) return -1;
  }
  size_t avail = in->len - in->pos;
  if (n > avail) n = avail;
  memcpy(out, in->buf + in->pos, n);
  in->pos += n;
  in->consumed += n;
  return (ssize_t)n;
}

/* The next line when it lies whole in buf: returned in place, its newline made its end (no
 * copy). 1, or 0 when the line goes on past what buf holds. */
static int line_in_place(input *in, char **line, size_t *len) {
  unsigned char *start = in->buf + in->pos;
  unsigned char *nl = memchr(start, '\n', in->len - in->pos);
  if (!nl) return 0;
  size_t n = (size_t)(nl - start);
  in->pos += n + 1;
  in->consumed += n + 1;
  if (n && start[n - 1] == '\r') n--;
  start[n] = 0;
  *line = (char *)start;
  *len = n;
  return 1;
}

int input_line(input *in, char **line, size_t *len) {
  if (in->pos < in->len && line_in_place(in, line, len)) return 1;
  if (in->pos > 0 && !in->eof) { /* the rest of the line is yet to be read: the tail to the front, then more */
    ssize_t r = refill(in);
    if (r < 0) return -1;
    if (line_in_place(in, line, len)) return 1;
  }
  size_t have = 0;
  for (;;) {
    if (in->pos == in->len) {
      ssize_t r = refill(in);
      if (r < 0) return -1;
      if (r == 0 && in->pos == in->len) {
        if (!have) return 0;
        break;
      }
    }
    unsigned char *start = in->buf + in->pos;
    unsigned char *nl = memchr(start, '\n', in->len - in->pos);
    size_t take = nl ? (size_t)(nl - start) : in->len - in->pos;
    if (have + take > INPUT_MAX_LINE) {
      snprintf(in->err, sizeof in->err, "'%s': a line is longer than %u MiB (memplay's limit for one line)", in->path,
               INPUT_MAX_LINE >> 20);
      return -2;
    }
    sim_grow((void **)&in->line, &in->line_cap, have + take + 1, 1);
    memcpy(in->line + have, start, take);
    have += take;
    in->pos += take + (nl ? 1 : 0);
    in->consumed += take + (nl ? 1 : 0);
    if (nl) break;
  }
  if (have && in->line[have - 1] == '\r') have--;
  in->line[have] = 0;
  *line = in->line;
  *len = have;
  return 1;
}

size_t input_peek(input *in, const unsigned char **head) {
  if (in->len - in->pos < 4096 && !in->eof) refill(in);
  *head = in->buf + in->pos;
  return in->len - in->pos;
}

const char *input_error(const input *in) { return in->err; }
const char *input_path(const input *in) { return in->path; }
int input_is_gzip(const input *in) { return in->gz; }
uint64_t input_offset(const input *in) { return in->consumed; }
void input_on_progress(input *in, void (*fn)(void *arg, uint64_t done, uint64_t total), void *arg) {
  in->progress = fn;
  in->progress_arg = arg;
}

uint64_t input_file_size(const input *in) { return in->fsize; }

void input_close(input *in) {
  if (!in) return;
  if (in->gz) inflateEnd(&in->zs);
  if (in->fd >= 0) close(in->fd);
  free(in->raw);
  free(in->buf);
  free(in->line);
  free(in->path);
  free(in);
}

int input_digest(const char *path, char *out, size_t n) {
  /* a pipe, FIFO or device can be read only once: what it holds is for the import itself */
  struct stat st;
  if (stat(path, &st) || !S_ISREG(st.st_mode)) return -1;
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  unsigned char buf[1 << 16];
  uint64_t size = 0;
  uint32_t crc = 0, adler = 1; /* zlib's CRC-32 and Adler-32 (io/checksum.h) */
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
    crc = io_crc32_update(crc, buf, got);
    adler = io_adler32_update(adler, buf, got);
    size += got;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) return -1;
  snprintf(out, n, "%llu-%08lx-%08lx", (unsigned long long)size, (unsigned long)crc, (unsigned long)adler);
  return 0;
}
