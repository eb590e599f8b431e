/* SPDX-License-Identifier: MIT */
/* runtime/cuda/cuda_autotune.c: autotune: time the kernel families once on this GPU and cache the winner (tunecache.c). */
#include "cuda/cuda_plan.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/op.h"
#include "core/util.h"
#include "tunecache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* device bytes of scratch tensors, at most: room for 16384 rows of 32K bf16. Timed on fewer rows, the
 * ring's fill and drain weigh more and the shape picked can be slower on the full rows (NOTES v26). */
#define TUNE_MAX_SCRATCH ((size_t)8 << 30)
#define TUNE_FILL_BYTES ((size_t)4 << 20)   /* a random host pattern, copied over each input */
#define TUNE_MAX_SETS 4096                  /* input sets the launches take in turn, at most */
#define TUNE_WARMUP 3                       /* launches per candidate after a first one, untimed but for an estimate */
#define TUNE_BATCHES 7                      /* event-timed batches per candidate (interleaved); the median counts */
#define TUNE_BATCH_US 500.0                 /* launches per batch: enough for this long by the warm-up's estimate */
#define TUNE_MAX_PER_BATCH 200

#define TUNE_MAX_SHAPES 24    /* backward ws shapes timed besides the planner's, at most (wsn__ws_tune_shapes) */
#define TUNE_SHAPE_MARGIN 0.005 /* another ws shape wins over the planner's only when this much faster */

/* The candidates, in the order they are timed: multi-wave, the planner's ws plan, then other ws shapes. */
enum { CAND_MULTIWAVE, CAND_WS, CAND_SHAPES, CAND_MAX = CAND_SHAPES + TUNE_MAX_SHAPES };

struct candidate {
	struct wsn__ws_shape shape;   /* c >= CAND_SHAPES: the shape planned */
	int plans;                    /* the planner gives a plan for the shape */
	struct wsn__kernel_plan kp;
	char why_not[256];            /* the planner's message when it does not */
	struct wsn__cu_plan *cp;         /* compiled */
	unsigned per_batch;           /* launches per timed batch */
	float batch_us[TUNE_BATCHES]; /* microseconds per launch of each batch */
	double us;                    /* their median */
};

/* Scratch tensors for the timing, one allocation each; 0 where the op has none. */
enum { T_X, T_DY, T_W, T_B, T_OUT, T_MEAN, T_RSTD, T_DW, T_DB, T_N };
static const char *const t_names[T_N] = { "x", "dy", "weight", "bias", "y/dx", "mean", "rstd", "dweight", "dbias" };

struct tune_scratch {
	int64_t rows;
	int nsets, seq;           /* input sets; the next launch takes ex[seq % nsets] */
	CUdeviceptr t[T_N];       /* T_X, T_DY, T_OUT, T_MEAN, T_RSTD: nsets sets in turn */
	CUstream s;
	CUevent e0, e1;
	struct wsn_args *args;
	struct wsn__exec *ex;
};

/* Whether tensor i has one copy per input set (else one for all). */
static int t_per_set(int i)
{
	return i == T_X || i == T_DY || i == T_OUT || i == T_MEAN || i == T_RSTD;
}

int wsn__cu_tune_forced_by(const struct wsn__plan_params *p, char *buf, size_t len)
{
	const struct wsn_plan_options *o = &p->opts;
	size_t off = 0;

	buf[0] = '\0';
	if (o->approach != WSN_APPROACH_AUTO)
		wsn__cu_appendf(buf, len, &off, "approach %s", wsn_approach_name(o->approach));
	if (o->block_threads)
		wsn__cu_appendf(buf, len, &off, "%sblock_threads %d", off ? ", " : "", o->block_threads);
	if (o->groups)
		wsn__cu_appendf(buf, len, &off, "%sgroups %d", off ? ", " : "", o->groups);
	if (o->unroll)
		wsn__cu_appendf(buf, len, &off, "%sunroll %d", off ? ", " : "", o->unroll);
	if (o->stages)
		wsn__cu_appendf(buf, len, &off, "%sstages %d", off ? ", " : "", o->stages);
	if (o->cluster)
		wsn__cu_appendf(buf, len, &off, "%scluster %d", off ? ", " : "", o->cluster);
	return off > 0;
}

