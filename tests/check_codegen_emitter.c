/* SPDX-License-Identifier: MIT */
/* tests/check_codegen_emitter.c: the PTX emitter: registers, labels and an async kernel through ptxas. */
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

START_TEST(test_emitter_registers_and_labels)
{
	struct ptx_module m;
	struct ptx_kernel *k;
	const char *a, *b, *l1, *l2;
	char *text;

	ck_assert_int_eq(ptx_module_init(&m, 90), 0);
	k = ptx_kernel_begin(&m, "regs");
	ck_assert_ptr_nonnull(k);
	ptx_param(k, PTX_U64, "p");
	a = ptx_reg(k, PTX_F32, "acc%d", 3);
	b = ptx_reg(k, PTX_F32, "acc%d", 3);
	ck_assert_ptr_eq(a, b);
	ck_assert_str_eq(a, "%acc3");
	l1 = ptx_label_new(k, "loop");
	l2 = ptx_label_new(k, "loop");
	ck_assert_str_ne(l1, l2);
	for (int i = 0; i < 20; i++)
		ptx_reg(k, PTX_B32, "r%d", i);
	ptx_mov_f32(k, a, 1.5f);
	ptx_label(k, l1);
	ptx_ret(k);
	ck_assert_int_eq(ptx_kernel_end(k), 0);
	ck_assert_int_eq(ptx_module_take(&m, &text), 0);
	EXPECT_HAS(text, ".version 8.3\n.target sm_90a\n.address_size 64", ".reg .f32 %acc3;",
		   ".reg .b32 %r0, %r1, %r2", ".reg .b32 %r16, %r17, %r18, %r19;", "mov.f32 %acc3, 0f3FC00000;");
	free(text);

	/* same name, another type; a special register's name; sm_100a header */
	ck_assert_int_eq(ptx_module_init(&m, 100), 0);
	k = ptx_kernel_begin(&m, "bad");
	ptx_reg(k, PTX_F32, "v");
	ptx_reg(k, PTX_U32, "v");
	ck_assert_int_eq(ptx_kernel_end(k), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "%v"));
	ck_assert_int_eq(ptx_module_take(&m, &text), WSN_EINVAL);
	ck_assert_int_eq(ptx_module_init(&m, 100), 0);
	k = ptx_kernel_begin(&m, "bad2");
	ptx_reg(k, PTX_U32, "tid");
	ck_assert_int_eq(ptx_kernel_end(k), WSN_EINVAL);
	ptx_module_free(&m);
	ck_assert_int_eq(ptx_module_init(&m, 80), WSN_EINVAL);
	ptx_module_free(&m);
	ck_assert_int_eq(ptx_module_init(&m, 100), 0);
	ck_assert_ptr_nonnull(strstr(m.text.s, ".version 8.6\n.target sm_100a"));
	ptx_module_free(&m);
}
END_TEST

/* A kernel with the warp-specialised building blocks: a producer elects a lane, arms an mbarrier
 * with expect_tx, copies a row with cp.async.bulk and a tile with cp.async.bulk.tensor, consumers
 * wait on the parity; a bulk store back with commit/wait_group.read; setmaxnreg on both sides. */
