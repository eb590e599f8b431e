/* SPDX-License-Identifier: MIT */
/* codegen/ptx/ws.c: warp-specialised persistent LayerNorm/RMSNorm kernels: a producer warp bulk-copies rows into an mbarrier ring that row groups consume. */
#include "rowkernel.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * One CTA per SM. Threads 0..127 are the producer warpgroup: it gives its registers back
 * (setmaxnreg.dec) and one elected lane of warp 0 walks the CTA's row blocks (block b holds rows
 * b*unroll .. b*unroll + unroll - 1; the CTA takes blocks ctaid, ctaid + nctaid, ...). For each
 * block it waits until stage slot s is empty, then copies each row of dy and x (backward) or x
 * (forward) with one cp.async.bulk of the row's 16-byte aligned span, announcing the bytes on the
 * full barrier of slot s (expect_tx) before each copy and arriving once after the last. Where the
 * plan says so (stats_ring, backward), it also copies each row's mean and rstd into the slot after
 * the rows (cp.async of 4 bytes at the statistics' stride), then cp.async.mbarrier.arrive on the
 * same barrier before its own arrival: that raises the phase's pending count until the copies
 * land, so the phase completes with the statistics in place. Otherwise each row group loads its
 * next block's statistics itself while it computes the current one.
 *
 * Threads 128.. are bdimy row groups of bdimx threads (setmaxnreg.inc). Group ty takes the CTA's
 * blocks ty, ty + bdimy, ... (ping-pong: while one group reduces, the others stream), waits on
 * the full barrier, computes the unroll rows of the stage with one grouped reduction per pass,
 * and each of its warps arrives on the empty barrier once it no longer reads the stage: right
 * after copying it into registers (cache_rows) or after the last pass. Slot and phase of block
 * iteration i: s = i % stages, phase = (i / stages) & 1; the producer waits on the empty barrier
 * with the opposite parity, so a fresh ring starts empty.
 *
 * A row whose start is not 16-byte aligned lands in its stage buffer at offset (address & 15):
 * the row groups then read elements one by one (the element path, chosen per launch like the
 * multi-wave kernels do). The span copied is rounded out to whole 16-byte chunks: the extra bytes
 * belong to the same aligned 16-byte chunks as row elements, so they never cross a page, and they
 * are never used. A block past the last row repeats the last row; its results are not stored and
 * do not enter dweight/dbias.
 */

#define MAXU 8                    /* rows per stage the generator unrolls (ws_plan.c WS_MAX_UNROLL) */
#define WATCHDOG_NS 10000000000ull /* a wait this long traps: a broken ring never hangs */

struct ws {
	struct rk_gen g;
	struct wsn__ws_layout layout;
	int stage_rows, stages;        /* rows per stage (kp->unroll), stages of the ring */
	int nt;                        /* tensors per row (bwd: dy then x) */
	unsigned row_bytes, stage_bytes;
	const char *bars, *stage0;     /* .u32 shared addresses of full[0] and of stage 0 */
	const char *rows;              /* .u64 */
	const char *cbase[2], *cld[2]; /* circular tensors: .u64 base address, row stride in bytes */
	const char *obase, *old;       /* backward: dx's .u64 base address and row stride in bytes */
	/* a stage's rows take its first stage_rows_bytes bytes; in the backward the rows' statistics may
	 * follow: ns tensors (mean and rstd, or rstd), stage_rows f32 each, read from sbase[s] + row * sld */
	int ns;
	unsigned stage_rows_bytes;
	const char *sbase[2], *sld;
	const char *stat[2][MAXU];     /* .f32: the current block's statistics (ns tensors x stage_rows rows) */
	/* per block of a row group */
	const char *row0, *rowc[MAXU], *pv[MAXU];
	const char *srow[MAXU][2];     /* .u32: this thread's first vector of row j, tensor t in the stage */
	struct rk_tens cache[MAXU][2]; /* cache_rows: the stage's vectors in registers */
	const char *slot;              /* .u32 stage slot of the current block */
	const char *lane0;             /* .pred: lane 0 of its warp */
	int cluster_ctas;              /* CTAs sharing a row (kp->cluster; 1: none) */
};

/* ---------------------------------------------------------------- producer */

/* The CTA's place among those that stride over the row blocks, and their number: the CTA's, or with
 * a row split over a cluster the cluster's (its CTAs take the same blocks, each its own columns). */
static void stride_ids(struct ws *w, const char *idx, const char *count)
{
	ptx_sreg(w->g.k, idx, w->cluster_ctas > 1 ? "%clusterid.x" : "%ctaid.x");
	ptx_sreg(w->g.k, count, w->cluster_ctas > 1 ? "%nclusterid.x" : "%nctaid.x");
}

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
	long long HE = w->g.H * w->g.E;
	struct ptx_loop lp;

	ptx_comment(k, "---- producer: one lane copies every block of this CTA into the ring ----");
	ptx_ins(k, "add.u64 %s, %s, %d", nb, w->rows, w->stage_rows - 1);
	ptx_ins(k, "div.u64 %s, %s, %d", nb, nb, w->stage_rows);
	ptx_ins(k, "sub.u64 %s, %s, 1", rmax, w->rows);
	stride_ids(w, t32, n32);
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

/* ---------------------------------------------------------------- row-group side */

/* Vector v of row j, tensor t, from the stage into r (partial slices zeroed past the row's end). */
static void stage_vec(struct ws *w, int j, int t, int v, const char *const r[4])
{
	struct rk_gen *g = &w->g;
	struct ptx_kernel *k = g->k;
	long long off = (long long)v * g->bdimx * 16;
	const char *sa = w->srow[j][t];

	if (g->vecpath) {
		if (g->jk[v] == RK_J_ALL) {
			ptx_ld_shared_v4(k, r, sa, off);
			return;
		}
		for (int q = 0; q < 4; q++)
			ptx_mov_imm(k, PTX_B32, r[q], 0);
		ptx_guard(k, g->pf[v], 0);
		ptx_ld_shared_v4(k, r, sa, off);
		if (!g->has_tail[v])
			return;
		/* the tail vector: load it whole, then clear the elements past the row's end */
		ptx_guard(k, g->pt[v], 0);
		ptx_ld_shared_v4(k, r, sa, off);
		for (int q = 0; q < 4; q++) {
			int e0 = g->E == 4 ? q : 2 * q;
			if (e0 >= g->tail) {
				ptx_guard(k, g->pt[v], 0);
				ptx_mov_imm(k, PTX_B32, r[q], 0);
			} else if (g->E != 4 && e0 + 1 == g->tail) {
				ptx_guard(k, g->pt[v], 0);
				ptx_ins(k, "and.b32 %s, %s, 65535", r[q], r[q]);
			}
		}
		return;
	}
	/* element path: the row sits at an offset that is not a multiple of 16 */
	if (g->E == 4) {
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
static void row_vec(struct ws *w, int j, int t, int v, const char *out[4])
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
static void release_stage(struct ws *w)
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
static void block_begin(struct ws *w, const char *b, const char *it, const char *rmax)
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
	ptx_ins(k, "shl.b32 %s, %s, 4", txs, g->tx);
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
				for (int v = 0; v < g->nv; v++)
					stage_vec(w, j, t, v, w->cache[j][t].r[v]);
		release_stage(w);
	}
}

/* Stats of row j of block nb into nm (mean, LayerNorm) and nr (rstd), row clamped to the last. */
static void load_stats(struct ws *w, const char *nb, const char *rmax, const char *meanp, const char *rstdp,
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
static void cache_names(struct ws *w)
{
	for (int j = 0; j < w->stage_rows; j++) {
		for (int t = 0; t < w->nt; t++) {
			struct rk_tens *c = &w->cache[j][t];
			char tag[16];
			snprintf(tag, sizeof(tag), "c%d%c", j, t == w->nt - 1 ? 'x' : 'd');
			memset(c, 0, sizeof(*c));
			c->store = WSN_STORE_REG;
			for (int v = 0; v < w->g.nv; v++)
				for (int q = 0; q < 4; q++)
					c->r[v][q] = ptx_reg(w->g.k, PTX_B32, "%s%d_%d", tag, v, q);
		}
	}
}

/* Parameters (weight, bias) once per CTA: registers, or each thread's own vectors in shared memory. */
static void load_params(struct ws *w, struct rk_tens *pt, unsigned sm_off, const char *gp, const char *txoff)
{
	struct rk_gen *g = &w->g;
	struct ptx_kernel *k = g->k;

	pt->g = ptx_reg(k, PTX_U64, "%sa", pt->tag);
	ptx_ins(k, "add.u64 %s, %s, %s", pt->g, gp, txoff);
	if (pt->store == WSN_STORE_REG) {
		ptx_comment(k, "%s loaded once per CTA, kept in registers", pt->tag);
		wsn__rk_reg_names(g, pt);
		for (int v = 0; v < g->nv; v++)
			wsn__rk_load_vec(g, pt, v, pt->r[v]);
		return;
	}
	ptx_comment(k, "%s loaded once per CTA into shared memory (each thread its own vectors)", pt->tag);
	pt->s = ptx_reg(k, PTX_U32, "%s_s", pt->tag);
	ptx_ins(k, "mad.lo.u32 %s, %s, 16, %s", pt->s, g->tx, g->smem);
	ptx_ins(k, "add.u32 %s, %s, %u", pt->s, pt->s, sm_off);
	for (int v = 0; v < g->nv; v++) {
		const char *t[4];
		for (int q = 0; q < 4; q++)
			t[q] = ptx_tmp(k, PTX_B32);
		wsn__rk_load_vec(g, pt, v, t);
		ptx_st_shared_v4(k, pt->s, (long long)v * g->bdimx * 16, t);
	}
}

/* Parameter vector v (weight or bias), unpacked; REG copies read through the opaque zero z. */
static void param_vec(struct ws *w, struct rk_tens *pt, int v, const char *z, const char *f[8])
{
	const char *pv[4], *save = w->g.zp;

	w->g.zp = z;
	wsn__rk_get_vec(&w->g, pt, v, pv);
	w->g.zp = save;
	wsn__rk_unpack(&w->g, pv, f);
}

/* Kernel-wide registers every path uses. */
struct kargs {
	const char *param[WSN_ABI_BWD_COUNT]; /* the parameters' registers by ABI slot (struct rk_abi) */
	const char *ld_out; /* dx or y row stride in bytes */
	const char *sld;    /* backward: stats stride in bytes */
	const char *eps;
	const char *txoff;
	const char *p_mean, *p_rstd; /* forward: write the statistics (pointer given, first thread of the row) */
};

/* The row group's block loop. */
struct loop_ctx {
	const char *b, *it, *bstride, *nblocks, *rmax, *nb;
};

/* Registers of the loop: group ty takes iterations ty, ty + bdimy, ... = blocks ctaid + i * nctaid. */
static void loop_setup(struct ws *w, struct loop_ctx *c)
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
	stride_ids(w, t, nc);
	ptx_mov(k, PTX_U32, c->it, w->g.ty);
	ptx_ins(k, "mad.lo.u32 %s, %s, %s, %s", t, w->g.ty, nc, t);
	ptx_ins(k, "cvt.u64.u32 %s, %s", c->b, t);
	ptx_ins(k, "mul.wide.u32 %s, %s, %d", c->bstride, nc, w->g.bdimy);
}

static void loop_head(struct ws *w, struct loop_ctx *c, struct ptx_loop *lp)
{
	struct ptx_kernel *k = w->g.k;
	const char *p = ptx_tmp(k, PTX_PRED);

	ptx_ins(k, "setp.ge.u64 %s, %s, %s", p, c->b, c->nblocks);
	ptx_loop_begin(k, lp, w->g.vecpath ? "vec_block" : "elem_block");
	ptx_loop_break_if(k, lp, p, 0);
	ptx_ins(k, "add.u64 %s, %s, %s", c->nb, c->b, c->bstride);
}

static void loop_end(struct ws *w, struct loop_ctx *c, struct ptx_loop *lp)
{
	struct ptx_kernel *k = w->g.k;
	const char *p = ptx_tmp(k, PTX_PRED);

	ptx_mov(k, PTX_U64, c->b, c->nb);
	ptx_ins(k, "add.u32 %s, %s, %d", c->it, c->it, w->g.bdimy);
	ptx_ins(k, "setp.lt.u64 %s, %s, %s", p, c->b, c->nblocks);
	ptx_loop_end(k, lp, p, 0);
}

/* Row j's global address (row clamped) + this thread's offset. */
/* The start of an output row j of a block: a comment, and past its end (w->pv[j]: the block's row j
 * exists) a branch to the returned label, which the caller places after the row (NULL: none). */
static const char *row_out_begin(struct ws *w, int j, const char *what)
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

static void out_row(struct ws *w, struct rk_tens *t, int j, const char *base, const char *ld, const char *txoff)
{
	wsn__rk_row_addr(&w->g, t->g, base, w->rowc[j], ld, txoff);
}

/* ---------------------------------------------------------------- backward */

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
	ptx_ins(k, "mad.lo.u32 %s, %s, 2, %s", idx, g->ty, idx);
	ptx_ins(k, "mad.lo.u32 %s, %s, 8, %s", bar, idx, w->bars);
	ptx_ins(k, "add.u32 %s, %s, %u", bar, bar, w->layout.xbar - w->layout.bars);
	ptx_ins(k, "mad.lo.u32 %s, %s, %u, %s", buf, idx, cluster_ctas * red_slot, g->smem);
	ptx_ins(k, "add.u32 %s, %s, %u", buf, buf, w->layout.xch);
	ptx_ins(k, "setp.ne.u32 %s, %s, 0", p, g->tx);
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

static void bwd_path(struct ws *w, const struct kargs *ka, struct rk_acc *dw, struct rk_acc *db)
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
		load_params(w, &wt, w->layout.w, ka->param[WSN_ABI_BWD_weight], ka->txoff);
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
	loop_setup(w, &c);
	if (!w->ns) {
		ptx_comment(k, "statistics of the first block; each block then loads the next block's");
		load_stats(w, c.b, c.rmax, ka->param[WSN_ABI_BWD_mean], ka->param[WSN_ABI_BWD_rstd], ka->sld, g->ln ? nm : NULL, nr);
	}
	loop_head(w, &c, &lp);
	if (!w->ns) {
		for (int j = 0; j < stage_rows; j++) {
			if (g->ln)
				ptx_mov(k, PTX_F32, cm[j], nm[j]);
			ptx_mov(k, PTX_F32, cr[j], nr[j]);
		}
		load_stats(w, c.nb, c.rmax, ka->param[WSN_ABI_BWD_mean], ka->param[WSN_ABI_BWD_rstd], ka->sld, g->ln ? nm : NULL, nr);
	}
	block_begin(w, c.b, c.it, c.rmax);
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
	for (int v = 0; v < g->nv; v++) {
		const char *wf[8] = { 0 }, *fw[8], *fb[8];
		if (kp->has_weight)
			param_vec(w, &wt, v, g->zrow[0], wf);
		if (has_dw)
			wsn__rk_acc_get(g, dw, v, fw);
		if (has_db)
			wsn__rk_acc_get(g, db, v, fb);
		for (int j = 0; j < stage_rows; j++) {
			const char *dv[4], *xv[4], *df[8], *xf[8];
			row_vec(w, j, 0, v, dv);
			row_vec(w, j, 1, v, xv);
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
	g->zp = g->zrow[1];
	for (int j = 0; j < stage_rows; j++) {
		const char *skip = row_out_begin(w, j, "dx");
		out_row(w, &dx, j, ka->param[WSN_ABI_BWD_dx], ka->ld_out, ka->txoff);
		for (int v = 0; v < g->nv; v++) {
			const char *dv[4], *xv[4], *df[8], *xf[8], *wf[8] = { 0 }, *o[8], *po[4];
			row_vec(w, j, 0, v, dv);
			row_vec(w, j, 1, v, xv);
			wsn__rk_unpack(g, dv, df);
			wsn__rk_unpack(g, xv, xf);
			if (kp->has_weight)
				param_vec(w, &wt, v, g->zrow[1], wf);
			for (int e = 0; e < g->vec; e++)
				o[e] = wsn__rk_dx_elem(g, xf[e], df[e], wf[e], g->ln ? cm[j] : NULL, cr[j],
						       mg[j], nmgx[j]);
			wsn__rk_pack(g, o, po);
			wsn__rk_store_vec(g, &dx, v, po);
		}
		if (skip)
			ptx_label(k, skip);
	}
	g->zp = NULL;
	if (!kp->cache_rows)
		release_stage(w);
	loop_end(w, &c, &lp);
}

/* ---------------------------------------------------------------- forward */

static void fwd_path(struct ws *w, const struct kargs *ka)
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
		load_params(w, &wt, w->layout.w, ka->param[WSN_ABI_FWD_weight], ka->txoff);
	if (kp->has_bias)
		load_params(w, &bt, w->layout.b, ka->param[WSN_ABI_FWD_bias], ka->txoff);
	y.g = ptx_reg(k, PTX_U64, "ya");
	const char *inv[2] = { wsn__rk_param_zero(g, w->rows), wsn__rk_param_zero(g, w->cld[0]) };
	loop_setup(w, &c);
	loop_head(w, &c, &lp);
	block_begin(w, c.b, c.it, c.rmax);
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
	for (int v = 0; v < g->nv; v++) {
		for (int j = 0; j < stage_rows; j++) {
			const char *pv[4], *f[8];
			row_vec(w, j, 0, v, pv);
			wsn__rk_unpack(g, pv, f);
			for (int e = 0; e < g->vec; e++) {
				const char *a = acc[j][e % nch];
				if (g->ln)
					ptx_add_f32(k, a, a, f[e]);
				else
					ptx_fma_f32(k, a, f[e], f[e], a);
			}
		}
	}
	for (int j = 0; j < stage_rows; j++) {
		for (int h = 1; h < nch; h++)
			ptx_add_f32(k, acc[j][0], acc[j][0], acc[j][h]);
		ptx_mov(k, PTX_F32, s1[j], acc[j][0]);
	}
	/* LayerNorm: each row's mean from its sum, then M2 about it from the stage, a second plain sum
	 * (an exact two-pass: no merge of per-thread statistics, so no division on the chain) */
	wsn__rk_reduce_row(g, s1, stage_rows);
	if (g->ln) {
		g->zp = g->zrow[0];
		for (int j = 0; j < stage_rows; j++) {
			ptx_mul_f32(k, mean[j], s1[j], g->invH);
			for (int h = 0; h < nch; h++)
				ptx_mov_f32(k, acc[j][h], 0.0f);
		}
		for (int v = 0; v < g->nv; v++) {
			for (int j = 0; j < stage_rows; j++) {
				const char *pv[4], *f[8];
				row_vec(w, j, 0, v, pv);
				wsn__rk_unpack(g, pv, f);
				for (int e = 0; e < g->vec; e++) {
					const char *d = ptx_tmp(k, PTX_F32), *pe = wsn__rk_elem_pred(g, v, e);
					const char *a = acc[j][e % nch];
					ptx_sub_f32(k, d, f[e], mean[j]);
					if (pe)
						ptx_guard(k, pe, 0);
					ptx_fma_f32(k, a, d, d, a);
				}
			}
		}
		for (int j = 0; j < stage_rows; j++) {
			for (int h = 1; h < nch; h++)
				ptx_add_f32(k, acc[j][0], acc[j][0], acc[j][h]);
			ptx_mov(k, PTX_F32, var[j], acc[j][0]);
		}
		g->zp = NULL;
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
	g->zp = g->zrow[1];
	for (int j = 0; j < stage_rows; j++) {
		const char *skip = row_out_begin(w, j, "y");
		out_row(w, &y, j, ka->param[WSN_ABI_FWD_y], ka->ld_out, ka->txoff);
		for (int v = 0; v < g->nv; v++) {
			const char *pv[4], *f[8], *o[8], *po[4], *wf[8] = { 0 }, *bf[8] = { 0 };
			row_vec(w, j, 0, v, pv);
			wsn__rk_unpack(g, pv, f);
			if (kp->has_weight)
				param_vec(w, &wt, v, g->zrow[1], wf);
			if (kp->has_bias)
				param_vec(w, &bt, v, g->zrow[1], bf);
			for (int e = 0; e < g->vec; e++)
				o[e] = wsn__rk_norm_affine(g, f[e], g->ln ? mean[j] : NULL, rstd[j], wf[e], bf[e]);
			wsn__rk_pack(g, o, po);
			wsn__rk_store_vec(g, &y, v, po);
		}
		if (skip)
			ptx_label(k, skip);
	}
	g->zp = NULL;
	if (!kp->cache_rows)
		release_stage(w);
	loop_end(w, &c, &lp);
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
		/* the first block's dy, x and dx lines (measured: LayerNorm bwd 1K +1.7 %, 2K +0.8 %, level
		 * elsewhere; the same in the multi-wave forward lost 0.3-0.9 %: bench/NOTES.md v12) */
		const char *i32 = ptx_tmp(k, PTX_U32), *n32 = ptx_tmp(k, PTX_U32), *r = ptx_tmp(k, PTX_U64);
		const char *base[3] = { w->cbase[0], w->cbase[1], w->obase }, *ld[3] = { w->cld[0], w->cld[1], w->old };
		stride_ids(w, i32, n32);
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
		ptx_ins(k, "mul.wide.u32 %s, %s, %lld", cb, g->rank, g->H * g->E);
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
	ptx_ins(k, "mul.wide.u32 %s, %s, 16", ka.txoff, g->tx);
	for (int a = 0; a < 2; a++) /* registers or shared memory: the ws plans have no other */
		if (accs[a])
			wsn__rk_acc_home(g, accs[a], a ? w->layout.db : w->layout.dw);
	const char *pal = wsn__rk_bwd_aligned_pred(g, ka.param, dyld, xld, dxld);
	const char *elem = ptx_label_new(k, "elem_path"), *join = ptx_label_new(k, "rows_done");
	ptx_guard(k, pal, 1);
	ptx_bra(k, elem);
	ptx_comment(k, "---- 16-byte vector path ----");
	g->vecpath = 1;
	bwd_path(w, &ka, &dw, &db);
	ptx_bra(k, join);
	ptx_label(k, elem);
	ptx_comment(k, "---- element path: a row or the weight is not 16-byte aligned ----");
	g->vecpath = 0;
	bwd_path(w, &ka, &dw, &db);
	ptx_label(k, join);
	g->vecpath = 1;
	wsn__rk_griddep_end(g);
	if (accs[0] || accs[1]) {
		/* the fold buffer reuses the ring, last written by the bulk copies */
		ptx_fence_proxy_async(k);
		wsn__rk_bwd_epilogue(g, accs, ka.param[WSN_ABI_BWD_ws]);
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
	ptx_ins(k, "mul.wide.u32 %s, %s, 16", ka.txoff, g->tx);
	{
		const char *p_t0 = ptx_reg(k, PTX_PRED, "p_tx0");
		ka.p_mean = ptx_reg(k, PTX_PRED, "p_mean_out");
		ka.p_rstd = ptx_reg(k, PTX_PRED, "p_rstd_out");
		ptx_ins(k, "setp.eq.u32 %s, %s, 0", p_t0, g->tx);
		ptx_ins(k, "setp.ne.and.u64 %s, %s, 0, %s", ka.p_mean, ka.param[WSN_ABI_FWD_mean], p_t0);
		ptx_ins(k, "setp.ne.and.u64 %s, %s, 0, %s", ka.p_rstd, ka.param[WSN_ABI_FWD_rstd], p_t0);
	}
	const char *pal = wsn__rk_fwd_aligned_pred(g, ka.param, xld, yld);
	const char *elem = ptx_label_new(k, "elem_path"), *join = ptx_label_new(k, "rows_done");
	ptx_guard(k, pal, 1);
	ptx_bra(k, elem);
	ptx_comment(k, "---- 16-byte vector path ----");
	g->vecpath = 1;
	fwd_path(w, &ka);
	ptx_bra(k, join);
	ptx_label(k, elem);
	ptx_comment(k, "---- element path: a row or parameter is not 16-byte aligned ----");
	g->vecpath = 0;
	fwd_path(w, &ka);
	ptx_label(k, join);
	ptx_exit(k);
	return 0;
}

/* The plan's constants at the top of the module, and the reasoning one clause per line. */
static void plan_comments(struct ptx_module *m, const struct wsn__kernel_plan *kp, const struct wsn__ws_layout *l)
{
	static const char *const st[] = { "registers", "shared", "global" };
	const char *w = kp->why;

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
	while (*w) {
		const char *e = strstr(w, "; ");
		int n = e ? (int)(e - w) : (int)strlen(w);
		ptx_module_comment(m, "  %.*s", n, w);
		w += n + (e ? 2 : 0);
	}
	ptx_buf_printf(&m->text, "\n");
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
	g->E = (int)wsn_dtype_size(kp->dtype);
	g->vec = 16 / g->E;
	g->nv = (int)kp->nvec;
	g->bdimx = (int)kp->bdimx;
	g->bdimy = (int)kp->bdimy;
	g->nw = g->bdimx / 32;
	g->H = wsn__kernel_cols(kp);
	g->NV = (g->H + g->vec - 1) / g->vec;
	g->nfull = g->H / g->vec;
	g->tail = g->H % g->vec;
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
	if ((long long)g->nv * g->bdimx < g->NV || w->row_bytes < (unsigned)(g->H * g->E) + 16 ||
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
		cache_names(w);
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
