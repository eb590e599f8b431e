/* SPDX-License-Identifier: MIT */
/* codegen/ptx/multiwave.c: multi-wave LayerNorm/RMSNorm kernels (forward, backward, finish) as PTX. */
#include "rowkernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The start of a group's row loop: inv gets the opaque zeros of rows and the x row stride (for
 * wsn__rk_opaque_zeros), row starts at row0, and a group with no row branches to done.
 */
static void row_loop_begin(struct rk_gen *g, struct ptx_loop *lp, const char *row, const char *row0,
			   const char *rows, const char *xld, const char *p, const char *done, const char *inv[2])
{
	struct ptx_kernel *k = g->k;

	inv[0] = wsn__rk_param_zero(g, rows);
	inv[1] = wsn__rk_param_zero(g, xld);
	ptx_mov(k, PTX_U64, row, row0);
	ptx_ins(k, "setp.ge.u64 %s, %s, %s", p, row, rows);
	ptx_guard(k, p, 0);
	ptx_bra(k, done);
	ptx_loop_begin(k, lp, g->vecpath ? "vec_row" : "elem_row");
}

/* The end of a group's row loop: next row (row += rstride), again while row < rows, then done. */
static void row_loop_end(struct rk_gen *g, struct ptx_loop *lp, const char *row, const char *rstride,
			 const char *rows, const char *p, const char *done)
{
	struct ptx_kernel *k = g->k;

	g->zero = NULL;
	ptx_ins(k, "add.u64 %s, %s, %s", row, row, rstride);
	ptx_ins(k, "setp.lt.u64 %s, %s, %s", p, row, rows);
	ptx_loop_end(k, lp, p, 0);
	ptx_label(k, done);
}

/* ---------------------------------------------------------------- forward */

/* What the forward's passes share: the tensors, the chains of the current sum, the row's statistics. */
struct fwd_ctx {
	struct rk_tens x, y, w, b;
	const char *acc[4], *mean, *rstd;
	const char *n, *m2; /* LayerNorm with the row in memory: the thread's count and M2 so far */
};

/* pass 1: sum (LayerNorm) or sum of squares (RMSNorm) of slice j into 4 independent chains */
static void fwd_sum(struct rk_gen *g, int j, void *arg)
{
	struct fwd_ctx *c = arg;
	const char *pv[4], *f[8];

	wsn__rk_get_vec(g, &c->x, j, pv);
	wsn__rk_unpack(g, pv, f);
	wsn__rk_acc_sum(g, f, c->acc, 4);
}

/* LayerNorm pass 2: squares of slice j's distances from this thread's mean (elements it owns) */
static void fwd_m2(struct rk_gen *g, int j, void *arg)
{
	struct fwd_ctx *c = arg;
	const char *pv[4], *f[8];

	wsn__rk_get_vec(g, &c->x, j, pv);
	wsn__rk_unpack(g, pv, f);
	wsn__rk_acc_m2(g, j, f, c->mean, c->acc, 4);
}

/* LayerNorm with the row in memory, one pass for the statistics: slice j's own (count, mean, M2),
 * exact from its registers, merged into the thread's running ones (Chan et al.). The loads leave
 * the elements past the row's end zero. */
static void fwd_welford(struct rk_gen *g, int j, void *arg)
{
	struct fwd_ctx *c = arg;
	struct ptx_kernel *k = g->k;
	const char *pv[4], *f[8], *t[8], *nb = ptx_tmp(k, PTX_F32), *mb = ptx_tmp(k, PTX_F32);
	const char *m2b[2] = { ptx_tmp(k, PTX_F32), ptx_tmp(k, PTX_F32) };
	int w = g->vec;

	wsn__rk_get_vec(g, &c->x, j, pv);
	wsn__rk_unpack(g, pv, f);
	for (int e = 0; e < g->vec; e++)
		t[e] = f[e];
	while (w > 1) { /* the slice's sum, pairwise */
		for (int e = 0; e < w / 2; e++) {
			const char *d = ptx_tmp(k, PTX_F32);
			ptx_add_f32(k, d, t[2 * e], t[2 * e + 1]);
			t[e] = d;
		}
		w /= 2;
	}
	wsn__rk_slice_count(g, j, nb);
	if (g->slice_kind[j] == RK_J_ALL) {
		ptx_ins(k, "mul.rn.f32 %s, %s, 0f%08X", mb, t[0], g->vec == 8 ? 0x3E000000u : 0x3E800000u);
	} else {
		/* a slice at the row's end: this thread may own none of it */
		const char *one = ptx_tmp(k, PTX_F32);
		ptx_ins(k, "max.f32 %s, %s, 0f3F800000", one, nb);
		ptx_div_rn_f32(k, mb, t[0], one);
	}
	for (int i = 0; i < 2; i++)
		ptx_mov_f32(k, m2b[i], 0.0f);
	for (int e = 0; e < g->vec; e++) {
		const char *d = ptx_tmp(k, PTX_F32), *pe = wsn__rk_elem_pred(g, j, e);
		ptx_sub_f32(k, d, f[e], mb);
		if (pe)
			ptx_guard(k, pe, 0);
		ptx_fma_f32(k, m2b[e % 2], d, d, m2b[e % 2]);
	}
	ptx_add_f32(k, m2b[0], m2b[0], m2b[1]);
	wsn__rk_chan_combine(g, c->n, c->mean, c->m2, nb, mb, m2b[0]);
}

