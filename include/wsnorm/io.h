/* SPDX-License-Identifier: MIT */
/* wsnorm/io.h: the io_uring file reader and safetensors/raw tensor files. */
#ifndef WSNORM_IO_H
#define WSNORM_IO_H

#include "common.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WSN_READER_DEFAULT_QD 32
#define WSN_READER_DEFAULT_BS (1u << 20)

/* How files are read. Initialise with wsn_reader_options_init(). */
struct wsn_reader_options {
	unsigned queue_depth; /* reads in flight (1..4096); default WSN_READER_DEFAULT_QD */
	size_t block_size;    /* bytes per read (4 KiB..64 MiB, multiple of 4 KiB); default WSN_READER_DEFAULT_BS */
	int direct;           /* -1 auto (O_DIRECT when the file system allows it), 0 never, 1 required */
	int sqpoll;           /* IORING_SETUP_SQPOLL */
};
WSN_API void wsn_reader_options_init(struct wsn_reader_options *o);

/* Counters of one reader, cumulative. */
struct wsn_read_stats {
	uint64_t bytes;       /* bytes delivered to callers */
	uint64_t reads;       /* read requests completed */
	uint64_t short_reads; /* reads that returned less than asked and were resubmitted */
	uint64_t direct_files;   /* file opens with O_DIRECT (a file may be opened more than once) */
	uint64_t buffered_files; /* file opens through the page cache */
	double seconds;       /* wall time spent inside wsn_reader_read() */
};

struct wsn_reader;

/*
 * Create an io_uring reader: one ring with queue_depth registered, aligned buffers of block_size.
 * Ring setup flags are probed: DEFER_TASKRUN|SINGLE_ISSUER, then COOP_TASKRUN, then none.
 * Use a reader from the thread that created it (SINGLE_ISSUER), one call at a time.
 * Returns 0, WSN_EINVAL, WSN_ENOMEM, or the io_uring_setup error (e.g. WSN_EPERM, WSN_ENOSYS).
 */
WSN_API int wsn_reader_create(const struct wsn_reader_options *o, struct wsn_reader **out);
WSN_API void wsn_reader_destroy(struct wsn_reader *r);
/* The ring setup flags that were accepted, as text ("DEFER_TASKRUN|SINGLE_ISSUER"). */
WSN_API const char *wsn_reader_ring_mode(const struct wsn_reader *r);
/*
 * Read len bytes at offset of path into dst, completing short reads. O_DIRECT per the options,
 * with alignment from statx(STATX_DIOALIGN), else the logical block size. Returns 0, WSN_ETRUNC
 * (the file ends before offset + len), WSN_EISDIR, WSN_ENOENT, WSN_ENOTSUP (direct = 1 and the
 * file system refuses O_DIRECT), WSN_EIO, ...; the detail names the file.
 */
WSN_API int wsn_reader_read(struct wsn_reader *r, const char *path, uint64_t offset, uint64_t len,
			    void *dst);
/* Reads one reader holds queued with wsn_reader_submit() and not yet waited for, at most. */
#define WSN_READER_MAX_QUEUED 64

/*
 * The same read in two halves, so that several are in flight at once: wsn_reader_submit() opens
 * the file, checks the range and queues the read, starting its first chunks; wsn_reader_wait()
 * waits for one queued read (in any order), handing out the chunks of every queued read, oldest
 * first, so the ring stays full from one read into the next. At most WSN_READER_MAX_QUEUED are queued.
 * submit returns 0 and *id, or the errors of wsn_reader_read() that opening and checking give,
 * WSN_EBUSY (64 queued) or WSN_EIO (unusable reader); the read is then not queued. wait returns
 * the read's result (as wsn_reader_read()), or WSN_EINVAL for an id that is not queued.
 * Until its wait returns, a queued read may write into dst at any time.
 */
WSN_API int wsn_reader_submit(struct wsn_reader *r, const char *path, uint64_t offset, uint64_t len,
			      void *dst, uint64_t *id);
WSN_API int wsn_reader_wait(struct wsn_reader *r, uint64_t id);
WSN_API void wsn_reader_stats(const struct wsn_reader *r, struct wsn_read_stats *out);

