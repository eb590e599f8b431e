/* SPDX-License-Identifier: MIT */
/* runtime/io/reader.c: io_uring reader: registered buffers (its own and callers'), O_DIRECT, short reads. */
#include "io/io_internal.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/hostmem.h"
#include "core/util.h"

#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Kernel ABI values, for liburing headers older than the flags. */
#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif

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

static bool job_done(const struct job *j);

int wsn__errno_code(int e)
{
	if (e > 0 && strcmp(wsn_err_name(-e), "UNKNOWN") != 0)
		return -e;
	return WSN_EIO;
}

/* Fill o with the defaults: queue depth 32, 1 MiB blocks, direct auto, no SQPOLL. */
WSN_API void wsn_reader_options_init(struct wsn_reader_options *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->queue_depth = WSN_READER_DEFAULT_QD;
	o->block_size = WSN_READER_DEFAULT_BS;
	o->direct = -1;
	o->sqpoll = 0;
}

/* ---- ring setup ---- */

struct ring_try {
	unsigned flags;
	const char *name;
};

static const struct ring_try ring_tries[] = {
	{ IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER, "DEFER_TASKRUN|SINGLE_ISSUER" },
	{ IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN" },
	{ 0, "none" },
};

/* DEFER_TASKRUN is not valid with SQPOLL. */
static const struct ring_try sqpoll_tries[] = {
	{ IORING_SETUP_SQPOLL | IORING_SETUP_SINGLE_ISSUER, "SQPOLL|SINGLE_ISSUER" },
	{ IORING_SETUP_SQPOLL, "SQPOLL" },
};

static int try_ring(struct wsn_reader *r, unsigned flags)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof(p));
	p.flags = flags;
	if (flags & IORING_SETUP_SQPOLL)
		p.sq_thread_idle = 1000; /* ms */
	return io_uring_queue_init_params(r->opt.queue_depth, &r->ring, &p);
}

/*
 * Set up the ring with the best flags the kernel accepts: each set refused with EINVAL falls
 * back to the next. SQPOLL, when asked, is tried first; its refusal (any error: older kernels
 * want privileges for it) falls back to the plain sets and is noted in the mode text.
 */
static int setup_ring(struct wsn_reader *r)
{
	int sq_err = 0, ret = 0;

	if (r->opt.sqpoll) {
		for (size_t i = 0; i < WSN_ARRAY_SIZE(sqpoll_tries); i++) {
			ret = try_ring(r, sqpoll_tries[i].flags);
			if (ret == 0) {
				snprintf(r->mode, sizeof(r->mode), "%s", sqpoll_tries[i].name);
				return 0;
			}
			sq_err = ret;
		}
	}
	for (size_t i = 0; i < WSN_ARRAY_SIZE(ring_tries); i++) {
		ret = try_ring(r, ring_tries[i].flags);
		if (ret == 0) {
			if (r->opt.sqpoll)
				snprintf(r->mode, sizeof(r->mode), "%s (SQPOLL refused: %s)",
					 ring_tries[i].name, wsn_err_name(wsn__errno_code(-sq_err)));
			else
				snprintf(r->mode, sizeof(r->mode), "%s", ring_tries[i].name);
			return 0;
		}
		if (ret != -EINVAL)
			break;
	}
	return wsn__error(wsn__errno_code(-ret), "reader: io_uring_setup with %u entries failed: %s",
			  r->opt.queue_depth, strerror(-ret));
}

/*
 * Register the bounce buffers. The table is made sparse with MAX_PIECES spare entries when the
 * kernel and liburing can, so that caller buffers can join it later (wsn_reader_register);
 * otherwise the bounce buffers alone are registered. Returns whether they are in the table.
 */
static bool register_table(struct wsn_reader *r, const struct iovec *iov, unsigned qd)
{
#ifdef IORING_RSRC_REGISTER_SPARSE
	unsigned n = qd + MAX_PIECES;

	if (io_uring_register_buffers_sparse(&r->ring, n) == 0) {
		if (io_uring_register_buffers_update_tag(&r->ring, 0, iov, NULL, qd) == (int)qd) {
			r->table_used = calloc(MAX_PIECES, 1);
			if (r->table_used) {
				r->table_size = n;
				return true;
			}
		}
		io_uring_unregister_buffers(&r->ring);
	}
#endif
	if (io_uring_register_buffers(&r->ring, iov, qd) != 0)
		return false;
	r->table_size = qd;
	return true;
}

/*
 * The buffers: one anonymous mapping, so every block_size buffer is page aligned, which covers
 * any direct I/O memory alignment up to the page size. Registration can be refused (e.g. by
 * RLIMIT_MEMLOCK for an unprivileged user); the reader then issues plain reads into the same
 * buffers. Caller buffers registered later (wsn_reader_register) take the spare table entries.
 */
