/* SPDX-License-Identifier: MIT */
/* launcher/bench_point.c: `wsnorm bench`'s measurement of one point: timed batches behind a stream
 * hold and single calls after an L2 flush, over input sets that exceed the L2 cache, then a check
 * against the CPU reference. */
#include "bench.h"
#include "pipeline.h" /* pl_tolerance, pl_sample_rows, pl_gather: the same check as run's */

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * The kernel family the plan runs: the description's "approach:" line, with "auto+" in front when
 * the planner chose it (auto+ws) or "tuned+" when autotune measured or cached it; "cpu" on the host.
 */
static void plan_approach(const struct wsn_plan *plan, enum wsn_approach asked, int host, char *out, size_t len)
{
	char desc[4096], word[16] = "";
	const char *a, *t;
	int tuned = 0;

	if (host) {
		snprintf(out, len, "cpu");
		return;
	}
	if (wsn_plan_describe(plan, desc, sizeof(desc)) >= 0 && (a = strstr(desc, "approach:")) &&
	    sscanf(a + 9, " %15[a-z]", word) == 1 && asked == WSN_APPROACH_AUTO) {
		if ((t = strstr(desc, "\nautotune:"))) {
			t += strlen("\nautotune:");
			tuned = strncmp(t + strspn(t, " "), "ignored", 7) != 0;
		}
		snprintf(out, len, "%s+%s", tuned ? "tuned" : "auto", word);
	} else {
		snprintf(out, len, "%s", word[0] ? word : wsn_approach_name(asked));
	}
}

/* Kernel time the warm-up runs for at least (milliseconds). */
#define WARM_MS 100.0f
/* Rows of y or dx compared with the CPU reference (evenly spaced, the first and the last). */
#define VERIFY_ROWS 64

/* The random inputs: seed, mean and spread, the same for the timed sets and the reference. */
enum bench_in { IN_X, IN_DY, IN_MEAN, IN_RSTD, IN_W, IN_B };

static void fill_input(enum bench_in k, const struct wsn_tensor *t)
{
	static const struct {
		uint64_t seed;
		float mean, spread;
	} p[] = { [IN_X] = { 11, 0.25f, 1.0f },   [IN_DY] = { 12, 0.0f, 1.0f }, [IN_MEAN] = { 13, 0.25f, 0.1f },
		  [IN_RSTD] = { 14, 1.0f, 0.05f }, [IN_W] = { 15, 1.0f, 0.25f }, [IN_B] = { 16, 0.0f, 0.1f } };

	wsn_tensor_fill_random(t, p[k].seed, p[k].mean, p[k].spread);
}

/* The arguments of one launch of pt's op over `rows` rows of the given tensors in memory mem. */
static void point_args(const struct point *pt, enum wsn_mem mem, int64_t rows, const struct set *st, void *w,
		       void *b, void *dw, void *db, struct wsn_args *a)
{
	int ln = wsn_op_is_layernorm(pt->op);

	memset(a, 0, sizeof(*a));
	wsn_tensor_2d(&a->x, st->x, pt->dt, mem, rows, pt->hidden);
	if (pt->weight)
		wsn_tensor_1d(&a->weight, w, pt->dt, mem, pt->hidden);
	if (pt->bias)
		wsn_tensor_1d(&a->bias, b, pt->dt, mem, pt->hidden);
	wsn_tensor_1d(&a->rstd, st->rstd, WSN_F32, mem, rows);
	if (ln)
		wsn_tensor_1d(&a->mean, st->mean, WSN_F32, mem, rows);
	if (wsn_op_is_backward(pt->op)) {
		wsn_tensor_2d(&a->dy, st->dy, pt->dt, mem, rows, pt->hidden);
		wsn_tensor_2d(&a->dx, st->y, pt->dt, mem, rows, pt->hidden);
		if (pt->weight && dw)
			wsn_tensor_1d(&a->dweight, dw, pt->dt, mem, pt->hidden);
		if (pt->bias && db)
			wsn_tensor_1d(&a->dbias, db, pt->dt, mem, pt->hidden);
	} else {
		wsn_tensor_2d(&a->y, st->y, pt->dt, mem, rows, pt->hidden);
	}
}

