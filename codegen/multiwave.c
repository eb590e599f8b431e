/* SPDX-License-Identifier: MIT */
/* codegen/multiwave.c: multi-wave persistent LayerNorm/RMSNorm kernels (forward, backward, finish) as PTX. */
#include "codegen.h"
#include "ptx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXV 64 /* vectors per thread the generator unrolls (planner.c MAX_NVEC) */
#define SMEM_SYM "wsn_smem"

/* Which threads hold a full vector in slice j (vectors j*bdimx .. j*bdimx + bdimx - 1). */
enum jkind { J_ALL, J_PART };

/* A row-sized tensor or a parameter: where it lives and how a thread reaches its vectors. */
struct tens {
	const char *tag;
	int store;               /* enum wsn__store */
	enum ptx_cache cache;
	const char *g;           /* .u64: global address of the thread's first element in the row */
	const char *s;           /* .u32: shared address of the thread's first vector (SMEM) */
	const char *r[MAXV][4];  /* REG: the packed registers of vector j */
};

struct gen {
	const struct wsn__kernel_plan *kp;
	struct ptx_kernel *k;
	int bwd, ln, E, vec, nv, bdimx, bdimy, nw;
	long long H, NV, nfull, tail;
	int vecpath;             /* 1: 16-byte accesses; 0: element accesses (unaligned rows) */
	enum jkind jk[MAXV];
	int has_tail[MAXV];
	const char *pf[MAXV], *pt[MAXV], *plo[MAXV]; /* J_PART: full vector / tail vector / element e < tail */
	const char *tx, *ty, *smem;
	const char *red_w, *red_r, *red_par, *p_lane0, *bar_id;
	unsigned sm_red, sm_w, sm_dw, sm_db, sm_xg;
	const char *invH;
	const char *cnt, *rcnt; /* LayerNorm forward: elements this thread owns and 1 / that */
	/* Opaque zero of the current pass (NULL: none). Registers held across a row reduction are
	 * read through `xor reg, zero` so that ptxas can neither hoist their unpacking out of the row
	 * loop nor reuse pass-1 unpacked values after the reduction: either would keep every element
	 * as an f32 and double the registers a cached bf16/f16 row needs. */
	const char *zp;
	const char *zrow[3];
};

/* ---------------------------------------------------------------- element access */

static void zero4(struct gen *g, const char *const r[4])
{
	for (int q = 0; q < 4; q++)
		ptx_mov_imm(g->k, PTX_B32, r[q], 0);
}

/* Is element e of slice j valid for this thread: NULL (always) or a predicate. */
static const char *elem_pred(struct gen *g, int j, int e)
{
	if (g->jk[j] == J_ALL)
		return NULL;
	return e < g->tail ? g->plo[j] : g->pf[j];
}

/* Element loads of vector j into r (packed), element e predicated by pred(e) (NULL: always). */
static void load_elems(struct gen *g, struct tens *t, int j, const char *const r[4], int nel,
		       const char *const *preds, int pack_pred_from_tail)
{
	struct ptx_kernel *k = g->k;
	long long off = (long long)j * g->bdimx * 16;

	if (g->E == 4) {
		for (int e = 0; e < nel; e++) {
			if (preds[e])
				ptx_guard(k, preds[e], 0);
			ptx_ld_global(k, t->cache == PTX_CACHE_READONLY ? PTX_CACHE_READONLY : PTX_CACHE_DEFAULT,
				      PTX_B32, r[e], t->g, off + 4 * e);
		}
		return;
	}
	const char *h[8];
	for (int e = 0; e < 8; e++) {
		h[e] = ptx_tmp(k, PTX_B16);
		if (e >= nel || preds[e])
			ptx_mov_imm(k, PTX_B16, h[e], 0);
		if (e < nel) {
			if (preds[e])
				ptx_guard(k, preds[e], 0);
			ptx_ld_global(k, t->cache == PTX_CACHE_READONLY ? PTX_CACHE_READONLY : PTX_CACHE_DEFAULT,
				      PTX_B16, h[e], t->g, off + 2 * e);
		}
	}
	for (int q = 0; q < 4; q++) {
		if (2 * q >= nel)
			break;
		if (pack_pred_from_tail)
			ptx_guard(k, preds[0], 0);
		ptx_ins(k, "mov.b32 %s, {%s, %s}", r[q], h[2 * q], h[2 * q + 1]);
	}
}

/* Load vector j of t from global into r (handles slices with partial vectors and the element path). */
static void load_vec(struct gen *g, struct tens *t, int j, const char *const r[4])
{
	struct ptx_kernel *k = g->k;
	long long off = (long long)j * g->bdimx * 16;
	const char *preds[8];

	if (g->vecpath) {
		if (g->jk[j] == J_ALL) {
			ptx_ld_global_v4(k, t->cache, r, t->g, off);
			return;
		}
		zero4(g, r);
		ptx_guard(k, g->pf[j], 0);
		ptx_ld_global_v4(k, t->cache, r, t->g, off);
		if (g->has_tail[j]) {
			for (int e = 0; e < 8; e++)
				preds[e] = g->pt[j];
			load_elems(g, t, j, r, (int)g->tail, preds, 1);
		}
		return;
	}
	if (g->jk[j] != J_ALL)
		zero4(g, r);
	for (int e = 0; e < g->vec; e++)
		preds[e] = elem_pred(g, j, e);
	load_elems(g, t, j, r, g->vec, preds, 0);
}

/* Store vector j of r to t's global row. */
static void store_vec(struct gen *g, struct tens *t, int j, const char *const r[4])
{
	struct ptx_kernel *k = g->k;
	long long off = (long long)j * g->bdimx * 16;
	int nel = g->vec, from_tail = 0;
	const char *preds[8];

	if (g->vecpath) {
		if (g->jk[j] == J_ALL) {
			ptx_st_global_v4(k, t->cache, t->g, off, r);
			return;
		}
		ptx_guard(k, g->pf[j], 0);
		ptx_st_global_v4(k, t->cache, t->g, off, r);
		if (!g->has_tail[j])
			return;
		nel = (int)g->tail;
		from_tail = 1;
	}
	for (int e = 0; e < nel; e++)
		preds[e] = from_tail ? g->pt[j] : elem_pred(g, j, e);
	if (g->E == 4) {
		for (int e = 0; e < nel; e++) {
			if (preds[e])
				ptx_guard(k, preds[e], 0);
			ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_B32, t->g, off + 4 * e, r[e]);
		}
		return;
	}
	for (int q = 0; 2 * q < nel; q++) {
		const char *h0 = ptx_tmp(k, PTX_B16), *h1 = ptx_tmp(k, PTX_B16);
		ptx_ins(k, "mov.b32 {%s, %s}, %s", h0, h1, r[q]);
		for (int e = 2 * q; e < 2 * q + 2 && e < nel; e++) {
			if (preds[e])
				ptx_guard(k, preds[e], 0);
			ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_B16, t->g, off + 2 * e, e % 2 ? h1 : h0);
		}
	}
}

/* The packed registers of vector j of t, loading them if t is not held in registers. */
static void get_vec(struct gen *g, struct tens *t, int j, const char *out[4])
{
	if (t->store == WSN_STORE_REG) {
		for (int q = 0; q < 4; q++) {
			out[q] = t->r[j][q];
			if (g->zp) {
				out[q] = ptx_tmp(g->k, PTX_B32);
				ptx_ins(g->k, "xor.b32 %s, %s, %s", out[q], t->r[j][q], g->zp);
			}
		}
		return;
	}
	for (int q = 0; q < 4; q++)
		out[q] = ptx_tmp(g->k, PTX_B32);
	if (t->store == WSN_STORE_SMEM)
		ptx_ld_shared_v4(g->k, out, t->s, (long long)j * g->bdimx * 16);
	else
		load_vec(g, t, j, out);
}

/* Packed registers -> vec f32 values (f32 data is used as is). */
static void unpack(struct gen *g, const char *const p[4], const char *f[8])
{
	struct ptx_kernel *k = g->k;

	if (g->E == 4) {
		for (int q = 0; q < 4; q++)
			f[q] = p[q];
		return;
	}
	for (int q = 0; q < 4; q++) {
		f[2 * q] = ptx_tmp(k, PTX_F32);
		f[2 * q + 1] = ptx_tmp(k, PTX_F32);
		if (g->kp->dtype == WSN_BF16)
			ptx_unpack_bf16x2(k, f[2 * q], f[2 * q + 1], p[q]);
		else
			ptx_unpack_f16x2(k, f[2 * q], f[2 * q + 1], p[q]);
	}
}

static void pack(struct gen *g, const char *const f[8], const char *p[4])
{
	struct ptx_kernel *k = g->k;

	if (g->E == 4) {
		for (int q = 0; q < 4; q++)
			p[q] = f[q];
		return;
	}
	for (int q = 0; q < 4; q++) {
		p[q] = ptx_tmp(k, PTX_B32);
		if (g->kp->dtype == WSN_BF16)
			ptx_pack_bf16x2(k, p[q], f[2 * q], f[2 * q + 1]);
		else
			ptx_pack_f16x2(k, p[q], f[2 * q], f[2 * q + 1]);
	}
}

