/* SPDX-License-Identifier: MIT */
/* tests/check_cpu_ops.c: the CPU backend's ops against the float64 reference for every op, dtype and odd shape. */
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

/* Nothing but the tensor's own elements was written: the rest of the buffer still holds SENTINEL. */
static void expect_untouched(const char *tag, const char *what, const struct buf *b)
{
	size_t es = wsn_dtype_size(b->t.dtype);
	int64_t n = wsn_tensor_numel(&b->t);
	char *mine = calloc(b->slots, 1);
	const unsigned char *bytes = b->mem;

	ck_assert_ptr_nonnull(mine);
	for (int64_t i = 0; i < n; i++)
		mine[ref_offset_of(&b->t, i)] = 1;
	for (size_t s = 0; s < b->slots; s++)
		for (size_t k = 0; !mine[s] && k < es; k++)
			ck_assert_msg(bytes[s * es + k] == SENTINEL, "%s: %s: padding element %zu was written", tag,
				      what, s);
	free(mine);
}

/* One way of calling an op: affine parameters, stats layout, row strides, optional outputs. */
struct variant {
	const char *name;
	int weight, bias;  /* plan has_weight / has_bias */
	int threads;       /* plan option (0: the device's) */
	int stats_2d;      /* mean/rstd as [rows, 1] rather than [rows] */
	int64_t stats_ld;  /* elements between rows of mean/rstd */
	int64_t pad;       /* row stride of x, dy, y, dx is hidden + pad */
	int fwd_mean, fwd_rstd; /* forward: mean and rstd outputs present */
	int grads;         /* backward: 2 dweight and dbias, 1 dweight only, 0 neither */
};

static const struct variant variants[] = {
	{ "affine, [rows] stats 2 apart", 1, 1, 0, 0, 2, 0, 1, 1, 2 },
	{ "weight only, [rows,1] stats, rows 5 apart, 3 threads, no fwd mean", 1, 0, 3, 1, 1, 5, 0, 1, 1 },
	{ "no weight or bias, [rows] stats, rows 3 apart, no fwd stats, no grads", 0, 0, 0, 0, 1, 3, 0, 0, 0 },
};

static const int64_t hiddens[] = { 1, 3, 1000, 4097 };

static const int64_t row_counts[] = { 1, 7, 70 };

#define MAX_ROWS 70

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/*
 * With hidden <= 3 an output element, or a whole short row of them, can be a near-total
 * cancellation by chance (a LayerNorm row whose values nearly agree: x - mean; dx, which is g
 * minus its projections; a dweight that is a sum of a few random-sign terms), and for RMSNorm
 * with hidden 1 dx = rstd * g * eps / (x^2 + eps) always is. For those outputs the checks bound
 * the error by the size of the terms that cancel, computed here (the caller frees them).
 */
static double *y_scale(const struct wsn_args *a, const struct ref_out *ref, int64_t rows, int64_t hidden)
{
	double *x = ref_load(&a->x), *w = ref_load(&a->weight), *b = ref_load(&a->bias), *s;

	ck_assert(x && ref->mean && ref->rstd);
	s = tu_xmalloc((size_t)(rows * hidden) * sizeof(double));
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < hidden; j++)
			s[r * hidden + j] = (fabs(x[r * hidden + j]) + fabs(ref->mean[r])) * ref->rstd[r] *
						    (w ? fabs(w[j]) : 1.0) + (b ? fabs(b[j]) : 0.0);
	free(x), free(w), free(b);
	return s;
}

static double *dx_scale(const struct wsn_args *a, int64_t rows, int64_t hidden)
{
	double *dy = ref_load(&a->dy), *w = ref_load(&a->weight), *rs = ref_load(&a->rstd), *s;

	ck_assert(dy && rs);
	s = tu_xmalloc((size_t)(rows * hidden) * sizeof(double));
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < hidden; j++)
			s[r * hidden + j] = rs[r] * dy[r * hidden + j] * (w ? w[j] : 1.0);
	free(dy), free(w), free(rs);
	return s;
}

static double *grad_scale(const struct wsn_args *a, int64_t rows, int64_t hidden, int bias, int centered)
{
	double *dy = ref_load(&a->dy), *x = ref_load(&a->x), *mu = centered ? ref_load(&a->mean) : NULL;
	double *rs = ref_load(&a->rstd), *s = tu_xmalloc((size_t)hidden * sizeof(double));

	ck_assert(dy && x && rs && (mu || !centered));
	for (int64_t j = 0; j < hidden; j++) {
		double q = 0;

		for (int64_t r = 0; r < rows; r++) {
			double xh = (x[r * hidden + j] - (mu ? mu[r] : 0.0)) * rs[r];
			double t = dy[r * hidden + j] * (bias ? 1.0 : xh);
			q += t * t;
		}
		s[j] = sqrt(q);
	}
	free(dy), free(x), free(mu), free(rs);
	return s;
}

