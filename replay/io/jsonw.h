/* jsonw.h: writing JSON through yajl_gen: to a FILE, or into memory. */
#ifndef REPLAY_JSONW_H
#define REPLAY_JSONW_H

#include <stdint.h>
#include <stdio.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

/* A generator that writes to f (pretty: indented). */
yajl_gen jsonw_file(FILE *f, int pretty);
/* A generator that writes into its own buffer; take the text with jsonw_text. */
yajl_gen jsonw_mem(void);
const char *jsonw_text(yajl_gen g, size_t *len);

/* Strings are written as valid UTF-8 whatever they hold: an invalid byte (a broken sequence, an
 * overlong form, a UTF-16 surrogate, a code point past U+10FFFF) becomes U+FFFD. */
void jsonw_str(yajl_gen g, const char *s);
void jsonw_strn(yajl_gen g, const char *s, size_t n);
void jsonw_int(yajl_gen g, int64_t v);
void jsonw_uint(yajl_gen g, uint64_t v);
void jsonw_double(yajl_gen g, double v); /* up to 9 significant digits; null when not finite */
void jsonw_bool(yajl_gen g, int v);
void jsonw_null(yajl_gen g);
/* Writes text that is already JSON (a captured value). */
void jsonw_raw(yajl_gen g, const char *json);

/* s (n bytes) with each invalid UTF-8 byte replaced by U+FFFD, into out (NULL: just measure;
 * at most 3n bytes). Returns the length. */
size_t jsonw_utf8_fix(const char *s, size_t n, char *out);

/* s (n bytes) as a JSON string literal at o, quotes included, exactly as jsonw_strn writes it
 * (invalid UTF-8 as U+FFFD; '"', '\\' and control characters escaped as yajl escapes them), for
 * output built without a generator: the byte after it. o has room for 2 + 6n bytes. */
char *jsonw_quote(char *o, const char *s, size_t n);

/* Writes a parsed yajl tree value. */
void jsonw_tree(yajl_gen g, yajl_val v);

/* key/value shorthands inside an object */
void jsonw_kstr(yajl_gen g, const char *k, const char *v); /* null when v is NULL */
void jsonw_kint(yajl_gen g, const char *k, int64_t v);
void jsonw_kuint(yajl_gen g, const char *k, uint64_t v);
void jsonw_kdouble(yajl_gen g, const char *k, double v);
void jsonw_kbool(yajl_gen g, const char *k, int v);
void jsonw_kraw(yajl_gen g, const char *k, const char *json);

#endif
