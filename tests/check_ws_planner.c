/* SPDX-License-Identifier: MIT */
/* tests/check_ws_planner.c: the warp-specialized planner: budgets, choices, fallbacks, forced options and corners. */
#define _GNU_SOURCE
#include "testutil.h"

#include "codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_util.h"

static const int64_t hidden_sizes[] = { 1, 3, 64, 1000, 1024, 2048, 4096, 4097, 8192, 12288, 16384 };

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
					ws_params(&p, all_ops[o], all_dtypes[t], hidden_sizes[i], 16384);
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
					ws_check_plan(&dev[d], &kp);
					ck_assert_int_eq(kp.arch, dev[d].arch);
				}
}
END_TEST

/* The heuristic's concrete choices on the modelled H100 (132 SMs, 227 KB) and B200 (148 SMs, 228 KB). */
START_TEST(test_ws_choices)
{
	/* each plan's shape, in the order of field[]; 0 (NULL): not checked */
	static const char *const field[] = { "bdimx", "bdimy", "unroll", "stages",
					     "max_grid", "regs_entry", "regs_compute" };
	static const struct {
		int b200; /* on the B200 model, else the H100 */
		enum wsn_op op;
		int64_t hidden;
		unsigned shape[7];
		const char *why;
	} want[] = {
		/* LayerNorm backward 4K bf16: two row groups of 128 threads, 2 rows per stage cached in
		 * registers, leftover shared memory on stages up to a 132 KB ring (4 x 32 KB; 7 would fit) */
		{ 0, WSN_LAYERNORM_BWD, 4096, { 128, 2, 2, 4, 0, 168, 240 },
		  "stages 4 (a backward ring grows past 4 stages only up to 132 KB)" },
		/* short rows: two warps per row (two vectors each), four row groups; unroll stops at 2 (4
		 * would leave the busiest SM 3 % over the mean) */
		{ 0, WSN_LAYERNORM_BWD, 1024, { 64, 4, 2, 0, 0, 168, 240 }, NULL },
		/* forward: a warp per row (four vectors each); WS_MAX_STAGES */
		{ 0, WSN_LAYERNORM_FWD, 1024, { 32, 8, 0, 32, 0, 0, 0 }, NULL },
		/* the backward's leftover shared memory stops adding stages at 16 (WS_FILL_STAGES_BWD;
		 * LayerNorm bwd 1K has room for more; 32 measured slower than 16 for LayerNorm bwd 2K/4K) */
		{ 0, WSN_LAYERNORM_BWD, 1024, { 0, 0, 0, 16, 0, 0, 0 }, "leftover shared memory: stages 16" },
		/* one row group: bdimx grows until the registers fit */
		{ 0, WSN_LAYERNORM_BWD, 8192, { 256, 1, 0, 0, 0, 0, 0 }, "bdimx 256 (avoids spills)" },
		/* the B200 model: its own SM count, the same shapes */
		{ 1, WSN_LAYERNORM_BWD, 4096, { 0, 2, 2, 0, 148, 0, 0 }, NULL },
		/* 16384 rows over 148 SMs: unroll 4 keeps the tail within 2 % (over 132 it does not); 7
		 * stages fit, 6 give each of the 2 row groups its own 3 */
		{ 1, WSN_RMSNORM_FWD, 4096, { 0, 2, 4, 6, 148, 0, 0 }, NULL },
		{ 0, WSN_RMSNORM_FWD, 4096, { 0, 0, 2, 14, 0, 0, 0 }, NULL },
	};
	struct wsn__gpu_props h, b;
	struct wsn__kernel_plan kp;

	wsn__gpu_props_h100(&h);
	wsn__gpu_props_b200(&b);
	for (size_t i = 0; i < WSN_ARRAY_SIZE(want); i++) {
		const struct wsn__kernel_plan plan = ws_plan_ok(want[i].b200 ? &b : &h, want[i].op, WSN_BF16,
								want[i].hidden);
		const unsigned got[] = { plan.bdimx, plan.bdimy, plan.unroll, plan.stages,
					 plan.max_grid, plan.regs_entry, plan.regs_compute };

		ck_assert_int_eq(plan.arch, want[i].b200 ? 100 : 90);
		for (size_t f = 0; f < WSN_ARRAY_SIZE(field); f++)
			ck_assert_msg(!want[i].shape[f] || got[f] == want[i].shape[f], "%s: %s %u, expected %u",
				      plan.entry, field[f], got[f], want[i].shape[f]);
		if (want[i].why)
			ck_assert_msg(strstr(plan.why, want[i].why), "%s: no \"%s\" in %s", plan.entry, want[i].why,
				      plan.why);
	}
	/* LayerNorm backward 4K bf16 again: its rows cached in registers, weight in registers, a good plan */
	kp = ws_plan_ok(&h, WSN_LAYERNORM_BWD, WSN_BF16, 4096);
	ck_assert_int_eq(kp.cache_rows, 1);
	ck_assert_int_eq(kp.param_store, WSN_STORE_REG);
	ck_assert_int_eq(kp.ws_good, 1);
	ck_assert_ptr_nonnull(strstr(kp.why, "search: stages 2, bdimy 2, unroll 2, fits"));
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

			ws_params(&p, cap[i].op, WSN_BF16, cap[i].hidden, 16384);
			if (cap[i].forced)
				p.opts.cluster = (int)cap[i].cluster;
			kp = ws_plan_forced(&h, &p);
			ck_assert_uint_eq(kp.cluster, cap[i].cluster);
			ck_assert_msg(kp.stages == cap[i].stages, "%s %lld: %u stages, expected %u",
				      wsn_op_name(cap[i].op), (long long)cap[i].hidden, kp.stages, cap[i].stages);
			ck_assert_uint_le((uint64_t)kp.stages * kp.stage_bytes, kp.stages <= 4 ? 232448u : 132u * 1024);
		}
	}
}
END_TEST

