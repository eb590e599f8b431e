/* SPDX-License-Identifier: MIT */
/* codegen/ptx/rowkernel.h: what the multi-wave and warp-specialised generators share to emit row kernels. */
#ifndef WSN_ROWKERNEL_H
#define WSN_ROWKERNEL_H

#ifndef WSN_LAYER_CODEGEN
#error "codegen/ptx/rowkernel.h is private to codegen (docs/DESIGN.md, Layers)"
#endif

#include "abi.h"
#include "codegen.h"
#include "emitter.h"

/*
 * A row group is bdimx threads (tid_x) working on one row; thread tid_x holds vectors tid_x,
 * tid_x + bdimx, tid_x + 2 bdimx, ... (slices j = 0 .. vectors - 1) of 16 bytes each. Everything
 * below emits code for one thread of such a group: element access with partial vectors at the
 * row's end, f32
 * (un)packing, sums over the group (warp shuffles, then the warps through shared memory on the
 * group's named barrier 1 + ty), the dweight/dbias epilogue and the deterministic finish kernel.
 */

#define RK_MAXV 64 /* vectors per thread the generator unrolls (plan_multiwave.c MAX_NVEC) */
#define RK_SMEM_SYM "wsn_smem"

/* Which threads hold a full vector in slice j (vectors j*bdimx .. j*bdimx + bdimx - 1). */
enum rk_jkind { RK_J_ALL, RK_J_PART };

/* A row-sized tensor or a parameter: where it lives and how a thread reaches its vectors. */
struct rk_tens {
	const char *tag;
	int store;               /* enum wsn__store */
	enum ptx_cache cache;
	const char *g;           /* .u64: global address of the thread's first element in the row */
	const char *s;           /* .u32: shared address of the thread's first vector (SMEM) */
	const char *r[RK_MAXV][4]; /* REG: the packed registers of vector j */
};

struct rk_gen {
	const struct wsn__kernel_plan *kp;
	struct ptx_kernel *k;
	int bwd, ln;
	int elem_bytes;          /* bytes of one element of the plan's dtype */
	int vec, vectors, bdimx, bdimy, warps; /* elements per 16-byte vector, vectors per thread, threads, warps */
	long long cols;          /* the row's columns this CTA covers (the hidden size, or its share) */
	long long row_vectors;   /* 16-byte vectors in those columns, the last one maybe partial */
	long long nfull, tail;   /* whole vectors, and elements of the partial one */
	int vecpath;             /* 1: 16-byte accesses; 0: element accesses (unaligned rows) */
	int jbase;               /* the slice the row tensors' and accumulators' addresses point at (0 but
				  * in the slices after a pass's rounds, wsn__rk_pass) */
	enum rk_jkind slice_kind[RK_MAXV];
	int has_tail[RK_MAXV];
	/* RK_J_PART slices: the full vector is in the row / the tail vector is / element e < tail */
	const char *p_full[RK_MAXV], *p_tail[RK_MAXV], *p_tail_elem[RK_MAXV];
	const char *tid_x, *tid_y, *smem; /* thread in its row group, row group in the CTA */
	const char *red_w, *red_r, *red_par, *p_lane0, *bar_id;
	unsigned sm_red, sm_w, sm_dw, sm_db, sm_xg;
	/* Slots of vectors * bdimx * vec floats at sm_xg the dweight/dbias fold may use: with one per row group
	 * and sum, every group stores its sums at once and all threads add them (two barriers); else (0 or
	 * too few) the groups fold one after another through one slot (a barrier per group and sum). */
	unsigned xg_slots;
	/* Set by the warp-specialised generator, zero for multi-wave kernels: the %tid.x of the first
	 * row-group thread, the bytes each warp writes per reduction buffer (0: 16, four floats), and
	 * the named barrier (id, thread count) that joins every row group (0: bar.sync 0, the CTA). */
	unsigned tid_base, red_slot;
	int all_bar;
	unsigned all_bar_count;
	/* A row split over a cluster (ws backward, kp->cluster > 1): cols is this CTA's share of the row,
	 * rank (.u32) the CTA's %cluster_ctarank; partial sums go to row %clusterid of the workspace at
	 * column rank * cols. NULL rank: a CTA per row. */
	const char *rank;
	/* The kernel emits the dependent-launch wait itself, after a prologue without global accesses
	 * (the ws kernels' barrier set-up); 0: right after the parameters. */
	int griddep_later;
	/* Backward kernels: bit 0 of their flags parameter, set when the runtime found that this call
	 * shares no memory with the calls that may still run before it (runtime/overlap.c): the kernel
	 * then starts without the dependent-launch wait and waits before its partial sums instead
	 * (wsn__rk_griddep_start, wsn__rk_griddep_end). NULL: always wait at the start. */
	const char *p_early;
	const char *done, *wait_seq; /* with p_early: the stream's word and the number it must reach */
	const char *invH;
	const char *cnt, *rcnt; /* LayerNorm forward: elements this thread owns and 1 / that */
	/* Opaque zero of the current pass (NULL: none). Registers held across a row reduction are
	 * read through `xor reg, zero` so that ptxas can neither hoist their unpacking out of the row
	 * loop nor reuse pass-1 unpacked values after the reduction: either would keep every element
	 * as an f32 and double the registers a cached bf16/f16 row needs. */
	const char *zero;
	const char *zrow[3];
};

