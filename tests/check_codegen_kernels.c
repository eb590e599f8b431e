/* SPDX-License-Identifier: MIT */
/* tests/check_codegen_kernels.c: generated kernels: the public emit API, their text and prefetches before waits. */
#define _GNU_SOURCE
#include "testutil.h"

#include "codegen.h"
#include "ptx/emitter.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_util.h"

START_TEST(test_emit_public)
{
	struct wsn_plan_options o;
	char *ptx = NULL, *plan = NULL;

	wsn_plan_options_init(&o, WSN_RMSNORM_BWD);
	o.approach = WSN_APPROACH_MULTIWAVE;
	ck_assert_int_eq(wsn_emit_ptx(WSN_RMSNORM_BWD, WSN_BF16, 4096, 16384, &o, &ptx, &plan), 0);
	EXPECT_HAS(ptx, ".target sm_90a", "// op=rmsnorm-bwd dtype=bf16 hidden=4096", "bdimx=",
		   ".visible .entry wsn_rmsnorm_bwd_bf16_h4096(", ".visible .entry wsn_rmsnorm_bwd_bf16_h4096_finish(",
		   "ld.global.L1::no_allocate.L2::256B.v4.b32");
	ck_assert_ptr_nonnull(strstr(plan, "why:"));
	free(ptx);
	/* wsn_emit_plan: the same text without the PTX, and the plan as JSON */
	{
		char *text = NULL, *json = NULL;
		json_error_t je;
		json_t *j;

		ck_assert_int_eq(wsn_emit_plan(WSN_RMSNORM_BWD, WSN_BF16, 4096, 16384, &o, &text, &json), 0);
		ck_assert_str_eq(text, plan);
		ck_assert_msg((j = json_loads(json, 0, &je)) != NULL, "%s", je.text);
		ck_assert_ptr_null(strchr(json, '\n'));
		ck_assert_str_eq(json_string_value(json_object_get(j, "approach")), "multiwave");
		ck_assert_str_eq(json_string_value(json_object_get(j, "rule")), "forced: approach multiwave");
		ck_assert_str_eq(json_string_value(json_object_get(j, "kernel")), "wsn_rmsnorm_bwd_bf16_h4096");
		ck_assert_str_eq(json_string_value(json_object_get(j, "finish_kernel")), "wsn_rmsnorm_bwd_bf16_h4096_finish");
		json_decref(j);
		free(text);
		free(json);
		ck_assert_int_eq(wsn_emit_plan(WSN_RMSNORM_BWD, WSN_BF16, 4096, 16384, &o, NULL, &json), 0);
		ck_assert_ptr_nonnull(json);
		free(json);
		ck_assert_int_eq(wsn_emit_plan(WSN_RMSNORM_BWD, WSN_BF16, 4096, 16384, &o, NULL, NULL), WSN_EINVAL);
		{ /* an eps wsn_plan_create would refuse: refused here too, NaN included */
			struct wsn_plan_options bad = o;

			bad.eps = NAN;
			ck_assert_int_eq(wsn_emit_plan(WSN_RMSNORM_BWD, WSN_BF16, 4096, 16384, &bad, NULL, &json), WSN_EINVAL);
			bad.eps = 0;
			ck_assert_int_eq(wsn_emit_plan(WSN_RMSNORM_BWD, WSN_BF16, 4096, 16384, &bad, NULL, &json), WSN_EINVAL);
			ck_assert_ptr_null(json);
		}
		text = json = (char *)1;
		ck_assert_int_eq(wsn_emit_plan(WSN_RMSNORM_BWD, WSN_BF16, 0, 16384, &o, &text, &json), WSN_ESHAPE);
		ck_assert_ptr_null(text);
		ck_assert_ptr_null(json);
	}
	free(plan);
	wsn_plan_options_init(&o, WSN_LAYERNORM_FWD);
	o.arch = 100;
	ck_assert_int_eq(wsn_emit_ptx(WSN_LAYERNORM_FWD, WSN_F16, 3, 1, &o, &ptx, NULL), 0);
	ck_assert_ptr_nonnull(strstr(ptx, ".target sm_100a"));
	free(ptx);
	o.arch = 75;
	ck_assert_int_eq(wsn_emit_ptx(WSN_LAYERNORM_FWD, WSN_F16, 3, 1, &o, &ptx, NULL), WSN_EINVAL);
	ck_assert_int_eq(wsn_emit_ptx(WSN_LAYERNORM_FWD, (enum wsn_dtype)9, 3, 1, NULL, &ptx, NULL), WSN_EDTYPE);
	ck_assert_int_eq(wsn_emit_ptx(WSN_LAYERNORM_FWD, WSN_F16, 0, 1, NULL, &ptx, NULL), WSN_ESHAPE);
	o.arch = 0;
	o.approach = WSN_APPROACH_WS;
	ck_assert_int_eq(wsn_emit_ptx(WSN_LAYERNORM_FWD, WSN_F16, 3, 1, &o, &ptx, NULL), 0);
	ck_assert_ptr_nonnull(strstr(ptx, "warp-specialised"));
	free(ptx);
}
END_TEST

