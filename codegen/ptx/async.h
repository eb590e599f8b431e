/* SPDX-License-Identifier: MIT */
/* codegen/ptx/async.h: the async-group pass, which inserts the waits that bulk stores and wgmma groups need. */
#ifndef WSN_ASYNC_H
#define WSN_ASYNC_H

#ifndef WSN_LAYER_CODEGEN
#error "codegen/ptx/async.h is private to codegen (docs/DESIGN.md, Layers)"
#endif

#include "emitter.h"

/*
 * Attach the pass to a kernel right after ptx_kernel_begin; write the kernel as usual; the pass
 * runs inside ptx_kernel_end over the finished body:
 *
 *	a = ptx_async_attach(k, NULL);
 *	ptx_async_region_begin(a, OUT0);          // shared-memory writes below touch region OUT0 only
 *	ptx_st_shared_v4(k, buf0, 0, r);
 *	ptx_async_region_end(a);
 *	ptx_fence_proxy_async(k);
 *	ptx_guard(k, elected, 0);
 *	ptx_async_bulk_store(a, gdst, buf0, bytes, OUT0);
 *	...                                       // the pass puts cp.async.bulk.wait_group.read
 *	ptx_st_shared_v4(k, buf0, 0, r);          // before this write, not earlier
 *
 * What it tracks, by reading every instruction of the body:
 *   bulk stores   cp.async.bulk[.tensor].global.shared::cta.bulk_group and cp.reduce.async.bulk
 *                 into global; grouped by cp.async.bulk.commit_group, waited for by
 *                 cp.async.bulk.wait_group[.read] N. Consumers: instructions that write shared
 *                 memory (st, st.async, stmatrix, atom, red and copies into .shared, generic st
 *                 and atom) in a region the store reads, a ptx_async_reuse point, kernel exit.
 *   wgmma         wgmma.mma_async; grouped by wgmma.commit_group.sync.aligned, waited for by
 *                 wgmma.wait_group.sync.aligned N. Consumers: any instruction that names an
 *                 accumulator register of a pending wgmma (read or write), that writes a
 *                 register a pending wgmma reads as an A fragment, kernel exit. A wgmma
 *                 accumulating into the registers of an earlier one is not a consumer (the
 *                 hardware orders same-shape accumulation); its shared-memory operands are not
 *                 tracked (a generator that overwrites them waits itself).
 * At the first consumer of a pending async op the pass inserts one wait; with the default policy
 * (PTX_ASYNC_FLUSH) it is wait_group 0, which retires every group of that kind, so later consumers
 * of those groups need no wait of their own; an async op issued after it arms the tracking again.
 * Commits and waits the generator wrote itself count; ops it left uncommitted are committed by the
 * pass before their consumer, and at the latest at the end of their basic block (before its branch).
 * The analysis follows branches and loops (labels, bra, ret), so a consumer at the top of a loop
 * body that reads what the previous iteration issued gets its wait there. It also puts a
 * wgmma.fence.sync.aligned before a wgmma whose accumulator or A registers were touched by other
 * instructions since the last fence (and before the first one).
 *
 * Inserted waits are unpredicated and sit right before the consumer (wait_group with no groups
 * pending is free): wgmma consumers must be in warp-uniform code, as wgmma itself is. Guarded
 * async ops count as issued; guarded commits and waits are ignored (the pass may add its own).
 * The pass sees one thread's program order: when other threads overwrite a buffer after a barrier,
 * mark the point before that barrier with ptx_async_reuse.
 */

struct ptx_async;

enum ptx_async_kind {
	PTX_ASYNC_BULK,  /* cp.async.bulk stores (smem -> global) */
	PTX_ASYNC_WGMMA, /* wgmma.mma_async */
	PTX_ASYNC_KINDS
};

enum ptx_async_policy {
	PTX_ASYNC_FLUSH,      /* wait_group 0 at a consumer: the fewest waits (the default) */
	PTX_ASYNC_KEEP_NEWER, /* wait_group N: groups committed after the consumer's stay in flight */
};