/*
 * Register caller memory (e.g. pinned host memory from wsn_host_alloc) with the reader, so that
 * wsn_reader_read() into it reads straight there instead of through the reader's bounce buffers:
 * with O_DIRECT the aligned blocks of the range whose destination is aligned like the file offset
 * (dst % alignment == offset % alignment, e.g. dst and offset congruent modulo 4096), without
 * O_DIRECT the whole range. The unaligned head and tail still go through the bounce buffers; no
 * byte outside [dst, dst + len) is written. The buffer joins the ring's fixed-buffer table
 * (read_fixed) when the kernel has room and accepts it, else reads into it are plain reads.
 * Call from the reader's thread. The memory must stay mapped until it is unregistered or the
 * reader is destroyed; after a read that failed with WSN_ETIMEDOUT (the reader is then unusable),
 * until after wsn_reader_destroy().
 * Returns 0, WSN_EINVAL, WSN_EEXIST (overlaps a registered buffer), WSN_ENOSPC (64 buffers are
 * registered already) or WSN_EIO (the reader is unusable).
 */
WSN_API int wsn_reader_register(struct wsn_reader *r, void *buf, size_t len);
/* Forget a registered buffer, by its start address. Returns 0, WSN_EINVAL or WSN_ENOENT. */
WSN_API int wsn_reader_unregister(struct wsn_reader *r, void *buf);

/* What a reader did with registered caller buffers. */
struct wsn_reader_buffer_stats {
	unsigned registered;     /* caller buffers registered now */
	unsigned fixed;          /* of those, in the ring's fixed-buffer table (read_fixed) */
	uint64_t straight_bytes; /* bytes read straight into caller buffers, cumulative */
	uint64_t bounce_bytes;   /* bytes copied out of the bounce buffers, cumulative */
	int unusable;            /* a read stalled with requests in flight: the reader refuses reads */
};
/* Fill out (zeros for a NULL reader). */
WSN_API void wsn_reader_buffer_stats(const struct wsn_reader *r, struct wsn_reader_buffer_stats *out);

/* ---- safetensors ---- */

#define WSN_ST_MAX_NAME 128

/*
 * One tensor's entry in a safetensors header. A file may hold tensors of any safetensors dtype;
 * wsnorm computes with F32, F16 and BF16, and dtype is WSN_DTYPE_COUNT for the others (so
 * wsn_dtype_size() gives 0 and wsn_dtype_name() NULL for them).
 */
struct wsn_st_entry {
	char name[WSN_ST_MAX_NAME];
	enum wsn_dtype dtype; /* WSN_F32, WSN_F16, WSN_BF16, or WSN_DTYPE_COUNT for the others */
	char st_dtype[16];    /* the dtype as the file names it: "BF16", "I64", "BOOL", "F8_E4M3", ... */
	int ndim;
	int64_t shape[WSN_MAX_DIMS];
	uint64_t offset; /* absolute file offset of the data */
	uint64_t nbytes;
};

struct wsn_st_file;

/*
 * Open a safetensors file and parse and validate its header (with a JSON library): header length
 * within the file, valid JSON object, dtypes of the safetensors format (any of them, not only those
 * wsnorm computes with), shapes whose product does not overflow and, in the dtype's element size,
 * matches data_offsets, offsets inside the data region and not overlapping.
 * The header is read through reader r (NULL: a private one). Returns 0 or WSN_EFORMAT/WSN_ETRUNC/
 * WSN_EDTYPE/WSN_ESHAPE/WSN_EOVERFLOW/WSN_EISDIR/WSN_ENOENT... with a detail naming the file.
 */
WSN_API int wsn_st_open(const char *path, struct wsn_reader *r, struct wsn_st_file **out);
WSN_API void wsn_st_close(struct wsn_st_file *f);
WSN_API const char *wsn_st_path(const struct wsn_st_file *f);
/* Number of tensors, and entry i in file order of offsets. */
WSN_API int wsn_st_count(const struct wsn_st_file *f);
WSN_API const struct wsn_st_entry *wsn_st_entry_at(const struct wsn_st_file *f, int i);
/* Entry by name; NULL if absent. */
WSN_API const struct wsn_st_entry *wsn_st_find(const struct wsn_st_file *f, const char *name);
/* A "__metadata__" string value; NULL if absent. */
WSN_API const char *wsn_st_metadata(const struct wsn_st_file *f, const char *key);
/*
 * Read tensor `name` into dst (capacity cap bytes) through the file's reader. Returns 0, WSN_ENOTENSOR
 * (detail names tensor and file), WSN_EDTYPE (a dtype wsnorm does not compute with; detail names
 * the dtype), WSN_ERANGE (cap too small), or a read error.
 */