static int setup_buffers(struct wsn_reader *r)
{
	size_t bs = r->opt.block_size;
	unsigned qd = r->opt.queue_depth;
	struct iovec *iov;
	char what[80];
	void *p;
	int err;

	r->bufs_len = (size_t)qd * bs;
	snprintf(what, sizeof(what), "reader: cannot take %u buffers of %zu bytes", qd, bs);
	if ((err = wsn__host_hold(r->bufs_len, what)) < 0)
		return err;
	p = mmap(NULL, r->bufs_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		wsn__host_release(r->bufs_len);
		return wsn__error(WSN_ENOMEM, "reader: cannot map %zu bytes of buffers (%u x %zu): %s",
				  r->bufs_len, qd, bs, strerror(errno));
	}
	r->bufs = p;
	iov = calloc(qd, sizeof(*iov));
	if (!iov)
		return wsn__error(WSN_ENOMEM, "reader: out of memory");
	for (unsigned i = 0; i < qd; i++) {
		iov[i].iov_base = r->bufs + (size_t)i * bs;
		iov[i].iov_len = bs;
	}
	r->fixed = register_table(r, iov, qd);
	free(iov);
	return 0;
}

/*
 * Create a reader (o NULL: defaults). A reader is used by one thread at a time, and with
 * SINGLE_ISSUER only by the thread that created it. Returns 0 and *out, or WSN_EINVAL (options
 * out of range), WSN_ENOMEM, or the io_uring_setup error (WSN_EPERM, WSN_ENOSYS, ...).
 */
/* A SINGLE_ISSUER ring refuses other threads; say so before touching any state. */
static int other_thread(const struct wsn_reader *r, const char *what)
{
	if (r->single_issuer && !pthread_equal(r->owner, pthread_self()))
		return wsn__error(WSN_EINVAL, "reader: %s: used from a thread other than the one that created it "
				  "(ring mode %s)", what, r->mode);
	return 0;
}

WSN_API int wsn_reader_create(const struct wsn_reader_options *o, struct wsn_reader **out)
{
	struct wsn_reader_options def;
	struct wsn_reader *r;
	int err;

	if (!out)
		return wsn__error(WSN_EINVAL, "reader: no output pointer");
	*out = NULL;
	if (!o) {
		wsn_reader_options_init(&def);
		o = &def;
	}
	if (o->queue_depth < 1 || o->queue_depth > MAX_QD)
		return wsn__error(WSN_EINVAL, "reader: queue depth %u is out of range (1..%u)",
				  o->queue_depth, MAX_QD);
	if (o->block_size < MIN_BS || o->block_size > MAX_BS || o->block_size % MIN_BS)
		return wsn__error(WSN_EINVAL,
				  "reader: block size %zu is not a multiple of 4 KiB in 4 KiB..64 MiB",
				  o->block_size);
	if (o->direct < -1 || o->direct > 1)
		return wsn__error(WSN_EINVAL, "reader: direct must be -1 (auto), 0 or 1, not %d",
				  o->direct);
	r = calloc(1, sizeof(*r));
	if (!r)
		return wsn__error(WSN_ENOMEM, "reader: out of memory");
	r->opt = *o;
	r->slots = calloc(o->queue_depth, sizeof(*r->slots));
	if (!r->slots) {
		err = wsn__error(WSN_ENOMEM, "reader: out of memory");
		goto err_free;
	}
	err = setup_ring(r);
	if (err)
		goto err_free;
	r->single_issuer = (r->ring.flags & IORING_SETUP_SINGLE_ISSUER) != 0;
	r->owner = pthread_self();
	err = setup_buffers(r);
	if (err)
		goto err_ring;
	*out = r;
	return 0;

err_ring:
	io_uring_queue_exit(&r->ring);
	if (r->bufs) {
		munmap(r->bufs, r->bufs_len);
		wsn__host_release(r->bufs_len);
	}
err_free:
	free(r->slots);
	free(r);
	return err;
}

/* Tear down the ring and free the buffers. NULL is ignored. */
WSN_API void wsn_reader_destroy(struct wsn_reader *r)
{
	if (!r)
		return;
	io_uring_queue_exit(&r->ring);
	/*
	 * A stalled plain read may still copy into the buffers from a kernel worker: keep them mapped
	 * (leaked) rather than let it write into whatever is mapped there next. Registered buffers
	 * are pinned by the kernel, so unmapping them is safe.
	 */
	if (!r->broken || r->fixed) {
		munmap(r->bufs, r->bufs_len);
		wsn__host_release(r->bufs_len); /* a leaked mapping stays counted: it still takes the memory */
	}
	while (r->jobs) { /* submitted and never waited for */
		struct job *j = r->jobs;

		r->jobs = j->link;
		if (j->fd >= 0)
			close(j->fd);
		free(j->path);
		free(j);
	}
	free(r->table_used);
	free(r->slots);
	free(r);
}

