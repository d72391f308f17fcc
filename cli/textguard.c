/* textguard.c: what memplay prints cannot drive a terminal: control characters from names are shown escaped. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "cli.h"

/*
 * Trace, kernel, frame and file names come from other people's files and can hold anything,
 * including ESC and BEL, which a terminal would act on (escape sequences can move the cursor,
 * rewrite the title, fake output). Everything memplay writes to stdout and stderr passes through
 * a filter that shows the C0 controls other than newline and tab as \x1b-style escapes, and DEL
 * and the C1 controls (U+0080..U+009F) as \u007f, \u009b. JSON output stays valid JSON with the
 * same meaning (its writer escapes C0 controls already; the others become JSON's own escapes),
 * and every other text memplay writes itself is unchanged.
 */
typedef struct guard {
  int fd;
  int pending_c2; /* the last write ended in 0xC2, the first byte of a possible C1 control */
} guard;

static int write_all(int fd, const char *s, size_t n) {
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

static ssize_t guard_write(void *cookie, const char *buf, size_t n) {
  guard *g = cookie;
  char out[4096 + 16];
  size_t o = 0;
  const unsigned char *u = (const unsigned char *)buf;
  for (size_t i = 0; i < n; i++) {
    unsigned c = u[i];
    if (g->pending_c2) {
      g->pending_c2 = 0;
      if (c >= 0x80 && c <= 0x9F) {
        o += (size_t)snprintf(out + o, 8, "\\u%04x", c);
      } else {
        out[o++] = (char)0xC2;
        i--; /* this byte again, on its own */
      }
    } else if (c == 0xC2 && (i + 1 == n || (u[i + 1] >= 0x80 && u[i + 1] <= 0x9F))) {
      g->pending_c2 = 1;
    } else if (c == 0x7F) { /* as JSON writes it: JSON on stdout (which holds no raw C0) stays JSON */
      o += (size_t)snprintf(out + o, 8, "\\u%04x", c);
    } else if (c < 0x20 && c != '\n' && c != '\t') {
      o += (size_t)snprintf(out + o, 6, "\\x%02x", c);
    } else {
      out[o++] = (char)c;
    }
    if (o >= 4096) {
      if (write_all(g->fd, out, o)) return -1;
      o = 0;
    }
  }
  if (o && write_all(g->fd, out, o)) return -1;
  return (ssize_t)n;
}

static int guard_close(void *cookie) {
  guard *g = cookie;
  return g->pending_c2 ? write_all(g->fd, "\xC2", 1) : 0;
}

static guard guards[2]; /* stdout's and stderr's: they live as long as the process */

static FILE *guarded(int fd, int mode) {
  guard *g = &guards[fd == STDERR_FILENO];
  g->fd = fd;
  FILE *f = fopencookie(g, "w", (cookie_io_functions_t){.write = guard_write, .close = guard_close});
  if (!f) return NULL;
  setvbuf(f, NULL, mode, mode == _IONBF ? 0 : BUFSIZ);
  return f;
}

void cli_guard_output(void) {
  FILE *out = guarded(STDOUT_FILENO, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF);
  FILE *err = guarded(STDERR_FILENO, _IONBF);
  if (out) stdout = out;
  if (err) stderr = err;
}
