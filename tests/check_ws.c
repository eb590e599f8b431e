/* SPDX-License-Identifier: MIT */
/* tests/check_ws.c: the warp-specialised planner on modelled devices (choices, fallbacks, forced options, auto) and its kernels through ptxas. */
#define _GNU_SOURCE
#include "testutil.h"

#include "codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const enum wsn_op all_ops[] = { WSN_LAYERNORM_FWD, WSN_LAYERNORM_BWD, WSN_RMSNORM_FWD, WSN_RMSNORM_BWD };
static const enum wsn_dtype all_dtypes[] = { WSN_F32, WSN_F16, WSN_BF16 };
static const int64_t hidden_sizes[] = { 1, 3, 64, 1000, 1024, 2048, 4096, 4097, 8192, 12288, 16384 };

static void params(struct wsn__plan_params *p, enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows)
{
	memset(p, 0, sizeof(*p));
	p->op = op;
	p->dtype = dt;
	p->hidden = hidden;
	p->rows = rows;
	wsn_plan_options_init(&p->opts, op);
	p->opts.approach = WSN_APPROACH_WS;
}

/* What every ws plan must satisfy on device g. */
static void check_ws_plan(const struct wsn__gpu_props *g, const struct wsn__kernel_plan *kp)
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
		ck_assert_uint_eq(kp->ws_bytes,
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

/* The heuristic's own search: a CTA per row (cluster 1 forced, so no measured split). */
static struct wsn__kernel_plan plan_ok(const struct wsn__gpu_props *g, enum wsn_op op, enum wsn_dtype dt, int64_t h)
{
	struct wsn__plan_params p;
	struct wsn__kernel_plan kp;

	params(&p, op, dt, h, 16384);
	p.opts.cluster = 1;
	ck_assert_msg(wsn__ws_plan(g, &p, &kp) == 0, "%s %s %lld: %s", wsn_op_name(op), wsn_dtype_name(dt),
		      (long long)h, wsn_last_error());
	check_ws_plan(g, &kp);
	return kp;
}

/* Every op x dtype x hidden on both modelled devices plans, within every budget. */
START_TEST(test_ws_plan_budgets)
{
	struct wsn__gpu_props dev[2];

	wsn__gpu_props_h100(&dev[0]);
	wsn__gpu_props_b200(&dev[1]);
	for (int d = 0; d < 2; d++)
		for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++)
			for (size_t t = 0; t < WSN_ARRAY_SIZE(all_dtypes); t++)
				for (size_t i = 0; i < WSN_ARRAY_SIZE(hidden_sizes); i++) {
					struct wsn__plan_params p;
					struct wsn__kernel_plan kp;
					int e;
					params(&p, all_ops[o], all_dtypes[t], hidden_sizes[i], 16384);
					e = wsn__ws_plan(&dev[d], &p, &kp);
					if (e && hidden_sizes[i] >= 12288 &&
					    (all_dtypes[t] != WSN_BF16 || wsn_op_is_backward(all_ops[o]))) {
						/* long rows of 4-byte elements, or f16 backward's registers: the
						 * error names the budget */
						ck_assert_int_eq(e, WSN_ESHAPE);
						ck_assert_ptr_nonnull(strstr(wsn_last_error(), "budget"));
						continue;
					}
					ck_assert_msg(!e, "%s", wsn_last_error());
					check_ws_plan(&dev[d], &kp);
					ck_assert_int_eq(kp.arch, dev[d].arch);
				}
}
END_TEST

/* The heuristic's concrete choices on the modelled H100 (132 SMs, 227 KB) and B200 (148 SMs, 228 KB). */
START_TEST(test_ws_choices)
{
	struct wsn__gpu_props h, b;
	struct wsn__kernel_plan kp;

	wsn__gpu_props_h100(&h);
	wsn__gpu_props_b200(&b);
	/* LayerNorm backward 4K bf16: two row groups of 128 threads, 2 rows per stage cached in
	 * registers, leftover shared memory on stages up to a 132 KB ring (4 x 32 KB; 7 would fit) */
	kp = plan_ok(&h, WSN_LAYERNORM_BWD, WSN_BF16, 4096);
	ck_assert_uint_eq(kp.bdimx, 128);
	ck_assert_uint_eq(kp.bdimy, 2);
	ck_assert_uint_eq(kp.unroll, 2);
	ck_assert_uint_eq(kp.stages, 4);
	ck_assert_ptr_nonnull(strstr(kp.why, "stages 4 (a backward ring grows past 4 stages only up to 132 KB)"));
	ck_assert_int_eq(kp.cache_rows, 1);
	ck_assert_int_eq(kp.param_store, WSN_STORE_REG);
	ck_assert_uint_eq(kp.regs_entry, 168);
	ck_assert_uint_eq(kp.regs_compute, 240);
	ck_assert_int_eq(kp.ws_good, 1);
	ck_assert_ptr_nonnull(strstr(kp.why, "search: stages 2, bdimy 2, unroll 2, fits"));
	/* short rows: two warps per row (two vectors each), four row groups; unroll stops at 2 (4
	 * would leave the busiest SM 3 % over the mean) */
	kp = plan_ok(&h, WSN_LAYERNORM_BWD, WSN_BF16, 1024);
	ck_assert_uint_eq(kp.bdimx, 64);
	ck_assert_uint_eq(kp.bdimy, 4);
	ck_assert_uint_eq(kp.unroll, 2);
	ck_assert_uint_eq(kp.regs_entry, 168);
	ck_assert_uint_eq(kp.regs_compute, 240);
	/* forward: a warp per row (four vectors each) */
	kp = plan_ok(&h, WSN_LAYERNORM_FWD, WSN_BF16, 1024);
	ck_assert_uint_eq(kp.bdimx, 32);
	ck_assert_uint_eq(kp.bdimy, 8);
	ck_assert_uint_eq(kp.stages, 32); /* WS_MAX_STAGES */
	/* the backward's leftover shared memory stops adding stages at 16 (LayerNorm bwd 1K has room
	 * for more; 32 measured slower than 16 for LayerNorm bwd 2K/4K) */
	kp = plan_ok(&h, WSN_LAYERNORM_BWD, WSN_BF16, 1024);
	ck_assert_uint_eq(kp.stages, 16); /* WS_FILL_STAGES_BWD */
	ck_assert_ptr_nonnull(strstr(kp.why, "leftover shared memory: stages 16"));
	/* the backward ring's cap, on the planner's own splits: 4 of 32 KB at LayerNorm/RMSNorm 16K
	 * over 2 (LayerNorm's forced: bf16 has a measured shape over 8), 8 of 16 KB at RMSNorm 2K on
	 * whole rows (cluster 1 forced: the measured shape splits it), 16 of 4 KB at LayerNorm 4K over 8 (within the cap); at RMSNorm 32K (64 KB stages) the 3
	 * that fit stay */
	{
		static const struct {
			enum wsn_op op;
			int64_t hidden;
			unsigned cluster, stages;
			int forced;
		} cap[] = {
			{ WSN_LAYERNORM_BWD, 16384, 2, 4, 1 }, { WSN_RMSNORM_BWD, 16384, 2, 4, 0 },
			{ WSN_RMSNORM_BWD, 2048, 1, 8, 1 }, { WSN_LAYERNORM_BWD, 4096, 8, 16, 0 },
			{ WSN_RMSNORM_BWD, 32768, 2, 3, 0 },
		};
		for (size_t i = 0; i < WSN_ARRAY_SIZE(cap); i++) {
			struct wsn__plan_params p;

			params(&p, cap[i].op, WSN_BF16, cap[i].hidden, 16384);
			if (cap[i].forced)
				p.opts.cluster = (int)cap[i].cluster;
			ck_assert_msg(wsn__ws_plan(&h, &p, &kp) == 0, "%s", wsn_last_error());
			check_ws_plan(&h, &kp);
			ck_assert_uint_eq(kp.cluster, cap[i].cluster);
			ck_assert_msg(kp.stages == cap[i].stages, "%s %lld: %u stages, expected %u",
				      wsn_op_name(cap[i].op), (long long)cap[i].hidden, kp.stages, cap[i].stages);
			ck_assert_uint_le((uint64_t)kp.stages * kp.stage_bytes, kp.stages <= 4 ? 232448u : 132u * 1024);
		}
	}
	/* one row group: bdimx grows until the registers fit */
	kp = plan_ok(&h, WSN_LAYERNORM_BWD, WSN_BF16, 8192);
	ck_assert_uint_eq(kp.bdimy, 1);
	ck_assert_uint_eq(kp.bdimx, 256);
	ck_assert_ptr_nonnull(strstr(kp.why, "bdimx 256 (avoids spills)"));
	/* the B200 model: its own SM count, the same shapes */
	kp = plan_ok(&b, WSN_LAYERNORM_BWD, WSN_BF16, 4096);
	ck_assert_uint_eq(kp.max_grid, 148);
	ck_assert_uint_eq(kp.bdimy, 2);
	ck_assert_uint_eq(kp.unroll, 2);
	ck_assert_int_eq(kp.arch, 100);
	/* 16384 rows over 148 SMs: unroll 4 keeps the tail within 2 % (over 132 it does not) */
	kp = plan_ok(&b, WSN_RMSNORM_FWD, WSN_BF16, 4096);
	ck_assert_uint_eq(kp.max_grid, 148);
	ck_assert_uint_eq(kp.unroll, 4);
	ck_assert_uint_eq(kp.bdimy, 2);
	ck_assert_uint_eq(kp.stages, 6); /* 7 fit; 6 give each of the 2 row groups its own 3 */
	kp = plan_ok(&h, WSN_RMSNORM_FWD, WSN_BF16, 4096);
	ck_assert_uint_eq(kp.unroll, 2);
	ck_assert_uint_eq(kp.stages, 14);
}
END_TEST

