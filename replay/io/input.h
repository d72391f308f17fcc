/* input.h: reading an input file, plain or gzip-compressed, with the file's name for messages. */
#ifndef REPLAY_INPUT_H
#define REPLAY_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct input input;

/* Opens path (gzip is recognised by its magic bytes). A pipe, FIFO or terminal works too: the
 * bytes looked at to recognise it are replayed, never lost. NULL with a message in err. */
input *input_open(const char *path, char *err, size_t errlen);
/* Reads up to n bytes: returns the count, 0 at the end, -1 on error (input_error). A
 * truncated or corrupt gzip stream is an error, not an early end. */
ssize_t input_read(input *in, void *buf, size_t n);
/* The longest line input_line returns (decompressed bytes, without the newline): 64 MiB. */
#define INPUT_MAX_LINE (64u << 20)
/* Reads one line (without its newline), NUL-terminated, in the input's own memory (in place where
 * it can be: no copy), valid until the next call on in; *len its length. Returns 1,
 * 0 at the end, -1 on error, -2 when the line is longer than INPUT_MAX_LINE (input_error says
 * so; the memory held stays under the bound). */
int input_line(input *in, char **line, size_t *len);
/* The first bytes of the (decompressed) file, for format detection; does not consume them. */
size_t input_peek(input *in, const unsigned char **head);
const char *input_error(const input *in);
const char *input_path(const input *in);
int input_is_gzip(const input *in);
/* A digest of the file at path, its bytes as they are on disk (compressed or not), that tells
 * whether two files hold the same content: its size, CRC-32 and Adler-32 (zlib's, both
 * fast: the file is read once more, beside its import or before it), as text.
 * 0, or -1 when the file cannot be read or is not a regular file (a pipe or FIFO can be read only
 * once, by the import itself: such an input is never taken for one already in the store). */
int input_digest(const char *path, char *out, size_t n);
/* Bytes of the (decompressed) content consumed so far. */
uint64_t input_offset(const input *in);
/* Calls fn at each read from the file: the bytes read from it so far (compressed, for gzip) and
 * its size on disk (UINT64_MAX for a pipe). For a progress display; NULL stops it. */
void input_on_progress(input *in, void (*fn)(void *arg, uint64_t done, uint64_t total), void *arg);
/* Size of the file on disk; UINT64_MAX when it has none (a pipe, a FIFO). */
uint64_t input_file_size(const input *in);
void input_close(input *in);

#endif
