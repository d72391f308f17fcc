/* input.h: reading an input file, plain or gzip-compressed, with the file's name for messages. */
#ifndef REPLAY_INPUT_H
#define REPLAY_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct input input;

/* Opens path (gzip is recognised by its magic bytes). NULL with a message in err. */
input *input_open(const char *path, char *err, size_t errlen);
/* Reads up to n bytes: returns the count, 0 at the end, -1 on error (input_error). A
 * truncated or corrupt gzip stream is an error, not an early end. */
ssize_t input_read(input *in, void *buf, size_t n);
/* Reads one line (without its newline) into an internal buffer; *len its length. Returns 1,
 * 0 at the end, -1 on error. */
int input_line(input *in, char **line, size_t *len);
/* The first bytes of the (decompressed) file, for format detection; does not consume them. */
size_t input_peek(input *in, const unsigned char **head);
const char *input_error(const input *in);
const char *input_path(const input *in);
int input_is_gzip(const input *in);
/* A digest of the file at path, its bytes as they are on disk (compressed or not), that tells
 * whether two files hold the same content: its size, CRC-32 (zlib's) and 64-bit FNV-1a, as text.
 * 0, or -1 when the file cannot be read. */
int input_digest(const char *path, char *out, size_t n);
/* Bytes of the (decompressed) content consumed so far. */
uint64_t input_offset(const input *in);
/* Size of the file on disk. */
uint64_t input_file_size(const input *in);
void input_close(input *in);

#endif