/* One op on one shape, checked against the reference. */
static void run_case(struct wsn_plan *plan, enum wsn_op op, enum wsn_dtype dt, int64_t rows, int64_t hidden,
		     const struct variant *v, uint64_t seed)
{
	const int bwd = wsn_op_is_backward(op), ln = wsn_op_is_layernorm(op);
	const int64_t ld = hidden + v->pad;
	const double tol = dt == WSN_F32 ? TOL_F32 : TOL_HALF;
	const double eps = (double)WSN_DEFAULT_EPS;
	struct buf x = { 0 }, dy = { 0 }, w = { 0 }, b = { 0 }, y = { 0 }, dx = { 0 };
	struct buf dw = { 0 }, db = { 0 }, mean = { 0 }, rstd = { 0 };
	struct wsn_args a;
	struct ref_out ref;
	char tag[200];
	int rc;

	snprintf(tag, sizeof(tag), "%s %s rows=%lld hidden=%lld (%s)", wsn_op_name(op), wsn_dtype_name(dt),
		 (long long)rows, (long long)hidden, v->name);
	memset(&a, 0, sizeof(a));
	cpu_buf_matrix(&x, dt, rows, hidden, ld);
	ck_assert_int_eq(wsn_tensor_fill_random(&x.t, seed + 1, 0.5f, 2.0f), 0);
	a.x = x.t;
	if (v->weight) {
		cpu_buf_vector(&w, dt, hidden);
		ck_assert_int_eq(wsn_tensor_fill_random(&w.t, seed + 2, 1.0f, 0.5f), 0);
		a.weight = w.t;
	}
	if (!bwd) {
		if (ln && v->bias) {
			cpu_buf_vector(&b, dt, hidden);
			ck_assert_int_eq(wsn_tensor_fill_random(&b.t, seed + 3, 0.0f, 0.5f), 0);
			a.bias = b.t;
		}
		cpu_buf_matrix(&y, dt, rows, hidden, ld);
		ck_assert_int_eq(wsn_tensor_fill_nan(&y.t), 0);
		a.y = y.t;
		if (ln && v->fwd_mean) {
			cpu_buf_stats(&mean, rows, v->stats_2d, v->stats_ld);
			ck_assert_int_eq(wsn_tensor_fill_nan(&mean.t), 0);
			a.mean = mean.t;
		}
		if (v->fwd_rstd) {
			cpu_buf_stats(&rstd, rows, v->stats_2d, v->stats_ld);
			ck_assert_int_eq(wsn_tensor_fill_nan(&rstd.t), 0);
			a.rstd = rstd.t;
		}
	} else {
		cpu_buf_matrix(&dy, dt, rows, hidden, ld);
		ck_assert_int_eq(wsn_tensor_fill_random(&dy.t, seed + 4, 0.0f, 1.0f), 0);
		a.dy = dy.t;
		/* the saved statistics a forward pass would hand over, in f32 */
		cpu_buf_stats(&rstd, rows, v->stats_2d, v->stats_ld);
		a.rstd = rstd.t;
		if (ln) {
			cpu_buf_stats(&mean, rows, v->stats_2d, v->stats_ld);
			a.mean = mean.t;
		}
		cpu_store_fwd_stats(op, &x.t, eps, ln ? &mean.t : NULL, &rstd.t);
		cpu_buf_matrix(&dx, dt, rows, hidden, ld);
		ck_assert_int_eq(wsn_tensor_fill_nan(&dx.t), 0);
		a.dx = dx.t;
		if (v->grads >= 1) {
			cpu_buf_vector(&dw, dt, hidden);
			ck_assert_int_eq(wsn_tensor_fill_nan(&dw.t), 0);
			a.dweight = dw.t;
		}
		if (v->grads >= 2 && ln) {
			cpu_buf_vector(&db, dt, hidden);
			ck_assert_int_eq(wsn_tensor_fill_nan(&db.t), 0);
			a.dbias = db.t;
		}
	}

	rc = wsn_plan_execute(plan, &a, NULL);
	ck_assert_msg(rc == 0, "%s: execute returned %s: %s", tag, wsn_err_name(rc), wsn_last_error());
	ck_assert_int_eq(ref_run(op, &a, eps, &ref), 0);

	if (!bwd) {
		double *s = ln && hidden <= 3 ? y_scale(&a, &ref, rows, hidden) : NULL;

		cpu_expect_close(tag, "y", &y.t, ref.y, s, tol);
		expect_untouched(tag, "y", &y);
		free(s);
		if (mean.mem) {
			/* hidden <= 3: a mean near zero is the cancellation of its terms, |x| / hidden */
			s = NULL;
			if (hidden <= 3) {
				double *xv = ref_load(&x.t);

				s = tu_xmalloc((size_t)rows * sizeof(double));
				for (int64_t r = 0; r < rows; r++) {
					s[r] = 0;
					for (int64_t j = 0; j < hidden; j++)
						s[r] += fabs(xv[r * hidden + j]) / (double)hidden;
				}
				free(xv);
			}
			cpu_expect_close(tag, "mean", &mean.t, ref.mean, s, TOL_F32);
			expect_untouched(tag, "mean", &mean);
			free(s);
		}
		if (rstd.mem) {
			cpu_expect_close(tag, "rstd", &rstd.t, ref.rstd, NULL, TOL_F32);
			expect_untouched(tag, "rstd", &rstd);
		}
	} else {
		double *s = hidden <= 3 ? dx_scale(&a, rows, hidden) : NULL;

		cpu_expect_close(tag, "dx", &dx.t, ref.dx, s, tol);
		expect_untouched(tag, "dx", &dx);
		free(s);
		if (dw.mem) {
			s = hidden <= 3 ? grad_scale(&a, rows, hidden, 0, ln) : NULL;
			cpu_expect_close(tag, "dweight", &dw.t, ref.dweight, s, tol);
			free(s);
		}
		if (db.mem) {
			s = hidden <= 3 ? grad_scale(&a, rows, hidden, 1, ln) : NULL;
			cpu_expect_close(tag, "dbias", &db.t, ref.dbias, s, tol);
			free(s);
		}
	}
	ref_out_free(&ref);
	cpu_buf_free(&x), cpu_buf_free(&dy), cpu_buf_free(&w), cpu_buf_free(&b), cpu_buf_free(&y), cpu_buf_free(&dx);
	cpu_buf_free(&dw), cpu_buf_free(&db), cpu_buf_free(&mean), cpu_buf_free(&rstd);
}

