/* SPDX-License-Identifier: MIT */
/* tests/check_async_kernels.c: the async-group sync pass on whole kernels, mixed kinds, and its errors. */
#define _GNU_SOURCE
#include "testutil.h"

#include "ptx/async.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_util.h"

/* wgmma and bulk stores in one kernel are tracked apart */
START_TEST(test_mixed_kinds)
{
	struct tk t;
	char *text;

	async_tk_begin(&t, "mixed", 90, 1);
	async_tk_mma(&t, 1);
	async_tk_write(&t, t.sa, REG_A);          /* no wgmma register: no wait */
	async_tk_store(&t, t.sa, REG_A, 0, 1);
	async_tk_use(&t, 1);                      /* wgmma wait only */
	async_tk_write(&t, t.sa, REG_A);          /* bulk wait only */
	text = async_tk_end_expect(&t, MMA_WAIT, 1);
	ck_assert_uint_eq(async_count(text, BULK_WAIT), 1);
	async_in_order(text, MMA_WAIT, BULK_WAIT);
	async_tk_accept(&t, text, 90);
}
END_TEST

/* The shape of a warp-specialised kernel: a producer warp copies rows into a stage with
 * cp.async.bulk and leaves with exit; compute warps wait on the mbarrier, reduce, stage their
 * result in OUT and store it with the helper. The previous row's store must have read OUT before
 * any compute thread writes it again: one wait at the reuse point in the loop, one before ret,
 * none on the producer's path. */
START_TEST(test_ws_shaped_kernel)
{
	enum { STAGE = 2, OUT = 3 };
	struct tk t;
	struct ptx_loop lp;
	const char *bar, *warp, *prod, *el, *par, *bytes, *x, *o, *compute;
	char *text;

	async_tk_begin(&t, "ws_shape", 90, 1);
	t.all_write = 1;
	bar = ptx_reg(t.k, PTX_U32, "bar");
	warp = ptx_reg(t.k, PTX_U32, "warp");
	prod = ptx_reg(t.k, PTX_PRED, "producer");
	el = ptx_reg(t.k, PTX_PRED, "elected");
	par = ptx_reg(t.k, PTX_U32, "parity");
	bytes = ptx_reg(t.k, PTX_U32, "nbytes");
	x = ptx_reg(t.k, PTX_F32, "x");
	o = ptx_reg(t.k, PTX_U32, "o");
	compute = ptx_label_new(t.k, "compute");
	ptx_smem_addr(t.k, bar, "smem", 8192);
	ptx_mov_imm(t.k, PTX_U32, bytes, 1536);
	ptx_mov_imm(t.k, PTX_U32, par, 0);
	ptx_ins(t.k, "shr.u32 %s, %s, 5", warp, t.tid);
	ptx_ins(t.k, "setp.eq.u32 %s, %s, 3", prod, warp);
	ptx_guard(t.k, t.t0, 0);
	ptx_mbarrier_init(t.k, bar, 0, 1);
	ptx_fence_mbarrier_init(t.k);
	ptx_bar_sync(t.k, 0, 0);
	ptx_guard(t.k, prod, 1);
	ptx_bra(t.k, compute);
	ptx_comment(t.k, "producer");
	ptx_loop_begin(t.k, &lp, "prows");
	ptx_elect_sync(t.k, el, NULL);
	ptx_guard(t.k, el, 0);
	ptx_mbarrier_arrive_expect_tx(t.k, bar, 0, 1536);
	ptx_async_region_begin(t.a, STAGE);
	ptx_guard(t.k, el, 0);
	ptx_cp_async_bulk_g2s(t.k, t.sa, t.out, bytes, bar);
	ptx_async_region_end(t.a);
	async_tk_loop_end(&t, &lp);
	ptx_ins(t.k, "exit");
	ptx_label(t.k, compute);
	ptx_loop_begin(t.k, &lp, "crows");
	ptx_mbarrier_wait_parity(t.k, bar, 0, par);
	ptx_ld_shared(t.k, PTX_F32, x, t.sa, 0);
	ptx_add_f32(t.k, t.sum, t.sum, x);
	ptx_comment(t.k, "OUT free again");
	ptx_async_reuse(t.a, OUT);
	ptx_bar_sync(t.k, 1, 96);
	ptx_ins(t.k, "mad.lo.u32 %s, %s, 16, %s", o, t.tid, t.sb);
	ptx_async_region_begin(t.a, OUT);
	ptx_st_shared_v4(t.k, o, 0, t.v);
	ptx_async_region_end(t.a);
	ptx_fence_proxy_async(t.k);
	ptx_bar_sync(t.k, 1, 96);
	ptx_guard(t.k, t.t0, 0);
	ptx_async_bulk_store(t.a, t.out, t.sb, bytes, OUT);
	ptx_bulk_commit_group(t.k);
	ptx_ins(t.k, "xor.b32 %s, %s, 1", par, par);
	async_tk_loop_end(&t, &lp);
	text = async_tk_end_expect(&t, BULK_WAIT, 2);
	async_expect_between(text, "// producer", "\texit;", BULK_WAIT, 0);
	async_expect_between(text, "// OUT free again", "bar.sync 1, 96;", BULK_WAIT " 0;", 1);
	async_expect_between(text, "$Lcrows_end", "\tret;", BULK_WAIT " 0;", 1);
	async_tk_accept(&t, text, 90);
}
END_TEST

