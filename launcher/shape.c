/* SPDX-License-Identifier: MIT */
/* launcher/shape.c: what an op reads and writes (tensor names and bytes), and latency histograms. */
#include "pipeline.h"

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

const char *const pl_in_names[PL_NIN] = { "x", "dy", "weight", "bias", "mean", "rstd" };
const char *const pl_out_names[PL_NOUT] = { "y", "dx", "dweight", "dbias", "mean", "rstd" };
const char *const pl_stage_names[ST_N] = { "read", "h2d", "compute", "d2h", "verify", "write" };

/* ---- shapes ---- */

void pl_shape_init(struct pl_shape *sh, enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int has_weight,
		   int has_bias, float eps)
{
	size_t es = wsn_dtype_size(dt), vec = (size_t)hidden * es;
	int bwd = wsn_op_is_backward(op), ln = wsn_op_is_layernorm(op);

	memset(sh, 0, sizeof(*sh));
	sh->op = op;
	sh->dt = dt;
	sh->hidden = hidden;
	sh->has_weight = has_weight;
	sh->has_bias = has_bias && ln;
	sh->eps = eps;
	sh->in[PL_IN_X] = true;
	sh->in[PL_IN_DY] = bwd;
	sh->in[PL_IN_W] = has_weight;
	sh->in[PL_IN_B] = sh->has_bias;
	sh->in[PL_IN_MEAN] = bwd && ln;
	sh->in[PL_IN_RSTD] = bwd;
	sh->out[PL_OUT_Y] = !bwd;
	sh->out[PL_OUT_DX] = bwd;
	sh->out[PL_OUT_DW] = bwd && has_weight;
	sh->out[PL_OUT_DB] = bwd && sh->has_bias;
	sh->out[PL_OUT_MEAN] = !bwd && ln;
	sh->out[PL_OUT_RSTD] = !bwd;
	for (int i = 0; i < PL_NIN; i++) {
		sh->in_row[i] = i != PL_IN_W && i != PL_IN_B;
		sh->in_unit[i] = i == PL_IN_MEAN || i == PL_IN_RSTD ? 4 : vec;
	}
	for (int i = 0; i < PL_NOUT; i++) {
		sh->out_row[i] = i != PL_OUT_DW && i != PL_OUT_DB;
		sh->out_unit[i] = i == PL_OUT_MEAN || i == PL_OUT_RSTD ? 4 : vec;
	}
}

size_t pl_in_bytes(const struct pl_shape *sh, int i, int64_t rows)
{
	return !sh->in[i] ? 0 : sh->in_row[i] ? (size_t)rows * sh->in_unit[i] : sh->in_unit[i];
}

size_t pl_out_bytes(const struct pl_shape *sh, int i, int64_t rows)
{
	return !sh->out[i] ? 0 : sh->out_row[i] ? (size_t)rows * sh->out_unit[i] : sh->out_unit[i];
}

/* ---- latency histograms ---- */

void pl_hist_add_n(struct pl_hist *h, double s, uint64_t n)
{
	int b = !(s > 0) ? 0 : !(s < 1e4) ? PL_HIST_BUCKETS - 1 :
		(int)floor((log10(s) - PL_HIST_MIN_LOG10) * PL_HIST_PER_DECADE);

	if (b < 0)
		b = 0;
	if (b >= PL_HIST_BUCKETS)
		b = PL_HIST_BUCKETS - 1;
	h->b[b] += n;
	h->n += n;
}

void pl_hist_add(struct pl_hist *h, double s)
{
	pl_hist_add_n(h, s, 1);
}

void pl_hist_merge(struct pl_hist *into, const struct pl_hist *h)
{
	for (int i = 0; i < PL_HIST_BUCKETS; i++)
		into->b[i] += h->b[i];
	into->n += h->n;
}

double pl_hist_quantile(const struct pl_hist *h, double q)
{
	uint64_t want, seen = 0;

	if (!h->n)
		return 0;
	want = (uint64_t)ceil(q * (double)h->n);
	if (want < 1)
		want = 1;
	for (int i = 0; i < PL_HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen >= want) /* the bucket's geometric middle: within 1.2 % of any value in it */
			return pow(10.0, PL_HIST_MIN_LOG10 + (i + 0.5) / PL_HIST_PER_DECADE);
	}
	return 0;
}