/* ---------------------------------------------------------------- reductions */

/* Sum n f32 values over the bdimx threads of a row group; every thread gets the same totals. */
static void reduce_row(struct gen *g, const char *const v[], int n)
{
	struct ptx_kernel *k = g->k;
	int lanes = g->bdimx < 32 ? g->bdimx : 32;

	ptx_comment(k, "row reduction of %d value%s over %d threads", n, n > 1 ? "s" : "", g->bdimx);
	for (int off = lanes / 2; off >= 1; off /= 2) {
		for (int i = 0; i < n; i++) {
			const char *t = ptx_tmp(k, PTX_F32);
			ptx_shfl_bfly(k, t, v[i], off);
			ptx_add_f32(k, v[i], v[i], t);
		}
	}
	if (g->nw <= 1)
		return;
	/* lane 0 of each warp writes, the group's named barrier, everyone sums the warps in order */
	const char *wa = ptx_tmp(k, PTX_U32), *ra = ptx_tmp(k, PTX_U32);
	ptx_ins(k, "add.u32 %s, %s, %s", wa, g->red_w, g->red_par);
	ptx_ins(k, "add.u32 %s, %s, %s", ra, g->red_r, g->red_par);
	for (int i = 0; i < n; i++) {
		ptx_guard(k, g->p_lane0, 0);
		ptx_st_shared(k, PTX_F32, wa, 4 * i, v[i]);
	}
	ptx_bar_sync_reg(k, g->bar_id, (unsigned)g->bdimx);
	for (int w = 0; w < g->nw; w++) {
		const char *a = ptx_tmp(k, PTX_F32), *b = ptx_tmp(k, PTX_F32);
		ptx_ins(k, "ld.shared.v2.f32 {%s, %s}, [%s+%d]", a, b, ra, 16 * w);
		if (w == 0) {
			ptx_mov(k, PTX_F32, v[0], a);
			if (n > 1)
				ptx_mov(k, PTX_F32, v[1], b);
		} else {
			ptx_add_f32(k, v[0], v[0], a);
			if (n > 1)
				ptx_add_f32(k, v[1], v[1], b);
		}
	}
	ptx_ins(k, "xor.b32 %s, %s, %d", g->red_par, g->red_par, 16 * g->nw);
}

/* (n, mean, M2) of a and b -> a (Chan, Golub and LeVeque's pairwise update; n == 0 sides are empty). */
static void chan_combine(struct gen *g, const char *n, const char *m, const char *m2, const char *nb,
			 const char *mb, const char *m2b)
{
	struct ptx_kernel *k = g->k;
	const char *nn = ptx_tmp(k, PTX_F32), *d = ptx_tmp(k, PTX_F32), *f = ptx_tmp(k, PTX_F32);
	const char *t = ptx_tmp(k, PTX_F32), *u = ptx_tmp(k, PTX_F32), *pz = ptx_tmp(k, PTX_PRED);

	ptx_add_f32(k, nn, n, nb);
	ptx_sub_f32(k, d, mb, m);
	ptx_ins(k, "div.full.f32 %s, %s, %s", f, nb, nn); /* 2 ulp, no slow path: the weight of b */
	ptx_ins(k, "setp.eq.f32 %s, %s, 0f00000000", pz, nn);
	ptx_ins(k, "selp.f32 %s, 0f00000000, %s, %s", f, f, pz);
	ptx_mul_f32(k, t, d, f);            /* delta * nb / n */
	ptx_fma_f32(k, m, d, f, m);         /* mean_a + delta * nb / n */
	ptx_mul_f32(k, u, t, n);            /* delta * na * nb / n */
	ptx_add_f32(k, m2, m2, m2b);
	ptx_fma_f32(k, m2, u, d, m2);       /* M2_a + M2_b + delta^2 * na * nb / n */
	ptx_mov(k, PTX_F32, n, nn);
}

/* Merge every thread's (count, mean, M2) over the row group, in an order every thread repeats
 * exactly (the lower lane of a butterfly pair is always the first operand; warps in order), so
 * the whole row sees bit-identical statistics: one reduction for LayerNorm's mean and variance. */
static void reduce_welford(struct gen *g, const char *n, const char *m, const char *m2)
{
	struct ptx_kernel *k = g->k;
	const char *lane = ptx_tmp(k, PTX_U32);

	ptx_comment(k, "row reduction of (count, mean, M2) over %d threads", g->bdimx);
	ptx_ins(k, "and.b32 %s, %s, 31", lane, g->tx);
	for (int off = 16; off >= 1; off /= 2) {
		const char *o[3], *a[3], *b[3], *v[3] = { n, m, m2 }, *hi = ptx_tmp(k, PTX_PRED);
		const char *bit = ptx_tmp(k, PTX_U32);
		ptx_ins(k, "and.b32 %s, %s, %d", bit, lane, off);
		ptx_ins(k, "setp.ne.u32 %s, %s, 0", hi, bit);
		for (int i = 0; i < 3; i++) {
			o[i] = ptx_tmp(k, PTX_F32);
			ptx_shfl_bfly(k, o[i], v[i], off);
		}
		for (int i = 0; i < 3; i++) {
			a[i] = ptx_tmp(k, PTX_F32);
			b[i] = ptx_tmp(k, PTX_F32);
			ptx_ins(k, "selp.f32 %s, %s, %s, %s", a[i], o[i], v[i], hi);
			ptx_ins(k, "selp.f32 %s, %s, %s, %s", b[i], v[i], o[i], hi);
		}
		chan_combine(g, a[0], a[1], a[2], b[0], b[1], b[2]);
		for (int i = 0; i < 3; i++)
			ptx_mov(k, PTX_F32, v[i], a[i]);
	}
	if (g->nw <= 1)
		return;
	const char *wa = ptx_tmp(k, PTX_U32), *ra = ptx_tmp(k, PTX_U32);
	ptx_ins(k, "add.u32 %s, %s, %s", wa, g->red_w, g->red_par);
	ptx_ins(k, "add.u32 %s, %s, %s", ra, g->red_r, g->red_par);
	ptx_guard(k, g->p_lane0, 0);
	ptx_ins(k, "st.shared.v4.f32 [%s], {%s, %s, %s, %s}", wa, n, m, m2, m2);
	ptx_bar_sync_reg(k, g->bar_id, (unsigned)g->bdimx);
	for (int w = 0; w < g->nw; w++) {
		const char *x[4];
		for (int i = 0; i < 4; i++)
			x[i] = ptx_tmp(k, PTX_F32);
		ptx_ins(k, "ld.shared.v4.f32 {%s, %s, %s, %s}, [%s+%d]", x[0], x[1], x[2], x[3], ra, 16 * w);
		if (w == 0) {
			ptx_mov(k, PTX_F32, n, x[0]);
			ptx_mov(k, PTX_F32, m, x[1]);
			ptx_mov(k, PTX_F32, m2, x[2]);
		} else {
			chan_combine(g, n, m, m2, x[0], x[1], x[2]);
		}
	}
	ptx_ins(k, "xor.b32 %s, %s, %d", g->red_par, g->red_par, 16 * g->nw);
}

/* ---------------------------------------------------------------- shared setup */

static void setup_common(struct gen *g)
{
	struct ptx_kernel *k = g->k;
	const struct wsn__kernel_plan *kp = g->kp;
	const char *tid = ptx_reg(k, PTX_U32, "thread");

	g->tx = ptx_reg(k, PTX_U32, "tx");
	g->ty = ptx_reg(k, PTX_U32, "ty");
	ptx_sreg(k, tid, "%tid.x");
	ptx_ins(k, "rem.u32 %s, %s, %d", g->tx, tid, g->bdimx);
	ptx_ins(k, "div.u32 %s, %s, %d", g->ty, tid, g->bdimx);
	g->smem = ptx_reg(k, PTX_U32, "smem");
	ptx_smem_addr(k, g->smem, SMEM_SYM, 0);
	g->invH = ptx_reg(k, PTX_F32, "inv_hidden");
	ptx_mov_f32(k, g->invH, (float)(1.0 / (double)kp->hidden));

	/* predicates of the slices with partial vectors */
	for (int j = 0; j < g->nv; j++) {
		long long first = (long long)j * g->bdimx, nf = g->nfull - first;
		if (first + g->bdimx <= g->nfull) {
			g->jk[j] = J_ALL;
			continue;
		}
		g->jk[j] = J_PART;
		g->pf[j] = ptx_reg(k, PTX_PRED, "pfull%d", j);
		ptx_ins(k, "setp.lt.s32 %s, %s, %lld", g->pf[j], g->tx, nf);
		g->has_tail[j] = g->tail && nf >= 0 && nf < g->bdimx;
		if (g->has_tail[j]) {
			g->pt[j] = ptx_reg(k, PTX_PRED, "ptail%d", j);
			g->plo[j] = ptx_reg(k, PTX_PRED, "plo%d", j);
			ptx_ins(k, "setp.eq.s32 %s, %s, %lld", g->pt[j], g->tx, nf);
			ptx_ins(k, "or.pred %s, %s, %s", g->plo[j], g->pf[j], g->pt[j]);
		} else {
			g->pt[j] = NULL;
			g->plo[j] = g->pf[j];
		}
	}

	/* reduction slots: group ty owns 2 buffers x warps x 4 floats at sm_red + ty * 32 * nw */
	if (g->nw > 1) {
		const char *warp = ptx_tmp(k, PTX_U32), *lane = ptx_tmp(k, PTX_U32);
		g->red_w = ptx_reg(k, PTX_U32, "red_w");
		g->red_r = ptx_reg(k, PTX_U32, "red_r");
		g->red_par = ptx_reg(k, PTX_U32, "red_par");
		g->p_lane0 = ptx_reg(k, PTX_PRED, "p_lane0");
		ptx_ins(k, "mad.lo.u32 %s, %s, %d, %s", g->red_r, g->ty, 32 * g->nw, g->smem);
		if (g->sm_red)
			ptx_ins(k, "add.u32 %s, %s, %u", g->red_r, g->red_r, g->sm_red);
		ptx_ins(k, "shr.u32 %s, %s, 5", warp, g->tx);
		ptx_ins(k, "mad.lo.u32 %s, %s, 16, %s", g->red_w, warp, g->red_r);
		ptx_ins(k, "and.b32 %s, %s, 31", lane, g->tx);
		ptx_ins(k, "setp.eq.u32 %s, %s, 0", g->p_lane0, lane);
		ptx_mov_imm(k, PTX_U32, g->red_par, 0);
		g->bar_id = ptx_reg(k, PTX_U32, "bar_id");
		ptx_comment(k, "row group ty synchronises on named barrier 1 + ty");
		ptx_ins(k, "add.u32 %s, %s, 1", g->bar_id, g->ty);
	}
}