/* Each fallback, on a shape that needs it. */
START_TEST(test_ws_fallbacks)
{
	struct wsn__gpu_props h;
	struct wsn__kernel_plan kp;

	wsn__gpu_props_h100(&h);
	/* 1: the stage is not cached in registers */
	kp = plan_ok(&h, WSN_LAYERNORM_FWD, WSN_BF16, 23552);
	ck_assert_int_eq(kp.cache_rows, 0);
	ck_assert_int_eq(kp.param_store, WSN_STORE_REG);
	ck_assert_ptr_nonnull(strstr(kp.why, "fallback 1, stage not cached in registers: "));
	/* 2: weight and bias through shared memory */
	kp = plan_ok(&h, WSN_LAYERNORM_FWD, WSN_BF16, 27648);
	ck_assert_int_eq(kp.param_store, WSN_STORE_SMEM);
	ck_assert_uint_ge(kp.stages, 2);
	ck_assert_ptr_nonnull(strstr(kp.why, "fallback 2, weight/bias through shared memory: "));
	/* 3: that left one stage: direct loads back on, over the register budget, not good */
	kp = plan_ok(&h, WSN_LAYERNORM_FWD, WSN_BF16, 29696);
	ck_assert_int_eq(kp.param_store, WSN_STORE_REG);
	ck_assert_uint_ge(kp.stages, 2);
	ck_assert_ptr_nonnull(strstr(kp.why, "fallback 3, still one stage: direct loads back on"));
	ck_assert_int_eq(kp.ws_good, 0);
	ck_assert_ptr_nonnull(strstr(kp.why, "spills"));
	/* ours, 4 and 5: dbias, then dweight too, summed in shared memory (one row group) */
	kp = plan_ok(&h, WSN_LAYERNORM_BWD, WSN_BF16, 13312);
	ck_assert_int_eq(kp.db_store, WSN_STORE_SMEM);
	ck_assert_int_eq(kp.dw_store, WSN_STORE_REG);
	ck_assert_uint_eq(kp.bdimy, 1);
	ck_assert_ptr_nonnull(strstr(kp.why, "fallback 4, dbias sums in shared memory"));
	kp = plan_ok(&h, WSN_LAYERNORM_BWD, WSN_BF16, 17408);
	ck_assert_int_eq(kp.db_store, WSN_STORE_SMEM);
	ck_assert_int_eq(kp.dw_store, WSN_STORE_SMEM);
	ck_assert_ptr_nonnull(strstr(kp.why, "fallback 5, dweight and dbias sums in shared memory"));
	/* is_good_ws_heuristic's rules: one stage; bdimy 1 with direct loads and < 8 registers spare
	 * (WS_GOOD_FREE_REGS: nvFuser asks for 64; measured, 8 is enough here) */
	ck_assert_uint_eq(kp.stages, 1);
	ck_assert_int_eq(kp.ws_good, 0);
	ck_assert_ptr_nonnull(strstr(kp.why, "one stage"));
	kp = plan_ok(&h, WSN_LAYERNORM_FWD, WSN_BF16, 13312);
	ck_assert_uint_eq(kp.bdimy, 1);
	ck_assert_int_eq(kp.param_store, WSN_STORE_REG);
	ck_assert_int_eq(kp.ws_good, 0);
	ck_assert_ptr_nonnull(strstr(kp.why, "fewer than 8 registers spare"));
	kp = plan_ok(&h, WSN_LAYERNORM_BWD, WSN_BF16, 8192); /* 58 spare: good */
	ck_assert_int_eq(kp.ws_good, 1);
	/* no CTA holds a row: the row split over a cluster of 2, then 4 */
	{
		struct wsn__plan_params p;
		params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 32768, 16384);
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
		ck_assert_uint_eq(kp.cluster, 2);
		ck_assert_ptr_nonnull(strstr(kp.why, "no fit with 1 CTA per row: the row split over a cluster of 2 CTAs"));
		ck_assert_ptr_nonnull(strstr(kp.entry, "_h32768_c2"));
		check_ws_plan(&h, &kp);
		params(&p, WSN_LAYERNORM_BWD, WSN_F32, 32768, 16384); /* half a row of dy and x is 128 KB */
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
		ck_assert_uint_eq(kp.cluster, 4);
		check_ws_plan(&h, &kp);
		/* a forward row is never split */
		params(&p, WSN_LAYERNORM_FWD, WSN_F32, 65536, 16384);
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_ESHAPE);
	}
	/* nothing fits, and an odd row does not split: the error names the budget */
	{
		struct wsn__plan_params p;
		params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 32769, 16384);
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_ESHAPE);
		ck_assert_ptr_nonnull(strstr(wsn_last_error(), "register budget"));
		params(&p, WSN_LAYERNORM_BWD, WSN_F32, 32769, 16384); /* a row of dy and x is 256 KB */
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_ESHAPE);
		ck_assert_ptr_nonnull(strstr(wsn_last_error(), "shared-memory budget"));
	}
}
END_TEST

/* Forced parameters are honoured, or rejected naming the budget they break. */
START_TEST(test_ws_forced_options)
{
	struct wsn__gpu_props h;
	struct wsn__plan_params p;
	struct wsn__kernel_plan kp;

	wsn__gpu_props_h100(&h);
	params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 2048, 16384);
	p.opts.groups = 2;
	p.opts.unroll = 1;
	p.opts.stages = 6;
	p.opts.block_threads = 256;
	ck_assert_msg(wsn__ws_plan(&h, &p, &kp) == 0, "%s", wsn_last_error());
	check_ws_plan(&h, &kp);
	ck_assert_uint_eq(kp.bdimx, 256);
	ck_assert_uint_eq(kp.bdimy, 2);
	ck_assert_uint_eq(kp.unroll, 1);
	ck_assert_uint_eq(kp.stages, 6);
	ck_assert_ptr_nonnull(strstr(kp.why, "forced parameters kept"));
	/* each stage is one row group's: 3 stages cannot be shared by 2 forced groups (a slot two groups
	 * share made the GPU wait pass on a stage not yet filled: launch failures, NOTES v15) */
	p.opts.stages = 3;
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "forced: 3 stages for 2 row groups"));
	/* forced stages, free groups (the plan has 8 groups of 32 threads): the most whole warpgroups
	 * that divide them, or, where groups of 32-thread rows (fours) cannot, rows of 128 threads */
	{
		static const struct {
			unsigned stages, bdimx, bdimy;
			const char *why;
		} fs[] = {
			{ 12, 32, 4, "4 row groups, not 8: each of the 12 stages belongs to one" },
			{ 9, 128, 1, "bdimx 128, not 32: 1 row group, not 8" },
		};
		params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 2048, 16384);
		p.opts.cluster = 4;
		for (size_t i = 0; i < WSN_ARRAY_SIZE(fs); i++) {
			p.opts.stages = (int)fs[i].stages;
			ck_assert_msg(wsn__ws_plan(&h, &p, &kp) == 0, "%s", wsn_last_error());
			check_ws_plan(&h, &kp);
			ck_assert_uint_eq(kp.bdimx, fs[i].bdimx);
			ck_assert_uint_eq(kp.bdimy, fs[i].bdimy);
			ck_assert_uint_eq(kp.stages, fs[i].stages);
			ck_assert_ptr_nonnull(strstr(kp.why, fs[i].why));
		}
	}
	p.opts.block_threads = 32; /* and with the 32 threads forced too, no plan */
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "the stages must be a multiple of 4"));
	/* every combination the GPU test forces plans or is refused with a named budget */
	for (int y = 1; y <= 2; y++)
		for (int u = 1; u <= 4; u *= 2)
			for (int s = 2; s <= 8; s *= 2)
				for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++) {
					int e;
					params(&p, all_ops[o], WSN_BF16, 1000, 2999);
					p.opts.groups = y;
					p.opts.unroll = u;
					p.opts.stages = s;
					e = wsn__ws_plan(&h, &p, &kp);
					ck_assert_msg(e == 0 || (e == WSN_EINVAL && strstr(wsn_last_error(), "budget")),
						      "%s %d/%d/%d: %s", wsn_op_name(all_ops[o]), y, u, s, wsn_last_error());
					if (!e) {
						check_ws_plan(&h, &kp);
						ck_assert_uint_eq(kp.bdimy, (unsigned)y);
						ck_assert_uint_eq(kp.unroll, (unsigned)u);
						ck_assert_uint_eq(kp.stages, (unsigned)s);
					}
				}
	/* a forced cluster */
	params(&p, WSN_RMSNORM_BWD, WSN_BF16, 4096, 16384);
	p.opts.cluster = 4;
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
	ck_assert_uint_eq(kp.cluster, 4);
	check_ws_plan(&h, &kp);
	p.opts.cluster = 3;
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "1, 2, 4 or 8"));
	p.opts.cluster = 16;
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_EINVAL);
	params(&p, WSN_RMSNORM_BWD, WSN_BF16, 4100, 16384);
	p.opts.cluster = 2;
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "whole 16-byte vectors"));
	params(&p, WSN_RMSNORM_FWD, WSN_BF16, 4096, 16384);
	p.opts.cluster = 2;
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "only the backward"));
	params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 65536, 16384); /* forced: no larger cluster is tried */
	p.opts.cluster = 2;
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_EINVAL);
	/* rejections */
	params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 16384, 16384);
	p.opts.stages = 8;
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "shared-memory budget"));
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "forced"));
	params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 4096, 16384);
	p.opts.groups = 4;
	p.opts.unroll = 4;
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "register budget"));
	params(&p, WSN_RMSNORM_FWD, WSN_BF16, 4096, 16384);
	p.opts.groups = 8;
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "threads budget"));
	params(&p, WSN_RMSNORM_FWD, WSN_BF16, 4096, 16384);
	p.opts.block_threads = 192;
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "multiple of 128"));
	params(&p, WSN_RMSNORM_FWD, WSN_BF16, 4096, 16384);
	p.opts.unroll = 16;
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "at most 8"));
	/* threads per row above 128 with the groups free: one group of that many threads (this once
	 * divided by zero groups), through approach auto as well, which searches ws too */
	for (unsigned bx = 256; bx <= 896; bx += 128)
		for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++) {
			int e;
			params(&p, all_ops[o], WSN_BF16, 16384, 16384);
			p.opts.block_threads = (int)bx;
			e = wsn__ws_plan(&h, &p, &kp);
			ck_assert_msg(e == 0 || (e == WSN_EINVAL && strstr(wsn_last_error(), "budget")), "%s bdimx %u: %s",
				      wsn_op_name(all_ops[o]), bx, wsn_last_error());
			if (!e) {
				check_ws_plan(&h, &kp);
				ck_assert_uint_eq(kp.bdimx, bx);
				ck_assert_uint_eq(kp.bdimy, 1);
			}
			p.opts.approach = WSN_APPROACH_AUTO;
			e = wsn__plan_kernel(&h, &p, &kp);
			ck_assert_msg(e == 0 || e == WSN_EINVAL, "%s bdimx %u auto: %s", wsn_op_name(all_ops[o]), bx,
				      wsn_last_error());
		}
}
END_TEST

