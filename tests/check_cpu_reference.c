/* SPDX-License-Identifier: MIT */
/* tests/check_cpu_reference.c: the float64 reference itself: values by hand, numeric gradients and its helpers. */
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

/* The reference on a case worked by hand: x = [1, 2, 3, 4], w = [1, 2, 1, 2], b = [0, 0, 1, 1]. */
START_TEST(test_reference_by_hand)
{
	float x[4] = { 1, 2, 3, 4 }, w[4] = { 1, 2, 1, 2 }, b[4] = { 0, 0, 1, 1 };
	double y[4], mean, rstd, rs = 1.0 / sqrt(1.25 + 1e-5), rrs = 1.0 / sqrt(7.5 + 1e-5);
	struct wsn_tensor tx, tw, tb;

	wsn_tensor_2d(&tx, x, WSN_F32, WSN_MEM_HOST, 1, 4);
	wsn_tensor_1d(&tw, w, WSN_F32, WSN_MEM_HOST, 4);
	wsn_tensor_1d(&tb, b, WSN_F32, WSN_MEM_HOST, 4);
	ck_assert_int_eq(ref_layernorm_fwd(&tx, &tw, &tb, 1e-5, y, &mean, &rstd), 0);
	ck_assert(fabs(mean - 2.5) < 1e-15 && fabs(rstd - rs) < 1e-15);
	ck_assert(fabs(y[0] - (-1.5 * rs)) < 1e-12 && fabs(y[1] - (-0.5 * rs * 2)) < 1e-12);
	ck_assert(fabs(y[2] - (0.5 * rs + 1)) < 1e-12 && fabs(y[3] - (1.5 * rs * 2 + 1)) < 1e-12);
	ck_assert_int_eq(ref_rmsnorm_fwd(&tx, NULL, 1e-5, y, &rstd), 0); /* mean square 30 / 4 */
	ck_assert(fabs(rstd - rrs) < 1e-15 && fabs(y[3] - 4 * rrs) < 1e-12);
	tw.shape[0] = 3;
	ck_assert_int_eq(ref_layernorm_fwd(&tx, &tw, &tb, 1e-5, y, &mean, &rstd), WSN_ESHAPE);
}
END_TEST

/* sum over rows and columns of dy * y, for finite differences */
static double loss(enum wsn_op fwd, const struct wsn_tensor *x, const struct wsn_tensor *w,
		   const struct wsn_tensor *b, const double *dy, double *y, int64_t n)
{
	double l = 0;

	if (fwd == WSN_LAYERNORM_FWD)
		ck_assert_int_eq(ref_layernorm_fwd(x, w, b, 1e-5, y, NULL, NULL), 0);
	else
		ck_assert_int_eq(ref_rmsnorm_fwd(x, w, 1e-5, y, NULL), 0);
	for (int64_t i = 0; i < n; i++)
		l += dy[i] * y[i];
	return l;
}

/* Central difference of loss() in one f32 element p, by a step that f32 holds exactly. */
static double numeric_grad(enum wsn_op fwd, float *p, const struct wsn_tensor *x, const struct wsn_tensor *w,
			   const struct wsn_tensor *b, const double *dy, double *y, int64_t n)
{
	const float h = 1.0f / 1024, keep = *p;
	double lp, lm;

	*p = keep + h;
	lp = loss(fwd, x, w, b, dy, y, n);
	*p = keep - h;
	lm = loss(fwd, x, w, b, dy, y, n);
	*p = keep;
	return (lp - lm) / (2.0 * h);
}