/* A point's plan and buffers, launched going round its input sets. */
struct launcher {
	struct wsn_plan *plan;
	const struct point *pt;
	const struct wsn_device_info *di;
	void *w, *b, *dw, *db; /* weight, bias, dweight, dbias */
	const struct set *sets;
	int nsets, seq; /* the next launch takes sets[seq % nsets] */
	struct timer *t;
	int hold;         /* hold the stream before each timed batch (GPUs; 0 where unsupported) */
	uint64_t hold_ns; /* the next hold: HOLD_NS_PER_LAUNCH a launch or more, doubled after one that ended too early */
};

/* Stream holds: at least HOLD_NS_PER_LAUNCH a launch, more than the host takes to submit one (see
 * NOTES v28), doubled after a hold that ended too early, up to HOLD_MAX_NS. */
#define HOLD_NS_PER_LAUNCH 20000ull
#define HOLD_MIN_NS 200000ull
#define HOLD_MAX_NS 2000000000ull
#define HOLD_TRIES 8

/* Launch the plan once on the next set. */
static int bench_launch(struct launcher *l)
{
	struct wsn_args a;

	point_args(l->pt, l->di->exec_mem, l->pt->rows, &l->sets[l->seq++ % l->nsets], l->w, l->b, l->dw, l->db, &a);
	return wsn_plan_execute(l->plan, &a, l->t->s);
}

/*
 * n launches back to back between the timer's two events; *ms: their time. A call of a few
 * microseconds takes the host about as long to submit as the GPU to run, so on a GPU the stream is
 * first held (wsn_stream_hold) while the host queues all n behind the hold: the events then time
 * the GPU, not the host. If the hold was over before the last launch was queued (the start event
 * already done), the batch runs again behind a hold twice as long.
 */
static int timed_launches(struct launcher *l, int n, float *ms)
{
	uint64_t want = (uint64_t)n * HOLD_NS_PER_LAUNCH;
	int err, early = 0;

	if (l->hold_ns < want)
		l->hold_ns = want < HOLD_MIN_NS ? HOLD_MIN_NS : want > HOLD_MAX_NS ? HOLD_MAX_NS : want;
	for (int tries = 0;; tries++) {
		if (l->hold && (err = wsn_stream_hold(l->t->s, l->hold_ns)) < 0) {
			if (err != WSN_ENOTSUP)
				return err;
			l->hold = 0; /* a backend without holds: time the launches as they come */
		}
		if ((err = wsn_event_record(l->t->e0, l->t->s)) < 0)
			return err;
		for (int k = 0; k < n; k++)
			if ((err = bench_launch(l)) < 0)
				return err;
		if ((err = wsn_event_record(l->t->e1, l->t->s)) < 0)
			return err;
		if (l->hold && (early = wsn_event_query(l->t->e0)) < 0)
			return early;
		if ((err = wsn_event_sync(l->t->e1)) < 0 || (err = wsn_event_elapsed(l->t->e0, l->t->e1, ms)) < 0)
			return err;
		if (!l->hold || !early || tries + 1 >= HOLD_TRIES || l->hold_ns >= HOLD_MAX_NS)
			return 0;
		l->hold_ns = 2 * l->hold_ns > HOLD_MAX_NS ? HOLD_MAX_NS : 2 * l->hold_ns;
	}
}

/*
 * Calls launched one at a time, the way a framework calls a norm once per layer: before each, a fill
 * of the flush buffer (more than the L2 holds) so that the call starts with a cold L2; events
 * around the call alone. All are queued before the host waits once, so the fill ahead of each call
 * covers the host's time to submit it. ms[i]: call i's time.
 */
static int single_calls(struct launcher *l, int calls, float *ms)
{
	struct timer *t = l->t;
	int err;

	for (int i = 0; i < calls; i++)
		if ((err = wsn_mem_set(t->dev, t->flush, i & 0xff, t->flush_bytes, t->s)) < 0 ||
		    (err = wsn_event_record(t->call_ev[2 * i], t->s)) < 0 || (err = bench_launch(l)) < 0 ||
		    (err = wsn_event_record(t->call_ev[2 * i + 1], t->s)) < 0)
			return err;
	if ((err = wsn_event_sync(t->call_ev[2 * calls - 1])) < 0)
		return err;
	for (int i = 0; i < calls; i++)
		if ((err = wsn_event_elapsed(t->call_ev[2 * i], t->call_ev[2 * i + 1], &ms[i])) < 0)
			return err;
	return 0;
}