static void tune_id_of(const struct wsn__cu_device *d, const struct wsn__gpu_props *g, const struct wsn__plan_params *p,
		       struct wsn__tune_id *id)
{
	memset(id, 0, sizeof(*id));
	snprintf(id->gpu, sizeof(id->gpu), "%s", d->name);
	id->cc_major = d->cc_major;
	id->cc_minor = d->cc_minor;
	id->sms = g->sms;
	id->driver = wsn__cu.driver_version;
	id->op = p->op;
	id->dtype = p->dtype;
	id->hidden = p->hidden;
	id->has_weight = p->opts.has_weight ? 1 : 0;
	id->has_bias = p->opts.has_bias ? 1 : 0;
	id->rows_class = wsn__tune_rows_class(p->rows);
}

static enum wsn_approach cand_approach(int c)
{
	return c == CAND_MULTIWAVE ? WSN_APPROACH_MULTIWAVE : WSN_APPROACH_WS;
}

/* "cluster 2, 4 row groups of 32 threads, 1 row a stage, 16 stages" */
static void shape_text(const struct wsn__ws_shape *s, char *buf, size_t len)
{
	snprintf(buf, len, "cluster %u, %u row group%s of %u threads, %u row%s a stage, %u stages", s->cluster, s->bdimy,
		 s->bdimy > 1 ? "s" : "", s->bdimx, s->unroll, s->unroll > 1 ? "s" : "", s->stages);
}

/* "ws candidate in shape cluster 2, ..." or "multiwave candidate" */
static void cand_text(const struct candidate *cand, int c, char *buf, size_t len)
{
	char st[160];

	if (c >= CAND_SHAPES) {
		shape_text(&cand[c].shape, st, sizeof(st));
		snprintf(buf, len, "ws candidate in shape %s", st);
	} else {
		snprintf(buf, len, "%s candidate", wsn_approach_name(cand_approach(c)));
	}
}

/*
 * Plan candidate c for p. ws is planned as the auto approach plans it (the same search as a forced
 * ws, which never falls back, but not marked forced in the description), the other ws shapes in
 * cand->shape (described as autotune's); multi-wave as forced.
 */
static void plan_candidate(const struct wsn__gpu_props *g, const struct wsn__plan_params *p, int c,
			   struct candidate *cand)
{
	struct wsn__plan_params q = *p;
	int err;

	if (c >= CAND_SHAPES) {
		err = wsn__ws_plan_shape(g, p, &cand->shape, &cand->kp);
	} else if (c == CAND_WS) {
		q.opts.approach = WSN_APPROACH_AUTO;
		err = wsn__ws_plan(g, &q, &cand->kp);
	} else {
		q.opts.approach = WSN_APPROACH_MULTIWAVE;
		err = wsn__plan_kernel(g, &q, &cand->kp);
	}
	cand->plans = err == 0;
	snprintf(cand->why_not, sizeof(cand->why_not), "%s", err ? wsn_last_error() : "");
}

static void scratch_free(struct tune_scratch *sc)
{
	/* raw calls, results ignored: after a failed launch they may all fail, and the error that
	 * stopped the timing is the one to report */
	if (sc->s)
		wsn__cu.cuStreamSynchronize(sc->s);
	for (int i = 0; i < T_N; i++)
		if (sc->t[i])
			wsn__cu.cuMemFree(sc->t[i]);
	if (sc->e0)
		wsn__cu.cuEventDestroy(sc->e0);
	if (sc->e1)
		wsn__cu.cuEventDestroy(sc->e1);
	if (sc->s)
		wsn__cu.cuStreamDestroy(sc->s);
	free(sc->args);
	free(sc->ex);
	memset(sc, 0, sizeof(*sc));
}

