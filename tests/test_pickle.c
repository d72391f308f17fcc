/* test_pickle.c: the safe unpickler: every opcode family, refusals, truncation, limits, streaming. */
#include <stdint.h>
#include <string.h>

#include "io/pickle.h"
#include "test.h"

int test_failures;

#define P(lit) (const unsigned char *)(lit), sizeof(lit) - 1

typedef struct loaded {
  pickle *p;
  pk_val v;
  int rc;
} loaded;

static loaded load(const unsigned char *b, size_t n) {
  loaded l;
  l.p = pickle_new_mem(b, n, NULL);
  l.rc = pickle_load(l.p, &l.v);
  return l;
}

/* Streams one byte per read, to cross every buffer boundary. */
typedef struct drip {
  const unsigned char *b;
  size_t n, pos;
} drip;

static ssize_t read_drip(void *arg, void *buf, size_t n) {
  drip *d = arg;
  if (!n || d->pos == d->n) return 0;
  *(unsigned char *)buf = d->b[d->pos++];
  return 1;
}

static int fails_with(const unsigned char *b, size_t n, const char *part) {
  loaded l = load(b, n);
  int ok = l.rc != 0 && strstr(pickle_error(l.p), part) != NULL;
  if (!ok) fprintf(stderr, "  expected an error with '%s', got rc %d: %s\n", part, l.rc, pickle_error(l.p));
  pickle_free(l.p);
  return ok;
}

static int64_t int_at(const pk_obj *o, size_t i) { return o->items[i].type == PK_INT ? o->items[i].u.i : -999; }

static void test_scalars(void) {
  loaded l = load(P("\x80\x02N."));
  CHECK_EQ(l.rc, 0);
  CHECK_EQ(l.v.type, PK_NONE);
  CHECK_EQ(pickle_protocol(l.p), 2);
  pickle_free(l.p);

  /* [True, False, I01, I00, -42, -2, 255, 65535, LONG1 0 bytes, -1, 2^63-1, LONG 123L] */
  static const unsigned char ints[] = "\x80\x02](\x88\x89I01\nI00\nI-42\nJ\xfe\xff\xff\xffK\xffM\xff\xff\x8a\x00"
                                      "\x8a\x01\xff\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7fL123L\ne.";
  l = load(ints, sizeof ints - 1);
  CHECK_EQ(l.rc, 0);
  CHECK_EQ(l.v.type, PK_LIST);
  pk_obj *o = l.v.u.o;
  CHECK_EQ(o->len, 12);
  CHECK(o->items[0].type == PK_BOOL && o->items[0].u.i == 1);
  CHECK(o->items[1].type == PK_BOOL && o->items[1].u.i == 0);
  CHECK(o->items[2].type == PK_BOOL && o->items[2].u.i == 1);
  CHECK(o->items[3].type == PK_BOOL && o->items[3].u.i == 0);
  CHECK_EQ(int_at(o, 4), -42);
  CHECK_EQ(int_at(o, 5), -2);
  CHECK_EQ(int_at(o, 6), 255);
  CHECK_EQ(int_at(o, 7), 65535);
  CHECK_EQ(int_at(o, 8), 0);
  CHECK_EQ(int_at(o, 9), -1);
  CHECK(o->items[10].type == PK_INT && o->items[10].u.i == INT64_MAX);
  CHECK_EQ(int_at(o, 11), 123);
  pickle_free(l.p);

  /* 1 << 70 and -(1 << 70) (as Python writes them), LONG4, then floats */
  static const unsigned char big[] = "\x80\x02](\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00@\x8a\x09\x00\x00\x00\x00"
                                     "\x00\x00\x00\x00\xc0\x8b\x02\x00\x00\x00\x01\x00G?\xf8\x00\x00\x00\x00\x00\x00"
                                     "F-2.25\ne.";
  l = load(big, sizeof big - 1);
  CHECK_EQ(l.rc, 0);
  o = l.v.u.o;
  CHECK_EQ(o->len, 5);
  CHECK(o->items[0].type == PK_BIGINT && o->items[0].u.o->len == 9 && (unsigned char)o->items[0].u.o->data[8] == 0x40);
  CHECK(o->items[1].type == PK_BIGINT && (unsigned char)o->items[1].u.o->data[8] == 0xc0);
  CHECK_EQ(int_at(o, 2), 1); /* LONG4 with a redundant sign byte is a plain int */
  CHECK(o->items[3].type == PK_FLOAT && o->items[3].u.f == 1.5);
  CHECK(o->items[4].type == PK_FLOAT && o->items[4].u.f == -2.25);
  pickle_free(l.p);

  CHECK(fails_with(P("\x80\x02I12x\n."), "malformed"));
  CHECK(fails_with(P("\x80\x02I99999999999999999999\n."), "beyond 64 bits"));
  CHECK(fails_with(P("\x80\x02\x8b\xff\xff\xff\xff."), "negative byte count"));
  CHECK(fails_with(P("\x80\x02" "Fone\n."), "FLOAT"));
}

