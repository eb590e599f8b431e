/* SPDX-License-Identifier: MIT */
/* tests/fake_cuda_device.c: the fake driver's initialisation, devices and contexts. */
#include "fake_cuda.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- initialisation, devices ---- */

/* A device string into the caller's buffer of len bytes, cut to fit as the driver does; no buffer is
 * CUDA_ERROR_INVALID_VALUE. */
static CUresult device_string(char *buf, int len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static CUresult device_string(char *buf, int len, const char *fmt, ...)
{
	va_list ap;

	if (!buf || len < 1)
		return CUDA_ERROR_INVALID_VALUE;
	va_start(ap, fmt);
	vsnprintf(buf, (size_t)len, fmt, ap);
	va_end(ap);
	return CUDA_SUCCESS;
}

CUresult fake_cuInit(unsigned flags)
{
	BEGIN_ANY(E_cuInit);
	if (flags)
		return fake__leave(CUDA_ERROR_INVALID_VALUE);
	if (!fake__ndev)
		return fake__leave(CUDA_ERROR_NO_DEVICE);
	fake__initialised = 1;
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuDriverGetVersion(int *v)
{
	BEGIN_ANY(E_cuDriverGetVersion);
	*v = 13000;
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuDeviceGetCount(int *n)
{
	BEGIN(cuDeviceGetCount);
	*n = fake__ndev;
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuDeviceGet(CUdevice *d, int i)
{
	BEGIN_DEVICE(cuDeviceGet, i);
	*d = i;
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuDeviceGetName(char *buf, int len, CUdevice d)
{
	BEGIN_DEVICE(cuDeviceGetName, d);
	return fake__leave(device_string(buf, len, "NVIDIA H100 80GB HBM3 (fake)"));
}

CUresult fake_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
	BEGIN_DEVICE(cuDeviceGetAttribute, d);
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = SMS; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = SMEM_OPTIN; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = SMEM_PER_SM; break;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *v = 65536; break;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *v = 65536; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
	case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 50 << 20; break;
	case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 5120; break;
	case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break;
	case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *v = 1; break;
	default: return fake__leave(CUDA_ERROR_INVALID_VALUE);
	}
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuDeviceTotalMem(size_t *bytes, CUdevice d)
{
	BEGIN_DEVICE(cuDeviceTotalMem, d);
	*bytes = TOTAL_MEM;
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuDeviceGetPCIBusId(char *buf, int len, CUdevice d)
{
	BEGIN_DEVICE(cuDeviceGetPCIBusId, d);
	/* no such bus here: no sysfs link found */
	return fake__leave(device_string(buf, len, "00000000:%02X:00.0", 0xf0 + d));
}

/* ---- contexts ---- */

CUresult fake_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
	BEGIN_DEVICE(cuDevicePrimaryCtxRetain, d);
	fake__contexts[d].retains++;
	*c = (CUcontext)&fake__contexts[d];
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuDevicePrimaryCtxRelease(CUdevice d)
{
	CUresult r = fake__enter(E_cuDevicePrimaryCtxRelease);

	if (d < 0 || d >= fake__ndev)
		return fake__leave(CUDA_ERROR_INVALID_DEVICE);
	if (fake__contexts[d].retains < 1) {
		fake__bug("cuDevicePrimaryCtxRelease of device %d, which is not retained", d);
		return fake__leave(CUDA_ERROR_INVALID_CONTEXT);
	}
	if (!--fake__contexts[d].retains)
		fake__contexts[d].fault = CUDA_SUCCESS; /* the context is destroyed; a retain makes a fresh one */
	return fake__leave(r);
}

CUresult fake_cuCtxGetCurrent(CUcontext *c)
{
	BEGIN(cuCtxGetCurrent);
	*c = (CUcontext)fake__current;
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuCtxSetCurrent(CUcontext c)
{
	struct context *k = (struct context *)c;
	int known = !k || k == &fake__app_context;

	BEGIN(cuCtxSetCurrent);
	for (int i = 0; i < fake__ndev && !known; i++)
		known = k == &fake__contexts[i];
	if (!known) {
		fake__bug("cuCtxSetCurrent of unknown context %p", (void *)c);
		return fake__leave(CUDA_ERROR_INVALID_CONTEXT);
	}
	fake__current = k;
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuCtxSynchronize(void)
{
	struct context *c;
	CUresult r;

	BEGIN(cuCtxSynchronize);
	r = fake__need_context("cuCtxSynchronize", &c);
	return fake__leave(r);
}

