/* SPDX-License-Identifier: MIT */
/* tests/check_gpu.c: the CUDA backend on a real GPU against the CPU backend; exits 77 when no CUDA device is usable. */
#include "config.h"

#include <stdio.h>

#ifndef WSN_HAVE_CUDA
int main(void)
{
	printf("no CUDA device: the CUDA backend is not built into this library (it is built on Linux only)\n");
	return 77;
}
#else

#include "testutil.h"
#include "cuda/cuda_internal.h"
#include "core/clock.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct wsn_device *gpu, *cpu;

#define OK(call)                                                                                    \
	do {                                                                                        \
		int e_ = (call);                                                                    \
		ck_assert_msg(e_ == 0, "%s: %s: %s", #call, wsn_err_name(e_), wsn_last_error()); \
	} while (0)

static void setup(void)
{
	OK(wsn_device_open("cuda:0", &gpu));
	OK(wsn_device_open("cpu", &cpu));
}

static void teardown(void)
{
	wsn_device_close(gpu);
	wsn_device_close(cpu);
	gpu = cpu = NULL;
}

static void *dalloc(size_t bytes)
{
	void *p = NULL;

	OK(wsn_mem_alloc(gpu, bytes, &p));
	return p;
}

static void upload(void *d, const void *h, size_t n)
{
	OK(wsn_memcpy(gpu, d, h, n, WSN_COPY_H2D, NULL));
}

static void download(void *h, const void *d, size_t n)
{
	OK(wsn_memcpy(gpu, h, d, n, WSN_COPY_D2H, NULL));
}

/* 0xFF bytes are NaN in f32, f16 and bf16: an element the kernel does not write fails the compare. */
static void poison(void *d, size_t n)
{
	if (d)
		OK(wsn_mem_set(gpu, d, 0xff, n, NULL));
}

/* [rows, hidden] with row stride ld, starting off elements into base. */
static struct wsn_tensor mat(void *base, enum wsn_dtype dt, enum wsn_mem mem, int64_t rows, int64_t hidden,
			     int64_t ld, int64_t off)
{
	struct wsn_tensor t;

	memset(&t, 0, sizeof(t));
	t.data = (char *)base + off * (int64_t)wsn_dtype_size(dt);
	t.dtype = dt;
	t.mem = mem;
	t.ndim = 2;
	t.shape[0] = rows;
	t.shape[1] = hidden;
	t.stride[0] = ld;
	t.stride[1] = 1;
	return t;
}

static struct wsn_tensor vec(void *p, enum wsn_dtype dt, enum wsn_mem mem, int64_t n)
{
	struct wsn_tensor t;

	OK(wsn_tensor_1d(&t, p, dt, mem, n));
	return t;
}

/* mean/rstd: f32 [rows], or [rows, 1] */
static struct wsn_tensor stats(void *p, enum wsn_mem mem, int64_t rows, int two_d)
{
	return two_d ? mat(p, WSN_F32, mem, rows, 1, 1, 0) : vec(p, WSN_F32, mem, rows);
}

static const enum wsn_dtype dtypes[] = { WSN_F32, WSN_F16, WSN_BF16 };
static const enum wsn_op ops[] = { WSN_LAYERNORM_FWD, WSN_RMSNORM_FWD, WSN_LAYERNORM_BWD, WSN_RMSNORM_BWD };

static double tolerance(enum wsn_dtype dt)
{
	return dt == WSN_F32 ? 1e-5 : 1e-2;
}

/* One (dtype, hidden, layout): inputs in host and device memory, output buffers of both backends. */
struct setup {
	enum wsn_dtype dt;
	int64_t hidden, rows; /* rows: the most any run uses */
	int64_t ld, off;      /* x and dy: row stride and offset in elements (ld > hidden, off > 0: unaligned) */
	int stats2d;          /* mean/rstd as [rows, 1]; 2: backward mean [rows] with rstd [rows, 1] */
	size_t es, in_elems;
	void *hx, *hdy, *hw, *hb;           /* host inputs */
	void *x, *dy, *w, *b;               /* device inputs */
	float *hmean, *hrstd_ln, *hrstd_rms; /* CPU forward statistics: the backward inputs */
	void *mean_in, *rstd_ln_in, *rstd_rms_in;
	/* outputs: CPU (c*), GPU device (d*), GPU read back (g*) */
	void *cy, *cdx, *cdw, *cdb, *gy, *gdx, *gdw, *gdb, *gy2, *gdx2, *gdw2, *gdb2;
	float *cmean, *crstd, *gmean, *grstd;
	void *dyo, *ddx, *ddw, *ddb, *dmean, *drstd;
};

static void *xcalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	ck_assert_msg(p != NULL, "calloc %zu", n);
	return p;
}

/* Random inputs from f32 (mean 0.5 so the statistics are not near zero), converted to dt. */
static void setup_init(struct setup *s, enum wsn_dtype dt, int64_t hidden, int64_t rows, int64_t ld, int64_t off,
		       int stats2d, const float *x32, const float *dy32, const float *w32, const float *b32)
{
	size_t rh = (size_t)(rows * hidden);

	memset(s, 0, sizeof(*s));
	s->dt = dt;
	s->hidden = hidden;
	s->rows = rows;
	s->ld = ld;
	s->off = off;
	s->stats2d = stats2d;
	s->es = wsn_dtype_size(dt);
	s->in_elems = (size_t)((rows - 1) * ld + hidden + off);
	s->hx = xcalloc(s->in_elems * s->es);
	s->hdy = xcalloc(s->in_elems * s->es);
	s->hw = xcalloc((size_t)hidden * s->es);
	s->hb = xcalloc((size_t)hidden * s->es);
	OK(wsn_dtype_convert(s->hx, dt, x32, WSN_F32, s->in_elems));
	OK(wsn_dtype_convert(s->hdy, dt, dy32, WSN_F32, s->in_elems));
	OK(wsn_dtype_convert(s->hw, dt, w32, WSN_F32, (size_t)hidden));
	OK(wsn_dtype_convert(s->hb, dt, b32, WSN_F32, (size_t)hidden));
	s->x = dalloc(s->in_elems * s->es);
	s->dy = dalloc(s->in_elems * s->es);
	s->w = dalloc((size_t)hidden * s->es);
	s->b = dalloc((size_t)hidden * s->es);
	upload(s->x, s->hx, s->in_elems * s->es);
	upload(s->dy, s->hdy, s->in_elems * s->es);
	upload(s->w, s->hw, (size_t)hidden * s->es);
	upload(s->b, s->hb, (size_t)hidden * s->es);

	s->cy = xcalloc(rh * s->es);
	s->cdx = xcalloc(rh * s->es);
	s->gy = xcalloc(rh * s->es);
	s->gdx = xcalloc(rh * s->es);
	s->gy2 = xcalloc(rh * s->es);
	s->gdx2 = xcalloc(rh * s->es);
	s->cdw = xcalloc((size_t)hidden * s->es);
	s->cdb = xcalloc((size_t)hidden * s->es);
	s->gdw = xcalloc((size_t)hidden * s->es);
	s->gdb = xcalloc((size_t)hidden * s->es);
	s->gdw2 = xcalloc((size_t)hidden * s->es);
	s->gdb2 = xcalloc((size_t)hidden * s->es);
	s->cmean = xcalloc((size_t)rows * 4);
	s->crstd = xcalloc((size_t)rows * 4);
	s->gmean = xcalloc((size_t)rows * 4);
	s->grstd = xcalloc((size_t)rows * 4);
	s->hmean = xcalloc((size_t)rows * 4);
	s->hrstd_ln = xcalloc((size_t)rows * 4);
	s->hrstd_rms = xcalloc((size_t)rows * 4);
	s->dyo = dalloc(rh * s->es);
	s->ddx = dalloc(rh * s->es);
	s->ddw = dalloc((size_t)hidden * s->es);
	s->ddb = dalloc((size_t)hidden * s->es);
	s->dmean = dalloc((size_t)rows * 4);
	s->drstd = dalloc((size_t)rows * 4);
	s->mean_in = dalloc((size_t)rows * 4);
	s->rstd_ln_in = dalloc((size_t)rows * 4);
	s->rstd_rms_in = dalloc((size_t)rows * 4);

	/* the backward inputs: the CPU forward statistics of the same x */
	for (int rms = 0; rms < 2; rms++) {
		enum wsn_op op = rms ? WSN_RMSNORM_FWD : WSN_LAYERNORM_FWD;
		struct wsn_plan *p;
		struct wsn_args a;

		memset(&a, 0, sizeof(a));
		OK(wsn_plan_create(cpu, op, rows, hidden, dt, NULL, &p));
		a.x = mat(s->hx, dt, WSN_MEM_HOST, rows, hidden, ld, off);
		a.weight = vec(s->hw, dt, WSN_MEM_HOST, hidden);
		if (!rms)
			a.bias = vec(s->hb, dt, WSN_MEM_HOST, hidden);
		a.y = mat(s->cy, dt, WSN_MEM_HOST, rows, hidden, hidden, 0);
		if (!rms)
			a.mean = stats(s->hmean, WSN_MEM_HOST, rows, stats2d);
		a.rstd = stats(rms ? s->hrstd_rms : s->hrstd_ln, WSN_MEM_HOST, rows, stats2d);
		OK(wsn_plan_execute(p, &a, NULL));
		wsn_plan_destroy(p);
	}
	upload(s->mean_in, s->hmean, (size_t)rows * 4);
	upload(s->rstd_ln_in, s->hrstd_ln, (size_t)rows * 4);
	upload(s->rstd_rms_in, s->hrstd_rms, (size_t)rows * 4);
}

static void setup_free(struct setup *s)
{
	void *host[] = { s->hx, s->hdy, s->hw, s->hb, s->cy, s->cdx, s->gy, s->gdx, s->gy2, s->gdx2, s->cdw, s->cdb,
			 s->gdw, s->gdb, s->gdw2, s->gdb2, s->cmean, s->crstd, s->gmean, s->grstd, s->hmean,
			 s->hrstd_ln, s->hrstd_rms };
	void *dev[] = { s->x, s->dy, s->w, s->b, s->dyo, s->ddx, s->ddw, s->ddb, s->dmean, s->drstd, s->mean_in,
			s->rstd_ln_in, s->rstd_rms_in };

	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		OK(wsn_mem_free(gpu, dev[i]));
}

/* The arguments of op over the first r rows, in host (CPU) or device (GPU) memory. */
static struct wsn_args args_of(const struct setup *s, enum wsn_op op, int64_t r, int on_gpu)
{
	enum wsn_mem m = on_gpu ? WSN_MEM_DEVICE : WSN_MEM_HOST;
	int64_t h = s->hidden;
	int ln = wsn_op_is_layernorm(op);
	struct wsn_args a;

	memset(&a, 0, sizeof(a));
	a.x = mat(on_gpu ? s->x : s->hx, s->dt, m, r, h, s->ld, s->off);
	a.weight = vec(on_gpu ? s->w : s->hw, s->dt, m, h);
	if (ln)
		a.bias = vec(on_gpu ? s->b : s->hb, s->dt, m, h);
	if (!wsn_op_is_backward(op)) {
		a.y = mat(on_gpu ? s->dyo : s->cy, s->dt, m, r, h, h, 0);
		if (ln)
			a.mean = stats(on_gpu ? s->dmean : (void *)s->cmean, m, r, s->stats2d);
		a.rstd = stats(on_gpu ? s->drstd : (void *)s->crstd, m, r, s->stats2d);
		return a;
	}
	a.dy = mat(on_gpu ? s->dy : s->hdy, s->dt, m, r, h, s->ld, s->off);
	a.dx = mat(on_gpu ? s->ddx : s->cdx, s->dt, m, r, h, h, 0);
	if (ln)
		a.mean = stats(on_gpu ? s->mean_in : (void *)s->hmean, m, r, s->stats2d == 1);
	a.rstd = stats(on_gpu ? (ln ? s->rstd_ln_in : s->rstd_rms_in) : (void *)(ln ? s->hrstd_ln : s->hrstd_rms), m,
		       r, s->stats2d != 0);
	a.dweight = vec(on_gpu ? s->ddw : s->cdw, s->dt, m, h);
	if (ln)
		a.dbias = vec(on_gpu ? s->ddb : s->cdb, s->dt, m, h);
	return a;
}

static double elem(const void *p, enum wsn_dtype dt, int64_t i)
{
	float f;

	wsn_dtype_convert(&f, WSN_F32, (const char *)p + i * (int64_t)wsn_dtype_size(dt), dt, 1);
	return f;
}

/*
 * The size of the terms dx is made of, ||rstd * dy * w|| over the first r rows. On ordinary rows
 * it is about ||dx||; where the terms cancel (hidden 1 RMSNorm: xhat^2 = x^2 / (x^2 + eps) ~ 1)
 * dx is far smaller than its terms, and f32 rounding of the terms is all that is left of it.
 */
