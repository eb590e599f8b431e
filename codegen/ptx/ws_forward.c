/* SPDX-License-Identifier: MIT */
/* codegen/ptx/ws_forward.c: the warp-specialised forward's row loop: statistics, then the normalised and scaled rows. */
#include "ws.h"

/* The f32 values of vector v of the stage's row j. */
static void row_floats(struct ws *w, int j, int v, const char *f[8])
{
	const char *packed[4];

	wsn__ws_row_vec(w, j, 0, v, packed);
	wsn__rk_unpack(&w->g, packed, f);
}

/* Each row's accumulator chains added into its first, then moved to dst[j]. */
static void fold_chains(struct ptx_kernel *k, const char *const acc[][4], int rows, int nch, const char *const dst[])
{
	for (int j = 0; j < rows; j++) {
		for (int h = 1; h < nch; h++)
			ptx_add_f32(k, acc[j][0], acc[j][0], acc[j][h]);
		ptx_mov(k, PTX_F32, dst[j], acc[j][0]);
	}
}

/* The forward's block loop for one path (g->vecpath): each row's statistics, then y (and mean/rstd
 * where asked). */
void wsn__ws_forward_rows(struct ws *w, const struct kargs *ka)
{
	struct rk_gen *g = &w->g;
	struct ptx_kernel *k = g->k;
	const struct wsn__kernel_plan *kp = g->kp;
	struct rk_tens wt = { .tag = "w", .store = kp->param_store, .cache = PTX_CACHE_READONLY };
	struct rk_tens bt = { .tag = "b", .store = kp->param_store, .cache = PTX_CACHE_READONLY };
	struct rk_tens y = { .tag = "y", .store = WSN_STORE_GLOBAL, .cache = PTX_CACHE_DEFAULT };
	const char *acc[MAXU][4], *s1[MAXU], *mean[MAXU], *var[MAXU], *rstd[MAXU];
	int stage_rows = w->stage_rows, nch = stage_rows >= 4 ? 1 : 4 / stage_rows;
	struct loop_ctx c;
	struct ptx_loop lp;

	if (kp->has_weight)
		wsn__ws_load_params(w, &wt, w->layout.w, ka->param[WSN_ABI_FWD_weight], ka->txoff);
	if (kp->has_bias)
		wsn__ws_load_params(w, &bt, w->layout.b, ka->param[WSN_ABI_FWD_bias], ka->txoff);
	y.g = ptx_reg(k, PTX_U64, "ya");
	const char *inv[2] = { wsn__rk_param_zero(g, w->rows), wsn__rk_param_zero(g, w->cld[0]) };
	wsn__ws_loop_setup(w, &c);
	wsn__ws_loop_head(w, &c, &lp);
	wsn__ws_block_begin(w, c.b, c.it, c.rmax);
	wsn__rk_opaque_zeros(g, w->row0, inv);

	/* pass 1: sum (LayerNorm) or sum of squares (RMSNorm) */
	ptx_comment(k, "pass 1 over %d row%s", stage_rows, stage_rows > 1 ? "s" : "");
	for (int j = 0; j < stage_rows; j++) {
		s1[j] = ptx_reg(k, PTX_F32, "s1_%d", j);
		mean[j] = ptx_reg(k, PTX_F32, "mean%d", j);
		var[j] = ptx_reg(k, PTX_F32, "var%d", j);
		rstd[j] = ptx_reg(k, PTX_F32, "rstd%d", j);
		for (int h = 0; h < nch; h++) {
			acc[j][h] = ptx_tmp(k, PTX_F32);
			ptx_mov_f32(k, acc[j][h], 0.0f);
		}
	}
	for (int v = 0; v < g->vectors; v++) {
		for (int j = 0; j < stage_rows; j++) {
			const char *f[8];
			row_floats(w, j, v, f);
			wsn__rk_acc_sum(g, f, acc[j], nch);
		}
	}
	fold_chains(k, acc, stage_rows, nch, s1);
	/* LayerNorm: each row's mean from its sum, then M2 about it from the stage, a second plain sum
	 * (an exact two-pass: no merge of per-thread statistics, so no division on the chain) */
	wsn__rk_reduce_row(g, s1, stage_rows);
	if (g->ln) {
		g->zero = g->zrow[0];
		for (int j = 0; j < stage_rows; j++) {
			ptx_mul_f32(k, mean[j], s1[j], g->invH);
			for (int h = 0; h < nch; h++)
				ptx_mov_f32(k, acc[j][h], 0.0f);
		}
		for (int v = 0; v < g->vectors; v++) {
			for (int j = 0; j < stage_rows; j++) {
				const char *f[8];
				row_floats(w, j, v, f);
				wsn__rk_acc_m2(g, v, f, mean[j], acc[j], nch);
			}
		}
		fold_chains(k, acc, stage_rows, nch, var);
		g->zero = NULL;
		wsn__rk_reduce_row(g, var, stage_rows);
	} else {
		for (int j = 0; j < stage_rows; j++)
			ptx_mov(k, PTX_F32, var[j], s1[j]);
	}
	for (int j = 0; j < stage_rows; j++) {
		const char *sa = ptx_tmp(k, PTX_U64), *pm = ka->p_mean, *pr = ka->p_rstd;
		ptx_fma_f32(k, var[j], var[j], g->invH, ka->eps);
		ptx_rsqrt_f32(k, rstd[j], var[j]);
		/* statistics: the first thread of the row, when asked for */
		if (w->pv[j]) {
			const char *a = ptx_tmp(k, PTX_PRED), *b = ptx_tmp(k, PTX_PRED);
			if (g->ln) {
				ptx_ins(k, "and.pred %s, %s, %s", a, pm, w->pv[j]);
				pm = a;
			}
			ptx_ins(k, "and.pred %s, %s, %s", b, pr, w->pv[j]);
			pr = b;
		}
		ptx_ins(k, "shl.b64 %s, %s, 2", sa, w->rowc[j]);
		if (g->ln) {
			const char *ma = ptx_tmp(k, PTX_U64);
			ptx_ins(k, "add.u64 %s, %s, %s", ma, ka->param[WSN_ABI_FWD_mean], sa);
			ptx_guard(k, pm, 0);
			ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_F32, ma, 0, mean[j]);
		}
		const char *ra = ptx_tmp(k, PTX_U64);
		ptx_ins(k, "add.u64 %s, %s, %s", ra, ka->param[WSN_ABI_FWD_rstd], sa);
		ptx_guard(k, pr, 0);
		ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_F32, ra, 0, rstd[j]);
	}

	/* pass 3: y = (x - mean) * rstd * w + b, row by row */
	g->zero = g->zrow[1];
	for (int j = 0; j < stage_rows; j++) {
		const char *skip = wsn__ws_row_out_begin(w, j, "y");
		wsn__ws_out_row(w, &y, j, ka->param[WSN_ABI_FWD_y], ka->ld_out, ka->txoff);
		for (int v = 0; v < g->vectors; v++) {
			const char *f[8], *o[8], *wf[8] = { 0 }, *bf[8] = { 0 };
			row_floats(w, j, v, f);
			if (kp->has_weight)
				wsn__ws_param_vec(w, &wt, v, g->zrow[1], wf);
			if (kp->has_bias)
				wsn__ws_param_vec(w, &bt, v, g->zrow[1], bf);
			for (int e = 0; e < g->vec; e++)
				o[e] = wsn__rk_norm_affine(g, f[e], g->ln ? mean[j] : NULL, rstd[j], wf[e], bf[e]);
			wsn__rk_store_vec(g, &y, v, o);
		}
		if (skip)
			ptx_label(k, skip);
	}
	wsn__ws_loop_end(w, &c, &lp);
}
