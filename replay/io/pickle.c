/* pickle.c: the safe unpickler: a loop over data opcodes, a memory budget, streaming of list items. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle.h"

#define PK_DEFAULT_MEMORY (UINT64_C(4) << 30)
#define PK_MAX_MEMORY (UINT64_C(16) << 30) /* keeps every reference count far below 2^32 */
#define PK_BUFSZ ((size_t)1 << 20)         /* read buffer */
#define PK_MAX_LINE ((size_t)64 << 20)     /* a text opcode's argument line */
#define PK_SETTLE 16 /* values above an item under a MARK before it is offered (see pickle.h) */
#define PK__BOX 127                        /* internal: an immediate held in the memo */

/*
 * Memo slots: a pk_obj pointer (16-byte aligned) with the object's type in its low 4 bits, so
 * that a GET need not wait for the object's memory; or 0 (empty), MEMO_GONE (taken over),
 * MEMO_BOX | pointer (an immediate, boxed), or a token: value << 4 | MEMO_TOKEN.
 */
#define MEMO_GONE ((uintptr_t)2)
#define MEMO_BOX ((uintptr_t)3)
#define MEMO_TOKEN ((uintptr_t)15)
#define MEMO_TAG(s) ((s) & 15)
#define MEMO_PTR(s) ((pk_obj *)((s) & ~(uintptr_t)15))
#define PK_FREE_HEADERS 4096 /* object headers kept for reuse */
#define MEMO_PAGE_BITS 14
#define MEMO_PAGE ((size_t)1 << MEMO_PAGE_BITS)

typedef struct pk_mark {
  size_t pos;     /* stack height at the MARK: its items start here */
  uint64_t taken; /* items offered early and taken by the consumer */
  int consider;   /* still offering items early */
} pk_mark;

struct pickle {
  /* input */
  pickle_read_fn rd;
  void *rd_arg;
  unsigned char *buf;
  size_t pos, len, cap;
  int eof, own_buf;
  uint64_t base;  /* stream offset of buf[0] */
  uint64_t total; /* stream size, UINT64_MAX unknown */
  /* machine */
  pk_val *stack;
  size_t sp, scap, peak_sp;
  pk_mark *marks;
  size_t nm, mcap;
  uintptr_t **memo; /* pages of MEMO_PAGE slots, made when first written */
  size_t memo_pages, memo_count;
  pk_obj *all; /* sentinel of the list of live objects (data[] unused) */
  pk_obj **freeq;
  size_t nfreeq, freeq_cap;
  uint64_t used, peak, limit;
  pk_obj *spare[PK_FREE_HEADERS]; /* headers of freed containers, for reuse */
  size_t nspare;
  uint64_t op_off;
  int op;
  int proto;
  int failed;
  pk_val result;
  int has_result;
  pickle_item_fn consumer;
  void *carg;
  char err[512];
};

/* ---- opcodes ---------------------------------------------------------------------------- */

enum {
  OP_MARK = '(', OP_STOP = '.', OP_POP = '0', OP_POP_MARK = '1', OP_DUP = '2', OP_FLOAT = 'F', OP_INT = 'I',
  OP_BININT = 'J', OP_BININT1 = 'K', OP_LONG = 'L', OP_BININT2 = 'M', OP_NONE = 'N', OP_PERSID = 'P',
  OP_BINPERSID = 'Q', OP_REDUCE = 'R', OP_STRING = 'S', OP_BINSTRING = 'T', OP_SHORT_BINSTRING = 'U',
  OP_UNICODE = 'V', OP_BINUNICODE = 'X', OP_APPEND = 'a', OP_BUILD = 'b', OP_GLOBAL = 'c', OP_DICT = 'd',
  OP_EMPTY_DICT = '}', OP_APPENDS = 'e', OP_GET = 'g', OP_BINGET = 'h', OP_INST = 'i', OP_LONG_BINGET = 'j',
  OP_LIST = 'l', OP_EMPTY_LIST = ']', OP_OBJ = 'o', OP_PUT = 'p', OP_BINPUT = 'q', OP_LONG_BINPUT = 'r',
  OP_SETITEM = 's', OP_TUPLE = 't', OP_EMPTY_TUPLE = ')', OP_SETITEMS = 'u', OP_BINFLOAT = 'G',
  OP_PROTO = 0x80, OP_NEWOBJ = 0x81, OP_EXT1 = 0x82, OP_EXT2 = 0x83, OP_EXT4 = 0x84, OP_TUPLE1 = 0x85,
  OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87, OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89, OP_LONG1 = 0x8a, OP_LONG4 = 0x8b,
  OP_BINBYTES = 'B', OP_SHORT_BINBYTES = 'C', OP_SHORT_BINUNICODE = 0x8c, OP_BINUNICODE8 = 0x8d,
  OP_BINBYTES8 = 0x8e, OP_EMPTY_SET = 0x8f, OP_ADDITEMS = 0x90, OP_FROZENSET = 0x91, OP_NEWOBJ_EX = 0x92,
  OP_STACK_GLOBAL = 0x93, OP_MEMOIZE = 0x94, OP_FRAME = 0x95, OP_BYTEARRAY8 = 0x96, OP_NEXT_BUFFER = 0x97,
  OP_READONLY_BUFFER = 0x98,
};

static const char *op_name(int op) {
  switch (op) {
#define N(x) \
  case OP_##x: return #x;
    N(MARK) N(STOP) N(POP) N(POP_MARK) N(DUP) N(FLOAT) N(INT) N(BININT) N(BININT1) N(LONG) N(BININT2) N(NONE)
    N(PERSID) N(BINPERSID) N(REDUCE) N(STRING) N(BINSTRING) N(SHORT_BINSTRING) N(UNICODE) N(BINUNICODE)
    N(APPEND) N(BUILD) N(GLOBAL) N(DICT) N(EMPTY_DICT) N(APPENDS) N(GET) N(BINGET) N(INST) N(LONG_BINGET)
    N(LIST) N(EMPTY_LIST) N(OBJ) N(PUT) N(BINPUT) N(LONG_BINPUT) N(SETITEM) N(TUPLE) N(EMPTY_TUPLE)
    N(SETITEMS) N(BINFLOAT) N(PROTO) N(NEWOBJ) N(EXT1) N(EXT2) N(EXT4) N(TUPLE1) N(TUPLE2) N(TUPLE3)
    N(NEWTRUE) N(NEWFALSE) N(LONG1) N(LONG4) N(BINBYTES) N(SHORT_BINBYTES) N(SHORT_BINUNICODE)
    N(BINUNICODE8) N(BINBYTES8) N(EMPTY_SET) N(ADDITEMS) N(FROZENSET) N(NEWOBJ_EX) N(STACK_GLOBAL)
    N(MEMOIZE) N(FRAME) N(BYTEARRAY8) N(NEXT_BUFFER) N(READONLY_BUFFER)
#undef N
  }
  return NULL;
}

const char *pk_type_name(int type) {
  static const char *const names[PK__COUNT] = {"None", "bool", "int", "float", "token", "str", "bytes", "int",
                                               "list", "tuple", "dict", "set", "frozenset"};
  return type >= 0 && type < PK__COUNT ? names[type] : "?";
}

