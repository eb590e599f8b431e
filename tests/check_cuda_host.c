/* SPDX-License-Identifier: MIT */
/* tests/check_cuda_host.c: the CUDA backend's checks that need no GPU: TMA rules, the loader without a driver, error translation. */
#include "testutil.h"
#include "cuda/cuda_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* A valid 2-D bf16 descriptor: 256 rows of 1024 elements, 64 x 64 boxes, 128-byte swizzle. */
static void valid_desc(struct wsn__tma_desc *d)
{
	memset(d, 0, sizeof(*d));
	d->dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
	d->rank = 2;
	d->global = (const void *)(uintptr_t)0x7f0000000000ull;
	d->dims[0] = 1024;
	d->dims[1] = 256;
	d->strides[0] = 2048;
	d->box[0] = 64;
	d->box[1] = 64;
	d->elem_strides[0] = d->elem_strides[1] = 1;
	d->swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
}

START_TEST(test_tma_valid)
{
	struct wsn__tma_desc d;

	valid_desc(&d);
	ck_assert_msg(wsn__tma_check(&d) == 0, "%s", wsn_last_error());
	d.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
	d.box[0] = 256; /* 512 inner bytes: fine without a swizzle */
	ck_assert_msg(wsn__tma_check(&d) == 0, "%s", wsn_last_error());
	d.rank = 5;
	for (int i = 2; i < 5; i++) {
		d.dims[i] = 3;
		d.box[i] = 1;
		d.elem_strides[i] = 1;
	}
	d.strides[1] = 2048 * 256;
	d.strides[2] = 2048 * 256 * 3;
	d.strides[3] = 2048 * 256 * 9;
	ck_assert_msg(wsn__tma_check(&d) == 0, "%s", wsn_last_error());
	d.rank = 1;
	d.dims[0] = (uint64_t)1 << 32;
	ck_assert_msg(wsn__tma_check(&d) == 0, "%s", wsn_last_error());
	ck_assert_int_eq(wsn__tma_elem_size(CU_TENSOR_MAP_DATA_TYPE_FLOAT32), 4);
	ck_assert_int_eq(wsn__tma_elem_size(CU_TENSOR_MAP_DATA_TYPE_FLOAT16), 2);
	ck_assert_int_eq(wsn__tma_elem_size(CU_TENSOR_MAP_DATA_TYPE_FLOAT64), 8);
}
END_TEST

