/* SPDX-License-Identifier: MIT */
/* tests/check_gpu_device.c: a real GPU's device info, pinned memory, tensor maps, descriptions and launch errors. */
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

START_TEST(test_device_info)
{
	struct wsn_device_info di;
	struct wsn_backend_info bi;

	OK(wsn_device_info(gpu_dev, &di));
	printf("%s: %s %s, %d SMs, %.1f GiB, opt-in smem %d, smem/SM %d, regs/SM %d, L2 %lld, mem %d kHz x %d bit = %.0f GB/s, "
	       "PCIe gen %d x%d at %s, clusters %d, driver %d\n",
	       di.spec, di.name, di.arch, di.multiprocessors, (double)di.total_mem / (1 << 30), di.smem_per_block_optin,
	       di.smem_per_sm, di.regs_per_sm, (long long)di.l2_bytes, di.mem_clock_khz, di.mem_bus_width,
	       di.mem_peak_gbs, di.pcie_gen, di.pcie_width, di.pci_bus_id, di.cluster_launch, di.driver_version);
	ck_assert_str_eq(di.backend, "cuda");
	ck_assert(di.name[0]);
	ck_assert_int_ge(di.cc_major, 1);
	ck_assert_int_gt(di.multiprocessors, 0);
	ck_assert_int_gt(di.total_mem, 0);
	ck_assert_int_gt(di.smem_per_block_optin, 48 * 1024 - 1);
	ck_assert_int_gt(di.regs_per_sm, 0);
	ck_assert_int_gt(di.l2_bytes, 0);
	ck_assert_int_gt(di.mem_bus_width, 0);
	ck_assert_int_ge(di.driver_version, 12000);
	ck_assert(di.pci_bus_id[0]);
	for (int i = 0; i < wsn_backend_count(); i++) {
		OK(wsn_backend_info(i, &bi));
		if (!strcmp(bi.name, "cuda")) {
			printf("cuda backend: %s\n", bi.note);
			ck_assert(bi.available);
			ck_assert_int_ge(bi.device_count, 1);
		}
	}
}
END_TEST

/* Pinned memory, async copies on two streams ordered by an event, and event timing. */
START_TEST(test_pinned_async)
{
	static const size_t sizes[] = { 4096 + 16, 3u << 20, 64u << 20 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		struct wsn_stream *s1, *s2;
		struct wsn_event *e0, *e1, *e2;
		unsigned char *h1, *h2, *page;
		void *d1, *d2;
		float ms = -1;

		OK(wsn_host_alloc(gpu_dev, n, (void **)&h1));
		OK(wsn_host_alloc(gpu_dev, n, (void **)&h2));
		for (size_t k = 0; k < n; k++)
			h1[k] = (unsigned char)(k * 131 + i);
		memset(h2, 0, n);
		d1 = gpu_dalloc(n);
		d2 = gpu_dalloc(n);
		OK(wsn_stream_create(gpu_dev, &s1));
		OK(wsn_stream_create(gpu_dev, &s2));
		OK(wsn_event_create(gpu_dev, &e0));
		OK(wsn_event_create(gpu_dev, &e1));
		OK(wsn_event_create(gpu_dev, &e2));
		OK(wsn_event_record(e0, s1));
		OK(wsn_memcpy(gpu_dev, d1, h1, n, WSN_COPY_H2D, s1));
		OK(wsn_memcpy(gpu_dev, d2, d1, n, WSN_COPY_D2D, s1));
		OK(wsn_event_record(e1, s1));
		OK(wsn_stream_wait_event(s2, e1));
		OK(wsn_memcpy(gpu_dev, h2, d2, n, WSN_COPY_D2H, s2));
		OK(wsn_event_record(e2, s2));
		OK(wsn_event_sync(e2));
		ck_assert_msg(!memcmp(h1, h2, n), "async round trip of %zu bytes differs", n);
		OK(wsn_event_elapsed(e0, e1, &ms));
		ck_assert_msg(ms >= 0 && ms < 10000, "elapsed %g ms", (double)ms);
		printf("pinned %zu bytes: H2D + D2D in %.3f ms\n", n, (double)ms);
		/* a hold of 3 ms: the event behind it is not done right after it is queued, and the two
		 * events around it lie 3 ms or more apart (after a first hold that loads its kernel: on a
		 * fresh machine the JIT took 130 ms, which the GPU would spend between the events) */
		OK(wsn_stream_hold(s1, 1000));
		OK(wsn_stream_sync(gpu_dev, s1));
		OK(wsn_event_record(e0, s1));
		OK(wsn_stream_hold(s1, 3000000));
		OK(wsn_event_record(e1, s1));
		ck_assert_int_eq(wsn_event_query(e1), 0);
		OK(wsn_event_sync(e1));
		ck_assert_int_eq(wsn_event_query(e1), 1);
		OK(wsn_event_elapsed(e0, e1, &ms));
		ck_assert_msg(ms >= 2.99f && ms < 100.0f, "a 3 ms hold measured %g ms", (double)ms);
		/* synchronous copies from pageable memory, and memset */
		page = gpu_xcalloc(n);
		OK(wsn_mem_set(gpu_dev, d1, 0x5a, n, NULL));
		OK(wsn_memcpy(gpu_dev, page, d1, n, WSN_COPY_D2H, NULL));
		for (size_t k = 0; k < n; k++)
			ck_assert_msg(page[k] == 0x5a, "memset byte %zu is %d", k, page[k]);
		OK(wsn_memcpy(gpu_dev, h2, h1, n, WSN_COPY_H2H, s1));
		ck_assert(!memcmp(h1, h2, n));
		free(page);
		OK(wsn_stream_sync(gpu_dev, s1));
		OK(wsn_stream_sync(gpu_dev, NULL));
		OK(wsn_event_destroy(e0));
		OK(wsn_event_destroy(e1));
		OK(wsn_event_destroy(e2));
		OK(wsn_stream_destroy(s1));
		OK(wsn_stream_destroy(s2));
		OK(wsn_mem_free(gpu_dev, d1));
		OK(wsn_mem_free(gpu_dev, d2));
		OK(wsn_host_free(gpu_dev, h1));
		ck_assert_int_eq(wsn_host_free(gpu_dev, h1), WSN_EINVAL); /* already freed */
		OK(wsn_host_free(gpu_dev, h2));
	}
}
END_TEST

