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

static void entry_json(yajl_gen g, const devices_entry *e) {
  yajl_gen_map_open(g);
  jsonw_kstr(g, "name", e->p.name);
  jsonw_kstr(g, "source", e->source);
  jsonw_kstr(g, "updated_at", e->updated_at[0] ? e->updated_at : NULL);
  devices_profile_json(g, &e->p);
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

int cmd_devices(int argc, char **argv, cli *c) {
  static const struct option opts[] = {
    {"set", required_argument, NULL, 's'},
    {"from", required_argument, NULL, 'f'},
    {"delete", no_argument, NULL, 'x'},
    {"reset", no_argument, NULL, 'r'},
    {"fields", no_argument, NULL, 'F'},
    CLI_COMMON_OPTIONS,
    {NULL, 0, NULL, 0},
  };
  const char *sets[MAX_SETS], *from = NULL;
  int nsets = 0, del = 0, reset = 0, fields = 0, opt, code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, "h", opts)) != -1) {
    int r = cli_common_option(c, "devices", opt, &code);
    if (r < 0) return code;
    if (r) continue;
    switch (opt) {
    case 's':
      if (nsets == MAX_SETS) return cli_usage_error("devices", "at most %d --set options", MAX_SETS);
      if (!strchr(optarg, '=')) return cli_usage_error("devices", "--set wants KEY=VALUE, not '%s'", optarg);
      sets[nsets++] = optarg;
      break;
    case 'f': from = optarg; break;
    case 'x': del = 1; break;
    case 'r': reset = 1; break;
    case 'F': fields = 1; break;
    }
  }
  if (fields) {
    if (optind != argc || nsets || from || del || reset)
      return cli_usage_error("devices", "--fields takes no other arguments");
    print_fields();
    return CLI_OK;
  }
  if (optind + 1 < argc) return cli_usage_error("devices", "devices takes at most one NAME");
  const char *name = optind < argc ? argv[optind] : NULL;
  if (!name && (nsets || from || del || reset)) return cli_usage_error("devices", "name the device profile to change");
  if (del + reset + (from != NULL) > 1) return cli_usage_error("devices", "--delete, --reset and --from exclude each other");
  if ((del || reset) && nsets) return cli_usage_error("devices", "--set cannot go with --delete or --reset");
  if (name && !sim_device_name_ok(name))
    return cli_usage_error("devices", "'%s' is not a valid profile name (letters, digits, '-', '_', '.')", name);

  /* Check the edits before touching the store. */
  sim_device_profile scratch;
  sim_device_defaults(&scratch);
  char err[1024];
  for (int i = 0; i < nsets; i++) {
    char key[64];
    const char *eq = strchr(sets[i], '=');
    snprintf(key, sizeof key, "%.*s", (int)(eq - sets[i]), sets[i]);
    if (!strcmp(key, "name")) return cli_usage_error("devices", "the name is not a field (create a copy with --from)");
    if (sim_device_set(&scratch, key, eq + 1, err, sizeof err)) return cli_usage_error("devices", "%s", err);
  }

  store *s = cli_open_store(c, 1);
  if (!s) return CLI_FAIL;
  int writes = name && (nsets || from || del || reset);
  devices_entry e;
  yajl_gen g = NULL;
  if (store_begin(s)) {
    cli_error("%s", store_error(s));
    store_close(s);
    return CLI_FAIL;
  }
  if (devices_store_seed(s, err, sizeof err)) goto fail;

  if (!name) { /* list */
    list_ctx l = {NULL};
    if (c->json) {
      g = jsonw_file(stdout, 0);
      yajl_gen_map_open(g);
      jsonw_str(g, "devices");
      yajl_gen_array_open(g);
      l.g = g;
    } else {
      printf("%-12s %-10s %10s %11s %12s %10s %8s  %s\n", "NAME", "SOURCE", "MEMORY", "H2D PINNED", "H2D PAGEABLE",
             "MEM BW", "BF16", "DESCRIPTION");
    }
    if (devices_store_each(s, list_one, &l, err, sizeof err)) goto fail;
    if (g) {
      yajl_gen_array_close(g);
      yajl_gen_map_close(g);
      putchar('\n');
    } else {
      printf("(* no BF16: the FP16 tensor rate; 'memplay devices NAME' shows every figure)\n");
    }
    goto done;
  }

  int rc;
  const char *verb = NULL;
  if (del) {
    rc = devices_store_delete(s, name, err, sizeof err);
    if (rc < 0) goto fail;
    if (rc == 1) {
      snprintf(err, sizeof err, "no device profile '%s' (see 'memplay devices')", name);
      goto fail;
    }
    verb = "deleted";
  } else if (reset) {
    rc = devices_store_reset(s, name, err, sizeof err);
    if (rc < 0) goto fail;
    if (rc == 1) {
      snprintf(err, sizeof err, "'%s' is not a built-in device profile (only built-ins can be reset)", name);
      goto fail;
    }
    verb = "reset";
    if (devices_store_get(s, name, &e, err, sizeof err) < 0) goto fail; /* what is printed */
  } else {
    if (from) {
      rc = devices_store_get(s, name, &e, err, sizeof err);
      if (rc < 0) goto fail;
      if (rc == 0) {
        snprintf(err, sizeof err, "device profile '%s' already exists (edit it with --set)", e.p.name);
        goto fail;
      }
      rc = devices_store_get(s, from, &e, err, sizeof err);
      if (rc < 0) goto fail;
      if (rc == 1) {
        snprintf(err, sizeof err, "no device profile '%s' to copy (see 'memplay devices')", from);
        goto fail;
      }
      snprintf(e.p.name, sizeof e.p.name, "%s", name);
      e.p.match[0] = 0; /* a copy is chosen by name, never by a trace's recorded device */
      verb = "created";
    } else {
      rc = devices_store_get(s, name, &e, err, sizeof err);
      if (rc < 0) goto fail;
      if (rc == 1) {
        snprintf(err, sizeof err, "no device profile '%s' (see 'memplay devices'; create one with --from BASE)", name);
        goto fail;
      }
      verb = nsets ? "updated" : NULL;
    }
    for (int i = 0; i < nsets; i++) {
      char key[64];
      const char *eq = strchr(sets[i], '=');
      snprintf(key, sizeof key, "%.*s", (int)(eq - sets[i]), sets[i]);
      sim_device_set(&e.p, key, eq + 1, err, sizeof err); /* checked above */
    }
    if (writes) {
      const char *source = from || !strcmp(e.source, "builtin") ? "user" : e.source;
      if (devices_store_put(s, &e.p, source, err, sizeof err)) goto fail;
    }
    if (writes || !verb) {
      rc = devices_store_get(s, name, &e, err, sizeof err);
      if (rc < 0) goto fail;
    }
  }
  if (store_commit(s)) {
    snprintf(err, sizeof err, "%s", store_error(s));
    goto fail;
  }
  if (c->json) {
    g = jsonw_file(stdout, 0);
    if (del) {
      yajl_gen_map_open(g);
      jsonw_kstr(g, "deleted", name);
      yajl_gen_map_close(g);
    } else {
      entry_json(g, &e);
    }
    putchar('\n');
  } else if (del) {
    printf("deleted device profile '%s'\n", name);
  } else {
    if (verb) printf("%s device profile '%s' (%s)\n", verb, e.p.name, e.source);
    show_human(&e);
  }
  if (g) yajl_gen_free(g);
  store_close(s);
  return code;

done:
  if (g) yajl_gen_free(g);
  if (store_commit(s)) {
    cli_error("%s", store_error(s));
    store_rollback(s);
    store_close(s);
    return CLI_FAIL;
  }
  store_close(s);
  return code;

fail:
  if (g) yajl_gen_free(g);
  cli_error("%s", err);
  store_rollback(s);
  store_close(s);
  return CLI_FAIL;
}
