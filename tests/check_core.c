/* SPDX-License-Identifier: MIT */
/* tests/check_core.c: errors, dtypes, tensors, devices and plan argument checks. */
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

/* Text for a terminal or JSON: controls and invalid UTF-8 escaped, whole characters or none at the end. */
START_TEST(test_text_escape)
{
	static const struct {
		const char *in;
		size_t cap;
		const char *out;
	} cases[] = {
		{ "plain", 64, "plain" },
		{ "a\x1b[2Jb\x07\n\x7f", 64, "a\\x1b[2Jb\\x07\\x0a\\x7f" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 64, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" },
		{ "bad\xff\xfe", 64, "bad\\xff\\xfe" },
		{ "\xc3", 64, "\\xc3" },                    /* a character cut short */
		{ "\xc0\xaf", 64, "\\xc0\\xaf" },           /* overlong */
		{ "\xed\xa0\x80", 64, "\\xed\\xa0\\x80" },   /* a surrogate */
		{ "\xf4\x90\x80\x80", 64, "\\xf4\\x90\\x80\\x80" }, /* past U+10FFFF */
		{ "ab\xc3\xa9", 4, "ab" },                  /* the character does not fit: left out whole */
		{ "ab\x01", 6, "ab" },                       /* nor does the escape */
		{ "ab\x01", 7, "ab\\x01" },
		{ "", 1, "" },
	};
	char buf[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = wsn_text_escape(buf, cases[i].cap, cases[i].in);
		ck_assert_msg(!strcmp(buf, cases[i].out), "case %zu: '%s'", i, buf);
		ck_assert_int_eq(n, strlen(cases[i].out));
	}
	ck_assert_int_eq(wsn_text_escape(buf, 0, "x"), 0);
	/* the library's own messages go through it */
	ck_assert_int_eq(wsn__error(WSN_EINVAL, "name '%s'", "a\x1b\xff"), WSN_EINVAL);
	ck_assert_str_eq(wsn_last_error(), "name 'a\\x1b\\xff'");
	/* a context names its step once: a detail that starts with the context's first word loses it */
	wsn__error(WSN_EINVAL, "plan: no kernel fits");
	ck_assert_int_eq(wsn__error_context(WSN_EINVAL, "plan %s on cuda:%d", "x", 0), WSN_EINVAL);
	ck_assert_str_eq(wsn_last_error(), "plan x on cuda:0: no kernel fits");
	wsn__error(WSN_EINVAL, "planner: no kernel fits");
	wsn__error_context(WSN_EINVAL, "plan %s", "x");
	ck_assert_str_eq(wsn_last_error(), "plan x: planner: no kernel fits");
}
END_TEST

START_TEST(test_error_table)
{
	ck_assert_str_eq(wsn_err_name(WSN_EINVAL), "EINVAL");
	ck_assert_str_eq(wsn_err_name(WSN_EFORMAT), "EFORMAT");
	ck_assert_str_eq(wsn_strerror(WSN_ETRUNC), "truncated file");
	ck_assert_int_eq(WSN_ENOENT, -ENOENT);
	ck_assert_str_eq(wsn_err_name(-99999), "UNKNOWN");
	ck_assert_str_eq(wsn_strerror(-99999), "unknown error");
	ck_assert_str_eq(wsn_version(), WSN_VERSION_STRING);
}
END_TEST

START_TEST(test_dtype_parse)
{
	enum wsn_dtype dt;

	ck_assert_int_eq(wsn_dtype_parse("bf16", &dt), 0);
	ck_assert_int_eq(dt, WSN_BF16);
	ck_assert_int_eq(wsn_dtype_parse("F16", &dt), 0);
	ck_assert_int_eq(dt, WSN_F16);
	ck_assert_int_eq(wsn_dtype_parse("float32", &dt), 0);
	ck_assert_int_eq(dt, WSN_F32);
	ck_assert_int_eq(wsn_dtype_parse("f64", &dt), WSN_EDTYPE);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "f64"));
	ck_assert_uint_eq(wsn_dtype_size(WSN_BF16), 2);
	ck_assert_uint_eq(wsn_dtype_size((enum wsn_dtype)7), 0);
}
END_TEST

/* f16: every one of the 65536 bit patterns that is not NaN survives f16 -> f32 -> f16. */
START_TEST(test_f16_roundtrip_all)
{
	for (uint32_t h = 0; h < 65536; h++) {
		uint16_t in = (uint16_t)h, out;
		float f;

		ck_assert_int_eq(wsn_dtype_convert(&f, WSN_F32, &in, WSN_F16, 1), 0);
		if (isnan(f))
			continue;
		ck_assert_int_eq(wsn_dtype_convert(&out, WSN_F16, &f, WSN_F32, 1), 0);
		ck_assert_msg(out == in, "f16 0x%04x -> %g -> 0x%04x", in, (double)f, out);
	}
}
END_TEST

