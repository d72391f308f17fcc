/* device_calls.c: `replay --device-calls FILE`: every call a model makes to its device, one line each. */
#include <inttypes.h>
#include <string.h>

#include "cli.h"

static const char *result_name(int rc) {
  return rc == SIM_OK ? "ok" : rc == SIM_EOOM ? "oom" : "error";
}

static void call_line(void *arg, int device, uint64_t n, const sim_device_call *c) {
  const cli_device_calls *l = arg;
  fprintf(l->f, "%s %d %" PRIu64 " %s %" PRIu64 " 0x%" PRIx64 " %" PRId64 " %s %" PRIu64 " %" PRIu64 "\n", l->who,
          device, n, c->op, c->size, c->addr, c->stream, result_name(c->rc), c->used_before, c->used_after);
}

void cli_device_calls_init(cli_device_calls *l, FILE *f, const char *who) {
  memset(l, 0, sizeof *l);
  l->f = f;
  l->who = who;
  l->watch.call = call_line;
  l->watch.arg = l;
}

void cli_device_calls_header(FILE *f) {
  fputs("# who device call op size addr stream result used_before used_after\n", f);
}
