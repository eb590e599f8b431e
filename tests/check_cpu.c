/* SPDX-License-Identifier: MIT */
/* tests/check_cpu.c: the CPU backend against the float64 reference (every op, dtype and odd shape), its determinism, and its ops table. */
#include "cpu/cpu.h"

#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* Byte that fills every buffer before a run: padding between rows must still hold it afterwards. */
#define SENTINEL 0x5a
#define TOL_F32 1e-6
#define TOL_HALF 1e-2

/* A host tensor and the buffer under it. */
struct buf {
	struct wsn_tensor t;
	void *mem;
	size_t slots; /* elements the buffer holds, padding included */
};

static void buf_alloc(struct buf *b, enum wsn_dtype dt, size_t slots)
{
	b->slots = slots ? slots : 1;
	b->mem = tu_xmalloc(b->slots * wsn_dtype_size(dt));
	memset(b->mem, SENTINEL, b->slots * wsn_dtype_size(dt));
}

/* [rows, cols] with row stride ld >= cols. */
static void buf_matrix(struct buf *b, enum wsn_dtype dt, int64_t rows, int64_t cols, int64_t ld)
{
	buf_alloc(b, dt, (size_t)(rows * ld));
	ck_assert_int_eq(wsn_tensor_2d(&b->t, b->mem, dt, WSN_MEM_HOST, rows, cols), 0);
	b->t.stride[0] = ld;
}

static void buf_vector(struct buf *b, enum wsn_dtype dt, int64_t n)
{
	buf_alloc(b, dt, (size_t)n);
	ck_assert_int_eq(wsn_tensor_1d(&b->t, b->mem, dt, WSN_MEM_HOST, n), 0);
}

/* mean/rstd: f32 [rows] or [rows, 1], ld elements apart. */
static void buf_stats(struct buf *b, int64_t rows, int two_d, int64_t ld)
{
	if (two_d)
		buf_matrix(b, WSN_F32, rows, 1, ld);
	else {
		buf_alloc(b, WSN_F32, (size_t)(rows * ld));
		ck_assert_int_eq(wsn_tensor_1d(&b->t, b->mem, WSN_F32, WSN_MEM_HOST, rows), 0);
		b->t.stride[0] = ld;
	}
}

static void buf_free(struct buf *b)
{
	free(b->mem);
	memset(b, 0, sizeof(*b));
}

static int64_t offset_of(const struct wsn_tensor *t, int64_t i)
{
	int64_t off = 0;

	for (int d = t->ndim - 1; d >= 0; d--) {
		off += (i % t->shape[d]) * t->stride[d];
		i /= t->shape[d];
	}
	return off;
}

/* Nothing but the tensor's own elements was written: the rest of the buffer still holds SENTINEL. */
static void expect_untouched(const char *tag, const char *what, const struct buf *b)
{
	size_t es = wsn_dtype_size(b->t.dtype);
	int64_t n = wsn_tensor_numel(&b->t);
	char *mine = calloc(b->slots, 1);
	const unsigned char *bytes = b->mem;

	ck_assert_ptr_nonnull(mine);
	for (int64_t i = 0; i < n; i++)
		mine[offset_of(&b->t, i)] = 1;
	for (size_t s = 0; s < b->slots; s++)
		for (size_t k = 0; !mine[s] && k < es; k++)
			ck_assert_msg(bytes[s * es + k] == SENTINEL, "%s: %s: padding element %zu was written", tag,
				      what, s);
	free(mine);
}

/* v rounded to dt and back, as an output of dtype dt holds it. */
static double round_to(enum wsn_dtype dt, double v)
{
	float f = (float)v, back;
	uint16_t h;

	if (dt == WSN_F32)
		return f;
	wsn_dtype_convert(&h, dt, &f, WSN_F32, 1);
	wsn_dtype_convert(&back, WSN_F32, &h, dt, 1);
	return back;
}