/* One broken rule per case: WSN_ETMA, and the message names the rule. */
#define EXPECT_RULE(stmt, words)                                                                          \
	do {                                                                                              \
		struct wsn__tma_desc bad;                                                                 \
		int e_;                                                                                   \
		valid_desc(&bad);                                                                         \
		stmt;                                                                                     \
		e_ = wsn__tma_check(&bad);                                                                \
		ck_assert_msg(e_ == WSN_ETMA, "%s: got %s: %s", #stmt, wsn_err_name(e_), wsn_last_error()); \
		ck_assert_msg(strstr(wsn_last_error(), words), "%s: message '%s' lacks '%s'", #stmt,      \
			      wsn_last_error(), words);                                                   \
	} while (0)

START_TEST(test_tma_rules)
{
	EXPECT_RULE(bad.rank = 0, "rank 1..5");
	EXPECT_RULE(bad.rank = 6, "rank 1..5");
	EXPECT_RULE(bad.global = NULL, "NULL");
	EXPECT_RULE(bad.global = (const char *)bad.global + 8, "16-byte aligned");
	EXPECT_RULE(bad.global = (const char *)bad.global + 1, "16-byte aligned");
	EXPECT_RULE(bad.dims[0] = 0, "global dimension 1..2^32");
	EXPECT_RULE(bad.dims[1] = ((uint64_t)1 << 32) + 1, "global dimension 1..2^32");
	EXPECT_RULE(bad.strides[0] = 2040, "multiples of 16");
	EXPECT_RULE(bad.strides[0] = (uint64_t)1 << 40, "below 2^40");
	EXPECT_RULE(bad.box[0] = 0, "box dimensions 1..256");
	EXPECT_RULE(bad.box[1] = 257, "box dimensions 1..256");
	EXPECT_RULE((bad.box[0] = 12, bad.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE), "inner box bytes a multiple of 16");
	EXPECT_RULE(bad.elem_strides[0] = 0, "element strides 1..8");
	EXPECT_RULE(bad.elem_strides[1] = 9, "element strides 1..8");
	EXPECT_RULE(bad.swizzle = CU_TENSOR_MAP_SWIZZLE_32B, "inner box bytes <= swizzle span");
	EXPECT_RULE(bad.swizzle = CU_TENSOR_MAP_SWIZZLE_64B, "inner box bytes <= swizzle span");
	EXPECT_RULE(bad.box[0] = 128, "inner box bytes <= swizzle span");
	EXPECT_RULE(bad.swizzle = (CUtensorMapSwizzle)99, "not a CUtensorMapSwizzle");
	EXPECT_RULE(bad.dtype = (CUtensorMapDataType)99, "dtype");
	EXPECT_RULE(bad.interleave = CU_TENSOR_MAP_INTERLEAVE_16B, "rank >= 3");
	EXPECT_RULE((bad.rank = 3, bad.dims[2] = 1, bad.box[2] = 1, bad.elem_strides[2] = 1, bad.strides[1] = 2048 * 256,
		     bad.interleave = CU_TENSOR_MAP_INTERLEAVE_32B, bad.global = (const char *)bad.global + 16),
		    "32-byte aligned");
	EXPECT_RULE((bad.rank = 3, bad.dims[2] = 1, bad.box[2] = 1, bad.elem_strides[2] = 1, bad.strides[1] = 2048 * 256,
		     bad.interleave = CU_TENSOR_MAP_INTERLEAVE_32B), "32B interleave requires 32B swizzle");
	EXPECT_RULE((bad.dtype = CU_TENSOR_MAP_DATA_TYPE_INT32, bad.box[0] = 32,
		     bad.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA), "floating-point");
}
END_TEST

/* The rules are checked before the driver is needed: a bad descriptor is WSN_ETMA even with no driver. */
START_TEST(test_tma_encode_checks_first)
{
	CUtensorMap map __attribute__((aligned(64)));
	struct wsn__tma_desc d;

	valid_desc(&d);
	d.strides[0] = 2050;
	ck_assert_int_eq(wsn__tma_encode(&map, &d), WSN_ETMA);
	ck_assert(strstr(wsn_last_error(), "multiples of 16"));
	valid_desc(&d);
	ck_assert_int_eq(wsn__tma_encode((CUtensorMap *)((char *)&map + 8), &d), WSN_EINVAL);
}
END_TEST

START_TEST(test_loader_missing_library)
{
	struct wsn__cu_api api;
	int e = wsn__cu_open_library("libwsnorm-no-such-driver.so.1", &api);

	ck_assert_int_eq(e, WSN_ENODRIVER);
	ck_assert_msg(strstr(wsn_last_error(), "no NVIDIA driver: libwsnorm-no-such-driver.so.1: cannot open shared object file"),
		      "%s", wsn_last_error());
	ck_assert(api.lib == NULL && api.cuInit == NULL);
}
END_TEST

START_TEST(test_loader_not_a_driver)
{
	struct wsn__cu_api api;
	int e = wsn__cu_open_library("libc.so.6", &api);

	ck_assert_int_eq(e, WSN_ENODRIVER);
	ck_assert_msg(strstr(wsn_last_error(), "has no cuGetProcAddress_v2"), "%s", wsn_last_error());
	ck_assert(api.lib == NULL);
}
END_TEST

/* With no libcuda.so.1 on the machine, the backend is listed as unavailable with the dlopen reason. */
START_TEST(test_no_driver_backend)
{
	struct wsn_backend_info bi;
	struct wsn_device *d = NULL;
	void *h = dlopen(WSN_CU_LIBRARY, RTLD_NOW | RTLD_LOCAL);
	int found = 0;

	if (h) {
		dlclose(h);
		printf("test_no_driver_backend: %s is present here; nothing to check\n", WSN_CU_LIBRARY);
		return;
	}
	for (int i = 0; i < wsn_backend_count(); i++) {
		ck_assert_int_eq(wsn_backend_info(i, &bi), 0);
		if (strcmp(bi.name, "cuda"))
			continue;
		found = 1;
		ck_assert(bi.built);
		ck_assert(!bi.available);
		ck_assert_int_eq(bi.device_count, 0);
		ck_assert_msg(strstr(bi.note, "no NVIDIA driver: libcuda.so.1: cannot open shared object file"), "%s",
			      bi.note);
	}
	ck_assert(found);
	ck_assert_int_eq(wsn_device_open("cuda:0", &d), WSN_ENODRIVER);
	ck_assert(strstr(wsn_last_error(), "no NVIDIA driver"));
	ck_assert_int_eq(wsn__cu_load(), WSN_ENODRIVER);
	/* the rest still works */
	ck_assert_int_eq(wsn_device_open("cpu", &d), 0);
	wsn_device_close(d);
}
END_TEST

START_TEST(test_error_translation)
{
	static const struct {
		CUresult r;
		int err;
		const char *name;
	} cases[] = {
		{ CUDA_ERROR_OUT_OF_MEMORY, WSN_ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY" },
		{ CUDA_ERROR_ILLEGAL_ADDRESS, WSN_ELAUNCH, "CUDA_ERROR_ILLEGAL_ADDRESS" },
		{ CUDA_ERROR_LAUNCH_FAILED, WSN_ELAUNCH, "CUDA_ERROR_LAUNCH_FAILED" },
		{ CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, WSN_ELAUNCH, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" },
		{ CUDA_ERROR_MISALIGNED_ADDRESS, WSN_ELAUNCH, "CUDA_ERROR_MISALIGNED_ADDRESS" },
		{ CUDA_ERROR_INVALID_PTX, WSN_EJIT, "CUDA_ERROR_INVALID_PTX" },
		{ CUDA_ERROR_NO_BINARY_FOR_GPU, WSN_EJIT, "CUDA_ERROR_NO_BINARY_FOR_GPU" },
		{ CUDA_ERROR_UNSUPPORTED_PTX_VERSION, WSN_EJIT, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" },
		{ CUDA_ERROR_INVALID_VALUE, WSN_EDRIVER, "CUDA_ERROR_INVALID_VALUE" },
		{ CUDA_ERROR_INVALID_CONTEXT, WSN_EDRIVER, "CUDA_ERROR_INVALID_CONTEXT" },
		{ CUDA_ERROR_NO_DEVICE, WSN_ENODEV, "CUDA_ERROR_NO_DEVICE" },
	};

	ck_assert_int_eq(wsn__cu_result(CUDA_SUCCESS, "cuMemAlloc", "nothing"), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *name = NULL;
		char want[128];
		int code = 0;

		ck_assert_int_eq(wsn__cu_code(cases[i].r), cases[i].err);
		ck_assert_int_eq(wsn__cu_result(cases[i].r, "cuMemAlloc", "allocating %d bytes", 64), cases[i].err);
		snprintf(want, sizeof(want), "cuMemAlloc(): %s (%d): ", cases[i].name, (int)cases[i].r);
		ck_assert_msg(strstr(wsn_last_error(), want) == wsn_last_error(), "'%s' does not start with '%s'",
			      wsn_last_error(), want);
		ck_assert_msg(strstr(wsn_last_error(), ", while allocating 64 bytes"), "%s", wsn_last_error());
		ck_assert_int_eq(wsn_last_driver_status(&code, &name), 0);
		ck_assert_int_eq(code, (int)cases[i].r);
		ck_assert_str_eq(name, cases[i].name);
	}
	/* launches report every failure but out-of-memory as WSN_ELAUNCH */
	ck_assert_int_eq(wsn__cu_result_as(WSN_ELAUNCH, CUDA_ERROR_INVALID_VALUE, "cuLaunchKernelEx", "launching k"),
			 WSN_ELAUNCH);
	ck_assert(strstr(wsn_last_error(), "cuLaunchKernelEx(): CUDA_ERROR_INVALID_VALUE"));
	ck_assert_int_eq(wsn__cu_result_as(WSN_ELAUNCH, CUDA_ERROR_OUT_OF_MEMORY, "cuLaunchKernelEx", "launching k"),
			 WSN_ENOMEM);
	ck_assert_str_eq(wsn__cu_error_name((CUresult)123456), "CUDA_ERROR_UNRECOGNIZED");
}
END_TEST

Suite *suite_cuda_host(void)
{
	return TU_SUITE("cuda_host", { "tma", 0, NULL, NULL, TU_TESTS({ test_tma_valid, 1 }, { test_tma_rules, 1 },
				{ test_tma_encode_checks_first, 1 }) },
			{ "loader", 0, NULL, NULL, TU_TESTS({ test_loader_missing_library, 1 }, { test_loader_not_a_driver, 1 },
				{ test_no_driver_backend, 1 }, { test_error_translation, 1 }) });
}