/* Per-row opaque zeros: row >> 63 (rows < 2^63), combined with zeros of parameters ptxas cannot see. */
static void opaque_zeros(struct gen *g, const char *row, const char *const inv[2])
{
	struct ptx_kernel *k = g->k;
	const char *t = ptx_tmp(k, PTX_U64);

	g->zrow[0] = ptx_tmp(k, PTX_U32);
	ptx_ins(k, "shr.u64 %s, %s, 63", t, row);
	ptx_ins(k, "cvt.u32.u64 %s, %s", g->zrow[0], t);
	for (int i = 0; i < 2; i++) {
		g->zrow[i + 1] = ptx_tmp(k, PTX_U32);
		ptx_ins(k, "xor.b32 %s, %s, %s", g->zrow[i + 1], g->zrow[0], inv[i]);
	}
}

/* A loop-invariant opaque zero from a 64-bit parameter that is below 2^63. */
static const char *param_zero(struct gen *g, const char *param64)
{
	const char *t = ptx_tmp(g->k, PTX_U64), *z = ptx_tmp(g->k, PTX_U32);

	ptx_ins(g->k, "shr.u64 %s, %s, 63", t, param64);
	ptx_ins(g->k, "cvt.u32.u64 %s, %s", z, t);
	return z;
}

/* addr (u64) = base + row * ld * E + tx * 16 */
static void row_addr(struct gen *g, const char *dst, const char *base, const char *row, const char *ld_bytes,
		     const char *txoff)
{
	ptx_ins(g->k, "mad.lo.u64 %s, %s, %s, %s", dst, row, ld_bytes, base);
	ptx_ins(g->k, "add.u64 %s, %s, %s", dst, dst, txoff);
}

/* Names of REG storage for a tensor. */
static void reg_names(struct gen *g, struct tens *t)
{
	for (int j = 0; j < g->nv; j++)
		for (int q = 0; q < 4; q++)
			t->r[j][q] = ptx_reg(g->k, PTX_B32, "%s%d_%d", t->tag, j, q);
}

/* ---------------------------------------------------------------- forward */

static void fwd_path(struct gen *g, const char *rows, const char *row0, const char *rstride, const char *xp,
		     const char *yp, const char *xld, const char *yld, const char *wp, const char *bp,
		     const char *meanp, const char *rstdp, const char *eps, const char *txoff,
		     const char *p_mean, const char *p_rstd)
{
	struct ptx_kernel *k = g->k;
	const struct wsn__kernel_plan *kp = g->kp;
	struct tens x = { .tag = "x", .store = kp->row_store, .cache = PTX_CACHE_STREAM };
	struct tens y = { .tag = "y", .store = WSN_STORE_GLOBAL, .cache = PTX_CACHE_DEFAULT };
	struct tens w = { .tag = "w", .store = kp->param_store, .cache = PTX_CACHE_READONLY };
	struct tens b = { .tag = "b", .store = kp->param_store, .cache = PTX_CACHE_READONLY };
	const char *row = ptx_reg(k, PTX_U64, "row"), *p = ptx_reg(k, PTX_PRED, "p_row");
	const char *done = ptx_label_new(k, g->vecpath ? "vec_done" : "elem_done");
	struct ptx_loop lp;

	if (x.store == WSN_STORE_GLOBAL)
		x.cache = PTX_CACHE_DEFAULT;
	x.g = ptx_reg(k, PTX_U64, "xa");
	y.g = ptx_reg(k, PTX_U64, "ya");
	if (kp->has_weight) {
		w.g = ptx_reg(k, PTX_U64, "wa");
		ptx_ins(k, "add.u64 %s, %s, %s", w.g, wp, txoff);
	}
	if (kp->has_bias) {
		b.g = ptx_reg(k, PTX_U64, "ba");
		ptx_ins(k, "add.u64 %s, %s, %s", b.g, bp, txoff);
	}
	if (x.store == WSN_STORE_REG)
		reg_names(g, &x);
	if (g->ln) {
		/* elements this thread owns, and their reciprocal (0 for a thread past the row's end) */
		g->cnt = ptx_reg(k, PTX_F32, "own_count");
		g->rcnt = ptx_reg(k, PTX_F32, "own_rcount");
		int nall = 0;
		for (int j = 0; j < g->nv; j++)
			nall += g->jk[j] == J_ALL ? g->vec : 0;
		ptx_mov_f32(k, g->cnt, (float)nall);
		for (int j = 0; j < g->nv; j++) {
			const char *c = ptx_tmp(k, PTX_F32);
			if (g->jk[j] == J_ALL)
				continue;
			ptx_mov_f32(k, c, 0.0f);
			if (g->has_tail[j]) {
				ptx_guard(k, g->pt[j], 0);
				ptx_mov_f32(k, c, (float)g->tail);
			}
			ptx_guard(k, g->pf[j], 0);
			ptx_mov_f32(k, c, (float)g->vec);
			ptx_add_f32(k, g->cnt, g->cnt, c);
		}
		const char *pz = ptx_tmp(k, PTX_PRED);
		ptx_ins(k, "rcp.rn.f32 %s, %s", g->rcnt, g->cnt);
		ptx_ins(k, "setp.eq.f32 %s, %s, 0f00000000", pz, g->cnt);
		ptx_ins(k, "selp.f32 %s, 0f00000000, %s, %s", g->rcnt, g->rcnt, pz);
	}
	if (kp->param_store == WSN_STORE_REG) {
		ptx_comment(k, "weight%s loaded once per CTA, kept in registers", kp->has_bias ? " and bias" : "");
		if (kp->has_weight)
			reg_names(g, &w);
		if (kp->has_bias)
			reg_names(g, &b);
		for (int j = 0; j < g->nv; j++) {
			if (kp->has_weight)
				load_vec(g, &w, j, w.r[j]);
			if (kp->has_bias)
				load_vec(g, &b, j, b.r[j]);
		}
	}
	const char *inv[2] = { param_zero(g, rows), param_zero(g, xld) };
	ptx_mov(k, PTX_U64, row, row0);
	ptx_ins(k, "setp.ge.u64 %s, %s, %s", p, row, rows);
	ptx_guard(k, p, 0);
	ptx_bra(k, done);
	ptx_loop_begin(k, &lp, g->vecpath ? "vec_row" : "elem_row");
	row_addr(g, x.g, xp, row, xld, txoff);
	row_addr(g, y.g, yp, row, yld, txoff);
	opaque_zeros(g, row, inv);
	if (x.store == WSN_STORE_REG) {
		ptx_comment(k, "all %d loads of the row issued before the first use", g->nv);
		for (int j = 0; j < g->nv; j++)
			load_vec(g, &x, j, x.r[j]);
	}

	/* pass 1: sum (LayerNorm) or sum of squares (RMSNorm); 4 independent chains */
	const char *acc[4], *s1 = ptx_reg(k, PTX_F32, "s1");
	for (int i = 0; i < 4; i++) {
		acc[i] = ptx_tmp(k, PTX_F32);
		ptx_mov_f32(k, acc[i], 0.0f);
	}
	for (int j = 0; j < g->nv; j++) {
		const char *pv[4], *f[8];
		get_vec(g, &x, j, pv);
		unpack(g, pv, f);
		for (int e = 0; e < g->vec; e++) {
			if (g->ln)
				ptx_add_f32(k, acc[e % 4], acc[e % 4], f[e]);
			else
				ptx_fma_f32(k, acc[e % 4], f[e], f[e], acc[e % 4]);
		}
	}
	ptx_add_f32(k, acc[0], acc[0], acc[1]);
	ptx_add_f32(k, acc[2], acc[2], acc[3]);
	ptx_add_f32(k, s1, acc[0], acc[2]);
	if (!g->ln)
		reduce_row(g, &s1, 1);

	const char *mean = ptx_reg(k, PTX_F32, "mean"), *rstd = ptx_reg(k, PTX_F32, "rstd");
	const char *var = ptx_reg(k, PTX_F32, "var");
	if (g->ln) {
		/* this thread's mean, then pass 2: M2 about it from the cached row (exact two-pass);
		 * the row's mean and M2 are merged from the threads' in one reduction */
		const char *n = ptx_reg(k, PTX_F32, "count");
		ptx_mov(k, PTX_F32, n, g->cnt);
		ptx_mul_f32(k, mean, s1, g->rcnt);
		g->zp = g->zrow[0];
		for (int i = 0; i < 4; i++)
			ptx_mov_f32(k, acc[i], 0.0f);
		for (int j = 0; j < g->nv; j++) {
			const char *pv[4], *f[8];
			get_vec(g, &x, j, pv);
			unpack(g, pv, f);
			for (int e = 0; e < g->vec; e++) {
				const char *d = ptx_tmp(k, PTX_F32), *pe = elem_pred(g, j, e);
				ptx_sub_f32(k, d, f[e], mean);
				if (pe)
					ptx_guard(k, pe, 0);
				ptx_fma_f32(k, acc[e % 4], d, d, acc[e % 4]);
			}
		}
		ptx_add_f32(k, acc[0], acc[0], acc[1]);
		ptx_add_f32(k, acc[2], acc[2], acc[3]);
		ptx_add_f32(k, var, acc[0], acc[2]);
		reduce_welford(g, n, mean, var);
	} else {
		ptx_mov(k, PTX_F32, var, s1);
	}
	ptx_fma_f32(k, var, var, g->invH, eps);
	ptx_rsqrt_f32(k, rstd, var);
	/* statistics: one thread per row, when asked for */
	{
		const char *sa = ptx_tmp(k, PTX_U64);
		ptx_ins(k, "shl.b64 %s, %s, 2", sa, row);
		if (g->ln) {
			const char *ma = ptx_tmp(k, PTX_U64);
			ptx_ins(k, "add.u64 %s, %s, %s", ma, meanp, sa);
			ptx_guard(k, p_mean, 0);
			ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_F32, ma, 0, mean);
		}
		const char *ra = ptx_tmp(k, PTX_U64);
		ptx_ins(k, "add.u64 %s, %s, %s", ra, rstdp, sa);
		ptx_guard(k, p_rstd, 0);
		ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_F32, ra, 0, rstd);
	}

	/* pass 3: y = (x - mean) * rstd * w + b */
	ptx_comment(k, "normalise, scale, shift, store");
	g->zp = g->zrow[1];
	for (int j = 0; j < g->nv; j++) {
		const char *pv[4], *f[8], *o[8], *po[4], *wv[4], *wf[8], *bv[4], *bf[8];
		get_vec(g, &x, j, pv);
		unpack(g, pv, f);
		if (kp->has_weight) {
			get_vec(g, &w, j, wv);
			unpack(g, wv, wf);
		}
		if (kp->has_bias) {
			get_vec(g, &b, j, bv);
			unpack(g, bv, bf);
		}
		for (int e = 0; e < g->vec; e++) {
			const char *n = ptx_tmp(k, PTX_F32);
			if (g->ln) {
				/* (x - mean) * rstd: the subtraction is exact when x is near the mean, where
				 * fma(x, rstd, -mean * rstd) would leave the rounding error of mean * rstd */
				const char *d = ptx_tmp(k, PTX_F32);
				ptx_sub_f32(k, d, f[e], mean);
				ptx_mul_f32(k, n, d, rstd);
			} else {
				ptx_mul_f32(k, n, f[e], rstd);
			}
			if (kp->has_weight && kp->has_bias) {
				o[e] = ptx_tmp(k, PTX_F32);
				ptx_fma_f32(k, o[e], n, wf[e], bf[e]);
			} else if (kp->has_weight) {
				o[e] = ptx_tmp(k, PTX_F32);
				ptx_mul_f32(k, o[e], n, wf[e]);
			} else if (kp->has_bias) {
				o[e] = ptx_tmp(k, PTX_F32);
				ptx_add_f32(k, o[e], n, bf[e]);
			} else {
				o[e] = n;
			}
		}
		pack(g, o, po);
		store_vec(g, &y, j, po);
	}
	g->zp = NULL;
	ptx_ins(k, "add.u64 %s, %s, %s", row, row, rstride);
	ptx_ins(k, "setp.lt.u64 %s, %s, %s", p, row, rows);
	ptx_loop_end(k, &lp, p, 0);
	ptx_label(k, done);
}

