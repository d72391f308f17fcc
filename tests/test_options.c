/* test_options.c: sizes with units and allocator SPECs, including PyTorch's bracketed values. */
#include "sim/allocator.h"
#include "test.h"

int test_failures;

static void sizes(void) {
  uint64_t v = 0;
  CHECK_EQ(sim_parse_size("4096", &v), 0);
  CHECK_EQ(v, 4096);
  CHECK_EQ(sim_parse_size("4KiB", &v), 0);
  CHECK_EQ(v, 4096);
  CHECK_EQ(sim_parse_size("1.5GiB", &v), 0);
  CHECK_EQ(v, 1610612736);
  CHECK_EQ(sim_parse_size("24GB", &v), 0);
  CHECK_EQ(v, 24000000000ull);
  CHECK_EQ(sim_parse_size("512M", &v), 0);
  CHECK_EQ(v, 536870912);
  CHECK_EQ(sim_parse_size("2 tib", &v), 0);
  CHECK_EQ(v, 2199023255552ull);
  CHECK_EQ(sim_parse_size("-1", &v), -1);
  CHECK_EQ(sim_parse_size("12XB", &v), -1);
  CHECK_EQ(sim_parse_size("", &v), -1);
  CHECK_EQ(sim_parse_size("GiB", &v), -1);
  CHECK_EQ(sim_parse_size("1e30", &v), -1);
}

static void specs(void) {
  char err[512];
  sim_spec s;
  CHECK_EQ(sim_spec_parse(&s, "ideal", err, sizeof err), SIM_OK);
  CHECK_STR(s.ops->name, "ideal");
  CHECK_EQ(s.nopts, 0);
  sim_spec_release(&s);
  CHECK_EQ(sim_spec_parse(&s, "nosuch:x:1", err, sizeof err), SIM_EINVAL);
  CHECK(strstr(err, "unknown allocator 'nosuch'") != NULL);
  CHECK(strstr(err, "ideal") != NULL && strstr(err, "cuda") != NULL);
  CHECK_EQ(sim_spec_parse(&s, "cuda:bogus=1", err, sizeof err), SIM_EINVAL);
  CHECK(strstr(err, "unknown option 'bogus' for allocator 'cuda'") != NULL);
  CHECK_EQ(sim_spec_parse(&s, "", err, sizeof err), SIM_EINVAL);
}

/* The option splitter respects brackets and both separators, using a model with options. */
static const sim_option_spec test_opts[] = {{"a", ""}, {"list", ""}, {"b", ""}, {NULL, NULL}};
static int nop_create(void **ctx, sim_device *d, const sim_alloc_config *c, char *e, size_t n) {
  (void)ctx, (void)d, (void)c, (void)e, (void)n;
  return SIM_OK;
}
static const sim_allocator_ops fake = {.version = 1, .name = "fake", .options = test_opts, .create = nop_create};

static void option_values(void) {
  sim_option o = {"x", "True"};
  int b = 0;
  char err[256];
  CHECK_EQ(sim_opt_bool(&o, &b, err, sizeof err), 0);
  CHECK_EQ(b, 1);
  o.value = "off";
  CHECK_EQ(sim_opt_bool(&o, &b, err, sizeof err), 0);
  CHECK_EQ(b, 0);
  o.value = "maybe";
  CHECK_EQ(sim_opt_bool(&o, &b, err, sizeof err), -1);
  CHECK(strstr(err, "'x'") != NULL);
  int64_t i = 0;
  o.value = "128";
  CHECK_EQ(sim_opt_int(&o, &i, err, sizeof err), 0);
  CHECK_EQ(i, 128);
  o.value = "12x";
  CHECK_EQ(sim_opt_int(&o, &i, err, sizeof err), -1);
  double d = 0;
  o.value = "0.9";
  CHECK_EQ(sim_opt_double(&o, &d, err, sizeof err), 0);
  CHECK_NEAR(d, 0.9, 1e-12);
  uint64_t sz = 0;
  o.value = "16GiB";
  CHECK_EQ(sim_opt_size(&o, &sz, err, sizeof err), 0);
  CHECK_EQ(sz, 17179869184ull);
}

static void splitting(void) {
  char text[] = " a:1, list:[256:1,512:2,>:8] ,b=x ";
  sim_option *opts = NULL;
  size_t n = 0, cap = 0;
  char err[256];
  CHECK_EQ(sim_options_split(&fake, text, &opts, &n, &cap, err, sizeof err), SIM_OK);
  CHECK_EQ(n, 3);
  if (n == 3) {
    CHECK_STR(opts[0].key, "a");
    CHECK_STR(opts[0].value, "1");
    CHECK_STR(opts[1].key, "list");
    CHECK_STR(opts[1].value, "[256:1,512:2,>:8]");
    CHECK_STR(opts[2].key, "b");
    CHECK_STR(opts[2].value, "x");
  }
  free(opts);
  char bad[] = "a:1,novalue";
  opts = NULL;
  n = cap = 0;
  CHECK_EQ(sim_options_split(&fake, bad, &opts, &n, &cap, err, sizeof err), SIM_EINVAL);
  CHECK(strstr(err, "'novalue'") != NULL);
  free(opts);
  char unk[] = "zzz:1";
  opts = NULL;
  n = cap = 0;
  CHECK_EQ(sim_options_split(&fake, unk, &opts, &n, &cap, err, sizeof err), SIM_EINVAL);
  CHECK(strstr(err, "accepted: a, list, b") != NULL);
  free(opts);
}

int main(void) {
  RUN(sizes);
  RUN(specs);
  RUN(option_values);
  RUN(splitting);
  TEST_MAIN_END();
}
