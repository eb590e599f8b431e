/* SPDX-License-Identifier: MIT */
/* codegen/planner.h: the planners' entry points the dispatcher (choose.c) calls. */
#ifndef WSN_CODEGEN_PLANNER_H
#define WSN_CODEGEN_PLANNER_H

#ifndef WSN_LAYER_CODEGEN
#error "codegen/planner.h is private to codegen (docs/DESIGN.md, Layers)"
#endif

#include "codegen.h"

/*
 * The multi-wave plan (plan_multiwave.c): the search over row splits, row groups and storage, or the
 * forced block_threads/groups in p->opts. Fills *kp with approach multi-wave. Returns 0, WSN_ESHAPE
 * (nothing fits: the message names the budget) or WSN_EINVAL (forced parameters that do not fit).
 */
int wsn__multiwave_plan(const struct wsn__gpu_props *g, const struct wsn__plan_params *p, struct wsn__kernel_plan *kp);
/* The rule that picks ws or multi-wave when the approach is auto: 1 for ws; why gets the rule's text. */
int wsn__ws_auto_pick(const struct wsn__gpu_props *g, const struct wsn__kernel_plan *ws, char *why, size_t len);

#endif
