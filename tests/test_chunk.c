/* test_chunk.c: the store's chunks of events: packing and unpacking (one-byte runs broken anywhere, faults inside blocks), damage found, reading ranges and lent chunks, writer stops and category changes, the copy fit's kept sums. */
#include <unistd.h>

#include "sim/copyfit.h"
#include "store/chunk.h"
#include "store/store.h"
#include "test.h"

int test_failures;

static char dir[256];

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Events with every field at awkward values: extremes, absent values, big jumps. */
static void awkward_events(sim_event *ev, size_t n) {
  for (size_t i = 0; i < n; i++) {
    sim_event *e = &ev[i];
    sim_event_init(e);
    e->seq = (int64_t)i;
    uint64_t r = next_rand();
    switch (r % 6) {
    case 0: e->ts = INT64_MIN + (int64_t)(r >> 40); break;
    case 1: e->ts = INT64_MAX - (int64_t)(r >> 40); break;
    default: e->ts = (int64_t)i * 1000 + (int64_t)(r % 7);
    }
    e->dur = r % 5 == 0 ? INT64_MIN : (int64_t)(r >> 50);
    e->addr = r % 3 == 0 ? 0 : r % 7 == 0 ? UINT64_MAX - (r >> 60) : r % 11 == 0 ? (UINT64_C(1) << 63) : (r >> 20);
    e->size = r % 13 == 0 ? UINT64_MAX : r >> 30;
    e->stream = r % 17 == 0 ? INT64_MIN : r % 2 ? -1 : (int64_t)(r >> 61);
    e->stack = r % 4 == 0 ? 0 : (int64_t)(r >> 45);
    e->name = r % 5 == 0 ? INT64_MAX : (int64_t)(r >> 58);
    e->step = r % 3 == 0 ? -1 : r % 19 == 0 ? INT32_MAX : (int32_t)(i / 100);
    e->dev_ts = r % 3 == 0 ? -1 : r % 23 == 0 ? INT64_MAX : (int64_t)(r >> 34);
    e->api_dur = r % 2 ? -1 : r % 29 == 0 ? INT64_MAX : (int64_t)(r >> 50);
    e->device = (int16_t)(r % 31 == 0 ? INT16_MIN : r % 37 == 0 ? INT16_MAX : (int)(r >> 62) - 1);
    e->kind = (uint8_t)(1 + r % 13);
    e->mem = (uint8_t)(r >> 8 & 15);
    e->dir = (uint8_t)(r >> 12 & 15);
    e->category = (uint8_t)(r >> 16 & 15);
    e->cat_source = (uint8_t)(r >> 20 & 15);
    e->flags = (uint8_t)(r >> 24);
  }
}

static void packs_and_unpacks_exactly(void) {
  static sim_event in[STORE_CHUNK_EVENTS], out[STORE_CHUNK_EVENTS];
  store_chunk_enc enc = {0};
  store_bytes blob = {0};
  char why[256];
  size_t sizes[] = {1, 2, 100, STORE_CHUNK_EVENTS};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    awkward_events(in, n);
    store_chunk_encode(&enc, in, n, &blob);
    memset(out, 0xAB, n * sizeof *out);
    CHECK_EQ(store_chunk_decode(blob.p, blob.n, n, 0, out, why, sizeof why), 0);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += memcmp(&in[i], &out[i], sizeof in[i]) != 0;
    CHECK_EQ(differ, 0);
    /* the wrong count, a byte short, a byte more: errors, never a crash */
    CHECK_EQ(store_chunk_decode(blob.p, blob.n, n + 1, 0, out, why, sizeof why), -1);
    if (n > 1) CHECK_EQ(store_chunk_decode(blob.p, blob.n, n - 1, 0, out, why, sizeof why), -1);
    CHECK_EQ(store_chunk_decode(blob.p, blob.n - 1, n, 0, out, why, sizeof why), -1);
    CHECK(strlen(why) > 0);
  }
  /* absent values keep the store's conventions */
  sim_event e;
  sim_event_init(&e);
  e.stack = -5;
  e.name = -1;
  e.step = -7;
  e.dev_ts = -3;
  e.api_dur = -9;
  store_chunk_encode(&enc, &e, 1, &blob);
  CHECK_EQ(store_chunk_decode(blob.p, blob.n, 1, 42, out, why, sizeof why), 0);
  CHECK_EQ(out[0].seq, 42);
  CHECK_EQ(out[0].stack, 0);
  CHECK_EQ(out[0].name, 0);
  CHECK_EQ(out[0].step, -1);
  CHECK_EQ(out[0].dev_ts, -1);
  CHECK_EQ(out[0].api_dur, -1);
  store_bytes_release(&blob);
  store_chunk_enc_release(&enc);
}

/* Events of small values (one-byte varints, nearly all of a real trace) whose last event has the
 * largest value in every column: a ten-byte varint at the very end of each column. */