/* last pass: y = (x - mean) * rstd * w + b for slice j */
static void fwd_out(struct rk_gen *g, int j, void *arg)
{
	struct fwd_ctx *c = arg;
	const struct wsn__kernel_plan *kp = g->kp;
	const char *pv[4], *f[8], *o[8], *wv[4], *wf[8] = { 0 }, *bv[4], *bf[8] = { 0 };

	wsn__rk_get_vec(g, &c->x, j, pv);
	wsn__rk_unpack(g, pv, f);
	if (kp->has_weight) {
		wsn__rk_get_vec(g, &c->w, j, wv);
		wsn__rk_unpack(g, wv, wf);
	}
	if (kp->has_bias) {
		wsn__rk_get_vec(g, &c->b, j, bv);
		wsn__rk_unpack(g, bv, bf);
	}
	for (int e = 0; e < g->vec; e++)
		o[e] = wsn__rk_norm_affine(g, f[e], c->mean, c->rstd, wf[e], bf[e]);
	wsn__rk_store_vec(g, &c->y, j, o);
}

/* The 4 chains of a pass's sum to zero before it, added into dst after it. */
static void chains_zero(struct rk_gen *g, const char *const acc[4])
{
	for (int i = 0; i < 4; i++)
		ptx_mov_f32(g->k, acc[i], 0.0f);
}

static void chains_add(struct rk_gen *g, const char *dst, const char *const acc[4])
{
	ptx_add_f32(g->k, acc[0], acc[0], acc[1]);
	ptx_add_f32(g->k, acc[2], acc[2], acc[3]);
	ptx_add_f32(g->k, dst, acc[0], acc[2]);
}

/* What a forward path reads: the parameters' registers and the CTA's row walk and predicates. */
struct fwd_args {
	const char *const *param;       /* by ABI slot (WSN_ABI_FWD_x, ...), row strides in bytes */
	const char *row0, *rstride;     /* the group's first row, the stride between its rows */
	const char *txoff;              /* this thread's byte offset in a row */
	const char *p_mean, *p_rstd;    /* write the statistics: pointer given, first thread of the row */
};