int bench_timer_single(struct timer *t, const struct bench_opts *o, const struct wsn_device_info *di)
{
	uint64_t flush = (uint64_t)di->l2_bytes * FLUSH_L2_TIMES;
	int err;

	if (!(o->timing & TIMING_SINGLE))
		return 0;
	t->flush_bytes = flush > FLUSH_MIN_BYTES ? flush : FLUSH_MIN_BYTES;
	if (!(t->call_ev = calloc((size_t)o->calls * 2, sizeof(*t->call_ev))))
		return WSN_ENOMEM;
	t->calls = o->calls;
	for (int i = 0; i < 2 * o->calls; i++)
		if ((err = wsn_event_create(t->dev, &t->call_ev[i])) < 0)
			return err;
	return wsn_mem_alloc(t->dev, t->flush_bytes, &t->flush);
}

void bench_timer_single_free(struct timer *t)
{
	for (int i = 0; t->call_ev && i < 2 * t->calls; i++)
		wsn_event_destroy(t->call_ev[i]);
	free(t->call_ev);
	wsn_mem_free(t->dev, t->flush);
}

/* Compare n elements of dtype dt; fold the verdict into pt (name: the output). */
static void check_output(struct point *pt, const char *name, const void *got, const void *ref, enum wsn_dtype dt,
			 int64_t n)
{
	struct wsn_tensor tg, tr;
	struct wsn_compare c;
	double tol = pl_tolerance(dt);

	wsn_tensor_1d(&tg, (void *)got, dt, WSN_MEM_HOST, n);
	wsn_tensor_1d(&tr, (void *)ref, dt, WSN_MEM_HOST, n);
	wsn_tensor_compare(&tg, &tr, &c);
	if (c.rel_l2 > pt->worst || isnan(c.rel_l2))
		pt->worst = c.rel_l2;
	if (c.nonfinite == 0 && c.rel_l2 <= tol)
		return;
	if (pt->pass)
		snprintf(pt->why, sizeof(pt->why),
			 "%s rel_l2 %.3g (tolerance %.0e), %lld finite/non-finite disagreements of %lld", name, c.rel_l2,
			 tol, (long long)c.nonfinite, (long long)c.count);
	pt->pass = 0;
}

/* Copy rows idx[0..n) of row_bytes each from the device matrix src into the host's dst. */
static int d2h_rows(struct wsn_device *dev, void *dst, const void *src, const int64_t *idx, int n, size_t row_bytes)
{
	int err = 0;

	for (int i = 0; i < n && !err; i++)
		err = wsn_memcpy(dev, (char *)dst + (size_t)i * row_bytes, (const char *)src + (size_t)idx[i] * row_bytes,
				 row_bytes, WSN_COPY_D2H, NULL);
	return err;
}

/*
 * After the timing, check what the plan computes: poison set 0's outputs, launch once on it, and
 * compare VERIFY_ROWS rows of y or dx (and the forward's mean and rstd) with the CPU reference on
 * those rows, and dweight/dbias with the CPU reference over every row. Sets pt->checked, pass,
 * worst and why; a runtime error is returned.
 */