static void test_text(void) {
  /* str: SHORT_BINUNICODE, BINUNICODE, BINUNICODE8, SHORT_BINSTRING, BINSTRING, STRING, UNICODE */
  static const unsigned char s[] = "\x80\x04](\x8c\x03" "a\xc3\xa9X\x02\x00\x00\x00hi"
                                   "\x8d\x01\x00\x00\x00\x00\x00\x00\x00"
                                   "zU\x02pyT\x03\x00\x00\x00" "abcS'a\\n\\x41\\101\\q'\nVa\\u00e9\\\\\\u0041\xe9\ne.";
  loaded l = load(s, sizeof s - 1);
  CHECK_EQ(l.rc, 0);
  pk_obj *o = l.v.u.o;
  CHECK_EQ(o->len, 7);
  CHECK(pk_str_eq(o->items[0], "a\xc3\xa9"));
  CHECK(pk_str_eq(o->items[1], "hi"));
  CHECK(pk_str_eq(o->items[2], "z"));
  CHECK(pk_str_eq(o->items[3], "py"));
  CHECK(pk_str_eq(o->items[4], "abc"));
  CHECK(pk_str_eq(o->items[5], "a\nAA\\q"));
  CHECK(pk_str_eq(o->items[6], "a\xc3\xa9\\\\A\xc3\xa9")); /* an odd run of backslashes escapes */
  pickle_free(l.p);

  /* bytes: SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8 */
  static const unsigned char b[] = "\x80\x05](C\x02\x00\x01" "B\x01\x00\x00\x00\xff\x8e\x00\x00\x00\x00\x00\x00\x00\x00"
                                   "\x96\x02\x00\x00\x00\x00\x00\x00\x00" "abe.";
  l = load(b, sizeof b - 1);
  CHECK_EQ(l.rc, 0);
  o = l.v.u.o;
  CHECK_EQ(o->len, 4);
  CHECK(o->items[0].type == PK_BYTES && o->items[0].u.o->len == 2 && o->items[0].u.o->data[1] == 1);
  CHECK(o->items[1].type == PK_BYTES && (unsigned char)o->items[1].u.o->data[0] == 0xff);
  CHECK(o->items[2].type == PK_BYTES && o->items[2].u.o->len == 0);
  CHECK(o->items[3].type == PK_BYTES && (o->items[3].u.o->flags & PK_F_BYTEARRAY));
  pickle_free(l.p);

  CHECK(fails_with(P("\x80\x04\x8c\x02\xc3(."), "not UTF-8"));
  CHECK(fails_with(P("\x80\x04\x8c\x01\x80."), "not UTF-8"));
  CHECK(fails_with(P("\x80\x02Sabc\n."), "quoted"));
  CHECK(fails_with(P("\x80\x02S'\\x4'\n."), "\\x escape"));
  CHECK(fails_with(P("\x80\x02V\\u12\n."), "escape"));
  CHECK(fails_with(P("\x80\x02T\xff\xff\xff\xff."), "negative length"));
  /* a length beyond the end of the input is caught before anything is allocated */
  CHECK(fails_with(P("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\x00\x00."), "truncated"));
}

