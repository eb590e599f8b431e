/* SPDX-License-Identifier: MIT */
/* codegen/plan.h: the kernel plan, the modelled GPUs, and the layout helpers planners and generators share. */
#ifndef WSN_CODEGEN_PLAN_H
#define WSN_CODEGEN_PLAN_H

#include "core/error.h"
#include "core/json.h"
#include "core/op.h"
#include "core/params.h"
#include "core/util.h"

/* Where a multi-wave kernel keeps a piece of data. */
enum wsn__store {
	WSN_STORE_REG = 0,    /* registers (bf16/f16 packed two to a register) */
	WSN_STORE_SMEM = 1,   /* dynamic shared memory */
	WSN_STORE_GLOBAL = 2, /* global memory: re-read at each use (rows, params) or the CTA's own
			       * workspace rows updated in place (accumulators) */
};

/* The name of a storage place (enum wsn__store) in plan explanations: "registers", "shared memory", "global". */
const char *wsn__store_name(int store);

/* What the planner knows about a GPU (read off the device, or modelled for `wsnorm emit`). */
struct wsn__gpu_props {
	int arch;               /* 90 (sm_90a), 100 (sm_100a) */
	int sms;
	int smem_per_block_optin; /* bytes */
	int smem_per_sm;        /* bytes */
	int regs_per_sm;        /* 65536 */
	int regs_per_block;     /* 65536 */
	int max_threads_per_sm; /* 2048 */
	int64_t l2_bytes;
	const char *model;      /* the GPU model the measured tables key rows by ("H200"); NULL: none known */
};
/* Modelled devices: H100 SXM (132 SMs) and a B200-like sm_100 (148 SMs), each with 228 KB of shared
 * memory per SM of which a CTA may opt in to 227 KB (232448 bytes). */
void wsn__gpu_props_h100(struct wsn__gpu_props *g);
void wsn__gpu_props_b200(struct wsn__gpu_props *g);
/* The model a GPU's name says it is, among those the measured tables know ("H100", "H200"); NULL:
 * none of them. */
const char *wsn__gpu_model(const char *name);

/* A kernel plan: everything codegen specialises on and everything the launcher needs (the kernel
 * ABI it launches with is described in codegen.h). */
struct wsn__kernel_plan {
	enum wsn_approach approach;
	enum wsn_op op;
	enum wsn_dtype dtype;
	int64_t hidden;
	int64_t rows;           /* rows the plan was made for (max) */
	int has_weight, has_bias;
	int arch;

	char entry[64];
	char finish_entry[64];  /* "" when the op has no finish kernel */
	unsigned block_threads;
	unsigned max_grid;      /* CTAs resident at once over all SMs (a persistent grid's size) */
	int block_grid;         /* not persistent: one CTA per row block, started as others finish
				 * (up to 2^31 - 1 CTAs, the kernel's grid-stride loop takes the rest) */
	unsigned ctas_per_sm;
	unsigned smem_bytes;    /* dynamic shared memory per CTA */
	unsigned finish_threads, finish_grid;
	size_t partials_bytes; /* f32 partial sums of the backward (max_grid rows of dweight, dbias) */

	/* multi-wave parameters */
	unsigned vec;           /* elements per 16-byte access (4 f32, 8 f16/bf16) */
	unsigned bdimx;         /* threads cooperating on one row */
	unsigned bdimy;         /* rows a CTA works on at once */
	unsigned per_thread;    /* row elements each thread holds */
	int row_in_smem;        /* row cached in shared memory instead of registers */
	unsigned est_regs;      /* planner's register estimate per thread */
	/* where each part lives (enum wsn__store): the row (x, and dy for backward), the affine
	 * parameters (weight/bias), and the backward dweight/dbias accumulators */
	int row_store, param_store, dw_store, db_store;
	unsigned nvec;          /* 16-byte vectors per thread per row (per_thread = nvec * vec) */

	/* warp-specialised parameters (ws approach); groups == bdimy, rows of a stage == unroll */
	unsigned stages, unroll, groups;
	unsigned producer_threads; /* the producer warpgroup ahead of the row groups (128; warp 0 copies) */
	unsigned row_bytes;     /* shared bytes of one row of one tensor in a stage: H * E rounded up to 16,
				 * plus 16 for a row that starts inside a 16-byte chunk */
	unsigned stage_bytes;   /* unroll x tensors (dy and x, or x) x row_bytes, then in the backward the
				 * rows' statistics (wsn__ws_stats_bytes) */
	int cache_rows;         /* row groups copy their stage into registers and release it before computing */
	int stats_ring;         /* ws backward: the producer copies the rows' statistics into each stage
				 * (else each row group loads them a block ahead) */
	unsigned regs_entry;    /* .maxnreg: registers per thread at entry (65536 / block_threads) */
	unsigned regs_producer, regs_compute; /* setmaxnreg.dec (producer) and .inc (row groups) */
	unsigned cluster;       /* ws backward: CTAs of a cluster that share each row (1, 2, 4, 8), each
				 * taking hidden / cluster columns and trading its row sums with the others
				 * through distributed shared memory; 0 or 1: a CTA per row */
	int ws_forced;          /* ws was asked for: it runs even where the heuristic expects it to be slow */
	int ws_good;            /* the heuristic's verdict (is_good_ws_heuristic) */
	int ws_shape;           /* ws: the plan took a measured shape (a row of the ws shape table, tables.c) */
	unsigned smem_limit;    /* the device's opt-in shared memory per CTA the plan was made against */

