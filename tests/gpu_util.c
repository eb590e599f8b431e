/* SPDX-License-Identifier: MIT */
/* tests/gpu_util.c: what the check_gpu_*.c tests share: devices, buffers and runs checked against the CPU backend. */
#include "config.h"
#include <stdio.h>

#include "testutil.h"
#include "cuda/cuda_internal.h"
#include "core/clock.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_util.h"

struct wsn_device *gpu_dev, *cpu_dev;

void gpu_setup(void)
{
	OK(wsn_device_open("cuda:0", &gpu_dev));
	OK(wsn_device_open("cpu", &cpu_dev));
}

void gpu_teardown(void)
{
	wsn_device_close(gpu_dev);
	wsn_device_close(cpu_dev);
	gpu_dev = cpu_dev = NULL;
}

void *gpu_dalloc(size_t bytes)
{
	void *p = NULL;

	OK(wsn_mem_alloc(gpu_dev, bytes, &p));
	return p;
}

void gpu_upload(void *d, const void *h, size_t n)
{
	OK(wsn_memcpy(gpu_dev, d, h, n, WSN_COPY_H2D, NULL));
}

void gpu_download(void *h, const void *d, size_t n)
{
	OK(wsn_memcpy(gpu_dev, h, d, n, WSN_COPY_D2H, NULL));
}

void gpu_poison(void *d, size_t n)
{
	if (d)
		OK(wsn_mem_set(gpu_dev, d, 0xff, n, NULL));
}

struct wsn_tensor gpu_mat(void *base, enum wsn_dtype dt, enum wsn_mem mem, int64_t rows, int64_t hidden,
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

struct wsn_tensor gpu_vec(void *p, enum wsn_dtype dt, enum wsn_mem mem, int64_t n)
{
	struct wsn_tensor t;

	OK(wsn_tensor_1d(&t, p, dt, mem, n));
	return t;
}

struct wsn_tensor gpu_stats(void *p, enum wsn_mem mem, int64_t rows, int two_d)
{
	return two_d ? gpu_mat(p, WSN_F32, mem, rows, 1, 1, 0) : gpu_vec(p, WSN_F32, mem, rows);
}

double gpu_tolerance(enum wsn_dtype dt)
{
	return dt == WSN_F32 ? 1e-5 : 1e-2;
}

void *gpu_xcalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	ck_assert_msg(p != NULL, "calloc %zu", n);
	return p;
}

