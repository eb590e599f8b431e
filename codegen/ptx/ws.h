/* SPDX-License-Identifier: MIT */
/* codegen/ptx/ws.h: what the warp-specialised generator's files share: its state, the row groups' machinery, the two row loops. */
#ifndef WSN_WS_H
#define WSN_WS_H

#ifndef WSN_LAYER_CODEGEN
#error "codegen/ptx/ws.h is private to codegen (docs/DESIGN.md, Layers)"
#endif

#include "rowkernel.h"

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

#define MAXU 8                    /* rows per stage the generator unrolls (plan_ws.c WS_MAX_UNROLL) */
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

/* ---- the row groups' shared machinery (ws_rowgroup.c) ---- */
/* The CTA's place among those that stride over the row blocks, and their number: the CTA's, or with
 * a row split over a cluster the cluster's (its CTAs take the same blocks, each its own columns). */
void wsn__ws_stride_ids(struct ws *w, const char *idx, const char *count);
/* The packed registers of vector v of row j, tensor t: cached registers (read through the pass's
 * opaque zero) or a fresh load from the stage. */
void wsn__ws_row_vec(struct ws *w, int j, int t, int v, const char *out[4]);
/* Every warp of the group arrives once on the empty barrier of the current slot. */
void wsn__ws_release_stage(struct ws *w);
/* Block-start bookkeeping for a row group: rows (clamped to the last one), validity predicates,
 * the slot's full barrier, and this thread's addresses in the stage. */
void wsn__ws_block_begin(struct ws *w, const char *b, const char *it, const char *rmax);
/* Stats of row j of block nb into nm (mean, LayerNorm) and nr (rstd), row clamped to the last. */
void wsn__ws_load_stats(struct ws *w, const char *nb, const char *rmax, const char *meanp, const char *rstdp,
			const char *sld, const char *nm[], const char *nr[]);
/* Registers of the cached stage (cache_rows). */
void wsn__ws_cache_names(struct ws *w);
/* Parameters (weight, bias) once per CTA: registers, or each thread's own vectors in shared memory. */
void wsn__ws_load_params(struct ws *w, struct rk_tens *pt, unsigned sm_off, const char *gp, const char *txoff);
/* Parameter vector v (weight or bias), unpacked; REG copies read through the opaque zero z. */
void wsn__ws_param_vec(struct ws *w, struct rk_tens *pt, int v, const char *z, const char *f[8]);
/* Registers of the loop: group ty takes iterations ty, ty + bdimy, ... = blocks ctaid + i * nctaid. */
void wsn__ws_loop_setup(struct ws *w, struct loop_ctx *c);
/* Top of the block loop: leave when the block is past the last, else the next block's number. */
void wsn__ws_loop_head(struct ws *w, struct loop_ctx *c, struct ptx_loop *lp);
/* Bottom of the block loop: the stage back to the producer (unless the rows were copied to
 * registers), then on to the group's next block. */
void wsn__ws_loop_end(struct ws *w, struct loop_ctx *c, struct ptx_loop *lp);
/* The start of an output row j of a block: a comment, and past its end (w->pv[j]: the block's row j
 * exists) a branch to the returned label, which the caller places after the row (NULL: none). */
const char *wsn__ws_row_out_begin(struct ws *w, int j, const char *what);
/* Row j's global address (row clamped) + this thread's offset. */
void wsn__ws_out_row(struct ws *w, struct rk_tens *t, int j, const char *base, const char *ld, const char *txoff);

/* ---- the backward's row loop (ws_backward.c) ---- */
/* The backward's block loop for one path (g->vecpath): dx of every row, dweight/dbias summed in the
 * accumulators dw and db. */
void wsn__ws_backward_rows(struct ws *w, const struct kargs *ka, struct rk_acc *dw, struct rk_acc *db);

/* ---- the forward's row loop (ws_forward.c) ---- */
/* The forward's block loop for one path (g->vecpath): each row's statistics, then y (and mean/rstd
 * where asked). */
void wsn__ws_forward_rows(struct ws *w, const struct kargs *ka);

#endif