/*
 * The accepted ring flags: "DEFER_TASKRUN|SINGLE_ISSUER", "COOP_TASKRUN" or "none"; with SQPOLL
 * asked, "SQPOLL|SINGLE_ISSUER", "SQPOLL", or a plain set followed by " (SQPOLL refused: EPERM)".
 * "" for NULL.
 */
WSN_API const char *wsn_reader_ring_mode(const struct wsn_reader *r)
{
	return r ? r->mode : "";
}

/* Copy the reader's cumulative counters into out (zeros for NULL). */
WSN_API void wsn_reader_stats(const struct wsn_reader *r, struct wsn_read_stats *out)
{
	if (!out)
		return;
	if (!r) {
		memset(out, 0, sizeof(*out));
		return;
	}
	*out = r->stats;
}

bool wsn__reader_fixed_buffers(const struct wsn_reader *r)
{
	return r && r->fixed;
}

void wsn__reader_inject_short_reads(struct wsn_reader *r, bool on)
{
	if (r)
		r->inject_short = on;
}

/* ---- caller buffers ---- */

/* The registered caller buffer that holds all of [p, p + len), or NULL. */
static const struct region *find_region(const struct wsn_reader *r, const void *p, uint64_t len)
{
	uintptr_t a = (uintptr_t)p;

	for (unsigned i = 0; i < r->nregions; i++) {
		uintptr_t b = (uintptr_t)r->regions[i].base;

		if (a >= b && a - b <= r->regions[i].len && len <= r->regions[i].len - (a - b))
			return &r->regions[i];
	}
	return NULL;
}

/* Mark n consecutive spare table entries taken; the table index of the first, or -1. */
static int take_entries(struct wsn_reader *r, unsigned n)
{
	unsigned spare;

	if (!r->table_used || r->table_size <= r->opt.queue_depth)
		return -1;
	spare = r->table_size - r->opt.queue_depth;
	for (unsigned i = 0; i + n <= spare; i++) {
		unsigned k = 0;

		while (k < n && !r->table_used[i + k])
			k++;
		if (k == n) {
			memset(r->table_used + i, 1, n);
			return (int)(r->opt.queue_depth + i);
		}
		i += k; /* entry i + k is taken: look past it */
	}
	return -1;
}

/* Empty n table entries from index first and give them back. */
static void release_entries(struct wsn_reader *r, int first, unsigned n)
{
	struct iovec *iov = calloc(n, sizeof(*iov)); /* { NULL, 0 }: an empty entry */

	if (iov) {
		io_uring_register_buffers_update_tag(&r->ring, (unsigned)first, iov, NULL, n);
		free(iov);
	}
	memset(r->table_used + (first - (int)r->opt.queue_depth), 0, n);
}

/*
 * Let reads into [buf, buf + len) go straight there: the buffer joins the ring's fixed-buffer
 * table (in pieces of at most 1 GiB) when the table has room and the kernel accepts it, else
 * the reads into it are plain reads. Either way no bounce copy is made for the blocks of a
 * range that the buffer can take (see wsn_reader_read). Returns 0, WSN_EINVAL, WSN_EEXIST (it
 * overlaps a registered buffer), WSN_ENOSPC (too many buffers) or WSN_EIO (the reader is unusable).
 */
WSN_API int wsn_reader_register(struct wsn_reader *r, void *buf, size_t len)
{
	unsigned char *b = buf;
	struct region *g;
	struct iovec *iov;
	int first, ret;

	if (!r || !buf || !len)
		return wsn__error(WSN_EINVAL, "reader: register: no reader, no buffer or no length");
	if ((ret = other_thread(r, "register")) < 0)
		return ret;
	if (r->broken)
		return wsn__error(WSN_EIO, "reader: register: the reader is unusable: an earlier read "
				  "stalled with requests in flight");
	if ((uintptr_t)b + len < (uintptr_t)b)
		return wsn__error(WSN_EINVAL, "reader: register: %zu bytes at %p wrap around", len, buf);
	for (unsigned i = 0; i < r->nregions; i++) {
		const struct region *o = &r->regions[i];

		if (b < o->base + o->len && o->base < b + len)
			return wsn__error(WSN_EEXIST, "reader: register: %zu bytes at %p overlap the "
					  "registered buffer of %zu bytes at %p", len, buf, o->len,
					  (void *)o->base);
	}
	if (r->nregions == MAX_REGIONS)
		return wsn__error(WSN_ENOSPC, "reader: register: %u buffers are registered already",
				  MAX_REGIONS);
	g = &r->regions[r->nregions];
	g->base = b;
	g->len = len;
	g->first = -1;
	g->npieces = (unsigned)((len + PIECE_MAX - 1) / PIECE_MAX);
	first = g->npieces <= MAX_PIECES ? take_entries(r, g->npieces) : -1;
	if (first >= 0 && (iov = calloc(g->npieces, sizeof(*iov)))) {
		for (unsigned k = 0; k < g->npieces; k++) {
			size_t at = (size_t)k * PIECE_MAX;

			iov[k].iov_base = b + at;
			iov[k].iov_len = len - at < PIECE_MAX ? len - at : PIECE_MAX;
		}
		ret = io_uring_register_buffers_update_tag(&r->ring, (unsigned)first, iov, NULL,
							   g->npieces);
		free(iov);
		if (ret == (int)g->npieces)
			g->first = first;
	}
	if (first >= 0 && g->first < 0)
		release_entries(r, first, g->npieces); /* refused (e.g. RLIMIT_MEMLOCK): plain reads */
	r->nregions++;
	return 0;
}

