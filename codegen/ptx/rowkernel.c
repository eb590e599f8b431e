/* SPDX-License-Identifier: MIT */
/* codegen/ptx/rowkernel.c: row-kernel pieces both generators call: element access, passes, set-up, the ABI prologue, accumulators. */
#include "rowkernel.h"

#include <string.h>

/* ---------------------------------------------------------------- element access */

static void zero4(struct rk_gen *g, const char *const r[4])
{
	for (int q = 0; q < 4; q++)
		ptx_mov_imm(g->k, PTX_B32, r[q], 0);
}

/* Bytes from one slice to the next: of a row tensor (16 bytes a thread) and of an accumulator (vec
 * floats a thread). */
static long long tens_slice(const struct rk_gen *g)
{
	return (long long)g->bdimx * 16;
}

static long long acc_slice(const struct rk_gen *g)
{
	return (long long)g->bdimx * g->vec * 4;
}

/* Byte offset of slice j from its address register, which points at slice g->jbase (0 but in the
 * slices after a pass's rounds, wsn__rk_pass). */
static long long tens_off(const struct rk_gen *g, int j)
{
	return (j - g->jbase) * tens_slice(g);
}

static long long acc_off(const struct rk_gen *g, int j)
{
	return (j - g->jbase) * acc_slice(g);
}

/* Is element e of slice j valid for this thread: NULL (always) or a predicate. */
const char *wsn__rk_elem_pred(struct rk_gen *g, int j, int e)
{
	if (g->slice_kind[j] == RK_J_ALL)
		return NULL;
	return e < g->tail ? g->p_tail_elem[j] : g->p_full[j];
}