/*
 * got against the float64 reference: ||got - ref|| <= tol * ||ref||, and no element of got may
 * be NaN or Inf (outputs were poisoned with NaN, so an unwritten one fails here). f16 and bf16
 * outputs are compared with the reference rounded to their dtype (not f32 ones: there the double
 * reference itself is the target). scale, when given, is the size of the terms that cancel into
 * each element; the bound is then tol * max(||ref||, ||scale||): f32 arithmetic cannot promise a
 * small error relative to a result that is a near-total cancellation, only relative to the terms.
 */
static void expect_close(const char *tag, const char *what, const struct wsn_tensor *got, const double *ref,
			 const double *scale, double tol)
{
	int64_t n = wsn_tensor_numel(got), bad = 0, first_bad = -1, worst = 0;
	double *g = ref_load(got), d2 = 0, r2 = 0, s2 = 0, maxd = 0, den, err;

	ck_assert_ptr_nonnull(g);
	for (int64_t i = 0; i < n; i++) {
		double r = got->dtype == WSN_F32 ? ref[i] : round_to(got->dtype, ref[i]), d;

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
	buf_matrix(&x, dt, rows, hidden, ld);
	ck_assert_int_eq(wsn_tensor_fill_random(&x.t, seed + 1, 0.5f, 2.0f), 0);
	a.x = x.t;
	if (v->weight) {
		buf_vector(&w, dt, hidden);
		ck_assert_int_eq(wsn_tensor_fill_random(&w.t, seed + 2, 1.0f, 0.5f), 0);
		a.weight = w.t;
	}
	if (!bwd) {
		if (ln && v->bias) {
			buf_vector(&b, dt, hidden);
			ck_assert_int_eq(wsn_tensor_fill_random(&b.t, seed + 3, 0.0f, 0.5f), 0);
			a.bias = b.t;
		}
		buf_matrix(&y, dt, rows, hidden, ld);
		ck_assert_int_eq(wsn_tensor_fill_nan(&y.t), 0);
		a.y = y.t;
		if (ln && v->fwd_mean) {
			buf_stats(&mean, rows, v->stats_2d, v->stats_ld);
			ck_assert_int_eq(wsn_tensor_fill_nan(&mean.t), 0);
			a.mean = mean.t;
		}
		if (v->fwd_rstd) {
			buf_stats(&rstd, rows, v->stats_2d, v->stats_ld);
			ck_assert_int_eq(wsn_tensor_fill_nan(&rstd.t), 0);
			a.rstd = rstd.t;
		}
	} else {
		double *mu = tu_xmalloc((size_t)rows * sizeof(double)), *rs = tu_xmalloc((size_t)rows * sizeof(double));

		buf_matrix(&dy, dt, rows, hidden, ld);
		ck_assert_int_eq(wsn_tensor_fill_random(&dy.t, seed + 4, 0.0f, 1.0f), 0);
		a.dy = dy.t;
		/* the saved statistics a forward pass would hand over, in f32 */
		buf_stats(&rstd, rows, v->stats_2d, v->stats_ld);
		a.rstd = rstd.t;
		if (ln) {
			buf_stats(&mean, rows, v->stats_2d, v->stats_ld);
			a.mean = mean.t;
			ck_assert_int_eq(ref_layernorm_fwd(&x.t, NULL, NULL, eps, NULL, mu, rs), 0);
			ck_assert_int_eq(ref_store(mu, &mean.t), 0);
		} else {
			ck_assert_int_eq(ref_rmsnorm_fwd(&x.t, NULL, eps, NULL, rs), 0);
		}
		ck_assert_int_eq(ref_store(rs, &rstd.t), 0);
		free(mu), free(rs);
		buf_matrix(&dx, dt, rows, hidden, ld);
		ck_assert_int_eq(wsn_tensor_fill_nan(&dx.t), 0);
		a.dx = dx.t;
		if (v->grads >= 1) {
			buf_vector(&dw, dt, hidden);
			ck_assert_int_eq(wsn_tensor_fill_nan(&dw.t), 0);
			a.dweight = dw.t;
		}
		if (v->grads >= 2 && ln) {
			buf_vector(&db, dt, hidden);
			ck_assert_int_eq(wsn_tensor_fill_nan(&db.t), 0);
			a.dbias = db.t;
		}
	}

	rc = wsn_plan_execute(plan, &a, NULL);
	ck_assert_msg(rc == 0, "%s: execute returned %s: %s", tag, wsn_err_name(rc), wsn_last_error());
	ck_assert_int_eq(ref_run(op, &a, eps, &ref), 0);

	if (!bwd) {
		double *s = ln && hidden <= 3 ? y_scale(&a, &ref, rows, hidden) : NULL;

		expect_close(tag, "y", &y.t, ref.y, s, tol);
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
			expect_close(tag, "mean", &mean.t, ref.mean, s, TOL_F32);
			expect_untouched(tag, "mean", &mean);
			free(s);
		}
		if (rstd.mem) {
			expect_close(tag, "rstd", &rstd.t, ref.rstd, NULL, TOL_F32);
			expect_untouched(tag, "rstd", &rstd);
		}
	} else {
		double *s = hidden <= 3 ? dx_scale(&a, rows, hidden) : NULL;

		expect_close(tag, "dx", &dx.t, ref.dx, s, tol);
		expect_untouched(tag, "dx", &dx);
		free(s);
		if (dw.mem) {
			s = hidden <= 3 ? grad_scale(&a, rows, hidden, 0, ln) : NULL;
			expect_close(tag, "dweight", &dw.t, ref.dweight, s, tol);
			free(s);
		}
		if (db.mem) {
			s = hidden <= 3 ? grad_scale(&a, rows, hidden, 1, ln) : NULL;
			expect_close(tag, "dbias", &db.t, ref.dbias, s, tol);
			free(s);
		}
	}
	ref_out_free(&ref);
	buf_free(&x), buf_free(&dy), buf_free(&w), buf_free(&b), buf_free(&y), buf_free(&dx);
	buf_free(&dw), buf_free(&db), buf_free(&mean), buf_free(&rstd);
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
	struct wsn_plan *plan;
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
	ck_assert_int_eq(wsn_plan_create(dev, WSN_RMSNORM_FWD, 10, 33, WSN_F32, NULL, &plan), 0);
	ck_assert_msg(wsn_plan_execute(plan, &a, NULL) == 0, "%s", wsn_last_error());
	wsn_plan_destroy(plan);
	ck_assert_int_eq(ref_run(WSN_RMSNORM_FWD, &a, WSN_DEFAULT_EPS, &ref), 0);
	expect_close("rmsnorm-fwd [2,5,33]", "y", &a.y, ref.y, NULL, TOL_F32);
	expect_close("rmsnorm-fwd [2,5,33]", "rstd", &a.rstd, ref.rstd, NULL, TOL_F32);
	ref_out_free(&ref);

	a.y.data = NULL;
	wsn_tensor_init(&a.dy, dy, WSN_F32, WSN_MEM_HOST, 3, shape2);
	wsn_tensor_init(&a.dx, dx, WSN_F32, WSN_MEM_HOST, 3, shape2);
	wsn_tensor_fill_random(&a.dy, seed + 2, 0.0f, 1.0f);
	wsn_tensor_fill_nan(&a.dx);
	ck_assert_int_eq(wsn_plan_create(dev, WSN_RMSNORM_BWD, 10, 33, WSN_F32, NULL, &plan), 0);
	ck_assert_msg(wsn_plan_execute(plan, &a, NULL) == 0, "%s", wsn_last_error());
	wsn_plan_destroy(plan);
	ck_assert_int_eq(ref_run(WSN_RMSNORM_BWD, &a, WSN_DEFAULT_EPS, &ref), 0);
	expect_close("rmsnorm-bwd [5,2,33]", "dx", &a.dx, ref.dx, NULL, TOL_F32);
	ref_out_free(&ref);
	wsn_device_close(dev);
}
END_TEST