/*
 * Forget a buffer registered with wsn_reader_register(), by its start address. Returns 0,
 * WSN_EINVAL or WSN_ENOENT (not registered).
 */
WSN_API int wsn_reader_unregister(struct wsn_reader *r, void *buf)
{
	int err;

	if (!r || !buf)
		return wsn__error(WSN_EINVAL, "reader: unregister: no reader or no buffer");
	if ((err = other_thread(r, "unregister")) < 0)
		return err;
	for (unsigned i = 0; i < r->nregions; i++) {
		struct region *g = &r->regions[i];

		if (g->base != buf)
			continue;
		for (struct job *j = r->jobs; j; j = j->link)
			if (j->reg.base == g->base && !job_done(j))
				return wsn__error(WSN_EBUSY, "reader: unregister: read %llu into %p is still queued; "
						  "wait for it first", (unsigned long long)j->id, buf);
		if (g->first >= 0)
			release_entries(r, g->first, g->npieces);
		*g = r->regions[--r->nregions];
		return 0;
	}
	return wsn__error(WSN_ENOENT, "reader: unregister: %p is not the start of a registered buffer",
			  buf);
}

/* Caller-buffer counters and state (zeros for NULL). */
WSN_API void wsn_reader_buffer_stats(const struct wsn_reader *r, struct wsn_reader_buffer_stats *out)
{
	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	if (!r)
		return;
	out->registered = r->nregions;
	for (unsigned i = 0; i < r->nregions; i++)
		out->fixed += r->regions[i].first >= 0;
	out->straight_bytes = r->straight_bytes;
	out->bounce_bytes = r->bounce_bytes;
	out->unusable = r->broken;
}

/* ---- opening files ---- */

static int open_error(const char *path, int e)
{
	if (e == ENOENT)
		return wsn__error(WSN_ENOENT, "%s: no such file", path);
	return wsn__error(wsn__errno_code(e), "%s: cannot open: %s", path, strerror(e));
}

/* Type, size and alignment of an open file; rejects directories and anything unseekable. */
static int classify(int fd, const char *path, struct file_info *fi)
{
	unsigned mask = STATX_TYPE | STATX_SIZE;
	struct statx stx;
	uint32_t lbs;

	memset(fi, 0, sizeof(*fi));
#ifdef STATX_DIOALIGN
	mask |= STATX_DIOALIGN;
#endif
	memset(&stx, 0, sizeof(stx));
	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_SYNC_AS_STAT, mask, &stx) < 0)
		return wsn__error(wsn__errno_code(errno), "%s: statx failed: %s", path, strerror(errno));
	if (S_ISDIR(stx.stx_mode))
		return wsn__error(WSN_EISDIR, "%s: is a directory, not a file", path);
	if (S_ISBLK(stx.stx_mode)) {
		uint64_t bytes = 0;
		int ssz = 0;

		if (ioctl(fd, BLKGETSIZE64, &bytes) < 0)
			return wsn__error(wsn__errno_code(errno), "%s: BLKGETSIZE64 failed: %s", path,
					  strerror(errno));
		if (ioctl(fd, BLKSSZGET, &ssz) < 0)
			ssz = 0;
		fi->size = bytes;
		lbs = ssz > 0 ? (uint32_t)ssz : 0;
	} else if (S_ISREG(stx.stx_mode)) {
		fi->size = stx.stx_size;
		lbs = stx.stx_blksize;
	} else {
		return wsn__error(WSN_EINVAL, "%s: not a regular file or block device", path);
	}
	fi->lbs = lbs > MIN_ALIGN ? lbs : MIN_ALIGN;
#ifdef STATX_DIOALIGN
	if (stx.stx_mask & STATX_DIOALIGN) {
		fi->dio_known = true;
		fi->dio_mem = stx.stx_dio_mem_align;
		fi->dio_off = stx.stx_dio_offset_align;
	}
#endif
	return 0;
}

static bool pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

/*
 * The alignment direct reads of this file need, or 0 with a reason when the reader's buffers
 * cannot serve them (no direct I/O on this file, or alignment the buffers do not meet).
 */
