/* SPDX-License-Identifier: MIT */
/* codegen/ptx/emitter.h: the PTX emitter: modules, kernels, named registers, labels and typed instructions. */
#ifndef WSN_PTX_H
#define WSN_PTX_H

#ifndef WSN_LAYER_CODEGEN
#error "codegen/ptx/emitter.h is private to codegen (docs/DESIGN.md, Layers)"
#endif

#include "core/error.h"
#include "core/util.h"

#include <stdarg.h>
#include <stddef.h>

/*
 * Usage: ptx_module_init(&m, 90); k = ptx_kernel_begin(&m, "name"); ptx_param(k, PTX_U64, "x");
 * registers with ptx_reg(k, PTX_F32, "sum%d", i) (declared at the top of the entry when the kernel
 * ends); instructions through the helpers below or ptx_ins(k, "fmt", ...); ptx_kernel_end(k);
 * ptx_module_take(&m, &text). Errors (out of memory, a register redeclared with another type) are
 * sticky: the first one is reported by ptx_kernel_end / ptx_module_take.
 */

enum ptx_type {
	PTX_PRED, PTX_B16, PTX_B32, PTX_B64, PTX_U16, PTX_U32, PTX_U64, PTX_S32, PTX_S64, PTX_F32,
	PTX_TYPE_COUNT
};
/* ".b32", ".pred", ... */
const char *ptx_type_name(enum ptx_type t);

/* A growable text buffer. */
struct ptx_buf {
	char *s;
	size_t len, cap;
	int oom;
};
void ptx_buf_printf(struct ptx_buf *b, const char *fmt, ...) WSN_PRINTF(2, 3);
void ptx_buf_vprintf(struct ptx_buf *b, const char *fmt, va_list ap);
void ptx_buf_free(struct ptx_buf *b);

/* A PTX module for one target (.version/.target/.address_size written by init). */
struct ptx_module {
	struct ptx_buf text;
	int arch; /* 90 or 100 */
	int err;  /* first error (negative WSN_E*) */
};
/* Start a module for arch 90 (sm_90a, PTX 8.3) or 100 (sm_100a, PTX 8.6). Returns 0 or WSN_EINVAL. */
int ptx_module_init(struct ptx_module *m, int arch);
/* A "// ..." line at module level. */
void ptx_module_comment(struct ptx_module *m, const char *fmt, ...) WSN_PRINTF(2, 3);
/* text as comments, one indented line per "; "-separated clause, then a blank line. */
void ptx_module_clauses(struct ptx_module *m, const char *text);
/* Declare the dynamic shared memory window `.extern .shared .align A .b8 name[]`. */
void ptx_module_extern_smem(struct ptx_module *m, const char *name, int align);
/* Hand the text over (*out malloc'd, caller frees) and reset m. Returns 0 or the first error. */
int ptx_module_take(struct ptx_module *m, char **out);
void ptx_module_free(struct ptx_module *m);

struct ptx_kernel;

/* Begin a `.visible .entry name(...)`. NULL when out of memory (recorded in m->err). */
struct ptx_kernel *ptx_kernel_begin(struct ptx_module *m, const char *name);
/* Parameters, in ABI order. */
void ptx_param(struct ptx_kernel *k, enum ptx_type t, const char *name);
/* `.param .align 64 .b8 name[128]`: a CUtensorMap passed by value. */
void ptx_param_tensormap(struct ptx_kernel *k, const char *name);
/* Performance directives: .maxntid n,1,1 and .minnctapersm c (0 = leave out). */
void ptx_kernel_launch_bounds(struct ptx_kernel *k, unsigned maxntid, unsigned minctas);
/* .maxnreg n: the per-thread register count at entry (what setmaxnreg adjusts from). */
void ptx_kernel_maxnreg(struct ptx_kernel *k, unsigned n);
/* A kernel-scope static shared array `.shared .align A .b8 name[bytes]`. */
void ptx_kernel_shared(struct ptx_kernel *k, const char *name, unsigned bytes, int align);
/* Finish the kernel: write header, declarations and body into the module; frees k. Returns 0 or error. */
int ptx_kernel_end(struct ptx_kernel *k);

