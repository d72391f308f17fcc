/* test_jsonscan.c: the fast JSON scanner against yajl: same callbacks on what it accepts, nothing yajl
 * rejects; and the JSON writer's numbers and strings against printf's and the input's. */
#include <inttypes.h>
#include <yajl/yajl_parse.h>

#include "io/jsonscan.h"
#include "io/jsonw.h"
#include "sim/hashmap.h"
#include "test.h"

int test_failures;

/* A transcript of the callbacks, one token per line. */
typedef struct tr {
  char *buf;
  size_t len, cap;
  int cancel_at; /* cancel on this callback (counting from 1), 0: never */
  int calls;
} tr;

static int add(tr *t, const char *tag, const char *s, size_t n) {
  sim_grow((void **)&t->buf, &t->cap, t->len + n + 8, 1);
  size_t k = strlen(tag);
  memcpy(t->buf + t->len, tag, k);
  t->len += k;
  memcpy(t->buf + t->len, s, n);
  t->len += n;
  t->buf[t->len++] = '\n';
  t->buf[t->len] = 0;
  return ++t->calls != t->cancel_at;
}
static int t_null(void *c) { return add(c, "null", "", 0); }
static int t_bool(void *c, int b) { return add(c, b ? "true" : "false", "", 0); }
static int t_num(void *c, const char *s, size_t n) { return add(c, "num ", s, n); }
static int t_str(void *c, const unsigned char *s, size_t n) { return add(c, "str ", (const char *)s, n); }
static int t_key(void *c, const unsigned char *s, size_t n) { return add(c, "key ", (const char *)s, n); }
static int t_smap(void *c) { return add(c, "{", "", 0); }
static int t_emap(void *c) { return add(c, "}", "", 0); }
static int t_sarr(void *c) { return add(c, "[", "", 0); }
static int t_earr(void *c) { return add(c, "]", "", 0); }
static const yajl_callbacks cbs = {t_null, t_bool, NULL, NULL, t_num, t_str, t_smap, t_key, t_emap, t_sarr, t_earr};

