/* SPDX-License-Identifier: MIT */
/* tests/check_gpu_ws.c: warp-specialized kernels on a real GPU: shapes, forced plans, clusters, statistics layouts. */
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

#include <stdarg.h>

/* Plan options with the ws approach forced and nothing else. */
static struct wsn_plan_options ws_options(void)
{
	struct wsn_plan_options po;

	memset(&po, 0, sizeof(po));
	po.approach = WSN_APPROACH_WS;
	return po;
}

/* gpu_run_op of op with the forced plan po over rows[0..1], labelled from fmt; counted in *plans. */
static int run_forced(struct setup *s, enum wsn_op op, const struct wsn_plan_options *po, const int64_t *rows,
		      int may_skip, int *plans, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static int run_forced(struct setup *s, enum wsn_op op, const struct wsn_plan_options *po, const int64_t *rows,
		      int may_skip, int *plans, const char *fmt, ...)
{
	char label[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(label, sizeof(label), fmt, ap);
	va_end(ap);
	(*plans)++;
	return gpu_run_op(s, op, po, label, rows, 2, may_skip);
}

/*
 * Every op x dtype with each forced (bdimy, unroll, stages) in {1, 2} x {1, 2, 4} x {2, 4, 8} that
 * fits (the planner says which do not), over 7 rows (fewer blocks than CTAs) and 2999 rows (a last
 * block that is partial for unroll > 1, and rings that wrap).
 */
START_TEST(test_ws_forced)
{
	static const unsigned groups[] = { 1, 2 }, unrolls[] = { 1, 2, 4 }, stages[] = { 2, 4, 8 };
	static const int64_t rows[] = { 7, 2999 };
	enum wsn_dtype dt = dtypes[_i];
	int64_t h = dt == WSN_F32 ? 500 : 1000, r = 2999;
	int fails = 0, plans = 0;
	struct inputs in;
	struct setup s;

	gpu_inputs_make(&in, "ws-forced", h, r, h, 0);
	gpu_setup_init(&s, dt, h, r, h, 0, 0, in.x, in.dy, in.w, in.b);
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (size_t a = 0; a < 2; a++)
			for (size_t u = 0; u < 3; u++)
				for (size_t st = 0; st < 3; st++) {
					struct wsn_plan_options po = ws_options();

					po.groups = (int)groups[a];
					po.unroll = (int)unrolls[u];
					po.stages = (int)stages[st];
					fails += run_forced(&s, ops[o], &po, rows, 1, &plans, "ws bdimy=%u unroll=%u stages=%u",
							    groups[a], unrolls[u], stages[st]);
				}
	/* stages forced, groups free: the planner's groups come down to a count that divides the stages
	 * (rows of 128 threads where 32- or 64-thread rows allow none; each stage one group's: shared
	 * slots failed to launch), and those kernels match too; every one of them plans */
	int skips = gpu_run_op_skips;
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (unsigned st = 3; st <= 12; st *= 2) {
			struct wsn_plan_options po = ws_options();

			po.stages = (int)st;
			fails += run_forced(&s, ops[o], &po, rows, 1, &plans, "ws stages=%u, groups free", st);
		}
	ck_assert_msg(gpu_run_op_skips == skips, "%d forced stage counts found no plan", gpu_run_op_skips - skips);
	gpu_setup_free(&s);
	gpu_inputs_free(&in);
	ck_assert_msg(fails == 0, "%d mismatches over %d forced ws plans (see FAIL lines above)", fails, plans);
}
END_TEST

/*
 * Rows split over a cluster (ws backward): each forced cluster of 2, 4 and 8 CTAs, with the
 * planner's groups and with 2 groups x 2 rows per stage (both exchange slots of several groups),
 * on aligned rows and on strided rows that start off 16 bytes (the element path), over 7 and 2999
 * rows; then the planner's own split of hidden 32768, which no single CTA holds.
 */
START_TEST(test_ws_cluster)
{
	static const int64_t rows[] = { 7, 2999 }, rows32k[] = { 7, 1000 };
	static const enum wsn_op bops[] = { WSN_LAYERNORM_BWD, WSN_RMSNORM_BWD };
	static const unsigned clusters[] = { 2, 4, 8 };
	enum wsn_dtype dt = dtypes[_i];
	int fails = 0, plans = 0;

	for (int strided = 0; strided < 2; strided++) {
		int64_t h = 4096, r = 2999, ld = strided ? h + 3 : h, off = strided;
		struct inputs in;
		struct setup s;

		gpu_inputs_make(&in, "ws-cluster", h, r, ld, off);
		gpu_setup_init(&s, dt, h, r, ld, off, strided, in.x, in.dy, in.w, in.b);
		for (size_t o = 0; o < 2; o++)
			for (size_t c = 0; c < 3; c++)
				for (int grouped = 0; grouped < 2; grouped++) {
					struct wsn_plan_options po = ws_options();

					po.cluster = (int)clusters[c];
					if (grouped)
						po.groups = po.unroll = 2;
					fails += run_forced(&s, bops[o], &po, rows, 0, &plans, "ws cluster=%u%s", clusters[c],
							    grouped ? " bdimy=2 unroll=2" : "");
				}
		gpu_setup_free(&s);
		gpu_inputs_free(&in);
	}
	{
		int64_t h = 32768, r = 1000;
		struct wsn_plan_options po = ws_options();
		struct inputs in;
		struct setup s;

		gpu_inputs_make(&in, "ws-cluster-32k", h, r, h, 0);
		gpu_setup_init(&s, dt, h, r, h, 0, 0, in.x, in.dy, in.w, in.b);
		for (size_t o = 0; o < 2; o++) {
			unsigned c = 0;
			ck_assert_msg(gpu_ws_plans(bops[o], dt, h, r, &c) && c > 1, "%s %s hidden 32768: the ws planner should "
				      "split the row over a cluster (got %u)", wsn_op_name(bops[o]), wsn_dtype_name(dt), c);
			fails += run_forced(&s, bops[o], &po, rows32k, 0, &plans, "ws, the planner's cluster");
		}
		gpu_setup_free(&s);
		gpu_inputs_free(&in);
	}
	ck_assert_msg(fails == 0, "%d mismatches over %d cluster plans (see FAIL lines above)", fails, plans);
}
END_TEST

/*
 * The ws backward's measured shapes on sm_90 (the split table's entries: RMSNorm rows of 2 KB whole
 * and of 4 KB over 2; LayerNorm 16-bit rows of 4 KB over 2 with the statistics copied into each
 * stage; the widths between the powers of two, a row or two a stage, some for one 16-bit dtype
 * only; autotune's winners), each in every dtype at the same row bytes (where a dtype has no shape
 * there: another plan, without the statistics in the stage), on aligned rows and on strided rows
 * that start off 16 bytes, over 7 and 2999 rows: against the CPU, each backward twice
 * (bit-identical sums).
 */
START_TEST(test_ws_measured)
{
	static const struct {
		enum wsn_op op;
		int64_t row_bytes;
		unsigned cluster[3], unroll[3]; /* bf16, f16, f32; cluster 0: no measured shape in that dtype */
		int ring;                       /* the statistics in the stage: bit 0 bf16, bit 1 f16 */
		int64_t rows;                   /* planned for (0: 2999): the shapes for few rows need fewer */
	} m[] = {
		{ WSN_RMSNORM_BWD, 2048, { 1, 1, 1 }, { 1, 1, 1 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 4096, { 2, 2, 2 }, { 1, 1, 1 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 16384, { 8, 8, 8 }, { 1, 1, 1 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 4096, { 2, 2, 0 }, { 2, 2, 0 }, 3, 0 },
		{ WSN_LAYERNORM_BWD, 4608, { 4, 2, 0 }, { 2, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 9216, { 8, 2, 0 }, { 2, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 5120, { 2, 2, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 6144, { 4, 4, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 10240, { 2, 4, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 20480, { 8, 8, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 5120, { 2, 2, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 6144, { 4, 4, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 2048, { 1, 0, 0 }, { 1, 0, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 3072, { 2, 2, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 7168, { 2, 0, 0 }, { 1, 0, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 14336, { 4, 4, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 24576, { 8, 8, 0 }, { 2, 2, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 32768, { 8, 8, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 4608, { 2, 0, 0 }, { 1, 0, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 7168, { 4, 0, 0 }, { 1, 0, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 9216, { 4, 0, 0 }, { 1, 0, 0 }, 0, 0 },
		/* the shapes for few rows (16 per SM and fewer: 2111 rows; 31 and more: 2999) */
		{ WSN_LAYERNORM_BWD, 2048, { 1, 1, 0 }, { 2, 2, 0 }, 0, 2111 },
		{ WSN_LAYERNORM_BWD, 4096, { 4, 4, 0 }, { 1, 1, 0 }, 0, 2111 },
		{ WSN_RMSNORM_BWD, 4096, { 4, 2, 2 }, { 1, 1, 1 }, 0, 2111 },
		{ WSN_LAYERNORM_BWD, 8192, { 4, 4, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 8192, { 4, 4, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 16384, { 8, 8, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_LAYERNORM_BWD, 65536, { 8, 8, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 65536, { 8, 8, 0 }, { 1, 1, 0 }, 0, 0 },
		{ WSN_RMSNORM_BWD, 32768, { 0, 8, 0 }, { 0, 1, 0 }, 0, 0 },
	};
	struct wsn__cu_device *cd = gpu_dev->ctx;
	struct wsn__kernel_plan *kp = gpu_xcalloc(sizeof(*kp));
	enum wsn_dtype dt = dtypes[_i];
	int fails = 0, d = dt == WSN_BF16 ? 0 : dt == WSN_F16 ? 1 : 2;

	for (size_t i = 0; i < WSN_ARRAY_SIZE(m); i++) {
		int64_t h = m[i].row_bytes / (int64_t)wsn_dtype_size(dt), r = m[i].rows ? m[i].rows : 2999;
		const int64_t gpu_run_rows[2] = { 7, r };

		ck_assert_msg(gpu_ws_plan_get(m[i].op, dt, h, r, kp), "%s", wsn_last_error());
		if (cd->props.arch == 90 && m[i].cluster[d])
			ck_assert_msg(strstr(kp->why, "measured shape: ") && (kp->cluster > 1 ? kp->cluster : 1) == m[i].cluster[d] &&
					      kp->unroll == m[i].unroll[d] && kp->stats_ring == (m[i].ring >> d & 1),
				      "%s: cluster %u unroll %u ring %d: %s", kp->entry, kp->cluster, kp->unroll, kp->stats_ring,
				      kp->why);
		else
			ck_assert_msg(!kp->stats_ring && !strstr(kp->why, "measured shape: "), "%s: a measured shape: %s",
				      kp->entry, kp->why);
		for (int strided = 0; strided < 2; strided++) {
			int64_t ld = strided ? h + 3 : h, off = strided;
			struct wsn_plan_options po = ws_options();
			struct inputs in;
			struct setup s;

			gpu_inputs_make(&in, "ws-measured", h, r, ld, off);
			gpu_setup_init(&s, dt, h, r, ld, off, strided, in.x, in.dy, in.w, in.b);
			fails += gpu_run_op(&s, m[i].op, &po, "ws, measured shape", gpu_run_rows, 2, 0);
			gpu_setup_free(&s);
			gpu_inputs_free(&in);
		}
	}
	free(kp);
	ck_assert_msg(fails == 0, "%d mismatches (see FAIL lines above)", fails);
}
END_TEST

/*
 * LayerNorm bwd bf16 2K's plan (on sm_90 the producer copies each row's statistics into its stage, a
 * float per row at the statistics' stride) with its mean and rstd contiguous from a 16-byte
 * boundary (checked against the CPU), then starting 1 and 3 floats past one, and every 2nd and 3rd
 * float, the floats between them poisoned: the same dx, dweight and dbias bits each time. 2999
 * rows: a last block of one row.
 */
START_TEST(test_ws_stats_layouts)
{
	static const struct {
		int64_t off, stride;
	} lay[] = { { 1, 1 }, { 3, 1 }, { 0, 2 }, { 1, 3 } };
	static const int64_t rows[] = { 2999 };
	const enum wsn_op op = WSN_LAYERNORM_BWD;
	const int64_t h = 2048, r = 2999;
	size_t rh = (size_t)(r * h) * 2, hb = (size_t)h * 2;
	struct wsn__cu_device *cd = gpu_dev->ctx;
	struct wsn__kernel_plan *kp = gpu_xcalloc(sizeof(*kp));
	unsigned char *dx = gpu_xcalloc(rh), *dw = gpu_xcalloc(hb), *db = gpu_xcalloc(hb);
	float *hs = gpu_xcalloc((size_t)(r * 3 + 3) * 4);
	struct wsn_plan_options po;
	struct inputs in;
	struct setup s;
	struct wsn_plan *gp;
	int fails;

	/* ws forced (auto would take it too at 2999 rows); nothing else forced, so the measured shape holds */
	wsn_plan_options_init(&po, op);
	po.approach = WSN_APPROACH_WS;
	ck_assert_msg(gpu_ws_plan_get(op, WSN_BF16, h, r, kp), "%s", wsn_last_error());
	ck_assert_msg(kp->stats_ring == (cd->props.arch == 90), "%s: statistics in the stage %d: %s", kp->entry,
		      kp->stats_ring, kp->why);
	gpu_inputs_make(&in, "ws-stats", h, r, h, 0);
	gpu_setup_init(&s, WSN_BF16, h, r, h, 0, 0, in.x, in.dy, in.w, in.b);
	fails = gpu_run_op(&s, op, &po, "ws, statistics contiguous", rows, 1, 0);
	ck_assert_msg(fails == 0, "%d mismatches against the CPU (see FAIL lines above)", fails);
	memcpy(dx, s.gdx, rh);
	memcpy(dw, s.gdw, hb);
	memcpy(db, s.gdb, hb);
	OK(wsn_plan_create(gpu_dev, op, r, h, WSN_BF16, &po, &gp));
	{
		char d[4096];
		/* the plan that runs is the one checked above, statistics in the stage or not */
		ck_assert_int_ge(wsn_plan_describe(gp, d, sizeof(d)), 0);
		ck_assert_msg(strstr(d, kp->entry) != NULL && !strstr(d, " + the rows' statistics") == !kp->stats_ring,
			      "not %s (statistics in the stage %d):\n%s", kp->entry, kp->stats_ring, d);
	}
	for (size_t i = 0; i < WSN_ARRAY_SIZE(lay); i++) {
		int64_t n = lay[i].off + (r - 1) * lay[i].stride + 1;
		void *dm = gpu_dalloc((size_t)n * 4), *dr = gpu_dalloc((size_t)n * 4);
		struct wsn_args a = gpu_args_of(&s, op, r, 1);

		for (int t = 0; t < 2; t++) {
			const float *src = t ? s.hrstd_ln : s.hmean;
			for (int64_t k = 0; k < n; k++)
				hs[k] = 1e30f; /* what lies between the rows' floats is not theirs */
			for (int64_t k = 0; k < r; k++)
				hs[lay[i].off + k * lay[i].stride] = src[k];
			gpu_upload(t ? dr : dm, hs, (size_t)n * 4);
		}
		a.mean = gpu_mat(dm, WSN_F32, WSN_MEM_DEVICE, r, 1, lay[i].stride, lay[i].off);
		a.rstd = gpu_mat(dr, WSN_F32, WSN_MEM_DEVICE, r, 1, lay[i].stride, lay[i].off);
		gpu_poison(s.ddx, rh);
		gpu_poison(s.ddw, hb);
		gpu_poison(s.ddb, hb);
		OK(wsn_plan_execute(gp, &a, NULL));
		OK(wsn_stream_sync(gpu_dev, NULL));
		gpu_download(s.gdx, s.ddx, rh);
		gpu_download(s.gdw, s.ddw, hb);
		gpu_download(s.gdb, s.ddb, hb);
		printf("%s layernorm-bwd bf16 hidden=2048 rows=2999 statistics from float %lld, every %lld%s\n",
		       memcmp(s.gdx, dx, rh) || memcmp(s.gdw, dw, hb) || memcmp(s.gdb, db, hb) ? "FAIL" : "ok",
		       (long long)lay[i].off, (long long)lay[i].stride, lay[i].stride > 1 ? "" : " (contiguous)");
		fflush(stdout);
		fails += memcmp(s.gdx, dx, rh) != 0 || memcmp(s.gdw, dw, hb) != 0 || memcmp(s.gdb, db, hb) != 0;
		OK(wsn_mem_free(gpu_dev, dm));
		OK(wsn_mem_free(gpu_dev, dr));
	}
	wsn_plan_destroy(gp);
	gpu_setup_free(&s);
	gpu_inputs_free(&in);
	free(hs);
	free(dx);
	free(dw);
	free(db);
	free(kp);
	ck_assert_msg(fails == 0, "%d layouts of the statistics changed the outputs (see FAIL lines above)", fails);
}
END_TEST

/*
 * The heuristic's ws plan on hidden sizes that are not multiples of the vector width (16-byte rows
 * cannot be copied exactly: element path), a larger one, and strided rows starting off 16 bytes.
 */
START_TEST(test_ws_shapes)
{
	static const int64_t hs[] = { 3, 1001, 4097 };
	static const int64_t rows[] = { 1, 7, 1000 };
	struct wsn_plan_options po = ws_options();
	int fails = 0;

	for (size_t i = 0; i <= sizeof(hs) / sizeof(hs[0]); i++) {
		int strided = i == sizeof(hs) / sizeof(hs[0]);
		int64_t h = strided ? 1000 : hs[i], ld = strided ? h + 3 : h, off = strided ? 1 : 0, r = 1000;
		struct inputs in;

		gpu_inputs_make(&in, "ws-shapes", h, r, ld, off);
		for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
			struct setup s;
			gpu_setup_init(&s, dtypes[d], h, r, ld, off, strided, in.x, in.dy, in.w, in.b);
			for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
				fails += gpu_run_op(&s, ops[o], &po, "ws", rows, 3, 0);
			gpu_setup_free(&s);
		}
		gpu_inputs_free(&in);
	}
	ck_assert_msg(fails == 0, "%d mismatches (see FAIL lines above)", fails);
}
END_TEST

/* LayerNorm backward of 16384 x 2048 bf16 with f32 mean [rows] and rstd [rows, 1], ws forced. */
START_TEST(test_ws_ln_bwd_mixed_stats)
{
	static const int64_t rows[] = { 16384 };
	int64_t h = 2048, r = 16384;
	struct wsn_plan_options po = ws_options();
	struct inputs in;
	struct setup s;
	int fails;

	gpu_inputs_make(&in, "ws-mixed", h, r, h, 0);
	gpu_setup_init(&s, WSN_BF16, h, r, h, 0, 0, in.x, in.dy, in.w, in.b);
	s.stats2d = 2; /* args_of: mean [rows], rstd [rows, 1] */
	fails = gpu_run_op(&s, WSN_LAYERNORM_BWD, &po, "ws, mean [rows], rstd [rows, 1]", rows, 1, 0);
	gpu_setup_free(&s);
	gpu_inputs_free(&in);
	ck_assert_msg(fails == 0, "mismatches (see FAIL lines above)");
}
END_TEST

Suite *suite_gpu_ws(void)
{
	return TU_SUITE("gpu", { "ws", 300, gpu_setup, gpu_teardown, TU_TESTS({ test_ws_shapes, 1 }, { test_ws_ln_bwd_mixed_stats, 1 }) },
			{ "ws-forced", 300, gpu_setup, gpu_teardown, TU_TESTS({ test_ws_forced, (int)WSN_ARRAY_SIZE(dtypes) }) },
			{ "ws-stats", 300, gpu_setup, gpu_teardown, TU_TESTS({ test_ws_stats_layouts, 1 }) },
			{ "ws-cluster", 600, gpu_setup, gpu_teardown, TU_TESTS({ test_ws_cluster, (int)WSN_ARRAY_SIZE(dtypes) },
				{ test_ws_measured, (int)WSN_ARRAY_SIZE(dtypes) }) });
}
