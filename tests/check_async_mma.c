/* SPDX-License-Identifier: MIT */
/* tests/check_async_mma.c: the async-group sync pass on wgmma groups. */
#define _GNU_SOURCE
#include "testutil.h"

#include "ptx/async.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_util.h"

#define MMA_FENCE "wgmma.fence.sync.aligned"

#define MMA_COMMIT "wgmma.commit_group.sync.aligned"

/* D1=mma; use D1; D2=mma; use D2: each use meets its own pending group: 2 waits */
START_TEST(test_mma_use_mma_use)
{
	struct tk t;
	char *text;

	async_tk_begin(&t, "mma_use_mma_use", 90, 1);
	async_tk_mma(&t, 1);
	async_tk_use(&t, 1);
	async_tk_mma(&t, 2);
	async_tk_use(&t, 2);
	text = async_tk_end_expect(&t, MMA_WAIT, 2);
	ck_assert_uint_eq(t.st.waits[PTX_ASYNC_WGMMA], 2);
	ck_assert_uint_eq(t.st.commits[PTX_ASYNC_WGMMA], 2);
	ck_assert_uint_eq(t.st.async_ops[PTX_ASYNC_WGMMA], 2);
	/* one fence, before the first wgmma: D2 was not touched between the fence and its wgmma */
	ck_assert_uint_eq(async_count(text, MMA_FENCE), 1);
	async_in_order(text, MMA_FENCE, "wgmma.mma_async");
	/* the first wait sits between the first wgmma and the first add reading %d1_0 */
	async_expect_between(text, "wgmma.mma_async", "add.rn.f32 %sum, %sum, %d1_0", MMA_WAIT, 1);
	async_expect_between(text, "wgmma.mma_async", "add.rn.f32 %sum, %sum, %d1_0", MMA_COMMIT, 1);
	ck_assert_uint_eq(t.st.waits[PTX_ASYNC_BULK], 0);
	async_tk_accept(&t, text, 90);
}
END_TEST

/* D1=mma; D2=mma; use D1; use D2: one wait flushes both: 1 wait */
START_TEST(test_mma_mma_use_use)
{
	struct tk t;
	char *text;

	async_tk_begin(&t, "mma_mma_use_use", 90, 1);
	async_tk_mma(&t, 1);
	async_tk_mma(&t, 2);
	async_tk_use(&t, 1);
	async_tk_use(&t, 2);
	text = async_tk_end_expect(&t, MMA_WAIT, 1);
	ck_assert_uint_eq(t.st.waits[PTX_ASYNC_WGMMA], 1);
	ck_assert_uint_eq(async_count(text, MMA_FENCE), 1);
	ck_assert_ptr_nonnull(strstr(text, MMA_WAIT " 0;"));
	async_tk_accept(&t, text, 90);
}
END_TEST

/* D1=mma; b=D1+bias; a=relu(b): only the first instruction reads D1: 1 wait */
START_TEST(test_mma_bias_relu)
{
	struct tk t;
	const char *b, *r, *bias;

	async_tk_begin(&t, "mma_bias_relu", 90, 1);
	b = ptx_reg(t.k, PTX_F32, "b");
	r = ptx_reg(t.k, PTX_F32, "relu");
	bias = ptx_reg(t.k, PTX_F32, "bias");
	ptx_mov_f32(t.k, bias, 0.5f);
	async_tk_mma(&t, 1);
	ptx_add_f32(t.k, b, t.d[0][0], bias);
	ptx_ins(t.k, "max.f32 %s, %s, 0f00000000", r, b);
	ptx_add_f32(t.k, t.sum, t.sum, r);
	async_tk_end_one_wait(&t, 90, MMA_WAIT, "wgmma.mma_async", "add.rn.f32 %b, %d1_0, %bias");
}
END_TEST

/* D1=mma; D1+=mma (same registers, accumulation is ordered by the hardware); use D1: 1 wait, none
 * between the two wgmmas */
START_TEST(test_mma_accumulate_chain)
{
	struct tk t;
	char *text;

	async_tk_begin(&t, "mma_chain", 90, 1);
	async_tk_mma(&t, 1);
	async_tk_mma(&t, 1);
	async_tk_use(&t, 1);
	text = async_tk_end_expect(&t, MMA_WAIT, 1);
	async_expect_between(text, "wgmma.mma_async", "wgmma.mma_async", MMA_WAIT, 0);
	async_expect_between(text, "wgmma.mma_async", "wgmma.mma_async", MMA_FENCE, 0);
	async_tk_accept(&t, text, 90);
}
END_TEST

/* D1=mma; commit; D2=mma; commit; use D1; use D2: flush 1 wait; keep-newer: wait 1 then wait 0 */
START_TEST(test_mma_policies)
{
	for (int keep = 0; keep < 2; keep++) {
		struct tk t;
		char *text;

		async_tk_begin(&t, keep ? "mma_keep_newer" : "mma_flush", 90, 1);
		if (keep)
			ptx_async_policy(t.a, PTX_ASYNC_WGMMA, PTX_ASYNC_KEEP_NEWER);
		async_tk_mma(&t, 1);
		ptx_ins(t.k, MMA_COMMIT);
		async_tk_mma(&t, 2);
		ptx_ins(t.k, MMA_COMMIT);
		async_tk_use(&t, 1);
		async_tk_use(&t, 2);
		text = async_tk_end(&t);
		ck_assert_uint_eq(t.st.commits[PTX_ASYNC_WGMMA], 0); /* the kernel's own commits suffice */
		if (keep) {
			ck_assert_uint_eq(async_count(text, MMA_WAIT), 2);
			async_in_order(text, MMA_WAIT " 1;", MMA_WAIT " 0;");
			async_in_order(text, MMA_WAIT " 0;", "%sum, %d2_0");
			async_in_order(text, "%sum, %d1_3", MMA_WAIT " 0;");
		} else {
			ck_assert_uint_eq(async_count(text, MMA_WAIT), 1);
			ck_assert_ptr_nonnull(strstr(text, MMA_WAIT " 0;"));
		}
		async_tk_accept(&t, text, 90);
	}
}
END_TEST