const char *pk_type_a(int type) {
  static const char *const names[PK__COUNT] = {"None",   "a bool",  "an int", "a float", "a token", "a str", "bytes",
                                               "an int", "a list",  "a tuple", "a dict", "a set", "a frozenset"};
  return type >= 0 && type < PK__COUNT ? names[type] : "?";
}

/* ---- errors ----------------------------------------------------------------------------- */

static int failv(pickle *p, int with_offset, const char *fmt, va_list ap) {
  if (p->failed) return -1;
  size_t off = 0;
  if (with_offset) off = (size_t)snprintf(p->err, sizeof p->err, "byte %llu: ", (unsigned long long)p->op_off);
  vsnprintf(p->err + off, sizeof p->err - off, fmt, ap);
  p->failed = 1;
  return -1;
}

static int fail(pickle *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(pickle *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  failv(p, 1, fmt, ap);
  va_end(ap);
  return -1;
}

int pickle_fail(pickle *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  failv(p, 0, fmt, ap);
  va_end(ap);
  return -1;
}

static int fail_memory(pickle *p) {
  return fail(p, "the pickle needs more than %llu MiB of memory (the limit); it is too large or malformed",
              (unsigned long long)(p->limit >> 20));
}

static int fail_truncated(pickle *p, uint64_t need) {
  uint64_t end = p->total != UINT64_MAX ? p->total : p->base + p->len;
  if (p->op < 0)
    return fail(p, "truncated: the pickle ends at byte %llu without a STOP opcode", (unsigned long long)end);
  return fail(p, "truncated: %s needs %llu more bytes, but the pickle ends at byte %llu", op_name(p->op),
              (unsigned long long)need, (unsigned long long)end);
}

/* ---- memory ----------------------------------------------------------------------------- */

static int charge(pickle *p, uint64_t n) {
  if (n > p->limit - p->used) return fail_memory(p);
  p->used += n;
  if (p->used > p->peak) p->peak = p->used;
  return 0;
}

static void credit(pickle *p, uint64_t n) { p->used -= n; }

static int is_data_type(int t) { return t == PK_STR || t == PK_BYTES || t == PK_BIGINT; }
static int is_container(int t) { return t >= PK_LIST && t <= PK_FROZENSET; }

static uint64_t obj_bytes(const pk_obj *o) {
  uint64_t n = sizeof *o + (uint64_t)o->cap * sizeof(pk_val);
  if (is_data_type(o->type)) n += o->len + 1;
  return n;
}

static pk_obj *obj_new(pickle *p, int type, size_t datalen) {
  uint64_t sz = sizeof(pk_obj) + (is_data_type(type) ? (uint64_t)datalen + 1 : 0);
  if (datalen > p->limit || charge(p, sz)) {
    if (!p->failed) fail_memory(p);
    return NULL;
  }
  pk_obj *o;
  if (sz == sizeof(pk_obj) && p->nspare) o = p->spare[--p->nspare];
  else o = aligned_alloc(16, (size_t)(sz + 15) / 16 * 16);
  if (!o) {
    credit(p, sz);
    fail_memory(p);
    return NULL;
  }
  memset(o, 0, sizeof *o);
  o->type = (uint8_t)type;
  o->refs = 1;
  o->offset = p->op_off;
  o->len = is_data_type(type) ? datalen : 0;
  if (is_data_type(type)) o->data[datalen] = 0;
  o->next = p->all->next;
  o->prev = p->all;
  p->all->next->prev = o;
  p->all->next = o;
  return o;
}

static int items_reserve(pickle *p, pk_obj *o, size_t need) {
  if (need <= o->cap) return 0;
  size_t cap = o->cap ? o->cap : 4;
  while (cap < need) cap = cap > SIZE_MAX / 4 ? need : cap * 2;
  if (cap > p->limit / sizeof(pk_val) || charge(p, (uint64_t)(cap - o->cap) * sizeof(pk_val))) {
    if (!p->failed) fail_memory(p);
    return -1;
  }
  pk_val *it = realloc(o->items, cap * sizeof(pk_val));
  if (!it) {
    credit(p, (uint64_t)(cap - o->cap) * sizeof(pk_val));
    return fail_memory(p);
  }
  o->items = it;
  o->cap = cap;
  return 0;
}

static void obj_unlink_free(pickle *p, pk_obj *o) {
  o->prev->next = o->next;
  o->next->prev = o->prev;
  credit(p, obj_bytes(o));
  free(o->items);
  if (!is_data_type(o->type) && p->nspare < PK_FREE_HEADERS) p->spare[p->nspare++] = o;
  else free(o);
}

/* Frees o and whatever only it held, without recursion. */
static void obj_release(pickle *p, pk_obj *o) {
  size_t n0 = p->nfreeq;
  if (p->nfreeq == p->freeq_cap) {
    size_t cap = p->freeq_cap ? p->freeq_cap * 2 : 64;
    pk_obj **q = realloc(p->freeq, cap * sizeof *q);
    if (!q) return; /* left for pickle_free */
    p->freeq = q;
    p->freeq_cap = cap;
  }
  p->freeq[p->nfreeq++] = o;
  while (p->nfreeq > n0) {
    pk_obj *x = p->freeq[--p->nfreeq];
    if (is_container(x->type)) {
      size_t n = x->type == PK_DICT ? 2 * x->len : x->len;
      for (size_t i = 0; i < n; i++) {
        pk_val v = x->items[i];
        if (pk_is_heap(v) && --v.u.o->refs == 0) {
          if (p->nfreeq == p->freeq_cap) {
            size_t cap = p->freeq_cap * 2;
            pk_obj **q = realloc(p->freeq, cap * sizeof *q);
            if (!q) continue; /* left for pickle_free */
            p->freeq = q;
            p->freeq_cap = cap;
          }
          p->freeq[p->nfreeq++] = v.u.o;
        }
      }
    }
    obj_unlink_free(p, x);
  }
}

void pk_ref(pk_val v) {
  if (pk_is_heap(v)) v.u.o->refs++;
}

void pk_unref(pickle *p, pk_val v) {
  if (pk_is_heap(v) && --v.u.o->refs == 0) obj_release(p, v.u.o);
}

/* ---- memo ------------------------------------------------------------------------------- */

/* The memo slot of idx, or NULL when its page was never written. */
static inline uintptr_t *memo_slot(const pickle *p, uint64_t idx) {
  uint64_t page = idx >> MEMO_PAGE_BITS;
  if (page >= p->memo_pages || !p->memo[page]) return NULL;
  return &p->memo[page][idx & (MEMO_PAGE - 1)];
}

static uintptr_t *memo_slot_make(pickle *p, uint64_t idx) {
  uint64_t page = idx >> MEMO_PAGE_BITS;
  if (page >= p->memo_pages) {
    uint64_t n = p->memo_pages ? p->memo_pages : 16;
    while (n <= page) n *= 2;
    if (n > p->limit / sizeof(uintptr_t *) || charge(p, (n - p->memo_pages) * sizeof(uintptr_t *))) {
      if (!p->failed) fail_memory(p);
      return NULL;
    }
    uintptr_t **m = realloc(p->memo, (size_t)n * sizeof *m);
    if (!m) {
      fail_memory(p);
      return NULL;
    }
    memset(m + p->memo_pages, 0, (size_t)(n - p->memo_pages) * sizeof *m);
    p->memo = m;
    p->memo_pages = (size_t)n;
  }
  if (!p->memo[page]) {
    if (charge(p, MEMO_PAGE * sizeof(uintptr_t))) return NULL;
    if (!(p->memo[page] = calloc(MEMO_PAGE, sizeof(uintptr_t)))) {
      fail_memory(p);
      return NULL;
    }
  }
  return &p->memo[page][idx & (MEMO_PAGE - 1)];
}

static void memo_drop_slot(pickle *p, uintptr_t *slot, uint64_t idx) {
  uintptr_t s = *slot;
  *slot = 0;
  if (s == 0 || s == MEMO_GONE || MEMO_TAG(s) == MEMO_TOKEN) return;
  pk_obj *o = MEMO_PTR(s);
  if (o->memo == idx + 1) o->memo = 0;
  if (--o->refs == 0) obj_release(p, o);
}

static int memo_put(pickle *p, uint64_t idx, pk_val v) {
  uintptr_t *sl = memo_slot_make(p, idx);
  if (!sl) return -1;
  if (*sl) memo_drop_slot(p, sl, idx);
  else p->memo_count++;
  uintptr_t slot;
  if (v.type == PK_TOKEN) {
    slot = (uintptr_t)v.u.i << 4 | MEMO_TOKEN;
  } else if (pk_is_heap(v)) {
    v.u.o->refs++;
    v.u.o->memo = idx + 1;
    slot = (uintptr_t)v.u.o | v.type;
  } else {
    pk_obj *box = obj_new(p, PK__BOX, 0);
    if (!box) return -1;
    box->len = v.type;
    memcpy(&box->aux, &v.u, sizeof box->aux);
    box->memo = idx + 1;
    slot = (uintptr_t)box | MEMO_BOX;
  }
  *sl = slot;
  return 0;
}

static int memo_get_slow(pickle *p, uint64_t idx, uintptr_t s, pk_val *out) {
  if (s == 0) return fail(p, "%s of memo entry %llu, which was never stored", op_name(p->op), (unsigned long long)idx);
  if (s == MEMO_GONE)
    return fail(p, "%s of memo entry %llu, a list item that was already handed over and dropped (this layout is "
                   "not supported)",
                op_name(p->op), (unsigned long long)idx);
  if (MEMO_TAG(s) == MEMO_TOKEN) {
    out->type = PK_TOKEN;
    out->u.i = (int64_t)(s >> 4);
    return 0;
  }
  pk_obj *o = MEMO_PTR(s); /* MEMO_BOX */
  out->type = (uint8_t)o->len;
  memcpy(&out->u, &o->aux, sizeof o->aux);
  return 0;
}

static inline int memo_get(pickle *p, uint64_t idx, pk_val *out) {
  const uintptr_t *sl = memo_slot(p, idx);
  uintptr_t s = sl ? *sl : 0;
  unsigned tag = (unsigned)MEMO_TAG(s);
  if (tag < PK_STR || tag > PK_FROZENSET) return memo_get_slow(p, idx, s, out);
  pk_obj *o = MEMO_PTR(s);
  o->refs++;
  out->type = (uint8_t)tag;
  out->u.o = o;
  return 0;
}

void pickle_memo_forget(pickle *p, pk_val v) {
  if (!pk_is_heap(v) || !v.u.o->memo) return;
  uint64_t idx = v.u.o->memo - 1;
  uintptr_t *sl = memo_slot(p, idx);
  if (sl && MEMO_PTR(*sl) == v.u.o && MEMO_TAG(*sl) == v.type) {
    memo_drop_slot(p, sl, idx);
    *sl = MEMO_GONE;
  }
}

void pickle_memo_replace(pickle *p, pk_val v, int64_t token) {
  if (!pk_is_heap(v) || !v.u.o->memo || token < 0 || token >= (INT64_C(1) << 59)) return;
  uint64_t idx = v.u.o->memo - 1;
  uintptr_t *sl = memo_slot(p, idx);
  if (sl && MEMO_PTR(*sl) == v.u.o && MEMO_TAG(*sl) == v.type) {
    memo_drop_slot(p, sl, idx);
    *sl = (uintptr_t)token << 4 | MEMO_TOKEN;
  }
}

/* ---- the stack -------------------------------------------------------------------------- */

static size_t region_start(const pickle *p) { return p->nm ? p->marks[p->nm - 1].pos : 0; }
static size_t outer_start(const pickle *p) { return p->nm >= 2 ? p->marks[p->nm - 2].pos : 0; }

static int underflow(pickle *p, size_t need) {
  if (p->nm && p->marks[p->nm - 1].taken)
    return fail(p, "%s reaches back to list items that were already handed over (this layout is not supported)",
                op_name(p->op));
  return fail(p, "%s needs %zu value%s on the stack, but %s %zu", op_name(p->op), need, need == 1 ? "" : "s",
              p->nm ? "its MARK leaves" : "there are", p->sp - region_start(p));
}

static int need_values(pickle *p, size_t n) {
  if (p->sp - region_start(p) < n) return underflow(p, n);
  return 0;
}

static int offer_early(pickle *p, pk_mark *m);

static int push_slow(pickle *p, pk_val v) {
  if (p->sp == p->scap) {
    size_t cap = p->scap ? p->scap * 2 : 256;
    if (charge(p, (uint64_t)(cap - p->scap) * sizeof(pk_val))) {
      pk_unref(p, v);
      return -1;
    }
    pk_val *s = realloc(p->stack, cap * sizeof *s);
    if (!s) {
      pk_unref(p, v);
      return fail_memory(p);
    }
    p->stack = s;
    p->scap = cap;
  }
  p->stack[p->sp++] = v;
  if (p->sp > p->peak_sp) p->peak_sp = p->sp;
  if (p->nm && p->consumer) {
    pk_mark *m = &p->marks[p->nm - 1];
    if (m->consider && p->sp - m->pos > PK_SETTLE) return offer_early(p, m);
  }
  return 0;
}

/* Pushes v, whose reference the stack takes. */
static inline int push(pickle *p, pk_val v) {
  if (p->sp < p->scap && p->sp < p->peak_sp && !p->nm) {
    p->stack[p->sp++] = v;
    return 0;
  }
  if (p->sp < p->scap && p->sp < p->peak_sp) {
    pk_mark *m = &p->marks[p->nm - 1];
    p->stack[p->sp++] = v;
    if (m->consider && p->consumer && p->sp - m->pos > PK_SETTLE) return offer_early(p, m);
    return 0;
  }
  return push_slow(p, v);
}

static int push_obj(pickle *p, pk_obj *o) {
  if (!o) return -1;
  pk_val v = {.type = o->type};
  v.u.o = o;
  return push(p, v);
}

static int push_int(pickle *p, int64_t i) {
  pk_val v = {.type = PK_INT};
  v.u.i = i;
  return push(p, v);
}

static int push_bool(pickle *p, int b) {
  pk_val v = {.type = PK_BOOL};
  v.u.i = b != 0;
  return push(p, v);
}

static int push_float(pickle *p, double f) {
  pk_val v = {.type = PK_FLOAT};
  v.u.f = f;
  return push(p, v);
}

/* Asks the consumer about one item of list L; 1 when it took it, 0 when L keeps it, -1 error. */
static int offer(pickle *p, pk_obj *L, uint64_t index, pk_val item) {
  if (!p->consumer || (L->flags & PK_F_KEEP_ALL)) return 0;
  int r = p->consumer(p->carg, p, L, index, item);
  if (r < 0) {
    if (!p->failed) fail(p, "the consumer stopped");
    return -1;
  }
  if (r == PICKLE_TAKE) {
    pickle_memo_forget(p, item);
    pk_unref(p, item);
    return 1;
  }
  if (r == PICKLE_KEEP_ALL) L->flags |= PK_F_KEEP_ALL;
  return 0;
}

/* The oldest item under the top MARK has PK_SETTLE values above it: offer it to the consumer
 * now, if the value below the MARK is a list (the one a closing APPENDS would extend). */
static int offer_early(pickle *p, pk_mark *m) {
  if (m->pos == 0 || m->pos - 1 < outer_start(p) || p->stack[m->pos - 1].type != PK_LIST) {
    m->consider = 0;
    return 0;
  }
  pk_obj *L = p->stack[m->pos - 1].u.o;
  pk_val item = p->stack[m->pos];
  int r = offer(p, L, L->len + L->taken + m->taken, item);
  if (r < 0) return -1;
  if (r == 0) {
    m->consider = 0;
    return 0;
  }
  memmove(&p->stack[m->pos], &p->stack[m->pos + 1], (p->sp - m->pos - 1) * sizeof(pk_val));
  p->sp--;
  m->taken++;
  return 0;
}

static int list_add(pickle *p, pk_obj *L, pk_val item) {
  int r = offer(p, L, L->len + L->taken, item);
  if (r < 0) {
    pk_unref(p, item);
    return -1;
  }
  if (r == 1) {
    L->taken++;
    return 0;
  }
  if (items_reserve(p, L, L->len + 1)) {
    pk_unref(p, item);
    return -1;
  }
  L->items[L->len++] = item;
  return 0;
}

static int check_key(pickle *p, pk_val k) {
  if (k.type == PK_LIST || k.type == PK_DICT || k.type == PK_SET ||
      (k.type == PK_BYTES && (k.u.o->flags & PK_F_BYTEARRAY)))
    return fail(p, "%s with an unhashable key (%s)", op_name(p->op), pk_type_a(k.type));
  return 0;
}

/* Closes the top MARK, which must have no items handed over. */
static int pop_mark(pickle *p, size_t *start) {
  if (!p->nm) return fail(p, "%s without a MARK before it", op_name(p->op));
  pk_mark *m = &p->marks[p->nm - 1];
  if (m->taken)
    return fail(p, "%s collects list items that were already handed over (this layout is not supported)",
                op_name(p->op));
  *start = m->pos;
  p->nm--;
  return 0;
}

/* Moves stack[start..sp) into a new container of the given type. */
static int collect(pickle *p, int type, size_t start) {
  size_t n = p->sp - start;
  if (type == PK_DICT && n % 2) return fail(p, "%s with an odd number of values (%zu)", op_name(p->op), n);
  pk_obj *o = obj_new(p, type, 0);
  if (!o) return -1;
  if (n && items_reserve(p, o, n)) {
    obj_release(p, o);
    return -1;
  }
  if (type == PK_DICT || type == PK_FROZENSET)
    for (size_t i = 0; i < n; i += type == PK_DICT ? 2 : 1)
      if (check_key(p, p->stack[start + i])) {
        obj_release(p, o);
        return -1;
      }
  if (n) memcpy(o->items, p->stack + start, n * sizeof(pk_val));
  o->len = type == PK_DICT ? n / 2 : n;
  p->sp = start;
  return push_obj(p, o);
}

/* ---- input ------------------------------------------------------------------------------ */

/* Makes n (at most 9) bytes available at buf[pos]; -1 (truncated or read error) otherwise. */
static int fill(pickle *p, size_t n) {
  if (!p->rd) return fail_truncated(p, n - (p->len - p->pos));
  if (p->pos) {
    memmove(p->buf, p->buf + p->pos, p->len - p->pos);
    p->len -= p->pos;
    p->base += p->pos;
    p->pos = 0;
  }
  while (p->len < n) {
    if (p->eof) return fail_truncated(p, n - p->len);
    ssize_t r = p->rd(p->rd_arg, p->buf + p->len, p->cap - p->len);
    if (r < 0) return fail(p, "cannot read the input");
    if (r == 0) p->eof = 1;
    p->len += (size_t)r;
  }
  return 0;
}

static inline const unsigned char *take(pickle *p, size_t n) {
  if (p->len - p->pos < n && fill(p, n)) return NULL;
  const unsigned char *b = p->buf + p->pos;
  p->pos += n;
  return b;
}

/* Whether n more bytes can exist: reports truncation early when the size is known. */
static int room_for(pickle *p, uint64_t n) {
  uint64_t at = p->base + p->pos;
  if (p->total != UINT64_MAX && (at > p->total || n > p->total - at))
    return fail_truncated(p, at > p->total ? n : n - (p->total - at));
  if (n > p->limit) return fail_memory(p);
  return 0;
}

/* Copies n bytes of the stream into dst. */
static int read_into(pickle *p, char *dst, size_t n) {
  size_t have = p->len - p->pos;
  if (have >= n) {
    memcpy(dst, p->buf + p->pos, n);
    p->pos += n;
    return 0;
  }
  memcpy(dst, p->buf + p->pos, have);
  p->pos += have;
  size_t got = have;
  if (!p->rd) return fail_truncated(p, n - got);
  /* The rest goes straight to dst; the buffer is empty now. */
  p->base += p->len;
  p->pos = p->len = 0;
  while (got < n) {
    if (p->eof) return fail_truncated(p, n - got);
    ssize_t r = p->rd(p->rd_arg, dst + got, n - got);
    if (r < 0) return fail(p, "cannot read the input");
    if (r == 0) p->eof = 1;
    got += (size_t)r;
    p->base += (uint64_t)r;
  }
  return 0;
}

/* Reads at least one more byte into the buffer (growing it when full): the count, 0 at the end, -1 error. */
static ssize_t read_more(pickle *p) {
  if (!p->rd || p->eof) return 0;
  if (p->pos) {
    memmove(p->buf, p->buf + p->pos, p->len - p->pos);
    p->len -= p->pos;
    p->base += p->pos;
    p->pos = 0;
  }
  if (p->len == p->cap) {
    if (charge(p, p->cap)) return -1;
    unsigned char *b = realloc(p->buf, p->cap * 2);
    if (!b) return fail_memory(p);
    p->buf = b;
    p->cap *= 2;
  }
  ssize_t r = p->rd(p->rd_arg, p->buf + p->len, p->cap - p->len);
  if (r < 0) return fail(p, "cannot read the input");
  if (r == 0) p->eof = 1;
  p->len += (size_t)r;
  return r;
}

/* The argument line of a text opcode, without its newline. */
static const char *read_line(pickle *p, size_t *len) {
  size_t scanned = 0;
  for (;;) {
    size_t avail = p->len - p->pos;
    const unsigned char *s = p->buf + p->pos;
    const unsigned char *nl = memchr(s + scanned, '\n', avail - scanned);
    if (nl) {
      *len = (size_t)(nl - s);
      p->pos += *len + 1;
      return (const char *)s;
    }
    scanned = avail;
    if (avail >= PK_MAX_LINE) {
      fail(p, "%s has an argument line longer than %zu MiB", op_name(p->op), PK_MAX_LINE >> 20);
      return NULL;
    }
    ssize_t r = read_more(p);
    if (r < 0) return NULL;
    if (r == 0) {
      fail(p, "truncated: the argument line of %s does not end before the end of the pickle", op_name(p->op));
      return NULL;
    }
  }
}

static uint32_t rd_u32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t rd_u64(const unsigned char *b) { return (uint64_t)rd_u32(b) | (uint64_t)rd_u32(b + 4) << 32; }

/* ---- text ------------------------------------------------------------------------------- */

/* UTF-8 as Python writes it with surrogatepass: well-formed sequences, surrogates allowed. */
static size_t utf8_bad_at(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    if (i + 8 <= n) {
      uint64_t w;
      memcpy(&w, s + i, 8);
      if (!(w & UINT64_C(0x8080808080808080))) {
        i += 8;
        continue;
      }
    }
    unsigned c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t k;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) k = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
      k = 2;
      if (c == 0xE0) lo = 0xA0;
    } else if (c >= 0xF0 && c <= 0xF4) {
      k = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else return i;
    if (i + k >= n) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t j = 2; j <= k; j++)
      if ((s[i + j] & 0xC0) != 0x80) return i;
    i += k + 1;
  }
  return n;
}

