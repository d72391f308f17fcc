/* jsonscan.c: a strict recursive-descent JSON scanner that calls yajl's callbacks (see jsonscan.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "jsonscan.h"

long jsonscan_extent(const char *buf, size_t n) {
  if (!n || (buf[0] != '{' && buf[0] != '[')) return -1;
  size_t depth = 0;
  for (size_t i = 0; i < n; i++) {
    char c = buf[i];
    if (c == '"') {
      /* to the closing quote, stepping over escaped characters */
      for (i++;; i++) {
        if (i >= n) return 0;
        if (buf[i] == '\\') i++;
        else if (buf[i] == '"') break;
      }
    } else if (c == '{' || c == '[') {
      depth++;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return (long)(i + 1);
    }
  }
  return 0;
}

/* The deepest nesting of brackets outside strings in text (not validating). */
static size_t nesting(const char *text) {
  size_t depth = 0, deepest = 0;
  for (const char *c = text; *c; c++) {
    if (*c == '"') {
      while (*++c && *c != '"')
        if (*c == '\\' && !*++c) return deepest;
      if (!*c) return deepest;
    } else if (*c == '{' || *c == '[') {
      if (++depth > deepest) deepest = depth;
    } else if ((*c == '}' || *c == ']') && depth) {
      depth--;
    }
  }
  return deepest;
}

yajl_val jsonscan_tree(const char *text, char *err, size_t errlen) {
  if (nesting(text) > JSONSCAN_TREE_MAX_DEPTH) {
    if (err && errlen) snprintf(err, errlen, "nested deeper than %d levels", JSONSCAN_TREE_MAX_DEPTH);
    return NULL;
  }
  return yajl_tree_parse(text, err, errlen);
}

typedef struct scan {
  const char *p, *end;
  const yajl_callbacks *cb;
  void *ctx;
  int canceled;
  int exact; /* the bytes end where the input ends (else more may follow) */
  int more;  /* the value went on past the end of the bytes given */
} scan;

/* The bytes ran out: more may make the value complete. */
static int short_input(scan *s) {
  s->more = !s->exact;
  return 0;
}

static inline void skip_ws(scan *s) {
  while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t')) s->p++;
}

/* Calls callback fn (skipped when NULL, as yajl does); a 0 from it cancels the scan. */
#define CALL(fn, ...)                                  \
  do {                                                 \
    if (s->cb->fn && !s->cb->fn(s->ctx, __VA_ARGS__)) { \
      s->canceled = 1;                                 \
      return 0;                                        \
    }                                                  \
  } while (0)
#define CALL0(fn)                                \
  do {                                           \
    if (s->cb->fn && !s->cb->fn(s->ctx)) {       \
      s->canceled = 1;                           \
      return 0;                                  \
    }                                            \
  } while (0)

/* A string without escapes or control characters: its bytes between the quotes, or 0. */
static int string(scan *s, const char **str, size_t *len) {
  const char *q = ++s->p;
  ptrdiff_t k = jsonscan_plain_string(q, (size_t)(s->end - q), 0);
  if (k == -2) return short_input(s);
  if (k < 0) return 0;
  *str = q;
  *len = (size_t)k;
  s->p = q + k + 1;
  return 1;
}

static inline int digit(char c) { return c >= '0' && c <= '9'; }

/* A number by the JSON grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int number(scan *s) {
  if (!s->cb->yajl_number) return 0; /* integers and doubles are yajl's to convert */
  const char *start = s->p, *q = s->p, *e = s->end;
  if (q < e && *q == '-') q++;
  if (q >= e) return short_input(s);
  if (!digit(*q)) return 0;
  if (*q == '0') q++;
  else
    while (q < e && digit(*q)) q++;
  if (q < e && *q == '.') {
    q++;
    if (q >= e) return short_input(s);
    if (!digit(*q)) return 0;
    while (q < e && digit(*q)) q++;
  }
  if (q < e && (*q == 'e' || *q == 'E')) {
    q++;
    if (q < e && (*q == '+' || *q == '-')) q++;
    if (q >= e) return short_input(s);
    if (!digit(*q)) return 0;
    while (q < e && digit(*q)) q++;
  }
  s->p = q;
  /* yajl would read "1.5x" or "01" differently: what follows must end the token */
  if (q >= e) {
    if (!s->exact) return short_input(s);
  } else if (!(*q == ',' || *q == '}' || *q == ']' || *q == ' ' || *q == '\n' || *q == '\r' || *q == '\t')) {
    return 0;
  }
  CALL(yajl_number, start, (size_t)(q - start));
  return 1;
}