/* Every op x dtype (one loop iteration each) x hidden {1, 3, 1000, 4097} x variant x rows {1, 7, 70}. */
START_TEST(test_ops_against_reference)
{
	enum wsn_op op = (enum wsn_op)(_i / WSN_DTYPE_COUNT);
	enum wsn_dtype dt = (enum wsn_dtype)(_i % WSN_DTYPE_COUNT);
	struct wsn_device *dev;
	char name[64];
	uint64_t seed;
	int cases = 0;

	snprintf(name, sizeof(name), "cpu %s %s", wsn_op_name(op), wsn_dtype_name(dt));
	seed = tu_case_seed(name);
	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	for (size_t h = 0; h < WSN_ARRAY_SIZE(hiddens); h++) {
		for (size_t vi = 0; vi < WSN_ARRAY_SIZE(variants); vi++) {
			const struct variant *v = &variants[vi];
			struct wsn_plan_options o;
			struct wsn_plan *plan;
			int rc;

			wsn_plan_options_init(&o, op);
			o.has_weight = v->weight;
			o.has_bias = v->bias && wsn_op_is_layernorm(op);
			o.threads = v->threads;
			rc = wsn_plan_create(dev, op, MAX_ROWS, hiddens[h], dt, &o, &plan);
			ck_assert_msg(rc == 0, "%s hidden %lld: plan: %s", name, (long long)hiddens[h], wsn_last_error());
			/* the plan is made for the most rows and run on fewer too */
			for (size_t r = 0; r < WSN_ARRAY_SIZE(row_counts); r++, cases++)
				run_case(plan, op, dt, row_counts[r], hiddens[h], v,
					 mix(seed ^ mix((uint64_t)hiddens[h] << 16 ^ vi << 8 ^ r)));
			wsn_plan_destroy(plan);
		}
	}
	wsn_device_close(dev);
	ck_assert_int_eq(cases, 36);
}
END_TEST