static void small_events_big_last(sim_event *ev, size_t n) {
  for (size_t i = 0; i < n; i++) {
    sim_event *e = &ev[i];
    sim_event_init(e);
    e->seq = (int64_t)i;
    e->ts = (int64_t)i * 3;
    e->dur = (int64_t)(i % 5);
    e->kind = (uint8_t)(1 + i % 3);
    e->device = 0;
    e->addr = i % 2 ? 4096 + 64 * i : 0;
    e->size = i % 7;
    e->stream = (int64_t)(i % 2);
    e->step = (int32_t)(i / 1000);
  }
  sim_event *e = &ev[n - 1];
  e->ts = INT64_MAX;
  e->dur = INT64_MIN;
  e->addr = UINT64_MAX;
  e->size = UINT64_MAX;
  e->stream = INT64_MIN;
  e->stack = INT64_MAX;
  e->name = INT64_MAX;
  e->step = INT32_MAX;
  e->dev_ts = INT64_MAX;
  e->api_dur = INT64_MAX;
}

static unsigned char *put_varint(unsigned char *o, uint64_t v) {
  for (; v >= 0x80; v >>= 7) *o++ = (unsigned char)(v | 0x80);
  *o++ = (unsigned char)v;
  return o;
}

/* The decoder reads blocks of events far from the end without a bounds check a value, the rest
 * with them: every count around a block's size decodes exactly; a column one byte short (its
 * neighbour one byte longer) is an error; and damaged bytes, in a buffer of exactly their size
 * (the sanitizer build sees any read past it), are an error or decode, never a crash. */
static void decodes_near_every_edge(void) {
  static sim_event in[STORE_CHUNK_EVENTS], out[STORE_CHUNK_EVENTS];
  store_chunk_enc enc = {0};
  store_bytes blob = {0};
  char why[256];
  size_t sizes[] = {1, 31, 32, 33, 63, 64, 65, 320, 321, 1000, STORE_CHUNK_EVENTS - 1, STORE_CHUNK_EVENTS};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    small_events_big_last(in, n);
    store_chunk_encode(&enc, in, n, &blob);
    memset(out, 0xAB, n * sizeof *out);
    CHECK_EQ(store_chunk_decode(blob.p, blob.n, n, 0, out, why, sizeof why), 0);
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) differ += memcmp(&in[i], &out[i], sizeof in[i]) != 0;
    CHECK_EQ(differ, 0);
  }
  /* the boundary between two columns moved by a byte, each way, for every pair of columns */
  size_t n = 1000;
  small_events_big_last(in, n);
  store_chunk_encode(&enc, in, n, &blob);
  const unsigned char *q = blob.p;
  uint64_t lens[11];
  for (int c = 0; c < 11; c++) {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      v |= (uint64_t)(*q & 0x7f) << shift;
      if (*q++ < 0x80) break;
    }
    lens[c] = v;
  }
  size_t body = blob.n - (size_t)(q - blob.p);
  unsigned char *moved = malloc(blob.n + 16);
  int errors = 0, tries = 0;
  for (int c = 0; c + 1 < 11; c++)
    for (int way = -1; way <= 1; way += 2) {
      if ((way < 0 && !lens[c]) || (way > 0 && !lens[c + 1])) continue;
      unsigned char *o = moved;
      for (int j = 0; j < 11; j++) o = put_varint(o, lens[j] + (uint64_t)(j == c ? way : j == c + 1 ? -way : 0));
      memcpy(o, q, body);
      size_t len = (size_t)(o - moved) + body;
      unsigned char *exact = malloc(len);
      memcpy(exact, moved, len);
      tries++;
      errors += store_chunk_decode(exact, len, n, 0, out, why, sizeof why) == -1;
      free(exact);
    }
  CHECK_EQ(errors, tries);
  free(moved);
  /* damaged bytes */
  n = 1024;
  small_events_big_last(in, n);
  store_chunk_encode(&enc, in, n, &blob);
  int decoded = 0;
  for (int t = 0; t < 400; t++) {
    unsigned char *exact = malloc(blob.n);
    memcpy(exact, blob.p, blob.n);
    uint64_t r = next_rand();
    exact[r % blob.n] ^= (unsigned char)(1 + (r >> 32) % 255);
    if (t % 2) exact[(r >> 16) % blob.n] = 0xFF; /* a run of continuation bytes */
    decoded += store_chunk_decode(exact, blob.n, n, 0, out, why, sizeof why) == 0;
    free(exact);
  }
  CHECK(decoded < 400);
  store_bytes_release(&blob);
  store_chunk_enc_release(&enc);
}

/* Decodes a copy of blob of exactly its size (the sanitizer build sees any read past it) in
 * slices of k events: 0, or -1 with why. */
static int decode_in_slices(const store_bytes *blob, size_t n, size_t k, sim_event *out, char *why, size_t whylen) {
  unsigned char *exact = malloc(blob->n ? blob->n : 1);
  memcpy(exact, blob->p, blob->n);
  store_chunk_dec d = {0};
  int rc = store_chunk_dec_open(&d, exact, blob->n, n, why, whylen);
  for (size_t i = 0; i < n && !rc; i += k)
    rc = store_chunk_dec_next(&d, i + k <= n ? k : n - i, (int64_t)i, &out[i], why, whylen);
  store_chunk_dec_release(&d);
  free(exact);
  return rc;
}