static int gen_forward(struct gen *g)
{
	struct ptx_kernel *k = g->k;
	const struct wsn__kernel_plan *kp = g->kp;
	static const char *const pn[] = { "x", "weight", "bias", "y", "mean", "rstd" };
	const char *pr[6];

	for (int i = 0; i < 6; i++)
		ptx_param(k, PTX_U64, pn[i]);
	ptx_param(k, PTX_U64, "rows");
	ptx_param(k, PTX_U64, "x_ld");
	ptx_param(k, PTX_U64, "y_ld");
	ptx_param(k, PTX_F32, "eps");
	for (int i = 0; i < 6; i++) {
		pr[i] = ptx_reg(k, PTX_U64, "p_%s", pn[i]);
		ptx_ld_param(k, PTX_U64, pr[i], pn[i]);
	}
	const char *rows = ptx_reg(k, PTX_U64, "rows"), *xld = ptx_reg(k, PTX_U64, "x_ldb");
	const char *yld = ptx_reg(k, PTX_U64, "y_ldb"), *eps = ptx_reg(k, PTX_F32, "eps");
	ptx_ld_param(k, PTX_U64, rows, "rows");
	ptx_ld_param(k, PTX_U64, xld, "x_ld");
	ptx_ld_param(k, PTX_U64, yld, "y_ld");
	ptx_ld_param(k, PTX_F32, eps, "eps");
	ptx_ins(k, "mul.lo.u64 %s, %s, %d", xld, xld, g->E);
	ptx_ins(k, "mul.lo.u64 %s, %s, %d", yld, yld, g->E);
	setup_common(g);

	const char *txoff = ptx_reg(k, PTX_U64, "txoff");
	ptx_ins(k, "mul.wide.u32 %s, %s, 16", txoff, g->tx);
	/* first row of this group, stride between a group's rows */
	const char *row0 = ptx_reg(k, PTX_U64, "row0"), *rstride = ptx_reg(k, PTX_U64, "rstride");
	const char *c = ptx_tmp(k, PTX_U32), *nc = ptx_tmp(k, PTX_U32);
	ptx_sreg(k, c, "%ctaid.x");
	ptx_sreg(k, nc, "%nctaid.x");
	ptx_ins(k, "mad.lo.u32 %s, %s, %d, %s", c, c, g->bdimy, g->ty);
	ptx_ins(k, "cvt.u64.u32 %s, %s", row0, c);
	ptx_ins(k, "mul.wide.u32 %s, %s, %d", rstride, nc, g->bdimy);

	/* statistics predicates: pointer given and first thread of the row */
	const char *p_t0 = ptx_reg(k, PTX_PRED, "p_tx0"), *p_mean = ptx_reg(k, PTX_PRED, "p_mean_out");
	const char *p_rstd = ptx_reg(k, PTX_PRED, "p_rstd_out");
	ptx_ins(k, "setp.eq.u32 %s, %s, 0", p_t0, g->tx);
	ptx_ins(k, "setp.ne.and.u64 %s, %s, 0, %s", p_mean, pr[4], p_t0);
	ptx_ins(k, "setp.ne.and.u64 %s, %s, 0, %s", p_rstd, pr[5], p_t0);

	/* 16-byte path when every row start is 16-byte aligned */
	const char *al = ptx_tmp(k, PTX_B64), *pal = ptx_reg(k, PTX_PRED, "p_aligned");
	ptx_ins(k, "or.b64 %s, %s, %s", al, pr[0], pr[3]);
	ptx_ins(k, "or.b64 %s, %s, %s", al, al, xld);
	ptx_ins(k, "or.b64 %s, %s, %s", al, al, yld);
	if (kp->has_weight)
		ptx_ins(k, "or.b64 %s, %s, %s", al, al, pr[1]);
	if (kp->has_bias)
		ptx_ins(k, "or.b64 %s, %s, %s", al, al, pr[2]);
	ptx_ins(k, "and.b64 %s, %s, 15", al, al);
	ptx_ins(k, "setp.eq.u64 %s, %s, 0", pal, al);
	const char *elem = ptx_label_new(k, "elem_path"), *exit = ptx_label_new(k, "exit");
	ptx_guard(k, pal, 1);
	ptx_bra(k, elem);
	ptx_comment(k, "---- 16-byte vector path ----");
	g->vecpath = 1;
	fwd_path(g, rows, row0, rstride, pr[0], pr[3], xld, yld, pr[1], pr[2], pr[4], pr[5], eps, txoff, p_mean,
		 p_rstd);
	ptx_bra(k, exit);
	ptx_label(k, elem);
	ptx_comment(k, "---- element path: a row or parameter is not 16-byte aligned ----");
	g->vecpath = 0;
	fwd_path(g, rows, row0, rstride, pr[0], pr[3], xld, yld, pr[1], pr[2], pr[4], pr[5], eps, txoff, p_mean,
		 p_rstd);
	ptx_label(k, exit);
	ptx_ret(k);
	return 0;
}