static int check_utf8(pickle *p, const pk_obj *o) {
  size_t at = utf8_bad_at((const unsigned char *)o->data, o->len);
  if (at < o->len) return fail(p, "%s holds text that is not UTF-8 (at its byte %zu)", op_name(p->op), at);
  return 0;
}

/* A str or bytes of n bytes read from the stream. */
static int push_data(pickle *p, int type, uint64_t n, int flags) {
  if (room_for(p, n)) return -1;
  pk_obj *o = obj_new(p, type, (size_t)n);
  if (!o) return -1;
  o->flags = (uint8_t)flags;
  if (read_into(p, o->data, (size_t)n) || (type == PK_STR && check_utf8(p, o))) {
    obj_release(p, o);
    return -1;
  }
  return push_obj(p, o);
}

/* A str from bytes already decoded. */
static int push_text(pickle *p, const char *s, size_t n) {
  pk_obj *o = obj_new(p, PK_STR, n);
  if (!o) return -1;
  memcpy(o->data, s, n);
  if (check_utf8(p, o)) {
    obj_release(p, o);
    return -1;
  }
  return push_obj(p, o);
}

static size_t utf8_put(char *out, uint32_t cp) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | cp >> 12);
    out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | cp >> 18);
  out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* UNICODE: raw-unicode-escape (\uXXXX and \UXXXXXXXX after an odd run of backslashes; every
 * other byte is a Latin-1 code point). */
