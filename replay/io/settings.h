/* settings.h: the allocator settings a trace recorded (a JSON object), as the key/value options models read. */
#ifndef REPLAY_SETTINGS_H
#define REPLAY_SETTINGS_H

#include "sim/allocator.h"

/*
 * A PyTorch snapshot records its allocator's settings as a JSON object (the store keeps it as
 * text): {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
 * "expandable_segments": false, "roundup_power2_divisions": {"1": 0, "2": 0, ...}, ...}. The
 * models know no JSON (sim/ uses the C library only), so each member becomes one sim_option whose
 * key is the member's name and whose value is the member's value written as text:
 *
 *   a string       its text               "expandable_segments:True" -> expandable_segments:True
 *   a number       its text, as written   -1 -> -1, 0.0 -> 0.0, 1e-3 -> 1e-3
 *   true, false    True, False            (the spelling of PYTORCH_CUDA_ALLOC_CONF)
 *   null           nothing (the empty text)
 *   an object      [key:value,...]        {"1": 0, "2": 4} -> [1:0,2:4] (the list syntax of
 *                                         PYTORCH_CUDA_ALLOC_CONF's roundup_power2_divisions)
 *   an array       [value,...]            [1, 2, 4] -> [1,2,4]
 *
 * Values inside objects and arrays are written the same way (below 32 levels of nesting; deeper
 * ones are written as "..."). Members keep their order, duplicates included. JSON's types are
 * not kept: the string "1" and the number 1 both become 1, and a string that holds ':', ',' or
 * brackets reads like a list inside an object or array. That is what a model needs for PyTorch's
 * settings, each of which has one type (the torch model reads them: sim/alloc_torch_config.c).
 */
typedef struct settings {
  sim_recorded recorded; /* what sim_allocator_init takes: the options, or why there are none */
  sim_option *opts;
  char *text;            /* the keys and values, each ended by a NUL */
  char error[96];
} settings;

/* Flattens json, a JSON object (NULL or "": nothing recorded, no options). Returns 0, or -1 when
 * json is not a JSON object: s->recorded.error then says so, for the model that would read the
 * settings to report (a model that does not read them is not stopped). Release s either way. */
int settings_init(settings *s, const char *json);
void settings_release(settings *s);

#endif