/* Narrowing rounds to nearest, ties to even, against a double-precision model. */
START_TEST(test_narrowing_rounds_to_nearest)
{
	uint64_t seed = tu_case_seed("narrowing");
	struct wsn_tensor t;
	float *v = tu_xmalloc(4096 * sizeof(float));

	ck_assert_int_eq(wsn_tensor_1d(&t, v, WSN_F32, WSN_MEM_HOST, 4096), 0);
	ck_assert_int_eq(wsn_tensor_fill_random(&t, seed, 0.0f, 100.0f), 0);
	for (int i = 0; i < 4096; i++) {
		uint16_t h, b;
		float fh, fb, alt;
		ck_assert_int_eq(wsn_dtype_convert(&h, WSN_F16, &v[i], WSN_F32, 1), 0);
		ck_assert_int_eq(wsn_dtype_convert(&b, WSN_BF16, &v[i], WSN_F32, 1), 0);
		wsn_dtype_convert(&fh, WSN_F32, &h, WSN_F16, 1);
		wsn_dtype_convert(&fb, WSN_F32, &b, WSN_BF16, 1);
		/* no neighbour of the result is closer to the input */
		for (int d = -1; d <= 1; d += 2) {
			/* a neighbouring bit pattern can be NaN (next to +-0): not a candidate */
			uint16_t nh = (uint16_t)(h + d), nb = (uint16_t)(b + d);
			wsn_dtype_convert(&alt, WSN_F32, &nh, WSN_F16, 1);
			ck_assert(isnan(alt) || fabs((double)alt - v[i]) >= fabs((double)fh - v[i]));
			wsn_dtype_convert(&alt, WSN_F32, &nb, WSN_BF16, 1);
			ck_assert(isnan(alt) || fabs((double)alt - v[i]) >= fabs((double)fb - v[i]));
		}
	}
	free(v);
}
END_TEST

START_TEST(test_random_fill_deterministic)
{
	float a[1000], b[1000];
	struct wsn_tensor ta, tb;
	double sum = 0, sq = 0;

	wsn_tensor_1d(&ta, a, WSN_F32, WSN_MEM_HOST, 1000);
	wsn_tensor_1d(&tb, b, WSN_F32, WSN_MEM_HOST, 1000);
	ck_assert_int_eq(wsn_tensor_fill_random(&ta, 42, 1.0f, 2.0f), 0);
	ck_assert_int_eq(wsn_tensor_fill_random(&tb, 42, 1.0f, 2.0f), 0);
	ck_assert_mem_eq(a, b, sizeof(a));
	ck_assert_int_eq(wsn_tensor_fill_random(&tb, 43, 1.0f, 2.0f), 0);
	ck_assert(memcmp(a, b, sizeof(a)) != 0);
	for (int i = 0; i < 1000; i++)
		sum += a[i], sq += (a[i] - 1.0) * (a[i] - 1.0);
	ck_assert(fabs(sum / 1000 - 1.0) < 0.2);
	ck_assert(fabs(sqrt(sq / 1000) - 2.0) < 0.2);
}
END_TEST

START_TEST(test_compare_and_poison)
{
	float a[64], b[64];
	struct wsn_tensor ta, tb;
	struct wsn_compare c;

	wsn_tensor_1d(&ta, a, WSN_F32, WSN_MEM_HOST, 64);
	wsn_tensor_1d(&tb, b, WSN_F32, WSN_MEM_HOST, 64);
	wsn_tensor_fill_random(&ta, 7, 0.0f, 1.0f);
	memcpy(b, a, sizeof(a));
	ck_assert_int_eq(wsn_tensor_compare(&ta, &tb, &c), 0);
	ck_assert(c.rel_l2 == 0.0 && c.max_abs == 0.0 && c.nonfinite == 0 && c.count == 64);
	b[17] += 1.0f;
	ck_assert_int_eq(wsn_tensor_compare(&ta, &tb, &c), 0);
	ck_assert_int_eq(c.worst, 17);
	ck_assert(c.rel_l2 > 0.0);
	ck_assert_int_eq(wsn_tensor_fill_nan(&ta), 0);
	ck_assert_int_eq(wsn_tensor_compare(&ta, &tb, &c), 0);
	ck_assert_int_eq(c.nonfinite, 64);
	ck_assert(isinf(c.rel_l2));
	tb.shape[0] = 63;
	ck_assert_int_eq(wsn_tensor_compare(&ta, &tb, &c), WSN_ESHAPE);
}
END_TEST

START_TEST(test_devices)
{
	struct wsn_backend_info bi;
	struct wsn_device_info di;
	struct wsn_device *dev;
	int ncpu = 0;

	ck_assert_int_ge(wsn_backend_count(), 3);
	ck_assert_int_eq(wsn_backend_info(0, &bi), 0);
	ck_assert_str_eq(bi.name, "cpu");
	ck_assert(bi.available && bi.device_count == 1);
	ck_assert_int_eq(wsn_backend_info(99, &bi), WSN_EINVAL);
	ck_assert_int_ge(wsn_device_count(), 1);
	for (int i = 0; i < wsn_device_count(); i++) {
		ck_assert_int_eq(wsn_device_info_at(i, &di), 0);
		ncpu += !strcmp(di.backend, "cpu");
	}
	ck_assert_int_eq(ncpu, 1);
	ck_assert_int_eq(wsn_device_info_at(0, &di), 0);
	ck_assert_str_eq(di.spec, "cpu");
	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	wsn_device_close(dev);
	ck_assert_int_eq(wsn_device_open("tpu:0", &dev), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "tpu"));
	ck_assert_int_eq(wsn_device_open("cpu:1", &dev), WSN_ENODEV);
	ck_assert_int_eq(wsn_device_open("cuda:x", &dev), WSN_EINVAL);
	ck_assert_ptr_null(dev);
	/* what wsn_device_open rejects as malformed, and only that, the parser rejects without opening */
	ck_assert_int_eq(wsn_device_open("cuda: 1", &dev), WSN_EINVAL);
	ck_assert_int_eq(wsn_device_open("cpu:+0", &dev), WSN_EINVAL);
	ck_assert_ptr_null(dev);
}
END_TEST

