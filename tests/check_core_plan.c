/* SPDX-License-Identifier: MIT */
/* tests/check_core_plan.c: plan creation: flattened shapes, integer edges, argument errors and options. */
#include "testutil.h"
#include "core/error.h"
#include "core/hostmem.h"
#include "core/params.h"
#include "overlap.h"
#include "tunecache.h"
#include "io/io_internal.h"
#include "cpu/cpu.h"

#include <dirent.h>
#include <jansson.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The shared argument checks name the tensor and the problem. */

/* Size-1 leading dimensions: their strides do not matter; rows are the product, stepped by the
 * innermost other dimension's stride; leading dimensions that do not nest are refused. */
START_TEST(test_plan_flatten_unit_dims)
{
	enum { H = 8, R = 6, LD = 10 };
	struct wsn_device *dev;
	struct wsn_plan *plan;
	struct wsn_args a, c;
	float x[2 * 3 * LD + 16], xc[R * H], y[2 * 3 * LD + 16], yc[R * H], w[H], b[H];
	uint64_t seed = tu_case_seed("flatten");
	struct wsn_tensor t;

	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_FWD, R, H, WSN_F32, NULL, &plan), 0);
	wsn_tensor_1d(&t, x, WSN_F32, WSN_MEM_HOST, (int64_t)(sizeof(x) / sizeof(x[0])));
	ck_assert_int_eq(wsn_tensor_fill_random(&t, seed, 0.5f, 2.0f), 0);
	wsn_tensor_1d(&t, w, WSN_F32, WSN_MEM_HOST, H);
	ck_assert_int_eq(wsn_tensor_fill_random(&t, seed + 1, 1.0f, 0.5f), 0);
	wsn_tensor_1d(&t, b, WSN_F32, WSN_MEM_HOST, H);
	ck_assert_int_eq(wsn_tensor_fill_random(&t, seed + 2, 0.0f, 0.5f), 0);
	/* the reference: the six rows (at LD apart) copied into a contiguous [6, 8] */
	for (int r = 0; r < R; r++)
		memcpy(xc + r * H, x + r * LD, H * sizeof(float));
	memset(&c, 0, sizeof(c));
	wsn_tensor_2d(&c.x, xc, WSN_F32, WSN_MEM_HOST, R, H);
	wsn_tensor_2d(&c.y, yc, WSN_F32, WSN_MEM_HOST, R, H);
	wsn_tensor_1d(&c.weight, w, WSN_F32, WSN_MEM_HOST, H);
	wsn_tensor_1d(&c.bias, b, WSN_F32, WSN_MEM_HOST, H);
	ck_assert_int_eq(wsn_plan_execute(plan, &c, NULL), 0);

	/* x and y [2, 1, 3, 8] with strides {30, 999, 10, 1}: 6 rows 10 apart */
	const int64_t shape[4] = { 2, 1, 3, H };
	for (int k = 0; k < 3; k++) {
		a = c;
		ck_assert_int_eq(wsn_tensor_init(&a.x, x, WSN_F32, WSN_MEM_HOST, 4, shape), 0);
		ck_assert_int_eq(wsn_tensor_init(&a.y, y, WSN_F32, WSN_MEM_HOST, 4, shape), 0);
		const int64_t s1 = k == 0 ? 999 : k == 1 ? 0 : 3 * LD;
		for (struct wsn_tensor *q = &a.x; q; q = q == &a.x ? &a.y : NULL) {
			q->stride[0] = 3 * LD;
			q->stride[1] = s1;
			q->stride[2] = LD;
		}
		wsn_tensor_1d(&t, y, WSN_F32, WSN_MEM_HOST, (int64_t)(sizeof(y) / sizeof(y[0])));
		wsn_tensor_fill_nan(&t);
		ck_assert_msg(wsn_plan_execute(plan, &a, NULL) == 0, "stride[1] %lld: %s", (long long)s1,
			      wsn_last_error());
		for (int r = 0; r < R; r++)
			for (int e = 0; e < H; e++)
				ck_assert_msg(memcmp(&y[r * LD + e], &yc[r * H + e], sizeof(float)) == 0,
					      "seed %llu stride[1] %lld: row %d element %d differs",
					      (unsigned long long)seed, (long long)s1, r, e);
		/* the padding between rows is not written */
		ck_assert(isnan(y[H]) && isnan(y[LD - 1]));
	}
	/* [2, 1, 3, 8] whose outer stride does not step over the three rows inside it */
	a = c;
	ck_assert_int_eq(wsn_tensor_init(&a.x, x, WSN_F32, WSN_MEM_HOST, 4, shape), 0);
	ck_assert_int_eq(wsn_tensor_init(&a.y, y, WSN_F32, WSN_MEM_HOST, 4, shape), 0);
	a.x.stride[0] = 5 * H;
	ck_assert_int_eq(wsn_plan_execute(plan, &a, NULL), WSN_ESHAPE);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "cannot be flattened"));
	/* [3, 1, 8]: the size-1 dimension's stride is ignored, the row stride is stride[0] */
	const int64_t s3[3] = { 3, 1, H };
	a = c;
	wsn_plan_destroy(plan);
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_FWD, 3, H, WSN_F32, NULL, &plan), 0);
	ck_assert_int_eq(wsn_tensor_init(&a.x, xc, WSN_F32, WSN_MEM_HOST, 3, s3), 0);
	ck_assert_int_eq(wsn_tensor_init(&a.y, y, WSN_F32, WSN_MEM_HOST, 3, s3), 0);
	a.x.stride[1] = 16;
	a.y.stride[1] = 0;
	ck_assert_int_eq(wsn_plan_execute(plan, &a, NULL), 0);
	ck_assert(memcmp(y, yc, 3 * H * sizeof(float)) == 0);
	wsn_plan_destroy(plan);
	wsn_device_close(dev);
}
END_TEST

