/* SPDX-License-Identifier: MIT */
/* runtime/io/reader_register.c: caller buffers registered with the reader's ring, so that reads go straight into them. */
#include "io/reader_internal.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

/* The registered caller buffer that holds all of [p, p + len), or NULL. */
const struct region *wsn__reader_find_region(const struct wsn_reader *r, const void *p, uint64_t len)
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
	if ((ret = wsn__reader_other_thread(r, "register")) < 0)
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
	if ((err = wsn__reader_other_thread(r, "unregister")) < 0)
		return err;
	for (unsigned i = 0; i < r->nregions; i++) {
		struct region *g = &r->regions[i];

		if (g->base != buf)
			continue;
		for (struct job *j = r->jobs; j; j = j->link)
			if (j->reg.base == g->base && !wsn__reader_job_done(j))
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
