/* SPDX-License-Identifier: MIT */
/* runtime/io/io_internal.h: what the reader, safetensors and raw-file code share. */
#ifndef WSN_IO_INTERNAL_H
#define WSN_IO_INTERNAL_H

#include "internal.h"

#include <stdbool.h>
#include <stdint.h>

/* Map an errno value to a WSN_E* code: -e when the table has it, else WSN_EIO. */
int wsn__errno_code(int e);

/* ---- reader.c ---- */

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

/* ---- raw.c: files written under a temporary name and renamed into place ---- */

struct wsn__out_file {
	int fd;           /* -1 when closed */
	char *tmp;        /* the temporary path, malloc'd; NULL once renamed or removed */
	const char *path; /* the destination, borrowed from the caller */
};

/*
 * Create a temporary file next to path (mkstemp in the same directory). Returns 0, or an error
 * naming path (WSN_EISDIR if path is a directory, WSN_ENOENT if its directory is missing, ...).
 */
int wsn__out_open(struct wsn__out_file *o, const char *path);
/* Append n bytes, completing short writes. Returns 0 or an error naming path. */
int wsn__out_write(struct wsn__out_file *o, const void *buf, size_t n);
/*
 * Flush to disk (fsync when durable), close, and rename over path. On failure the temporary
 * file is removed and path is untouched. Returns 0 or an error naming path.
 */
int wsn__out_commit(struct wsn__out_file *o, bool durable);
/* Close and remove the temporary file; path is untouched. Safe to call after commit. */
void wsn__out_abort(struct wsn__out_file *o);

/*
 * Check that t is a usable contiguous host tensor to write; `what` names it in the message
 * (e.g. "out.safetensors: tensor 'x'"). Returns 0 or WSN_EINVAL/WSN_EDTYPE/WSN_ESHAPE.
 */
int wsn__check_host_contiguous(const struct wsn_tensor *t, const char *what);
/* Bytes of a tensor from its shape and dtype (data may be NULL). 0 on an invalid tensor. */
uint64_t wsn__tensor_bytes(const struct wsn_tensor *t);

#endif
