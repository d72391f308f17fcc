/* jsonw.c: JSON output helpers over yajl_gen. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "decimal.h"
#include "jsonscan.h"
#include "jsonw.h"

static void to_file(void *ctx, const char *s, size_t n) { fwrite(s, 1, n, ctx); }

yajl_gen jsonw_file(FILE *f, int pretty) {
  yajl_gen g = yajl_gen_alloc(NULL);
  yajl_gen_config(g, yajl_gen_print_callback, to_file, f);
  yajl_gen_config(g, yajl_gen_validate_utf8, 0);
  if (pretty) {
    yajl_gen_config(g, yajl_gen_beautify, 1);
    yajl_gen_config(g, yajl_gen_indent_string, "  ");
  }
  return g;
}

yajl_gen jsonw_mem(void) {
  yajl_gen g = yajl_gen_alloc(NULL);
  return g;
}

const char *jsonw_text(yajl_gen g, size_t *len) {
  const unsigned char *buf;
  size_t n;
  yajl_gen_get_buf(g, &buf, &n);
  if (len) *len = n;
  return (const char *)buf;
}

/* The length of the well-formed UTF-8 sequence at s (n bytes left), or 0 when it is not one:
 * overlong forms, UTF-16 surrogates (U+D800..U+DFFF, which a lone "\ud800" or Python's
 * surrogateescape leaves behind) and code points past U+10FFFF are not. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (!len || len > n || c > 0xF4) return 0;
  for (size_t i = 1; i < len; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  if (c == 0xE0 && s[1] < 0xA0) return 0; /* overlong */
  if (c == 0xED && s[1] >= 0xA0) return 0; /* a surrogate */
  if (c == 0xF0 && s[1] < 0x90) return 0; /* overlong */
  if (c == 0xF4 && s[1] >= 0x90) return 0; /* past U+10FFFF */
  return len;
}

size_t jsonw_utf8_fix(const char *s, size_t n, char *out) {
  const unsigned char *u = (const unsigned char *)s;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t k = utf8_seq(u + i, n - i);
    if (k) {
      if (out) memcpy(out + o, s + i, k);
      o += k;
      i += k;
    } else {
      if (out) memcpy(out + o, "\xEF\xBF\xBD", 3); /* U+FFFD, the replacement character */
      o += 3;
      i++;
    }
  }
  return o;
}

/* Every string memplay writes as JSON is valid UTF-8: an invalid byte becomes U+FFFD, so the
 * output is strict JSON and reads back as the same text. */
static yajl_gen_status put_string(yajl_gen g, const unsigned char *s, size_t n) {
  size_t i = 0;
  for (uint64_t w; i + 8 <= n; i += 8) { /* plain ASCII, eight bytes at a time */
    memcpy(&w, s + i, 8);
    if (w & UINT64_C(0x8080808080808080)) break;
  }
  while (i < n && utf8_seq(s + i, n - i)) i += utf8_seq(s + i, n - i);
  if (i == n) return yajl_gen_string(g, s, n);
  size_t m = jsonw_utf8_fix((const char *)s, n, NULL);
  char stackbuf[512], *buf = m <= sizeof stackbuf ? stackbuf : malloc(m);
  if (!buf) return yajl_gen_string(g, (const unsigned char *)"\xEF\xBF\xBD", 3);
  jsonw_utf8_fix((const char *)s, n, buf);
  yajl_gen_status st = yajl_gen_string(g, (const unsigned char *)buf, m);
  if (buf != stackbuf) free(buf);
  return st;
}

char *jsonw_quote(char *o, const char *str, size_t n) {
  static const char hex[] = "0123456789ABCDEF";
  const unsigned char *s = (const unsigned char *)str;
  *o++ = '"';
  for (size_t i = 0; i < n;) {
    size_t run = jsonscan_plain_run(str + i, n - i, 1); /* plain ASCII that needs no escape */
    memcpy(o, s + i, run);
    o += run;
    i += run;
    if (i == n) break;
    unsigned char c = s[i];
    if (c >= 0x80) {
      size_t k = utf8_seq(s + i, n - i);
      if (k) {
        memcpy(o, s + i, k);
        o += k;
        i += k;
      } else {
        memcpy(o, "\xEF\xBF\xBD", 3); /* U+FFFD, as put_string writes it */
        o += 3;
        i++;
      }
      continue;
    }
    i++;
    *o++ = '\\';
    switch (c) {
    case '"': *o++ = '"'; break;
    case '\\': *o++ = '\\'; break;
    case '\b': *o++ = 'b'; break;
    case '\f': *o++ = 'f'; break;
    case '\n': *o++ = 'n'; break;
    case '\r': *o++ = 'r'; break;
    case '\t': *o++ = 't'; break;
    default:
      memcpy(o, "u00", 3);
      o[3] = hex[c >> 4];
      o[4] = hex[c & 15];
      o += 5;
    }
  }
  *o++ = '"';
  return o;
}

