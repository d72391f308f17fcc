/* frames.h: which call-stack frames a user is shown (memory_viz's filter). */
#ifndef REPLAY_IO_FRAMES_H
#define REPLAY_IO_FRAMES_H

#include <stdbool.h>

/* True for frames to hide: the unwinder's own (torch::unwind), and the Python interpreter's
 * (CPython's evaluation loop and call machinery), as PyTorch's memory_viz leaves them out. */
bool frames_hidden(const char *name, const char *filename);

#endif
