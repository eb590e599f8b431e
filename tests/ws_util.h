/* SPDX-License-Identifier: MIT */
/* tests/ws_util.h: what the check_ws_*.c tests share: plan parameters and plan property checks. */
#ifndef WSN_TESTS_WS_UTIL_H
#define WSN_TESTS_WS_UTIL_H

#include "testutil.h"

#include "codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const enum wsn_op all_ops[] = { WSN_LAYERNORM_FWD, WSN_LAYERNORM_BWD, WSN_RMSNORM_FWD, WSN_RMSNORM_BWD };

static const enum wsn_dtype all_dtypes[] = { WSN_F32, WSN_F16, WSN_BF16 };

void ws_params(struct wsn__plan_params *p, enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows);

/* Force p's row groups, unroll and stages. */
void ws_force(struct wsn__plan_params *p, int groups, int unroll, int stages);

/* What every ws plan must satisfy on device g. */
void ws_check_plan(const struct wsn__gpu_props *g, const struct wsn__kernel_plan *kp);

/* The ws plan for p (its forced options) on device g: the planner must give one, and it must pass
 * ws_check_plan. */
struct wsn__kernel_plan ws_plan_forced(const struct wsn__gpu_props *g, const struct wsn__plan_params *p);

/* The heuristic's own search: a CTA per row (cluster 1 forced, so no measured split). */
struct wsn__kernel_plan ws_plan_ok(const struct wsn__gpu_props *g, enum wsn_op op, enum wsn_dtype dt, int64_t h);

#endif /* WSN_TESTS_WS_UTIL_H */
