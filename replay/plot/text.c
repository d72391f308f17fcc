/* text.c: the state at a moment in words (`memplay replay --at`) and as JSON (`--json`). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "io/jsonw.h"
#include "plot.h"

static const char *state_name(int st) {
  return st == SIM_BLOCK_FREE ? "free" : st == SIM_BLOCK_PENDING_FREE ? "pending_free" : "allocated";
}

static void text_summary(FILE *f, const replay_moment *m) {
  char a[32], b[32], c[32], d[32];
  fprintf(f, "  allocated %s, reserved %s, requested %s, active %s\n", plot_bytes(a, sizeof a, (double)m->allocated),
          plot_bytes(b, sizeof b, (double)m->reserved), plot_bytes(c, sizeof c, (double)m->requested),
          plot_bytes(d, sizeof d, (double)m->active));
  if (m->oom) {
    fprintf(f, "  OOM: needed %s, largest free block %s, %s free in %" PRIu64 " blocks\n",
            plot_bytes(a, sizeof a, (double)m->oom_size), plot_bytes(b, sizeof b, (double)m->largest_free),
            plot_bytes(c, sizeof c, (double)m->free_bytes), m->free_blocks);
    fprintf(f, "    %s\n", m->oom_message);
  }
  if (!m->walked) {
    fprintf(f, "  the %s model keeps no segments: only the totals above are known\n", m->allocator);
    return;
  }
  fprintf(f, "  largest free block %s; %s free in %" PRIu64 " block%s; %s freed but not yet reusable\n",
          plot_bytes(a, sizeof a, (double)m->largest_free), plot_bytes(b, sizeof b, (double)m->free_bytes),
          m->free_blocks, m->free_blocks == 1 ? "" : "s", plot_bytes(c, sizeof c, (double)m->pending_bytes));
  fprintf(f, "  fragmentation: internal %.1f%% (%s placed for %s requested), external %.1f%% (1 - largest free "
             "block / free bytes)\n",
          100 * m->internal_fragmentation, plot_bytes(a, sizeof a, (double)m->block_bytes),
          plot_bytes(b, sizeof b, (double)m->requested_bytes), 100 * m->external_fragmentation);
}

static void text_pools(FILE *f, const replay_moment *m) {
  char a[32], b[32], c[32], d[32];
  if (!m->npools) return;
  fprintf(f, "pools\n");
  for (size_t i = 0; i < m->npools; i++) {
    const replay_moment_pool *p = &m->pools[i];
    fprintf(f, "  device %d %s pool: %" PRIu64 " segments, reserved %s, allocated %s, free %s in %" PRIu64
               " blocks, largest free %s\n",
            p->device, p->pool ? "large" : "small", p->segments, plot_bytes(a, sizeof a, (double)p->reserved),
            plot_bytes(b, sizeof b, (double)p->allocated), plot_bytes(c, sizeof c, (double)p->free), p->free_blocks,
            plot_bytes(d, sizeof d, (double)p->largest_free));
  }
}

static void text_segments(FILE *f, const replay_moment *m, const replay_names *names) {
  char a[32], b[32];
  if (!m->nsegments) return;
  fprintf(f, "segments (address, size, stream, pool) and their blocks\n");
  for (size_t i = 0; i < m->nsegments; i++) {
    const replay_moment_segment *s = &m->segments[i];
    fprintf(f, "  0x%012" PRIx64 " %12s  device %d, stream %" PRId64 ", %s pool%s\n", s->addr,
            plot_bytes(a, sizeof a, (double)s->size), s->device, s->stream, s->pool ? "large" : "small",
            s->expandable ? ", expandable" : "");
    for (size_t k = s->first; k < s->first + s->nblocks; k++) {
      const replay_moment_block *bl = &m->blocks[k];
      fprintf(f, "    0x%012" PRIx64 " %12s  %-12s", bl->addr, plot_bytes(a, sizeof a, (double)bl->size),
              state_name(bl->state));
      if (bl->state != SIM_BLOCK_FREE) {
        fprintf(f, " %-15s requested %s", bl->known ? sim_category_name(bl->category) : "?",
                plot_bytes(b, sizeof b, (double)bl->requested));
        if (bl->known && bl->stack) {
          char *label = replay_stack_label(names, bl->stack);
          if (label) fprintf(f, "  %.100s", label);
          free(label);
        }
      }
      fputc('\n', f);
    }
  }
}

void plot_moment_text(FILE *f, const replay_moment *m, const replay_names *names) {
  text_summary(f, m);
  text_pools(f, m);
  text_segments(f, m, names);
}

static void json_totals(yajl_gen g, const replay_moment *m) {
  jsonw_kstr(g, "at", m->what);
  jsonw_kint(g, "event", m->seq);
  jsonw_kint(g, "ts_ns", m->ts);
  jsonw_kstr(g, "allocator", m->allocator);
  jsonw_kint(g, "allocated", m->allocated);
  jsonw_kint(g, "reserved", m->reserved);
  jsonw_kint(g, "requested", m->requested);
  jsonw_kint(g, "active", m->active);
  jsonw_kbool(g, "segments_known", m->walked);
  jsonw_kuint(g, "largest_free_block", m->largest_free);
  jsonw_kuint(g, "free_bytes", m->free_bytes);
  jsonw_kuint(g, "free_blocks", m->free_blocks);
  jsonw_kuint(g, "pending_free_bytes", m->pending_bytes);
  jsonw_kdouble(g, "internal_fragmentation", m->internal_fragmentation);
  jsonw_kdouble(g, "external_fragmentation", m->external_fragmentation);
  jsonw_str(g, "live_by_category");
  yajl_gen_map_open(g);
  for (int k = 0; k < SIM_CAT__COUNT; k++)
    if (m->category_bytes[k]) jsonw_kint(g, sim_category_name(k), m->category_bytes[k]);
  yajl_gen_map_close(g);
  jsonw_str(g, "oom");
  if (!m->oom) {
    jsonw_null(g);
    return;
  }
  yajl_gen_map_open(g);
  jsonw_kuint(g, "requested", m->oom_size);
  jsonw_kint(g, "stream", m->oom_stream);
  jsonw_kuint(g, "largest_free_block", m->largest_free);
  jsonw_kuint(g, "free_bytes", m->free_bytes);
  jsonw_kuint(g, "free_blocks", m->free_blocks);
  jsonw_kstr(g, "message", m->oom_message);
  yajl_gen_map_close(g);
}

static void json_segments(yajl_gen g, const replay_moment *m) {
  jsonw_str(g, "pools");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < m->npools; i++) {
    const replay_moment_pool *p = &m->pools[i];
    yajl_gen_map_open(g);
    jsonw_kint(g, "device", p->device);
    jsonw_kstr(g, "pool", p->pool ? "large" : "small");
    jsonw_kuint(g, "segments", p->segments);
    jsonw_kuint(g, "reserved", p->reserved);
    jsonw_kuint(g, "allocated", p->allocated);
    jsonw_kuint(g, "requested", p->requested);
    jsonw_kuint(g, "pending_free", p->pending);
    jsonw_kuint(g, "free", p->free);
    jsonw_kuint(g, "free_blocks", p->free_blocks);
    jsonw_kuint(g, "largest_free_block", p->largest_free);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
  jsonw_str(g, "segments");
  yajl_gen_array_open(g);
  for (size_t i = 0; i < m->nsegments; i++) {
    const replay_moment_segment *s = &m->segments[i];
    yajl_gen_map_open(g);
    jsonw_kint(g, "device", s->device);
    jsonw_kuint(g, "address", s->addr);
    jsonw_kuint(g, "size", s->size);
    jsonw_kint(g, "stream", s->stream);
    jsonw_kstr(g, "pool", s->pool ? "large" : "small");
    jsonw_kbool(g, "expandable", s->expandable);
    jsonw_str(g, "blocks");
    yajl_gen_array_open(g);
    for (size_t k = s->first; k < s->first + s->nblocks; k++) {
      const replay_moment_block *b = &m->blocks[k];
      yajl_gen_map_open(g);
      jsonw_kuint(g, "address", b->addr);
      jsonw_kuint(g, "size", b->size);
      jsonw_kstr(g, "state", state_name(b->state));
      if (b->state != SIM_BLOCK_FREE) {
        jsonw_kuint(g, "requested", b->requested);
        jsonw_kstr(g, "category", b->known ? sim_category_name(b->category) : NULL);
        if (b->known) jsonw_kuint(g, "trace_address", b->trace_addr);
        if (b->known && b->stack) jsonw_kint(g, "stack", b->stack);
      }
      yajl_gen_map_close(g);
    }
    yajl_gen_array_close(g);
    yajl_gen_map_close(g);
  }
  yajl_gen_array_close(g);
}

void plot_moment_json(yajl_gen g, const replay_moment *m) {
  json_totals(g, m);
  json_segments(g, m);
}