/* dweight, dbias (and dx) are bit-identical for 1, 2, 3 and 8 threads. */
START_TEST(test_threads_bit_identical)
{
	static const struct { enum wsn_op op; enum wsn_dtype dt; } cfg[] = {
		{ WSN_LAYERNORM_BWD, WSN_F32 }, { WSN_LAYERNORM_BWD, WSN_BF16 },
		{ WSN_RMSNORM_BWD, WSN_F32 }, { WSN_RMSNORM_BWD, WSN_F16 },
	};
	static const int threads[] = { 1, 2, 3, 8 };
	const enum wsn_op op = cfg[_i].op;
	const enum wsn_dtype dt = cfg[_i].dt;
	const int64_t rows = 300, hidden = 1000, ld = 1003;
	const int ln = wsn_op_is_layernorm(op);
	struct buf x = { 0 }, dy = { 0 }, w = { 0 }, dx = { 0 }, dw = { 0 }, db = { 0 }, mean = { 0 }, rstd = { 0 };
	void *first_dx = NULL, *first_dw = NULL, *first_db = NULL;
	size_t es = wsn_dtype_size(dt);
	double *mu = tu_xmalloc(rows * sizeof(double)), *rs = tu_xmalloc(rows * sizeof(double));
	struct wsn_device *dev;
	struct wsn_args a;
	struct ref_out ref;
	char name[64];
	uint64_t seed;

	snprintf(name, sizeof(name), "cpu threads %s %s", wsn_op_name(op), wsn_dtype_name(dt));
	seed = tu_case_seed(name);
	/* enough chunks that 8 threads all get work */
	ck_assert_int_ge((rows + wsn__cpu_chunk_rows(op, rows, hidden) - 1) / wsn__cpu_chunk_rows(op, rows, hidden), 8);
	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	memset(&a, 0, sizeof(a));
	buf_matrix(&x, dt, rows, hidden, ld);
	buf_matrix(&dy, dt, rows, hidden, ld);
	buf_matrix(&dx, dt, rows, hidden, ld);
	buf_vector(&w, dt, hidden);
	buf_vector(&dw, dt, hidden);
	buf_stats(&rstd, rows, 0, 1);
	wsn_tensor_fill_random(&x.t, seed, 0.5f, 2.0f);
	wsn_tensor_fill_random(&dy.t, seed + 1, 0.0f, 1.0f);
	wsn_tensor_fill_random(&w.t, seed + 2, 1.0f, 0.5f);
	a.x = x.t, a.dy = dy.t, a.dx = dx.t, a.weight = w.t, a.dweight = dw.t, a.rstd = rstd.t;
	if (ln) {
		buf_stats(&mean, rows, 0, 1);
		buf_vector(&db, dt, hidden);
		a.mean = mean.t, a.dbias = db.t;
		ref_layernorm_fwd(&x.t, NULL, NULL, WSN_DEFAULT_EPS, NULL, mu, rs);
		ref_store(mu, &mean.t);
	} else {
		ref_rmsnorm_fwd(&x.t, NULL, WSN_DEFAULT_EPS, NULL, rs);
	}
	ref_store(rs, &rstd.t);

	for (size_t t = 0; t < WSN_ARRAY_SIZE(threads); t++) {
		struct wsn_plan_options o;
		struct wsn_plan *plan;
		char desc[512], want[32];

		wsn_plan_options_init(&o, op);
		o.threads = threads[t];
		ck_assert_int_eq(wsn_plan_create(dev, op, rows, hidden, dt, &o, &plan), 0);
		ck_assert_int_gt(wsn_plan_describe(plan, desc, sizeof(desc)), 0);
		snprintf(want, sizeof(want), " %d thread%s,", threads[t], threads[t] == 1 ? "" : "s");
		ck_assert_msg(strstr(desc, want) != NULL, "describe '%s' lacks '%s'", desc, want);
		wsn_tensor_fill_nan(&dx.t);
		wsn_tensor_fill_nan(&dw.t);
		if (ln)
			wsn_tensor_fill_nan(&db.t);
		ck_assert_msg(wsn_plan_execute(plan, &a, NULL) == 0, "%s", wsn_last_error());
		wsn_plan_destroy(plan);
		if (t == 0) {
			first_dx = tu_xmalloc(dx.slots * es);
			first_dw = tu_xmalloc(dw.slots * es);
			memcpy(first_dx, dx.mem, dx.slots * es);
			memcpy(first_dw, dw.mem, dw.slots * es);
			if (ln) {
				first_db = tu_xmalloc(db.slots * es);
				memcpy(first_db, db.mem, db.slots * es);
			}
			continue;
		}
		ck_assert_msg(!memcmp(first_dw, dw.mem, dw.slots * es), "%s: dweight differs between 1 and %d threads",
			      name, threads[t]);
		ck_assert_msg(!ln || !memcmp(first_db, db.mem, db.slots * es),
			      "%s: dbias differs between 1 and %d threads", name, threads[t]);
		ck_assert_msg(!memcmp(first_dx, dx.mem, dx.slots * es), "%s: dx differs between 1 and %d threads", name,
			      threads[t]);
	}
	ck_assert_int_eq(ref_run(op, &a, WSN_DEFAULT_EPS, &ref), 0);
	expect_close(name, "dweight", &dw.t, ref.dweight, NULL, dt == WSN_F32 ? TOL_F32 : TOL_HALF);
	if (ln)
		expect_close(name, "dbias", &db.t, ref.dbias, NULL, dt == WSN_F32 ? TOL_F32 : TOL_HALF);
	ref_out_free(&ref);
	free(first_dx), free(first_dw), free(first_db), free(mu), free(rs);
	buf_free(&x), buf_free(&dy), buf_free(&w), buf_free(&dx), buf_free(&dw), buf_free(&db);
	buf_free(&mean), buf_free(&rstd);
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
	struct buf x = { 0 }, dy = { 0 }, dx = { 0 }, w = { 0 }, dw = { 0 }, db = { 0 }, mean = { 0 }, rstd = { 0 };
	double *mu = tu_xmalloc(rows * sizeof(double)), *rs = tu_xmalloc(rows * sizeof(double));
	struct wsn_device *dev;
	struct wsn_plan *plan;
	struct wsn_args a;
	struct ref_out ref;

	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	memset(&a, 0, sizeof(a));
	buf_matrix(&x, WSN_F32, rows, hidden, hidden);
	buf_matrix(&dy, WSN_F32, rows, hidden, hidden);
	buf_matrix(&dx, WSN_F32, rows, hidden, hidden);
	buf_vector(&w, WSN_F32, hidden);
	buf_vector(&dw, WSN_F32, hidden);
	buf_vector(&db, WSN_F32, hidden);
	buf_stats(&mean, rows, 0, 1);
	buf_stats(&rstd, rows, 0, 1);
	wsn_tensor_fill_random(&x.t, seed, 0.0f, 1.0f);
	/* dy with a mean, so that the running sums grow large against each term */
	wsn_tensor_fill_random(&dy.t, seed + 1, 1.0f, 1.0f);
	wsn_tensor_fill_random(&w.t, seed + 2, 1.0f, 0.5f);
	ref_layernorm_fwd(&x.t, NULL, NULL, WSN_DEFAULT_EPS, NULL, mu, rs);
	ref_store(mu, &mean.t);
	ref_store(rs, &rstd.t);
	wsn_tensor_fill_nan(&dw.t);
	wsn_tensor_fill_nan(&db.t);
	a.x = x.t, a.dy = dy.t, a.dx = dx.t, a.weight = w.t, a.dweight = dw.t, a.dbias = db.t;
	a.mean = mean.t, a.rstd = rstd.t;
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_BWD, rows, hidden, WSN_F32, NULL, &plan), 0);
	ck_assert_msg(wsn_plan_execute(plan, &a, NULL) == 0, "%s", wsn_last_error());
	ck_assert_int_eq(ref_run(WSN_LAYERNORM_BWD, &a, WSN_DEFAULT_EPS, &ref), 0);
	expect_close("layernorm-bwd 300000 rows", "dweight", &dw.t, ref.dweight, NULL, TOL_F32);
	expect_close("layernorm-bwd 300000 rows", "dbias", &db.t, ref.dbias, NULL, TOL_F32);
	expect_close("layernorm-bwd 300000 rows", "dx", &dx.t, ref.dx, NULL, TOL_F32);
	ref_out_free(&ref);
	wsn_plan_destroy(plan);
	wsn_device_close(dev);
	free(mu), free(rs);
	buf_free(&x), buf_free(&dy), buf_free(&dx), buf_free(&w), buf_free(&dw), buf_free(&db);
	buf_free(&mean), buf_free(&rstd);
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
	struct wsn_plan *plan;
	struct wsn_plan_options o;
	struct wsn_args a;
	struct ref_out ref;

	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	memset(&a, 0, sizeof(a));
	buf_matrix(&x, WSN_F32, rows, hidden, hidden);
	buf_matrix(&y, WSN_F32, rows, hidden, hidden);
	buf_stats(&rstd, rows, 0, 1);
	wsn_tensor_fill_random(&x.t, seed, 1000.0f, 1.0f);
	wsn_tensor_fill_nan(&y.t);
	a.x = x.t, a.y = y.t, a.rstd = rstd.t;
	wsn_plan_options_init(&o, WSN_LAYERNORM_FWD);
	o.has_weight = o.has_bias = 0;
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_FWD, rows, hidden, WSN_F32, &o, &plan), 0);
	ck_assert_msg(wsn_plan_execute(plan, &a, NULL) == 0, "%s", wsn_last_error());
	ck_assert_int_eq(ref_run(WSN_LAYERNORM_FWD, &a, WSN_DEFAULT_EPS, &ref), 0);
	expect_close("layernorm-fwd mean 1000", "rstd", &rstd.t, ref.rstd, NULL, 1e-3);
	expect_close("layernorm-fwd mean 1000", "y", &y.t, ref.y, NULL, 1e-3);
	ref_out_free(&ref);
	wsn_plan_destroy(plan);
	wsn_device_close(dev);
	buf_free(&x), buf_free(&y), buf_free(&rstd);
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
			buf_matrix(&in[k][0], dts[k], rows, hidden, hidden);
			buf_matrix(&in[k][1], dts[k], rows, hidden, hidden);
			buf_vector(&in[k][2], dts[k], hidden);
			buf_vector(&in[k][3], dts[k], hidden);
			buf_matrix(&out[k][0], dts[k], rows, hidden, hidden);
			buf_vector(&out[k][1], dts[k], hidden);
			buf_vector(&out[k][2], dts[k], hidden);
			buf_stats(&st[k][0], rows, 0, 1);
			buf_stats(&st[k][1], rows, 0, 1);
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
				buf_free(&in[k][i]);
			for (int i = 0; i < 3; i++)
				buf_free(&out[k][i]);
			buf_free(&st[k][0]), buf_free(&st[k][1]);
		}
		free(mu), free(rs);
	}
	wsn_device_close(dev);
}
END_TEST

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