START_TEST(test_device_spec_parse)
{
	static const struct {
		const char *spec, *backend;
		int index;
	} good[] = { { "auto", "auto", -1 }, { "cpu", "cpu", 0 }, { "cpu:0", "cpu", 0 }, { "cuda", "cuda", 0 },
		     { "cuda:7", "cuda", 7 }, { "amd:0012", "amd", 12 }, { "cuda:1048576", "cuda", 1 << 20 },
		     { "cuda:00000001", "cuda", 1 } };
	static const struct {
		const char *spec, *says;
	} bad[] = { { "", "unknown backend" }, { "gpu", "unknown backend 'gpu'" }, { "cudax:1", "unknown backend 'cudax'" },
		    { "CUDA:0", "unknown backend" }, { "cuda:", "bad device index ''" }, { "cuda:x", "bad device index 'x'" },
		    { "cuda:-1", "bad device index '-1'" }, { "cuda:+1", "bad device index '+1'" },
		    { "cuda: 1", "bad device index ' 1'" }, { "cuda:1:2", "bad device index '1:2'" },
		    { "cuda:1048577", "at most 1048576" }, { "cuda:000000001048577", "at most 1048576" },
		    { "auto:0", "auto takes no index" }, { ":3", "unknown backend ''" } };
	char be[16];
	int idx;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		memset(be, 'z', sizeof(be));
		idx = 99;
		ck_assert_msg(wsn_device_spec_parse(good[i].spec, be, &idx) == 0, "'%s': %s", good[i].spec, wsn_last_error());
		ck_assert_str_eq(be, good[i].backend);
		ck_assert_int_eq(idx, good[i].index);
		ck_assert_int_eq(wsn_device_spec_parse(good[i].spec, NULL, NULL), 0);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		idx = 99;
		ck_assert_msg(wsn_device_spec_parse(bad[i].spec, be, &idx) == WSN_EINVAL, "'%s' accepted", bad[i].spec);
		ck_assert_msg(strstr(wsn_last_error(), bad[i].says), "'%s': %s", bad[i].spec, wsn_last_error());
		ck_assert_int_eq(idx, 99); /* nothing written on failure */
	}
	ck_assert_int_eq(wsn_device_spec_parse(NULL, be, &idx), WSN_EINVAL);
}
END_TEST

START_TEST(test_op_names)
{
	enum wsn_op op;
	enum wsn_approach a;

	for (int i = 0; i < WSN_OP_COUNT; i++) {
		ck_assert_int_eq(wsn_op_parse(wsn_op_name((enum wsn_op)i), &op), 0);
		ck_assert_int_eq(op, i);
	}
	ck_assert_int_eq(wsn_op_parse("batchnorm-fwd", &op), WSN_EINVAL);
	/* each op is exactly one of LayerNorm/RMSNorm and one of forward/backward */
	ck_assert(wsn_op_is_layernorm(WSN_LAYERNORM_FWD) && wsn_op_is_layernorm(WSN_LAYERNORM_BWD));
	ck_assert(!wsn_op_is_layernorm(WSN_RMSNORM_FWD) && !wsn_op_is_layernorm(WSN_RMSNORM_BWD));
	ck_assert(!wsn_op_is_backward(WSN_LAYERNORM_FWD) && wsn_op_is_backward(WSN_LAYERNORM_BWD));
	ck_assert(!wsn_op_is_backward(WSN_RMSNORM_FWD) && wsn_op_is_backward(WSN_RMSNORM_BWD));
	ck_assert_int_eq(wsn_approach_parse("ws", &a), 0);
	ck_assert_int_eq(a, WSN_APPROACH_WS);
	ck_assert_int_eq(wsn_approach_parse("fast", &a), WSN_EINVAL);
	/* fwd bf16 16384 x 4096: read x + write y + weight + bias + mean/rstd */
	ck_assert_int_eq(wsn_op_min_bytes(WSN_LAYERNORM_FWD, 16384, 4096, WSN_BF16, 1, 1),
			 2LL * 16384 * 4096 * 2 + 2 * 16384 * 4 + 2 * 4096 * 2);
}
END_TEST

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

static struct wsn__tune_id tune_id(int64_t hidden)
{
	struct wsn__tune_id id;

	memset(&id, 0, sizeof(id));
	snprintf(id.gpu, sizeof(id.gpu), "NVIDIA H100 80GB/HBM3 (test)");
	id.cc_major = 9, id.sms = 132, id.driver = 13000;
	id.op = WSN_RMSNORM_BWD, id.dtype = WSN_BF16, id.hidden = hidden, id.has_weight = 1;
	id.rows_class = wsn__tune_rows_class(16384);
	return id;
}

START_TEST(test_tune_rows_class)
{
	/* the power of two at or above the rows, at most the rows autotune times on */
	static const int64_t rows[][2] = { { 1, 1 },	   { 2, 2 },	     { 3, 4 },		{ 1000, 1024 },
					   { 1024, 1024 }, { 1025, 2048 },   { 4096, 4096 },	{ 9000, 16384 },
					   { 16384, 16384 }, { 16385, 16384 }, { INT64_MAX, 16384 } };

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		ck_assert_msg(wsn__tune_rows_class(rows[i][0]) == rows[i][1], "rows %lld: class %lld, want %lld",
			      (long long)rows[i][0], (long long)wsn__tune_rows_class(rows[i][0]), (long long)rows[i][1]);
}
END_TEST