static int op_unicode(pickle *p) {
  size_t n;
  const char *s = read_line(p, &n);
  if (!s) return -1;
  if (charge(p, 4 * (uint64_t)n + 1)) return -1;
  char *out = malloc(4 * n + 1);
  if (!out) {
    credit(p, 4 * (uint64_t)n + 1);
    return fail_memory(p);
  }
  size_t o = 0, bs = 0;
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if ((c == 'u' || c == 'U') && bs % 2 == 1) {
      size_t digits = c == 'u' ? 4 : 8;
      uint32_t cp = 0;
      if (i + digits >= n) {
        rc = fail(p, "UNICODE has a truncated \\%c escape", c);
        break;
      }
      int bad = 0;
      for (size_t j = 1; j <= digits; j++) {
        int h = hexval((unsigned char)s[i + j]);
        if (h < 0) bad = 1;
        else cp = cp << 4 | (uint32_t)h;
      }
      if (bad || cp > 0x10FFFF) {
        rc = fail(p, "UNICODE has an invalid \\%c escape", c);
        break;
      }
      o--; /* the backslash that started the escape */
      o += utf8_put(out + o, cp);
      i += digits;
      bs = 0;
      continue;
    }
    bs = c == '\\' ? bs + 1 : 0;
    o += utf8_put(out + o, c);
  }
  if (!rc) rc = push_text(p, out, o);
  free(out);
  credit(p, 4 * (uint64_t)n + 1);
  return rc;
}