static double dx_scale(const struct setup *s, enum wsn_op op, int64_t r)
{
	const float *rstd = op == WSN_LAYERNORM_BWD ? s->hrstd_ln : s->hrstd_rms;
	double sum = 0;

	for (int64_t i = 0; i < r; i++) {
		for (int64_t j = 0; j < s->hidden; j++) {
			double t = rstd[i] * elem(s->hdy, s->dt, s->off + i * s->ld + j) * elem(s->hw, s->dt, j);
			sum += t * t;
		}
	}
	return sqrt(sum);
}

/*
 * Compare one output; prints and returns 1 on a mismatch. The error is relative to the larger of
 * ||ref|| and scale (0: ||ref|| alone).
 */
static int check_out(const char *what, const char *name, enum wsn_dtype dt, const void *got, const void *ref, int64_t n,
		     double tol, double scale, double *worst)
{
	struct wsn_tensor g = vec((void *)got, dt, WSN_MEM_HOST, n), r = vec((void *)ref, dt, WSN_MEM_HOST, n);
	struct wsn_compare c;
	double rn = 0, rel;

	OK(wsn_tensor_compare(&g, &r, &c));
	for (int64_t i = 0; i < n; i++)
		rn += elem(ref, dt, i) * elem(ref, dt, i);
	rn = sqrt(rn);
	rel = c.rel_l2 * (rn > 0 ? rn : 1.0) / (scale > rn ? scale : (rn > 0 ? rn : 1.0));
	if (rel > *worst)
		*worst = rel;
	if (c.nonfinite || !(rel <= tol)) {
		printf("FAIL %s %s: relative error %.3g (tolerance %.0e%s), max_abs %.3g at %lld, %lld non-finite of %lld\n",
		       what, name, rel, tol, scale > rn ? ", relative to the size of its terms" : "", c.max_abs,
		       (long long)c.worst, (long long)c.nonfinite, (long long)c.count);
		return 1;
	}
	return 0;
}

/* Run op over r rows on both backends and compare; backward runs twice to check determinism. */
static int run_rows(struct setup *s, enum wsn_op op, struct wsn_plan *gp, struct wsn_plan *cp, int64_t r,
		    double *worst)
{
	size_t rh = (size_t)(r * s->hidden) * s->es, hb = (size_t)s->hidden * s->es;
	int ln = wsn_op_is_layernorm(op), fails = 0, e;
	struct wsn_args ca = args_of(s, op, r, 0), ga = args_of(s, op, r, 1);
	double tol = tolerance(s->dt);
	char what[160];

	snprintf(what, sizeof(what), "%s %s hidden=%lld rows=%lld%s", wsn_op_name(op), wsn_dtype_name(s->dt),
		 (long long)s->hidden, (long long)r, s->ld != s->hidden || s->off ? " (strided, unaligned x)" : "");
	OK(wsn_plan_execute(cp, &ca, NULL));
	for (int run = 0; run < (wsn_op_is_backward(op) ? 2 : 1); run++) {
		if (!wsn_op_is_backward(op)) {
			poison(s->dyo, rh);
			poison(s->dmean, (size_t)r * 4);
			poison(s->drstd, (size_t)r * 4);
		} else {
			poison(s->ddx, rh);
			poison(s->ddw, hb);
			poison(s->ddb, hb);
		}
		if ((e = wsn_plan_execute(gp, &ga, NULL)) < 0 || (e = wsn_stream_sync(gpu, NULL)) < 0) {
			printf("FAIL %s: %s: %s\n", what, wsn_err_name(e), wsn_last_error());
			return 1;
		}
		if (!wsn_op_is_backward(op)) {
			download(s->gy, s->dyo, rh);
			download(s->grstd, s->drstd, (size_t)r * 4);
			fails += check_out(what, "y", s->dt, s->gy, s->cy, r * s->hidden, tol, 0, worst);
			fails += check_out(what, "rstd", WSN_F32, s->grstd, s->crstd, r, 1e-5, 0, worst);
			if (ln) {
				download(s->gmean, s->dmean, (size_t)r * 4);
				fails += check_out(what, "mean", WSN_F32, s->gmean, s->cmean, r, 1e-5, 0, worst);
			}
			continue;
		}
		download(run ? s->gdx2 : s->gdx, s->ddx, rh);
		download(run ? s->gdw2 : s->gdw, s->ddw, hb);
		if (ln)
			download(run ? s->gdb2 : s->gdb, s->ddb, hb);
		if (!run) {
			fails += check_out(what, "dx", s->dt, s->gdx, s->cdx, r * s->hidden, tol, dx_scale(s, op, r), worst);
			fails += check_out(what, "dweight", s->dt, s->gdw, s->cdw, s->hidden, tol, 0, worst);
			if (ln)
				fails += check_out(what, "dbias", s->dt, s->gdb, s->cdb, s->hidden, tol, 0, worst);
			continue;
		}
		if (memcmp(s->gdx, s->gdx2, rh) || memcmp(s->gdw, s->gdw2, hb) || (ln && memcmp(s->gdb, s->gdb2, hb))) {
			printf("FAIL %s: two backward runs differ (not deterministic)\n", what);
			fails++;
		}
	}
	return fails;
}

static int run_op_skips; /* forced plans run_op skipped so far */

/* One op over every row count in rows[] with GPU plan options po (NULL: defaults); returns the
 * failures. A forced plan that does not fit (WSN_EINVAL/WSN_ESHAPE) is skipped when may_skip
 * (counted in run_op_skips). */
static int run_op(struct setup *s, enum wsn_op op, const struct wsn_plan_options *po, const char *label,
		  const int64_t *rows, int nrows, int may_skip)
{
	struct wsn_plan *gp = NULL, *cp = NULL;
	struct wsn_plan_options o;
	double worst = 0, t0 = wsn__now();
	int e, f = 0;

	if (po) {
		wsn_plan_options_init(&o, op);
		o.approach = po->approach;
		o.groups = po->groups;
		o.unroll = po->unroll;
		o.stages = po->stages;
		o.cluster = po->cluster;
		o.block_threads = po->block_threads;
	}
	if ((e = wsn_plan_create(gpu, op, s->rows, s->hidden, s->dt, po ? &o : NULL, &gp)) < 0) {
		if (may_skip && (e == WSN_EINVAL || e == WSN_ESHAPE)) {
			printf("skip %s %s hidden=%lld %s: %s\n", wsn_op_name(op), wsn_dtype_name(s->dt),
			       (long long)s->hidden, label, wsn_last_error());
			run_op_skips++;
			return 0;
		}
		printf("FAIL %s %s hidden=%lld %s: GPU plan: %s: %s\n", wsn_op_name(op), wsn_dtype_name(s->dt),
		       (long long)s->hidden, label, wsn_err_name(e), wsn_last_error());
		return 1;
	}
	OK(wsn_plan_create(cpu, op, s->rows, s->hidden, s->dt, NULL, &cp));
	for (int i = 0; i < nrows; i++)
		if (rows[i] <= s->rows)
			f += run_rows(s, op, gp, cp, rows[i], &worst);
	printf("%s %s %s hidden=%lld%s %s: worst rel_l2 %.2e, %.2f s\n", f ? "FAIL" : "ok", wsn_op_name(op),
	       wsn_dtype_name(s->dt), (long long)s->hidden, s->ld != s->hidden || s->off ? " strided" : "", label, worst,
	       wsn__now() - t0);
	fflush(stdout);
	wsn_plan_destroy(gp);
	wsn_plan_destroy(cp);
	return f;
}

/* Every op over every row count in rows[] for one setup; returns the failures. */
static int run_setup(struct setup *s, const int64_t *rows, int nrows)
{
	int fails = 0;

	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
		struct wsn_plan *gp = NULL, *cp = NULL;
		double worst = 0, t0 = wsn__now();
		int e, f = 0;

		if ((e = wsn_plan_create(gpu, ops[o], s->rows, s->hidden, s->dt, NULL, &gp)) < 0) {
			printf("FAIL %s %s hidden=%lld: GPU plan: %s: %s\n", wsn_op_name(ops[o]), wsn_dtype_name(s->dt),
			       (long long)s->hidden, wsn_err_name(e), wsn_last_error());
			fails++;
			continue;
		}
		OK(wsn_plan_create(cpu, ops[o], s->rows, s->hidden, s->dt, NULL, &cp));
		for (int i = 0; i < nrows; i++)
			if (rows[i] <= s->rows)
				f += run_rows(s, ops[o], gp, cp, rows[i], &worst);
		printf("%s %s %s hidden=%lld%s: worst rel_l2 %.2e, %.2f s\n", f ? "FAIL" : "ok", wsn_op_name(ops[o]),
		       wsn_dtype_name(s->dt), (long long)s->hidden, s->ld != s->hidden || s->off ? " strided" : "", worst,
		       wsn__now() - t0);
		fflush(stdout);
		fails += f;
		wsn_plan_destroy(gp);
		wsn_plan_destroy(cp);
	}
	return fails;
}

static float *random_f32(size_t n, const char *tag, float mean, float stddev)
{
	float *p = xcalloc(n * 4);
	struct wsn_tensor t = vec(p, WSN_F32, WSN_MEM_HOST, (int64_t)n);

	OK(wsn_tensor_fill_random(&t, tu_case_seed(tag), mean, stddev));
	return p;
}

static const int64_t hiddens[] = { 1, 3, 64, 1000, 1024, 2048, 4096, 4097, 8192, 12288, 16384, 32768 };
static const int64_t row_counts[] = { 1, 7, 1000, 16384 };

/*
 * All ops x dtypes for hidden size hiddens[_i], rows 1, 7, 1000 and, for a subset of hidden sizes
 * that keeps the CPU reference within the time budget, 16384.
 */
START_TEST(test_ops)
{
	int64_t h = hiddens[_i], rows = h <= 1000 || h == 4096 ? 16384 : 1000;
	size_t n = (size_t)(rows * h);
	char tag[64];
	float *x32, *dy32, *w32, *b32;
	int fails = 0;

	snprintf(tag, sizeof(tag), "x-%lld", (long long)h);
	x32 = random_f32(n, tag, 0.5f, 1.0f);
	snprintf(tag, sizeof(tag), "dy-%lld", (long long)h);
	dy32 = random_f32(n, tag, 0.0f, 1.0f);
	snprintf(tag, sizeof(tag), "w-%lld", (long long)h);
	w32 = random_f32((size_t)h, tag, 1.0f, 0.25f);
	snprintf(tag, sizeof(tag), "b-%lld", (long long)h);
	b32 = random_f32((size_t)h, tag, 0.0f, 0.25f);
	for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
		struct setup s;

		setup_init(&s, dtypes[d], h, rows, h, 0, 0, x32, dy32, w32, b32);
		fails += run_setup(&s, row_counts, (int)(sizeof(row_counts) / sizeof(row_counts[0])));
		setup_free(&s);
	}
	free(x32);
	free(dy32);
	free(w32);
	free(b32);
	ck_assert_msg(fails == 0, "%d mismatches for hidden %lld (see FAIL lines above)", fails, (long long)h);
}
END_TEST

/* [rows, 1] statistics, and x/dy with a row stride and a base that is not 16-byte aligned. */
START_TEST(test_strided_stats)
{
	static const int64_t hs[] = { 1000, 4096 };
	static const int64_t rows[] = { 1, 333 };
	int fails = 0;

	for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++) {
		int64_t h = hs[i], ld = h + 3, r = 333;
		size_t n = (size_t)((r - 1) * ld + h + 1);
		float *x32 = random_f32(n, "strided-x", 0.5f, 1.0f), *dy32 = random_f32(n, "strided-dy", 0.0f, 1.0f);
		float *w32 = random_f32((size_t)h, "strided-w", 1.0f, 0.25f), *b32 = random_f32((size_t)h, "strided-b", 0, 0.25f);

		for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
			struct setup s;

			setup_init(&s, dtypes[d], h, r, ld, 1, 1, x32, dy32, w32, b32);
			fails += run_setup(&s, rows, 2);
			setup_free(&s);
		}
		free(x32);
		free(dy32);
		free(w32);
		free(b32);
	}
	ck_assert_msg(fails == 0, "%d mismatches (see FAIL lines above)", fails);
}
END_TEST

/* ---- warp-specialised kernels, forced ---- */

/* Inputs for hidden h and rows r (row stride ld >= h, offset off elements), all dtypes share them. */
struct inputs {
	float *x, *dy, *w, *b;
};

