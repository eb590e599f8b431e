/* SPDX-License-Identifier: MIT */
/* tests/check_gpu_ops.c: the CUDA backend's ops on a real GPU against the CPU backend: every shape, wide rows, strided stats, fuzz. */
#include "config.h"
#include <stdio.h>

#include "testutil.h"
#include "cuda/cuda_internal.h"
#include "core/clock.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_util.h"

/* Every op over every row count in rows[] for one setup; returns the failures. */
static int run_setup(struct setup *s, const int64_t *rows, int nrows)
{
	int fails = 0;

	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
		struct wsn_plan *gp = NULL, *cp = NULL;
		double worst = 0, t0 = wsn__now();
		int e, f = 0;

		if ((e = wsn_plan_create(gpu_dev, ops[o], s->rows, s->hidden, s->dt, NULL, &gp)) < 0) {
			printf("FAIL %s %s hidden=%lld: GPU plan: %s: %s\n", wsn_op_name(ops[o]), wsn_dtype_name(s->dt),
			       (long long)s->hidden, wsn_err_name(e), wsn_last_error());
			fails++;
			continue;
		}
		OK(wsn_plan_create(cpu_dev, ops[o], s->rows, s->hidden, s->dt, NULL, &cp));
		for (int i = 0; i < nrows; i++)
			if (rows[i] <= s->rows)
				f += gpu_run_rows(s, ops[o], gp, cp, rows[i], &worst);
		printf("%s %s %s hidden=%lld%s: worst rel_l2 %.2e, %.2f s\n", f ? "FAIL" : "ok", wsn_op_name(ops[o]),
		       wsn_dtype_name(s->dt), (long long)s->hidden, s->ld != s->hidden || s->off ? " strided" : "", worst,
		       wsn__now() - t0);
		fflush(stdout);
		fails += f;
		wsn_plan_destroy(gp);
		wsn_plan_destroy(cp);
	}
	return fails;
}

static const int64_t hiddens[] = { 1, 3, 64, 1000, 1024, 2048, 4096, 4097, 8192, 12288, 16384, 32768 };

static const int64_t row_counts[] = { 1, 7, 1000, 16384 };

/*
 * All ops x dtypes for hidden size hiddens[_i], rows 1, 7, 1000 and, for a subset of hidden sizes
 * that keeps the CPU reference within the time budget, 16384.
 */
START_TEST(test_ops)
{
	int64_t h = hiddens[_i], rows = h <= 1000 || h == 4096 ? 16384 : 1000;
	size_t n = (size_t)(rows * h);
	char tag[64];
	float *x32, *dy32, *w32, *b32;
	int fails = 0;

	snprintf(tag, sizeof(tag), "x-%lld", (long long)h);
	x32 = gpu_random_f32(n, tag, 0.5f, 1.0f);
	snprintf(tag, sizeof(tag), "dy-%lld", (long long)h);
	dy32 = gpu_random_f32(n, tag, 0.0f, 1.0f);
	snprintf(tag, sizeof(tag), "w-%lld", (long long)h);
	w32 = gpu_random_f32((size_t)h, tag, 1.0f, 0.25f);
	snprintf(tag, sizeof(tag), "b-%lld", (long long)h);
	b32 = gpu_random_f32((size_t)h, tag, 0.0f, 0.25f);
	for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
		struct setup s;

		gpu_setup_init(&s, dtypes[d], h, rows, h, 0, 0, x32, dy32, w32, b32);
		fails += run_setup(&s, row_counts, (int)(sizeof(row_counts) / sizeof(row_counts[0])));
		gpu_setup_free(&s);
	}
	free(x32);
	free(dy32);
	free(w32);
	free(b32);
	ck_assert_msg(fails == 0, "%d mismatches for hidden %lld (see FAIL lines above)", fails, (long long)h);
}
END_TEST

/* [rows, 1] statistics, and x/dy with a row stride and a base that is not 16-byte aligned. */
START_TEST(test_strided_stats)
{
	static const int64_t hs[] = { 1000, 4096 };
	static const int64_t rows[] = { 1, 333 };
	int fails = 0;

	for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++) {
		int64_t h = hs[i], ld = h + 3, r = 333;
		struct inputs in;

		gpu_inputs_make(&in, "strided", h, r, ld, 1);
		for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
			struct setup s;

			gpu_setup_init(&s, dtypes[d], h, r, ld, 1, 1, in.x, in.dy, in.w, in.b);
			fails += run_setup(&s, rows, 2);
			gpu_setup_free(&s);
		}
		gpu_inputs_free(&in);
	}
	ck_assert_msg(fails == 0, "%d mismatches (see FAIL lines above)", fails);
}
END_TEST

