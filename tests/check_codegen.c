/* SPDX-License-Identifier: MIT */
/* tests/check_codegen.c: the PTX emitter, the multi-wave planner, and every generated kernel through ptxas. */
#define _GNU_SOURCE
#include "testutil.h"

#include "codegen.h"
#include "ptx/emitter.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t hidden_sizes[] = { 1, 3, 64, 1000, 1024, 2048, 4097, 8192, 12288, 16384, 32768 };
static const enum wsn_op all_ops[] = { WSN_LAYERNORM_FWD, WSN_LAYERNORM_BWD, WSN_RMSNORM_FWD, WSN_RMSNORM_BWD };
static const enum wsn_dtype all_dtypes[] = { WSN_F32, WSN_F16, WSN_BF16 };

static void params_init(struct wsn__plan_params *p, enum wsn_op op, enum wsn_dtype dt, int64_t hidden)
{
	memset(p, 0, sizeof(*p));
	p->op = op;
	p->dtype = dt;
	p->hidden = hidden;
	p->rows = 16384;
	wsn_plan_options_init(&p->opts, op);
	p->opts.approach = WSN_APPROACH_MULTIWAVE; /* the warp-specialised plans are check_ws.c's */
}

/* ---------------------------------------------------------------- emitter */

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
	ck_assert_ptr_nonnull(strstr(text, ".version 8.3\n.target sm_90a\n.address_size 64"));
	ck_assert_ptr_nonnull(strstr(text, ".reg .f32 %acc3;"));
	ck_assert_ptr_nonnull(strstr(text, ".reg .b32 %r0, %r1, %r2"));
	ck_assert_ptr_nonnull(strstr(text, ".reg .b32 %r16, %r17, %r18, %r19;"));
	ck_assert_ptr_nonnull(strstr(text, "mov.f32 %acc3, 0f3FC00000;"));
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
		ck_assert_ptr_nonnull(strstr(text, "mbarrier.try_wait.parity.shared::cta.b64"));
		ck_assert_ptr_nonnull(strstr(text, "cp.async.bulk.tensor.2d.shared::cluster.global.tile"));
		ck_assert_ptr_nonnull(strstr(text, "setmaxnreg.dec.sync.aligned.u32 40"));
		ck_assert_ptr_nonnull(strstr(text, ".param .align 64 .b8 tmap[128]"));
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

/* ---------------------------------------------------------------- planner */

static void check_plan_properties(const struct wsn__gpu_props *g, const struct wsn__kernel_plan *kp)
{
	int bwd = wsn_op_is_backward(kp->op);
	unsigned nvtot = (unsigned)((kp->hidden + kp->vec - 1) / kp->vec);
	const char *e = kp->entry;

	ck_assert_msg(kp->bdimx * kp->bdimy == kp->block_threads, "%s: bdimx*bdimy != block_threads", e);
	ck_assert_msg(kp->bdimx % 32 == 0 && kp->bdimx <= 1024 && kp->block_threads <= 1024, "%s: block shape", e);
	ck_assert_msg((int64_t)kp->bdimx * kp->per_thread >= kp->hidden, "%s: columns not covered", e);
	ck_assert_msg(kp->per_thread == kp->nvec * kp->vec && kp->nvec * kp->bdimx >= nvtot, "%s: vectors", e);
	ck_assert_msg((kp->nvec - 1) * kp->bdimx < nvtot, "%s: a slice of vectors beyond the row", e);
	ck_assert_msg(kp->est_regs <= 255, "%s: %u registers", e, kp->est_regs);
	ck_assert_msg((kp->est_regs + 7) / 8 * 8 * 32 * ((kp->ctas_per_sm * kp->block_threads / 32 + 3) / 4) <=
		      (unsigned)g->regs_per_sm / 4, "%s: registers exceed a sub-partition's", e);
	ck_assert_msg(kp->smem_bytes <= (unsigned)g->smem_per_block_optin, "%s: shared memory %u", e, kp->smem_bytes);
	ck_assert_msg(kp->ctas_per_sm >= 1 && kp->ctas_per_sm * kp->block_threads <= (unsigned)g->max_threads_per_sm,
		      "%s: ctas per SM", e);
	ck_assert_msg((kp->smem_bytes + 1024) * kp->ctas_per_sm <= (unsigned)g->smem_per_sm || !kp->smem_bytes,
		      "%s: shared memory per SM", e);
	ck_assert_uint_eq(kp->max_grid, kp->ctas_per_sm * (unsigned)g->sms);
	ck_assert_msg(kp->bdimx <= 32 || kp->bdimy <= 15, "%s: more row groups than named barriers", e);
	ck_assert_uint_eq(kp->vec * wsn_dtype_size(kp->dtype), 16);
	ck_assert_int_eq(kp->arch, g->arch);
	ck_assert(strlen(kp->why) > 40);
	tu_assert_why_clauses(e, kp->why);
	if (bwd && (kp->has_weight || kp->has_bias)) {
		ck_assert_str_ne(kp->finish_entry, "");
		ck_assert_uint_eq(kp->finish_grid * 32, (kp->hidden + 31) / 32 * 32);
		ck_assert_uint_eq(kp->ws_bytes, (size_t)(kp->has_bias ? 2 : 1) * kp->max_grid * (size_t)kp->hidden * 4);
	} else {
		ck_assert_str_eq(kp->finish_entry, "");
		ck_assert_uint_eq(kp->ws_bytes, 0);
	}
	/* grid: backward persistent (never more than max_grid: the workspace holds max_grid partial
	 * rows); forward one CTA per row block, at most 2^31 - 1 */
	ck_assert_int_eq(kp->block_grid, !bwd);
	ck_assert_uint_eq(wsn__kernel_grid(kp, 1), 1);
	if (bwd) {
		ck_assert_uint_eq(wsn__kernel_grid(kp, 1000000), kp->max_grid);
		ck_assert_uint_eq(wsn__kernel_grid(kp, kp->bdimy * 3), 3 <= kp->max_grid ? 3 : kp->max_grid);
	} else {
		ck_assert_uint_eq(wsn__kernel_grid(kp, 1000000), (1000000 + kp->bdimy - 1) / kp->bdimy);
		ck_assert_uint_eq(wsn__kernel_grid(kp, kp->bdimy * 2 + 1), 3);
		ck_assert_uint_eq(wsn__kernel_grid(kp, (int64_t)1 << 40), 0x7fffffffu);
	}
}

