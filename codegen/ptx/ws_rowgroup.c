/* SPDX-License-Identifier: MIT */
/* codegen/ptx/ws_rowgroup.c: the warp-specialised row groups' shared machinery: stage reads, block loop, statistics, parameters, output rows. */
#include "ws.h"

#include <stdio.h>
#include <string.h>

/* The CTA's place among those that stride over the row blocks, and their number: the CTA's, or with
 * a row split over a cluster the cluster's (its CTAs take the same blocks, each its own columns). */
void wsn__ws_stride_ids(struct ws *w, const char *idx, const char *count)
{
	ptx_sreg(w->g.k, idx, w->cluster_ctas > 1 ? "%clusterid.x" : "%ctaid.x");
	ptx_sreg(w->g.k, count, w->cluster_ctas > 1 ? "%nclusterid.x" : "%nctaid.x");
}

/* Vector v of row j, tensor t, from the stage into r (partial slices zeroed past the row's end). */
static void stage_vec(struct ws *w, int j, int t, int v, const char *const r[4])
{
	struct rk_gen *g = &w->g;
	struct ptx_kernel *k = g->k;
	long long off = (long long)v * g->bdimx * 16;
	const char *sa = w->srow[j][t];

	if (g->vecpath) {
		if (g->slice_kind[v] == RK_J_ALL) {
			ptx_ld_shared_v4(k, r, sa, off);
			return;
		}
		for (int q = 0; q < 4; q++)
			ptx_mov_imm(k, PTX_B32, r[q], 0);
		ptx_guard(k, g->p_full[v], 0);
		ptx_ld_shared_v4(k, r, sa, off);
		if (!g->has_tail[v])
			return;
		/* the tail vector: load it whole, then clear the elements past the row's end */
		ptx_guard(k, g->p_tail[v], 0);
		ptx_ld_shared_v4(k, r, sa, off);
		for (int q = 0; q < 4; q++) {
			int e0 = g->elem_bytes == 4 ? q : 2 * q;
			if (e0 >= g->tail) {
				ptx_guard(k, g->p_tail[v], 0);
				ptx_mov_imm(k, PTX_B32, r[q], 0);
			} else if (g->elem_bytes != 4 && e0 + 1 == g->tail) {
				ptx_guard(k, g->p_tail[v], 0);
				ptx_ins(k, "and.b32 %s, %s, 65535", r[q], r[q]);
			}
		}
		return;
	}
	/* element path: the row sits at an offset that is not a multiple of 16 */
	if (g->elem_bytes == 4) {
		for (int e = 0; e < 4; e++) {
			const char *pe = wsn__rk_elem_pred(g, v, e);
			if (pe) {
				ptx_mov_imm(k, PTX_B32, r[e], 0);
				ptx_guard(k, pe, 0);
			}
			ptx_ld_shared(k, PTX_B32, r[e], sa, off + 4 * e);
		}
		return;
	}
	const char *h[8];
	for (int e = 0; e < 8; e++) {
		const char *pe = wsn__rk_elem_pred(g, v, e);
		h[e] = ptx_tmp(k, PTX_B16);
		if (pe) {
			ptx_mov_imm(k, PTX_B16, h[e], 0);
			ptx_guard(k, pe, 0);
		}
		ptx_ld_shared(k, PTX_B16, h[e], sa, off + 2 * e);
	}
	for (int q = 0; q < 4; q++)
		ptx_ins(k, "mov.b32 %s, {%s, %s}", r[q], h[2 * q], h[2 * q + 1]);
}

/* The packed registers of vector v of row j, tensor t: cached registers (read through the pass's
 * opaque zero) or a fresh load from the stage. */
void wsn__ws_row_vec(struct ws *w, int j, int t, int v, const char *out[4])
{
	if (w->g.kp->cache_rows) {
		wsn__rk_get_vec(&w->g, &w->cache[j][t], v, out);
		return;
	}
	for (int q = 0; q < 4; q++)
		out[q] = ptx_tmp(w->g.k, PTX_B32);
	stage_vec(w, j, t, v, out);
}

