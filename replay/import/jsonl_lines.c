/* jsonl_lines.c: the JSON Lines importer's reader: lines into fields, the scanner in front of yajl, on a thread of their own for a large file. */
#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "sim/hashmap.h"
#include "importer.h"
#include "io/jsonscan.h"
#include "io/jsonw.h"
#include "jsonl_lines.h"

/*
 * A line becomes a flat list of fields (key, JSON type, text); nested values are captured as
 * JSON text. A flat object of known keys (nearly every line) is read by a pass of its own,
 * straight into the batch (batch_add_flat, below). Any other line goes to the scanner in front of
 * yajl (io/jsonscan.h), which takes a line that is one valid JSON value whose strings are plain
 * ASCII without escapes, calling the same callbacks yajl would; any line the scanner declines
 * (escapes, other bytes, anything invalid, a callback that refused something) is parsed again
 * from its start by yajl, which decodes it or says what is wrong, so that every message is
 * yajl's or the callbacks'.
 */

/* Sorted, for the index by first letter. */
const char *const jsonl_key_names[K__COUNT] = {
  "active_size",
  "addr",
  "allocated",
  "allocated_size",
  "allocator",
  "allocator_settings",
  "api_dur",
  "args",
  "attrs",
  "batch_size",
  "cat_source",
  "category",
  "detail",
  "dev_ts",
  "device",
  "device_free",
  "device_index",
  "device_memory",
  "device_name",
  "dir",
  "dur",
  "expandable",
  "flags",
  "frames",
  "framework",
  "id",
  "imported_at",
  "kind",
  "mem",
  "memplay",
  "name",
  "pool",
  "requested_size",
  "reserved",
  "segment",
  "severity",
  "size",
  "source_file",
  "source_format",
  "stack",
  "state",
  "step",
  "stream",
  "ts",
  "value",
};

/* The known keys by first letter: first[c] .. first[c + 1] in key_names, and each one's length;
 * and for the flat line (flat_key), each name as three zero-padded 8-byte words, in a table by
 * a hash of its first word and length (linear probing, k + 1 in a slot, 0 empty). */
#define KEY_WORDS 3 /* a known name is at most 23 bytes */
#define KEY_SLOTS 128
#define KEY_NONE 0xFF
typedef struct key_index {
  unsigned char first[257];
  unsigned char len[K__COUNT];
  uint64_t w[K__COUNT][KEY_WORDS];
  unsigned char slot[KEY_SLOTS];
  /* The flat pass's guess of each key from the one before it (after[K__COUNT]: the first of a
   * line), as the last line had them: lines of one kind repeat their keys in the same order. A
   * guess is checked against the name and its closing quote as two masked words (quoted, qmask:
   * the name's bytes and the quote), so only names of at most 15 bytes are guessed. */
  unsigned char after[K__COUNT + 1];
  uint64_t quoted[K__COUNT][2], qmask[K__COUNT][2];
} key_index;

static inline size_t key_slot(uint64_t w0, size_t len) {
  return (size_t)(((w0 ^ len) * UINT64_C(0x8baea17b98d5f6bd)) >> 57); /* no two known keys share a slot */
}

static void key_index_init(key_index *x) {
  int k = 0;
  for (int c = 0; c < 256; c++) {
    x->first[c] = (unsigned char)k;
    while (k < K__COUNT && (unsigned char)jsonl_key_names[k][0] == c) k++;
  }
  x->first[256] = K__COUNT;
  memset(x->w, 0, sizeof x->w);
  memset(x->slot, 0, sizeof x->slot);
  for (k = 0; k < K__COUNT; k++) {
    x->len[k] = (unsigned char)strlen(jsonl_key_names[k]);
    if (x->len[k] >= sizeof x->w[k]) continue; /* too long for flat_key: its lines go to parse_line */
    memcpy(x->w[k], jsonl_key_names[k], x->len[k]);
    size_t h = key_slot(x->w[k][0], x->len[k]);
    while (x->slot[h]) h = (h + 1) % KEY_SLOTS;
    x->slot[h] = (unsigned char)(k + 1);
  }
  memset(x->after, KEY_NONE, sizeof x->after);
  memset(x->quoted, 0, sizeof x->quoted);
  memset(x->qmask, 0, sizeof x->qmask);
  for (k = 0; k < K__COUNT; k++) {
    size_t len = x->len[k];
    if (len + 1 > sizeof x->quoted[k]) continue;
    unsigned char q[16] = {0}, m[16] = {0};
    memcpy(q, jsonl_key_names[k], len);
    q[len] = '"';
    memset(m, 0xFF, len + 1);
    memcpy(x->quoted[k], q, sizeof q);
    memcpy(x->qmask[k], m, sizeof m);
  }
}