START_TEST(test_planner_modelled_devices)
{
	struct wsn__gpu_props h, b;
	struct wsn__plan_params p;
	struct wsn__kernel_plan kp;
	char text[2048];

	wsn__gpu_props_h100(&h);
	wsn__gpu_props_b200(&b);
	ck_assert_int_eq(h.sms, 132);
	ck_assert_int_eq(h.smem_per_block_optin, 232448);
	ck_assert_int_eq(h.arch, 90);
	ck_assert_int_eq(b.sms, 148);
	ck_assert_int_eq(b.arch, 100);
	for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++)
		for (size_t d = 0; d < WSN_ARRAY_SIZE(all_dtypes); d++)
			for (size_t i = 0; i < WSN_ARRAY_SIZE(hidden_sizes); i++) {
				for (int dev = 0; dev < 2; dev++) {
					params_init(&p, all_ops[o], all_dtypes[d], hidden_sizes[i]);
					ck_assert_msg(wsn__plan_kernel(dev ? &b : &h, &p, &kp) == 0, "%s", wsn_last_error());
					check_plan_properties(dev ? &b : &h, &kp);
					ck_assert_int_gt(wsn__describe_kernel_plan(&kp, text, sizeof(text)), 0);
					ck_assert_ptr_nonnull(strstr(text, kp.entry));
				}
			}
	/* concrete choices on the H100 */
	params_init(&p, WSN_RMSNORM_FWD, WSN_BF16, 1024);
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_uint_eq(kp.bdimx, 32); /* a warp per row */
	ck_assert_uint_gt(kp.bdimy, 1);
	ck_assert_int_eq(kp.row_store, WSN_STORE_REG);
	params_init(&p, WSN_LAYERNORM_FWD, WSN_BF16, 32768);
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_uint_ge(kp.bdimx, 512);
	ck_assert_int_eq(kp.row_store, WSN_STORE_REG);
	params_init(&p, WSN_LAYERNORM_BWD, WSN_BF16, 32768);
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert(kp.dw_store != WSN_STORE_REG || kp.db_store != WSN_STORE_REG);
	ck_assert_ptr_nonnull(strstr(kp.why, "dbias sums in"));
	/* the finish kernel: 32 slices of the parts where its grid covers at most a quarter of the SMs */
	for (int a = 0; a < 2; a++) {
		params_init(&p, WSN_RMSNORM_BWD, WSN_BF16, 1024);
		p.opts.approach = a ? WSN_APPROACH_WS : WSN_APPROACH_MULTIWAVE;
		ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
		ck_assert_uint_eq(kp.finish_grid, 32);
		ck_assert_uint_eq(kp.finish_threads, 1024);
		params_init(&p, WSN_RMSNORM_BWD, WSN_BF16, 1088); /* 34 CTAs: more than 132 / 4 */
		p.opts.approach = a ? WSN_APPROACH_WS : WSN_APPROACH_MULTIWAVE;
		ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
		ck_assert_uint_eq(kp.finish_grid, 34);
		ck_assert_uint_eq(kp.finish_threads, 256);
	}
	/* RMSNorm has no bias; no weight means no finish kernel */
	params_init(&p, WSN_RMSNORM_BWD, WSN_BF16, 4096);
	p.opts.has_weight = 0;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_str_eq(kp.finish_entry, "");
	/* hidden 65536 is planned for every op and dtype */
	for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++)
		for (size_t d = 0; d < WSN_ARRAY_SIZE(all_dtypes); d++) {
			params_init(&p, all_ops[o], all_dtypes[d], 65536);
			ck_assert_msg(wsn__plan_kernel(&h, &p, &kp) == 0, "%s", wsn_last_error());
			check_plan_properties(&h, &kp);
		}
}
END_TEST