/* STRING: a quoted Python 2 literal with backslash escapes. */
static int op_string(pickle *p) {
  size_t n;
  const char *s = read_line(p, &n);
  if (!s) return -1;
  while (n && (s[n - 1] == '\r' || s[n - 1] == ' ')) n--;
  if (n < 2 || s[0] != s[n - 1] || (s[0] != '\'' && s[0] != '"'))
    return fail(p, "the argument of STRING must be quoted");
  s++;
  n -= 2;
  if (charge(p, (uint64_t)n + 1)) return -1;
  char *out = malloc(n + 1);
  if (!out) {
    credit(p, (uint64_t)n + 1);
    return fail_memory(p);
  }
  size_t o = 0;
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c != '\\' || i + 1 == n) {
      out[o++] = c;
      continue;
    }
    char e = s[++i];
    switch (e) {
    case '\n': break;
    case '\\': out[o++] = '\\'; break;
    case '\'': out[o++] = '\''; break;
    case '"': out[o++] = '"'; break;
    case 'a': out[o++] = '\a'; break;
    case 'b': out[o++] = '\b'; break;
    case 'f': out[o++] = '\f'; break;
    case 'n': out[o++] = '\n'; break;
    case 'r': out[o++] = '\r'; break;
    case 't': out[o++] = '\t'; break;
    case 'v': out[o++] = '\v'; break;
    case 'x': {
      int h1 = i + 1 < n ? hexval((unsigned char)s[i + 1]) : -1, h2 = i + 2 < n ? hexval((unsigned char)s[i + 2]) : -1;
      if (h1 < 0 || h2 < 0) {
        rc = fail(p, "STRING has an invalid \\x escape");
        break;
      }
      out[o++] = (char)(h1 << 4 | h2);
      i += 2;
      break;
    }
    default:
      if (e >= '0' && e <= '7') {
        int v = e - '0';
        for (int k = 0; k < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7'; k++) v = v * 8 + (s[++i] - '0');
        out[o++] = (char)(v & 0xFF);
      } else {
        out[o++] = '\\';
        out[o++] = e;
      }
    }
    if (rc) break;
  }
  if (!rc) rc = push_text(p, out, o);
  free(out);
  credit(p, (uint64_t)n + 1);
  return rc;
}

/* ---- numbers ---------------------------------------------------------------------------- */