static int key_of(const key_index *x, const unsigned char *s, size_t n) {
  if (!n) return -1;
  for (int k = x->first[s[0]], e = x->first[s[0] + 1]; k < e; k++)
    if (x->len[k] == n && jsonl_same_bytes(jsonl_key_names[k], s, n)) return k;
  return -1;
}


/* A line as the parser gathers it. */
typedef struct jline {
  jfield f[MAX_FIELDS];
  int n;
  char *buf;
  size_t blen, bcap;
  int depth;       /* 0 outside, 1 inside the line's object, >1 inside a captured value */
  int objects;     /* top-level values completed on this line */
  int nonobject;   /* a top-level value that is not an object */
  uint32_t pending_key; /* offset in buf of the key awaiting its value */
  int pending_id;     /* its enum jkey, or -1 */
  uint64_t seen;      /* known keys seen on this line */
  yajl_gen cap;    /* capture of a nested value */
  key_index keys;
  int fast;        /* parsing with the scanner: a string that is not plain ASCII sends the line to yajl */
  int declined;    /* ... and one did */
  char err[256];
} jline;

/* Whether the scanner may pass s on: plain ASCII (yajl validates anything else as UTF-8). */
static int plain_text(jline *l, const unsigned char *s, size_t n) {
  if (!l->fast) return 1;
  uint64_t any = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    any |= w;
  }
  for (; i < n; i++) any |= s[i];
  if (!(any & UINT64_C(0x8080808080808080))) return 1;
  l->declined = 1;
  return 0;
}

static size_t buf_add(jline *l, const void *p, size_t n) {
  if (l->blen + n + 1 > l->bcap) sim_grow((void **)&l->buf, &l->bcap, l->blen + n + 1, 1);
  size_t off = l->blen;
  memcpy(l->buf + off, p, n);
  l->buf[off + n] = 0;
  l->blen += n + 1;
  return off;
}

static jfield *add_value(jline *l, int type, const void *text, size_t n) {
  if (l->n >= MAX_FIELDS) {
    snprintf(l->err, sizeof l->err, "too many fields");
    return NULL;
  }
  uint32_t off = (uint32_t)buf_add(l, text, n);
  jfield *f = &l->f[l->n++];
  f->koff = l->pending_key;
  f->key = l->pending_id;
  f->type = type;
  f->plain = 0;
  f->off = off;
  f->len = (uint32_t)n;
  f->used = 0;
  return f;
}

/* Scalars at depth 1 become fields; inside a capture they go to the generator. */
static int top_scalar(jline *l) {
  if (l->depth == 0) {
    if (l->objects) snprintf(l->err, sizeof l->err, "more than one JSON value on one line");
    else l->nonobject = 1;
    return 0;
  }
  return l->depth == 1;
}