void gpu_setup_init(struct setup *s, enum wsn_dtype dt, int64_t hidden, int64_t rows, int64_t ld, int64_t off,
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
	s->hx = gpu_xcalloc(s->in_elems * s->es);
	s->hdy = gpu_xcalloc(s->in_elems * s->es);
	s->hw = gpu_xcalloc((size_t)hidden * s->es);
	s->hb = gpu_xcalloc((size_t)hidden * s->es);
	OK(wsn_dtype_convert(s->hx, dt, x32, WSN_F32, s->in_elems));
	OK(wsn_dtype_convert(s->hdy, dt, dy32, WSN_F32, s->in_elems));
	OK(wsn_dtype_convert(s->hw, dt, w32, WSN_F32, (size_t)hidden));
	OK(wsn_dtype_convert(s->hb, dt, b32, WSN_F32, (size_t)hidden));
	s->x = gpu_dalloc(s->in_elems * s->es);
	s->dy = gpu_dalloc(s->in_elems * s->es);
	s->w = gpu_dalloc((size_t)hidden * s->es);
	s->b = gpu_dalloc((size_t)hidden * s->es);
	gpu_upload(s->x, s->hx, s->in_elems * s->es);
	gpu_upload(s->dy, s->hdy, s->in_elems * s->es);
	gpu_upload(s->w, s->hw, (size_t)hidden * s->es);
	gpu_upload(s->b, s->hb, (size_t)hidden * s->es);

	{ /* the outputs, zeroed on the host, fresh on the device: rows x hidden, hidden, a float a row */
		void **host_rows[] = { &s->cy, &s->cdx, &s->gy, &s->gdx, &s->gy2, &s->gdx2 };
		void **host_cols[] = { &s->cdw, &s->cdb, &s->gdw, &s->gdb, &s->gdw2, &s->gdb2 };
		float **host_stats[] = { &s->cmean, &s->crstd, &s->gmean, &s->grstd, &s->hmean, &s->hrstd_ln, &s->hrstd_rms };
		void **dev_rows[] = { &s->dyo, &s->ddx }, **dev_cols[] = { &s->ddw, &s->ddb };
		void **dev_stats[] = { &s->dmean, &s->drstd, &s->mean_in, &s->rstd_ln_in, &s->rstd_rms_in };

		for (size_t i = 0; i < WSN_ARRAY_SIZE(host_rows); i++)
			*host_rows[i] = gpu_xcalloc(rh * s->es);
		for (size_t i = 0; i < WSN_ARRAY_SIZE(host_cols); i++)
			*host_cols[i] = gpu_xcalloc((size_t)hidden * s->es);
		for (size_t i = 0; i < WSN_ARRAY_SIZE(host_stats); i++)
			*host_stats[i] = gpu_xcalloc((size_t)rows * 4);
		for (size_t i = 0; i < WSN_ARRAY_SIZE(dev_rows); i++)
			*dev_rows[i] = gpu_dalloc(rh * s->es);
		for (size_t i = 0; i < WSN_ARRAY_SIZE(dev_cols); i++)
			*dev_cols[i] = gpu_dalloc((size_t)hidden * s->es);
		for (size_t i = 0; i < WSN_ARRAY_SIZE(dev_stats); i++)
			*dev_stats[i] = gpu_dalloc((size_t)rows * 4);
	}

	/* the backward inputs: the CPU forward statistics of the same x */
	for (int rms = 0; rms < 2; rms++) {
		enum wsn_op op = rms ? WSN_RMSNORM_FWD : WSN_LAYERNORM_FWD;
		struct wsn_plan *p;
		struct wsn_args a;

		memset(&a, 0, sizeof(a));
		OK(wsn_plan_create(cpu_dev, op, rows, hidden, dt, NULL, &p));
		a.x = gpu_mat(s->hx, dt, WSN_MEM_HOST, rows, hidden, ld, off);
		a.weight = gpu_vec(s->hw, dt, WSN_MEM_HOST, hidden);
		if (!rms)
			a.bias = gpu_vec(s->hb, dt, WSN_MEM_HOST, hidden);
		a.y = gpu_mat(s->cy, dt, WSN_MEM_HOST, rows, hidden, hidden, 0);
		if (!rms)
			a.mean = gpu_stats(s->hmean, WSN_MEM_HOST, rows, stats2d);
		a.rstd = gpu_stats(rms ? s->hrstd_rms : s->hrstd_ln, WSN_MEM_HOST, rows, stats2d);
		OK(wsn_plan_execute(p, &a, NULL));
		wsn_plan_destroy(p);
	}
	gpu_upload(s->mean_in, s->hmean, (size_t)rows * 4);
	gpu_upload(s->rstd_ln_in, s->hrstd_ln, (size_t)rows * 4);
	gpu_upload(s->rstd_rms_in, s->hrstd_rms, (size_t)rows * 4);
}

void gpu_setup_free(struct setup *s)
{
	void *host[] = { s->hx, s->hdy, s->hw, s->hb, s->cy, s->cdx, s->gy, s->gdx, s->gy2, s->gdx2, s->cdw, s->cdb,
			 s->gdw, s->gdb, s->gdw2, s->gdb2, s->cmean, s->crstd, s->gmean, s->grstd, s->hmean,
			 s->hrstd_ln, s->hrstd_rms };
	void *dev[] = { s->x, s->dy, s->w, s->b, s->dyo, s->ddx, s->ddw, s->ddb, s->dmean, s->drstd, s->mean_in,
			s->rstd_ln_in, s->rstd_rms_in };

	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		free(host[i]);
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		OK(wsn_mem_free(gpu_dev, dev[i]));
}

struct wsn_args gpu_args_of(const struct setup *s, enum wsn_op op, int64_t r, int on_gpu)
{
	enum wsn_mem m = on_gpu ? WSN_MEM_DEVICE : WSN_MEM_HOST;
	int64_t h = s->hidden;
	int ln = wsn_op_is_layernorm(op);
	struct wsn_args a;

	memset(&a, 0, sizeof(a));
	a.x = gpu_mat(on_gpu ? s->x : s->hx, s->dt, m, r, h, s->ld, s->off);
	a.weight = gpu_vec(on_gpu ? s->w : s->hw, s->dt, m, h);
	if (ln)
		a.bias = gpu_vec(on_gpu ? s->b : s->hb, s->dt, m, h);
	if (!wsn_op_is_backward(op)) {
		a.y = gpu_mat(on_gpu ? s->dyo : s->cy, s->dt, m, r, h, h, 0);
		if (ln)
			a.mean = gpu_stats(on_gpu ? s->dmean : (void *)s->cmean, m, r, s->stats2d);
		a.rstd = gpu_stats(on_gpu ? s->drstd : (void *)s->crstd, m, r, s->stats2d);
		return a;
	}
	a.dy = gpu_mat(on_gpu ? s->dy : s->hdy, s->dt, m, r, h, s->ld, s->off);
	a.dx = gpu_mat(on_gpu ? s->ddx : s->cdx, s->dt, m, r, h, h, 0);
	if (ln)
		a.mean = gpu_stats(on_gpu ? s->mean_in : (void *)s->hmean, m, r, s->stats2d == 1);
	a.rstd = gpu_stats(on_gpu ? (ln ? s->rstd_ln_in : s->rstd_rms_in) : (void *)(ln ? s->hrstd_ln : s->hrstd_rms), m,
		       r, s->stats2d != 0);
	a.dweight = gpu_vec(on_gpu ? s->ddw : s->cdw, s->dt, m, h);
	if (ln)
		a.dbias = gpu_vec(on_gpu ? s->ddb : s->cdb, s->dt, m, h);
	return a;
}