/* Leading dimensions flatten into rows: x, y as [2, 5, 33], dy, dx as [5, 2, 33]. */
START_TEST(test_leading_dims)
{
	const int64_t shape[3] = { 2, 5, 33 }, shape2[3] = { 5, 2, 33 };
	uint64_t seed = tu_case_seed("cpu leading dims");
	float x[330], y[330], dy[330], dx[330], w[33], rs[10];
	struct wsn_device *dev;
	struct wsn_args a;
	struct ref_out ref;

	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	memset(&a, 0, sizeof(a));
	wsn_tensor_init(&a.x, x, WSN_F32, WSN_MEM_HOST, 3, shape);
	wsn_tensor_init(&a.y, y, WSN_F32, WSN_MEM_HOST, 3, shape);
	wsn_tensor_1d(&a.weight, w, WSN_F32, WSN_MEM_HOST, 33);
	wsn_tensor_1d(&a.rstd, rs, WSN_F32, WSN_MEM_HOST, 10);
	wsn_tensor_fill_random(&a.x, seed, 0.0f, 1.0f);
	wsn_tensor_fill_random(&a.weight, seed + 1, 1.0f, 0.3f);
	wsn_tensor_fill_nan(&a.y);
	wsn_tensor_fill_nan(&a.rstd);
	cpu_execute(dev, WSN_RMSNORM_FWD, 10, 33, WSN_F32, NULL, &a);
	ck_assert_int_eq(ref_run(WSN_RMSNORM_FWD, &a, WSN_DEFAULT_EPS, &ref), 0);
	cpu_expect_close("rmsnorm-fwd [2,5,33]", "y", &a.y, ref.y, NULL, TOL_F32);
	cpu_expect_close("rmsnorm-fwd [2,5,33]", "rstd", &a.rstd, ref.rstd, NULL, TOL_F32);
	ref_out_free(&ref);

	a.y.data = NULL;
	wsn_tensor_init(&a.dy, dy, WSN_F32, WSN_MEM_HOST, 3, shape2);
	wsn_tensor_init(&a.dx, dx, WSN_F32, WSN_MEM_HOST, 3, shape2);
	wsn_tensor_fill_random(&a.dy, seed + 2, 0.0f, 1.0f);
	wsn_tensor_fill_nan(&a.dx);
	cpu_execute(dev, WSN_RMSNORM_BWD, 10, 33, WSN_F32, NULL, &a);
	ck_assert_int_eq(ref_run(WSN_RMSNORM_BWD, &a, WSN_DEFAULT_EPS, &ref), 0);
	cpu_expect_close("rmsnorm-bwd [5,2,33]", "dx", &a.dx, ref.dx, NULL, TOL_F32);
	ref_out_free(&ref);
	wsn_device_close(dev);
}
END_TEST

/*
 * dweight and dbias summed over 300000 rows stay within 1e-6 of float64: a plain f32 running sum
 * over the rows would be off by several times that.
 */
START_TEST(test_many_rows_reduction)
{
	const int64_t rows = 300000, hidden = 4;
	uint64_t seed = tu_case_seed("cpu many rows");
	struct bwd_bufs bufs;
	struct wsn_device *dev;
	struct wsn_args a;
	struct ref_out ref;

	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	cpu_bwd_bufs(&bufs, &a, WSN_LAYERNORM_BWD, WSN_F32, rows, hidden, hidden);
	wsn_tensor_fill_random(&bufs.x.t, seed, 0.0f, 1.0f);
	/* dy with a mean, so that the running sums grow large against each term */
	wsn_tensor_fill_random(&bufs.dy.t, seed + 1, 1.0f, 1.0f);
	wsn_tensor_fill_random(&bufs.w.t, seed + 2, 1.0f, 0.5f);
	cpu_store_fwd_stats(WSN_LAYERNORM_BWD, &bufs.x.t, WSN_DEFAULT_EPS, &bufs.mean.t, &bufs.rstd.t);
	wsn_tensor_fill_nan(&bufs.dw.t);
	wsn_tensor_fill_nan(&bufs.db.t);
	cpu_execute(dev, WSN_LAYERNORM_BWD, rows, hidden, WSN_F32, NULL, &a);
	ck_assert_int_eq(ref_run(WSN_LAYERNORM_BWD, &a, WSN_DEFAULT_EPS, &ref), 0);
	cpu_expect_close("layernorm-bwd 300000 rows", "dweight", &bufs.dw.t, ref.dweight, NULL, TOL_F32);
	cpu_expect_close("layernorm-bwd 300000 rows", "dbias", &bufs.db.t, ref.dbias, NULL, TOL_F32);
	cpu_expect_close("layernorm-bwd 300000 rows", "dx", &bufs.dx.t, ref.dx, NULL, TOL_F32);
	ref_out_free(&ref);
	wsn_device_close(dev);
	cpu_bwd_bufs_free(&bufs);
}
END_TEST

