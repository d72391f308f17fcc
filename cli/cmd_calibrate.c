/* cmd_calibrate.c: `memplay calibrate`: measure a GPU and store what was measured as a device profile. */
#include <stdlib.h>
#include <string.h>

#include "cuda/calibrate.h"
#include "io/jsonw.h"
#include "cli.h"

static const char *const calibrate_usage[] = {
  "memplay calibrate [--gpu N] [--name NAME] [--quick] [--no-save] [--db FILE] [--json]",
  "  --gpu N           the GPU to measure (default 0, as CUDA numbers them)",
  "  --name NAME       the profile's name (default: the device's name)",
  "  --quick           fewer sizes and trials (seconds instead of a minute)",
  "  --no-save         print the profile without storing it",
  NULL,
};
const cli_usage cmd_calibrate_usage = {
  .summary = "measure the GPU (copies, allocations, launches) and store it as a device profile",
  .lines = calibrate_usage,
};

static const struct option calibrate_options[] = {
  {"gpu", required_argument, NULL, 'g'},
  {"name", required_argument, NULL, 'n'},
  {"quick", no_argument, NULL, 'q'},
  {"no-save", no_argument, NULL, 'N'},
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

int cmd_calibrate(int argc, char **argv, cli *c) {
  const char *name = NULL;
  int gpu = 0, quick = 0, save = 1, opt, code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, "hn:", calibrate_options)) != -1) {
    int r = cli_common_option(c, "calibrate", opt, &code);
    if (r < 0) return code;
    if (r) continue;
    switch (opt) {
    case 'g': {
      char *end;
      long v = strtol(optarg, &end, 10);
      if (*end || v < 0 || v > 1023) return cli_usage_error("calibrate", "--gpu wants a GPU number, not '%s'", optarg);
      gpu = (int)v;
      break;
    }
    case 'n':
      if (!calib_name_ok(optarg))
        return cli_usage_error("calibrate", "--name wants a profile name of letters, digits, '-', '_' and '.' (at "
                                            "most 63), not '%s'", optarg);
      name = optarg;
      break;
    case 'q': quick = 1; break;
    case 'N': save = 0; break;
    }
  }
  if (optind != argc) return cli_usage_error("calibrate", "calibrate takes no arguments ('%s')", argv[optind]);
#ifndef MEMPLAY_HAVE_CUDA
  (void)name, (void)gpu, (void)quick, (void)save;
  cli_error("this memplay was built without CUDA support, so it cannot calibrate a GPU: build it where the CUDA "
            "toolkit is installed (see docs/gpu.md)");
  return CLI_FAIL;
#else
  calib_profile *p = calloc(1, sizeof *p);
  char err[1024];
  if (calib_measure(gpu, quick, p, err, sizeof err)) {
    cli_error("cannot calibrate GPU %d: %s", gpu, err);
    free(p);
    return CLI_FAIL;
  }
  if (name) snprintf(p->name, sizeof p->name, "%s", name);
  store *s = NULL;
  if (save) {
    s = cli_open_store(c, 1);
    if (!s || calib_store(s, p)) {
      if (s) {
        cli_error("%s", store_error(s));
        store_close(s);
      }
      free(p);
      return CLI_FAIL;
    }
  }
  if (c->json) {
    yajl_gen g = jsonw_file(stdout, 0);
    yajl_gen_map_open(g);
    jsonw_kstr(g, "name", p->name);
    jsonw_kbool(g, "stored", save);
    if (s) jsonw_kstr(g, "store", store_path(s));
    jsonw_str(g, "params");
    calib_params_json(g, p);
    yajl_gen_map_close(g);
    yajl_gen_free(g);
    putchar('\n');
  } else {
    calib_print(stdout, p);
    if (s) printf("stored as device profile '%s' in %s\n", p->name, store_path(s));
  }
  if (s) store_close(s);
  free(p);
  return code;
#endif
}