double gpu_elem(const void *p, enum wsn_dtype dt, int64_t i)
{
	float f;

	wsn_dtype_convert(&f, WSN_F32, (const char *)p + i * (int64_t)wsn_dtype_size(dt), dt, 1);
	return f;
}

double gpu_dx_scale(const struct setup *s, enum wsn_op op, int64_t r)
{
	const float *rstd = op == WSN_LAYERNORM_BWD ? s->hrstd_ln : s->hrstd_rms;
	double sum = 0;

	for (int64_t i = 0; i < r; i++) {
		for (int64_t j = 0; j < s->hidden; j++) {
			double t = rstd[i] * gpu_elem(s->hdy, s->dt, s->off + i * s->ld + j) * gpu_elem(s->hw, s->dt, j);
			sum += t * t;
		}
	}
	return sqrt(sum);
}

int gpu_check_out(const char *what, const char *name, enum wsn_dtype dt, const void *got, const void *ref, int64_t n,
		     double tol, double scale, double *worst)
{
	struct wsn_tensor g = gpu_vec((void *)got, dt, WSN_MEM_HOST, n), r = gpu_vec((void *)ref, dt, WSN_MEM_HOST, n);
	struct wsn_compare c;
	double rn = 0, rel;

	OK(wsn_tensor_compare(&g, &r, &c));
	for (int64_t i = 0; i < n; i++)
		rn += gpu_elem(ref, dt, i) * gpu_elem(ref, dt, i);
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

int gpu_run_rows(struct setup *s, enum wsn_op op, struct wsn_plan *gp, struct wsn_plan *cp, int64_t r,
		    double *worst)
{
	size_t rh = (size_t)(r * s->hidden) * s->es, hb = (size_t)s->hidden * s->es;
	int ln = wsn_op_is_layernorm(op), fails = 0, e;
	struct wsn_args ca = gpu_args_of(s, op, r, 0), ga = gpu_args_of(s, op, r, 1);
	double tol = gpu_tolerance(s->dt);
	char what[160];

	snprintf(what, sizeof(what), "%s %s hidden=%lld rows=%lld%s", wsn_op_name(op), wsn_dtype_name(s->dt),
		 (long long)s->hidden, (long long)r, s->ld != s->hidden || s->off ? " (strided, unaligned x)" : "");
	OK(wsn_plan_execute(cp, &ca, NULL));
	for (int run = 0; run < (wsn_op_is_backward(op) ? 2 : 1); run++) {
		if (!wsn_op_is_backward(op)) {
			gpu_poison(s->dyo, rh);
			gpu_poison(s->dmean, (size_t)r * 4);
			gpu_poison(s->drstd, (size_t)r * 4);
		} else {
			gpu_poison(s->ddx, rh);
			gpu_poison(s->ddw, hb);
			gpu_poison(s->ddb, hb);
		}
		if ((e = wsn_plan_execute(gp, &ga, NULL)) < 0 || (e = wsn_stream_sync(gpu_dev, NULL)) < 0) {
			printf("FAIL %s: %s: %s\n", what, wsn_err_name(e), wsn_last_error());
			return 1;
		}
		if (!wsn_op_is_backward(op)) {
			gpu_download(s->gy, s->dyo, rh);
			gpu_download(s->grstd, s->drstd, (size_t)r * 4);
			fails += gpu_check_out(what, "y", s->dt, s->gy, s->cy, r * s->hidden, tol, 0, worst);
			fails += gpu_check_out(what, "rstd", WSN_F32, s->grstd, s->crstd, r, 1e-5, 0, worst);
			if (ln) {
				gpu_download(s->gmean, s->dmean, (size_t)r * 4);
				fails += gpu_check_out(what, "mean", WSN_F32, s->gmean, s->cmean, r, 1e-5, 0, worst);
			}
			continue;
		}
		gpu_download(run ? s->gdx2 : s->gdx, s->ddx, rh);
		gpu_download(run ? s->gdw2 : s->gdw, s->ddw, hb);
		if (ln)
			gpu_download(run ? s->gdb2 : s->gdb, s->ddb, hb);
		if (!run) {
			fails += gpu_check_out(what, "dx", s->dt, s->gdx, s->cdx, r * s->hidden, tol, gpu_dx_scale(s, op, r), worst);
			fails += gpu_check_out(what, "dweight", s->dt, s->gdw, s->cdw, s->hidden, tol, 0, worst);
			if (ln)
				fails += gpu_check_out(what, "dbias", s->dt, s->gdb, s->cdb, s->hidden, tol, 0, worst);
			continue;
		}
		if (memcmp(s->gdx, s->gdx2, rh) || memcmp(s->gdw, s->gdw2, hb) || (ln && memcmp(s->gdb, s->gdb2, hb))) {
			printf("FAIL %s: two backward runs differ (not deterministic)\n", what);
			fails++;
		}
	}
	return fails;
}

int gpu_run_op_skips; /* forced plans run_op skipped so far */

int gpu_run_op(struct setup *s, enum wsn_op op, const struct wsn_plan_options *po, const char *label,
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
	if ((e = wsn_plan_create(gpu_dev, op, s->rows, s->hidden, s->dt, po ? &o : NULL, &gp)) < 0) {
		if (may_skip && (e == WSN_EINVAL || e == WSN_ESHAPE)) {
			printf("skip %s %s hidden=%lld %s: %s\n", wsn_op_name(op), wsn_dtype_name(s->dt),
			       (long long)s->hidden, label, wsn_last_error());
			gpu_run_op_skips++;
			return 0;
		}
		printf("FAIL %s %s hidden=%lld %s: GPU plan: %s: %s\n", wsn_op_name(op), wsn_dtype_name(s->dt),
		       (long long)s->hidden, label, wsn_err_name(e), wsn_last_error());
		return 1;
	}
	OK(wsn_plan_create(cpu_dev, op, s->rows, s->hidden, s->dt, NULL, &cp));
	for (int i = 0; i < nrows; i++)
		if (rows[i] <= s->rows)
			f += gpu_run_rows(s, op, gp, cp, rows[i], &worst);
	printf("%s %s %s hidden=%lld%s %s: worst rel_l2 %.2e, %.2f s\n", f ? "FAIL" : "ok", wsn_op_name(op),
	       wsn_dtype_name(s->dt), (long long)s->hidden, s->ld != s->hidden || s->off ? " strided" : "", label, worst,
	       wsn__now() - t0);
	fflush(stdout);
	wsn_plan_destroy(gp);
	wsn_plan_destroy(cp);
	return f;
}

float *gpu_random_f32(size_t n, const char *tag, float mean, float stddev)
{
	float *p = gpu_xcalloc(n * 4);
	struct wsn_tensor t = gpu_vec(p, WSN_F32, WSN_MEM_HOST, (int64_t)n);

	OK(wsn_tensor_fill_random(&t, tu_case_seed(tag), mean, stddev));
	return p;
}

void gpu_inputs_make(struct inputs *in, const char *tag, int64_t h, int64_t r, int64_t ld, int64_t off)
{
	size_t n = (size_t)((r - 1) * ld + h + off);
	char t[64];

	snprintf(t, sizeof(t), "%s-x", tag);
	in->x = gpu_random_f32(n, t, 0.5f, 1.0f);
	snprintf(t, sizeof(t), "%s-dy", tag);
	in->dy = gpu_random_f32(n, t, 0.0f, 1.0f);
	snprintf(t, sizeof(t), "%s-w", tag);
	in->w = gpu_random_f32((size_t)h, t, 1.0f, 0.25f);
	snprintf(t, sizeof(t), "%s-b", tag);
	in->b = gpu_random_f32((size_t)h, t, 0.0f, 0.25f);
}

void gpu_inputs_free(struct inputs *in)
{
	free(in->x);
	free(in->dy);
	free(in->w);
	free(in->b);
}

int gpu_ws_plan_get(enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows, struct wsn__kernel_plan *out)
{
	struct wsn__cu_device *cd = gpu_dev->ctx;
	struct wsn__plan_params pp;
	struct wsn__kernel_plan *kp = gpu_xcalloc(sizeof(*kp));
	int ok;

	pp = (struct wsn__plan_params){ .op = op, .dtype = dt, .hidden = hidden, .rows = rows };
	wsn_plan_options_init(&pp.opts, op);
	ok = wsn__ws_plan(&cd->props, &pp, kp) == 0;
	if (ok && out)
		*out = *kp;
	free(kp);
	return ok;
}

int gpu_ws_plans(enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows, unsigned *cluster)
{
	struct wsn__kernel_plan *kp = gpu_xcalloc(sizeof(*kp));
	int ok = gpu_ws_plan_get(op, dt, hidden, rows, kp);

	if (ok && cluster)
		*cluster = kp->cluster > 1 ? kp->cluster : 1;
	free(kp);
	return ok;
}