static void test_containers(void) {
  /* ((), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)) */
  static const unsigned char t[] = "\x80\x02()K\x01\x85K\x01K\x02\x86K\x01K\x02K\x03\x87(K\x01K\x02K\x03K\x04tt.";
  loaded l = load(t, sizeof t - 1);
  CHECK_EQ(l.rc, 0);
  CHECK_EQ(l.v.type, PK_TUPLE);
  CHECK_EQ(l.v.u.o->len, 5);
  for (size_t i = 0; i < 5 && l.v.u.o->len == 5; i++) {
    CHECK_EQ(l.v.u.o->items[i].u.o->len, i);
    if (i) CHECK_EQ(int_at(l.v.u.o->items[i].u.o, i - 1), (int64_t)i);
  }
  pickle_free(l.p);

  /* dicts: EMPTY_DICT + SETITEM, SETITEMS with a repeated key, MARK ... DICT; lists: LIST, APPEND */
  static const unsigned char d[] = "\x80\x02}(\x8c\x01" "aK\x01\x8c\x01" "bK\x02\x8c\x01" "aK\x03u\x8c\x01"
                                   "c(K\x07K\x08ls\x8c\x01" "d(\x8c\x01xK\x09" "ds.";
  l = load(d, sizeof d - 1);
  CHECK_EQ(l.rc, 0);
  CHECK_EQ(l.v.type, PK_DICT);
  const pk_val *a = pk_dict_get(l.v.u.o, "a"), *c = pk_dict_get(l.v.u.o, "c"), *dd = pk_dict_get(l.v.u.o, "d");
  CHECK(a && a->type == PK_INT && a->u.i == 3); /* the last value of a repeated key, as Python keeps */
  CHECK(c && c->type == PK_LIST && c->u.o->len == 2 && int_at(c->u.o, 1) == 8);
  CHECK(dd && dd->type == PK_DICT && pk_dict_get(dd->u.o, "x") && pk_dict_get(dd->u.o, "x")->u.i == 9);
  CHECK(!pk_dict_get(l.v.u.o, "zz"));
  pickle_free(l.p);

  /* [1, (2, 3)] as Python's protocol 2 writes it, with APPEND and APPENDS */
  l = load(P("\x80\x02]q\x00(K\x01K\x02K\x03\x86q\x01" "e."));
  CHECK_EQ(l.rc, 0);
  CHECK(l.v.type == PK_LIST && l.v.u.o->len == 2 && l.v.u.o->items[1].type == PK_TUPLE);
  pickle_free(l.p);
  l = load(P("\x80\x02]K\x05" "aK\x06" "a."));
  CHECK(l.rc == 0 && l.v.u.o->len == 2 && int_at(l.v.u.o, 1) == 6);
  pickle_free(l.p);

  /* sets: EMPTY_SET + ADDITEMS, MARK ... FROZENSET */
  l = load(P("\x80\x04\x95\x09\x00\x00\x00\x00\x00\x00\x00\x8f\x94(K\x01K\x02\x90."));
  CHECK(l.rc == 0 && l.v.type == PK_SET && l.v.u.o->len == 2);
  pickle_free(l.p);
  l = load(P("\x80\x04(K\x03\x91\x94."));
  CHECK(l.rc == 0 && l.v.type == PK_FROZENSET && l.v.u.o->len == 1);
  pickle_free(l.p);

  CHECK(fails_with(P("\x80\x02}]K\x01s."), "unhashable"));
  CHECK(fails_with(P("\x80\x02(]K\x01" "d."), "unhashable"));
  CHECK(fails_with(P("\x80\x02}(K\x01u."), "odd number"));
  CHECK(fails_with(P("\x80\x02(K\x01K\x02K\x03" "d."), "odd number"));
  CHECK(fails_with(P("\x80\x02K\x01K\x02" "a."), "APPEND to an int"));
  CHECK(fails_with(P("\x80\x02](K\x01u."), "SETITEMS on a list"));
  CHECK(fails_with(P("\x80\x02}(K\x01\x90."), "ADDITEMS on a dict"));
  CHECK(fails_with(P("\x80\x02K\x01" "e."), "without a MARK"));
}

