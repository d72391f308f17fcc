/* pickle.h: a safe, streaming unpickler for data-only pickles: it builds values and never runs code. */
#ifndef REPLAY_PICKLE_H
#define REPLAY_PICKLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * What it reads: the opcodes of pickle protocols 0 to 5 that describe data: None, booleans,
 * integers (of any size), floats, str, bytes, bytearray, tuples, lists, dicts, sets and
 * frozensets, the memo (PUT/GET/MEMOIZE), MARK/POP/DUP, PROTO and FRAME.
 *
 * What it refuses, with an error naming the opcode and its byte offset: every opcode that would
 * import or call code (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX,
 * EXT1/2/4, PERSID, BINPERSID) and the out-of-band buffers of protocol 5 (NEXT_BUFFER,
 * READONLY_BUFFER). Nothing in a pickle is ever executed or looked up by name.
 *
 * Hostile input: the machine is a loop over opcodes with no recursion; every length is checked
 * against the bytes left and against a memory budget (pickle_limits) that counts every value,
 * the stack, the marks and the memo; values are freed without recursion, and cycles made
 * through the memo are freed by pickle_free.
 *
 * Streaming: a consumer (pickle_set_consumer) sees every item appended to a list as soon as it
 * is complete, and may take it over (PICKLE_TAKE): the list then only counts it and the memo
 * forgets it, so a list of a million entries never sits in memory. Items pushed under a MARK
 * for a later APPENDS (one batch of 1000 with Python's pickler, the whole list with PyTorch's
 * C++ pickler) are offered before the APPENDS, once 16 more values sit above them: picklers
 * finish an item before they start the next one, and only an item still being built (the key
 * and value of a one-key dict, themselves nested 16 deep without a MARK) has that many values
 * above it. The unpickler does not guess beyond that: if an item taken early does not end up in
 * its list after all, or a later opcode reaches back to it, loading stops with an error saying
 * the layout is not supported. It never goes on with a wrong value.
 */

typedef enum pk_type {
  /* immediates (no heap object) */
  PK_NONE = 0,
  PK_BOOL,
  PK_INT,   /* fits in int64_t */
  PK_FLOAT,
  PK_TOKEN, /* a consumer's stand-in for an object it took over (pickle_memo_replace) */
  /* heap objects (pk_obj) */
  PK_STR,    /* UTF-8 text in data[len] (NUL-terminated) */
  PK_BYTES,  /* bytes (flag PK_F_BYTEARRAY for bytearray) in data[len] */
  PK_BIGINT, /* an integer beyond int64_t: len bytes of little-endian two's complement in data */
  PK_LIST,
  PK_TUPLE,
  PK_DICT, /* len pairs in items[0 .. 2*len): key, value, key, value ... */
  PK_SET,
  PK_FROZENSET,
  PK__COUNT
} pk_type;

typedef struct pk_obj pk_obj;

typedef struct pk_val {
  uint8_t type; /* pk_type */
  union {
    int64_t i; /* PK_BOOL (0/1), PK_INT, PK_TOKEN */
    double f;  /* PK_FLOAT */
    pk_obj *o; /* heap types */
  } u;
} pk_val;

enum {
  PK_F_BYTEARRAY = 1, /* PK_BYTES made by BYTEARRAY8 */
  PK_F_KEEP_ALL = 2,  /* list: the consumer keeps every further item without being asked */
};

/*
 * A heap value. Consumers read these fields and may use `aux` as they like; everything else
 * belongs to the unpickler. A dict given the same key twice holds both pairs: pk_dict_get finds
 * the last, which is the one Python keeps.
 */
struct pk_obj {
  pk_obj *prev, *next; /* every live object, so that pickle_free also frees cycles */
  uint64_t offset;     /* byte offset of the opcode that made it */
  int64_t aux;         /* free for the consumer; 0 when made */
  uint64_t memo;       /* 1 + the memo index of a slot holding it, 0 when none */
  uint64_t taken;      /* list: items the consumer took over (counted, not held) */
  size_t len;          /* bytes (str, bytes, bigint), items (list, tuple, set), pairs (dict) */
  size_t cap;          /* items allocated */
  pk_val *items;
  uint32_t refs;
  uint8_t type, flags;
  char data[];         /* str, bytes, bigint */
};

