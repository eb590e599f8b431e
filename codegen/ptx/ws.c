/* SPDX-License-Identifier: MIT */
/* codegen/ptx/ws.c: warp-specialised persistent LayerNorm/RMSNorm kernels: a producer warp bulk-copies rows into an mbarrier ring that row groups consume. */
#include "ws.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- producer */

/* The elected lane of warp 0: every block of this CTA into the ring. */
static void producer(struct ws *w)
{
	struct ptx_kernel *k = w->g.k;
	const char *nb = ptx_reg(k, PTX_U64, "p_nblocks"), *b = ptx_reg(k, PTX_U64, "p_block");
	const char *slot = ptx_reg(k, PTX_U32, "p_slot"), *phase = ptx_reg(k, PTX_U32, "p_phase");
	const char *par = ptx_reg(k, PTX_U32, "p_parity"), *full = ptx_reg(k, PTX_U32, "p_full");
	const char *st = ptx_reg(k, PTX_U32, "p_stage"), *row0 = ptx_reg(k, PTX_U64, "p_row0");
	const char *rmax = ptx_reg(k, PTX_U64, "p_rowmax"), *gstride = ptx_reg(k, PTX_U64, "p_gstride");
	const char *p = ptx_reg(k, PTX_PRED, "p_more"), *t32 = ptx_tmp(k, PTX_U32), *n32 = ptx_tmp(k, PTX_U32);
	long long HE = w->g.cols * w->g.elem_bytes;
	struct ptx_loop lp;

	ptx_comment(k, "---- producer: one lane copies every block of this CTA into the ring ----");
	ptx_ins(k, "add.u64 %s, %s, %d", nb, w->rows, w->stage_rows - 1);
	ptx_ins(k, "div.u64 %s, %s, %d", nb, nb, w->stage_rows);
	ptx_ins(k, "sub.u64 %s, %s, 1", rmax, w->rows);
	wsn__ws_stride_ids(w, t32, n32);
	ptx_ins(k, "cvt.u64.u32 %s, %s", b, t32);
	ptx_ins(k, "cvt.u64.u32 %s, %s", gstride, n32);
	ptx_mov_imm(k, PTX_U32, slot, 0);
	ptx_mov_imm(k, PTX_U32, phase, 0);
	ptx_ins(k, "setp.lt.u64 %s, %s, %s", p, b, nb);
	ptx_loop_begin(k, &lp, "produce");
	ptx_loop_break_if(k, &lp, p, 1);
	ptx_comment(k, "wait until slot s is empty (a fresh ring passes: parity 1 of a new barrier)");
	ptx_ins(k, "xor.b32 %s, %s, 1", par, phase);
	ptx_ins(k, "mad.lo.u32 %s, %s, 8, %s", full, slot, w->bars);
	ptx_mbarrier_wait_parity_bounded(k, full, 8LL * w->stages, par, WATCHDOG_NS);
	ptx_ins(k, "mad.lo.u32 %s, %s, %u, %s", st, slot, w->stage_bytes, w->stage0);
	ptx_ins(k, "mul.lo.u64 %s, %s, %d", row0, b, w->stage_rows);
	for (int j = 0; j < w->stage_rows; j++) {
		const char *row = row0;
		if (j) {
			row = ptx_tmp(k, PTX_U64);
			ptx_ins(k, "add.u64 %s, %s, %d", row, row0, j);
			ptx_ins(k, "min.u64 %s, %s, %s", row, row, rmax);
		}
		for (int t = 0; t < w->nt; t++) {
			const char *a = ptx_tmp(k, PTX_U64), *m = ptx_tmp(k, PTX_U32), *span = ptx_tmp(k, PTX_U32);
			const char *dst = ptx_tmp(k, PTX_U32);
			ptx_ins(k, "mad.lo.u64 %s, %s, %s, %s", a, row, w->cld[t], w->cbase[t]);
			ptx_ins(k, "cvt.u32.u64 %s, %s", m, a);
			ptx_ins(k, "and.b32 %s, %s, 15", m, m);
			ptx_ins(k, "and.b64 %s, %s, -16", a, a);
			ptx_ins(k, "add.u32 %s, %s, %lld", span, m, HE + 15);
			ptx_ins(k, "and.b32 %s, %s, -16", span, span);
			ptx_ins(k, "add.u32 %s, %s, %u", dst, st, (unsigned)(j * w->nt + t) * w->row_bytes);
			ptx_mbarrier_expect_tx(k, full, 0, span);
			ptx_cp_async_bulk_g2s(k, dst, a, span, full);
		}
		for (int s = 0; s < w->ns; s++) {
			/* a row's statistic arrives with its rows: no row group waits on a load of its own */
			const char *a = ptx_tmp(k, PTX_U64), *dst = ptx_tmp(k, PTX_U32);
			ptx_ins(k, "mad.lo.u64 %s, %s, %s, %s", a, row, w->sld, w->sbase[s]);
			ptx_ins(k, "add.u32 %s, %s, %u", dst, st, w->stage_rows_bytes + (unsigned)(s * w->stage_rows + j) * 4);
			ptx_cp_async_ca(k, dst, a, 4);
		}
	}
	if (w->ns)
		ptx_cp_async_mbarrier_arrive(k, full);
	ptx_mbarrier_arrive(k, full, 0);
	ptx_ins(k, "add.u32 %s, %s, 1", slot, slot);
	{
		const char *wrap = ptx_tmp(k, PTX_PRED);
		ptx_ins(k, "setp.eq.u32 %s, %s, %d", wrap, slot, w->stages);
		ptx_guard(k, wrap, 0);
		ptx_mov_imm(k, PTX_U32, slot, 0);
		ptx_guard(k, wrap, 0);
		ptx_ins(k, "xor.b32 %s, %s, 1", phase, phase);
	}
	ptx_ins(k, "add.u64 %s, %s, %s", b, b, gstride);
	ptx_ins(k, "setp.lt.u64 %s, %s, %s", p, b, nb);
	ptx_loop_end(k, &lp, NULL, 0);
}