/* The forward row loop (a wsn__rk_two_paths callback: args is a struct fwd_args). */
static void fwd_path(struct rk_gen *g, void *args)
{
	const struct fwd_args *a = args;
	const char *rows = a->param[WSN_ABI_FWD_rows], *row0 = a->row0, *rstride = a->rstride;
	const char *xp = a->param[WSN_ABI_FWD_x], *yp = a->param[WSN_ABI_FWD_y];
	const char *xld = a->param[WSN_ABI_FWD_x_ld], *yld = a->param[WSN_ABI_FWD_y_ld];
	const char *wp = a->param[WSN_ABI_FWD_weight], *bp = a->param[WSN_ABI_FWD_bias];
	const char *meanp = a->param[WSN_ABI_FWD_mean], *rstdp = a->param[WSN_ABI_FWD_rstd];
	const char *eps = a->param[WSN_ABI_FWD_eps], *txoff = a->txoff, *p_mean = a->p_mean, *p_rstd = a->p_rstd;
	struct ptx_kernel *k = g->k;
	const struct wsn__kernel_plan *kp = g->kp;
	struct fwd_ctx c = {
		.x = { .tag = "x", .store = kp->row_store, .cache = PTX_CACHE_STREAM },
		.y = { .tag = "y", .store = WSN_STORE_GLOBAL, .cache = PTX_CACHE_DEFAULT },
		.w = { .tag = "w", .store = kp->param_store, .cache = PTX_CACHE_READONLY },
		.b = { .tag = "b", .store = kp->param_store, .cache = PTX_CACHE_READONLY },
	};
	struct rk_pass sum = { .t = { &c.x }, .nt = 1, .vecs = 1 }, out = { .t = { &c.x, &c.y }, .nt = 2, .vecs = 2 };
	const char *row = ptx_reg(k, PTX_U64, "row"), *p = ptx_reg(k, PTX_PRED, "p_row");
	const char *done = ptx_label_new(k, g->vecpath ? "vec_done" : "elem_done");
	struct ptx_loop lp;

	if (c.x.store == WSN_STORE_GLOBAL)
		c.x.cache = PTX_CACHE_DEFAULT;
	c.x.g = ptx_reg(k, PTX_U64, "xa");
	c.y.g = ptx_reg(k, PTX_U64, "ya");
	if (kp->has_weight) {
		c.w.g = ptx_reg(k, PTX_U64, "wa");
		ptx_ins(k, "add.u64 %s, %s, %s", c.w.g, wp, txoff);
		out.t[out.nt++] = &c.w;
		out.vecs++;
	}
	if (kp->has_bias) {
		c.b.g = ptx_reg(k, PTX_U64, "ba");
		ptx_ins(k, "add.u64 %s, %s, %s", c.b.g, bp, txoff);
		out.t[out.nt++] = &c.b;
		out.vecs++;
	}
	if (c.x.store == WSN_STORE_REG)
		wsn__rk_reg_names(g, &c.x);
	if (g->ln && c.x.store == WSN_STORE_REG)
		wsn__rk_own_count(g);
	if (kp->param_store == WSN_STORE_REG) {
		ptx_comment(k, "weight%s loaded once per CTA, kept in registers", kp->has_bias ? " and bias" : "");
		if (kp->has_weight)
			wsn__rk_reg_names(g, &c.w);
		if (kp->has_bias)
			wsn__rk_reg_names(g, &c.b);
		for (int j = 0; j < g->vectors; j++) {
			if (kp->has_weight)
				wsn__rk_load_vec(g, &c.w, j, c.w.r[j]);
			if (kp->has_bias)
				wsn__rk_load_vec(g, &c.b, j, c.b.r[j]);
		}
	}
	const char *inv[2];
	row_loop_begin(g, &lp, row, row0, rows, xld, p, done, inv);
	wsn__rk_row_addr(g, c.x.g, xp, row, xld, txoff);
	wsn__rk_row_addr(g, c.y.g, yp, row, yld, txoff);
	wsn__rk_opaque_zeros(g, row, inv);
	if (c.x.store == WSN_STORE_REG) {
		ptx_comment(k, "all %d loads of the row issued before the first use", g->vectors);
		for (int j = 0; j < g->vectors; j++)
			wsn__rk_load_vec(g, &c.x, j, c.x.r[j]);
	}

	/* with the row in memory, every pass re-reads it: LayerNorm's statistics in one pass, not two */
	int one_pass = g->ln && c.x.store != WSN_STORE_REG;
	const char *s1 = one_pass ? NULL : ptx_reg(k, PTX_F32, "s1");
	if (!one_pass) {
		/* pass 1: sum (LayerNorm) or sum of squares (RMSNorm); 4 independent chains */
		for (int i = 0; i < 4; i++)
			c.acc[i] = ptx_tmp(k, PTX_F32);
		chains_zero(g, c.acc);
		wsn__rk_pass(g, &sum, fwd_sum, &c);
		chains_add(g, s1, c.acc);
		if (!g->ln)
			wsn__rk_reduce_row(g, &s1, 1);
	}

	c.mean = ptx_reg(k, PTX_F32, "mean");
	c.rstd = ptx_reg(k, PTX_F32, "rstd");
	const char *var = ptx_reg(k, PTX_F32, "var");
	if (one_pass) {
		c.n = ptx_reg(k, PTX_F32, "count");
		c.m2 = var;
		ptx_mov_f32(k, c.n, 0.0f);
		ptx_mov_f32(k, c.mean, 0.0f);
		ptx_mov_f32(k, c.m2, 0.0f);
		wsn__rk_pass(g, &sum, fwd_welford, &c);
		wsn__rk_reduce_welford(g, 1, &c.n, &c.mean, &var);
	} else if (g->ln) {
		/* this thread's mean, then pass 2: M2 about it from the cached row (exact two-pass);
		 * the row's mean and M2 are merged from the threads' in one reduction */
		const char *n = ptx_reg(k, PTX_F32, "count");
		ptx_mov(k, PTX_F32, n, g->cnt);
		ptx_mul_f32(k, c.mean, s1, g->rcnt);
		g->zero = g->zrow[0];
		chains_zero(g, c.acc);
		wsn__rk_pass(g, &sum, fwd_m2, &c);
		chains_add(g, var, c.acc);
		wsn__rk_reduce_welford(g, 1, &n, &c.mean, &var);
	} else {
		ptx_mov(k, PTX_F32, var, s1);
	}
	ptx_fma_f32(k, var, var, g->invH, eps);
	ptx_rsqrt_f32(k, c.rstd, var);
	/* statistics: one thread per row, when asked for */
	{
		const char *sa = ptx_tmp(k, PTX_U64);
		ptx_ins(k, "shl.b64 %s, %s, 2", sa, row);
		if (g->ln) {
			const char *ma = ptx_tmp(k, PTX_U64);
			ptx_ins(k, "add.u64 %s, %s, %s", ma, meanp, sa);
			ptx_guard(k, p_mean, 0);
			ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_F32, ma, 0, c.mean);
		}
		const char *ra = ptx_tmp(k, PTX_U64);
		ptx_ins(k, "add.u64 %s, %s, %s", ra, rstdp, sa);
		ptx_guard(k, p_rstd, 0);
		ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_F32, ra, 0, c.rstd);
	}

	/* pass 3: y = (x - mean) * rstd * w + b */
	ptx_comment(k, "normalise, scale, shift, store");
	g->zero = g->zrow[1];
	wsn__rk_pass(g, &out, fwd_out, &c);
	row_loop_end(g, &lp, row, rstride, rows, p, done);
}