WSN_API int wsn_st_read(struct wsn_st_file *f, const char *name, void *dst, size_t cap);

/* A named host tensor to write. */
struct wsn_named_tensor {
	const char *name;
	const struct wsn_tensor *t; /* contiguous host tensor */
};
/*
 * Write tensors (and optional metadata key/value string pairs, NULL-terminated list) as a
 * safetensors file. Written to a temporary name in the same directory and renamed into place,
 * so path is never left half-written. Returns 0 or an error naming the file.
 */
WSN_API int wsn_st_write(const char *path, const struct wsn_named_tensor *tensors, int n,
			 const char *const *metadata);

/* A tensor's header entry without its data: name, dtype and shape. */
struct wsn_st_tensor_info {
	const char *name;
	enum wsn_dtype dtype; /* WSN_F32, WSN_F16 or WSN_BF16 */
	int ndim;             /* 0..WSN_MAX_DIMS */
	int64_t shape[WSN_MAX_DIMS];
};
/*
 * Build the safetensors header wsn_st_write() writes, for callers that write the data themselves:
 * the 8-byte little-endian length, then the JSON object (metadata key/value pairs, NULL-terminated
 * list, first; then the n tensors in the given order, data packed in that order) padded with
 * spaces to a multiple of 8 bytes. *header is malloc'd (free() it) and *header_len bytes long;
 * offsets, when not NULL, receives n absolute file offsets of the tensors' data. Returns 0 or
 * WSN_EINVAL (no name, a name used twice or reserved, bad ndim), WSN_ERANGE (a name of
 * WSN_ST_MAX_NAME bytes or more), WSN_EDTYPE, WSN_ESHAPE (a negative dimension), WSN_EOVERFLOW
 * (a tensor's bytes or the data offsets exceed INT64_MAX), WSN_ENOMEM; the detail names the tensor.
 */
WSN_API int wsn_st_header(const struct wsn_st_tensor_info *tensors, int n,
			  const char *const *metadata, unsigned char **header, size_t *header_len,
			  uint64_t *offsets);

/*
 * Raw binary tensors: the file holds exactly numel * dtype size bytes (plus `offset` bytes before
 * them). Reads into dst through reader r. Returns 0, WSN_ETRUNC or WSN_ESHAPE (file size does not
 * match the shape), or a read error.
 */
WSN_API int wsn_raw_read(const char *path, struct wsn_reader *r, uint64_t offset,
			 const struct wsn_tensor *dst);
/* Write a contiguous host tensor's bytes as a raw file (temporary name + rename). */
WSN_API int wsn_raw_write(const char *path, const struct wsn_tensor *t);

/*
 * A file that gets its name only when it is whole: written through fd (write, pwrite, ftruncate,
 * io_uring), then given the name path by wsn_out_commit(), or discarded by wsn_out_abort().
 */
struct wsn_out_file {
	int fd;           /* the file being written; -1 once committed or aborted */
	char *tmp;        /* the temporary name it has meanwhile where the file system has no unnamed
			     files (malloc'd), else NULL: nothing of it has a name until the commit */
	const char *path; /* the destination, borrowed from the caller */
};
/*
 * Create the file that will become path: an unnamed file in path's directory (O_TMPFILE), which a
 * crash or a kill discards, or where the file system has none a named temporary file next to path.
 * Returns 0, or an error naming path (WSN_EISDIR if path is a directory, WSN_ENOENT if its
 * directory is missing, ...); o->fd is -1 then.
 */
WSN_API int wsn_out_open(struct wsn_out_file *o, const char *path);
/*
 * Flush to disk (fsync when durable) and give the file path's name: an unnamed file is linked
 * there (directly when path does not exist, else under a temporary name renamed over it), a named
 * one renamed; the descriptor is closed. On failure the file is discarded and path is untouched.
 * Returns 0 or an error naming path.
 */
WSN_API int wsn_out_commit(struct wsn_out_file *o, int durable);
/* Close and discard the file being written; path is untouched. Safe to call after a commit. */
WSN_API void wsn_out_abort(struct wsn_out_file *o);
/*
 * A name next to path for a file on its way there: path with suffix appended, or where that name
 * would be longer than a directory entry holds, ".wsnorm" and suffix in path's directory.
 * malloc'd (free it); NULL when out of memory.
 */
WSN_API char *wsn_out_sibling(const char *path, const char *suffix);

#ifdef __cplusplus
}
#endif
#endif
