/* SPDX-License-Identifier: MIT */
/* tests/check_ws_rules.c: the warp-specialized planner's automatic rules and measured shapes. */
#define _GNU_SOURCE
#include "testutil.h"

#include "codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tables.h"
#include "ws_util.h"

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

		ws_params(&p, c->op, c->dt, c->hidden, c->rows);
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

/*
 * Rows keyed by GPU model: a device's name gives its model; every H200 row plans its shape on an
 * H200 at 16384 rows and names itself, and neither an H100 nor an H200 with fewer rows per SM
 * than the row's floor takes it.
 */
START_TEST(test_ws_gpu_model_rows)
{
	struct wsn__gpu_props h100, h200;
	int n = 0;

	ck_assert_str_eq(wsn__gpu_model("NVIDIA H200"), "H200");
	ck_assert_str_eq(wsn__gpu_model("NVIDIA H100 80GB HBM3"), "H100");
	ck_assert_ptr_null(wsn__gpu_model("NVIDIA B200"));
	ck_assert_ptr_null(wsn__gpu_model(NULL));
	wsn__gpu_props_h100(&h100);
	h200 = h100;
	h200.model = "H200";
	for (size_t i = 0; i < wsn__ws_shape_table_len; i++) {
		const struct wsn__ws_shape_row *r = &wsn__ws_shape_table[i];
		int64_t below = (r->min_rows_per_sm - 1) * h200.sms;
		struct wsn__plan_params p;
		struct wsn__kernel_plan kp;

		if (!r->gpu)
			continue;
		ck_assert_str_eq(r->gpu, "H200");
		ck_assert(r->dtypes == WSN_DTYPE_BIT(WSN_BF16) && r->min_rows_per_sm > 0 && r->bdimx);
		ws_params(&p, r->op, WSN_BF16, r->min_bytes / 2, 16384);
		p.opts.approach = WSN_APPROACH_AUTO;
		ck_assert_int_eq(wsn__plan_kernel(&h200, &p, &kp), 0);
		ck_assert_msg(kp.approach == WSN_APPROACH_WS && kp.cluster == r->cluster && kp.bdimx == r->bdimx &&
			      kp.bdimy == r->bdimy && kp.unroll == r->unroll && kp.stages == r->stages &&
			      strstr(kp.why, " on the H200)"),
			      "row %zu: %s hidden %lld: cluster %u %ux%u unroll %u stages %u: %s", i, wsn_op_name(r->op),
			      (long long)p.hidden, kp.cluster, kp.bdimy, kp.bdimx, kp.unroll, kp.stages, kp.why);
		ck_assert_int_eq(wsn__plan_kernel(&h100, &p, &kp), 0);
		ck_assert_msg(!strstr(kp.why, "on the H200"), "row %zu on the H100: %s", i, kp.why);
		ws_params(&p, r->op, WSN_BF16, r->min_bytes / 2, below);
		p.opts.approach = WSN_APPROACH_AUTO;
		ck_assert_int_eq(wsn__plan_kernel(&h200, &p, &kp), 0);
		ck_assert_msg(!strstr(kp.why, "on the H200"), "row %zu at %lld rows: %s", i, (long long)below, kp.why);
		n++;
	}
	ck_assert_int_gt(n, 0);
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

		ws_params(&p, cs[i].op, cs[i].dt, cs[i].hidden, cs[i].rows);
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
			ws_check_plan(&h, &kp);
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
	ws_params(&p, WSN_LAYERNORM_FWD, WSN_BF16, 4096, 16384);
	p.opts.approach = WSN_APPROACH_AUTO;
	ck_assert_int_eq(wsn__ws_tune_shapes(&h, &p, NULL, sh, 32), 0);
}
END_TEST

Suite *suite_ws_rules(void)
{
	return TU_SUITE("ws", { "planner", 0, NULL, NULL, TU_TESTS({ test_ws_auto, 1 }, { test_ws_tune_shapes, 1 },
								   { test_ws_gpu_model_rows, 1 }) });
}