/* Where a thread's rows start: its 16-byte column offset, the group's first row and the stride
 * between a group's rows. */
struct row_start {
	const char *txoff, *row0, *rstride, *cta, *ncta;
};

static void row_start(struct rk_gen *g, int wide_row0, struct row_start *rs)
{
	struct ptx_kernel *k = g->k;

	rs->txoff = ptx_reg(k, PTX_U64, "txoff");
	ptx_ins(k, "mul.wide.u32 %s, %s, 16", rs->txoff, g->tid_x);
	rs->row0 = ptx_reg(k, PTX_U64, "row0");
	rs->rstride = ptx_reg(k, PTX_U64, "rstride");
	rs->cta = ptx_tmp(k, PTX_U32);
	rs->ncta = ptx_tmp(k, PTX_U32);
	const char *y = ptx_tmp(k, wide_row0 ? PTX_U64 : PTX_U32);
	ptx_sreg(k, rs->cta, "%ctaid.x");
	ptx_sreg(k, rs->ncta, "%nctaid.x");
	if (wide_row0) {
		/* 64-bit: a grid of one CTA per row block can hold 2^31 - 1 CTAs */
		ptx_ins(k, "mul.wide.u32 %s, %s, %d", rs->row0, rs->cta, g->bdimy);
		ptx_ins(k, "cvt.u64.u32 %s, %s", y, g->tid_y);
		ptx_ins(k, "add.u64 %s, %s, %s", rs->row0, rs->row0, y);
	} else {
		ptx_ins(k, "mad.lo.u32 %s, %s, %d, %s", y, rs->cta, g->bdimy, g->tid_y);
		ptx_ins(k, "cvt.u64.u32 %s, %s", rs->row0, y);
	}
	ptx_ins(k, "mul.wide.u32 %s, %s, %d", rs->rstride, rs->ncta, g->bdimy);
}

static int gen_forward(struct rk_gen *g)
{
	struct ptx_kernel *k = g->k;
	struct rk_abi abi;

	wsn__rk_abi_params(g, 0, &abi);
	const char *const *param = abi.reg;
	const char *xld = param[WSN_ABI_FWD_x_ld], *yld = param[WSN_ABI_FWD_y_ld];
	wsn__rk_setup_common(g);

	struct row_start rs;

	row_start(g, 1, &rs);
	const char *txoff = rs.txoff, *row0 = rs.row0, *rstride = rs.rstride;

	/* statistics predicates: pointer given and first thread of the row */
	const char *p_t0 = ptx_reg(k, PTX_PRED, "p_tx0"), *p_mean = ptx_reg(k, PTX_PRED, "p_mean_out");
	const char *p_rstd = ptx_reg(k, PTX_PRED, "p_rstd_out");
	ptx_ins(k, "setp.eq.u32 %s, %s, 0", p_t0, g->tid_x);
	ptx_ins(k, "setp.ne.and.u64 %s, %s, 0, %s", p_mean, param[WSN_ABI_FWD_mean], p_t0);
	ptx_ins(k, "setp.ne.and.u64 %s, %s, 0, %s", p_rstd, param[WSN_ABI_FWD_rstd], p_t0);

	/* 16-byte path when every row start is 16-byte aligned */
	struct fwd_args args = { param, row0, rstride, txoff, p_mean, p_rstd };
	wsn__rk_two_paths(g, wsn__rk_fwd_aligned_pred(g, param, xld, yld), "exit", "a row or parameter", fwd_path,
			  &args);
	ptx_ret(k);
	return 0;
}