/* Events of one-byte values in every column (the words of eight that the decoder reads at once),
 * the enums' dictionary of 130 entries so that the last entries' indices take two bytes. Blocks
 * are read by columns only 320 bytes from the end of the last column (api_dur). */
static void one_byte_events(sim_event *ev, size_t n) {
  for (size_t i = 0; i < n; i++) {
    sim_event *e = &ev[i];
    sim_event_init(e);
    e->seq = (int64_t)i;
    e->kind = SIM_EV_KERNEL;
    e->device = 0;
    e->flags = (uint8_t)(i < 130 ? i : 0);
    e->ts = (int64_t)i * 20;
    e->dur = 3;
    e->size = 5;
    e->stack = 7;
    e->name = 9;
    e->step = 0;
    e->dev_ts = (int64_t)i * 20 + 1;
    e->api_dur = 2;
  }
}

/* Sets event e's field f (0: the enums, then ts, dur, addr, size, stream, stack, name, step,
 * dev_ts, api_dur) to a value whose varint takes len bytes (len 2: an index past 127). */
static void widen_field(sim_event *e, int f, int len) {
  uint64_t big = UINT64_C(1) << (7 * (len - 1)), zbig = big >> 1; /* zigzag: twice the magnitude */
  switch (f) {
  case 0: e->flags = 129; break;
  case 1: e->ts += (int64_t)zbig; break;
  case 2: e->dur = (int64_t)zbig; break;
  case 3: e->addr = big; break;
  case 4: e->size = big; break;
  case 5: e->stream = (int64_t)zbig; break;
  case 6: e->stack = (int64_t)(big < (uint64_t)INT64_MAX ? big : (uint64_t)INT64_MAX); break;
  case 7: e->name = (int64_t)(big < (uint64_t)INT64_MAX ? big : (uint64_t)INT64_MAX); break;
  case 8: e->step = (int32_t)(zbig < INT32_MAX ? zbig : INT32_MAX); break;
  case 9: e->dev_ts += (int64_t)(zbig < (uint64_t)INT64_MAX / 2 ? zbig : (uint64_t)INT64_MAX / 2); break;
  default: e->api_dur = (int64_t)(big < (uint64_t)INT64_MAX ? big : (uint64_t)INT64_MAX); break;
  }
}

/* Runs of one-byte values broken by one longer value at each position of an eight-byte word, in
 * each column, of every length; columns ending in the middle of a word; read whole and in
 * slices that start anywhere in a block: every event decodes exactly. */
static void one_byte_runs_broken_anywhere(void) {
  enum { N = 1200 }; /* events 160 .. 270 are read column by column: 320 bytes from the end */
  static sim_event in[N], out[N];
  store_chunk_enc enc = {0};
  store_bytes blob = {0};
  char why[256];
  int lens[] = {2, 3, 5, 8, 9, 10}, wrong = 0, tried = 0;
  for (int f = 0; f < 11; f++)
    for (int at = 0; at < 8; at++)
      for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
        if (f == 0 && l) continue; /* an index has one length past 127 here */
        one_byte_events(in, N);
        widen_field(&in[160 + at], f, lens[l]);
        widen_field(&in[200 + 8 * at + at], f, lens[l]); /* and one in another block, by itself */
        store_chunk_encode(&enc, in, N, &blob);
        size_t k = l % 2 ? 37 : N;
        memset(out, 0xAB, sizeof out);
        tried++;
        if (decode_in_slices(&blob, N, k, out, why, sizeof why) || memcmp(in, out, sizeof in)) wrong++;
      }
  CHECK_EQ(wrong, 0);
  CHECK_EQ(tried, 11 * 8 * 6 - 8 * 5);
  /* columns that end at each position of a word, read at once and a few events at a time; the
   * last column's values of ten bytes, so that all but the last 32 events are read by columns */
  wrong = 0;
  for (size_t n = 320; n < 345; n++) {
    one_byte_events(in, n);
    for (size_t i = 0; i < n; i++) in[i].api_dur = INT64_MAX - (int64_t)i;
    store_chunk_encode(&enc, in, n, &blob);
    for (size_t k = 1; k <= 64; k += 9) {
      memset(out, 0xAB, sizeof out);
      if (decode_in_slices(&blob, n, k == 64 ? n : k, out, why, sizeof why) || memcmp(in, out, n * sizeof *in))
        wrong++;
    }
  }
  CHECK_EQ(wrong, 0);
  store_bytes_release(&blob);
  store_chunk_enc_release(&enc);
}

/* A chunk of HAND_N events written by hand, column by column: one-byte values but for the bytes
 * given for event at of column col, and for event at2 of column col2 (-1: none). */