static int cb_null(void *c) {
  jline *l = c;
  if (l->depth > 1) return yajl_gen_null(l->cap) == yajl_gen_status_ok;
  if (!top_scalar(l)) return 0;
  return add_value(l, J_NULL, "", 0) != NULL;
}
static int cb_bool(void *c, int b) {
  jline *l = c;
  if (l->depth > 1) return yajl_gen_bool(l->cap, b) == yajl_gen_status_ok;
  if (!top_scalar(l)) return 0;
  return add_value(l, J_BOOL, b ? "1" : "0", 1) != NULL;
}
static int cb_num(void *c, const char *s, size_t n) {
  jline *l = c;
  if (l->depth > 1) return yajl_gen_number(l->cap, s, n) == yajl_gen_status_ok;
  if (!top_scalar(l)) return 0;
  jfield *f = add_value(l, J_NUM, s, n);
  if (!f) return 0;
  /* the common integer, read here once (get_i64 and the others fall back to the text) */
  size_t i = s[0] == '-';
  if (n > i && n - i <= 18) {
    int64_t v = 0;
    size_t d = i;
    for (; d < n && s[d] >= '0' && s[d] <= '9'; d++) v = v * 10 + (s[d] - '0');
    if (d == n) {
      f->plain = 1;
      f->num = i ? -v : v;
    }
  }
  return 1;
}
static int cb_str(void *c, const unsigned char *s, size_t n) {
  jline *l = c;
  if (!plain_text(l, s, n)) return 0;
  if (l->depth > 1) return yajl_gen_string(l->cap, s, n) == yajl_gen_status_ok;
  if (!top_scalar(l)) return 0;
  return add_value(l, J_STR, s, n) != NULL;
}
static int cb_key(void *c, const unsigned char *s, size_t n) {
  jline *l = c;
  if (l->depth > 1) return plain_text(l, s, n) && yajl_gen_string(l->cap, s, n) == yajl_gen_status_ok;
  int k = key_of(&l->keys, s, n);
  if (k < 0 && !plain_text(l, s, n)) return 0; /* the known keys are plain ASCII */
  int dup = 0;
  if (k >= 0) {
    dup = (l->seen >> k) & 1;
    l->seen |= UINT64_C(1) << k;
  } else {
    for (int i = 0; i < l->n && !dup; i++)
      dup = l->f[i].key < 0 && strlen(l->buf + l->f[i].koff) == n && !memcmp(l->buf + l->f[i].koff, s, n);
  }
  if (dup) {
    snprintf(l->err, sizeof l->err, "field '%.*s' appears twice", (int)(n > 64 ? 64 : n), s);
    return 0;
  }
  l->pending_key = k < 0 ? (uint32_t)buf_add(l, s, n) : 0;
  l->pending_id = k;
  return 1;
}

static int open_nested(jline *l, int map) {
  if (l->depth == 0) {
    if (l->objects) {
      snprintf(l->err, sizeof l->err, "more than one JSON value on one line");
      return 0;
    }
    if (!map) {
      l->nonobject = 1;
      return 0;
    }
    l->depth = 1;
    return 1;
  }
  if (l->depth >= JSONSCAN_TREE_MAX_DEPTH) { /* the value is read again as a tree (jsonscan_tree) */
    snprintf(l->err, sizeof l->err, "a value nested deeper than %d levels", JSONSCAN_TREE_MAX_DEPTH);
    return 0;
  }
  if (l->depth == 1) yajl_gen_clear(l->cap), yajl_gen_reset(l->cap, NULL);
  l->depth++;
  return (map ? yajl_gen_map_open(l->cap) : yajl_gen_array_open(l->cap)) == yajl_gen_status_ok;
}
static int close_nested(jline *l, int map) {
  if (l->depth == 1) {
    l->depth = 0;
    l->objects++;
    return 1;
  }
  if ((map ? yajl_gen_map_close(l->cap) : yajl_gen_array_close(l->cap)) != yajl_gen_status_ok) return 0;
  if (--l->depth == 1) {
    size_t n;
    const char *t = jsonw_text(l->cap, &n);
    return add_value(l, J_RAW, t, n) != NULL;
  }
  return 1;
}
static int cb_smap(void *c) { return open_nested(c, 1); }
static int cb_emap(void *c) { return close_nested(c, 1); }
static int cb_sarr(void *c) { return open_nested(c, 0); }
static int cb_earr(void *c) { return close_nested(c, 0); }

static const yajl_callbacks line_cbs = {cb_null, cb_bool, NULL, NULL, cb_num, cb_str, cb_smap, cb_key, cb_emap, cb_sarr, cb_earr};

/* Clears what the parser gathered from the line before. */
static inline void line_reset(jline *l) {
  l->n = 0;
  l->blen = 0;
  l->objects = 0;
  l->nonobject = 0;
  l->pending_key = 0;
  l->seen = 0;
  l->depth = 0;
  l->declined = 0;
  l->err[0] = 0;
}


/* ---- the reader: batches of parsed lines, handed from its thread to the importer -------------- */

#define BATCH_LINES 1024            /* lines in a batch, at most */
#define BATCH_TEXT (1u << 20)       /* a batch ends once it holds this much text */
#define NBATCHES 8                  /* batches the thread may be ahead, the one being handled included (with 4,
                                      * it waited for the importer while the store's threads took their turn) */
#define THREAD_MIN_BYTES (4u << 20) /* a smaller file is read in the importer's own thread (gzip: an eighth) */