/* ---------------------------------------------------------------- backward */

/* Accumulator (dweight or dbias) access for slice j: f32 registers, loaded when not in registers. */
struct acc {
	const char *tag;
	int store;
	const char *s;   /* .u32 shared address of the thread's first column */
	const char *g;   /* .u64 global (workspace) address of the thread's first column */
	const char *r[MAXV][8];
};

static void acc_get(struct gen *g, struct acc *a, int j, const char *f[8])
{
	struct ptx_kernel *k = g->k;

	if (a->store == WSN_STORE_REG) {
		for (int e = 0; e < g->vec; e++)
			f[e] = a->r[j][e];
		return;
	}
	for (int e = 0; e < g->vec; e++)
		f[e] = ptx_tmp(k, PTX_F32);
	if (a->store == WSN_STORE_SMEM) {
		for (int q = 0; q < g->vec / 4; q++)
			ptx_ld_shared_v4(k, f + 4 * q, a->s, ((long long)j * g->bdimx * g->vec + 4 * q) * 4);
		return;
	}
	for (int e = 0; e < g->vec; e++) {
		const char *pe = elem_pred(g, j, e);
		if (pe) {
			ptx_mov_f32(k, f[e], 0.0f);
			ptx_guard(k, pe, 0);
		}
		ptx_ld_global(k, PTX_CACHE_DEFAULT, PTX_F32, f[e], a->g, ((long long)j * g->bdimx * g->vec + e) * 4);
	}
}

static void acc_put(struct gen *g, struct acc *a, int j, const char *const f[8])
{
	struct ptx_kernel *k = g->k;

	if (a->store == WSN_STORE_REG)
		return;
	if (a->store == WSN_STORE_SMEM) {
		for (int q = 0; q < g->vec / 4; q++)
			ptx_st_shared_v4(k, a->s, ((long long)j * g->bdimx * g->vec + 4 * q) * 4, f + 4 * q);
		return;
	}
	for (int e = 0; e < g->vec; e++) {
		const char *pe = elem_pred(g, j, e);
		if (pe)
			ptx_guard(k, pe, 0);
		ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_F32, a->g, ((long long)j * g->bdimx * g->vec + e) * 4, f[e]);
	}
}

static void bwd_path(struct gen *g, const char *rows, const char *row0, const char *rstride, const char *const pr[7],
		     const char *dyld, const char *xld, const char *dxld, const char *sld, const char *txoff,
		     struct acc *dw, struct acc *db)
{
	struct ptx_kernel *k = g->k;
	const struct wsn__kernel_plan *kp = g->kp;
	struct tens dy = { .tag = "dy", .store = kp->row_store, .cache = PTX_CACHE_STREAM };
	struct tens x = { .tag = "x", .store = kp->row_store, .cache = PTX_CACHE_STREAM };
	struct tens dx = { .tag = "dx", .store = WSN_STORE_GLOBAL, .cache = PTX_CACHE_DEFAULT };
	struct tens w = { .tag = "w", .store = kp->param_store, .cache = PTX_CACHE_READONLY };
	const char *row = ptx_reg(k, PTX_U64, "row"), *p = ptx_reg(k, PTX_PRED, "p_row");
	const char *done = ptx_label_new(k, g->vecpath ? "vec_done" : "elem_done");
	int has_dw = kp->has_weight, has_db = kp->has_bias;
	struct ptx_loop lp;

	if (kp->row_store == WSN_STORE_GLOBAL)
		dy.cache = x.cache = PTX_CACHE_DEFAULT;
	dy.g = ptx_reg(k, PTX_U64, "dya");
	x.g = ptx_reg(k, PTX_U64, "xa");
	dx.g = ptx_reg(k, PTX_U64, "dxa");
	if (dy.store == WSN_STORE_REG) {
		reg_names(g, &dy);
		reg_names(g, &x);
	}
	if (kp->has_weight) {
		w.g = ptx_reg(k, PTX_U64, "wa");
		ptx_ins(k, "add.u64 %s, %s, %s", w.g, pr[2], txoff);
		if (w.store == WSN_STORE_REG) {
			ptx_comment(k, "weight loaded once per CTA, kept in registers");
			reg_names(g, &w);
			for (int j = 0; j < g->nv; j++)
				load_vec(g, &w, j, w.r[j]);
		} else if (w.store == WSN_STORE_SMEM) {
			ptx_comment(k, "weight loaded once per CTA into shared memory (each thread its own vectors)");
			w.s = ptx_reg(k, PTX_U32, "ws_w");
			ptx_ins(k, "mad.lo.u32 %s, %s, 16, %s", w.s, g->tx, g->smem);
			ptx_ins(k, "add.u32 %s, %s, %u", w.s, w.s, g->sm_w);
			for (int j = 0; j < g->nv; j++) {
				const char *t[4];
				for (int q = 0; q < 4; q++)
					t[q] = ptx_tmp(k, PTX_B32);
				load_vec(g, &w, j, t);
				ptx_st_shared_v4(k, w.s, (long long)j * g->bdimx * 16, t);
			}
		}
	}
	/* accumulators start at zero */
	for (int a = 0; a < 2; a++) {
		struct acc *ac = a ? db : dw;
		if (!(a ? has_db : has_dw))
			continue;
		for (int j = 0; j < g->nv; j++) {
			const char *f[8];
			if (ac->store == WSN_STORE_REG) {
				for (int e = 0; e < g->vec; e++)
					ptx_mov_f32(k, ac->r[j][e], 0.0f);
				continue;
			}
			for (int e = 0; e < g->vec; e++) {
				f[e] = ptx_tmp(k, PTX_F32);
				ptx_mov_f32(k, f[e], 0.0f);
			}
			acc_put(g, ac, j, f);
		}
	}

	const char *inv[2] = { param_zero(g, rows), param_zero(g, xld) };
	ptx_mov(k, PTX_U64, row, row0);
	ptx_ins(k, "setp.ge.u64 %s, %s, %s", p, row, rows);
	ptx_guard(k, p, 0);
	ptx_bra(k, done);
	ptx_loop_begin(k, &lp, g->vecpath ? "vec_row" : "elem_row");
	opaque_zeros(g, row, inv);
	row_addr(g, dy.g, pr[0], row, dyld, txoff);
	row_addr(g, x.g, pr[1], row, xld, txoff);
	row_addr(g, dx.g, pr[5], row, dxld, txoff);
	/* per-row statistics, broadcast to the row's threads */
	const char *mean = ptx_reg(k, PTX_F32, "mean"), *rstd = ptx_reg(k, PTX_F32, "rstd");
	{
		const char *so = ptx_tmp(k, PTX_U64), *a = ptx_tmp(k, PTX_U64);
		ptx_ins(k, "mul.lo.u64 %s, %s, %s", so, row, sld);
		if (g->ln) {
			ptx_ins(k, "add.u64 %s, %s, %s", a, pr[3], so);
			ptx_ld_global(k, PTX_CACHE_DEFAULT, PTX_F32, mean, a, 0);
		}
		const char *b = ptx_tmp(k, PTX_U64);
		ptx_ins(k, "add.u64 %s, %s, %s", b, pr[4], so);
		ptx_ld_global(k, PTX_CACHE_DEFAULT, PTX_F32, rstd, b, 0);
	}
	if (dy.store == WSN_STORE_REG) {
		ptx_comment(k, "all %d loads of dy and x issued before the first use", 2 * g->nv);
		for (int j = 0; j < g->nv; j++) {
			load_vec(g, &dy, j, dy.r[j]);
			load_vec(g, &x, j, x.r[j]);
		}
	}