enum { HAND_N = 1024 }; /* events 64 .. 72 are read column by column: 320 bytes from the end */
static void hand_chunk2(store_bytes *out, int col, size_t at, const unsigned char *bytes, size_t nbytes, int col2,
                        size_t at2, const unsigned char *bytes2, size_t nbytes2) {
  static unsigned char cols[11][HAND_N * 12 + 16];
  size_t len[11];
  for (int c = 0; c < 11; c++) {
    unsigned char *o = cols[c];
    if (c == 0) o = put_varint(put_varint(o, 1), 7 | UINT64_C(1) << 32); /* one entry: a kernel on device 0 */
    for (size_t i = 0; i < HAND_N; i++) {
      if (c == col && i == at) {
        memcpy(o, bytes, nbytes);
        o += nbytes;
      } else if (c == col2 && i == at2) {
        memcpy(o, bytes2, nbytes2);
        o += nbytes2;
      } else if (c != 3) { /* no event has an address */
        *o++ = c == 8 && i == 0 ? 2 : 0; /* step: 0 from the first event on */
      }
    }
    len[c] = (size_t)(o - cols[c]);
  }
  out->n = 0;
  size_t need = 11 * 10 + 11 * sizeof cols[0];
  if (out->cap < need) {
    out->p = realloc(out->p, need);
    out->cap = need;
  }
  unsigned char *o = out->p;
  for (int c = 0; c < 11; c++) o = put_varint(o, len[c]);
  for (int c = 0; c < 11; c++) {
    memcpy(o, cols[c], len[c]);
    o += len[c];
  }
  out->n = (size_t)(o - out->p);
}
static void hand_chunk(store_bytes *out, int col, size_t at, const unsigned char *bytes, size_t nbytes) {
  hand_chunk2(out, col, at, bytes, nbytes, -1, 0, NULL, 0);
}

/* A value out of range, an index past the dictionary, a value past 64 bits: inside a block that
 * the decoder reads column by column, at each position of a word, each is the same named error
 * as event by event; two faults in a block name the first event's; a step of INT32_MAX, which
 * the columns leave to the events, decodes. */
static void faults_inside_blocks_named(void) {
  static sim_event out[HAND_N];
  store_bytes blob = {0};
  char why[256];
  static const unsigned char past64[] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F};
  unsigned char big[10], *e;
  struct {
    int col;
    const char *want;
  } cases[] = {{0, "its enums column names an entry its dictionary lacks"},
               {6, "its stack column holds a value out of range"},
               {7, "its name column holds a value out of range"},
               {8, "its step column holds a value out of range"},
               {9, "its dev_ts column holds a value out of range"},
               {10, "its api_dur column holds a value out of range"},
               {2, "its dur column is cut short"},
               {1, "its ts column is cut short"}};
  int wrong = 0;
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
    for (size_t at = 64; at < 72; at++) {
      int c = cases[k].col;
      const unsigned char *bytes = big;
      size_t nbytes;
      switch (c) {
      case 0: nbytes = (size_t)(put_varint(big, 1) - big); break;                                /* entry 1 of 1 */
      case 6: case 7: nbytes = (size_t)(put_varint(big, UINT64_C(1) << 63) - big); break;        /* > INT64_MAX */
      case 8: nbytes = (size_t)(put_varint(big, 3) - big); break;                                /* step 0 - 2 */
      case 9: e = put_varint(big, 1 + 3); nbytes = (size_t)(e - big); break;                     /* dev_ts -2 */
      case 10: nbytes = (size_t)(put_varint(big, (UINT64_C(1) << 63) + 2) - big); break;         /* > INT64_MAX + 1 */
      default: bytes = past64; nbytes = sizeof past64;
      }
      /* a step or dev_ts of -2 that the next event's difference brings back to 0: out of range
       * only inside the block */
      static const unsigned char back_step[] = {4}, back_dev[] = {5};
      if (c == 8 || c == 9) hand_chunk2(&blob, c, at, bytes, nbytes, c, at + 1, c == 8 ? back_step : back_dev, 1);
      else hand_chunk(&blob, c, at, bytes, nbytes);
      why[0] = 0;
      if (decode_in_slices(&blob, HAND_N, HAND_N, out, why, sizeof why) != -1 || strcmp(why, cases[k].want)) {
        fprintf(stderr, "column %d, event %zu: \"%s\"\n", c, at, why);
        wrong++;
      }
    }
  CHECK_EQ(wrong, 0);
  /* two faults in a block: the first event's (api_dur) is named, not the first column's */
  static const unsigned char api_big[] = {0x82, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
  e = put_varint(big, UINT64_C(1) << 63);
  hand_chunk2(&blob, 6, 71, big, (size_t)(e - big), 10, 70, api_big, sizeof api_big);
  CHECK_EQ(decode_in_slices(&blob, HAND_N, HAND_N, out, why, sizeof why), -1);
  CHECK_STR(why, "its api_dur column holds a value out of range");
  hand_chunk2(&blob, 6, 69, big, (size_t)(e - big), 10, 70, api_big, sizeof api_big);
  CHECK_EQ(decode_in_slices(&blob, HAND_N, HAND_N, out, why, sizeof why), -1);
  CHECK_STR(why, "its stack column holds a value out of range");
  /* a step of INT32_MAX is in range */
  e = put_varint(big, (uint64_t)INT32_MAX * 2);
  hand_chunk(&blob, 8, 77, big, (size_t)(e - big));
  CHECK_EQ(decode_in_slices(&blob, HAND_N, 50, out, why, sizeof why), 0);
  CHECK_EQ(out[77].step, INT32_MAX);
  CHECK_EQ(out[78].step, INT32_MAX);
  CHECK_EQ(out[76].step, 0);
  store_bytes_release(&blob);
}