/* Shared-memory regions are generator-chosen tags 0..PTX_ASYNC_REGIONS-1; ANY: all of them. */
#define PTX_ASYNC_REGIONS 32
#define PTX_ASYNC_ANY (-1)

/* What the pass did in one kernel (filled in by ptx_kernel_end). */
struct ptx_async_stats {
	unsigned async_ops[PTX_ASYNC_KINDS]; /* async instructions in the body */
	unsigned waits[PTX_ASYNC_KINDS];     /* wait_group instructions inserted */
	unsigned commits[PTX_ASYNC_KINDS];   /* commit_group instructions inserted */
	unsigned fences;                     /* wgmma.fence instructions inserted */
};

/*
 * Attach the pass to k: it runs on the body in ptx_kernel_end and is freed there; stats, when not
 * NULL, is written then (zeroed now) and must outlive the kernel. Returns the tracker, or NULL with
 * the kernel's error set (WSN_ENOMEM, or WSN_EBUSY when k has an end pass already).
 */
struct ptx_async *ptx_async_attach(struct ptx_kernel *k, struct ptx_async_stats *stats);
/* The wait policy for one kind (PTX_ASYNC_FLUSH unless set). Bad arguments: WSN_EINVAL on k. */
void ptx_async_policy(struct ptx_async *a, enum ptx_async_kind kind, enum ptx_async_policy policy);

/*
 * Shared-memory writes emitted between begin and end write region only (PTX_ASYNC_ANY: may write
 * anything, as outside a begin/end pair). Pairs do not nest; an unbalanced pair, or a region out
 * of range, is WSN_EINVAL on the kernel.
 */
void ptx_async_region_begin(struct ptx_async *a, int region);
void ptx_async_region_end(struct ptx_async *a);
/* A consumer point: from here on region (PTX_ASYNC_ANY: all) may be overwritten, by any thread.
 * Emits nothing itself; the pass puts a wait here when a bulk store from region may be pending. */
void ptx_async_reuse(struct ptx_async *a, int region);

/*
 * Bulk stores through shared memory, for kernels that stage results there: one instruction each
 * (a pending ptx_guard applies to it), recorded as reading region (PTX_ASYNC_ANY: unknown, which
 * makes every shared-memory write a consumer). Commit with ptx_bulk_commit_group or leave it to
 * the pass. The writes to the staged data must be made visible to the async proxy first
 * (ptx_fence_proxy_async by the writing threads, then a barrier when they are not the issuer).
 *   ptx_async_bulk_store: cp.async.bulk.global.shared::cta.bulk_group [gdst], [ssrc], bytes
 *     (gdst a 64-bit global address, ssrc a 32-bit shared address, bytes a multiple of 16).
 *   ptx_async_bulk_tensor_store: cp.async.bulk.tensor.<dims>d.global.shared::cta.bulk_group
 *     [tmap, {coords}], [ssrc] (tmap a 64-bit generic address of a tensor map, dims 1..5).
 */
void ptx_async_bulk_store(struct ptx_async *a, const char *gdst, const char *ssrc, const char *bytes,
			  int region);
void ptx_async_bulk_tensor_store(struct ptx_async *a, int dims, const char *tmap,
				 const char *const coords[], const char *ssrc, int region);

/*
 * One wgmma with both matrices in shared memory: wgmma.mma_async.sync.aligned.<shape>
 * {d[0..nd-1]}, adesc, bdesc, scale_d, 1, 1, 0, 0 — shape such as "m64n8k16.f32.bf16.bf16"
 * (16-bit inputs: the transpose immediates exist), adesc/bdesc 64-bit matrix descriptors, scale_d
 * a predicate (false: D = A*B, true: D += A*B). nd outside 1..256: WSN_EINVAL on the kernel.
 */
void ptx_async_wgmma(struct ptx_async *a, const char *shape, const char *const d[], int nd,
		     const char *adesc, const char *bdesc, const char *scale_d);

#endif