static uint64_t dio_align(const struct wsn_reader *r, const struct file_info *fi, char *why,
			  size_t n)
{
	uint64_t mem = fi->lbs, off = fi->lbs, a;
	long page = sysconf(_SC_PAGESIZE);

	if (fi->dio_known) {
		if (!fi->dio_off || !fi->dio_mem) {
			snprintf(why, n, "the file system reports no direct I/O for it");
			return 0;
		}
		mem = fi->dio_mem;
		off = fi->dio_off;
	}
	a = mem > off ? mem : off;
	if (!pow2(mem) || !pow2(off) || mem > (uint64_t)(page > 0 ? page : 4096) ||
	    a > r->opt.block_size || r->opt.block_size % a) {
		snprintf(why, n, "its direct I/O alignment (memory %llu, offset %llu) does not fit "
			 "%zu-byte page-aligned buffers", (unsigned long long)mem,
			 (unsigned long long)off, r->opt.block_size);
		return 0;
	}
	return a;
}

/*
 * Open path for reading per the reader's direct option. O_NONBLOCK keeps open() from waiting on
 * a FIFO; it is cleared (with O_DIRECT when direct reads are refused) once the file is known to
 * be a regular file or block device, so io_uring does not return EAGAIN for uncached pages.
 */
static int open_for_read(struct wsn_reader *r, struct job *j, struct file_info *fi)
{
	const int base = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
	char why[160] = "";
	int fd = -1, fl, err;

	if (r->opt.direct != 0) {
		fd = open(j->path, base | O_DIRECT);
		if (fd < 0 && errno != EINVAL)
			return open_error(j->path, errno);
		if (fd < 0)
			snprintf(why, sizeof(why), "open(O_DIRECT) was refused (EINVAL)");
	}
	if (fd < 0) {
		fd = open(j->path, base);
		if (fd < 0)
			return open_error(j->path, errno);
	}
	err = classify(fd, j->path, fi);
	if (err)
		goto err;
	j->align = 1;
	if (r->opt.direct != 0 && !why[0])
		j->align = dio_align(r, fi, why, sizeof(why));
	if (why[0]) {
		j->align = 1;
		if (r->opt.direct == 1) {
			err = wsn__error(WSN_ENOTSUP, "%s: direct I/O is required but %s", j->path, why);
			goto err;
		}
	}
	j->direct = !why[0] && r->opt.direct != 0;
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~(O_NONBLOCK | (j->direct ? 0 : O_DIRECT))) < 0) {
		err = wsn__error(wsn__errno_code(errno), "%s: fcntl(F_SETFL) failed: %s", j->path,
				 strerror(errno));
		goto err;
	}
	if (j->direct)
		r->stats.direct_files++;
	else
		r->stats.buffered_files++;
	j->fd = fd;
	return 0;

err:
	close(fd);
	return err;
}

int wsn__file_size(const char *path, uint64_t *size)
{
	struct file_info fi;
	int fd, err;

	if (!path || !size)
		return wsn__error(WSN_EINVAL, "file size: no path");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return open_error(path, errno);
	err = classify(fd, path, &fi);
	close(fd);
	if (!err)
		*size = fi.size;
	return err;
}

/* ---- the read loop: queued reads, up to queue_depth chunks in flight over all of them ---- */

static bool job_done(const struct job *j)
{
	return j->chunks == 0 && j->next >= j->aend;
}

/* Slot i's chunk is over (done, failed or dropped): the slot is free again. */
static void slot_free(struct wsn_reader *r, unsigned i)
{
	r->slots[i].state = SLOT_FREE;
	r->slots[i].job->chunks--;
}

/* Put a pending slot's read on the submission queue; false if the queue is full. */
static bool queue_slot(struct wsn_reader *r, unsigned i)
{
	struct slot *s = &r->slots[i];
	unsigned char *buf = (s->target ? s->target : r->bufs + (size_t)i * r->opt.block_size) + s->got;
	unsigned n = (unsigned)(s->want - s->got);
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
	int index = s->target ? s->index : r->fixed ? (int)i : -1;

	if (!sqe)
		return false;
	if (index >= 0)
		io_uring_prep_read_fixed(sqe, s->job->fd, buf, n, s->pos + s->got, index);
	else
		io_uring_prep_read(sqe, s->job->fd, buf, n, s->pos + s->got);
	sqe->user_data = (uint64_t)i + 1;
	s->state = SLOT_INFLIGHT;
	r->inflight++;
	return true;
}

/*
 * The next chunk of job j for slot s: inside [m0, m1) it goes straight into the caller's buffer
 * (through the buffer's fixed-table piece when the chunk lies in one piece); before m0 (the
 * unaligned head) and from m1 on (the tail) it goes through the slot's bounce buffer.
 */