static void text_form_reads_as_sql_does(void) {
  sim_event e[2];
  sim_event_init(&e[0]);
  e[0].ts = 5;
  e[0].kind = SIM_EV_ALLOC;
  e[0].mem = SIM_MEM_DEVICE;
  e[0].device = 0;
  e[0].size = 512;
  e[0].addr = 4096;
  e[0].stack = 3;
  e[1] = e[0];
  e[1].kind = SIM_EV_KERNEL;
  e[1].size = e[1].addr = 0;
  e[1].stack = 0;
  e[1].api_dur = 7;
  /* times from the first event's, addresses from one below the lowest */
  store_text text = {0};
  store_chunk_text(e, 2, &text);
  CHECK_EQ(text.ts0, 5);
  CHECK_EQ(text.addr0, 4095);
  CHECK_EQ(text.rows.n, strlen("[[0,257,512,1,3],[0,263,0,0,0,0,8]]"));
  CHECK(!memcmp(text.rows.p, "[[0,257,512,1,3],[0,263,0,0,0,0,8]]", text.rows.n));
  /* a known dev_ts equal to the base is written (an unknown one is left off) */
  e[1].dev_ts = 5;
  store_chunk_text(e, 2, &text);
  CHECK_EQ(text.rows.n, strlen("[[0,257,512,1,3],[0,263,0,0,0,0,8,0,0,0,0,0]]"));
  CHECK(!memcmp(text.rows.p, "[[0,257,512,1,3],[0,263,0,0,0,0,8,0,0,0,0,0]]", text.rows.n));
  /* addresses whose spread does not fit 64 bits (as SQL reads them, signed) count from 0 */
  e[1].addr = UINT64_C(0x8000000000000000);
  store_chunk_text(e, 2, &text);
  CHECK_EQ(text.addr0, 0);
  CHECK(!memcmp(text.rows.p, "[[0,257,512,4096,3],[0,263,0,-9223372036854775808,", 50));
  e[1].addr = UINT64_C(0xfffffffffffff000); /* -4096: the spread fits */
  store_chunk_text(e, 2, &text);
  CHECK_EQ(text.addr0, -4097);
  CHECK(!memcmp(text.rows.p, "[[0,257,512,8193,3],[0,263,0,1,", 31));
  /* numbers at their extremes, and every field present */
  sim_event x;
  sim_event_init(&x);
  x.ts = INT64_MIN;
  x.kind = SIM_EV_ALLOC;
  x.device = 32767;
  x.size = UINT64_C(10000000000000000000);
  x.addr = UINT64_C(999999999999999999);
  x.stream = INT64_MAX;
  x.dur = 100;
  x.stack = 9;
  x.name = 10;
  x.step = 0;
  x.dev_ts = 1;
  x.api_dur = 0;
  store_chunk_text(&x, 1, &text);
  /* dev_ts less the first ts does not fit 64 bits: times count from 0 */
  const char *want = "[[-9223372036854775808,1,-8446744073709551616,1,9,1,1,32767,100,10,9223372036854775807,1]]";
  CHECK_EQ(text.ts0, 0);
  CHECK_EQ(text.addr0, 999999999999999998);
  CHECK_EQ(text.rows.n, strlen(want));
  CHECK(!memcmp(text.rows.p, want, text.rows.n));
  store_text_release(&text);
}

static store *open_new(const char *name) {
  char p[512], err[STORE_ERRLEN];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  unlink(p);
  store *s = NULL;
  if (store_open(&s, p, STORE_CREATE, err, sizeof err)) fprintf(stderr, "%s\n", err);
  return s;
}

/* A trace of n events whose fields follow from their seq; the writer stopped (flushed) at each
 * seq in stops, mid-chunk, and started again. */
static int64_t write_trace(store *s, const char *name, int64_t n, const int64_t *stops, size_t nstops) {
  char format[] = "generated", nm[64];
  snprintf(nm, sizeof nm, "%s", name);
  store_trace meta = {.name = nm, .source_format = format, .device_index = -1};
  store_writer *w;
  if (store_begin(s) || store_writer_begin(s, &meta, &w)) return -1;
  size_t k = 0;
  for (int64_t i = 0; i < n; i++) {
    if (k < nstops && stops[k] == i) {
      CHECK_EQ(store_writer_flush(w), 0);
      k++;
    }
    sim_event ev;
    sim_event_init(&ev);
    ev.kind = i % 2 ? SIM_EV_FREE : SIM_EV_ALLOC;
    ev.device = 0;
    ev.mem = SIM_MEM_DEVICE;
    ev.ts = i * 10;
    ev.addr = (uint64_t)(i / 2 + 1) * 512;
    ev.size = ev.kind == SIM_EV_ALLOC ? 512 : 0;
    if (store_writer_event(w, &ev)) return -1;
  }
  int64_t id = store_writer_trace_id(w);
  if (store_writer_end(w) || store_commit(s)) return -1;
  return id;
}