/* A kernel without async ops comes out exactly as written, tracker or not */
START_TEST(test_no_async_ops_unchanged)
{
	char *text[2];

	for (int attach = 0; attach < 2; attach++) {
		struct tk t;
		struct ptx_loop lp;

		async_tk_begin(&t, "plain", 90, attach);
		ptx_loop_begin(t.k, &lp, "rows");
		async_tk_write(&t, t.sa, attach ? REG_A : -2);
		ptx_ins(t.k, "add.u32 %s, %s, 1; setp.lt.u32 %s, %s, 4", t.i, t.i, t.more, t.i);
		ptx_loop_end(t.k, &lp, t.more, 0);
		async_tk_use(&t, 1);
		text[attach] = async_tk_end(&t);
		if (attach)
			ck_assert_uint_eq(t.st.waits[PTX_ASYNC_BULK] + t.st.waits[PTX_ASYNC_WGMMA], 0);
	}
	ck_assert_str_eq(text[0], text[1]);
	free(text[0]);
	free(text[1]);
}
END_TEST

static void expect_error(struct tk *t, int err, const char *msg)
{
	char *text;

	ck_assert_int_eq(ptx_kernel_end(t->k), err);
	ck_assert_msg(strstr(wsn_last_error(), msg) != NULL, "error \"%s\" does not say \"%s\"", wsn_last_error(),
		      msg);
	ck_assert_int_eq(ptx_module_take(&t->m, &text), err);
	ck_assert_ptr_null(text);
}

START_TEST(test_errors)
{
	struct tk t;

	async_tk_begin(&t, "nested", 90, 1);
	ptx_async_region_begin(t.a, 1);
	ptx_async_region_begin(t.a, 2);
	expect_error(&t, WSN_EINVAL, "inside an open region");

	async_tk_begin(&t, "unopened", 90, 1);
	ptx_async_region_end(t.a);
	expect_error(&t, WSN_EINVAL, "without region_begin");

	async_tk_begin(&t, "unclosed", 90, 1);
	ptx_async_region_begin(t.a, 1);
	expect_error(&t, WSN_EINVAL, "without region_end");

	async_tk_begin(&t, "range", 90, 1);
	ptx_async_reuse(t.a, PTX_ASYNC_REGIONS);
	expect_error(&t, WSN_EINVAL, "region 32");

	async_tk_begin(&t, "twice", 90, 1);
	ck_assert_ptr_null(ptx_async_attach(t.k, NULL));
	expect_error(&t, WSN_EBUSY, "end pass already");

	async_tk_begin(&t, "nd", 90, 1);
	ptx_async_wgmma(t.a, "m64n8k16.f32.bf16.bf16", t.d[0], 0, t.adesc, t.bdesc, t.scale);
	expect_error(&t, WSN_EINVAL, "0 accumulator");

	async_tk_begin(&t, "policy", 90, 1);
	ptx_async_policy(t.a, PTX_ASYNC_KINDS, PTX_ASYNC_FLUSH);
	expect_error(&t, WSN_EINVAL, "bad policy");

	async_tk_begin(&t, "nolabel", 90, 1);
	async_tk_mma(&t, 1);
	ptx_bra(t.k, "$Lnowhere");
	expect_error(&t, WSN_EINVAL, "$Lnowhere");

	async_tk_begin(&t, "nolist", 90, 1);
	ptx_ins(t.k, "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 %s, %s, %s, %s, 1, 1, 0, 0", t.d[0][0],
		t.adesc, t.bdesc, t.scale);
	expect_error(&t, WSN_EINVAL, "accumulator");
}
END_TEST

Suite *suite_async_kernels(void)
{
	return TU_SUITE("async", { "bulk", 120, NULL, NULL, TU_TESTS({ test_mixed_kinds, 1 }, { test_ws_shaped_kernel, 1 }) },
			{ "contract", 0, NULL, NULL, TU_TESTS({ test_no_async_ops_unchanged, 1 }, { test_errors, 1 }) });
}