/*
 * Rows of 1000 + N(0, 1): the variance is four orders of magnitude below the mean square. Two
 * passes keep y within the f32 rounding of the mean (~1e-4 of a unit); E[x^2] - E[x]^2 in f32
 * would be off by about 6%.
 */
START_TEST(test_variance_with_large_mean)
{
	const int64_t rows = 16, hidden = 1000;
	uint64_t seed = tu_case_seed("cpu large mean");
	struct buf x = { 0 }, y = { 0 }, rstd = { 0 };
	struct wsn_device *dev;
	struct wsn_plan_options o;
	struct wsn_args a;
	struct ref_out ref;

	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	memset(&a, 0, sizeof(a));
	cpu_buf_matrix(&x, WSN_F32, rows, hidden, hidden);
	cpu_buf_matrix(&y, WSN_F32, rows, hidden, hidden);
	cpu_buf_stats(&rstd, rows, 0, 1);
	wsn_tensor_fill_random(&x.t, seed, 1000.0f, 1.0f);
	wsn_tensor_fill_nan(&y.t);
	a.x = x.t, a.y = y.t, a.rstd = rstd.t;
	wsn_plan_options_init(&o, WSN_LAYERNORM_FWD);
	o.has_weight = o.has_bias = 0;
	cpu_execute(dev, WSN_LAYERNORM_FWD, rows, hidden, WSN_F32, &o, &a);
	ck_assert_int_eq(ref_run(WSN_LAYERNORM_FWD, &a, WSN_DEFAULT_EPS, &ref), 0);
	cpu_expect_close("layernorm-fwd mean 1000", "rstd", &rstd.t, ref.rstd, NULL, 1e-3);
	cpu_expect_close("layernorm-fwd mean 1000", "y", &y.t, ref.y, NULL, 1e-3);
	ref_out_free(&ref);
	wsn_device_close(dev);
	cpu_buf_free(&x), cpu_buf_free(&y), cpu_buf_free(&rstd);
}
END_TEST

/*
 * f16 and bf16 inputs are widened exactly and computed in f32 like f32 inputs, so their outputs
 * are bit for bit the f32 outputs rounded to nearest even (and mean/rstd are identical).
 */