/* ---------------------------------------------------------------- backward */

/* What the backward's passes share. */
struct bwd_ctx {
	struct rk_tens dy, x, dx, w;
	struct rk_acc *dw, *db;
	const char *sg[2], *sgx[2], *mean, *rstd, *mg, *nmgx;
};

/* pass 1, slice j: g = dy * w, xhat; row sums of g and g * xhat; column sums of dy * xhat and dy */
static void bwd_sums(struct rk_gen *g, int j, void *arg)
{
	struct bwd_ctx *c = arg;
	struct ptx_kernel *k = g->k;
	const char *dv[4], *xv[4], *wv[4], *df[8], *xf[8], *wf[8] = { 0 }, *fw[8], *fb[8];

	wsn__rk_get_vec(g, &c->dy, j, dv);
	wsn__rk_get_vec(g, &c->x, j, xv);
	wsn__rk_unpack(g, dv, df);
	wsn__rk_unpack(g, xv, xf);
	if (g->kp->has_weight) {
		g->zero = g->zrow[0];
		wsn__rk_get_vec(g, &c->w, j, wv);
		g->zero = NULL;
		wsn__rk_unpack(g, wv, wf);
	}
	if (c->dw)
		wsn__rk_acc_get(g, c->dw, j, fw);
	if (c->db)
		wsn__rk_acc_get(g, c->db, j, fb);
	for (int e = 0; e < g->vec; e++) {
		const char *xh = wsn__rk_xhat(g, xf[e], c->mean, c->rstd), *gg = wsn__rk_dy_w(g, df[e], wf[e]);
		if (g->ln)
			ptx_add_f32(k, c->sg[e % 2], c->sg[e % 2], gg);
		ptx_fma_f32(k, c->sgx[e % 2], gg, xh, c->sgx[e % 2]);
		if (c->dw)
			ptx_fma_f32(k, fw[e], df[e], xh, fw[e]);
		if (c->db)
			ptx_add_f32(k, fb[e], fb[e], df[e]);
	}
	if (c->dw)
		wsn__rk_acc_put(g, c->dw, j, fw);
	if (c->db)
		wsn__rk_acc_put(g, c->db, j, fb);
}

/* pass 2, slice j: dx = rstd * (g - sum_g / H - xhat * sum_gxhat / H) */
static void bwd_dx(struct rk_gen *g, int j, void *arg)
{
	struct bwd_ctx *c = arg;
	const char *dv[4], *xv[4], *wv[4], *df[8], *xf[8], *wf[8] = { 0 }, *o[8];

	wsn__rk_get_vec(g, &c->dy, j, dv);
	wsn__rk_get_vec(g, &c->x, j, xv);
	wsn__rk_unpack(g, dv, df);
	wsn__rk_unpack(g, xv, xf);
	if (g->kp->has_weight) {
		wsn__rk_get_vec(g, &c->w, j, wv);
		wsn__rk_unpack(g, wv, wf);
	}
	for (int e = 0; e < g->vec; e++)
		o[e] = wsn__rk_dx_elem(g, xf[e], df[e], wf[e], c->mean, c->rstd, c->mg, c->nmgx);
	wsn__rk_store_vec(g, &c->dx, j, o);
}

/* What the backward's row loop is given: ABI registers by slot, strides, offsets and accumulators. */
struct bwd_args {
	const char *const *param;              /* by ABI slot (WSN_ABI_BWD_dy, ...) */
	const char *rows, *row0, *rstride;      /* row count, the group's first row, the stride between rows */
	const char *dyld, *xld, *dxld, *sld;    /* row strides of dy, x, dx (bytes) and the statistics */
	const char *txoff;                      /* this thread's byte offset in a row */
	struct rk_acc *dw, *db;                 /* dweight and dbias accumulators */
};