START_TEST(test_tune_cache_roundtrip)
{
	char *dir = tu_tmpdir(), key[256];
	struct wsn__tune_id id = tune_id(4096);
	struct wsn__tune_entry e = { .approach = WSN_APPROACH_WS, .ws_us = 101.5, .multiwave_us = 130.25, .rows = 16384 },
			       got;

	setenv("XDG_CACHE_HOME", dir, 1);
	ck_assert_int_eq(wsn__tune_key(&id, key, sizeof(key)), 0);
	ck_assert_ptr_null(strpbrk(key, " /()")); /* squeezed to a file name */
	ck_assert_ptr_nonnull(strstr(key, "rmsnorm-bwd_bf16_h4096"));
	ck_assert_msg(strstr(key, "_r16384"), "%s", key);
	/* a new wsnorm version (new kernels, new rules) tunes afresh */
	ck_assert_msg(!strncmp(key, "wsnorm" WSN_VERSION_STRING "_", strlen("wsnorm" WSN_VERSION_STRING "_")), "%s", key);
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_ENOENT);
	ck_assert_int_eq(wsn__tune_store(&id, &e), 0);
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), 0);
	ck_assert_int_eq(got.approach, WSN_APPROACH_WS);
	ck_assert(got.ws_us == 101.5 && got.multiwave_us == 130.25 && got.rows == 16384);
	ck_assert(!got.shape.cluster && !got.shapes && got.shape_us == 0);
	{ /* another ws shape won: its shape, count and time come back */
		struct wsn__tune_entry t = e;
		t.shape = (struct wsn__ws_shape){ 2, 32, 4, 1, 16 };
		t.shapes = 14;
		t.shape_us = 97.25;
		ck_assert_int_eq(wsn__tune_store(&id, &t), 0);
		ck_assert_int_eq(wsn__tune_lookup(&id, &got), 0);
		ck_assert(got.shape.cluster == 2 && got.shape.bdimx == 32 && got.shape.bdimy == 4 && got.shape.unroll == 1 &&
			  got.shape.stages == 16 && got.shapes == 14 && got.shape_us == 97.25 && got.ws_us == 101.5);
		/* a shape only with a ws winner, and only one the kernels could take */
		t.approach = WSN_APPROACH_MULTIWAVE;
		ck_assert_int_eq(wsn__tune_store(&id, &t), WSN_EINVAL);
		t.approach = WSN_APPROACH_WS;
		t.shape.cluster = 3;
		ck_assert_int_eq(wsn__tune_store(&id, &t), WSN_EINVAL);
		t.shape.cluster = 2;
		t.shape.stages = 0;
		ck_assert_int_eq(wsn__tune_store(&id, &t), WSN_EINVAL);
		ck_assert_int_eq(wsn__tune_store(&id, &e), 0);
	}
	{ /* the path names the key under $XDG_CACHE_HOME/wsnorm/tune */
		char path[4096], want[4096];
		snprintf(want, sizeof(want), "%s/wsnorm/tune/%s", dir, key);
		ck_assert_int_eq(wsn__tune_path(&id, path, sizeof(path)), 0);
		ck_assert_str_eq(path, want);
	}
	/* not entries: nothing is written */
	e.approach = WSN_APPROACH_AUTO;
	ck_assert_int_eq(wsn__tune_store(&id, &e), WSN_EINVAL);
	e.approach = WSN_APPROACH_MULTIWAVE;
	e.rows = -1;
	ck_assert_int_eq(wsn__tune_store(&id, &e), WSN_EINVAL);
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), 0);
	ck_assert_int_eq(got.approach, WSN_APPROACH_WS);
	/* one candidate: nothing timed, rows 0 */
	e.rows = 0;
	e.ws_us = e.multiwave_us = 0;
	ck_assert_int_eq(wsn__tune_store(&id, &e), 0);
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), 0);
	ck_assert(got.approach == WSN_APPROACH_MULTIWAVE && got.rows == 0 && got.ws_us == 0);
	/* another hidden size, driver or GPU is another entry */
	id.hidden = 8192;
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_ENOENT);
	id = tune_id(4096);
	id.driver = 12080;
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_ENOENT);
	/* so is another rows class (the best shape moves with the rows each SM gets), but not more rows
	 * past the rows autotune times on */
	id = tune_id(4096);
	id.rows_class = wsn__tune_rows_class(4096);
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_ENOENT);
	id.rows_class = wsn__tune_rows_class(1 << 20);
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), 0);
	/* a malformed entry is a miss (WSN_EFORMAT), not a crash; so is an older version's entry */
	{
#define V3 "wsnorm-tune 3 approach=ws shape="
#define T3 " ws_us=10.000 shape_us=9.000 multiwave_us=12.000 shapes=3 rows=4096"
		static const char *const older[] = {
			"wsnorm-tune 1 approach=fastest ws_us=x\n",
			"wsnorm-tune 1 approach=ws ws_us=10.000 multiwave_us=12.000\n",
			"wsnorm-tune 1 approach=ws ws_us=10.000 multiwave_us=12.000 rows=4096\n",
			"wsnorm-tune 2 approach=ws ws_us=10.000 multiwave_us=12.000 rows=4096\n",
		};
		static const char *const bad[] = {
			V3 "0,0,0,0,0 ws_us=10.000 multiwave_us=12.000 rows=4096\n",
			"wsnorm-tune 3 approach=auto shape=0,0,0,0,0" T3 "\n",
			V3 "0,0,0,0,0 ws_us=nan shape_us=9.000 multiwave_us=12.000 shapes=3 rows=4096\n",
			V3 "0,0,0,0,0 ws_us=10.000 shape_us=9.000 multiwave_us=-1 shapes=3 rows=4096\n",
			V3 "0,0,0,0,0 ws_us=10.000 shape_us=9.000 multiwave_us=12.000 shapes=3 rows=-5\n",
			V3 "0,0,0,0,0 ws_us=10.000 shape_us=9.000 multiwave_us=12.000 shapes=-1 rows=4096\n",
			/* shapes no kernel takes, or a shape beside a multi-wave winner */
			V3 "3,32,4,1,16" T3 "\n",
			V3 "2,16,4,1,16" T3 "\n",
			V3 "2,32,0,1,16" T3 "\n",
			V3 "2,32,4,9,16" T3 "\n",
			V3 "2,32,4,1,33" T3 "\n",
			V3 "2,32,4,1" T3 "\n",
			V3 "2,32,4,1,-16" T3 "\n",
			V3 "0,32,0,0,0" T3 "\n",
			"wsnorm-tune 3 approach=multiwave shape=2,32,4,1,16" T3 "\n",
			"\x7f\x45\x4c\x46 garbage",
			"",
			/* the whole line or nothing: no trailing text, no line cut short, no saturated count */
			V3 "0,0,0,0,0" T3 " extra\n",
			V3 "0,0,0,0,0" T3,
			V3 "0,0,0,0,0 ws_us=10.000 shape_us=9.000 multiwave_us=12.000 shapes=3 rows=99999999999999999999\n",
		};
		char path[4096];
		id = tune_id(4096);
		ck_assert_int_eq(wsn__tune_path(&id, path, sizeof(path)), 0);
		for (size_t i = 0; i < sizeof(older) / sizeof(older[0]); i++) {
			tu_write_file(path, older[i], strlen(older[i]));
			ck_assert_msg(wsn__tune_lookup(&id, &got) == WSN_EFORMAT, "entry %zu '%s' is not a miss", i, older[i]);
			ck_assert_ptr_nonnull(strstr(wsn_last_error(), "another version's entry"));
			ck_assert_ptr_nonnull(strstr(wsn_last_error(), path));
		}
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			tu_write_file(path, bad[i], strlen(bad[i]));
			ck_assert_msg(wsn__tune_lookup(&id, &got) == WSN_EFORMAT, "entry %zu '%s' is not a miss", i, bad[i]);
			ck_assert_ptr_nonnull(strstr(wsn_last_error(), "malformed"));
			ck_assert_ptr_nonnull(strstr(wsn_last_error(), path));
		}
		/* the good lines these spoil */
		{
			static const char *const good[] = { V3 "0,0,0,0,0" T3 "\n", V3 "8,256,1,2,4" T3 "\n",
							    "wsnorm-tune 3 approach=multiwave shape=0,0,0,0,0" T3 "\n" };
			for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
				tu_write_file(path, good[i], strlen(good[i]));
				ck_assert_msg(wsn__tune_lookup(&id, &got) == 0, "entry '%s': %s", good[i], wsn_last_error());
				ck_assert(got.shapes == 3 && got.shape_us == 9 && got.rows == 4096);
			}
			ck_assert(got.approach == WSN_APPROACH_MULTIWAVE && !got.shape.cluster);
		}