typedef struct bline {
  int64_t lineno;
  size_t field0, text0; /* where its fields and text start in the batch */
  uint64_t seen;        /* its known keys */
  int n;
} bline;

typedef struct jbatch {
  bline *lines;
  size_t nlines, lcap;
  jfield *fields;
  size_t nfields, fcap;
  char *text;
  size_t tlen, tcap;
  int end;         /* the input ends (or failed) after this batch's lines */
  int failed;      /* ... with err */
  int64_t lineno;  /* the lines read up to the end of this batch, blank ones counted */
  char err[IMPORT_ERRLEN];
} jbatch;

struct jsonl_reader {
  input *in;
  const char *path;
  yajl_handle h;
  jline l;
  int64_t lineno;
  /* the thread and the batches it fills */
  int threaded;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  jbatch batches[NBATCHES];
  jbatch *full[NBATCHES], *free_list[NBATCHES];
  size_t nfull, head, nfree;
  int stop;
  /* the caller's side: the batch whose lines it reads, the next line of it, the end met */
  jbatch *cur;
  size_t next;
  int done;
  char err[IMPORT_ERRLEN];
};

/* A message about the line being read, naming the file and the line, into the batch. */
static int pfail(jsonl_reader *r, jbatch *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int pfail(jsonl_reader *r, jbatch *b, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(b->err, sizeof b->err, "%s:%" PRId64 ": %s", r->path, r->lineno, msg);
  b->failed = 1;
  return -1;
}

/* Fails on a line that is not one whole JSON object, saying what it is instead. */
static int line_invalid(jsonl_reader *r, jbatch *b, yajl_status ys, const char *line, size_t len) {
  jline *l = &r->l;
  if (l->err[0]) return pfail(r, b, "%s", l->err);
  if (l->nonobject) return pfail(r, b, "each line must be one JSON object");
  if (ys != yajl_status_ok) {
    unsigned char *m = yajl_get_error(r->h, 0, (const unsigned char *)line, len);
    char *nl = strchr((char *)m, '\n');
    if (nl) *nl = 0;
    int rc = pfail(r, b, "invalid JSON: %s (at column %zu)", (char *)m, yajl_get_bytes_consumed(r->h) + 1);
    yajl_free_error(r->h, m);
    return rc;
  }
  if (l->objects > 1) return pfail(r, b, "more than one JSON value on one line");
  return pfail(r, b, "the JSON object does not end on this line");
}

/* Parses one line into r->l: the scanner first, yajl when the scanner declines it. 0, or -1 with
 * the message in b when the line is not one whole JSON object. */
static int parse_line(jsonl_reader *r, jbatch *b, const char *line, size_t len) {
  jline *l = &r->l;
  line_reset(l);
  l->fast = 1;
  int sc = jsonscan_value(line, len, &line_cbs, l);
  l->fast = 0;
  if (sc == JSONSCAN_OK && l->depth == 0 && l->objects == 1 && !l->err[0]) return 0;
  line_reset(l);
  yajl_status ys = yajl_parse(r->h, (const unsigned char *)line, len);
  if (ys != yajl_status_ok || l->depth != 0 || l->objects != 1) return line_invalid(r, b, ys, line, len);
  /* the line ends here: a value yajl still holds back (a number after the object) is one too many */
  ys = yajl_complete_parse(r->h);
  if (l->err[0]) return pfail(r, b, "%s", l->err);
  if (ys != yajl_status_ok) {
    unsigned char *m = yajl_get_error(r->h, 0, NULL, 0);
    char *nl = strchr((char *)m, '\n');
    if (nl) *nl = 0;
    int rc = pfail(r, b, "invalid JSON: %s (at the end of the line)", (char *)m);
    yajl_free_error(r->h, m);
    return rc;
  }
  return 0;
}

/* The parsed line, copied into the batch. */
static void batch_add(jbatch *b, const jline *l, int64_t lineno) {
  sim_grow((void **)&b->lines, &b->lcap, b->nlines + 1, sizeof *b->lines);
  if (b->nfields + (size_t)l->n > b->fcap)
    sim_grow((void **)&b->fields, &b->fcap, b->nfields + (size_t)l->n, sizeof *b->fields);
  if (b->tlen + l->blen > b->tcap) sim_grow((void **)&b->text, &b->tcap, b->tlen + l->blen, 1);
  b->lines[b->nlines++] = (bline){lineno, b->nfields, b->tlen, l->seen, l->n};
  memcpy(b->fields + b->nfields, l->f, (size_t)l->n * sizeof *l->f);
  b->nfields += (size_t)l->n;
  if (l->blen) memcpy(b->text + b->tlen, l->buf, l->blen);
  b->tlen += l->blen;
}

/*
 * ---- the flat line, read straight into the batch ----------------------------------------------
 *
 * Nearly every line of a trace is one flat object of known keys whose values are numbers, plain
 * ASCII strings without escapes, true, false or null. Such a line is read here in one pass: its
 * bytes are copied once into the batch's text, each value's field points into the copy, and each
 * value is ended there by a NUL written over the byte after it (its closing quote, the comma or the
 * brace), so that the fields come out as parse_line and batch_add would make them. Anything else
 * (a nested value, a key memplay does not know, a repeated key, an escape or another byte, too
 * many fields, anything invalid) leaves the batch as it was and the line to parse_line, whose
 * messages say what is wrong.
 */

static const uint64_t flat_ones = UINT64_C(0x0101010101010101), flat_highs = UINT64_C(0x8080808080808080);

/* The bytes of w that are zero: the lowest flag is exact (a borrow flags only bytes above it). */
static inline uint64_t zero_bytes(uint64_t w) { return (w - flat_ones) & ~w & flat_highs; }

/* The low r bytes of a word (r of 0 to 8, or more). */
static inline uint64_t low_bytes(ptrdiff_t r) {
  return r <= 0 ? 0 : r >= 8 ? ~UINT64_C(0) : (UINT64_C(1) << (8 * r)) - 1;
}

static inline int flat_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* The plain ASCII string whose opening quote is at s[i]: the index of its closing quote, or 0. */
static size_t flat_string(const unsigned char *s, size_t i, size_t n) {
  ptrdiff_t k = jsonscan_plain_string((const char *)s + i + 1, n - i - 1, 1);
  return k < 0 ? 0 : i + 1 + (size_t)k;
}

/* Eight digits' values (a byte each, the first lowest) as one number. */
static inline uint64_t eight_digits(uint64_t d) {
  d = d * 10 + (d >> 8); /* pairs */
  return ((d & UINT64_C(0x000000FF000000FF)) * (100 + (UINT64_C(1000000) << 32)) +
          ((d >> 16) & UINT64_C(0x000000FF000000FF)) * (1 + (UINT64_C(10000) << 32))) >> 32;
}

/* The digits from s[i] as a number in *v (wrapping past 19 digits): the index after them. Eight
 * bytes at a time: a byte is a digit when neither adding 0x46 nor taking 0x30 sets its top bit. */
static inline size_t flat_digits(const unsigned char *s, size_t i, size_t n, uint64_t *v) {
  static const uint64_t pow10[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
  uint64_t acc = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    uint64_t m = ((w + flat_ones * 0x46) | (w - flat_ones * '0')) & flat_highs;
    size_t k = m ? (size_t)__builtin_ctzll(m) >> 3 : 8;
    if (k) acc = acc * pow10[k] + eight_digits((w - flat_ones * '0') << (8 * (8 - k))); /* as leading zeros */
    if (k < 8) {
      *v = acc;
      return i + k;
    }
  }
  for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) acc = acc * 10 + (uint64_t)(s[i] - '0');
  *v = acc;
  return i;
}