/* The backward row loop (a wsn__rk_two_paths callback: args is a struct bwd_args). */
static void bwd_path(struct rk_gen *g, void *args)
{
	const struct bwd_args *a = args;
	const char *const *param = a->param, *rows = a->rows, *row0 = a->row0, *rstride = a->rstride;
	const char *dyld = a->dyld, *xld = a->xld, *dxld = a->dxld, *sld = a->sld, *txoff = a->txoff;
	struct rk_acc *dw = a->dw, *db = a->db;
	struct ptx_kernel *k = g->k;
	const struct wsn__kernel_plan *kp = g->kp;
	struct bwd_ctx c = {
		.dy = { .tag = "dy", .store = kp->row_store, .cache = PTX_CACHE_STREAM },
		.x = { .tag = "x", .store = kp->row_store, .cache = PTX_CACHE_STREAM },
		.dx = { .tag = "dx", .store = WSN_STORE_GLOBAL, .cache = PTX_CACHE_DEFAULT },
		.w = { .tag = "w", .store = kp->param_store, .cache = PTX_CACHE_READONLY },
		.dw = kp->has_weight ? dw : NULL,
		.db = kp->has_bias ? db : NULL,
	};
	struct rk_pass sums = { .t = { &c.dy, &c.x }, .nt = 2, .vecs = 2 };
	struct rk_pass dxp = { .t = { &c.dy, &c.x, &c.dx }, .nt = 3, .vecs = 3 };
	const char *row = ptx_reg(k, PTX_U64, "row"), *p = ptx_reg(k, PTX_PRED, "p_row");
	const char *done = ptx_label_new(k, g->vecpath ? "vec_done" : "elem_done");
	struct ptx_loop lp;

	if (kp->row_store == WSN_STORE_GLOBAL)
		c.dy.cache = c.x.cache = PTX_CACHE_DEFAULT;
	c.dy.g = ptx_reg(k, PTX_U64, "dya");
	c.x.g = ptx_reg(k, PTX_U64, "xa");
	c.dx.g = ptx_reg(k, PTX_U64, "dxa");
	if (c.dy.store == WSN_STORE_REG) {
		wsn__rk_reg_names(g, &c.dy);
		wsn__rk_reg_names(g, &c.x);
	}
	if (kp->has_weight) {
		c.w.g = ptx_reg(k, PTX_U64, "wa");
		ptx_ins(k, "add.u64 %s, %s, %s", c.w.g, param[WSN_ABI_BWD_weight], txoff);
		if (c.w.store == WSN_STORE_REG) {
			ptx_comment(k, "weight loaded once per CTA, kept in registers");
			wsn__rk_reg_names(g, &c.w);
			for (int j = 0; j < g->vectors; j++)
				wsn__rk_load_vec(g, &c.w, j, c.w.r[j]);
		} else if (c.w.store == WSN_STORE_SMEM) {
			ptx_comment(k, "weight loaded once per CTA into shared memory (each thread its own vectors)");
			c.w.s = ptx_reg(k, PTX_U32, "w_smem");
			ptx_ins(k, "mad.lo.u32 %s, %s, 16, %s", c.w.s, g->tid_x, g->smem);
			ptx_ins(k, "add.u32 %s, %s, %u", c.w.s, c.w.s, g->sm_w);
			for (int j = 0; j < g->vectors; j++) {
				const char *t[4];
				for (int q = 0; q < 4; q++)
					t[q] = ptx_tmp(k, PTX_B32);
				wsn__rk_load_vec(g, &c.w, j, t);
				ptx_st_shared_v4(k, c.w.s, (long long)j * g->bdimx * 16, t);
			}
		}
		sums.t[sums.nt++] = &c.w;
		sums.vecs++;
		dxp.t[dxp.nt++] = &c.w;
		dxp.vecs++;
	}
	/* accumulators start at zero */
	for (int a = 0; a < 2; a++) {
		struct rk_acc *ac = a ? c.db : c.dw;
		if (!ac)
			continue;
		wsn__rk_acc_zero(g, ac);
		sums.a[sums.na++] = ac;
		sums.vecs += 2 * g->vec / 4; /* read and written back as f32 */
	}

	const char *inv[2];
	row_loop_begin(g, &lp, row, row0, rows, xld, p, done, inv);
	wsn__rk_opaque_zeros(g, row, inv);
	wsn__rk_row_addr(g, c.dy.g, param[WSN_ABI_BWD_dy], row, dyld, txoff);
	wsn__rk_row_addr(g, c.x.g, param[WSN_ABI_BWD_x], row, xld, txoff);
	wsn__rk_row_addr(g, c.dx.g, param[WSN_ABI_BWD_dx], row, dxld, txoff);
	/* per-row statistics, broadcast to the row's threads */
	c.mean = ptx_reg(k, PTX_F32, "mean");
	c.rstd = ptx_reg(k, PTX_F32, "rstd");
	{
		const char *so = ptx_tmp(k, PTX_U64), *a = ptx_tmp(k, PTX_U64);
		ptx_ins(k, "mul.lo.u64 %s, %s, %s", so, row, sld);
		if (g->ln) {
			ptx_ins(k, "add.u64 %s, %s, %s", a, param[WSN_ABI_BWD_mean], so);
			ptx_ld_global(k, PTX_CACHE_DEFAULT, PTX_F32, c.mean, a, 0);
		}
		const char *b = ptx_tmp(k, PTX_U64);
		ptx_ins(k, "add.u64 %s, %s, %s", b, param[WSN_ABI_BWD_rstd], so);
		ptx_ld_global(k, PTX_CACHE_DEFAULT, PTX_F32, c.rstd, b, 0);
	}
	if (c.dy.store == WSN_STORE_REG) {
		ptx_comment(k, "all %d loads of dy and x issued before the first use", 2 * g->vectors);
		for (int j = 0; j < g->vectors; j++) {
			wsn__rk_load_vec(g, &c.dy, j, c.dy.r[j]);
			wsn__rk_load_vec(g, &c.x, j, c.x.r[j]);
		}
	}

	/* pass 1: g = dy * w, xhat; row sums of g and g * xhat; column sums of dy * xhat and dy */
	const char *tot[2];
	tot[0] = ptx_reg(k, PTX_F32, "sum_g");
	tot[1] = ptx_reg(k, PTX_F32, "sum_gxhat");
	for (int i = 0; i < 2; i++) {
		c.sg[i] = ptx_tmp(k, PTX_F32);
		c.sgx[i] = ptx_tmp(k, PTX_F32);
		ptx_mov_f32(k, c.sg[i], 0.0f);
		ptx_mov_f32(k, c.sgx[i], 0.0f);
	}
	wsn__rk_pass(g, &sums, bwd_sums, &c);
	ptx_add_f32(k, tot[0], c.sg[0], c.sg[1]);
	ptx_add_f32(k, tot[1], c.sgx[0], c.sgx[1]);
	wsn__rk_reduce_row(g, tot, 2);

	/* pass 2: dx = rstd * (g - sum_g / H - xhat * sum_gxhat / H) */
	c.mg = ptx_reg(k, PTX_F32, "mean_g");
	c.nmgx = ptx_reg(k, PTX_F32, "neg_mean_gxhat");
	ptx_mul_f32(k, c.mg, tot[0], g->invH);
	ptx_mul_f32(k, c.nmgx, tot[1], g->invH);
	ptx_ins(k, "neg.f32 %s, %s", c.nmgx, c.nmgx);
	ptx_comment(k, "dx");
	g->zero = g->zrow[1];
	wsn__rk_pass(g, &dxp, bwd_dx, &c);
	row_loop_end(g, &lp, row, rstride, rows, p, done);
}


