/* options.c: allocator SPECs ("name:key:value,key=value"), option values and sizes with units. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "allocator.h"
#include "hashmap.h"

int sim_parse_size(const char *s, uint64_t *out) {
  static const struct {
    const char *unit;
    double mult;
  } units[] = {
    {"", 1},           {"b", 1},
    {"k", 1024.0},     {"kib", 1024.0},     {"kb", 1e3},
    {"m", 1048576.0},  {"mib", 1048576.0},  {"mb", 1e6},
    {"g", 1073741824.0}, {"gib", 1073741824.0}, {"gb", 1e9},
    {"t", 1099511627776.0}, {"tib", 1099511627776.0}, {"tb", 1e12},
  };
  if (!s) return -1;
  while (isspace((unsigned char)*s)) s++;
  if (!isdigit((unsigned char)*s) && *s != '.') return -1;
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (errno || end == s || !isfinite(v) || v < 0) return -1;
  while (isspace((unsigned char)*end)) end++;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcasecmp(end, units[i].unit) == 0) {
      double bytes = v * units[i].mult;
      if (bytes >= 18446744073709551616.0) return -1;
      uint64_t b = (uint64_t)llround(bytes);
      *out = b;
      return 0;
    }
  }
  return -1;
}

int sim_opt_bool(const sim_option *o, int *out, char *err, size_t errlen) {
  const char *v = o->value;
  if (!strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) {
    *out = 1;
    return 0;
  }
  if (!strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) {
    *out = 0;
    return 0;
  }
  snprintf(err, errlen, "option '%s' wants true or false, not '%s'", o->key, v);
  return -1;
}

int sim_opt_int(const sim_option *o, int64_t *out, char *err, size_t errlen) {
  errno = 0;
  char *end;
  long long v = strtoll(o->value, &end, 10);
  if (errno || end == o->value || *end) {
    snprintf(err, errlen, "option '%s' wants an integer, not '%s'", o->key, o->value);
    return -1;
  }
  *out = v;
  return 0;
}

int sim_opt_double(const sim_option *o, double *out, char *err, size_t errlen) {
  errno = 0;
  char *end;
  double v = strtod(o->value, &end);
  if (errno || end == o->value || *end || !isfinite(v)) {
    snprintf(err, errlen, "option '%s' wants a number, not '%s'", o->key, o->value);
    return -1;
  }
  *out = v;
  return 0;
}

int sim_opt_size(const sim_option *o, uint64_t *out, char *err, size_t errlen) {
  if (sim_parse_size(o->value, out)) {
    snprintf(err, errlen, "option '%s' wants a size such as 4096, 512MiB or 16GB, not '%s'", o->key, o->value);
    return -1;
  }
  if (*out > SIM_SIZE_MAX) {
    snprintf(err, errlen, "option '%s' is '%s', more than a device could have (at most 1 PiB)", o->key, o->value);
    return -1;
  }
  return 0;
}

const sim_allocator_ops *sim_allocator_find(const char *name) {
  for (size_t i = 0; sim_allocators[i]; i++)
    if (!strcmp(sim_allocators[i]->name, name)) return sim_allocators[i];
  return NULL;
}

int sim_allocator_listed(const char *list, const char *name) {
  if (!list) return 1;
  size_t n = strlen(name);
  for (const char *p = list; (p = strstr(p, name)); p += n)
    if ((p == list || p[-1] == ',') && (p[n] == ',' || !p[n])) return 1;
  return 0;
}

static void list_names(char *buf, size_t n) {
  size_t off = 0;
  buf[0] = 0;
  for (size_t i = 0; sim_allocators[i] && off < n; i++)
    off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? ", " : "", sim_allocators[i]->name);
}

static void list_options(const sim_allocator_ops *ops, char *buf, size_t n) {
  size_t off = 0;
  buf[0] = 0;
  if (!ops->options || !ops->options[0].name) {
    snprintf(buf, n, "none");
    return;
  }
  for (size_t i = 0; ops->options[i].name && off < n; i++)
    off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? ", " : "", ops->options[i].name);
}

static void trim(char **s) {
  while (isspace((unsigned char)**s)) (*s)++;
  char *e = *s + strlen(*s);
  while (e > *s && isspace((unsigned char)e[-1])) *--e = 0;
}

int sim_options_split(const sim_allocator_ops *ops, char *rest, sim_option **opts, size_t *nopts, size_t *cap,
                      char *err, size_t errlen) {
  /* Split at commas outside brackets; each item is key:value or key=value. */
  char *item = rest;
  int depth = 0;
  for (char *p = rest;; p++) {
    if (*p == '[' || *p == '(' || *p == '{') depth++;
    else if ((*p == ']' || *p == ')' || *p == '}') && depth > 0) depth--;
    if (*p && (*p != ',' || depth > 0)) continue;
    int last = !*p;
    *p = 0;
    trim(&item);
    if (*item) {
      char *sep = item + strcspn(item, ":=");
      if (!*sep) {
        snprintf(err, errlen, "option '%s' for allocator '%s' has no value (write key:value or key=value)", item,
                 ops->name);
        return SIM_EINVAL;
      }
      *sep = 0;
      char *key = item, *val = sep + 1;
      trim(&key);
      trim(&val);
      int known = 0;
      for (size_t i = 0; ops->options && ops->options[i].name; i++)
        if (!strcmp(ops->options[i].name, key)) known = 1;
      if (!known) {
        char names[512];
        list_options(ops, names, sizeof names);
        snprintf(err, errlen, "unknown option '%s' for allocator '%s' (accepted: %s)", key, ops->name, names);
        return SIM_EINVAL;
      }
      sim_grow((void **)opts, cap, *nopts + 1, sizeof **opts);
      (*opts)[*nopts].key = key;
      (*opts)[*nopts].value = val;
      (*nopts)++;
    }
    if (last) break;
    item = p + 1;
  }
  return SIM_OK;
}

