/* jsonscan.h: a fast scanner for small JSON values, in front of yajl: the common case quickly, the rest to yajl. */
#ifndef REPLAY_JSONSCAN_H
#define REPLAY_JSONSCAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <yajl/yajl_parse.h>
#include <yajl/yajl_tree.h>

/*
 * Streaming a multi-gigabyte profiler trace through yajl costs about 3.6 ns a byte, most of
 * the import. Its elements are small flat objects, so the importer parses each element here
 * (jsonscan_object), calling the same callbacks with the same arguments as yajl would. The scanner is strict: it accepts only valid JSON
 * (RFC 8259 grammar) and declines what it does not handle itself -- strings with escapes or
 * control characters, nesting deeper than JSONSCAN_MAX_DEPTH, anything invalid -- and the
 * importer then feeds the same bytes (their extent found by jsonscan_extent) to yajl, which
 * decodes them or reports the error.
 * Strings are passed through undecoded and unvalidated as UTF-8, as yajl does with
 * yajl_dont_validate_strings. tests/test_jsonscan.c compares the two on generated and mutated
 * input.
 */

#define JSONSCAN_MAX_DEPTH 32

/*
 * The bytes from s[0] (of n) that a JSON string holds as they are: none is a quote, a backslash
 * or a control character (nor, with ascii, a byte above 127); n when all are. Eight bytes at a
 * time to the first byte that needs a look: of a word's flags the lowest is exact (a borrow flags
 * only bytes above it).
 */
static inline size_t jsonscan_plain_run(const char *s, size_t n, int ascii) {
  const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
  size_t i = 0;
  while (n - i >= 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    uint64_t m = ((q - ones) & ~q & highs) | ((b - ones) & ~b & highs) | ((w - ones * 0x20) & ~w & highs);
    if (ascii) m |= w & highs;
    if (m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      i += (size_t)__builtin_ctzll(m) >> 3;
#endif
      break;
    }
    i += 8;
  }
  for (; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\' || c < 0x20 || (ascii && c >= 0x80)) break;
  }
  return i;
}

/*
 * The body of a string without escapes or control characters, from s[0] (just after its opening
 * quote): its length up to the closing quote; -1 when an escape or a control character (or, with
 * ascii, a byte above 127) comes first; -2 when the bytes end before a quote.
 */
static inline ptrdiff_t jsonscan_plain_string(const char *s, size_t n, int ascii) {
  size_t i = jsonscan_plain_run(s, n, ascii);
  if (i == n) return -2;
  return s[i] == '"' ? (ptrdiff_t)i : -1;
}

/*
 * The length of the JSON object or array that starts at buf[0] ('{' or '['), found by matching
 * brackets outside strings (not validating): > 0 its length, 0 when it does not end within n
 * bytes, -1 when buf[0] is not '{' or '['.
 */
long jsonscan_extent(const char *buf, size_t n);

/*
 * yajl_tree_parse of a whole JSON text from a file, a store or a trace, refusing text nested
 * deeper than JSONSCAN_TREE_MAX_DEPTH levels before yajl sees it: yajl frees a tree, and memplay
 * walks one, by recursion, so a value nested a million levels deep would overflow the stack.
 * NULL when the text is not JSON or too deep; err (when not NULL) then says which, as
 * yajl_tree_parse's own message does.
 */
#define JSONSCAN_TREE_MAX_DEPTH 64
yajl_val jsonscan_tree(const char *text, char *err, size_t errlen);

enum {
  JSONSCAN_OK = 1,        /* one valid value, and every callback returned 1 */
  JSONSCAN_DECLINED = 0,  /* not handled (see above): give the bytes to yajl; callbacks may have run */
  JSONSCAN_CANCELED = -1, /* a callback returned 0 */
  JSONSCAN_MORE = -2,     /* jsonscan_object: the bytes end inside the value; callbacks may have run */
};

/* Parses buf[0..n) as exactly one JSON value (surrounding whitespace allowed). */
int jsonscan_value(const char *buf, size_t n, const yajl_callbacks *cb, void *ctx);

/* Parses the object or array that starts at buf[0], in a stream of which buf[0..n) is what has
 * been read: JSONSCAN_OK with *used its length, JSONSCAN_MORE when it goes on past n. */
int jsonscan_object(const char *buf, size_t n, const yajl_callbacks *cb, void *ctx, size_t *used);

#endif