START_TEST(test_planner_forced_options)
{
	struct wsn__gpu_props h;
	struct wsn__plan_params p;
	struct wsn__kernel_plan kp;

	wsn__gpu_props_h100(&h);
	params_init(&p, WSN_LAYERNORM_FWD, WSN_BF16, 4096);
	p.opts.block_threads = 256;
	p.opts.groups = 2;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_uint_eq(kp.bdimx, 256);
	ck_assert_uint_eq(kp.bdimy, 2);
	ck_assert_uint_eq(kp.block_threads, 512);
	ck_assert_ptr_nonnull(strstr(kp.why, "forced"));
	check_plan_properties(&h, &kp);

	p.opts.block_threads = 100; /* not a multiple of 32 */
	p.opts.groups = 0;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "multiple of 32"));
	p.opts.block_threads = 2048;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_EINVAL);
	params_init(&p, WSN_LAYERNORM_BWD, WSN_BF16, 32768);
	p.opts.block_threads = 32; /* 128 vectors per thread */
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "vectors per thread"));
	params_init(&p, WSN_LAYERNORM_BWD, WSN_F32, 1024);
	p.opts.block_threads = 32; /* 32 row groups of 8 vectors: accumulators exceed the registers */
	p.opts.groups = 32;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "does not fit"));
	/* the limit is named, for the forced values only; under auto, ws's reason comes with it */
	params_init(&p, WSN_LAYERNORM_BWD, WSN_BF16, 4096);
	p.opts.block_threads = 128;
	p.opts.groups = 8;
	p.opts.approach = WSN_APPROACH_MULTIWAVE;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_EINVAL);
	ck_assert_msg(strstr(wsn_last_error(), "forced block_threads 128 and groups 8 does not fit: 1024 threads x ~") &&
		      strstr(wsn_last_error(), "registers, more than the SM's 65536 (all in registers)"), "%s",
		      wsn_last_error());
	p.opts.block_threads = 0;
	p.opts.groups = 16;
	p.opts.approach = WSN_APPROACH_AUTO;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_EINVAL);
	ck_assert_msg(strstr(wsn_last_error(), "plan: no kernel fits: multi-wave layernorm-bwd bf16 hidden 4096: forced "
			     "groups 16 does not fit: ") && strstr(wsn_last_error(), "; ws "), "%s", wsn_last_error());
	ck_assert_ptr_null(strstr(wsn_last_error(), "block_threads 0"));
	params_init(&p, WSN_RMSNORM_FWD, WSN_F32, 1024);
	p.opts.block_threads = 512;
	p.opts.groups = 4; /* 2048 threads */
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "1024 threads"));
	params_init(&p, WSN_RMSNORM_FWD, WSN_F32, 1024);
	p.opts.stages = 4;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "ws approach"));
	params_init(&p, WSN_RMSNORM_FWD, WSN_F32, 1024);
	p.opts.approach = WSN_APPROACH_WS;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_int_eq(kp.approach, WSN_APPROACH_WS);
	params_init(&p, WSN_RMSNORM_FWD, WSN_F32, 1024);
	p.opts.arch = 80;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_ENOTSUP);
	params_init(&p, WSN_RMSNORM_FWD, WSN_F32, (int64_t)1 << 24);
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_ESHAPE);
	params_init(&p, WSN_RMSNORM_FWD, WSN_F32, 0);
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_ESHAPE);
}
END_TEST