/* Accumulator (dweight or dbias) access for slice j: f32 registers, loaded when not in registers. */
struct rk_acc {
	const char *tag;
	int store;
	const char *s;   /* .u32 shared address of the thread's first column */
	const char *g;   /* .u64 global (workspace) address of the thread's first column */
	const char *r[RK_MAXV][8];
};

/* ---- the kernel ABI (abi.h) ---- */
/* The entry's parameters, declared and loaded in the order of abi.h; row strides scaled to bytes; then
 * the dependent-launch wait (wsn__rk_griddep) unless the kernel places it later itself. */
struct rk_abi {
	/* a register per parameter, indexed by the kernel's ABI slot (WSN_ABI_FWD_x, WSN_ABI_BWD_dy,
	 * ...): pointers, rows, row strides scaled to bytes, eps; NULL for flags, done and wait_seq */
	const char *reg[WSN_ABI_BWD_COUNT];
};
void wsn__rk_abi_params(struct rk_gen *g, int bwd, struct rk_abi *a);
/* The PTX type of an ABI parameter type (.u32, .f32, else .u64). */
enum ptx_type wsn__rk_abi_ptx_type(enum wsn__abi_type t);
/*
 * Programmatic dependent launch: wait for the grids this one depends on (the previous kernel on the
 * stream, when the launch allows overlap) before any global memory access, then let the next grid
 * start launching: its CTAs take SMs as this grid's last CTAs leave and wait at this point in turn.
 * wsn__rk_abi_params emits it last unless g->griddep_later.
 */
void wsn__rk_griddep(struct ptx_kernel *k);
/*
 * The same for a backward kernel: the wait skipped when g->p_early, the launch of the next grid
 * (its finish kernel) not. A kernel that may skip it calls wsn__rk_griddep_end before its first
 * write to the workspace and before it exits, so that its completion still implies the previous
 * grids': its finish kernel then sums after every earlier call, and the next call's in turn.
 */
void wsn__rk_griddep_start(struct rk_gen *g);
void wsn__rk_griddep_end(struct rk_gen *g);
/*
 * Before that wait, thread tid == 0 prefetches into L2 the line at base[i] + row * ld[i] (ld in bytes)
 * of n tensors: their address translations and first lines are ready when the wait passes. A
 * prefetch reads no value, so it may precede the wait even for data the previous grid writes.
 */
void wsn__rk_prefetch_row(struct rk_gen *g, const char *tid, const char *row, const char *const base[],
			  const char *const ld[], int n);

