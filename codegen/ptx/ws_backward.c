/* SPDX-License-Identifier: MIT */
/* codegen/ptx/ws_backward.c: the warp-specialised backward's row loop: dx per row, dweight/dbias sums, a row split over a cluster. */
#include "ws.h"

/*
 * A row split over a cluster: the group's n row sums (this CTA's columns) become the whole row's.
 * Thread tx 0 arms the group's exchange barrier of slot i & 1 (i: the group's block count) for the
 * other CTAs' parts, then sends this CTA's part to each of them (st.async into their buffer at this
 * CTA's rank, completing on their barrier of the same slot). Every thread then waits for the parts
 * and adds all ranks' in rank order, so the CTAs of a cluster get bit-identical sums. Two slots are
 * enough: no CTA can get two blocks ahead of another, each block waiting for every other CTA's part;
 * and a buffer is refilled only after the group's next row reduction, which every thread reaches
 * after reading it.
 */
static void exchange(struct ws *w, const char *tot[], int n, const char *it)
{
	struct rk_gen *g = &w->g;
	struct ptx_kernel *k = g->k;
	unsigned red_slot = w->layout.red_slot, cluster_ctas = (unsigned)w->cluster_ctas;
	const char *li = ptx_tmp(k, PTX_U32), *idx = ptx_tmp(k, PTX_U32), *par = ptx_tmp(k, PTX_U32);
	const char *bar = ptx_tmp(k, PTX_U32), *buf = ptx_tmp(k, PTX_U32), *p = ptx_tmp(k, PTX_PRED);
	const char *sent = ptx_label_new(k, "xch_sent"), *rank = ptx_tmp(k, PTX_U32);

	ptx_comment(k, "row sums over the cluster: this CTA's part to the others, theirs added in rank order");
	ptx_sreg(k, rank, "%cluster_ctarank");
	ptx_ins(k, "div.u32 %s, %s, %d", li, it, g->bdimy);
	ptx_ins(k, "and.b32 %s, %s, 1", idx, li);
	ptx_ins(k, "bfe.u32 %s, %s, 1, 1", par, li);
	ptx_ins(k, "mad.lo.u32 %s, %s, 2, %s", idx, g->tid_y, idx);
	ptx_ins(k, "mad.lo.u32 %s, %s, 8, %s", bar, idx, w->bars);
	ptx_ins(k, "add.u32 %s, %s, %u", bar, bar, w->layout.xbar - w->layout.bars);
	ptx_ins(k, "mad.lo.u32 %s, %s, %u, %s", buf, idx, cluster_ctas * red_slot, g->smem);
	ptx_ins(k, "add.u32 %s, %s, %u", buf, buf, w->layout.xch);
	ptx_ins(k, "setp.ne.u32 %s, %s, 0", p, g->tid_x);
	ptx_guard(k, p, 0);
	ptx_bra_div(k, sent);
	{
		const char *mine = ptx_tmp(k, PTX_U32);
		ptx_mbarrier_arrive_expect_tx(k, bar, 0, (cluster_ctas - 1) * (unsigned)n * 4);
		ptx_ins(k, "mad.lo.u32 %s, %s, %u, %s", mine, rank, red_slot, buf);
		for (unsigned d = 1; d < cluster_ctas; d++) {
			const char *peer = ptx_tmp(k, PTX_U32), *ra = ptx_tmp(k, PTX_U32), *rb = ptx_tmp(k, PTX_U32);
			ptx_ins(k, "add.u32 %s, %s, %u", peer, rank, d);
			ptx_ins(k, "and.b32 %s, %s, %u", peer, peer, cluster_ctas - 1);
			ptx_mapa(k, ra, mine, peer);
			ptx_mapa(k, rb, bar, peer);
			/* the n sums in pieces of 4, 2, 1: each aligned to its size */
			for (int i = 0, m; i < n; i += m) {
				m = n - i >= 4 ? 4 : n - i >= 2 ? 2 : 1;
				ptx_st_async_f32(k, ra, 4LL * i, m, tot + i, rb);
			}
		}
	}
	ptx_label(k, sent);
	ptx_mbarrier_wait_parity_bounded(k, bar, 0, par, WATCHDOG_NS);
	for (int i = 0; i < n; i++) {
		const char *acc = ptx_tmp(k, PTX_F32);
		for (unsigned r = 0; r < cluster_ctas; r++) {
			const char *x = ptx_tmp(k, PTX_F32), *own = ptx_tmp(k, PTX_PRED);
			ptx_ld_shared(k, PTX_F32, x, buf, (long long)r * red_slot + 4 * i);
			ptx_ins(k, "setp.eq.u32 %s, %s, %u", own, rank, r);
			ptx_ins(k, "selp.f32 %s, %s, %s, %s", x, tot[i], x, own);
			if (r)
				ptx_add_f32(k, acc, acc, x);
			else
				ptx_mov(k, PTX_F32, acc, x);
		}
		ptx_mov(k, PTX_F32, tot[i], acc);
	}
}