#undef V3
#undef T3
		/*
		 * not a regular file: a FIFO (an open that would block for ever), a directory, a link (even to
		 * a good entry) are misses, at once
		 */
		{
			char good[4200];
			const char *line = "wsnorm-tune 3 approach=ws shape=0,0,0,0,0 ws_us=10.000 shape_us=0.000 "
					   "multiwave_us=12.000 shapes=0 rows=4096\n";

			snprintf(good, sizeof(good), "%s.good", path);
			tu_write_file(good, line, strlen(line));
			ck_assert_int_eq(unlink(path), 0);
			ck_assert_int_eq(mkfifo(path, 0644), 0);
			ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_EFORMAT);
			ck_assert_ptr_nonnull(strstr(wsn_last_error(), "not an entry"));
			ck_assert_int_eq(unlink(path), 0);
			ck_assert_int_eq(mkdir(path, 0755), 0);
			ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_EFORMAT);
			ck_assert_int_eq(rmdir(path), 0);
			ck_assert_int_eq(symlink(good, path), 0);
			ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_EFORMAT);
			ck_assert_ptr_nonnull(strstr(wsn_last_error(), "symbolic link"));
			unlink(good);
		}
		/* and a store replaces it */
		e = (struct wsn__tune_entry){ .approach = WSN_APPROACH_WS, .ws_us = 10, .multiwave_us = 12, .rows = 4096 };
		ck_assert_int_eq(wsn__tune_store(&id, &e), 0);
		ck_assert_int_eq(wsn__tune_lookup(&id, &got), 0);
		ck_assert(got.approach == WSN_APPROACH_WS && got.rows == 4096);
	}
	/*
	 * temporary files killed writers left (the writer's named fallback, its link-then-rename name,
	 * an older wsnorm's .tmp-): swept by the next store once 10 minutes old; younger ones, entries
	 * and other files stay
	 */
	{
		static const char *const temps[] = { ".tmp-AAAAAA", ".aB3dE9", ".4242-0" };
		char stale[4400], fresh[4400], key[256], other[4400], tdir2[4096];
		struct timespec t[2] = { { .tv_sec = time(NULL) - 3600 }, { .tv_sec = time(NULL) - 3600 } };
		struct stat st;

		snprintf(tdir2, sizeof(tdir2), "%s/wsnorm/tune", dir);
		ck_assert_int_eq(wsn__tune_key(&id, key, sizeof(key)), 0);
		snprintf(other, sizeof(other), "%s/notes.txt", tdir2);
		tu_write_file(other, "x", 1);
		ck_assert_int_eq(utimensat(AT_FDCWD, other, t, 0), 0);
		for (int i = 0; i < 3; i++) {
			snprintf(stale, sizeof(stale), "%s/%s%s", tdir2, i ? key : "", temps[i]);
			snprintf(fresh, sizeof(fresh), "%s/%s%sx", tdir2, i ? key : "", temps[i]);
			tu_write_file(stale, "x", 1);
			tu_write_file(fresh, "x", 1);
			ck_assert_int_eq(utimensat(AT_FDCWD, stale, t, 0), 0);
			ck_assert_int_eq(wsn__tune_store(&id, &e), 0);
			ck_assert_msg(stat(stale, &st) != 0, "%s was not swept", stale);
			ck_assert_int_eq(stat(fresh, &st), 0); /* perhaps a writer at work */
			unlink(fresh);
		}
		{ /* an older wsnorm's key ended in _b0/_b1; an entry with a dot elsewhere is no temporary file */
			char old[4400], keep[4400];
			snprintf(old, sizeof(old), "%s/wsnorm0.0.9_GPU_cc90_132sm_drv1_rmsnorm-bwd_bf16_h64_w1_b1.aB3dE9", tdir2);
			snprintf(keep, sizeof(keep), "%s/wsnorm0.0.9_GPU_cc90_132sm_drv1_rmsnorm-bwd_bf16_h64_w1_b1_r64", tdir2);
			tu_write_file(old, "x", 1);
			tu_write_file(keep, "x", 1);
			ck_assert_int_eq(utimensat(AT_FDCWD, old, t, 0), 0);
			ck_assert_int_eq(utimensat(AT_FDCWD, keep, t, 0), 0);
			ck_assert_int_eq(wsn__tune_store(&id, &e), 0);
			ck_assert_msg(stat(old, &st) != 0, "%s was not swept", old);
			ck_assert_msg(stat(keep, &st) == 0, "the entry %s was swept", keep);
			unlink(keep);
		}
		ck_assert_int_eq(stat(other, &st), 0);
		unlink(other);
		snprintf(stale, sizeof(stale), "%s/%s", tdir2, key);
		ck_assert_int_eq(utimensat(AT_FDCWD, stale, t, 0), 0); /* an old entry is not a temporary file */
		wsn__out_force_named(true); /* and where the file system has no unnamed files */
		e.rows = 8192;
		ck_assert_int_eq(wsn__tune_store(&id, &e), 0);
		wsn__out_force_named(false);
		ck_assert_int_eq(wsn__tune_lookup(&id, &got), 0);
		ck_assert_int_eq(got.rows, 8192);
	}
	/* no usable cache directory: a miss, and a store that says why */
	unsetenv("XDG_CACHE_HOME");
	{
		char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
		setenv("HOME", "relative/home", 1);
		ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_ENOENT);
		ck_assert_int_eq(wsn__tune_store(&id, &e), WSN_ENOENT);
		ck_assert_ptr_nonnull(strstr(wsn_last_error(), "XDG_CACHE_HOME"));
		if (home)
			setenv("HOME", home, 1);
		else
			unsetenv("HOME");
		free(home);
	}
	tu_rmtree(dir);
	free(dir);
}
END_TEST