/* yajl's verdict on text: 1 valid (transcript in t), 0 invalid. */
static int yajl_says(const char *text, size_t n, tr *t) {
  yajl_handle h = yajl_alloc(&cbs, NULL, t);
  yajl_config(h, yajl_dont_validate_strings, 1);
  int ok = yajl_parse(h, (const unsigned char *)text, n) == yajl_status_ok &&
           yajl_complete_parse(h) == yajl_status_ok;
  yajl_free(h);
  return ok;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static unsigned rnd(unsigned n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (unsigned)(rng % n);
}

static void emit(char **b, size_t *len, size_t *cap, const char *s) {
  size_t k = strlen(s);
  sim_grow((void **)b, cap, *len + k + 1, 1);
  memcpy(*b + *len, s, k);
  *len += k;
  (*b)[*len] = 0;
}

static void ws(char **b, size_t *len, size_t *cap) {
  static const char *const w[] = {"", "", "", " ", "\n  ", "\t", "\r\n"};
  emit(b, len, cap, w[rnd(7)]);
}

/* A random JSON value: mostly what Kineto writes, sometimes escapes and odd numbers. */
static void gen(char **b, size_t *len, size_t *cap, int depth) {
  static const char *const strs[] = {"\"ph\"", "\"X\"", "\"[memory]\"", "\"\"", "\"aten::add\"",
                                     "\"Memcpy HtoD (Pinned -> Device)\"", "\"a\\\"b\"", "\"tab\\there\"",
                                     "\"\\u00e9t\\u00e9\"", "\"caf\xc3\xa9\"", "\"line\\nbreak\"", "\"x\\\\\""};
  static const char *const nums[] = {"0", "-0", "1", "-17", "1669783687464181", "5394573.877", "0.5", "1e5",
                                     "1E+5", "-2.5e-3", "18446744073709551615", "139926520725504", "3.0"};
  static const char *const lits[] = {"true", "false", "null"};
  unsigned k = depth > 4 ? rnd(3) + 2 : rnd(6);
  switch (k) {
  case 0:
  case 1: {
    int obj = k == 0;
    emit(b, len, cap, obj ? "{" : "[");
    unsigned n = rnd(5);
    for (unsigned i = 0; i < n; i++) {
      ws(b, len, cap);
      if (i) emit(b, len, cap, ","), ws(b, len, cap);
      if (obj) {
        emit(b, len, cap, strs[rnd(12)]);
        ws(b, len, cap);
        emit(b, len, cap, ":");
        ws(b, len, cap);
      }
      gen(b, len, cap, depth + 1);
    }
    ws(b, len, cap);
    emit(b, len, cap, obj ? "}" : "]");
    break;
  }
  case 2: emit(b, len, cap, strs[rnd(12)]); break;
  case 3:
  case 4: emit(b, len, cap, nums[rnd(13)]); break;
  default: emit(b, len, cap, lits[rnd(3)]); break;
  }
}

static int64_t accepted, declined, checked;

/* The property: whatever the scanner accepts, yajl accepts with the same callbacks. */
static void compare(const char *text, size_t n) {
  tr a = {0}, y = {0};
  int r = jsonscan_value(text, n, &cbs, &a);
  checked++;
  if (r == JSONSCAN_OK) {
    accepted++;
    int ok = yajl_says(text, n, &y);
    if (!ok || !a.buf || !y.buf || strcmp(a.buf, y.buf)) {
      fprintf(stderr, "scanner and yajl differ on: %.*s\n", (int)(n > 300 ? 300 : n), text);
      test_failures++;
    }
  } else {
    declined++;
  }
  free(a.buf);
  free(y.buf);
}

static void generated_values(void) {
  char *b = NULL;
  size_t cap = 0;
  int64_t valid_plain = 0, plain_accepted = 0;
  for (int i = 0; i < 20000; i++) {
    size_t len = 0;
    emit(&b, &len, &cap, "");
    ws(&b, &len, &cap);
    gen(&b, &len, &cap, 0);
    ws(&b, &len, &cap);
    compare(b, len);
    /* the extent of an object or array is the whole value */
    size_t lead = 0;
    while (lead < len && strchr(" \n\r\t", b[lead])) lead++;
    if (lead < len && (b[lead] == '{' || b[lead] == '[')) {
      long e = jsonscan_extent(b + lead, len - lead);
      size_t tail = len;
      while (tail > lead && strchr(" \n\r\t", b[tail - 1])) tail--;
      CHECK_EQ(e, (long)(tail - lead));
      CHECK_EQ(jsonscan_extent(b + lead, tail - lead - 1), 0); /* one byte short: not ended */
    }
    if (!strchr(b, '\\')) {
      valid_plain++;
      tr t = {0};
      plain_accepted += jsonscan_value(b, len, &cbs, &t) == JSONSCAN_OK;
      free(t.buf);
    }
  }
  /* Without escapes the scanner handles everything valid itself. */
  CHECK(valid_plain > 5000);
  CHECK_EQ(plain_accepted, valid_plain);
  free(b);
}

/* Byte flips, insertions, deletions and truncations of valid text. */
static void mutated_values(void) {
  static const char *const seeds[] = {
    "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void k<4>(int)\", \"pid\": 0, \"tid\": 7, \"ts\": "
    "1669783687389324, \"dur\": 3, \"args\": {\"External id\": 73689, \"device\": 1, \"stream\": 7, "
    "\"correlation\": 73689, \"grid\": [24, 1, 1], \"block\": [128, 1, 1], \"blocks per SM\": 0.3}}",
    "{\"ph\": \"i\", \"cat\": \"cpu_instant_event\", \"s\": \"t\", \"name\": \"[memory]\", \"pid\": 783658, "
    "\"tid\": 785244, \"ts\": 1669783687464300, \"args\": {\"Ev Idx\": 42070, \"Device Type\": 1, \"Device Id\": 1, "
    "\"Addr\": 139926520725504, \"Bytes\": -5242880, \"Total Allocated\": 5435638784, \"Total Reserved\": 12782141440}}",
    "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::select\", \"ts\": 5394573.877, \"dur\": 8.125, "
    "\"args\": {\"Input Dims\": [[1], [], []], \"Input type\": [\"int\", \"Scalar\", \"Scalar\"], \"x\": null, "
    "\"y\": true, \"z\": false}}",
    "[[-1, 1, 37888, 7], [1696966047096061874, 4, -37888, 7]]",
  };
  static const char alphabet[] = "{}[]\",:\\ \n0123456789.-+eEtrufalsn\x01\xff";
  char buf[1024];
  for (int i = 0; i < 200000; i++) {
    const char *s = seeds[rnd(4)];
    size_t n = strlen(s);
    memcpy(buf, s, n);
    int edits = 1 + (int)rnd(3);
    for (int e = 0; e < edits && n > 2; e++) {
      size_t at = rnd((unsigned)n);
      switch (rnd(4)) {
      case 0: buf[at] = alphabet[rnd(sizeof alphabet - 1)]; break;
      case 1:
        if (n < sizeof buf - 1) {
          memmove(buf + at + 1, buf + at, n - at);
          buf[at] = alphabet[rnd(sizeof alphabet - 1)];
          n++;
        }
        break;
      case 2:
        memmove(buf + at, buf + at + 1, n - at - 1);
        n--;
        break;
      default: n = at + 1; break;
      }
    }
    compare(buf, n);
    long ext = jsonscan_extent(buf, n);
    CHECK(ext <= (long)n);
  }
}

/* In a stream, an object cut anywhere is "more", and whole it is the same as on its own. */
static void objects_in_a_stream(void) {
  char *b = NULL;
  size_t cap = 0;
  int64_t cuts = 0;
  for (int i = 0; i < 3000; i++) {
    size_t len = 0;
    emit(&b, &len, &cap, "{\"a\": ");
    gen(&b, &len, &cap, 1);
    emit(&b, &len, &cap, ", \"b\": [1, 2.5, -3e2, true, null, \"x\"]}");
    size_t whole = len;
    emit(&b, &len, &cap, ",\n  {\"next\": 1}"); /* what follows in the stream */
    tr t = {0}, y = {0};
    size_t used = 0;
    int r = jsonscan_object(b, len, &cbs, &t, &used);
    if (r == JSONSCAN_OK) {
      CHECK_EQ(used, whole);
      CHECK(yajl_says(b, whole, &y) && t.buf && y.buf && !strcmp(t.buf, y.buf));
      for (size_t k = 1; k < whole; k++) {
        tr u = {0};
        int rk = jsonscan_object(b, k, &cbs, &u, &used);
        CHECK_EQ(rk, JSONSCAN_MORE);
        free(u.buf);
        cuts++;
      }
    } else {
      CHECK(strchr(b, '\\') != NULL); /* declined only for escapes */
    }
    free(t.buf);
    free(y.buf);
  }
  CHECK(cuts > 100000);
  free(b);
}

/* A callback's 0 stops the scan, as it stops yajl. */
static void cancel(void) {
  const char *text = "{\"a\": [1, 2, {\"b\": null}], \"c\": \"d\"}";
  for (int at = 1; at <= 14; at++) { /* 13 callbacks */
    tr t = {.cancel_at = at};
    int r = jsonscan_value(text, strlen(text), &cbs, &t);
    CHECK_EQ(r, at <= 13 ? JSONSCAN_CANCELED : JSONSCAN_OK);
    CHECK_EQ(t.calls, at <= 13 ? at : 13);
    free(t.buf);
  }
}

/* What g wrote is exactly want (g is freed). */
static void check_written(yajl_gen g, const char *want) {
  size_t n;
  const char *t = jsonw_text(g, &n);
  CHECK(n == strlen(want) && !memcmp(t, want, n));
  yajl_gen_free(g);
}

/* Integers written by jsonw as printf writes them; strings, ASCII or not, as given (or fixed). */
static void writer_values(void) {
  const int64_t ints[] = {0, 1, -1, 9, 10, -10, 99, 12345678901234, INT64_MAX, INT64_MIN, INT64_MIN + 1};
  char want[32];
  for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
    yajl_gen g = jsonw_mem();
    jsonw_int(g, ints[i]);
    snprintf(want, sizeof want, "%" PRId64, ints[i]);
    check_written(g, want);
  }
  const uint64_t uints[] = {0, 7, 1000, UINT64_MAX, UINT64_C(1) << 63};
  for (size_t i = 0; i < sizeof uints / sizeof *uints; i++) {
    yajl_gen g = jsonw_mem();
    jsonw_uint(g, uints[i]);
    snprintf(want, sizeof want, "%" PRIu64, uints[i]);
    check_written(g, want);
  }
  static const struct { const char *in, *out; } strs[] = {
    {"volta_sgemm_128x64_nn", "\"volta_sgemm_128x64_nn\""},
    {"eight_by\xC3\xA9", "\"eight_by\xC3\xA9\""},             /* é after eight ASCII bytes */
    {"longer than eight \xFF", "\"longer than eight \xEF\xBF\xBD\""}, /* a bad byte after them */
    {"\xFF" "ab", "\"\xEF\xBF\xBD" "ab\""},
  };
  for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) {
    yajl_gen g = jsonw_mem();
    jsonw_str(g, strs[i].in);
    check_written(g, strs[i].out);
  }
}

