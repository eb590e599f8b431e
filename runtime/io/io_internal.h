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

/* wsn_out_open(), wsn_out_commit() and wsn_out_abort() are public (wsnorm/io.h). */

/* Append n bytes, completing short writes. Returns 0 or an error naming path. */
int wsn__out_write(struct wsn_out_file *o, const void *buf, size_t n);
/* Testing aid: always take the named temporary file (the path of file systems without O_TMPFILE). */
void wsn__out_force_named(bool on);

/*
 * Check that t is a usable contiguous host tensor to write; `what` names it in the message
 * (e.g. "out.safetensors: tensor 'x'"). Returns 0 or WSN_EINVAL/WSN_EDTYPE/WSN_ESHAPE.
 */
int wsn__check_host_contiguous(const struct wsn_tensor *t, const char *what);
/* Bytes of a tensor from its shape and dtype (data may be NULL). 0 on an invalid tensor. */
uint64_t wsn__tensor_bytes(const struct wsn_tensor *t);

#endif