/* ---------------------------------------------------------------- kernels */

/* Everything before the roles split: barriers initialised by thread 0, then the producer's code;
 * returns with the row groups' code to be emitted next (after setmaxnreg.inc). */
static void prologue(struct ws *w)
{
	struct ptx_kernel *k = w->g.k;
	const struct wsn__kernel_plan *kp = w->g.kp;
	const char *tid = ptx_reg(k, PTX_U32, "thr"), *p0 = ptx_tmp(k, PTX_PRED), *pp = ptx_tmp(k, PTX_PRED);
	const char *warp = ptx_tmp(k, PTX_U32), *pw = ptx_tmp(k, PTX_PRED), *pe = ptx_reg(k, PTX_PRED, "p_elected");
	const char *skip = ptx_label_new(k, "init_done"), *rowgroups = ptx_label_new(k, "row_groups");

	w->g.smem = ptx_reg(k, PTX_U32, "smem");
	ptx_smem_addr(k, w->g.smem, RK_SMEM_SYM, 0);
	w->bars = ptx_reg(k, PTX_U32, "bars");
	ptx_ins(k, "add.u32 %s, %s, %u", w->bars, w->g.smem, w->layout.bars);
	w->stage0 = ptx_reg(k, PTX_U32, "stage0");
	ptx_ins(k, "add.u32 %s, %s, %u", w->stage0, w->g.smem, w->layout.stages);
	ptx_sreg(k, tid, "%tid.x");
	ptx_ins(k, "setp.ne.u32 %s, %s, 0", p0, tid);
	ptx_guard(k, p0, 0);
	ptx_bra_div(k, skip); /* thread 0 alone initialises */
	ptx_comment(k, "full[s]: the producer's arrival plus the bytes; empty[s]: one arrival per warp of a group");
	for (int s = 0; s < w->stages; s++) {
		ptx_mbarrier_init(k, w->bars, 8LL * s, 1);
		ptx_mbarrier_init(k, w->bars, 8LL * (w->stages + s), kp->bdimx / 32);
	}
	if (w->cluster_ctas > 1) {
		ptx_comment(k, "row-sum exchange: 2 slots per row group, armed by the group's thread 0");
		for (unsigned i = 0; i < 2 * kp->bdimy; i++)
			ptx_mbarrier_init(k, w->bars, (long long)(w->layout.xbar - w->layout.bars) + 8LL * i, 1);
	}
	ptx_fence_mbarrier_init(k);
	ptx_label(k, skip);
	if (w->cluster_ctas > 1) /* the other CTAs' barriers are ready before anything is sent to them */
		ptx_cluster_sync(k);
	else
		ptx_bar_sync(k, 0, 0);
	if (w->g.bwd) {
		/* the first block's dy, x and dx lines into L2 while the previous grid drains (it helps the
		 * backward; the multi-wave forward does without: see NOTES v12) */
		const char *i32 = ptx_tmp(k, PTX_U32), *n32 = ptx_tmp(k, PTX_U32), *r = ptx_tmp(k, PTX_U64);
		const char *base[3] = { w->cbase[0], w->cbase[1], w->obase }, *ld[3] = { w->cld[0], w->cld[1], w->old };
		wsn__ws_stride_ids(w, i32, n32);
		ptx_ins(k, "mul.wide.u32 %s, %s, %d", r, i32, w->stage_rows);
		wsn__rk_prefetch_row(&w->g, tid, r, base, ld, 3);
	}
	/* the set-up above overlaps the previous grid's tail; global memory only from here on */
	wsn__rk_griddep_start(&w->g);
	ptx_ins(k, "setp.ge.u32 %s, %s, %u", pp, tid, kp->producer_threads);
	ptx_guard(k, pp, 0);
	ptx_bra(k, rowgroups);
	ptx_comment(k, "---- producer warpgroup: registers back to the pool; warp 0 elects the copying lane ----");
	ptx_setmaxnreg(k, 0, kp->regs_producer);
	ptx_ins(k, "shr.u32 %s, %s, 5", warp, tid);
	ptx_ins(k, "setp.ne.u32 %s, %s, 0", pw, warp);
	ptx_guard(k, pw, 0);
	ptx_exit(k);
	ptx_elect_sync(k, pe, NULL);
	ptx_guard(k, pe, 1);
	ptx_exit(k);
	producer(w);
	ptx_exit(k);
	ptx_label(k, rowgroups);
	ptx_comment(k, "---- row groups ----");
	if (kp->regs_compute > kp->regs_entry)
		ptx_setmaxnreg(k, 1, kp->regs_compute);
}