/* The ops table beyond execute: device info, memory, copies, streams, events, threads. */
START_TEST(test_backend_table)
{
	struct wsn_backend_info bi;
	struct wsn_device_info di;
	struct wsn_device *dev;
	struct wsn_stream *s;
	struct wsn_event *e0, *e1, *e2;
	struct utsname u;
	void *p, *q, *big;
	char src[300];
	float ms = -1;

	ck_assert_int_eq(wsn_backend_info(0, &bi), 0);
	ck_assert_str_eq(bi.name, "cpu");
	ck_assert_ptr_nonnull(strstr(bi.note, "hardware thread"));
	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	ck_assert_int_eq(wsn_device_info(dev, &di), 0);
	ck_assert_str_eq(di.backend, "cpu");
	ck_assert(di.name[0] != '\0');
	ck_assert_int_eq(uname(&u), 0);
	ck_assert_int_eq(strncmp(di.arch, u.machine, sizeof(di.arch) - 1), 0);
	ck_assert_int_ge(di.multiprocessors, 1);
	ck_assert_int_gt(di.total_mem, 0);

	ck_assert_int_eq(wsn_mem_alloc(dev, 1000, &p), 0);
	ck_assert_uint_eq((uintptr_t)p % 64, 0);
	ck_assert_int_eq(wsn_mem_set(dev, p, 0xab, 1000, NULL), 0);
	ck_assert_uint_eq(((unsigned char *)p)[999], 0xab);
	for (int i = 0; i < 300; i++)
		src[i] = (char)i;
	ck_assert_int_eq(wsn_memcpy(dev, p, src, 300, WSN_COPY_H2D, NULL), 0);
	ck_assert_int_eq(wsn_host_alloc(dev, 300, &q), 0);
	ck_assert_int_eq(wsn_memcpy(dev, q, p, 300, WSN_COPY_D2H, NULL), 0);
	ck_assert_mem_eq(q, src, 300);
	ck_assert_int_eq(wsn_host_alloc(dev, (size_t)5 << 20, &big), 0); /* huge-page advised */
	ck_assert_uint_eq((uintptr_t)big % 4096, 0);
	memset(big, 1, (size_t)5 << 20);
	ck_assert_int_eq(wsn_host_free(dev, big), 0);
	ck_assert_int_eq(wsn_host_free(dev, big), WSN_EINVAL); /* already freed */
	ck_assert_int_eq(wsn_host_free(dev, src), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "host"));
	ck_assert_int_eq(wsn_host_free(dev, q), 0);
	ck_assert_int_eq(wsn_mem_free(dev, p), 0);
	ck_assert_int_eq(wsn_host_alloc(dev, 10, &q), 0); /* left for device close to unmap */

	ck_assert_int_eq(wsn_stream_create(dev, &s), 0);
	ck_assert_int_eq(wsn_event_create(dev, &e0), 0);
	ck_assert_int_eq(wsn_event_create(dev, &e1), 0);
	ck_assert_int_eq(wsn_event_create(dev, &e2), 0);
	ck_assert_int_eq(wsn_event_elapsed(e0, e1, &ms), WSN_EINVAL); /* not recorded yet */
	ck_assert_int_eq(wsn_event_record(e0, s), 0);
	usleep(20000);
	ck_assert_int_eq(wsn_event_record(e1, s), 0);
	ck_assert_int_eq(wsn_event_sync(e1), 0);
	ck_assert_int_eq(wsn_stream_wait_event(s, e1), 0);
	ck_assert_int_eq(wsn_stream_sync(dev, s), 0);
	ck_assert_int_eq(wsn_stream_sync(dev, NULL), 0);
	ck_assert_int_eq(wsn_event_elapsed(e0, e1, &ms), 0);
	ck_assert_msg(ms >= 15.0f && ms < 5000.0f, "elapsed %g ms over a 20 ms sleep", (double)ms);
	ck_assert_int_eq(wsn_event_elapsed(e0, e2, &ms), WSN_EINVAL);
	/* the CPU runs work as it is submitted: every event is done, and there is no stream to hold */
	ck_assert_int_eq(wsn_event_query(e1), 1);
	ck_assert_int_eq(wsn_event_query(e2), 1); /* never recorded */
	ck_assert_int_eq(wsn_event_query(NULL), WSN_EINVAL);
	ck_assert_int_eq(wsn_stream_hold(s, 1000), WSN_ENOTSUP);
	ck_assert_msg(strstr(wsn_last_error(), "stream hold") && strstr(wsn_last_error(), "cpu"), "%s", wsn_last_error());
	ck_assert_int_eq(wsn_stream_hold(NULL, 1000), WSN_EINVAL);
	ck_assert_int_eq(wsn_stream_hold(s, WSN_HOLD_MAX_NS + 1), WSN_EINVAL);
	ck_assert_msg(strstr(wsn_last_error(), "longer than the most"), "%s", wsn_last_error());
	ck_assert_int_eq(wsn_event_destroy(e0), 0);
	ck_assert_int_eq(wsn_event_destroy(e1), 0);
	ck_assert_int_eq(wsn_event_destroy(e2), 0);
	ck_assert_int_eq(wsn_stream_destroy(s), 0);

	ck_assert_int_eq(wsn_device_set_threads(dev, 2), 0);
	ck_assert_int_eq(wsn_device_set_threads(dev, 1 << 20), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "thread"));
	wsn_device_close(dev);
}
END_TEST