START_TEST(test_half_is_f32_rounded)
{
	static const enum wsn_dtype halves[] = { WSN_F16, WSN_BF16 };
	const enum wsn_op op = (enum wsn_op)_i;
	const int64_t rows = 40, hidden = 300, n = rows * hidden;
	const int bwd = wsn_op_is_backward(op), ln = wsn_op_is_layernorm(op);
	uint64_t seed;
	struct wsn_device *dev;
	char name[64];

	snprintf(name, sizeof(name), "cpu rounding %s", wsn_op_name(op));
	seed = tu_case_seed(name);
	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	for (size_t hi = 0; hi < WSN_ARRAY_SIZE(halves); hi++) {
		const enum wsn_dtype dts[2] = { halves[hi], WSN_F32 };
		struct buf in[2][4], out[2][3], st[2][2]; /* x dy w b; y-or-dx dweight dbias; mean rstd */
		double *mu = tu_xmalloc(rows * sizeof(double)), *rs = tu_xmalloc(rows * sizeof(double));
		struct wsn_args a[2];
		size_t es = wsn_dtype_size(dts[0]);

		memset(in, 0, sizeof(in)), memset(out, 0, sizeof(out)), memset(st, 0, sizeof(st));
		for (int k = 0; k < 2; k++) {
			struct wsn_plan *plan;

			memset(&a[k], 0, sizeof(a[k]));
			cpu_buf_matrix(&in[k][0], dts[k], rows, hidden, hidden);
			cpu_buf_matrix(&in[k][1], dts[k], rows, hidden, hidden);
			cpu_buf_vector(&in[k][2], dts[k], hidden);
			cpu_buf_vector(&in[k][3], dts[k], hidden);
			cpu_buf_matrix(&out[k][0], dts[k], rows, hidden, hidden);
			cpu_buf_vector(&out[k][1], dts[k], hidden);
			cpu_buf_vector(&out[k][2], dts[k], hidden);
			cpu_buf_stats(&st[k][0], rows, 0, 1);
			cpu_buf_stats(&st[k][1], rows, 0, 1);
			if (k == 0) {
				wsn_tensor_fill_random(&in[0][0].t, seed, 0.5f, 2.0f);
				wsn_tensor_fill_random(&in[0][1].t, seed + 1, 0.0f, 1.0f);
				wsn_tensor_fill_random(&in[0][2].t, seed + 2, 1.0f, 0.5f);
				wsn_tensor_fill_random(&in[0][3].t, seed + 3, 0.0f, 0.5f);
			} else { /* the same values, widened */
				ck_assert_int_eq(wsn_dtype_convert(in[1][0].mem, WSN_F32, in[0][0].mem, dts[0], (size_t)n), 0);
				ck_assert_int_eq(wsn_dtype_convert(in[1][1].mem, WSN_F32, in[0][1].mem, dts[0], (size_t)n), 0);
				ck_assert_int_eq(wsn_dtype_convert(in[1][2].mem, WSN_F32, in[0][2].mem, dts[0], (size_t)hidden), 0);
				ck_assert_int_eq(wsn_dtype_convert(in[1][3].mem, WSN_F32, in[0][3].mem, dts[0], (size_t)hidden), 0);
			}
			a[k].x = in[k][0].t, a[k].weight = in[k][2].t, a[k].rstd = st[k][1].t;
			if (ln)
				a[k].mean = st[k][0].t;
			if (bwd) {
				a[k].dy = in[k][1].t, a[k].dx = out[k][0].t, a[k].dweight = out[k][1].t;
				if (ln) {
					a[k].dbias = out[k][2].t;
					ck_assert_int_eq(ref_layernorm_fwd(&in[0][0].t, NULL, NULL, WSN_DEFAULT_EPS, NULL, mu, rs), 0);
					ref_store(mu, &st[k][0].t);
				} else {
					ck_assert_int_eq(ref_rmsnorm_fwd(&in[0][0].t, NULL, WSN_DEFAULT_EPS, NULL, rs), 0);
				}
				ref_store(rs, &st[k][1].t);
			} else {
				a[k].y = out[k][0].t;
				if (ln)
					a[k].bias = in[k][3].t;
			}
			ck_assert_int_eq(wsn_plan_create(dev, op, rows, hidden, dts[k], NULL, &plan), 0);
			ck_assert_msg(wsn_plan_execute(plan, &a[k], NULL) == 0, "%s", wsn_last_error());
			wsn_plan_destroy(plan);
		}
		for (int o = 0; o < (bwd ? (ln ? 3 : 2) : 1); o++) {
			static const char *const names[] = { "y or dx", "dweight", "dbias" };
			int64_t m = o ? hidden : n;
			void *rounded = tu_xmalloc((size_t)m * es);

			ck_assert_int_eq(wsn_dtype_convert(rounded, dts[0], out[1][o].mem, WSN_F32, (size_t)m), 0);
			ck_assert_msg(!memcmp(rounded, out[0][o].mem, (size_t)m * es),
				      "%s %s: %s is not the f32 result rounded to nearest even", name,
				      wsn_dtype_name(dts[0]), names[o]);
			free(rounded);
		}
		if (!bwd) {
			ck_assert_msg(!memcmp(st[0][1].mem, st[1][1].mem, (size_t)rows * sizeof(float)),
				      "%s %s: rstd differs from f32 inputs", name, wsn_dtype_name(dts[0]));
			ck_assert(!ln || !memcmp(st[0][0].mem, st[1][0].mem, (size_t)rows * sizeof(float)));
		}
		for (int k = 0; k < 2; k++) {
			for (int i = 0; i < 4; i++)
				cpu_buf_free(&in[k][i]);
			for (int i = 0; i < 3; i++)
				cpu_buf_free(&out[k][i]);
			cpu_buf_free(&st[k][0]), cpu_buf_free(&st[k][1]);
		}
		free(mu), free(rs);
	}
	wsn_device_close(dev);
}
END_TEST

Suite *suite_cpu_ops(void)
{
	return TU_SUITE("cpu", { "cpu", 120, NULL, NULL, TU_TESTS({ test_ops_against_reference, WSN_OP_COUNT * WSN_DTYPE_COUNT },
				{ test_leading_dims, 1 }, { test_many_rows_reduction, 1 }, { test_variance_with_large_mean, 1 },
				{ test_half_is_f32_rounded, WSN_OP_COUNT }) });
}
