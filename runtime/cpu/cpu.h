/* SPDX-License-Identifier: MIT */
/* runtime/cpu/cpu.h: what the CPU backend's ops table and its op kernels share. */
#ifndef WSN_CPU_H
#define WSN_CPU_H

#ifndef WSN_LAYER_RUNTIME
#error "runtime/cpu/cpu.h is private to the runtime (docs/DESIGN.md, Layers)"
#endif

#include "backend.h"
#include "core/params.h"

/* Most threads one execution may use (plan option or device setting). */
#define WSN_CPU_MAX_THREADS 1024
/* Elements of a row the kernels handle at a time; buffers of hidden elements are padded to whole blocks. */
#define WSN_CPU_BLOCK 256
/* Elements a chunk of rows aims for: chunk rows = ceil(this / hidden). */
#define WSN_CPU_CHUNK_ELEMS (1 << 14)
/* Bytes the per-chunk dweight/dbias partial sums (hidden padded to whole blocks) of one execution may take; chunks grow to fit. */
#define WSN_CPU_PARTIAL_BUDGET ((int64_t)64 << 20)

/* A CPU plan: the shared parameters and the fixed chunk size they imply. */
struct wsn__cpu_plan {
	struct wsn__plan_params p;
	int64_t chunk_rows;
};

/*
 * Rows per chunk for an op on plans of up to rows x hidden. It depends on the shape only, never
 * on the thread count, so the per-chunk partial sums (and their in-order reduction) are the same
 * for any number of threads. Always >= 1.
 */
int64_t wsn__cpu_chunk_rows(enum wsn_op op, int64_t rows, int64_t hidden);

/* Hardware threads this process may run on (its CPU affinity, else the online CPUs); >= 1. */
int wsn__cpu_hw_threads(void);

/*
 * Run a plan on checked tensors (see struct wsn__exec) with at most threads threads (>= 1; never
 * more than there are chunks). Synchronous. Returns 0 or WSN_ENOMEM.
 */
int wsn__cpu_execute(const struct wsn__cpu_plan *plan, int threads, const struct wsn__exec *ex);

#endif
