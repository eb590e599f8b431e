/* SPDX-License-Identifier: MIT */
/* tests/fake_cuda_module.c: the fake driver's modules, kernels, occupancy and launches. */
#include "fake_cuda.h"

#include <stdio.h>
#include <string.h>

/* ---- modules and kernels ---- */

/* Read the .version and each .entry (with its .maxntid) of NUL-terminated PTX into module o. */
static void parse_ptx(struct object *o, const char *ptx)
{
	unsigned major = 0, minor = 0;
	const char *p;

	if ((p = strstr(ptx, ".version ")) && sscanf(p, ".version %u.%u", &major, &minor) == 2)
		o->ptx_version = (int)(major * 10 + minor);
	for (p = ptx; (p = strstr(p, ".entry ")) && o->nfn < MAX_ENTRIES; p++) {
		struct entry_fn *f = &o->fn[o->nfn];
		const char *body = strchr(p, '{'), *nt = strstr(p, ".maxntid ");
		unsigned x = 1, y = 1, z = 1;

		if (sscanf(p, ".entry %127[A-Za-z0-9_$]", f->name) != 1)
			continue;
		f->max_threads = 1024;
		if (nt && (!body || nt < body) && sscanf(nt, ".maxntid %u, %u, %u", &x, &y, &z) >= 1 && x * y * z <= 1024)
			f->max_threads = (int)(x * y * z);
		f->max_dyn_smem = SMEM_DEFAULT;
		o->nfn++;
	}
}

CUresult fake_cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, CUjit_option *opts, void **vals)
{
	CUresult r = fake__enter(E_cuModuleLoadDataEx);
	char *info = NULL, *error = NULL, msg[256];
	size_t info_size = 0, error_size = 0;
	float wall_ms = 1.5f;
	struct context *c;
	struct object *o;

	if (r == CUDA_SUCCESS && !fake__initialised)
		r = CUDA_ERROR_NOT_INITIALIZED;
	if (r == CUDA_SUCCESS)
		r = fake__need_context("cuModuleLoadDataEx", &c);
	if (r == CUDA_SUCCESS && !image)
		r = CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < n; i++) {
		switch (opts[i]) {
		case CU_JIT_INFO_LOG_BUFFER: info = vals[i]; break;
		case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: info_size = (size_t)(uintptr_t)vals[i]; break;
		case CU_JIT_ERROR_LOG_BUFFER: error = vals[i]; break;
		case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: error_size = (size_t)(uintptr_t)vals[i]; break;
		default: break;
		}
	}
	/* the logs the JIT writes, their lengths (terminator included) written back into the size slots,
	 * and the compile time written over its slot as a float */
	if (r == CUDA_SUCCESS) {
		if (!(o = fake__add(K_MODULE, c->dev))) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			parse_ptx(o, image);
			*m = (CUmodule)o;
			snprintf(msg, sizeof(msg), "fake-cuda: %d kernel%s, PTX %d.%d, not compiled", o->nfn,
				 o->nfn == 1 ? "" : "s", o->ptx_version / 10, o->ptx_version % 10);
		}
	}
	if (r != CUDA_SUCCESS)
		snprintf(msg, sizeof(msg), "fake-cuda: the JIT failed with %s", fake__error_name(r));
	for (unsigned i = 0; i < n; i++) {
		char *buf = opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ? info :
			    opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES ? error : NULL;
		size_t size = opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ? info_size : error_size;
		int is_log = (opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES) == (r == CUDA_SUCCESS);

		if (buf && size) {
			snprintf(buf, size, "%s", is_log ? msg : "");
			vals[i] = (void *)(uintptr_t)(strlen(buf) + 1);
		} else if (opts[i] == CU_JIT_WALL_TIME) {
			memcpy(&vals[i], &wall_ms, sizeof(wall_ms));
		}
	}
	return fake__leave(r);
}

CUresult fake_cuModuleUnload(CUmodule m)
{
	return fake__release(E_cuModuleUnload, K_MODULE, m);
}

/* The kernel behind handle f and its module, or NULL. */
static struct entry_fn *find_fn(CUfunction f, struct object **mod)
{
	for (struct object *o = fake__objects; o; o = o->next)
		if (o->kind == K_MODULE && (uintptr_t)f >= (uintptr_t)o->fn && (uintptr_t)f < (uintptr_t)(o->fn + o->nfn)) {
			*mod = o;
			return &o->fn[((uintptr_t)f - (uintptr_t)o->fn) / sizeof(o->fn[0])];
		}
	return NULL;
}

#define NEED_FN(call, f, fn, mod)                                       \
	do {                                                            \
		if (!((fn) = find_fn((f), &(mod)))) {                   \
			fake__bug("%s of %p, which is not a kernel of a live module", call, (void *)(f)); \
			return fake__leave(CUDA_ERROR_INVALID_HANDLE);  \
		}                                                       \
		if (fake__fault_of((mod)->dev) != CUDA_SUCCESS)         \
			return fake__leave(fake__fault_of((mod)->dev)); \
	} while (0)

CUresult fake_cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	struct object *o;

	BEGIN(cuModuleGetFunction);
	if (!(o = fake__find(K_MODULE, (uintptr_t)m))) {
		fake__bug("cuModuleGetFunction in %p, which is not a live module", (void *)m);
		return fake__leave(CUDA_ERROR_INVALID_HANDLE);
	}
	if (fake__fault_of(o->dev) != CUDA_SUCCESS)
		return fake__leave(fake__fault_of(o->dev));
	for (int i = 0; i < o->nfn; i++)
		if (!strcmp(o->fn[i].name, name)) {
			*f = (CUfunction)&o->fn[i];
			return fake__leave(CUDA_SUCCESS);
		}
	return fake__leave(CUDA_ERROR_NOT_FOUND);
}

