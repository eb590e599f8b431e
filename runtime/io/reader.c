/* SPDX-License-Identifier: MIT */
/* runtime/io/reader.c: the io_uring reader's lifecycle: the ring and its own registered buffers, create and destroy, counters. */
#include "io/reader_internal.h"
#include "core/error.h"
#include "core/hostmem.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

int wsn__reader_other_thread(const struct wsn_reader *r, const char *what)
{
	if (r->single_issuer && !pthread_equal(r->owner, pthread_self()))
		return wsn__error(WSN_EINVAL, "reader: %s: used from a thread other than the one that created it "
				  "(ring mode %s)", what, r->mode);
	return 0;
}

/*
 * Create a reader (o NULL: defaults). A reader is used by one thread at a time, and with
 * SINGLE_ISSUER only by the thread that created it. Returns 0 and *out, or WSN_EINVAL (options
 * out of range), WSN_ENOMEM, or the io_uring_setup error (WSN_EPERM, WSN_ENOSYS, ...).
 */
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
