/* SPDX-License-Identifier: MIT */
/* runtime/compare.h: comparing a result against a reference, for wsn_tensor_compare and the tests' oracle. */
#ifndef WSN_COMPARE_H
#define WSN_COMPARE_H

#ifndef WSN_LAYER_RUNTIME
#error "runtime/compare.h is private to the runtime (docs/DESIGN.md, Layers)"
#endif

#include "core/util.h"

/* Start c; sums[] are the running ||got - ref||^2 and ||ref||^2. */
void wsn__compare_begin(struct wsn_compare *c, double sums[2]);
/* Element i: skipped where ref is not finite; a non-finite got counts and is the worst. */
void wsn__compare_add(struct wsn_compare *c, double sums[2], int64_t i, double got, double ref);
/* Finish over n elements: rel_l2 (infinite when any got was non-finite). */
void wsn__compare_end(struct wsn_compare *c, const double sums[2], int64_t n);

#endif