/* The backward's block loop for one path (g->vecpath): dx of every row, dweight/dbias summed in the
 * accumulators dw and db. */
void wsn__ws_backward_rows(struct ws *w, const struct kargs *ka, struct rk_acc *dw, struct rk_acc *db)
{
	struct rk_gen *g = &w->g;
	struct ptx_kernel *k = g->k;
	const struct wsn__kernel_plan *kp = g->kp;
	struct rk_tens wt = { .tag = "w", .store = kp->param_store, .cache = PTX_CACHE_READONLY };
	struct rk_tens dx = { .tag = "dx", .store = WSN_STORE_GLOBAL, .cache = PTX_CACHE_DEFAULT };
	const char *cm[MAXU], *cr[MAXU], *nm[MAXU], *nr[MAXU], *sg[MAXU][2], *sgx[MAXU][2], *tot[2 * MAXU];
	const char *mg[MAXU], *nmgx[MAXU];
	int has_dw = kp->has_weight, has_db = kp->has_bias, stage_rows = w->stage_rows, nch = stage_rows == 1 ? 2 : 1, n = 0;
	struct loop_ctx c;
	struct ptx_loop lp;

	if (kp->has_weight)
		wsn__ws_load_params(w, &wt, w->layout.w, ka->param[WSN_ABI_BWD_weight], ka->txoff);
	dx.g = ptx_reg(k, PTX_U64, "dxa");
	/* accumulators start at zero */
	if (has_dw)
		wsn__rk_acc_zero(g, dw);
	if (has_db)
		wsn__rk_acc_zero(g, db);
	for (int j = 0; j < stage_rows; j++) {
		cm[j] = g->ln ? ptx_reg(k, PTX_F32, "mean%d", j) : NULL;
		cr[j] = ptx_reg(k, PTX_F32, "rstd%d", j);
		if (w->ns) { /* block_begin reads them from the stage */
			if (g->ln)
				w->stat[0][j] = cm[j];
			w->stat[w->ns - 1][j] = cr[j];
			continue;
		}
		nm[j] = g->ln ? ptx_reg(k, PTX_F32, "nmean%d", j) : NULL;
		nr[j] = ptx_reg(k, PTX_F32, "nrstd%d", j);
	}
	const char *inv[2] = { wsn__rk_param_zero(g, w->rows), wsn__rk_param_zero(g, w->cld[1]) };
	wsn__ws_loop_setup(w, &c);
	if (!w->ns) {
		ptx_comment(k, "statistics of the first block; each block then loads the next block's");
		wsn__ws_load_stats(w, c.b, c.rmax, ka->param[WSN_ABI_BWD_mean], ka->param[WSN_ABI_BWD_rstd], ka->sld, g->ln ? nm : NULL, nr);
	}
	wsn__ws_loop_head(w, &c, &lp);
	if (!w->ns) {
		for (int j = 0; j < stage_rows; j++) {
			if (g->ln)
				ptx_mov(k, PTX_F32, cm[j], nm[j]);
			ptx_mov(k, PTX_F32, cr[j], nr[j]);
		}
		wsn__ws_load_stats(w, c.nb, c.rmax, ka->param[WSN_ABI_BWD_mean], ka->param[WSN_ABI_BWD_rstd], ka->sld, g->ln ? nm : NULL, nr);
	}
	wsn__ws_block_begin(w, c.b, c.it, c.rmax);
	wsn__rk_opaque_zeros(g, w->row0, inv);

	/* pass 1: g = dy * w, xhat; row sums of g and g * xhat; column sums of dy * xhat and dy */
	ptx_comment(k, "pass 1 over %d row%s", stage_rows, stage_rows > 1 ? "s" : "");
	for (int j = 0; j < stage_rows; j++) {
		for (int h = 0; h < nch; h++) {
			sg[j][h] = g->ln ? ptx_tmp(k, PTX_F32) : NULL;
			sgx[j][h] = ptx_tmp(k, PTX_F32);
			if (g->ln)
				ptx_mov_f32(k, sg[j][h], 0.0f);
			ptx_mov_f32(k, sgx[j][h], 0.0f);
		}
	}
	for (int v = 0; v < g->vectors; v++) {
		const char *wf[8] = { 0 }, *fw[8], *fb[8];
		if (kp->has_weight)
			wsn__ws_param_vec(w, &wt, v, g->zrow[0], wf);
		if (has_dw)
			wsn__rk_acc_get(g, dw, v, fw);
		if (has_db)
			wsn__rk_acc_get(g, db, v, fb);
		for (int j = 0; j < stage_rows; j++) {
			const char *dv[4], *xv[4], *df[8], *xf[8];
			wsn__ws_row_vec(w, j, 0, v, dv);
			wsn__ws_row_vec(w, j, 1, v, xv);
			wsn__rk_unpack(g, dv, df);
			wsn__rk_unpack(g, xv, xf);
			for (int e = 0; e < g->vec; e++) {
				const char *xh = wsn__rk_xhat(g, xf[e], cm[j], cr[j]), *gg = wsn__rk_dy_w(g, df[e], wf[e]);
				int h = e % nch;
				if (g->ln)
					ptx_add_f32(k, sg[j][h], sg[j][h], gg);
				ptx_fma_f32(k, sgx[j][h], gg, xh, sgx[j][h]);
				if (has_dw) {
					if (w->pv[j])
						ptx_guard(k, w->pv[j], 0);
					ptx_fma_f32(k, fw[e], df[e], xh, fw[e]);
				}
				if (has_db) {
					if (w->pv[j])
						ptx_guard(k, w->pv[j], 0);
					ptx_add_f32(k, fb[e], fb[e], df[e]);
				}
			}
		}
		if (has_dw)
			wsn__rk_acc_put(g, dw, v, fw);
		if (has_db)
			wsn__rk_acc_put(g, db, v, fb);
	}
	for (int j = 0; j < stage_rows; j++) {
		if (g->ln) {
			if (nch > 1)
				ptx_add_f32(k, sg[j][0], sg[j][0], sg[j][1]);
			tot[n++] = sg[j][0];
		}
		if (nch > 1)
			ptx_add_f32(k, sgx[j][0], sgx[j][0], sgx[j][1]);
		tot[n++] = sgx[j][0];
	}
	wsn__rk_reduce_row(g, tot, n);
	if (w->cluster_ctas > 1)
		exchange(w, tot, n, c.it);

	/* pass 2: dx = rstd * (g - sum_g / H - xhat * sum_gxhat / H), row by row */
	for (int j = 0, i = 0; j < stage_rows; j++) {
		mg[j] = NULL;
		if (g->ln) {
			mg[j] = ptx_tmp(k, PTX_F32);
			ptx_mul_f32(k, mg[j], tot[i++], g->invH);
		}
		nmgx[j] = ptx_tmp(k, PTX_F32);
		ptx_mul_f32(k, nmgx[j], tot[i++], g->invH);
		ptx_ins(k, "neg.f32 %s, %s", nmgx[j], nmgx[j]);
	}
	g->zero = g->zrow[1];
	for (int j = 0; j < stage_rows; j++) {
		const char *skip = wsn__ws_row_out_begin(w, j, "dx");
		wsn__ws_out_row(w, &dx, j, ka->param[WSN_ABI_BWD_dx], ka->ld_out, ka->txoff);
		for (int v = 0; v < g->vectors; v++) {
			const char *dv[4], *xv[4], *df[8], *xf[8], *wf[8] = { 0 }, *o[8];
			wsn__ws_row_vec(w, j, 0, v, dv);
			wsn__ws_row_vec(w, j, 1, v, xv);
			wsn__rk_unpack(g, dv, df);
			wsn__rk_unpack(g, xv, xf);
			if (kp->has_weight)
				wsn__ws_param_vec(w, &wt, v, g->zrow[1], wf);
			for (int e = 0; e < g->vec; e++)
				o[e] = wsn__rk_dx_elem(g, xf[e], df[e], wf[e], g->ln ? cm[j] : NULL, cr[j],
						       mg[j], nmgx[j]);
			wsn__rk_store_vec(g, &dx, v, o);
		}
		if (skip)
			ptx_label(k, skip);
	}
	wsn__ws_loop_end(w, &c, &lp);
}