/* Little-endian two's complement of n bytes: an int, or a big int when it needs more than 64 bits. */
static int push_long_bytes(pickle *p, const unsigned char *b, size_t n) {
  while (n > 1 && ((b[n - 1] == 0 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xFF && (b[n - 2] & 0x80)))) n--;
  if (n == 0) return push_int(p, 0);
  if (n <= 8) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)b[i] << (8 * i);
    if ((b[n - 1] & 0x80) && n < 8) v |= ~UINT64_C(0) << (8 * n);
    return push_int(p, (int64_t)v);
  }
  pk_obj *o = obj_new(p, PK_BIGINT, n);
  if (!o) return -1;
  memcpy(o->data, b, n);
  return push_obj(p, o);
}

static int op_long4(pickle *p) {
  const unsigned char *b = take(p, 4);
  if (!b) return -1;
  int32_t n = (int32_t)rd_u32(b);
  if (n < 0) return fail(p, "LONG4 with a negative byte count");
  if (room_for(p, (uint64_t)n)) return -1;
  if (charge(p, (uint64_t)n)) return -1;
  unsigned char *tmp = malloc((size_t)n + 1);
  if (!tmp) {
    credit(p, (uint64_t)n);
    return fail_memory(p);
  }
  int rc = read_into(p, (char *)tmp, (size_t)n);
  if (!rc) rc = push_long_bytes(p, tmp, (size_t)n);
  free(tmp);
  credit(p, (uint64_t)n);
  return rc;
}

/* A decimal integer of a text opcode: optional sign, digits. */
static int parse_decimal(pickle *p, const char *s, size_t n, int64_t *out) {
  size_t i = 0;
  int neg = 0;
  if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  if (i == n) return fail(p, "%s has no digits in its argument", op_name(p->op));
  uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for (; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return fail(p, "%s has a malformed argument '%.*s'", op_name(p->op), (int)(n > 40 ? 40 : n), s);
    unsigned d = (unsigned)(s[i] - '0');
    if (v > (lim - d) / 10) return fail(p, "%s holds an integer beyond 64 bits", op_name(p->op));
    v = v * 10 + d;
  }
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 0;
}

static int op_int_text(pickle *p, int is_long) {
  size_t n;
  const char *s = read_line(p, &n);
  if (!s) return -1;
  if (!is_long && n == 2 && s[0] == '0' && (s[1] == '0' || s[1] == '1')) return push_bool(p, s[1] == '1');
  if (is_long && n && s[n - 1] == 'L') n--;
  int64_t v;
  if (parse_decimal(p, s, n, &v)) return -1;
  return push_int(p, v);
}

static int op_float_text(pickle *p) {
  size_t n;
  const char *s = read_line(p, &n);
  if (!s) return -1;
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\r' || s[n - 1] == '\t')) n--;
  while (n && (*s == ' ' || *s == '\t')) s++, n--;
  char tmp[128];
  if (n == 0 || n >= sizeof tmp) return fail(p, "FLOAT has a malformed argument");
  memcpy(tmp, s, n);
  tmp[n] = 0;
  char *end;
  double d = strtod(tmp, &end); /* the C locale: memplay never sets another */
  if (end != tmp + n) return fail(p, "FLOAT has a malformed argument '%s'", tmp);
  return push_float(p, d);
}

static int op_index_text(pickle *p, uint64_t *idx) {
  size_t n;
  const char *s = read_line(p, &n);
  if (!s) return -1;
  int64_t v;
  if (parse_decimal(p, s, n, &v)) return -1;
  if (v < 0) return fail(p, "%s with a negative memo index", op_name(p->op));
  *idx = (uint64_t)v;
  return 0;
}

/* ---- the machine ------------------------------------------------------------------------ */

static int refuse(pickle *p, int op) {
  if (op == OP_NEXT_BUFFER || op == OP_READONLY_BUFFER)
    return fail(p, "opcode %s (0x%02x) asks for an out-of-band buffer, which a file cannot supply", op_name(op), op);
  return fail(p, "opcode %s (0x%02x) would import or call code; memplay never runs code from a pickle",
              op_name(op), op);
}

/* The container opcodes whose work takes more than a line or two. */

static inline int op_mark(pickle *p) {
  if (p->nm == p->mcap) {
    size_t cap = p->mcap ? p->mcap * 2 : 64;
    if (charge(p, (uint64_t)(cap - p->mcap) * sizeof(pk_mark))) return -1;
    pk_mark *m = realloc(p->marks, cap * sizeof *m);
    if (!m) return fail_memory(p);
    p->marks = m;
    p->mcap = cap;
  }
  p->marks[p->nm++] = (pk_mark){p->sp, 0, 1};
  return 0;
}

static inline int op_appends(pickle *p) {
  if (!p->nm) return fail(p, "APPENDS without a MARK before it");
  pk_mark m = p->marks[p->nm - 1];
  if (m.pos == 0 || m.pos - 1 < outer_start(p)) return fail(p, "APPENDS without a list below its MARK");
  pk_val l = p->stack[m.pos - 1];
  if (l.type != PK_LIST) return fail(p, "APPENDS to %s, not a list", pk_type_a(l.type));
  pk_obj *L = l.u.o;
  L->taken += m.taken;
  p->nm--;
  size_t n = p->sp - m.pos;
  if (L->flags & PK_F_KEEP_ALL || !p->consumer) {
    if (n && items_reserve(p, L, L->len + n)) return -1;
    if (n) memcpy(L->items + L->len, p->stack + m.pos, n * sizeof(pk_val));
    L->len += n;
    p->sp = m.pos;
    return 0;
  }
  for (size_t i = 0; i < n; i++) {
    p->sp = m.pos + n; /* the items not yet moved stay owned by the stack */
    if (list_add(p, L, p->stack[m.pos + i])) {
      for (size_t j = i + 1; j < n; j++) pk_unref(p, p->stack[m.pos + j]);
      p->sp = m.pos;
      return -1;
    }
  }
  p->sp = m.pos;
  return 0;
}

static inline int op_setitem(pickle *p) {
  if (need_values(p, 3)) return -1;
  pk_val d = p->stack[p->sp - 3];
  if (d.type != PK_DICT) return fail(p, "SETITEM on %s, not a dict", pk_type_a(d.type));
  if (check_key(p, p->stack[p->sp - 2]) || items_reserve(p, d.u.o, 2 * d.u.o->len + 2)) return -1;
  d.u.o->items[2 * d.u.o->len] = p->stack[p->sp - 2];
  d.u.o->items[2 * d.u.o->len + 1] = p->stack[p->sp - 1];
  d.u.o->len++;
  p->sp -= 2;
  return 0;
}

/* SETITEMS into a dict, ADDITEMS into a set. */
static inline int op_setitems(pickle *p, int op) {
  /* After a failure nothing runs again and pickle_free frees every object: no unwinding. */
  size_t start = 0; /* set by pop_mark when it succeeds */
  if (pop_mark(p, &start)) return -1;
  size_t n = p->sp - start;
  int want = op == OP_SETITEMS ? PK_DICT : PK_SET;
  if (start == 0 || start - 1 < region_start(p))
    return fail(p, "%s without a %s below its MARK", op_name(op), want == PK_DICT ? "dict" : "set");
  pk_val d = p->stack[start - 1];
  if (d.type != want)
    return fail(p, "%s on %s, not a %s", op_name(op), pk_type_a(d.type), want == PK_DICT ? "dict" : "set");
  if (op == OP_SETITEMS && n % 2) return fail(p, "SETITEMS with an odd number of values (%zu)", n);
  for (size_t i = 0; i < n; i += op == OP_SETITEMS ? 2 : 1)
    if (check_key(p, p->stack[start + i])) return -1;
  size_t have = op == OP_SETITEMS ? 2 * d.u.o->len : d.u.o->len;
  if (n && items_reserve(p, d.u.o, have + n)) return -1;
  if (n) memcpy(d.u.o->items + have, p->stack + start, n * sizeof(pk_val));
  d.u.o->len += op == OP_SETITEMS ? n / 2 : n;
  p->sp = start;
  return 0;
}