START_TEST(test_emit_public)
{
	struct wsn_plan_options o;
	char *ptx = NULL, *plan = NULL;

	wsn_plan_options_init(&o, WSN_RMSNORM_BWD);
	o.approach = WSN_APPROACH_MULTIWAVE;
	ck_assert_int_eq(wsn_emit_ptx(WSN_RMSNORM_BWD, WSN_BF16, 4096, 16384, &o, &ptx, &plan), 0);
	ck_assert_ptr_nonnull(strstr(ptx, ".target sm_90a"));
	ck_assert_ptr_nonnull(strstr(ptx, "// op=rmsnorm-bwd dtype=bf16 hidden=4096"));
	ck_assert_ptr_nonnull(strstr(ptx, "bdimx="));
	ck_assert_ptr_nonnull(strstr(ptx, ".visible .entry wsn_rmsnorm_bwd_bf16_h4096("));
	ck_assert_ptr_nonnull(strstr(ptx, ".visible .entry wsn_rmsnorm_bwd_bf16_h4096_finish("));
	ck_assert_ptr_nonnull(strstr(ptx, "ld.global.L1::no_allocate.L2::256B.v4.b32"));
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

/* ---------------------------------------------------------------- every kernel through ptxas */

struct gen_set {
	struct ptx_buf module;   /* all kernels of one dtype and arch in one module */
	struct wsn__kernel_plan plans[WSN_ARRAY_SIZE(all_ops) * WSN_ARRAY_SIZE(hidden_sizes)];
	int nplans;
};

/* Append a generated module to a combined one (one header, one extern shared declaration). */
static void append_module(struct ptx_buf *dst, const char *src)
{
	const char *body = src;

	if (dst->len) {
		/* skip .version/.target/.address_size and the extern declaration */
		for (int i = 0; i < 3; i++)
			body = strchr(body, '\n') + 1;
		const char *ext = strstr(body, ".extern .shared");
		if (ext) {
			ptx_buf_printf(dst, "%.*s", (int)(ext - body), body);
			body = strchr(ext, '\n') + 1;
		}
	}
	ptx_buf_printf(dst, "%s", body);
}

static void generate_set(struct gen_set *s, enum wsn_dtype dt, int arch)
{
	struct wsn__gpu_props g;

	memset(s, 0, sizeof(*s));
	if (arch == 100)
		wsn__gpu_props_b200(&g);
	else
		wsn__gpu_props_h100(&g);
	for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++)
		for (size_t i = 0; i < WSN_ARRAY_SIZE(hidden_sizes); i++) {
			struct wsn__plan_params p;
			struct wsn__kernel_plan *kp = &s->plans[s->nplans++];
			char *text;

			params_init(&p, all_ops[o], dt, hidden_sizes[i]);
			ck_assert_msg(wsn__plan_kernel(&g, &p, kp) == 0, "%s", wsn_last_error());
			ck_assert_msg(wsn__generate_ptx(kp, &text) == 0, "%s", wsn_last_error());
			ck_assert_ptr_nonnull(strstr(text, kp->entry));
			append_module(&s->module, text);
			free(text);
		}
	ck_assert(!s->module.oom);
}

static void check_set(struct gen_set *s, const char *log, int arch)
{
	for (int i = 0; i < s->nplans; i++) {
		const struct wsn__kernel_plan *kp = &s->plans[i];
		struct tu_fn_info fi = tu_ptxas_info(log, kp->entry);
		/* ptxas's cap: 16384 registers per sub-partition, warps spread over 4 of them */
		unsigned warps = kp->ctas_per_sm * ((kp->block_threads + 31) / 32);
		unsigned cap = 16384 / (32 * ((warps + 3) / 4)) / 8 * 8;
		int strict = kp->dtype == WSN_BF16 && kp->hidden <= 16384;

		if (cap > 255)
			cap = 255;
		ck_assert_msg(fi.found, "ptxas -v said nothing about %s", kp->entry);
		printf("ptxas sm_%da %-34s bdimx %4u bdimy %2u nvec %2u est %3u regs %3d (cap %3u) spill %d/%d\n",
		       arch, kp->entry, kp->bdimx, kp->bdimy, kp->nvec, kp->est_regs, fi.regs, cap, fi.spill_st,
		       fi.spill_ld);
		/* the planned occupancy holds */
		ck_assert_msg((unsigned)fi.regs <= cap, "%s: %d registers > %u", kp->entry, fi.regs, cap);
		if (strict)
			ck_assert_msg(fi.spill_st == 0 && fi.spill_ld == 0, "%s sm_%da spills %d/%d bytes", kp->entry,
				      arch, fi.spill_st, fi.spill_ld);
		/* The estimate sets the occupancy (ctas_per_sm) and so the cap ptxas is held to
		 * (.maxntid x .minnctapersm); ptxas fills registers up to the cap, so "used" is not
		 * "needed": the estimate was good enough when the kernel fits the cap without spills. */
		ck_assert_msg(kp->est_regs <= cap + 8, "%s: estimate %u above its own cap %u", kp->entry, kp->est_regs,
			      cap);
		if (kp->finish_entry[0]) {
			fi = tu_ptxas_info(log, kp->finish_entry);
			ck_assert_msg(fi.found && fi.spill_st == 0 && fi.spill_ld == 0, "%s", kp->finish_entry);
		}
	}
}