/* Named virtual register "%name" of type t (created on first use; same name, other type: error). */
const char *ptx_reg(struct ptx_kernel *k, enum ptx_type t, const char *fmt, ...) WSN_PRINTF(3, 4);
/* A fresh temporary register. */
const char *ptx_tmp(struct ptx_kernel *k, enum ptx_type t);
/* A fresh unique label name built from a stem ("$Lstem_N"); place it with ptx_label. */
const char *ptx_label_new(struct ptx_kernel *k, const char *stem);
void ptx_label(struct ptx_kernel *k, const char *label);

/* Comments and raw instructions ("add.f32 %s, %s, %s" without the ';'). */
void ptx_comment(struct ptx_kernel *k, const char *fmt, ...) WSN_PRINTF(2, 3);
void ptx_blank(struct ptx_kernel *k);
void ptx_ins(struct ptx_kernel *k, const char *fmt, ...) WSN_PRINTF(2, 3);
/* Predicate the next instruction: @pred (neg = 0) or @!pred (neg = 1). */
void ptx_guard(struct ptx_kernel *k, const char *pred, int neg);

/* ---- control flow ---- */
void ptx_bra(struct ptx_kernel *k, const char *label); /* honours a pending guard */
/* bra.uni promises that every active thread of a warp takes the same way: ptx_bra only where the
 * guard is warp-uniform; ptx_bra_div (a plain bra) where threads of one warp may part. */
void ptx_bra_div(struct ptx_kernel *k, const char *label);
void ptx_ret(struct ptx_kernel *k);
/* exit: this thread is done (other warps of the CTA go on). */
void ptx_exit(struct ptx_kernel *k);
/* A counted or open loop: head label at begin, exit label after end. */
struct ptx_loop {
	const char *head, *exit;
};
void ptx_loop_begin(struct ptx_kernel *k, struct ptx_loop *lp, const char *stem);
/* Leave the loop when pred (neg: when !pred). */
void ptx_loop_break_if(struct ptx_kernel *k, struct ptx_loop *lp, const char *pred, int neg);
/* Jump back to the head when pred (NULL: always), then place the exit label. */
void ptx_loop_end(struct ptx_kernel *k, struct ptx_loop *lp, const char *pred, int neg);

/* ---- moves, parameters, special registers ---- */
void ptx_ld_param(struct ptx_kernel *k, enum ptx_type t, const char *dst, const char *param);
void ptx_mov(struct ptx_kernel *k, enum ptx_type t, const char *dst, const char *src);
void ptx_mov_imm(struct ptx_kernel *k, enum ptx_type t, const char *dst, long long v);
void ptx_mov_f32(struct ptx_kernel *k, const char *dst, float v); /* exact hex literal */
/* dst (.u32) = special register sreg ("%tid.x", "%ctaid.x", "%nctaid.x", "%laneid", "%warpid"...). */
void ptx_sreg(struct ptx_kernel *k, const char *dst, const char *sreg);
/* The address of a param (a tensor map) as a generic pointer. */
void ptx_param_addr(struct ptx_kernel *k, const char *dst64, const char *param);
/* The shared-window address (.u32) of a shared symbol plus offset. */
void ptx_smem_addr(struct ptx_kernel *k, const char *dst32, const char *sym, long long off);

/* ---- memory ---- */
enum ptx_cache {
	PTX_CACHE_DEFAULT,   /* ld.global / st.global */
	PTX_CACHE_STREAM,    /* loads: .L1::no_allocate.L2::256B; stores: .cs (evict-first, streaming) */
	PTX_CACHE_READONLY,  /* loads: .nc (read-only data path), for weights */
	PTX_CACHE_LAST,      /* loads: .L1::no_allocate (data read again soon from L2) */
};
/* 16-byte vector load/store of four 32-bit registers at [addr+off] (global, 64-bit addr). */
void ptx_ld_global_v4(struct ptx_kernel *k, enum ptx_cache c, const char *const r[4], const char *addr,
		      long long off);
void ptx_st_global_v4(struct ptx_kernel *k, enum ptx_cache c, const char *addr, long long off,
		      const char *const r[4]);
/* Scalar global load/store ("b16", "b32", "f32", ...) at [addr+off]. */
void ptx_ld_global(struct ptx_kernel *k, enum ptx_cache c, enum ptx_type t, const char *dst,
		   const char *addr, long long off);
void ptx_st_global(struct ptx_kernel *k, enum ptx_cache c, enum ptx_type t, const char *addr,
		   long long off, const char *src);