	/* pass 1: g = dy * w, xhat; row sums of g and g * xhat; column sums of dy * xhat and dy */
	const char *sg[2], *sgx[2], *tot[2];
	tot[0] = ptx_reg(k, PTX_F32, "sum_g");
	tot[1] = ptx_reg(k, PTX_F32, "sum_gxhat");
	for (int i = 0; i < 2; i++) {
		sg[i] = ptx_tmp(k, PTX_F32);
		sgx[i] = ptx_tmp(k, PTX_F32);
		ptx_mov_f32(k, sg[i], 0.0f);
		ptx_mov_f32(k, sgx[i], 0.0f);
	}
	for (int j = 0; j < g->nv; j++) {
		const char *dv[4], *xv[4], *wv[4], *df[8], *xf[8], *wf[8], *fw[8], *fb[8];
		get_vec(g, &dy, j, dv);
		get_vec(g, &x, j, xv);
		unpack(g, dv, df);
		unpack(g, xv, xf);
		if (kp->has_weight) {
			g->zp = g->zrow[0];
			get_vec(g, &w, j, wv);
			g->zp = NULL;
			unpack(g, wv, wf);
		}
		if (has_dw)
			acc_get(g, dw, j, fw);
		if (has_db)
			acc_get(g, db, j, fb);
		for (int e = 0; e < g->vec; e++) {
			const char *xh = ptx_tmp(k, PTX_F32), *gg = df[e];
			if (g->ln) {
				const char *d = ptx_tmp(k, PTX_F32);
				ptx_sub_f32(k, d, xf[e], mean);
				ptx_mul_f32(k, xh, d, rstd);
			} else {
				ptx_mul_f32(k, xh, xf[e], rstd);
			}
			if (kp->has_weight) {
				gg = ptx_tmp(k, PTX_F32);
				ptx_mul_f32(k, gg, df[e], wf[e]);
			}
			if (g->ln)
				ptx_add_f32(k, sg[e % 2], sg[e % 2], gg);
			ptx_fma_f32(k, sgx[e % 2], gg, xh, sgx[e % 2]);
			if (has_dw)
				ptx_fma_f32(k, fw[e], df[e], xh, fw[e]);
			if (has_db)
				ptx_add_f32(k, fb[e], fb[e], df[e]);
		}
		if (has_dw)
			acc_put(g, dw, j, fw);
		if (has_db)
			acc_put(g, db, j, fb);
	}
	ptx_add_f32(k, tot[0], sg[0], sg[1]);
	ptx_add_f32(k, tot[1], sgx[0], sgx[1]);
	reduce_row(g, tot, 2);

	/* pass 2: dx = rstd * (g - sum_g / H - xhat * sum_gxhat / H) */
	const char *mg = ptx_reg(k, PTX_F32, "mean_g"), *nmgx = ptx_reg(k, PTX_F32, "neg_mean_gxhat");
	ptx_mul_f32(k, mg, tot[0], g->invH);
	ptx_mul_f32(k, nmgx, tot[1], g->invH);
	ptx_ins(k, "neg.f32 %s, %s", nmgx, nmgx);
	ptx_comment(k, "dx");
	g->zp = g->zrow[1];
	for (int j = 0; j < g->nv; j++) {
		const char *dv[4], *xv[4], *wv[4], *df[8], *xf[8], *wf[8], *o[8], *po[4];
		get_vec(g, &dy, j, dv);
		get_vec(g, &x, j, xv);
		unpack(g, dv, df);
		unpack(g, xv, xf);
		if (kp->has_weight) {
			get_vec(g, &w, j, wv);
			unpack(g, wv, wf);
		}
		for (int e = 0; e < g->vec; e++) {
			const char *xh = ptx_tmp(k, PTX_F32), *gg = df[e], *t = ptx_tmp(k, PTX_F32);
			if (g->ln) {
				const char *d = ptx_tmp(k, PTX_F32);
				ptx_sub_f32(k, d, xf[e], mean);
				ptx_mul_f32(k, xh, d, rstd);
			} else {
				ptx_mul_f32(k, xh, xf[e], rstd);
			}
			if (kp->has_weight) {
				gg = ptx_tmp(k, PTX_F32);
				ptx_mul_f32(k, gg, df[e], wf[e]);
			}
			if (g->ln) {
				const char *u = ptx_tmp(k, PTX_F32);
				ptx_sub_f32(k, u, gg, mg);
				ptx_fma_f32(k, t, xh, nmgx, u);
			} else {
				ptx_fma_f32(k, t, xh, nmgx, gg);
			}
			o[e] = ptx_tmp(k, PTX_F32);
			ptx_mul_f32(k, o[e], t, rstd);
		}
		pack(g, o, po);
		store_vec(g, &dx, j, po);
	}
	g->zp = NULL;
	ptx_ins(k, "add.u64 %s, %s, %s", row, row, rstride);
	ptx_ins(k, "setp.lt.u64 %s, %s, %s", p, row, rows);
	ptx_loop_end(k, &lp, p, 0);
	ptx_label(k, done);
}

/* After the row loop: fold the row groups' register accumulators into group 0 (fixed order), then
 * write the CTA's partial rows to the workspace. */
static void bwd_epilogue(struct gen *g, struct acc *accs[2], const char *wsp)
{
	struct ptx_kernel *k = g->k;
	const char *cta = ptx_tmp(k, PTX_U32), *nc = ptx_tmp(k, PTX_U32);

	ptx_comment(k, "---- per-CTA partial column sums -> workspace ----");
	ptx_sreg(k, cta, "%ctaid.x");
	ptx_sreg(k, nc, "%nctaid.x");
	if (g->bdimy > 1) {
		const char *xs = ptx_reg(k, PTX_U32, "xg_s"), *p = ptx_tmp(k, PTX_PRED);
		ptx_ins(k, "mad.lo.u32 %s, %s, %d, %s", xs, g->tx, g->vec * 4, g->smem);
		ptx_ins(k, "add.u32 %s, %s, %u", xs, xs, g->sm_xg);
		for (int a = 0; a < 2; a++) {
			struct acc *ac = accs[a];
			if (!ac)
				continue;
			ptx_bar_sync(k, 0, 0);
			for (int t = g->bdimy - 1; t >= 0; t--) {
				const char *skip = ptx_label_new(k, "fold_skip");
				ptx_ins(k, "setp.ne.u32 %s, %s, %d", p, g->ty, t);
				ptx_guard(k, p, 0);
				ptx_bra(k, skip);
				for (int j = 0; j < g->nv; j++) {
					for (int q = 0; q < g->vec / 4; q++) {
						const char *const *r = ac->r[j] + 4 * q;
						long long off = ((long long)j * g->bdimx * g->vec + 4 * q) * 4;
						if (t < g->bdimy - 1) {
							const char *s[4];
							for (int i = 0; i < 4; i++)
								s[i] = ptx_tmp(k, PTX_F32);
							ptx_ld_shared_v4(k, s, xs, off);
							for (int i = 0; i < 4; i++)
								ptx_add_f32(k, r[i], r[i], s[i]);
						}
						if (t > 0)
							ptx_st_shared_v4(k, xs, off, r);
					}
				}
				ptx_label(k, skip);
				if (t > 0)
					ptx_bar_sync(k, 0, 0);
			}
		}
	}
	/* group 0 writes: dweight partial at ws[cta][.], dbias partial at ws[nctaid + cta][.] */
	const char *skipw = ptx_label_new(k, "ws_done"), *p0 = ptx_tmp(k, PTX_PRED);
	ptx_ins(k, "setp.ne.u32 %s, %s, 0", p0, g->ty);
	ptx_guard(k, p0, 0);
	ptx_bra(k, skipw);
	for (int a = 0; a < 2; a++) {
		struct acc *ac = accs[a];
		if (!ac || ac->store == WSN_STORE_GLOBAL)
			continue;
		const char *part = ptx_tmp(k, PTX_U32), *ga = ptx_tmp(k, PTX_U64), *col = ptx_tmp(k, PTX_U64);
		if (a)
			ptx_ins(k, "add.u32 %s, %s, %s", part, nc, cta);
		else
			ptx_mov(k, PTX_U32, part, cta);
		ptx_ins(k, "mul.wide.u32 %s, %s, %lld", ga, part, g->H * 4);
		ptx_ins(k, "add.u64 %s, %s, %s", ga, ga, wsp);
		ptx_ins(k, "mul.wide.u32 %s, %s, %d", col, g->tx, g->vec * 4);
		ptx_ins(k, "add.u64 %s, %s, %s", ga, ga, col);
		for (int j = 0; j < g->nv; j++) {
			const char *f[8];
			acc_get(g, ac, j, f);
			for (int e = 0; e < g->vec; e++) {
				const char *pe = elem_pred(g, j, e);
				if (pe)
					ptx_guard(k, pe, 0);
				ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_F32, ga, ((long long)j * g->bdimx * g->vec + e) * 4,
					      f[e]);
			}
		}
	}
	ptx_label(k, skipw);
}

