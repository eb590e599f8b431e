/* SPDX-License-Identifier: MIT */
/* runtime/core/params.h: the planner's inputs, as every backend and the kernel planner are given them. */
#ifndef WSN_CORE_PARAMS_H
#define WSN_CORE_PARAMS_H

#include "core/util.h"

struct wsn__plan_params {
	enum wsn_op op;
	int64_t rows;   /* max rows */
	int64_t hidden;
	enum wsn_dtype dtype;
	struct wsn_plan_options opts; /* defaults filled in */
	int tuned;      /* ws: opts' cluster and parameters are a shape autotune times, not the user's */
};

/* A ws kernel shape, as the parameters a user could force (0: the planner's own). */
struct wsn__ws_shape {
	unsigned cluster, bdimx, bdimy, unroll, stages;
};

/*
 * The checks every planner entry shares (wsn_plan_create and wsn_emit_*): op, dtype, shape, eps,
 * approach, threads, forced parameters. 0, or WSN_EINVAL / WSN_EDTYPE / WSN_ESHAPE with a
 * message starting with what.
 */
int wsn__plan_check(const char *what, const struct wsn__plan_params *p);

#endif
