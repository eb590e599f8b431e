/* SPDX-License-Identifier: MIT */
/* launcher/ring.c: one device's ring of slots: states, buffers and the kernel arguments over them. */
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

/* Record this device's first failure and stop its pipeline. */
void pl_dev_fail(struct pl_dev *d, const char *msg)
{
	pthread_mutex_lock(&d->mu);
	if (d->res->status != EXIT_RUNTIME) {
		d->res->status = EXIT_RUNTIME;
		wsn_text_escape(d->res->errmsg, sizeof(d->res->errmsg), msg);
	}
	d->abort = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

static void set_state(struct pl_dev *d, struct pl_slot *sl, int state)
{
	pthread_mutex_lock(&d->mu);
	sl->state = state;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

/* Wait until slot k%ring holds batch k in state `want`; false when the stage should end. */
bool pl_wait_slot(struct pl_dev *d, int64_t k, int want)
{
	struct pl_slot *sl = &d->slots[k % d->ring];
	bool ok = false;

	pthread_mutex_lock(&d->mu);
	for (;;) {
		if (d->abort)
			break;
		if (sl->state == want && (want == SLOT_FREE || sl->k == k)) {
			ok = true;
			break;
		}
		if (want != SLOT_FREE && d->reader_done && k >= d->nread)
			break;
		pthread_cond_wait(&d->cv, &d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	return ok;
}

void pl_stage_loop(struct pl_dev *d, int from, pl_stage_work *work, void *ctx, int to)
{
	char msg[PL_ERRLEN];

	for (int64_t k = 0;; k++) {
		struct pl_slot *sl = &d->slots[k % d->ring];

		if (!pl_wait_slot(d, k, from))
			break;
		if (work(d, sl, ctx, msg, sizeof(msg)) < 0) {
			pl_dev_fail(d, msg);
			break;
		}
		set_state(d, sl, to);
	}
}

unsigned char *pl_host_in(const struct pl_dev *d, const struct pl_slot *sl, int i)
{
	return sl->hin + d->in_off[i] + sl->shift[i];
}

/* The input and output pointers the kernel uses. */
void *pl_dev_in(const struct pl_dev *d, const struct pl_slot *sl, int i)
{
	return d->host ? pl_host_in(d, sl, i) : sl->din + d->din_off[i];
}

void *pl_dev_out(const struct pl_dev *d, const struct pl_slot *sl, int i)
{
	return (d->host ? sl->hout : sl->dout) + d->out_off[i];
}

/* The op's arguments over the given pointers. */
void pl_make_args(const struct pl_shape *sh, void *const in[PL_NIN], void *const out[PL_NOUT], int64_t rows,
		      enum wsn_mem mem, struct wsn_args *a)
{
	memset(a, 0, sizeof(*a));
	wsn_tensor_2d(&a->x, in[PL_IN_X], sh->dt, mem, rows, sh->hidden);
	if (sh->in[PL_IN_W])
		wsn_tensor_1d(&a->weight, in[PL_IN_W], sh->dt, mem, sh->hidden);
	if (sh->in[PL_IN_B])
		wsn_tensor_1d(&a->bias, in[PL_IN_B], sh->dt, mem, sh->hidden);
	if (wsn_op_is_backward(sh->op)) {
		wsn_tensor_2d(&a->dy, in[PL_IN_DY], sh->dt, mem, rows, sh->hidden);
		if (sh->in[PL_IN_MEAN])
			wsn_tensor_1d(&a->mean, in[PL_IN_MEAN], WSN_F32, mem, rows);
		wsn_tensor_1d(&a->rstd, in[PL_IN_RSTD], WSN_F32, mem, rows);
		wsn_tensor_2d(&a->dx, out[PL_OUT_DX], sh->dt, mem, rows, sh->hidden);
		if (sh->out[PL_OUT_DW])
			wsn_tensor_1d(&a->dweight, out[PL_OUT_DW], sh->dt, mem, sh->hidden);
		if (sh->out[PL_OUT_DB])
			wsn_tensor_1d(&a->dbias, out[PL_OUT_DB], sh->dt, mem, sh->hidden);
	} else {
		wsn_tensor_2d(&a->y, out[PL_OUT_Y], sh->dt, mem, rows, sh->hidden);
		if (sh->out[PL_OUT_MEAN])
			wsn_tensor_1d(&a->mean, out[PL_OUT_MEAN], WSN_F32, mem, rows);
		wsn_tensor_1d(&a->rstd, out[PL_OUT_RSTD], WSN_F32, mem, rows);
	}
}

void pl_slot_args(const struct pl_dev *d, const struct pl_slot *sl, struct wsn_args *a)
{
	const struct pl_shape *sh = &d->run->ds->shape;
	void *in[PL_NIN] = { 0 }, *out[PL_NOUT] = { 0 };

	for (int i = 0; i < PL_NIN; i++)
		if (sh->in[i])
			in[i] = pl_dev_in(d, sl, i);
	for (int i = 0; i < PL_NOUT; i++)
		if (sh->out[i])
			out[i] = pl_dev_out(d, sl, i);
	pl_make_args(sh, in, out, sl->b.rows, d->di.exec_mem, a);
}

void pl_stage_add(struct pl_stage *st, double bytes, double seconds, int64_t rows)
{
	st->bytes += bytes;
	st->busy += seconds;
	st->batches++;
	st->rows += rows;
	pl_hist_add(&st->lat, seconds);
}

/* v rounded up to a multiple of a, added to *total; false if either would not fit in a size_t. */
static bool add_rounded(size_t *total, size_t v, size_t a)
{
	size_t r;

	if (__builtin_add_overflow(v, a - 1, &r))
		return false;
	return !__builtin_add_overflow(*total, r / a * a, total);
}

/* Bytes of one tensor of a batch of rows (a per-row unit times rows, or the whole vector); false on overflow. */
static bool batch_bytes(size_t unit, bool per_row, int64_t rows, size_t extra, size_t *bytes)
{
	size_t n = unit;

	if (per_row && __builtin_mul_overflow(unit, (uint64_t)rows, &n))
		return false;
	return !__builtin_add_overflow(n, extra, bytes);
}

int pl_setup_slots(struct pl_dev *d, char *msg, size_t len)
{
	const struct pl_shape *sh = &d->run->ds->shape;
	int64_t br = d->run->cfg->batch_rows;
	const char *name = NULL;
	size_t unit = 0, bytes;
	int err = 0;

	d->hin_len = d->hout_len = d->din_len = 0;
	for (int i = 0; i < PL_NIN && !name; i++) {
		if (!sh->in[i])
			continue;
		d->in_off[i] = d->hin_len;
		d->din_off[i] = d->din_len;
		if (!batch_bytes(sh->in_unit[i], sh->in_row[i], br, SLACK, &bytes) ||
		    !add_rounded(&d->hin_len, bytes, SLACK) || !add_rounded(&d->din_len, bytes - SLACK, DEV_ALIGN))
			name = pl_in_names[i], unit = sh->in_unit[i];
	}
	for (int i = 0; i < PL_NOUT && !name; i++) {
		if (!sh->out[i])
			continue;
		d->out_off[i] = d->hout_len;
		if (!batch_bytes(sh->out_unit[i], sh->out_row[i], br, 0, &bytes) ||
		    !add_rounded(&d->hout_len, bytes, DEV_ALIGN))
			name = pl_out_names[i], unit = sh->out_unit[i];
	}
	if (name) {
		snprintf(msg, len, "run: --batch-rows %lld on %s: a batch's ring region (%lld rows of tensor '%s', %zu "
			 "bytes a row) does not fit in the address space: %s: %s", (long long)br, d->res->spec,
			 (long long)br, name, unit, wsn_err_name(WSN_EOVERFLOW), wsn_strerror(WSN_EOVERFLOW));
		return WSN_EOVERFLOW;
	}
	d->dout_len = d->hout_len;
	if (!(d->slots = calloc((size_t)d->ring, sizeof(*d->slots)))) {
		snprintf(msg, len, "run: %s: ENOMEM: out of memory", d->res->spec);
		return WSN_ENOMEM;
	}
	for (int s = 0; s < d->ring; s++) {
		struct pl_slot *sl = &d->slots[s];
		const char *what = "pinned host memory";
		size_t bytes = d->hin_len;

		sl->k = -1;
		if ((err = wsn_host_alloc(d->dev, d->hin_len, (void **)&sl->hin)) < 0)
			goto fail;
		bytes = d->hout_len;
		if ((err = wsn_host_alloc(d->dev, d->hout_len, (void **)&sl->hout)) < 0)
			goto fail;
		what = "device memory";
		if (!d->host) {
			bytes = d->din_len;
			if ((err = wsn_mem_alloc(d->dev, d->din_len, (void **)&sl->din)) < 0)
				goto fail;
			bytes = d->dout_len;
			if ((err = wsn_mem_alloc(d->dev, d->dout_len, (void **)&sl->dout)) < 0)
				goto fail;
		}
		what = "events";
		for (int e = 0; e < E_N; e++)
			if ((err = wsn_event_create(d->dev, &sl->ev[e])) < 0)
				goto fail;
		continue;
fail:
		pl_errf(msg, len, err, "run: cannot allocate %zu bytes of %s for ring slot %d of %d on %s", bytes, what,
		     s, d->ring, d->res->spec);
		return err;
	}
	return 0;
}

void pl_free_slots(struct pl_dev *d)
{
	for (int s = 0; d->slots && s < d->ring; s++) {
		struct pl_slot *sl = &d->slots[s];

		for (int e = 0; e < E_N; e++)
			wsn_event_destroy(sl->ev[e]);
		wsn_mem_free(d->dev, sl->din);
		wsn_mem_free(d->dev, sl->dout);
		/* after a stalled read the kernel may still write into the host regions: keep them */
		if (!d->reader_unusable) {
			if (sl->hin)
				wsn_host_free(d->dev, sl->hin);
			if (sl->hout)
				wsn_host_free(d->dev, sl->hout);
		}
	}
	free(d->slots);
	d->slots = NULL;
}

/* Repetitions for a step that took t seconds once, to last ALONE_SECONDS. */
