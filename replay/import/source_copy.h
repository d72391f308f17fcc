/* source_copy.h: private copies of SQLite inputs that cannot be opened where they are (source_copy.c). */
#ifndef REPLAY_SOURCE_COPY_H
#define REPLAY_SOURCE_COPY_H

#include "io/input.h"

/*
 * An importer that reads a file by path through SQLite (an Nsight Systems export) can neither
 * seek in a pipe or FIFO nor see a write-ahead log (FILE-wal) without writing beside it. Such
 * an input is copied, with its WAL, into a private folder under TMPDIR and opened there; the
 * user's files are only ever read.
 */

/* Whether path needs a private copy: not a regular file, or with a non-empty WAL beside it. */
int source_copy_needed(const char *path);
/* Copies path (through in when given, whose peeked bytes are not lost) and its WAL. Returns the
 * copy's path (free with source_copy_remove), or NULL with a message in err. */
char *source_copy_make(const char *path, input *in, char *err, size_t errlen);
/* Removes the copy, what SQLite made beside it, and its folder; frees copy. NULL is allowed. */
void source_copy_remove(char *copy);

#endif
