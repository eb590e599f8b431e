/* SPDX-License-Identifier: MIT */
/* tests/check_core_device.c: device listing, device specs and the CPU backend's memory limit. */
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

Suite *suite_core_device(void)
{
	return TU_SUITE("core", { "core", 0, NULL, NULL, TU_TESTS({ test_devices, 1 }, { test_device_spec_parse, 1 },
				{ test_cpu_memory_limit, 1 }) });
}