static void test_memo(void) {
  /* PUT/GET (text), BINPUT/BINGET, LONG_BINPUT/LONG_BINGET, MEMOIZE: the same object each time */
  static const unsigned char m[] = "\x80\x04](]p7\n\x94g7\nh\x01]r\x00\x01\x00\x00j\x00\x01\x00\x00"
                                   "K\x05q\x09h\x09" "e.";
  loaded l = load(m, sizeof m - 1);
  CHECK_EQ(l.rc, 0);
  pk_obj *o = l.v.u.o;
  CHECK_EQ(o->len, 7); /* as Python reads it: [[], [], [], [], [], 5, 5] */
  if (o->len == 7) {
    CHECK(o->items[0].u.o == o->items[1].u.o && o->items[1].u.o == o->items[2].u.o);
    CHECK(o->items[3].u.o == o->items[4].u.o && o->items[3].u.o != o->items[0].u.o);
    CHECK(int_at(o, 5) == 5 && int_at(o, 6) == 5); /* an immediate kept in the memo */
    CHECK_EQ(o->items[0].u.o->refs, 5);            /* three items and two memo slots */
  }
  pickle_free(l.p);

  CHECK(fails_with(P("\x80\x02h\x03."), "never stored"));
  CHECK(fails_with(P("\x80\x02q\x00."), "needs 1 value"));
  CHECK(fails_with(P("\x80\x02g-1\n."), "negative memo index"));
  /* a memo index far out costs one page, not a table of that size */
  l = load(P("\x80\x02Nr\xf0\xff\xff\xffj\xf0\xff\xff\xff\x86."));
  CHECK_EQ(l.rc, 0);
  CHECK(pickle_peak_memory(l.p) < (UINT64_C(8) << 20));
  pickle_free(l.p);

  /* a list that holds itself: loads, and pickle_free frees the cycle */
  l = load(P("\x80\x02]q\x00h\x00" "a."));
  CHECK(l.rc == 0 && l.v.u.o->len == 1 && l.v.u.o->items[0].u.o == l.v.u.o);
  pickle_free(l.p);
}

static void test_stack_ops(void) {
  /* POP, POP_MARK, DUP, FRAME, and POP of an empty MARK region (which drops the MARK) */
  loaded l = load(P("\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01" "0(K\x03K\x04" "1(0K\x05" "2\x86."));
  CHECK_EQ(l.rc, 0);
  CHECK(l.v.type == PK_TUPLE && l.v.u.o->len == 2 && int_at(l.v.u.o, 0) == 5 && int_at(l.v.u.o, 1) == 5);
  pickle_free(l.p);

  CHECK(fails_with(P("\x80\x02K\x01K\x02."), "STOP with an unfinished structure"));
  CHECK(fails_with(P("\x80\x02(K\x01."), "STOP with an unfinished structure"));
  CHECK(fails_with(P("\x80\x02."), "STOP with an unfinished structure"));
  CHECK(fails_with(P("\x80\x02" "0."), "POP needs 1 value"));
  CHECK(fails_with(P("\x80\x02\x32."), "DUP needs 1 value"));
  CHECK(fails_with(P("\x80\x02K\x01(\x85."), "its MARK leaves 0"));
  CHECK(fails_with(P("\x80\x02" "1."), "POP_MARK without a MARK"));
  CHECK(fails_with(P("\x80\x06N."), "unsupported pickle protocol 6"));
  CHECK(fails_with(P("\x80\x02\xff"), "invalid opcode 0xff"));
}

