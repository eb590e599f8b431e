/* SPDX-License-Identifier: MIT */
/* tests/cpu_util.c: what the check_cpu_*.c tests share: buffers, tolerances and the reference run. */
#include "cpu/cpu.h"

#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cpu_util.h"

void cpu_buf_alloc(struct buf *b, enum wsn_dtype dt, size_t slots)
{
	b->slots = slots ? slots : 1;
	b->mem = tu_xmalloc(b->slots * wsn_dtype_size(dt));
	memset(b->mem, SENTINEL, b->slots * wsn_dtype_size(dt));
}

void cpu_buf_matrix(struct buf *b, enum wsn_dtype dt, int64_t rows, int64_t cols, int64_t ld)
{
	cpu_buf_alloc(b, dt, (size_t)(rows * ld));
	ck_assert_int_eq(wsn_tensor_2d(&b->t, b->mem, dt, WSN_MEM_HOST, rows, cols), 0);
	b->t.stride[0] = ld;
}

void cpu_buf_vector(struct buf *b, enum wsn_dtype dt, int64_t n)
{
	cpu_buf_alloc(b, dt, (size_t)n);
	ck_assert_int_eq(wsn_tensor_1d(&b->t, b->mem, dt, WSN_MEM_HOST, n), 0);
}

void cpu_buf_stats(struct buf *b, int64_t rows, int two_d, int64_t ld)
{
	if (two_d)
		cpu_buf_matrix(b, WSN_F32, rows, 1, ld);
	else {
		cpu_buf_alloc(b, WSN_F32, (size_t)(rows * ld));
		ck_assert_int_eq(wsn_tensor_1d(&b->t, b->mem, WSN_F32, WSN_MEM_HOST, rows), 0);
		b->t.stride[0] = ld;
	}
}

void cpu_buf_free(struct buf *b)
{
	free(b->mem);
	memset(b, 0, sizeof(*b));
}

void cpu_bwd_bufs(struct bwd_bufs *b, struct wsn_args *a, enum wsn_op op, enum wsn_dtype dt, int64_t rows,
		  int64_t hidden, int64_t ld)
{
	memset(b, 0, sizeof(*b));
	memset(a, 0, sizeof(*a));
	cpu_buf_matrix(&b->x, dt, rows, hidden, ld);
	cpu_buf_matrix(&b->dy, dt, rows, hidden, ld);
	cpu_buf_matrix(&b->dx, dt, rows, hidden, ld);
	cpu_buf_vector(&b->w, dt, hidden);
	cpu_buf_vector(&b->dw, dt, hidden);
	cpu_buf_stats(&b->rstd, rows, 0, 1);
	a->x = b->x.t, a->dy = b->dy.t, a->dx = b->dx.t, a->weight = b->w.t, a->dweight = b->dw.t, a->rstd = b->rstd.t;
	if (wsn_op_is_layernorm(op)) {
		cpu_buf_vector(&b->db, dt, hidden);
		cpu_buf_stats(&b->mean, rows, 0, 1);
		a->dbias = b->db.t, a->mean = b->mean.t;
	}
}

void cpu_bwd_bufs_free(struct bwd_bufs *b)
{
	cpu_buf_free(&b->x), cpu_buf_free(&b->dy), cpu_buf_free(&b->dx), cpu_buf_free(&b->w), cpu_buf_free(&b->dw);
	cpu_buf_free(&b->db), cpu_buf_free(&b->mean), cpu_buf_free(&b->rstd);
}

void cpu_store_fwd_stats(enum wsn_op op, const struct wsn_tensor *x, double eps, const struct wsn_tensor *mean,
			 const struct wsn_tensor *rstd)
{
	int64_t hidden = x->shape[x->ndim - 1], rows = hidden ? wsn_tensor_numel(x) / hidden : 0;
	double *mu = tu_xmalloc((size_t)rows * sizeof(double)), *rs = tu_xmalloc((size_t)rows * sizeof(double));

	if (wsn_op_is_layernorm(op)) {
		ck_assert_int_eq(ref_layernorm_fwd(x, NULL, NULL, eps, NULL, mu, rs), 0);
		ck_assert_int_eq(ref_store(mu, mean), 0);
	} else {
		ck_assert_int_eq(ref_rmsnorm_fwd(x, NULL, eps, NULL, rs), 0);
	}
	ck_assert_int_eq(ref_store(rs, rstd), 0);
	free(mu), free(rs);
}

double cpu_round_to(enum wsn_dtype dt, double v)
{
	float f = (float)v, back;
	uint16_t h;

	if (dt == WSN_F32)
		return f;
	wsn_dtype_convert(&h, dt, &f, WSN_F32, 1);
	wsn_dtype_convert(&back, WSN_F32, &h, dt, 1);
	return back;
}

void cpu_expect_close(const char *tag, const char *what, const struct wsn_tensor *got, const double *ref,
			 const double *scale, double tol)
{
	int64_t n = wsn_tensor_numel(got), bad = 0, first_bad = -1, worst = 0;
	double *g = ref_load(got), d2 = 0, r2 = 0, s2 = 0, maxd = 0, den, err;

	ck_assert_ptr_nonnull(g);
	for (int64_t i = 0; i < n; i++) {
		double r = got->dtype == WSN_F32 ? ref[i] : cpu_round_to(got->dtype, ref[i]), d;

		if (!isfinite(g[i])) {
			if (!bad++)
				first_bad = i;
			continue;
		}
		d = fabs(g[i] - r);
		d2 += d * d;
		r2 += r * r;
		if (scale)
			s2 += scale[i] * scale[i];
		if (d > maxd) {
			maxd = d;
			worst = i;
		}
	}
	free(g);
	ck_assert_msg(bad == 0, "%s: %s has %lld non-finite elements of %lld (first at %lld)", tag, what,
		      (long long)bad, (long long)n, (long long)first_bad);
	den = sqrt(r2 > s2 ? r2 : s2);
	err = den > 0 ? sqrt(d2) / den : sqrt(d2);
	ck_assert_msg(err <= tol, "%s: %s relative error %.3g > %.0e (max abs %.3g at element %lld of %lld)", tag,
		      what, err, tol, maxd, (long long)worst, (long long)n);
}

void cpu_execute(struct wsn_device *dev, enum wsn_op op, int64_t rows, int64_t hidden, enum wsn_dtype dt,
		 const struct wsn_plan_options *opts, const struct wsn_args *a)
{
	struct wsn_plan *plan;

	ck_assert_int_eq(wsn_plan_create(dev, op, rows, hidden, dt, opts, &plan), 0);
	ck_assert_msg(wsn_plan_execute(plan, a, NULL) == 0, "%s", wsn_last_error());
	wsn_plan_destroy(plan);
}