/* ws plan of op x dt x hidden x rows with the given options: 0 and *kp, or the error. */
static int ws_plan_of(const struct wsn__gpu_props *g, enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows,
		      int bdimx, int unroll, struct wsn__kernel_plan *kp)
{
	struct wsn__plan_params p;
	int err;

	params(&p, op, dt, hidden, rows);
	p.opts.block_threads = bdimx;
	p.opts.unroll = unroll;
	if ((err = wsn__ws_plan(g, &p, kp)) == 0)
		check_ws_plan(g, kp);
	return err;
}

/*
 * The planner's corners: a row that one CTA holds with a ring of one stage is split wider for a ring
 * of 2+; bdimx does not grow into a width whose registers the verdict rejects; unroll does not grow
 * past the rows the grid's row groups can share; auto's "any row count" includes fewer rows than
 * SMs; a forced unroll the narrow start cannot hold is planned from 128 threads a row; a row too
 * long for the vectors a thread may hold says so. And on every plan: the estimate within the row
 * groups' registers, and the verdict agreeing with the stages and spare registers.
 */
START_TEST(test_ws_planner_corners)
{
	struct wsn__gpu_props h;
	struct wsn__kernel_plan kp;
	struct wsn__plan_params p;

	wsn__gpu_props_h100(&h);
	/* one stage with 1 CTA a row (RMSNorm bwd bf16 24K, LayerNorm bwd bf16 33024): wider */
	ck_assert_int_eq(ws_plan_of(&h, WSN_RMSNORM_BWD, WSN_BF16, 24576, 16384, 0, 0, &kp), 0);
	ck_assert_msg(kp.cluster >= 2 && kp.stages >= 2 && kp.ws_good, "%s: %u stages over %u: %s", kp.entry, kp.stages,
		      kp.cluster, kp.why);
	ck_assert_ptr_nonnull(strstr(kp.why, "one stage with 1 CTA per row"));
	ck_assert_int_eq(ws_plan_of(&h, WSN_LAYERNORM_BWD, WSN_BF16, 33024, 16384, 0, 0, &kp), 0);
	ck_assert_msg(kp.cluster >= 2 && kp.stages >= 2 && kp.ws_good, "%s: %s", kp.entry, kp.why);
	/* bdimx stays where the registers leave the verdict good (384 threads left 6 spare) */
	ck_assert_int_eq(ws_plan_of(&h, WSN_LAYERNORM_BWD, WSN_F16, 4097, 16384, 0, 0, &kp), 0);
	ck_assert_msg(kp.ws_good && kp.bdimx == 256, "%s: bdimx %u: %s", kp.entry, kp.bdimx, kp.why);
	/* 132 rows: unroll 1, every SM a row (was 4: 33 blocks) */
	ck_assert_int_eq(ws_plan_of(&h, WSN_RMSNORM_FWD, WSN_BF16, 4096, 132, 0, 0, &kp), 0);
	ck_assert_uint_eq(kp.unroll, 1);
	/* 264 rows: no group left idle, with the search (RMSNorm bwd 1.5K) and with a measured shape
	 * (RMSNorm bwd f16 2K over 2: 4 groups, just enough; bf16 has its shape for few rows first, over 4
	 * with 8 groups, just enough too); 263 rows leave the shape to the search */
	ck_assert_int_eq(ws_plan_of(&h, WSN_RMSNORM_BWD, WSN_BF16, 1536, 264, 0, 0, &kp), 0);
	ck_assert_msg(264 / kp.unroll >= 132 * kp.bdimy, "%s: unroll %u with %u groups", kp.entry, kp.unroll, kp.bdimy);
	ck_assert_int_eq(ws_plan_of(&h, WSN_RMSNORM_BWD, WSN_F16, 2048, 264, 0, 0, &kp), 0);
	ck_assert_msg(kp.cluster == 2 && kp.bdimy == 4 && kp.unroll == 1, "%s: %u groups, unroll %u: %s", kp.entry,
		      kp.bdimy, kp.unroll, kp.why);
	ck_assert_int_eq(ws_plan_of(&h, WSN_RMSNORM_BWD, WSN_BF16, 2048, 264, 0, 0, &kp), 0);
	ck_assert_msg(kp.cluster == 4 && kp.bdimy == 8 && kp.unroll == 1, "%s: %u groups, unroll %u: %s", kp.entry,
		      kp.bdimy, kp.unroll, kp.why);
	ck_assert_int_eq(ws_plan_of(&h, WSN_RMSNORM_BWD, WSN_BF16, 2048, 263, 0, 0, &kp), 0);
	ck_assert_msg(263 / kp.unroll >= 132 * kp.bdimy, "%s: unroll %u with %u groups", kp.entry, kp.unroll, kp.bdimy);
	ck_assert_msg(kp.cluster <= 1, "%s: the split was measured only with its shape: %s", kp.entry, kp.why);
	ck_assert_ptr_nonnull(strstr(kp.why, "measured shape passed over (too few rows for its row groups)"));
	/* forced unroll 8 on a short row: from 128 threads a row */
	ck_assert_int_eq(ws_plan_of(&h, WSN_LAYERNORM_FWD, WSN_BF16, 1024, 16384, 0, 8, &kp), 0);
	ck_assert_uint_eq(kp.unroll, 8);
	ck_assert_ptr_nonnull(strstr(kp.why, "not with 32 threads a row: from 128"));
	/* more vectors a thread than the kernels take: named as such, not as registers */
	ck_assert_int_eq(ws_plan_of(&h, WSN_RMSNORM_FWD, WSN_BF16, 4352, 16384, 32, 0, &kp), WSN_EINVAL);
	ck_assert_msg(strstr(wsn_last_error(), "hold 17 vectors of 16 bytes each per row, more than the 16"), "%s",
		      wsn_last_error());
	/* auto at a long row: ws at any row count, fewer rows than SMs too */
	params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 32768, 131);
	p.opts.approach = WSN_APPROACH_AUTO;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_msg(kp.approach == WSN_APPROACH_WS, "%s", kp.why);

	/* every plan of a sweep: within its registers, and a verdict that matches its parameters */
	for (size_t o = 0; o < sizeof(all_ops) / sizeof(all_ops[0]); o++)
		for (size_t d = 0; d < sizeof(all_dtypes) / sizeof(all_dtypes[0]); d++)
			for (int64_t hd = 1024; hd <= 65536; hd += hd < 8192 ? 1024 : 8192) {
				if (ws_plan_of(&h, all_ops[o], all_dtypes[d], hd, 16384, 0, 0, &kp))
					continue;
				ck_assert_msg(kp.est_regs <= kp.regs_compute || !kp.ws_good, "%s: ~%u of %u registers, good",
					      kp.entry, kp.est_regs, kp.regs_compute);
				if (kp.stages < 2)
					ck_assert_msg(!kp.ws_good, "%s: one stage called good", kp.entry);
				if (kp.ws_good)
					ck_assert_ptr_nonnull(strstr(kp.why, "heuristic: good"));
			}
}
END_TEST