static void next_chunk(const struct wsn_reader *r, struct job *j, struct slot *s)
{
	size_t bs = r->opt.block_size;
	uint64_t lim;

	s->job = j;
	s->pos = j->next;
	s->target = NULL;
	s->index = -1;
	if (j->next >= j->m0 && j->next < j->m1) {
		lim = j->m1;
		s->target = j->dst + (j->next - j->offset);
	} else {
		lim = j->next < j->m0 ? j->m0 : j->aend;
	}
	s->want = lim - j->next < bs ? (size_t)(lim - j->next) : bs;
	if (s->target && j->reg.first >= 0) {
		size_t lo = (size_t)(s->target - j->reg.base), hi = lo + s->want - 1;

		if (lo / PIECE_MAX == hi / PIECE_MAX)
			s->index = j->reg.first + (int)(lo / PIECE_MAX);
	}
	s->got = 0;
	s->need = j->end - s->pos < s->want ? (size_t)(j->end - s->pos) : s->want;
	s->retries = 0;
	s->state = SLOT_PENDING;
	j->next += s->want;
	j->chunks++;
}

/*
 * Give pending slots, then free slots with the next chunks of the oldest queued reads, to the
 * ring: one read's last chunks and the next read's first ones are in flight together.
 */
static void fill(struct wsn_reader *r)
{
	struct job *j = r->jobs;

	for (unsigned i = 0; i < r->opt.queue_depth; i++) {
		struct slot *s = &r->slots[i];

		if (s->state == SLOT_FREE) {
			while (j && j->next >= j->aend)
				j = j->link;
			if (j)
				next_chunk(r, j, s);
		}
		if (s->state == SLOT_PENDING && !queue_slot(r, i))
			return;
	}
}

static void copy_out(struct wsn_reader *r, const struct job *j, unsigned i)
{
	const struct slot *s = &r->slots[i];
	uint64_t lo = s->pos > j->offset ? s->pos : j->offset;
	uint64_t hi = s->pos + s->got < j->end ? s->pos + s->got : j->end;

	if (hi > lo) {
		memcpy(j->dst + (lo - j->offset), r->bufs + (size_t)i * r->opt.block_size + (lo - s->pos),
		       (size_t)(hi - lo));
		r->bounce_bytes += hi - lo;
	}
}

/*
 * Fail job j with err (the message is the thread's last error): hand out no more of its chunks
 * and drop its pending ones; the ones in flight are reaped and dropped as they complete.
 */
static void job_fail(struct wsn_reader *r, struct job *j, int err)
{
	if (!j->err) {
		j->err = err;
		snprintf(j->msg, sizeof(j->msg), "%s", wsn_last_error());
	}
	j->next = j->aend;
	for (unsigned i = 0; i < r->opt.queue_depth; i++)
		if (r->slots[i].state == SLOT_PENDING && r->slots[i].job == j)
			slot_free(r, i);
}

/* Account for one completion of slot i. */
static void complete(struct wsn_reader *r, unsigned i, int res)
{
	struct slot *s = &r->slots[i];
	struct job *j = s->job;
	size_t before = s->got;

	if (s->state != SLOT_INFLIGHT)
		return;
	r->inflight--;
	r->stats.reads++;
	if (j->err) {
		slot_free(r, i); /* the read already failed: its other chunks do not matter */
		return;
	}
	if (res < 0) {
		if ((res == -EAGAIN || res == -EINTR) && s->retries++ < MAX_RETRIES) {
			s->state = SLOT_PENDING;
			return;
		}
		slot_free(r, i);
		job_fail(r, j, wsn__error(wsn__errno_code(-res), "%s: read of %zu bytes at offset %llu failed%s: %s",
					  j->path, s->want - s->got, (unsigned long long)(s->pos + s->got),
					  j->direct ? " (O_DIRECT)" : "", strerror(-res)));
		return;
	}
	if (res == 0) {
		slot_free(r, i);
		job_fail(r, j, wsn__error(WSN_ETRUNC,
					  "%s: end of file at offset %llu while reading %llu bytes at offset %llu "
					  "(the file shrank while being read)",
					  j->path, (unsigned long long)(s->pos + s->got),
					  (unsigned long long)(j->end - j->offset), (unsigned long long)j->offset));
		return;
	}
	if (r->inject_short && s->got == 0 && !s->retries && res > 1)
		res -= res / 3; /* as if the kernel stopped early: the rest is read again */
	s->got += (size_t)res;
	if (s->got >= s->need) {
		/* a direct read of the last block stops short at the end of the file: that is enough */
		if (s->target)
			r->straight_bytes += s->need;
		else
			copy_out(r, j, i);
		slot_free(r, i);
		return;
	}
	r->stats.short_reads++;
	/* direct reads resume at an aligned offset; a short read that is not aligned is re-read */
	s->got -= s->got % j->align;
	if (s->got <= before && s->retries++ >= MAX_RETRIES) {
		slot_free(r, i);
		job_fail(r, j, wsn__error(WSN_EIO, "%s: reads at offset %llu make no progress", j->path,
					  (unsigned long long)(s->pos + s->got)));
		return;
	}
	s->state = SLOT_PENDING;
}

