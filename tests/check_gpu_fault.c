/* SPDX-License-Identifier: MIT */
/* tests/check_gpu_fault.c: an illegal address on a real GPU; its suite runs last since it poisons the context. */
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

/*
 * A bad tensor pointer faults in the kernel: the error surfaces as WSN_ELAUNCH with
 * CUDA_ERROR_ILLEGAL_ADDRESS, and every later call fails cleanly instead of hanging. The context is
 * lost afterwards, so this runs last (and in its own process when Check forks, the default).
 */
START_TEST(test_illegal_address)
{
	struct wsn_plan *p;
	struct wsn_args a;
	void *y = gpu_dalloc(64 * 1024 * 4), *again = NULL;
	int e;

	OK(wsn_plan_create(gpu_dev, WSN_RMSNORM_FWD, 64, 1024, WSN_F32, NULL, &p));
	memset(&a, 0, sizeof(a));
	OK(wsn_tensor_2d(&a.x, (void *)(uintptr_t)0x10000, WSN_F32, WSN_MEM_DEVICE, 64, 1024));
	OK(wsn_tensor_2d(&a.y, y, WSN_F32, WSN_MEM_DEVICE, 64, 1024));
	OK(wsn_tensor_1d(&a.weight, y, WSN_F32, WSN_MEM_DEVICE, 1024));
	e = wsn_plan_execute(p, &a, NULL);
	if (e == 0)
		e = wsn_stream_sync(gpu_dev, NULL);
	printf("illegal address: %s\n", wsn_last_error());
	ck_assert_int_eq(e, WSN_ELAUNCH);
	ck_assert(strstr(wsn_last_error(), "CUDA_ERROR_ILLEGAL_ADDRESS"));
	/* sticky: later calls fail with a named error, and do not hang */
	e = wsn_mem_alloc(gpu_dev, 1024, &again);
	printf("after the fault, allocation: %s: %s\n", wsn_err_name(e), wsn_last_error());
	ck_assert_int_lt(e, 0);
	ck_assert_int_lt(wsn_stream_sync(gpu_dev, NULL), 0);
	ck_assert_int_lt(wsn_plan_execute(p, &a, NULL) < 0 ? -1 : wsn_stream_sync(gpu_dev, NULL), 0);
	wsn_plan_destroy(p);
	wsn_mem_free(gpu_dev, y);
}
END_TEST

Suite *suite_gpu_fault(void)
{
	/* fault runs last: it poisons the context */
	return TU_SUITE("gpu", { "fault", 60, gpu_setup, gpu_teardown, TU_TESTS({ test_illegal_address, 1 }) });
}