/* Shared memory (32-bit shared-window addresses). */
void ptx_ld_shared_v4(struct ptx_kernel *k, const char *const r[4], const char *addr, long long off);
void ptx_st_shared_v4(struct ptx_kernel *k, const char *addr, long long off, const char *const r[4]);
void ptx_ld_shared(struct ptx_kernel *k, enum ptx_type t, const char *dst, const char *addr, long long off);
void ptx_st_shared(struct ptx_kernel *k, enum ptx_type t, const char *addr, long long off, const char *src);
/* Ampere-style per-thread async copy of 16 bytes global -> shared (cp.async.cg), and its groups. */
void ptx_cp_async_16(struct ptx_kernel *k, const char *saddr, long long soff, const char *gaddr,
		     long long goff);
void ptx_cp_async_commit(struct ptx_kernel *k);
void ptx_cp_async_wait_group(struct ptx_kernel *k, int n);

/* ---- warps and barriers ---- */
/* dst = value from lane (laneid ^ lanemask), full warp. */
void ptx_shfl_bfly(struct ptx_kernel *k, const char *dst, const char *src, int lanemask);
/* bar.sync id (count threads, 0 = the whole CTA). */
void ptx_bar_sync(struct ptx_kernel *k, int id, unsigned count);
/* bar.sync with the barrier id in a .u32 register (count threads, a multiple of 32). */
void ptx_bar_sync_reg(struct ptx_kernel *k, const char *id, unsigned count);
/* bar.warp.sync over the full warp (orders the lanes' memory accesses before what follows). */
void ptx_bar_warp_sync(struct ptx_kernel *k);
/* elect.sync: pred true in one lane of the warp; lane (.u32) may be NULL. */
void ptx_elect_sync(struct ptx_kernel *k, const char *pred, const char *lane);

/* ---- conversions (bf16/f16 pairs packed in one .b32, element 2i in the low half) ---- */
void ptx_unpack_bf16x2(struct ptx_kernel *k, const char *lo, const char *hi, const char *packed);
void ptx_pack_bf16x2(struct ptx_kernel *k, const char *packed, const char *lo, const char *hi);
void ptx_unpack_f16x2(struct ptx_kernel *k, const char *lo, const char *hi, const char *packed);
void ptx_pack_f16x2(struct ptx_kernel *k, const char *packed, const char *lo, const char *hi);
/* One 16-bit element (.b16) to/from f32. */
void ptx_cvt_f32_bf16(struct ptx_kernel *k, const char *dst, const char *h);
void ptx_cvt_bf16_f32(struct ptx_kernel *k, const char *h, const char *src);
void ptx_cvt_f32_f16(struct ptx_kernel *k, const char *dst, const char *h);
void ptx_cvt_f16_f32(struct ptx_kernel *k, const char *h, const char *src);

/* ---- f32 math (round to nearest) ---- */
void ptx_add_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b);
void ptx_sub_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b);
void ptx_mul_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b);
void ptx_fma_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b, const char *c);
/* rsqrt.approx.f32 (max relative error 2^-22.9: below the f32 tolerance). */
void ptx_rsqrt_f32(struct ptx_kernel *k, const char *d, const char *a);
void ptx_sqrt_rn_f32(struct ptx_kernel *k, const char *d, const char *a);
void ptx_div_rn_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b);

/* ---- asynchronous copies and mbarriers (sm_90+) ---- */
/* mbarrier objects are 8 bytes of shared memory at a 32-bit shared address (+off). */
void ptx_mbarrier_init(struct ptx_kernel *k, const char *bar, long long off, unsigned count);
void ptx_mbarrier_arrive(struct ptx_kernel *k, const char *bar, long long off);
void ptx_mbarrier_arrive_expect_tx(struct ptx_kernel *k, const char *bar, long long off, unsigned bytes);
/* Wait until the phase with the given parity (.u32 register or literal) completed: a retry loop. */
void ptx_mbarrier_wait_parity(struct ptx_kernel *k, const char *bar, long long off, const char *parity);
/* As ptx_mbarrier_wait_parity, but `trap` once the wait has lasted timeout_ns (by %globaltimer): a
 * pipeline that can never complete becomes a launch error instead of a hang. */
void ptx_mbarrier_wait_parity_bounded(struct ptx_kernel *k, const char *bar, long long off, const char *parity,
				      unsigned long long timeout_ns);