static int gen_backward(struct rk_gen *g)
{
	struct ptx_kernel *k = g->k;
	const struct wsn__kernel_plan *kp = g->kp;
	struct rk_abi abi;
	struct rk_acc dw = { .tag = "dw", .store = kp->dw_store }, db = { .tag = "db", .store = kp->db_store };
	struct rk_acc *accs[2] = { kp->has_weight ? &dw : NULL, kp->has_bias ? &db : NULL };

	wsn__rk_abi_params(g, 1, &abi);
	const char *const *param = abi.reg;
	const char *rows = param[WSN_ABI_BWD_rows], *dyld = param[WSN_ABI_BWD_dy_ld], *xld = param[WSN_ABI_BWD_x_ld];
	const char *dxld = param[WSN_ABI_BWD_dx_ld], *sld = param[WSN_ABI_BWD_stats_ld];
	wsn__rk_setup_common(g);

	struct row_start rs;

	row_start(g, 0, &rs);
	const char *txoff = rs.txoff, *row0 = rs.row0, *rstride = rs.rstride, *c = rs.cta, *nc = rs.ncta;

	/* accumulator homes */
	for (int a = 0; a < 2; a++) {
		struct rk_acc *ac = accs[a];
		if (!ac)
			continue;
		if (!wsn__rk_acc_home(g, ac, a ? g->sm_db : g->sm_dw)) {
			const char *part = ptx_tmp(k, PTX_U32), *col = ptx_tmp(k, PTX_U64);
			ac->g = ptx_reg(k, PTX_U64, "%s_g", ac->tag);
			if (a)
				ptx_ins(k, "add.u32 %s, %s, %s", part, nc, c);
			else
				ptx_mov(k, PTX_U32, part, c);
			ptx_ins(k, "mul.wide.u32 %s, %s, %lld", ac->g, part, g->cols * 4);
			ptx_ins(k, "add.u64 %s, %s, %s", ac->g, ac->g, param[WSN_ABI_BWD_partials]);
			ptx_ins(k, "mul.wide.u32 %s, %s, %d", col, g->tid_x, g->vec * 4);
			ptx_ins(k, "add.u64 %s, %s, %s", ac->g, ac->g, col);
		}
	}

	struct bwd_args args = { param, rows, row0, rstride, dyld, xld, dxld, sld, txoff, &dw, &db };
	wsn__rk_two_paths(g, wsn__rk_bwd_aligned_pred(g, param, dyld, xld, dxld), "rows_done", "a row or the weight",
			  bwd_path, &args);
	g->vecpath = 1;
	wsn__rk_griddep_end(g);
	if (accs[0] || accs[1])
		wsn__rk_bwd_epilogue(g, accs, param[WSN_ABI_BWD_partials]);
	ptx_ret(k);
	return 0;
}


