/* outfile.h: the one way memplay writes an output file, without ever clobbering what it does not own. */
#ifndef REPLAY_OUTFILE_H
#define REPLAY_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

/* Every file memplay writes (export -o, result files of scripts, plots, compare results) goes
 * through this writer, which decides by what the path names now:
 *
 *   path            what happens
 *   NULL or "-"     standard output, written directly (never closed)
 *   does not exist  a temporary file in the same folder, renamed to path on commit
 *   regular file    the same, and the new file takes the old one's permission bits (and, for
 *                   root, its owner): the old content stays whole until the commit
 *   FIFO, character device, terminal (/dev/null, /dev/stdout, a tty)
 *                   opened and written directly: never replaced, never truncated
 *   symbolic link   followed to its final target, to which the rules above apply (the link
 *                   stays a link); a link whose target is missing or unreachable is refused
 *   anything else   refused (a directory, a socket, a block device)
 *
 * So the type of an existing file never changes, a failed write leaves a regular file exactly as
 * it was, and no temporary file is left behind. Messages name the path as the user gave it.
 *
 * Use:   outfile *o = outfile_open(path, err, sizeof err);
 *        if (!o) fail(err);
 *        fprintf(outfile_stream(o), ...);
 *        if (outfile_commit(o, err, sizeof err)) fail(err);   // or outfile_abort(o)
 *
 * Several files that must appear together: open and write them all, then commit them all
 * (a rename each; only a failure between renames can leave some written). */
typedef struct outfile outfile;

/* Opens path for writing by the rules above; NULL with a message in err. */
outfile *outfile_open(const char *path, char *err, size_t errlen);
/* The stream to write to (buffered stdio). */
FILE *outfile_stream(outfile *o);
/* 1 when the output goes straight to its destination (stdout, a FIFO, a device): a failure
 * then cannot be undone. */
int outfile_is_direct(const outfile *o);
/* Flushes and closes; renames the temporary file into place. Frees o. Returns 0, or -1 with a
 * message in err (the temporary file is then removed and the destination left as it was). */
int outfile_commit(outfile *o, char *err, size_t errlen);
/* Discards what was written (removes the temporary file; a direct output is just closed).
 * Frees o; NULL is allowed. */
void outfile_abort(outfile *o);
/* The whole of data written to path by the same rules. 0, or -1 with a message. */
int outfile_write_all(const char *path, const void *data, size_t len, char *err, size_t errlen);

#endif