/* Every opcode that would import or call code is refused, by name and byte offset. */
static void test_refused(void) {
  static const struct {
    const char *bytes;
    size_t n;
    const char *name;
    size_t at;
    int op;
  } cases[] = {
    {"\x80\x02" "c__builtin__\neval\n.", sizeof("\x80\x02" "c__builtin__\neval\n.") - 1, "GLOBAL", 2, 0x63},
    {"\x80\x04\x8c\x08" "builtins\x8c\x04" "eval\x93.", sizeof("\x80\x04\x8c\x08" "builtins\x8c\x04" "eval\x93.") - 1,
     "STACK_GLOBAL", 18, 0x93},
    {"\x80\x02N)R.", sizeof("\x80\x02N)R.") - 1, "REDUCE", 4, 0x52},
    {"\x80\x02}}b.", sizeof("\x80\x02}}b.") - 1, "BUILD", 4, 0x62},
    {"\x80\x02(ios\nsystem\n.", sizeof("\x80\x02(ios\nsystem\n.") - 1, "INST", 3, 0x69},
    {"\x80\x02(No.", sizeof("\x80\x02(No.") - 1, "OBJ", 4, 0x6f},
    {"\x80\x02N)\x81.", sizeof("\x80\x02N)\x81.") - 1, "NEWOBJ", 4, 0x81},
    {"\x80\x04N)}\x92.", sizeof("\x80\x04N)}\x92.") - 1, "NEWOBJ_EX", 5, 0x92},
    {"\x80\x02\x82\x01.", sizeof("\x80\x02\x82\x01.") - 1, "EXT1", 2, 0x82},
    {"\x80\x02\x83\x01\x00.", sizeof("\x80\x02\x83\x01\x00.") - 1, "EXT2", 2, 0x83},
    {"\x80\x02\x84\x01\x00\x00\x00.", sizeof("\x80\x02\x84\x01\x00\x00\x00.") - 1, "EXT4", 2, 0x84},
    {"\x80\x02Pid\n.", sizeof("\x80\x02Pid\n.") - 1, "PERSID", 2, 0x50},
    {"\x80\x02NQ.", sizeof("\x80\x02NQ.") - 1, "BINPERSID", 3, 0x51},
    {"\x80\x05\x97.", sizeof("\x80\x05\x97.") - 1, "NEXT_BUFFER", 2, 0x97},
    {"\x80\x05N\x98.", sizeof("\x80\x05N\x98.") - 1, "READONLY_BUFFER", 3, 0x98},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    loaded l = load((const unsigned char *)cases[i].bytes, cases[i].n);
    CHECK(l.rc != 0);
    const char *e = pickle_error(l.p);
    char want[80];
    snprintf(want, sizeof want, "byte %zu: opcode %s (0x%02x)", cases[i].at, cases[i].name, cases[i].op);
    if (!strstr(e, want)) fprintf(stderr, "  %s: want '%s' in '%s'\n", cases[i].name, want, e);
    CHECK(strstr(e, want) != NULL);
    CHECK(strstr(e, cases[i].op >= 0x97 ? "out-of-band buffer" : "never runs code") != NULL);
    pickle_free(l.p);
  }
}

/* A small pickle with most opcode families; every strict prefix must fail cleanly. */
static const unsigned char sample[] =
  "\x80\x04\x95\x86\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x06" "action\x94\x8c\x05" "alloc\x94\x8c\x04"
  "addr\x94\x8a\x06"
  "\x00\x00\x10\x00\xe0\x7f\x8c\x04size\x94J\x00\x10\x00\x00\x8c\x06" "frames\x94]\x94(}\x94(\x8c\x04name\x94X\x03\x00"
  "\x00\x00" "fwd\x8c\x04line\x94K\x07uh\x07" "e\x8c\x01" "f\x94G@\x09!\xfbTD-\x18\x8c\x01t\x94("
  "\x88\x89NI7\nL8L\nF0.5\n"
  "S'x'\nVy\ntu.";

static void test_sample_and_truncation(void) {
  loaded l = load(sample, sizeof sample - 1);
  CHECK_EQ(l.rc, 0);
  if (!l.rc) {
    const pk_val *fr = pk_dict_get(l.v.u.o, "frames"), *t = pk_dict_get(l.v.u.o, "t");
    CHECK(pk_str_eq(*pk_dict_get(l.v.u.o, "action"), "alloc"));
    CHECK_EQ(pk_dict_get(l.v.u.o, "addr")->u.i, INT64_C(0x7fe000100000));
    CHECK_EQ(pk_dict_get(l.v.u.o, "size")->u.i, 4096);
    CHECK(fr && fr->u.o->len == 2 && fr->u.o->items[0].u.o == fr->u.o->items[1].u.o);
    CHECK(t && t->u.o->len == 8);
  }
  pickle_free(l.p);
  for (size_t n = 0; n < sizeof sample - 1; n++) {
    /* from memory */
    loaded p = load(sample, n);
    CHECK(p.rc != 0);
    CHECK(strncmp(pickle_error(p.p), "byte ", 5) == 0);
    if (n > 2 && !strstr(pickle_error(p.p), "truncated") && !strstr(pickle_error(p.p), "does not end")) {
      fprintf(stderr, "  prefix %zu: %s\n", n, pickle_error(p.p));
      CHECK(0);
    }
    pickle_free(p.p);
    /* and a byte at a time from a stream */
    drip d = {sample, n, 0};
    pickle *s = pickle_new(read_drip, &d, NULL);
    pk_val v;
    CHECK(pickle_load(s, &v) != 0);
    CHECK(strncmp(pickle_error(s), "byte ", 5) == 0);
    pickle_free(s);
  }
  drip d = {sample, sizeof sample - 1, 0};
  pickle *s = pickle_new(read_drip, &d, NULL);
  pk_val v;
  CHECK_EQ(pickle_load(s, &v), 0);
  pickle_free(s);
  /* the error names where the input ends */
  loaded t = load(sample, 20);
  CHECK(strstr(pickle_error(t.p), "the pickle ends at byte 20") != NULL);
  pickle_free(t.p);
}