/* jsonw_quote writes every string as jsonw_strn does through yajl: each single byte, then strings
 * of random bytes weighted toward the ones that need care (escapes, UTF-8 lead and continuation
 * bytes, bytes that are never UTF-8), of every length around the eight-byte steps. */
static void quote_as_yajl(const char *s, size_t n) {
  yajl_gen g = jsonw_mem();
  jsonw_strn(g, s, n);
  size_t want_n;
  const char *want = jsonw_text(g, &want_n);
  char *got = malloc(2 + 6 * n);
  size_t got_n = (size_t)(jsonw_quote(got, s, n) - got);
  CHECK(got_n == want_n && !memcmp(got, want, want_n));
  free(got);
  yajl_gen_free(g);
}

static void writer_quote(void) {
  char one[1];
  for (int c = 0; c < 256; c++) {
    one[0] = (char)c;
    quote_as_yajl(one, 1);
  }
  static const unsigned char pick[] = {'a', 'Z', ' ', '/', '"', '\\', '\n', '\t', 0x01, 0x1F, 0x7F, 0xC3, 0xA9, 0xE2,
                                       0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80, 0xED, 0xA0, 0xF4, 0x90, 0xC0, 0xFF, 0x00};
  uint64_t r = 0x9E3779B97F4A7C15u;
  char buf[64];
  for (int t = 0; t < 20000; t++) {
    size_t n = (size_t)(t % 40);
    for (size_t i = 0; i < n; i++) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      buf[i] = (char)(r % 3 ? 'a' + (int)(r >> 8) % 26 : (int)pick[(r >> 8) % sizeof pick]);
    }
    quote_as_yajl(buf, n);
  }
}