/* Writers racing on one entry: a reader only ever sees a whole entry, and no temporary file stays. */
START_TEST(test_tune_cache_concurrent)
{
	char *dir = tu_tmpdir(), tdir[4096];
	struct wsn__tune_id id = tune_id(2048);
	pid_t kids[4];
	int hits = 0, reads = 0;
	DIR *d;
	struct dirent *de;

	setenv("XDG_CACHE_HOME", dir, 1);
	for (int k = 0; k < 4; k++) {
		kids[k] = fork();
		ck_assert(kids[k] >= 0);
		if (kids[k] == 0) {
			struct wsn__tune_entry e = { .approach = k % 2 ? WSN_APPROACH_WS : WSN_APPROACH_MULTIWAVE,
						     .ws_us = 100 + k, .multiwave_us = 200 + k, .rows = 1000 + k };
			for (int i = 0; i < 200; i++)
				if (wsn__tune_store(&id, &e) < 0)
					_exit(1);
			_exit(0);
		}
	}
	/* read for as long as any writer runs (and at least 400 times) */
	for (int i = 0, running = 4; running || i < 400; i++) {
		struct wsn__tune_entry got;
		int r = wsn__tune_lookup(&id, &got);

		reads++;
		for (int k = 0; k < 4; k++) {
			int st;
			if (kids[k] > 0 && waitpid(kids[k], &st, WNOHANG) == kids[k]) {
				ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
				kids[k] = 0;
				running--;
			}
		}
		if (r == 0) {
			hits++;
			ck_assert(got.ws_us >= 100 && got.ws_us <= 103);
			ck_assert(got.multiwave_us == got.ws_us + 100); /* never a mix of two writers */
			ck_assert(got.rows == (int64_t)got.ws_us + 900);
			ck_assert(got.approach == (((int)got.ws_us - 100) % 2 ? WSN_APPROACH_WS : WSN_APPROACH_MULTIWAVE));
		} else {
			ck_assert_msg(r == WSN_ENOENT && !strstr(wsn_last_error(), "malformed"), "torn entry: %s",
				      wsn_last_error());
		}
	}
	printf("tune cache: %d of %d reads hit during the writes\n", hits, reads);
	ck_assert_msg(hits > 0, "no read saw an entry while the writers ran: the check above checked nothing");
	snprintf(tdir, sizeof(tdir), "%s/wsnorm/tune", dir);
	ck_assert((d = opendir(tdir)) != NULL);
	while ((de = readdir(d))) { /* only entries: names that end in _r<rows class> */
		size_t l = strlen(de->d_name), k = l;

		while (k > 0 && de->d_name[k - 1] >= '0' && de->d_name[k - 1] <= '9')
			k--;
		ck_assert_msg(de->d_name[0] == '.' ? !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") :
			      k < l && k > 2 && !strncmp(de->d_name + k - 2, "_r", 2),
			      "temporary file left: %s", de->d_name);
	}
	closedir(d);
	unsetenv("XDG_CACHE_HOME");
	tu_rmtree(dir);
	free(dir);
}
END_TEST