static void test_limits(void) {
  pickle_limits lim = {.max_memory = 1 << 20};
  /* 100000 memoized lists: more than 1 MiB */
  size_t n = 2 + 100000 * 2 + 200000 + 1;
  unsigned char *b = malloc(n + 16), *q = b;
  *q++ = 0x80;
  *q++ = 4;
  *q++ = ']';
  *q++ = 0x94;
  for (int i = 0; i < 100000; i++) {
    *q++ = ']';
    *q++ = 0x94;
    *q++ = '0';
  }
  *q++ = '.';
  pickle *p = pickle_new_mem(b, (size_t)(q - b), &lim);
  pk_val v;
  CHECK(pickle_load(p, &v) != 0);
  CHECK(strstr(pickle_error(p), "more than 1 MiB") != NULL);
  pickle_free(p);
  /* the same without the limit is fine */
  p = pickle_new_mem(b, (size_t)(q - b), NULL);
  CHECK_EQ(pickle_load(p, &v), 0);
  pickle_free(p);
  free(b);
}

/* ---- streaming ------------------------------------------------------------------------- */

typedef struct seen {
  uint64_t next, taken;
  int64_t sum;
  int keep_first_list;
} seen;

static int take_ints(void *arg, pickle *p, pk_obj *list, uint64_t index, pk_val item) {
  (void)p;
  seen *s = arg;
  if (list->aux == 2) return PICKLE_KEEP_ALL;
  if (item.type != PK_DICT) {
    list->aux = 2;
    return PICKLE_KEEP_ALL;
  }
  if (index != s->next) fprintf(stderr, "  index %llu, expected %llu\n", (unsigned long long)index,
                                (unsigned long long)s->next);
  CHECK_EQ(index, s->next);
  s->next++;
  const pk_val *x = pk_dict_get(item.u.o, "x");
  s->sum += x ? x->u.i : 0;
  s->taken++;
  return PICKLE_TAKE;
}

/* {"entries": [{"x": 0}, {"x": 1}, ...]}: Python's layout (MEMOIZE, batches of 1000) or
 * PyTorch's C++ layout (BINPUT for shared strings only, one MARK for the whole list). */
static unsigned char *entries_pickle(int n, int cpp, size_t *len) {
  unsigned char *b = malloc((size_t)n * 16 + 64), *q = b;
  *q++ = 0x80;
  *q++ = cpp ? 2 : 4;
  *q++ = '}';
  *q++ = '(';
  *q++ = 0x8c;
  *q++ = 7;
  memcpy(q, "entries", 7);
  q += 7;
  *q++ = ']';
  if (!cpp) *q++ = 0x94;
  for (int i = 0; i < n; i++) {
    if (i % (cpp ? n : 1000) == 0) *q++ = '(';
    *q++ = '}';
    if (!cpp) *q++ = 0x94;
    *q++ = '(';
    if (i == 0) {
      *q++ = 0x8c;
      *q++ = 1;
      *q++ = 'x';
      *q++ = cpp ? 'q' : 0x94;
      if (cpp) *q++ = 0;
    } else {
      *q++ = 'h';
      *q++ = cpp ? 0 : 2;
    }
    *q++ = 'J';
    memcpy(q, &i, 4);
    q += 4;
    *q++ = 'u';
    if ((i + 1) % (cpp ? n : 1000) == 0 || i + 1 == n) *q++ = 'e';
  }
  *q++ = 'u';
  *q++ = '.';
  *len = (size_t)(q - b);
  return b;
}

static void test_streaming(void) {
  for (int cpp = 0; cpp < 2; cpp++) {
    size_t n;
    unsigned char *b = entries_pickle(5000, cpp, &n);
    seen s = {0};
    pickle *p = pickle_new_mem(b, n, NULL);
    pickle_set_consumer(p, take_ints, &s);
    pk_val v;
    CHECK_EQ(pickle_load(p, &v), 0);
    CHECK_EQ(s.taken, 5000);
    CHECK_EQ(s.sum, (int64_t)5000 * 4999 / 2);
    const pk_val *e = v.type == PK_DICT ? pk_dict_get(v.u.o, "entries") : NULL;
    CHECK(e && e->type == PK_LIST && e->u.o->len == 0 && e->u.o->taken == 5000);
    /* the items left the stack as they completed, even under one MARK for all of them */
    CHECK(pickle_peak_stack(p) < 32);
    pickle_free(p);
    free(b);
  }
}