static inline int pk_is_heap(pk_val v) { return v.type >= PK_STR; }
static inline int pk_is(pk_val v, int type) { return v.type == type; }
const char *pk_type_name(int type);
/* The type with its article, for messages: "an int", "a dict", "None". */
const char *pk_type_a(int type);
/* The value of key in a dict (the last pair with that str key), or NULL. */
const pk_val *pk_dict_get(const pk_obj *dict, const char *key);
/* Whether v is the str s. */
int pk_str_eq(pk_val v, const char *s);

/* ---------------------------------------------------------------------------------------- */

typedef struct pickle pickle;

typedef struct pickle_limits {
  uint64_t max_memory; /* bytes for values, stack, marks, memo and buffers; 0: the default (4 GiB) */
} pickle_limits;

/* Reads up to n bytes into buf: the count, 0 at the end, -1 on error. */
typedef ssize_t (*pickle_read_fn)(void *arg, void *buf, size_t n);

/* A reader over a stream, or over bytes in memory (which must outlive it). */
pickle *pickle_new(pickle_read_fn read, void *arg, const pickle_limits *lim);
pickle *pickle_new_mem(const void *data, size_t n, const pickle_limits *lim);
/* The stream's total size when known: a length that runs past it is reported at once. */
void pickle_set_size(pickle *p, uint64_t total);

/* What a consumer answers for a list item. */
enum {
  PICKLE_KEEP = 0,     /* the list keeps it */
  PICKLE_TAKE = 1,     /* the consumer took it: the list counts it, the memo forgets it */
  PICKLE_KEEP_ALL = 2, /* keep it and every further item of this list, without asking */
};
/*
 * Called for each item appended to a list, in list order; index is its position in the list
 * (held and taken items counted). The item stays owned by the unpickler: a consumer that keeps
 * anything of it past the call takes its own reference (pk_ref). Returns PICKLE_KEEP,
 * PICKLE_TAKE, PICKLE_KEEP_ALL, or -1 after pickle_fail.
 */
typedef int (*pickle_item_fn)(void *arg, pickle *p, pk_obj *list, uint64_t index, pk_val item);
void pickle_set_consumer(pickle *p, pickle_item_fn fn, void *arg);

/*
 * Runs the pickle to its STOP. Returns 0 with the value in *out (owned by p, valid until
 * pickle_free), or -1: pickle_error says why, starting with "byte N: ".
 */
int pickle_load(pickle *p, pk_val *out);
const char *pickle_error(const pickle *p);
/* For consumers: records an error (shown as is) and returns -1. */
int pickle_fail(pickle *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Byte offset of the opcode being run (or where loading stopped). */
uint64_t pickle_offset(const pickle *p);
/* The protocol named by the first PROTO opcode, 0 when there was none. */
int pickle_protocol(const pickle *p);
/* Most values the stack ever held, and most bytes the unpickler ever held. */
size_t pickle_peak_stack(const pickle *p);
uint64_t pickle_peak_memory(const pickle *p);

/*
 * For consumers: the memo slot that holds v's object holds the token instead from now on (a
 * later GET pushes PK_TOKEN with that value), and the memo's reference is dropped. A consumer
 * uses it to replace something it has already digested (a call stack) by its result. The token
 * must be in [0, 2^59). No effect on values that are not in the memo.
 */
void pickle_memo_replace(pickle *p, pk_val v, int64_t token);

/*
 * For consumers: the memo forgets v's object (a later GET of it fails, saying so). A consumer
 * uses it for the parts of an item it took that nothing will refer to again, so that they are
 * freed with the item. Taken items themselves are forgotten already.
 */
void pickle_memo_forget(pickle *p, pk_val v);

/* Reference counting for consumers that keep values past a callback. */
void pk_ref(pk_val v);
void pk_unref(pickle *p, pk_val v);

void pickle_free(pickle *p);

#endif