static int gen_backward(struct gen *g)
{
	struct ptx_kernel *k = g->k;
	const struct wsn__kernel_plan *kp = g->kp;
	static const char *const pn[] = { "dy", "x", "weight", "mean", "rstd", "dx", "ws" };
	const char *pr[7];
	struct acc dw = { .tag = "dw", .store = kp->dw_store }, db = { .tag = "db", .store = kp->db_store };
	struct acc *accs[2] = { kp->has_weight ? &dw : NULL, kp->has_bias ? &db : NULL };

	for (int i = 0; i < 7; i++)
		ptx_param(k, PTX_U64, pn[i]);
	ptx_param(k, PTX_U64, "rows");
	ptx_param(k, PTX_U64, "dy_ld");
	ptx_param(k, PTX_U64, "x_ld");
	ptx_param(k, PTX_U64, "dx_ld");
	ptx_param(k, PTX_U64, "stats_ld");
	for (int i = 0; i < 7; i++) {
		pr[i] = ptx_reg(k, PTX_U64, "p_%s", pn[i]);
		ptx_ld_param(k, PTX_U64, pr[i], pn[i]);
	}
	const char *rows = ptx_reg(k, PTX_U64, "rows"), *dyld = ptx_reg(k, PTX_U64, "dy_ldb");
	const char *xld = ptx_reg(k, PTX_U64, "x_ldb"), *dxld = ptx_reg(k, PTX_U64, "dx_ldb");
	const char *sld = ptx_reg(k, PTX_U64, "stats_ldb");
	ptx_ld_param(k, PTX_U64, rows, "rows");
	ptx_ld_param(k, PTX_U64, dyld, "dy_ld");
	ptx_ld_param(k, PTX_U64, xld, "x_ld");
	ptx_ld_param(k, PTX_U64, dxld, "dx_ld");
	ptx_ld_param(k, PTX_U64, sld, "stats_ld");
	ptx_ins(k, "mul.lo.u64 %s, %s, %d", dyld, dyld, g->E);
	ptx_ins(k, "mul.lo.u64 %s, %s, %d", xld, xld, g->E);
	ptx_ins(k, "mul.lo.u64 %s, %s, %d", dxld, dxld, g->E);
	ptx_ins(k, "shl.b64 %s, %s, 2", sld, sld);
	setup_common(g);

	const char *txoff = ptx_reg(k, PTX_U64, "txoff");
	ptx_ins(k, "mul.wide.u32 %s, %s, 16", txoff, g->tx);
	const char *row0 = ptx_reg(k, PTX_U64, "row0"), *rstride = ptx_reg(k, PTX_U64, "rstride");
	const char *c = ptx_tmp(k, PTX_U32), *nc = ptx_tmp(k, PTX_U32), *cy = ptx_tmp(k, PTX_U32);
	ptx_sreg(k, c, "%ctaid.x");
	ptx_sreg(k, nc, "%nctaid.x");
	ptx_ins(k, "mad.lo.u32 %s, %s, %d, %s", cy, c, g->bdimy, g->ty);
	ptx_ins(k, "cvt.u64.u32 %s, %s", row0, cy);
	ptx_ins(k, "mul.wide.u32 %s, %s, %d", rstride, nc, g->bdimy);

	/* accumulator homes */
	for (int a = 0; a < 2; a++) {
		struct acc *ac = accs[a];
		if (!ac)
			continue;
		if (ac->store == WSN_STORE_REG) {
			for (int j = 0; j < g->nv; j++)
				for (int e = 0; e < g->vec; e++)
					ac->r[j][e] = ptx_reg(k, PTX_F32, "%s%d_%d", ac->tag, j, e);
		} else if (ac->store == WSN_STORE_SMEM) {
			ac->s = ptx_reg(k, PTX_U32, "%s_s", ac->tag);
			ptx_ins(k, "mad.lo.u32 %s, %s, %d, %s", ac->s, g->tx, g->vec * 4, g->smem);
			ptx_ins(k, "add.u32 %s, %s, %u", ac->s, ac->s, a ? g->sm_db : g->sm_dw);
		} else {
			const char *part = ptx_tmp(k, PTX_U32), *col = ptx_tmp(k, PTX_U64);
			ac->g = ptx_reg(k, PTX_U64, "%s_g", ac->tag);
			if (a)
				ptx_ins(k, "add.u32 %s, %s, %s", part, nc, c);
			else
				ptx_mov(k, PTX_U32, part, c);
			ptx_ins(k, "mul.wide.u32 %s, %s, %lld", ac->g, part, g->H * 4);
			ptx_ins(k, "add.u64 %s, %s, %s", ac->g, ac->g, pr[6]);
			ptx_ins(k, "mul.wide.u32 %s, %s, %d", col, g->tx, g->vec * 4);
			ptx_ins(k, "add.u64 %s, %s, %s", ac->g, ac->g, col);
		}
	}

	const char *al = ptx_tmp(k, PTX_B64), *pal = ptx_reg(k, PTX_PRED, "p_aligned");
	ptx_ins(k, "or.b64 %s, %s, %s", al, pr[0], pr[1]);
	ptx_ins(k, "or.b64 %s, %s, %s", al, al, pr[5]);
	ptx_ins(k, "or.b64 %s, %s, %s", al, al, dyld);
	ptx_ins(k, "or.b64 %s, %s, %s", al, al, xld);
	ptx_ins(k, "or.b64 %s, %s, %s", al, al, dxld);
	if (kp->has_weight)
		ptx_ins(k, "or.b64 %s, %s, %s", al, al, pr[2]);
	ptx_ins(k, "and.b64 %s, %s, 15", al, al);
	ptx_ins(k, "setp.eq.u64 %s, %s, 0", pal, al);
	const char *elem = ptx_label_new(k, "elem_path"), *join = ptx_label_new(k, "rows_done");
	ptx_guard(k, pal, 1);
	ptx_bra(k, elem);
	ptx_comment(k, "---- 16-byte vector path ----");
	g->vecpath = 1;
	bwd_path(g, rows, row0, rstride, pr, dyld, xld, dxld, sld, txoff, &dw, &db);
	ptx_bra(k, join);
	ptx_label(k, elem);
	ptx_comment(k, "---- element path: a row or the weight is not 16-byte aligned ----");
	g->vecpath = 0;
	bwd_path(g, rows, row0, rstride, pr, dyld, xld, dxld, sld, txoff, &dw, &db);
	ptx_label(k, join);
	g->vecpath = 1;
	if (accs[0] || accs[1])
		bwd_epilogue(g, accs, pr[6]);
	ptx_ret(k);
	return 0;
}

/* Finish: column c of dweight (dbias) = sum over parts p = 0..nparts-1 of ws[p][c] ([nparts + p][c]), in a
 * fixed order: slice s (of 8) adds parts s, s+8, ... in turn, then slices 0..7 are added in turn. */