/*
 * Rows too wide for the registers (f32 from 64K, 16-bit from 128K, and a width with a partial last
 * vector that takes the element path): the multi-wave kernels re-read them from global memory in
 * passes that run as loops over chunks of slices, LayerNorm's forward takes its statistics in one
 * pass, and auto may pick a ws kernel of one stage over multi-wave sums kept in global memory. Auto
 * first, then every op forced onto multi-wave, then multi-wave shapes whose passes step a shared-
 * memory weight or dweight through the loop.
 */
START_TEST(test_wide_rows)
{
	static const int64_t rows[] = { 1, 7, 300 };
	static const struct { enum wsn_op op; enum wsn_dtype dt; int64_t h; } smem[] = {
		{ WSN_LAYERNORM_BWD, WSN_BF16, 32768 }, { WSN_LAYERNORM_BWD, WSN_F32, 24576 },
		{ WSN_RMSNORM_BWD, WSN_F32, 49152 }, { WSN_RMSNORM_BWD, WSN_BF16, 49152 },
	};
	struct wsn__cu_device *cd = gpu_dev->ctx;
	enum wsn_dtype dt = dtypes[_i];
	int64_t base = dt == WSN_F32 ? 65536 : 131072;
	int fails = 0;

	for (int w = 0; w < 2; w++) {
		int64_t h = base + (w ? 3 : 0);
		struct inputs in;
		struct setup s;

		gpu_inputs_make(&in, "wide", h, 300, h, 0);
		gpu_setup_init(&s, dt, h, 300, h, 0, 0, in.x, in.dy, in.w, in.b);
		fails += run_setup(&s, rows, 3);
		for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
			struct wsn_plan_options po;
			struct wsn__plan_params pp;
			struct wsn__kernel_plan *kp = gpu_xcalloc(sizeof(*kp));

			memset(&pp, 0, sizeof(pp));
			pp.op = ops[o];
			pp.dtype = dt;
			pp.hidden = h;
			pp.rows = 300;
			wsn_plan_options_init(&pp.opts, ops[o]);
			pp.opts.approach = WSN_APPROACH_MULTIWAVE;
			OK(wsn__plan_kernel(&cd->props, &pp, kp));
			ck_assert_msg(kp->row_store == WSN_STORE_GLOBAL, "%s: the row is not in global memory", kp->entry);
			free(kp);
			memset(&po, 0, sizeof(po));
			po.approach = WSN_APPROACH_MULTIWAVE;
			fails += gpu_run_op(&s, ops[o], &po, "multiwave, row in memory", rows, 3, 0);
		}
		gpu_setup_free(&s);
		gpu_inputs_free(&in);
	}
	for (size_t i = 0; i < sizeof(smem) / sizeof(smem[0]); i++) {
		struct wsn_plan_options po;
		struct wsn__plan_params pp;
		struct wsn__kernel_plan *kp;
		struct inputs in;
		struct setup s;

		if (smem[i].dt != dt)
			continue;
		kp = gpu_xcalloc(sizeof(*kp));
		memset(&pp, 0, sizeof(pp));
		pp.op = smem[i].op;
		pp.dtype = dt;
		pp.hidden = smem[i].h;
		pp.rows = 300;
		wsn_plan_options_init(&pp.opts, smem[i].op);
		pp.opts.approach = WSN_APPROACH_MULTIWAVE;
		OK(wsn__plan_kernel(&cd->props, &pp, kp));
		ck_assert_msg(kp->row_store == WSN_STORE_GLOBAL &&
			      (kp->param_store == WSN_STORE_SMEM || kp->dw_store == WSN_STORE_SMEM),
			      "%s: not a row in memory with a shared-memory weight or dweight", kp->entry);
		free(kp);
		gpu_inputs_make(&in, "wide-smem", smem[i].h, 300, smem[i].h, 0);
		gpu_setup_init(&s, dt, smem[i].h, 300, smem[i].h, 0, 0, in.x, in.dy, in.w, in.b);
		memset(&po, 0, sizeof(po));
		po.approach = WSN_APPROACH_MULTIWAVE;
		fails += gpu_run_op(&s, smem[i].op, &po, "multiwave, row in memory, shared weight or sums", rows, 3, 0);
		gpu_setup_free(&s);
		gpu_inputs_free(&in);
	}
	ck_assert_msg(fails == 0, "%d mismatches (see FAIL lines above)", fails);
}
END_TEST

