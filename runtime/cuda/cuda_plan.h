/* SPDX-License-Identifier: MIT */
/* runtime/cuda/cuda_plan.h: what the CUDA plan's files share: the compiled plan, its compilation, autotune and text. */
#ifndef WSN_CUDA_PLAN_H
#define WSN_CUDA_PLAN_H

#ifndef WSN_LAYER_RUNTIME
#error "runtime/cuda/cuda_plan.h is private to the runtime (docs/DESIGN.md, Layers)"
#endif

#include "cuda/cuda_internal.h"
#include "core/params.h"
#include "core/util.h"

#include <stdarg.h>
#include <stdio.h>

/* A plan as the CUDA backend's ops see it: the kernel plan, its JIT-compiled module and kernels, its workspace. */
struct wsn__cu_plan {
	struct wsn__plan_params p;
	struct wsn__kernel_plan kp;  /* kp.max_grid capped by the measured occupancy */
	unsigned planned_grid;       /* the planner's max_grid */
	int sms;
	struct wsn__cu_module mod;
	struct wsn__cu_kernel main, finish;
	int has_finish;
	CUdeviceptr partials;        /* f32 partial sums of the backward ops */
	size_t partials_bytes;
	char tune[1536];             /* the description's autotune line; "" when autotune was not asked for */
};

/* snprintf that appends at *off (like snprintf, the total needed keeps growing past len). */
static inline void wsn__cu_appendf(char *buf, size_t len, size_t *off, const char *fmt, ...) WSN_PRINTF(4, 5);
static inline void wsn__cu_appendf(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(*off < len ? buf + *off : NULL, *off < len ? len - *off : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*off += (size_t)n;
}

/* ---- compilation (cuda_compile.c) ---- */

/*
 * Compile kernel plan kp (planned for p on the current context's device) into a new plan: generate its PTX, JIT it, look up its
 * kernels, cap the persistent grid by the measured occupancy and allocate the backward workspace.
 * 0 and *out, or an error (*out NULL, nothing left allocated).
 */
int wsn__cu_plan_compile(const struct wsn__gpu_props *g, const struct wsn__plan_params *p,
			 const struct wsn__kernel_plan *kp, struct wsn__cu_plan **out);
/* Free the workspace, the module and the plan, in the current context. */
void wsn__cu_plan_free(struct wsn__cu_plan *cp);

/* ---- autotune (cuda_autotune.c) ---- */

/* What decides the plan instead of autotune, in *buf; 0 when nothing is forced. */
int wsn__cu_tune_forced_by(const struct wsn__plan_params *p, char *buf, size_t len);
/*
 * Autotune plan creation (approach auto, nothing forced) on d, in its current context: the cached
 * winner, or the kernel families timed now and the fastest cached. 0 and *out (its tune line
 * filled), or an error.
 */
int wsn__cu_autotune(struct wsn__cu_device *d, const struct wsn__gpu_props *g, const struct wsn__plan_params *p,
		     struct wsn__cu_plan **out);

#endif