/* ---- the opcodes step() hands to a function of their own ---------------------------------- */

static inline int op_pop(pickle *p) {
  size_t start = 0; /* set by pop_mark when it succeeds */
  if (p->sp == region_start(p)) {
    if (!p->nm) return underflow(p, 1);
    return pop_mark(p, &start);
  }
  pk_unref(p, p->stack[--p->sp]);
  return 0;
}

static int op_pop_mark(pickle *p) {
  size_t start = 0;
  if (pop_mark(p, &start)) return -1;
  while (p->sp > start) pk_unref(p, p->stack[--p->sp]);
  return 0;
}

static inline int op_dup(pickle *p) {
  if (need_values(p, 1)) return -1;
  pk_val v = p->stack[p->sp - 1];
  pk_ref(v);
  return push(p, v);
}

static int op_stop(pickle *p) {
  if (p->nm || p->sp != 1)
    return fail(p, "STOP with an unfinished structure (%zu values and %zu MARKs on the stack)", p->sp, p->nm);
  p->result = p->stack[--p->sp];
  p->has_result = 1;
  return 1;
}

static int op_proto(pickle *p) {
  const unsigned char *b = take(p, 1);
  if (!b) return -1;
  if (b[0] > 5) return fail(p, "unsupported pickle protocol %d (memplay reads protocols 0 to 5)", b[0]);
  if (!p->proto) p->proto = b[0];
  return 0;
}

static inline int op_none(pickle *p) {
  pk_val v;
  v.type = PK_NONE;
  v.u.i = 0;
  return push(p, v);
}

/* BININT, BININT1, BININT2: a little-endian integer of 4 (signed), 1 or 2 bytes. */
__attribute__((always_inline)) static inline int op_binint(pickle *p, size_t n) {
  const unsigned char *b = take(p, n);
  if (!b) return -1;
  return push_int(p, n == 4 ? (int32_t)rd_u32(b) : n == 2 ? b[0] | b[1] << 8 : b[0]);
}

static int op_long1(pickle *p) {
  const unsigned char *b = take(p, 1);
  if (!b) return -1;
  size_t n = b[0];
  if (!(b = take(p, n))) return -1;
  return push_long_bytes(p, b, n);
}

static int op_binfloat(pickle *p) {
  const unsigned char *b = take(p, 8);
  if (!b) return -1;
  uint64_t bits = 0;
  for (int i = 0; i < 8; i++) bits = bits << 8 | b[i];
  double d;
  memcpy(&d, &bits, sizeof d);
  return push_float(p, d);
}

/* A string or bytes whose length takes `len` bytes (1, 4 or 8) before it. */
__attribute__((always_inline)) static inline int op_data(pickle *p, size_t len, int type, int flags) {
  const unsigned char *b = take(p, len);
  if (!b) return -1;
  return push_data(p, type, len == 1 ? b[0] : len == 4 ? rd_u32(b) : rd_u64(b), flags);
}

static int op_binstring(pickle *p) {
  const unsigned char *b = take(p, 4);
  if (!b) return -1;
  int32_t n = (int32_t)rd_u32(b);
  if (n < 0) return fail(p, "BINSTRING with a negative length");
  return push_data(p, PK_STR, (uint64_t)n, 0);
}

/* LIST, TUPLE, DICT, FROZENSET: the values above the last MARK, collected. */
static inline int op_collect_mark(pickle *p, int type) {
  size_t start = 0;
  if (pop_mark(p, &start)) return -1;
  return collect(p, type, start);
}

/* TUPLE1, TUPLE2, TUPLE3: the top n values, collected. */
static inline int op_tuple_n(pickle *p, size_t n) {
  if (need_values(p, n)) return -1;
  return collect(p, PK_TUPLE, p->sp - n);
}

static inline int op_append(pickle *p) {
  if (need_values(p, 2)) return -1;
  pk_val l = p->stack[p->sp - 2];
  if (l.type != PK_LIST) return fail(p, "APPEND to %s, not a list", pk_type_a(l.type));
  pk_val v = p->stack[--p->sp];
  return list_add(p, l.u.o, v);
}

/* How a PUT or GET gives its memo index: MEMO_TEXT, as a line of text; 1 or 4, little-endian in
 * as many bytes; MEMO_NEXT (MEMOIZE), none: the next index. A constant at each call. */
enum { MEMO_TEXT = -1, MEMO_NEXT = 0 };

__attribute__((always_inline)) static inline int op_memo_index(pickle *p, int how, uint64_t *idx) {
  if (how == MEMO_NEXT) {
    *idx = p->memo_count;
    return 0;
  }
  if (how == MEMO_TEXT) return op_index_text(p, idx);
  const unsigned char *b = take(p, (size_t)how);
  if (!b) return -1;
  *idx = how == 4 ? rd_u32(b) : b[0];
  return 0;
}

/* PUT, BINPUT, LONG_BINPUT, MEMOIZE: the top value into the memo. */
__attribute__((always_inline)) static inline int op_put(pickle *p, int how) {
  uint64_t idx;
  if (op_memo_index(p, how, &idx) || need_values(p, 1)) return -1;
  return memo_put(p, idx, p->stack[p->sp - 1]);
}

/* GET, BINGET, LONG_BINGET: a memo entry onto the stack. */
__attribute__((always_inline)) static inline int op_get(pickle *p, int how) {
  uint64_t idx;
  pk_val v;
  if (op_memo_index(p, how, &idx) || memo_get(p, idx, &v)) return -1;
  return push(p, v);
}

/* One opcode: 0 to go on, 1 at STOP, -1 on error. A state machine, so one switch, as a virtual
 * machine dispatches: each case names the function that reads its argument and does its work. */
