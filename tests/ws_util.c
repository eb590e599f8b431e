/* SPDX-License-Identifier: MIT */
/* tests/ws_util.c: what the check_ws_*.c tests share: plan parameters and plan property checks. */
#define _GNU_SOURCE
#include "testutil.h"

#include "codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_util.h"

void ws_params(struct wsn__plan_params *p, enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows)
{
	memset(p, 0, sizeof(*p));
	p->op = op;
	p->dtype = dt;
	p->hidden = hidden;
	p->rows = rows;
	wsn_plan_options_init(&p->opts, op);
	p->opts.approach = WSN_APPROACH_WS;
}

void ws_check_plan(const struct wsn__gpu_props *g, const struct wsn__kernel_plan *kp)
{
	const char *e = kp->entry;
	unsigned E = (unsigned)wsn_dtype_size(kp->dtype), C = kp->bdimx * kp->bdimy;
	unsigned K = kp->cluster > 1 ? kp->cluster : 1;
	int64_t cols = kp->hidden / K;
	struct wsn__ws_layout l;
	char text[4096];

	ck_assert_int_eq(kp->approach, WSN_APPROACH_WS);
	ck_assert_msg(kp->bdimx == 32 || kp->bdimx == 64 || kp->bdimx % 128 == 0, "%s: bdimx %u", e, kp->bdimx);
	ck_assert_msg(C % 128 == 0, "%s: row groups of %u threads do not fill warpgroups", e, C);
	ck_assert_msg(kp->producer_threads == 128 && kp->block_threads == 128 + C && kp->block_threads <= 1024,
		      "%s: threads %u", e, kp->block_threads);
	ck_assert_msg(kp->groups == kp->bdimy && kp->bdimy >= 1 && (kp->bdimx == 32 || kp->bdimy <= 14),
		      "%s: groups (named barriers 1..14)", e);
	/* a row split over a cluster: whole 16-byte vectors per CTA, backward only */
	ck_assert_msg(K == 1 || K == 2 || K == 4 || K == 8, "%s: cluster %u", e, kp->cluster);
	ck_assert_msg(K == 1 || (wsn_op_is_backward(kp->op) && kp->hidden % (K * kp->vec) == 0), "%s: split", e);
	ck_assert_msg((K > 1) == (strstr(e, "_c") != NULL), "%s: entry names the cluster", e);
	/* the reasoning's clauses are separated once, whichever step came last */
	tu_assert_why_clauses(e, kp->why);
	ck_assert_msg((int64_t)kp->nvec * kp->bdimx * kp->vec >= cols, "%s: columns not covered", e);
	ck_assert_msg((int64_t)(kp->nvec - 1) * kp->bdimx * kp->vec < cols, "%s: an empty slice", e);
	ck_assert_msg(kp->row_bytes % 16 == 0 && kp->row_bytes >= cols * E + 16, "%s: row bytes", e);
	ck_assert_uint_eq(kp->stage_bytes, kp->unroll * (wsn_op_is_backward(kp->op) ? 2 : 1) * kp->row_bytes +
					    wsn__ws_stats_bytes(kp));
	ck_assert_msg(kp->unroll >= 1 && kp->unroll <= 8 && kp->stages >= 1, "%s: unroll/stages", e);
	/* every stage is one row group's (a slot two groups share breaks the mbarrier parity waits) */
	ck_assert_msg(kp->stages % kp->bdimy == 0, "%s: %u stages for %u row groups", e, kp->stages, kp->bdimy);
	/* registers: the entry allocation is the pool the producer gives to and the row groups take from */
	ck_assert_msg(kp->regs_entry % 8 == 0 && kp->regs_entry * kp->block_threads <= (unsigned)g->regs_per_block,
		      "%s: %u x %u registers at entry", e, kp->block_threads, kp->regs_entry);
	ck_assert_msg(kp->regs_compute % 8 == 0 && kp->regs_compute <= 248 && kp->regs_producer >= 24 &&
		      kp->regs_compute * C + kp->regs_producer * 128 <= kp->regs_entry * kp->block_threads,
		      "%s: setmaxnreg %u/%u from %u", e, kp->regs_producer, kp->regs_compute, kp->regs_entry);
	/* shared memory: the layout, inside the opt-in limit */
	wsn__ws_layout(kp, &l);
	ck_assert_uint_eq(l.total, kp->smem_bytes);
	ck_assert_msg(kp->smem_bytes <= (unsigned)g->smem_per_block_optin, "%s: shared memory %u", e, kp->smem_bytes);
	ck_assert_msg(l.stages % 128 == 0 && l.stages + kp->stages * kp->stage_bytes <= l.total, "%s: ring", e);
	ck_assert_msg(l.red >= 16 * kp->stages && l.red_slot % 16 == 0, "%s: barriers/reduction", e);
	if (K > 1) /* exchange barriers after the ring's, buffers after the reduction's */
		ck_assert_msg(l.xbar >= 16 * kp->stages && l.xbar + 16 * kp->bdimy <= l.red &&
			      l.xch >= l.red + kp->bdimy * 2 * (kp->bdimx / 32) * l.red_slot &&
			      l.xch + kp->bdimy * 2 * K * l.red_slot <= l.w, "%s: exchange layout", e);
	ck_assert_uint_eq(kp->ctas_per_sm, 1);
	ck_assert_uint_eq(kp->max_grid, (unsigned)g->sms / K * K);
	if (wsn_op_is_backward(kp->op) && (kp->has_weight || kp->has_bias)) {
		ck_assert_str_ne(kp->finish_entry, "");
		ck_assert_uint_eq(kp->partials_bytes,
				  (size_t)(kp->has_bias ? 2 : 1) * (kp->max_grid / K) * (size_t)kp->hidden * 4);
	} else {
		ck_assert_str_eq(kp->finish_entry, "");
	}
	if (kp->bdimy > 1) /* sums in shared memory are per CTA, not per row group */
		ck_assert(kp->dw_store == WSN_STORE_REG && kp->db_store == WSN_STORE_REG);
	if (wsn_op_is_backward(kp->op) && kp->bdimy > 1 && (kp->has_weight || kp->has_bias)) /* the fold's slots */
		ck_assert_msg(l.xg == l.stages && l.xg_slots >= 1 &&
			      l.xg + l.xg_slots * kp->nvec * kp->bdimx * kp->vec * 4 <= l.total, "%s: fold slots", e);
	ck_assert_uint_eq(wsn__kernel_grid(kp, 1), K);
	ck_assert_uint_eq(wsn__kernel_grid(kp, 1000000), kp->max_grid);
	ck_assert_uint_eq(wsn__kernel_grid(kp, kp->unroll * 3), 3 * K <= kp->max_grid ? 3 * K : kp->max_grid);
	ck_assert_int_gt(wsn__describe_kernel_plan(kp, text, sizeof(text)), 0);
	ck_assert_ptr_nonnull(strstr(text, "approach:      ws"));
	ck_assert_ptr_nonnull(strstr(text, kp->entry));
	ck_assert_ptr_nonnull(strstr(kp->why, "shared memory"));
	ck_assert_ptr_nonnull(strstr(kp->why, "registers:"));
	ck_assert_ptr_nonnull(strstr(kp->why, "heuristic:"));
}

void ws_force(struct wsn__plan_params *p, int groups, int unroll, int stages)
{
	p->opts.groups = groups;
	p->opts.unroll = unroll;
	p->opts.stages = stages;
}

struct wsn__kernel_plan ws_plan_forced(const struct wsn__gpu_props *g, const struct wsn__plan_params *p)
{
	struct wsn__kernel_plan kp;

	ck_assert_msg(wsn__ws_plan(g, p, &kp) == 0, "%s %s %lld: %s", wsn_op_name(p->op), wsn_dtype_name(p->dtype),
		      (long long)p->hidden, wsn_last_error());
	ws_check_plan(g, &kp);
	return kp;
}

struct wsn__kernel_plan ws_plan_ok(const struct wsn__gpu_props *g, enum wsn_op op, enum wsn_dtype dt, int64_t h)
{
	struct wsn__plan_params p;

	ws_params(&p, op, dt, h, 16384);
	p.opts.cluster = 1;
	return ws_plan_forced(g, &p);
}