static void on_fault(void *arg, const char *msg) {
  char *out = arg;
  if (!out[0]) snprintf(out, 512, "%s", msg);
}

static void reads_ranges_and_lends_chunks(void) {
  store *s = open_new("read.db");
  CHECK(s != NULL);
  if (!s) return;
  const int64_t n = 3 * STORE_CHUNK_EVENTS + 123;
  const int64_t stops[] = {5, STORE_CHUNK_EVENTS + 7, 2 * STORE_CHUNK_EVENTS}; /* part-filled chunks written again */
  int64_t id = write_trace(s, "t", n, stops, 3);
  CHECK(id > 0);
  store_reader *r;
  /* lent a slice of a chunk at a time, every event once and in order */
  CHECK_EQ(store_reader_open(s, id, &r), 0);
  const sim_event *v;
  ptrdiff_t k;
  int64_t seen = 0, wrong = 0, views = 0;
  while ((k = store_reader_view(r, &v)) > 0) {
    views++;
    wrong += k > STORE_READER_SLICE || (seen >> STORE_CHUNK_SHIFT) != ((seen + k - 1) >> STORE_CHUNK_SHIFT);
    for (ptrdiff_t i = 0; i < k; i++, seen++)
      wrong += v[i].seq != seen || v[i].ts != seen * 10 || v[i].addr != (uint64_t)(seen / 2 + 1) * 512;
    store_reader_advance(r, (size_t)k);
  }
  CHECK_EQ(k, 0);
  CHECK_EQ(seen, n);
  CHECK_EQ(wrong, 0);
  CHECK_EQ(views, 3 * ((STORE_CHUNK_EVENTS + STORE_READER_SLICE - 1) / STORE_READER_SLICE) +
                      (123 + STORE_READER_SLICE - 1) / STORE_READER_SLICE);
  store_reader_close(r);
  /* ranges starting and ending on and across chunk boundaries */
  const int64_t ranges[][2] = {{0, 1},
                               {STORE_CHUNK_EVENTS - 1, STORE_CHUNK_EVENTS + 1},
                               {STORE_CHUNK_EVENTS, 2 * STORE_CHUNK_EVENTS},
                               {2 * STORE_CHUNK_EVENTS + 5, -1},
                               /* inside a chunk, across and on the reader's slices */
                               {STORE_CHUNK_EVENTS + 2 * STORE_READER_SLICE + 3, 2 * STORE_CHUNK_EVENTS + STORE_READER_SLICE + 1},
                               {STORE_READER_SLICE, 2 * STORE_READER_SLICE},
                               {STORE_READER_SLICE - 1, STORE_READER_SLICE + 1},
                               {n - 1, n + 100},
                               {n - 5, n - 5},
                               {n + 5, -1}, /* past the end: no events, no error */
                               {n, -1}};
  for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
    CHECK_EQ(store_reader_range(s, id, ranges[i][0], ranges[i][1], &r), 0);
    sim_event ev;
    int64_t expect = ranges[i][0], end = ranges[i][1] < 0 || ranges[i][1] > n ? n : ranges[i][1];
    if (end < expect) end = expect; /* nothing to read */
    int got;
    while ((got = store_reader_next(r, &ev)) == 1) CHECK_EQ(ev.seq, expect++);
    CHECK_EQ(got, 0);
    CHECK_EQ(expect, end);
    store_reader_close(r);
  }
  /* category changes across chunks */
  uint64_t changes[] = {(uint64_t)(STORE_CHUNK_EVENTS + 2) << 8 | SIM_CAT_ACTIVATION | SIM_CATSRC_USER << 4,
                        (uint64_t)0 << 8 | SIM_CAT_PARAMETER | SIM_CATSRC_USER << 4};
  CHECK_EQ(store_begin(s), 0);
  CHECK_EQ(store_set_categories(s, id, changes, 2), 0);
  CHECK_EQ(store_commit(s), 0);
  CHECK_EQ(store_reader_range(s, id, STORE_CHUNK_EVENTS + 2, STORE_CHUNK_EVENTS + 3, &r), 0);
  sim_event ev;
  CHECK_EQ(store_reader_next(r, &ev), 1);
  CHECK_EQ(ev.category, SIM_CAT_ACTIVATION);
  CHECK_EQ(ev.cat_source, SIM_CATSRC_USER);
  store_reader_close(r);
  store_check_totals tot = {0};
  store_trace t;
  char fault[512] = "";
  CHECK_EQ(store_trace_find(s, "t", &t), 0);
  CHECK_EQ(store_check_trace(s, &t, on_fault, fault, &tot), 0);
  CHECK_EQ(tot.faults, 0);
  CHECK_EQ(tot.chunks, 4);
  CHECK_EQ(tot.events, n);
  store_trace_clear(&t);
  store_close(s);
}