/* Element loads of vector j into r (packed), element e predicated by pred(e) (NULL: always). */
static void load_elems(struct rk_gen *g, struct rk_tens *t, int j, const char *const r[4], int nel,
		       const char *const *preds, int pack_pred_from_tail)
{
	struct ptx_kernel *k = g->k;
	long long off = tens_off(g, j);

	if (g->elem_bytes == 4) {
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
void wsn__rk_load_vec(struct rk_gen *g, struct rk_tens *t, int j, const char *const r[4])
{
	struct ptx_kernel *k = g->k;
	long long off = tens_off(g, j);
	const char *preds[8];

	if (g->vecpath) {
		if (g->slice_kind[j] == RK_J_ALL) {
			ptx_ld_global_v4(k, t->cache, r, t->g, off);
			return;
		}
		zero4(g, r);
		ptx_guard(k, g->p_full[j], 0);
		ptx_ld_global_v4(k, t->cache, r, t->g, off);
		if (g->has_tail[j]) {
			for (int e = 0; e < 8; e++)
				preds[e] = g->p_tail[j];
			load_elems(g, t, j, r, (int)g->tail, preds, 1);
		}
		return;
	}
	if (g->slice_kind[j] != RK_J_ALL)
		zero4(g, r);
	for (int e = 0; e < g->vec; e++)
		preds[e] = wsn__rk_elem_pred(g, j, e);
	load_elems(g, t, j, r, g->vec, preds, 0);
}

/* Packed registers of vec f32 values (f32 data is used as is). */
static void pack(struct rk_gen *g, const char *const f[8], const char *p[4])
{
	struct ptx_kernel *k = g->k;

	if (g->elem_bytes == 4) {
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

/* Pack the vec f32 values f and store them as vector j of t's global row. */
void wsn__rk_store_vec(struct rk_gen *g, struct rk_tens *t, int j, const char *const f[8])
{
	struct ptx_kernel *k = g->k;
	long long off = tens_off(g, j);
	int nel = g->vec, from_tail = 0;
	const char *preds[8], *r[4];

	pack(g, f, r);

	if (g->vecpath) {
		if (g->slice_kind[j] == RK_J_ALL) {
			ptx_st_global_v4(k, t->cache, t->g, off, r);
			return;
		}
		ptx_guard(k, g->p_full[j], 0);
		ptx_st_global_v4(k, t->cache, t->g, off, r);
		if (!g->has_tail[j])
			return;
		nel = (int)g->tail;
		from_tail = 1;
	}
	for (int e = 0; e < nel; e++)
		preds[e] = from_tail ? g->p_tail[j] : wsn__rk_elem_pred(g, j, e);
	if (g->elem_bytes == 4) {
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
void wsn__rk_get_vec(struct rk_gen *g, struct rk_tens *t, int j, const char *out[4])
{
	if (t->store == WSN_STORE_REG) {
		for (int q = 0; q < 4; q++) {
			out[q] = t->r[j][q];
			if (g->zero) {
				out[q] = ptx_tmp(g->k, PTX_B32);
				ptx_ins(g->k, "xor.b32 %s, %s, %s", out[q], t->r[j][q], g->zero);
			}
		}
		return;
	}
	for (int q = 0; q < 4; q++)
		out[q] = ptx_tmp(g->k, PTX_B32);
	if (t->store == WSN_STORE_SMEM)
		ptx_ld_shared_v4(g->k, out, t->s, tens_off(g, j));
	else
		wsn__rk_load_vec(g, t, j, out);
}

/* 16-byte vectors one iteration of a pass's chunk loop may move between memory and registers. */
#define RK_PASS_VECS 8

/* Move one address by bytes: the shared-memory one (s) or the global one (ga), as store says. */
static void step_addr(struct ptx_kernel *k, int store, const char *s, const char *ga, long long bytes)
{
	if (store == WSN_STORE_SMEM)
		ptx_ins(k, "add.u32 %s, %s, %lld", s, s, bytes);
	else
		ptx_ins(k, "add.u64 %s, %s, %lld", ga, ga, bytes);
}

/* Move every address of a pass by d slices. */
static void pass_step(struct rk_gen *g, const struct rk_pass *ps, int d)
{
	for (int i = 0; i < ps->nt; i++)
		step_addr(g->k, ps->t[i]->store, ps->t[i]->s, ps->t[i]->g, d * tens_slice(g));
	for (int i = 0; i < ps->na; i++)
		step_addr(g->k, ps->a[i]->store, ps->a[i]->s, ps->a[i]->g, d * acc_slice(g));
}

void wsn__rk_pass(struct rk_gen *g, const struct rk_pass *ps, void (*body)(struct rk_gen *g, int j, void *ctx),
		  void *ctx)
{
	struct ptx_kernel *k = g->k;
	int whole = 0, c, n, j0 = 0;
	const char *cnt, *p;
	struct ptx_loop lp;

	for (int i = 0; i < ps->nt; i++)
		if (ps->t[i]->store == WSN_STORE_REG)
			goto unrolled;
	for (int i = 0; i < ps->na; i++)
		if (ps->a[i]->store == WSN_STORE_REG)
			goto unrolled;
	while (whole < g->vectors && g->slice_kind[whole] == RK_J_ALL)
		whole++;
	c = ps->vecs > 0 && ps->vecs < RK_PASS_VECS ? RK_PASS_VECS / ps->vecs : 1;
	n = whole / c;
	if (n < 2)
		goto unrolled;
	ptx_comment(k, "slices 0..%d as %d rounds of %d (a loop, so that each round's loads wait for the one "
		    "before); the addresses step through them in place", n * c - 1, n, c);
	cnt = ptx_tmp(k, PTX_U32);
	p = ptx_tmp(k, PTX_PRED);
	ptx_mov_imm(k, PTX_U32, cnt, 0);
	ptx_loop_begin(k, &lp, "pass_round");
	ptx_ins(k, ".pragma \"nounroll\""); /* unrolled by ptxas, the rounds' loads would be hoisted again */
	for (int j = 0; j < c; j++)
		body(g, j, ctx);
	pass_step(g, ps, c);
	ptx_ins(k, "add.u32 %s, %s, 1", cnt, cnt);
	ptx_ins(k, "setp.lt.u32 %s, %s, %d", p, cnt, n);
	ptx_loop_end(k, &lp, p, 0);
	/* the rest from where the rounds left the addresses, which then go back (dead code where the next
	 * row sets them anew) */
	j0 = n * c;
	g->jbase = j0;
	for (int j = j0; j < g->vectors; j++)
		body(g, j, ctx);
	g->jbase = 0;
	pass_step(g, ps, -j0);
	return;
unrolled:
	for (int j = 0; j < g->vectors; j++)
		body(g, j, ctx);
}

/* Packed registers -> vec f32 values (f32 data is used as is). */
void wsn__rk_unpack(struct rk_gen *g, const char *const p[4], const char *f[8])
{
	struct ptx_kernel *k = g->k;

	if (g->elem_bytes == 4) {
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

/* ---------------------------------------------------------------- reductions */

/* Bytes each warp writes per reduction buffer (see rowkernel.h). */
unsigned wsn__rk_red_slot(const struct rk_gen *g)
{
	return g->red_slot ? g->red_slot : 16;
}

/* ---------------------------------------------------------------- shared setup */

void wsn__rk_setup_common(struct rk_gen *g)
{
	struct ptx_kernel *k = g->k;
	const struct wsn__kernel_plan *kp = g->kp;
	const char *tid = ptx_reg(k, PTX_U32, "thread");

	g->tid_x = ptx_reg(k, PTX_U32, "tx");
	g->tid_y = ptx_reg(k, PTX_U32, "ty");
	ptx_sreg(k, tid, "%tid.x");
	if (g->tid_base)
		ptx_ins(k, "sub.u32 %s, %s, %u", tid, tid, g->tid_base);
	ptx_ins(k, "rem.u32 %s, %s, %d", g->tid_x, tid, g->bdimx);
	ptx_ins(k, "div.u32 %s, %s, %d", g->tid_y, tid, g->bdimx);
	g->smem = ptx_reg(k, PTX_U32, "smem");
	ptx_smem_addr(k, g->smem, RK_SMEM_SYM, 0);
	g->invH = ptx_reg(k, PTX_F32, "inv_hidden");
	ptx_mov_f32(k, g->invH, (float)(1.0 / (double)kp->hidden));

	/* predicates of the slices with partial vectors */
	for (int j = 0; j < g->vectors; j++) {
		long long first = (long long)j * g->bdimx, nf = g->nfull - first;
		if (first + g->bdimx <= g->nfull) {
			g->slice_kind[j] = RK_J_ALL;
			continue;
		}
		g->slice_kind[j] = RK_J_PART;
		g->p_full[j] = ptx_reg(k, PTX_PRED, "pfull%d", j);
		ptx_ins(k, "setp.lt.s32 %s, %s, %lld", g->p_full[j], g->tid_x, nf);
		g->has_tail[j] = g->tail && nf >= 0 && nf < g->bdimx;
		if (g->has_tail[j]) {
			g->p_tail[j] = ptx_reg(k, PTX_PRED, "ptail%d", j);
			g->p_tail_elem[j] = ptx_reg(k, PTX_PRED, "plo%d", j);
			ptx_ins(k, "setp.eq.s32 %s, %s, %lld", g->p_tail[j], g->tid_x, nf);
			ptx_ins(k, "or.pred %s, %s, %s", g->p_tail_elem[j], g->p_full[j], g->p_tail[j]);
		} else {
			g->p_tail[j] = NULL;
			g->p_tail_elem[j] = g->p_full[j];
		}
	}

	/* reduction slots: group tid_y owns 2 buffers x warps x slot bytes at sm_red + tid_y * 2 * warps * slot */
	if (g->warps > 1) {
		const char *warp = ptx_tmp(k, PTX_U32), *lane = ptx_tmp(k, PTX_U32);
		g->red_w = ptx_reg(k, PTX_U32, "red_w");
		g->red_r = ptx_reg(k, PTX_U32, "red_r");
		g->red_par = ptx_reg(k, PTX_U32, "red_par");
		g->p_lane0 = ptx_reg(k, PTX_PRED, "p_lane0");
		ptx_ins(k, "mad.lo.u32 %s, %s, %d, %s", g->red_r, g->tid_y, 2 * (int)wsn__rk_red_slot(g) * g->warps, g->smem);
		if (g->sm_red)
			ptx_ins(k, "add.u32 %s, %s, %u", g->red_r, g->red_r, g->sm_red);
		ptx_ins(k, "shr.u32 %s, %s, 5", warp, g->tid_x);
		ptx_ins(k, "mad.lo.u32 %s, %s, %u, %s", g->red_w, warp, wsn__rk_red_slot(g), g->red_r);
		ptx_ins(k, "and.b32 %s, %s, 31", lane, g->tid_x);
		ptx_ins(k, "setp.eq.u32 %s, %s, 0", g->p_lane0, lane);
		ptx_mov_imm(k, PTX_U32, g->red_par, 0);
		g->bar_id = ptx_reg(k, PTX_U32, "bar_id");
		ptx_comment(k, "row group ty synchronises on named barrier 1 + ty");
		ptx_ins(k, "add.u32 %s, %s, 1", g->bar_id, g->tid_y);
	}
}

/* dst = the elements of slice j this thread owns (see rowkernel.h). */
void wsn__rk_slice_count(struct rk_gen *g, int j, const char *dst)
{
	struct ptx_kernel *k = g->k;

	if (g->slice_kind[j] == RK_J_ALL) {
		ptx_mov_f32(k, dst, (float)g->vec);
		return;
	}
	ptx_mov_f32(k, dst, 0.0f);
	if (g->has_tail[j]) {
		ptx_guard(k, g->p_tail[j], 0);
		ptx_mov_f32(k, dst, (float)g->tail);
	}
	ptx_guard(k, g->p_full[j], 0);
	ptx_mov_f32(k, dst, (float)g->vec);
}

/* LayerNorm forward: g->cnt, the row elements this thread owns, and g->rcnt = 1 / that (0 for a thread past
 * the row's end). */
void wsn__rk_own_count(struct rk_gen *g)
{
	struct ptx_kernel *k = g->k;

	/* elements this thread owns, and their reciprocal (0 for a thread past the row's end) */
	g->cnt = ptx_reg(k, PTX_F32, "own_count");
	g->rcnt = ptx_reg(k, PTX_F32, "own_rcount");
	int nall = 0;
	for (int j = 0; j < g->vectors; j++)
		nall += g->slice_kind[j] == RK_J_ALL ? g->vec : 0;
	ptx_mov_f32(k, g->cnt, (float)nall);
	for (int j = 0; j < g->vectors; j++) {
		const char *c = ptx_tmp(k, PTX_F32);
		if (g->slice_kind[j] == RK_J_ALL)
			continue;
		wsn__rk_slice_count(g, j, c);
		ptx_add_f32(k, g->cnt, g->cnt, c);
	}
	const char *pz = ptx_tmp(k, PTX_PRED);
	ptx_ins(k, "rcp.rn.f32 %s, %s", g->rcnt, g->cnt);
	ptx_ins(k, "setp.eq.f32 %s, %s, 0f00000000", pz, g->cnt);
	ptx_ins(k, "selp.f32 %s, 0f00000000, %s, %s", g->rcnt, g->rcnt, pz);
}

/* Per-row opaque zeros: row >> 63 (rows < 2^63), combined with zeros of parameters ptxas cannot see. */
void wsn__rk_opaque_zeros(struct rk_gen *g, const char *row, const char *const inv[2])
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
const char *wsn__rk_param_zero(struct rk_gen *g, const char *param64)
{
	const char *t = ptx_tmp(g->k, PTX_U64), *z = ptx_tmp(g->k, PTX_U32);

	ptx_ins(g->k, "shr.u64 %s, %s, 63", t, param64);
	ptx_ins(g->k, "cvt.u32.u64 %s, %s", z, t);
	return z;
}

/* addr (u64) = base + row * ld * E + tx * 16 */
void wsn__rk_row_addr(struct rk_gen *g, const char *dst, const char *base, const char *row, const char *ld_bytes,
		     const char *txoff)
{
	ptx_ins(g->k, "mad.lo.u64 %s, %s, %s, %s", dst, row, ld_bytes, base);
	ptx_ins(g->k, "add.u64 %s, %s, %s", dst, dst, txoff);
}

/* Names of REG storage for a tensor. */
void wsn__rk_reg_names(struct rk_gen *g, struct rk_tens *t)
{
	for (int j = 0; j < g->vectors; j++)
		for (int q = 0; q < 4; q++)
			t->r[j][q] = ptx_reg(g->k, PTX_B32, "%s%d_%d", t->tag, j, q);
}

void wsn__rk_acc_get(struct rk_gen *g, struct rk_acc *a, int j, const char *f[8])
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
			ptx_ld_shared_v4(k, f + 4 * q, a->s, acc_off(g, j) + 16LL * q);
		return;
	}
	for (int e = 0; e < g->vec; e++) {
		const char *pe = wsn__rk_elem_pred(g, j, e);
		if (pe) {
			ptx_mov_f32(k, f[e], 0.0f);
			ptx_guard(k, pe, 0);
		}
		ptx_ld_global(k, PTX_CACHE_DEFAULT, PTX_F32, f[e], a->g, acc_off(g, j) + 4LL * e);
	}
}

const char *wsn__rk_xhat(struct rk_gen *g, const char *x, const char *mean, const char *rstd)
{
	struct ptx_kernel *k = g->k;
	const char *xh = ptx_tmp(k, PTX_F32);

	if (g->ln) {
		/* (x - mean) * rstd: the subtraction is exact when x is near the mean, where
		 * fma(x, rstd, -mean * rstd) would leave the rounding error of mean * rstd */
		const char *d = ptx_tmp(k, PTX_F32);
		ptx_sub_f32(k, d, x, mean);
		ptx_mul_f32(k, xh, d, rstd);
	} else {
		ptx_mul_f32(k, xh, x, rstd);
	}
	return xh;
}

const char *wsn__rk_dy_w(struct rk_gen *g, const char *dy, const char *w)
{
	const char *gg;

	if (!g->kp->has_weight)
		return dy;
	gg = ptx_tmp(g->k, PTX_F32);
	ptx_mul_f32(g->k, gg, dy, w);
	return gg;
}

void wsn__rk_acc_sum(struct rk_gen *g, const char *const f[8], const char *const acc[], int chains)
{
	for (int e = 0; e < g->vec; e++) {
		const char *a = acc[e % chains];
		if (g->ln)
			ptx_add_f32(g->k, a, a, f[e]);
		else
			ptx_fma_f32(g->k, a, f[e], f[e], a);
	}
}

void wsn__rk_acc_m2(struct rk_gen *g, int j, const char *const f[8], const char *mean, const char *const acc[],
		    int chains)
{
	for (int e = 0; e < g->vec; e++) {
		const char *d = ptx_tmp(g->k, PTX_F32), *pe = wsn__rk_elem_pred(g, j, e);
		const char *a = acc[e % chains];
		ptx_sub_f32(g->k, d, f[e], mean);
		if (pe)
			ptx_guard(g->k, pe, 0);
		ptx_fma_f32(g->k, a, d, d, a);
	}
}

const char *wsn__rk_norm_affine(struct rk_gen *g, const char *x, const char *mean, const char *rstd, const char *w,
				const char *b)
{
	struct ptx_kernel *k = g->k;
	const struct wsn__kernel_plan *kp = g->kp;
	const char *n = wsn__rk_xhat(g, x, mean, rstd), *o;

	if (!kp->has_weight && !kp->has_bias)
		return n;
	o = ptx_tmp(k, PTX_F32);
	if (kp->has_weight && kp->has_bias)
		ptx_fma_f32(k, o, n, w, b);
	else if (kp->has_weight)
		ptx_mul_f32(k, o, n, w);
	else
		ptx_add_f32(k, o, n, b);
	return o;
}

const char *wsn__rk_dx_elem(struct rk_gen *g, const char *x, const char *dy, const char *w, const char *mean,
			    const char *rstd, const char *mg, const char *nmgx)
{
	struct ptx_kernel *k = g->k;
	const char *xh = wsn__rk_xhat(g, x, mean, rstd), *gg = wsn__rk_dy_w(g, dy, w), *t = ptx_tmp(k, PTX_F32), *o;

	if (g->ln) {
		const char *u = ptx_tmp(k, PTX_F32);
		ptx_sub_f32(k, u, gg, mg);
		ptx_fma_f32(k, t, xh, nmgx, u);
	} else {
		ptx_fma_f32(k, t, xh, nmgx, gg);
	}
	o = ptx_tmp(k, PTX_F32);
	ptx_mul_f32(k, o, t, rstd);
	return o;
}

void wsn__rk_prefetch_row(struct rk_gen *g, const char *tid, const char *row, const char *const base[],
			  const char *const ld[], int n)
{
	struct ptx_kernel *k = g->k;
	const char *p = ptx_tmp(k, PTX_PRED), *done = ptx_label_new(k, "pf_done"), *a = ptx_tmp(k, PTX_U64);

	ptx_comment(k, "the first row's address translations and L2 lines while the previous grid drains");
	ptx_ins(k, "setp.ne.u32 %s, %s, 0", p, tid);
	ptx_guard(k, p, 0);
	ptx_bra_div(k, done);
	for (int i = 0; i < n; i++) {
		ptx_ins(k, "mad.lo.u64 %s, %s, %s, %s", a, row, ld[i], base[i]);
		ptx_ins(k, "prefetch.global.L2 [%s]", a);
	}
	ptx_label(k, done);
}

void wsn__rk_griddep(struct ptx_kernel *k)
{
	ptx_comment(k, "dependent launch: the previous grid's writes are visible past this point");
	ptx_griddep_wait(k);
	ptx_griddep_launch_dependents(k);
}

void wsn__rk_griddep_start(struct rk_gen *g)
{
	struct ptx_kernel *k = g->k;

	if (!g->p_early) {
		wsn__rk_griddep(k);
		return;
	}
	ptx_comment(k, "dependent launch: the previous grid's writes are visible past this point, unless the");
	ptx_comment(k, "call started early (flags bit 0: it touches nothing the calls still running touch)");
	ptx_guard(k, g->p_early, 1);
	ptx_griddep_wait(k);
	/* an early call that reuses an older call's buffers: until that call's finish kernel has said
	 * its main grid is done (the data it wrote is then read through the bulk copies' proxy too);
	 * thread 0 asks, the CTA waits for it (one acquire per CTA: one per thread costs time on every
	 * call, see NOTES v29). The next grid launches only past this wait: the
	 * runtime counts that call's main grid as done for every call after this one (wsn__ovl_record) */
	const char *pw = ptx_tmp(k, PTX_PRED), *v = ptx_tmp(k, PTX_U64), *pr = ptx_tmp(k, PTX_PRED);
	const char *t = ptx_tmp(k, PTX_U32), *pt = ptx_tmp(k, PTX_PRED);
	const char *poll = ptx_label_new(k, "done_poll"), *ready = ptx_label_new(k, "done_ready");
	const char *skip = ptx_label_new(k, "done_skip");
	ptx_ins(k, "setp.ne.and.u64 %s, %s, 0, %s", pw, g->wait_seq, g->p_early);
	ptx_guard(k, pw, 1);
	ptx_bra_div(k, skip);
	ptx_sreg(k, t, "%tid.x");
	ptx_ins(k, "setp.ne.u32 %s, %s, 0", pt, t);
	ptx_guard(k, pt, 0);
	ptx_bra_div(k, ready);
	ptx_label(k, poll);
	ptx_ins(k, "ld.acquire.gpu.global.u64 %s, [%s]", v, g->done);
	ptx_ins(k, "setp.lt.u64 %s, %s, %s", pr, v, g->wait_seq);
	ptx_guard(k, pr, 1);
	ptx_bra_div(k, ready);
	ptx_ins(k, "nanosleep.u32 128");
	ptx_bra_div(k, poll);
	ptx_label(k, ready);
	ptx_ins(k, "fence.proxy.async.global");
	ptx_bar_sync(k, 0, 0);
	ptx_label(k, skip);
	ptx_griddep_launch_dependents(k);
}

void wsn__rk_griddep_end(struct rk_gen *g)
{
	if (!g->p_early)
		return;
	ptx_comment(g->k, "an early start waits here: the earlier calls are done before the workspace is written");
	ptx_griddep_wait(g->k);
}

/* The PTX type of an ABI parameter (see rowkernel.h). */
enum ptx_type wsn__rk_abi_ptx_type(enum wsn__abi_type t)
{
	return t == WSN_ABI_u32 ? PTX_U32 : t == WSN_ABI_f32 ? PTX_F32 : PTX_U64;
}

static int abi_is_stride(const struct wsn__abi_param *pa)
{
	return pa->role == WSN_ABI_row_ld || pa->role == WSN_ABI_stats_ld;
}

_Static_assert((int)WSN_ABI_FWD_COUNT <= (int)WSN_ABI_BWD_COUNT, "struct rk_abi holds the forward's registers");

void wsn__rk_abi_params(struct rk_gen *g, int bwd, struct rk_abi *a)
{
	const struct wsn__abi *abi = bwd ? &wsn__abi_backward : &wsn__abi_forward;
	const struct wsn__abi_param *pa = abi->params;
	const int rows = bwd ? WSN_ABI_BWD_rows : WSN_ABI_FWD_rows;
	struct ptx_kernel *k = g->k;

	memset(a, 0, sizeof(*a));
	for (int i = 0; i < abi->count; i++)
		ptx_param(k, wsn__rk_abi_ptx_type(pa[i].type), pa[i].name);
	for (int i = 0; i < abi->count; i++)
		if (pa[i].role == WSN_ABI_ptr) {
			a->reg[i] = ptx_reg(k, PTX_U64, "p_%s", pa[i].name);
			ptx_ld_param(k, PTX_U64, a->reg[i], pa[i].name);
		}
	a->reg[rows] = ptx_reg(k, PTX_U64, "%s", pa[rows].name);
	for (int i = 0; i < abi->count; i++)
		if (abi_is_stride(&pa[i]))
			a->reg[i] = ptx_reg(k, PTX_U64, "%sb", pa[i].name);
	if (!bwd)
		a->reg[WSN_ABI_FWD_eps] = ptx_reg(k, PTX_F32, "%s", pa[WSN_ABI_FWD_eps].name);
	ptx_ld_param(k, PTX_U64, a->reg[rows], pa[rows].name);
	for (int i = 0; i < abi->count; i++)
		if (abi_is_stride(&pa[i]))
			ptx_ld_param(k, PTX_U64, a->reg[i], pa[i].name);
	if (bwd) {
		if (wsn__kernel_early_start(g->kp)) { /* else the flags go unread: the kernel always waits */
			const char *flags = ptx_reg(k, PTX_U32, "%s", pa[WSN_ABI_BWD_flags].name), *t = ptx_tmp(k, PTX_U32);
			ptx_ld_param(k, PTX_U32, flags, pa[WSN_ABI_BWD_flags].name);
			g->p_early = ptx_reg(k, PTX_PRED, "p_early");
			ptx_ins(k, "and.b32 %s, %s, 1", t, flags);
			ptx_ins(k, "setp.ne.u32 %s, %s, 0", g->p_early, t);
			g->done = ptx_reg(k, PTX_U64, "p_%s", pa[WSN_ABI_BWD_done].name);
			g->wait_seq = ptx_reg(k, PTX_U64, "%s", pa[WSN_ABI_BWD_wait_seq].name);
			ptx_ld_param(k, PTX_U64, g->done, pa[WSN_ABI_BWD_done].name);
			ptx_ld_param(k, PTX_U64, g->wait_seq, pa[WSN_ABI_BWD_wait_seq].name);
		}
	} else {
		ptx_ld_param(k, PTX_F32, a->reg[WSN_ABI_FWD_eps], pa[WSN_ABI_FWD_eps].name);
	}
	for (int i = 0; i < abi->count; i++) {
		if (pa[i].role == WSN_ABI_row_ld) /* elements of the tensors' dtype */
			ptx_ins(k, "mul.lo.u64 %s, %s, %d", a->reg[i], a->reg[i], g->elem_bytes);
		else if (pa[i].role == WSN_ABI_stats_ld) /* f32 elements */
			ptx_ins(k, "shl.b64 %s, %s, 2", a->reg[i], a->reg[i]);
	}
	if (!g->griddep_later)
		wsn__rk_griddep_start(g);
}

int wsn__rk_acc_home(struct rk_gen *g, struct rk_acc *a, unsigned smem_off)
{
	struct ptx_kernel *k = g->k;

	if (a->store == WSN_STORE_REG) {
		for (int j = 0; j < g->vectors; j++)
			for (int e = 0; e < g->vec; e++)
				a->r[j][e] = ptx_reg(k, PTX_F32, "%s%d_%d", a->tag, j, e);
		return 1;
	}
	if (a->store != WSN_STORE_SMEM)
		return 0;
	a->s = ptx_reg(k, PTX_U32, "%s_s", a->tag);
	ptx_ins(k, "mad.lo.u32 %s, %s, %d, %s", a->s, g->tid_x, g->vec * 4, g->smem);
	ptx_ins(k, "add.u32 %s, %s, %u", a->s, a->s, smem_off);
	return 1;
}

/* A predicate "p_aligned": every one of the n (>= 2) .b64 addresses and strides is 16-byte aligned. */
static const char *aligned_pred(struct rk_gen *g, const char *const v[], int n)
{
	struct ptx_kernel *k = g->k;
	const char *al = ptx_tmp(k, PTX_B64), *pal = ptx_reg(k, PTX_PRED, "p_aligned");

	ptx_ins(k, "or.b64 %s, %s, %s", al, v[0], v[1]);
	for (int i = 2; i < n; i++)
		ptx_ins(k, "or.b64 %s, %s, %s", al, al, v[i]);
	ptx_ins(k, "and.b64 %s, %s, 15", al, al);
	ptx_ins(k, "setp.eq.u64 %s, %s, 0", pal, al);
	return pal;
}

const char *wsn__rk_fwd_aligned_pred(struct rk_gen *g, const char *const param[], const char *xld, const char *yld)
{
	const char *v[6] = { param[WSN_ABI_FWD_x], param[WSN_ABI_FWD_y], xld, yld };
	int n = 4;

	if (g->kp->has_weight)
		v[n++] = param[WSN_ABI_FWD_weight];
	if (g->kp->has_bias)
		v[n++] = param[WSN_ABI_FWD_bias];
	return aligned_pred(g, v, n);
}

const char *wsn__rk_bwd_aligned_pred(struct rk_gen *g, const char *const param[], const char *dyld, const char *xld,
				     const char *dxld)
{
	const char *v[] = { param[WSN_ABI_BWD_dy], param[WSN_ABI_BWD_x], param[WSN_ABI_BWD_dx], dyld, xld, dxld,
			    param[WSN_ABI_BWD_weight] };

	return aligned_pred(g, v, g->kp->has_weight ? 7 : 6);
}

void wsn__rk_two_paths(struct rk_gen *g, const char *pal, const char *join, const char *why,
		       void (*rows)(struct rk_gen *g, void *ctx), void *ctx)
{
	struct ptx_kernel *k = g->k;
	const char *elem = ptx_label_new(k, "elem_path"), *end = ptx_label_new(k, join);

	ptx_guard(k, pal, 1);
	ptx_bra(k, elem);
	ptx_comment(k, "---- 16-byte vector path ----");
	g->vecpath = 1;
	rows(g, ctx);
	ptx_bra(k, end);
	ptx_label(k, elem);
	ptx_comment(k, "---- element path: %s is not 16-byte aligned ----", why);
	g->vecpath = 0;
	rows(g, ctx);
	ptx_label(k, end);
}

void wsn__rk_acc_zero(struct rk_gen *g, struct rk_acc *a)
{
	struct ptx_kernel *k = g->k;

	for (int j = 0; j < g->vectors; j++) {
		const char *f[8];
		if (a->store == WSN_STORE_REG) {
			for (int e = 0; e < g->vec; e++)
				ptx_mov_f32(k, a->r[j][e], 0.0f);
			continue;
		}
		for (int e = 0; e < g->vec; e++) {
			f[e] = ptx_tmp(k, PTX_F32);
			ptx_mov_f32(k, f[e], 0.0f);
		}
		wsn__rk_acc_put(g, a, j, f);
	}
}

void wsn__rk_acc_put(struct rk_gen *g, struct rk_acc *a, int j, const char *const f[8])
{
	struct ptx_kernel *k = g->k;

	if (a->store == WSN_STORE_REG)
		return;
	if (a->store == WSN_STORE_SMEM) {
		for (int q = 0; q < g->vec / 4; q++)
			ptx_st_shared_v4(k, a->s, acc_off(g, j) + 16LL * q, f + 4 * q);
		return;
	}
	for (int e = 0; e < g->vec; e++) {
		const char *pe = wsn__rk_elem_pred(g, j, e);
		if (pe)
			ptx_guard(k, pe, 0);
		ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_F32, a->g, acc_off(g, j) + 4LL * e, f[e]);
	}
}