/* Generate every op x hidden for one dtype, for sm_90a and sm_100a, and compile both at once. */
static void ptxas_dtype(enum wsn_dtype dt)
{
	const char *ptxas = tu_ptxas("the generated kernels");
	static struct gen_set sets[2];
	int archs[2] = { 90, 100 };
	struct tu_ptxas_job jobs[2];
	char *dir = NULL, path[2][512];

	for (int a = 0; a < 2; a++)
		generate_set(&sets[a], dt, archs[a]);
	if (!ptxas) {
		for (int a = 0; a < 2; a++)
			ptx_buf_free(&sets[a].module);
		return;
	}
	dir = tu_tmpdir();
	for (int a = 0; a < 2; a++) {
		snprintf(path[a], sizeof(path[a]), "%s/%s_sm%d.ptx", dir, wsn_dtype_name(dt), archs[a]);
		tu_write_file(path[a], sets[a].module.s, sets[a].module.len);
		tu_ptxas_start(&jobs[a], ptxas, path[a], archs[a]);
	}
	for (int a = 0; a < 2; a++) {
		char *log;
		int st = tu_ptxas_wait(&jobs[a], &log);
		ck_assert_msg(st == 0, "ptxas sm_%da failed on %s:\n%.4000s", archs[a], path[a], log);
		check_set(&sets[a], log, archs[a]);
		free(log);
		ptx_buf_free(&sets[a].module);
	}
	tu_rmtree(dir);
	free(dir);
}

START_TEST(test_kernels_ptxas_bf16)
{
	ptxas_dtype(WSN_BF16);
}
END_TEST

START_TEST(test_kernels_ptxas_f16)
{
	ptxas_dtype(WSN_F16);
}
END_TEST

START_TEST(test_kernels_ptxas_f32)
{
	ptxas_dtype(WSN_F32);
}
END_TEST

/*
 * Rows too wide for the registers are re-read from global memory, pass after pass. Each pass over the
 * slices every thread holds whole must be a loop of a few slices a round: unrolled, ptxas issued all
 * of a pass's loads before the first use and spilled 0.5-7 KB a thread; and as every pass reads the
 * row from memory again, LayerNorm's forward takes its mean and M2 in one. Every op and dtype, at the
 * first widths whose rows go to global memory and at one with a partial last vector: the loop is
 * there, the kernel is the one planned, and ptxas (when present) finds no spill on sm_90a or sm_100a.
 */
