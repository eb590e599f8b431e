/* SPDX-License-Identifier: MIT */
/* launcher/stages.c: the stage threads of one device: read, copies and kernel, write. */
#include "ring.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- stage: read ---- */

#define READ_AHEAD 2 /* batches whose reads are queued at once: the ring stays full between them */

/* A batch being read into its slot: the reads queued for it. */
struct pending {
	int64_t k;
	struct pl_slot *sl;
	struct pl_batch b;
	uint64_t ids[PL_NIN];
	int tensor[PL_NIN];         /* which input each read is */
	int nids;
	double t0, bytes;
	int err;
	char msg[PL_ERRLEN];
};

/*
 * Queue the reads of p's batch into its slot, each tensor landing aligned like its file offset
 * (straight into the registered slot). On failure p->err and p->msg are set; the reads queued so
 * far stay queued, to be waited for.
 */
static void batch_submit(struct pl_dev *d, struct wsn_reader *rd, struct pending *p)
{
	struct pl_dataset *ds = d->run->ds;
	const struct pl_shape *sh = &ds->shape;
	const struct pl_shard *shard = &ds->shards[p->b.shard];
	int err;

	for (int i = 0; i < PL_NIN; i++) {
		uint64_t off, n = pl_in_bytes(sh, i, p->b.rows);
		size_t es = i == PL_IN_MEAN || i == PL_IN_RSTD ? 4 : wsn_dtype_size(sh->dt);

		if (!sh->in[i])
			continue;
		off = shard->off[i] + (sh->in_row[i] ? (uint64_t)p->b.row0 * sh->in_unit[i] : 0);
		/* same offset modulo 4096 as the file: O_DIRECT blocks land aligned, straight in the slot */
		p->sl->shift[i] = off % es == 0 ? (size_t)(off % SLACK) : 0;
		if ((err = wsn_reader_submit(rd, shard->path, off, n, pl_host_in(d, p->sl, i), &p->ids[p->nids])) < 0) {
			pl_errf(p->msg, sizeof(p->msg), err, "run: cannot read tensor '%s' of '%s'", pl_in_names[i], shard->path);
			p->err = err;
			return;
		}
		p->tensor[p->nids++] = i;
		p->bytes += (double)n;
	}
}

/*
 * Is the file at sh->path still the one its header was read from (the same inode, size,
 * modification time and status-change time)? The status-change time catches a file written in
 * place whose modification time was then set back (futimens, touch -d), which the others miss.
 * Every batch opens the file again by its name, so a file replaced (renamed
 * over, as gen writes) or rewritten during a run would otherwise be read at the old header's
 * offsets and mixed into the results unnoticed: verification reads the same bytes.
 */
static int shard_unchanged(const struct pl_shard *sh, char *msg, size_t len)
{
	struct stat st;
	const char *what;

	if (stat(sh->path, &st) < 0)
		what = "it is gone";
	else if (st.st_dev != sh->id.st_dev || st.st_ino != sh->id.st_ino)
		what = "another file now has its name";
	else if (st.st_size != sh->id.st_size || st.st_mtim.tv_sec != sh->id.st_mtim.tv_sec ||
		 st.st_mtim.tv_nsec != sh->id.st_mtim.tv_nsec || st.st_ctim.tv_sec != sh->id.st_ctim.tv_sec ||
		 st.st_ctim.tv_nsec != sh->id.st_ctim.tv_nsec)
		what = "it was written to";
	else
		return 0;
	snprintf(msg, len, "run: input '%s' changed during the run (%s): the run stops rather than mix two files' "
		 "bytes in its results", sh->path, what);
	return WSN_EIO;
}

/* Wait for every read of p's batch; the first failure goes to p->err and p->msg. A batch read from a
 * file that is no longer the one opened fails too. */
static void batch_wait(struct pl_dev *d, struct wsn_reader *rd, struct pending *p)
{
	const struct pl_shard *shard = &d->run->ds->shards[p->b.shard];
	const char *path = shard->path;

	for (int i = 0; i < p->nids; i++) {
		int err = wsn_reader_wait(rd, p->ids[i]);

		if (err < 0 && !p->err) {
			pl_errf(p->msg, sizeof(p->msg), err, "run: cannot read tensor '%s' of '%s'", pl_in_names[p->tensor[i]],
			     path);
			p->err = err;
		}
	}
	if (p->nids && !p->err)
		p->err = shard_unchanged(shard, p->msg, sizeof(p->msg));
	p->nids = 0;
}