/* A wgmma that is never read still completes before the kernel exits; a kernel's own wait counts */
START_TEST(test_mma_exit_and_explicit_wait)
{
	struct tk t;
	char *text;

	async_tk_begin(&t, "mma_exit", 90, 1);
	async_tk_mma(&t, 1);
	text = async_tk_end_expect(&t, MMA_WAIT, 1);
	ck_assert_uint_eq(async_count(text, MMA_COMMIT), 1);
	async_in_order(text, MMA_WAIT, "\tret;");
	async_tk_accept(&t, text, 90);

	async_tk_begin(&t, "mma_explicit", 90, 1);
	async_tk_mma(&t, 1);
	ptx_ins(t.k, MMA_COMMIT);
	ptx_ins(t.k, MMA_WAIT " 0");
	async_tk_use(&t, 1);
	text = async_tk_end_expect(&t, MMA_WAIT, 1);
	ck_assert_uint_eq(t.st.waits[PTX_ASYNC_WGMMA], 0);
	async_tk_accept(&t, text, 90);
}
END_TEST

/* A from registers: reading an A fragment in flight is fine, overwriting it waits */
START_TEST(test_mma_a_fragments)
{
	struct tk t;
	const char *x;

	async_tk_begin(&t, "mma_afrag", 90, 1);
	x = ptx_reg(t.k, PTX_B32, "x");
	ptx_ins(t.k, "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%s, %s, %s, %s}, "
		"{%s, %s, %s, %s}, %s, %s, 1, 1, 1", t.d[0][0], t.d[0][1], t.d[0][2], t.d[0][3], t.v[0], t.v[1], t.v[2], t.v[3], t.bdesc,
		t.scale);
	ptx_ins(t.k, "add.u32 %s, %s, 1", x, t.v[0]);  /* reads %v0: no wait */
	ptx_ins(t.k, "add.u32 %s, %s, 1", t.v[1], x);  /* writes %v1: wait */
	async_tk_use(&t, 1);                                 /* flushed already */
	async_tk_end_one_wait(&t, 90, MMA_WAIT, "add.u32 %x, %v0, 1;", "add.u32 %v1, %x, 1;");
}
END_TEST

/* for i < 4: D1 += mma; then use D1: the wait is after the loop, not in it. Carried: for i < 4: use
 * D1 (what the previous iteration issued); D1 = mma; then use D1: the wait at the top of the body
 * covers the back edge, a second one the loop exit */
START_TEST(test_mma_loop)
{
	for (int carried = 0; carried < 2; carried++) {
		struct tk t;
		struct ptx_loop lp;
		char *text;

		async_tk_begin(&t, carried ? "mma_loop_carried" : "mma_loop_acc", 90, 1);
		ptx_loop_begin(t.k, &lp, "kloop");
		if (carried)
			async_tk_use(&t, 1);
		async_tk_mma(&t, 1);
		async_tk_loop_end(&t, &lp);
		async_tk_use(&t, 1);
		text = async_tk_end_expect(&t, MMA_WAIT, carried ? 2 : 1);
		if (carried) {
			async_expect_between(text, "$Lkloop_", "add.rn.f32 %sum, %sum, %d1_0", MMA_WAIT, 1);
		} else {
			async_expect_between(text, "$Lkloop_", "bra $Lkloop_", MMA_WAIT, 0);
			/* the first iteration needs one */
			async_expect_between(text, "$Lkloop_", "bra $Lkloop_", MMA_FENCE, 1);
		}
		async_expect_between(text, "$Lkloop_end", "\tret;", MMA_WAIT, 1);
		async_tk_accept(&t, text, 90);
	}
}
END_TEST

/* Two statements on one line: the wait goes between them */
START_TEST(test_mma_statements_on_one_line)
{
	struct tk t;
	const char *x;

	async_tk_begin(&t, "mma_one_line", 90, 1);
	x = ptx_reg(t.k, PTX_F32, "x");
	async_tk_mma(&t, 1);
	ptx_ins(t.k, "mov.f32 %s, 0f3F800000; add.rn.f32 %s, %s, %s", x, t.sum, x, t.d[0][2]);
	async_tk_end_one_wait(&t, 90, MMA_WAIT, "mov.f32 %x, 0f3F800000;", "add.rn.f32 %sum, %x, %d1_2;");
}
END_TEST

Suite *suite_async_mma(void)
{
	return TU_SUITE("async", { "wgmma", 120, NULL, NULL, TU_TESTS({ test_mma_use_mma_use, 1 }, { test_mma_mma_use_use, 1 },
				{ test_mma_bias_relu, 1 }, { test_mma_accumulate_chain, 1 }, { test_mma_policies, 1 },
				{ test_mma_exit_and_explicit_wait, 1 }, { test_mma_a_fragments, 1 }, { test_mma_loop, 1 },
				{ test_mma_statements_on_one_line, 1 }) });
}