/* Every warp of the group arrives once on the empty barrier of the current slot. */
void wsn__ws_release_stage(struct ws *w)
{
	struct ptx_kernel *k = w->g.k;
	const char *a = ptx_tmp(k, PTX_U32);

	ptx_comment(k, "the group no longer reads this stage: one arrival per warp on its empty barrier");
	ptx_bar_warp_sync(k);
	ptx_ins(k, "mad.lo.u32 %s, %s, 8, %s", a, w->slot, w->bars);
	ptx_guard(k, w->lane0, 0);
	ptx_mbarrier_arrive(k, a, 8LL * w->stages);
}

/* Block-start bookkeeping for a row group: rows (clamped to the last one), validity predicates,
 * the slot's full barrier, and this thread's addresses in the stage. */
void wsn__ws_block_begin(struct ws *w, const char *b, const char *it, const char *rmax)
{
	struct rk_gen *g = &w->g;
	struct ptx_kernel *k = g->k;
	const char *phase = ptx_tmp(k, PTX_U32), *full = ptx_tmp(k, PTX_U32), *st = ptx_tmp(k, PTX_U32);
	const char *txs = ptx_tmp(k, PTX_U32);

	w->row0 = ptx_reg(k, PTX_U64, "row0");
	w->slot = ptx_reg(k, PTX_U32, "slot");
	ptx_ins(k, "mul.lo.u64 %s, %s, %d", w->row0, b, w->stage_rows);
	for (int j = 0; j < w->stage_rows; j++) {
		if (!j) {
			w->rowc[0] = w->row0;
			w->pv[0] = NULL;
			continue;
		}
		w->rowc[j] = ptx_reg(k, PTX_U64, "rowc%d", j);
		w->pv[j] = ptx_reg(k, PTX_PRED, "pvalid%d", j);
		ptx_ins(k, "add.u64 %s, %s, %d", w->rowc[j], w->row0, j);
		ptx_ins(k, "setp.le.u64 %s, %s, %s", w->pv[j], w->rowc[j], rmax);
		ptx_ins(k, "min.u64 %s, %s, %s", w->rowc[j], w->rowc[j], rmax);
	}
	ptx_ins(k, "rem.u32 %s, %s, %d", w->slot, it, w->stages);
	ptx_ins(k, "div.u32 %s, %s, %d", phase, it, w->stages);
	ptx_ins(k, "and.b32 %s, %s, 1", phase, phase);
	ptx_ins(k, "mad.lo.u32 %s, %s, 8, %s", full, w->slot, w->bars);
	ptx_ins(k, "mad.lo.u32 %s, %s, %u, %s", st, w->slot, w->stage_bytes, w->stage0);
	ptx_ins(k, "shl.b32 %s, %s, 4", txs, g->tid_x);
	ptx_ins(k, "add.u32 %s, %s, %s", st, st, txs);
	for (int j = 0; j < w->stage_rows; j++) {
		for (int t = 0; t < w->nt; t++) {
			w->srow[j][t] = ptx_reg(k, PTX_U32, "srow%d_%d", j, t);
			ptx_ins(k, "add.u32 %s, %s, %u", w->srow[j][t], st, (unsigned)(j * w->nt + t) * w->row_bytes);
			if (!g->vecpath) {
				/* the copy starts at the row's 16-byte chunk: the row begins (address & 15) in */
				const char *a = ptx_tmp(k, PTX_U64), *m = ptx_tmp(k, PTX_U32);
				ptx_ins(k, "mad.lo.u64 %s, %s, %s, %s", a, w->rowc[j], w->cld[t], w->cbase[t]);
				ptx_ins(k, "cvt.u32.u64 %s, %s", m, a);
				ptx_ins(k, "and.b32 %s, %s, 15", m, m);
				ptx_ins(k, "add.u32 %s, %s, %s", w->srow[j][t], w->srow[j][t], m);
			}
		}
	}
	ptx_comment(k, "wait for the stage: phase (i / stages) & 1 of full[i %% stages]");
	ptx_mbarrier_wait_parity_bounded(k, full, 0, phase, WATCHDOG_NS);
	if (w->ns) {
		const char *sa = ptx_tmp(k, PTX_U32);
		ptx_ins(k, "mad.lo.u32 %s, %s, %u, %s", sa, w->slot, w->stage_bytes, w->stage0);
		for (int s = 0; s < w->ns; s++)
			for (int j = 0; j < w->stage_rows; j++)
				ptx_ld_shared(k, PTX_F32, w->stat[s][j], sa, w->stage_rows_bytes + (long long)(s * w->stage_rows + j) * 4);
	}
	if (g->kp->cache_rows) {
		ptx_comment(k, "copy the stage into registers, then give it back to the producer");
		for (int j = 0; j < w->stage_rows; j++)
			for (int t = 0; t < w->nt; t++)
				for (int v = 0; v < g->vectors; v++)
					stage_vec(w, j, t, v, w->cache[j][t].r[v]);
		wsn__ws_release_stage(w);
	}
}