static void damage_is_an_error_naming_trace_and_chunk(void) {
  store *s = open_new("bad.db");
  CHECK(s != NULL);
  if (!s) return;
  int64_t id = write_trace(s, "victim", 2 * STORE_CHUNK_EVENTS + 10, NULL, 0);
  CHECK(id > 0);
  /* one byte of chunk 1 changed */
  CHECK_EQ(store_exec(s, "UPDATE event_chunks SET data = CAST(substr(data, 1, 40) || X'5A' || substr(data, 42) AS BLOB) "
                         "WHERE chunk = 1 AND substr(data, 41, 1) != X'5A'"),
           0);
  store_reader *r;
  CHECK_EQ(store_reader_open(s, id, &r), 0);
  sim_event ev;
  int got;
  int64_t n = 0;
  while ((got = store_reader_next(r, &ev)) == 1) n++;
  CHECK_EQ(got, -1);
  CHECK_EQ(n, STORE_CHUNK_EVENTS); /* the first chunk, then the error */
  CHECK(strstr(store_error(s), "trace 'victim'") != NULL);
  CHECK(strstr(store_error(s), "chunk 1 ") != NULL);
  CHECK(strstr(store_error(s), "checksum") != NULL);
  store_reader_close(r);
  char fault[512] = "";
  store_check_totals tot = {0};
  store_trace t;
  CHECK_EQ(store_trace_find(s, "victim", &t), 0);
  CHECK_EQ(store_check_trace(s, &t, on_fault, fault, &tot), 0);
  CHECK(tot.faults >= 1);
  CHECK(strstr(fault, "chunk 1") != NULL);
  store_trace_clear(&t);
  store_close(s);
}

/* A copy with awkward values (sizes up to 8 GiB, so that the sums of squares round), or now and
 * then an event the fit does not count: an allocation, a copy without a duration or a size. */
static void awkward_copy(sim_event *ev, int64_t i) {
  static const uint8_t dirs[] = {SIM_COPY_H2D, SIM_COPY_D2H, SIM_COPY_D2D, SIM_COPY_P2P, SIM_COPY_H2D};
  static const uint8_t mems[] = {SIM_MEM_PINNED, SIM_MEM_PAGEABLE, SIM_MEM_DEVICE, SIM_MEM_UNKNOWN};
  uint64_t r = next_rand();
  sim_event_init(ev);
  ev->ts = i * 100;
  ev->device = 0;
  ev->kind = r % 7 == 0 ? SIM_EV_ALLOC : SIM_EV_MEMCPY;
  ev->dir = dirs[r >> 8 & 3];
  ev->mem = mems[r >> 12 & 3];
  ev->size = r % 11 == 0 ? 0 : (r >> 20) % 3 ? (r >> 24) % 1000000 + 1 : (r >> 24) % (UINT64_C(8) << 30) + 1;
  ev->dur = r % 13 == 0 ? 0 : (int64_t)(ev->size / (1 + (r >> 40) % 30)) + (int64_t)((r >> 50) % 5000);
  ev->addr = ev->kind == SIM_EV_ALLOC ? (uint64_t)(i + 1) * 512 : 0;
}

static void fit_add(void *arg, const sim_event *ev) { sim_copy_fit_add(arg, ev); }

/* The sums a replay reads (store_trace_copy_fit) against those of the events in seq order: kept
 * by the writer across stops, a move to another device and category changes; checked by
 * check-store; read by a pass where none are kept or they do not add up. */
