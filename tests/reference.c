/* SPDX-License-Identifier: MIT */
/* tests/reference.c: the four ops in float64 with plain loops, for checking every backend against. */
#include "reference.h"
#include "compare.h" /* wsn__compare_*: the same measure as wsn_tensor_compare */

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int present(const struct wsn_tensor *t)
{
	return t && t->data;
}

static int host_ok(const struct wsn_tensor *t)
{
	return t->mem == WSN_MEM_HOST && t->ndim >= 1 && t->ndim <= WSN_MAX_DIMS && wsn_dtype_size(t->dtype);
}

int64_t ref_offset_of(const struct wsn_tensor *t, int64_t i)
{
	int64_t off = 0;

	for (int d = t->ndim - 1; d >= 0; d--) {
		off += (i % t->shape[d]) * t->stride[d];
		i /= t->shape[d];
	}
	return off;
}

static double get(const struct wsn_tensor *t, int64_t i)
{
	const char *base = t->data;
	size_t es = wsn_dtype_size(t->dtype);
	float f = 0.0f;

	wsn_dtype_convert(&f, WSN_F32, base + (size_t)ref_offset_of(t, i) * es, t->dtype, 1);
	return f;
}

double *ref_load(const struct wsn_tensor *t)
{
	int64_t n;
	double *v;

	if (!present(t) || !host_ok(t))
		return NULL;
	n = wsn_tensor_numel(t);
	if (!(v = malloc((size_t)(n ? n : 1) * sizeof(double))))
		return NULL;
	for (int64_t i = 0; i < n; i++)
		v[i] = get(t, i);
	return v;
}

int ref_store(const double *src, const struct wsn_tensor *dst)
{
	size_t es;
	int64_t n;

	if (!src || !present(dst) || !host_ok(dst))
		return WSN_EINVAL;
	es = wsn_dtype_size(dst->dtype);
	n = wsn_tensor_numel(dst);
	for (int64_t i = 0; i < n; i++) {
		float f = (float)src[i];

		wsn_dtype_convert((char *)dst->data + (size_t)ref_offset_of(dst, i) * es, dst->dtype, &f, WSN_F32, 1);
	}
	return 0;
}

int ref_compare(const struct wsn_tensor *got, const double *ref, struct wsn_compare *out)
{
	double sums[2];
	int64_t n;

	if (!ref || !out || !present(got) || !host_ok(got))
		return WSN_EINVAL;
	n = wsn_tensor_numel(got);
	wsn__compare_begin(out, sums);
	for (int64_t i = 0; i < n; i++)
		wsn__compare_add(out, sums, i, get(got, i), ref[i]);
	wsn__compare_end(out, sums, n);
	return 0;
}

/* The inputs of one op as dense doubles, rows x hidden. */
struct in {
	int64_t rows, hidden;
	double *x, *dy, *w, *b, *mean, *rstd;
};

static void in_free(struct in *in)
{
	free(in->x);
	free(in->dy);
	free(in->w);
	free(in->b);
	free(in->mean);
	free(in->rstd);
}

/* Check shapes and load every given tensor; x is required, the others are loaded when present. */
static int in_load(struct in *in, const struct wsn_tensor *x, const struct wsn_tensor *dy,
		   const struct wsn_tensor *w, const struct wsn_tensor *b, const struct wsn_tensor *mean,
		   const struct wsn_tensor *rstd)
{
	const struct wsn_tensor *all[] = { x, dy, w, b, mean, rstd };
	double **dst[] = { &in->x, &in->dy, &in->w, &in->b, &in->mean, &in->rstd };

	memset(in, 0, sizeof(*in));
	if (!present(x) || !host_ok(x))
		return WSN_EINVAL;
	in->hidden = x->shape[x->ndim - 1];
	in->rows = in->hidden ? wsn_tensor_numel(x) / in->hidden : 0;
	if (present(dy) && wsn_tensor_numel(dy) != in->rows * in->hidden)
		return WSN_ESHAPE;
	if ((present(w) && wsn_tensor_numel(w) != in->hidden) || (present(b) && wsn_tensor_numel(b) != in->hidden))
		return WSN_ESHAPE;
	if ((present(mean) && wsn_tensor_numel(mean) != in->rows) ||
	    (present(rstd) && wsn_tensor_numel(rstd) != in->rows))
		return WSN_ESHAPE;
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (!present(all[i]))
			continue;
		if (!host_ok(all[i])) {
			in_free(in);
			return WSN_EINVAL;
		}
		if (!(*dst[i] = ref_load(all[i]))) {
			in_free(in);
			return WSN_ENOMEM;
		}
	}
	return 0;
}

