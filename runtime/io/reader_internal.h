/* SPDX-License-Identifier: MIT */
/* runtime/io/reader_internal.h: what the io_uring reader's files share: the reader, its slots, caller buffers and queued reads. */
#ifndef WSN_IO_READER_INTERNAL_H
#define WSN_IO_READER_INTERNAL_H

#ifndef WSN_LAYER_RUNTIME
#error "runtime/io/reader_internal.h is private to the runtime (docs/DESIGN.md, Layers)"
#endif

#include "io/io_internal.h"

#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_QD 4096u
#define MIN_BS ((size_t)4096)
#define MAX_BS ((size_t)64 << 20)
#define MIN_ALIGN 512u
#define WAIT_BOUND_S 60  /* longest wait for any completion before a read counts as stalled */
#define DRAIN_BOUND_S 10 /* longest wait for in-flight reads after a failure */
#define MAX_RETRIES 16   /* EAGAIN/EINTR results, or short reads without progress, per buffer */
#define MAX_REGIONS 64   /* caller buffers registered at once */
#define MAX_PIECES 256   /* fixed-buffer table entries for caller buffers */
#define PIECE_MAX ((size_t)1 << 30) /* the kernel's limit on one registered buffer */
#define MAX_JOBS WSN_READER_MAX_QUEUED

enum slot_state { SLOT_FREE, SLOT_PENDING, SLOT_INFLIGHT };

/* One registered buffer and the file range it is reading. */
struct slot {
	enum slot_state state;
	uint64_t pos;     /* file offset of the buffer's first byte */
	size_t want;      /* bytes asked for in all */
	size_t got;       /* bytes in the buffer so far */
	size_t need;      /* bytes that must arrive (less than want only at the end of the range) */
	unsigned retries;
	unsigned char *target; /* caller memory the read goes straight into; NULL: the bounce buffer */
	int index;        /* fixed-buffer table index of target's piece, -1 for a plain read */
	struct job *job;  /* the read this chunk belongs to */
};

/* Caller memory registered with wsn_reader_register(). */
struct region {
	unsigned char *base;
	size_t len;
	int first;        /* table index of its first PIECE_MAX piece; -1 when not in the table */
	unsigned npieces;
};

struct wsn_reader {
	struct io_uring ring;
	struct wsn_reader_options opt;
	bool fixed;          /* buffers registered with the ring: read_fixed */
	bool broken;         /* a read stalled with requests in flight; the buffers are not ours */
	bool inject_short;   /* tests: report each buffer's first completion as short */
	unsigned char *bufs; /* queue_depth * block_size bytes, page aligned */
	size_t bufs_len;
	struct slot *slots;
	struct wsn_read_stats stats;
	char mode[128];
	unsigned table_size; /* fixed-buffer table entries: queue_depth, plus MAX_PIECES when sparse */
	unsigned char *table_used; /* per entry beyond queue_depth: taken by a caller buffer */
	struct region regions[MAX_REGIONS];
	unsigned nregions;
	uint64_t straight_bytes, bounce_bytes;
	struct job *jobs, *jobs_tail; /* queued reads, oldest first: chunks are handed out in order */
	unsigned njobs;
	unsigned inflight;   /* reads in flight, all jobs */
	uint64_t next_id;
	bool single_issuer;  /* the ring takes submissions from its creating thread only */
	pthread_t owner;
};

/* What a read needs to know about the open file. */
struct file_info {
	uint64_t size;
	uint32_t lbs;        /* logical block size (at least MIN_ALIGN) */
	bool dio_known;      /* statx reported STATX_DIOALIGN */
	uint32_t dio_mem;    /* required buffer alignment, 0 if direct I/O is unsupported */
	uint32_t dio_off;    /* required file offset and length alignment */
};

/* One read queued by wsn_reader_submit(), in the reader's queue until wsn_reader_wait() takes it. */
struct job {
	uint64_t id;
	char *path;          /* a copy */
	int fd;
	bool direct;
	uint64_t align;      /* 1 for buffered reads */
	uint64_t offset, end;/* wanted range */
	uint64_t next, aend; /* next aligned offset to hand out, aligned end */
	unsigned char *dst;
	unsigned chunks;     /* chunks handed out and not finished (pending or in flight) */
	struct region reg;   /* the caller buffer dst lies in (reg.base NULL: none): reads may go straight there */
	uint64_t m0, m1;     /* the file range read straight into dst (m0 == m1: none) */
	int err;             /* the first failure: no more chunks are handed out */
	char msg[512];       /* its message, for the wait that reports it */
	struct job *link;    /* the next queued read */
};

/* Job j has no chunk left to hand out and none in flight (its result is in j->err). */
static inline bool wsn__reader_job_done(const struct job *j)
{
	return j->chunks == 0 && j->next >= j->aend;
}

/* A SINGLE_ISSUER ring refuses other threads: 0, or WSN_EINVAL naming what, before any state is touched (reader.c). */
int wsn__reader_other_thread(const struct wsn_reader *r, const char *what);
/* The registered caller buffer that holds all of [p, p + len), or NULL (reader_register.c). */
const struct region *wsn__reader_find_region(const struct wsn_reader *r, const void *p, uint64_t len);
/*
 * Open j->path for reading per the reader's direct option and fill fi and j's descriptor,
 * direct flag and alignment (reader_open.c). 0 or an error naming the file.
 */
int wsn__reader_open_file(struct wsn_reader *r, struct job *j, struct file_info *fi);

#endif