/*
 * Random forced shapes (seeded, printed): op, dtype, hidden (odd sizes too), groups, threads per row
 * and, for the ws kernels (_i 0; multi-wave _i 1), unroll, stages and the backward's cluster, each
 * free or forced at random, over 7 rows and 4096 (rings that wrap many times). Shapes the planner
 * refuses are skipped; every one it plans must match the CPU reference. Forced stages that two row
 * groups shared crashed the GPU before each stage became one group's; this is the net for the next
 * such combination.
 */
START_TEST(test_fuzz)
{
	const int ws = _i == 0;
	static const int64_t rows[] = { 7, 4096 }, hs[] = { 64, 500, 1000, 1024, 2048, 2050, 3000, 4096, 4097, 8192 };
	/* each parameter free about half the time (a draw that forces all five rarely plans) */
	static const int groups[] = { 0, 0, 0, 1, 2, 4, 8 }, unrolls[] = { 0, 0, 1, 2, 4 }, clusters[] = { 0, 0, 1, 2, 4 };
	static const int threads[] = { 0, 0, 0, 64, 128, 256 };
	uint64_t st = tu_case_seed(ws ? "ws-fuzz" : "mw-fuzz");
	int fails = 0, ran = 0, tries = 32;

	for (int i = 0; i < tries; i++) {
		struct wsn_plan_options po;
		struct inputs in;
		struct setup su;
		enum wsn_op op;
		enum wsn_dtype dt;
		int64_t h;
		char label[96];
		uint64_t r[9];

		for (int k = 0; k < 9; k++) { /* splitmix64 */
			uint64_t z = (st += 0x9e3779b97f4a7c15ull);
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
			r[k] = z ^ (z >> 31);
		}
		op = ops[r[0] % 4];
		dt = dtypes[r[1] % 3];
		h = hs[r[2] % (sizeof(hs) / sizeof(hs[0]))];
		wsn_plan_options_init(&po, op);
		po.approach = ws ? WSN_APPROACH_WS : WSN_APPROACH_MULTIWAVE;
		po.groups = groups[r[3] % (sizeof(groups) / sizeof(groups[0]))];
		po.block_threads = threads[r[6] % (sizeof(threads) / sizeof(threads[0]))];
		if (ws) {
			po.unroll = unrolls[r[4] % (sizeof(unrolls) / sizeof(unrolls[0]))];
			po.stages = r[5] % 2 ? (int)(2 + (r[5] >> 1) % 15) : 0; /* free, or 2 to 16 */
			po.cluster = wsn_op_is_backward(op) ? clusters[r[7] % (sizeof(clusters) / sizeof(clusters[0]))] : 0;
		}
		snprintf(label, sizeof(label), "%s fuzz %d: groups=%d unroll=%d stages=%d threads=%d cluster=%d",
			 ws ? "ws" : "multiwave", i, po.groups, po.unroll, po.stages, po.block_threads, po.cluster);
		{ /* the plan first: inputs are made only for shapes that have one */
			struct wsn_plan *gp = NULL;
			if (wsn_plan_create(gpu_dev, op, 4096, h, dt, &po, &gp) < 0) {
				printf("skip %s %s hidden=%lld %s: %s\n", wsn_op_name(op), wsn_dtype_name(dt), (long long)h,
				       label, wsn_last_error());
				continue;
			}
			wsn_plan_destroy(gp);
		}
		gpu_inputs_make(&in, ws ? "ws-fuzz" : "mw-fuzz", h, 4096, h, 0);
		gpu_setup_init(&su, dt, h, 4096, h, 0, 0, in.x, in.dy, in.w, in.b);
		fails += gpu_run_op(&su, op, &po, label, rows, 2, 0);
		ran++;
		gpu_setup_free(&su);
		gpu_inputs_free(&in);
	}
	ck_assert_msg(fails == 0, "%d of %d random forced shapes mismatched (see FAIL lines above)", fails, ran);
	ck_assert_msg(ran >= tries / 5, "only %d of %d random shapes planned: the draw tests too little", ran, tries);
}
END_TEST

Suite *suite_gpu_ops(void)
{
	/* test_fuzz: ws, multi-wave */
	return TU_SUITE("gpu", { "ops", 300, gpu_setup, gpu_teardown, TU_TESTS({ test_ops, (int)WSN_ARRAY_SIZE(hiddens) },
				{ test_strided_stats, 1 }) },
			{ "wide", 300, gpu_setup, gpu_teardown, TU_TESTS({ test_wide_rows, (int)WSN_ARRAY_SIZE(dtypes) }) },
			{ "fuzz", 300, gpu_setup, gpu_teardown, TU_TESTS({ test_fuzz, 2 }) });
}
