/* frames.h: which call-stack frames a report hides (interpreter and unwinder internals), as PyTorch's memory_viz does. */
#ifndef REPLAY_IO_FRAMES_H
#define REPLAY_IO_FRAMES_H

#include <stdbool.h>

/*
 * Call stacks recorded with C++ frames (a PyTorch snapshot's context="all") begin with the
 * unwinder that captured them and are threaded with CPython's interpreter loop; neither says
 * anything about the program. A frame is hidden when its function name contains one of the
 * unwinder's or interpreter's names (torch::unwind::unwind, CapturedTraceback::gather,
 * gather_with_cpp, _start, __libc_start_main, PyEval_, PyObject_, PyFunction_), or its file name
 * contains one of the dispatcher's or interpreter's sources (core/boxing, /Register, /Redispatch,
 * pythonrun.c, Modules/main.c, Objects/call.c, Objects/methodobject.c, pycore_ceval.h, ceval.c,
 * cpython/abstract.h): the rule of torch/cuda/_memory_viz.py's frame filter. Either argument may
 * be NULL (nothing to match).
 */
bool frames_hidden(const char *name, const char *filename);

/*
 * The frame a report names for a stack: the first user frame, a Python file outside torch and
 * the installed packages; else the first Python frame; else the first autograd node
 * (torch::autograd::generated::MmBackward0::apply: a stack of the backward pass, which runs on
 * the autograd engine's thread with no Python frames, names the operator it differentiates);
 * else the first frame that is not hidden; else the innermost. frames_pick_init, frames_pick_offer each frame innermost first (it returns
 * true once the user frame is found, when the rest need not be offered), frames_pick_result.
 */
typedef struct frames_pick {
  int first, python, visible, user, autograd; /* indexes of the frames offered, -1: none yet */
  int n;
} frames_pick;

void frames_pick_init(frames_pick *p);
bool frames_pick_offer(frames_pick *p, const char *name, const char *filename);
/* The index (in the order offered) of the frame to name, or -1 when none was offered. */
int frames_pick_result(const frames_pick *p);

#endif