/* ---- element access ---- */
/* Is element e of slice j valid for this thread: NULL (always) or a predicate. */
const char *wsn__rk_elem_pred(struct rk_gen *g, int j, int e);
/* Load vector j of global tensor t into r (partial vectors and the element path handled). */
void wsn__rk_load_vec(struct rk_gen *g, struct rk_tens *t, int j, const char *const r[4]);
/* Pack the vec f32 values f and store them as vector j of t's global row. */
void wsn__rk_store_vec(struct rk_gen *g, struct rk_tens *t, int j, const char *const f[8]);
/* The packed registers of vector j of t, loading them if t is not held in registers. */
void wsn__rk_get_vec(struct rk_gen *g, struct rk_tens *t, int j, const char *out[4]);
/* The vec f32 values of packed registers (f32 data is used as is). */
void wsn__rk_unpack(struct rk_gen *g, const char *const p[4], const char *f[8]);

/*
 * One pass over a row: body(g, j, ctx) for every slice j = 0 .. vectors - 1. When none of the tensors and
 * accumulators the pass touches is held in registers, the slices every thread holds whole run as a
 * loop over chunks of a few slices (the pass's own address registers stepped each time round, and
 * back after the rest) and only the rest is unrolled: unrolled, ptxas issues every load of the pass before the first use and spills
 * what the registers cannot hold (rows re-read from memory are the rows too wide for them). vecs:
 * the 16-byte vectors one slice moves between memory and registers, which sizes the chunk.
 */
struct rk_pass {
	struct rk_tens *t[6];
	int nt;
	struct rk_acc *a[2];
	int na;
	int vecs;
};
void wsn__rk_pass(struct rk_gen *g, const struct rk_pass *ps, void (*body)(struct rk_gen *g, int j, void *ctx),
		  void *ctx);

/* xhat of one element: (x - mean) * rstd (LayerNorm) or x * rstd (RMSNorm; mean unused). */
const char *wsn__rk_xhat(struct rk_gen *g, const char *x, const char *mean, const char *rstd);
/* The backward's g of one element: dy * w with a weight, else dy itself. */
const char *wsn__rk_dy_w(struct rk_gen *g, const char *dy, const char *w);

/* Vector j's f32 values f into accumulator chains acc[e % chains]: their sum (LayerNorm) or sum
 * of squares (RMSNorm). */
void wsn__rk_acc_sum(struct rk_gen *g, const char *const f[8], const char *const acc[], int chains);
/* The squares of f's distances from mean into acc[e % chains], elements past the row's end (vector
 * j) left out. */
void wsn__rk_acc_m2(struct rk_gen *g, int j, const char *const f[8], const char *mean, const char *const acc[],
		    int chains);

/* Forward output of one element: (x - mean) * rstd (LayerNorm) or x * rstd (RMSNorm), then times w
 * and plus b as the plan has them (w, b unused otherwise). Returns the f32 register. */
const char *wsn__rk_norm_affine(struct rk_gen *g, const char *x, const char *mean, const char *rstd, const char *w,
				const char *b);

/* Backward dx of one element: rstd * (g - mg - xhat * sum_gxhat / H) with g = dy * w (dy without a
 * weight), xhat = (x - mean) * rstd (LayerNorm; x * rstd and no mg for RMSNorm), nmgx = -sum_gxhat / H. */
const char *wsn__rk_dx_elem(struct rk_gen *g, const char *x, const char *dy, const char *w, const char *mean,
			    const char *rstd, const char *mg, const char *nmgx);

/* ---- reductions over a row group (rowkernel_reduce.c) ---- */
/* Bytes each warp writes per reduction buffer: g->red_slot, or 16 (four floats) when that is 0. */
unsigned wsn__rk_red_slot(const struct rk_gen *g);
/* Sum n f32 values over the bdimx threads of a row group; every thread gets the same totals.
 * n <= red_slot / 4 (4 with the default slot). */
void wsn__rk_reduce_row(struct rk_gen *g, const char *const v[], int n);
/* Merge every thread's (count, mean, M2) over the row group for nsets independent rows in one
 * pass (bit-identical on every thread); nsets <= red_slot / 16. */
void wsn__rk_reduce_welford(struct rk_gen *g, int nsets, const char *const n[], const char *const m[],
			    const char *const m2[]);

/* (n, mean, M2) of a and b -> a (Chan, Golub and LeVeque's pairwise update; n == 0 sides are empty). */
void wsn__rk_chan_combine(struct rk_gen *g, const char *n, const char *m, const char *m2, const char *nb,
			  const char *mb, const char *m2b);

