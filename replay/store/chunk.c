/* chunk.c: packing a chunk of events column by column (varints, zigzag differences, a dictionary of enums), and its text form. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "io/decimal.h"
#include "sim/hashmap.h"

enum { C_ENUMS, C_TS, C_DUR, C_ADDR, C_SIZE, C_STREAM, C_STACK, C_NAME, C_STEP, C_DEVTS, C_APIDUR, C__COUNT };
static const char *const column_names[C__COUNT] = {"enums", "ts",    "dur",  "addr", "size",   "stream",
                                                   "stack", "name", "step", "dev_ts", "api_dur"};

/* The enum key's layout: info's low 32 bits as the events view shows them, the device + 1 in
 * 16 bits, and whether the event has an address. */
#define KEY_DEVICE_SHIFT 32
#define KEY_HAS_ADDR (UINT64_C(1) << 48)
#define KEY_LIMIT (UINT64_C(1) << 49)

void store_bytes_release(store_bytes *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

void store_text_release(store_text *t) {
  store_bytes_release(&t->rows);
  t->ts0 = t->addr0 = 0;
}

void store_chunk_enc_release(store_chunk_enc *e) {
  free(e->keys);
  free(e->slots);
  free(e->dict);
  memset(e, 0, sizeof *e);
}

static inline uint64_t zz(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t unzz(uint64_t u) { return (int64_t)((u >> 1) ^ (0 - (u & 1))); }

/* ---- encoding --------------------------------------------------------------------------------- */

static inline unsigned char *put(unsigned char *o, uint64_t v) {
  while (v >= 0x80) {
    *o++ = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  *o++ = (unsigned char)v;
  return o;
}

static uint64_t enum_key(const sim_event *ev) {
  uint64_t info = (uint64_t)ev->kind | (uint64_t)(ev->mem & 15) << 8 | (uint64_t)(ev->dir & 15) << 12 |
                  (uint64_t)(ev->category & 15) << 16 | (uint64_t)(ev->cat_source & 15) << 20 |
                  (uint64_t)ev->flags << 24;
  return info | (uint64_t)(uint16_t)(ev->device + 1) << KEY_DEVICE_SHIFT | (ev->addr ? KEY_HAS_ADDR : 0);
}

/* The dictionary index of key, adding it when new. */
static uint32_t dict_index(store_chunk_enc *e, uint64_t key, size_t *ndict) {
  size_t mask = e->cap - 1, h = (size_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & mask;
  for (;; h = (h + 1) & mask) {
    if (!e->slots[h]) {
      e->keys[h] = key;
      e->dict[*ndict] = key;
      e->slots[h] = (uint32_t)++*ndict;
      return e->slots[h] - 1;
    }
    if (e->keys[h] == key) return e->slots[h] - 1;
  }
}

static void enc_prepare(store_chunk_enc *e) {
  if (!e->cap) {
    e->cap = 2 * STORE_CHUNK_EVENTS;
    e->keys = sim_xmalloc(e->cap * sizeof *e->keys);
    e->slots = sim_xmalloc(e->cap * sizeof *e->slots);
    e->dict = sim_xmalloc(STORE_CHUNK_EVENTS * sizeof *e->dict);
  }
  memset(e->slots, 0, e->cap * sizeof *e->slots);
}

/* Writes the columns, each into its own region of tmp (10 bytes per value at most), and their lengths. */
static void encode_columns(store_chunk_enc *e, const sim_event *ev, size_t n, unsigned char *col[C__COUNT],
                           unsigned char *end[C__COUNT]) {
  unsigned char *o[C__COUNT];
  memcpy(o, col, sizeof o);
  size_t ndict = 0;
  uint32_t *idx = (uint32_t *)(void *)end[C_ENUMS]; /* scratch: end[] is filled in at the end */
  int64_t ts = 0, stream = 0, step = -1, dev = 0;
  uint64_t addr = 0;
  for (size_t i = 0; i < n; i++) {
    const sim_event *v = &ev[i];
    idx[i] = dict_index(e, enum_key(v), &ndict);
    o[C_TS] = put(o[C_TS], zz((int64_t)((uint64_t)v->ts - (uint64_t)ts)));
    ts = v->ts;
    o[C_DUR] = put(o[C_DUR], zz(v->dur));
    if (v->addr) {
      o[C_ADDR] = put(o[C_ADDR], zz((int64_t)(v->addr - addr)));
      addr = v->addr;
    }
    o[C_SIZE] = put(o[C_SIZE], v->size);
    o[C_STREAM] = put(o[C_STREAM], zz((int64_t)((uint64_t)v->stream - (uint64_t)stream)));
    stream = v->stream;
    o[C_STACK] = put(o[C_STACK], v->stack > 0 ? (uint64_t)v->stack : 0);
    o[C_NAME] = put(o[C_NAME], v->name > 0 ? (uint64_t)v->name : 0);
    int64_t st = v->step < 0 ? -1 : v->step;
    o[C_STEP] = put(o[C_STEP], zz(st - step));
    step = st;
    if (v->dev_ts < 0) o[C_DEVTS] = put(o[C_DEVTS], 0);
    else {
      o[C_DEVTS] = put(o[C_DEVTS], zz(v->dev_ts - dev) + 1); /* both >= 0: the difference never overflows */
      dev = v->dev_ts;
    }
    o[C_APIDUR] = put(o[C_APIDUR], v->api_dur < 0 ? 0 : (uint64_t)v->api_dur + 1);
  }
  o[C_ENUMS] = put(o[C_ENUMS], ndict);
  for (size_t k = 0; k < ndict; k++) o[C_ENUMS] = put(o[C_ENUMS], e->dict[k]);
  for (size_t i = 0; i < n; i++) o[C_ENUMS] = put(o[C_ENUMS], idx[i]);
  memcpy(end, o, sizeof o);
}

void store_chunk_encode(store_chunk_enc *e, const sim_event *ev, size_t n, store_bytes *out) {
  enc_prepare(e);
  /* Each column gets room for its worst case: 10 bytes per value, the dictionary's n + 1 more,
   * and the enums column's region also holds the indices as scratch until they are packed. */
  size_t region = (10 * (2 * n + 1) + 4 * n + 16 + 7) & ~(size_t)7, header = 16 * C__COUNT;
  sim_grow((void **)&out->p, &out->cap, header + region * (C__COUNT + 1), 1);
  unsigned char *col[C__COUNT], *end[C__COUNT];
  for (int c = 0; c < C__COUNT; c++) col[c] = out->p + header + (size_t)c * region;
  end[C_ENUMS] = out->p + header + region * C__COUNT; /* the index scratch, past the columns */
  encode_columns(e, ev, n, col, end);
  unsigned char *o = out->p;
  for (int c = 0; c < C__COUNT; c++) o = put(o, (uint64_t)(end[c] - col[c]));
  for (int c = 0; c < C__COUNT; c++) {
    size_t len = (size_t)(end[c] - col[c]);
    memmove(o, col[c], len);
    o += len;
  }
  out->n = (size_t)(o - out->p);
}

/* ---- decoding --------------------------------------------------------------------------------- */

/* One varint from [*p, end): 0, or -1 when it runs past end or past 64 bits. */
static inline int get(const unsigned char **p, const unsigned char *end, uint64_t *v) {
  const unsigned char *q = *p;
  if (q < end && *q < 0x80) {
    *v = *q;
    *p = q + 1;
    return 0;
  }
  uint64_t x = 0;
  for (int shift = 0; q < end && shift < 64; shift += 7) {
    unsigned char b = *q++;
    if (shift == 63 && b > 1) return -1;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (b < 0x80) {
      *v = x;
      *p = q;
      return 0;
    }
  }
  return -1;
}

typedef struct dec {
  const unsigned char *p[C__COUNT], *end[C__COUNT];
  char *why;
  size_t whylen;
} dec;

static int bad(dec *d, int c, const char *what) {
  snprintf(d->why, d->whylen, "its %s column %s", column_names[c], what);
  return -1;
}

/* The header: each column's extent, which must cover the bytes exactly. */
static int decode_header(dec *d, const unsigned char *p, size_t len) {
  const unsigned char *q = p, *end = p + len;
  uint64_t lens[C__COUNT];
  for (int c = 0; c < C__COUNT; c++)
    if (get(&q, end, &lens[c])) {
      snprintf(d->why, d->whylen, "its header is cut short");
      return -1;
    }
  for (int c = 0; c < C__COUNT; c++) {
    if (lens[c] > (uint64_t)(end - q)) {
      snprintf(d->why, d->whylen, "its %s column runs past its end", column_names[c]);
      return -1;
    }
    d->p[c] = q;
    q += lens[c];
    d->end[c] = q;
  }
  if (q != end) {
    snprintf(d->why, d->whylen, "it has %zu bytes after its last column", (size_t)(end - q));
    return -1;
  }
  return 0;
}

/* The enums dictionary, as events with only those fields set (the address: 1 when the events
 * of that entry have one, read from the addr column). */
static int decode_dict(dec *d, size_t n, sim_event **dict, size_t *ndict) {
  uint64_t k;
  if (get(&d->p[C_ENUMS], d->end[C_ENUMS], &k)) return bad(d, C_ENUMS, "is cut short");
  if (k > n || (n && !k)) return bad(d, C_ENUMS, "has a dictionary of the wrong size");
  *dict = sim_xmalloc((k ? k : 1) * sizeof **dict);
  for (size_t i = 0; i < k; i++) {
    uint64_t key;
    if (get(&d->p[C_ENUMS], d->end[C_ENUMS], &key)) return bad(d, C_ENUMS, "is cut short");
    if (key >= KEY_LIMIT) return bad(d, C_ENUMS, "holds a value out of range");
    sim_event *v = &(*dict)[i];
    memset(v, 0, sizeof *v);
    v->kind = (uint8_t)key;
    v->mem = (uint8_t)(key >> 8 & 15);
    v->dir = (uint8_t)(key >> 12 & 15);
    v->category = (uint8_t)(key >> 16 & 15);
    v->cat_source = (uint8_t)(key >> 20 & 15);
    v->flags = (uint8_t)(key >> 24);
    v->device = (int16_t)(uint16_t)((key >> KEY_DEVICE_SHIFT) - 1);
    v->addr = (key & KEY_HAS_ADDR) != 0;
  }
  *ndict = k;
  return 0;
}

/*
 * An event's small fields, from device to flags, are eight consecutive bytes of sim_event: a
 * dictionary entry keeps them as one word that decoding stores at once (with whether the
 * entry's events have an address beside it).
 */
#define SMALL_AT offsetof(sim_event, device)
_Static_assert(offsetof(sim_event, kind) == SMALL_AT + 2 && offsetof(sim_event, mem) == SMALL_AT + 3 &&
                   offsetof(sim_event, dir) == SMALL_AT + 4 && offsetof(sim_event, category) == SMALL_AT + 5 &&
                   offsetof(sim_event, cat_source) == SMALL_AT + 6 && offsetof(sim_event, flags) == SMALL_AT + 7,
               "sim_event's small fields are eight consecutive bytes from device");
typedef struct store_chunk_small {
  uint64_t bytes; /* device .. flags as sim_event lays them out */
  uint64_t has_addr;
} small;

static void small_from_dict(const sim_event *dict, size_t ndict, small *out) {
  for (size_t i = 0; i < ndict; i++) {
    memcpy(&out[i].bytes, (const unsigned char *)&dict[i] + SMALL_AT, 8);
    out[i].has_addr = dict[i].addr;
  }
}

/* What decoding carries from one event to the next: each column's read position and the
 * running values its differences apply to (a local copy of store_chunk_dec's, which the
 * compiler keeps in registers). */
typedef struct run {
  const unsigned char *p[C__COUNT];
  int64_t ts, stream, step, dev;
  uint64_t addr;
} run;
_Static_assert(C__COUNT == STORE_CHUNK_COLUMNS, "chunk.h counts the columns");

/* A fault of one event's decoding: the column, and what is wrong with it. */
enum { F_OK, F_CUT, F_RANGE, F_NODICT, F_ADDR0 };
#define FAULT(kind, c) ((kind) << 8 | (c))

/* A varint of three bytes or more, from q, whose bytes the caller knows are there: its end, or
 * NULL when it runs past 64 bits. */
static const unsigned char *get_long(const unsigned char *q, uint64_t *v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    unsigned char b = *q++;
    if (shift == 63 && b > 1) return NULL;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (b < 0x80) {
      *v = x;
      return q;
    }
  }
  return NULL;
}

/* Eight bytes from q as a little-endian word (one load where the machine is little-endian). */
static inline uint64_t load8(const unsigned char *q) {
  return (uint64_t)q[0] | (uint64_t)q[1] << 8 | (uint64_t)q[2] << 16 | (uint64_t)q[3] << 24 | (uint64_t)q[4] << 32 |
         (uint64_t)q[5] << 40 | (uint64_t)q[6] << 48 | (uint64_t)q[7] << 56;
}

/*
 * A varint of three bytes or more from q, whose ten bytes the caller knows are there: its end,
 * or NULL when it runs past 64 bits. One of up to eight bytes is read as a word: its stop byte
 * (the first < 0x80) found by a bit scan and its seven-bit groups gathered pairwise, without a
 * branch on its length (a column of durations or sizes mixes lengths); a longer one byte by byte.
 */
static inline const unsigned char *get_multi(const unsigned char *q, uint64_t *v) {
  uint64_t w = load8(q), stop = ~w & UINT64_C(0x8080808080808080);
  if (!stop) return get_long(q, v);
  uint64_t x = w & (stop ^ (stop - 1)) & UINT64_C(0x7f7f7f7f7f7f7f7f);
  x = (x & UINT64_C(0x007f007f007f007f)) | (x & UINT64_C(0x7f007f007f007f00)) >> 1;
  x = (x & UINT64_C(0x00003fff00003fff)) | (x & UINT64_C(0x3fff00003fff0000)) >> 2;
  x = (x & UINT64_C(0x000000000fffffff)) | (x & UINT64_C(0x0fffffff00000000)) >> 4;
  *v = x;
  return q + (__builtin_ctzll(stop) >> 3) + 1;
}

/*
 * The next value of column c into v. Unchecked (checked == 0): the caller has made sure that
 * ten bytes can be read at every column's position, so only the value's own bytes are looked
 * at, one- and two-byte values (nearly all of them) inline. Checked: every byte is checked
 * against the column's end.
 */
#define GET(c, v)                                                                                                \
  do {                                                                                                         \
    const unsigned char *q_ = r->p[c];                                                                         \
    if (!checked) {                                                                                            \
      if (q_[0] < 0x80) {                                                                                      \
        (v) = q_[0];                                                                                           \
        r->p[c] = q_ + 1;                                                                                      \
      } else if (q_[1] < 0x80) {                                                                               \
        (v) = (uint64_t)(q_[0] & 0x7f) | (uint64_t)q_[1] << 7;                                                 \
        r->p[c] = q_ + 2;                                                                                      \
      } else if (!(r->p[c] = get_multi(q_, &(v)))) {                                                           \
        return FAULT(F_CUT, c);                                                                                \
      }                                                                                                        \
    } else if (get(&r->p[c], end[c], &(v))) {                                                                  \
      return FAULT(F_CUT, c);                                                                                  \
    }                                                                                                          \
  } while (0)

/* Event v from a value of each column: F_OK, or the fault. Inlined into the two loops below,
 * once with every read checked against its column's end and once without. */
static inline __attribute__((always_inline)) int decode_one(run *r, const unsigned char *const *end, int checked,
                                                            const small *dict, size_t ndict, sim_event *v) {
  uint64_t u;
  GET(C_ENUMS, u);
  if (u >= ndict) return FAULT(F_NODICT, C_ENUMS);
  const small *e = &dict[u];
  memcpy((unsigned char *)v + SMALL_AT, &e->bytes, 8);
  memset((unsigned char *)v + SMALL_AT + 8, 0, sizeof *v - SMALL_AT - 8); /* the padding, as sim_event_init leaves it */
  GET(C_TS, u);
  r->ts = (int64_t)((uint64_t)r->ts + (uint64_t)unzz(u));
  v->ts = r->ts;
  GET(C_DUR, u);
  v->dur = unzz(u);
  v->addr = 0;
  if (e->has_addr) {
    GET(C_ADDR, u);
    r->addr += (uint64_t)unzz(u);
    if (!r->addr) return FAULT(F_ADDR0, C_ADDR);
    v->addr = r->addr;
  }
  GET(C_SIZE, u);
  v->size = u;
  GET(C_STREAM, u);
  r->stream = (int64_t)((uint64_t)r->stream + (uint64_t)unzz(u));
  v->stream = r->stream;
  GET(C_STACK, u);
  if (u > INT64_MAX) return FAULT(F_RANGE, C_STACK);
  v->stack = (int64_t)u;
  GET(C_NAME, u);
  if (u > INT64_MAX) return FAULT(F_RANGE, C_NAME);
  v->name = (int64_t)u;
  GET(C_STEP, u);
  r->step += unzz(u);
  if (r->step < -1 || r->step > INT32_MAX) return FAULT(F_RANGE, C_STEP);
  v->step = (int32_t)r->step;
  GET(C_DEVTS, u);
  if (!u) v->dev_ts = -1;
  else {
    r->dev = (int64_t)((uint64_t)r->dev + (uint64_t)unzz(u - 1));
    if (r->dev < 0) return FAULT(F_RANGE, C_DEVTS);
    v->dev_ts = r->dev;
  }
  GET(C_APIDUR, u);
  if (u > (uint64_t)INT64_MAX + 1) return FAULT(F_RANGE, C_APIDUR);
  v->api_dur = (int64_t)(u - 1);
  return F_OK;
}

/* The events of a block decoded without checks, at most: each of its values reads at most ten
 * bytes of its column. */
#define BLOCK 32
#define VARINT_MAX 10

/* Whether BLOCK more events can be decoded unchecked: no column's position is so near the end
 * of the chunk's bytes (limit) that ten bytes a value could run past it. A column that holds
 * fewer values than it should then runs into the next one's bytes, which the caller finds at
 * the end, where each column must end exactly at its end. */
static inline int block_fits(const run *r, const unsigned char *limit) {
  const unsigned char *hi = r->p[0];
  for (int c = 1; c < C__COUNT; c++)
    if (r->p[c] > hi) hi = r->p[c];
  return hi <= limit && (size_t)(limit - hi) >= (size_t)BLOCK * VARINT_MAX;
}

static int fault(dec *d, int f) {
  int c = f & 255;
  switch (f >> 8) {
  case F_NODICT: return bad(d, c, "names an entry its dictionary lacks");
  case F_ADDR0: return bad(d, c, "gives an address of 0 to an event that has one");
  case F_RANGE: return bad(d, c, "holds a value out of range");
  default: return bad(d, c, "is cut short");
  }
}

/*
 * A block of BLOCK events far enough from the end of the bytes, decoded a column at a time: the
 * columns whose values are nearly always one byte (enums, stream, stack, name, step) each in its
 * own loop, eight values tested at once and, when each is one byte, stored unrolled straight
 * into their fields of the block's events (which stay in the cache); then the six columns that
 * mix lengths together, event by event (rows_mixed), few enough that their positions and running
 * values stay in registers. Values out of range, an index past the dictionary or an address of
 * 0 only mark the block wrong; it is then decoded again event by event (decode_one) from where
 * it started, which names the first fault as it always has. The codec is unchanged.
 */
#define ONE_BYTE_ALL UINT64_C(0x8080808080808080)

/* One value from q (ten bytes readable) into v, q moved past it; NULL from the calling function
 * when the value runs past 64 bits. */
#define COL_ONE(q, v)                                                                                          \
  do {                                                                                                         \
    if ((q)[0] < 0x80) {                                                                                       \
      (v) = (q)[0];                                                                                            \
      (q) += 1;                                                                                                \
    } else if ((q)[1] < 0x80) {                                                                                \
      (v) = (uint64_t)((q)[0] & 0x7f) | (uint64_t)(q)[1] << 7;                                                 \
      (q) += 2;                                                                                                \
    } else if (!((q) = get_multi((q), &(v)))) {                                                                \
      return NULL;                                                                                             \
    }                                                                                                          \
  } while (0)

/* The zigzag-coded values of one byte, decoded. */
#define UNZZ_2(k) (k), -(k)-1
#define UNZZ_8(k) UNZZ_2(k), UNZZ_2((k) + 1), UNZZ_2((k) + 2), UNZZ_2((k) + 3)
#define UNZZ_32(k) UNZZ_8(k), UNZZ_8((k) + 4), UNZZ_8((k) + 8), UNZZ_8((k) + 12)
static const int8_t unzz_byte[128] = {UNZZ_32(0), UNZZ_32(16), UNZZ_32(32), UNZZ_32(48)};

/* The BLOCK values of a column from q, BODY run for each with u the value and i its event's
 * index in the block: eight at a time, unrolled, when the next eight bytes are each a value
 * (one_ is then 1: UNZZ decodes from the table, and u is below DICT_MIN). */
#define UNZZ(u) (one_ ? (int64_t)unzz_byte[(u) & 127] : unzz(u))
#define VALUE_AT(q, j, BODY)                                                                                   \
  do {                                                                                                         \
    const size_t i = i_ + (j);                                                                                 \
    const uint64_t u = (q)[j];                                                                                 \
    const int one_ = 1;                                                                                        \
    (void)one_;                                                                                                \
    BODY;                                                                                                      \
  } while (0)
#define FOR_VALUES(q, BODY)                                                                                    \
  for (size_t i_ = 0; i_ < BLOCK;) {                                                                           \
    if (!(load8(q) & ONE_BYTE_ALL)) {                                                                          \
      VALUE_AT(q, 0, BODY);                                                                                    \
      VALUE_AT(q, 1, BODY);                                                                                    \
      VALUE_AT(q, 2, BODY);                                                                                    \
      VALUE_AT(q, 3, BODY);                                                                                    \
      VALUE_AT(q, 4, BODY);                                                                                    \
      VALUE_AT(q, 5, BODY);                                                                                    \
      VALUE_AT(q, 6, BODY);                                                                                    \
      VALUE_AT(q, 7, BODY);                                                                                    \
      (q) += 8;                                                                                                \
      i_ += 8;                                                                                                 \
    } else {                                                                                                   \
      for (size_t e_ = i_ + 8; i_ < e_; i_++) {                                                                \
        const size_t i = i_;                                                                                   \
        const int one_ = 0;                                                                                    \
        (void)one_;                                                                                            \
        uint64_t u;                                                                                            \
        COL_ONE(q, u);                                                                                         \
        BODY;                                                                                                  \
      }                                                                                                        \
    }                                                                                                          \
  }

/* What the block's columns share: the dictionary, and what the enums column finds out. */
/* The entries a decoder's dictionary has at least, those past the chunk's marked NOT_AN_ENTRY
 * in has_addr: an index of one byte reads one without a test, and a larger one past the
 * dictionary reads the entry just past it. */
#define DICT_MIN 128
#define NOT_AN_ENTRY 2

typedef struct blk {
  const small *dict;
  size_t ndict;
  uint64_t wrong;    /* nonzero: a value out of range */
} blk;

/* The enums column: each event's small fields and padding, its seq, and in its address whether
 * it has one (rows_mixed reads it there and writes the address). */
static const unsigned char *col_enums(const unsigned char *q, blk *b, int64_t seq, sim_event *ev) {
  uint64_t seen = 0, none = 0;
  const small *dict = b->dict;
  size_t ndict = b->ndict;
  FOR_VALUES(q, {
    const small *e = &dict[one_ || u < ndict ? u : ndict];
    unsigned char *at = (unsigned char *)&ev[i] + SMALL_AT;
    memcpy(at, &e->bytes, 8);
    memcpy(at + 8, &none, 4); /* the padding, as sim_event_init leaves it */
    ev[i].seq = seq + (int64_t)i;
    ev[i].addr = e->has_addr; /* for rows_mixed: 1 when the addr column gives the event its address */
    seen |= e->has_addr;
  });
  b->wrong |= seen & NOT_AN_ENTRY;
  return q;
}

/* A column of differences from the previous event's value, into the field at offset off. */
static inline __attribute__((always_inline)) const unsigned char *col_diff(const unsigned char *q, int64_t *prev,
                                                                           size_t off, sim_event *ev) {
  uint64_t x = (uint64_t)*prev;
  FOR_VALUES(q, {
    x += (uint64_t)UNZZ(u);
    memcpy((unsigned char *)&ev[i] + off, &x, 8);
  });
  *prev = (int64_t)x;
  return q;
}

/* A column of values as they are, into the field at offset off; the values' bits or-ed into *seen. */
static inline __attribute__((always_inline)) const unsigned char *col_plain(const unsigned char *q, size_t off,
                                                                            uint64_t *seen, sim_event *ev) {
  uint64_t all = 0;
  FOR_VALUES(q, {
    all |= u;
    memcpy((unsigned char *)&ev[i] + off, &u, 8);
  });
  *seen |= all;
  return q;
}

/* The step column: differences, each step -1 or a 32-bit value. */
static const unsigned char *col_step(const unsigned char *q, blk *b, int64_t *prev, sim_event *ev) {
  uint64_t x = (uint64_t)*prev, wrong = 0;
  FOR_VALUES(q, {
    x += (uint64_t)UNZZ(u);
    wrong |= x + 1; /* checked below: from -1 to INT32_MAX - 1 (INT32_MAX is rare: the block by events) */
    ev[i].step = (int32_t)x;
  });
  *prev = (int64_t)x;
  b->wrong |= wrong >> 31;
  return q;
}

/*
 * The columns whose values mix lengths (ts, dur, addr, size, dev_ts, api_dur), event by event:
 * with six columns, rather than eleven, their positions and running values stay in registers,
 * and each column's branches on a value's length are told apart by the predictor.
 */
static const unsigned char *const *rows_mixed(run *r, blk *b, sim_event *ev) {
  const unsigned char *ts_p = r->p[C_TS], *dur_p = r->p[C_DUR], *addr_p = r->p[C_ADDR], *size_p = r->p[C_SIZE];
  const unsigned char *dev_p = r->p[C_DEVTS], *api_p = r->p[C_APIDUR];
  uint64_t ts = (uint64_t)r->ts, addr = r->addr, dev = (uint64_t)r->dev, wrong = 0, zero = 0;
  for (size_t i = 0; i < BLOCK; i++) {
    sim_event *v = &ev[i];
    uint64_t u;
    COL_ONE(ts_p, u);
    ts += (uint64_t)unzz(u);
    v->ts = (int64_t)ts;
    COL_ONE(dur_p, u);
    v->dur = unzz(u);
    if (v->addr) {
      COL_ONE(addr_p, u);
      addr += (uint64_t)unzz(u);
      zero |= !addr;
      v->addr = addr;
    }
    COL_ONE(size_p, u);
    v->size = u;
    COL_ONE(dev_p, u);
    if (u) dev += (uint64_t)unzz(u - 1);
    wrong |= dev;
    v->dev_ts = u ? (int64_t)dev : -1;
    COL_ONE(api_p, u);
    wrong |= (uint64_t)(u > (uint64_t)INT64_MAX + 1) << 63;
    v->api_dur = (int64_t)(u - 1);
  }
  r->p[C_TS] = ts_p;
  r->p[C_DUR] = dur_p;
  r->p[C_ADDR] = addr_p;
  r->p[C_SIZE] = size_p;
  r->p[C_DEVTS] = dev_p;
  r->p[C_APIDUR] = api_p;
  r->ts = (int64_t)ts;
  r->addr = addr;
  r->dev = (int64_t)dev;
  b->wrong |= wrong >> 63 | zero;
  return r->p;
}

/* Every column of a block: 0, or -1 when something in it is wrong (the events are then not all
 * written, nor r all moved). */
static int block_columns(run *r, blk *b, int64_t seq, sim_event *ev) {
  uint64_t big = 0;
  if (!(r->p[C_ENUMS] = col_enums(r->p[C_ENUMS], b, seq, ev)) || b->wrong) return -1;
  if (!(r->p[C_STREAM] = col_diff(r->p[C_STREAM], &r->stream, offsetof(sim_event, stream), ev))) return -1;
  if (!(r->p[C_STACK] = col_plain(r->p[C_STACK], offsetof(sim_event, stack), &big, ev))) return -1;
  if (!(r->p[C_NAME] = col_plain(r->p[C_NAME], offsetof(sim_event, name), &big, ev))) return -1;
  if (!(r->p[C_STEP] = col_step(r->p[C_STEP], b, &r->step, ev))) return -1;
  if (!rows_mixed(r, b, ev)) return -1;
  return b->wrong || big >> 63 ? -1 : 0;
}

/* Events ev[0 .. BLOCK) by columns, or when something in them is wrong, again event by event
 * from where the block started, so that the fault is the one decode_one names: F_OK or it. */
static int decode_block(run *r, const unsigned char *const *end, const small *dict, size_t ndict, int64_t seq,
                        sim_event *ev) {
  run start = *r;
  blk b = {.dict = dict, .ndict = ndict};
  if (!block_columns(r, &b, seq, ev)) return F_OK;
  *r = start;
  for (size_t i = 0; i < BLOCK; i++) {
    ev[i].seq = seq + (int64_t)i;
    int f = decode_one(r, end, 0, dict, ndict, &ev[i]);
    if (f != F_OK) return f;
  }
  return F_OK; /* what the columns left to it was in range after all (a step of INT32_MAX) */
}

/*
 * Events of the chunk in order: blocks far enough from the end of the bytes by columns
 * (decode_block), the rest, near the end, event by event with a bounds check a value. The last
 * events of the chunk also check that every column ends exactly where its values do.
 */
static int decode_events(store_chunk_dec *sd, dec *d, size_t k, int64_t seq, sim_event *ev) {
  run r = {.ts = sd->ts, .stream = sd->stream, .step = sd->step, .dev = sd->dev_ts, .addr = sd->addr};
  memcpy(r.p, sd->p, sizeof r.p);
  const small *dict = sd->dict;
  size_t ndict = sd->ndict, i = 0;
  const unsigned char *limit = sd->end[C__COUNT - 1]; /* the columns' last byte + 1 */
  int f = F_OK;
  for (; i + BLOCK <= k && block_fits(&r, limit); i += BLOCK)
    if ((f = decode_block(&r, sd->end, dict, ndict, seq + (int64_t)i, &ev[i])) != F_OK) return fault(d, f);
  for (int c = 0; c < C__COUNT; c++)
    if (r.p[c] > sd->end[c]) return bad(d, c, "is cut short");
  for (; i < k; i++) {
    ev[i].seq = seq + (int64_t)i;
    if ((f = decode_one(&r, sd->end, 1, dict, ndict, &ev[i])) != F_OK) return fault(d, f);
  }
  memcpy(sd->p, r.p, sizeof r.p);
  sd->ts = r.ts;
  sd->stream = r.stream;
  sd->step = r.step;
  sd->dev_ts = r.dev;
  sd->addr = r.addr;
  sd->done += k;
  if (sd->done == sd->n)
    for (int c = 0; c < C__COUNT; c++)
      if (r.p[c] != sd->end[c]) return bad(d, c, "holds more values than the chunk has events");
  return 0;
}

/* Reads a chunk's header and its dictionary of small fields: 0, or -1 with d->why. */
static int decode_open(dec *d, const unsigned char *p, size_t len, size_t n, sim_event **dict, size_t *ndict) {
  if (n > STORE_CHUNK_EVENTS) {
    snprintf(d->why, d->whylen, "it claims %zu events (a chunk holds at most %d)", n, STORE_CHUNK_EVENTS);
    return -1;
  }
  if (decode_header(d, p, len)) return -1;
  return decode_dict(d, n, dict, ndict);
}

int store_chunk_dec_open(store_chunk_dec *sd, const unsigned char *p, size_t len, size_t n, char *why,
                         size_t whylen) {
  dec d = {.why = why, .whylen = whylen};
  sim_event *dict = NULL;
  size_t ndict = 0;
  sd->n = sd->done = 0;
  int rc = decode_open(&d, p, len, n, &dict, &ndict);
  if (!rc) {
    size_t have = DICT_MIN > ndict + 1 ? DICT_MIN : ndict + 1;
    sim_grow((void **)&sd->dict, &sd->dict_cap, have, sizeof *sd->dict);
    small_from_dict(dict, ndict, sd->dict);
    for (size_t i = ndict; i < have; i++) sd->dict[i] = (small){.bytes = 0, .has_addr = NOT_AN_ENTRY};
    sd->ndict = ndict;
    memcpy(sd->p, d.p, sizeof sd->p);
    memcpy(sd->end, d.end, sizeof sd->end);
    sd->ts = sd->stream = sd->dev_ts = 0;
    sd->step = -1;
    sd->addr = 0;
    sd->n = n;
  }
  free(dict);
  return rc;
}

int store_chunk_dec_next(store_chunk_dec *sd, size_t k, int64_t seq, sim_event *ev, char *why, size_t whylen) {
  dec d = {.why = why, .whylen = whylen};
  if (k > sd->n - sd->done) {
    snprintf(why, whylen, "%zu events were asked of a chunk with %zu left", k, sd->n - sd->done);
    return -1;
  }
  int rc = decode_events(sd, &d, k, seq, ev);
  if (rc) sd->done = sd->n; /* nothing more comes of it */
  return rc;
}

void store_chunk_dec_release(store_chunk_dec *sd) {
  free(sd->dict);
  memset(sd, 0, sizeof *sd);
}

int store_chunk_decode(const unsigned char *p, size_t len, size_t n, int64_t seq0, sim_event *ev, char *why,
                       size_t whylen) {
  store_chunk_dec sd = {0};
  int rc = store_chunk_dec_open(&sd, p, len, n, why, whylen);
  if (!rc) rc = store_chunk_dec_next(&sd, n, seq0, ev, why, whylen);
  store_chunk_dec_release(&sd);
  return rc;
}

int store_chunk_copies(const unsigned char *p, size_t len, size_t n, void (*fn)(void *arg, const sim_event *ev),
                       void *arg, char *why, size_t whylen) {
  dec d = {.why = why, .whylen = whylen};
  sim_event *dict = NULL;
  size_t ndict = 0;
  int rc = decode_open(&d, p, len, n, &dict, &ndict);
  for (size_t i = 0; i < n && !rc; i++) {
    uint64_t u, dur, size;
    if (get(&d.p[C_ENUMS], d.end[C_ENUMS], &u) || u >= ndict) rc = bad(&d, C_ENUMS, "does not decode");
    else if (get(&d.p[C_DUR], d.end[C_DUR], &dur)) rc = bad(&d, C_DUR, "is cut short");
    else if (get(&d.p[C_SIZE], d.end[C_SIZE], &size)) rc = bad(&d, C_SIZE, "is cut short");
    else if (dict[u].kind == SIM_EV_MEMCPY) {
      sim_event ev = {.kind = SIM_EV_MEMCPY, .mem = dict[u].mem, .dir = dict[u].dir, .size = size, .dur = unzz(dur)};
      fn(arg, &ev);
    }
  }
  free(dict);
  return rc;
}

/* ---- the text form ------------------------------------------------------------------------------ */

/* The bases a chunk's text counts times and addresses from (store_text): ts0 the first event's ts,
 * unless some ts or dev_ts less it does not fit 64 bits; addr0 one less than the lowest address
 * (taken as signed, as SQL reads it), so that every address left is at least 1 and 0 still says
 * "none", unless the spread of the addresses does not fit. */
static void text_bases(const sim_event *ev, size_t n, int64_t *ts0, int64_t *addr0) {
  int64_t t0 = n ? ev[0].ts : 0, lo = INT64_MAX, hi = INT64_MIN, d;
  int fits = 1;
  for (size_t i = 0; i < n; i++) {
    fits &= !__builtin_sub_overflow(ev[i].ts, t0, &d);
    if (ev[i].dev_ts >= 0) fits &= !__builtin_sub_overflow(ev[i].dev_ts, t0, &d);
    if (ev[i].addr) {
      int64_t a = (int64_t)ev[i].addr;
      lo = a < lo ? a : lo;
      hi = a > hi ? a : hi;
    }
  }
  *ts0 = fits ? t0 : 0;
  *addr0 = lo != INT64_MAX && lo != INT64_MIN && !__builtin_sub_overflow(hi, lo - 1, &d) ? lo - 1 : 0;
}

/* An event's fields in the text's order (store_text). */
enum {
  TX_TS, TX_INFO, TX_SIZE, TX_ADDR, TX_STACK, TX_STEP, TX_APIDUR, TX_DEVICE, TX_DUR, TX_NAME, TX_STREAM, TX_DEVTS,
  TX__N
};

void store_chunk_text(const sim_event *ev, size_t n, store_text *out) {
  text_bases(ev, n, &out->ts0, &out->addr0);
  sim_grow((void **)&out->rows.p, &out->rows.cap, n * TX__N * 21 + 3, 1);
  char *o = (char *)out->rows.p;
  *o++ = '[';
  for (size_t i = 0; i < n; i++) {
    const sim_event *v = &ev[i];
    int64_t f[TX__N] = {[TX_TS] = v->ts - out->ts0,
                        [TX_INFO] = (int64_t)(enum_key(v) & 0xFFFFFFFFu),
                        [TX_SIZE] = (int64_t)v->size,
                        [TX_ADDR] = v->addr ? (int64_t)v->addr - out->addr0 : 0,
                        [TX_STACK] = v->stack > 0 ? v->stack : 0,
                        [TX_STEP] = v->step < 0 ? 0 : (int64_t)v->step + 1,
                        [TX_DEVICE] = v->device,
                        [TX_DUR] = v->dur,
                        [TX_NAME] = v->name > 0 ? v->name : 0,
                        [TX_STREAM] = v->stream,
                        [TX_APIDUR] = v->api_dur < 0 ? 0 : (int64_t)((uint64_t)v->api_dur + 1),
                        [TX_DEVTS] = v->dev_ts >= 0 ? v->dev_ts - out->ts0 : 0};
    int last = TX_DEVTS; /* a known dev_ts is written, whatever its value; an unknown one left off */
    if (v->dev_ts < 0)
      for (last = TX_STREAM; last > TX_INFO && !f[last];) last--;
    if (i) *o++ = ',';
    *o++ = '[';
    for (int k = 0; k <= last; k++) {
      if (k) *o++ = ',';
      o = decimal_i64(o, f[k]);
    }
    *o++ = ']';
  }
  *o++ = ']';
  out->rows.n = (size_t)(o - (char *)out->rows.p);
}