/* Lane 0 of each warp: the warp's arrival on an empty barrier. */
static void lane_zero(struct ws *w)
{
	struct ptx_kernel *k = w->g.k;
	const char *lane = ptx_tmp(k, PTX_U32);

	w->lane0 = ptx_reg(k, PTX_PRED, "p_warp_lane0");
	ptx_sreg(k, lane, "%laneid");
	ptx_ins(k, "setp.eq.u32 %s, %s, 0", w->lane0, lane);
}

/* The 16-byte path when every row start, row stride and parameter is 16-byte aligned. */
/* The row loops as wsn__rk_two_paths callbacks. */
struct bwd_rows_args {
	struct ws *w;
	const struct kargs *ka;
	struct rk_acc *dw, *db;
};

struct fwd_rows_args {
	struct ws *w;
	const struct kargs *ka;
};

static void bwd_rows(struct rk_gen *g, void *args)
{
	struct bwd_rows_args *a = args;

	(void)g;
	wsn__ws_backward_rows(a->w, a->ka, a->dw, a->db);
}

static void fwd_rows(struct rk_gen *g, void *args)
{
	struct fwd_rows_args *a = args;

	(void)g;
	wsn__ws_forward_rows(a->w, a->ka);
}

static int gen_backward(struct ws *w)
{
	struct rk_gen *g = &w->g;
	struct ptx_kernel *k = g->k;
	const struct wsn__kernel_plan *kp = g->kp;
	struct rk_abi abi;
	struct rk_acc dw = { .tag = "dw", .store = kp->dw_store }, db = { .tag = "db", .store = kp->db_store };
	struct rk_acc *accs[2] = { kp->has_weight ? &dw : NULL, kp->has_bias ? &db : NULL };
	struct kargs ka;
	const char *dyld, *xld, *dxld;

	memset(&ka, 0, sizeof(ka));
	wsn__rk_abi_params(g, 1, &abi);
	memcpy(ka.param, abi.reg, sizeof(ka.param));
	w->rows = abi.reg[WSN_ABI_BWD_rows];
	dyld = abi.reg[WSN_ABI_BWD_dy_ld], xld = abi.reg[WSN_ABI_BWD_x_ld], dxld = abi.reg[WSN_ABI_BWD_dx_ld];
	ka.sld = abi.reg[WSN_ABI_BWD_stats_ld];
	ka.ld_out = dxld;
	if (w->cluster_ctas > 1) {
		/* this CTA's columns: rank * hidden / cluster on, in dy, x, dx and the weight */
		const char *cb = ptx_tmp(k, PTX_U64);
		g->rank = ptx_reg(k, PTX_U32, "cta_rank");
		ptx_sreg(k, g->rank, "%cluster_ctarank");
		ptx_ins(k, "mul.wide.u32 %s, %s, %lld", cb, g->rank, g->cols * g->elem_bytes);
		static const int split[] = { WSN_ABI_BWD_dy, WSN_ABI_BWD_x, WSN_ABI_BWD_weight, WSN_ABI_BWD_dx };
		for (size_t i = 0; i < WSN_ARRAY_SIZE(split); i++)
			if (split[i] != WSN_ABI_BWD_weight || kp->has_weight)
				ptx_ins(k, "add.u64 %s, %s, %s", ka.param[split[i]], ka.param[split[i]], cb);
	}
	w->cbase[0] = ka.param[WSN_ABI_BWD_dy];
	w->cld[0] = dyld;
	w->cbase[1] = ka.param[WSN_ABI_BWD_x];
	w->cld[1] = xld;
	w->obase = ka.param[WSN_ABI_BWD_dx];
	w->old = dxld;
	w->ns = kp->stats_ring ? (g->ln ? 2 : 1) : 0;
	w->sbase[0] = g->ln ? ka.param[WSN_ABI_BWD_mean] : ka.param[WSN_ABI_BWD_rstd];
	w->sbase[1] = ka.param[WSN_ABI_BWD_rstd];
	w->sld = ka.sld;
	prologue(w);
	wsn__rk_setup_common(g);
	lane_zero(w);
	ka.txoff = ptx_reg(k, PTX_U64, "txoff");
	ptx_ins(k, "mul.wide.u32 %s, %s, 16", ka.txoff, g->tid_x);
	for (int a = 0; a < 2; a++) /* registers or shared memory: the ws plans have no other */
		if (accs[a])
			wsn__rk_acc_home(g, accs[a], a ? w->layout.db : w->layout.dw);
	struct bwd_rows_args bra = { w, &ka, &dw, &db };
	wsn__rk_two_paths(g, wsn__rk_bwd_aligned_pred(g, ka.param, dyld, xld, dxld), "rows_done", "a row or the weight",
			  bwd_rows, &bra);
	g->vecpath = 1;
	wsn__rk_griddep_end(g);
	if (accs[0] || accs[1]) {
		/* the fold buffer reuses the ring, last written by the bulk copies */
		ptx_fence_proxy_async(k);
		wsn__rk_bwd_epilogue(g, accs, ka.param[WSN_ABI_BWD_partials]);
	}
	ptx_exit(k);
	return 0;
}

