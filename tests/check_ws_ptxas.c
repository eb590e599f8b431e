/* SPDX-License-Identifier: MIT */
/* tests/check_ws_ptxas.c: warp-specialized kernels through ptxas, and their folded barriers. */
#define _GNU_SOURCE
#include "testutil.h"

#include "codegen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_util.h"

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
		ws_params(&p, op, dt, h, 16384);
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
		EXPECT_HAS(text, "// bdimx=", "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
			   "setmaxnreg.dec.sync.aligned.u32");
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
	kp = ws_plan_ok(&g, WSN_LAYERNORM_BWD, WSN_BF16, 1024);
	ck_assert_uint_eq(kp.bdimy, 4);
	ck_assert_int_eq(fold_barriers(&kp, &par), 2);
	ck_assert_int_eq(par, 1);
	kp = ws_plan_ok(&g, WSN_RMSNORM_BWD, WSN_BF16, 2048);
	ck_assert_uint_gt(kp.bdimy, 1);
	ck_assert_int_eq(fold_barriers(&kp, &par), 2);
	ck_assert_int_eq(par, 1);
	/* two stages of one row: the ring holds 2 of the 4 slots two groups' dweight and dbias need */
	ws_params(&p, WSN_LAYERNORM_BWD, WSN_BF16, 1024, 16384);
	ws_force(&p, 2, 1, 2);
	p.opts.cluster = 1;
	kp = ws_plan_forced(&g, &p);
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

Suite *suite_ws_ptxas(void)
{
	return TU_SUITE("ws", { "planner", 0, NULL, NULL, TU_TESTS({ test_ws_fold, 1 }) },
			{ "ptxas", 900, NULL, NULL, TU_TESTS({ test_ws_ptxas, 1 }) });
}
