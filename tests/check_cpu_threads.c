/* SPDX-License-Identifier: MIT */
/* tests/check_cpu_threads.c: the CPU backend's threads: bit-identical results, row chunks and its description. */
#include "cpu/cpu.h"

#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cpu_util.h"

/* dweight, dbias (and dx) are bit-identical for 1, 2, 3 and 8 threads. */
START_TEST(test_threads_bit_identical)
{
	static const struct { enum wsn_op op; enum wsn_dtype dt; } cfg[] = {
		{ WSN_LAYERNORM_BWD, WSN_F32 }, { WSN_LAYERNORM_BWD, WSN_BF16 },
		{ WSN_RMSNORM_BWD, WSN_F32 }, { WSN_RMSNORM_BWD, WSN_F16 },
	};
	static const int threads[] = { 1, 2, 3, 8 };
	const enum wsn_op op = cfg[_i].op;
	const enum wsn_dtype dt = cfg[_i].dt;
	const int64_t rows = 300, hidden = 1000, ld = 1003;
	const int ln = wsn_op_is_layernorm(op);
	struct bwd_bufs bufs;
	void *first_dx = NULL, *first_dw = NULL, *first_db = NULL;
	size_t es = wsn_dtype_size(dt);
	struct wsn_device *dev;
	struct wsn_args a;
	struct ref_out ref;
	char name[64];
	uint64_t seed;

	snprintf(name, sizeof(name), "cpu threads %s %s", wsn_op_name(op), wsn_dtype_name(dt));
	seed = tu_case_seed(name);
	/* enough chunks that 8 threads all get work */
	ck_assert_int_ge((rows + wsn__cpu_chunk_rows(op, rows, hidden) - 1) / wsn__cpu_chunk_rows(op, rows, hidden), 8);
	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	cpu_bwd_bufs(&bufs, &a, op, dt, rows, hidden, ld);
	wsn_tensor_fill_random(&bufs.x.t, seed, 0.5f, 2.0f);
	wsn_tensor_fill_random(&bufs.dy.t, seed + 1, 0.0f, 1.0f);
	wsn_tensor_fill_random(&bufs.w.t, seed + 2, 1.0f, 0.5f);
	cpu_store_fwd_stats(op, &bufs.x.t, WSN_DEFAULT_EPS, ln ? &bufs.mean.t : NULL, &bufs.rstd.t);

	for (size_t t = 0; t < WSN_ARRAY_SIZE(threads); t++) {
		struct wsn_plan_options o;
		struct wsn_plan *plan;
		char desc[512], want[32];

		wsn_plan_options_init(&o, op);
		o.threads = threads[t];
		ck_assert_int_eq(wsn_plan_create(dev, op, rows, hidden, dt, &o, &plan), 0);
		ck_assert_int_gt(wsn_plan_describe(plan, desc, sizeof(desc)), 0);
		snprintf(want, sizeof(want), " %d thread%s,", threads[t], threads[t] == 1 ? "" : "s");
		ck_assert_msg(strstr(desc, want) != NULL, "describe '%s' lacks '%s'", desc, want);
		wsn_tensor_fill_nan(&bufs.dx.t);
		wsn_tensor_fill_nan(&bufs.dw.t);
		if (ln)
			wsn_tensor_fill_nan(&bufs.db.t);
		ck_assert_msg(wsn_plan_execute(plan, &a, NULL) == 0, "%s", wsn_last_error());
		wsn_plan_destroy(plan);
		if (t == 0) {
			first_dx = tu_xmalloc(bufs.dx.slots * es);
			first_dw = tu_xmalloc(bufs.dw.slots * es);
			memcpy(first_dx, bufs.dx.mem, bufs.dx.slots * es);
			memcpy(first_dw, bufs.dw.mem, bufs.dw.slots * es);
			if (ln) {
				first_db = tu_xmalloc(bufs.db.slots * es);
				memcpy(first_db, bufs.db.mem, bufs.db.slots * es);
			}
			continue;
		}
		ck_assert_msg(!memcmp(first_dw, bufs.dw.mem, bufs.dw.slots * es),
			      "%s: dweight differs between 1 and %d threads", name, threads[t]);
		ck_assert_msg(!ln || !memcmp(first_db, bufs.db.mem, bufs.db.slots * es),
			      "%s: dbias differs between 1 and %d threads", name, threads[t]);
		ck_assert_msg(!memcmp(first_dx, bufs.dx.mem, bufs.dx.slots * es), "%s: dx differs between 1 and %d threads",
			      name, threads[t]);
	}
	ck_assert_int_eq(ref_run(op, &a, WSN_DEFAULT_EPS, &ref), 0);
	cpu_expect_close(name, "dweight", &bufs.dw.t, ref.dweight, NULL, dt == WSN_F32 ? TOL_F32 : TOL_HALF);
	if (ln)
		cpu_expect_close(name, "dbias", &bufs.db.t, ref.dbias, NULL, dt == WSN_F32 ? TOL_F32 : TOL_HALF);
	ref_out_free(&ref);
	free(first_dx), free(first_dw), free(first_db);
	cpu_bwd_bufs_free(&bufs);
	wsn_device_close(dev);
}
END_TEST

