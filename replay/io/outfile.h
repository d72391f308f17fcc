/* outfile.h: writing an output file safely: a temporary file beside it, renamed over it only at the end. */
#ifndef REPLAY_IO_OUTFILE_H
#define REPLAY_IO_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

/*
 * A failed write leaves nothing behind, and a finished one replaces only a regular file (or
 * nothing): a directory, device, FIFO, socket or symbolic link at the path is refused before
 * anything is written, and checked again before the rename.
 */
typedef struct io_outfile {
  char *path, *tmp;
  FILE *f; /* write here between open and commit */
} io_outfile;

/* 0, or -1 with a message naming the path. */
int io_outfile_open(io_outfile *o, const char *path, char *err, size_t errlen);
/* Flushes, closes and renames the file into place: 0, or -1 with a message (nothing is left). */
int io_outfile_commit(io_outfile *o, char *err, size_t errlen);
/* Gives up: the temporary file is removed. Safe after commit and on a zeroed struct. */
void io_outfile_abort(io_outfile *o);

#endif