/* Take every completion that is ready. */
static void reap(struct wsn_reader *r)
{
	struct io_uring_cqe *cqe;

	while (io_uring_peek_cqe(&r->ring, &cqe) == 0) {
		uint64_t ud = cqe->user_data;
		int res = cqe->res;

		io_uring_cqe_seen(&r->ring, cqe);
		if (ud == 0 || ud > r->opt.queue_depth)
			continue; /* not one of ours (e.g. liburing's own timeout) */
		complete(r, (unsigned)(ud - 1), res);
	}
}

/*
 * The ring itself failed (a stall, or a wrong thread): fail every queued read with err and wait
 * (bounded) for every read in flight so the buffers are free again. If they do not come back the
 * reader is marked broken and refuses further reads.
 */
static void fail_all(struct wsn_reader *r, int err)
{
	struct __kernel_timespec ts = { .tv_sec = DRAIN_BOUND_S, .tv_nsec = 0 };
	struct io_uring_cqe *cqe;

	for (struct job *j = r->jobs; j; j = j->link)
		job_fail(r, j, err);
	while (r->inflight > 0) {
		int ret = io_uring_submit_and_wait_timeout(&r->ring, &cqe, 1, &ts, NULL);

		if (ret == -EINTR)
			continue;
		if (ret < 0) {
			r->broken = true;
			break;
		}
		reap(r);
	}
}

/* Wait until job j has no chunk left to hand out and none in flight (its result is in j->err). */
static void run_until_done(struct wsn_reader *r, struct job *j)
{
	struct __kernel_timespec ts = { .tv_sec = WAIT_BOUND_S, .tv_nsec = 0 };
	unsigned busy_retries = 0;

	while (!job_done(j)) {
		struct io_uring_cqe *cqe;
		int ret;

		fill(r);
		if (r->inflight == 0) {
			/* nothing in flight: every chunk of j must have been handed out and completed */
			if (j->next < j->aend)
				job_fail(r, j, wsn__error(WSN_EIO, "%s: reads stopped at offset %llu of %llu",
							  j->path, (unsigned long long)j->next,
							  (unsigned long long)j->aend));
			else
				job_fail(r, j, wsn__error(WSN_EIO, "%s: no submission queue entry for a read with "
							  "nothing in flight", j->path));
			break;
		}
		ret = io_uring_submit_and_wait_timeout(&r->ring, &cqe, 1, &ts, NULL);
		if (ret == -EINTR)
			continue;
		if ((ret == -EAGAIN || ret == -EBUSY) && busy_retries++ < MAX_RETRIES)
			continue;
		if (ret == -ETIME) {
			fail_all(r, wsn__error(WSN_ETIMEDOUT, "%s: no read completed within %d s (%u in flight)",
					       j->path, WAIT_BOUND_S, r->inflight));
			break;
		}
		if (ret == -EEXIST) {
			fail_all(r, wsn__error(WSN_EINVAL, "%s: the reader was used from a thread other than the "
					       "one that created it (ring mode %s)", j->path, r->mode));
			break;
		}
		if (ret < 0) {
			fail_all(r, wsn__error(wsn__errno_code(-ret), "%s: io_uring_enter failed: %s", j->path,
					       strerror(-ret)));
			break;
		}
		reap(r);
	}
}

/*
 * Queue a read of [offset, offset + len) of path into dst and start it: its first chunks go on
 * the ring with those of the reads queued before it. The file is opened (and its size and
 * alignment checked) here. Returns 0 and *id for wsn_reader_wait(), or the error of the open or
 * the size check (the read is then not queued): WSN_EINVAL, WSN_ENOENT, WSN_EISDIR, WSN_ENOTSUP,
 * WSN_ETRUNC, WSN_EBUSY (64 reads queued already), WSN_EIO (the reader is unusable), ...
 */