static int literal(scan *s, const char *word, size_t n) {
  size_t have = (size_t)(s->end - s->p);
  if (memcmp(s->p, word, have < n ? have : n)) return 0;
  if (have < n) return short_input(s);
  s->p += n;
  if (s->p >= s->end) return s->exact ? 1 : short_input(s); /* the caller makes the callback */
  if (!(*s->p == ',' || *s->p == '}' || *s->p == ']' || *s->p == ' ' || *s->p == '\n' ||
                         *s->p == '\r' || *s->p == '\t'))
    return 0;
  return 1;
}

static int value(scan *s, int depth) {
  if (s->p >= s->end) return short_input(s);
  const char *str;
  size_t len;
  switch (*s->p) {
  case '{':
    if (depth >= JSONSCAN_MAX_DEPTH) return 0;
    s->p++;
    CALL0(yajl_start_map);
    skip_ws(s);
    if (s->p < s->end && *s->p == '}') {
      s->p++;
      CALL0(yajl_end_map);
      return 1;
    }
    for (;;) {
      if (s->p >= s->end) return short_input(s);
      if (*s->p != '"' || !string(s, &str, &len)) return 0;
      CALL(yajl_map_key, (const unsigned char *)str, len);
      skip_ws(s);
      if (s->p >= s->end) return short_input(s);
      if (*s->p != ':') return 0;
      s->p++;
      skip_ws(s);
      if (!value(s, depth + 1)) return 0;
      skip_ws(s);
      if (s->p >= s->end) return short_input(s);
      if (*s->p == '}') {
        s->p++;
        CALL0(yajl_end_map);
        return 1;
      }
      if (*s->p != ',') return 0;
      s->p++;
      skip_ws(s);
    }
  case '[':
    if (depth >= JSONSCAN_MAX_DEPTH) return 0;
    s->p++;
    CALL0(yajl_start_array);
    skip_ws(s);
    if (s->p < s->end && *s->p == ']') {
      s->p++;
      CALL0(yajl_end_array);
      return 1;
    }
    for (;;) {
      if (!value(s, depth + 1)) return 0;
      skip_ws(s);
      if (s->p >= s->end) return short_input(s);
      if (*s->p == ']') {
        s->p++;
        CALL0(yajl_end_array);
        return 1;
      }
      if (*s->p != ',') return 0;
      s->p++;
      skip_ws(s);
    }
  case '"':
    if (!string(s, &str, &len)) return 0;
    CALL(yajl_string, (const unsigned char *)str, len);
    return 1;
  case 't':
    if (!literal(s, "true", 4)) return 0;
    CALL(yajl_boolean, 1);
    return 1;
  case 'f':
    if (!literal(s, "false", 5)) return 0;
    CALL(yajl_boolean, 0);
    return 1;
  case 'n':
    if (!literal(s, "null", 4)) return 0;
    CALL0(yajl_null);
    return 1;
  default:
    return number(s);
  }
}

int jsonscan_value(const char *buf, size_t n, const yajl_callbacks *cb, void *ctx) {
  scan s = {buf, buf + n, cb, ctx, 0, 1, 0};
  skip_ws(&s);
  int ok = value(&s, 0);
  if (s.canceled) return JSONSCAN_CANCELED;
  if (!ok) return JSONSCAN_DECLINED;
  skip_ws(&s);
  return s.p == s.end ? JSONSCAN_OK : JSONSCAN_DECLINED;
}

int jsonscan_object(const char *buf, size_t n, const yajl_callbacks *cb, void *ctx, size_t *used) {
  scan s = {buf, buf + n, cb, ctx, 0, 0, 0};
  *used = 0;
  if (!n || (buf[0] != '{' && buf[0] != '[')) return JSONSCAN_DECLINED;
  int ok = value(&s, 0);
  *used = (size_t)(s.p - buf);
  if (s.canceled) return JSONSCAN_CANCELED; /* *used: just past the token whose callback said no */
  if (s.more) return JSONSCAN_MORE;
  return ok ? JSONSCAN_OK : JSONSCAN_DECLINED;
}