/* Argument checks at the edges of the public API's integer ranges. */
START_TEST(test_api_integer_edges)
{
	struct wsn_tensor t;
	float buf[16];
	char *text = NULL;
	struct wsn_plan_options o;
	enum wsn_dtype dt;
	char be[16];
	int idx = -1;

	/* bytes that overflow, a zero-sized shape whose other sizes are huge */
	ck_assert_int_eq(wsn_tensor_2d(&t, buf, WSN_F32, WSN_MEM_HOST, 1LL << 61, 2), WSN_EOVERFLOW);
	const int64_t z[3] = { 1LL << 40, 1LL << 40, 0 };
	ck_assert_int_eq(wsn_tensor_init(&t, buf, WSN_F32, WSN_MEM_HOST, 3, z), 0);
	ck_assert_int_eq(wsn_tensor_numel(&t), 0);
	ck_assert_int_eq(wsn_tensor_init(NULL, buf, WSN_F32, WSN_MEM_HOST, 2, z), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "t is NULL"));
	ck_assert_int_eq(wsn_tensor_init(&t, buf, WSN_F32, WSN_MEM_HOST, 2, NULL), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "shape is NULL"));
	/* hand-built tensors with negative sizes are refused before anything is written */
	memset(buf, 0x5a, sizeof(buf));
	wsn_tensor_2d(&t, buf + 8, WSN_F32, WSN_MEM_HOST, 2, 3);
	t.shape[0] = -2;
	ck_assert_int_eq(wsn_tensor_fill_nan(&t), WSN_ESHAPE);
	ck_assert_int_eq(wsn_tensor_fill_random(&t, 1, 0, 1), WSN_ESHAPE);
	for (int i = 0; i < 16; i++)
		ck_assert(!isnan(buf[i]));
	struct wsn_compare cmp;
	struct wsn_tensor u;
	wsn_tensor_2d(&u, buf, WSN_F32, WSN_MEM_HOST, 2, 3);
	ck_assert_int_eq(wsn_tensor_compare(&t, &u, &cmp), WSN_ESHAPE);
	/* byte counts that do not fit */
	ck_assert_int_eq(wsn_op_min_bytes(WSN_LAYERNORM_FWD, INT64_MAX / 2, 4, WSN_F32, 1, 1), -1);
	ck_assert_int_eq(wsn_op_min_bytes(WSN_RMSNORM_BWD, 1LL << 62, 1, WSN_BF16, 0, 0), -1);
	ck_assert_int_eq(wsn_dtype_convert(buf, WSN_F32, buf + 1, WSN_F32, SIZE_MAX / 2 + 2), WSN_EOVERFLOW);
	/* the modelled planner: the hidden limit, and forced parameters below 0 */
	ck_assert_int_eq(wsn_emit_plan(WSN_RMSNORM_FWD, WSN_BF16, 1LL << 35, 16384, NULL, &text, NULL), WSN_ESHAPE);
	ck_assert_ptr_null(text);
	wsn_plan_options_init(&o, WSN_LAYERNORM_BWD);
	o.cluster = -2;
	ck_assert_int_eq(wsn_emit_plan(WSN_LAYERNORM_BWD, WSN_BF16, 2048, 16384, &o, &text, NULL), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "cluster"));
	o.cluster = 3;
	ck_assert_int_eq(wsn_emit_plan(WSN_LAYERNORM_BWD, WSN_BF16, 2048, 16384, &o, &text, NULL), WSN_EINVAL);
	o.cluster = 0;
	o.stages = -1;
	ck_assert_int_eq(wsn_emit_plan(WSN_LAYERNORM_BWD, WSN_BF16, 2048, 16384, &o, &text, NULL), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "stages -1"));
	/* a successful call keeps the caller's last error, the first device probe included */
	ck_assert_int_eq(wsn_dtype_parse("f64", &dt), WSN_EDTYPE);
	ck_assert_int_ge(wsn_device_count(), 1);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "f64"));
	/* device indices: decimal digits, leading zeros allowed, the value bounded */
	ck_assert_int_eq(wsn_device_spec_parse("cpu:00000000", be, &idx), 0);
	ck_assert_int_eq(idx, 0);
	ck_assert_int_eq(wsn_device_spec_parse("cpu:0000000000001048577", be, &idx), WSN_EINVAL);
	ck_assert_int_eq(wsn_device_spec_parse("cpu:99999999999999999999999", be, &idx), WSN_EINVAL);
}
END_TEST