/* A plan under approach auto: the family it must get, its shape (0: not checked), the opening of its
 * rule, and the row of the shape table its reasoning names (NULL: not checked). */
struct auto_case {
	enum wsn_op op;
	enum wsn_dtype dt;
	int64_t hidden, rows;
	int arch; /* the modelled device: 90 the H100, 100 the B200 */
	enum wsn_approach approach;
	unsigned cluster, bdimx, bdimy;
	const char *rule;
	const char *row;
};

#define LN_B WSN_LAYERNORM_BWD
#define RMS_B WSN_RMSNORM_BWD
#define AUTO_WS WSN_APPROACH_WS
#define AUTO_MW WSN_APPROACH_MULTIWAVE
#define LN_RULE(range) "auto: ws (rule for layernorm-bwd hidden " range ", NOTES v28): heuristic good and "
#define RMS_RULE(range) "auto: ws (rule for rmsnorm-bwd hidden " range ", NOTES v28): heuristic good and "

static const struct auto_case auto_cases[] = {
	/* few rows per SM (NOTES v28): ws at any row count from 2049 (LayerNorm) and from 4K (RMSNorm) */
	{ LN_B, WSN_BF16, 4096, 16384, 90, AUTO_WS, 8, 0, 0, LN_RULE("4096-16384") "124 rows per SM > 0",
	  "measured split (NOTES v5: layernorm-bwd rows of 6144-24575 bytes): the row over a cluster of 8 CTAs, 512 columns" },
	{ LN_B, WSN_BF16, 4096, 128, 90, AUTO_WS, 0, 0, 0, LN_RULE("4096-16384") "0 rows per SM > 0", NULL },
	{ LN_B, WSN_BF16, 16384, 1000, 90, AUTO_WS, 0, 0, 0, LN_RULE("4096-16384") "7 rows per SM > 0", NULL },
	{ RMS_B, WSN_BF16, 4096, 256, 90, AUTO_WS, 0, 0, 0, RMS_RULE("4096-16384") "1 rows per SM > 0", NULL },
	{ RMS_B, WSN_BF16, 4096, 1000, 90, AUTO_WS, 0, 0, 0, RMS_RULE("4096-16384") "7 rows per SM > 0", NULL },
	{ RMS_B, WSN_BF16, 8192, 131, 90, AUTO_WS, 0, 0, 0, RMS_RULE("4096-16384") "0 rows per SM > 0", NULL },
	/* LayerNorm 1-2048 in 16-bit: ws at any row count */
	{ LN_B, WSN_BF16, 2048, 8192, 90, AUTO_WS, 0, 0, 0, LN_RULE("1025-2048") "62 rows per SM > 0", NULL },
	{ LN_B, WSN_BF16, 2048, 128, 90, AUTO_WS, 0, 0, 0, LN_RULE("1025-2048") "0 rows per SM > 0", NULL },
	{ LN_B, WSN_BF16, 2048, 16384, 90, AUTO_WS, 2, 64, 4, LN_RULE("1025-2048") "124 rows per SM > 0",
	  "measured shape (NOTES v30: layernorm-bwd rows of 4096-4607 bytes in bf16): over a cluster of 2 CTAs" },
	{ LN_B, WSN_BF16, 1536, 512, 90, AUTO_WS, 0, 0, 0, LN_RULE("1025-2048") "3 rows per SM > 0", NULL },
	{ LN_B, WSN_BF16, 1024, 256, 90, AUTO_WS, 0, 0, 0, LN_RULE("1-1024") "1 rows per SM > 0", NULL },
	{ LN_B, WSN_BF16, 1024, 16384, 90, AUTO_WS, 1, 64, 6, LN_RULE("1-1024") "124 rows per SM > 0",
	  "measured shape (NOTES v26: layernorm-bwd rows of 2048-2303 bytes in bf16)" },
	/* f32 (rows of twice the bytes) keeps multi-wave up to 12 rows per SM at 1-2048 */
	{ LN_B, WSN_F32, 1536, 132 * 13 - 1, 90, AUTO_MW, 0, 0, 0,
	  "auto: multi-wave (rule for layernorm-bwd hidden 1-2048, f32, NOTES v28): 12 rows per SM <= 12", NULL },
	{ LN_B, WSN_F32, 1536, 132 * 13, 90, AUTO_WS, 0, 0, 0, LN_RULE("1-2048, f32") "13 rows per SM > 12", NULL },
	{ RMS_B, WSN_F32, 1536, 132 * 13 - 1, 90, AUTO_MW, 0, 0, 0,
	  "auto: multi-wave (rule for rmsnorm-bwd hidden 1-2048, f32, NOTES v28): 12 rows per SM <= 12", NULL },
	{ RMS_B, WSN_F32, 1536, 132 * 13, 90, AUTO_WS, 0, 0, 0, RMS_RULE("1-2048, f32") "13 rows per SM > 12", NULL },
	{ LN_B, WSN_F32, 4096, 1024, 90, AUTO_WS, 0, 0, 0, LN_RULE("4096-16384") "7 rows per SM > 0", NULL },
	/* RMSNorm 1025-2048 from 2 rows per SM; 1-1024 at any row count */
	{ RMS_B, WSN_BF16, 2048, 132 * 2, 90, AUTO_WS, 0, 0, 0, RMS_RULE("1025-2048") "2 rows per SM > 1", NULL },
	{ RMS_B, WSN_BF16, 2048, 132 * 2 - 1, 90, AUTO_MW, 0, 0, 0,
	  "auto: multi-wave (rule for rmsnorm-bwd hidden 1025-2048, NOTES v28): 1 rows per SM <= 1", NULL },
	{ RMS_B, WSN_BF16, 1024, 128, 90, AUTO_WS, 0, 0, 0, RMS_RULE("1-1024") "0 rows per SM > 0", NULL },
	/* between 2K and 4K: LayerNorm ws at any row count; RMSNorm only in its measured shapes (2560 and
	 * 3072 16-bit, 2304 and 3584 bf16), not in the search's (2944; f32 3072), from 2 rows per SM */
	{ LN_B, WSN_BF16, 3072, 16384, 90, AUTO_WS, 4, 32, 8, LN_RULE("2049-4095") "124 rows per SM > 0",
	  "measured shape (NOTES v25: layernorm-bwd rows of 6144-6911 bytes in bf16)" },
	{ LN_B, WSN_BF16, 3072, 1024, 90, AUTO_WS, 0, 0, 0, LN_RULE("2049-4095") "7 rows per SM > 0", NULL },
	{ RMS_B, WSN_BF16, 3072, 16384, 90, AUTO_WS, 4, 32, 8, RMS_RULE("2049-4095") "124 rows per SM > 1",
	  "measured shape (NOTES v25: rmsnorm-bwd rows of 6144-6911 bytes in bf16)" },
	{ RMS_B, WSN_BF16, 2560, 16384, 90, AUTO_WS, 2, 32, 4, RMS_RULE("2049-4095"), NULL },
	{ RMS_B, WSN_BF16, 3072, 1024, 90, AUTO_WS, 0, 0, 0, RMS_RULE("2049-4095") "7 rows per SM > 1", NULL },
	{ RMS_B, WSN_BF16, 3584, 132 * 2 - 1, 90, AUTO_MW, 0, 0, 0,
	  "auto: multi-wave (rule for rmsnorm-bwd hidden 2049-4095, NOTES v28): 1 rows per SM <= 1", NULL },
	{ RMS_B, WSN_BF16, 2944, 16384, 90, AUTO_MW, 0, 0, 0, "auto: multi-wave, no ws rule for rmsnorm-bwd", NULL },
	{ RMS_B, WSN_BF16, 2304, 16384, 90, AUTO_WS, 2, 32, 4, RMS_RULE("2049-4095"),
	  "measured shape (NOTES v26: rmsnorm-bwd rows of 4608-5119 bytes in bf16)" },
	{ RMS_B, WSN_BF16, 3584, 16384, 90, AUTO_WS, 4, 64, 6, RMS_RULE("2049-4095"), NULL },
	{ RMS_B, WSN_BF16, 3072, 16384, 100, AUTO_MW, 0, 0, 0, "auto: multi-wave, no ws rule", NULL }, /* no shapes */
	{ RMS_B, WSN_F32, 3072, 16384, 90, AUTO_MW, 0, 0, 0, "auto: multi-wave, no ws rule", NULL }, /* none at 12 KB */
	/* a heuristic that is not good (one stage, and no whole-vector split): multi-wave */
	{ LN_B, WSN_F32, 12289, 16384, 90, AUTO_MW, 0, 0, 0, "auto: multi-wave, the ws heuristic is not good here", NULL },
	/* not good either, but multi-wave would keep its sums in global memory for more rows than CTAs */
	{ LN_B, WSN_BF16, 131072, 2048, 90, AUTO_WS, 0, 0, 0, "auto: ws though its heuristic is not good (NOTES v24)", NULL },
	{ LN_B, WSN_F32, 98304, 2048, 90, AUTO_WS, 0, 0, 0, "auto: ws though its heuristic is not good (NOTES v24)", NULL },
	{ RMS_B, WSN_BF16, 212992, 2048, 90, AUTO_WS, 0, 0, 0, "auto: ws though its heuristic is not good (NOTES v24)", NULL },
	{ RMS_B, WSN_F32, 106496, 2048, 90, AUTO_WS, 0, 0, 0, "auto: ws though its heuristic is not good (NOTES v24)", NULL },
	{ LN_B, WSN_BF16, 131072, 132, 90, AUTO_MW, 0, 0, 0, "auto: multi-wave, the ws heuristic is not good here", NULL },
	{ LN_B, WSN_BF16, 131072, 133, 90, AUTO_WS, 0, 0, 0, "auto: ws though its heuristic is not good (NOTES v24)", NULL },
	/* the forward: no rule, multi-wave */
	{ WSN_LAYERNORM_FWD, WSN_BF16, 4096, 16384, 90, AUTO_MW, 0, 0, 0, "auto: multi-wave, no ws rule for layernorm-fwd",
	  NULL },
	/* past 16K: ws (the row split over a cluster) at any row count; at 1024 rows the shape for few rows */
	{ LN_B, WSN_BF16, 32768, 1024, 90, AUTO_WS, 8, 128, 2, LN_RULE("16385 and up") "7 rows per SM > 0",
	  "measured shape (NOTES v27: layernorm-bwd rows of 65536-73727 bytes in bf16, up to 62 rows per SM)" },
	/* no ws kernel fits (an odd row does not split): multi-wave, saying why */
	{ LN_B, WSN_BF16, 32769, 16384, 90, AUTO_MW, 0, 0, 0, "auto: multi-wave, no ws kernel fits", NULL },
};