/* The number at s[i] by the JSON grammar, -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, into f
 * (plain and num as cb_num sets them): the index after it, or 0. */
static size_t flat_number(const unsigned char *s, size_t i, size_t n, jfield *f) {
  size_t start = i, neg = s[i] == '-';
  i += neg;
  if (i >= n || s[i] < '0' || s[i] > '9') return 0;
  uint64_t v = 0; /* wraps past 19 digits, when it is not used */
  if (s[i] == '0') i++;
  else i = flat_digits(s, i, n, &v);
  size_t digits = i - start - neg;
  f->plain = digits <= 18;
  if (i < n && s[i] == '.') {
    if (++i >= n || s[i] < '0' || s[i] > '9') return 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    f->plain = 0;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= n || s[i] < '0' || s[i] > '9') return 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    f->plain = 0;
  }
  if (f->plain) f->num = neg ? -(int64_t)v : (int64_t)v;
  return i;
}

/* The value at s[i] (not at the end) into f, its text ended in t: the index after it, or 0. */
static size_t flat_value(const unsigned char *s, size_t i, size_t n, jfield *f, char *t) {
  f->off = (uint32_t)i;
  f->plain = 0;
  unsigned char c = s[i];
  size_t e;
  if (c == '"') {
    e = flat_string(s, i, n);
    if (!e) return 0;
    f->type = J_STR;
    f->off = (uint32_t)(i + 1);
    f->len = (uint32_t)(e - i - 1);
    t[e] = 0;
    return e + 1;
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    e = flat_number(s, i, n, f);
    f->type = J_NUM;
  } else if (c == 't' && n - i >= 4 && !memcmp(s + i, "true", 4)) {
    e = i + 4;
    f->type = J_BOOL;
    t[i] = '1';
    t[i + 1] = 0;
  } else if (c == 'f' && n - i >= 5 && !memcmp(s + i, "false", 5)) {
    e = i + 5;
    f->type = J_BOOL;
    t[i] = '0';
    t[i + 1] = 0;
  } else if (c == 'n' && n - i >= 4 && !memcmp(s + i, "null", 4)) {
    e = i + 4;
    f->type = J_NULL;
    t[i] = 0;
  } else {
    return 0; /* a nested value, or not JSON */
  }
  if (!e || e >= n || !(s[e] == ',' || s[e] == '}' || flat_ws(s[e]))) return 0; /* the token must end here */
  if (f->type == J_NUM) {
    f->len = (uint32_t)(e - i);
    t[e] = 0; /* over the comma, brace or space that follows: already read from s */
  } else {
    f->len = f->type == J_NULL ? 0 : 1;
  }
  return e;
}