START_TEST(test_plan_argument_errors)
{
	struct wsn_device *dev;
	struct wsn_plan *plan;
	struct wsn_args a;
	float x[4 * 8], y[4 * 8], w[8], b[8], mean[4], rstd[4];

	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_FWD, 0, 8, WSN_F32, NULL, &plan), WSN_ESHAPE);
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_FWD, 4, -1, WSN_F32, NULL, &plan), WSN_ESHAPE);
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_FWD, 1LL << 40, 1 << 24, WSN_F32, NULL, &plan),
			 WSN_ESHAPE);
	ck_assert_int_eq(wsn_plan_create(dev, (enum wsn_op)9, 4, 8, WSN_F32, NULL, &plan), WSN_EINVAL);
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_FWD, 4, 8, (enum wsn_dtype)9, NULL, &plan),
			 WSN_EDTYPE);
	ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_FWD, 4, 8, WSN_F32, NULL, &plan), 0);
	memset(&a, 0, sizeof(a));
	ck_assert_int_eq(wsn_plan_execute(plan, &a, NULL), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "'x'"));
	wsn_tensor_2d(&a.x, x, WSN_F32, WSN_MEM_HOST, 4, 8);
	wsn_tensor_2d(&a.y, y, WSN_BF16, WSN_MEM_HOST, 4, 8);
	wsn_tensor_1d(&a.weight, w, WSN_F32, WSN_MEM_HOST, 8);
	wsn_tensor_1d(&a.bias, b, WSN_F32, WSN_MEM_HOST, 8);
	ck_assert_int_eq(wsn_plan_execute(plan, &a, NULL), WSN_EDTYPE);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "'y'"));
	wsn_tensor_2d(&a.y, y, WSN_F32, WSN_MEM_HOST, 4, 7);
	ck_assert_int_eq(wsn_plan_execute(plan, &a, NULL), WSN_ESHAPE);
	wsn_tensor_2d(&a.y, y, WSN_F32, WSN_MEM_HOST, 4, 8);
	wsn_tensor_1d(&a.mean, mean, WSN_F32, WSN_MEM_HOST, 3);
	ck_assert_int_eq(wsn_plan_execute(plan, &a, NULL), WSN_ESHAPE);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "'mean'"));
	wsn_tensor_1d(&a.mean, mean, WSN_F32, WSN_MEM_HOST, 4);
	wsn_tensor_2d(&a.rstd, rstd, WSN_F32, WSN_MEM_HOST, 4, 1);
	a.x.mem = WSN_MEM_DEVICE;
	ck_assert_int_eq(wsn_plan_execute(plan, &a, NULL), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "device memory"));
	wsn_plan_destroy(plan);
	wsn_device_close(dev);
}
END_TEST