static int gen_forward(struct ws *w)
{
	struct rk_gen *g = &w->g;
	struct ptx_kernel *k = g->k;
	struct rk_abi abi;
	struct kargs ka;
	const char *xld, *yld;

	memset(&ka, 0, sizeof(ka));
	wsn__rk_abi_params(g, 0, &abi);
	memcpy(ka.param, abi.reg, sizeof(ka.param));
	w->rows = abi.reg[WSN_ABI_FWD_rows];
	xld = abi.reg[WSN_ABI_FWD_x_ld], yld = abi.reg[WSN_ABI_FWD_y_ld];
	ka.eps = abi.reg[WSN_ABI_FWD_eps];
	ka.ld_out = yld;
	w->cbase[0] = ka.param[WSN_ABI_FWD_x];
	w->cld[0] = xld;
	prologue(w);
	wsn__rk_setup_common(g);
	lane_zero(w);
	ka.txoff = ptx_reg(k, PTX_U64, "txoff");
	ptx_ins(k, "mul.wide.u32 %s, %s, 16", ka.txoff, g->tid_x);
	{
		const char *p_t0 = ptx_reg(k, PTX_PRED, "p_tx0");
		ka.p_mean = ptx_reg(k, PTX_PRED, "p_mean_out");
		ka.p_rstd = ptx_reg(k, PTX_PRED, "p_rstd_out");
		ptx_ins(k, "setp.eq.u32 %s, %s, 0", p_t0, g->tid_x);
		ptx_ins(k, "setp.ne.and.u64 %s, %s, 0, %s", ka.p_mean, ka.param[WSN_ABI_FWD_mean], p_t0);
		ptx_ins(k, "setp.ne.and.u64 %s, %s, 0, %s", ka.p_rstd, ka.param[WSN_ABI_FWD_rstd], p_t0);
	}
	struct fwd_rows_args fra = { w, &ka };
	wsn__rk_two_paths(g, wsn__rk_fwd_aligned_pred(g, ka.param, xld, yld), "rows_done", "a row or parameter",
			  fwd_rows, &fra);
	ptx_exit(k);
	return 0;
}

