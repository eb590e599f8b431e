/* SPDX-License-Identifier: MIT */
/* codegen/codegen.h: what the runtime's CUDA backend calls: plan a kernel, generate it, describe it. */
#ifndef WSN_CODEGEN_H
#define WSN_CODEGEN_H

#include "abi.h"
#include "plan.h"

/*
 * The kernels' parameters are the tables of abi.h, in their order. Launch: grid =
 * wsn__kernel_grid(plan, rows) CTAs of block_threads threads with smem_bytes of dynamic shared
 * memory; the finish kernel finish_grid x finish_threads, no dynamic shared memory.
 */

/*
 * The warp-specialised plan (plan_ws.c): the heuristic search, or the forced parameters in p->opts.
 * Fills *kp with approach ws. Returns 0 (kp->ws_good says whether the heuristic calls it good),
 * WSN_ESHAPE (nothing fits: the message names the budget) or WSN_EINVAL (forced parameters that
 * break a budget, named).
 */
int wsn__ws_plan(const struct wsn__gpu_props *g, const struct wsn__plan_params *p, struct wsn__kernel_plan *kp);
/*
 * The backward's ws shapes other than own's (the planner's ws plan for p; may be NULL) that autotune
 * times: each plans with a ring when forced, is good by the heuristic, gives every row group rows and
 * fills at least WS_TUNE_FILL of its threads' vector slots; whole vectors first, then a row a stage.
 * At most max into out, each with the stages the planner gives it; returns the count (0 for the
 * forward, or with a forced parameter in p).
 */
int wsn__ws_tune_shapes(const struct wsn__gpu_props *g, const struct wsn__plan_params *p,
			const struct wsn__kernel_plan *own, struct wsn__ws_shape *out, int max);
/* Plan p in shape s (forced, but described as autotune's and never marked forced). */
int wsn__ws_plan_shape(const struct wsn__gpu_props *g, const struct wsn__plan_params *p,
		       const struct wsn__ws_shape *s, struct wsn__kernel_plan *kp);
/* Generate the PTX module of a ws plan (ptx/ws.c). */
int wsn__ws_generate(const struct wsn__kernel_plan *kp, char **ptx);
/* Generate the PTX module for a plan (main kernel and, for backward, the finish kernel). */
int wsn__generate_ptx(const struct wsn__kernel_plan *kp, char **ptx);
/* Human-readable plan, like snprintf. */
int wsn__describe_kernel_plan(const struct wsn__kernel_plan *kp, char *buf, size_t len);
/* The same plan as fields of the JSON object o (a json_t *), one key per parameter (the keys are
 * listed in wsnorm(1) under plan --json). Returns 0 or WSN_ENOMEM. */
int wsn__kernel_plan_json(const struct wsn__kernel_plan *kp, void *o);

#endif