static void inputs_make(struct inputs *in, const char *tag, int64_t h, int64_t r, int64_t ld, int64_t off)
{
	size_t n = (size_t)((r - 1) * ld + h + off);
	char t[64];

	snprintf(t, sizeof(t), "%s-x", tag);
	in->x = random_f32(n, t, 0.5f, 1.0f);
	snprintf(t, sizeof(t), "%s-dy", tag);
	in->dy = random_f32(n, t, 0.0f, 1.0f);
	snprintf(t, sizeof(t), "%s-w", tag);
	in->w = random_f32((size_t)h, t, 1.0f, 0.25f);
	snprintf(t, sizeof(t), "%s-b", tag);
	in->b = random_f32((size_t)h, t, 0.0f, 0.25f);
}

static void inputs_free(struct inputs *in)
{
	free(in->x);
	free(in->dy);
	free(in->w);
	free(in->b);
}

/*
 * Rows too wide for the registers (f32 from 64K, 16-bit from 128K, and a width with a partial last
 * vector that takes the element path): the multi-wave kernels re-read them from global memory in
 * passes that run as loops over chunks of slices, LayerNorm's forward takes its statistics in one
 * pass, and auto may pick a ws kernel of one stage over multi-wave sums kept in global memory. Auto
 * first, then every op forced onto multi-wave, then multi-wave shapes whose passes step a shared-
 * memory weight or dweight through the loop.
 */
START_TEST(test_wide_rows)
{
	static const int64_t rows[] = { 1, 7, 300 };
	static const struct { enum wsn_op op; enum wsn_dtype dt; int64_t h; } smem[] = {
		{ WSN_LAYERNORM_BWD, WSN_BF16, 32768 }, { WSN_LAYERNORM_BWD, WSN_F32, 24576 },
		{ WSN_RMSNORM_BWD, WSN_F32, 49152 }, { WSN_RMSNORM_BWD, WSN_BF16, 49152 },
	};
	struct wsn__cu_device *cd = gpu->ctx;
	enum wsn_dtype dt = dtypes[_i];
	int64_t base = dt == WSN_F32 ? 65536 : 131072;
	int fails = 0;

	for (int w = 0; w < 2; w++) {
		int64_t h = base + (w ? 3 : 0);
		struct inputs in;
		struct setup s;

		inputs_make(&in, "wide", h, 300, h, 0);
		setup_init(&s, dt, h, 300, h, 0, 0, in.x, in.dy, in.w, in.b);
		fails += run_setup(&s, rows, 3);
		for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
			struct wsn_plan_options po;
			struct wsn__plan_params pp;
			struct wsn__kernel_plan *kp = xcalloc(sizeof(*kp));

			memset(&pp, 0, sizeof(pp));
			pp.op = ops[o];
			pp.dtype = dt;
			pp.hidden = h;
			pp.rows = 300;
			wsn_plan_options_init(&pp.opts, ops[o]);
			pp.opts.approach = WSN_APPROACH_MULTIWAVE;
			OK(wsn__plan_kernel(&cd->props, &pp, kp));
			ck_assert_msg(kp->row_store == WSN_STORE_GLOBAL, "%s: the row is not in global memory", kp->entry);
			free(kp);
			memset(&po, 0, sizeof(po));
			po.approach = WSN_APPROACH_MULTIWAVE;
			fails += run_op(&s, ops[o], &po, "multiwave, row in memory", rows, 3, 0);
		}
		setup_free(&s);
		inputs_free(&in);
	}
	for (size_t i = 0; i < sizeof(smem) / sizeof(smem[0]); i++) {
		struct wsn_plan_options po;
		struct wsn__plan_params pp;
		struct wsn__kernel_plan *kp;
		struct inputs in;
		struct setup s;

		if (smem[i].dt != dt)
			continue;
		kp = xcalloc(sizeof(*kp));
		memset(&pp, 0, sizeof(pp));
		pp.op = smem[i].op;
		pp.dtype = dt;
		pp.hidden = smem[i].h;
		pp.rows = 300;
		wsn_plan_options_init(&pp.opts, smem[i].op);
		pp.opts.approach = WSN_APPROACH_MULTIWAVE;
		OK(wsn__plan_kernel(&cd->props, &pp, kp));
		ck_assert_msg(kp->row_store == WSN_STORE_GLOBAL &&
			      (kp->param_store == WSN_STORE_SMEM || kp->dw_store == WSN_STORE_SMEM),
			      "%s: not a row in memory with a shared-memory weight or dweight", kp->entry);
		free(kp);
		inputs_make(&in, "wide-smem", smem[i].h, 300, smem[i].h, 0);
		setup_init(&s, dt, smem[i].h, 300, smem[i].h, 0, 0, in.x, in.dy, in.w, in.b);
		memset(&po, 0, sizeof(po));
		po.approach = WSN_APPROACH_MULTIWAVE;
		fails += run_op(&s, smem[i].op, &po, "multiwave, row in memory, shared weight or sums", rows, 3, 0);
		setup_free(&s);
		inputs_free(&in);
	}
	ck_assert_msg(fails == 0, "%d mismatches (see FAIL lines above)", fails);
}
END_TEST

/*
 * Every op x dtype with each forced (bdimy, unroll, stages) in {1, 2} x {1, 2, 4} x {2, 4, 8} that
 * fits (the planner says which do not), over 7 rows (fewer blocks than CTAs) and 2999 rows (a last
 * block that is partial for unroll > 1, and rings that wrap).
 */
START_TEST(test_ws_forced)
{
	static const unsigned groups[] = { 1, 2 }, unrolls[] = { 1, 2, 4 }, stages[] = { 2, 4, 8 };
	static const int64_t rows[] = { 7, 2999 };
	enum wsn_dtype dt = dtypes[_i];
	int64_t h = dt == WSN_F32 ? 500 : 1000, r = 2999;
	int fails = 0, plans = 0;
	struct inputs in;
	struct setup s;

	inputs_make(&in, "ws-forced", h, r, h, 0);
	setup_init(&s, dt, h, r, h, 0, 0, in.x, in.dy, in.w, in.b);
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (size_t a = 0; a < 2; a++)
			for (size_t u = 0; u < 3; u++)
				for (size_t st = 0; st < 3; st++) {
					struct wsn_plan_options po;
					char label[64];
					memset(&po, 0, sizeof(po));
					po.approach = WSN_APPROACH_WS;
					po.groups = (int)groups[a];
					po.unroll = (int)unrolls[u];
					po.stages = (int)stages[st];
					snprintf(label, sizeof(label), "ws bdimy=%u unroll=%u stages=%u", groups[a], unrolls[u],
						 stages[st]);
					fails += run_op(&s, ops[o], &po, label, rows, 2, 1);
					plans++;
				}
	/* stages forced, groups free: the planner's groups come down to a count that divides the stages
	 * (rows of 128 threads where 32- or 64-thread rows allow none; each stage one group's: shared
	 * slots failed to launch), and those kernels match too; every one of them plans */
	int skips = run_op_skips;
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (unsigned st = 3; st <= 12; st *= 2) {
			struct wsn_plan_options po;
			char label[64];
			memset(&po, 0, sizeof(po));
			po.approach = WSN_APPROACH_WS;
			po.stages = (int)st;
			snprintf(label, sizeof(label), "ws stages=%u, groups free", st);
			fails += run_op(&s, ops[o], &po, label, rows, 2, 1);
			plans++;
		}
	ck_assert_msg(run_op_skips == skips, "%d forced stage counts found no plan", run_op_skips - skips);
	setup_free(&s);
	inputs_free(&in);
	ck_assert_msg(fails == 0, "%d mismatches over %d forced ws plans (see FAIL lines above)", fails, plans);
}
END_TEST

/*
 * Random forced shapes (seeded, printed): op, dtype, hidden (odd sizes too), groups, threads per row
 * and, for the ws kernels (_i 0; multi-wave _i 1), unroll, stages and the backward's cluster, each
 * free or forced at random, over 7 rows and 4096 (rings that wrap many times). Shapes the planner
 * refuses are skipped; every one it plans must match the CPU reference. Forced stages that two row
 * groups shared crashed the GPU before each stage became one group's; this is the net for the next
 * such combination.
 */
START_TEST(test_fuzz)
{
	const int ws = _i == 0;
	static const int64_t rows[] = { 7, 4096 }, hs[] = { 64, 500, 1000, 1024, 2048, 2050, 3000, 4096, 4097, 8192 };
	/* each parameter free about half the time (a draw that forces all five rarely plans) */
	static const int groups[] = { 0, 0, 0, 1, 2, 4, 8 }, unrolls[] = { 0, 0, 1, 2, 4 }, clusters[] = { 0, 0, 1, 2, 4 };
	static const int threads[] = { 0, 0, 0, 64, 128, 256 };
	uint64_t st = tu_case_seed(ws ? "ws-fuzz" : "mw-fuzz");
	int fails = 0, ran = 0, tries = 32;

	for (int i = 0; i < tries; i++) {
		struct wsn_plan_options po;
		struct inputs in;
		struct setup su;
		enum wsn_op op;
		enum wsn_dtype dt;
		int64_t h;
		char label[96];
		uint64_t r[9];

		for (int k = 0; k < 9; k++) { /* splitmix64 */
			uint64_t z = (st += 0x9e3779b97f4a7c15ull);
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
			r[k] = z ^ (z >> 31);
		}
		op = ops[r[0] % 4];
		dt = dtypes[r[1] % 3];
		h = hs[r[2] % (sizeof(hs) / sizeof(hs[0]))];
		wsn_plan_options_init(&po, op);
		po.approach = ws ? WSN_APPROACH_WS : WSN_APPROACH_MULTIWAVE;
		po.groups = groups[r[3] % (sizeof(groups) / sizeof(groups[0]))];
		po.block_threads = threads[r[6] % (sizeof(threads) / sizeof(threads[0]))];
		if (ws) {
			po.unroll = unrolls[r[4] % (sizeof(unrolls) / sizeof(unrolls[0]))];
			po.stages = r[5] % 2 ? (int)(2 + (r[5] >> 1) % 15) : 0; /* free, or 2 to 16 */
			po.cluster = wsn_op_is_backward(op) ? clusters[r[7] % (sizeof(clusters) / sizeof(clusters[0]))] : 0;
		}
		snprintf(label, sizeof(label), "%s fuzz %d: groups=%d unroll=%d stages=%d threads=%d cluster=%d",
			 ws ? "ws" : "multiwave", i, po.groups, po.unroll, po.stages, po.block_threads, po.cluster);
		{ /* the plan first: inputs are made only for shapes that have one */
			struct wsn_plan *gp = NULL;
			if (wsn_plan_create(gpu, op, 4096, h, dt, &po, &gp) < 0) {
				printf("skip %s %s hidden=%lld %s: %s\n", wsn_op_name(op), wsn_dtype_name(dt), (long long)h,
				       label, wsn_last_error());
				continue;
			}
			wsn_plan_destroy(gp);
		}
		inputs_make(&in, ws ? "ws-fuzz" : "mw-fuzz", h, 4096, h, 0);
		setup_init(&su, dt, h, 4096, h, 0, 0, in.x, in.dy, in.w, in.b);
		fails += run_op(&su, op, &po, label, rows, 2, 0);
		ran++;
		setup_free(&su);
		inputs_free(&in);
	}
	ck_assert_msg(fails == 0, "%d of %d random forced shapes mismatched (see FAIL lines above)", fails, ran);
	ck_assert_msg(ran >= tries / 5, "only %d of %d random shapes planned: the draw tests too little", ran, tries);
}
END_TEST

/* Whether the ws planner gives a plan for op/dt/hidden/rows on this GPU with default options (what
 * autotune asks first); the CTAs that share a row in *cluster (1: a CTA per row; cluster may be NULL). */
/* The ws plan for this shape on the GPU, into *out when not NULL; whether there is one. */
static int ws_plan_get(enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows, struct wsn__kernel_plan *out)
{
	struct wsn__cu_device *cd = gpu->ctx;
	struct wsn__plan_params pp;
	struct wsn__kernel_plan *kp = xcalloc(sizeof(*kp));
	int ok;

	memset(&pp, 0, sizeof(pp));
	pp.op = op;
	pp.dtype = dt;
	pp.hidden = hidden;
	pp.rows = rows;
	wsn_plan_options_init(&pp.opts, op);
	ok = wsn__ws_plan(&cd->props, &pp, kp) == 0;
	if (ok && out)
		*out = *kp;
	free(kp);
	return ok;
}

static int ws_plans(enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows, unsigned *cluster)
{
	struct wsn__kernel_plan *kp = xcalloc(sizeof(*kp));
	int ok = ws_plan_get(op, dt, hidden, rows, kp);

	if (ok && cluster)
		*cluster = kp->cluster > 1 ? kp->cluster : 1;
	free(kp);
	return ok;
}

/*
 * Rows split over a cluster (ws backward): each forced cluster of 2, 4 and 8 CTAs, with the
 * planner's groups and with 2 groups x 2 rows per stage (both exchange slots of several groups),
 * on aligned rows and on strided rows that start off 16 bytes (the element path), over 7 and 2999
 * rows; then the planner's own split of hidden 32768, which no single CTA holds.
 */