/* Fill device tensor i of sc with random values of dt: a host pattern of at most TUNE_FILL_BYTES, repeated. */
static int scratch_fill(struct wsn__cu_device *d, struct tune_scratch *sc, int i, size_t bytes, enum wsn_dtype dt,
			float mean, float stddev, void *host)
{
	size_t es = wsn_dtype_size(dt), chunk = bytes < TUNE_FILL_BYTES ? bytes : TUNE_FILL_BYTES;
	struct wsn_tensor t;
	int err;

	chunk -= chunk % es;
	if ((err = wsn_tensor_1d(&t, host, dt, WSN_MEM_HOST, (int64_t)(chunk / es))) < 0 ||
	    (err = wsn_tensor_fill_random(&t, 0x7a11e5ull + (uint64_t)i, mean, stddev)) < 0)
		return err;
	for (size_t off = 0; off < bytes; off += chunk) {
		size_t n = bytes - off < chunk ? bytes - off : chunk;
		if ((err = WSN_CU(cuMemcpyHtoDAsync, (sc->t[i] + off, host, n, sc->s),
				  "copying random values into the autotune input '%s' on cuda:%d", t_names[i], d->index)) < 0)
			return err;
	}
	/* the host pattern is refilled for the next tensor */
	return WSN_CU(cuStreamSynchronize, (sc->s), "waiting for the autotune input '%s' on cuda:%d", t_names[i],
		      d->index);
}

/*
 * Scratch tensors for timing p, as `wsnorm bench` times: rows = the plan's rows capped by
 * WSN__TUNE_MAX_ROWS and TUNE_MAX_SCRATCH, in sets (x, dy, mean, rstd and the output) that the
 * launches take in turn, enough of them that a pass over all does not fit in L2 twice over (a set
 * that fits in L2 would time the cache, not the memory: see NOTES v27); inputs
 * filled with random values (x around 0.5, positive rstd); weight, bias and their sums shared.
 */