static int gen_finish(struct ptx_module *m, const struct wsn__kernel_plan *kp)
{
	struct ptx_kernel *k = ptx_kernel_begin(m, kp->finish_entry);
	int E = (int)wsn_dtype_size(kp->dtype), nacc = kp->has_bias ? 2 : 1;
	long long H = kp->hidden;
	const int UNR = 4, SL = 8;

	if (!k)
		return m->err;
	ptx_param(k, PTX_U64, "ws");
	ptx_param(k, PTX_U64, "dweight");
	ptx_param(k, PTX_U64, "dbias");
	ptx_param(k, PTX_U32, "nparts");
	ptx_kernel_launch_bounds(k, kp->finish_threads, 0);
	ptx_kernel_shared(k, "fin_red", (unsigned)(2 * SL * 32 * 4), 16);
	const char *wsp = ptx_reg(k, PTX_U64, "p_ws"), *dwp = ptx_reg(k, PTX_U64, "p_dweight");
	const char *dbp = ptx_reg(k, PTX_U64, "p_dbias"), *np = ptx_reg(k, PTX_U32, "nparts");
	ptx_ld_param(k, PTX_U64, wsp, "ws");
	ptx_ld_param(k, PTX_U64, dwp, "dweight");
	ptx_ld_param(k, PTX_U64, dbp, "dbias");
	ptx_ld_param(k, PTX_U32, np, "nparts");
	const char *tid = ptx_reg(k, PTX_U32, "thread"), *cx = ptx_reg(k, PTX_U32, "cx"), *sy = ptx_reg(k, PTX_U32, "sy");
	const char *col = ptx_reg(k, PTX_U32, "col"), *pcol = ptx_reg(k, PTX_PRED, "p_col");
	ptx_sreg(k, tid, "%tid.x");
	ptx_ins(k, "and.b32 %s, %s, 31", cx, tid);
	ptx_ins(k, "shr.u32 %s, %s, 5", sy, tid);
	ptx_sreg(k, col, "%ctaid.x");
	ptx_ins(k, "mad.lo.u32 %s, %s, 32, %s", col, col, cx);
	ptx_ins(k, "setp.lt.u32 %s, %s, %lld", pcol, col, H);
	/* dbias parts start nparts * H floats in */
	const char *sum[2], *base[2];
	for (int a = 0; a < nacc; a++) {
		sum[a] = ptx_reg(k, PTX_F32, "sum%d", a);
		base[a] = ptx_reg(k, PTX_U64, "base%d", a);
		ptx_mov_f32(k, sum[a], 0.0f);
		ptx_ins(k, "mul.wide.u32 %s, %s, 4", base[a], col);
		ptx_ins(k, "add.u64 %s, %s, %s", base[a], base[a], wsp);
		if (a) {
			const char *off = ptx_tmp(k, PTX_U64);
			ptx_ins(k, "mul.wide.u32 %s, %s, %lld", off, np, H * 4);
			ptx_ins(k, "add.u64 %s, %s, %s", base[a], base[a], off);
		}
	}
	const char *pp = ptx_reg(k, PTX_U32, "part"), *p = ptx_reg(k, PTX_PRED, "p_more");
	const char *addr = ptx_reg(k, PTX_U64, "addr"), *po = ptx_tmp(k, PTX_U64);
	struct ptx_loop lp;
	ptx_mov(k, PTX_U32, pp, sy);
	ptx_ins(k, "setp.lt.u32 %s, %s, %s", p, pp, np);
	ptx_ins(k, "and.pred %s, %s, %s", p, p, pcol);
	ptx_loop_begin(k, &lp, "parts");
	ptx_loop_break_if(k, &lp, p, 1);
	for (int a = 0; a < nacc; a++) {
		const char *v[4], *pu[4];
		for (int u = 0; u < UNR; u++) {
			const char *pi = ptx_tmp(k, PTX_U32);
			v[u] = ptx_tmp(k, PTX_F32);
			pu[u] = ptx_tmp(k, PTX_PRED);
			ptx_ins(k, "add.u32 %s, %s, %d", pi, pp, u * SL);
			ptx_ins(k, "setp.lt.u32 %s, %s, %s", pu[u], pi, np);
			ptx_ins(k, "mul.wide.u32 %s, %s, %lld", po, pi, H * 4);
			ptx_ins(k, "add.u64 %s, %s, %s", addr, base[a], po);
			ptx_mov_f32(k, v[u], 0.0f);
			ptx_guard(k, pu[u], 0);
			ptx_ld_global(k, PTX_CACHE_LAST, PTX_F32, v[u], addr, 0);
		}
		for (int u = 0; u < UNR; u++) {
			ptx_guard(k, pu[u], 0);
			ptx_add_f32(k, sum[a], sum[a], v[u]);
		}
	}
	ptx_ins(k, "add.u32 %s, %s, %d", pp, pp, UNR * SL);
	ptx_ins(k, "setp.lt.u32 %s, %s, %s", p, pp, np);
	ptx_ins(k, "and.pred %s, %s, %s", p, p, pcol);
	ptx_loop_end(k, &lp, NULL, 0);
	/* slices -> shared -> slice 0 adds them in order */
	const char *sa = ptx_reg(k, PTX_U32, "fin_slot"), *ra = ptx_reg(k, PTX_U32, "fin_col");
	ptx_smem_addr(k, ra, "fin_red", 0);
	ptx_ins(k, "mad.lo.u32 %s, %s, 4, %s", ra, cx, ra);
	ptx_ins(k, "mad.lo.u32 %s, %s, 128, %s", sa, sy, ra);
	for (int a = 0; a < nacc; a++)
		ptx_st_shared(k, PTX_F32, sa, a * SL * 128, sum[a]);
	ptx_bar_sync(k, 0, 0);
	const char *p0 = ptx_tmp(k, PTX_PRED), *out = ptx_label_new(k, "out");
	ptx_ins(k, "setp.ne.u32 %s, %s, 0", p0, sy);
	ptx_ins(k, "or.pred %s, %s, !%s", p0, p0, pcol);
	ptx_guard(k, p0, 0);
	ptx_bra(k, out);
	for (int a = 0; a < nacc; a++) {
		const char *dst = a ? dbp : dwp, *pz = ptx_tmp(k, PTX_PRED), *ga = ptx_tmp(k, PTX_U64);
		for (int s = 0; s < SL; s++) {
			const char *v = ptx_tmp(k, PTX_F32);
			ptx_ld_shared(k, PTX_F32, v, ra, a * SL * 128 + s * 128);
			if (s == 0)
				ptx_mov(k, PTX_F32, sum[a], v);
			else
				ptx_add_f32(k, sum[a], sum[a], v);
		}
		ptx_ins(k, "setp.ne.u64 %s, %s, 0", pz, dst);
		ptx_ins(k, "mad.wide.u32 %s, %s, %d, %s", ga, col, E, dst);
		if (E == 4) {
			ptx_guard(k, pz, 0);
			ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_F32, ga, 0, sum[a]);
		} else {
			const char *h = ptx_tmp(k, PTX_B16);
			if (kp->dtype == WSN_BF16)
				ptx_cvt_bf16_f32(k, h, sum[a]);
			else
				ptx_cvt_f16_f32(k, h, sum[a]);
			ptx_guard(k, pz, 0);
			ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_B16, ga, 0, h);
		}
	}
	ptx_label(k, out);
	ptx_ret(k);
	return ptx_kernel_end(k);
}

/* ---------------------------------------------------------------- module */

static void plan_comments(struct ptx_module *m, const struct wsn__kernel_plan *kp)
{
	static const char *const st[] = { "registers", "shared", "global" };
	const char *w = kp->why;

	ptx_module_comment(m, "wsnorm generated kernel: %s %s, multi-wave persistent", wsn_op_name(kp->op),
			   wsn_dtype_name(kp->dtype));
	ptx_module_comment(m, "op=%s dtype=%s hidden=%lld weight=%d bias=%d", wsn_op_name(kp->op),
			   wsn_dtype_name(kp->dtype), (long long)kp->hidden, kp->has_weight, kp->has_bias);
	ptx_module_comment(m, "bdimx=%u bdimy=%u block_threads=%u per_thread=%u vec=%u nvec=%u stages=%u unroll=%u",
			   kp->bdimx, kp->bdimy, kp->block_threads, kp->per_thread, kp->vec, kp->nvec, kp->stages,
			   kp->unroll);
	ptx_module_comment(m, "row=%s params=%s dweight=%s dbias=%s est_regs=%u smem=%u ctas_per_sm=%u max_grid=%u",
			   st[kp->row_store], st[kp->param_store], st[kp->dw_store], st[kp->db_store], kp->est_regs,
			   kp->smem_bytes, kp->ctas_per_sm, kp->max_grid);
	/* the reasoning, one clause per line */
	while (*w) {
		const char *e = strstr(w, "; ");
		int n = e ? (int)(e - w) : (int)strlen(w);
		ptx_module_comment(m, "  %.*s", n, w);
		w += n + (e ? 2 : 0);
	}
	ptx_buf_printf(&m->text, "\n");
}

static void layout_smem(struct gen *g)
{
	const struct wsn__kernel_plan *kp = g->kp;
	unsigned off = 0, padded = (unsigned)(g->nv * g->bdimx);

	g->sm_red = 0;
	if (g->nw > 1)
		off += (unsigned)(g->bdimy * 2 * g->nw * 16);
	off = (off + 15) / 16 * 16;
	g->sm_w = off;
	if (g->bwd && kp->has_weight && kp->param_store == WSN_STORE_SMEM)
		off += padded * 16;
	g->sm_dw = off;
	if (g->bwd && kp->has_weight && kp->dw_store == WSN_STORE_SMEM)
		off += padded * (unsigned)g->vec * 4;
	g->sm_db = off;
	if (g->bwd && kp->has_bias && kp->db_store == WSN_STORE_SMEM)
		off += padded * (unsigned)g->vec * 4;
	g->sm_xg = off;
}

int wsn__generate_ptx(const struct wsn__kernel_plan *kp, char **ptx)
{
	struct ptx_module m;
	struct gen g;
	int err;

	*ptx = NULL;
	if (kp->approach != WSN_APPROACH_MULTIWAVE)
		return wsn__error(WSN_ENOTSUP, "codegen: %s kernels are not available (approach %s)", kp->entry,
				  wsn_approach_name(kp->approach));
	if (!kp->bdimx || kp->bdimx % 32 || !kp->nvec || kp->nvec > MAXV || kp->bdimx * kp->bdimy != kp->block_threads)
		return wsn__error(WSN_EINVAL, "codegen: plan for %s is inconsistent (bdimx %u, bdimy %u, nvec %u)",
				  kp->entry, kp->bdimx, kp->bdimy, kp->nvec);
	if ((err = ptx_module_init(&m, kp->arch)))
		return err;
	memset(&g, 0, sizeof(g));
	g.kp = kp;
	g.bwd = wsn_op_is_backward(kp->op);
	g.ln = kp->op == WSN_LAYERNORM_FWD || kp->op == WSN_LAYERNORM_BWD;
	g.E = (int)wsn_dtype_size(kp->dtype);
	g.vec = 16 / g.E;
	g.nv = (int)kp->nvec;
	g.bdimx = (int)kp->bdimx;
	g.bdimy = (int)kp->bdimy;
	g.nw = g.bdimx / 32;
	g.H = kp->hidden;
	g.NV = (g.H + g.vec - 1) / g.vec;
	g.nfull = g.H / g.vec;
	g.tail = g.H % g.vec;
	if ((long long)g.nv * g.bdimx < g.NV) {
		ptx_module_free(&m);
		return wsn__error(WSN_EINVAL, "codegen: plan for %s does not cover hidden %lld", kp->entry, g.H);
	}
	layout_smem(&g);
	plan_comments(&m, kp);
	ptx_module_extern_smem(&m, SMEM_SYM, 16);
	g.k = ptx_kernel_begin(&m, kp->entry);
	if (!g.k) {
		err = m.err;
		ptx_module_free(&m);
		return err;
	}
	ptx_kernel_launch_bounds(g.k, kp->block_threads, kp->ctas_per_sm);
	err = g.bwd ? gen_backward(&g) : gen_forward(&g);
	if (!err)
		err = ptx_kernel_end(g.k);
	if (!err && kp->finish_entry[0])
		err = gen_finish(&m, kp);
	if (err) {
		ptx_module_free(&m);
		return err;
	}
	return ptx_module_take(&m, ptx);
}