static double wj(const struct in *in, int64_t j)
{
	return in->w ? in->w[j] : 1.0;
}

/* Forward of both norms: LayerNorm when centered, RMSNorm otherwise. */
static int norm_fwd(int centered, const struct wsn_tensor *x, const struct wsn_tensor *weight,
		    const struct wsn_tensor *bias, double eps, double *y, double *mean, double *rstd)
{
	struct in in;
	int err = in_load(&in, x, NULL, weight, centered ? bias : NULL, NULL, NULL);

	if (err)
		return err;
	for (int64_t r = 0; r < in.rows; r++) {
		const double *xr = in.x + r * in.hidden;
		double mu = 0, var = 0, rs;

		if (centered) {
			for (int64_t j = 0; j < in.hidden; j++)
				mu += xr[j];
			mu /= (double)in.hidden;
		}
		for (int64_t j = 0; j < in.hidden; j++)
			var += (xr[j] - mu) * (xr[j] - mu);
		var /= (double)in.hidden;
		rs = 1.0 / sqrt(var + eps);
		for (int64_t j = 0; y && j < in.hidden; j++)
			y[r * in.hidden + j] = (xr[j] - mu) * rs * wj(&in, j) + (in.b ? in.b[j] : 0.0);
		if (mean)
			mean[r] = mu;
		if (rstd)
			rstd[r] = rs;
	}
	in_free(&in);
	return 0;
}

/* Backward of both norms: LayerNorm when centered (mean given), RMSNorm otherwise. */
static int norm_bwd(int centered, const struct wsn_tensor *dy, const struct wsn_tensor *x,
		    const struct wsn_tensor *weight, const struct wsn_tensor *mean, const struct wsn_tensor *rstd,
		    double *dx, double *dweight, double *dbias)
{
	struct in in;
	int err;

	if (!present(dy) || !present(rstd) || (centered && !present(mean)))
		return WSN_EINVAL;
	if ((err = in_load(&in, x, dy, weight, NULL, centered ? mean : NULL, rstd)))
		return err;
	for (int64_t j = 0; j < in.hidden; j++) {
		if (dweight)
			dweight[j] = 0;
		if (dbias)
			dbias[j] = 0;
	}
	for (int64_t r = 0; r < in.rows; r++) {
		const double *xr = in.x + r * in.hidden, *dyr = in.dy + r * in.hidden;
		double mu = centered ? in.mean[r] : 0.0, rs = in.rstd[r], sg = 0, sgx = 0;

		for (int64_t j = 0; j < in.hidden; j++) {
			double xh = (xr[j] - mu) * rs, g = dyr[j] * wj(&in, j);

			sg += g;
			sgx += g * xh;
		}
		sg = centered ? sg / (double)in.hidden : 0.0;
		sgx /= (double)in.hidden;
		for (int64_t j = 0; j < in.hidden; j++) {
			double xh = (xr[j] - mu) * rs, g = dyr[j] * wj(&in, j);

			if (dx)
				dx[r * in.hidden + j] = rs * (g - sg - xh * sgx);
			if (dweight)
				dweight[j] += dyr[j] * xh;
			if (dbias)
				dbias[j] += dyr[j];
		}
	}
	in_free(&in);
	return 0;
}

