/* SPDX-License-Identifier: MIT */
/* runtime/io/reader_read.c: the reader's read path: queued reads, up to queue_depth chunks in flight, completions and short reads. */
#include "io/reader_internal.h"
#include "core/clock.h"
#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

	while (!wsn__reader_job_done(j)) {
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
	if ((err = wsn__reader_other_thread(r, path)) < 0)
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
	err = wsn__reader_open_file(r, j, &fi);
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
	if (len && (g = wsn__reader_find_region(r, dst, len)) != NULL) {
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
	if ((err = wsn__reader_other_thread(r, "wait")) < 0)
		return err;
	for (pp = &r->jobs; *pp && (*pp)->id != id; pp = &(*pp)->link)
		;
	if (!(j = *pp))
		return wsn__error(WSN_EINVAL, "read: no queued read %llu", (unsigned long long)id);
	if (!r->broken)
		run_until_done(r, j);
	if (!wsn__reader_job_done(j)) /* the reader broke with j's chunks in flight: keep j (and its fd) for destroy */
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