/* The known key whose string starts at s[i] (its opening quote), with the index of its closing
 * quote in *e; -1 for any other string (parse_line then reads the line). The first quote after
 * the name ends it: a string that holds more (an escaped quote) is not a known name. */
static int flat_key(const key_index *x, const unsigned char *s, size_t i, size_t n, size_t *e) {
  const unsigned char *p = s + i + 1;
  size_t avail = n - i - 1;
  unsigned char pad[8 * KEY_WORDS];
  if (avail < sizeof pad) { /* the line's end is near: the words from a zero-padded copy */
    memset(pad, 0, sizeof pad);
    memcpy(pad, p, avail);
    p = pad;
  }
  uint64_t w[KEY_WORDS] = {0, 0, 0};
  ptrdiff_t len = -1;
  for (int j = 0; j < KEY_WORDS; j++) { /* to the word with the quote, the bytes after it cleared */
    memcpy(&w[j], p + 8 * j, 8);
    uint64_t q = zero_bytes(w[j] ^ (flat_ones * '"'));
    if (q) {
      len = 8 * j + (__builtin_ctzll(q) >> 3);
      w[j] &= low_bytes(len - 8 * j);
      break;
    }
  }
  if (len < 1 || (size_t)len >= avail) return -1;
  for (size_t h = key_slot(w[0], (size_t)len); x->slot[h]; h = (h + 1) % KEY_SLOTS) {
    int k = x->slot[h] - 1;
    if (x->len[k] == len && x->w[k][0] == w[0] && x->w[k][1] == w[1] && x->w[k][2] == w[2]) {
      *e = i + 1 + (size_t)len;
      return k;
    }
  }
  return -1;
}

/* The index of the first byte from s[i] that is not JSON whitespace. */
static inline size_t flat_skip(const unsigned char *s, size_t i, size_t n) {
  while (i < n && flat_ws(s[i])) i++;
  return i;
}

/* The key that followed prev on the last line, when the string at s[i] (its opening quote) is
 * that name and its closing quote, with the quote's index in *e (as flat_key gives it); else -1. */
static inline int flat_guess(const key_index *x, int prev, const unsigned char *s, size_t i, size_t n, size_t *e) {
  int g = x->after[prev];
  if (g == KEY_NONE || n - i < 17 || !x->qmask[g][0]) return -1; /* 16 bytes after the quote lie on the line */
  uint64_t w0, w1;
  memcpy(&w0, s + i + 1, 8);
  memcpy(&w1, s + i + 9, 8);
  if (((w0 ^ x->quoted[g][0]) & x->qmask[g][0]) | ((w1 ^ x->quoted[g][1]) & x->qmask[g][1])) return -1;
  *e = i + 1 + x->len[g];
  return g;
}