START_TEST(test_ws_cluster)
{
	static const int64_t rows[] = { 7, 2999 }, rows32k[] = { 7, 1000 };
	static const enum wsn_op bops[] = { WSN_LAYERNORM_BWD, WSN_RMSNORM_BWD };
	static const unsigned clusters[] = { 2, 4, 8 };
	enum wsn_dtype dt = dtypes[_i];
	int fails = 0, plans = 0;

	for (int strided = 0; strided < 2; strided++) {
		int64_t h = 4096, r = 2999, ld = strided ? h + 3 : h, off = strided;
		struct inputs in;
		struct setup s;

		inputs_make(&in, "ws-cluster", h, r, ld, off);
		setup_init(&s, dt, h, r, ld, off, strided, in.x, in.dy, in.w, in.b);
		for (size_t o = 0; o < 2; o++)
			for (size_t c = 0; c < 3; c++)
				for (int grouped = 0; grouped < 2; grouped++) {
					struct wsn_plan_options po;
					char label[64];
					memset(&po, 0, sizeof(po));
					po.approach = WSN_APPROACH_WS;
					po.cluster = (int)clusters[c];
					if (grouped)
						po.groups = po.unroll = 2;
					snprintf(label, sizeof(label), "ws cluster=%u%s", clusters[c],
						 grouped ? " bdimy=2 unroll=2" : "");
					fails += run_op(&s, bops[o], &po, label, rows, 2, 0);
					plans++;
				}
		setup_free(&s);
		inputs_free(&in);
	}
	{
		int64_t h = 32768, r = 1000;
		struct wsn_plan_options po;
		struct inputs in;
		struct setup s;

		memset(&po, 0, sizeof(po));
		po.approach = WSN_APPROACH_WS;
		inputs_make(&in, "ws-cluster-32k", h, r, h, 0);
		setup_init(&s, dt, h, r, h, 0, 0, in.x, in.dy, in.w, in.b);
		for (size_t o = 0; o < 2; o++) {
			unsigned c = 0;
			ck_assert_msg(ws_plans(bops[o], dt, h, r, &c) && c > 1, "%s %s hidden 32768: the ws planner should "
				      "split the row over a cluster (got %u)", wsn_op_name(bops[o]), wsn_dtype_name(dt), c);
			fails += run_op(&s, bops[o], &po, "ws, the planner's cluster", rows32k, 2, 0);
			plans++;
		}
		setup_free(&s);
		inputs_free(&in);
	}
	ck_assert_msg(fails == 0, "%d mismatches over %d cluster plans (see FAIL lines above)", fails, plans);
}
END_TEST

/*
 * The ws backward's measured shapes on sm_90 (the split table's entries: RMSNorm rows of 2 KB whole
 * and of 4 KB over 2; LayerNorm 16-bit rows of 4 KB over 2 with the statistics copied into each
 * stage; the widths between the powers of two, a row or two a stage, some for one 16-bit dtype
 * only; autotune's winners), each in every dtype at the same row bytes (where a dtype has no shape
 * there: another plan, without the statistics in the stage), on aligned rows and on strided rows
 * that start off 16 bytes, over 7 and 2999 rows: against the CPU, each backward twice
 * (bit-identical sums).
 */
