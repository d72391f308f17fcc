/* once.c: values built once per trace and shared by threads (session.h, session_once). */
#include <pthread.h>
#include <stdlib.h>

#include "sim/hashmap.h"
#include "session.h"

struct session_once {
  pthread_mutex_t lock;
  pthread_cond_t built;
  void (*release)(void *value);
  struct once_entry {
    int64_t key;
    void *value; /* NULL while its thread builds it */
  } **v;         /* each entry on its own: a waiting thread holds its address */
  size_t n, cap;
};

session_once *session_once_new(void (*release)(void *value)) {
  session_once *o = sim_xcalloc(1, sizeof *o);
  pthread_mutex_init(&o->lock, NULL);
  pthread_cond_init(&o->built, NULL);
  o->release = release;
  return o;
}

void session_once_free(session_once *o) {
  if (!o) return;
  for (size_t i = 0; i < o->n; i++) {
    if (o->v[i]->value) o->release(o->v[i]->value);
    free(o->v[i]);
  }
  free(o->v);
  pthread_cond_destroy(&o->built);
  pthread_mutex_destroy(&o->lock);
  free(o);
}

void *session_once_get(session_once *o, store *s, const store_trace *t, void *(*build)(store *s, const store_trace *t)) {
  int64_t key = t->id;
  pthread_mutex_lock(&o->lock);
  struct once_entry *e = NULL;
  for (size_t i = 0; i < o->n && !e; i++)
    if (o->v[i]->key == key) e = o->v[i];
  if (!e) { /* this thread builds it, the others find it and wait */
    e = sim_xcalloc(1, sizeof *e);
    e->key = key;
    sim_grow((void **)&o->v, &o->cap, o->n + 1, sizeof *o->v);
    o->v[o->n++] = e;
    pthread_mutex_unlock(&o->lock);
    void *value = build(s, t);
    pthread_mutex_lock(&o->lock);
    e->value = value;
    pthread_cond_broadcast(&o->built);
  }
  while (!e->value) pthread_cond_wait(&o->built, &o->lock);
  pthread_mutex_unlock(&o->lock);
  return e->value;
}