/* The fields of a flat line into fs (room for MAX_FIELDS), its text ended in t (a copy of s), its
 * keys in *seen: their number, or -1 when the line is not a flat object of known keys. */
static int flat_fields(key_index *x, const unsigned char *s, size_t n, jfield *fs, char *t, uint64_t *seen_out) {
  size_t i = flat_skip(s, 0, n);
  if (i >= n || s[i++] != '{') return -1;
  uint64_t seen = 0;
  int prev = K__COUNT;
  for (int nf = 0;; nf++) {
    if (i < n && s[i] != '"') i = flat_skip(s, i, n);
    if (i >= n || s[i] != '"' || nf == MAX_FIELDS) return -1; /* an empty object is parse_line's too */
    size_t e;
    int k = flat_guess(x, prev, s, i, n, &e);
    if (k < 0 && (k = flat_key(x, s, i, n, &e)) >= 0) x->after[prev] = (unsigned char)k;
    if (k < 0 || (seen >> k) & 1) return -1;
    prev = k;
    seen |= UINT64_C(1) << k;
    i = e + 1;
    if (i < n && s[i] != ':') i = flat_skip(s, i, n);
    if (i >= n || s[i] != ':') return -1;
    i = flat_skip(s, i + 1, n);
    if (i >= n) return -1;
    jfield *f = &fs[nf];
    f->key = k;
    f->koff = 0;
    f->used = 0;
    i = flat_value(s, i, n, f, t);
    if (!i) return -1;
    if (i < n && s[i] != ',' && s[i] != '}') i = flat_skip(s, i, n);
    if (i < n && s[i] == ',') {
      i++;
      continue;
    }
    if (i >= n || s[i] != '}') return -1;
    *seen_out = seen;
    return flat_skip(s, i + 1, n) == n ? nf + 1 : -1;
  }
}

/* A flat line read straight into b: 1, or 0 (b as it was) for parse_line to read it. */
static int batch_add_flat(jsonl_reader *r, jbatch *b, const char *line, size_t len) {
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
  return 0; /* the words above are read little-endian */
#endif
  if (b->nfields + MAX_FIELDS > b->fcap) sim_grow((void **)&b->fields, &b->fcap, b->nfields + MAX_FIELDS, sizeof *b->fields);
  if (b->tlen + len + 1 > b->tcap) sim_grow((void **)&b->text, &b->tcap, b->tlen + len + 1, 1);
  char *t = b->text + b->tlen;
  memcpy(t, line, len);
  t[len] = 0;
  uint64_t seen;
  int n = flat_fields(&r->l.keys, (const unsigned char *)line, len, b->fields + b->nfields, t, &seen);
  if (n < 0) return 0;
  sim_grow((void **)&b->lines, &b->lcap, b->nlines + 1, sizeof *b->lines);
  b->lines[b->nlines++] = (bline){r->lineno, b->nfields, b->tlen, seen, n};
  b->nfields += (size_t)n;
  b->tlen += len + 1;
  return 1;
}

/* Reads and parses lines into b until it is full, the input ends, or a line fails. */
static void batch_fill(jsonl_reader *r, jbatch *b) {
  b->nlines = b->nfields = b->tlen = 0;
  b->end = b->failed = 0;
  b->err[0] = 0;
  while (b->nlines < BATCH_LINES && b->tlen < BATCH_TEXT) {
    char *line;
    size_t len;
    int got = input_line(r->in, &line, &len);
    if (got == -2) {
      r->lineno++;
      pfail(r, b, "the line is longer than 64 MiB (memplay's limit for one line)");
    } else if (got < 0) {
      snprintf(b->err, sizeof b->err, "%s", input_error(r->in));
      b->failed = 1;
    }
    if (got <= 0) {
      b->end = 1;
      break;
    }
    r->lineno++;
    size_t sp = 0;
    while (sp < len && isspace((unsigned char)line[sp])) sp++;
    if (sp == len || batch_add_flat(r, b, line, len)) continue;
    if (parse_line(r, b, line, len)) {
      b->end = 1;
      break;
    }
    batch_add(b, &r->l, r->lineno);
  }
  b->lineno = r->lineno;
}