/* Stats of row j of block nb into nm (mean, LayerNorm) and nr (rstd), row clamped to the last. */
void wsn__ws_load_stats(struct ws *w, const char *nb, const char *rmax, const char *meanp, const char *rstdp,
			const char *sld, const char *nm[], const char *nr[])
{
	struct ptx_kernel *k = w->g.k;

	for (int j = 0; j < w->stage_rows; j++) {
		const char *row = ptx_tmp(k, PTX_U64), *a = ptx_tmp(k, PTX_U64);
		ptx_ins(k, "mad.lo.u64 %s, %s, %d, %d", row, nb, w->stage_rows, j);
		ptx_ins(k, "min.u64 %s, %s, %s", row, row, rmax);
		ptx_ins(k, "mul.lo.u64 %s, %s, %s", row, row, sld);
		if (nm) {
			ptx_ins(k, "add.u64 %s, %s, %s", a, meanp, row);
			ptx_ld_global(k, PTX_CACHE_DEFAULT, PTX_F32, nm[j], a, 0);
		}
		a = ptx_tmp(k, PTX_U64);
		ptx_ins(k, "add.u64 %s, %s, %s", a, rstdp, row);
		ptx_ld_global(k, PTX_CACHE_DEFAULT, PTX_F32, nr[j], a, 0);
	}
}

/* Registers of the cached stage (cache_rows). */
void wsn__ws_cache_names(struct ws *w)
{
	for (int j = 0; j < w->stage_rows; j++) {
		for (int t = 0; t < w->nt; t++) {
			struct rk_tens *c = &w->cache[j][t];
			char tag[16];
			snprintf(tag, sizeof(tag), "c%d%c", j, t == w->nt - 1 ? 'x' : 'd');
			memset(c, 0, sizeof(*c));
			c->store = WSN_STORE_REG;
			for (int v = 0; v < w->g.vectors; v++)
				for (int q = 0; q < 4; q++)
					c->r[v][q] = ptx_reg(w->g.k, PTX_B32, "%s%d_%d", tag, v, q);
		}
	}
}

/* Parameters (weight, bias) once per CTA: registers, or each thread's own vectors in shared memory. */
void wsn__ws_load_params(struct ws *w, struct rk_tens *pt, unsigned sm_off, const char *gp, const char *txoff)
{
	struct rk_gen *g = &w->g;
	struct ptx_kernel *k = g->k;

	pt->g = ptx_reg(k, PTX_U64, "%sa", pt->tag);
	ptx_ins(k, "add.u64 %s, %s, %s", pt->g, gp, txoff);
	if (pt->store == WSN_STORE_REG) {
		ptx_comment(k, "%s loaded once per CTA, kept in registers", pt->tag);
		wsn__rk_reg_names(g, pt);
		for (int v = 0; v < g->vectors; v++)
			wsn__rk_load_vec(g, pt, v, pt->r[v]);
		return;
	}
	ptx_comment(k, "%s loaded once per CTA into shared memory (each thread its own vectors)", pt->tag);
	pt->s = ptx_reg(k, PTX_U32, "%s_s", pt->tag);
	ptx_ins(k, "mad.lo.u32 %s, %s, 16, %s", pt->s, g->tid_x, g->smem);
	ptx_ins(k, "add.u32 %s, %s, %u", pt->s, pt->s, sm_off);
	for (int v = 0; v < g->vectors; v++) {
		const char *t[4];
		for (int q = 0; q < 4; q++)
			t[q] = ptx_tmp(k, PTX_B32);
		wsn__rk_load_vec(g, pt, v, t);
		ptx_st_shared_v4(k, pt->s, (long long)v * g->bdimx * 16, t);
	}
}