/* mbarrier.expect_tx (no arrival): the phase also waits for bytes (.u32 register) more of transfers. */
void ptx_mbarrier_expect_tx(struct ptx_kernel *k, const char *bar, long long off, const char *bytes);
/* Make generic-proxy writes to shared memory visible to the async proxy (and mbarrier inits). */
void ptx_fence_proxy_async(struct ptx_kernel *k);
void ptx_fence_mbarrier_init(struct ptx_kernel *k);
/* cp.async.bulk global -> shared with complete_tx on the mbarrier (bytes multiple of 16). */
void ptx_cp_async_bulk_g2s(struct ptx_kernel *k, const char *sdst, const char *gsrc, const char *bytes,
			   const char *bar);
/* cp.async.ca global -> shared of 4, 8 or 16 bytes (non-bulk; completion through
 * ptx_cp_async_mbarrier_arrive). */
void ptx_cp_async_ca(struct ptx_kernel *k, const char *sdst, const char *gsrc, int bytes);
/* The mbarrier's current phase also waits for this thread's cp.async copies issued so far (the
 * pending count is raised by one, then lowered when they land). */
void ptx_cp_async_mbarrier_arrive(struct ptx_kernel *k, const char *bar);
/* cp.async.bulk shared -> global in the bulk async group. */
void ptx_cp_async_bulk_s2g(struct ptx_kernel *k, const char *gdst, const char *ssrc, const char *bytes);
/* cp.async.bulk.tensor.<dims>d global -> shared tile with complete_tx; tmap a 64-bit generic address. */
void ptx_cp_async_bulk_tensor_g2s(struct ptx_kernel *k, int dims, const char *sdst, const char *tmap,
				  const char *const coords[], const char *bar);
void ptx_bulk_commit_group(struct ptx_kernel *k);
/* cp.async.bulk.wait_group.read n: the sources of all but n groups may be reused. */
void ptx_bulk_wait_group_read(struct ptx_kernel *k, int n);
/* setmaxnreg.inc/dec.sync.aligned.u32 n (n a multiple of 8 in 24..256). */
void ptx_setmaxnreg(struct ptx_kernel *k, int inc, unsigned n);
/* Thread block clusters: barrier.cluster arrive (release) + wait (acquire), every thread of every CTA. */
void ptx_cluster_sync(struct ptx_kernel *k);
/* mapa: dst (.u32) = the shared::cluster address of local shared address src in the CTA of rank `rank`. */
void ptx_mapa(struct ptx_kernel *k, const char *dst, const char *src, const char *rank);
/* st.async of n (1, 2 or 4) f32 to another CTA's shared memory (shared::cluster address addr + off,
 * aligned to 4n bytes), completing 4n bytes of transactions on that CTA's mbarrier rbar. */
void ptx_st_async_f32(struct ptx_kernel *k, const char *addr, long long off, int n, const char *const r[],
		      const char *rbar);
/* Programmatic dependent launch: griddepcontrol.wait (until the grids this one depends on have
 * completed and their writes are visible; no-op without such grids) and
 * griddepcontrol.launch_dependents (the next grid may start once every CTA of this one did this). */
void ptx_griddep_wait(struct ptx_kernel *k);
void ptx_griddep_launch_dependents(struct ptx_kernel *k);

/* ---- hooks for passes over a kernel body (codegen/ptx/async.c) ---- */
/* The kernel's entry name. */
const char *ptx_kernel_name(const struct ptx_kernel *k);
/* The body written so far, one item a line: instructions ("\t[@p ]text;"), labels ("name:"),
 * comments ("\t// ...") and blank lines. Its length is a position in the body; a pass run from
 * the end hook may replace the text. */
struct ptx_buf *ptx_kernel_body(struct ptx_kernel *k);
/* Record err (a negative WSN_E*) with the message "ptx: kernel NAME: ..." unless the kernel has
 * an error already (the first one is kept). Returns the kernel's error. */
int ptx_kernel_fail(struct ptx_kernel *k, int err, const char *fmt, ...) WSN_PRINTF(3, 4);
/* A function ptx_kernel_end calls before anything else: fn(k, ctx, err), err the kernel's error
 * so far (0 if none). It runs its pass only when err is 0 and always releases ctx; a negative
 * return becomes the kernel's error. One per kernel. Returns 0, or WSN_EBUSY when one is set
 * (nothing changes; ctx stays the caller's). */
typedef int (*ptx_end_hook)(struct ptx_kernel *k, void *ctx, int err);
int ptx_kernel_on_end(struct ptx_kernel *k, ptx_end_hook fn, void *ctx);

#endif