/* approach auto: the rule table decides, each plan naming the rule and the shape table's row. */
START_TEST(test_ws_auto)
{
	struct wsn__gpu_props h100, b200;

	wsn__gpu_props_h100(&h100);
	wsn__gpu_props_b200(&b200);
	for (size_t i = 0; i < WSN_ARRAY_SIZE(auto_cases); i++) {
		const struct auto_case *c = &auto_cases[i];
		struct wsn__plan_params p;
		struct wsn__kernel_plan kp;
		char want[512];

		params(&p, c->op, c->dt, c->hidden, c->rows);
		p.opts.approach = WSN_APPROACH_AUTO;
		ck_assert_int_eq(wsn__plan_kernel(c->arch == 100 ? &b200 : &h100, &p, &kp), 0);
		ck_assert_msg(kp.approach == c->approach && !strncmp(kp.rule, c->rule, strlen(c->rule)),
			      "case %zu: %s %s hidden %lld rows %lld: %s: %s", i, wsn_op_name(c->op), wsn_dtype_name(c->dt),
			      (long long)c->hidden, (long long)c->rows, wsn_approach_name(kp.approach), kp.rule);
		/* the rule heads the reasoning */
		snprintf(want, sizeof(want), "%s; ", kp.rule);
		ck_assert_msg(!strncmp(kp.why, want, strlen(want)), "case %zu: %s", i, kp.why);
		ck_assert_msg(!c->cluster || ((kp.cluster > 1 ? kp.cluster : 1) == c->cluster &&
					      (!c->bdimx || (kp.bdimx == c->bdimx && kp.bdimy == c->bdimy))),
			      "case %zu: cluster %u %ux%u: %s", i, kp.cluster, kp.bdimy, kp.bdimx, kp.why);
		ck_assert_msg(!c->row || strstr(kp.why, c->row), "case %zu: want '%s': %s", i, c->row, kp.why);
	}
}
END_TEST

/* Where multi-wave keeps its sums in global memory, auto takes ws of one stage. */
START_TEST(test_ws_auto_global_sums)
{
	static const struct { enum wsn_op op; enum wsn_dtype dt; int64_t h; } wide[] = {
		{ WSN_LAYERNORM_BWD, WSN_BF16, 131072 }, { WSN_LAYERNORM_BWD, WSN_F32, 98304 },
		{ WSN_RMSNORM_BWD, WSN_BF16, 212992 }, { WSN_RMSNORM_BWD, WSN_F32, 106496 },
	};
	struct wsn__gpu_props h;
	struct wsn__plan_params p;
	struct wsn__kernel_plan kp, mw;

	wsn__gpu_props_h100(&h);
	for (size_t i = 0; i < WSN_ARRAY_SIZE(wide); i++) {
		params(&p, wide[i].op, wide[i].dt, wide[i].h, 2048);
		p.opts.approach = WSN_APPROACH_MULTIWAVE;
		ck_assert_int_eq(wsn__plan_kernel(&h, &p, &mw), 0);
		ck_assert_int_eq(mw.dw_store, WSN_STORE_GLOBAL);
		p.opts.approach = WSN_APPROACH_AUTO;
		ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
		ck_assert_msg(kp.approach == WSN_APPROACH_WS && !kp.ws_good && kp.stages == 1, "%s", kp.why);
	}
	/* no more rows than the multi-wave grid has CTAs: each CTA's sums are written once */
	params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 131072, 132);
	p.opts.approach = WSN_APPROACH_AUTO;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_msg(kp.approach == WSN_APPROACH_MULTIWAVE && kp.max_grid <= 132, "%s", kp.why);
	/* sums that fit the shared memory keep the heuristic's verdict */
	params(&p, WSN_LAYERNORM_BWD, WSN_F32, 12289, 16384);
	p.opts.approach = WSN_APPROACH_MULTIWAVE;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_int_ne(kp.dw_store, WSN_STORE_GLOBAL);
}
END_TEST

/* Measured shapes (H100 only), each naming the NOTES section of its row in the shape table: taken as
 * measured where nothing is forced, never on the B200 model, and a forced parameter (even the same
 * cluster) gets the search's shape with the statistics loaded by the row groups. */
START_TEST(test_ws_measured_shapes)
{
	static const struct {
		enum wsn_op op;
		enum wsn_dtype dt;
		int64_t hidden;
		const char *note;
		unsigned cluster, bdimx, bdimy, unroll, stages, ring, b200_cluster;
	} sh[] = {
		{ WSN_RMSNORM_BWD, WSN_BF16, 2048, "v19", 2, 64, 4, 1, 12, 0, 1 },
		{ WSN_RMSNORM_BWD, WSN_F16, 2048, "v19", 2, 64, 4, 1, 12, 0, 1 },
		{ WSN_RMSNORM_BWD, WSN_F32, 1024, "v19", 2, 64, 4, 1, 12, 0, 1 },
		{ WSN_RMSNORM_BWD, WSN_BF16, 1024, "v19", 1, 64, 4, 1, 12, 0, 1 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 8192, "v19", 8, 32, 8, 1, 16, 0, 8 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 2048, "v30", 2, 64, 4, 2, 12, 1, 4 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 2048, "v30", 2, 64, 4, 2, 12, 1, 4 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 2304, "v25", 4, 32, 8, 2, 16, 0, 4 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 4608, "v25", 8, 32, 8, 2, 16, 0, 8 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 2560, "v25", 2, 32, 4, 1, 16, 0, 4 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 2560, "v25", 2, 64, 4, 1, 16, 0, 4 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 3072, "v25", 4, 32, 8, 1, 16, 0, 8 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 3072, "v25", 4, 32, 8, 1, 16, 0, 8 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 5120, "v25", 2, 64, 2, 1, 12, 0, 8 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 5120, "v25", 4, 64, 4, 1, 16, 0, 8 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 10240, "v25", 8, 32, 8, 1, 16, 0, 8 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 10240, "v25", 8, 64, 4, 1, 16, 0, 8 },
		{ WSN_RMSNORM_BWD, WSN_BF16, 2560, "v25", 2, 32, 4, 1, 16, 0, 1 },
		{ WSN_RMSNORM_BWD, WSN_F16, 3072, "v25", 4, 32, 8, 1, 16, 0, 8 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 1024, "v26", 1, 64, 6, 1, 12, 0, 1 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 1536, "v26", 2, 32, 8, 1, 16, 0, 1 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 1536, "v26", 2, 32, 8, 1, 16, 0, 1 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 2304, "v26", 2, 64, 4, 1, 16, 0, 4 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 3584, "v26", 2, 128, 3, 1, 15, 0, 8 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 4608, "v26", 2, 128, 2, 1, 14, 0, 8 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 7168, "v26", 4, 128, 3, 1, 15, 0, 8 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 7168, "v26", 4, 128, 3, 1, 15, 0, 8 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 12288, "v26", 8, 64, 2, 2, 10, 0, 2 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 12288, "v26", 8, 128, 2, 2, 10, 0, 2 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 16384, "v26", 8, 128, 3, 1, 15, 0, 2 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 16384, "v26", 8, 128, 3, 1, 15, 0, 2 },
		{ WSN_RMSNORM_BWD, WSN_BF16, 2304, "v26", 2, 32, 4, 1, 16, 0, 1 },
		{ WSN_RMSNORM_BWD, WSN_BF16, 3584, "v26", 4, 64, 6, 1, 12, 0, 8 },
		{ WSN_RMSNORM_BWD, WSN_BF16, 4608, "v26", 4, 64, 4, 1, 16, 0, 8 },
	};
	struct wsn__gpu_props h, b;
	struct wsn__plan_params p;
	struct wsn__kernel_plan kp;

	wsn__gpu_props_h100(&h);
	wsn__gpu_props_b200(&b);
	for (size_t i = 0; i < WSN_ARRAY_SIZE(sh); i++) {
		char want[64];

		params(&p, sh[i].op, sh[i].dt, sh[i].hidden, 16384);
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
		check_ws_plan(&h, &kp);
		ck_assert_msg(kp.cluster == sh[i].cluster && kp.bdimx == sh[i].bdimx && kp.bdimy == sh[i].bdimy &&
			      kp.unroll == sh[i].unroll && kp.stages == sh[i].stages,
			      "%s: cluster %u bdimx %u bdimy %u unroll %u stages %u: %s", kp.entry, kp.cluster, kp.bdimx,
			      kp.bdimy, kp.unroll, kp.stages, kp.why);
		snprintf(want, sizeof(want), "measured shape (NOTES %s: ", sh[i].note);
		ck_assert_msg(strstr(kp.why, want) != NULL, "%s: want '%s': %s", kp.entry, want, kp.why);
		ck_assert_int_eq(kp.stats_ring, (int)sh[i].ring);
		ck_assert_int_eq(kp.ws_shape, 1);
		ck_assert_int_eq(wsn__ws_plan(&b, &p, &kp), 0);
		ck_assert_msg(!strstr(kp.why, "measured shape") && !kp.ws_shape, "%s: %s", kp.entry, kp.why);
		ck_assert_uint_eq(kp.cluster > 1 ? kp.cluster : 1, sh[i].b200_cluster);
		ck_assert_int_eq(kp.stats_ring, 0);
		p.opts.cluster = (int)sh[i].cluster;
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
		ck_assert_msg(!strstr(kp.why, "measured shape") && strstr(kp.why, "search: ") &&
			      (kp.cluster > 1 ? kp.cluster : 1) == sh[i].cluster,
			      "%s: unroll %u: %s", kp.entry, kp.unroll, kp.why);
		ck_assert_int_eq(kp.stats_ring, 0);
	}
}
END_TEST