START_TEST(test_cpu_memory_limit)
{
	const uint64_t limit = 64u << 20, big = 40u << 20;
	struct wsn_device *a, *b;
	void *p = NULL, *q = NULL;

	wsn__host_limit(limit); /* as if the machine had 64 MiB available */
	ck_assert_int_eq(wsn_device_open("cpu", &a), 0);
	ck_assert_int_eq(wsn_device_open("cpu", &b), 0);
	ck_assert_int_eq(wsn_host_alloc(a, big, &p), 0);
	ck_assert_int_eq(wsn_host_alloc(a, big, &q), WSN_ENOMEM);
	ck_assert_msg(strstr(wsn_last_error(), "bytes of memory available"), "%s", wsn_last_error());
	ck_assert_ptr_null(q);
	ck_assert_int_eq(wsn_mem_alloc(b, big, &q), WSN_ENOMEM); /* the whole process counts */
	ck_assert_int_eq(wsn_mem_alloc(b, 1 << 20, &q), 0);     /* small ones still fit */
	ck_assert_int_eq(wsn_mem_free(b, q), 0);
	ck_assert_int_eq(wsn_host_free(a, p), 0);
	ck_assert_int_eq(wsn_mem_alloc(b, big, &q), 0); /* room again */
	ck_assert_int_eq(wsn_host_alloc(a, big, &p), WSN_ENOMEM);
	ck_assert_int_eq(wsn_mem_free(b, q), 0);
	ck_assert_int_eq(wsn_host_alloc(a, big, &p), 0);
	wsn_device_close(a); /* closing frees what it held, and counts it free */
	ck_assert_int_eq(wsn_mem_alloc(b, big, &q), 0);
	ck_assert_int_eq(wsn_mem_free(b, q), 0);
	{ /* the io_uring readers' buffers count too: two of 36 MiB do not fit, nor one beside 40 MiB */
		struct wsn_reader_options ro;
		struct wsn_reader *r1 = NULL, *r2 = NULL;

		wsn_reader_options_init(&ro);
		ro.queue_depth = 9;
		ro.block_size = 4u << 20;
		ck_assert_int_eq(wsn_mem_alloc(b, big, &q), 0);
		ck_assert_int_eq(wsn_reader_create(&ro, &r1), WSN_ENOMEM);
		ck_assert_msg(strstr(wsn_last_error(), "reader: cannot take 9 buffers of 4194304 bytes") &&
			      strstr(wsn_last_error(), "bytes of memory available"), "%s", wsn_last_error());
		ck_assert_ptr_null(r1);
		ck_assert_int_eq(wsn_mem_free(b, q), 0);
		ck_assert_int_eq(wsn_reader_create(&ro, &r1), 0);
		ck_assert_int_eq(wsn_reader_create(&ro, &r2), WSN_ENOMEM);
		wsn_reader_destroy(r1); /* destroying gives its buffers back */
		ck_assert_int_eq(wsn_reader_create(&ro, &r2), 0);
		ck_assert_int_eq(wsn_mem_alloc(b, big, &q), WSN_ENOMEM);
		wsn_reader_destroy(r2);
	}
	wsn_device_close(b);
	wsn__host_limit(0);
	/* the machine's own limit: more than it has fails at once, touching nothing */
	ck_assert_int_eq(wsn_device_open("cpu", &a), 0);
	ck_assert_int_eq(wsn_host_alloc(a, (size_t)1 << 60, &p), WSN_ENOMEM);
	ck_assert_msg(strstr(wsn_last_error(), "MemAvailable") || strstr(wsn_last_error(), "cgroup") ||
		      strstr(wsn_last_error(), "mmap"), "%s", wsn_last_error());
	wsn_device_close(a);
}
END_TEST

/* ---- which backward calls may start early on a stream (runtime/overlap.c) ---- */

/* A bf16 backward call of LayerNorm on [rows, 64] tensors at fake addresses (nothing is read). */
static void ov_call(struct wsn__ovl_call *c, uintptr_t x, uintptr_t dy, uintptr_t dx, uintptr_t stats, uintptr_t w,
		    uintptr_t dw, int64_t rows)
{
	struct wsn__plan_params pp;
	struct wsn_args a;

	memset(&pp, 0, sizeof(pp));
	pp.op = WSN_LAYERNORM_BWD;
	pp.opts.has_weight = 1;
	memset(&a, 0, sizeof(a));
	ck_assert_int_eq(wsn_tensor_2d(&a.x, (void *)x, WSN_BF16, WSN_MEM_DEVICE, rows, 64), 0);
	ck_assert_int_eq(wsn_tensor_2d(&a.dy, (void *)dy, WSN_BF16, WSN_MEM_DEVICE, rows, 64), 0);
	ck_assert_int_eq(wsn_tensor_2d(&a.dx, (void *)dx, WSN_BF16, WSN_MEM_DEVICE, rows, 64), 0);
	ck_assert_int_eq(wsn_tensor_1d(&a.mean, (void *)stats, WSN_F32, WSN_MEM_DEVICE, rows), 0);
	ck_assert_int_eq(wsn_tensor_1d(&a.rstd, (void *)(stats + 4 * (uintptr_t)rows), WSN_F32, WSN_MEM_DEVICE, rows), 0);
	ck_assert_int_eq(wsn_tensor_1d(&a.weight, (void *)w, WSN_BF16, WSN_MEM_DEVICE, 64), 0);
	if (dw)
		ck_assert_int_eq(wsn_tensor_1d(&a.dweight, (void *)dw, WSN_BF16, WSN_MEM_DEVICE, 64), 0);
	wsn__ovl_call_of(&pp, &a, c);
}