/* The defaults: autotune off; on the CPU autotune is accepted, described, and changes nothing. */
START_TEST(test_plan_options_autotune)
{
	enum { R = 37, H = 200 };
	struct wsn_plan_options o;
	struct wsn_device *dev;
	char *dir = tu_tmpdir(), desc[4096];
	float *x = tu_xmalloc(R * H * 4), *w = tu_xmalloc(H * 4), *b = tu_xmalloc(H * 4);
	float *y[2] = { tu_xmalloc(R * H * 4), tu_xmalloc(R * H * 4) }, mean[2][R], rstd[2][R];
	struct wsn_tensor t;

	for (int op = 0; op < WSN_OP_COUNT; op++) {
		memset(&o, 0x5a, sizeof(o));
		wsn_plan_options_init(&o, (enum wsn_op)op);
		ck_assert_int_eq(o.autotune, 0);
		ck_assert_int_eq(o.approach, WSN_APPROACH_AUTO);
		ck_assert(!o.block_threads && !o.groups && !o.unroll && !o.stages && !o.arch && !o.threads);
	}
	setenv("XDG_CACHE_HOME", dir, 1);
	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	wsn_tensor_2d(&t, x, WSN_F32, WSN_MEM_HOST, R, H);
	wsn_tensor_fill_random(&t, tu_case_seed("autotune-cpu-x"), 0.5f, 1.0f);
	wsn_tensor_1d(&t, w, WSN_F32, WSN_MEM_HOST, H);
	wsn_tensor_fill_random(&t, tu_case_seed("autotune-cpu-w"), 1.0f, 0.25f);
	wsn_tensor_1d(&t, b, WSN_F32, WSN_MEM_HOST, H);
	wsn_tensor_fill_random(&t, tu_case_seed("autotune-cpu-b"), 0.0f, 0.25f);
	for (int k = 0; k < 2; k++) {
		struct wsn_plan *plan;
		struct wsn_args a;

		wsn_plan_options_init(&o, WSN_LAYERNORM_FWD);
		o.autotune = k;
		ck_assert_int_eq(wsn_plan_create(dev, WSN_LAYERNORM_FWD, R, H, WSN_F32, &o, &plan), 0);
		ck_assert_int_gt(wsn_plan_describe(plan, desc, sizeof(desc)), 0);
		if (k)
			ck_assert_ptr_nonnull(strstr(desc, "\nautotune:      nothing to tune on the CPU"));
		else
			ck_assert_ptr_null(strstr(desc, "autotune"));
		{ /* the JSON form: snprintf's contract, and the same plan */
			char js[1024], small[8];
			json_error_t je;
			json_t *j;
			int n = wsn_plan_describe_json(plan, NULL, 0);

			ck_assert_int_gt(n, 0);
			ck_assert_int_lt(n, (int)sizeof(js));
			ck_assert_int_eq(wsn_plan_describe_json(plan, small, sizeof(small)), n);
			ck_assert_int_eq(strlen(small), sizeof(small) - 1);
			ck_assert_int_eq(wsn_plan_describe_json(plan, js, sizeof(js)), n);
			ck_assert_int_eq(wsn_plan_describe_json(NULL, js, sizeof(js)), WSN_EINVAL);
			ck_assert_int_eq(wsn_plan_describe_json(plan, NULL, 4), WSN_EINVAL);
			ck_assert_msg((j = json_loads(js, 0, &je)) != NULL, "%s: %s", je.text, js);
			ck_assert_str_eq(json_string_value(json_object_get(j, "op")), "layernorm-fwd");
			ck_assert_int_eq(json_integer_value(json_object_get(j, "rows")), R);
			ck_assert_int_eq(json_integer_value(json_object_get(j, "hidden")), H);
			ck_assert_str_eq(json_string_value(json_object_get(j, "backend")), "cpu");
			ck_assert_int_eq(json_is_string(json_object_get(j, "autotune")), k);
			ck_assert_int_ge(json_integer_value(json_object_get(j, "threads")), 1);
			json_decref(j);
		}
		memset(&a, 0, sizeof(a));
		wsn_tensor_2d(&a.x, x, WSN_F32, WSN_MEM_HOST, R, H);
		wsn_tensor_1d(&a.weight, w, WSN_F32, WSN_MEM_HOST, H);
		wsn_tensor_1d(&a.bias, b, WSN_F32, WSN_MEM_HOST, H);
		wsn_tensor_2d(&a.y, y[k], WSN_F32, WSN_MEM_HOST, R, H);
		wsn_tensor_1d(&a.mean, mean[k], WSN_F32, WSN_MEM_HOST, R);
		wsn_tensor_1d(&a.rstd, rstd[k], WSN_F32, WSN_MEM_HOST, R);
		wsn_tensor_fill_nan(&a.y);
		wsn_tensor_fill_nan(&a.mean);
		wsn_tensor_fill_nan(&a.rstd);
		ck_assert_int_eq(wsn_plan_execute(plan, &a, NULL), 0);
		wsn_plan_destroy(plan);
	}
	ck_assert(!memcmp(y[0], y[1], R * H * 4) && !memcmp(mean[0], mean[1], sizeof(mean[0])) &&
		  !memcmp(rstd[0], rstd[1], sizeof(rstd[0])));
	ck_assert(!isnan(y[1][R * H - 1]));
	/* nothing was cached */
	{
		char sub[4096];
		struct stat st;
		snprintf(sub, sizeof(sub), "%s/wsnorm", dir);
		ck_assert_int_ne(stat(sub, &st), 0);
	}
	wsn_device_close(dev);
	unsetenv("XDG_CACHE_HOME");
	tu_rmtree(dir);
	free(dir);
	free(x);
	free(w);
	free(b);
	free(y[0]);
	free(y[1]);
}
END_TEST

Suite *suite_core_plan(void)
{
	return TU_SUITE("core", { "core", 0, NULL, NULL, TU_TESTS({ test_plan_argument_errors, 1 }, { test_plan_flatten_unit_dims, 1 },
				{ test_api_integer_edges, 1 }, { test_plan_options_autotune, 1 }) });
}