static int scratch_make(struct wsn__cu_device *d, const struct wsn__plan_params *p, struct tune_scratch *sc)
{
	enum wsn_dtype dt = p->dtype;
	int bwd = wsn_op_is_backward(p->op), ln = wsn_op_is_layernorm(p->op);
	size_t es = wsn_dtype_size(dt), vec = (size_t)p->hidden * es, per_row, mat, stats, fixed, set_bytes;
	size_t amat, astats, bytes[T_N] = { 0 }, each[T_N] = { 0 }, l2 = (size_t)d->props.l2_bytes;
	void *host = NULL;
	int64_t rows;
	int err, nsets = 1;

	memset(sc, 0, sizeof(*sc));
	per_row = (bwd ? 3 : 2) * vec + (ln ? 8 : 4);
	fixed = 4 * vec;
	rows = p->rows < WSN__TUNE_MAX_ROWS ? p->rows : WSN__TUNE_MAX_ROWS;
	if (fixed + (size_t)rows * per_row > TUNE_MAX_SCRATCH)
		rows = fixed < TUNE_MAX_SCRATCH ? (int64_t)((TUNE_MAX_SCRATCH - fixed) / per_row) : 0;
	if (rows < 1)
		rows = 1;
	set_bytes = (size_t)rows * per_row;
	if (set_bytes < 2 * l2) { /* then the sets fit in the cap: 2 x L2 plus a set */
		nsets = (int)((2 * l2 + set_bytes - 1) / set_bytes) + 1;
		if (nsets > TUNE_MAX_SETS)
			nsets = TUNE_MAX_SETS;
	}
	sc->rows = rows;
	sc->nsets = nsets;
	mat = (size_t)rows * vec;
	stats = (size_t)rows * 4;
	amat = (mat + 255) & ~(size_t)255;
	astats = (stats + 255) & ~(size_t)255;
	each[T_X] = each[T_OUT] = amat;
	each[T_RSTD] = astats;
	if (ln)
		each[T_MEAN] = astats;
	if (p->opts.has_weight)
		each[T_W] = vec;
	if (p->opts.has_bias)
		each[T_B] = vec;
	if (bwd) {
		each[T_DY] = amat;
		each[T_B] = 0; /* the backward ops do not read the bias */
		each[T_DW] = p->opts.has_weight ? vec : 0;
		each[T_DB] = p->opts.has_bias ? vec : 0;
	}
	for (int i = 0; i < T_N; i++)
		bytes[i] = each[i] * (t_per_set(i) ? (size_t)nsets : 1);
	if (!(sc->args = calloc((size_t)nsets, sizeof(*sc->args))) || !(sc->ex = calloc((size_t)nsets, sizeof(*sc->ex)))) {
		err = wsn__error(WSN_ENOMEM, "autotune: out of host memory for %d input sets", nsets);
		goto err;
	}
	if ((err = WSN_CU(cuStreamCreate, (&sc->s, CU_STREAM_NON_BLOCKING), "creating the autotune stream on cuda:%d",
			  d->index)) < 0 ||
	    (err = WSN_CU(cuEventCreate, (&sc->e0, CU_EVENT_DEFAULT), "creating an autotune event on cuda:%d",
			  d->index)) < 0 ||
	    (err = WSN_CU(cuEventCreate, (&sc->e1, CU_EVENT_DEFAULT), "creating an autotune event on cuda:%d",
			  d->index)) < 0)
		goto err;
	for (int i = 0; i < T_N; i++)
		if (bytes[i] && (err = WSN_CU(cuMemAlloc, (&sc->t[i], bytes[i]),
					      "allocating %zu bytes for the autotune tensor '%s' (%lld rows, %d set%s) on "
					      "cuda:%d", bytes[i], t_names[i], (long long)rows, nsets, nsets > 1 ? "s" : "",
					      d->index)) < 0)
			goto err;
	if (!(host = malloc(TUNE_FILL_BYTES))) {
		err = wsn__error(WSN_ENOMEM, "autotune: out of host memory for the random inputs");
		goto err;
	}
	if ((err = scratch_fill(d, sc, T_X, bytes[T_X], dt, 0.5f, 1.0f, host)) < 0 ||
	    (bytes[T_W] && (err = scratch_fill(d, sc, T_W, vec, dt, 1.0f, 0.25f, host)) < 0) ||
	    (bytes[T_B] && (err = scratch_fill(d, sc, T_B, vec, dt, 0.0f, 0.25f, host)) < 0))
		goto err;
	if (bwd && ((err = scratch_fill(d, sc, T_DY, bytes[T_DY], dt, 0.0f, 1.0f, host)) < 0 ||
		    (ln && (err = scratch_fill(d, sc, T_MEAN, bytes[T_MEAN], WSN_F32, 0.5f, 0.1f, host)) < 0) ||
		    (err = scratch_fill(d, sc, T_RSTD, bytes[T_RSTD], WSN_F32, 1.0f, 0.05f, host)) < 0))
		goto err;
	free(host);
	host = NULL;

	/* the executions the launches take in turn, as wsn_plan_execute would check and pass them */
	for (int k = 0; k < nsets; k++) {
		struct wsn_args *a = &sc->args[k];
		struct wsn__exec *ex = &sc->ex[k];
#define TPTR(i) ((void *)(uintptr_t)(sc->t[i] + (t_per_set(i) ? each[i] * (size_t)k : 0)))
		wsn_tensor_2d(&a->x, TPTR(T_X), dt, WSN_MEM_DEVICE, rows, p->hidden);
		if (bytes[T_W])
			wsn_tensor_1d(&a->weight, TPTR(T_W), dt, WSN_MEM_DEVICE, p->hidden);
		if (bytes[T_B])
			wsn_tensor_1d(&a->bias, TPTR(T_B), dt, WSN_MEM_DEVICE, p->hidden);
		if (bytes[T_MEAN])
			wsn_tensor_1d(&a->mean, TPTR(T_MEAN), WSN_F32, WSN_MEM_DEVICE, rows);
		wsn_tensor_1d(&a->rstd, TPTR(T_RSTD), WSN_F32, WSN_MEM_DEVICE, rows);
		if (bwd) {
			wsn_tensor_2d(&a->dy, TPTR(T_DY), dt, WSN_MEM_DEVICE, rows, p->hidden);
			wsn_tensor_2d(&a->dx, TPTR(T_OUT), dt, WSN_MEM_DEVICE, rows, p->hidden);
			if (bytes[T_DW])
				wsn_tensor_1d(&a->dweight, TPTR(T_DW), dt, WSN_MEM_DEVICE, p->hidden);
			if (bytes[T_DB])
				wsn_tensor_1d(&a->dbias, TPTR(T_DB), dt, WSN_MEM_DEVICE, p->hidden);
		} else {
			wsn_tensor_2d(&a->y, TPTR(T_OUT), dt, WSN_MEM_DEVICE, rows, p->hidden);
		}
#undef TPTR
		ex->rows = rows;
		ex->hidden = p->hidden;
		ex->x_ld = ex->dy_ld = ex->y_ld = ex->dx_ld = p->hidden;
		ex->stats_ld = 1;
		ex->args = a;
	}
	return 0;
err:
	free(host);
	scratch_free(sc);
	return err;
}

