/* devices_store.h: device profiles in the store: the built-ins, and user and calibrated profiles beside them. */
#ifndef REPLAY_DEVICES_STORE_H
#define REPLAY_DEVICES_STORE_H

#include <yajl/yajl_gen.h>

#include "sim/devices.h"
#include "store.h"

/*
 * Profiles live in the store's device_profiles table: (name, source, total_memory, params,
 * updated_at), params being the profile as a JSON object (docs/devices.md). source says where
 * the figures come from:
 *   builtin     memplay's own figures (sim/devices.c); refreshed when memplay's change
 *   user        made or edited by hand (an edited built-in becomes a user profile)
 *   calibrated  measured on a real GPU by `memplay calibrate`
 * Reads see the built-ins even in a store that has not been seeded: a row overrides the
 * built-in of the same name unless the row is itself a built-in (then memplay's current
 * figures win). Names compare without regard to case.
 */
#define DEVICES_SOURCE_MAX 16
extern const char *const devices_sources[]; /* "builtin", "user", "calibrated", NULL */

typedef struct devices_entry {
  sim_device_profile p;
  char source[DEVICES_SOURCE_MAX];
  char updated_at[32]; /* empty for built-ins not yet in the store */
} devices_entry;

/* Writes the built-ins that are missing or out of date into the store. Returns 0 or -1. */
int devices_store_seed(store *s, char *err, size_t errlen);
/* Looks a profile up by name: 0 found, 1 absent, -1 error. */
int devices_store_get(store *s, const char *name, devices_entry *e, char *err, size_t errlen);
/* Calls fn for every profile, built-ins first in memplay's order, then the others by name. */
int devices_store_each(store *s, int (*fn)(void *arg, const devices_entry *e), void *arg, char *err, size_t errlen);
/* Inserts or replaces a profile (checked first); source is one of devices_sources. */
int devices_store_put(store *s, const sim_device_profile *p, const char *source, char *err, size_t errlen);
/* Deletes a user or calibrated profile: 0, 1 when absent, -1 error (built-ins cannot be deleted). */
int devices_store_delete(store *s, const char *name, char *err, size_t errlen);
/* Restores a built-in's figures (undoing edits): 0, 1 when name is not a built-in, -1 error. */
int devices_store_reset(store *s, const char *name, char *err, size_t errlen);
/*
 * The profile a trace's recorded device name (and memory, 0 unknown) identifies: 0 found,
 * 1 none, -1 error. Calibrated profiles win over the others, then the closest memory size.
 */
int devices_store_match(store *s, const char *recorded_name, uint64_t recorded_memory, devices_entry *e, char *err,
                        size_t errlen);

/* The profile's fields as members of an open JSON object, in base units (bytes, B/s, FLOP/s, ns). */
void devices_profile_json(yajl_gen g, const sim_device_profile *p);
/* Reads params JSON over *p (fields absent keep their values; unknown keys are ignored). */
int devices_profile_from_json(const char *json, sim_device_profile *p, char *err, size_t errlen);

#endif