/* A 2-D bf16 descriptor encodes; each broken rule gives WSN_ETMA naming it. */
START_TEST(test_tma)
{
	struct wsn__cu_device *cd = gpu_dev->ctx;
	CUtensorMap map __attribute__((aligned(64)));
	struct wsn__tma_desc d, bad;
	char *base = gpu_dalloc(1 << 20);

	WSN_CU_SCOPE(scope);
	OK(wsn__cu_enter(cd, &scope));
	memset(&d, 0, sizeof(d));
	d.dtype = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
	d.rank = 2;
	d.global = base;
	d.dims[0] = 1024;
	d.dims[1] = 256;
	d.strides[0] = 2048;
	d.box[0] = 64;
	d.box[1] = 64;
	d.elem_strides[0] = d.elem_strides[1] = 1;
	d.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
	OK(wsn__tma_encode(&map, &d));

#define EXPECT_RULE(stmt, word)                                                                           \
	do {                                                                                              \
		int e_;                                                                                   \
		bad = d;                                                                                  \
		stmt;                                                                                     \
		e_ = wsn__tma_encode(&map, &bad);                                                         \
		ck_assert_msg(e_ == WSN_ETMA, "%s: got %s: %s", #stmt, wsn_err_name(e_), wsn_last_error()); \
		ck_assert_msg(strstr(wsn_last_error(), word), "%s: message '%s' lacks '%s'", #stmt,       \
			      wsn_last_error(), word);                                                    \
	} while (0)
	EXPECT_RULE(bad.global = base + 8, "16-byte aligned");
	EXPECT_RULE(bad.strides[0] = 2056, "multiples of 16");
	EXPECT_RULE(bad.strides[0] = (uint64_t)1 << 40, "below 2^40");
	EXPECT_RULE(bad.box[1] = 0, "box dimensions 1..256");
	EXPECT_RULE(bad.box[1] = 257, "box dimensions 1..256");
	EXPECT_RULE((bad.box[0] = 4, bad.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE), "multiple of 16");
	EXPECT_RULE(bad.rank = 0, "rank 1..5");
	EXPECT_RULE(bad.rank = 6, "rank 1..5");
	EXPECT_RULE(bad.dims[1] = 0, "global dimension 1..2^32");
	EXPECT_RULE(bad.elem_strides[1] = 9, "element strides 1..8");
	EXPECT_RULE(bad.swizzle = CU_TENSOR_MAP_SWIZZLE_32B, "swizzle span");
	EXPECT_RULE(bad.box[0] = 128, "swizzle span");
#undef EXPECT_RULE
	OK(wsn_mem_free(gpu_dev, base));
}
END_TEST

START_TEST(test_describe)
{
	struct wsn_plan *p;
	char *text;
	int n;

	OK(wsn_plan_create(gpu_dev, WSN_LAYERNORM_BWD, 4096, 4096, WSN_BF16, NULL, &p));
	n = wsn_plan_describe(p, NULL, 0);
	ck_assert_int_gt(n, 0);
	text = gpu_xcalloc((size_t)n + 1);
	ck_assert_int_eq(wsn_plan_describe(p, text, (size_t)n + 1), n);
	printf("%s", text);
	ck_assert(strstr(text, "JIT:"));
	ck_assert(strstr(text, "registers"));
	ck_assert(strstr(text, "spills"));
	free(text);
	wsn_plan_destroy(p);
}
END_TEST

/* Invalid PTX: WSN_EJIT, with the driver's error name and the JIT log in the message. */
START_TEST(test_jit_error)
{
	static const char bad[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
				  ".visible .entry broken()\n{\n\tthis_is_not_an_instruction %r0;\n\tret;\n}\n";
	struct wsn__cu_module m;
	int e;

	WSN_CU_SCOPE(scope);
	OK(wsn__cu_enter(gpu_dev->ctx, &scope));
	e = wsn__cu_module_load(&m, bad, "a deliberately broken module");
	printf("JIT error: %s\nJIT log: %s\n", wsn_last_error(), m.error_log ? m.error_log : "(none)");
	ck_assert_int_eq(e, WSN_EJIT);
	ck_assert(strstr(wsn_last_error(), "cuModuleLoadDataEx"));
	ck_assert(strstr(wsn_last_error(), "CUDA_ERROR_"));
	ck_assert(m.error_log && m.error_log[0]);
	ck_assert(strstr(wsn_last_error(), "JIT log: "));
	wsn__cu_module_unload(&m);
}
END_TEST

/* A kernel that stores 42 at its pointer argument. */
static const char store_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
				".visible .entry wsn_test_store(.param .u64 p)\n{\n"
				"\t.reg .u64 %rd<2>;\n\t.reg .u32 %r<2>;\n"
				"\tld.param.u64 %rd0, [p];\n\tmov.u32 %r0, 42;\n\tst.global.u32 [%rd0], %r0;\n\tret;\n}\n";

/* Too many threads per CTA: WSN_ELAUNCH naming cuLaunchKernelEx and the driver's error. */
START_TEST(test_launch_too_many_threads)
{
	struct wsn__cu_module m;
	struct wsn__cu_kernel k;
	uint32_t v = 0;
	void *d = gpu_dalloc(4);
	CUdeviceptr p = (CUdeviceptr)(uintptr_t)d;
	void *params[] = { &p };
	int e;

	WSN_CU_SCOPE(scope);
	OK(wsn__cu_enter(gpu_dev->ctx, &scope));
	OK(wsn__cu_module_load(&m, store_ptx, "the store test kernel"));
	OK(wsn__cu_kernel_get(&m, "wsn_test_store", 32, 0, &k));
	OK(wsn__cu_launch(&k, 1, 1, NULL, params));
	OK(wsn_stream_sync(gpu_dev, NULL));
	gpu_download(&v, d, 4);
	ck_assert_uint_eq(v, 42);
	k.block = 4096;
	e = wsn__cu_launch(&k, 1, 1, NULL, params);
	printf("too many threads: %s\n", wsn_last_error());
	ck_assert_int_eq(e, WSN_ELAUNCH);
	ck_assert(strstr(wsn_last_error(), "cuLaunchKernelEx"));
	ck_assert(strstr(wsn_last_error(), "CUDA_ERROR_"));
	/* not sticky: the device still works */
	OK(wsn_stream_sync(gpu_dev, NULL));
	OK(wsn_mem_free(gpu_dev, d));
	wsn__cu_module_unload(&m);
}
END_TEST

Suite *suite_gpu_device(void)
{
	return TU_SUITE("gpu", { "device", 120, gpu_setup, gpu_teardown, TU_TESTS({ test_device_info, 1 }, { test_pinned_async, 1 },
				{ test_tma, 1 }, { test_describe, 1 }, { test_jit_error, 1 }, { test_launch_too_many_threads, 1 }) });
}