static int bench_verify(struct launcher *l, struct wsn_device *cpu, int inject, struct point *pt)
{
	struct wsn_device *dev = l->t->dev;
	const struct set *s0 = &l->sets[0];
	int bwd = wsn_op_is_backward(pt->op), ln = wsn_op_is_layernorm(pt->op);
	int sums = bwd && (pt->weight || pt->bias);
	size_t es = wsn_dtype_size(pt->dt), rb = (size_t)pt->hidden * es, vec = rb;
	size_t mat = (size_t)pt->rows * rb, stats = (size_t)pt->rows * 4;
	int n = pt->rows < VERIFY_ROWS ? (int)pt->rows : VERIFY_ROWS;
	int64_t idx[VERIFY_ROWS];
	struct set full = { 0 }, rs = { 0 }, ref = { 0 }, got = { 0 };
	void *w = NULL, *b = NULL, *rdw = NULL, *rdb = NULL, *gdw = NULL, *gdb = NULL;
	struct wsn_plan_options po;
	struct wsn_plan *plan = NULL;
	struct wsn_args a;
	int err = 0;

	/* the launch on set 0 must write every output it is checked on */
	if ((err = wsn_mem_set(dev, s0->y, 0xff, mat, l->t->s)) < 0 ||
	    (!bwd && (err = wsn_mem_set(dev, s0->rstd, 0xff, stats, l->t->s)) < 0) ||
	    (!bwd && ln && (err = wsn_mem_set(dev, s0->mean, 0xff, stats, l->t->s)) < 0) ||
	    (bwd && pt->weight && (err = wsn_mem_set(dev, l->dw, 0xff, vec, l->t->s)) < 0) ||
	    (bwd && pt->bias && (err = wsn_mem_set(dev, l->db, 0xff, vec, l->t->s)) < 0))
		goto out;
	l->seq = 0;
	if ((err = bench_launch(l)) < 0 || (err = wsn_stream_sync(dev, l->t->s)) < 0)
		goto out;

	/* the inputs as the launch read them, from set 0: the rows checked, and every row for the sums */
	if (!(w = malloc(vec)) || !(b = malloc(vec)) || !(rs.x = malloc((size_t)n * rb)) ||
	    !(ref.y = malloc((size_t)n * rb)) || !(got.y = malloc((size_t)n * rb)) || !(rs.mean = malloc((size_t)n * 4)) ||
	    !(rs.rstd = malloc((size_t)n * 4)) || !(got.mean = malloc((size_t)n * 4)) || !(got.rstd = malloc((size_t)n * 4)))
		goto oom;
	if ((pt->weight && (err = wsn_memcpy(dev, w, l->w, vec, WSN_COPY_D2H, NULL)) < 0) ||
	    (pt->bias && (err = wsn_memcpy(dev, b, l->b, vec, WSN_COPY_D2H, NULL)) < 0))
		goto out;
	if (bwd && !(rs.dy = malloc((size_t)n * rb)))
		goto oom;
	if (sums) {
		if (!(full.x = malloc(mat)) || !(full.dy = malloc(mat)) || !(full.mean = malloc(stats)) ||
		    !(full.rstd = malloc(stats)))
			goto oom;
		if ((err = wsn_memcpy(dev, full.x, s0->x, mat, WSN_COPY_D2H, NULL)) < 0 ||
		    (err = wsn_memcpy(dev, full.dy, s0->dy, mat, WSN_COPY_D2H, NULL)) < 0 ||
		    (err = wsn_memcpy(dev, full.rstd, s0->rstd, stats, WSN_COPY_D2H, NULL)) < 0 ||
		    (ln && (err = wsn_memcpy(dev, full.mean, s0->mean, stats, WSN_COPY_D2H, NULL)) < 0))
			goto out;
	}
	if (bwd) /* the backward reads the sampled stats; the forward writes its own */
		ref.mean = rs.mean, ref.rstd = rs.rstd;
	else if (!(ref.mean = malloc((size_t)n * 4)) || !(ref.rstd = malloc((size_t)n * 4)))
		goto oom;
	ref.x = rs.x, ref.dy = rs.dy;
	/* the sampled input rows: from the host copies where the sums needed every row, else the device */
	pl_sample_rows(pt->rows, n, idx);
	if (sums) {
		pl_gather(rs.x, full.x, idx, n, rb);
		pl_gather(rs.dy, full.dy, idx, n, rb);
		pl_gather(rs.rstd, full.rstd, idx, n, 4);
		if (ln)
			pl_gather(rs.mean, full.mean, idx, n, 4);
	} else if ((err = d2h_rows(dev, rs.x, s0->x, idx, n, rb)) < 0 ||
		   (bwd && (err = d2h_rows(dev, rs.dy, s0->dy, idx, n, rb)) < 0) ||
		   (bwd && (err = d2h_rows(dev, rs.rstd, s0->rstd, idx, n, 4)) < 0) ||
		   (bwd && ln && (err = d2h_rows(dev, rs.mean, s0->mean, idx, n, 4)) < 0)) {
		goto out;
	}
	/* and the outputs on those rows */
	if ((err = d2h_rows(dev, got.y, s0->y, idx, n, rb)) < 0 ||
	    (!bwd && (err = d2h_rows(dev, got.rstd, s0->rstd, idx, n, 4)) < 0) ||
	    (!bwd && ln && (err = d2h_rows(dev, got.mean, s0->mean, idx, n, 4)) < 0))
		goto out;

	wsn_plan_options_init(&po, pt->op);
	po.has_weight = pt->weight;
	po.has_bias = pt->bias;
	if ((err = wsn_plan_create(cpu, pt->op, n, pt->hidden, pt->dt, &po, &plan)) < 0)
		goto out;
	point_args(pt, WSN_MEM_HOST, n, &ref, w, b, NULL, NULL, &a);
	if ((err = wsn_plan_execute(plan, &a, NULL)) < 0)
		goto out;
	if (inject) { /* the first element read back, far from any reference value */
		float far = 60000.0f;
		wsn_dtype_convert(got.y, pt->dt, &far, WSN_F32, 1);
	}
	pt->checked = pt->pass = 1;
	pt->worst = 0;
	check_output(pt, bwd ? "dx" : "y", got.y, ref.y, pt->dt, n * pt->hidden);
	if (!bwd) {
		if (ln)
			check_output(pt, "mean", got.mean, ref.mean, WSN_F32, n);
		check_output(pt, "rstd", got.rstd, ref.rstd, WSN_F32, n);
	}
	if (sums) { /* dweight/dbias: every row */
		wsn_plan_destroy(plan);
		plan = NULL;
		free(ref.y);
		if (!(ref.y = malloc(mat)) || !(rdw = malloc(vec)) || !(rdb = malloc(vec)) || !(gdw = malloc(vec)) ||
		    !(gdb = malloc(vec)))
			goto oom;
		full.y = ref.y;
		if ((err = wsn_plan_create(cpu, pt->op, pt->rows, pt->hidden, pt->dt, &po, &plan)) < 0)
			goto out;
		point_args(pt, WSN_MEM_HOST, pt->rows, &full, w, b, rdw, rdb, &a);
		if ((err = wsn_plan_execute(plan, &a, NULL)) < 0 ||
		    (pt->weight && (err = wsn_memcpy(dev, gdw, l->dw, vec, WSN_COPY_D2H, NULL)) < 0) ||
		    (pt->bias && (err = wsn_memcpy(dev, gdb, l->db, vec, WSN_COPY_D2H, NULL)) < 0))
			goto out;
		if (pt->weight)
			check_output(pt, "dweight", gdw, rdw, pt->dt, pt->hidden);
		if (pt->bias)
			check_output(pt, "dbias", gdb, rdb, pt->dt, pt->hidden);
	}
	goto out;
oom:
	err = WSN_ENOMEM;
	cli_error("bench: checking %s %s hidden %lld: ENOMEM: out of memory for the CPU reference over %lld rows",
		  wsn_op_name(pt->op), wsn_dtype_name(pt->dt), (long long)pt->hidden, (long long)pt->rows);
	goto done;
out:
	if (err < 0)
		cli_fail(err, "bench: checking %s %s hidden %lld against the CPU reference", wsn_op_name(pt->op),
			 wsn_dtype_name(pt->dt), (long long)pt->hidden);
done:
	wsn_plan_destroy(plan);
	free(full.x), free(full.dy), free(full.mean), free(full.rstd);
	free(rs.x), free(rs.dy), free(rs.mean), free(rs.rstd);
	free(ref.y);
	if (!bwd)
		free(ref.mean), free(ref.rstd);
	free(got.y), free(got.mean), free(got.rstd);
	free(w), free(b), free(rdw), free(rdb), free(gdw), free(gdb);
	return err;
}

