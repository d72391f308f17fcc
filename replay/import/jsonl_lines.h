/* jsonl_lines.h: the JSON Lines importer's lines, read and parsed into fields (on a thread of their own for a large input). */
#ifndef REPLAY_JSONL_LINES_H
#define REPLAY_JSONL_LINES_H

#include <stddef.h>
#include <stdint.h>

#include "io/input.h"

/* The fields memplay knows, by name (jsonl_key_names, sorted). */
enum jkey {
  K_active_size,
  K_addr,
  K_allocated,
  K_allocated_size,
  K_allocator,
  K_allocator_settings,
  K_api_dur,
  K_args,
  K_attrs,
  K_batch_size,
  K_cat_source,
  K_category,
  K_detail,
  K_dev_ts,
  K_device,
  K_device_free,
  K_device_index,
  K_device_memory,
  K_device_name,
  K_dir,
  K_dur,
  K_expandable,
  K_flags,
  K_frames,
  K_framework,
  K_id,
  K_imported_at,
  K_kind,
  K_mem,
  K_memplay,
  K_name,
  K_pool,
  K_requested_size,
  K_reserved,
  K_segment,
  K_severity,
  K_size,
  K_source_file,
  K_source_format,
  K_stack,
  K_state,
  K_step,
  K_stream,
  K_ts,
  K_value,
  K__COUNT
};
extern const char *const jsonl_key_names[K__COUNT];
_Static_assert(K__COUNT <= 64, "a line's known keys are a 64-bit mask");

/* A field's JSON type: nested values (J_RAW) are kept as JSON text. */
enum { J_NULL, J_BOOL, J_NUM, J_STR, J_RAW };
#define MAX_FIELDS 48

typedef struct jfield {
  int32_t key;    /* enum jkey, or -1 for a key memplay does not know */
  int32_t type;
  int32_t plain;  /* a number of at most 18 digits, no fraction or exponent: its value is num */
  int32_t used;   /* read by the line's handler */
  uint32_t koff;  /* key text in the line's text (a key memplay does not know; the others are jsonl_key_names') */
  uint32_t off, len; /* value text in the line's text, NUL-terminated */
  int64_t num;
} jfield;

/* One parsed line, as its handler sees it: valid until the next jsonl_reader_next. */
typedef struct jsonl_view {
  jfield *f;
  int n;
  const char *buf;        /* the line's text: values, and keys memplay does not know */
  uint64_t seen;          /* the known keys the line holds: bit k for key k */
  int by_key[K__COUNT];   /* the field index of each key in seen (the others' are stale) */
} jsonl_view;

/* Whether the n bytes at a and b are the same (for short names: no call to memcmp). */
static inline int jsonl_same_bytes(const char *a, const unsigned char *b, size_t n) {
  size_t i = 0;
  while (i < n && (unsigned char)a[i] == b[i]) i++;
  return i == n;
}

/*
 * The reader: each non-blank line of in, parsed (the scanner in front of yajl) into fields, in
 * order. A large file is read and parsed on a thread of the reader's own, a batch of lines ahead
 * of its caller, so that parsing and the lines' handling share two cores; a small file or a pipe
 * in the caller's thread. Either way the caller sees the same lines and the same messages, the
 * first failing line's, after every line before it.
 */
typedef struct jsonl_reader jsonl_reader;

jsonl_reader *jsonl_reader_new(input *in, const char *path);
/* The next line into *v with its number in *lineno: 1; 0 at the end of the input (*lineno the
 * lines read, blank ones counted); -1 when it could not be read or parsed, with the message, which
 * names the file and the line, in jsonl_reader_error. */
int jsonl_reader_next(jsonl_reader *r, jsonl_view *v, int64_t *lineno);
const char *jsonl_reader_error(const jsonl_reader *r);
/* Stops the thread, if any, wherever it is, and frees the reader. */
void jsonl_reader_free(jsonl_reader *r);

#endif
