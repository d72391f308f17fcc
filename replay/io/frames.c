/* frames.c: the frames a report hides, and the frame it names for a call stack. */
#include <string.h>

#include "frames.h"

/* Functions of the unwinder that captured the stack, the program's entry and CPython's
 * interpreter loop. */
static const char *const hidden_names[] = {
  "unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start", "__libc_start_main",
  "PyEval_",        "PyObject_",                 "PyFunction_",
};
/* Sources of PyTorch's dispatcher (boxing, registration, redispatch) and of CPython's loop. */
static const char *const hidden_files[] = {
  "core/boxing",    "/Register",      "/Redispatch",            "pythonrun.c",    "Modules/main.c",
  "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",        "cpython/abstract.h",
};

static bool contains_any(const char *s, const char *const *list, size_t n) {
  if (!s) return false;
  for (size_t i = 0; i < n; i++)
    if (strstr(s, list[i])) return true;
  return false;
}

bool frames_hidden(const char *name, const char *filename) {
  return contains_any(name, hidden_names, sizeof hidden_names / sizeof hidden_names[0]) ||
         contains_any(filename, hidden_files, sizeof hidden_files / sizeof hidden_files[0]);
}

void frames_pick_init(frames_pick *p) { *p = (frames_pick){-1, -1, -1, -1, -1, 0}; }

static bool is_python(const char *file) {
  size_t n = file ? strlen(file) : 0;
  return n > 3 && !strcmp(file + n - 3, ".py");
}

/* A Python file of the framework, an installed package or Python's own library. */
static bool is_library(const char *file) {
  return strstr(file, "/torch/") || strstr(file, "site-packages") || strstr(file, "dist-packages") ||
         strstr(file, "/lib/python");
}

bool frames_pick_offer(frames_pick *p, const char *name, const char *filename) {
  int i = p->n++;
  if (p->first < 0) p->first = i;
  if (frames_hidden(name, filename)) return false;
  if (p->visible < 0) p->visible = i;
  if (p->autograd < 0 && name && strstr(name, "torch::autograd::generated::") && strstr(name, "::apply("))
    p->autograd = i;
  if (!is_python(filename)) return false;
  if (p->python < 0) p->python = i;
  if (is_library(filename)) return false;
  p->user = i;
  return true;
}

int frames_pick_result(const frames_pick *p) {
  return p->user >= 0 ? p->user : p->python >= 0 ? p->python : p->autograd >= 0 ? p->autograd
                                 : p->visible >= 0 ? p->visible : p->first;
}