/*
 * The stage read alone: the first ring batches into the slots, queued at once as far as the reader
 * takes them (a batch is up to PL_NIN reads, the reader holds WSN_READER_MAX_QUEUED): past that, each
 * batch waits for the oldest to be in.
 */
static int read_alone(struct pl_dev *d, struct wsn_reader *rd)
{
	struct pl_batch b[PL_MAX_RING];
	struct pending *p = calloc(PL_MAX_RING, sizeof(*p));
	double t0, bytes = 0;
	int64_t rows = 0;
	int n = pl_first_batches(d->run->ds, rd, b, d->ring), err = 0, queued = 0, waited = 0, reads = 0;

	if (!p || n < 0) {
		free(p);
		return n < 0 ? n : WSN_ENOMEM;
	}
	t0 = cli_now();
	while (waited < queued || (queued < n && !err)) {
		if (queued < n && !err && reads + PL_NIN <= WSN_READER_MAX_QUEUED) {
			struct pending *q = &p[queued];

			q->sl = &d->slots[queued];
			q->b = d->slots[queued].b = b[queued];
			batch_submit(d, rd, q);
			reads += q->nids;
			err = q->err;
			queued++;
			continue;
		}
		reads -= p[waited].nids; /* before the wait, which clears them */
		batch_wait(d, rd, &p[waited]);
		if (p[waited].err && !err)
			err = p[waited].err;
		bytes += p[waited].bytes;
		rows += b[waited].rows;
		waited++;
	}
	t0 = cli_now() - t0;
	for (int i = 0; i < queued; i++)
		if (p[i].err) {
			pl_dataset_fail(d->run->ds, p[i].err, p[i].msg);
			break;
		}
	if (!err && t0 > 0) {
		d->res->st[ST_READ].alone_gbs = bytes / t0 / 1e9;
		d->res->st[ST_READ].alone_rows_s = (double)rows / t0;
	}
	free(p);
	return err;
}

static bool slot_free_now(struct pl_dev *d, int64_t k)
{
	bool free_;

	pthread_mutex_lock(&d->mu);
	free_ = !d->abort && d->slots[k % d->ring].state == SLOT_FREE;
	pthread_mutex_unlock(&d->mu);
	return free_;
}