static void copy_sums_kept_equal_a_pass(void) {
  store *s = open_new("sums.db");
  CHECK(s != NULL);
  if (!s) return;
  const int64_t n = 3 * STORE_CHUNK_EVENTS + 321;
  const int64_t stops[] = {7, STORE_CHUNK_EVENTS + 9, 2 * STORE_CHUNK_EVENTS + 1};
  sim_copy_fit want, got, pass;
  sim_copy_fit_init(&want);
  char format[] = "generated", name[] = "copies";
  store_trace meta = {.name = name, .source_format = format, .device_index = -1};
  store_writer *w;
  CHECK_EQ(store_begin(s), 0);
  CHECK_EQ(store_writer_begin(s, &meta, &w), 0);
  for (int64_t i = 0, k = 0; i < n; i++) {
    if (k < 3 && stops[k] == i) CHECK_EQ(k++ == 1 ? store_writer_set_device(w, 2) : store_writer_flush(w), 0);
    sim_event ev;
    awkward_copy(&ev, i);
    sim_copy_fit_add(&want, &ev);
    CHECK_EQ(store_writer_event(w, &ev), 0);
  }
  int64_t id = store_writer_trace_id(w);
  CHECK_EQ(store_writer_end(w), 0);
  uint64_t changes[] = {(uint64_t)(STORE_CHUNK_EVENTS + 2) << 8 | SIM_CAT_ACTIVATION | SIM_CATSRC_USER << 4};
  CHECK_EQ(store_set_categories(s, id, changes, 1), 0);
  CHECK_EQ(store_commit(s), 0);
  CHECK(want.copies > 1000);
  CHECK_EQ(store_trace_copy_fit(s, id, &got), 1);
  CHECK(!memcmp(&got, &want, sizeof got));
  CHECK_EQ(store_trace_copy_fit(s, id, &got), 1); /* the same bits as a pass over the stored chunks */
  sim_copy_fit_init(&pass);
  CHECK_EQ(store_trace_copies(s, id, fit_add, &pass), 0);
  CHECK(!memcmp(&pass, &want, sizeof pass));
  store_check_totals tot = {0};
  store_trace t;
  char fault[512] = "";
  CHECK_EQ(store_trace_find(s, "copies", &t), 0);
  CHECK_EQ(store_check_trace(s, &t, on_fault, fault, &tot), 0);
  CHECK_EQ(tot.faults, 0);
  /* a sum changed by a bit: check-store says so */
  CHECK_EQ(store_exec(s, "UPDATE copy_sums SET sxx = sxx * (1 + 1e-15) WHERE kind = 'd2d' AND large = 1"), 0);
  CHECK_EQ(store_check_trace(s, &t, on_fault, fault, &tot), 0);
  CHECK_EQ(tot.faults, 1);
  CHECK(strstr(fault, "copy sums (copy_sums, class d2d at least 1 MiB) differ") != NULL);
  /* rows that do not add up to timed_copies, or none kept: a pass, the same bits */
  CHECK_EQ(store_exec(s, "UPDATE copy_sums SET n = n + 1 WHERE kind = 'd2d' AND large = 1"), 0);
  CHECK_EQ(store_trace_copy_fit(s, id, &got), 0);
  CHECK(!memcmp(&got, &want, sizeof got));
  fault[0] = 0;
  CHECK_EQ(store_check_trace(s, &t, on_fault, fault, &tot), 0);
  CHECK_EQ(tot.faults, 2);
  CHECK(strstr(fault, "do not add up") != NULL);
  CHECK_EQ(store_exec(s, "UPDATE traces SET timed_copies = NULL"), 0);
  CHECK_EQ(store_trace_copy_fit(s, id, &got), 0);
  CHECK(!memcmp(&got, &want, sizeof got));
  CHECK_EQ(store_check_trace(s, &t, on_fault, fault, &tot), 0);
  CHECK_EQ(tot.faults, 2); /* none kept is no fault */
  store_trace_clear(&t);
  store_close(s);
}

/* Copies put before the others (prepended): the sums of the events in seq order, the prepended
 * first, made again from the stored chunks; and gone with the trace. */
static void copy_sums_made_again_for_prepended_copies(void) {
  store *s = open_new("sums-pre.db");
  CHECK(s != NULL);
  if (!s) return;
  char format[] = "generated", name2[] = "prepended";
  store_trace meta = {.name = name2, .source_format = format, .device_index = -1};
  store_writer *w;
  sim_copy_fit want, got;
  sim_event pre[3], evs[100];
  CHECK_EQ(store_begin(s), 0);
  CHECK_EQ(store_writer_begin(s, &meta, &w), 0);
  CHECK_EQ(store_writer_leave_room(w), 0);
  for (int i = 0; i < 100; i++) {
    awkward_copy(&evs[i], i);
    CHECK_EQ(store_writer_event(w, &evs[i]), 0);
  }
  for (int i = 0; i < 3; i++) {
    awkward_copy(&pre[i], i);
    pre[i].kind = SIM_EV_MEMCPY;
    pre[i].size = pre[i].size ? pre[i].size : 4096;
    pre[i].dur = pre[i].dur ? pre[i].dur : 1000;
    CHECK_EQ(store_writer_prepend(w, &pre[i]), 0);
  }
  int64_t id2 = store_writer_trace_id(w);
  CHECK_EQ(store_writer_end(w), 0);
  CHECK_EQ(store_commit(s), 0);
  sim_copy_fit_init(&want);
  for (int i = 2; i >= 0; i--) sim_copy_fit_add(&want, &pre[i]);
  for (int i = 0; i < 100; i++) sim_copy_fit_add(&want, &evs[i]);
  CHECK_EQ(store_trace_copy_fit(s, id2, &got), 1);
  CHECK(!memcmp(&got, &want, sizeof got));
  /* gone with the trace */
  CHECK_EQ(store_begin(s), 0);
  CHECK_EQ(store_trace_delete(s, id2), 0);
  CHECK_EQ(store_commit(s), 0);
  sqlite3_stmt *q;
  CHECK_EQ(sqlite3_prepare_v2(store_db(s), "SELECT count(*) FROM copy_sums WHERE trace_id = ?1", -1, &q, NULL), SQLITE_OK);
  sqlite3_bind_int64(q, 1, id2);
  CHECK_EQ(sqlite3_step(q), SQLITE_ROW);
  CHECK_EQ(sqlite3_column_int(q, 0), 0);
  sqlite3_finalize(q);
  store_close(s);
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/memplay-chunk-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) return 1;
  RUN(packs_and_unpacks_exactly);
  RUN(decodes_near_every_edge);
  RUN(one_byte_runs_broken_anywhere);
  RUN(faults_inside_blocks_named);
  RUN(text_form_reads_as_sql_does);
  RUN(reads_ranges_and_lends_chunks);
  RUN(damage_is_an_error_naming_trace_and_chunk);
  RUN(copy_sums_kept_equal_a_pass);
  RUN(copy_sums_made_again_for_prepended_copies);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) return 1;
  TEST_MAIN_END();
}
