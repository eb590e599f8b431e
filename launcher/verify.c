/* SPDX-License-Identifier: MIT */
/* launcher/verify.c: the verification stage: sampled rows checked against the CPU reference. */
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

/* ---- stage: verification against the CPU reference ---- */

double pl_tolerance(enum wsn_dtype dt)
{
	return dt == WSN_F32 ? 1e-5 : dt == WSN_F16 ? 5e-3 : 1e-2;
}

/* Fold one comparison into the device's worst verdicts; returns whether it passed. */
static int add_verdict(struct pl_devres *res, const char *name, const struct wsn_compare *c, double tol,
		       char *why, size_t len)
{
	struct pl_verdict *v = NULL;
	int pass = c->nonfinite == 0 && c->rel_l2 <= tol;

	for (int i = 0; i < res->nv; i++)
		if (!strcmp(res->v[i].name, name))
			v = &res->v[i];
	if (!v && res->nv < (int)(sizeof(res->v) / sizeof(res->v[0]))) {
		v = &res->v[res->nv++];
		memset(v, 0, sizeof(*v));
		v->name = name;
		v->pass = 1;
		v->tol = tol;
	}
	if (v) {
		if (c->rel_l2 > v->rel || isnan(c->rel_l2))
			v->rel = c->rel_l2;
		if (c->max_abs > v->max_abs || isnan(c->max_abs))
			v->max_abs = c->max_abs;
		v->nonfinite += c->nonfinite;
		v->pass = v->pass && pass;
	}
	if (!pass && !why[0])
		snprintf(why, len, "%s rel_l2 %.3g (tolerance %.0e), %lld finite/non-finite disagreements", name,
			 c->rel_l2, tol, (long long)c->nonfinite);
	return pass;
}

void pl_sample_rows(int64_t rows, int n, int64_t *idx)
{
	for (int i = 0; i < n; i++)
		idx[i] = n == 1 ? 0 : (int64_t)((double)i * (double)(rows - 1) / (double)(n - 1) + 0.5);
}

void pl_gather(void *dst, const void *src, const int64_t *idx, int n, size_t row_bytes)
{
	for (int i = 0; i < n; i++)
		memcpy((char *)dst + (size_t)i * row_bytes, (const char *)src + (size_t)idx[i] * row_bytes, row_bytes);
}

/*
 * Verify a batch: sampled rows of y/dx (and the stats) against the CPU reference computed on those
 * rows alone; dweight/dbias, which depend on every row of the batch, against the CPU reference over
 * all of them. Returns 0 (mismatches are counted, not errors) or a WSN_E* code with msg set.
 */