/* Measured shapes for fewer rows (NOTES v27): taken up to their rows per SM (rows / 132 on the H100),
 * past that the shape for more rows or the search's; not on the B200 model, not for f32 (bf16 and
 * f16 measured), and for RMSNorm 2K only in bf16. */
START_TEST(test_ws_row_count_shapes)
{
	static const struct {
		enum wsn_op op;
		enum wsn_dtype dt;
		int64_t hidden, max_per_sm;
		unsigned cluster, bdimx, bdimy, unroll, stages;
	} rs[] = {
		{ WSN_LAYERNORM_BWD, WSN_BF16, 1024, 16, 1, 64, 4, 2, 16 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 1024, 16, 1, 64, 4, 2, 16 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 2048, 16, 4, 32, 8, 1, 16 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 2048, 16, 4, 32, 8, 1, 16 },
		{ WSN_RMSNORM_BWD, WSN_BF16, 2048, 16, 4, 32, 8, 1, 16 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 4096, 92, 4, 64, 6, 1, 12 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 4096, 92, 4, 64, 6, 1, 12 },
		{ WSN_RMSNORM_BWD, WSN_BF16, 4096, 92, 4, 64, 6, 1, 12 },
		{ WSN_RMSNORM_BWD, WSN_F16, 4096, 92, 4, 64, 6, 1, 12 },
		{ WSN_RMSNORM_BWD, WSN_BF16, 8192, 62, 8, 64, 6, 1, 12 },
		{ WSN_RMSNORM_BWD, WSN_F16, 8192, 62, 8, 64, 6, 1, 12 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 32768, 62, 8, 128, 2, 1, 8 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 32768, 62, 8, 128, 2, 1, 8 },
		{ WSN_RMSNORM_BWD, WSN_BF16, 32768, 31, 8, 128, 2, 1, 8 },
		{ WSN_RMSNORM_BWD, WSN_F16, 32768, 31, 8, 128, 2, 1, 8 },
		{ WSN_RMSNORM_BWD, WSN_F16, 16384, 31, 8, 64, 4, 1, 16 },
	};
	struct wsn__gpu_props h, b;
	struct wsn__plan_params p;
	struct wsn__kernel_plan kp;

	wsn__gpu_props_h100(&h);
	wsn__gpu_props_b200(&b);
	for (size_t i = 0; i < WSN_ARRAY_SIZE(rs); i++) {
		/* 2048 rows, the most rows at the limit, the fewest past it */
		const int64_t rows[3] = { 2048, (rs[i].max_per_sm + 1) * h.sms - 1, (rs[i].max_per_sm + 1) * h.sms };
		char want[64];

		snprintf(want, sizeof(want), "NOTES v27: ");
		for (int r = 0; r < 3; r++) {
			int expect = r < 2, got;
			params(&p, rs[i].op, rs[i].dt, rs[i].hidden, rows[r]);
			ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
			check_ws_plan(&h, &kp);
			got = kp.cluster == rs[i].cluster && kp.bdimx == rs[i].bdimx && kp.bdimy == rs[i].bdimy &&
			      kp.unroll == rs[i].unroll && kp.stages == rs[i].stages && strstr(kp.why, want) &&
			      strstr(kp.why, " rows per SM): ") != NULL;
			ck_assert_msg(got == expect, "%s at %lld rows: cluster %u %ux%u unroll %u stages %u, want the row-count "
				      "shape %s: %s", kp.entry, (long long)rows[r], kp.cluster, kp.bdimy, kp.bdimx,
				      kp.unroll, kp.stages, expect ? "" : "no more", kp.why);
			ck_assert_int_eq(wsn__ws_plan(&b, &p, &kp), 0);
			ck_assert_msg(!strstr(kp.why, " rows per SM): "), "B200 model: %s", kp.why);
		}
		/* f32 of the same row bytes: not measured there */
		params(&p, rs[i].op, WSN_F32, rs[i].hidden / 2, 2048);
		if (wsn__ws_plan(&h, &p, &kp) == 0)
			ck_assert_msg(!strstr(kp.why, " rows per SM): "), "f32 %lld: %s", (long long)rs[i].hidden / 2, kp.why);
	}
	params(&p, WSN_RMSNORM_BWD, WSN_F16, 2048, 2048);
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
	ck_assert_msg(!strstr(kp.why, " rows per SM): "), "RMSNorm bwd f16 2K: %s", kp.why);
}
END_TEST

/* Splits of the shape table by op, row bytes and forced parameters, and its corners. */
START_TEST(test_ws_split_corners)
{
	static const struct {
		enum wsn_op op;
		enum wsn_dtype dt;
		int64_t hidden;
		int groups;       /* forced row groups (0: free) */
		unsigned cluster;
		const char *why;  /* in the plan's reasoning (NULL: not checked) */
	} sp[] = {
		{ WSN_RMSNORM_BWD, WSN_BF16, 4096, 0, 8, "measured split (NOTES v8: rmsnorm-bwd rows of 6144-12287 bytes)" },
		{ WSN_RMSNORM_BWD, WSN_BF16, 1536, 0, 1, NULL }, /* between the measured 1K and 2K */
		{ WSN_RMSNORM_BWD, WSN_F32, 2048, 0, 8, NULL },  /* the row bytes of bf16 4K */
		{ WSN_RMSNORM_BWD, WSN_F32, 4096, 0, 2, NULL },  /* the row bytes of bf16 8K */
		{ WSN_LAYERNORM_BWD, WSN_BF16, 4096, 2, 1, NULL }, /* forced parameters keep a CTA per row */
		{ WSN_LAYERNORM_BWD, WSN_BF16, 4104, 0, 1, NULL }, /* 513 vectors: 8 parts are not whole */
		/* a shape that does not fit the registers (5 vectors a thread): the next row, a split alone */
		{ WSN_LAYERNORM_BWD, WSN_F16, 8256, 0, 8, "measured shape passed over (it does not fit the budgets here); "
		  "measured split (NOTES v5: layernorm-bwd rows of 6144-24575 bytes): the row over a cluster of 8 CTAs, 1032 "
		  "columns each" },
	};
	struct wsn__gpu_props h;
	struct wsn__plan_params p;
	struct wsn__kernel_plan kp;

	wsn__gpu_props_h100(&h);
	for (size_t i = 0; i < WSN_ARRAY_SIZE(sp); i++) {
		params(&p, sp[i].op, sp[i].dt, sp[i].hidden, 16384);
		p.opts.groups = sp[i].groups;
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
		check_ws_plan(&h, &kp);
		ck_assert_msg((kp.cluster > 1 ? kp.cluster : 1) == sp[i].cluster, "%s: cluster %u: %s", kp.entry, kp.cluster,
			      kp.why);
		ck_assert_msg(!sp[i].why || strstr(kp.why, sp[i].why), "%s: want '%s': %s", kp.entry, sp[i].why, kp.why);
	}
	/* the same row bytes in f32 (measured slower with the statistics in the stage): the search's
	 * shape, with the statistics loaded; and too few rows for the groups */
	{
		static const struct {
			enum wsn_dtype dt;
			int64_t hidden, rows;
		} ln2k[] = { { WSN_F32, 1024, 16384 }, { WSN_BF16, 2048, 263 }, { WSN_F16, 2048, 263 } };

		for (size_t i = 0; i < WSN_ARRAY_SIZE(ln2k); i++) {
			params(&p, WSN_LAYERNORM_BWD, ln2k[i].dt, ln2k[i].hidden, ln2k[i].rows);
			ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
			check_ws_plan(&h, &kp);
			ck_assert_msg(kp.stats_ring == 0 && kp.cluster == 4 && !strstr(kp.why, "measured shape ("),
				      "%s: ring %d cluster %u: %s", kp.entry, kp.stats_ring, kp.cluster, kp.why);
			ck_assert_uint_eq(kp.stage_bytes, kp.unroll * 2 * kp.row_bytes);
		}
		params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 2048, 16384);
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
		/* unroll 2: two means then two rstd, 16 bytes after the rows */
		ck_assert_uint_eq(kp.stage_bytes, 2 * 2 * kp.row_bytes + 16);
	}
	params(&p, WSN_LAYERNORM_BWD, WSN_F16, 8256, 16384);
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
	ck_assert_msg(kp.cluster == 8 && kp.bdimx == 128 && kp.unroll == 2, "%s: cluster %u bdimx %u unroll %u: %s",
		      kp.entry, kp.cluster, kp.bdimx, kp.unroll, kp.why);
	/* forced ws where the heuristic says no: ws anyway, and the plan says so */
	params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 17408, 16384);
	p.opts.cluster = 1; /* whole rows: 17408 is a measured split over 2 */
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_int_eq(kp.approach, WSN_APPROACH_WS);
	ck_assert_int_eq(kp.ws_forced, 1);
	ck_assert_ptr_nonnull(strstr(kp.why, "runs anyway"));
	/* stages given with auto: only ws has them */
	params(&p, WSN_RMSNORM_FWD, WSN_BF16, 4096, 1000);
	p.opts.approach = WSN_APPROACH_AUTO;
	p.opts.stages = 3;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_int_eq(kp.approach, WSN_APPROACH_WS);
	ck_assert_uint_eq(kp.stages, 3);
}
END_TEST

