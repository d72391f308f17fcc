/* cmd_gen.c: `memplay gen --events N`: a synthetic training trace, written into the store. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gen/gen.h"
#include "io/jsonw.h"
#include "cli.h"

static const char *const gen_usage[] = {
  "memplay gen --events N [--seed S] [--batch B] [--name NAME] [--db FILE] [--json]",
  "  --events N        number of events (any length)",
  "  --seed S          the seed that chooses the model and its variation (default 1)",
  "  --batch B         samples per step (default: chosen by the seed)",
  "  --name NAME       trace name (default gen-S-N)",
  NULL,
};
const cli_usage cmd_gen_usage = {
  .summary = "generate a synthetic training trace into the store",
  .lines = gen_usage,
};

static const struct option gen_options[] = {
  {"events", required_argument, NULL, 'e'},
  {"seed", required_argument, NULL, 's'},
  {"batch", required_argument, NULL, 'b'},
  {"name", required_argument, NULL, 'n'},
  CLI_COMMON_OPTIONS,
  {NULL, 0, NULL, 0},
};

static int parse_u64(const char *s, uint64_t *out) {
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-') return -1;
  *out = v;
  return 0;
}

int cmd_gen(int argc, char **argv, cli *c) {
  gen_config cfg = {0, 1, 0};
  const char *name = NULL;
  int have_events = 0, opt, code = CLI_OK;
  while ((opt = cli_getopt(argc, argv, "he:s:b:n:", gen_options)) != -1) {
    int r = cli_common_option(c, "gen", opt, &code);
    if (r < 0) return code;
    if (r) continue;
    uint64_t v;
    switch (opt) {
    case 'e':
      if (parse_u64(optarg, &cfg.events) || cfg.events == 0)
        return cli_usage_error("gen", "--events wants a positive whole number, not '%s'", optarg);
      have_events = 1;
      break;
    case 's':
      if (parse_u64(optarg, &cfg.seed)) return cli_usage_error("gen", "--seed wants a whole number, not '%s'", optarg);
      break;
    case 'b':
      if (parse_u64(optarg, &v) || v == 0 || v > 65536)
        return cli_usage_error("gen", "--batch wants a whole number from 1 to 65536, not '%s'", optarg);
      cfg.batch = (int)v;
      break;
    case 'n': name = optarg; break;
    }
  }
  if (optind != argc) return cli_usage_error("gen", "gen takes no arguments");
  if (!have_events) return cli_usage_error("gen", "--events N is required");
  store *s = cli_open_store(c, 1);
  if (!s) return CLI_FAIL;
  char defname[64], err[1024] = "";
  snprintf(defname, sizeof defname, "gen-%llu-%llu", (unsigned long long)cfg.seed, (unsigned long long)cfg.events);
  int64_t id = 0;
  if (store_begin(s)) {
    cli_error("%s", store_error(s));
    store_close(s);
    return CLI_FAIL;
  }
  char *tname = name ? strdup(name) : store_unique_name(s, defname);
  if (!tname || gen_write(s, &cfg, tname, &id, err, sizeof err) || store_commit(s)) {
    cli_error("cannot generate: %s", tname ? (err[0] ? err : store_error(s)) : store_error(s));
    store_rollback(s);
    code = CLI_FAIL;
  } else {
    gen *g = gen_new(&cfg);
    if (c->json) {
      yajl_gen j = jsonw_file(stdout, 0);
      yajl_gen_map_open(j);
      jsonw_kstr(j, "name", tname);
      jsonw_kint(j, "id", id);
      jsonw_kuint(j, "events", cfg.events);
      jsonw_kuint(j, "seed", cfg.seed);
      jsonw_kstr(j, "model", gen_describe(g));
      yajl_gen_map_close(j);
      yajl_gen_free(j);
      putchar('\n');
    } else {
      char n[32];
      printf("generated '%s': %s events of a %s\n", tname, cli_count(n, sizeof n, cfg.events), gen_describe(g));
    }
    gen_free(g);
  }
  free(tname);
  store_close(s);
  return code;
}