int pl_verify_batch(struct pl_dev *d, struct wsn_device *cpu, struct pl_slot *sl, char *msg, size_t len)
{
	const struct pl_shape *sh = &d->run->ds->shape;
	struct pl_devres *res = d->res;
	int64_t rows = sl->b.rows, vr = d->run->cfg->verify_rows;
	int n = (int)(vr < rows ? vr : rows), err = 0, pass = 1;
	struct wsn_plan *plan = NULL, *full = NULL;
	struct wsn_plan_options po;
	void *rin[PL_NIN] = { 0 }, *rout[PL_NOUT] = { 0 }, *got[PL_NOUT] = { 0 };
	void *fin[PL_NIN] = { 0 }, *fout[PL_NOUT] = { 0 };
	int64_t *idx = malloc(sizeof(*idx) * (size_t)n);
	char why[256] = "";
	struct wsn_args a;

	wsn_plan_options_init(&po, sh->op);
	po.eps = sh->eps;
	po.has_weight = sh->has_weight;
	po.has_bias = sh->has_bias;
	po.threads = d->run->cfg->threads;
	if (!idx)
		goto oom;
	pl_sample_rows(rows, n, idx);
	/* sampled rows: gather inputs, run the reference, gather the device's outputs */
	for (int i = 0; i < PL_NIN; i++) {
		if (!sh->in[i])
			continue;
		if (!sh->in_row[i]) {
			rin[i] = pl_host_in(d, sl, i);
			continue;
		}
		if (!(rin[i] = malloc(pl_in_bytes(sh, i, n))))
			goto oom;
		pl_gather(rin[i], pl_host_in(d, sl, i), idx, n, sh->in_unit[i]);
	}
	for (int i = 0; i < PL_NOUT; i++) {
		if (!sh->out[i] || !sh->out_row[i])
			continue;
		if (!(rout[i] = malloc(pl_out_bytes(sh, i, n))) || !(got[i] = malloc(pl_out_bytes(sh, i, n))))
			goto oom;
		pl_gather(got[i], sl->hout + d->out_off[i], idx, n, sh->out_unit[i]);
	}
	if ((err = wsn_plan_create(cpu, sh->op, n, sh->hidden, sh->dt, &po, &plan)) < 0) {
		pl_errf(msg, len, err, "run: verification plan");
		goto out;
	}
	pl_make_args(sh, rin, rout, n, WSN_MEM_HOST, &a);
	a.dweight.data = a.dbias.data = NULL; /* over sampled rows they mean nothing */
	if ((err = wsn_plan_execute(plan, &a, NULL)) < 0) {
		pl_errf(msg, len, err, "run: CPU reference");
		goto out;
	}
	for (int i = 0; i < PL_NOUT; i++) {
		struct wsn_tensor tg, tr;
		struct wsn_compare c;
		enum wsn_dtype dt = i == PL_OUT_MEAN || i == PL_OUT_RSTD ? WSN_F32 : sh->dt;

		if (!rout[i])
			continue;
		wsn_tensor_1d(&tg, got[i], dt, WSN_MEM_HOST, (int64_t)(pl_out_bytes(sh, i, n) / wsn_dtype_size(dt)));
		wsn_tensor_1d(&tr, rout[i], dt, WSN_MEM_HOST, (int64_t)(pl_out_bytes(sh, i, n) / wsn_dtype_size(dt)));
		wsn_tensor_compare(&tg, &tr, &c);
		pass &= add_verdict(res, pl_out_names[i], &c, pl_tolerance(dt), why, sizeof(why));
	}
	res->verified_rows += n;

	/* parameter gradients over every row of the batch */
	if (sh->out[PL_OUT_DW] || sh->out[PL_OUT_DB]) {
		if ((err = wsn_plan_create(cpu, sh->op, rows, sh->hidden, sh->dt, &po, &full)) < 0) {
			pl_errf(msg, len, err, "run: verification plan");
			goto out;
		}
		for (int i = 0; i < PL_NIN; i++)
			if (sh->in[i])
				fin[i] = pl_host_in(d, sl, i);
		for (int i = 0; i < PL_NOUT; i++)
			if (sh->out[i] && !(fout[i] = malloc(pl_out_bytes(sh, i, rows))))
				goto oom;
		pl_make_args(sh, fin, fout, rows, WSN_MEM_HOST, &a);
		if ((err = wsn_plan_execute(full, &a, NULL)) < 0) {
			pl_errf(msg, len, err, "run: CPU reference");
			goto out;
		}
		for (int i = PL_OUT_DW; i <= PL_OUT_DB; i++) {
			struct wsn_tensor tg, tr;
			struct wsn_compare c;

			if (!sh->out[i])
				continue;
			wsn_tensor_1d(&tg, sl->hout + d->out_off[i], sh->dt, WSN_MEM_HOST, sh->hidden);
			wsn_tensor_1d(&tr, fout[i], sh->dt, WSN_MEM_HOST, sh->hidden);
			wsn_tensor_compare(&tg, &tr, &c);
			pass &= add_verdict(res, pl_out_names[i], &c, pl_tolerance(sh->dt), why, sizeof(why));
		}
	}
	res->verified_batches++;
	if (!pass) {
		res->mismatched_batches++;
		if (!res->first_mismatch[0])
			snprintf(res->first_mismatch, sizeof(res->first_mismatch), "batch %llu (shard '%.300s' rows %lld..%lld): %s",
				 (unsigned long long)sl->b.seq, d->run->ds->shards[sl->b.shard].path,
				 (long long)sl->b.row0, (long long)(sl->b.row0 + rows - 1), why);
	}
	goto out;
oom:
	err = WSN_ENOMEM;
	snprintf(msg, len, "run: verification on %s: ENOMEM: out of memory", d->res->spec);
out:
	for (int i = 0; i < PL_NIN; i++)
		if (sh->in_row[i])
			free(rin[i]);
	for (int i = 0; i < PL_NOUT; i++) {
		free(rout[i]);
		free(got[i]);
		free(fout[i]);
	}
	free(idx);
	wsn_plan_destroy(plan);
	wsn_plan_destroy(full);
	return err;
}

/* The CPU device the reference runs on, opened on first use. */
int pl_verify_cpu(struct pl_dev *d, struct wsn_device **cpu, char *msg, size_t len)
{
	int err;

	if (*cpu)
		return 0;
	if ((err = wsn_device_open("cpu", cpu)) < 0 ||
	    (d->run->cfg->threads > 0 && (err = wsn_device_set_threads(*cpu, d->run->cfg->threads)) < 0)) {
		pl_errf(msg, len, err, "run: cannot open the CPU for verification");
		wsn_device_close(*cpu);
		*cpu = NULL;
		return err;
	}
	return 0;
}

/* ctx: the CPU reference device, opened at the first verified batch. */
static int verify_work(struct pl_dev *d, struct pl_slot *sl, void *ctx, char *msg, size_t len)
{
	struct wsn_device **cpu = ctx;
	double t0;

	if (!sl->verify || atomic_load(&d->run->ds->stop))
		return 0;
	t0 = cli_now();
	if (pl_verify_cpu(d, cpu, msg, len) < 0 || pl_verify_batch(d, *cpu, sl, msg, len) < 0)
		return -1;
	pl_stage_add(&d->res->st[ST_VERIFY], 0, cli_now() - t0, sl->b.rows);
	return 0;
}

void *pl_verify_main(void *arg)
{
	struct wsn_device *cpu = NULL;

	pl_stage_loop(arg, SLOT_DONE, verify_work, &cpu, SLOT_VERIFIED);
	wsn_device_close(cpu);
	return NULL;
}