static int step(pickle *p, int op) {
  switch (op) {
  /* structure */
  case OP_MARK: return op_mark(p);
  case OP_POP: return op_pop(p);
  case OP_POP_MARK: return op_pop_mark(p);
  case OP_DUP: return op_dup(p);
  case OP_STOP: return op_stop(p);
  case OP_PROTO: return op_proto(p);
  case OP_FRAME: return take(p, 8) ? 0 : -1; /* a framing hint only */
  /* scalars */
  case OP_NONE: return op_none(p);
  case OP_NEWTRUE: return push_bool(p, 1);
  case OP_NEWFALSE: return push_bool(p, 0);
  case OP_BININT: return op_binint(p, 4);
  case OP_BININT1: return op_binint(p, 1);
  case OP_BININT2: return op_binint(p, 2);
  case OP_LONG1: return op_long1(p);
  case OP_LONG4: return op_long4(p);
  case OP_INT: return op_int_text(p, 0);
  case OP_LONG: return op_int_text(p, 1);
  case OP_BINFLOAT: return op_binfloat(p);
  case OP_FLOAT: return op_float_text(p);
  /* text and bytes */
  case OP_SHORT_BINUNICODE:
  case OP_SHORT_BINSTRING: return op_data(p, 1, PK_STR, 0);
  case OP_SHORT_BINBYTES: return op_data(p, 1, PK_BYTES, 0);
  case OP_BINUNICODE: return op_data(p, 4, PK_STR, 0);
  case OP_BINBYTES: return op_data(p, 4, PK_BYTES, 0);
  case OP_BINSTRING: return op_binstring(p);
  case OP_BINUNICODE8: return op_data(p, 8, PK_STR, 0);
  case OP_BINBYTES8: return op_data(p, 8, PK_BYTES, 0);
  case OP_BYTEARRAY8: return op_data(p, 8, PK_BYTES, PK_F_BYTEARRAY);
  case OP_STRING: return op_string(p);
  case OP_UNICODE: return op_unicode(p);
  /* containers */
  case OP_EMPTY_LIST: return push_obj(p, obj_new(p, PK_LIST, 0));
  case OP_EMPTY_DICT: return push_obj(p, obj_new(p, PK_DICT, 0));
  case OP_EMPTY_TUPLE: return push_obj(p, obj_new(p, PK_TUPLE, 0));
  case OP_EMPTY_SET: return push_obj(p, obj_new(p, PK_SET, 0));
  case OP_LIST: return op_collect_mark(p, PK_LIST);
  case OP_TUPLE: return op_collect_mark(p, PK_TUPLE);
  case OP_DICT: return op_collect_mark(p, PK_DICT);
  case OP_FROZENSET: return op_collect_mark(p, PK_FROZENSET);
  case OP_TUPLE1: return op_tuple_n(p, 1);
  case OP_TUPLE2: return op_tuple_n(p, 2);
  case OP_TUPLE3: return op_tuple_n(p, 3);
  case OP_APPEND: return op_append(p);
  case OP_APPENDS: return op_appends(p);
  case OP_SETITEM: return op_setitem(p);
  case OP_SETITEMS:
  case OP_ADDITEMS: return op_setitems(p, op);
  /* memo */
  case OP_PUT: return op_put(p, MEMO_TEXT);
  case OP_BINPUT: return op_put(p, 1);
  case OP_LONG_BINPUT: return op_put(p, 4);
  case OP_MEMOIZE: return op_put(p, MEMO_NEXT);
  case OP_GET: return op_get(p, MEMO_TEXT);
  case OP_BINGET: return op_get(p, 1);
  case OP_LONG_BINGET: return op_get(p, 4);
  /* never: code, objects and references outside the file */
  case OP_GLOBAL:
  case OP_STACK_GLOBAL:
  case OP_REDUCE:
  case OP_BUILD:
  case OP_INST:
  case OP_OBJ:
  case OP_NEWOBJ:
  case OP_NEWOBJ_EX:
  case OP_EXT1:
  case OP_EXT2:
  case OP_EXT4:
  case OP_PERSID:
  case OP_BINPERSID:
  case OP_NEXT_BUFFER:
  case OP_READONLY_BUFFER: return refuse(p, op);
  }
  return fail(p, "invalid opcode 0x%02x", op);
}

int pickle_load(pickle *p, pk_val *out) {
  if (p->failed) return -1;
  if (p->has_result) {
    *out = p->result;
    return 0;
  }
  for (;;) {
    if (p->pos == p->len) {
      p->op = -1;
      p->op_off = p->base + p->pos;
      if (fill(p, 1)) return -1;
    }
    p->op_off = p->base + p->pos;
    p->op = p->buf[p->pos++];
    int r = step(p, p->op);
    if (r < 0) {
      if (!p->failed) fail(p, "cannot read the pickle");
      return -1;
    }
    if (r == 1) break;
  }
  *out = p->result;
  return 0;
}

/* ---- lifecycle -------------------------------------------------------------------------- */

static pickle *pickle_alloc(const pickle_limits *lim) {
  pickle *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  if (!(p->all = calloc(1, sizeof *p->all))) {
    free(p);
    return NULL;
  }
  p->all->next = p->all->prev = p->all;
  p->limit = lim && lim->max_memory ? lim->max_memory : PK_DEFAULT_MEMORY;
  if (p->limit > PK_MAX_MEMORY) p->limit = PK_MAX_MEMORY;
  p->total = UINT64_MAX;
  p->op = -1;
  return p;
}

pickle *pickle_new(pickle_read_fn rd, void *arg, const pickle_limits *lim) {
  pickle *p = pickle_alloc(lim);
  if (!p) return NULL;
  p->rd = rd;
  p->rd_arg = arg;
  p->cap = PK_BUFSZ;
  p->buf = malloc(p->cap);
  p->own_buf = 1;
  if (!p->buf || charge(p, p->cap)) {
    pickle_free(p);
    return NULL;
  }
  return p;
}

pickle *pickle_new_mem(const void *data, size_t n, const pickle_limits *lim) {
  pickle *p = pickle_alloc(lim);
  if (!p) return NULL;
  p->buf = (unsigned char *)(uintptr_t)data;
  p->len = p->cap = n;
  p->eof = 1;
  p->total = n;
  return p;
}

void pickle_set_size(pickle *p, uint64_t total) { p->total = total; }

void pickle_set_consumer(pickle *p, pickle_item_fn fn, void *arg) {
  p->consumer = fn;
  p->carg = arg;
}

const char *pickle_error(const pickle *p) { return p->err; }
uint64_t pickle_offset(const pickle *p) { return p->op_off; }
int pickle_protocol(const pickle *p) { return p->proto; }
size_t pickle_peak_stack(const pickle *p) { return p->peak_sp; }
uint64_t pickle_peak_memory(const pickle *p) { return p->peak; }

void pickle_free(pickle *p) {
  if (!p) return;
  for (pk_obj *o = p->all->next, *next; o != p->all; o = next) {
    next = o->next;
    free(o->items);
    free(o);
  }
  free(p->all);
  free(p->stack);
  free(p->marks);
  for (size_t i = 0; i < p->memo_pages; i++) free(p->memo[i]);
  free(p->memo);
  free(p->freeq);
  while (p->nspare) free(p->spare[--p->nspare]);
  if (p->own_buf) free(p->buf);
  free(p);
}

/* ---- reading values --------------------------------------------------------------------- */

const pk_val *pk_dict_get(const pk_obj *d, const char *key) {
  if (!d || d->type != PK_DICT) return NULL;
  size_t kl = strlen(key);
  for (size_t i = d->len; i-- > 0;) {
    pk_val k = d->items[2 * i];
    if (k.type == PK_STR && k.u.o->len == kl && !memcmp(k.u.o->data, key, kl)) return &d->items[2 * i + 1];
  }
  return NULL;
}

int pk_str_eq(pk_val v, const char *s) {
  return v.type == PK_STR && v.u.o->len == strlen(s) && !memcmp(v.u.o->data, s, v.u.o->len);
}
