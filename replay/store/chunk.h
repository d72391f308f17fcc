/* chunk.h: a chunk of a trace's events as the store keeps it: packed column by column and checksummed, and as text for SQL. */
#ifndef REPLAY_STORE_CHUNK_H
#define REPLAY_STORE_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "sim/event.h"

/*
 * A trace's events are stored in chunks of consecutive seqs (docs/trace-store.md): chunk k holds
 * the stored seqs k << STORE_CHUNK_SHIFT up to the next multiple of STORE_CHUNK_EVENTS, so a seq
 * finds its chunk by a shift. A chunk's packed form (codec STORE_CHUNK_CODEC) is a header of one
 * varint per column giving that column's length in bytes, then the columns, each holding one
 * varint per event (zigzag-coded differences where neighbours are close):
 *
 *   enums    a dictionary of the chunk's distinct (kind, mem, dir, category, cat_source, flags,
 *            device, has address) combinations, then each event's index in it
 *   ts       difference from the previous event's ts
 *   dur      the value
 *   addr     only events that have one: difference from the previous address
 *   size     the value
 *   stream   difference from the previous event's stream
 *   stack    the call site id (0: none)
 *   name     the string id (0: none)
 *   step     difference from the previous event's step (-1: unknown)
 *   dev_ts   0 unknown, else 1 + the difference from the previous known dev_ts
 *   api_dur  1 + the value (0: unknown)
 *
 * The seq is implied by the position. Absent values keep the store's conventions: a call site or
 * name id <= 0 reads back as 0, a negative step, dev_ts or api_dur as -1.
 */
#define STORE_CHUNK_SHIFT 14
#define STORE_CHUNK_EVENTS (1 << STORE_CHUNK_SHIFT)
#define STORE_CHUNK_CODEC 1

/* A growable byte buffer. */
typedef struct store_bytes {
  unsigned char *p;
  size_t n, cap;
} store_bytes;
void store_bytes_release(store_bytes *b);

/* What encoding keeps between chunks (the dictionary's table), so that it allocates once. */
typedef struct store_chunk_enc {
  uint64_t *keys;
  uint32_t *slots; /* index + 1 into the dictionary, 0 empty */
  uint64_t *dict;
  size_t cap; /* slots in the table: a power of two, at least twice the events of a chunk */
} store_chunk_enc;
void store_chunk_enc_release(store_chunk_enc *e);

/* Packs n events (n <= STORE_CHUNK_EVENTS) into out (replacing its contents). */
void store_chunk_encode(store_chunk_enc *e, const sim_event *ev, size_t n, store_bytes *out);
/* Unpacks a chunk of n events into ev (room for n), numbering them seq0, seq0 + 1, ... 0, or -1
 * with what is wrong in why (the bytes do not decode to exactly n events of the codec). */
int store_chunk_decode(const unsigned char *p, size_t len, size_t n, int64_t seq0, sim_event *ev, char *why,
                       size_t whylen);
/*
 * A chunk unpacked a slice of events at a time, in order: a reader hands out slices that stay in
 * the processor's cache while they are replayed, where a whole chunk's events (1.5 MB) do not.
 * open reads the header and the dictionary (0, or -1 with why); next decodes the next k events
 * into ev (room for k), numbering them from seq: 0, or -1 with why (the decoder is then done);
 * the call that decodes the chunk's last event also checks that each column ends exactly there.
 * release frees what it keeps between chunks (the dictionary). Start from {0}.
 */
#define STORE_CHUNK_COLUMNS 11
typedef struct store_chunk_dec {
  const unsigned char *p[STORE_CHUNK_COLUMNS], *end[STORE_CHUNK_COLUMNS]; /* each column's position, end */
  int64_t ts, stream, step, dev_ts; /* the running values the differences apply to */
  uint64_t addr;
  struct store_chunk_small *dict; /* the dictionary as decoding stores it */
  size_t ndict, dict_cap;
  size_t n, done; /* the chunk's events, and how many are decoded */
} store_chunk_dec;
int store_chunk_dec_open(store_chunk_dec *d, const unsigned char *p, size_t len, size_t n, char *why, size_t whylen);
int store_chunk_dec_next(store_chunk_dec *d, size_t k, int64_t seq, sim_event *ev, char *why, size_t whylen);
void store_chunk_dec_release(store_chunk_dec *d);
/* Calls fn for each copy (SIM_EV_MEMCPY) of a packed chunk of n events with only its kind, mem,
 * dir, size and dur filled in, decoding only the columns those come from. 0, or -1 with why. */
int store_chunk_copies(const unsigned char *p, size_t len, size_t n, void (*fn)(void *arg, const sim_event *ev),
                       void *arg, char *why, size_t whylen);
/* The chunk as text for SQL: what the events view (store_schema.c) reads. rows is a JSON array
 * with one array per event,
 *
 *   [ts - ts0, info & 0xFFFFFFFF, size, addr - addr0, stack_id, step + 1, api_dur + 1, device, dur,
 *    name_id, stream, dev_ts - ts0]
 *
 * every absent value written as 0 (an unknown step or api_dur too, hence their + 1), and left off
 * at the end of an array (ts and info always stay; an unknown dev_ts, the last, always goes). ts0
 * is the first event's ts and addr0 one less than the chunk's lowest address (addresses taken as
 * signed, as SQL reads them), so that times and addresses take a few digits; either is 0 where a
 * difference would not fit 64 bits. The fields come in the order of how often real traces have
 * them (docs/trace-store.md). */
typedef struct store_text {
  store_bytes rows;
  int64_t ts0, addr0;
} store_text;
void store_text_release(store_text *t);
/* Makes the text form of n events (replacing out's contents). */
void store_chunk_text(const sim_event *ev, size_t n, store_text *out);

#endif
