/* SPDX-License-Identifier: MIT */
/* tests/check_core_dtype.c: dtype names, half-precision conversions, random fills, compare and poison. */
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

Suite *suite_core_dtype(void)
{
	return TU_SUITE("core", { "core", 0, NULL, NULL, TU_TESTS({ test_dtype_parse, 1 }, { test_f16_roundtrip_all, 1 },
				{ test_narrowing_rounds_to_nearest, 1 }, { test_random_fill_deterministic, 1 },
				{ test_compare_and_poison, 1 }) });
}