START_TEST(test_ws_measured)
{
	static const struct {
		enum wsn_op op;
		int64_t row_bytes;
		unsigned cluster[3], unroll[3]; /* bf16, f16, f32; cluster 0: no measured shape in that dtype */
		int ring;                       /* the statistics in the stage: bit 0 bf16, bit 1 f16 */
		int64_t rows;                   /* planned for (0: 2999): the shapes for few rows need fewer */
	} m[] = {
		{ WSN_RMSNORM_BWD, 2048, { 1, 1, 1 }, { 1, 1, 1 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 4096, { 2, 2, 2 }, { 1, 1, 1 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 16384, { 8, 8, 8 }, { 1, 1, 1 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 4096, { 2, 2, 0 }, { 2, 2, 0 }, 3, 0 },
		{ WSN_LAYERNORM_BWD, 4608, { 4, 2, 0 }, { 2, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 9216, { 8, 2, 0 }, { 2, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 5120, { 2, 2, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 6144, { 4, 4, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 10240, { 2, 4, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 20480, { 8, 8, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 5120, { 2, 2, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 6144, { 4, 4, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 2048, { 1, 0, 0 }, { 1, 0, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 3072, { 2, 2, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 7168, { 2, 0, 0 }, { 1, 0, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 14336, { 4, 4, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 24576, { 8, 8, 0 }, { 2, 2, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 32768, { 8, 8, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 4608, { 2, 0, 0 }, { 1, 0, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 7168, { 4, 0, 0 }, { 1, 0, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 9216, { 4, 0, 0 }, { 1, 0, 0 }, 0, 0 },
		/* the shapes for few rows (16 per SM and fewer: 2111 rows; 31 and more: 2999) */
		{ WSN_LAYERNORM_BWD, 2048, { 1, 1, 0 }, { 2, 2, 0 }, 0, 2111 },
		{ WSN_LAYERNORM_BWD, 4096, { 4, 4, 0 }, { 1, 1, 0 }, 0, 2111 },
		{ WSN_RMSNORM_BWD, 4096, { 4, 2, 2 }, { 1, 1, 1 }, 0, 2111 },
		{ WSN_LAYERNORM_BWD, 8192, { 4, 4, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 8192, { 4, 4, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 16384, { 8, 8, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 65536, { 8, 8, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 65536, { 8, 8, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 32768, { 0, 8, 0 }, { 0, 1, 0 }, 0, 0 },
	};
	struct wsn__cu_device *cd = gpu->ctx;
	struct wsn__kernel_plan *kp = xcalloc(sizeof(*kp));
	enum wsn_dtype dt = dtypes[_i];
	int fails = 0, d = dt == WSN_BF16 ? 0 : dt == WSN_F16 ? 1 : 2;

	for (size_t i = 0; i < WSN_ARRAY_SIZE(m); i++) {
		int64_t h = m[i].row_bytes / (int64_t)wsn_dtype_size(dt), r = m[i].rows ? m[i].rows : 2999;
		const int64_t run_rows[2] = { 7, r };

		ck_assert_msg(ws_plan_get(m[i].op, dt, h, r, kp), "%s", wsn_last_error());
		if (cd->props.arch == 90 && m[i].cluster[d])
			ck_assert_msg(strstr(kp->why, "measured shape: ") && (kp->cluster > 1 ? kp->cluster : 1) == m[i].cluster[d] &&
					      kp->unroll == m[i].unroll[d] && kp->stats_ring == (m[i].ring >> d & 1),
				      "%s: cluster %u unroll %u ring %d: %s", kp->entry, kp->cluster, kp->unroll, kp->stats_ring,
				      kp->why);
		else
			ck_assert_msg(!kp->stats_ring && !strstr(kp->why, "measured shape: "), "%s: a measured shape: %s",
				      kp->entry, kp->why);
		for (int strided = 0; strided < 2; strided++) {
			int64_t ld = strided ? h + 3 : h, off = strided;
			struct wsn_plan_options po;
			struct inputs in;
			struct setup s;

			memset(&po, 0, sizeof(po));
			po.approach = WSN_APPROACH_WS;
			inputs_make(&in, "ws-measured", h, r, ld, off);
			setup_init(&s, dt, h, r, ld, off, strided, in.x, in.dy, in.w, in.b);
			fails += run_op(&s, m[i].op, &po, "ws, measured shape", run_rows, 2, 0);
			setup_free(&s);
			inputs_free(&in);
		}
	}
	free(kp);
	ck_assert_msg(fails == 0, "%d mismatches (see FAIL lines above)", fails);
}
END_TEST

/*
 * LayerNorm bwd bf16 2K's plan (on sm_90 the producer copies each row's statistics into its stage, a
 * float per row at the statistics' stride) with its mean and rstd contiguous from a 16-byte
 * boundary (checked against the CPU), then starting 1 and 3 floats past one, and every 2nd and 3rd
 * float, the floats between them poisoned: the same dx, dweight and dbias bits each time. 2999
 * rows: a last block of one row.
 */
START_TEST(test_ws_stats_layouts)
{
	static const struct {
		int64_t off, stride;
	} lay[] = { { 1, 1 }, { 3, 1 }, { 0, 2 }, { 1, 3 } };
	static const int64_t rows[] = { 2999 };
	const enum wsn_op op = WSN_LAYERNORM_BWD;
	const int64_t h = 2048, r = 2999;
	size_t rh = (size_t)(r * h) * 2, hb = (size_t)h * 2;
	struct wsn__cu_device *cd = gpu->ctx;
	struct wsn__kernel_plan *kp = xcalloc(sizeof(*kp));
	unsigned char *dx = xcalloc(rh), *dw = xcalloc(hb), *db = xcalloc(hb);
	float *hs = xcalloc((size_t)(r * 3 + 3) * 4);
	struct wsn_plan_options po;
	struct inputs in;
	struct setup s;
	struct wsn_plan *gp;
	int fails;

	/* ws forced (auto would take it too at 2999 rows); nothing else forced, so the measured shape holds */
	wsn_plan_options_init(&po, op);
	po.approach = WSN_APPROACH_WS;
	ck_assert_msg(ws_plan_get(op, WSN_BF16, h, r, kp), "%s", wsn_last_error());
	ck_assert_msg(kp->stats_ring == (cd->props.arch == 90), "%s: statistics in the stage %d: %s", kp->entry,
		      kp->stats_ring, kp->why);
	inputs_make(&in, "ws-stats", h, r, h, 0);
	setup_init(&s, WSN_BF16, h, r, h, 0, 0, in.x, in.dy, in.w, in.b);
	fails = run_op(&s, op, &po, "ws, statistics contiguous", rows, 1, 0);
	ck_assert_msg(fails == 0, "%d mismatches against the CPU (see FAIL lines above)", fails);
	memcpy(dx, s.gdx, rh);
	memcpy(dw, s.gdw, hb);
	memcpy(db, s.gdb, hb);
	OK(wsn_plan_create(gpu, op, r, h, WSN_BF16, &po, &gp));
	{
		char d[4096];
		/* the plan that runs is the one checked above, statistics in the stage or not */
		ck_assert_int_ge(wsn_plan_describe(gp, d, sizeof(d)), 0);
		ck_assert_msg(strstr(d, kp->entry) != NULL && !strstr(d, " + the rows' statistics") == !kp->stats_ring,
			      "not %s (statistics in the stage %d):\n%s", kp->entry, kp->stats_ring, d);
	}
	for (size_t i = 0; i < WSN_ARRAY_SIZE(lay); i++) {
		int64_t n = lay[i].off + (r - 1) * lay[i].stride + 1;
		void *dm = dalloc((size_t)n * 4), *dr = dalloc((size_t)n * 4);
		struct wsn_args a = args_of(&s, op, r, 1);

		for (int t = 0; t < 2; t++) {
			const float *src = t ? s.hrstd_ln : s.hmean;
			for (int64_t k = 0; k < n; k++)
				hs[k] = 1e30f; /* what lies between the rows' floats is not theirs */
			for (int64_t k = 0; k < r; k++)
				hs[lay[i].off + k * lay[i].stride] = src[k];
			upload(t ? dr : dm, hs, (size_t)n * 4);
		}
		a.mean = mat(dm, WSN_F32, WSN_MEM_DEVICE, r, 1, lay[i].stride, lay[i].off);
		a.rstd = mat(dr, WSN_F32, WSN_MEM_DEVICE, r, 1, lay[i].stride, lay[i].off);
		poison(s.ddx, rh);
		poison(s.ddw, hb);
		poison(s.ddb, hb);
		OK(wsn_plan_execute(gp, &a, NULL));
		OK(wsn_stream_sync(gpu, NULL));
		download(s.gdx, s.ddx, rh);
		download(s.gdw, s.ddw, hb);
		download(s.gdb, s.ddb, hb);
		printf("%s layernorm-bwd bf16 hidden=2048 rows=2999 statistics from float %lld, every %lld%s\n",
		       memcmp(s.gdx, dx, rh) || memcmp(s.gdw, dw, hb) || memcmp(s.gdb, db, hb) ? "FAIL" : "ok",
		       (long long)lay[i].off, (long long)lay[i].stride, lay[i].stride > 1 ? "" : " (contiguous)");
		fflush(stdout);
		fails += memcmp(s.gdx, dx, rh) != 0 || memcmp(s.gdw, dw, hb) != 0 || memcmp(s.gdb, db, hb) != 0;
		OK(wsn_mem_free(gpu, dm));
		OK(wsn_mem_free(gpu, dr));
	}
	wsn_plan_destroy(gp);
	setup_free(&s);
	inputs_free(&in);
	free(hs);
	free(dx);
	free(dw);
	free(db);
	free(kp);
	ck_assert_msg(fails == 0, "%d layouts of the statistics changed the outputs (see FAIL lines above)", fails);
}
END_TEST

/*
 * The heuristic's ws plan on hidden sizes that are not multiples of the vector width (16-byte rows
 * cannot be copied exactly: element path), a larger one, and strided rows starting off 16 bytes.
 */
START_TEST(test_ws_shapes)
{
	static const int64_t hs[] = { 3, 1001, 4097 };
	static const int64_t rows[] = { 1, 7, 1000 };
	struct wsn_plan_options po;
	int fails = 0;

	memset(&po, 0, sizeof(po));
	po.approach = WSN_APPROACH_WS;
	for (size_t i = 0; i <= sizeof(hs) / sizeof(hs[0]); i++) {
		int strided = i == sizeof(hs) / sizeof(hs[0]);
		int64_t h = strided ? 1000 : hs[i], ld = strided ? h + 3 : h, off = strided ? 1 : 0, r = 1000;
		struct inputs in;

		inputs_make(&in, "ws-shapes", h, r, ld, off);
		for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
			struct setup s;
			setup_init(&s, dtypes[d], h, r, ld, off, strided, in.x, in.dy, in.w, in.b);
			for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
				fails += run_op(&s, ops[o], &po, "ws", rows, 3, 0);
			setup_free(&s);
		}
		inputs_free(&in);
	}
	ck_assert_msg(fails == 0, "%d mismatches (see FAIL lines above)", fails);
}
END_TEST

/* LayerNorm backward of 16384 x 2048 bf16 with f32 mean [rows] and rstd [rows, 1], ws forced. */
START_TEST(test_ws_ln_bwd_mixed_stats)
{
	static const int64_t rows[] = { 16384 };
	int64_t h = 2048, r = 16384;
	struct wsn_plan_options po;
	struct inputs in;
	struct setup s;
	int fails;

	memset(&po, 0, sizeof(po));
	po.approach = WSN_APPROACH_WS;
	inputs_make(&in, "ws-mixed", h, r, h, 0);
	setup_init(&s, WSN_BF16, h, r, h, 0, 0, in.x, in.dy, in.w, in.b);
	s.stats2d = 2; /* args_of: mean [rows], rstd [rows, 1] */
	fails = run_op(&s, WSN_LAYERNORM_BWD, &po, "ws, mean [rows], rstd [rows, 1]", rows, 1, 0);
	setup_free(&s);
	inputs_free(&in);
	ck_assert_msg(fails == 0, "mismatches (see FAIL lines above)");
}
END_TEST

START_TEST(test_device_info)
{
	struct wsn_device_info di;
	struct wsn_backend_info bi;

	OK(wsn_device_info(gpu, &di));
	printf("%s: %s %s, %d SMs, %.1f GiB, opt-in smem %d, smem/SM %d, regs/SM %d, L2 %lld, mem %d kHz x %d bit = %.0f GB/s, "
	       "PCIe gen %d x%d at %s, clusters %d, driver %d\n",
	       di.spec, di.name, di.arch, di.multiprocessors, (double)di.total_mem / (1 << 30), di.smem_per_block_optin,
	       di.smem_per_sm, di.regs_per_sm, (long long)di.l2_bytes, di.mem_clock_khz, di.mem_bus_width,
	       di.mem_peak_gbs, di.pcie_gen, di.pcie_width, di.pci_bus_id, di.cluster_launch, di.driver_version);
	ck_assert_str_eq(di.backend, "cuda");
	ck_assert(di.name[0]);
	ck_assert_int_ge(di.cc_major, 1);
	ck_assert_int_gt(di.multiprocessors, 0);
	ck_assert_int_gt(di.total_mem, 0);
	ck_assert_int_gt(di.smem_per_block_optin, 48 * 1024 - 1);
	ck_assert_int_gt(di.regs_per_sm, 0);
	ck_assert_int_gt(di.l2_bytes, 0);
	ck_assert_int_gt(di.mem_bus_width, 0);
	ck_assert_int_ge(di.driver_version, 12000);
	ck_assert(di.pci_bus_id[0]);
	for (int i = 0; i < wsn_backend_count(); i++) {
		OK(wsn_backend_info(i, &bi));
		if (!strcmp(bi.name, "cuda")) {
			printf("cuda backend: %s\n", bi.note);
			ck_assert(bi.available);
			ck_assert_int_ge(bi.device_count, 1);
		}
	}
}
END_TEST

/* Pinned memory, async copies on two streams ordered by an event, and event timing. */
START_TEST(test_pinned_async)
{
	static const size_t sizes[] = { 4096 + 16, 3u << 20, 64u << 20 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		struct wsn_stream *s1, *s2;
		struct wsn_event *e0, *e1, *e2;
		unsigned char *h1, *h2, *page;
		void *d1, *d2;
		float ms = -1;

		OK(wsn_host_alloc(gpu, n, (void **)&h1));
		OK(wsn_host_alloc(gpu, n, (void **)&h2));
		for (size_t k = 0; k < n; k++)
			h1[k] = (unsigned char)(k * 131 + i);
		memset(h2, 0, n);
		d1 = dalloc(n);
		d2 = dalloc(n);
		OK(wsn_stream_create(gpu, &s1));
		OK(wsn_stream_create(gpu, &s2));
		OK(wsn_event_create(gpu, &e0));
		OK(wsn_event_create(gpu, &e1));
		OK(wsn_event_create(gpu, &e2));
		OK(wsn_event_record(e0, s1));
		OK(wsn_memcpy(gpu, d1, h1, n, WSN_COPY_H2D, s1));
		OK(wsn_memcpy(gpu, d2, d1, n, WSN_COPY_D2D, s1));
		OK(wsn_event_record(e1, s1));
		OK(wsn_stream_wait_event(s2, e1));
		OK(wsn_memcpy(gpu, h2, d2, n, WSN_COPY_D2H, s2));
		OK(wsn_event_record(e2, s2));
		OK(wsn_event_sync(e2));
		ck_assert_msg(!memcmp(h1, h2, n), "async round trip of %zu bytes differs", n);
		OK(wsn_event_elapsed(e0, e1, &ms));
		ck_assert_msg(ms >= 0 && ms < 10000, "elapsed %g ms", (double)ms);
		printf("pinned %zu bytes: H2D + D2D in %.3f ms\n", n, (double)ms);
		/* a hold of 3 ms: the event behind it is not done right after it is queued, and the two
		 * events around it lie 3 ms or more apart (after a first hold that loads its kernel: on a
		 * fresh machine the JIT took 130 ms, which the GPU would spend between the events) */
		OK(wsn_stream_hold(s1, 1000));
		OK(wsn_stream_sync(gpu, s1));
		OK(wsn_event_record(e0, s1));
		OK(wsn_stream_hold(s1, 3000000));
		OK(wsn_event_record(e1, s1));
		ck_assert_int_eq(wsn_event_query(e1), 0);
		OK(wsn_event_sync(e1));
		ck_assert_int_eq(wsn_event_query(e1), 1);
		OK(wsn_event_elapsed(e0, e1, &ms));
		ck_assert_msg(ms >= 2.99f && ms < 100.0f, "a 3 ms hold measured %g ms", (double)ms);
		/* synchronous copies from pageable memory, and memset */
		page = xcalloc(n);
		OK(wsn_mem_set(gpu, d1, 0x5a, n, NULL));
		OK(wsn_memcpy(gpu, page, d1, n, WSN_COPY_D2H, NULL));
		for (size_t k = 0; k < n; k++)
			ck_assert_msg(page[k] == 0x5a, "memset byte %zu is %d", k, page[k]);
		OK(wsn_memcpy(gpu, h2, h1, n, WSN_COPY_H2H, s1));
		ck_assert(!memcmp(h1, h2, n));
		free(page);
		OK(wsn_stream_sync(gpu, s1));
		OK(wsn_stream_sync(gpu, NULL));
		OK(wsn_event_destroy(e0));
		OK(wsn_event_destroy(e1));
		OK(wsn_event_destroy(e2));
		OK(wsn_stream_destroy(s1));
		OK(wsn_stream_destroy(s2));
		OK(wsn_mem_free(gpu, d1));
		OK(wsn_mem_free(gpu, d2));
		OK(wsn_host_free(gpu, h1));
		ck_assert_int_eq(wsn_host_free(gpu, h1), WSN_EINVAL); /* already freed */
		OK(wsn_host_free(gpu, h2));
	}
}
END_TEST

/* A 2-D bf16 descriptor encodes; each broken rule gives WSN_ETMA naming it. */
START_TEST(test_tma)
{
	struct wsn__cu_device *cd = gpu->ctx;
	CUtensorMap map __attribute__((aligned(64)));
	struct wsn__tma_desc d, bad;
	char *base = dalloc(1 << 20);

	WSN_CU_SCOPE(scope);
	OK(wsn__cu_enter(cd, &scope));
	memset(&d, 0, sizeof(d));
	d.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
	d.rank = 2;
	d.global = base;
	d.dims[0] = 1024;
	d.dims[1] = 256;
	d.strides[0] = 2048;
	d.box[0] = 64;
	d.box[1] = 64;
	d.elem_strides[0] = d.elem_strides[1] = 1;
	d.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
	OK(wsn__tma_encode(&map, &d));

#define EXPECT_RULE(stmt, word)                                                                           \
	do {                                                                                              \
		int e_;                                                                                   \
		bad = d;                                                                                  \
		stmt;                                                                                     \
		e_ = wsn__tma_encode(&map, &bad);                                                         \
		ck_assert_msg(e_ == WSN_ETMA, "%s: got %s: %s", #stmt, wsn_err_name(e_), wsn_last_error()); \
		ck_assert_msg(strstr(wsn_last_error(), word), "%s: message '%s' lacks '%s'", #stmt,       \
			      wsn_last_error(), word);                                                    \
	} while (0)
	EXPECT_RULE(bad.global = base + 8, "16-byte aligned");
	EXPECT_RULE(bad.strides[0] = 2056, "multiples of 16");
	EXPECT_RULE(bad.strides[0] = (uint64_t)1 << 40, "below 2^40");
	EXPECT_RULE(bad.box[1] = 0, "box dimensions 1..256");
	EXPECT_RULE(bad.box[1] = 257, "box dimensions 1..256");
	EXPECT_RULE((bad.box[0] = 4, bad.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE), "multiple of 16");
	EXPECT_RULE(bad.rank = 0, "rank 1..5");
	EXPECT_RULE(bad.rank = 6, "rank 1..5");
	EXPECT_RULE(bad.dims[1] = 0, "global dimension 1..2^32");
	EXPECT_RULE(bad.elem_strides[1] = 9, "element strides 1..8");
	EXPECT_RULE(bad.swizzle = CU_TENSOR_MAP_SWIZZLE_32B, "swizzle span");
	EXPECT_RULE(bad.box[0] = 128, "swizzle span");
#undef EXPECT_RULE
	OK(wsn_mem_free(gpu, base));
}
END_TEST

START_TEST(test_describe)
{
	struct wsn_plan *p;
	char *text;
	int n;

	OK(wsn_plan_create(gpu, WSN_LAYERNORM_BWD, 4096, 4096, WSN_BF16, NULL, &p));
	n = wsn_plan_describe(p, NULL, 0);
	ck_assert_int_gt(n, 0);
	text = xcalloc((size_t)n + 1);
	ck_assert_int_eq(wsn_plan_describe(p, text, (size_t)n + 1), n);
	printf("%s", text);
	ck_assert(strstr(text, "JIT:"));
	ck_assert(strstr(text, "registers"));
	ck_assert(strstr(text, "spills"));
	free(text);
	wsn_plan_destroy(p);
}
END_TEST

/* Invalid PTX: WSN_EJIT, with the driver's error name and the JIT log in the message. */
START_TEST(test_jit_error)
{
	static const char bad[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
				  ".visible .entry broken()\n{\n\tthis_is_not_an_instruction %r0;\n\tret;\n}\n";
	struct wsn__cu_module m;
	int e;

	WSN_CU_SCOPE(scope);
	OK(wsn__cu_enter(gpu->ctx, &scope));
	e = wsn__cu_module_load(&m, bad, "a deliberately broken module");
	printf("JIT error: %s\nJIT log: %s\n", wsn_last_error(), m.error_log ? m.error_log : "(none)");
	ck_assert_int_eq(e, WSN_EJIT);
	ck_assert(strstr(wsn_last_error(), "cuModuleLoadDataEx"));
	ck_assert(strstr(wsn_last_error(), "CUDA_ERROR_"));
	ck_assert(m.error_log && m.error_log[0]);
	ck_assert(strstr(wsn_last_error(), "JIT log: "));
	wsn__cu_module_unload(&m);
}
END_TEST

/* A kernel that stores 42 at its pointer argument. */
static const char store_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
				".visible .entry wsn_test_store(.param .u64 p)\n{\n"
				"\t.reg .u64 %rd<2>;\n\t.reg .u32 %r<2>;\n"
				"\tld.param.u64 %rd0, [p];\n\tmov.u32 %r0, 42;\n\tst.global.u32 [%rd0], %r0;\n\tret;\n}\n";

/* Too many threads per CTA: WSN_ELAUNCH naming cuLaunchKernelEx and the driver's error. */
START_TEST(test_launch_too_many_threads)
{
	struct wsn__cu_module m;
	struct wsn__cu_kernel k;
	uint32_t v = 0;
	void *d = dalloc(4);
	CUdeviceptr p = (CUdeviceptr)(uintptr_t)d;
	void *params[] = { &p };
	int e;

	WSN_CU_SCOPE(scope);
	OK(wsn__cu_enter(gpu->ctx, &scope));
	OK(wsn__cu_module_load(&m, store_ptx, "the store test kernel"));
	OK(wsn__cu_kernel_get(&m, "wsn_test_store", 32, 0, &k));
	OK(wsn__cu_launch(&k, 1, 1, NULL, params));
	OK(wsn_stream_sync(gpu, NULL));
	download(&v, d, 4);
	ck_assert_uint_eq(v, 42);
	k.block = 4096;
	e = wsn__cu_launch(&k, 1, 1, NULL, params);
	printf("too many threads: %s\n", wsn_last_error());
	ck_assert_int_eq(e, WSN_ELAUNCH);
	ck_assert(strstr(wsn_last_error(), "cuLaunchKernelEx"));
	ck_assert(strstr(wsn_last_error(), "CUDA_ERROR_"));
	/* not sticky: the device still works */
	OK(wsn_stream_sync(gpu, NULL));
	OK(wsn_mem_free(gpu, d));
	wsn__cu_module_unload(&m);
}
END_TEST

/*
 * A bad tensor pointer faults in the kernel: the error surfaces as WSN_ELAUNCH with
 * CUDA_ERROR_ILLEGAL_ADDRESS, and every later call fails cleanly instead of hanging. The context is
 * lost afterwards, so this runs last (and in its own process when Check forks, the default).
 */
START_TEST(test_illegal_address)
{
	struct wsn_plan *p;
	struct wsn_args a;
	void *y = dalloc(64 * 1024 * 4), *again = NULL;
	int e;

	OK(wsn_plan_create(gpu, WSN_RMSNORM_FWD, 64, 1024, WSN_F32, NULL, &p));
	memset(&a, 0, sizeof(a));
	OK(wsn_tensor_2d(&a.x, (void *)(uintptr_t)0x10000, WSN_F32, WSN_MEM_DEVICE, 64, 1024));
	OK(wsn_tensor_2d(&a.y, y, WSN_F32, WSN_MEM_DEVICE, 64, 1024));
	OK(wsn_tensor_1d(&a.weight, y, WSN_F32, WSN_MEM_DEVICE, 1024));
	e = wsn_plan_execute(p, &a, NULL);
	if (e == 0)
		e = wsn_stream_sync(gpu, NULL);
	printf("illegal address: %s\n", wsn_last_error());
	ck_assert_int_eq(e, WSN_ELAUNCH);
	ck_assert(strstr(wsn_last_error(), "CUDA_ERROR_ILLEGAL_ADDRESS"));
	/* sticky: later calls fail with a named error, and do not hang */
	e = wsn_mem_alloc(gpu, 1024, &again);
	printf("after the fault, allocation: %s: %s\n", wsn_err_name(e), wsn_last_error());
	ck_assert_int_lt(e, 0);
	ck_assert_int_lt(wsn_stream_sync(gpu, NULL), 0);
	ck_assert_int_lt(wsn_plan_execute(p, &a, NULL) < 0 ? -1 : wsn_stream_sync(gpu, NULL), 0);
	wsn_plan_destroy(p);
	wsn_mem_free(gpu, y);
}
END_TEST

/* ---- autotune: each case gets a fresh $XDG_CACHE_HOME ---- */

static char *tune_home;

static void setup_tune(void)
{
	tune_home = tu_tmpdir();
	setenv("XDG_CACHE_HOME", tune_home, 1);
	setup();
}

static void teardown_tune(void)
{
	teardown();
	unsetenv("XDG_CACHE_HOME");
	tu_rmtree(tune_home);
	free(tune_home);
	tune_home = NULL;
}

/*
 * The entries under $XDG_CACHE_HOME/wsnorm/tune (no temporary file may be left); with needle, the
 * path of the one entry whose name holds it in *path (malloc'd; NULL if none).
 */
static int tune_entries(const char *needle, char **path)
{
	char dir[4096];
	struct dirent *de;
	DIR *d;
	int n = 0;

	if (path)
		*path = NULL;
	snprintf(dir, sizeof(dir), "%s/wsnorm/tune", tune_home);
	if (!(d = opendir(dir)))
		return 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.') {
			ck_assert_msg(strncmp(de->d_name, ".tmp-", 5), "temporary file left: %s", de->d_name);
			continue;
		}
		n++;
		if (needle && path && strstr(de->d_name, needle)) {
			ck_assert_msg(*path == NULL, "two entries hold '%s'", needle);
			ck_assert(asprintf(path, "%s/%s", dir, de->d_name) > 0);
		}
	}
	closedir(d);
	return n;
}

/* The first line of a file, malloc'd ("" when empty). */
static char *first_line(const char *path)
{
	char *line = xcalloc(512);
	FILE *f = fopen(path, "r");

	ck_assert_msg(f != NULL, "cannot open %s", path);
	if (!fgets(line, 512, f))
		line[0] = '\0';
	fclose(f);
	return line;
}

/* The plan's description, malloc'd. */
static char *describe(const struct wsn_plan *p)
{
	int n = wsn_plan_describe(p, NULL, 0);
	char *text;

	ck_assert_int_gt(n, 0);
	text = xcalloc((size_t)n + 1);
	ck_assert_int_eq(wsn_plan_describe(p, text, (size_t)n + 1), n);
	return text;
}

/* The kernel family of a description's "approach:" line. */
static enum wsn_approach approach_of(const char *desc)
{
	const char *a = strstr(desc, "\napproach:");
	char word[16] = "";

	ck_assert_msg(a && sscanf(a + 10, " %15[a-z]", word) == 1, "no approach line in:\n%s", desc);
	return !strcmp(word, "ws") ? WSN_APPROACH_WS : WSN_APPROACH_MULTIWAVE;
}

/* An autotune plan of op for s (options as wsn_plan_options_init, autotune on, plus po's approach and groups). */
static struct wsn_plan *tune_plan(const struct setup *s, enum wsn_op op, const struct wsn_plan_options *po,
				  char **desc)
{
	struct wsn_plan_options o;
	struct wsn_plan *p = NULL;
	double t0 = wsn__now();

	wsn_plan_options_init(&o, op);
	o.autotune = 1;
	if (po) {
		o.approach = po->approach;
		o.groups = po->groups;
	}
	OK(wsn_plan_create(gpu, op, s->rows, s->hidden, s->dt, &o, &p));
	*desc = describe(p);
	printf("%s %s hidden=%lld rows=%lld autotune plan in %.2f s: %.*s\n", wsn_op_name(op), wsn_dtype_name(s->dt),
	       (long long)s->hidden, (long long)s->rows, wsn__now() - t0,
	       (int)strcspn(strstr(*desc, "autotune:") ? strstr(*desc, "autotune:") : "(no autotune line)", "\n"),
	       strstr(*desc, "autotune:") ? strstr(*desc, "autotune:") : "(no autotune line)");
	fflush(stdout);
	return p;
}

/*
 * (a) The first autotune plan of each op (bf16, hidden 4096, 4096 rows) times both families and
 * writes exactly one entry naming the approach the plan runs; its results match the CPU reference.
 * (b) A second plan hits the cache: same approach, no new entry, the entry unchanged.
 */
START_TEST(test_autotune_measure_then_hit)
{
	static const int64_t rows[] = { 1, 1000, 4096 };
	int64_t h = 4096, r = 4096;
	struct inputs in;
	struct setup s;
	int fails = 0;

	inputs_make(&in, "autotune", h, r, h, 0);
	setup_init(&s, WSN_BF16, h, r, h, 0, 0, in.x, in.dy, in.w, in.b);
	ck_assert_int_eq(tune_entries(NULL, NULL), 0);
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
		enum wsn_op op = ops[o];
		struct wsn_plan *gp, *cp;
		char *desc, *desc2, *path, *line, *line2, needle[96], want[160];
		enum wsn_approach a;
		double worst = 0;
		int before = tune_entries(NULL, NULL), two = ws_plans(op, s.dt, h, r, NULL);

		gp = tune_plan(&s, op, NULL, &desc);
		a = approach_of(desc);
		ck_assert_msg(strstr(desc, two ? "\nautotune:      measured now (no entry): ws " :
						 "\nautotune:      one candidate (no entry): multiwave"),
			      "%s: first autotune plan:\n%s", wsn_op_name(op), desc);
		snprintf(needle, sizeof(needle), "_%s_bf16_h4096_", wsn_op_name(op));
		ck_assert_int_eq(tune_entries(needle, &path), before + 1);
		ck_assert_msg(path != NULL, "no entry holds '%s'", needle);
		ck_assert_msg(strstr(desc, path), "the description does not name the entry %s:\n%s", path, desc);
		line = first_line(path);
		snprintf(want, sizeof(want), "wsnorm-tune 3 approach=%s shape=", wsn_approach_name(a));
		ck_assert_msg(!strncmp(line, want, strlen(want)), "entry '%s', the plan runs %s", line,
			      wsn_approach_name(a));
		ck_assert_msg(!two || strstr(line, " rows=4096\n"), "entry '%s': timed on 4096 rows expected", line);
		OK(wsn_plan_create(cpu, op, s.rows, s.hidden, s.dt, NULL, &cp));
		for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
			fails += run_rows(&s, op, gp, cp, rows[i], &worst);
		wsn_plan_destroy(gp);

		gp = tune_plan(&s, op, NULL, &desc2);
		ck_assert_msg(strstr(desc2, "\nautotune:      cache hit ("), "%s: second autotune plan:\n%s", wsn_op_name(op),
			      desc2);
		ck_assert_int_eq(approach_of(desc2), a);
		ck_assert_int_eq(tune_entries(needle, NULL), before + 1);
		line2 = first_line(path);
		ck_assert_str_eq(line2, line);
		fails += run_rows(&s, op, gp, cp, r, &worst);
		printf("%s %s autotune %s: worst rel_l2 %.2e\n", fails ? "FAIL" : "ok", wsn_op_name(op), wsn_approach_name(a),
		       worst);
		wsn_plan_destroy(gp);
		wsn_plan_destroy(cp);
		free(desc);
		free(desc2);
		free(path);
		free(line);
		free(line2);
	}
	setup_free(&s);
	inputs_free(&in);
	ck_assert_msg(fails == 0, "%d mismatches (see FAIL lines above)", fails);
}
END_TEST

/* (c) Garbage in the entry is a miss: measured again and rewritten as a whole entry. */
START_TEST(test_autotune_corrupt_entry)
{
	static const char garbage[] = "\x01\x02 not an entry \xff\n";
	int64_t h = 4096, r = 2048;
	struct inputs in;
	struct setup s;
	struct wsn_plan *gp;
	char *desc, *path, *line;

	inputs_make(&in, "autotune-corrupt", h, r, h, 0);
	setup_init(&s, WSN_BF16, h, r, h, 0, 0, in.x, in.dy, in.w, in.b);
	gp = tune_plan(&s, WSN_RMSNORM_FWD, NULL, &desc);
	wsn_plan_destroy(gp);
	free(desc);
	ck_assert_int_eq(tune_entries("_rmsnorm-fwd_bf16_h4096_", &path), 1);
	ck_assert(path != NULL);
	tu_write_file(path, garbage, sizeof(garbage) - 1);
	gp = tune_plan(&s, WSN_RMSNORM_FWD, NULL, &desc);
	ck_assert_msg(strstr(desc, "\nautotune:      measured now (malformed entry): ") ||
			      strstr(desc, "\nautotune:      one candidate (malformed entry): "),
		      "after garbage in the entry:\n%s", desc);
	ck_assert_int_eq(tune_entries(NULL, NULL), 1);
	line = first_line(path);
	ck_assert_msg(!strncmp(line, "wsnorm-tune 3 approach=", 23) && strstr(line, " rows="), "rewritten entry '%s'",
		      line);
	ck_assert_msg(strstr(line, wsn_approach_name(approach_of(desc))), "entry '%s' does not name the plan's approach",
		      line);
	wsn_plan_destroy(gp);
	free(desc);
	free(line);
	free(path);
	setup_free(&s);
	inputs_free(&in);
}
END_TEST

/*
 * (d) An entry naming ws for a shape ws cannot plan (LayerNorm backward f32, hidden 32769: a row of
 * dy and x is over the shared-memory budget and an odd row does not split over a cluster) is not used: the plan falls back to deciding anew (multi-wave,
 * the one candidate) and the entry is rewritten.
 */
START_TEST(test_autotune_stale_ws_entry)
{
	static const struct { enum wsn_dtype dt; int64_t h; } shapes[] = { { WSN_F32, 32769 }, { WSN_BF16, 65537 } };
	int64_t r = 1024;
	struct setup s;
	struct wsn_plan *gp;
	char *desc, *path, *line, needle[96];
	const char *stale =
		"wsnorm-tune 3 approach=ws shape=0,0,0,0,0 ws_us=1.000 shape_us=0.000 multiwave_us=2.000 shapes=0 rows=1024\n";
	const char *mw = "wsnorm-tune 3 approach=multiwave shape=0,0,0,0,0 ws_us=0.000 shape_us=0.000 multiwave_us=0.000 "
			 "shapes=0 rows=0\n";
	size_t i;

	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (!ws_plans(WSN_LAYERNORM_BWD, shapes[i].dt, shapes[i].h, r, NULL))
			break;
	ck_assert_msg(i < sizeof(shapes) / sizeof(shapes[0]),
		      "the ws planner plans every LayerNorm backward shape this test knows: give it one it cannot");
	memset(&s, 0, sizeof(s)); /* tune_plan reads the shape only */
	s.dt = shapes[i].dt;
	s.hidden = shapes[i].h;
	s.rows = r;
	snprintf(needle, sizeof(needle), "_layernorm-bwd_%s_h%lld_", wsn_dtype_name(s.dt), (long long)s.hidden);
	gp = tune_plan(&s, WSN_LAYERNORM_BWD, NULL, &desc);
	ck_assert_msg(strstr(desc, "\nautotune:      one candidate (no entry): multiwave, ws does not plan ("),
		      "no ws plan:\n%s", desc);
	wsn_plan_destroy(gp);
	free(desc);
	ck_assert_int_eq(tune_entries(needle, &path), 1);
	ck_assert(path != NULL);
	line = first_line(path);
	ck_assert_str_eq(line, mw);
	free(line);
	tu_write_file(path, stale, strlen(stale));
	gp = tune_plan(&s, WSN_LAYERNORM_BWD, NULL, &desc);
	ck_assert_msg(!strstr(desc, "cache hit"), "a ws entry for a shape ws cannot plan was used:\n%s", desc);
	ck_assert_msg(strstr(desc, "\nautotune:      one candidate (the cached ws no longer plans): multiwave"),
		      "stale ws entry:\n%s", desc);
	ck_assert_int_eq(approach_of(desc), WSN_APPROACH_MULTIWAVE);
	line = first_line(path);
	ck_assert_str_eq(line, mw);
	wsn_plan_destroy(gp);
	free(desc);
	free(line);
	free(path);
}
END_TEST

/*
 * (f) The backward's other ws shapes. LayerNorm bwd bf16 hidden 3584 (no measured shape there):
 * the first plan times multi-wave, the planner's ws and the other shapes, and the entry counts them;
 * whatever won runs and matches the CPU, and a second plan hits with the same shape. An entry
 * naming a shape (over 4, 8 groups of 32, a row a stage, 16 stages) is taken as it stands: the plan
 * runs that shape, described as autotune's and not as forced, and matches the CPU. At hidden 3592
 * (no cluster splits it into whole vectors) an entry naming a cluster of 8 no longer plans: a miss,
 * measured again and rewritten.
 */
START_TEST(test_autotune_shapes)
{
	const char *given = "wsnorm-tune 3 approach=ws shape=4,32,8,1,16 ws_us=2.000 shape_us=1.000 multiwave_us=3.000 "
			    "shapes=5 rows=16384\n";
	int64_t r = 16384;
	struct inputs in;
	struct setup s;
	struct wsn_plan *gp, *cp;
	char *desc, *desc2, *path, *line, *line2;
	double worst = 0;
	int fails = 0, shapes = -1;
	unsigned sh[5];

	inputs_make(&in, "autotune-shapes", 3592, r, 3592, 0);
	for (int w = 0; w < 2; w++) {
		int64_t h = w ? 3592 : 3584;
		char needle[96];

		setup_init(&s, WSN_BF16, h, r, h, 0, 0, in.x, in.dy, in.w, in.b);
		snprintf(needle, sizeof(needle), "_layernorm-bwd_bf16_h%lld_", (long long)h);
		gp = tune_plan(&s, WSN_LAYERNORM_BWD, NULL, &desc);
		ck_assert_msg(strstr(desc, "\nautotune:      measured now (no entry): ws ") &&
				      strstr(desc, " other ws shapes (the fastest "),
			      "first autotune plan:\n%s", desc);
		ck_assert_int_eq(tune_entries(needle, &path), w + 1);
		line = first_line(path);
		ck_assert_msg(sscanf(line, "wsnorm-tune 3 approach=%*s shape=%u,%u,%u,%u,%u ws_us=%*f shape_us=%*f "
					   "multiwave_us=%*f shapes=%d rows=16384", &sh[0], &sh[1], &sh[2], &sh[3], &sh[4],
				     &shapes) == 6 && shapes > 0,
			      "entry '%s'", line);
		/* the shape in the entry is the one the description names and runs */
		ck_assert_int_eq(!!sh[0], !!strstr(desc, " -> ws in that shape; "));
		ck_assert_int_eq(!!sh[0], !!strstr(desc, "autotune's shape kept; "));
		ck_assert_ptr_null(strstr(desc, "forced"));
		OK(wsn_plan_create(cpu, WSN_LAYERNORM_BWD, s.rows, s.hidden, s.dt, NULL, &cp));
		fails += run_rows(&s, WSN_LAYERNORM_BWD, gp, cp, r, &worst);
		fails += run_rows(&s, WSN_LAYERNORM_BWD, gp, cp, 777, &worst);
		wsn_plan_destroy(gp);
		gp = tune_plan(&s, WSN_LAYERNORM_BWD, NULL, &desc2);
		ck_assert_msg(strstr(desc2, "\nautotune:      cache hit (") && strstr(desc2, " other ws shapes (the fastest "),
			      "second plan:\n%s", desc2);
		ck_assert_int_eq(!!sh[0], !!strstr(desc2, " in autotune's shape (cluster "));
		line2 = first_line(path);
		ck_assert_str_eq(line2, line);
		fails += run_rows(&s, WSN_LAYERNORM_BWD, gp, cp, r, &worst);
		wsn_plan_destroy(gp);
		free(desc);
		free(desc2);
		free(line2);
		free(line);

		if (!w) { /* an entry naming a shape: taken as it stands */
			tu_write_file(path, given, strlen(given));
			gp = tune_plan(&s, WSN_LAYERNORM_BWD, NULL, &desc);
			ck_assert_msg(strstr(desc, " -> ws in autotune's shape (cluster 4, 8 row groups of 32 threads, 1 row a "
						   "stage, 16 stages)") &&
					      strstr(desc, "\nblock:         384 threads = producer 128 + bdimy 8 row groups x bdimx 32;") &&
					      strstr(desc, "\ncluster:       4 CTAs per row") &&
					      strstr(desc, "\npipeline:      16 stages x 1 row (unroll)") &&
					      strstr(desc, "autotune's shape kept; ") && !strstr(desc, "forced"),
				      "given shape:\n%s", desc);
			fails += run_rows(&s, WSN_LAYERNORM_BWD, gp, cp, r, &worst);
			fails += run_rows(&s, WSN_LAYERNORM_BWD, gp, cp, 5, &worst);
			wsn_plan_destroy(gp);
			free(desc);
		} else { /* a shape that no longer plans: measured again */
			const char *stale = "wsnorm-tune 3 approach=ws shape=8,32,8,1,16 ws_us=2.000 shape_us=1.000 "
					    "multiwave_us=3.000 shapes=5 rows=16384\n";
			tu_write_file(path, stale, strlen(stale));
			gp = tune_plan(&s, WSN_LAYERNORM_BWD, NULL, &desc);
			ck_assert_msg(strstr(desc, "measured now (the cached ws shape (cluster 8, 8 row groups of 32 threads, 1 "
						   "row a stage, 16 stages) no longer plans): ws "),
				      "stale shape:\n%s", desc);
			line = first_line(path);
			ck_assert_msg(strcmp(line, stale) && !strncmp(line, "wsnorm-tune 3 approach=", 23), "entry '%s'", line);
			fails += run_rows(&s, WSN_LAYERNORM_BWD, gp, cp, r, &worst);
			wsn_plan_destroy(gp);
			free(desc);
			free(line);
		}
		wsn_plan_destroy(cp);
		free(path);
		setup_free(&s);
	}
	inputs_free(&in);
	printf("%s autotune shapes: worst rel_l2 %.2e\n", fails ? "FAIL" : "ok", worst);
	ck_assert_msg(fails == 0, "%d mismatches (see FAIL lines above)", fails);
}
END_TEST

/* (e) autotune with a forced approach or a forced parameter: the force wins, the cache is not touched. */
START_TEST(test_autotune_forced)
{
	struct wsn_plan_options po[3];
	struct setup s;
	static const char *const want[3] = { "forced approach ws", "forced approach multiwave", "forced groups 1" };

	memset(po, 0, sizeof(po));
	po[0].approach = WSN_APPROACH_WS;
	po[1].approach = WSN_APPROACH_MULTIWAVE;
	po[2].approach = WSN_APPROACH_AUTO;
	po[2].groups = 1;
	memset(&s, 0, sizeof(s));
	s.dt = WSN_BF16;
	s.hidden = 4096;
	s.rows = 4096;
	for (int i = 0; i < 3; i++) {
		char *desc, line[160];
		struct wsn_plan *gp = tune_plan(&s, WSN_LAYERNORM_FWD, &po[i], &desc);

		snprintf(line, sizeof(line), "\nautotune:      ignored: %s (the cache is neither read nor written)\n", want[i]);
		ck_assert_msg(strstr(desc, line), "want '%s' in:\n%s", line + 1, desc);
		if (i < 2)
			ck_assert_int_eq(approach_of(desc), po[i].approach);
		wsn_plan_destroy(gp);
		free(desc);
	}
	ck_assert_int_eq(tune_entries(NULL, NULL), 0);
}
END_TEST

/* ---- backward calls back to back on one stream (runtime/overlap.c) ---- */

enum { OV_SETS = 3, OV_CALLS = 5 };

/* host and device copies of one bf16 [rows, hidden] matrix or f32 [rows] vector */
struct ov_buf {
	void *h, *d;
	size_t bytes;
};

static void ov_buf_make(struct ov_buf *b, size_t bytes)
{
	b->bytes = bytes;
	b->h = xcalloc(bytes);
	b->d = dalloc(bytes);
}

static void ov_buf_random(struct ov_buf *b, enum wsn_dtype dt, const char *tag, float mean, float sd)
{
	size_t n = b->bytes / wsn_dtype_size(dt);
	float *f = random_f32(n, tag, mean, sd);

	OK(wsn_dtype_convert(b->h, dt, f, WSN_F32, n));
	free(f);
	upload(b->d, b->h, b->bytes);
}

/*
 * Five backward calls queued on one stream without a sync: three on sets of their own (they may start
 * beside each other), one whose dy is the first call's dx (it starts early and waits for that call's
 * finish word), and one whose dy is the call right before's dx (it waits at its start); dweight and
 * dbias are shared, so the last call's are what is left. Every dx and the last sums are checked
 * against the CPU run in the same order; the stream's record of the calls (which started early, which
 * waited) is checked against what the runtime must have decided; and the same calls with
 * WSNORM_OVERLAP=0 give the same bits. 4096 rows fill the GPU; 128 rows leave room for several grids at once.
 */
START_TEST(test_overlap)
{
	static const int64_t rowss[] = { 4096, 128 };
	static const enum wsn_op bops[] = { WSN_LAYERNORM_BWD, WSN_RMSNORM_BWD };
	/* call k: x set, dy (< OV_SETS: a set's dy, else dx of call dy - OV_SETS), dx buffer */
	static const int cx[OV_CALLS] = { 0, 1, 2, 1, 2 }, cdy[OV_CALLS] = { 0, 1, 2, OV_SETS + 0, OV_SETS + 3 };
	const int64_t rows = rowss[_i / 2], hidden = 2048;
	const enum wsn_op op = bops[_i % 2];
	const enum wsn_dtype dt = WSN_BF16;
	const int ln = op == WSN_LAYERNORM_BWD;
	const size_t es = wsn_dtype_size(dt), mb = (size_t)(rows * hidden) * es, vb = (size_t)hidden * es;
	struct ov_buf x[OV_SETS], dy[OV_SETS], mean[OV_SETS], rstd[OV_SETS], dx[OV_CALLS], w, b, dw, db;
	void *cdx[OV_CALLS], *cdw = xcalloc(vb), *cdb = xcalloc(vb), *bits[2][OV_CALLS + 2];
	struct wsn_plan *gp = NULL, *cp = NULL;
	struct wsn_stream *s = NULL;
	double worst = 0;
	int fails = 0;
	char what[128], tag[32];

	for (int k = 0; k < OV_SETS; k++) {
		ov_buf_make(&x[k], mb);
		ov_buf_make(&dy[k], mb);
		ov_buf_make(&mean[k], (size_t)rows * 4);
		ov_buf_make(&rstd[k], (size_t)rows * 4);
		snprintf(tag, sizeof(tag), "ov-x%d", k);
		ov_buf_random(&x[k], dt, tag, 0.5f, 1.0f);
		snprintf(tag, sizeof(tag), "ov-dy%d", k);
		ov_buf_random(&dy[k], dt, tag, 0.0f, 1.0f);
		snprintf(tag, sizeof(tag), "ov-mean%d", k);
		ov_buf_random(&mean[k], WSN_F32, tag, 0.5f, 0.1f);
		snprintf(tag, sizeof(tag), "ov-rstd%d", k);
		ov_buf_random(&rstd[k], WSN_F32, tag, 1.0f, 0.05f);
	}
	for (int c = 0; c < OV_CALLS; c++) {
		ov_buf_make(&dx[c], mb);
		cdx[c] = xcalloc(mb);
	}
	ov_buf_make(&w, vb);
	ov_buf_make(&b, vb);
	ov_buf_make(&dw, vb);
	ov_buf_make(&db, vb);
	ov_buf_random(&w, dt, "ov-w", 1.0f, 0.25f);
	ov_buf_random(&b, dt, "ov-b", 0.0f, 0.25f);

	/* the CPU, call by call in the same order */
	OK(wsn_plan_create(cpu, op, rows, hidden, dt, NULL, &cp));
	OK(wsn_plan_create(gpu, op, rows, hidden, dt, NULL, &gp));
	for (int c = 0; c < OV_CALLS; c++) {
		struct wsn_args a;
		memset(&a, 0, sizeof(a));
		a.x = mat(x[cx[c]].h, dt, WSN_MEM_HOST, rows, hidden, hidden, 0);
		a.dy = mat(cdy[c] < OV_SETS ? dy[cdy[c]].h : cdx[cdy[c] - OV_SETS], dt, WSN_MEM_HOST, rows, hidden, hidden, 0);
		a.weight = vec(w.h, dt, WSN_MEM_HOST, hidden);
		if (ln)
			a.mean = stats(mean[cx[c]].h, WSN_MEM_HOST, rows, 0);
		a.rstd = stats(rstd[cx[c]].h, WSN_MEM_HOST, rows, 0);
		a.dx = mat(cdx[c], dt, WSN_MEM_HOST, rows, hidden, hidden, 0);
		a.dweight = vec(cdw, dt, WSN_MEM_HOST, hidden);
		if (ln)
			a.dbias = vec(cdb, dt, WSN_MEM_HOST, hidden);
		OK(wsn_plan_execute(cp, &a, NULL));
	}

	for (int run = 0; run < 2; run++) {
		setenv("WSNORM_OVERLAP", run ? "0" : "1", 1);
		OK(wsn_stream_create(gpu, &s));
		for (int c = 0; c < OV_CALLS; c++)
			poison(dx[c].d, mb);
		poison(dw.d, vb);
		poison(db.d, vb);
		OK(wsn_stream_sync(gpu, NULL));
		/* the record of the calls that may still run after each call (runtime/overlap.c) */
		static const int early_n[OV_CALLS] = { 1, 2, 3, 4, 1 };
		for (int c = 0; c < OV_CALLS; c++) {
			struct wsn_args a;
			memset(&a, 0, sizeof(a));
			a.x = mat(x[cx[c]].d, dt, WSN_MEM_DEVICE, rows, hidden, hidden, 0);
			a.dy = mat(cdy[c] < OV_SETS ? dy[cdy[c]].d : dx[cdy[c] - OV_SETS].d, dt, WSN_MEM_DEVICE, rows, hidden,
				   hidden, 0);
			a.weight = vec(w.d, dt, WSN_MEM_DEVICE, hidden);
			if (ln)
				a.mean = stats(mean[cx[c]].d, WSN_MEM_DEVICE, rows, 0);
			a.rstd = stats(rstd[cx[c]].d, WSN_MEM_DEVICE, rows, 0);
			a.dx = mat(dx[c].d, dt, WSN_MEM_DEVICE, rows, hidden, hidden, 0);
			a.dweight = vec(dw.d, dt, WSN_MEM_DEVICE, hidden);
			if (ln)
				a.dbias = vec(db.d, dt, WSN_MEM_DEVICE, hidden);
			OK(wsn_plan_execute(gp, &a, s));
			ck_assert_msg(s->ovl.seq == (uint64_t)c + 1, "call %d numbered %llu", c, (unsigned long long)s->ovl.seq);
			ck_assert_msg(s->ovl.n == (run ? 1 : early_n[c]), "%s rows %lld, overlap %s: after call %d the stream "
				      "records %d calls that may still run, expected %d", wsn_op_name(op), (long long)rows,
				      run ? "off" : "on", c, s->ovl.n, run ? 1 : early_n[c]);
		}
		if (!run)
			ck_assert_msg(s->ovl.c[0].seq == OV_CALLS && s->ovl.n == 1,
				      "the call reading the dx of the call right before it waits at its start");
		OK(wsn_stream_sync(gpu, s));
		for (int c = 0; c < OV_CALLS; c++) {
			bits[run][c] = xcalloc(mb);
			download(bits[run][c], dx[c].d, mb);
		}
		bits[run][OV_CALLS] = xcalloc(vb);
		bits[run][OV_CALLS + 1] = xcalloc(vb);
		download(bits[run][OV_CALLS], dw.d, vb);
		download(bits[run][OV_CALLS + 1], db.d, vb);
		OK(wsn_stream_destroy(s));
		s = NULL;
		for (int c = 0; c < OV_CALLS; c++) {
			snprintf(what, sizeof(what), "%s rows %lld overlap %s call %d", wsn_op_name(op), (long long)rows,
				 run ? "off" : "on", c);
			fails += check_out(what, "dx", dt, bits[run][c], cdx[c], rows * hidden, tolerance(dt), 0, &worst);
		}
		fails += check_out(what, "dweight (last call)", dt, bits[run][OV_CALLS], cdw, hidden, tolerance(dt), 0, &worst);
		if (ln)
			fails += check_out(what, "dbias (last call)", dt, bits[run][OV_CALLS + 1], cdb, hidden, tolerance(dt), 0,
					   &worst);
	}
	unsetenv("WSNORM_OVERLAP");
	for (int c = 0; c < OV_CALLS + 2; c++) {
		size_t n = c < OV_CALLS ? mb : vb;
		if (c == OV_CALLS + 1 && !ln)
			continue;
		if (memcmp(bits[0][c], bits[1][c], n)) {
			printf("FAIL %s rows %lld: %s %d differs between overlap on and off\n", wsn_op_name(op), (long long)rows,
			       c < OV_CALLS ? "dx of call" : "sums", c);
			fails++;
		}
		free(bits[0][c]);
		free(bits[1][c]);
	}
	printf("%s overlap %s rows %lld: worst rel_l2 %.2e\n", fails ? "FAIL" : "ok", wsn_op_name(op), (long long)rows, worst);
	wsn_plan_destroy(gp);
	wsn_plan_destroy(cp);
	for (int k = 0; k < OV_SETS; k++) {
		struct ov_buf *bs[] = { &x[k], &dy[k], &mean[k], &rstd[k] };
		for (int i = 0; i < 4; i++) {
			free(bs[i]->h);
			OK(wsn_mem_free(gpu, bs[i]->d));
		}
	}
	for (int c = 0; c < OV_CALLS; c++) {
		free(dx[c].h);
		free(cdx[c]);
		OK(wsn_mem_free(gpu, dx[c].d));
	}
	{
		struct ov_buf *bs[] = { &w, &b, &dw, &db };
		for (int i = 0; i < 4; i++) {
			free(bs[i]->h);
			OK(wsn_mem_free(gpu, bs[i]->d));
		}
	}
	free(cdw);
	free(cdb);
	ck_assert_int_eq(fails, 0);
}
END_TEST

static Suite *suite_gpu(void)
{
	Suite *s = suite_create("gpu");
	TCase *tc;

	tc = tcase_create("device");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_device_info);
	tcase_add_test(tc, test_pinned_async);
	tcase_add_test(tc, test_tma);
	tcase_add_test(tc, test_describe);
	tcase_add_test(tc, test_jit_error);
	tcase_add_test(tc, test_launch_too_many_threads);
	suite_add_tcase(s, tc);

	tc = tcase_create("ops");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_ops, 0, (int)(sizeof(hiddens) / sizeof(hiddens[0])));
	tcase_add_test(tc, test_strided_stats);
	suite_add_tcase(s, tc);

	tc = tcase_create("wide");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_wide_rows, 0, (int)(sizeof(dtypes) / sizeof(dtypes[0])));
	suite_add_tcase(s, tc);

	tc = tcase_create("ws");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_ws_shapes);
	tcase_add_test(tc, test_ws_ln_bwd_mixed_stats);
	suite_add_tcase(s, tc);

	tc = tcase_create("ws-forced");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_ws_forced, 0, (int)(sizeof(dtypes) / sizeof(dtypes[0])));
	suite_add_tcase(s, tc);

	tc = tcase_create("fuzz");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_fuzz, 0, 2); /* ws, multi-wave */
	suite_add_tcase(s, tc);

	tc = tcase_create("ws-stats");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_ws_stats_layouts);
	suite_add_tcase(s, tc);
	tc = tcase_create("ws-cluster");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 600);
	tcase_add_loop_test(tc, test_ws_cluster, 0, (int)(sizeof(dtypes) / sizeof(dtypes[0])));
	tcase_add_loop_test(tc, test_ws_measured, 0, (int)(sizeof(dtypes) / sizeof(dtypes[0])));
	suite_add_tcase(s, tc);

	tc = tcase_create("overlap");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_loop_test(tc, test_overlap, 0, 4); /* LayerNorm, RMSNorm x 4096, 128 rows */
	suite_add_tcase(s, tc);

	tc = tcase_create("autotune");
	tcase_add_checked_fixture(tc, setup_tune, teardown_tune);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_autotune_measure_then_hit);
	tcase_add_test(tc, test_autotune_corrupt_entry);
	tcase_add_test(tc, test_autotune_stale_ws_entry);
	tcase_add_test(tc, test_autotune_forced);
	tcase_add_test(tc, test_autotune_shapes);
	suite_add_tcase(s, tc);

	tc = tcase_create("fault"); /* last: it poisons the context */
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_illegal_address);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * Whether cuda:0 opens, asked in a child process: CUDA cannot be used across fork(), and the tests
 * run in forked children, so this process must not initialise the driver itself.
 */
static int probe(char *why, size_t len)
{
	int fds[2], status = 0;
	ssize_t n;
	pid_t pid;

	why[0] = '\0';
	if (pipe(fds) < 0 || (pid = fork()) < 0) {
		snprintf(why, len, "cannot fork a probe");
		return WSN_EIO;
	}
	if (pid == 0) {
		struct wsn_device *d;
		int e = wsn_device_open("cuda:0", &d);

		close(fds[0]);
		if (write(fds[1], wsn_last_error(), strlen(wsn_last_error())) < 0)
			_exit(127);
		_exit(e == 0 ? 0 : e == WSN_ENODRIVER ? 1 : e == WSN_ENODEV ? 2 : e == WSN_EBACKEND ? 3 : 4);
	}
	close(fds[1]);
	n = read(fds[0], why, len - 1);
	why[n > 0 ? n : 0] = '\0';
	close(fds[0]);
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status))
		return WSN_EIO;
	switch (WEXITSTATUS(status)) {
	case 0: return 0;
	case 1: return WSN_ENODRIVER;
	case 2: return WSN_ENODEV;
	case 3: return WSN_EBACKEND;
	default: return WSN_EIO;
	}
}

int main(void)
{
	char why[1024];
	SRunner *sr;
	int e, failed;

	e = probe(why, sizeof(why));
	if (e == WSN_ENODRIVER || e == WSN_ENODEV || e == WSN_EBACKEND) {
		printf("no CUDA device: %s\n", why[0] ? why : wsn_strerror(e));
		return 77;
	}
	if (e < 0) {
		printf("cuda:0 does not open: %s\n", why);
		return 1;
	}
	printf("wsnorm GPU tests, WSNORM_SEED=0x%llx\n", (unsigned long long)tu_seed());
	sr = srunner_create(suite_gpu());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

#endif /* WSN_HAVE_CUDA */
