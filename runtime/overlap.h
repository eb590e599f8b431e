/* SPDX-License-Identifier: MIT */
/* runtime/overlap.h: which backward calls on a stream may start before the calls ahead of them end. */
#ifndef WSN_OVERLAP_H
#define WSN_OVERLAP_H

#ifndef WSN_LAYER_RUNTIME
#error "runtime/overlap.h is private to the runtime (docs/DESIGN.md, Layers)"
#endif

#include "core/params.h"

struct wsn__span {
	uintptr_t lo, hi; /* bytes [lo, hi) */
};
/* What one call reads and writes: rd and wr while its kernel runs, fin (dweight, dbias) by its finish
 * kernel; seq its number on the stream. */
struct wsn__ovl_call {
	struct wsn__span rd[5], wr[3], fin[2];
	int nrd, nwr, nfin;
	int publishes; /* its finish kernel stores seq into the stream's done word */
	int main_done; /* its main grid is known to be done (its finish kernel may still run) */
	uint64_t seq;
};
#define WSN__OVL_DEPTH 8
/* The calls that may still run on a stream: since the last one that waited at its start. */
struct wsn__ovl {
	int known; /* 0: other work may run ahead (the next call waits) */
	int n;
	uint64_t seq; /* the last call's number */
	struct wsn__ovl_call c[WSN__OVL_DEPTH];
};
/* The tensors of a call wsn_plan_execute has checked. */
void wsn__ovl_call_of(const struct wsn__plan_params *pp, const struct wsn_args *a, struct wsn__ovl_call *c);
/* 1 when c may start beside the calls in o; *wait_seq: the call number the stream's done word must
 * reach first (0: none, and always when it returns 0). */
int wsn__ovl_may_start_early(const struct wsn__ovl *o, const struct wsn__ovl_call *c, uint64_t *wait_seq);
/* c (numbered c->seq = ++o->seq before it was queued) was queued: after the calls in o if it
 * started early (as wsn__ovl_may_start_early said, with wait_seq), else alone. */
void wsn__ovl_record(struct wsn__ovl *o, const struct wsn__ovl_call *c, int early, uint64_t wait_seq);
/* Other work was queued (known 0) or the stream is idle (known 1). */
void wsn__ovl_reset(struct wsn__ovl *o, int known);
/* 0 when WSNORM_OVERLAP=0. */
int wsn__ovl_enabled(void);

#endif