/*
 * Autotune's ws shapes: none for the forward or with a forced parameter; every shape listed plans
 * as given (cluster, threads, groups, rows a stage, stages) with a ring, good by the heuristic and
 * described as autotune's (not forced); none is the planner's own; every row group gets rows; the
 * threads' vector slots are at least 70 % full; whole vectors first, then a row a stage; at most max.
 */
START_TEST(test_ws_tune_shapes)
{
	static const struct {
		enum wsn_op op;
		enum wsn_dtype dt;
		int64_t hidden, rows;
		int min_n; /* shapes at least */
	} cs[] = {
		{ WSN_LAYERNORM_BWD, WSN_BF16, 3584, 16384, 4 }, { WSN_LAYERNORM_BWD, WSN_F16, 2304, 16384, 2 },
		{ WSN_LAYERNORM_BWD, WSN_F16, 4608, 16384, 2 },  { WSN_LAYERNORM_BWD, WSN_BF16, 2560, 16384, 4 },
		{ WSN_RMSNORM_BWD, WSN_BF16, 7168, 16384, 4 },   { WSN_LAYERNORM_BWD, WSN_F32, 1536, 16384, 4 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 12288, 300, 1 },  { WSN_RMSNORM_BWD, WSN_F16, 1000, 16384, 1 },
		{ WSN_LAYERNORM_BWD, WSN_BF16, 3592, 16384, 1 },
	};
	struct wsn__gpu_props h;
	struct wsn__plan_params p;
	struct wsn__kernel_plan own, kp;
	struct wsn__ws_shape sh[32], os, ks;

	wsn__gpu_props_h100(&h);
	for (size_t i = 0; i < WSN_ARRAY_SIZE(cs); i++) {
		int n, n3;
		double last_fill = 2;
		unsigned last_u = 0;

		params(&p, cs[i].op, cs[i].dt, cs[i].hidden, cs[i].rows);
		p.opts.approach = WSN_APPROACH_AUTO;
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &own), 0);
		n = wsn__ws_tune_shapes(&h, &p, &own, sh, 32);
		wsn__ws_shape_of(&own, &os);
		printf("tune shapes %s %s h%lld rows %lld (own c%u %ux%u u%u s%u): %d:", wsn_op_name(cs[i].op),
		       wsn_dtype_name(cs[i].dt), (long long)cs[i].hidden, (long long)cs[i].rows, own.cluster, own.bdimx,
		       own.bdimy, own.unroll, own.stages, n);
		ck_assert_msg(n >= cs[i].min_n && n <= 32, "%d shapes", n);
		for (int k = 0; k < n; k++) {
			int64_t nv = (cs[i].hidden / sh[k].cluster + own.vec - 1) / own.vec;
			int64_t slots = (nv + sh[k].bdimx - 1) / sh[k].bdimx * sh[k].bdimx;
			double fill = (double)nv / (double)slots;

			printf(" c%u %ux%u u%u s%u", sh[k].cluster, sh[k].bdimx, sh[k].bdimy, sh[k].unroll, sh[k].stages);
			ck_assert(fill >= 0.7);
			ck_assert_msg(fill < last_fill || (fill == last_fill && sh[k].unroll >= last_u),
				      "shape %d out of order", k);
			last_fill = fill;
			last_u = sh[k].unroll;
			ck_assert(!(os.cluster == sh[k].cluster && os.bdimx == sh[k].bdimx && os.bdimy == sh[k].bdimy &&
				    os.unroll == sh[k].unroll));
			ck_assert(cs[i].rows / sh[k].unroll >= (int64_t)(h.sms / sh[k].cluster) * sh[k].bdimy);
			ck_assert_int_eq(wsn__ws_plan_shape(&h, &p, &sh[k], &kp), 0);
			check_ws_plan(&h, &kp);
			wsn__ws_shape_of(&kp, &ks);
			ck_assert(!memcmp(&ks, &sh[k], sizeof(ks)));
			ck_assert(kp.ws_good && kp.stages >= 2 && !kp.ws_forced);
			ck_assert_msg(strstr(kp.why, "autotune's shape kept; ") && !strstr(kp.why, "forced"), "%s", kp.why);
			for (int j = 0; j < k; j++)
				ck_assert(memcmp(&sh[j], &sh[k], sizeof(sh[k])));
		}
		printf("\n");
		/* at most max, the first max of the full list */
		n3 = wsn__ws_tune_shapes(&h, &p, &own, sh + 16, 3);
		ck_assert_int_eq(n3, n < 3 ? n : 3);
		ck_assert(!memcmp(sh, sh + 16, (size_t)n3 * sizeof(sh[0])));
		/* a forced parameter: nothing to tune */
		p.opts.unroll = 1;
		ck_assert_int_eq(wsn__ws_tune_shapes(&h, &p, &own, sh, 32), 0);
	}
	/* the forward: none */
	params(&p, WSN_LAYERNORM_FWD, WSN_BF16, 4096, 16384);
	p.opts.approach = WSN_APPROACH_AUTO;
	ck_assert_int_eq(wsn__ws_tune_shapes(&h, &p, NULL, sh, 32), 0);
}
END_TEST

/* ---------------------------------------------------------------- ptxas */

/* A ws kernel through ptxas for sm_90a and sm_100a: accepted, setmaxnreg honoured (no C7508), and
 * no spills where the heuristic promised the registers fit. */