/* The plan's constants at the top of the module, and the reasoning one clause per line. */
static void plan_comments(struct ptx_module *m, const struct wsn__kernel_plan *kp, const struct wsn__ws_layout *l)
{
	static const char *const st[] = { "registers", "shared", "global" };

	ptx_module_comment(m, "wsnorm generated kernel: %s %s, warp-specialised persistent", wsn_op_name(kp->op),
			   wsn_dtype_name(kp->dtype));
	ptx_module_comment(m, "op=%s dtype=%s hidden=%lld weight=%d bias=%d", wsn_op_name(kp->op),
			   wsn_dtype_name(kp->dtype), (long long)kp->hidden, kp->has_weight, kp->has_bias);
	ptx_module_comment(m, "bdimx=%u bdimy=%u (row groups) unroll=%u (rows per stage) stages=%u producer=%u "
			   "block_threads=%u vec=%u nvec=%u", kp->bdimx, kp->bdimy, kp->unroll, kp->stages,
			   kp->producer_threads, kp->block_threads, kp->vec, kp->nvec);
	ptx_module_comment(m, "row_bytes=%u stage_bytes=%u cache_rows=%d params=%s dweight=%s dbias=%s", kp->row_bytes,
			   kp->stage_bytes, kp->cache_rows, st[kp->param_store], st[kp->dw_store], st[kp->db_store]);
	ptx_module_comment(m, "registers: entry %u, producer %u, row groups %u (estimate %u); smem %u = barriers @%u, "
			   "reduction @%u, params @%u/%u, sums @%u/%u, ring @%u", kp->regs_entry, kp->regs_producer,
			   kp->regs_compute, kp->est_regs, l->total, l->bars, l->red, l->w, l->b, l->dw, l->db, l->stages);
	ptx_module_clauses(m, kp->why);
}