static char *async_kernel(int arch)
{
	struct ptx_module m;
	struct ptx_kernel *k;
	const char *sm, *bar, *src, *dst, *bytes, *tmap, *pe, *c[2], *warp, *ppro, *par, *one;
	struct ptx_loop lp;
	char *text;

	ck_assert_int_eq(ptx_module_init(&m, arch), 0);
	ptx_module_comment(&m, "async building blocks");
	ptx_module_extern_smem(&m, "smem", 128);
	k = ptx_kernel_begin(&m, "async_demo");
	ptx_param(k, PTX_U64, "src");
	ptx_param(k, PTX_U64, "dst");
	ptx_param_tensormap(k, "tmap");
	ptx_kernel_launch_bounds(k, 256, 1);
	sm = ptx_reg(k, PTX_U32, "sm");
	bar = ptx_reg(k, PTX_U32, "bar");
	src = ptx_reg(k, PTX_U64, "srcp");
	dst = ptx_reg(k, PTX_U64, "dstp");
	bytes = ptx_reg(k, PTX_U32, "bytes");
	tmap = ptx_reg(k, PTX_U64, "tmapp");
	pe = ptx_reg(k, PTX_PRED, "elected");
	warp = ptx_reg(k, PTX_U32, "warp");
	ppro = ptx_reg(k, PTX_PRED, "producer");
	par = ptx_reg(k, PTX_U32, "parity");
	one = ptx_reg(k, PTX_PRED, "once");
	c[0] = ptx_reg(k, PTX_S32, "c0");
	c[1] = ptx_reg(k, PTX_S32, "c1");
	ptx_ld_param(k, PTX_U64, src, "src");
	ptx_ld_param(k, PTX_U64, dst, "dst");
	ptx_param_addr(k, tmap, "tmap");
	ptx_smem_addr(k, sm, "smem", 0);
	ptx_smem_addr(k, bar, "smem", 8192);
	ptx_mov_imm(k, PTX_U32, bytes, 4096);
	ptx_mov_imm(k, PTX_S32, c[0], 0);
	ptx_mov_imm(k, PTX_S32, c[1], 0);
	ptx_mov_imm(k, PTX_U32, par, 0);
	ptx_sreg(k, warp, "%tid.x");
	ptx_ins(k, "shr.u32 %s, %s, 5", warp, warp);
	ptx_ins(k, "setp.eq.u32 %s, %s, 0", ppro, warp);
	ptx_ins(k, "setp.eq.u32 %s, %s, 0", one, warp);
	ptx_guard(k, one, 0);
	ptx_mbarrier_init(k, bar, 0, 1);
	ptx_fence_mbarrier_init(k);
	ptx_bar_sync(k, 0, 0);
	ptx_loop_begin(k, &lp, "role");
	ptx_loop_break_if(k, &lp, ppro, 1);
	ptx_setmaxnreg(k, 0, 40);
	ptx_elect_sync(k, pe, NULL);
	ptx_guard(k, pe, 0);
	ptx_mbarrier_arrive_expect_tx(k, bar, 0, 4096 + 2048);
	ptx_guard(k, pe, 0);
	ptx_cp_async_bulk_g2s(k, sm, src, bytes, bar);
	{
		const char *tile = ptx_reg(k, PTX_U32, "tile");
		ptx_ins(k, "add.u32 %s, %s, 4096", tile, sm);
		ptx_guard(k, pe, 0);
		ptx_cp_async_bulk_tensor_g2s(k, 2, tile, tmap, c, bar);
	}
	ptx_loop_end(k, &lp, NULL, 0);
	ptx_setmaxnreg(k, 1, 232);
	ptx_mbarrier_wait_parity(k, bar, 0, par);
	ptx_fence_proxy_async(k);
	ptx_guard(k, one, 0);
	ptx_cp_async_bulk_s2g(k, dst, sm, bytes);
	ptx_bulk_commit_group(k);
	ptx_bulk_wait_group_read(k, 0);
	ptx_mbarrier_arrive(k, bar, 0);
	ptx_ret(k);
	ck_assert_int_eq(ptx_kernel_end(k), 0);
	ck_assert_int_eq(ptx_module_take(&m, &text), 0);
	return text;
}

START_TEST(test_emitter_async_ptxas)
{
	const char *ptxas = tu_ptxas("the async kernel");
	char *dir, path[512], *log;
	int archs[2] = { 90, 100 };

	for (int a = 0; a < 2; a++) {
		char *text = async_kernel(archs[a]);
		EXPECT_HAS(text, "mbarrier.try_wait.parity.shared::cta.b64",
			   "cp.async.bulk.tensor.2d.shared::cluster.global.tile", "setmaxnreg.dec.sync.aligned.u32 40",
			   ".param .align 64 .b8 tmap[128]");
		if (!ptxas) {
			free(text);
			continue;
		}
		dir = tu_tmpdir();
		snprintf(path, sizeof(path), "%s/async.ptx", dir);
		tu_write_file(path, text, strlen(text));
		struct tu_ptxas_job j;
		tu_ptxas_start(&j, ptxas, path, archs[a]);
		int st = tu_ptxas_wait(&j, &log);
		ck_assert_msg(st == 0, "ptxas sm_%da rejected the async kernel:\n%s\n%s", archs[a], log, text);
		free(log);
		free(text);
		tu_rmtree(dir);
		free(dir);
	}
}
END_TEST

Suite *suite_codegen_emitter(void)
{
	return TU_SUITE("codegen", { "emitter", 0, NULL, NULL, TU_TESTS({ test_emitter_registers_and_labels, 1 },
				{ test_emitter_async_ptxas, 1 }) });
}