/* ---- setup and addresses ---- */
/* tx, ty, the shared window, 1/hidden, the partial-slice predicates and the reduction slots. */
void wsn__rk_setup_common(struct rk_gen *g);
/* LayerNorm forward: g->cnt (row elements this thread owns) and g->rcnt = 1 / cnt (0 when none). */
void wsn__rk_own_count(struct rk_gen *g);
/* dst (.f32) = the elements of slice j this thread owns: vec, the row's tail or none. */
void wsn__rk_slice_count(struct rk_gen *g, int j, const char *dst);
/* Per-row opaque zeros (g->zrow) from the row index and two loop-invariant zeros. */
void wsn__rk_opaque_zeros(struct rk_gen *g, const char *row, const char *const inv[2]);
/* A loop-invariant opaque zero from a 64-bit parameter below 2^63. */
const char *wsn__rk_param_zero(struct rk_gen *g, const char *param64);
/* dst (u64) = base + row * ld_bytes + txoff. */
void wsn__rk_row_addr(struct rk_gen *g, const char *dst, const char *base, const char *row, const char *ld_bytes,
		      const char *txoff);
/* Names of the REG storage of a tensor ("<tag><j>_<q>"). */
void wsn__rk_reg_names(struct rk_gen *g, struct rk_tens *t);

/* ---- backward accumulators; the epilogue and the finish kernel are in rowkernel_finish.c ---- */
void wsn__rk_acc_get(struct rk_gen *g, struct rk_acc *a, int j, const char *f[8]);
void wsn__rk_acc_put(struct rk_gen *g, struct rk_acc *a, int j, const char *const f[8]);
/* Set every slice of accumulator a to zero (registers directly, other storage through acc_put). */
void wsn__rk_acc_zero(struct rk_gen *g, struct rk_acc *a);
/* An accumulator's home: a register per column of the thread (WSN_STORE_REG), or its columns in
 * shared memory at byte offset smem_off of g->smem (WSN_STORE_SMEM). 0 for another store, which is
 * the caller's to place. */
int wsn__rk_acc_home(struct rk_gen *g, struct rk_acc *a, unsigned smem_off);
/* A predicate "p_aligned": the forward's row tensors (x, y), their byte strides xld and yld and the
 * plan's weight and bias are all 16-byte aligned. param: the parameters' registers by ABI slot. */
const char *wsn__rk_fwd_aligned_pred(struct rk_gen *g, const char *const param[], const char *xld, const char *yld);
/* The same for the backward: dy, x, dx, their byte strides and the plan's weight. */
const char *wsn__rk_bwd_aligned_pred(struct rk_gen *g, const char *const param[], const char *dyld, const char *xld,
				     const char *dxld);

/*
 * The row loop twice: when pal (every row start 16-byte aligned) the 16-byte vector path, else the
 * element path (why names what may be unaligned); rows(ctx) emits each with g->vecpath set, and
 * both meet at a label named join.
 */
void wsn__rk_two_paths(struct rk_gen *g, const char *pal, const char *join, const char *why,
		       void (*rows)(struct rk_gen *g, void *ctx), void *ctx);
/* After the row loop: fold the row groups' register accumulators through shared memory at sm_xg in a
 * fixed order (group 0 + (group 1 + (... + group bdimy - 1))), then write the CTA's partial rows:
 * dweight at partials[ctaid][.], dbias at partials[nctaid + ctaid][.] (rows of hidden floats; with g->rank: cluster
 * ids and this CTA's columns). */
void wsn__rk_bwd_epilogue(struct rk_gen *g, struct rk_acc *accs[2], const char *partp);
/* The finish kernel kp->finish_entry: dweight/dbias = the sum of the nparts partial rows in a fixed
 * order, converted to the plan's dtype. Returns 0 or the module's error. */
int wsn__rk_gen_finish(struct ptx_module *m, const struct wsn__kernel_plan *kp);
/* Generate the PTX module of a multi-wave plan (multiwave.c): 0 or an error (an inconsistent plan). */
int wsn__multiwave_generate(const struct wsn__kernel_plan *kp, char **ptx);

#endif
