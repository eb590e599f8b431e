/* SPDX-License-Identifier: MIT */
/* tests/check_codegen_planner.c: the multi-wave planner on the modelled devices, and its forced options. */
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
		ck_assert_uint_eq(kp->partials_bytes, (size_t)(kp->has_bias ? 2 : 1) * kp->max_grid * (size_t)kp->hidden * 4);
	} else {
		ck_assert_str_eq(kp->finish_entry, "");
		ck_assert_uint_eq(kp->partials_bytes, 0);
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
					codegen_params_init(&p, all_ops[o], all_dtypes[d], hidden_sizes[i]);
					ck_assert_msg(wsn__plan_kernel(dev ? &b : &h, &p, &kp) == 0, "%s", wsn_last_error());
					check_plan_properties(dev ? &b : &h, &kp);
					ck_assert_int_gt(wsn__describe_kernel_plan(&kp, text, sizeof(text)), 0);
					ck_assert_ptr_nonnull(strstr(text, kp.entry));
				}
			}
	/* concrete choices on the H100 */
	codegen_params_init(&p, WSN_RMSNORM_FWD, WSN_BF16, 1024);
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_uint_eq(kp.bdimx, 32); /* a warp per row */
	ck_assert_uint_gt(kp.bdimy, 1);
	ck_assert_int_eq(kp.row_store, WSN_STORE_REG);
	/* 64 KB rows: LayerNorm 16 vectors a thread, RMSNorm more threads; both two CTAs per SM */
	codegen_params_init(&p, WSN_LAYERNORM_FWD, WSN_BF16, 32768);
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_uint_eq(kp.nvec, 16);
	ck_assert_uint_ge(kp.ctas_per_sm, 2);
	ck_assert_int_eq(kp.row_store, WSN_STORE_REG);
	codegen_params_init(&p, WSN_RMSNORM_FWD, WSN_BF16, 32768);
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_uint_ge(kp.bdimx, 512);
	ck_assert_uint_ge(kp.ctas_per_sm, 2);
	ck_assert_int_eq(kp.row_store, WSN_STORE_REG);
	codegen_params_init(&p, WSN_LAYERNORM_BWD, WSN_BF16, 32768);
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert(kp.dw_store != WSN_STORE_REG || kp.db_store != WSN_STORE_REG);
	ck_assert_ptr_nonnull(strstr(kp.why, "dbias sums in"));
	/* the finish kernel: 32 slices of the parts where its grid covers at most a quarter of the SMs */
	for (int a = 0; a < 2; a++) {
		codegen_params_init(&p, WSN_RMSNORM_BWD, WSN_BF16, 1024);
		p.opts.approach = a ? WSN_APPROACH_WS : WSN_APPROACH_MULTIWAVE;
		ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
		ck_assert_uint_eq(kp.finish_grid, 32);
		ck_assert_uint_eq(kp.finish_threads, 1024);
		codegen_params_init(&p, WSN_RMSNORM_BWD, WSN_BF16, 1088); /* 34 CTAs: more than 132 / 4 */
		p.opts.approach = a ? WSN_APPROACH_WS : WSN_APPROACH_MULTIWAVE;
		ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
		ck_assert_uint_eq(kp.finish_grid, 34);
		ck_assert_uint_eq(kp.finish_threads, 256);
	}
	/* RMSNorm has no bias; no weight means no finish kernel */
	codegen_params_init(&p, WSN_RMSNORM_BWD, WSN_BF16, 4096);
	p.opts.has_weight = 0;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_str_eq(kp.finish_entry, "");
	/* hidden 65536 is planned for every op and dtype */
	for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++)
		for (size_t d = 0; d < WSN_ARRAY_SIZE(all_dtypes); d++) {
			codegen_params_init(&p, all_ops[o], all_dtypes[d], 65536);
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
	codegen_params_init(&p, WSN_LAYERNORM_FWD, WSN_BF16, 4096);
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
	codegen_params_init(&p, WSN_LAYERNORM_BWD, WSN_BF16, 32768);
	p.opts.block_threads = 32; /* 128 vectors per thread */
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "vectors per thread"));
	codegen_params_init(&p, WSN_LAYERNORM_BWD, WSN_F32, 1024);
	p.opts.block_threads = 32; /* 32 row groups of 8 vectors: accumulators exceed the registers */
	p.opts.groups = 32;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "does not fit"));
	/* the limit is named, for the forced values only; under auto, ws's reason comes with it */
	codegen_params_init(&p, WSN_LAYERNORM_BWD, WSN_BF16, 4096);
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
	codegen_params_init(&p, WSN_RMSNORM_FWD, WSN_F32, 1024);
	p.opts.block_threads = 512;
	p.opts.groups = 4; /* 2048 threads */
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "1024 threads"));
	codegen_params_init(&p, WSN_RMSNORM_FWD, WSN_F32, 1024);
	p.opts.stages = 4;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "ws approach"));
	codegen_params_init(&p, WSN_RMSNORM_FWD, WSN_F32, 1024);
	p.opts.approach = WSN_APPROACH_WS;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), 0);
	ck_assert_int_eq(kp.approach, WSN_APPROACH_WS);
	codegen_params_init(&p, WSN_RMSNORM_FWD, WSN_F32, 1024);
	p.opts.arch = 80;
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_ENOTSUP);
	codegen_params_init(&p, WSN_RMSNORM_FWD, WSN_F32, (int64_t)1 << 24);
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_ESHAPE);
	codegen_params_init(&p, WSN_RMSNORM_FWD, WSN_F32, 0);
	ck_assert_int_eq(wsn__plan_kernel(&h, &p, &kp), WSN_ESHAPE);
}
END_TEST

Suite *suite_codegen_planner(void)
{
	return TU_SUITE("codegen", { "planner", 0, NULL, NULL, TU_TESTS({ test_planner_modelled_devices, 1 },
				{ test_planner_forced_options, 1 }) });
}
