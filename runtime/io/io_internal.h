/* SPDX-License-Identifier: MIT */
/* runtime/io/io_internal.h: what the reader, safetensors and raw-file code share. */
#ifndef WSN_IO_INTERNAL_H
#define WSN_IO_INTERNAL_H

#ifndef WSN_LAYER_RUNTIME
#error "runtime/io/io_internal.h is private to the runtime (docs/DESIGN.md, Layers)"
#endif

#include "core/util.h"

#include <stdbool.h>
#include <stdint.h>

/* Map an errno value to a WSN_E* code: -e when the table has it, else WSN_EIO (reader.c). */
int wsn__errno_code(int e);

/* ---- the reader (reader.c, reader_open.c) ---- */

/*
 * Size in bytes of the regular file or block device at path. Returns 0, or WSN_ENOENT,
 * WSN_EISDIR, WSN_EINVAL (neither a regular file nor a block device), ... naming the file.
 */
int wsn__file_size(const char *path, uint64_t *size);

/*
 * Whether the reader's buffers were registered with its ring (fixed-buffer reads), false when
 * the kernel refused the registration (e.g. RLIMIT_MEMLOCK) and plain reads are used.
 */
bool wsn__reader_fixed_buffers(const struct wsn_reader *r);

/*
 * Testing aid: report the first completion of every buffer as short (two thirds of what
 * arrived), so the resubmission of short reads is exercised on any file system.
 */
void wsn__reader_inject_short_reads(struct wsn_reader *r, bool on);

/* ---- raw.c: files written where no partial one can be seen, then given their name ---- */

struct wsn__out_file {
	int fd;           /* -1 when closed */
	char *tmp;        /* a named temporary path, malloc'd; NULL for an unnamed file and once renamed */
	const char *path; /* the destination, borrowed from the caller */
};

/*
 * Create the file that will become path: an unnamed file in path's directory (O_TMPFILE), which
 * a crash or a kill discards, or where the file system has none a named temporary file next to
 * path (mkstemp). Returns 0, or an error naming path (WSN_EISDIR if path is a directory,
 * WSN_ENOENT if its directory is missing, ...).
 */
int wsn__out_open(struct wsn__out_file *o, const char *path);
/* Append n bytes, completing short writes. Returns 0 or an error naming path. */
int wsn__out_write(struct wsn__out_file *o, const void *buf, size_t n);
/*
 * Flush to disk (fsync when durable) and give the file path's name: an unnamed file is linked
 * there (directly when path does not exist, else under a temporary name renamed over it), a named
 * one renamed. On failure nothing new is left and path is untouched. Returns 0 or an error naming
 * path.
 */
int wsn__out_commit(struct wsn__out_file *o, bool durable);
/* Testing aid: always take the named temporary file (the path of file systems without O_TMPFILE). */
void wsn__out_force_named(bool on);
/* Close and discard the file being written; path is untouched. Safe to call after commit. */
void wsn__out_abort(struct wsn__out_file *o);

/*
 * Check that t is a usable contiguous host tensor to write; `what` names it in the message
 * (e.g. "out.safetensors: tensor 'x'"). Returns 0 or WSN_EINVAL/WSN_EDTYPE/WSN_ESHAPE.
 */
int wsn__check_host_contiguous(const struct wsn_tensor *t, const char *what);
/* Bytes of a tensor from its shape and dtype (data may be NULL). 0 on an invalid tensor. */
uint64_t wsn__tensor_bytes(const struct wsn_tensor *t);

#endif