/* TB/s over bytes moved in ms milliseconds, and its fraction of the copy bandwidth (0 when not timed). */
static void rate(double bytes, double ms, double copy_bps, double *tbs, double *frac)
{
	*tbs = ms > 0 ? bytes / (ms * 1e-3) / 1e12 : 0;
	*frac = copy_bps > 0 ? *tbs * 1e12 / copy_bps : 0;
}

/*
 * Measure one point (and check it, with cpu). A runtime error is reported (its message is then
 * cli_last_error(), for --json) and returns EXIT_RUNTIME; a shape with no plan is not an error
 * (pt->noplan says why). 0 otherwise.
 */
int bench_point(const struct bench_opts *o, struct timer *t, const struct wsn_device_info *di,
		struct wsn_device *cpu, double copy_bps, struct point *pt)
{
	size_t es = wsn_dtype_size(pt->dt), mat = (size_t)pt->rows * (size_t)pt->hidden * es;
	size_t stats = (size_t)pt->rows * 4, vec = (size_t)pt->hidden * es, set_bytes, stride, amat, astats, hb;
	int bwd = wsn_op_is_backward(pt->op);
	int nsets, err = 0, host = di->exec_mem == WSN_MEM_HOST;
	struct set *sets = NULL;
	void *base = NULL, *w = NULL, *b = NULL, *dw = NULL, *db = NULL, *hbuf = NULL;
	struct wsn_plan *plan = NULL;
	struct wsn_plan_options po;
	float *ms = NULL, m = 0;
	struct launcher l;