/* The reference's backward is the gradient of its forward (central differences), for both norms. */
START_TEST(test_reference_gradients)
{
	enum { R = 3, H = 5 };
	const enum wsn_op fwd = _i ? WSN_RMSNORM_FWD : WSN_LAYERNORM_FWD;
	float x[R * H], w[H], b[H], dyf[R * H], mean[R], rstd[R];
	double dy[R * H], y[R * H], dx[R * H], dw[H], db[H], mu[R], rs[R];
	struct wsn_tensor tx, tw, tb, tdy, tmean, trstd;

	/* values on a 1/8 grid, so that x +- 1/1024 is exact in f32 */
	for (int i = 0; i < R * H; i++) {
		x[i] = (float)((i * 37 % 23) - 11) / 8.0f;
		dyf[i] = (float)((i * 13 % 17) - 8) / 8.0f;
		dy[i] = dyf[i];
	}
	for (int j = 0; j < H; j++)
		w[j] = 1.0f + (float)(j % 3) / 4.0f, b[j] = (float)j / 8.0f;
	wsn_tensor_2d(&tx, x, WSN_F32, WSN_MEM_HOST, R, H);
	wsn_tensor_2d(&tdy, dyf, WSN_F32, WSN_MEM_HOST, R, H);
	wsn_tensor_1d(&tw, w, WSN_F32, WSN_MEM_HOST, H);
	wsn_tensor_1d(&tb, b, WSN_F32, WSN_MEM_HOST, H);
	wsn_tensor_1d(&tmean, mean, WSN_F32, WSN_MEM_HOST, R);
	wsn_tensor_1d(&trstd, rstd, WSN_F32, WSN_MEM_HOST, R);
	if (fwd == WSN_LAYERNORM_FWD) {
		ck_assert_int_eq(ref_layernorm_fwd(&tx, &tw, &tb, 1e-5, y, mu, rs), 0);
		ref_store(mu, &tmean);
		ref_store(rs, &trstd);
		ck_assert_int_eq(ref_layernorm_bwd(&tdy, &tx, &tw, &tmean, &trstd, dx, dw, db), 0);
	} else {
		ck_assert_int_eq(ref_rmsnorm_fwd(&tx, &tw, 1e-5, y, rs), 0);
		ref_store(rs, &trstd);
		ck_assert_int_eq(ref_rmsnorm_bwd(&tdy, &tx, &tw, &trstd, dx, dw), 0);
	}
	for (int i = 0; i < R * H; i++) {
		double g = numeric_grad(fwd, &x[i], &tx, &tw, &tb, dy, y, R * H);
		ck_assert_msg(fabs(g - dx[i]) < 1e-4 * (1 + fabs(g)), "%s dx[%d] %.9g, numeric %.9g",
			      wsn_op_name(fwd), i, dx[i], g);
	}
	for (int j = 0; j < H; j++) {
		double g = numeric_grad(fwd, &w[j], &tx, &tw, &tb, dy, y, R * H);
		ck_assert_msg(fabs(g - dw[j]) < 1e-4 * (1 + fabs(g)), "%s dweight[%d] %.9g, numeric %.9g",
			      wsn_op_name(fwd), j, dw[j], g);
		if (fwd == WSN_LAYERNORM_FWD) {
			g = numeric_grad(fwd, &b[j], &tx, &tw, &tb, dy, y, R * H);
			ck_assert_msg(fabs(g - db[j]) < 1e-4 * (1 + fabs(g)), "dbias[%d] %.9g, numeric %.9g", j, db[j], g);
		}
	}
}
END_TEST

/* ref_load/ref_store/ref_compare follow strides and dtypes, and count NaN as a failure. */
START_TEST(test_reference_helpers)
{
	uint16_t mem[2 * 5];
	double in[6] = { 1.0, -2.5, 3.25, 0.5, 1e-3, -7.0 }, *back;
	struct wsn_tensor t;
	struct wsn_compare c;

	memset(mem, 0, sizeof(mem));
	ck_assert_int_eq(wsn_tensor_2d(&t, mem, WSN_BF16, WSN_MEM_HOST, 2, 3), 0);
	t.stride[0] = 5;
	ck_assert_int_eq(ref_store(in, &t), 0);
	ck_assert_int_eq(mem[3] | mem[4] | mem[8] | mem[9], 0);
	back = ref_load(&t);
	ck_assert_ptr_nonnull(back);
	ck_assert(back[2] == 3.25 && back[5] == -7.0 && fabs(back[4] - 1e-3) < 1e-5);
	ck_assert_int_eq(ref_compare(&t, back, &c), 0);
	ck_assert(c.rel_l2 == 0.0 && c.count == 6 && c.nonfinite == 0);
	back[1] = -2.0;
	ck_assert_int_eq(ref_compare(&t, back, &c), 0);
	ck_assert_int_eq(c.worst, 1);
	ck_assert(c.rel_l2 > 0.05);
	ck_assert_int_eq(wsn_tensor_fill_nan(&t), 0);
	ck_assert_int_eq(ref_compare(&t, back, &c), 0);
	ck_assert(c.nonfinite == 6 && isinf(c.rel_l2));
	free(back);
}
END_TEST

Suite *suite_cpu_reference(void)
{
	return TU_SUITE("cpu", { "cpu", 120, NULL, NULL, TU_TESTS({ test_reference_by_hand, 1 }, { test_reference_gradients, 2 },
				{ test_reference_helpers, 1 }) });
}