CUresult fake_cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f)
{
	struct entry_fn *fn;
	struct object *mod;

	BEGIN(cuFuncGetAttribute);
	NEED_FN("cuFuncGetAttribute", f, fn, mod);
	switch (a) {
	case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = REGS_PER_KERNEL; break;
	case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *v = 0; break;
	case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *v = 0; break;
	case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *v = 0; break;
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = fn->max_threads; break;
	case CU_FUNC_ATTRIBUTE_PTX_VERSION: *v = mod->ptx_version; break;
	case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *v = 90; break;
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = fn->max_dyn_smem; break;
	default: return fake__leave(CUDA_ERROR_INVALID_VALUE);
	}
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v)
{
	struct entry_fn *fn;
	struct object *mod;

	BEGIN(cuFuncSetAttribute);
	NEED_FN("cuFuncSetAttribute", f, fn, mod);
	if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
		if (v < 0 || v > SMEM_OPTIN)
			return fake__leave(CUDA_ERROR_INVALID_VALUE);
		fn->max_dyn_smem = v;
	}
	return fake__leave(CUDA_SUCCESS);
}

/* CTAs of block threads and dyn bytes of dynamic shared memory that fit on one SM at once. */
static int ctas_per_sm(const struct entry_fn *fn, int block, size_t dyn)
{
	int warps = (block + 31) / 32, n = 32;

	if (block < 1 || block > fn->max_threads || dyn > (size_t)fn->max_dyn_smem)
		return 0;
	if (2048 / (warps * 32) < n)
		n = 2048 / (warps * 32);
	if (65536 / (warps * 32 * REGS_PER_KERNEL) < n)
		n = 65536 / (warps * 32 * REGS_PER_KERNEL);
	if ((int)(SMEM_PER_SM / (dyn + 1024)) < n)
		n = (int)(SMEM_PER_SM / (dyn + 1024));
	return n;
}

CUresult fake_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int block, size_t dyn)
{
	struct entry_fn *fn;
	struct object *mod;

	BEGIN(cuOccupancyMaxActiveBlocksPerMultiprocessor);
	NEED_FN("cuOccupancyMaxActiveBlocksPerMultiprocessor", f, fn, mod);
	*n = ctas_per_sm(fn, block, dyn);
	return fake__leave(CUDA_SUCCESS);
}

/* The cluster size a launch configuration asks for (1 without the attribute). */
static unsigned cluster_of(const CUlaunchConfig *cfg)
{
	for (unsigned i = 0; i < cfg->numAttrs; i++)
		if (cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
			return cfg->attrs[i].value.clusterDim.x * cfg->attrs[i].value.clusterDim.y *
			       cfg->attrs[i].value.clusterDim.z;
	return 1;
}

CUresult fake_cuOccupancyMaxActiveClusters(int *n, CUfunction f, const CUlaunchConfig *cfg)
{
	struct entry_fn *fn;
	struct object *mod;
	unsigned cluster;
	int per_sm;

	BEGIN(cuOccupancyMaxActiveClusters);
	NEED_FN("cuOccupancyMaxActiveClusters", f, fn, mod);
	if (!cfg || (cfg->numAttrs && !cfg->attrs))
		return fake__leave(CUDA_ERROR_INVALID_VALUE);
	cluster = cluster_of(cfg);
	per_sm = ctas_per_sm(fn, (int)(cfg->blockDimX * cfg->blockDimY * cfg->blockDimZ), cfg->sharedMemBytes);
	/* 8 GPCs of 16 SMs; a cluster's CTAs share one GPC */
	*n = cluster < 1 || cluster > 8 ? 0 : 8 * (16 * per_sm / (int)cluster);
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra)
{
	struct entry_fn *fn;
	struct object *mod;
	struct context *c;
	unsigned cluster;
	CUresult r;

	BEGIN(cuLaunchKernelEx);
	if ((r = fake__need_context("cuLaunchKernelEx", &c)) != CUDA_SUCCESS)
		return fake__leave(r);
	if (!cfg || (cfg->numAttrs && !cfg->attrs))
		return fake__leave(CUDA_ERROR_INVALID_VALUE);
	if ((r = fake__check_stream("cuLaunchKernelEx", c, cfg->hStream)) != CUDA_SUCCESS)
		return fake__leave(r);
	NEED_FN("cuLaunchKernelEx", f, fn, mod);
	if (mod->dev != c->dev) {
		fake__bug("cuLaunchKernelEx of kernel %s of device %d in the context of device %d", fn->name, mod->dev,
			  c->dev);
		return fake__leave(CUDA_ERROR_INVALID_HANDLE);
	}
	cluster = cluster_of(cfg);
	if (!cfg->gridDimX || !cfg->gridDimY || !cfg->gridDimZ || !cfg->blockDimX || !cfg->blockDimY ||
	    !cfg->blockDimZ || cfg->blockDimX * cfg->blockDimY * cfg->blockDimZ > (unsigned)fn->max_threads ||
	    cfg->sharedMemBytes > (unsigned)fn->max_dyn_smem || cfg->gridDimX % cluster || (!params && !extra))
		return fake__leave(CUDA_ERROR_INVALID_VALUE);
	if (!strcmp(fn->name, "wsn_stream_hold")) /* its one parameter: nanoseconds */
		fake__advance((double)*(const uint64_t *)params[0]);
	else
		fake__advance(OP_NS);
	if (++fake__launches == fake__sticky_after) {
		c->fault = fake__sticky_code;
		fprintf(stderr, "fake-cuda: launch %ld (%s) faults device %d with %s\n", fake__launches, fn->name, c->dev,
			fake__error_name(fake__sticky_code));
	}
	return fake__leave(CUDA_SUCCESS);
}

