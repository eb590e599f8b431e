/* SPDX-License-Identifier: MIT */
/* runtime/cuda/module.c: PTX JIT through the driver with its logs, kernel attributes, occupancy and launches. */
#include "cuda/cuda_internal.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_BYTES (64u << 10)
#define DEFAULT_SMEM_LIMIT (48u << 10) /* dynamic + static shared memory a kernel gets without opting in */

static char *log_copy(const char *buf, size_t used)
{
	size_t n = strnlen(buf, used < LOG_BYTES ? used : LOG_BYTES);
	char *s = malloc(n + 1);

	if (s) {
		memcpy(s, buf, n);
		s[n] = '\0';
	}
	return s;
}

int wsn__cu_module_load(struct wsn__cu_module *m, const char *ptx, const char *what)
{
	char *info = NULL, *error = NULL;
	float driver_ms = -1.0f;
	CUjit_option opts[6];
	void *vals[6];
	double t0;
	CUresult r;
	int err = 0;

	memset(m, 0, sizeof(*m));
	if (!wsn__cu.cuModuleLoadDataEx)
		return wsn__error(WSN_ENODRIVER, "JIT of %s: the NVIDIA driver is not loaded", what);
	m->ptx_bytes = strlen(ptx);
	info = calloc(1, LOG_BYTES);
	error = calloc(1, LOG_BYTES);
	if (!info || !error) {
		err = wsn__error(WSN_ENOMEM, "JIT of %s: out of memory for the logs", what);
		goto out;
	}
	opts[0] = CU_JIT_INFO_LOG_BUFFER;
	vals[0] = info;
	opts[1] = CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES;
	vals[1] = (void *)(uintptr_t)LOG_BYTES;
	opts[2] = CU_JIT_ERROR_LOG_BUFFER;
	vals[2] = error;
	opts[3] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
	vals[3] = (void *)(uintptr_t)LOG_BYTES;
	/*
	 * Documented as "overwrites the option value" with a float (ms); some callers pass a float
	 * pointer instead. Passing one keeps either reading safe: the slot changed means the value
	 * is in the slot, else it was written through the pointer (or not at all: stays -1).
	 */
	opts[4] = CU_JIT_WALL_TIME;
	vals[4] = &driver_ms;
	opts[5] = CU_JIT_LOG_VERBOSE; /* registers, spills and shared memory per kernel in the info log */
	vals[5] = (void *)(uintptr_t)1;
	t0 = wsn__now();
	r = wsn__cu.cuModuleLoadDataEx(&m->mod, ptx, (unsigned)WSN_ARRAY_SIZE(opts), opts, vals);
	m->jit_ms = (wsn__now() - t0) * 1e3;
	if (vals[4] != (void *)&driver_ms)
		memcpy(&m->jit_driver_ms, &vals[4], sizeof(m->jit_driver_ms)); /* little-endian: the low bytes */
	else
		m->jit_driver_ms = driver_ms;
	/* the size slots now hold the bytes written, terminator included */
	m->info_log = log_copy(info, (size_t)(uintptr_t)vals[1]);
	m->error_log = log_copy(error, (size_t)(uintptr_t)vals[3]);
	if (!m->info_log || !m->error_log) {
		if (r == CUDA_SUCCESS)
			wsn__cu.cuModuleUnload(m->mod);
		m->mod = NULL;
		err = wsn__error(WSN_ENOMEM, "JIT of %s: out of memory for the logs", what);
		goto out;
	}
	if (r != CUDA_SUCCESS) {
		m->mod = NULL;
		err = wsn__cu_result(r, "cuModuleLoadDataEx", "JIT-compiling %s (%zu bytes of PTX)%s%s", what,
				     m->ptx_bytes, m->error_log[0] ? "; JIT log: " : "; the JIT left no log",
				     m->error_log);
		if (err != WSN_ENOMEM)
			err = WSN_EJIT;
	}
out:
	free(info);
	free(error);
	return err;
}

void wsn__cu_module_unload(struct wsn__cu_module *m)
{
	if (!m)
		return;
	if (m->mod && wsn__cu.cuModuleUnload)
		wsn__cu.cuModuleUnload(m->mod);
	m->mod = NULL;
	free(m->info_log);
	free(m->error_log);
	m->info_log = m->error_log = NULL;
}

static int func_attr(const struct wsn__cu_kernel *k, CUfunction_attribute a, const char *what, int *out)
{
	*out = 0;
	return WSN_CU(cuFuncGetAttribute, (out, a, k->fn), "reading %s of kernel %s", what, k->name);
}

int wsn__cu_kernel_get(const struct wsn__cu_module *m, const char *name, unsigned block, unsigned dyn_smem,
		       struct wsn__cu_kernel *k)
{
	int err, n = 0;

