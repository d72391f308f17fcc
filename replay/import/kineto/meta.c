/* meta.c: Kineto: the trace row and its attrs: top-level fields, the devices used, baselines. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "io/jsonscan.h"
#include "io/jsonw.h"
#include "kineto_int.h"

const char *kineto_top_json(const kparse *p, const char *key) {
  for (size_t i = 0; i < p->ntops; i++)
    if (!strcmp(p->tops[i].key, key)) return p->tops[i].json;
  return NULL;
}

static yajl_val prop(yajl_val obj, const char *key) {
  if (!YAJL_IS_OBJECT(obj)) return NULL;
  for (size_t i = 0; i < obj->u.object.len; i++)
    if (!strcmp(obj->u.object.keys[i], key)) return obj->u.object.values[i];
  return NULL;
}

static int count_devices(uint64_t mask, int *only) {
  int n = 0;
  for (int d = 0; d < 64; d++)
    if (mask >> d & 1) {
      n++;
      *only = d;
    }
  return n;
}

/* Device name and memory for the trace row, and the properties of the devices used, for attrs. */
static void device_meta(const kparse *p, store_trace *m, yajl_gen attrs) {
  const char *json = kineto_top_json(p, "deviceProperties");
  int only = -1, nused = count_devices(p->devices_used, &only);
  m->device_index = nused == 1 ? only : -1;
  yajl_val props = json ? jsonscan_tree(json, NULL, 0) : NULL;
  if (!YAJL_IS_ARRAY(props)) {
    yajl_tree_free(props);
    return;
  }
  const char *name = NULL;
  int64_t mem = 0;
  int same = 1, first = 1;
  jsonw_str(attrs, "device_properties");
  yajl_gen_array_open(attrs);
  for (size_t i = 0; i < props->u.array.len; i++) {
    yajl_val d = props->u.array.values[i], id = prop(d, "id");
    if (!YAJL_IS_INTEGER(id) || YAJL_GET_INTEGER(id) < 0 || YAJL_GET_INTEGER(id) >= 64 ||
        !(p->devices_used >> YAJL_GET_INTEGER(id) & 1))
      continue;
    jsonw_tree(attrs, d);
    yajl_val n = prop(d, "name"), g = prop(d, "totalGlobalMem");
    const char *nm = YAJL_IS_STRING(n) ? n->u.string : NULL;
    int64_t gm = YAJL_IS_INTEGER(g) ? YAJL_GET_INTEGER(g) : 0;
    if (first) {
      name = nm;
      mem = gm;
      first = 0;
    } else if (!nm || !name || strcmp(nm, name) || gm != mem) {
      same = 0;
    }
  }
  yajl_gen_array_close(attrs);
  if (!first && same) {
    m->device_name = name ? strdup(name) : NULL;
    m->device_memory = mem;
  }
  yajl_tree_free(props);
}

char *kineto_trace_attrs(const kparse *p, const kbase *b, store_trace *m) {
  yajl_gen g = jsonw_mem();
  yajl_gen_map_open(g);
  for (size_t i = 0; i < p->ntops; i++) {
    const char *k = p->tops[i].key;
    if (!strcmp(k, "deviceProperties")) continue;
    jsonw_kraw(g, k, p->tops[i].json);
  }
  jsonw_str(g, "devices_used");
  yajl_gen_array_open(g);
  for (int d = 0; d < 64; d++)
    if (p->devices_used >> d & 1) jsonw_int(g, d);
  yajl_gen_array_close(g);
  jsonw_str(g, "baseline_bytes");
  yajl_gen_map_open(g);
  for (size_t i = 0; i < b->n; i++) {
    char k[32];
    if (b->d[i].device < 0) snprintf(k, sizeof k, "host");
    else snprintf(k, sizeof k, "%d", b->d[i].device);
    if (b->d[i].have_total) jsonw_kint(g, k, b->d[i].baseline);
  }
  yajl_gen_map_close(g);
  device_meta(p, m, g);
  yajl_gen_map_close(g);
  char *t = strdup(jsonw_text(g, NULL));
  yajl_gen_free(g);
  return t;
}