/* Each fallback, on a shape that needs it. */
START_TEST(test_ws_fallbacks)
{
	struct wsn__gpu_props h;
	struct wsn__kernel_plan kp;

	wsn__gpu_props_h100(&h);
	/* 1: the stage is not cached in registers */
	kp = ws_plan_ok(&h, WSN_LAYERNORM_FWD, WSN_BF16, 23552);
	ck_assert_int_eq(kp.cache_rows, 0);
	ck_assert_int_eq(kp.param_store, WSN_STORE_REG);
	ck_assert_ptr_nonnull(strstr(kp.why, "fallback 1, stage not cached in registers: "));
	/* 2: weight and bias through shared memory */
	kp = ws_plan_ok(&h, WSN_LAYERNORM_FWD, WSN_BF16, 27648);
	ck_assert_int_eq(kp.param_store, WSN_STORE_SMEM);
	ck_assert_uint_ge(kp.stages, 2);
	ck_assert_ptr_nonnull(strstr(kp.why, "fallback 2, weight/bias through shared memory: "));
	/* 3: that left one stage: direct loads back on, over the register budget, not good */
	kp = ws_plan_ok(&h, WSN_LAYERNORM_FWD, WSN_BF16, 29696);
	ck_assert_int_eq(kp.param_store, WSN_STORE_REG);
	ck_assert_uint_ge(kp.stages, 2);
	ck_assert_ptr_nonnull(strstr(kp.why, "fallback 3, still one stage: direct loads back on"));
	ck_assert_int_eq(kp.ws_good, 0);
	ck_assert_ptr_nonnull(strstr(kp.why, "spills"));
	/* ours, 4 and 5: dbias, then dweight too, summed in shared memory (one row group) */
	kp = ws_plan_ok(&h, WSN_LAYERNORM_BWD, WSN_BF16, 13312);
	ck_assert_int_eq(kp.db_store, WSN_STORE_SMEM);
	ck_assert_int_eq(kp.dw_store, WSN_STORE_REG);
	ck_assert_uint_eq(kp.bdimy, 1);
	ck_assert_ptr_nonnull(strstr(kp.why, "fallback 4, dbias sums in shared memory"));
	kp = ws_plan_ok(&h, WSN_LAYERNORM_BWD, WSN_BF16, 17408);
	ck_assert_int_eq(kp.db_store, WSN_STORE_SMEM);
	ck_assert_int_eq(kp.dw_store, WSN_STORE_SMEM);
	ck_assert_ptr_nonnull(strstr(kp.why, "fallback 5, dweight and dbias sums in shared memory"));
	/* is_good_ws_heuristic's rules: one stage; bdimy 1 with direct loads and < 8 registers spare
	 * (WS_GOOD_FREE_REGS: nvFuser asks for 64; measured, 8 is enough here) */
	ck_assert_uint_eq(kp.stages, 1);
	ck_assert_int_eq(kp.ws_good, 0);
	ck_assert_ptr_nonnull(strstr(kp.why, "one stage"));
	kp = ws_plan_ok(&h, WSN_LAYERNORM_FWD, WSN_BF16, 13312);
	ck_assert_uint_eq(kp.bdimy, 1);
	ck_assert_int_eq(kp.param_store, WSN_STORE_REG);
	ck_assert_int_eq(kp.ws_good, 0);
	ck_assert_ptr_nonnull(strstr(kp.why, "fewer than 8 registers spare"));
	kp = ws_plan_ok(&h, WSN_LAYERNORM_BWD, WSN_BF16, 8192); /* 58 spare: good */
	ck_assert_int_eq(kp.ws_good, 1);
	/* no CTA holds a row: the row split over a cluster of 2, then 4 */
	{
		struct wsn__plan_params p;
		ws_params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 32768, 16384);
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
		ck_assert_uint_eq(kp.cluster, 2);
		ck_assert_ptr_nonnull(strstr(kp.why, "no fit with 1 CTA per row: the row split over a cluster of 2 CTAs"));
		ck_assert_ptr_nonnull(strstr(kp.entry, "_h32768_c2"));
		ws_check_plan(&h, &kp);
		ws_params(&p, WSN_LAYERNORM_BWD, WSN_F32, 32768, 16384); /* half a row of dy and x is 128 KB */
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
		ck_assert_uint_eq(kp.cluster, 4);
		ws_check_plan(&h, &kp);
		/* a forward row is never split */
		ws_params(&p, WSN_LAYERNORM_FWD, WSN_F32, 65536, 16384);
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_ESHAPE);
	}
	/* nothing fits, and an odd row does not split: the error names the budget */
	{
		struct wsn__plan_params p;
		ws_params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 32769, 16384);
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), WSN_ESHAPE);
		ck_assert_ptr_nonnull(strstr(wsn_last_error(), "register budget"));
		ws_params(&p, WSN_LAYERNORM_BWD, WSN_F32, 32769, 16384); /* a row of dy and x is 256 KB */
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
	ws_params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 2048, 16384);
	ws_force(&p, 2, 1, 6);
	p.opts.block_threads = 256;
	kp = ws_plan_forced(&h, &p);
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
		ws_params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 2048, 16384);
		p.opts.cluster = 4;
		for (size_t i = 0; i < WSN_ARRAY_SIZE(fs); i++) {
			p.opts.stages = (int)fs[i].stages;
			kp = ws_plan_forced(&h, &p);
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
					ws_params(&p, all_ops[o], WSN_BF16, 1000, 2999);
					ws_force(&p, y, u, s);
					e = wsn__ws_plan(&h, &p, &kp);
					ck_assert_msg(e == 0 || (e == WSN_EINVAL && strstr(wsn_last_error(), "budget")),
						      "%s %d/%d/%d: %s", wsn_op_name(all_ops[o]), y, u, s, wsn_last_error());
					if (!e) {
						ws_check_plan(&h, &kp);
						ck_assert_uint_eq(kp.bdimy, (unsigned)y);
						ck_assert_uint_eq(kp.unroll, (unsigned)u);
						ck_assert_uint_eq(kp.stages, (unsigned)s);
					}
				}
	/* a forced cluster */
	ws_params(&p, WSN_RMSNORM_BWD, WSN_BF16, 4096, 16384);
	p.opts.cluster = 4;
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
	ck_assert_uint_eq(kp.cluster, 4);
	ws_check_plan(&h, &kp);
	/* forced options refused with WSN_EINVAL, and what the error names (NULL: not checked) */
	{
		static const struct {
			enum wsn_op op;
			int64_t hidden;
			int cluster, groups, unroll, stages, block_threads; /* 0: the planner's */
			const char *why, *why_too;
		} refused[] = {
			{ WSN_RMSNORM_BWD, 4096, 3, 0, 0, 0, 0, "1, 2, 4 or 8", NULL },
			{ WSN_RMSNORM_BWD, 4096, 16, 0, 0, 0, 0, NULL, NULL },
			{ WSN_RMSNORM_BWD, 4100, 2, 0, 0, 0, 0, "whole 16-byte vectors", NULL },
			{ WSN_RMSNORM_FWD, 4096, 2, 0, 0, 0, 0, "only the backward", NULL },
			/* forced: no larger cluster is tried */
			{ WSN_LAYERNORM_BWD, 65536, 2, 0, 0, 0, 0, NULL, NULL },
			/* the budgets and limits of the other options */
			{ WSN_LAYERNORM_BWD, 16384, 0, 0, 0, 8, 0, "shared-memory budget", "forced" },
			{ WSN_LAYERNORM_BWD, 4096, 0, 4, 4, 0, 0, "register budget", NULL },
			{ WSN_RMSNORM_FWD, 4096, 0, 8, 0, 0, 0, "threads budget", NULL },
			{ WSN_RMSNORM_FWD, 4096, 0, 0, 0, 0, 192, "multiple of 128", NULL },
			{ WSN_RMSNORM_FWD, 4096, 0, 0, 16, 0, 0, "at most 8", NULL },
		};
		for (size_t i = 0; i < WSN_ARRAY_SIZE(refused); i++) {
			const char *why[] = { refused[i].why, refused[i].why_too };
			int e;

			ws_params(&p, refused[i].op, WSN_BF16, refused[i].hidden, 16384);
			ws_force(&p, refused[i].groups, refused[i].unroll, refused[i].stages);
			p.opts.cluster = refused[i].cluster;
			p.opts.block_threads = refused[i].block_threads;
			e = wsn__ws_plan(&h, &p, &kp);
			ck_assert_msg(e == WSN_EINVAL, "refused[%zu]: %s, want WSN_EINVAL", i, wsn_err_name(e));
			for (int w = 0; w < 2; w++)
				ck_assert_msg(!why[w] || strstr(wsn_last_error(), why[w]),
					      "refused[%zu]: \"%s\" does not say \"%s\"", i, wsn_last_error(), why[w]);
		}
	}
	/* threads per row above 128 with the groups free: one group of that many threads (this once
	 * divided by zero groups), through approach auto as well, which searches ws too */
	for (unsigned bx = 256; bx <= 896; bx += 128)
		for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++) {
			int e;
			ws_params(&p, all_ops[o], WSN_BF16, 16384, 16384);
			p.opts.block_threads = (int)bx;
			e = wsn__ws_plan(&h, &p, &kp);
			ck_assert_msg(e == 0 || (e == WSN_EINVAL && strstr(wsn_last_error(), "budget")), "%s bdimx %u: %s",
				      wsn_op_name(all_ops[o]), bx, wsn_last_error());
			if (!e) {
				ws_check_plan(&h, &kp);
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

	ws_params(&p, op, dt, hidden, rows);
	p.opts.block_threads = bdimx;
	p.opts.unroll = unroll;
	if ((err = wsn__ws_plan(g, &p, kp)) == 0)
		ws_check_plan(g, kp);
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
	ws_params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 32768, 131);
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
		ws_params(&p, wide[i].op, wide[i].dt, wide[i].h, 2048);
		p.opts.approach = WSN_APPROACH_MULTIWAVE;
		ck_assert_int_eq(wsn__plan_kernel(&h, &p, &mw), 0);
		ck_assert_int_eq(mw.dw_store, WSN_STORE_GLOBAL);
		p.opts.approach = WSN_APPROACH_AUTO;
		ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
		ck_assert_msg(kp.approach == WSN_APPROACH_WS && !kp.ws_good && kp.stages == 1, "%s", kp.why);
	}
	/* no more rows than the multi-wave grid has CTAs: each CTA's sums are written once */
	ws_params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 131072, 132);
	p.opts.approach = WSN_APPROACH_AUTO;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_msg(kp.approach == WSN_APPROACH_MULTIWAVE && kp.max_grid <= 132, "%s", kp.why);
	/* sums that fit the shared memory keep the heuristic's verdict */
	ws_params(&p, WSN_LAYERNORM_BWD, WSN_F32, 12289, 16384);
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

		ws_params(&p, sh[i].op, sh[i].dt, sh[i].hidden, 16384);
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
		ws_check_plan(&h, &kp);
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
			ws_params(&p, rs[i].op, rs[i].dt, rs[i].hidden, rows[r]);
			ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
			ws_check_plan(&h, &kp);
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
		ws_params(&p, rs[i].op, WSN_F32, rs[i].hidden / 2, 2048);
		if (wsn__ws_plan(&h, &p, &kp) == 0)
			ck_assert_msg(!strstr(kp.why, " rows per SM): "), "f32 %lld: %s", (long long)rs[i].hidden / 2, kp.why);
	}
	ws_params(&p, WSN_RMSNORM_BWD, WSN_F16, 2048, 2048);
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
		ws_params(&p, sp[i].op, sp[i].dt, sp[i].hidden, 16384);
		p.opts.groups = sp[i].groups;
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
		ws_check_plan(&h, &kp);
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
			ws_params(&p, WSN_LAYERNORM_BWD, ln2k[i].dt, ln2k[i].hidden, ln2k[i].rows);
			ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
			ws_check_plan(&h, &kp);
			ck_assert_msg(kp.stats_ring == 0 && kp.cluster == 4 && !strstr(kp.why, "measured shape ("),
				      "%s: ring %d cluster %u: %s", kp.entry, kp.stats_ring, kp.cluster, kp.why);
			ck_assert_uint_eq(kp.stage_bytes, kp.unroll * 2 * kp.row_bytes);
		}
		ws_params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 2048, 16384);
		ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
		/* unroll 2: two means then two rstd, 16 bytes after the rows */
		ck_assert_uint_eq(kp.stage_bytes, 2 * 2 * kp.row_bytes + 16);
	}
	ws_params(&p, WSN_LAYERNORM_BWD, WSN_F16, 8256, 16384);
	ck_assert_int_eq(wsn__ws_plan(&h, &p, &kp), 0);
	ck_assert_msg(kp.cluster == 8 && kp.bdimx == 128 && kp.unroll == 2, "%s: cluster %u bdimx %u unroll %u: %s",
		      kp.entry, kp.cluster, kp.bdimx, kp.unroll, kp.why);
	/* forced ws where the heuristic says no: ws anyway, and the plan says so */
	ws_params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 17408, 16384);
	p.opts.cluster = 1; /* whole rows: 17408 is a measured split over 2 */
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_int_eq(kp.approach, WSN_APPROACH_WS);
	ck_assert_int_eq(kp.ws_forced, 1);
	ck_assert_ptr_nonnull(strstr(kp.why, "runs anyway"));
	/* stages given with auto: only ws has them */
	ws_params(&p, WSN_RMSNORM_FWD, WSN_BF16, 4096, 1000);
	p.opts.approach = WSN_APPROACH_AUTO;
	p.opts.stages = 3;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_int_eq(kp.approach, WSN_APPROACH_WS);
	ck_assert_uint_eq(kp.stages, 3);
}
END_TEST

Suite *suite_ws_planner(void)
{
	return TU_SUITE("ws", { "planner", 0, NULL, NULL, TU_TESTS({ test_ws_plan_budgets, 1 }, { test_ws_choices, 1 },
				{ test_ws_fallbacks, 1 }, { test_ws_forced_options, 1 }, { test_ws_auto_global_sums, 1 },
				{ test_ws_measured_shapes, 1 }, { test_ws_row_count_shapes, 1 }, { test_ws_split_corners, 1 },
				{ test_ws_planner_corners, 1 }) });
}