WSN_API int wsn_reader_submit(struct wsn_reader *r, const char *path, uint64_t offset, uint64_t len,
			      void *dst, uint64_t *id)
{
	double t0 = wsn__now();
	struct file_info fi;
	struct job *j;
	const struct region *g;
	int err;

	if (!r || !path || !id)
		return wsn__error(WSN_EINVAL, "read: no reader, no path or no id");
	if ((err = other_thread(r, path)) < 0)
		return err;
	if (len && !dst)
		return wsn__error(WSN_EINVAL, "%s: read of %llu bytes into no buffer", path,
				  (unsigned long long)len);
	if (r->broken)
		return wsn__error(WSN_EIO, "%s: the reader is unusable: an earlier read stalled with "
				  "requests in flight", path);
	if (r->njobs >= MAX_JOBS)
		return wsn__error(WSN_EBUSY, "%s: %u reads are queued already: wait for one first", path,
				  MAX_JOBS);
	if (!(j = calloc(1, sizeof(*j))) || !(j->path = strdup(path))) {
		free(j);
		return wsn__error(WSN_ENOMEM, "%s: out of memory", path);
	}
	j->fd = -1;
	j->offset = offset;
	j->dst = dst;
	j->reg.first = -1;
	err = open_for_read(r, j, &fi);
	if (!err && (offset > fi.size || len > fi.size - offset)) {
		if (fi.size == 0)
			err = wsn__error(WSN_ETRUNC, "%s: empty file, %llu bytes wanted at offset %llu",
					 path, (unsigned long long)len, (unsigned long long)offset);
		else
			err = wsn__error(WSN_ETRUNC,
					 "%s: file of %llu bytes ends before offset %llu + %llu bytes",
					 path, (unsigned long long)fi.size, (unsigned long long)offset,
					 (unsigned long long)len);
	}
	if (err) {
		if (j->fd >= 0)
			close(j->fd);
		free(j->path);
		free(j);
		r->stats.seconds += wsn__now() - t0;
		return err;
	}
	j->end = offset + len;
	if (len) {
		j->next = j->offset - j->offset % j->align;
		j->aend = j->end + (j->align - j->end % j->align) % j->align;
	}
	/*
	 * Straight into a registered caller buffer: the aligned blocks inside the range, when the
	 * buffer's address has the file offset's alignment (so each block lands aligned).
	 */
	j->m0 = j->m1 = j->aend;
	if (len && (g = find_region(r, dst, len)) != NULL) {
		j->reg = *g;
		if ((uintptr_t)j->dst % j->align == j->offset % j->align) {
			uint64_t lo = j->offset + (j->align - j->offset % j->align) % j->align;
			uint64_t hi = j->end - j->end % j->align;

			if (hi > lo) {
				j->m0 = lo;
				j->m1 = hi;
			}
		}
	}
	j->id = ++r->next_id;
	if (r->jobs_tail)
		r->jobs_tail->link = j;
	else
		r->jobs = j;
	r->jobs_tail = j;
	r->njobs++;
	*id = j->id;
	fill(r);
	io_uring_submit(&r->ring); /* a refusal shows in wsn_reader_wait(), which submits again */
	r->stats.seconds += wsn__now() - t0;
	return 0;
}

/*
 * Wait for the read `id` queued by wsn_reader_submit(), keeping the ring full with the chunks of
 * the reads queued after it. Reads may be waited for in any order. Returns the read's result: 0,
 * WSN_ETRUNC (the file shrank), WSN_ETIMEDOUT (no read completed within 60 s), WSN_EIO, ..., or
 * WSN_EINVAL (no such read); the detail names the file.
 */
WSN_API int wsn_reader_wait(struct wsn_reader *r, uint64_t id)
{
	double t0 = wsn__now();
	struct job *j, **pp;
	int err;

	if (!r)
		return wsn__error(WSN_EINVAL, "read: no reader");
	if ((err = other_thread(r, "wait")) < 0)
		return err;
	for (pp = &r->jobs; *pp && (*pp)->id != id; pp = &(*pp)->link)
		;
	if (!(j = *pp))
		return wsn__error(WSN_EINVAL, "read: no queued read %llu", (unsigned long long)id);
	if (!r->broken)
		run_until_done(r, j);
	if (!job_done(j)) /* the reader broke with j's chunks in flight: keep j (and its fd) for destroy */
		return wsn__error(j->err ? j->err : WSN_EIO, "%s",
				  j->msg[0] ? j->msg : "the reader is unusable: an earlier read stalled");
	*pp = j->link;
	if (r->jobs_tail == j) {
		r->jobs_tail = NULL;
		for (struct job *k = r->jobs; k; k = k->link)
			r->jobs_tail = k;
	}
	r->njobs--;
	err = j->err;
	if (err)
		wsn__error(err, "%s", j->msg);
	else
		r->stats.bytes += j->end - j->offset;
	close(j->fd);
	free(j->path);
	free(j);
	r->stats.seconds += wsn__now() - t0;
	return err;
}

/*
 * Read [offset, offset + len) of path into dst with up to queue_depth reads in flight. Direct
 * reads cover the aligned superset of the range and copy the wanted bytes out. When dst lies in
 * a buffer registered with wsn_reader_register(), the blocks that can land there aligned are read
 * straight into it, and only the unaligned head and tail go through the bounce buffers; bytes
 * outside [dst, dst + len) are never written. Reads queued with wsn_reader_submit() before go
 * first. Returns 0, or WSN_EINVAL, WSN_ENOENT, WSN_EISDIR, WSN_ENOTSUP (direct I/O required but
 * refused), WSN_ETRUNC (the file ends before offset + len, or shrank while read), WSN_ETIMEDOUT (no
 * completion within 60 s), WSN_EIO, ...; the detail names the file, the offset and the sizes.
 */
WSN_API int wsn_reader_read(struct wsn_reader *r, const char *path, uint64_t offset, uint64_t len,
			    void *dst)
{
	uint64_t id;
	int err;

	if (!r || !path)
		return wsn__error(WSN_EINVAL, "read: no reader or no path");
	if ((err = wsn_reader_submit(r, path, offset, len, dst, &id)) < 0)
		return err;
	return wsn_reader_wait(r, id);
}