	memset(k, 0, sizeof(*k));
	snprintf(k->name, sizeof(k->name), "%s", name);
	k->block = block;
	k->dyn_smem = dyn_smem;
	if ((err = WSN_CU(cuModuleGetFunction, (&k->fn, m->mod, name), "looking up kernel %s in its module", name)) < 0)
		return err;
	if ((err = func_attr(k, CU_FUNC_ATTRIBUTE_NUM_REGS, "the register count", &k->regs)) < 0 ||
	    (err = func_attr(k, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "the local memory size", &k->local_bytes)) < 0 ||
	    (err = func_attr(k, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "the static shared memory", &k->static_smem)) < 0 ||
	    (err = func_attr(k, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, "the constant memory", &k->const_bytes)) < 0 ||
	    (err = func_attr(k, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "the thread limit", &k->max_threads)) < 0 ||
	    (err = func_attr(k, CU_FUNC_ATTRIBUTE_PTX_VERSION, "the PTX version", &k->ptx_version)) < 0 ||
	    (err = func_attr(k, CU_FUNC_ATTRIBUTE_BINARY_VERSION, "the binary version", &k->binary_version)) < 0)
		return err;
	if (block < 1 || (int)block > k->max_threads)
		return wsn__error(WSN_ELAUNCH,
				  "kernel %s cannot run %u threads per CTA: with %d registers per thread it allows at most %d",
				  name, block, k->regs, k->max_threads);
	if ((size_t)k->static_smem + dyn_smem > DEFAULT_SMEM_LIMIT &&
	    (err = WSN_CU(cuFuncSetAttribute, (k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)dyn_smem),
			  "raising the dynamic shared memory of kernel %s to %u bytes (%d static)", name, dyn_smem,
			  k->static_smem)) < 0)
		return err;
	if ((err = WSN_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor, (&n, k->fn, (int)block, (size_t)dyn_smem),
			  "measuring the occupancy of kernel %s", name)) < 0)
		return err;
	if (n < 1)
		return wsn__error(WSN_ELAUNCH,
				  "kernel %s cannot be resident on an SM: %u threads x %d registers, %d + %u bytes of shared memory",
				  name, block, k->regs, k->static_smem, dyn_smem);
	k->ctas_per_sm = n;
	return 0;
}

/* cfg for grid CTAs of k on stream s, with the cluster-dimension attribute in attrs[0] when cluster > 1;
 * returns the attributes used (cfg.attrs/numAttrs are left to the caller). */
static unsigned launch_config(const struct wsn__cu_kernel *k, unsigned grid, unsigned cluster, CUstream s,
			      CUlaunchAttribute *attrs, CUlaunchConfig *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->gridDimX = grid;
	cfg->gridDimY = cfg->gridDimZ = 1;
	cfg->blockDimX = k->block;
	cfg->blockDimY = cfg->blockDimZ = 1;
	cfg->sharedMemBytes = k->dyn_smem;
	cfg->hStream = s;
	if (cluster < 2)
		return 0;
	memset(&attrs[0], 0, sizeof(attrs[0]));
	attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
	attrs[0].value.clusterDim.x = cluster;
	attrs[0].value.clusterDim.y = attrs[0].value.clusterDim.z = 1;
	return 1;
}

int wsn__cu_max_clusters(const struct wsn__cu_kernel *k, unsigned cluster, int *n)
{
	CUlaunchAttribute a;
	CUlaunchConfig cfg;

	*n = 0;
	cfg.numAttrs = launch_config(k, cluster, cluster, NULL, &a, &cfg);
	cfg.attrs = &a;
	return WSN_CU(cuOccupancyMaxActiveClusters, (n, k->fn, &cfg), "measuring how many clusters of %u CTAs of kernel %s "
		      "fit at once", cluster, k->name);
}

int wsn__cu_pdl_allowed(void)
{
	const char *e = getenv("WSNORM_PDL");

	return !(e && !strcmp(e, "0"));
}

int wsn__cu_launch(const struct wsn__cu_kernel *k, unsigned grid, unsigned cluster, CUstream s, void **params)
{
	CUlaunchAttribute attrs[2];
	CUlaunchConfig cfg;
	unsigned n;

	if (grid < 1 || grid > 0x7fffffffu)
		return wsn__error(WSN_EINVAL, "kernel %s: grid of %u CTAs out of range", k->name, grid);
	if (cluster > 1 && grid % cluster)
		return wsn__error(WSN_EINVAL, "kernel %s: grid of %u CTAs is not a multiple of the cluster size %u",
				  k->name, grid, cluster);
	n = launch_config(k, grid, cluster, s, attrs, &cfg);
	if (k->pdl) {
		/* the kernel may start while the previous one drains; it waits (griddepcontrol.wait)
		 * before its first global access */
		memset(&attrs[n], 0, sizeof(attrs[n]));
		attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
		attrs[n].value.programmaticStreamSerializationAllowed = 1;
		n++;
	}
	cfg.attrs = n ? attrs : NULL;
	cfg.numAttrs = n;
	return wsn__cu_result_as(WSN_ELAUNCH, wsn__cu.cuLaunchKernelEx(&cfg, k->fn, params, NULL), "cuLaunchKernelEx",
				 "launching kernel %s: %u CTAs x %u threads, %u bytes of dynamic shared memory%s%s", k->name,
				 grid, k->block, k->dyn_smem, cluster > 1 ? ", in clusters" : "",
				 k->pdl ? ", dependent launch" : "");
}