int sim_spec_parse(sim_spec *spec, const char *text, char *err, size_t errlen) {
  memset(spec, 0, sizeof *spec);
  if (!text || !*text) {
    snprintf(err, errlen, "empty allocator spec");
    return SIM_EINVAL;
  }
  spec->storage = sim_xmalloc(strlen(text) + 1);
  strcpy(spec->storage, text);
  char *name = spec->storage, *rest = strchr(name, ':');
  if (rest) *rest++ = 0;
  trim(&name);
  spec->ops = sim_allocator_find(name);
  if (!spec->ops) {
    char names[256];
    list_names(names, sizeof names);
    snprintf(err, errlen, "unknown allocator '%s' (accepted: %s)", name, names);
    sim_spec_release(spec);
    return SIM_EINVAL;
  }
  if (!rest) return SIM_OK;
  size_t cap = 0;
  if (sim_options_split(spec->ops, rest, &spec->opts, &spec->nopts, &cap, err, errlen)) {
    sim_spec_release(spec);
    return SIM_EINVAL;
  }
  return SIM_OK;
}

void sim_spec_release(sim_spec *spec) {
  free(spec->opts);
  free(spec->storage);
  memset(spec, 0, sizeof *spec);
}

int sim_allocator_init(sim_allocator *a, const sim_spec *spec, sim_device *dev, const sim_recorded *recorded,
                       const char *(*getenv_fn)(const char *), char *err, size_t errlen) {
  sim_alloc_config cfg = {.opts = spec->opts, .nopts = spec->nopts, .recorded = recorded, .getenv = getenv_fn};
  a->ops = spec->ops;
  a->dev = dev;
  a->ctx = NULL;
  err[0] = 0;
  int rc = spec->ops->create(&a->ctx, dev, &cfg, err, errlen);
  if (rc != SIM_OK && !err[0]) snprintf(err, errlen, "cannot create allocator '%s'", spec->ops->name);
  return rc;
}

int sim_device_read_as_needed(void *ctx) {
  (void)ctx;
  return SIM_OK;
}

void sim_allocator_release(sim_allocator *a) {
  if (a->ops && a->ctx) a->ops->destroy(a->ctx);
  a->ctx = NULL;
}
