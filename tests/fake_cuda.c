/* SPDX-License-Identifier: MIT */
/*
 * tests/fake_cuda.c: a fake NVIDIA driver, built as a module that make check installs as
 * libcuda.so.1 in a temporary directory, so that the CUDA backend's host side runs on a machine
 * without a GPU.
 *
 * It serves every entry point of WSN_CU_FUNCS through cuGetProcAddress_v2 and models H100-like
 * devices: primary contexts and a current context per thread, device memory (host memory, so
 * copies and memsets really move bytes, bounds checked), pinned ranges, modules whose kernels are
 * the .entry names of their PTX, streams and events (with a modelled clock, so timings are
 * positive). Kernels are not executed: launches are checked and counted. What a real driver would
 * refuse is refused with its CUresult; what only a broken caller does (a call that needs a context
 * made with none of the device's primary contexts current, or with another device's stream or
 * kernel; an unknown or released handle; a copy outside an allocation) is also printed as
 * "fake-cuda: BUG: ..." and counted.
 *
 * Environment:
 *   WSNORM_FAKE_CUDA_DEVICES=N       devices (default 1, at most 8)
 *   WSNORM_FAKE_CUDA_FAIL=NAME:NTH:CODE[,...]
 *                                    the NTH call of entry point NAME (counted from 1 over the
 *                                    process; 0: every call) returns CODE (a CUresult name or number)
 *   WSNORM_FAKE_CUDA_STICKY=N[:CODE] the Nth kernel launch faults: it returns CUDA_SUCCESS, then
 *                                    every call in its device's context fails with CODE (default
 *                                    CUDA_ERROR_ILLEGAL_ADDRESS) until the primary context is released
 *   WSNORM_FAKE_CUDA_MISSING=NAME    cuGetProcAddress_v2 does not find NAME
 *   WSNORM_FAKE_CUDA_TRACE=1         at exit, also list how often each entry point was called
 *
 * A program that loads it (dlopen of libcuda.so.1 finds the same object) can also call
 * fake_cuda_app_context (a context of its own to make current), fake_cuda_fail_next and
 * fake_cuda_live.
 *
 * A call that releases something (cuMemFree, cuStreamDestroy, ...) releases it even when it fails,
 * by injection or after a fault: the caller cannot do anything else with the handle, and the counts
 * then show what it never tried to release. At exit one line on stderr reports what is still live:
 *   fake-cuda: at exit: A allocations, P pinned ranges, M modules, S streams, E events,
 *   C context retains live; L launches, B bugs
 *
 * This file is what the library looks up; the entry points are in fake_cuda_device.c,
 * fake_cuda_memory.c, fake_cuda_module.c and fake_cuda_tma.c, the state they share, what a program
 * can call and the exit report in fake_cuda_state.c, with fake_cuda.h between them.
 */
#include "fake_cuda.h"

#include <stddef.h>
#include <string.h>

/* ---- what the library looks up ---- */

/* The fakes in the library's own driver table, so each is checked against the prototype cuda_abi.h
 * gives the variant the backend asks for. */
static const struct wsn__cu_api fakes = {
#define FAKE(name, version, params) .name = fake_##name,
	WSN_CU_FUNCS(FAKE)
#undef FAKE
};

static const struct {
	const char *name;
	size_t offset;
} table[] = {
#define ENTRY(name, version, params) { #name, offsetof(struct wsn__cu_api, name) },
	WSN_CU_FUNCS(ENTRY)
#undef ENTRY
};

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
					 CUdriverProcAddressQueryResult *status);
FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
					 CUdriverProcAddressQueryResult *status)
{
	fake__load_env();
	(void)flags;
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	if (strcmp(symbol, fake__missing))
		for (size_t i = 0; i < WSN_ARRAY_SIZE(table); i++)
			if (!strcmp(table[i].name, symbol)) {
				if (version < 12000) {
					if (status)
						*status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
					return CUDA_ERROR_NOT_FOUND;
				}
				memcpy(pfn, (const char *)&fakes + table[i].offset, sizeof(*pfn));
				if (status)
					*status = CU_GET_PROC_ADDRESS_SUCCESS;
				return CUDA_SUCCESS;
			}
	return CUDA_ERROR_NOT_FOUND;
}