/* Parameter vector v (weight or bias), unpacked; REG copies read through the opaque zero z. */
void wsn__ws_param_vec(struct ws *w, struct rk_tens *pt, int v, const char *z, const char *f[8])
{
	const char *pv[4], *save = w->g.zero;

	w->g.zero = z;
	wsn__rk_get_vec(&w->g, pt, v, pv);
	w->g.zero = save;
	wsn__rk_unpack(&w->g, pv, f);
}

/* Registers of the loop: group ty takes iterations ty, ty + bdimy, ... = blocks ctaid + i * nctaid. */
void wsn__ws_loop_setup(struct ws *w, struct loop_ctx *c)
{
	struct ptx_kernel *k = w->g.k;
	const char *t = ptx_tmp(k, PTX_U32), *nc = ptx_tmp(k, PTX_U32);

	c->b = ptx_reg(k, PTX_U64, "blk");
	c->nb = ptx_reg(k, PTX_U64, "blk_next");
	c->it = ptx_reg(k, PTX_U32, "iter");
	c->bstride = ptx_reg(k, PTX_U64, "blk_stride");
	c->nblocks = ptx_reg(k, PTX_U64, "nblocks");
	c->rmax = ptx_reg(k, PTX_U64, "rowmax");
	ptx_ins(k, "add.u64 %s, %s, %d", c->nblocks, w->rows, w->stage_rows - 1);
	ptx_ins(k, "div.u64 %s, %s, %d", c->nblocks, c->nblocks, w->stage_rows);
	ptx_ins(k, "sub.u64 %s, %s, 1", c->rmax, w->rows);
	wsn__ws_stride_ids(w, t, nc);
	ptx_mov(k, PTX_U32, c->it, w->g.tid_y);
	ptx_ins(k, "mad.lo.u32 %s, %s, %s, %s", t, w->g.tid_y, nc, t);
	ptx_ins(k, "cvt.u64.u32 %s, %s", c->b, t);
	ptx_ins(k, "mul.wide.u32 %s, %s, %d", c->bstride, nc, w->g.bdimy);
}

/* Top of the block loop: leave when the block is past the last, else the next block's number. */
void wsn__ws_loop_head(struct ws *w, struct loop_ctx *c, struct ptx_loop *lp)
{
	struct ptx_kernel *k = w->g.k;
	const char *p = ptx_tmp(k, PTX_PRED);

	ptx_ins(k, "setp.ge.u64 %s, %s, %s", p, c->b, c->nblocks);
	ptx_loop_begin(k, lp, w->g.vecpath ? "vec_block" : "elem_block");
	ptx_loop_break_if(k, lp, p, 0);
	ptx_ins(k, "add.u64 %s, %s, %s", c->nb, c->b, c->bstride);
}

/* Bottom of the block loop: the stage back to the producer (unless the rows were copied to
 * registers, which gave it back already), then on to the group's next block. */
void wsn__ws_loop_end(struct ws *w, struct loop_ctx *c, struct ptx_loop *lp)
{
	struct ptx_kernel *k = w->g.k;

	w->g.zero = NULL;
	if (!w->g.kp->cache_rows)
		wsn__ws_release_stage(w);
	const char *p = ptx_tmp(k, PTX_PRED);
	ptx_mov(k, PTX_U64, c->b, c->nb);
	ptx_ins(k, "add.u32 %s, %s, %d", c->it, c->it, w->g.bdimy);
	ptx_ins(k, "setp.lt.u64 %s, %s, %s", p, c->b, c->nblocks);
	ptx_loop_end(k, lp, p, 0);
}

/* The start of an output row j of a block: a comment, and past its end (w->pv[j]: the block's row j
 * exists) a branch to the returned label, which the caller places after the row (NULL: none). */
const char *wsn__ws_row_out_begin(struct ws *w, int j, const char *what)
{
	struct ptx_kernel *k = w->g.k;
	const char *skip = NULL;

	ptx_comment(k, "%s of row %d", what, j);
	if (w->pv[j]) {
		skip = ptx_label_new(k, "row_skip");
		ptx_guard(k, w->pv[j], 1);
		ptx_bra(k, skip);
	}
	return skip;
}

/* Row j's global address (row clamped) + this thread's offset. */
void wsn__ws_out_row(struct ws *w, struct rk_tens *t, int j, const char *base, const char *ld, const char *txoff)
{
	wsn__rk_row_addr(&w->g, t->g, base, w->rowc[j], ld, txoff);
}