/* The plan's description, and where its thread count comes from (never more than its chunks). */
START_TEST(test_describe_and_threads)
{
	struct wsn_device *dev;
	struct wsn_plan *plan;
	struct wsn_plan_options o;
	char buf[512], small[16], want[64];
	int n;

	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	wsn_plan_options_init(&o, WSN_LAYERNORM_BWD);
	o.threads = 3;
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_BWD, 300, 1000, WSN_F32, &o, &plan), 0);
	n = wsn_plan_describe(plan, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq((int)strlen(buf), n);
	snprintf(want, sizeof(want), "3 threads, rows split into fixed chunks of %lld rows",
		 (long long)wsn__cpu_chunk_rows(WSN_LAYERNORM_BWD, 300, 1000));
	ck_assert_msg(strstr(buf, "cpu reference: ") && strstr(buf, want) && strstr(buf, "dweight/dbias"),
		      "describe: %s", buf);
	ck_assert_int_eq(wsn_plan_describe(plan, small, sizeof(small)), n); /* truncates like snprintf */
	ck_assert_int_eq((int)strlen(small), (int)sizeof(small) - 1);
	wsn_plan_destroy(plan);

	/* 7 rows of 1000 are one chunk: one thread whatever was asked */
	o.threads = 8;
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_BWD, 7, 1000, WSN_F32, &o, &plan), 0);
	wsn_plan_describe(plan, buf, sizeof(buf));
	ck_assert_msg(strstr(buf, " 1 thread,") != NULL, "describe: %s", buf);
	wsn_plan_destroy(plan);

	/* no plan option: the device's setting */
	ck_assert_int_eq(wsn_device_set_threads(dev, 2), 0);
	ck_assert_int_eq(wsn_plan_create(dev, WSN_RMSNORM_FWD, 4096, 1000, WSN_BF16, NULL, &plan), 0);
	wsn_plan_describe(plan, buf, sizeof(buf));
	ck_assert_msg(strstr(buf, " 2 threads,") != NULL, "describe: %s", buf);
	wsn_plan_destroy(plan);

	o.threads = 1 << 20;
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_BWD, 7, 1000, WSN_F32, &o, &plan), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "thread"));
	wsn_device_close(dev);
}
END_TEST