	char rule[384];         /* the rule that chose the approach ("auto: ...", "forced: ...",
				 * "autotune: ..."); also the first clause of why */
	char why[3072];         /* the planner's reasoning, one clause per decision */
};

/*
 * Choose a kernel plan for params on device g. Fills *kp. Returns 0, WSN_ESHAPE (hidden too large
 * for any kernel), WSN_ENOTSUP (approach not available for this op/dtype/arch).
 */
int wsn__plan_kernel(const struct wsn__gpu_props *g, const struct wsn__plan_params *p,
		     struct wsn__kernel_plan *kp);
/*
 * What every planner does first: clear *kp, check op, dtype, shape and target arch (opts->arch, else
 * the device's), and fill the plan's identity (approach, op, dtype, hidden, rows, weight/bias, arch,
 * vec). Returns 0, WSN_EINVAL, WSN_ESHAPE or WSN_ENOTSUP.
 */
int wsn__plan_begin(const struct wsn__gpu_props *g, const struct wsn__plan_params *p, enum wsn_approach approach,
		    struct wsn__kernel_plan *kp);

/* The backward's finish kernel: each of its CTAs sums WSN_FINISH_COLS columns of the partial rows,
 * each of its warps a slice of the parts (parts s, s + slices, ...). */
#define WSN_FINISH_COLS 32
/* Warps (slices) per finish CTA for hidden columns on g: 32 where the grid covers at most a quarter
 * of the SMs (each thread then loads a few parts instead of many), else 8 (see NOTES v5, "The
 * finish kernel's slices"). */
unsigned wsn__finish_slices(const struct wsn__gpu_props *g, int64_t hidden);
/* A backward plan's finish kernel (entry, threads, grid) and workspace for nparts partial rows of
 * kp->hidden floats per sum: both planners call it once the main entry is named. */
void wsn__finish_plan(const struct wsn__gpu_props *g, struct wsn__kernel_plan *kp, unsigned nparts);

/* Shared-memory layout of a warp-specialised kernel: byte offsets into the dynamic window. */
struct wsn__ws_layout {
	unsigned bars;          /* full[stages] then empty[stages] mbarriers, 8 bytes each */
	unsigned red, red_slot; /* reduction buffers: groups x 2 x warps x red_slot bytes */
	unsigned w, b;          /* weight / bias copies when param_store is shared memory */
	unsigned dw, db;        /* dweight / dbias sums when they live in shared memory */
	unsigned stages;        /* the circular buffer: stages x stage_bytes */
	unsigned xg;            /* the row groups' dweight/dbias fold after the loop (aliases the stages) */
	unsigned xg_slots;      /* slots of nvec x bdimx x vec floats the fold has there (at least 1) */
	unsigned xbar, xch;     /* cluster > 1: the row-sum exchange, per group 2 slots: an mbarrier each
				 * (8 bytes), and cluster x red_slot bytes each (one part per CTA rank) */
	unsigned total;         /* dynamic shared memory of the kernel */
};
/* Bytes of a stage of plan kp (op, unroll, stats_ring set) that hold its rows' statistics: with
 * stats_ring, unroll f32 means (LayerNorm) then unroll f32 rstd, rounded up to 16; else 0. */
unsigned wsn__ws_stats_bytes(const struct wsn__kernel_plan *kp);
/* The layout of plan kp (approach ws; bdimx, bdimy, nvec, stages, unroll, row_bytes, cluster and stores set). */
void wsn__ws_layout(const struct wsn__kernel_plan *kp, struct wsn__ws_layout *l);
/* The shape of a ws plan. */
void wsn__ws_shape_of(const struct wsn__kernel_plan *kp, struct wsn__ws_shape *s);
/* Columns of a row one CTA of plan kp covers: hidden / cluster. */
int64_t wsn__kernel_cols(const struct wsn__kernel_plan *kp);
/* CTAs to launch for rows (<= max_grid). */
unsigned wsn__kernel_grid(const struct wsn__kernel_plan *kp, int64_t rows);
/*
 * Whether the plan's backward kernel honours bit 0 of its flags parameter (start without the
 * dependent-launch wait, wait before the first workspace write and the exit instead): backward
 * kernels whose dweight/dbias sums stay in registers or shared memory until the loop is over, so
 * that nothing in the workspace is written before that wait. 0 for the forward.
 */
int wsn__kernel_early_start(const struct wsn__kernel_plan *kp);

#endif