/* The plan's description, and where its thread count comes from (never more than its chunks). */
START_TEST(test_describe_and_threads)
{
	struct wsn_device *dev;
	struct wsn_plan *plan;
	struct wsn_plan_options o;
	char buf[512], small[16], want[64];
	int n;

	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	wsn_plan_options_init(&o, WSN_LAYERNORM_BWD);
	o.threads = 3;
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_BWD, 300, 1000, WSN_F32, &o, &plan), 0);
	n = wsn_plan_describe(plan, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq((int)strlen(buf), n);
	snprintf(want, sizeof(want), "3 threads, rows split into fixed chunks of %lld rows",
		 (long long)wsn__cpu_chunk_rows(WSN_LAYERNORM_BWD, 300, 1000));
	ck_assert_msg(strstr(buf, "cpu reference: ") && strstr(buf, want) && strstr(buf, "dweight/dbias"),
		      "describe: %s", buf);
	ck_assert_int_eq(wsn_plan_describe(plan, small, sizeof(small)), n); /* truncates like snprintf */
	ck_assert_int_eq((int)strlen(small), (int)sizeof(small) - 1);
	wsn_plan_destroy(plan);

	/* 7 rows of 1000 are one chunk: one thread whatever was asked */
	o.threads = 8;
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_BWD, 7, 1000, WSN_F32, &o, &plan), 0);
	wsn_plan_describe(plan, buf, sizeof(buf));
	ck_assert_msg(strstr(buf, " 1 thread,") != NULL, "describe: %s", buf);
	wsn_plan_destroy(plan);

	/* no plan option: the device's setting */
	ck_assert_int_eq(wsn_device_set_threads(dev, 2), 0);
	ck_assert_int_eq(wsn_plan_create(dev, WSN_RMSNORM_FWD, 4096, 1000, WSN_BF16, NULL, &plan), 0);
	wsn_plan_describe(plan, buf, sizeof(buf));
	ck_assert_msg(strstr(buf, " 2 threads,") != NULL, "describe: %s", buf);
	wsn_plan_destroy(plan);

	o.threads = 1 << 20;
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_BWD, 7, 1000, WSN_F32, &o, &plan), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "thread"));
	wsn_device_close(dev);
}
END_TEST

/* Chunk sizes depend on the shape only and keep the backward partial sums within their budget. */
START_TEST(test_chunk_rows)
{
	ck_assert_int_eq(wsn__cpu_chunk_rows(WSN_LAYERNORM_FWD, 100, 1), WSN_CPU_CHUNK_ELEMS);
	ck_assert_int_eq(wsn__cpu_chunk_rows(WSN_LAYERNORM_FWD, 100, 1000), 17);
	ck_assert_int_eq(wsn__cpu_chunk_rows(WSN_RMSNORM_FWD, 100, 1 << 24), 1);
	for (int64_t h = 1; h <= (1 << 24); h *= 8) {
		int64_t rows = (int64_t)1 << 22, k = wsn__cpu_chunk_rows(WSN_RMSNORM_BWD, rows, h);
		int64_t chunks = (rows + k - 1) / k;
		int64_t hp = (h + WSN_CPU_BLOCK - 1) / WSN_CPU_BLOCK * WSN_CPU_BLOCK;

		ck_assert_int_ge(k, 1);
		ck_assert_msg(chunks == 1 || chunks * hp * 8 <= WSN_CPU_PARTIAL_BUDGET, "hidden %lld: %lld chunks",
			      (long long)h, (long long)chunks);
	}
}
END_TEST

Suite *suite_cpu_threads(void)
{
	return TU_SUITE("cpu", { "cpu", 120, NULL, NULL, TU_TESTS({ test_threads_bit_identical, 4 }, { test_describe_and_threads, 1 },
				{ test_chunk_rows, 1 }) });
}
