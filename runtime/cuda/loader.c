/* SPDX-License-Identifier: MIT */
/* runtime/cuda/loader.c: loads libcuda.so.1 at run time, resolves the driver table, and translates CUresults. */
#include "cuda/cuda_internal.h"
#include "core/error.h"
#include "core/util.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct wsn__cu_api wsn__cu;

/* One entry of the resolution table: base name, ABI version, where the pointer goes. */
struct sym {
	const char *name;
	int version;
	size_t offset;
};

static const struct sym syms[] = {
#define SYM(name, version, params) { #name, version, offsetof(struct wsn__cu_api, name) },
	WSN_CU_FUNCS(SYM)
#undef SYM
};

static const char *query_status_name(CUdriverProcAddressQueryResult s)
{
	switch (s) {
	case CU_GET_PROC_ADDRESS_SUCCESS: return "found";
	case CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND: return "symbol not found";
	case CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT: return "driver older than the version asked for";
	default: return "unknown status";
	}
}

int wsn__cu_open_library(const char *path, struct wsn__cu_api *api)
{
	wsn__cu_pfn_cuGetProcAddress get_proc;
	void *lib, *p;
	int err;

	memset(api, 0, sizeof(*api));
	dlerror();
	if (!(lib = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
		const char *why = dlerror();
		return wsn__error(WSN_ENODRIVER, "no NVIDIA driver: %s", why ? why : path);
	}
	/* The only symbol looked up by name: every other one comes through it, with its version. */
	if (!(p = dlsym(lib, "cuGetProcAddress_v2"))) {
		err = wsn__error(WSN_ENODRIVER,
				 "no usable NVIDIA driver: %s has no cuGetProcAddress_v2 (a CUDA 12.0 or newer driver is needed)",
				 path);
		goto err;
	}
	memcpy(&get_proc, &p, sizeof(p));
	for (size_t i = 0; i < WSN_ARRAY_SIZE(syms); i++) {
		CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		void *fn = NULL;
		CUresult r = get_proc(syms[i].name, &fn, syms[i].version, CU_GET_PROC_ADDRESS_DEFAULT, &status);

		if (r != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || !fn) {
			err = wsn__error(WSN_ENODRIVER,
					 "NVIDIA driver %s lacks %s for CUDA %d.%d (cuGetProcAddress_v2: result %d, %s)",
					 path, syms[i].name, syms[i].version / 1000, syms[i].version % 1000 / 10, (int)r,
					 query_status_name(status));
			goto err;
		}
		memcpy((char *)api + syms[i].offset, &fn, sizeof(fn));
	}
	api->lib = lib;
	return 0;
err:
	memset(api, 0, sizeof(*api));
	dlclose(lib);
	return err;
}

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_result;
static char load_message[512];

static void load(void)
{
	struct wsn__cu_api api;
	CUresult r;
	int err;

	if ((err = wsn__cu_open_library(WSN_CU_LIBRARY, &api)) < 0)
		goto err;
	wsn__cu = api;
	r = wsn__cu.cuInit(0);
	if (r != CUDA_SUCCESS) {
		err = wsn__cu_result(r, "cuInit", "initialising the NVIDIA driver");
		if (r == CUDA_ERROR_NO_DEVICE)
			wsn__error_context(err, "no NVIDIA GPU");
		goto err;
	}
	if ((err = WSN_CU(cuDriverGetVersion, (&wsn__cu.driver_version), "reading the driver version")) < 0)
		goto err;
	load_result = 0;
	return;
err:
	snprintf(load_message, sizeof(load_message), "%s", wsn_last_error());
	load_result = err;
}

int wsn__cu_load(void)
{
	pthread_once(&load_once, load);
	if (load_result < 0)
		return wsn__error(load_result, "%s", load_message);
	return 0;
}

/* ---- error translation ---- */

/* for when the driver cannot be asked (not loaded, or it does not know the code) */
static const struct wsn__cu_error_entry builtin[] = { WSN_CU_ERRORS(WSN_CU_ERROR_ENTRY) };

const char *wsn__cu_error_name(CUresult r)
{
	const char *s = NULL;

	if (wsn__cu.cuGetErrorName && wsn__cu.cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
		return s;
	for (size_t i = 0; i < WSN_ARRAY_SIZE(builtin); i++)
		if (builtin[i].code == r)
			return builtin[i].name;
	return "CUDA_ERROR_UNRECOGNIZED";
}

static const char *error_text(CUresult r)
{
	const char *s = NULL;

	if (wsn__cu.cuGetErrorString && wsn__cu.cuGetErrorString(r, &s) == CUDA_SUCCESS && s)
		return s;
	for (size_t i = 0; i < WSN_ARRAY_SIZE(builtin); i++)
		if (builtin[i].code == r)
			return builtin[i].text;
	return "unrecognized error code";
}

int wsn__cu_code(CUresult r)
{
	switch (r) {
	case CUDA_SUCCESS:
		return 0;
	case CUDA_ERROR_OUT_OF_MEMORY:
		return WSN_ENOMEM;
	case CUDA_ERROR_NO_DEVICE:
	case CUDA_ERROR_INVALID_DEVICE:
		return WSN_ENODEV;
	/* a kernel faulted or could not start; the faults are sticky: the context is lost */
	case CUDA_ERROR_ILLEGAL_ADDRESS:
	case CUDA_ERROR_LAUNCH_FAILED:
	case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
	case CUDA_ERROR_LAUNCH_TIMEOUT:
	case CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING:
	case CUDA_ERROR_HARDWARE_STACK_ERROR:
	case CUDA_ERROR_ILLEGAL_INSTRUCTION:
	case CUDA_ERROR_MISALIGNED_ADDRESS:
	case CUDA_ERROR_INVALID_ADDRESS_SPACE:
	case CUDA_ERROR_INVALID_PC:
	case CUDA_ERROR_ASSERT:
	case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
		return WSN_ELAUNCH;
	/* PTX could not be compiled or loaded */
	case CUDA_ERROR_INVALID_PTX:
	case CUDA_ERROR_INVALID_IMAGE:
	case CUDA_ERROR_NO_BINARY_FOR_GPU:
	case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
	case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
	case CUDA_ERROR_JIT_COMPILATION_DISABLED:
	case CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND:
	case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:
		return WSN_EJIT;
	default:
		return WSN_EDRIVER;
	}
}

static int report(int err, CUresult r, const char *call, const char *fmt, va_list ap)
{
	char what[1024];
	const char *name = wsn__cu_error_name(r);

	vsnprintf(what, sizeof(what), fmt, ap);
	return wsn__driver_error(err, (int)r, name, "%s(): %s (%d): %s, while %s", call, name, (int)r, error_text(r),
				 what);
}

int wsn__cu_result(CUresult r, const char *call, const char *fmt, ...)
{
	va_list ap;
	int err;

	if (r == CUDA_SUCCESS)
		return 0;
	va_start(ap, fmt);
	err = report(wsn__cu_code(r), r, call, fmt, ap);
	va_end(ap);
	return err;
}

int wsn__cu_result_as(int err, CUresult r, const char *call, const char *fmt, ...)
{
	va_list ap;
	int code;

	if (r == CUDA_SUCCESS)
		return 0;
	code = wsn__cu_code(r);
	if (code != WSN_ENOMEM)
		code = err;
	va_start(ap, fmt);
	code = report(code, r, call, fmt, ap);
	va_end(ap);
	return code;
}
