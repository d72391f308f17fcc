/* gen.h: synthetic traces: a transformer training loop, deterministic by seed, of any length. */
#ifndef REPLAY_GEN_H
#define REPLAY_GEN_H

#include <stdint.h>

#include "engine/source.h"
#include "store/store.h"

typedef struct gen_config {
  uint64_t events; /* stop after this many events */
  uint64_t seed;
  int batch;       /* samples per step (0: chosen from the seed) */
} gen_config;

typedef struct gen gen;

gen *gen_new(const gen_config *cfg);
void gen_free(gen *g);
/* The model the seed chose, in words ("12 layers, hidden 1536, batch 16, ..."). */
const char *gen_describe(const gen *g);
int gen_batch(const gen *g);

/*
 * The generator as an event source. Events carry the generator's own small ids in `stack`
 * and `name` (1..gen_nsites / gen_nnames); gen_store_source maps them to store ids so the
 * trace can be written to a store.
 */
replay_source gen_source(gen *g);
int gen_nsites(void);
int gen_nnames(void);
const char *gen_name(int id);
/* Writes a generated trace of cfg into the store as `name` (inside the caller's transaction). */
int gen_write(store *s, const gen_config *cfg, const char *name, int64_t *trace_id, char *err, size_t errlen);

#endif
