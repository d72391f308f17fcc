/* frames.c: the frames memory_viz leaves out of a call stack. */
#include <string.h>

#include "frames.h"

bool frames_hidden(const char *name, const char *filename) {
  if (!name) name = "";
  if (!filename) filename = "";
  if (strstr(name, "unwind::unwind") || strstr(name, "CapturedTraceback::")) return true;
  /* the interpreter's evaluation loop and call machinery */
  static const char *const interp[] = {"_PyEval_", "PyEval_", "_PyObject_", "PyObject_Call", "_PyFunction_",
                                       "cfunction_", "method_vectorcall", "slot_tp_", "_PyCFunction", "PyVectorcall",
                                       "_PyVectorcall", "vectorcall", "pymain_", "Py_RunMain", "Py_BytesMain"};
  for (size_t i = 0; i < sizeof interp / sizeof *interp; i++)
    if (!strncmp(name, interp[i], strlen(interp[i]))) return true;
  /* the interpreter's and the dispatcher's own files */
  static const char *const files[] = {"ceval.c", "pycore_ceval.h", "pythonrun.c", "Modules/main.c", "Objects/call.c",
                                      "Objects/methodobject.c", "cpython/abstract.h", "core/boxing", "/Register",
                                      "/Redispatch"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++)
    if (strstr(filename, files[i])) return true;
  return false;
}