void jsonw_str(yajl_gen g, const char *s) {
  if (s) put_string(g, (const unsigned char *)s, strlen(s));
  else yajl_gen_null(g);
}
void jsonw_strn(yajl_gen g, const char *s, size_t n) { put_string(g, (const unsigned char *)s, n); }
/* Integers without printf, whose formatting was a fifth of an export's time. */
void jsonw_int(yajl_gen g, int64_t v) {
  char b[24];
  yajl_gen_number(g, b, (size_t)(decimal_i64(b, v) - b));
}

void jsonw_uint(yajl_gen g, uint64_t v) {
  char b[24];
  yajl_gen_number(g, b, (size_t)(decimal_u64(b, v) - b));
}

void jsonw_double(yajl_gen g, double v) {
  if (!isfinite(v)) {
    yajl_gen_null(g);
    return;
  }
  char b[40];
  int n = snprintf(b, sizeof b, "%.9g", v);
  if (!strpbrk(b, ".eEn")) n = snprintf(b, sizeof b, "%.1f", v);
  yajl_gen_number(g, b, (size_t)n);
}

void jsonw_bool(yajl_gen g, int v) { yajl_gen_bool(g, v); }
void jsonw_null(yajl_gen g) { yajl_gen_null(g); }

/* Re-emits parsed JSON into the generator, so raw text stays well-formed inside it. */
static int r_null(void *c) { return yajl_gen_null(c) == yajl_gen_status_ok; }
static int r_bool(void *c, int b) { return yajl_gen_bool(c, b) == yajl_gen_status_ok; }
static int r_num(void *c, const char *s, size_t n) { return yajl_gen_number(c, s, n) == yajl_gen_status_ok; }
static int r_str(void *c, const unsigned char *s, size_t n) { return put_string(c, s, n) == yajl_gen_status_ok; }
static int r_smap(void *c) { return yajl_gen_map_open(c) == yajl_gen_status_ok; }
static int r_emap(void *c) { return yajl_gen_map_close(c) == yajl_gen_status_ok; }
static int r_sarr(void *c) { return yajl_gen_array_open(c) == yajl_gen_status_ok; }
static int r_earr(void *c) { return yajl_gen_array_close(c) == yajl_gen_status_ok; }
static const yajl_callbacks replay_cbs = {r_null, r_bool, NULL, NULL, r_num, r_str,
                                          r_smap, r_str, r_emap, r_sarr, r_earr};

void jsonw_raw(yajl_gen g, const char *json) {
  if (!json) {
    yajl_gen_null(g);
    return;
  }
  yajl_handle h = yajl_alloc(&replay_cbs, NULL, g);
  if (yajl_parse(h, (const unsigned char *)json, strlen(json)) != yajl_status_ok ||
      yajl_complete_parse(h) != yajl_status_ok)
    jsonw_str(g, json); /* not JSON after all: keep it as a string */
  yajl_free(h);
}

void jsonw_kstr(yajl_gen g, const char *k, const char *v) {
  jsonw_str(g, k);
  jsonw_str(g, v);
}
void jsonw_kint(yajl_gen g, const char *k, int64_t v) {
  jsonw_str(g, k);
  jsonw_int(g, v);
}
void jsonw_kuint(yajl_gen g, const char *k, uint64_t v) {
  jsonw_str(g, k);
  jsonw_uint(g, v);
}
void jsonw_kdouble(yajl_gen g, const char *k, double v) {
  jsonw_str(g, k);
  jsonw_double(g, v);
}
void jsonw_kbool(yajl_gen g, const char *k, int v) {
  jsonw_str(g, k);
  jsonw_bool(g, v);
}
void jsonw_kraw(yajl_gen g, const char *k, const char *json) {
  jsonw_str(g, k);
  jsonw_raw(g, json);
}

void jsonw_tree(yajl_gen g, yajl_val v) {
  if (!v) {
    yajl_gen_null(g);
    return;
  }
  switch (v->type) {
  case yajl_t_string: jsonw_str(g, v->u.string); break;
  case yajl_t_number: yajl_gen_number(g, v->u.number.r, strlen(v->u.number.r)); break;
  case yajl_t_true: yajl_gen_bool(g, 1); break;
  case yajl_t_false: yajl_gen_bool(g, 0); break;
  case yajl_t_null: yajl_gen_null(g); break;
  case yajl_t_object:
    yajl_gen_map_open(g);
    for (size_t i = 0; i < v->u.object.len; i++) {
      jsonw_str(g, v->u.object.keys[i]);
      jsonw_tree(g, v->u.object.values[i]);
    }
    yajl_gen_map_close(g);
    break;
  case yajl_t_array:
    yajl_gen_array_open(g);
    for (size_t i = 0; i < v->u.array.len; i++) jsonw_tree(g, v->u.array.values[i]);
    yajl_gen_array_close(g);
    break;
  default: yajl_gen_null(g); break;
  }
}