/* Kernel text properties that make a kernel fast: every load of a cached row is a 16-byte load
 * issued before the first arithmetic on it; stores are 16 bytes. */
START_TEST(test_kernel_text)
{
	char *ptx, *loop, *first_math;
	struct wsn_plan_options o;

	wsn_plan_options_init(&o, WSN_LAYERNORM_FWD);
	o.approach = WSN_APPROACH_MULTIWAVE;
	ck_assert_int_eq(wsn_emit_ptx(WSN_LAYERNORM_FWD, WSN_BF16, 8192, 16384, &o, &ptx, NULL), 0);
	loop = strstr(ptx, "\n$Lvec_row"); /* the loop head's label */
	ck_assert_ptr_nonnull(loop);
	first_math = strstr(loop, "add.rn.f32");
	ck_assert_ptr_nonnull(first_math);
	{
		int nld = 0;
		for (char *p = loop; (p = strstr(p, "ld.global.L1::no_allocate.L2::256B.v4.b32")) && p < first_math; p++)
			nld++;
		ck_assert_int_ge(nld, 4);
	}
	EXPECT_HAS(ptx, "st.global.v4.b32", "rsqrt.approx.f32", "shfl.sync.bfly.b32");
	/* the element path for unaligned rows exists */
	ck_assert_ptr_nonnull(strstr(ptx, "ld.global.b16"));
	free(ptx);
	/* branches whose guard differs across a warp are plain bra, never bra.uni (which promises a
	 * warp-uniform guard): thread 0's barrier set-up, the finish kernel's columns past hidden, the
	 * cluster exchange's sender */
	wsn_plan_options_init(&o, WSN_LAYERNORM_BWD);
	o.approach = WSN_APPROACH_WS;
	o.cluster = 2;
	ck_assert_int_eq(wsn_emit_ptx(WSN_LAYERNORM_BWD, WSN_BF16, 1008, 16384, &o, &ptx, NULL), 0);
	EXPECT_HAS(ptx, " bra $Linit_done", " bra $Lout", " bra $Lxch_sent");
	EXPECT_LACKS(ptx, "bra.uni $Linit_done", "bra.uni $Lout", "bra.uni $Lxch_sent");
	free(ptx);
}
END_TEST

/* Count of needle in [from, to). */
static int count_in(const char *from, const char *to, const char *needle)
{
	int n = 0;

	for (const char *q = strstr(from, needle); q && q < to; q = strstr(q + 1, needle))
		n++;
	return n;
}

/*
 * Every kernel of a ws backward module (main and finish) prefetches into L2 before its dependent-launch
 * wait and touches no global memory before it; the prefetch branch is thread-divergent (plain bra).
 */
START_TEST(test_prefetch_before_wait)
{
	static const struct {
		enum wsn_op op;
		int64_t hidden;
		unsigned cluster;
		int want_prefetches; /* main kernel: dy, x and dx */
	} cases[] = { { WSN_LAYERNORM_BWD, 2048, 0, 3 }, { WSN_RMSNORM_BWD, 1000, 1, 3 }, { WSN_LAYERNORM_BWD, 4096, 8, 3 } };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct wsn_plan_options o;
		char *ptx, *e;
		int entries = 0;

		wsn_plan_options_init(&o, cases[i].op);
		o.approach = WSN_APPROACH_WS;
		o.cluster = cases[i].cluster;
		ck_assert_int_eq(wsn_emit_ptx(cases[i].op, WSN_BF16, cases[i].hidden, 16384, &o, &ptx, NULL), 0);
		for (e = strstr(ptx, ".entry "); e; e = strstr(e + 1, ".entry ")) {
			const char *wait = strstr(e, "griddepcontrol.wait"), *next = strstr(e + 1, ".entry ");
			ck_assert_ptr_nonnull(wait);
			ck_assert(!next || wait < next);
			ck_assert_msg(count_in(e, wait, "prefetch.global.L2 [") >= (entries ? 1 : cases[i].want_prefetches),
				      "case %zu kernel %d: too few prefetches before the wait", i, entries);
			ck_assert_int_eq(count_in(e, wait, "ld.global"), 0);
			ck_assert_int_eq(count_in(e, wait, "st.global"), 0);
			ck_assert_int_eq(count_in(e, wait, "cp.async"), 0);
			ck_assert_int_eq(count_in(e, wait, "atom."), 0);
			ck_assert_int_eq(count_in(e, wait, "bra.uni $Lpf_done"), 0);
			entries++;
		}
		ck_assert_int_eq(entries, 2); /* the main kernel and the finish kernel */
		free(ptx);
	}
}
END_TEST

Suite *suite_codegen_kernels(void)
{
	return TU_SUITE("codegen", { "planner", 0, NULL, NULL, TU_TESTS({ test_emit_public, 1 }, { test_kernel_text, 1 },
				{ test_prefetch_before_wait, 1 }) });
}