int ref_layernorm_fwd(const struct wsn_tensor *x, const struct wsn_tensor *weight,
		      const struct wsn_tensor *bias, double eps, double *y, double *mean, double *rstd)
{
	return norm_fwd(1, x, weight, bias, eps, y, mean, rstd);
}

int ref_rmsnorm_fwd(const struct wsn_tensor *x, const struct wsn_tensor *weight, double eps, double *y,
		    double *rstd)
{
	return norm_fwd(0, x, weight, NULL, eps, y, NULL, rstd);
}

int ref_layernorm_bwd(const struct wsn_tensor *dy, const struct wsn_tensor *x, const struct wsn_tensor *weight,
		      const struct wsn_tensor *mean, const struct wsn_tensor *rstd, double *dx, double *dweight,
		      double *dbias)
{
	return norm_bwd(1, dy, x, weight, mean, rstd, dx, dweight, dbias);
}

int ref_rmsnorm_bwd(const struct wsn_tensor *dy, const struct wsn_tensor *x, const struct wsn_tensor *weight,
		    const struct wsn_tensor *rstd, double *dx, double *dweight)
{
	return norm_bwd(0, dy, x, weight, NULL, rstd, dx, dweight, NULL);
}

void ref_out_free(struct ref_out *out)
{
	if (!out)
		return;
	free(out->y);
	free(out->dx);
	free(out->mean);
	free(out->rstd);
	free(out->dweight);
	free(out->dbias);
	memset(out, 0, sizeof(*out));
}

static double *alloc_out(int64_t n, int *failed)
{
	double *v = calloc((size_t)(n ? n : 1), sizeof(double));

	if (!v)
		*failed = 1;
	return v;
}

int ref_run(enum wsn_op op, const struct wsn_args *a, double eps, struct ref_out *out)
{
	int64_t rows, hidden;
	int failed = 0, err;

	if (!a || !out || !present(&a->x) || !host_ok(&a->x))
		return WSN_EINVAL;
	memset(out, 0, sizeof(*out));
	hidden = a->x.shape[a->x.ndim - 1];
	rows = hidden ? wsn_tensor_numel(&a->x) / hidden : 0;
	out->rows = rows;
	out->hidden = hidden;
	switch (op) {
	case WSN_LAYERNORM_FWD:
	case WSN_RMSNORM_FWD:
		out->y = alloc_out(rows * hidden, &failed);
		out->rstd = alloc_out(rows, &failed);
		if (op == WSN_LAYERNORM_FWD)
			out->mean = alloc_out(rows, &failed);
		break;
	case WSN_LAYERNORM_BWD:
	case WSN_RMSNORM_BWD:
		out->dx = alloc_out(rows * hidden, &failed);
		out->dweight = alloc_out(hidden, &failed);
		if (op == WSN_LAYERNORM_BWD)
			out->dbias = alloc_out(hidden, &failed);
		break;
	default:
		return WSN_EINVAL;
	}
	if (failed) {
		ref_out_free(out);
		return WSN_ENOMEM;
	}
	switch (op) {
	case WSN_LAYERNORM_FWD:
		err = ref_layernorm_fwd(&a->x, &a->weight, &a->bias, eps, out->y, out->mean, out->rstd);
		break;
	case WSN_RMSNORM_FWD:
		err = ref_rmsnorm_fwd(&a->x, &a->weight, eps, out->y, out->rstd);
		break;
	case WSN_LAYERNORM_BWD:
		err = ref_layernorm_bwd(&a->dy, &a->x, &a->weight, &a->mean, &a->rstd, out->dx, out->dweight,
					out->dbias);
		break;
	default:
		err = ref_rmsnorm_bwd(&a->dy, &a->x, &a->weight, &a->rstd, out->dx, out->dweight);
		break;
	}
	if (err)
		ref_out_free(out);
	return err;
}