static int ptxas_plan(const char *ptxas, const char *dir, enum wsn_op op, enum wsn_dtype dt, int64_t h, int y, int u,
		      int c, int ring)
{
	static const int archs[] = { 90, 100 };
	int bad = 0;

	for (int a = 0; a < 2; a++) {
		struct wsn__gpu_props g;
		struct wsn__plan_params p;
		struct wsn__kernel_plan kp;
		struct tu_ptxas_job job;
		struct tu_fn_info fi;
		char path[512], *text, *log;
		int st, sp;

		if (archs[a] == 100)
			wsn__gpu_props_b200(&g);
		else
			wsn__gpu_props_h100(&g);
		params(&p, op, dt, h, 16384);
		p.opts.groups = y;
		p.opts.unroll = u;
		p.opts.cluster = c;
		if (wsn__ws_plan(&g, &p, &kp))
			continue; /* a forced shape that does not fit */
		if (ring && !kp.stats_ring && wsn_op_is_backward(op)) {
			/* the statistics in the stage where the planner does not put them: its code for other
			 * ops, unrolls and splits (the stage grows by their bytes) */
			struct wsn__ws_layout l;

			kp.stats_ring = 1;
			kp.stage_bytes += wsn__ws_stats_bytes(&kp);
			wsn__ws_layout(&kp, &l);
			if (l.total > (unsigned)g.smem_per_block_optin)
				continue;
			kp.smem_bytes = l.total;
		}
		ck_assert_msg(wsn__generate_ptx(&kp, &text) == 0, "%s", wsn_last_error());
		ck_assert_ptr_nonnull(strstr(text, "// bdimx="));
		ck_assert_ptr_nonnull(strstr(text, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"));
		ck_assert_ptr_nonnull(strstr(text, "setmaxnreg.dec.sync.aligned.u32"));
		/* statistics in the stage: the producer's copies complete on the stage's full barrier */
		ck_assert_int_eq(!!strstr(text, "cp.async.ca.shared.global"), kp.stats_ring);
		ck_assert_int_eq(!!strstr(text, "cp.async.mbarrier.arrive.shared.b64"), kp.stats_ring);
		if (kp.stats_ring)
			printf("ptxas sm_%da %s: statistics in the stage\n", archs[a], kp.entry);
		if (kp.cluster > 1) /* the row sums travel between the cluster's CTAs */
			ck_assert(strstr(text, "st.async.shared::cluster.mbarrier::complete_tx::bytes") &&
				  strstr(text, "barrier.cluster.wait.acquire.aligned") && strstr(text, "%clusterid.x"));
		snprintf(path, sizeof(path), "%s/%s_%d.ptx", dir, kp.entry, archs[a]);
		tu_write_file(path, text, strlen(text));
		tu_ptxas_start(&job, ptxas, path, archs[a]);
		st = tu_ptxas_wait(&job, &log);
		ck_assert_msg(st == 0, "ptxas sm_%da rejected %s:\n%.3000s", archs[a], kp.entry, log);
		ck_assert_msg(!strstr(log, "C7508"), "%s: setmaxnreg ignored:\n%.2000s", kp.entry, log);
		fi = tu_ptxas_info(log, kp.entry);
		sp = fi.found ? fi.spill_st + fi.spill_ld : -1;
		printf("ptxas sm_%da %-39s bdimx %3u bdimy %u unroll %u stages %2u est %3u budget %3u spill %d\n",
		       archs[a], kp.entry, kp.bdimx, kp.bdimy, kp.unroll, kp.stages, kp.est_regs, kp.regs_compute, sp);
		ck_assert_msg(sp >= 0, "ptxas -v said nothing about %s", kp.entry);
		if (kp.est_regs <= kp.regs_compute && sp) {
			printf("FAIL %s sm_%da spills %d bytes with ~%u of %u registers planned\n", kp.entry, archs[a],
			       sp, kp.est_regs, kp.regs_compute);
			bad++;
		}
		if (kp.finish_entry[0]) {
			fi = tu_ptxas_info(log, kp.finish_entry);
			ck_assert_msg(fi.found && fi.spill_st == 0 && fi.spill_ld == 0, "%s", kp.finish_entry);
		}
		free(log);
		free(text);
	}
	return bad;
}

/* The named barriers (bar.sync 15, the row groups') from the partial sums' fold to the end of the entry. */
static int fold_barriers(const struct wsn__kernel_plan *kp, int *parallel)
{
	char *ptx = NULL, *a, *end;
	int n = 0;

	ck_assert_int_eq(wsn__ws_generate(kp, &ptx), 0);
	ck_assert_ptr_nonnull(a = strstr(ptx, "per-CTA partial column sums"));
	ck_assert_ptr_nonnull(end = strstr(a, "\n}"));
	*end = 0;
	*parallel = strstr(a, "every group's sums into its own slot") != NULL;
	for (; (a = strstr(a, "bar.sync 15,")); a++)
		n++;
	free(ptx);
	return n;
}

/*
 * The row groups' dweight/dbias fold: with a slot per group and sum in the (idle) ring, two barriers
 * whatever the groups; with fewer, one per group and sum. The GPU cases check both give the CPU's sums.
 */
START_TEST(test_ws_fold)
{
	struct wsn__gpu_props g;
	struct wsn__plan_params p;
	struct wsn__kernel_plan kp;
	struct wsn__ws_layout l;
	int par;

	wsn__gpu_props_h100(&g);
	kp = plan_ok(&g, WSN_LAYERNORM_BWD, WSN_BF16, 1024);
	ck_assert_uint_eq(kp.bdimy, 4);
	ck_assert_int_eq(fold_barriers(&kp, &par), 2);
	ck_assert_int_eq(par, 1);
	kp = plan_ok(&g, WSN_RMSNORM_BWD, WSN_BF16, 2048);
	ck_assert_uint_gt(kp.bdimy, 1);
	ck_assert_int_eq(fold_barriers(&kp, &par), 2);
	ck_assert_int_eq(par, 1);
	/* two stages of one row: the ring holds 2 of the 4 slots two groups' dweight and dbias need */
	params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 1024, 16384);
	p.opts.groups = 2;
	p.opts.unroll = 1;
	p.opts.stages = 2;
	p.opts.cluster = 1;
	ck_assert_msg(wsn__ws_plan(&g, &p, &kp) == 0, "%s", wsn_last_error());
	check_ws_plan(&g, &kp);
	wsn__ws_layout(&kp, &l);
	ck_assert_uint_lt(l.xg_slots, 4);
	ck_assert_int_eq(fold_barriers(&kp, &par), 4);
	ck_assert_int_eq(par, 0);
	/* without dbias the same ring has a slot for each group's dweight */
	p.opts.has_bias = 0;
	ck_assert_msg(wsn__ws_plan(&g, &p, &kp) == 0, "%s", wsn_last_error());
	wsn__ws_layout(&kp, &l);
	ck_assert_uint_ge(l.xg_slots, 2);
	ck_assert_int_eq(fold_barriers(&kp, &par), 2);
	ck_assert_int_eq(par, 1);
}
END_TEST

START_TEST(test_ws_ptxas)
{
	static const int64_t hs[] = { 3, 1000, 1024, 2048, 4096, 4097, 8192, 16384 };
	const char *ptxas = tu_ptxas("the ws kernels");
	int bad = 0;
	char *dir;

	if (!ptxas)
		return;
	dir = tu_tmpdir();
	for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++)
		for (size_t t = 0; t < WSN_ARRAY_SIZE(all_dtypes); t++)
			for (size_t i = 0; i < WSN_ARRAY_SIZE(hs); i++)
				if (all_dtypes[t] != WSN_F32 || hs[i] <= 8192)
					bad += ptxas_plan(ptxas, dir, all_ops[o], all_dtypes[t], hs[i], 0, 0, 0, 0);
	/* forced shapes: two groups of four rows per stage */
	for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++)
		bad += ptxas_plan(ptxas, dir, all_ops[o], WSN_BF16, 1000, 2, 4, 0, 0);
	/* rows split over clusters: the planner's at 32768, forced ones at 4096 and 8192 */
	for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++) {
		if (!wsn_op_is_backward(all_ops[o]))
			continue;
		for (size_t t = 0; t < WSN_ARRAY_SIZE(all_dtypes); t++) {
			bad += ptxas_plan(ptxas, dir, all_ops[o], all_dtypes[t], 32768, 0, 0, 0, 0);
			bad += ptxas_plan(ptxas, dir, all_ops[o], all_dtypes[t], 8192, 0, 0, 2, 0);
			bad += ptxas_plan(ptxas, dir, all_ops[o], all_dtypes[t], 4096, 2, 2, 8, 0);
		}
	}
	/* the statistics in the stage (the planner's only for LayerNorm bwd bf16 2K): RMSNorm (rstd
	 * alone), a row a stage over 2, four and eight rows a stage, whole rows with a tail vector */
	for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++) {
		if (!wsn_op_is_backward(all_ops[o]))
			continue;
		bad += ptxas_plan(ptxas, dir, all_ops[o], WSN_BF16, 2048, 0, 0, 0, 1);
		bad += ptxas_plan(ptxas, dir, all_ops[o], WSN_F32, 1000, 2, 4, 1, 1);
		bad += ptxas_plan(ptxas, dir, all_ops[o], WSN_BF16, 1000, 1, 8, 1, 1);
		bad += ptxas_plan(ptxas, dir, all_ops[o], WSN_F16, 4097, 0, 0, 0, 1);
	}
	tu_rmtree(dir);
	free(dir);
	ck_assert_msg(!bad, "%d kernels spill where the plan said their registers fit (FAIL lines above)", bad);
}
END_TEST

Suite *suite_ws(void)
{
	Suite *s = suite_create("ws");
	TCase *tc = tcase_create("planner");

	tcase_add_test(tc, test_ws_plan_budgets);
	tcase_add_test(tc, test_ws_choices);
	tcase_add_test(tc, test_ws_fallbacks);
	tcase_add_test(tc, test_ws_forced_options);
	tcase_add_test(tc, test_ws_auto);
	tcase_add_test(tc, test_ws_auto_global_sums);
	tcase_add_test(tc, test_ws_measured_shapes);
	tcase_add_test(tc, test_ws_row_count_shapes);
	tcase_add_test(tc, test_ws_split_corners);
	tcase_add_test(tc, test_ws_planner_corners);
	tcase_add_test(tc, test_ws_fold);
	tcase_add_test(tc, test_ws_tune_shapes);
	suite_add_tcase(s, tc);
	tc = tcase_create("ptxas");
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, test_ws_ptxas);
	suite_add_tcase(s, tc);
	return s;
}