/* prefix, depth opening brackets (alternately '[' and '{"k":'), suffix, the closing ones */
static char *nested(const char *prefix, int depth, const char *suffix) {
  size_t cap = strlen(prefix) + strlen(suffix) + 8 * (size_t)depth + 1, n = 0;
  char *s = malloc(cap);
  n += (size_t)sprintf(s + n, "%s", prefix);
  for (int i = 0; i < depth; i++) n += (size_t)sprintf(s + n, "%s", i % 2 ? "{\"k\":" : "[");
  n += (size_t)sprintf(s + n, "%s", suffix);
  for (int i = depth - 1; i >= 0; i--) n += (size_t)sprintf(s + n, "%s", i % 2 ? "}" : "]");
  return s;
}

/* jsonscan_tree: as deep as the limit is a tree; one level more, or brackets unclosed that deep,
 * is refused by its depth; brackets inside strings (with escaped quotes) do not count. */
static void tree_depth(void) {
  char err[128];
  char *ok = nested("", JSONSCAN_TREE_MAX_DEPTH, "1");
  yajl_val v = jsonscan_tree(ok, err, sizeof err);
  CHECK(v && YAJL_IS_ARRAY(v));
  yajl_tree_free(v);
  char *deep = nested("", JSONSCAN_TREE_MAX_DEPTH + 1, "1");
  err[0] = 0;
  CHECK(!jsonscan_tree(deep, err, sizeof err));
  CHECK(!strcmp(err, "nested deeper than 64 levels"));
  CHECK(!jsonscan_tree(deep, NULL, 0)); /* no room for the message: still refused */
  *strchr(deep, '1') = 0; /* cut short after its last bracket: refused by its depth all the same */
  CHECK(!jsonscan_tree(deep, err, sizeof err));
  CHECK(!strcmp(err, "nested deeper than 64 levels"));
  char *strings = nested("", JSONSCAN_TREE_MAX_DEPTH, "\"[[[{{{\\\"[[[\\\\\"");
  v = jsonscan_tree(strings, err, sizeof err);
  CHECK(v != NULL);
  yajl_tree_free(v);
  err[0] = 0;
  CHECK(!jsonscan_tree("{\"a\": [1, }", err, sizeof err)); /* yajl's own errors pass through */
  CHECK(err[0] && !strstr(err, "nested"));
  free(ok);
  free(deep);
  free(strings);
}

int main(void) {
  RUN(tree_depth);
  RUN(writer_quote);
  RUN(generated_values);
  RUN(mutated_values);
  RUN(objects_in_a_stream);
  RUN(cancel);
  RUN(writer_values);
  fprintf(stderr, "  %lld inputs: %lld accepted by the scanner (all confirmed by yajl), %lld declined\n",
          (long long)checked, (long long)accepted, (long long)declined);
  TEST_MAIN_END();
}