/* ---------------------------------------------------------------- module */

static void plan_comments(struct ptx_module *m, const struct wsn__kernel_plan *kp)
{
	static const char *const st[] = { "registers", "shared", "global" };

	ptx_module_comment(m, "wsnorm generated kernel: %s %s, multi-wave, %s", wsn_op_name(kp->op),
			   wsn_dtype_name(kp->dtype), kp->block_grid ? "one CTA per row block" : "persistent");
	ptx_module_comment(m, "op=%s dtype=%s hidden=%lld weight=%d bias=%d", wsn_op_name(kp->op),
			   wsn_dtype_name(kp->dtype), (long long)kp->hidden, kp->has_weight, kp->has_bias);
	ptx_module_comment(m, "bdimx=%u bdimy=%u block_threads=%u per_thread=%u vec=%u nvec=%u stages=%u unroll=%u",
			   kp->bdimx, kp->bdimy, kp->block_threads, kp->per_thread, kp->vec, kp->nvec, kp->stages,
			   kp->unroll);
	ptx_module_comment(m, "row=%s params=%s dweight=%s dbias=%s est_regs=%u smem=%u ctas_per_sm=%u max_grid=%u",
			   st[kp->row_store], st[kp->param_store], st[kp->dw_store], st[kp->db_store], kp->est_regs,
			   kp->smem_bytes, kp->ctas_per_sm, kp->max_grid);
	ptx_module_clauses(m, kp->why);
}

static void layout_smem(struct rk_gen *g)
{
	const struct wsn__kernel_plan *kp = g->kp;
	unsigned off = 0, padded = (unsigned)(g->vectors * g->bdimx);

	g->sm_red = 0;
	if (g->warps > 1)
		off += (unsigned)(g->bdimy * 2 * g->warps * 16);
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

int wsn__multiwave_generate(const struct wsn__kernel_plan *kp, char **ptx)
{
	struct ptx_module m;
	struct rk_gen g;
	int err;

	*ptx = NULL;
	if (kp->approach != WSN_APPROACH_MULTIWAVE || !kp->bdimx || kp->bdimx % 32 || !kp->nvec || kp->nvec > RK_MAXV ||
	    kp->bdimx * kp->bdimy != kp->block_threads)
		return wsn__error(WSN_EINVAL, "codegen: plan for %s is inconsistent (bdimx %u, bdimy %u, nvec %u)",
				  kp->entry, kp->bdimx, kp->bdimy, kp->nvec);
	if ((err = ptx_module_init(&m, kp->arch)))
		return err;
	memset(&g, 0, sizeof(g));
	g.kp = kp;
	g.bwd = wsn_op_is_backward(kp->op);
	g.ln = wsn_op_is_layernorm(kp->op);
	g.elem_bytes = (int)wsn_dtype_size(kp->dtype);
	g.vec = 16 / g.elem_bytes;
	g.vectors = (int)kp->nvec;
	g.bdimx = (int)kp->bdimx;
	g.bdimy = (int)kp->bdimy;
	g.warps = g.bdimx / 32;
	g.cols = kp->hidden;
	g.row_vectors = (g.cols + g.vec - 1) / g.vec;
	g.nfull = g.cols / g.vec;
	g.tail = g.cols % g.vec;
	if ((long long)g.vectors * g.bdimx < g.row_vectors) {
		ptx_module_free(&m);
		return wsn__error(WSN_EINVAL, "codegen: plan for %s does not cover hidden %lld", kp->entry, g.cols);
	}
	layout_smem(&g);
	plan_comments(&m, kp);
	ptx_module_extern_smem(&m, RK_SMEM_SYM, 16);
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
		err = wsn__rk_gen_finish(&m, kp);
	if (err) {
		ptx_module_free(&m);
		return err;
	}
	return ptx_module_take(&m, ptx);
}