int wsn__ws_generate(const struct wsn__kernel_plan *kp, char **ptx)
{
	struct ptx_module m;
	struct ws *w;
	int err;

	*ptx = NULL;
	if (kp->approach != WSN_APPROACH_WS || !kp->bdimx || kp->bdimx % 32 || !kp->nvec || kp->nvec > RK_MAXV ||
	    !kp->bdimy || (kp->bdimx > 32 && kp->bdimy > 14) || (kp->bdimx * kp->bdimy) % 128 || kp->producer_threads != 128 || kp->bdimx * kp->bdimy + kp->producer_threads != kp->block_threads ||
	    kp->unroll < 1 || kp->unroll > MAXU || kp->stages < 1 || kp->stages % kp->bdimy || kp->row_bytes % 16 ||
	    !kp->regs_producer ||
	    kp->cluster > 8 || (kp->cluster & (kp->cluster - 1)) ||
	    (kp->cluster > 1 && (!wsn_op_is_backward(kp->op) || kp->hidden % ((int64_t)kp->cluster * (16 / (int64_t)wsn_dtype_size(kp->dtype))))))
		return wsn__error(WSN_EINVAL, "codegen: warp-specialised plan for %s is inconsistent (bdimx %u, bdimy %u, "
				  "nvec %u, unroll %u, stages %u)", kp->entry, kp->bdimx, kp->bdimy, kp->nvec, kp->unroll,
				  kp->stages);
	if (!(w = calloc(1, sizeof(*w))))
		return wsn__error(WSN_ENOMEM, "codegen: out of memory for %s", kp->entry);
	if ((err = ptx_module_init(&m, kp->arch))) {
		free(w);
		return err;
	}
	struct rk_gen *g = &w->g;
	g->kp = kp;
	g->bwd = wsn_op_is_backward(kp->op);
	g->ln = wsn_op_is_layernorm(kp->op);
	g->elem_bytes = (int)wsn_dtype_size(kp->dtype);
	g->vec = 16 / g->elem_bytes;
	g->vectors = (int)kp->nvec;
	g->bdimx = (int)kp->bdimx;
	g->bdimy = (int)kp->bdimy;
	g->warps = g->bdimx / 32;
	g->cols = wsn__kernel_cols(kp);
	g->row_vectors = (g->cols + g->vec - 1) / g->vec;
	g->nfull = g->cols / g->vec;
	g->tail = g->cols % g->vec;
	g->tid_base = kp->producer_threads;
	g->griddep_later = 1; /* prologue() */
	w->stage_rows = (int)kp->unroll;
	w->stages = (int)kp->stages;
	w->cluster_ctas = kp->cluster > 1 ? (int)kp->cluster : 1;
	w->nt = g->bwd ? 2 : 1;
	w->row_bytes = kp->row_bytes;
	w->stage_bytes = kp->stage_bytes;
	w->stage_rows_bytes = (unsigned)(w->stage_rows * w->nt) * w->row_bytes;
	wsn__ws_layout(kp, &w->layout);
	g->sm_red = w->layout.red;
	g->red_slot = w->layout.red_slot;
	g->sm_xg = w->layout.xg;
	g->xg_slots = w->layout.xg_slots;
	g->all_bar = 15; /* row groups use 1..14 (or none: a warp per row) */
	g->all_bar_count = kp->bdimx * kp->bdimy;
	if ((long long)g->vectors * g->bdimx < g->row_vectors || w->row_bytes < (unsigned)(g->cols * g->elem_bytes) + 16 ||
	    w->stage_bytes != w->stage_rows_bytes + wsn__ws_stats_bytes(kp) ||
	    w->layout.total > kp->smem_bytes) {
		ptx_module_free(&m);
		free(w);
		return wsn__error(WSN_EINVAL, "codegen: warp-specialised plan for %s does not cover hidden %lld or its "
				  "shared memory", kp->entry, (long long)kp->hidden);
	}
	plan_comments(&m, kp, &w->layout);
	ptx_module_extern_smem(&m, RK_SMEM_SYM, 128);
	g->k = ptx_kernel_begin(&m, kp->entry);
	if (!g->k) {
		err = m.err;
		ptx_module_free(&m);
		free(w);
		return err;
	}
	ptx_kernel_launch_bounds(g->k, kp->block_threads, 1);
	ptx_kernel_maxnreg(g->k, kp->regs_entry);
	if (kp->cache_rows)
		wsn__ws_cache_names(w);
	err = g->bwd ? gen_backward(w) : gen_forward(w);
	if (!err)
		err = ptx_kernel_end(g->k);
	if (!err && kp->finish_entry[0])
		err = wsn__rk_gen_finish(&m, kp);
	free(w);
	if (err) {
		ptx_module_free(&m);
		return err;
	}
	return ptx_module_take(&m, ptx);
}