START_TEST(test_wide_rows_loop)
{
	static const int64_t wide[][2] = { { 65536, 131072 }, { 131073, 262144 } }; /* [dtype is 16-bit][i] */
	const char *ptxas = tu_ptxas("the wide-row kernels");
	struct ptx_buf mod[2] = { 0 };
	char entries[WSN_ARRAY_SIZE(all_ops) * WSN_ARRAY_SIZE(all_dtypes) * 3][sizeof(((struct wsn__kernel_plan *)0)->entry)];
	int n = 0, archs[2] = { 90, 100 };

	for (int a = 0; a < 2; a++) {
		struct wsn__gpu_props g;

		if (archs[a] == 100)
			wsn__gpu_props_b200(&g);
		else
			wsn__gpu_props_h100(&g);
		for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++)
			for (size_t d = 0; d < WSN_ARRAY_SIZE(all_dtypes); d++)
				for (int i = 0; i < 3; i++) {
					int int16 = all_dtypes[d] != WSN_F32;
					int64_t h = i < 2 ? wide[i][int16] : int16 ? 131080 + 3 : 65537;
					struct wsn__plan_params p;
					struct wsn__kernel_plan kp;
					const char *at;
					char *text;
					int rounds = 0;

					params_init(&p, all_ops[o], all_dtypes[d], h);
					ck_assert_msg(wsn__plan_kernel(&g, &p, &kp) == 0, "%s", wsn_last_error());
					ck_assert_msg(kp.row_store == WSN_STORE_GLOBAL, "%s: rows not in global memory", kp.entry);
					ck_assert_msg(wsn__generate_ptx(&kp, &text) == 0, "%s", wsn_last_error());
					for (at = text; (at = strstr(at, ".pragma \"nounroll\"")); at++)
						rounds++;
					/* two passes on both the vector and the element path: forward, the
					 * statistics (LayerNorm's mean and M2 in one pass) and the output;
					 * backward, the sums and dx */
					ck_assert_msg(rounds == 4, "%s: %d round loops", kp.entry, rounds);
					append_module(&mod[a], text);
					if (!a)
						snprintf(entries[n++], sizeof(entries[0]), "%s", kp.entry);
					free(text);
				}
		ck_assert(!mod[a].oom);
	}
	if (ptxas) {
		char *dir = tu_tmpdir(), path[2][512];
		struct tu_ptxas_job jobs[2];

		for (int a = 0; a < 2; a++) {
			snprintf(path[a], sizeof(path[a]), "%s/wide_sm%d.ptx", dir, archs[a]);
			tu_write_file(path[a], mod[a].s, mod[a].len);
			tu_ptxas_start(&jobs[a], ptxas, path[a], archs[a]);
		}
		for (int a = 0; a < 2; a++) {
			char *log;
			int st = tu_ptxas_wait(&jobs[a], &log);

			ck_assert_msg(st == 0, "ptxas sm_%da failed on %s:\n%.4000s", archs[a], path[a], log);
			for (int e = 0; e < n; e++) {
				struct tu_fn_info fi = tu_ptxas_info(log, entries[e]);

				printf("ptxas sm_%da %-40s regs %3d spill %d/%d\n", archs[a], entries[e], fi.regs,
				       fi.spill_st, fi.spill_ld);
				ck_assert_msg(fi.found && fi.spill_st == 0 && fi.spill_ld == 0, "%s sm_%da spills %d/%d bytes",
					      entries[e], archs[a], fi.spill_st, fi.spill_ld);
			}
			free(log);
		}
		tu_rmtree(dir);
		free(dir);
	}
	for (int a = 0; a < 2; a++)
		ptx_buf_free(&mod[a]);
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
	ck_assert_ptr_nonnull(strstr(ptx, "st.global.v4.b32"));
	ck_assert_ptr_nonnull(strstr(ptx, "rsqrt.approx.f32"));
	ck_assert_ptr_nonnull(strstr(ptx, "shfl.sync.bfly.b32"));
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
	ck_assert_ptr_nonnull(strstr(ptx, " bra $Linit_done"));
	ck_assert_ptr_nonnull(strstr(ptx, " bra $Lout"));
	ck_assert_ptr_nonnull(strstr(ptx, " bra $Lxch_sent"));
	ck_assert_ptr_null(strstr(ptx, "bra.uni $Linit_done"));
	ck_assert_ptr_null(strstr(ptx, "bra.uni $Lout"));
	ck_assert_ptr_null(strstr(ptx, "bra.uni $Lxch_sent"));
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

Suite *suite_codegen(void)
{
	Suite *s = suite_create("codegen");
	TCase *tc = tcase_create("emitter");

	tcase_add_test(tc, test_emitter_registers_and_labels);
	tcase_add_test(tc, test_emitter_async_ptxas);
	suite_add_tcase(s, tc);
	tc = tcase_create("planner");
	tcase_add_test(tc, test_planner_modelled_devices);
	tcase_add_test(tc, test_planner_forced_options);
	tcase_add_test(tc, test_emit_public);
	tcase_add_test(tc, test_kernel_text);
	tcase_add_test(tc, test_prefetch_before_wait);
	suite_add_tcase(s, tc);
	tc = tcase_create("ptxas");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_kernels_ptxas_bf16);
	tcase_add_test(tc, test_kernels_ptxas_f16);
	tcase_add_test(tc, test_kernels_ptxas_f32);
	tcase_add_test(tc, test_wide_rows_loop);
	suite_add_tcase(s, tc);
	return s;
}