/* n launches of candidate c on the scratch stream between the two events; *us per launch. */
static int time_launches(struct wsn__cu_device *d, struct tune_scratch *sc, struct candidate *c, unsigned n,
			 double *us)
{
	float ms = 0;
	int err;

	if ((err = WSN_CU(cuEventRecord, (sc->e0, sc->s), "recording an autotune event on cuda:%d", d->index)) < 0)
		return err;
	for (unsigned k = 0; k < n; k++)
		if ((err = wsn__cuda_execute(d, c->cp, &sc->ex[sc->seq++ % sc->nsets], sc->s)) < 0)
			return err;
	if ((err = WSN_CU(cuEventRecord, (sc->e1, sc->s), "recording an autotune event on cuda:%d", d->index)) < 0 ||
	    (err = WSN_CU(cuEventSynchronize, (sc->e1), "waiting for the autotune launches on cuda:%d", d->index)) < 0 ||
	    (err = WSN_CU(cuEventElapsedTime, (&ms, sc->e0, sc->e1), "reading the autotune events on cuda:%d",
			  d->index)) < 0)
		return err;
	*us = (double)ms * 1e3 / n;
	return 0;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/*
 * Time the compiled candidates on sc: per candidate one launch, then TUNE_WARMUP launches whose
 * time sets the launches per batch (TUNE_BATCH_US worth, 1..TUNE_MAX_PER_BATCH); then TUNE_BATCHES
 * event-timed batches of each, interleaved so that clock changes touch both alike; c->us is the
 * median time per launch.
 */
static int time_candidates(struct wsn__cu_device *d, struct tune_scratch *sc, struct candidate *cand, int ncand)
{
	char what[200];
	double us;
	int c, err;

	for (c = 0; c < ncand; c++) {
		if (!cand[c].cp)
			continue;
		if ((err = time_launches(d, sc, &cand[c], 1, &us)) < 0 ||
		    (err = time_launches(d, sc, &cand[c], TUNE_WARMUP, &us)) < 0)
			goto err;
		cand[c].per_batch = us > 0 ? (unsigned)(TUNE_BATCH_US / us) + 1 : TUNE_MAX_PER_BATCH;
		if (cand[c].per_batch > TUNE_MAX_PER_BATCH)
			cand[c].per_batch = TUNE_MAX_PER_BATCH;
	}
	for (int b = 0; b < TUNE_BATCHES; b++) {
		for (c = 0; c < ncand; c++) {
			if (!cand[c].cp)
				continue;
			if ((err = time_launches(d, sc, &cand[c], cand[c].per_batch, &us)) < 0)
				goto err;
			cand[c].batch_us[b] = (float)us;
		}
	}
	for (c = 0; c < ncand; c++) {
		if (!cand[c].cp)
			continue;
		qsort(cand[c].batch_us, TUNE_BATCHES, sizeof(float), cmp_float);
		cand[c].us = cand[c].batch_us[TUNE_BATCHES / 2];
	}
	return 0;
err:
	cand_text(cand, c, what, sizeof(what));
	return wsn__error_context(err, "autotune: timing the %s on %lld rows", what, (long long)sc->rows);
}

/*
 * Compile every candidate that plans, one after another: the driver's JIT takes 0.2-0.3 s a module
 * and runs one at a time (26 candidates took 6.3-6.6 s on one thread and 6.2-7.1 s on eight; NOTES
 * v27). 0, or the first failure, naming the candidate (those compiled are freed with the candidates).
 */
static int compile_candidates(const struct wsn__gpu_props *g, const struct wsn__plan_params *p, struct candidate *cand,
			      int ncand)
{
	char what[200];
	int err;

	for (int c = 0; c < ncand; c++) {
		if (!cand[c].plans)
			continue;
		if ((err = wsn__cu_plan_compile(g, p, &cand[c].kp, &cand[c].cp)) < 0) {
			cand_text(cand, c, what, sizeof(what));
			return wsn__error_context(err, "autotune: compiling the %s", what);
		}
	}
	return 0;
}

/*
 * Autotune plan creation (approach auto, nothing forced): plan multi-wave, the planner's ws and (for
 * the backward) the other ws shapes wsn__ws_tune_shapes lists; on a cache hit whose winner still
 * plans, compile the winner; otherwise compile every candidate that plans, time them on scratch
 * tensors when there are two or more, keep the fastest and store the entry. Another ws shape wins
 * over the planner's only when TUNE_SHAPE_MARGIN faster (the planner's measured shapes stay where
 * the timing cannot tell them apart). A cache that cannot be written is noted in the description,
 * not an error.
 */
int wsn__cu_autotune(struct wsn__cu_device *d, const struct wsn__gpu_props *g, const struct wsn__plan_params *p,
		     struct wsn__cu_plan **out)
{
	struct candidate *cand;
	struct wsn__tune_id id;
	struct wsn__tune_entry e;
	struct tune_scratch sc;
	struct wsn__ws_shape shapes[TUNE_MAX_SHAPES];
	char where[1024], miss[320], st[160];
	int err, hit, have_path, win = -1, nplans = 0, ncand = CAND_SHAPES, best = -1, nsets = 0;
	double t0, compile_s = 0;

	*out = NULL;
	memset(&sc, 0, sizeof(sc));
	if (!(cand = calloc(CAND_MAX, sizeof(*cand))))
		return wsn__error(WSN_ENOMEM, "plan: out of memory");
	for (int c = 0; c < CAND_SHAPES; c++) {
		plan_candidate(g, p, c, &cand[c]);
		nplans += cand[c].plans;
	}

	tune_id_of(d, g, p, &id);
	have_path = wsn__tune_path(&id, where, sizeof(where)) == 0;
	if (!have_path && wsn__tune_key(&id, where, sizeof(where)) < 0)
		snprintf(where, sizeof(where), "no cache path");
	hit = wsn__tune_lookup(&id, &e);
	if (hit < 0 && !have_path) {
		snprintf(miss, sizeof(miss), "no cache directory"); /* the store says why */
	} else if (hit == WSN_ENOENT) {
		snprintf(miss, sizeof(miss), "no entry");
	} else if (hit == WSN_EFORMAT) {
		snprintf(miss, sizeof(miss), "%s", strstr(wsn_last_error(), "another version") ? "another version's entry" :
			 "malformed entry");
	} else if (hit < 0) {
		snprintf(miss, sizeof(miss), "%.300s", wsn_last_error());
	} else if (e.shape.cluster) { /* another ws shape won */
		cand[CAND_SHAPES].shape = e.shape;
		plan_candidate(g, p, CAND_SHAPES, &cand[CAND_SHAPES]);
		shape_text(&e.shape, st, sizeof(st));
		if (cand[CAND_SHAPES].plans)
			win = CAND_SHAPES;
		else
			snprintf(miss, sizeof(miss), "the cached ws shape (%s) no longer plans", st);
	} else {
		int c = e.approach == WSN_APPROACH_WS ? CAND_WS : CAND_MULTIWAVE, o = CAND_WS + CAND_MULTIWAVE - c;
		if (!cand[c].plans)
			snprintf(miss, sizeof(miss), "the cached %s no longer plans", wsn_approach_name(e.approach));
		else if (!e.rows && cand[o].plans)
			snprintf(miss, sizeof(miss), "the cached %s was the one candidate, %s plans now",
				 wsn_approach_name(e.approach), wsn_approach_name(cand_approach(o)));
		else
			win = c;
	}

	if (win >= 0) { /* a hit: the winner alone, nothing timed */
		size_t off = 0;
		if ((err = wsn__cu_plan_compile(g, p, &cand[win].kp, &cand[win].cp)) < 0)
			goto err;
		if (e.rows) {
			wsn__cu_appendf(cand[win].cp->tune, sizeof(cand[win].cp->tune), &off,
				"cache hit (%s): ws %.2f us, multiwave %.2f us", where, e.ws_us, e.multiwave_us);
			if (e.shapes)
				wsn__cu_appendf(cand[win].cp->tune, sizeof(cand[win].cp->tune), &off,
					", %d other ws shapes (the fastest %.2f us)", e.shapes, e.shape_us);
			wsn__cu_appendf(cand[win].cp->tune, sizeof(cand[win].cp->tune), &off, " at %lld rows -> %s", (long long)e.rows,
				wsn_approach_name(e.approach));
			if (win >= CAND_SHAPES)
				wsn__cu_appendf(cand[win].cp->tune, sizeof(cand[win].cp->tune), &off, " in autotune's shape (%s)", st);
		} else {
			wsn__cu_appendf(cand[win].cp->tune, sizeof(cand[win].cp->tune), &off,
				"cache hit (%s): %s, the one candidate (nothing timed)", where, wsn_approach_name(e.approach));
		}
		goto done;
	}

	/* a miss: the other ws shapes join (none for the forward), each planned with its stages given, as a
	 * cache hit will plan it, so that the kernel timed is the one a hit runs */
	{
		int n = wsn__ws_tune_shapes(g, p, cand[CAND_WS].plans ? &cand[CAND_WS].kp : NULL, shapes, TUNE_MAX_SHAPES);
		for (int i = 0; i < n; i++) {
			cand[ncand].shape = shapes[i];
			plan_candidate(g, p, ncand, &cand[ncand]);
			if (cand[ncand].plans)
				nplans++, ncand++;
		}
	}
	if (!nplans) { /* nothing plans: the error auto planning gives */
		struct wsn__kernel_plan kp;
		err = wsn__plan_kernel(g, p, &kp);
		if (!err)
			err = wsn__error(WSN_ESHAPE, "autotune: neither multi-wave nor ws plans for this shape (%.200s)",
					 cand[CAND_WS].why_not);
		goto err;
	}
	memset(&e, 0, sizeof(e));
	t0 = wsn__now();
	if ((err = compile_candidates(g, p, cand, ncand)) < 0)
		goto err;
	compile_s = wsn__now() - t0;
	if (nplans == 1) {
		for (win = 0; !cand[win].plans; win++)
			;
	} else {
		int ws;
		if ((err = scratch_make(d, p, &sc)) < 0 || (err = time_candidates(d, &sc, cand, ncand)) < 0)
			goto err;
		e.rows = sc.rows;
		nsets = sc.nsets;
		scratch_free(&sc);
		for (int c = CAND_SHAPES; c < ncand; c++)
			if (best < 0 || cand[c].us < cand[best].us)
				best = c;
		ws = CAND_WS;
		if (best >= 0 && (!cand[CAND_WS].plans || cand[best].us < cand[CAND_WS].us * (1 - TUNE_SHAPE_MARGIN)))
			ws = best;
		win = !cand[CAND_MULTIWAVE].plans || (cand[ws].plans && cand[ws].us < cand[CAND_MULTIWAVE].us) ?
			      ws : CAND_MULTIWAVE;
		e.ws_us = cand[CAND_WS].plans ? cand[CAND_WS].us : 0;
		e.multiwave_us = cand[CAND_MULTIWAVE].plans ? cand[CAND_MULTIWAVE].us : 0;
		e.shapes = ncand - CAND_SHAPES;
		e.shape_us = best >= 0 ? cand[best].us : 0;
	}
	e.approach = cand_approach(win);
	if (win >= CAND_SHAPES)
		e.shape = cand[win].shape;
	{
		struct wsn__cu_plan *cp = cand[win].cp;
		size_t off = 0;

		if (nplans == 1) {
			int o = win == CAND_MULTIWAVE ? CAND_WS : CAND_MULTIWAVE;
			wsn__cu_appendf(cp->tune, sizeof(cp->tune), &off, "one candidate (%s): %s", miss, wsn_approach_name(e.approach));
			if (win >= CAND_SHAPES) {
				shape_text(&cand[win].shape, st, sizeof(st));
				wsn__cu_appendf(cp->tune, sizeof(cp->tune), &off, " in autotune's shape (%s)", st);
			}
			wsn__cu_appendf(cp->tune, sizeof(cp->tune), &off, ", %s does not plan (%.200s); ",
				wsn_approach_name(cand_approach(o)), cand[o].why_not);
		} else {
			wsn__cu_appendf(cp->tune, sizeof(cp->tune), &off, "measured now (%s): ", miss);
			static const int fam[2] = { CAND_WS, CAND_MULTIWAVE };
			for (int i = 0; i < 2; i++) {
				int k = fam[i];
				wsn__cu_appendf(cp->tune, sizeof(cp->tune), &off, "%s%s ", i ? ", " : "",
					wsn_approach_name(cand_approach(k)));
				if (cand[k].plans)
					wsn__cu_appendf(cp->tune, sizeof(cp->tune), &off, "%.2f us", cand[k].us);
				else
					wsn__cu_appendf(cp->tune, sizeof(cp->tune), &off, "does not plan");
			}
			if (best >= 0) {
				shape_text(&cand[best].shape, st, sizeof(st));
				wsn__cu_appendf(cp->tune, sizeof(cp->tune), &off, ", %d other ws shapes (the fastest %.2f us: %s)",
					e.shapes, e.shape_us, st);
			}
			wsn__cu_appendf(cp->tune, sizeof(cp->tune), &off, " at %lld rows (%d input set%s) -> %s%s; %d candidates compiled "
				"in %.1f s; ", (long long)e.rows, nsets, nsets > 1 ? "s" : "", wsn_approach_name(e.approach),
				win >= CAND_SHAPES ? " in that shape" : "", nplans, compile_s);
		}
		if (wsn__tune_store(&id, &e) < 0)
			wsn__cu_appendf(cp->tune, sizeof(cp->tune), &off, "not stored: %s", wsn_last_error());
		else
			wsn__cu_appendf(cp->tune, sizeof(cp->tune), &off, "stored in %s", where);
	}
done:
	*out = cand[win].cp;
	cand[win].cp = NULL;
	err = 0;
err:
	scratch_free(&sc);
	for (int c = 0; c < CAND_MAX; c++)
		if (cand[c].cp)
			wsn__cu_plan_free(cand[c].cp);
	free(cand);
	return err;
}
