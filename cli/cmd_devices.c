/* cmd_devices.c: `memplay devices`: list, show, edit, create and delete device profiles. */
#include <stdlib.h>
#include <string.h>

#include "store/devices_store.h"
#include "io/jsonw.h"
#include "cli.h"

static const char *const devices_usage[] = {
  "memplay devices [NAME] [--set KEY=VALUE]... [--from BASE] [--delete] [--reset] [--fields] [--db FILE] [--json]",
  "  (no NAME)         list the device profiles",
  "  NAME              show a profile: every figure with its unit",
  "  --set KEY=VALUE   change a figure of NAME, e.g. h2d_pinned_bw=12GB/s (an edited built-in becomes 'user')",
  "  --from BASE       create the profile NAME as a copy of BASE (then --set changes it)",
  "  --delete          delete the user or calibrated profile NAME",
  "  --reset           give the built-in profile NAME its own figures back",
  "  --fields          list the figures a profile has, their units and meaning",
  NULL,
};
const cli_usage cmd_devices_usage = {
  .summary = "list, show, edit and create device profiles (memory, bandwidths, compute, costs)",
  .lines = devices_usage,
};

#define MAX_SETS 64

static const struct option devices_options[] = {
  {"set", required_argument, NULL, 's'},
  {"from", required_argument, NULL, 'f'},
  {"delete", no_argument, NULL, 'x'},
  {"reset", no_argument, NULL, 'r'},
  {"fields", no_argument, NULL, 'F'},
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

typedef struct devices_args {
  const char *name, *from;    /* NAME (NULL: list), --from BASE */
  const char *sets[MAX_SETS]; /* --set KEY=VALUE */
  int nsets, del, reset, fields;
} devices_args;

static void entry_json(yajl_gen g, const devices_entry *e) {
  yajl_gen_map_open(g);
  jsonw_kstr(g, "name", e->p.name);
  jsonw_kstr(g, "source", e->source);
  jsonw_kstr(g, "updated_at", e->updated_at[0] ? e->updated_at : NULL);
  devices_profile_json(g, &e->p);
  jsonw_kuint(g, "usable_memory", sim_device_usable(&e->p));
  yajl_gen_map_close(g);
}

typedef struct list_ctx {
  yajl_gen g; /* JSON output, or NULL */
} list_ctx;

static int list_one(void *arg, const devices_entry *e) {
  list_ctx *l = arg;
  if (l->g) {
    entry_json(l->g, e);
    return 0;
  }
  char mem[32], h2d[32], pg[32], bw[32], bf16[32];
  const sim_device_profile *p = &e->p;
  report_bytes(mem, sizeof mem, (int64_t)p->total_memory);
  snprintf(h2d, sizeof h2d, "%.1f GB/s", p->h2d_pinned_bw / 1e9);
  snprintf(pg, sizeof pg, "%.1f GB/s", p->h2d_pageable_bw / 1e9);
  snprintf(bw, sizeof bw, "%.0f GB/s", p->mem_bw / 1e9);
  if (p->bf16_flops > 0) snprintf(bf16, sizeof bf16, "%.0f TF", p->bf16_flops / 1e12);
  else snprintf(bf16, sizeof bf16, "%.0f TF*", p->fp16_flops / 1e12);
  printf("%-12s %-10s %10s %11s %12s %10s %8s  %s\n", p->name, e->source, mem, h2d, pg, bw, bf16, p->description);
  return 0;
}

static void show_human(const devices_entry *e) {
  printf("%s (%s%s%s)\n", e->p.name, e->source, e->updated_at[0] ? ", updated " : "", e->updated_at);
  for (size_t i = 0; i < sim_device_nfields; i++) {
    const sim_device_field *f = &sim_device_fields[i];
    char v[SIM_DEVICE_TEXT_MAX + 16];
    sim_device_format(&e->p, f, v, sizeof v);
    if (f->kind == SIM_DF_TEXT) printf("  %-16s %s\n", f->key, v);
    else printf("  %-16s %-20s %s\n", f->key, v, f->help);
  }
  char usable[48];
  report_bytes(usable, sizeof usable, (int64_t)sim_device_usable(&e->p));
  printf("  %-16s %-20s %s\n", "usable memory", usable,
         "total_memory less context_bytes: the capacity of 'replay --device' (--capacity overrides it)");
  printf("(the figures of built-in profiles and their sources: docs/devices.md)\n");
}

static void print_fields(void) {
  printf("%-16s %-10s %s\n", "FIELD", "UNIT", "MEANING");
  static const char *const units[] = {
    [SIM_DF_TEXT] = "text", [SIM_DF_BYTES] = "bytes", [SIM_DF_INT] = "count", [SIM_DF_RATE] = "B/s",
    [SIM_DF_FLOPS] = "FLOP/s", [SIM_DF_TIME] = "ns", [SIM_DF_PER_GIB] = "ns/GiB",
  };
  for (size_t i = 0; i < sim_device_nfields; i++) {
    const sim_device_field *f = &sim_device_fields[i];
    printf("%-16s %-10s %s\n", f->key, units[f->kind], f->help);
  }
  printf("\nValues take units: 80GB, 24GiB (sizes), 25GB/s (rates), 19.5TFLOPS or 312T, 5us, 1.5ms, 2s;\n"
         "per-GiB costs are a time (malloc_per_gib=72us). Stored in base units (bytes, B/s, FLOP/s, ns).\n");
}

/* Parses the options into a. 0, or -1 with the exit code in *code. */
static int devices_parse(int argc, char **argv, cli *c, devices_args *a, int *code) {
  memset(a, 0, sizeof *a);
  *code = CLI_OK;
  int opt;
  while ((opt = cli_getopt(argc, argv, "h", devices_options)) != -1) {
    int r = cli_common_option(c, "devices", opt, code);
    if (r < 0) return -1;
    if (r) continue;
    switch (opt) {
    case 's':
      if (a->nsets == MAX_SETS) {
        *code = cli_usage_error("devices", "at most %d --set options", MAX_SETS);
        return -1;
      }
      if (!strchr(optarg, '=')) {
        *code = cli_usage_error("devices", "--set wants KEY=VALUE, not '%s'", optarg);
        return -1;
      }
      a->sets[a->nsets++] = optarg;
      break;
    case 'f': a->from = optarg; break;
    case 'x': a->del = 1; break;
    case 'r': a->reset = 1; break;
    case 'F': a->fields = 1; break;
    }
  }
  return 0;
}

/* The KEY of --set KEY=VALUE. */
static void set_key(const char *set, char *key, size_t n) {
  snprintf(key, n, "%.*s", (int)(strchr(set, '=') - set), set);
}

/* Takes NAME and checks that the options go together and that every --set names a figure and a
 * value it takes, before the store is touched. CLI_OK, or CLI_USAGE after the message. */
static int devices_check(devices_args *a, int argc, char **argv) {
  if (optind + 1 < argc) return cli_usage_error("devices", "devices takes at most one NAME");
  a->name = optind < argc ? argv[optind] : NULL;
  if (!a->name && (a->nsets || a->from || a->del || a->reset))
    return cli_usage_error("devices", "name the device profile to change");
  if (a->del + a->reset + (a->from != NULL) > 1)
    return cli_usage_error("devices", "--delete, --reset and --from exclude each other");
  if ((a->del || a->reset) && a->nsets) return cli_usage_error("devices", "--set cannot go with --delete or --reset");
  if (a->name && !sim_device_name_ok(a->name))
    return cli_usage_error("devices", "'%s' is not a valid profile name (letters, digits, '-', '_', '.')", a->name);
  sim_device_profile scratch;
  sim_device_defaults(&scratch);
  char err[1024];
  for (int i = 0; i < a->nsets; i++) {
    char key[64];
    set_key(a->sets[i], key, sizeof key);
    if (!strcmp(key, "name")) return cli_usage_error("devices", "the name is not a field (create a copy with --from)");
    if (sim_device_set(&scratch, key, strchr(a->sets[i], '=') + 1, err, sizeof err))
      return cli_usage_error("devices", "%s", err);
  }
  return CLI_OK;
}

/* Every profile in the store, as a table or {"devices": [...]}. 0, or -1 with err set. */
static int list_profiles(cli *c, store *s, char *err, size_t n) {
  list_ctx l = {NULL};
  if (c->json) {
    l.g = jsonw_file(stdout, 0);
    yajl_gen_map_open(l.g);
    jsonw_str(l.g, "devices");
    yajl_gen_array_open(l.g);
  } else {
    printf("%-12s %-10s %10s %11s %12s %10s %8s  %s\n", "NAME", "SOURCE", "MEMORY", "H2D PINNED", "H2D PAGEABLE",
           "MEM BW", "BF16", "DESCRIPTION");
  }
  if (devices_store_each(s, list_one, &l, err, n)) {
    if (l.g) yajl_gen_free(l.g);
    return -1;
  }
  if (l.g) {
    yajl_gen_array_close(l.g);
    yajl_gen_map_close(l.g);
    putchar('\n');
    yajl_gen_free(l.g);
  } else {
    printf("(* no BF16: the FP16 tensor rate; 'memplay devices NAME' shows every figure)\n");
  }
  return 0;
}

/* --delete */
static int delete_profile(store *s, const char *name, char *err, size_t n) {
  int rc = devices_store_delete(s, name, err, n);
  if (rc == 1) snprintf(err, n, "no device profile '%s' (see 'memplay devices')", name);
  return rc ? -1 : 0;
}

/* --reset, then the profile as it now is in *e. */
static int reset_profile(store *s, const char *name, devices_entry *e, char *err, size_t n) {
  int rc = devices_store_reset(s, name, err, n);
  if (rc == 1) snprintf(err, n, "'%s' is not a built-in device profile (only built-ins can be reset)", name);
  if (rc) return -1;
  return devices_store_get(s, name, e, err, n) < 0 ? -1 : 0;
}

/* --from BASE: a copy of BASE named NAME in *e (not stored yet); NAME must be new. */
static int copy_profile(store *s, const char *name, const char *from, devices_entry *e, char *err, size_t n) {
  int rc = devices_store_get(s, name, e, err, n);
  if (rc < 0) return -1;
  if (rc == 0) {
    snprintf(err, n, "device profile '%s' already exists (edit it with --set)", e->p.name);
    return -1;
  }
  rc = devices_store_get(s, from, e, err, n);
  if (rc < 0) return -1;
  if (rc == 1) {
    snprintf(err, n, "no device profile '%s' to copy (see 'memplay devices')", from);
    return -1;
  }
  snprintf(e->p.name, sizeof e->p.name, "%s", name);
  e->p.match[0] = 0; /* a copy is chosen by name, never by a trace's recorded device */
  return 0;
}

/* NAME shown, or changed by --from and --set, stored and read back into *e; *verb says what
 * happened (NULL: nothing). */
static int edit_profile(store *s, const devices_args *a, devices_entry *e, const char **verb, char *err, size_t n) {
  if (a->from) {
    if (copy_profile(s, a->name, a->from, e, err, n)) return -1;
    *verb = "created";
  } else {
    int rc = devices_store_get(s, a->name, e, err, n);
    if (rc < 0) return -1;
    if (rc == 1) {
      snprintf(err, n, "no device profile '%s' (see 'memplay devices'; create one with --from BASE)", a->name);
      return -1;
    }
    *verb = a->nsets ? "updated" : NULL;
  }
  for (int i = 0; i < a->nsets; i++) {
    char key[64];
    set_key(a->sets[i], key, sizeof key);
    sim_device_set(&e->p, key, strchr(a->sets[i], '=') + 1, err, n); /* checked by devices_check */
  }
  int writes = a->nsets || a->from;
  if (writes) {
    const char *source = a->from || !strcmp(e->source, "builtin") ? "user" : e->source;
    if (devices_store_put(s, &e->p, source, err, n)) return -1;
  }
  if ((writes || !*verb) && devices_store_get(s, a->name, e, err, n) < 0) return -1;
  return 0;
}

/* What a change did: the profile as it now is (with the verb first), or that it was deleted. */
static void print_change(cli *c, const devices_args *a, const devices_entry *e, const char *verb) {
  if (c->json) {
    yajl_gen g = jsonw_file(stdout, 0);
    if (a->del) {
      yajl_gen_map_open(g);
      jsonw_kstr(g, "deleted", a->name);
      yajl_gen_map_close(g);
    } else {
      entry_json(g, e);
    }
    putchar('\n');
    yajl_gen_free(g);
  } else if (a->del) {
    printf("deleted device profile '%s'\n", a->name);
  } else {
    if (verb) printf("%s device profile '%s' (%s)\n", verb, e->p.name, e->source);
    show_human(e);
  }
}

/* Gives up on the store: err printed, the transaction rolled back. Returns CLI_FAIL. */
static int devices_fail(store *s, const char *err) {
  cli_error("%s", err);
  store_rollback(s);
  store_close(s);
  return CLI_FAIL;
}

int cmd_devices(int argc, char **argv, cli *c) {
  devices_args a;
  int code;
  if (devices_parse(argc, argv, c, &a, &code)) return code;
  if (a.fields) {
    if (optind != argc || a.nsets || a.from || a.del || a.reset)
      return cli_usage_error("devices", "--fields takes no other arguments");
    print_fields();
    return CLI_OK;
  }
  if ((code = devices_check(&a, argc, argv)) != CLI_OK) return code;
  store *s = cli_open_store(c, 1);
  if (!s) return CLI_FAIL;
  if (store_begin(s)) {
    cli_error("%s", store_error(s));
    store_close(s);
    return CLI_FAIL;
  }
  char err[1024];
  if (devices_store_seed(s, err, sizeof err)) return devices_fail(s, err);
  if (!a.name) {
    if (list_profiles(c, s, err, sizeof err)) return devices_fail(s, err);
    if (store_commit(s)) return devices_fail(s, store_error(s));
    store_close(s);
    return CLI_OK;
  }
  devices_entry e;
  const char *verb = NULL;
  int rc;
  if (a.del) {
    rc = delete_profile(s, a.name, err, sizeof err);
  } else if (a.reset) {
    rc = reset_profile(s, a.name, &e, err, sizeof err);
    verb = "reset";
  } else {
    rc = edit_profile(s, &a, &e, &verb, err, sizeof err);
  }
  if (rc) return devices_fail(s, err);
  if (store_commit(s)) return devices_fail(s, store_error(s));
  print_change(c, &a, &e, verb);
  store_close(s);
  return CLI_OK;
}