static void *reader_main(void *arg) {
  jsonl_reader *r = arg;
  pthread_setname_np(pthread_self(), "memplay-jsonl"); /* for top, perf and bench_import */
  for (int end = 0; !end;) {
    pthread_mutex_lock(&r->lock);
    while (!r->nfree && !r->stop) pthread_cond_wait(&r->cond, &r->lock);
    jbatch *b = r->stop ? NULL : r->free_list[--r->nfree];
    pthread_mutex_unlock(&r->lock);
    if (!b) break;
    batch_fill(r, b);
    end = b->end;
    pthread_mutex_lock(&r->lock);
    r->full[(r->head + r->nfull) % NBATCHES] = b;
    r->nfull++;
    pthread_cond_broadcast(&r->cond);
    /* a batch of long lines goes alone: the next is read once the importer is through with it */
    while (b->tlen > BATCH_TEXT && r->nfree < NBATCHES && !r->stop) pthread_cond_wait(&r->cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
  }
  return NULL;
}

jsonl_reader *jsonl_reader_new(input *in, const char *path) {
  jsonl_reader *r = sim_xcalloc(1, sizeof *r);
  r->in = in;
  r->path = path;
  key_index_init(&r->l.keys);
  r->l.cap = jsonw_mem();
  r->h = yajl_alloc(&line_cbs, NULL, &r->l);
  yajl_config(r->h, yajl_allow_multiple_values, 1);
  for (int i = 0; i < NBATCHES; i++) r->free_list[r->nfree++] = &r->batches[i];
  /* A pipe is read in the caller's thread: a thread blocked on a pipe that stays open could not be
   * stopped when the import fails. */
  uint64_t size = input_file_size(in), min = input_is_gzip(in) ? THREAD_MIN_BYTES / 8 : THREAD_MIN_BYTES;
  if (size != UINT64_MAX && size >= min) {
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->threaded = pthread_create(&r->thread, NULL, reader_main, r) == 0;
    if (!r->threaded) {
      pthread_mutex_destroy(&r->lock);
      pthread_cond_destroy(&r->cond);
    }
  }
  return r;
}

/* The batch after the current one (filled here when there is no thread). */
static jbatch *next_batch(jsonl_reader *r) {
  if (!r->threaded) {
    jbatch *b = &r->batches[0];
    batch_fill(r, b);
    return b;
  }
  pthread_mutex_lock(&r->lock);
  if (r->cur) {
    r->free_list[r->nfree++] = r->cur;
    pthread_cond_broadcast(&r->cond);
  }
  while (!r->nfull) pthread_cond_wait(&r->cond, &r->lock);
  jbatch *b = r->full[r->head];
  r->head = (r->head + 1) % NBATCHES;
  r->nfull--;
  pthread_cond_broadcast(&r->cond);
  pthread_mutex_unlock(&r->lock);
  return b;
}

int jsonl_reader_next(jsonl_reader *r, jsonl_view *v, int64_t *lineno) {
  v->n = 0;
  v->seen = 0;
  while (!r->cur || r->next == r->cur->nlines) {
    if (r->done || (r->cur && r->cur->end)) {
      jbatch *b = r->cur;
      if (b && !r->done) {
        r->done = b->failed ? -1 : 1;
        snprintf(r->err, sizeof r->err, "%s", b->err);
      }
      if (b) *lineno = b->lineno;
      return r->done < 0 ? -1 : 0;
    }
    r->cur = next_batch(r);
    r->next = 0;
  }
  const bline *bl = &r->cur->lines[r->next++];
  v->f = r->cur->fields + bl->field0;
  v->n = bl->n;
  v->buf = r->cur->text + bl->text0;
  v->seen = bl->seen;
  for (int i = 0; i < v->n; i++)
    if (v->f[i].key >= 0) v->by_key[v->f[i].key] = i;
  *lineno = bl->lineno;
  return 1;
}

const char *jsonl_reader_error(const jsonl_reader *r) { return r->err; }

void jsonl_reader_free(jsonl_reader *r) {
  if (!r) return;
  if (r->threaded) {
    pthread_mutex_lock(&r->lock);
    r->stop = 1;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
  }
  for (int i = 0; i < NBATCHES; i++) {
    free(r->batches[i].lines);
    free(r->batches[i].fields);
    free(r->batches[i].text);
  }
  yajl_free(r->h);
  yajl_gen_free(r->l.cap);
  free(r->l.buf);
  free(r);
}