/* Queue c: returns whether it starts early and the number it waits for. */
static int ov_queue(struct wsn__ovl *o, struct wsn__ovl_call *c, uint64_t *wait)
{
	int early = wsn__ovl_may_start_early(o, c, wait);

	c->seq = ++o->seq; /* as wsn_plan_execute numbers it */
	wsn__ovl_record(o, c, early, *wait);
	return early;
}

/*
 * Calls on buffer sets (x, dy, dx, stats 1 MB apart) with one weight and one dweight:
 * independent calls start early; a call reusing an older call's buffers waits for that call's done
 * word; one touching the call right before it, or that call's dweight, waits at its start; a byte of
 * overlap is enough; other work on the stream, a full record and a call without a finish kernel
 * (no done word to wait for) make the next conflicting call wait.
 */
START_TEST(test_overlap_decisions)
{
	const uintptr_t M = 1u << 20, W = 64 * M, DW = 65 * M;
	struct wsn__ovl o;
	struct wsn__ovl_call c;
	uint64_t wait;
#define SET(k) ((k) + 1) * 4 * M, ((k) + 1) * 4 * M + M, ((k) + 1) * 4 * M + 2 * M, ((k) + 1) * 4 * M + 3 * M

	memset(&o, 0, sizeof(o)); /* as a new stream's (calloc) */
	wsn__ovl_reset(&o, 1);
	ov_call(&c, SET(0), W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait) && wait == 0 && o.n == 1 && c.seq == 1);
	ov_call(&c, SET(1), W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait) && wait == 0 && o.n == 2);
	/* set 0 again: its dx is call 1's dx (not the call right before): wait for call 1's word */
	ov_call(&c, SET(0), W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait) && wait == 1);
	ck_assert_msg(o.n == 3 && o.c[0].seq == 1 && o.c[0].main_done, "call 1 stays for its dweight only");
	/* set 1 again: waits for call 2; call 1 is then dropped */
	ov_call(&c, SET(1), W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait) && wait == 2);
	ck_assert(o.n == 3 && o.c[0].seq == 2 && o.c[0].main_done && o.c[2].seq == 4);
	/* reads the dx of the call right before: waits at its start, alone in the record after */
	ov_call(&c, 300 * M, 10 * M, 301 * M, 302 * M, W, DW, 128);
	ck_assert(!ov_queue(&o, &c, &wait) && wait == 0 && o.n == 1 && o.c[0].seq == 5);
	/* its dx over the last byte of the x of the call right before */
	ov_call(&c, SET(3), W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait) && wait == 0 && o.n == 2);
	ov_call(&c, 310 * M, 311 * M, 16 * M + 128 * 64 * 2 - 1, 312 * M, W, DW, 128);
	ck_assert(!ov_queue(&o, &c, &wait));
	/* one byte short of it: independent */
	ov_call(&c, SET(6), W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait));
	ov_call(&c, 330 * M, 331 * M, 28 * M - 128 * 64 * 2, 320 * M, W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait) && wait == 0);
	/* reading a dweight a call still running writes (its finish kernel): waits */
	ov_call(&c, 40 * M, 41 * M, 42 * M, 43 * M, DW, 0, 1);
	ck_assert(!ov_queue(&o, &c, &wait));
	/* a call without dweight/dbias has no finish kernel and stores no number: reusing its
	 * buffers two calls later waits at the start */
	wsn__ovl_reset(&o, 1);
	ov_call(&c, SET(0), W, 0, 128);
	ck_assert(ov_queue(&o, &c, &wait) && !c.publishes);
	ov_call(&c, SET(1), W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait));
	ov_call(&c, SET(0), W, DW, 128);
	ck_assert(!ov_queue(&o, &c, &wait) && o.n == 1);
	/* other work queued: unknown, the next call waits */
	wsn__ovl_reset(&o, 0);
	ov_call(&c, SET(2), W, DW, 128);
	ck_assert(!ov_queue(&o, &c, &wait) && o.known && o.n == 1);
	/* the record holds WSN__OVL_DEPTH calls at most */
	for (int k = 1; k < WSN__OVL_DEPTH; k++) {
		ov_call(&c, 100 * M + SET(k), W, DW, 128);
		ck_assert(ov_queue(&o, &c, &wait));
	}
	ck_assert_int_eq(o.n, WSN__OVL_DEPTH);
	ov_call(&c, 200 * M, 201 * M, 202 * M, 203 * M, W, DW, 128);
	ck_assert(!ov_queue(&o, &c, &wait) && o.n == 1);
#undef SET
}
END_TEST

Suite *suite_core(void)
{
	Suite *s = suite_create("core");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_error_table);
	tcase_add_test(tc, test_text_escape);
	tcase_add_test(tc, test_dtype_parse);
	tcase_add_test(tc, test_f16_roundtrip_all);
	tcase_add_test(tc, test_narrowing_rounds_to_nearest);
	tcase_add_test(tc, test_random_fill_deterministic);
	tcase_add_test(tc, test_compare_and_poison);
	tcase_add_test(tc, test_devices);
	tcase_add_test(tc, test_device_spec_parse);
	tcase_add_test(tc, test_op_names);
	tcase_add_test(tc, test_plan_argument_errors);
	tcase_add_test(tc, test_plan_flatten_unit_dims);
	tcase_add_test(tc, test_api_integer_edges);
	tcase_add_test(tc, test_plan_options_autotune);
	tcase_add_test(tc, test_tune_rows_class);
	tcase_add_test(tc, test_tune_cache_roundtrip);
	tcase_add_test(tc, test_tune_cache_concurrent);
	tcase_add_test(tc, test_cpu_memory_limit);
	tcase_add_test(tc, test_overlap_decisions);
	suite_add_tcase(s, tc);
	return s;
}