static int take_first(void *arg, pickle *p, pk_obj *list, uint64_t index, pk_val item) {
  (void)arg;
  (void)p;
  (void)list;
  (void)index;
  return item.type == PK_DICT ? PICKLE_TAKE : PICKLE_KEEP;
}

static int token_frames(void *arg, pickle *p, pk_obj *list, uint64_t index, pk_val item) {
  (void)arg;
  (void)list;
  (void)index;
  if (item.type != PK_DICT) return PICKLE_KEEP_ALL;
  const pk_val *f = pk_dict_get(item.u.o, "f");
  if (f && f->type == PK_LIST) pickle_memo_replace(p, *f, 41);
  return PICKLE_TAKE;
}

static void test_streaming_limits(void) {
  pk_val v;
  /* taken early under a MARK, then collected by TUPLE: not a layout the streaming supports */
  pickle *p = pickle_new_mem(P("\x80\x02](}}}}}}}}}}}}}}}}}}}}t."), NULL);
  pickle_set_consumer(p, take_first, NULL);
  CHECK(pickle_load(p, &v) != 0);
  CHECK(strstr(pickle_error(p), "TUPLE collects list items that were already handed over") != NULL);
  pickle_free(p);
  /* an item offered early whose building goes on (a one-key dict whose value nests 20 one-item
   * lists, so that 20 values sit above it): detected, and said */
  unsigned char deep[128], *q = deep;
  memcpy(q, "\x80\x02](}\x8c\x01k", 8);
  q += 8;
  for (int i = 0; i < 20; i++) *q++ = ']';
  for (int i = 0; i < 19; i++) *q++ = 'a';
  memcpy(q, "s}}e.", 5);
  q += 5;
  p = pickle_new_mem(deep, (size_t)(q - deep), NULL);
  pickle_set_consumer(p, take_first, NULL);
  CHECK(pickle_load(p, &v) != 0);
  CHECK(strstr(pickle_error(p), "SETITEM reaches back to list items that were already handed over") != NULL);
  pickle_free(p);
  /* the same without a consumer loads */
  p = pickle_new_mem(deep, (size_t)(q - deep), NULL);
  CHECK_EQ(pickle_load(p, &v), 0);
  pickle_free(p);
  /* a GET of an item that was taken */
  p = pickle_new_mem(P("\x80\x02]}q\x00" "ah\x00."), NULL);
  pickle_set_consumer(p, take_first, NULL);
  CHECK(pickle_load(p, &v) != 0);
  CHECK(strstr(pickle_error(p), "already handed over") != NULL);
  pickle_free(p);
  /* the layout Python writes for [d1, ..., d20] streams; the items come in order */
  seen s = {0};
  p = pickle_new_mem(P("\x80\x02](}}}}}}}}}}}}}}}}}}}}e."), NULL);
  pickle_set_consumer(p, take_ints, &s);
  CHECK_EQ(pickle_load(p, &v), 0);
  CHECK(s.taken == 20 && v.u.o->taken == 20);
  pickle_free(p);
  /* a digested frames list becomes a token in the memo */
  p = pickle_new_mem(P("\x80\x02](}\x8c\x01" "f]q\x01K\x01" "asq\x02}\x8c\x01" "fh\x01seh\x01\x86."), NULL);
  pickle_set_consumer(p, token_frames, NULL);
  CHECK_EQ(pickle_load(p, &v), 0);
  CHECK(v.type == PK_TUPLE && v.u.o->items[1].type == PK_TOKEN && v.u.o->items[1].u.i == 41);
  pickle_free(p);
}

int main(void) {
  RUN(test_scalars);
  RUN(test_text);
  RUN(test_containers);
  RUN(test_memo);
  RUN(test_stack_ops);
  RUN(test_refused);
  RUN(test_sample_and_truncation);
  RUN(test_limits);
  RUN(test_streaming);
  RUN(test_streaming_limits);
  TEST_MAIN_END();
}
