/* SPDX-License-Identifier: MIT */
/* runtime/cpu/cpu_ops.c: LayerNorm and RMSNorm forward and backward on the host, f32 accumulation, rows in fixed chunks over pthreads. */
#include "cpu/cpu.h"
#include "backend.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/op.h"
#include "core/params.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/*
 * Numerics. A row is walked in blocks of BLOCK elements converted to f32. A block is summed in
 * LANES interleaved f32 lanes combined pairwise, and the block sums are added into the row's sum
 * with Kahan compensation, so a row sum's error stays near one f32 rounding for any hidden size.
 * The variance is two-pass: the mean first, then the sum of squared deviations from it.
 *
 * Every loop over a block runs exactly BLOCK times on restrict-qualified buffers, so compilers
 * vectorize it at -O2: the last block of a row is padded with zeros (weight, bias and the
 * dweight/dbias partials are allocated in whole blocks, padded with zeros too), and padding adds
 * exact zeros to every sum. Vectorizing does not change any result: each element sees the same
 * operations in the same order.
 *
 * Determinism. Rows are split into chunks of a fixed number of rows (wsn__cpu_chunk_rows: it
 * depends on the shape, not on the thread count). Threads take chunks in any order, but each
 * chunk's dweight/dbias partial sums are computed the same way whoever computes them
 * (Kahan-compensated over the chunk's rows, in row order), and the partials are then reduced in
 * chunk order on the calling thread, again with compensation. So dweight and dbias are
 * bit-identical for every thread count.
 */
#define BLOCK WSN_CPU_BLOCK
#define LANES 8

/* One execution, shared by its threads. */
struct job {
	const struct wsn__cpu_plan *plan;
	const struct wsn__exec *ex;
	const float *w, *b;       /* f32 copies of weight and bias, [hp]; NULL when the plan has none */
	float *dw_part, *db_part; /* [chunks][hp] partial sums; NULL when not wanted */
	int64_t chunks;
	int64_t hp; /* hidden rounded up to whole blocks */
	atomic_llong next; /* the next chunk to take */
};

/* One thread of an execution. */
struct worker {
	struct job *job;
	float *comp; /* this thread's Kahan compensations: hp floats per partial output */
	pthread_t tid;
};

static inline int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* Add v to the compensated sum (*s, *c); the sum's value is *s - *c. */
static inline void kahan_add(float *s, float *c, float v)
{
	float y = v - *c;
	float t = *s + y;

	*c = (t - *s) - y;
	*s = t;
}

/* A compensated scalar sum. */
struct ksum {
	float s, c;
};

static inline void ksum_add(struct ksum *k, float v)
{
	kahan_add(&k->s, &k->c, v);
}

static inline float ksum_value(const struct ksum *k)
{
	return k->s - k->c;
}

static inline int64_t whole_blocks(int64_t n)
{
	return (n + BLOCK - 1) / BLOCK * BLOCK;
}

/* Sum of a block: LANES interleaved f32 lanes, combined pairwise. */
static float block_sum(const float *restrict v)
{
	float l[LANES] = { 0 };

	for (int i = 0; i < BLOCK; i += LANES)
		for (int k = 0; k < LANES; k++)
			l[k] += v[i + k];
	return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

/* f16 to f32 for every bit pattern, filled once from wsn__f16_to_f32: a load is one lookup. */
static float f16_table[1 << 16];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void f16_table_fill(void)
{
	for (uint32_t h = 0; h < (1u << 16); h++)
		f16_table[h] = wsn__f16_to_f32((uint16_t)h);
}

/* bf16 to f32 (exact); a whole block in a loop of fixed length. */
static void bf16_widen(float *restrict dst, const uint16_t *restrict src, int n)
{
	if (n == BLOCK)
		for (int i = 0; i < BLOCK; i++)
			dst[i] = wsn__bf16_to_f32(src[i]);
	else
		for (int i = 0; i < n; i++)
			dst[i] = wsn__bf16_to_f32(src[i]);
}

/* n <= BLOCK elements from src + off as f32, then zeros up to BLOCK. */
static void load_block(float *restrict dst, const void *src, enum wsn_dtype dt, int64_t off, int n)
{
	switch (dt) {
	case WSN_F32:
		memcpy(dst, (const float *)src + off, (size_t)n * sizeof(float));
		break;
	case WSN_BF16:
		bf16_widen(dst, (const uint16_t *)src + off, n);
		break;
	default:
		for (int i = 0; i < n; i++)
			dst[i] = f16_table[((const uint16_t *)src)[off + i]];
		break;
	}
	if (n < BLOCK)
		memset(dst + n, 0, (size_t)(BLOCK - n) * sizeof(float));
}

/* The first n elements of a block to dst + off in dtype dt (round to nearest even). */
static void store_block(void *dst, enum wsn_dtype dt, int64_t off, const float *restrict src, int n)
{
	if (dt == WSN_F32) {
		memcpy((float *)dst + off, src, (size_t)n * sizeof(float));
	} else {
		uint16_t *restrict d = (uint16_t *)dst + off;

		if (dt == WSN_BF16)
			for (int i = 0; i < n; i++)
				d[i] = wsn__f32_to_bf16(src[i]);
		else
			for (int i = 0; i < n; i++)
				d[i] = wsn__f32_to_f16(src[i]);
	}
}

/* Offset in elements of flat (row-major logical) index i of a tensor. */
static int64_t flat_offset(const struct wsn_tensor *t, int64_t i)
{
	int64_t off = 0;

	for (int d = t->ndim - 1; d >= 0; d--) {
		off += (i % t->shape[d]) * t->stride[d];
		i /= t->shape[d];
	}
	return off;
}

/* A [n] parameter tensor as a new f32 array padded with zeros to whole blocks; NULL when out of memory. */
static float *vector_f32(const struct wsn_tensor *t, int64_t n)
{
	float *v = calloc((size_t)whole_blocks(n), sizeof(float));

	if (!v)
		return NULL;
	for (int64_t i = 0; i < n; i++)
		v[i] = wsn__load(t->data, t->dtype, flat_offset(t, i));
	return v;
}

/* Kahan-add a[i] * b[i] (or a[i] when b is NULL) into the block's compensated sums (s, c). */
static void kahan_block(float *restrict s, float *restrict c, const float *restrict a, const float *restrict b)
{
	if (b)
		for (int i = 0; i < BLOCK; i++)
			kahan_add(&s[i], &c[i], a[i] * b[i]);
	else
		for (int i = 0; i < BLOCK; i++)
			kahan_add(&s[i], &c[i], a[i]);
}

/* Sum of (x - mean)^2 over a block whose first n elements are real. */
static float sq_dev_sum(const float *restrict x, float mean, int n)
{
	float t[BLOCK];

	for (int i = 0; i < BLOCK; i++) {
		float d = x[i] - mean;
		t[i] = d * d;
	}
	if (n < BLOCK)
		memset(t + n, 0, (size_t)(BLOCK - n) * sizeof(float));
	return block_sum(t);
}

/* y = (x - mean) * rstd * w + b over a block (w, b: NULL for 1 and 0). */
static void normalize_block(float *restrict y, const float *restrict x, float mean, float rstd,
			    const float *restrict w, const float *restrict b)
{
	for (int i = 0; i < BLOCK; i++)
		y[i] = (x[i] - mean) * rstd;
	if (w)
		for (int i = 0; i < BLOCK; i++)
			y[i] *= w[i];
	if (b)
		for (int i = 0; i < BLOCK; i++)
			y[i] += b[i];
}

static void store_vector(const struct wsn_tensor *t, const float *v, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		wsn__store(t->data, t->dtype, flat_offset(t, i), v[i]);
}

/* Forward of row r: LayerNorm when the op is centered, else RMSNorm. */
static void fwd_row(const struct job *jb, int64_t r)
{
	const struct wsn__exec *ex = jb->ex;
	const struct wsn_args *a = ex->args;
	const enum wsn_dtype dt = jb->plan->p.dtype;
	const int centered = jb->plan->p.op == WSN_LAYERNORM_FWD;
	const int64_t h = ex->hidden, xo = r * ex->x_ld, yo = r * ex->y_ld;
	const float *w = jb->w, *b = jb->b;
	struct ksum s = { 0, 0 }, q = { 0, 0 };
	float xb[BLOCK], t[BLOCK], mean = 0.0f, rstd;

	if (centered) {
		for (int64_t j0 = 0; j0 < h; j0 += BLOCK) {
			load_block(xb, a->x.data, dt, xo + j0, (int)min64(BLOCK, h - j0));
			ksum_add(&s, block_sum(xb));
		}
		mean = ksum_value(&s) / (float)h;
	}
	for (int64_t j0 = 0; j0 < h; j0 += BLOCK) {
		int n = (int)min64(BLOCK, h - j0);

		load_block(xb, a->x.data, dt, xo + j0, n);
		ksum_add(&q, sq_dev_sum(xb, mean, n));
	}
	rstd = 1.0f / sqrtf(ksum_value(&q) / (float)h + jb->plan->p.opts.eps);
	for (int64_t j0 = 0; j0 < h; j0 += BLOCK) {
		int n = (int)min64(BLOCK, h - j0);

		load_block(xb, a->x.data, dt, xo + j0, n);
		normalize_block(t, xb, mean, rstd, w ? w + j0 : NULL, b ? b + j0 : NULL);
		store_block(a->y.data, dt, yo + j0, t, n);
	}
	if (centered && a->mean.data)
		((float *)a->mean.data)[r * ex->stats_ld] = mean;
	if (a->rstd.data)
		((float *)a->rstd.data)[r * ex->stats_ld] = rstd;
}

/* x-hat and g = dy * w (w: NULL for 1) of one block. */
static void bwd_block(float *restrict xh, float *restrict g, const float *restrict x, const float *restrict dy,
		      const float *restrict w, float mean, float rstd)
{
	for (int i = 0; i < BLOCK; i++)
		xh[i] = (x[i] - mean) * rstd;
	if (w)
		for (int i = 0; i < BLOCK; i++)
			g[i] = dy[i] * w[i];
	else
		memcpy(g, dy, BLOCK * sizeof(float));
}

/* t = a * b over one block. */
static void mul_block(float *restrict t, const float *restrict a, const float *restrict b)
{
	for (int i = 0; i < BLOCK; i++)
		t[i] = a[i] * b[i];
}

/* dx = rstd * ((g - cg) - x-hat * cgx) of one block. */
static void dx_block(float *restrict dx, const float *restrict g, const float *restrict xh, float rstd, float cg,
		     float cgx)
{
	for (int i = 0; i < BLOCK; i++)
		dx[i] = rstd * ((g[i] - cg) - xh[i] * cgx);
}

/*
 * Backward of row r (LayerNorm when centered, else RMSNorm); adds dy * x-hat and dy into the
 * chunk's compensated partial sums (dw, dwc) and (db, dbc), [hp] each, when those are non-NULL.
 */
static void bwd_row(const struct job *jb, int64_t r, float *dw, float *dwc, float *db, float *dbc)
{
	const struct wsn__exec *ex = jb->ex;
	const struct wsn_args *a = ex->args;
	const enum wsn_dtype dt = jb->plan->p.dtype;
	const int centered = jb->plan->p.op == WSN_LAYERNORM_BWD;
	const int64_t h = ex->hidden, xo = r * ex->x_ld, dyo = r * ex->dy_ld, dxo = r * ex->dx_ld;
	const float mean = centered ? ((const float *)a->mean.data)[r * ex->stats_ld] : 0.0f;
	const float rstd = ((const float *)a->rstd.data)[r * ex->stats_ld];
	const float *w = jb->w;
	struct ksum sg = { 0, 0 }, sgx = { 0, 0 };
	float xb[BLOCK], dyb[BLOCK], xh[BLOCK], g[BLOCK], t[BLOCK], cg = 0.0f, cgx;

	for (int64_t j0 = 0; j0 < h; j0 += BLOCK) {
		int n = (int)min64(BLOCK, h - j0);

		load_block(xb, a->x.data, dt, xo + j0, n);
		load_block(dyb, a->dy.data, dt, dyo + j0, n);
		bwd_block(xh, g, xb, dyb, w ? w + j0 : NULL, mean, rstd); /* padding: g = 0 */
		mul_block(t, g, xh);
		ksum_add(&sgx, block_sum(t));
		if (centered)
			ksum_add(&sg, block_sum(g));
	}
	if (centered)
		cg = ksum_value(&sg) / (float)h;
	cgx = ksum_value(&sgx) / (float)h;
	for (int64_t j0 = 0; j0 < h; j0 += BLOCK) {
		int n = (int)min64(BLOCK, h - j0);

		load_block(xb, a->x.data, dt, xo + j0, n);
		load_block(dyb, a->dy.data, dt, dyo + j0, n);
		bwd_block(xh, g, xb, dyb, w ? w + j0 : NULL, mean, rstd);
		dx_block(t, g, xh, rstd, cg, cgx);
		store_block(a->dx.data, dt, dxo + j0, t, n);
		if (dw) /* padding: dy = 0 adds zeros */
			kahan_block(dw + j0, dwc + j0, dyb, xh);
		if (db)
			kahan_block(db + j0, dbc + j0, dyb, NULL);
	}
}

/* Start a chunk's compensated partial sum ([hp]) at zero. */
static void partial_begin(float *s, float *c, int64_t hp)
{
	memset(s, 0, (size_t)hp * sizeof(float));
	memset(c, 0, (size_t)hp * sizeof(float));
}

static void fold_block(float *restrict s, const float *restrict c)
{
	for (int i = 0; i < BLOCK; i++)
		s[i] -= c[i];
}

/* Fold the compensation into the partial sum ([hp]). */
static void partial_end(float *s, const float *c, int64_t hp)
{
	for (int64_t j0 = 0; j0 < hp; j0 += BLOCK)
		fold_block(s + j0, c + j0);
}

static void *work(void *arg)
{
	struct worker *wk = arg;
	struct job *jb = wk->job;
	const int64_t hp = jb->hp, k = jb->plan->chunk_rows, rows = jb->ex->rows;
	const int bwd = wsn_op_is_backward(jb->plan->p.op);
	float *dwc = wk->comp, *dbc = jb->dw_part ? wk->comp + hp : wk->comp;

	for (;;) {
		int64_t c = atomic_fetch_add(&jb->next, 1);
		int64_t r1 = min64(rows, (c + 1) * k);
		float *dw = NULL, *db = NULL;

		if (c >= jb->chunks)
			break;
		if (jb->dw_part)
			partial_begin(dw = jb->dw_part + c * hp, dwc, hp);
		if (jb->db_part)
			partial_begin(db = jb->db_part + c * hp, dbc, hp);
		for (int64_t r = c * k; r < r1; r++) {
			if (bwd)
				bwd_row(jb, r, dw, dwc, db, dbc);
			else
				fwd_row(jb, r);
		}
		if (dw)
			partial_end(dw, dwc, hp);
		if (db)
			partial_end(db, dbc, hp);
	}
	return NULL;
}

/* Sum the chunks' [hp] partials in chunk order into the first chunk's slot (comp: hp floats of scratch). */
static void reduce_partials(float *part, int64_t chunks, int64_t hp, float *comp)
{
	memset(comp, 0, (size_t)hp * sizeof(float));
	for (int64_t c = 1; c < chunks; c++)
		for (int64_t j0 = 0; j0 < hp; j0 += BLOCK)
			kahan_block(part + j0, comp + j0, part + c * hp + j0, NULL);
	partial_end(part, comp, hp);
}

int64_t wsn__cpu_chunk_rows(enum wsn_op op, int64_t rows, int64_t hidden)
{
	int64_t k = (WSN_CPU_CHUNK_ELEMS + hidden - 1) / hidden;

	if (wsn_op_is_backward(op)) { /* keep [chunks][hp] dweight and dbias partials in budget */
		int64_t max_chunks = WSN_CPU_PARTIAL_BUDGET / (whole_blocks(hidden) * 2 * (int64_t)sizeof(float));

		if (max_chunks < 1)
			max_chunks = 1;
		if (k < (rows + max_chunks - 1) / max_chunks)
			k = (rows + max_chunks - 1) / max_chunks;
	}
	return k < 1 ? 1 : k;
}

int wsn__cpu_execute(const struct wsn__cpu_plan *plan, int threads, const struct wsn__exec *ex)
{
	const struct wsn__plan_params *pp = &plan->p;
	const struct wsn_args *a = ex->args;
	const int64_t h = ex->hidden;
	const int bwd = wsn_op_is_backward(pp->op);
	struct worker *wk = NULL;
	float *comp = NULL;
	struct job jb;
	int64_t nparts = 0;
	int nthreads, started, err = 0;

	memset(&jb, 0, sizeof(jb));
	jb.plan = plan;
	jb.ex = ex;
	jb.chunks = (ex->rows + plan->chunk_rows - 1) / plan->chunk_rows;
	jb.hp = whole_blocks(h);
	if (pp->dtype == WSN_F16)
		pthread_once(&f16_once, f16_table_fill);
	atomic_init(&jb.next, 0);
	nthreads = threads < 1 ? 1 : threads;
	if (nthreads > jb.chunks)
		nthreads = (int)jb.chunks;

	if (pp->opts.has_weight && !(jb.w = vector_f32(&a->weight, h)))
		goto nomem;
	if (!bwd && pp->opts.has_bias && !(jb.b = vector_f32(&a->bias, h)))
		goto nomem;
	if (bwd && a->dweight.data) {
		if (!(jb.dw_part = malloc((size_t)(jb.chunks * jb.hp) * sizeof(float))))
			goto nomem;
		nparts++;
	}
	if (pp->op == WSN_LAYERNORM_BWD && a->dbias.data) {
		if (!(jb.db_part = malloc((size_t)(jb.chunks * jb.hp) * sizeof(float))))
			goto nomem;
		nparts++;
	}
	if (nparts && !(comp = malloc((size_t)nthreads * (size_t)(nparts * jb.hp) * sizeof(float))))
		goto nomem;
	if (!(wk = calloc((size_t)nthreads, sizeof(*wk))))
		goto nomem;

	for (int i = 0; i < nthreads; i++) {
		wk[i].job = &jb;
		wk[i].comp = comp ? comp + (size_t)i * (size_t)(nparts * jb.hp) : NULL;
	}
	/*
	 * Thread 0 is the caller. A thread that cannot be started is simply not used: the others
	 * take its chunks, and the results do not depend on who computes which chunk.
	 */
	for (started = 1; started < nthreads; started++)
		if (pthread_create(&wk[started].tid, NULL, work, &wk[started]) != 0)
			break;
	work(&wk[0]);
	for (int i = 1; i < started; i++)
		pthread_join(wk[i].tid, NULL);

	if (jb.dw_part) {
		reduce_partials(jb.dw_part, jb.chunks, jb.hp, comp);
		store_vector(&a->dweight, jb.dw_part, h);
	}
	if (jb.db_part) {
		reduce_partials(jb.db_part, jb.chunks, jb.hp, comp);
		store_vector(&a->dbias, jb.db_part, h);
	}
	goto out;
nomem:
	err = wsn__error(WSN_ENOMEM, "cpu %s: out of memory for the buffers of %lld rows x %lld (%lld chunks)",
			 wsn_op_name(pp->op), (long long)ex->rows, (long long)h, (long long)jb.chunks);
out:
	free(wk);
	free(comp);
	free(jb.db_part);
	free(jb.dw_part);
	free((void *)jb.b);
	free((void *)jb.w);
	return err;
}