/* Chunk sizes depend on the shape only and keep the backward partial sums within their budget. */
START_TEST(test_chunk_rows)
{
	ck_assert_int_eq(wsn__cpu_chunk_rows(WSN_LAYERNORM_FWD, 100, 1), WSN_CPU_CHUNK_ELEMS);
	ck_assert_int_eq(wsn__cpu_chunk_rows(WSN_LAYERNORM_FWD, 100, 1000), 17);
	ck_assert_int_eq(wsn__cpu_chunk_rows(WSN_RMSNORM_FWD, 100, 1 << 24), 1);
	for (int64_t h = 1; h <= (1 << 24); h *= 8) {
		int64_t rows = (int64_t)1 << 22, k = wsn__cpu_chunk_rows(WSN_RMSNORM_BWD, rows, h);
		int64_t chunks = (rows + k - 1) / k;
		int64_t hp = (h + WSN_CPU_BLOCK - 1) / WSN_CPU_BLOCK * WSN_CPU_BLOCK;

		ck_assert_int_ge(k, 1);
		ck_assert_msg(chunks == 1 || chunks * hp * 8 <= WSN_CPU_PARTIAL_BUDGET, "hidden %lld: %lld chunks",
			      (long long)h, (long long)chunks);
	}
}
END_TEST

Suite *suite_cpu(void)
{
	Suite *s = suite_create("cpu");
	TCase *tc = tcase_create("cpu");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_ops_against_reference, 0, WSN_OP_COUNT * WSN_DTYPE_COUNT);
	tcase_add_test(tc, test_leading_dims);
	tcase_add_loop_test(tc, test_threads_bit_identical, 0, 4);
	tcase_add_test(tc, test_many_rows_reduction);
	tcase_add_test(tc, test_variance_with_large_mean);
	tcase_add_loop_test(tc, test_half_is_f32_rounded, 0, WSN_OP_COUNT);
	tcase_add_test(tc, test_reference_by_hand);
	tcase_add_loop_test(tc, test_reference_gradients, 0, 2);
	tcase_add_test(tc, test_reference_helpers);
	tcase_add_test(tc, test_backend_table);
	tcase_add_test(tc, test_describe_and_threads);
	tcase_add_test(tc, test_chunk_rows);
	suite_add_tcase(s, tc);
	return s;
}