/* A batch's reads are in: hand the slot to the device stages. */
static void batch_ready(struct pl_dev *d, struct pending *p)
{
	const struct pl_config *cfg = d->run->cfg;
	struct pl_devres *res = d->res;
	struct pl_slot *sl = p->sl;
	struct pl_stage *st = &res->st[ST_READ];
	double lat = cli_now() - p->t0;

	sl->b = p->b;
	sl->read_s = lat;
	sl->verify = pl_verifies(cfg) && p->b.seq % (uint64_t)cfg->verify_every == 0;
	sl->write = cfg->output && !cfg->read_only && p->b.pass == 0;
	sl->copy_out = !d->host && (sl->verify || sl->write);
	st->bytes += p->bytes;
	st->batches++;
	st->rows += p->b.rows;
	pl_hist_add(&st->lat, lat);
	atomic_fetch_add(&res->live_read_bytes, (long long)p->bytes);
	pthread_mutex_lock(&d->mu);
	sl->k = p->k;
	sl->state = SLOT_READ;
	d->nread = p->k + 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

/*
 * The reader: takes the next batch for the next slot, queues its reads, and keeps the next
 * batch's reads queued behind them when its slot is free too, so the io_uring queue stays full
 * from one batch into the next. Its busy time is the time spent queueing and waiting for reads
 * (not waiting for a free slot).
 */
void *pl_reader_main(void *arg)
{
	struct pl_dev *d = arg;
	struct pl_dataset *ds = d->run->ds;
	const struct pl_config *cfg = d->run->cfg;
	struct pl_devres *res = d->res;
	struct wsn_reader *rd = NULL;
	struct pending pend[READ_AHEAD];
	int ahead = d->ring < READ_AHEAD ? d->ring : READ_AHEAD, np = 0, more = 1, err;
	char msg[PL_ERRLEN];
	int64_t k_next = 0;
	double busy = 0;

	if ((err = wsn_reader_create(&cfg->rd, &rd)) < 0) {
		pl_errf(msg, sizeof(msg), err, "run: cannot set up the io_uring reader for %s", d->res->spec);
		pl_dev_fail(d, msg);
		more = 0;
	}
	for (int i = 0; more && i < d->ring; i++)
		wsn_reader_register(rd, d->slots[i].hin, d->hin_len); /* refused: reads bounce, still correct */
	if (more && cfg->standalone && read_alone(d, rd) < 0)
		more = 0;
	pthread_mutex_lock(&d->mu);
	d->reader_ready = 1;
	pthread_cond_broadcast(&d->cv);
	while (!d->reader_go && !d->abort)
		pthread_cond_wait(&d->cv, &d->mu);
	if (d->abort)
		more = 0;
	pthread_mutex_unlock(&d->mu);

	for (;;) {
		struct pending *p;
		double t;

		/* queue the next batches while their slots are free (wait for one only when idle) */
		while (more && np < ahead) {
			struct pl_batch b;
			int r;

			if (np == 0 && !pl_wait_slot(d, k_next, SLOT_FREE)) {
				more = 0; /* aborted */
				break;
			}
			if (np > 0 && !slot_free_now(d, k_next))
				break; /* busy: try again after the oldest batch is in */
			t = cli_now();
			if ((r = pl_next_batch(ds, rd, &b)) <= 0) {
				more = 0;
				break;
			}
			p = &pend[np++];
			memset(p, 0, sizeof(*p));
			p->k = k_next++;
			p->sl = &d->slots[p->k % d->ring];
			p->b = b;
			p->t0 = t;
			batch_submit(d, rd, p);
			busy += cli_now() - t;
			if (p->err)
				more = 0;
		}
		if (np == 0)
			break;
		p = &pend[0];
		t = cli_now();
		batch_wait(d, rd, p);
		busy += cli_now() - t;
		if (p->err) {
			pl_dataset_fail(ds, p->err, p->msg);
			for (int i = 1; i < np; i++) /* nothing may still be reading into a slot */
				batch_wait(d, rd, &pend[i]);
			break;
		}
		batch_ready(d, p);
		memmove(&pend[0], &pend[1], sizeof(pend[0]) * (size_t)(np - 1));
		np--;
		if (d->abort) {
			for (int i = 0; i < np; i++)
				batch_wait(d, rd, &pend[i]);
			break;
		}
	}
	res->st[ST_READ].busy += busy;
	pthread_mutex_lock(&d->mu);
	d->reader_done = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	if (rd) {
		wsn_reader_stats(rd, &res->rs);
		wsn_reader_buffer_stats(rd, &res->bs);
		snprintf(res->ring_mode, sizeof(res->ring_mode), "%s", wsn_reader_ring_mode(rd));
		d->reader_unusable = res->bs.unusable;
		wsn_reader_destroy(rd);
	}
	return NULL;
}

/* ---- stage: copies in, kernel, copies out (queued on the device's streams) ---- */

/*
 * Should a batch's remaining kernel loops be left out: the run was stopped (a signal, a failure)
 * or its --duration is over? Checked between launches, so a long --kernel-loops ends within one
 * launch (on a GPU, within the launches its driver queues) rather than after all of them.
 */
static bool loops_over(struct pl_dataset *ds)
{
	bool over;

	if (atomic_load(&ds->stop))
		return true;
	pthread_mutex_lock(&ds->lock);
	over = pl_past_deadline(ds);
	pthread_mutex_unlock(&ds->lock);
	return over;
}

/* Queue the batch's copies in, kernel launches and copies out (nothing in --read-only). */
static int submit_work(struct pl_dev *d, struct pl_slot *sl, void *ctx, char *msg, size_t len)
{
	const struct pl_config *cfg = d->run->cfg;
	const struct pl_shape *sh = &d->run->ds->shape;
	const char *what = "host-to-device copy";
	int64_t rows = sl->b.rows;
	struct wsn_args a;
	double t0;
	int err = 0;

	(void)ctx;
	if (cfg->read_only)
		return 0;
	if (!d->host) {
		if ((err = wsn_event_record(sl->ev[E_H2D0], d->cs)) < 0)
			goto fail;
		for (int i = 0; i < PL_NIN; i++)
			if (sh->in[i] && (err = wsn_memcpy(d->dev, pl_dev_in(d, sl, i), pl_host_in(d, sl, i),
							   pl_in_bytes(sh, i, rows), WSN_COPY_H2D, d->cs)) < 0)
				goto fail;
		if ((err = wsn_event_record(sl->ev[E_H2D1], d->cs)) < 0 ||
		    (err = wsn_stream_wait_event(d->ks, sl->ev[E_H2D1])) < 0)
			goto fail;
	}
	what = "poisoning the outputs";
	if (sl->verify) /* all-ones bits: NaN in f32, f16 and bf16, so an unwritten element fails */
		for (int i = 0; i < PL_NOUT; i++) {
			if (!sh->out[i])
				continue;
			if (d->host)
				memset(pl_dev_out(d, sl, i), 0xff, pl_out_bytes(sh, i, rows));
			else if ((err = wsn_mem_set(d->dev, pl_dev_out(d, sl, i), 0xff, pl_out_bytes(sh, i, rows), d->ks)) < 0)
				goto fail;
		}
	what = wsn_op_name(sh->op);
	pl_slot_args(d, sl, &a);
	if ((err = wsn_event_record(sl->ev[E_K0], d->ks)) < 0)
		goto fail;
	t0 = cli_now();
	/* the first launch always runs: the batch's outputs are then complete and can be verified */
	for (sl->loops = 0; sl->loops < cfg->kernel_loops; sl->loops++) {
		if (sl->loops > 0 && loops_over(d->run->ds))
			break;
		if (d->fault_armed) {
			d->fault_armed = 0;
			snprintf(msg, len, "run: %s on %s (%s), shard '%s': EDRIVER: injected fault (--inject-fault)",
				 what, d->res->spec, d->res->name, d->run->ds->shards[sl->b.shard].path);
			return WSN_EDRIVER;
		}
		if ((err = wsn_plan_execute(d->plan, &a, d->ks)) < 0)
			goto fail;
	}
	if ((err = wsn_event_record(sl->ev[E_K1], d->ks)) < 0)
		goto fail;
	if (cfg->inject_slow > 1) { /* a straggler on purpose: wait for the work, then as long again times F - 1 */
		struct timespec ts;
		double t;
		if ((err = wsn_stream_sync(d->dev, d->ks)) < 0)
			goto fail;
		t = (cli_now() - t0) * (cfg->inject_slow - 1);
		ts.tv_sec = (time_t)t;
		ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	what = "device-to-host copy";
	if (sl->copy_out) {
		if ((err = wsn_stream_wait_event(d->os, sl->ev[E_K1])) < 0 ||
		    (err = wsn_event_record(sl->ev[E_D2H0], d->os)) < 0)
			goto fail;
		for (int i = 0; i < PL_NOUT; i++)
			if (sh->out[i] && (err = wsn_memcpy(d->dev, sl->hout + d->out_off[i], pl_dev_out(d, sl, i),
							    pl_out_bytes(sh, i, rows), WSN_COPY_D2H, d->os)) < 0)
				goto fail;
		if ((err = wsn_event_record(sl->ev[E_D2H1], d->os)) < 0)
			goto fail;
	}
	return 0;
fail:
	pl_errf(msg, len, err, "run: %s on %s (%s), shard '%s' rows %lld..%lld", what, d->res->spec, d->res->name,
	     d->run->ds->shards[sl->b.shard].path, (long long)sl->b.row0, (long long)(sl->b.row0 + rows - 1));
	return err;
}

void *pl_submit_main(void *arg)
{
	pl_stage_loop(arg, SLOT_READ, submit_work, NULL, SLOT_SUBMITTED);
	return NULL;
}

/* Wait for the batch's device work and take its event times (nothing in --read-only). */
static int complete_work(struct pl_dev *d, struct pl_slot *sl, void *ctx, char *msg, size_t len)
{
	const struct pl_shape *sh = &d->run->ds->shape;
	struct pl_devres *res = d->res;
	int loops = sl->loops, err;
	int64_t rows = sl->b.rows;

	(void)ctx;
	if (d->run->cfg->read_only)
		return 0;
	if ((err = wsn_event_sync(sl->ev[sl->copy_out ? E_D2H1 : E_K1])) < 0)
		goto fail;
	memset(sl->ms, 0, sizeof(sl->ms));
	if ((!d->host && (err = wsn_event_elapsed(sl->ev[E_H2D0], sl->ev[E_H2D1], &sl->ms[0])) < 0) ||
	    (err = wsn_event_elapsed(sl->ev[E_K0], sl->ev[E_K1], &sl->ms[1])) < 0 ||
	    (sl->copy_out && (err = wsn_event_elapsed(sl->ev[E_D2H0], sl->ev[E_D2H1], &sl->ms[2])) < 0))
		goto fail;
	if (!d->host) {
		double b = 0;
		for (int i = 0; i < PL_NIN; i++)
			b += (double)pl_in_bytes(sh, i, rows);
		pl_stage_add(&res->st[ST_H2D], b, sl->ms[0] * 1e-3, rows);
	}
	{
		struct pl_stage *st = &res->st[ST_KERNEL];
		double per = (double)wsn_op_min_bytes(sh->op, rows, sh->hidden, sh->dt, sh->has_weight, sh->has_bias);
		double s = sl->ms[1] * 1e-3;

		st->bytes += per * loops;
		st->busy += s;
		st->batches++;
		st->rows += rows * loops;
		pl_hist_add_n(&st->lat, s / loops, (uint64_t)loops);
	}
	if (sl->copy_out) {
		double b = 0;
		for (int i = 0; i < PL_NOUT; i++)
			b += (double)pl_out_bytes(sh, i, rows);
		pl_stage_add(&res->st[ST_D2H], b, sl->ms[2] * 1e-3, rows);
	}
	if (d->run->cfg->inject_mismatch && sl->verify) {
		/* the first row is always sampled: make its first output element wrong */
		float bad = 1000.0f;
		wsn_dtype_convert(sl->hout + d->out_off[sh->out[PL_OUT_Y] ? PL_OUT_Y : PL_OUT_DX], sh->dt, &bad,
				  WSN_F32, 1);
	}
	return 0;
fail:
	pl_errf(msg, len, err, "run: waiting for %s on %s (%s)", wsn_op_name(sh->op), d->res->spec, d->res->name);
	return err;
}

void *pl_complete_main(void *arg)
{
	pl_stage_loop(arg, SLOT_SUBMITTED, complete_work, NULL, SLOT_DONE);
	return NULL;
}

/* ---- stage: output writes ---- */

/* ctx: the stage's writer, created at its first write. A failed write fails the dataset, not the device. */
static int write_work(struct pl_dev *d, struct pl_slot *sl, void *ctx, char *msg, size_t len)
{
	struct pl_writer **w = ctx;
	struct pl_dataset *ds = d->run->ds;
	const struct pl_shape *sh = &ds->shape;
	struct pl_devres *res = d->res;

	if (sl->write && !atomic_load(&ds->stop)) {
		void *host[PL_NOUT] = { 0 };
		double t0 = cli_now(), bytes = 0;

		for (int i = 0; i < PL_NOUT; i++)
			if (sh->out[i]) {
				host[i] = sl->hout + d->out_off[i];
				bytes += (double)pl_out_bytes(sh, i, sl->b.rows);
			}
		if ((!*w && pl_writer_create(w, msg, len) < 0) ||
		    pl_out_write_batch(ds, *w, &sl->b, host, msg, len) < 0) {
			pl_dataset_fail(ds, WSN_EIO, msg);
		} else {
			pl_stage_add(&res->st[ST_WRITE], bytes, cli_now() - t0, sl->b.rows);
		}
	}
	res->rows += sl->b.rows;
	res->batches++;
	if (!d->run->cfg->read_only)
		res->kernel_rows += sl->b.rows * sl->loops;
	atomic_fetch_add(&res->live_rows, (long long)sl->b.rows);
	return 0;
}

void *pl_write_main(void *arg)
{
	struct pl_writer *w = NULL;

	pl_stage_loop(arg, SLOT_VERIFIED, write_work, &w, SLOT_FREE);
	pl_writer_destroy(w);
	return NULL;
}