	/* the plan first: a shape without one needs no memory */
	wsn_plan_options_init(&po, pt->op);
	po.approach = o->approach;
	po.autotune = o->autotune;
	cli_kparam_apply(o->force, &po);
	po.has_weight = pt->weight;
	po.has_bias = pt->bias;
	if ((err = wsn_plan_create(t->dev, pt->op, pt->rows, pt->hidden, pt->dt, &po, &plan)) < 0) {
		if (err != WSN_ESHAPE && err != WSN_EINVAL)
			goto fail;
		/* this shape has no plan with these options (a forced family or parameter that does not
		 * fit): report it and go on with the other points */
		snprintf(pt->noplan, sizeof(pt->noplan), "%s", wsn_last_error());
		err = 0;
		goto out;
	}
	plan_approach(plan, o->approach, host, pt->approach, sizeof(pt->approach));

	/* enough sets in one allocation that a pass over all of them does not fit in L2 (twice over) */
	amat = (mat + 255) & ~(size_t)255;
	astats = (stats + 255) & ~(size_t)255;
	set_bytes = mat * (bwd ? 3 : 2) + stats * 2;
	stride = amat * (bwd ? 3 : 2) + astats * 2;
	nsets = (int)((2 * (uint64_t)di->l2_bytes + set_bytes - 1) / set_bytes) + 1;
	if (nsets < 2)
		nsets = 2;
	if (nsets > MAX_SETS)
		nsets = MAX_SETS;
	pt->sets = nsets;
	pt->l2_resident = (uint64_t)nsets * set_bytes < 2 * (uint64_t)di->l2_bytes;
	if (!(sets = calloc((size_t)nsets, sizeof(*sets))) ||
	    !(ms = calloc((size_t)(o->iters > o->calls ? o->iters : o->calls), sizeof(float))))
		goto oom;
	/* the host buffer (for the largest tensor) first: pinned memory is mapped, so an absurd size
	 * fails there cleanly */
	hb = mat > stats ? mat : stats;
	if ((err = wsn_host_alloc(t->dev, hb > vec ? hb : vec, &hbuf)) < 0 ||
	    (err = wsn_mem_alloc(t->dev, stride * (size_t)nsets, &base)) < 0)
		goto fail;
	for (int k = 0; k < nsets; k++) {
		char *p = (char *)base + stride * (size_t)k;

		sets[k].x = p, p += amat;
		sets[k].y = p, p += amat;
		if (bwd)
			sets[k].dy = p, p += amat;
		sets[k].mean = p, p += astats;
		sets[k].rstd = p;
	}
	/* random inputs, made once on the host and copied into every set */
	{
		struct wsn_tensor ht;

		wsn_tensor_2d(&ht, hbuf, pt->dt, WSN_MEM_HOST, pt->rows, pt->hidden);
		fill_input(IN_X, &ht);
		for (int k = 0; k < nsets && !err; k++)
			err = wsn_memcpy(t->dev, sets[k].x, hbuf, mat, WSN_COPY_H2D, NULL);
		if (bwd) {
			fill_input(IN_DY, &ht);
			for (int k = 0; k < nsets && !err; k++)
				err = wsn_memcpy(t->dev, sets[k].dy, hbuf, mat, WSN_COPY_H2D, NULL);
			wsn_tensor_1d(&ht, hbuf, WSN_F32, WSN_MEM_HOST, pt->rows);
			fill_input(IN_MEAN, &ht);
			for (int k = 0; k < nsets && !err; k++)
				err = wsn_memcpy(t->dev, sets[k].mean, hbuf, stats, WSN_COPY_H2D, NULL);
			fill_input(IN_RSTD, &ht);
			for (int k = 0; k < nsets && !err; k++)
				err = wsn_memcpy(t->dev, sets[k].rstd, hbuf, stats, WSN_COPY_H2D, NULL);
		}
		if (!err && (err = wsn_mem_alloc(t->dev, vec, &w)) >= 0 && (err = wsn_mem_alloc(t->dev, vec, &b)) >= 0 &&
		    (err = wsn_mem_alloc(t->dev, vec, &dw)) >= 0 && (err = wsn_mem_alloc(t->dev, vec, &db)) >= 0) {
			wsn_tensor_1d(&ht, hbuf, pt->dt, WSN_MEM_HOST, pt->hidden);
			fill_input(IN_W, &ht);
			err = wsn_memcpy(t->dev, w, hbuf, vec, WSN_COPY_H2D, NULL);
			fill_input(IN_B, &ht);
			if (!err)
				err = wsn_memcpy(t->dev, b, hbuf, vec, WSN_COPY_H2D, NULL);
		}
		if (err < 0)
			goto fail;
	}
	l = (struct launcher){ .plan = plan, .pt = pt, .di = di, .w = w, .b = b, .dw = dw, .db = db, .sets = sets,
			       .nsets = nsets, .t = t, .hold = !host };
	/*
	 * Warm-up: whole passes over the sets until about WARM_MS of kernel time, so the clocks have
	 * ramped up again after the host-side set-up (a GPU idle for a few hundred milliseconds drops
	 * its clocks, and the first batches would then read low); the --warmup launches come after.
	 */
	for (float warm = 0; !host && warm < WARM_MS; warm += m > 0.001f ? m : 0.001f)
		if ((err = timed_launches(&l, nsets, &m)) < 0)
			goto fail;
	/*
	 * Launches per timed batch. The first launch of a batch reaches an idle GPU some microseconds
	 * after the start event (the host's time to submit it), and the launches after it queue behind
	 * it; a batch of a few launches would count that time in every call.
	 * So a batch runs at least CLI_BATCH_MS, a whole number of passes over the sets.
	 */
	pt->batch = o->batch ? o->batch : nsets;
	if (!o->batch && !host && m > 0) {
		double passes = ceil(CLI_BATCH_MS / m), most = MAX_BATCH / nsets;
		pt->batch = nsets * (int)(passes < 1 ? 1 : passes > most ? most : passes);
	}
	for (int i = 0; i < o->warmup; i++)
		if ((err = bench_launch(&l)) < 0)
			goto fail;
	if (o->timing & TIMING_BATCH) {
		for (int it = 0; it < o->iters; it++) {
			if ((err = timed_launches(&l, pt->batch, &m)) < 0)
				goto fail;
			ms[it] = m / (float)pt->batch;
		}
		pt->ms = cli_median(ms, o->iters);
	} else {
		pt->batch = 0;
	}
	if (o->timing & TIMING_SINGLE) {
		if ((err = single_calls(&l, o->calls, ms)) < 0)
			goto fail;
		pt->single_ms = cli_median(ms, o->calls);
	}
	if ((err = wsn_stream_sync(t->dev, t->s)) < 0)
		goto fail;
	pt->bytes = (double)wsn_op_min_bytes(pt->op, pt->rows, pt->hidden, pt->dt, pt->weight, pt->bias);
	rate(pt->bytes, pt->ms, copy_bps, &pt->tbs, &pt->frac);
	rate(pt->bytes, pt->single_ms, copy_bps, &pt->single_tbs, &pt->single_frac);
	if (cpu && (err = bench_verify(&l, cpu, o->inject_mismatch, pt)) < 0)
		goto out; /* reported */
	goto out;
oom:
	err = WSN_ENOMEM;
	cli_error("bench: %s %s hidden %lld on %s: ENOMEM: out of memory", wsn_op_name(pt->op), wsn_dtype_name(pt->dt),
		  (long long)pt->hidden, di->spec);
	goto out;
fail:
	cli_fail(err, "bench: %s %s hidden %lld on %s", wsn_op_name(pt->op), wsn_dtype_name(pt->dt),
		 (long long)pt->hidden, di->spec);
out:
	wsn_plan_destroy(plan);
	wsn_mem_free(t->dev, base);
	wsn_mem_free(t->dev, w);
	wsn_mem_free(t->dev, b);
	wsn_mem_free(t->dev, dw);
	wsn_mem_free(t->dev, db);
	if (hbuf)
		wsn_host_free(t->dev, hbuf);
	free(sets);
	free(ms);
	return err < 0 ? EXIT_RUNTIME : 0;
}
